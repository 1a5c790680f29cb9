"""Argument checks shared by every public entry point of the three packages (fvsym, fvnum, bridges):
one-line ValueErrors naming the bad value. Standard library only (sympy inside the functions that build
sympy numbers).

- numbers: :func:`parse_fraction` (the one number parser: ``1/2``, ``0.3``, ``1e-3``; bounded length
  and exponent, so no input can hang the parser; every float from ``5e-324`` to ``1.8e308`` parses),
  :func:`to_exact` (exact sympy numbers), :func:`check_real` (finite floats in a range), :func:`check_int`,
  :func:`check_choice`, :func:`parse_int_list` (``1,2,3``). Each accepts ints, floats, Fractions, numpy
  and sympy numbers alike; an exact number of more than ``MAX_DIGITS`` digits is refused in the
  project's words (Python's own "Exceeds the limit (4300 digits)" never reaches the user), and so is a
  derived result too long to print (:func:`check_printable`);
- designs: :func:`check_node_list` (heap node numbers of a tree).

The command line's argparse types are in :mod:`fvsym.cli` (:func:`~fvsym.cli.number_arg`,
:func:`~fvsym.cli.int_arg`, built on these checks); the time cap and the memory probes in
:mod:`fvsym.guards.limits`. Every refusal is an :class:`~fvsym.errors.InputError` (a ``ValueError``).
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

from fvsym.errors import InputError

MAX_NUMBER_CHARS = 100
MAX_EXPONENT = 350  # every float (5e-324 .. 1.8e308) parses; an exponent beyond +-350 is no sensible input
MAX_DIGITS = 4000  # an exact number's numerator and denominator (Python prints ints of up to 4300 digits)
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d+))?$")


# --- numbers ----------------------------------------------------------------------------------------
def parse_fraction(text, name: str) -> Fraction:
    """The one number parser: ``"1/2"``, ``"0.3"`` (exactly 3/10), ``"-2"``, ``"1e-3"`` -> Fraction.

    Refuses (one-line ValueError naming ``name`` and the text) anything else, texts longer than
    ``MAX_NUMBER_CHARS`` and decimal exponents beyond ``+-MAX_EXPONENT``."""
    raw = text
    text = str(text).strip()
    if not text or len(text) > MAX_NUMBER_CHARS:
        why = "empty" if not text else f"longer than {MAX_NUMBER_CHARS} characters"
        raise InputError(f"{name} must be a number such as 1/2 or 0.5, got {_short(raw)} ({why})")
    parts = text.split("/")
    if len(parts) > 2:
        raise InputError(f"{name} must be a number such as 1/2 or 0.5, got {_short(raw)}")
    values = []
    for part in parts:
        m = _NUMBER.match(part.strip())
        if m is None:
            raise InputError(f"{name} must be a number such as 1/2 or 0.5, got {_short(raw)}")
        if m.group(1) is not None and abs(int(m.group(1))) > MAX_EXPONENT:
            raise InputError(f"{name} must have a decimal exponent within +-{MAX_EXPONENT}, got {_short(raw)}")
        values.append(Fraction(part.strip()))
    if len(values) == 2:
        if values[1] == 0:
            raise InputError(f"{name} must be a number, got {_short(raw)} (division by zero)")
        return values[0] / values[1]
    return values[0]


def _short(value) -> str:
    """``repr(value)`` cut to about 60 characters; numbers too long to print (Python refuses ints of over
    4300 digits) are described by their size."""
    big = _digits(value)
    if big is not None and big > 60:
        return f"{type(value).__name__} with {big} digits"
    try:
        text = repr(value)
    except ValueError:  # an object holding an int too long to print
        return f"a {type(value).__name__} too long to print"
    return text if len(text) <= 60 else text[:40] + "..." + text[-10:]


def _text(value) -> str:
    """``str(value)`` (``3/2``, not ``Fraction(3, 2)``), cut like :func:`_short` when long."""
    big = _digits(value)
    if big is not None and big > 60:
        return _short(value)
    text = str(value)
    return text if len(text) <= 60 else text[:40] + "..." + text[-10:]


def _digits(value):
    """Decimal digits (about) of the larger of numerator and denominator of an exact number, else None."""
    num = getattr(value, "numerator", None)
    den = getattr(value, "denominator", None)
    if isinstance(value, bool) or not isinstance(num, int) or not isinstance(den, int):
        p, q = getattr(value, "p", None), getattr(value, "q", None)  # sympy Rational
        if not isinstance(p, int) or not isinstance(q, int):
            return None
        num, den = p, q
    return int(max(abs(num), abs(den), 1).bit_length() * 0.30103) + 1


def _check_digits(value, name: str) -> None:
    d = _digits(value)
    if d is not None and d > MAX_DIGITS:
        kind = "an integer" if isinstance(value, int) else f"a {type(value).__name__}"
        raise InputError(f"{name} must be an exact number of at most {MAX_DIGITS} digits in numerator and "
                         f"denominator, got {kind} with {d} digits")


def plain_error(exc) -> str:
    """The message of an error met while reading a file, in the project's words where Python's own would
    leak (its limit of 4300 digits on an int, met by a damaged JSON or TOML number)."""
    text = str(exc)
    if "Exceeds the limit" in text and "digits" in text:
        return "a number of more than 4300 digits"
    return text


def check_printable(expr, what: str, hint: str = "") -> None:
    """Refuse (one-line ValueError) a derived exact result holding a number too long to print in full
    (more than ``MAX_DIGITS`` digits; Python itself stops at 4300), before it is printed."""
    import sympy as sp

    atoms = expr.atoms(sp.Rational) if isinstance(expr, sp.Basic) else ()
    longest = max((_digits(a) or 0 for a in atoms), default=0)
    if longest > MAX_DIGITS:
        raise InputError(f"{what} holds an exact number of about {longest} digits, more than the "
                         f"{MAX_DIGITS} that are printed{hint}")


def _finite_float(value: float, name: str) -> float:
    if value != value or value in (math.inf, -math.inf):
        raise InputError(f"{name} must be finite, got {value!r}")
    return value


# --- kinds of numbers: one rule for floats of every precision ----------------------------------------------
def _kind(value):
    """numpy's ``dtype.kind`` of a numpy scalar or array (``"f"``, ``"i"``, ``"b"``, ...), else None (a torch
    tensor's dtype has no ``kind``: it is read through :func:`_unwrap` first)."""
    return getattr(getattr(value, "dtype", None), "kind", None)


