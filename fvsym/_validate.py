"""Argument checks shared by every public entry point: one-line ValueErrors naming the bad value."""
from __future__ import annotations

from fractions import Fraction

import sympy as sp


def to_exact(value, name: str):
    """Parse ``value`` (int, float, Fraction, sympy number, or a string such as "1/2" or "0.3").

    Strings, Fractions and floats become exact sympy Rationals; a float is read by its shortest
    decimal form (``0.3 -> 3/10``, what ``repr`` prints), so exact answers stay exact.
    Sympy expressions (symbols) are returned unchanged.
    """
    if isinstance(value, sp.Basic):
        return value
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if isinstance(value, int):
        return sp.Integer(value)
    if isinstance(value, Fraction):
        return sp.Rational(value.numerator, value.denominator)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{name} must be finite, got {value!r}")
        return sp.Rational(Fraction(repr(value)))
    if isinstance(value, str):
        text = value.strip()
        try:
            return sp.Rational(Fraction(text))
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"{name} must be a number such as 1/2 or 0.5, got {value!r}") from None
    try:
        return sp.sympify(value)
    except (sp.SympifyError, TypeError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def check_alpha(alpha):
    """Exact ``alpha`` in (0, 1), or a positive Symbol."""
    a = to_exact(alpha, "alpha")
    if a.is_number:
        if not (0 < a < 1):
            raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    elif not isinstance(a, sp.Symbol):
        raise ValueError(f"alpha must be a number in (0, 1) or a Symbol, got {alpha!r}")
    return a


def check_tau(tau):
    t = to_exact(tau, "tau")
    if t.is_number and t < 0:
        raise ValueError(f"tau must be >= 0, got {tau}")
    return t


def check_int(value, name: str, minimum: int = 0, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, sp.Integer)) and not (
        hasattr(value, "__index__")
    ):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_choice(value: str, name: str, choices) -> str:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(map(str, choices))}")
    return value
