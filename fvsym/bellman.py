"""Exact Bellman recursion of docs/theory.md section 3: noiseless coordinate class, tree prior.

A belief is the uniform distribution over a set ``S`` of leaves (a bit mask over leaf indices). Reading
node ``n`` splits ``S`` into the leaves whose path passes ``n`` with ``+``, with ``-``, and those whose
path avoids ``n`` (reading ``0``: informative too). With ``V_l(S)`` the largest expected value of
``sum_C ||sum_{s in C} theta_s||^2 / |C|`` over the final cells ``C`` that ``l`` more layers can reach,
the expected terminal loss of the belief is ``E - V_l(S) / |S|`` and

    V_0(S) = ||sum_{s in S} theta_s||^2 / |S|,    V_l(S) = max_W sum_{cells C of S under W} V_{l-1}(C),

the maximum over ``width`` nodes ``W`` whose reading is not constant on ``S``. ``V`` is memoised on a
canonical form of ``S`` under the tree's automorphisms (swapping the two children of any node).
A last layer of width ``d > 1`` (and the non-adaptive optimum, ``L = 1``, ``d = B``) is a dynamic
programme over the tree that keeps, per subtree, reads spent and size of the "all readings zero" cell,
the Pareto set of (resolved-cells value, squared norm of the zero cell's summed theta).

Arithmetic is exact: with rational ``a_k^2`` every value is an integer in units of
``1 / (lcm(1..2^K) * Q)``; otherwise a vector of integer coefficients of the ``a_k^2``, compared
through a 60-digit evaluation.

For every ``alpha`` at once (``solve_alpha``, ``optimal_nonadaptive_alpha``, behind
``tree_loss(..., alpha=None)``) the same programme runs on sets of polynomials in ``alpha`` (pruned
with certified comparisons, ``_envelope``); the exact envelope at the root gives a ``Piecewise``
with algebraic breakpoints and a policy per piece. ``recursion`` writes the recursion as sympy
equations and ``unroll`` expands it for one small tree (:mod:`fvsym.bellman_equations`).

Modules: this one (the public solvers and their results), :mod:`fvsym.policy` (the decision tree and
``BellmanSolution``), :mod:`fvsym._bellman_dp` (the exact programme), :mod:`fvsym.bellman_equations`
(the recursion as equations).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from fvsym import _envelope, _symbols
from fvsym._bellman_dp import (
    MAX_ALPHA_DEPTH, _AlphaSolver, _alpha_solver, _check_alpha_depth, _check_numeric, _solver,
)
from fvsym._validate import _short, check_int
from fvsym.bellman_equations import Recursion, noisy_recursion, recursion, recursion_latex, unroll, unroll_cost, unrolled_size
from fvsym.policy import REPR_LINES, BellmanSolution, PolicyNode
from fvsym.priors import TreePrior, squared_scales
from fvsym.errors import InputError


# --- public API ------------------------------------------------------------------------------------
def solve(prior: TreePrior, layers: int, width: int) -> BellmanSolution:
    """Exact optimal loss and policy with ``layers`` layers of ``width`` coordinate readings each
    (noiseless, tree prior with numeric ``alpha`` or scales). ``layers * width = 0`` reads nothing:
    the loss is ``E||theta||^2`` and the policy ``None``."""
    prior = _check_numeric(prior)
    layers = check_int(layers, "layers", minimum=0)
    width = check_int(width, "width", minimum=0)
    if layers * width > prior.n_nodes:
        raise InputError(f"budget layers * width must be <= D = {prior.n_nodes}, got {layers * width}")
    if layers * width == 0:
        loss = sp.expand(sum(squared_scales(prior)))
        return BellmanSolution(loss=loss, policy=None, layers=layers, width=width, n_states=0)
    solver = _solver(prior, width)
    solver.memo = {}  # n_states counts this solve's states; the terminal values stay cached
    S = solver.full
    value = solver.value(S, layers)
    policy = solver.policy(S, layers)
    return BellmanSolution(
        loss=solver.loss(S, value), policy=policy, layers=layers, width=width, n_states=len(solver.memo)
    )


def optimal_nonadaptive(prior: TreePrior, budget: int) -> tuple[sp.Expr, tuple[int, ...]]:
    """The ``L = 1``, ``d = B`` optimum: ``(loss, nodes)`` with the best fixed design (sorted nodes)."""
    prior = _check_numeric(prior)
    budget = check_int(budget, "budget", minimum=0)
    if budget > prior.n_nodes:
        raise InputError(f"budget must be <= D = {prior.n_nodes}, got {budget}")
    solver = _solver(prior, 1)
    value, nodes = solver.full_nonadaptive(budget)[budget]
    return solver.loss(solver.full, value), nodes



# --- the optimum in symbolic alpha -----------------------------------------------------------------
@dataclass(frozen=True)
class AlphaPiece:
    """One piece of the optimum: on ``lower < alpha < upper`` the optimal loss is the polynomial
    ``loss``, attained by ``policy`` (adaptive: a decision tree) or ``design`` (non-adaptive: nodes).
    ``sample``: a rational inside the piece at which the policy was found and its value checked;
    the policy's node values are polynomials in ``alpha``."""

    lower: sp.Expr
    upper: sp.Expr
    loss: sp.Expr
    sample: sp.Rational
    policy: PolicyNode | None = None
    design: tuple[int, ...] | None = None

    def __repr__(self) -> str:
        what = f"design {list(self.design)}" if self.design is not None else (
            "read nothing" if self.policy is None else f"policy reading node {', '.join(map(str, self.policy.nodes))} first")
        return f"AlphaPiece({self.lower} < alpha < {self.upper}: loss {self.loss}; {what}; checked at alpha = {self.sample})"

    def to_dict(self) -> dict:
        out = {"lower": sp.sstr(self.lower), "upper": sp.sstr(self.upper),
               "lower_float": float(self.lower), "upper_float": float(self.upper),
               "loss": sp.sstr(self.loss), "sample": sp.sstr(self.sample)}
        if self.design is not None:
            out["design"] = [int(n) for n in self.design]
        else:
            out["policy"] = None if self.policy is None else self.policy.to_dict()
        return out