def _unwrap(value, name: str):
    """A 0-d array or tensor as the scalar it holds, duck-typed (no numpy or torch import): a numpy 0-d
    array becomes its numpy scalar, a torch 0-d tensor (or any object with ``.item()`` and ``ndim == 0``)
    becomes a Python number, a float of less than double precision already read by the one rule (a
    Fraction, :func:`float_exact`). Anything with more than one element is a one-line ValueError; other
    values pass unchanged."""
    if isinstance(value, (int, float, str, bytes, Fraction, complex)) or value is None:
        return value
    ndim = getattr(value, "ndim", None)
    if ndim is None or not hasattr(value, "item") or not hasattr(value, "dtype"):
        return value
    if _kind(value) is not None:  # numpy
        if ndim == 0 and type(value).__name__ == "ndarray":
            return value[()]
        if ndim == 0:
            return value
        raise InputError(f"{name} must be a number, got an array of shape {tuple(value.shape)[:4]}")
    if ndim != 0:
        shape = tuple(getattr(value, "shape", ()))[:4]
        raise InputError(f"{name} must be a number, got a {type(value).__name__} of shape {shape}")
    try:
        item = value.item()
    except Exception:  # a tensor on a device, or of a kind with no Python number
        raise InputError(f"{name} must be a number, got {type(value).__name__} {_short(value)}") from None
    if isinstance(item, float) and math.isfinite(item):
        bits = _float_bits(value.dtype)
        if bits is not None and bits < 53:
            return float_exact(item, name, bits=bits)
    return item


def _float_bits(dtype):
    """Significand bits of a float dtype given by name (torch's ``torch.float32``, ``torch.bfloat16``)."""
    text = str(dtype).rsplit(".", 1)[-1]
    return {"float16": 11, "half": 11, "bfloat16": 8, "float32": 24, "float": 24, "float64": 53,
            "double": 53}.get(text)


def _round_to_bits(x: float, bits: int) -> float:
    """``x`` rounded to a float of ``bits`` significand bits (to nearest, ties to even), exponent unbounded."""
    if x == 0 or bits >= 53:
        return x
    m, e = math.frexp(x)  # x = m 2^e, 0.5 <= |m| < 1
    scaled = m * 2.0**bits
    return math.ldexp(float(round(scaled)), e - bits)


