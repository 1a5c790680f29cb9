"""`Formula`: one derived quantity, several views (sympy, numpy, numba, LaTeX)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import sympy as sp
from sympy.logic.boolalg import BooleanFunction


from fvsym.errors import DomainError, InputError, reworded  # DomainError: raised here; defined with the other typed errors


@dataclass(frozen=True)
class Formula:
    """A derived quantity of the theory: a sympy expression with its parameters, their domain and the
    section of docs/theory.md it implements.

    **Views.** `f.expr` is the sympy expression; `f(*values)` evaluates it with numpy (cached lambdify,
    broadcasting; by position in `params` order or by name); `f.exact(**values)` substitutes exactly and
    returns a sympy number; `f.subs(**values)` fixes some parameters and returns a Formula; `f.numba` is an
    njit-compiled scalar function for kernels (unchecked); `f.latex` and `_repr_latex_` (a notebook shows
    the formula); `f.to_dict()`.

    **Domain.** Every param ranges over `fvsym._symbols.DOMAINS` (`0 < alpha < 1`, `tau >= 0`, integers
    `K >= 1`, `B >= 0`, ...) and the `constraints` must hold. `f(...)`, `f.exact` and `f.subs` refuse values
    outside with a one-line ValueError naming them, and name every missing parameter; `f.domain` and
    `f.conditions` show the domain.

    **Arithmetic.** ``f + g``, ``f - g``, ``f * g``, ``f / g``, ``f ** n``, ``-f`` and the same with numbers
    (``1 - f``, ``f / 2``) give a Formula whose params are both formulas' and whose domain is the
    intersection of both (the constraints of both; a division also needs its divisor non-zero).

    **In a REPL, use the Formula's verbs rather than sympy's on `f.expr`** (`help(Formula)` says it; the
    tutorial "Derive and take limits in a REPL" shows each trap):

    - limits: `f.limit("K", sp.oo)`. `sp.limit(f.expr, K, sp.oo)` raises sympy's own
      `NotImplementedError: Result depends on the sign of sign(log(alpha))`: a sympy symbol can be
      assumed `alpha > 0` but not `alpha < 1` (its assumptions have no upper bounds). `f.limit` takes
      the limit under the domain, writing `alpha = exp(-c)` with `c > 0`.
    - substitution: `f.subs(K=6)` or `f.symbols["K"]`. The symbols carry assumptions (`K` is a positive
      integer), so `f.expr.subs(sp.Symbol("K"), 6)` matches nothing and silently returns `f.expr`.
    - series: `f.subs(K=4, B=2).series("alpha", 0, 4)`. `sp.series(f.expr, alpha, 0, 4)` is wrong while an
      exponent is symbolic (`alpha**B` is not `O(alpha**4)` for `B < 4`); `f.series` refuses that case.
    """

    name: str
    """Short identifier, e.g. `"path_loss"`."""
    expr: sp.Expr
    """The sympy expression (for limits, substitution and series use `limit`, `subs`, `series`)."""
    params: tuple[sp.Symbol, ...]
    """The free symbols, in the order the numeric views take them; by name: `symbols`."""
    source: str
    """Which section of docs/theory.md (or derivation step) it implements."""
    doc: str = field(default="", compare=False)
    """A sentence on what the quantity is, where the deriving function gives one."""
    constraints: tuple = ()
    """Relations among the params that the formula needs besides each symbol's own domain, e.g.
    `(B <= K,)` for the path strategy."""
    pieces: tuple = field(default=(), compare=False)
    """For an optimum that is piecewise in `alpha`: its pieces with their policies
    (`fvsym.bellman.AlphaPiece`); empty otherwise."""

    def __post_init__(self):
        extra = self.expr.free_symbols - set(self.params)
        if extra:
            raise InputError(f"formula {self.name}: free symbols {sorted(map(str, extra))} not in params")
        object.__setattr__(self, "constraints", tuple(sp.sympify(c) for c in self.constraints))

    # --- symbols ------------------------------------------------------------------------------
    @property
    def symbols(self) -> dict:
        """The params by name: ``f.symbols["K"]`` is the Symbol ``K`` with its assumptions."""
        return {str(p): p for p in self.params}

    def _param(self, symbol) -> sp.Symbol:
        found = next((p for p in self.params if p == symbol or str(p) == str(symbol)), None)
        if found is None:
            raise InputError(f"formula {self.name}: no parameter {symbol!r}; has {[str(p) for p in self.params]}")
        return found

    # --- domain ------------------------------------------------------------------------------
    @property
    def domain(self) -> dict:
        """Each param's set of allowed values (``sp.Reals`` for a symbol of no known domain)."""
        from fvsym._symbols import DOMAINS

        return {p: DOMAINS.get(p, sp.Reals) for p in self.params}

    @property
    def assumptions(self) -> dict:
        """Each param's sympy assumptions that hold (e.g. ``K``: integer, positive)."""
        keys = ("integer", "positive", "nonnegative", "real")
        return {p: tuple(k for k in keys if p.assumptions0.get(k)) for p in self.params}

    @property
    def conditions(self) -> tuple:
        """The whole domain as sympy conditions: ``Contains(param, set)`` and the constraints."""
        return tuple(sp.Contains(p, d, evaluate=False) for p, d in self.domain.items()) + self.constraints

    def _refuse(self, what: str, given: dict):
        from fvsym._validate import _text

        shown = ", ".join(f"{k}={_text(v)}" for k, v in given.items())
        raise DomainError(f"{self.name}: {what}, got {shown}")

    def check(self, **values) -> dict:
        """Exact values (by param name) checked against the domain; returns ``{Symbol: value}``."""
        from fvsym._validate import to_exact

        by_name = {str(p): p for p in self.params}
        unknown = set(values) - set(by_name)
        if unknown:
            raise InputError(f"formula {self.name}: unknown parameters {sorted(unknown)}; has {sorted(by_name)}")
        subs = {by_name[k]: to_exact(v, k) for k, v in values.items()}
        domain = self.domain
        for symbol, value in subs.items():
            if value.is_number and domain[symbol].contains(value) == sp.false:
                self._refuse(f"{symbol} must lie in {_show_set(domain[symbol])}", {symbol: value})
        for c in self.constraints:
            if c.subs(subs) == sp.false:
                self._refuse(f"needs {c}", {s: v for s, v in subs.items() if s in c.free_symbols})
        return subs

    def _check_numeric(self, args) -> None:
        """Domain check of numeric arguments (scalars or numpy arrays) for ``f(...)``."""
        arrays = [a for a in args if hasattr(a, "shape") and getattr(a, "shape", ())]
        if not arrays:
            self.check(**{str(p): a.item() if hasattr(a, "item") else a for p, a in zip(self.params, args)})
            return
        import numpy as np

        for p, a in zip(self.params, args):
            values = np.unique(np.asarray(a, dtype=float))
            for v in values:
                self.check(**{str(p): float(v)})
        if self.constraints:
            ok = sp.lambdify(self.params, sp.And(*self.constraints), modules="numpy")(*args)
            if not np.all(ok):
                self._refuse(f"needs {' and '.join(map(str, self.constraints))}", {"values": "arrays"})

    def limit(self, symbol, point, direction: str | None = None):
        """``lim_{symbol -> point} expr`` under the domain, e.g. ``path_loss().limit("K", sp.oo)`` is
        ``-alpha**B/(alpha - 1)``. Use it instead of ``sp.limit(f.expr, ...)``, which raises "Result depends
        on the sign of sign(log(alpha))" for a limit in ``K`` or ``B``: sympy cannot assume ``alpha < 1``.
        Here ``alpha`` in (0, 1) is written ``exp(-c)`` with ``c > 0`` for the limit, then mapped back.

        The limit is taken inside the domain: ``point`` must lie in the closure of the symbol's range
        (``alpha -> 0`` and ``alpha -> 1`` are limits at its ends, ``K -> oo`` runs up the integers) and every
        constraint must allow it (``path_loss`` needs ``B <= K``, so ``B -> oo`` at a fixed ``K`` leaves its
        domain); ``direction`` (``"+"`` from above, ``"-"`` from below) defaults to the side inside the
        domain. Otherwise a one-line :class:`DomainError`. A limit sympy cannot take for every value of the
        other parameters is a one-line ValueError asking to fix them first."""
        from fvsym._symbols import alpha

        found = self._param(symbol)
        point, direction = self._check_point(found, point, direction, "limit")
        expr, back = self.expr, {}
        if alpha in expr.free_symbols and found != alpha:
            c = sp.Symbol("c", positive=True)
            expr, back = expr.subs(alpha, sp.exp(-c)), {c: -sp.log(alpha)}
        try:
            value = sp.limit(expr, found, point, direction)
        except (NotImplementedError, ValueError, TypeError) as exc:
            others = sorted(map(str, self.expr.free_symbols - {found}))
            fix = f"; fix {', '.join(others)} first: f.subs({', '.join(o + '=...' for o in others)}).limit(...)" \
                if others else ""
            raise reworded(exc, f"{self.name}.limit({found}, {point}): sympy cannot take this limit"
                             + (" for every value of the other parameters" if others else "")
                             + f" ({str(exc)[:80]}){fix}") from None
        if value.has(sp.Limit, sp.AccumBounds):
            raise InputError(f"{self.name}.limit({found}, {point}): the limit does not exist or sympy cannot "
                             f"evaluate it (got {str(value)[:80]})")
        return sp.simplify(value.subs(back))

    def _check_point(self, found, point, direction, verb: str):
        """``(point, direction)`` of a limit or series of ``found``, checked against the domain."""
        from fvsym._validate import to_exact

        if isinstance(point, str) and point.strip() in ("oo", "+oo", "-oo"):
            point = sp.sympify(point.strip())
        if point in (sp.oo, -sp.oo) or (isinstance(point, float) and math.isinf(point)):
            point = sp.oo if point > 0 else -sp.oo
        else:
            point = to_exact(point, f"the point of {verb}")
            if not point.is_number:
                raise DomainError(f"{self.name}.{verb}({found}, {point}): the point must be a number or oo")
        domain = self.domain[found]
        low, high = domain.inf, domain.sup
        inside = low <= point <= high
        if isinstance(domain, sp.Range) and point.is_finite:
            inside = domain.contains(point) == sp.true
        if not inside:
            raise DomainError(f"{self.name}: {verb} of {found} at {point} is outside its domain: {found} must lie "
                              f"in {_show_set(domain)}")
        if direction is None:
            direction = "-" if point == high and point.is_finite else "+"
        if direction not in ("+", "-", "+-"):
            raise InputError(f"direction must be '+' (from above) or '-' (from below), got {direction!r}")
        if point.is_finite and not isinstance(domain, sp.Range):
            if (point == high and "+" in direction) or (point == low and "-" in direction):
                side = "above" if point == high else "below"
                raise DomainError(f"{self.name}: {verb} of {found} at {point} from {side} leaves its domain: "
                                  f"{found} must lie in {_show_set(domain)}")
        for c in self.constraints:
            if found in c.free_symbols and c.subs(found, point) == sp.false:
                raise DomainError(f"{self.name}: {verb} of {found} at {point} leaves its domain, which needs {c}"
                                  + (" (fix or take the limit of the other symbols first)" if len(c.free_symbols) > 1
                                     else ""))
        return point, direction

    def series(self, symbol, x0=0, n: int = 6):
        """Power series of ``expr`` in ``symbol`` about ``x0`` up to ``O((symbol - x0)**n)`` (sympy's
        ``series``), correct for every value of the other parameters, or refused: where a power of an
        expression that vanishes (or blows up) at ``x0`` has a symbolic exponent (``alpha**B`` at
        ``alpha = 0``), the order of the terms depends on that exponent and no single series holds.
        Fix those parameters first: ``f.subs(B=2, K=4).series("alpha", 0, 4)``."""
        found = self._param(symbol)
        x0, _ = self._check_point(found, x0, None, "series")
        n = int(n)
        if n < 1:
            raise InputError(f"series order n must be >= 1, got {n}")
        bad = set()
        for power in self.expr.atoms(sp.Pow):
            base, exponent = power.as_base_exp()
            free = exponent.free_symbols - {found}
            if found not in base.free_symbols or not free:
                continue
            at = sp.limit(base, found, x0) if x0.is_finite else sp.oo
            if at == 0 or not at.is_finite:
                bad |= free
        if bad:
            names = ", ".join(sorted(map(str, bad)))
            example = ", ".join(f"{b}=..." for b in sorted(map(str, bad)))
            raise InputError(
                f"{self.name}.series({found}, {x0}): the order of its terms in {found} depends on the symbolic "
                f"{names}; fix {'it' if len(bad) == 1 else 'them'} first: f.subs({example}).series(...)"
            )
        return sp.series(self.expr, found, x0, n)

    # --- arithmetic: the domains intersect ------------------------------------------------------------
    def _combine(self, other, op: str, reverse: bool = False) -> "Formula":
        """``self op other`` (``other op self`` when ``reverse``) for a Formula or a number: the params of
        both (``self``'s first), the constraints of both (the intersection of the two domains), a division
        also needing its divisor non-zero. Returns NotImplemented for anything else."""
        if isinstance(other, Formula):
            expr_o, name_o, params_o, cons_o, source_o = other.expr, other.name, other.params, other.constraints, \
                other.source
        else:
            from fvsym._validate import to_exact

            if isinstance(other, (str, bytes)) or other is None:
                return NotImplemented
            try:
                expr_o = to_exact(other, "a number combined with a formula")
            except ValueError:
                return NotImplemented
            if not expr_o.is_number:
                return NotImplemented
            name_o, params_o, cons_o, source_o = sp.sstr(expr_o), (), (), None
        a, b = (expr_o, self.expr) if reverse else (self.expr, expr_o)
        name_a, name_b = (name_o, self.name) if reverse else (self.name, name_o)
        if op == "/" and b == 0:
            raise ZeroDivisionError(f"{name_a} / {name_b}: division by zero")
        expr = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                "**": lambda: a**b}[op]()
        params = tuple(self.params) + tuple(p for p in params_o if p not in self.params)
        constraints = list(self.constraints) + [c for c in cons_o if c not in self.constraints]
        if op == "/" and not b.is_number:
            constraints.append(sp.Ne(b, 0))
        if op == "**" and not (a.is_number or (b.is_number and b.is_integer and b >= 0)):
            constraints.append(sp.Ne(a, 0))
        sources = [self.source] + ([source_o] if source_o and source_o != self.source else [])
        used = tuple(p for p in params if p in expr.free_symbols or any(p in c.free_symbols for c in constraints))
        return Formula(f"({name_a} {op} {name_b})", expr, used, "; ".join(sources), "", tuple(constraints))

    def __add__(self, other):
        return self._combine(other, "+")

    def __radd__(self, other):
        return self._combine(other, "+", reverse=True)

    def __sub__(self, other):
        return self._combine(other, "-")

    def __rsub__(self, other):
        return self._combine(other, "-", reverse=True)

    def __mul__(self, other):
        return self._combine(other, "*")

    def __rmul__(self, other):
        return self._combine(other, "*", reverse=True)

    def __truediv__(self, other):
        return self._combine(other, "/")

    def __rtruediv__(self, other):
        return self._combine(other, "/", reverse=True)

    def __pow__(self, other):
        return self._combine(other, "**")

    def __neg__(self):
        return Formula(f"(-{self.name})", -self.expr, self.params, self.source, self.doc, self.constraints)

    def __pos__(self):
        return self

    # --- views -------------------------------------------------------------------------
    @cached_property
    def _numpy(self):
        return sp.lambdify(self.params, self.expr, modules="numpy")

    def __call__(self, *args, **kwargs):
        """Numeric value (numpy broadcasting). Arguments by position (``params`` order) or name."""
        if kwargs:
            names = [str(p) for p in self.params]
            unknown = set(kwargs) - set(names)
            if unknown:
                raise InputError(f"formula {self.name}: unknown parameters {sorted(unknown)}; has {names}")
            missing = [n for n in names[len(args):] if n not in kwargs]
            if missing:
                raise InputError(f"{self.name} needs {', '.join(missing)} (its parameters: {', '.join(names)})")
            args = list(args) + [kwargs[n] for n in names[len(args):]]
        if len(args) != len(self.params):
            raise InputError(
                f"formula {self.name} takes {len(self.params)} values {[str(p) for p in self.params]}, "
                f"got {len(args)}"
            )
        self._check_numeric(args)
        return self._numpy(*[_plain(a) for a in args])

    @cached_property
    def numba(self):
        """njit-compiled scalar function of ``params`` (imports numba on first use only)."""
        import numba

        fn = sp.lambdify(self.params, self.expr, modules="math")
        return numba.njit(cache=False)(fn)

    @property
    def latex(self) -> str:
        return sp.latex(self.expr)

    def _repr_latex_(self) -> str:
        name = self.name.replace("_", r"\_")
        return f"$\\displaystyle \\mathrm{{{name}}} = {self.latex}$"

    def __str__(self) -> str:
        return f"{self.name} = {self.expr}"

    def __repr__(self) -> str:
        params = ", ".join(map(str, self.params))
        needs = f"; needs {' and '.join(map(str, self.constraints))}" if self.constraints else ""
        pieces = f"; {len(self.pieces)} pieces" if self.pieces else ""
        return f"<Formula {self.name}({params}) = {self.expr}{needs}{pieces}; {self.source}>"

    def to_dict(self) -> dict:
        """JSON-able form: the expression as text and LaTeX, params, constraints, source."""
        out = {"name": self.name, "expr": sp.sstr(self.expr), "latex": self.latex,
               "params": [str(p) for p in self.params], "constraints": [sp.sstr(c) for c in self.constraints],
               "source": self.source}
        if self.pieces:
            out["pieces"] = [p.to_dict() for p in self.pieces]
        return out

    def exact(self, **values):
        """Substitute values exactly (strings like "1/2" become Rationals) and simplify; values
        outside the domain raise a one-line ValueError."""
        subs = self.check(**values)
        return sp.simplify(self.expr.subs(subs))

    def subs(self, **values) -> "Formula":
        """A new Formula with some parameters fixed exactly (the constraints left go with it)."""
        subs = self.check(**values)
        expr = sp.simplify(self.expr.subs(subs))
        params = tuple(p for p in self.params if str(p) not in values)
        constraints = tuple(c.subs(subs) for c in self.constraints)
        constraints = tuple(c for c in constraints if c != sp.true)
        return Formula(self.name, expr, params, self.source, self.doc, constraints)