@dataclass(frozen=True)
class AlphaOptimum:
    """The exact optimum as a function of ``alpha`` on ``(0, 1)``: ``loss`` is a ``Piecewise`` of
    polynomials in ``alpha`` (a plain polynomial when one policy is best everywhere) with exact
    algebraic breakpoints; ``pieces`` lists each interval with its optimal policy or design.
    ``n_candidates``: polynomials left at the root before the exact envelope was taken."""

    loss: sp.Expr
    pieces: tuple[AlphaPiece, ...]
    layers: int
    width: int
    nonadaptive: bool
    n_candidates: int

    @property
    def breakpoints(self) -> tuple:
        return tuple(p.upper for p in self.pieces[:-1])

    def at(self, alpha):
        """The exact optimal loss at a number ``alpha`` in ``(0, 1)``."""
        from fvsym._validate import check_alpha

        a = check_alpha(alpha)
        if not a.is_number:
            raise InputError(f"at() needs a number alpha, got {_short(alpha)}")
        for piece in self.pieces:
            if (a <= piece.upper) == sp.true:
                return sp.expand(piece.loss.subs(_symbols.alpha, a))
        return sp.expand(self.pieces[-1].loss.subs(_symbols.alpha, a))  # pragma: no cover

    def __repr__(self) -> str:
        kind = "non-adaptive" if self.nonadaptive else "adaptive"
        lines = [f"AlphaOptimum({kind}, layers={self.layers}, width={self.width}, {len(self.pieces)} "
                 f"piece{'s' if len(self.pieces) != 1 else ''})"]
        return "\n".join(lines + [f"  {p!r}" for p in self.pieces])

    def _repr_latex_(self) -> str:
        return f"$\\displaystyle {pieces_latex(self.pieces)}$"

    def to_dict(self) -> dict:
        return {"loss": sp.sstr(self.loss), "layers": self.layers, "width": self.width,
                "nonadaptive": self.nonadaptive, "n_candidates": self.n_candidates,
                "breakpoints": [sp.sstr(b) for b in self.breakpoints],
                "pieces": [p.to_dict() for p in self.pieces]}


