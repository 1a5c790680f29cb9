"""Tree prior, noiseless coordinate measurements (docs/theory.md section 6).

Closed forms derived with sympy (never typed in): the loss of the adaptive ``path`` strategy, of the
non-adaptive ``top_levels`` design, ``E||theta||^2`` and the two scaling laws; the exact loss of any
fixed coordinate design by an ``O(D K)`` pass over the tree; and ``tree_loss``, the API behind
``fv derive tree-loss``.

Exact loss of a partition. The leaves are uniform and ``||theta_s||^2 = sum_k a_k^2 = E`` for every
leaf, so a partition of the leaves into cells ``C`` (what a noiseless design reveals) has loss
``E - 2^-K sum_C ||sum_{s in C} theta_s||^2 / |C|``. Every such quantity is linear in the squared
scales ``w_k = a_k^2`` with rational coefficients, hence a polynomial in ``alpha`` with rational
coefficients (an exact rational at rational ``alpha``).
"""
from __future__ import annotations

import functools
from fractions import Fraction

import sympy as sp

from fvsym import _symbols, bellman
from fvsym._formula import Formula, IsPowerOfTwo
from fvsym._validate import _short, check_alpha, check_choice, check_int
from fvsym.errors import InputError
from fvsym.bellman import PolicyNode
from fvsym.priors import TreePrior, node_depth, squared_scales
from fvsym.priors import check_tree_prior as _check_prior
from fvsym.strategy_names import CLASS_NAMED
from fvsym.strategy_names import TREE_LOSS as STRATEGIES
SOURCE = "docs/theory.md §6"

_alpha, _K, _B, _j, _k = _symbols.alpha, _symbols.depth, _symbols.budget, _symbols.levels, _symbols.k


# --- closed forms ----------------------------------------------------------------------------------
def _generic_alpha(expr):
    """Drop the ``alpha = 1`` branch sympy adds to geometric sums (docs/theory.md: ``0 < alpha < 1``)."""
    return expr.replace(lambda e: isinstance(e, sp.Piecewise), lambda e: e.args[-1].expr)


def _residual_loss(first_unknown_level):
    """Loss when the belief is uniform over one whole subtree rooted at level ``first_unknown_level``.

    Inside such a subtree a node at level ``k`` carries ``theta_n = +-a_k`` with probability
    ``2^-(k - first)`` each, so its posterior variance is ``a_k^2 / 2^(k - first)``, and there are
    ``2^(k - first)`` such nodes: the loss is the sum over the unknown levels of (count x variance).
    """
    m = first_unknown_level
    count = 2 ** (_k - m)
    variance = _alpha ** (_k - 1) / 2 ** (_k - m)
    total = sp.Sum(count * variance, (_k, m, _K)).doit()
    return sp.simplify(_generic_alpha(total))


@functools.cache
def second_moment() -> Formula:
    """``E||theta||^2 = sum_k a_k^2`` as a sum over the prior's node variances (nothing read yet)."""
    expr = _residual_loss(1)
    return Formula("second_moment", expr, (_alpha, _K), SOURCE + " (moments)",
                   doc="E||theta||^2 of the tree prior, symbolic in alpha and depth K")


@functools.cache
def path_loss() -> Formula:
    """Noiseless loss of the adaptive ``path`` strategy with budget ``B <= K``.

    After ``B`` layers the path prefix ``s_1 .. s_B`` is known exactly and the belief is uniform over
    the subtree at level ``B + 1``: the loss is ``sum_{k > B} alpha^(k-1)``.
    """
    expr = _residual_loss(_B + 1)
    return Formula("path_loss", expr, (_alpha, _K, _B), SOURCE + " (path strategy)",
                   doc="noiseless loss of the adaptive path strategy, valid for B <= K",
                   constraints=(sp.Le(_B, _K),))