def float_exact(value, name: str, bits: int | None = None) -> Fraction:
    """THE rule for floats (``docs/numbers.md``): a float of any kind and precision means the shortest
    decimal that reads back to the same float at its own precision. ``0.1``, ``np.float64(0.1)``,
    ``np.float32(0.1)``, ``torch.tensor(0.1)`` (float32) and ``sp.Float(0.1)`` are all exactly 1/10;
    ``0.5`` in any of them is 1/2. Non-finite floats are a one-line ValueError."""
    import sys

    if bits is not None:  # a Python float holding a lower-precision value (a torch scalar's item())
        x = _finite_float(float(value), name)
        for n in range(1, 18):
            text = f"{x:.{n}g}"
            if _round_to_bits(float(text), bits) == x:
                return Fraction(text)
        return Fraction(repr(x))
    sympy = sys.modules.get("sympy")
    if sympy is not None and isinstance(value, sympy.Float):
        return _sympy_float_exact(value, name)
    if isinstance(value, float):  # also numpy.float64 (a float subclass): its shortest repr
        return Fraction(repr(_finite_float(float(value), name)))
    if _kind(value) == "f":  # numpy float16, float32, longdouble: numpy prints the shortest unique decimal
        text = str(value)
        try:
            out = Fraction(text)
        except ValueError:  # "nan", "inf"
            raise InputError(f"{name} must be finite, got {_short(value)}") from None
        _check_digits(out, name)
        return out
    raise InputError(f"{name} must be a float, got {type(value).__name__} {_short(value)}")


def _sympy_float_exact(value, name: str) -> Fraction:
    """A sympy Float read by the rule: the shortest decimal that reads back to it at its precision."""
    from mpmath import libmp

    mpf, prec = value._mpf_, value._prec
    if mpf in (libmp.fnan, libmp.finf, libmp.fninf):
        raise InputError(f"{name} must be finite, got {_short(value)}")
    if mpf == libmp.fzero:
        return Fraction(0)
    top = libmp.prec_to_dps(prec) + 3
    text = libmp.to_str(mpf, top)
    for n in range(1, top):
        guess = libmp.to_str(mpf, n)
        if libmp.from_str(guess, prec, libmp.round_nearest) == mpf:
            text = guess
            break
    if abs(libmp.mpf_abs(mpf)[2] + libmp.mpf_abs(mpf)[3]) > 14_000:
        raise InputError(f"{name} must be an exact number of at most {MAX_DIGITS} digits in numerator and "
                         f"denominator, got a sympy Float of about 10^{_short(text.split('e')[-1])}")
    out = Fraction(text)
    _check_digits(out, name)
    return out


def to_exact(value, name: str):
    """Parse ``value`` (int, float, Fraction, sympy number, or a string such as "1/2" or "0.3").

    Strings, Fractions and floats become exact sympy Rationals; a float is read by its shortest
    decimal form (``0.3 -> 3/10``, what ``repr`` prints), so exact answers stay exact.
    Sympy expressions (symbols) are returned unchanged; NaN, infinities and complex numbers are refused.
    """
    import sympy as sp

    value = _unwrap(value, name)
    if isinstance(value, sp.Basic):
        if value.is_number and (value.has(sp.nan, sp.zoo, sp.oo, -sp.oo) or value.is_real is False):
            raise InputError(f"{name} must be a finite real number, got {_short(value)}")
        if isinstance(value, sp.Rational):
            _check_digits(value, name)
        if isinstance(value, sp.Float):
            f = float_exact(value, name)
            return sp.Rational(f.numerator, f.denominator)
        if value.has(sp.Float):  # an expression with float coefficients: each read by the same rule
            return value.xreplace({x: to_exact(x, name) for x in value.atoms(sp.Float)})
        return value
    if isinstance(value, bool) or value is None or _kind(value) == "b":
        raise InputError(f"{name} must be a number, got {_short(value)}")
    if isinstance(value, int):
        _check_digits(value, name)
        return sp.Integer(int(value))
    if isinstance(value, Fraction):
        _check_digits(value, name)
        return sp.Rational(value.numerator, value.denominator)
    if isinstance(value, float):  # also numpy.float64, a float subclass (its repr is "np.float64(0.5)")
        return sp.Rational(float_exact(value, name))
    if isinstance(value, str):
        f = parse_fraction(value, name)
        return sp.Rational(f.numerator, f.denominator)
    if isinstance(value, complex):
        raise InputError(f"{name} must be a real number, got {value!r}")
    if hasattr(value, "dtype") and getattr(value, "shape", None) == ():  # numpy scalars
        kind = value.dtype.kind
        if kind in "iu":
            return sp.Integer(int(value))
        if kind == "f":  # float32, float16, longdouble: the shortest decimal at the value's own precision
            f = float_exact(value, name)
            return sp.Rational(f.numerator, f.denominator)
        if kind == "c":
            raise InputError(f"{name} must be a real number, got {_short(value)}")
    raise InputError(f"{name} must be a number, got {type(value).__name__} {_short(value)}")