def _assemble(solver: _AlphaSolver, gains, layers: int, width: int, nonadaptive: bool) -> AlphaOptimum:
    """Exact envelope of the root candidates, one policy per piece (found by the numeric solver at the
    piece's sample and checked to have exactly the piece's polynomial as its value)."""
    alpha = _symbols.alpha
    S = solver.full
    budget = layers * width
    pieces = []
    for lower, upper, sample, gain in _envelope.upper_envelope(list(gains), alpha):
        loss = solver.loss(S, gain)
        prior = TreePrior(solver.K, sample)
        if nonadaptive:
            value, design = optimal_nonadaptive(prior, budget)
            reached = solver.gain_of_cells([c for _, c in solver.split(S, design)])
            policy = None
        else:
            sol = solve(prior, layers, width)
            value, policy, design = sol.loss, sol.policy, None
            reached = solver.gain_of_cells(solver.policy_cells(S, policy))
        if value != loss.subs(alpha, sample) or reached != gain:  # pragma: no cover - a solver bug
            raise AssertionError(f"piece ({lower}, {upper}): policy value {reached} != envelope {gain}")
        pieces.append(AlphaPiece(lower, upper, loss, sample, solver.symbolic_policy(S, policy), design))
    expr = piecewise_in_alpha([(p.upper, p.loss) for p in pieces])
    return AlphaOptimum(expr, tuple(pieces), layers, width, nonadaptive, len(gains))


def piecewise_in_alpha(pieces) -> sp.Expr:
    """``[(upper_1, expr_1), ..., (1, expr_m)]`` (increasing upper ends) as one expression:
    ``Piecewise((expr_1, alpha < upper_1), ..., (expr_m, True))``, or ``expr_1`` alone."""
    alpha = _symbols.alpha
    if len(pieces) == 1:
        return pieces[0][1]
    return sp.Piecewise(*[(e, alpha < upper) for upper, e in pieces[:-1]], (pieces[-1][1], True))


def pieces_latex(pieces) -> str:
    """The pieces of an optimum as one LaTeX ``cases`` block: each loss, its interval of ``alpha`` and
    what attains it (the design, or the first node the policy reads). No plain-text line."""
    rows = []
    for p in pieces:
        if p.design is not None:
            what = rf"\text{{design }} \{{{', '.join(map(str, p.design))}\}}"
        elif p.policy is not None:
            what = rf"\text{{policy reading node {', '.join(map(str, p.policy.nodes))} first}}"
        else:
            what = r"\text{read nothing}"
        rows.append(rf"{sp.latex(p.loss)} & {sp.latex(p.lower)} < \alpha < {sp.latex(p.upper)},\ {what}")
    return "\\begin{cases}\n" + " \\\\\n".join(rows) + "\n\\end{cases}"


def solve_alpha(depth: int, layers: int, width: int) -> AlphaOptimum:
    """The exact Bellman optimum of ``layers`` x ``width`` (noiseless coordinate class) for every
    ``alpha`` in ``(0, 1)`` at once: a ``Piecewise`` of polynomials with certified pieces and their
    policies (see :class:`_AlphaSolver` and :mod:`fvsym._envelope`). ``depth <= 5``."""
    depth = _check_alpha_depth(depth)
    layers = check_int(layers, "layers", minimum=0)
    width = check_int(width, "width", minimum=0)
    n_nodes = 2**depth - 1
    if layers * width > n_nodes:
        raise InputError(f"budget layers * width must be <= D = {n_nodes}, got {layers * width}")
    solver = _alpha_solver(depth, max(width, 1))
    gains = (solver.zero,) if layers * width == 0 else solver.value(solver.full, layers)  # memo kept
    return _assemble(solver, gains, layers, width, nonadaptive=False)


def optimal_nonadaptive_alpha(depth: int, budget: int) -> AlphaOptimum:
    """The exact ``L = 1``, ``d = B`` optimum for every ``alpha`` in ``(0, 1)``, with each piece's
    best fixed design. ``depth <= 5``."""
    depth = _check_alpha_depth(depth)
    budget = check_int(budget, "budget", minimum=0)
    n_nodes = 2**depth - 1
    if budget > n_nodes:
        raise InputError(f"budget must be <= D = {n_nodes}, got {budget}")
    solver = _alpha_solver(depth, 1)
    if solver._nonadaptive_full is None:
        solver._nonadaptive_full = solver.nonadaptive_sets(solver.full, n_nodes)
    return _assemble(solver, solver._nonadaptive_full[budget], 1, budget, nonadaptive=True)


__all__ = [
    "MAX_ALPHA_DEPTH", "REPR_LINES", "AlphaOptimum", "AlphaPiece", "BellmanSolution", "PolicyNode", "Recursion",
    "noisy_recursion", "optimal_nonadaptive", "optimal_nonadaptive_alpha", "pieces_latex", "recursion",
    "recursion_latex", "solve", "solve_alpha", "unroll", "unroll_cost", "unrolled_size",
]