@functools.cache
def top_levels_loss() -> Formula:
    """Noiseless loss of the ``top_levels`` design of budget ``B = 2^j - 1`` (every node of levels ``1..j``).

    Reading every node of the top ``j`` levels reveals ``s_1 .. s_j``; the belief is then uniform over
    a subtree at level ``j + 1``: the loss is ``sum_{k > j} alpha^(k-1)``, written in the budget with
    ``j = log2(B + 1)``, so ``(B + 1)^(log2 alpha)`` shows the power law. Valid where ``B + 1`` is a
    power of 2 and ``B <= 2^K - 1``; other budgets: ``tree_loss(K, B, "top_levels")`` (exact, any ``B``).
    """
    expr = _residual_loss(_j + 1).subs(_j, sp.log(_B + 1, 2))
    return Formula("top_levels_loss", expr, (_alpha, _K, _B), SOURCE + " (top-levels design)",
                   doc="noiseless loss of the top-levels design with B = 2^j - 1 (j full levels), valid for B < 2^K",
                   constraints=(IsPowerOfTwo(_B + 1), sp.Le(_B + 1, 2**_K)))


def _limit_infinite_depth(expr, c):
    """``lim_{K -> oo}`` with ``alpha = exp(-c)``, ``c > 0`` (this encodes ``0 < alpha < 1``)."""
    return sp.limit(expr.subs(_alpha, sp.exp(-c)), _K, sp.oo)


@functools.cache
def path_loss_rate() -> Formula:
    """Scaling law of the path strategy: ``lim_{K -> oo} path_loss = alpha^B / (1 - alpha)`` (exponential in B)."""
    c = sp.Symbol("c", positive=True)
    expr = sp.simplify(_limit_infinite_depth(path_loss().expr, c).subs(c, -sp.log(_alpha)))
    return Formula("path_loss_rate", expr, (_alpha, _B), SOURCE + " (K -> oo limit of path_loss)",
                   doc="infinite-depth path loss; log(loss)/B -> log(alpha): exponential in the budget")


@functools.cache
def top_levels_rate() -> Formula:
    """Scaling law of top_levels: ``lim_{K -> oo}`` of its loss, ``(B + 1)^(log2 alpha) / (1 - alpha)``
    (a power law in B; at ``B = 2^j - 1`` it is ``alpha^j / (1 - alpha)``)."""
    c = sp.Symbol("c", positive=True)
    expr = sp.simplify(_limit_infinite_depth(top_levels_loss().expr, c).subs(c, -sp.log(_alpha)))
    return Formula("top_levels_rate", expr, (_alpha, _B), SOURCE + " (K -> oo limit of top_levels_loss)",
                   doc="infinite-depth top-levels loss; log(loss)/log(B) -> log2(alpha): a power law")


@functools.cache
def scaling_exponents() -> dict:
    """The two scaling laws as sympy limits (with ``alpha = exp(-c)``, mapped back to ``alpha``):

    ``path``: ``lim_{B -> oo} log(path_loss_rate) / B = log(alpha)`` (exponential decay);
    ``top_levels``: ``lim_{B -> oo} log(top_levels_rate) / log(B) = log(alpha) / log(2)`` (power law).
    """
    c = sp.Symbol("c", positive=True)
    path = path_loss_rate().expr.subs(_alpha, sp.exp(-c))
    top = top_levels_rate().expr.subs(_alpha, sp.exp(-c))
    return {
        "path": sp.simplify(sp.limit(sp.log(path) / _B, _B, sp.oo).subs(c, -sp.log(_alpha))),
        "top_levels": sp.simplify(sp.limit(sp.log(top) / sp.log(_B), _B, sp.oo).subs(c, -sp.log(_alpha))),
    }


# --- any fixed coordinate design -------------------------------------------------------------------
def _check_nodes(prior: TreePrior, nodes) -> tuple[int, ...]:
    try:
        nodes = tuple(nodes)
    except TypeError:
        raise InputError(f"nodes must be a list of heap node numbers, got {_short(nodes)}") from None
    return tuple(prior.check_node(n) for n in nodes)