class IsPowerOfTwo(BooleanFunction):
    """``n`` is a power of 2 (``1, 2, 4, ..``): a constraint for formulas of ``B = 2^j - 1``."""

    @classmethod
    def eval(cls, n):
        if n.is_Integer:
            return sp.true if n > 0 and int(n) & (int(n) - 1) == 0 else sp.false
        if n.is_number:
            return sp.false
        return None

    def _sympystr(self, printer):
        return f"{printer._print(self.args[0])} in {{1, 2, 4, ...}}"

    def _latex(self, printer):
        return rf"{printer._print(self.args[0])} \in \{{1, 2, 4, \dots\}}"

    def _numpycode(self, printer):
        x, np_ = printer._print(self.args[0]), printer._module
        return f"({np_}.exp2({np_}.floor({np_}.log2({x}))) == ({x}))"


def _show_set(s) -> str:
    if isinstance(s, sp.Range):
        return f"the integers >= {s.inf}" if s.sup == sp.oo else f"the integers {s.inf}..{s.sup}"
    if isinstance(s, sp.Interval):
        return ("(" if s.left_open else "[") + f"{s.inf}, {s.sup}" + (")" if s.right_open else "]")
    return str(s)


def _plain(value):
    """A scalar argument of ``Formula.__call__`` as numpy evaluates it: a number given as text ("1/2") is
    parsed by the one number parser; arrays and other numbers pass unchanged."""
    if isinstance(value, str):
        from fvsym._validate import check_real

        return check_real(value, "argument")
    if isinstance(value, sp.Basic) and not value.is_number:
        raise InputError(f"a formula's value needs numbers, got {value}; use .exact(...) or .expr.subs(...) for symbols")
    return value