def check_real(value, name: str, low: float = -math.inf, high: float = math.inf, *, open_low: bool = False,
               open_high: bool = False, shown: str | None = None, float_in_range: bool = True) -> float:
    """A finite float in ``[low, high]`` (ends open with ``open_low``/``open_high``); strings go through
    :func:`parse_fraction` (``"1/2"`` is 0.5). Accepts ints, floats, Fractions, numpy and sympy numbers.
    Exact numbers are compared with the range exactly, and (unless ``float_in_range`` is False, for
    callers that keep the exact number) so is their float: ``1e-400`` lies in (0, 1), its float 0 does not."""
    value = _unwrap(value, name)
    if isinstance(value, bool) or value is None or _kind(value) == "b":
        raise InputError(f"{name} must be a number, got {_short(value)}")
    if isinstance(value, str):
        value = parse_fraction(value, name)
    if isinstance(value, complex) or _kind(value) == "c":
        raise InputError(f"{name} must be a real number, got {_short(value)}")
    exact = None  # ints, Fractions, sympy Rationals and numpy ints, as a Fraction
    if isinstance(value, (int, Fraction)) or getattr(value, "is_Rational", False) is True:
        _check_digits(value, name)
        exact = Fraction(int(value.numerator), int(value.denominator))
    elif _kind(value) in ("i", "u"):
        exact = Fraction(int(value))
    elif _kind(value) == "f" and not isinstance(value, float) and value == value and abs(value) != math.inf:
        exact = float_exact(value, name)  # float32, float16: the rule's decimal (np.float32(0.1) is 0.1)
    try:
        x = float(exact if exact is not None else value)
    except OverflowError:
        raise InputError(f"{name} is too large, got {_short(value)}") from None
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number, got {type(value).__name__} {_short(value)}") from None
    _finite_float(x, name)
    candidates = (x,) if exact is None else (exact, x) if float_in_range else (exact,)
    for v in candidates:  # the number itself, then its float
        below = v < low or (open_low and v == low)
        above = v > high or (open_high and v == high)
        if below or above:
            break
    if below or above:
        got = shown or (f"{x:g}" if exact is None or v is exact else _text(value))
        if v is not exact and exact is not None:
            got += f" (as a float: {x:g})"
        if math.isfinite(low) and math.isfinite(high) and high - low <= 1e6:
            lo = ("(" if open_low else "[") + f"{low:g}"
            hi = f"{high:g}" + (")" if open_high else "]")
            raise InputError(f"{name} must lie in {lo}, {hi}, got {got}")
        if below:
            raise InputError(f"{name} must be {'>' if open_low else '>='} {low:g}, got {got}")
        raise InputError(f"{name} must be {'<' if open_high else '<='} {high:g}, got {got}")
    return x


def check_alpha(alpha):
    """Exact ``alpha`` in (0, 1), or a positive Symbol."""
    import sympy as sp

    a = to_exact(alpha, "alpha")
    if a.is_number:
        if a.is_real is not True or not (0 < a < 1):
            raise InputError(f"alpha must lie in (0, 1), got {_text(alpha)}")
    elif not isinstance(a, sp.Symbol):
        raise InputError(f"alpha must be a number in (0, 1) or a Symbol, got {alpha!r}")
    return a


def check_tau(tau):
    t = to_exact(tau, "tau")
    if t.is_number and not t >= 0:
        raise InputError(f"tau must be >= 0, got {_text(tau)}")
    return t