def design_gain(depth: int, nodes) -> list[Fraction]:
    """Coefficients ``c_k`` with ``sum_C ||sum_{s in C} theta_s||^2 / |C| = sum_k c_k a_k^2`` over the
    cells ``C`` of the partition a fixed coordinate design induces (one bottom-up pass, ``O(D K)``).

    For each subtree the leaves below it fall into cells already resolved by a read node inside it
    (their contribution is final up to the components above, which are constant on each of them) and
    one "all readings zero" cell, kept as its size ``z`` and the squared norm ``q`` of its summed
    restricted theta. At an unread node the zero cells of the two children merge
    (``q = q+ + q- + a_k^2 (z+ - z-)^2``); at a read node they become resolved cells (``q / z`` each).
    """
    read = set(nodes)
    n_leaves = 1 << depth
    zero = [Fraction(0)] * depth
    # stats[n] = (present leaves, zero-cell size z, zero-cell q, resolved sum R); q and R per level
    stats = {n_leaves + i: (1, 1, zero, zero) for i in range(n_leaves)}
    for n in range(n_leaves - 1, 0, -1):
        level = node_depth(n) - 1
        cp, zp, qp, rp = stats.pop(2 * n)
        cm, zm, qm, rm = stats.pop(2 * n + 1)
        resolved = [x + y for x, y in zip(rp, rm)]
        if n in read:
            for z, q in ((zp, qp), (zm, qm)):
                if z:
                    resolved = [r + x / z for r, x in zip(resolved, q)]
            resolved[level] += cp + cm
            stats[n] = (cp + cm, 0, zero, resolved)
        else:
            resolved[level] += (cp - zp) + (cm - zm)
            q = [x + y for x, y in zip(qp, qm)]
            q[level] += (zp - zm) ** 2
            stats[n] = (cp + cm, zp + zm, q, resolved)
    _, z, q, resolved = stats[1]
    return [r + x / z for r, x in zip(resolved, q)] if z else resolved


def coordinate_design_loss(prior: TreePrior, nodes):
    """Exact noiseless loss of a fixed coordinate design (heap node numbers read in one layer;
    duplicates allowed, they add nothing). Polynomial in ``alpha`` (or in the scales) when symbolic,
    an exact rational at rational ``alpha``. Works in ``O(D K)``, no enumeration of the leaves."""
    prior = _check_prior(prior)
    nodes = _check_nodes(prior, nodes)
    gain = design_gain(prior.depth, nodes)
    n_leaves = prior.n_leaves
    return sp.expand(sum(sp.Rational(1 - g / n_leaves) * w for g, w in zip(gain, squared_scales(prior))))


def _enumerate_design_loss(prior: TreePrior, nodes):
    """Brute-force twin of ``coordinate_design_loss``: group the ``2^K`` leaves by their readings and
    sum their squared distances to the cell means (the test oracle; exponential in the depth)."""
    prior = _check_prior(prior)
    nodes = _check_nodes(prior, nodes)
    cells: dict[tuple, list[dict]] = {}
    for signs in prior.leaves():
        theta = prior.theta(signs)
        reading = tuple(sp.sign(theta.get(n, 0)) for n in nodes)
        cells.setdefault(reading, []).append(theta)
    total = sp.Integer(0)
    for members in cells.values():
        coords = set().union(*members)
        for n in coords:
            values = [t.get(n, sp.Integer(0)) for t in members]
            mean = sum(values) / len(values)
            total += sum((v - mean) ** 2 for v in values)
    return sp.expand(total / prior.n_leaves)


def top_levels_design(prior: TreePrior, budget: int) -> tuple[int, ...]:
    """The first ``B`` nodes in heap order (``0 <= B <= D``)."""
    return tuple(top_levels_design_range(prior, budget))


