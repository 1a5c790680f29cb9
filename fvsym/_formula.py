"""`Formula`: one derived quantity, several views (sympy, numpy, numba, LaTeX)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import sympy as sp


@dataclass(frozen=True)
class Formula:
    """A derived quantity of the theory.

    Attributes
    ----------
    name : short identifier, e.g. ``"path_loss"``.
    expr : the sympy expression (simplify it, take series, substitute).
    params : the free symbols, in the order the numeric views take them.
    source : which section of THEORY.md (or derivation step) it implements.

    Views: ``f(*values)`` evaluates with numpy (cached lambdify), ``f.numba`` is an
    njit-compiled scalar function usable inside kernels, ``f.latex`` / ``_repr_latex_``,
    ``f.exact(**values)`` substitutes exactly and returns a sympy number (or expression).
    """

    name: str
    expr: sp.Expr
    params: tuple[sp.Symbol, ...]
    source: str
    doc: str = field(default="", compare=False)

    def __post_init__(self):
        extra = self.expr.free_symbols - set(self.params)
        if extra:
            raise ValueError(f"formula {self.name}: free symbols {sorted(map(str, extra))} not in params")

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
                raise ValueError(f"formula {self.name}: unknown parameters {sorted(unknown)}; has {names}")
            args = list(args) + [kwargs[n] for n in names[len(args):]]
        if len(args) != len(self.params):
            raise ValueError(
                f"formula {self.name} takes {len(self.params)} values {[str(p) for p in self.params]}, "
                f"got {len(args)}"
            )
        return self._numpy(*args)

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
        return f"$\\displaystyle {self.name} = {self.latex}$"

    def __str__(self) -> str:
        return f"{self.name} = {self.expr}"

    def exact(self, **values):
        """Substitute values exactly (strings like "1/2" become Rationals) and simplify."""
        from ._validate import to_exact

        by_name = {str(p): p for p in self.params}
        unknown = set(values) - set(by_name)
        if unknown:
            raise ValueError(f"formula {self.name}: unknown parameters {sorted(unknown)}; has {sorted(by_name)}")
        subs = {by_name[k]: to_exact(v, k) for k, v in values.items()}
        return sp.simplify(self.expr.subs(subs))

    def subs(self, **values) -> "Formula":
        """A new Formula with some parameters fixed exactly."""
        expr = self.exact(**values)
        params = tuple(p for p in self.params if str(p) not in values)
        return Formula(self.name, expr, params, self.source, self.doc)