def check_int(value, name: str, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer in ``[minimum, maximum]``: ints, numpy and sympy integers, and integral floats or
    Fractions (``4.0``, ``np.float32(4)``, ``Fraction(4)``); bools and strings are refused."""
    value = _unwrap(value, name)
    if isinstance(value, (bool, str, bytes)) or _kind(value) == "b":
        raise InputError(f"{name} must be an integer, got {_short(value)}")
    integral = integer_value(value)
    if integral is None and not hasattr(value, "__index__"):
        integral = _integral(value)
    if integral is None:
        raise InputError(f"{name} must be an integer, got {_short(value)}")
    value = integral
    if value < minimum:
        raise InputError(f"{name} must be >= {minimum}, got {_short(value)}")
    if maximum is not None and value > maximum:
        raise InputError(f"{name} must be <= {maximum}, got {_short(value)}")
    return value


def check_seed(seed) -> int:
    """A seed of every stochastic entry point: an integer >= 0 (of any integer type), else a one-line InputError."""
    n = integer_value(seed)
    if n is None or n < 0:
        raise InputError(f"seed must be an integer >= 0, got {_short(seed)}")
    return n


def integer_value(value):
    """``int(value)`` for an integer of any kind (int, numpy or sympy integer, an integral Fraction), else
    None (bools, floats, strings, arrays: each caller decides about those)."""
    if isinstance(value, (bool, str, bytes)) or _kind(value) == "b" or str(getattr(value, "dtype", "")) == "torch.bool":
        return None
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else None
    if hasattr(value, "__index__") and getattr(value, "shape", ()) == ():
        try:
            return int(value.__index__())
        except TypeError:
            return None
    return None


def _integral(value):
    """``value`` as an int when it is a finite number with no fractional part, else None."""
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else None
    if isinstance(value, complex) or (_kind(value) is not None and _kind(value) != "f"):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(x) if math.isfinite(x) and x.is_integer() else None


def check_choice(value, name: str, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"unknown {name} {value!r}; choose one of {', '.join(map(str, choices))}")
    return value


def parse_int_list(text, name: str, minimum: int | None = None, maximum: int | None = None, *,
                   distinct: bool = False) -> list[int]:
    """``"1,2,3"`` -> [1, 2, 3]; an empty item (``1,,2``), a non-integer or a value outside
    ``[minimum, maximum]`` is a one-line ValueError; with ``distinct``, so is a value given twice (``1,1``)."""
    items = str(text).split(",")
    out = []
    for i, item in enumerate(items):
        item = item.strip()
        if not re.fullmatch(r"[+-]?\d{1,19}", item):
            what = "an empty item" if not item else f"item {_short(item)}"
            raise InputError(f"{name} must be comma-separated integers such as 1,2,3, got {_short(text)} ({what})")
        v = int(item)
        if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
            where = (f">= {minimum}" if maximum is None else f"<= {maximum}" if minimum is None
                     else f"in {minimum}..{maximum}")
            raise InputError(f"{name} must list integers {where}, got {v}" + (f" in {_short(text)}" if len(items) > 1
                                                                                else ""))
        if distinct and v in out:
            raise InputError(f"{name} lists {v} twice, got {_short(text)}: give each value once")
        out.append(v)
    return out


# --- designs and readings -------------------------------------------------------------------------------
def check_node_list(values, name: str, maximum: int, minimum: int = 1) -> list[int]:
    """A list of heap node numbers in ``minimum..maximum`` (ints only: no strings, floats or bools)."""
    out = []
    for v in values:
        n = integer_value(v)
        if n is None and not isinstance(v, (bool, str, bytes)):
            n = _integral(v)
        if n is None:
            raise InputError(f"{name} must list node numbers (integers), got {_short(v)}")
        v = n
        if not minimum <= v <= maximum:
            raise InputError(f"{name} node {_short(v)} is outside the tree (nodes {minimum}..{maximum})")
        out.append(v)
    return out


def parse_number_list(text, name: str) -> list[str]:
    """``"1,1/2,0.3"`` -> ``["1", "1/2", "0.3"]`` (each item read exactly by ``parse_fraction``); an empty
    item or a non-number is a one-line ValueError naming ``name``."""
    items = [item.strip() for item in str(text).split(",")]
    for item in items:
        if not item:
            raise InputError(f"{name} must be comma-separated numbers such as 1,1/2,1/4, got {str(text)[:60]!r} "
                             "(an empty item)")
        parse_fraction(item, name)
    return items