def top_levels_any_loss(prior: TreePrior, budget: int):
    """Exact noiseless loss of the ``top_levels`` design at any budget ``0 <= B <= D``, a sum over the
    depths (``O(K)``, no enumeration of the leaves).

    With ``j = floor(log2(B + 1))`` the first ``B`` heap nodes are the ``2^j - 1`` nodes of levels
    ``1..j`` and the ``r = B - (2^j - 1)`` leftmost nodes of level ``j + 1``. The full levels reveal
    ``s_1 .. s_j`` and so the path node ``n_{j+1}`` of level ``j + 1``; the other readings of that level
    are known zeros. With probability ``r / 2^j`` the path node is read and ``s_{j+1}`` is revealed too,
    otherwise nothing more is: the loss is ``sum_{k > j} w_k - (r / 2^j) w_{j+1}`` with ``w_k = a_k^2``
    (``top_levels_loss`` at ``r = 0``)."""
    prior = _check_prior(prior)
    budget = len(top_levels_design_range(prior, budget))
    j = (budget + 1).bit_length() - 1
    r = budget - (2**j - 1)
    if prior.alpha is not None and not prior.alpha.is_number:  # the geometric sum in closed form
        full = path_loss().expr.subs({_K: prior.depth, _B: j, _alpha: prior.alpha})
        return sp.simplify(full - sp.Rational(r, 2**j) * prior.alpha**j) if r else full
    ws = squared_scales(prior)
    loss = sum(ws[j:], sp.Integer(0))
    if r:
        loss -= sp.Rational(r, 2**j) * ws[j]
    return sp.expand(loss)


def top_levels_design_range(prior: TreePrior, budget: int) -> range:
    """The first ``B`` heap node numbers as a ``range`` (``0 <= B <= D``), built in O(1)."""
    prior = _check_prior(prior)
    budget = check_int(budget, "budget", minimum=0)
    if budget > prior.n_nodes:
        raise InputError(f"budget must be <= D = {prior.n_nodes} for top_levels, got {budget}")
    return range(1, budget + 1)


MAX_PATH_DESIGN_BUDGET = 16


def path_design(prior: TreePrior, budget: int):
    """The adaptive path strategy as a decision tree (a ``bellman.PolicyNode``; ``None`` for ``B = 0``):
    layer ``l`` reads node ``n_l`` of the path decoded so far, ``B <= K`` layers of width 1.
    It has ``2^B - 1`` nodes, so ``B <= 16``; ``prior.path(signs)[:B]`` lists one leaf's nodes."""
    prior = _check_prior(prior)
    budget = check_int(budget, "budget", minimum=0)
    if budget > prior.depth:
        raise InputError(f"budget must be <= depth K = {prior.depth} for path (one node per level), got {budget}")
    if budget > MAX_PATH_DESIGN_BUDGET:
        raise InputError(
            f"path_design builds 2^B - 1 policy nodes; budget must be <= {MAX_PATH_DESIGN_BUDGET}, got {budget}"
        )
    loss = sp.expand(sum(squared_scales(prior)[budget:]))
    K = prior.depth

    def build(n: int, layer: int):
        if layer > budget:
            return None
        level = node_depth(n)
        first = (n - (1 << (level - 1))) << (K - level + 1)
        belief = tuple(range(first, first + (1 << (K - level + 1))))
        children = {(1,): build(2 * n, layer + 1), (-1,): build(2 * n + 1, layer + 1)}
        return PolicyNode(nodes=(n,), children=children, belief=belief, value=loss)

    return build(1, 1)


# --- the API behind `fv derive tree-loss` ----------------------------------------------------------
def _make_prior(depth: int, alpha, scales) -> TreePrior:
    if scales is not None:
        if alpha is not None:
            raise InputError(f"give either alpha or scales, not both (got alpha={alpha})")
        return TreePrior(depth, scales=scales)
    return TreePrior(depth, _alpha if alpha is None else check_alpha(alpha))


def _tree_formula(name: str, expr, source: str, simplify: bool = True) -> Formula:
    expr = sp.sympify(expr)
    if simplify:
        expr = sp.simplify(expr)
    params = tuple(sorted(expr.free_symbols, key=str))
    return Formula(name, expr, params, source)


