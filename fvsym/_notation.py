"""Sympy objects that print the Bellman recursion of docs/theory.md section 3 as a theorist writes it.

They are inert expressions (no evaluation): ``MinOver`` (a minimum over an action set, with its bound
variable), ``Cell`` (the belief after a reading), ``Card`` (the number of atoms of a belief),
``PosteriorVariance`` (the terminal loss ``E_b ||theta - E_b theta||^2``) and ``NormSq``. Each prints
as text (``str``) and LaTeX (``sp.latex``).
"""
from __future__ import annotations

import sympy as sp

_SIGN = {1: "+", -1: "-", 0: "0"}


class MinOver(sp.Expr):
    """``min_{var in domain} expr``: ``var`` is bound (not a free symbol)."""

    def __new__(cls, expr, var, domain):
        return sp.Expr.__new__(cls, sp.sympify(expr), var, domain)

    @property
    def free_symbols(self):
        expr, var, domain = self.args
        return (expr.free_symbols - {var}) | domain.free_symbols

    def _sympystr(self, printer):
        expr, var, domain = self.args
        where = f"{{{domain.inf}..{domain.sup}}}" if isinstance(domain, sp.Range) else printer._print(domain)
        return f"min_{{{printer._print(var)} in {where}}}({printer._print(expr)})"

    def _latex(self, printer):
        expr, var, domain = self.args
        return rf"\min_{{{printer._print(var)} \in {printer._print(domain)}}} \left[{printer._print(expr)}\right]"


class Cell(sp.Expr):
    """``S_W^r``: the atoms of belief ``S`` whose readings of the nodes ``W`` are the signs ``r``."""

    def __new__(cls, belief, action, reading):
        return sp.Expr.__new__(cls, belief, action, sp.Tuple(*reading))

    def _signs(self) -> str:
        return "".join(_SIGN[int(x)] for x in self.args[2])

    def _sympystr(self, printer):
        belief, action, _ = self.args
        return f"{printer._print(belief)}[{printer._print(action)}: {self._signs()}]"

    def _latex(self, printer):
        belief, action, _ = self.args
        return rf"{printer._print(belief)}_{{{printer._print(action)}}}^{{{self._signs()}}}"


class Card(sp.Expr):
    """``|S|``: the number of atoms of a belief (positive)."""

    is_positive = True

    def __new__(cls, belief):
        return sp.Expr.__new__(cls, belief)

    def _sympystr(self, printer):
        return f"|{printer._print(self.args[0])}|"

    def _latex(self, printer):
        return rf"\left|{printer._print(self.args[0])}\right|"


class PosteriorVariance(sp.Expr):
    """``E_S ||theta - E_S theta||^2 = (1/|S|) sum_{s in S} ||theta_s - mu_S||^2`` (uniform belief)."""

    def __new__(cls, belief):
        return sp.Expr.__new__(cls, belief)

    def _sympystr(self, printer):
        S = printer._print(self.args[0])
        return f"(1/|{S}|) sum_{{s in {S}}} ||theta_s - mu_{S}||^2"

    def _latex(self, printer):
        S = printer._print(self.args[0])
        return rf"\frac{{1}}{{|{S}|}} \sum_{{s \in {S}}} \left\|\theta_s - \mu_{{{S}}}\right\|^2"


class NormSq(sp.Expr):
    """``||v||^2`` of a vector expression (inert)."""

    is_nonnegative = True

    def __new__(cls, vector):
        return sp.Expr.__new__(cls, sp.sympify(vector))

    def _sympystr(self, printer):
        return f"||{printer._print(self.args[0])}||^2"

    def _latex(self, printer):
        return rf"\left\|{printer._print(self.args[0])}\right\|^2"


class Reweighted(sp.Expr):
    """``b * p_n(phi)``: the belief ``b`` (weights over the leaves) times the likelihood of reading ``phi``
    at node ``n``, leaf by leaf (the unnormalised Bayes update of the noisy recursion)."""

    def __new__(cls, belief, node, reading):
        return sp.Expr.__new__(cls, belief, node, reading)

    def _sympystr(self, printer):
        b, n, phi = (printer._print(a) for a in self.args)
        return f"{b}*p_{n}({phi})"

    def _latex(self, printer):
        b, n, phi = (printer._print(a) for a in self.args)
        return rf"{b} \odot p_{{{n}}}({phi})"


__all__ = ["Card", "Cell", "MinOver", "NormSq", "PosteriorVariance", "Reweighted"]