def _layers_width(budget: int, layers, width) -> tuple[int, int]:
    """``(layers, width)`` of an adaptive Bellman policy: ``L = B``, ``d = 1`` unless given."""
    if layers is None and width is None:
        return budget, 1
    if layers is not None:
        layers = check_int(layers, "layers", minimum=0)
    if width is not None:
        width = check_int(width, "width", minimum=1)
    if layers is None:
        if budget % width:
            raise InputError(f"budget {budget} is not a multiple of width={width}")
        layers = budget // width
    if width is None:
        if layers == 0 or budget % layers:
            raise InputError(f"budget {budget} is not a positive multiple of layers={layers}")
        width = budget // layers
    if layers * width != budget:
        raise InputError(f"layers * width must equal budget {budget}, got layers={layers}, width={width}")
    return layers, width


def _tree_loss_prior(prior, depth, alpha, scales) -> tuple[TreePrior, int]:
    """The tree prior of :func:`tree_loss`'s arguments (a TreePrior, or the older depth, alpha, scales) and its
    depth."""
    if depth is not None:
        if prior is not None:
            raise InputError(f"give the prior or depth, not both (got {_short(prior)} and depth={_short(depth)})")
        prior = depth
    if prior is None:
        raise InputError("tree_loss needs a prior: tree_loss(TreePrior(K, alpha), budget=B, strategy='path')")
    if isinstance(prior, TreePrior):
        if alpha is not None or scales is not None:
            raise InputError(f"alpha and scales are the prior's: give TreePrior(K, alpha) or TreePrior(K, scales=...) "
                             f"alone, got {prior!r} with " + ("alpha" if alpha is not None else "scales"))
        return prior, prior.depth
    if hasattr(prior, "dim") or hasattr(prior, "covariance"):
        raise InputError(f"tree_loss takes a TreePrior, got {type(prior).__name__} (a Gaussian prior's exact loss "
                         "is fvsym.gaussian's)")
    depth = check_int(prior, "depth", minimum=1)
    return _make_prior(depth, alpha, scales), depth


def tree_loss(prior=None, budget=None, strategy=None, alpha=None, layers=None, width=None, scales=None, *,
              depth=None) -> Formula:
    """Noiseless loss of a strategy on the tree prior, exact (``fv derive tree-loss``):
    ``tree_loss(TreePrior(4, "1/2"), budget=2, strategy="path")`` is 3/8.

    ``prior``: a :class:`~fvsym.priors.TreePrior` (its alpha, symbolic or a number, or its general scales).
    The older form ``tree_loss(depth, budget, strategy, alpha=None, scales=None)`` (``depth`` an integer, by
    position or ``depth=``) builds that prior and gives the same Formula.

    ``strategy``: ``path`` (adaptive, ``B <= K``), ``top_levels`` (first ``B`` heap nodes),
    ``optimal`` (Bellman optimum with ``layers`` x ``width``, default ``L = B``, ``d = 1``) or
    ``optimal_nonadaptive_coordinate`` (``L = 1``, ``d = B``; the coordinate class, the only one here, so the
    bare ``optimal_nonadaptive`` means it too and names the formula). A symbolic alpha: for the optimal
    strategies the result is the exact optimum for every ``alpha`` in (0, 1), a ``Piecewise`` of polynomials
    with certified pieces, each with its policy or design in ``formula.pieces`` (``depth <= 5``; see
    ``bellman.solve_alpha``). Returns a Formula whose params are the symbols left.
    """
    prior, depth = _tree_loss_prior(prior, depth, alpha, scales)
    if budget is None or strategy is None:
        raise InputError("tree_loss needs a budget and a strategy: tree_loss(TreePrior(K, alpha), budget=B, "
                         "strategy='path')")
    budget = check_int(budget, "budget", minimum=0)
    strategy = CLASS_NAMED.get(strategy, strategy) if isinstance(strategy, str) else strategy
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    if budget > prior.n_nodes:
        raise InputError(f"budget must be <= D = 2^K - 1 = {prior.n_nodes} at depth {depth}, got {budget}")
    return FORMULAS[strategy](prior, depth, budget, strategy, layers, width)


# --- one formula builder a strategy: (prior, depth, budget, strategy, layers, width) -> its Formula -------------
def _path_formula(prior: TreePrior, depth: int, budget: int, strategy: str, layers, width) -> Formula:
    """``path``: the levels past the budget unknown, ``sum_{k > B} a_k^2`` (closed form in alpha)."""
    if budget > depth:
        raise InputError(f"budget must be <= depth K = {depth} for strategy path, got {budget}")
    if prior.alpha is not None:
        expr = path_loss().expr.subs({_K: depth, _B: budget, _alpha: prior.alpha})
    else:  # general scales: the same derivation, sum of the unknown levels' a_k^2
        expr = sum(squared_scales(prior)[budget:], sp.Integer(0))
    return _tree_formula(f"tree_loss_{strategy}", sp.simplify(expr), SOURCE + " (path strategy)")


def _top_levels_formula(prior: TreePrior, depth: int, budget: int, strategy: str, layers, width) -> Formula:
    """``top_levels``: the first ``B`` heap nodes, a closed sum over the depths (already in its simplest form)."""
    return _tree_formula(f"tree_loss_{strategy}", top_levels_any_loss(prior, budget), SOURCE + " (top-levels design)",
                         simplify=False)


def _optimal_formula(prior: TreePrior, depth: int, budget: int, strategy: str, layers, width) -> Formula:
    """``optimal``: the Bellman optimum with ``layers`` x ``width`` (default ``L = B``, ``d = 1``)."""
    L, d = _layers_width(budget, layers, width)
    return _bellman_formula(prior, strategy, L, d, lambda: bellman.solve_alpha(depth, L, d),
                            lambda: bellman.solve(prior, L, d).loss)


def _optimal_nonadaptive_formula(prior: TreePrior, depth: int, budget: int, strategy: str, layers, width) -> Formula:
    """``optimal_nonadaptive`` (the coordinate class): the best fixed design, one layer (``L = 1``, ``d = B``)."""
    if layers is not None and check_int(layers, "layers", minimum=0) != 1:
        raise InputError(f"optimal_nonadaptive has layers = 1, got layers={layers}")
    if width is not None and check_int(width, "width", minimum=0) != budget:
        raise InputError(f"optimal_nonadaptive has width = budget = {budget}, got width={width}")
    return _bellman_formula(prior, strategy, 1, budget, lambda: bellman.optimal_nonadaptive_alpha(depth, budget),
                            lambda: bellman.optimal_nonadaptive(prior, budget)[0])


def _bellman_formula(prior: TreePrior, strategy: str, L: int, d: int, exact_in_alpha, numeric) -> Formula:
    """A Bellman optimum: ``exact_in_alpha()`` (its certified pieces) for a symbolic alpha, else ``numeric()``."""
    name = f"tree_loss_{strategy}"
    if prior.alpha is None and not prior.is_numeric:  # general scales with a symbol among them
        raise InputError(f"strategy {strategy} needs numeric scales (or a symbolic alpha), got {prior!r}")
    if prior.alpha is not None and not prior.alpha.is_number:
        optimum = exact_in_alpha()
        source = f"docs/theory.md §3 (Bellman, noiseless coordinate class, L={L}, d={d}; exact in alpha, " \
                 f"{len(optimum.pieces)} certified piece{'s' if len(optimum.pieces) > 1 else ''})"
        return Formula(name, optimum.loss, (_alpha,), source, pieces=optimum.pieces)
    return _tree_formula(name, numeric(), f"docs/theory.md §3 (Bellman, noiseless coordinate class, L={L}, d={d})")


# the formula of each strategy of tree_loss (its class-named spellings map onto these names): adding a strategy's
# formula is adding a builder here
FORMULAS = {"path": _path_formula, "top_levels": _top_levels_formula, "optimal": _optimal_formula,
            "optimal_nonadaptive": _optimal_nonadaptive_formula}


__all__ = [
    "STRATEGIES",
    "coordinate_design_loss",
    "design_gain",
    "path_design",
    "path_loss",
    "path_loss_rate",
    "scaling_exponents",
    "second_moment",
    "squared_scales",
    "top_levels_any_loss",
    "top_levels_design",
    "top_levels_loss",
    "top_levels_rate",
    "tree_loss",
]
