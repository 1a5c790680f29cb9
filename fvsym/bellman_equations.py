"""The Bellman recursion of docs/theory.md section 3 written as sympy equations (``recursion``, and
``noisy_recursion`` over Gaussian-channel beliefs), and the noiseless recursion unrolled into one
expression for a small tree (``unroll``, ``unrolled_size``); behind ``fv derive bellman``."""
from __future__ import annotations

import itertools
import textwrap

import sympy as sp

from fvsym import _symbols
from fvsym._bellman_dp import _AlphaSolver, _check_alpha_depth, _Solver
from fvsym._validate import check_int
from fvsym.priors import check_tree_prior as _check_prior
from fvsym.errors import InputError


MAX_WRITTEN_WIDTH = 4  # the sum over the 3^d reading outcomes is written out term by term
WHERE_WIDTH = 56  # characters of a definition's text per LaTeX row


def _J(l: int):
    return sp.Function(f"J_{l}")


class Recursion(tuple):
    """The equations of a Bellman recursion (a tuple of ``sp.Eq``, terminal value first, optimum last)
    with ``where``: the definitions of the sets and maps they use, as ``(symbol, meaning)`` text pairs.
    Prints as the equations and the definitions, and as LaTeX in a notebook (``_repr_latex_``)."""

    where: tuple = ()

    def __new__(cls, equations, where=()):
        self = super().__new__(cls, equations)
        self.where = tuple(where)
        return self

    @property
    def equations(self) -> tuple:
        return tuple(self)

    def lines(self) -> list:
        """The text form: one ``lhs = rhs`` line per equation, then ``where`` lines."""
        out = [f"{sp.sstr(e.lhs)} = {sp.sstr(e.rhs)}" for e in self]
        return out + [f"where {name}: {meaning}" for name, meaning in self.where]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return str(self)

    @property
    def latex(self) -> str:
        """The equations as one ``aligned`` block, the definitions as text rows after them, from the left
        edge and wrapped (MathJax does not wrap a row)."""
        names = {sp.Symbol("optimal_loss"): r"\mathrm{optimal\ loss}"}  # not optimal with subscript loss
        rows = [rf"{sp.latex(e.lhs, symbol_names=names)} &= {sp.latex(e.rhs)}" for e in self]
        equations = "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"
        where = []
        for latex, meaning in self._where_latex():
            first, *more = textwrap.wrap(meaning, WHERE_WIDTH) or [""]
            where.append(rf"&\text{{where }} {latex} \text{{: {_latex_text(first)}}}")
            where += [rf"&\qquad \text{{{_latex_text(line)}}}" for line in more]
        if not where:
            return equations
        return "\\begin{aligned}\n&" + equations + " \\\\\n" + " \\\\\n".join(where) + "\n\\end{aligned}"

    def _where_latex(self):
        return [(_WHERE_LATEX.get(name, rf"\mathrm{{{name}}}"), meaning) for name, meaning in self.where]

    def _repr_latex_(self) -> str:
        return f"$\\displaystyle {self.latex}$"

    def to_dict(self) -> dict:
        return {"equations": [{"lhs": sp.sstr(e.lhs), "rhs": sp.sstr(e.rhs), "latex": sp.latex(e)} for e in self],
                "where": [{"symbol": n, "meaning": m} for n, m in self.where], "latex": self.latex}


def _latex_text(text: str) -> str:
    return text.replace("\\", r"\textbackslash ").replace("_", r"\_").replace("{", r"\{").replace("}", r"\}")


_WHERE_LATEX = {
    "N_d(S)": r"N_{d}(S)", "N_1(S)": r"N_{1}(S)", "N_2(S)": r"N_{2}(S)", "N_3(S)": r"N_{3}(S)",
    "N_4(S)": r"N_{4}(S)", "S_W^r": r"S_{W}^{r}", "|S|": r"\left|S\right|", "mu_S": r"\mu_{S}",
    "U_d": r"U_{d}", "U(b)": r"U(b)", "mu(b)": r"\mu(b)", "p_n(phi)": r"p_{n}(\phi)", "theta_m": r"\theta_{m}",
    "b_0": r"b_{0}", "b*p_n(phi)": r"b \odot p_{n}(\phi)", "p(n, m, phi)": r"p(n, m, \phi)", "b": "b",
}


def recursion(prior, layers: int, width: int, tau=None) -> Recursion:
    """The Bellman recursion of docs/theory.md section 3 as sympy equations (``sp.Eq``), from the terminal
    value to the optimum. Print them with ``str``/``sp.latex`` (or :func:`recursion_latex`).

    ``TreePrior`` (noiseless coordinate class, the model :func:`solve` solves): a belief ``S`` is a set
    of equally likely leaves; an action ``W`` is a set of ``width`` nodes whose reading is not constant
    on ``S`` (the set ``N_d(S)``); each node reads ``+``, ``-`` or ``0``, so the expectation over the
    reading is the written-out sum over the ``3^d`` outcomes ``r`` of ``P(r) = |S_W^r| / |S|`` times the
    value at the Bayes update ``S_W^r``::

        J_L(S) = (1/|S|) sum_{s in S} ||theta_s - mu_S||^2
        J_{l-1}(S) = min_{W in N_d(S)} sum_r |S_W^r| / |S| J_l(S_W^r),   l = L .. 1
        optimal_loss = J_0(S_0),   |S_0| = 2^K

    ``GaussianPrior`` (gaussian channel, noise ``tau``, symbolic by default): the belief is the
    posterior covariance ``P``, whose update does not depend on the reading (the expectation over
    the reading is trivial), ``J_L(P) = tr P`` and ``J_{l-1}(P) = min_W J_l(P - P W^T (W P W^T +
    tau^2 I)^-1 W P)``, ``optimal_loss = J_0(C)``. :func:`unroll` expands the tree version."""
    from fvsym import _notation as N
    from fvsym.priors import GaussianPrior

    layers = check_int(layers, "layers", minimum=1)
    width = check_int(width, "width", minimum=1)
    optimum = sp.Symbol("optimal_loss")
    if isinstance(prior, GaussianPrior):
        from fvsym._validate import check_tau

        t = _symbols.tau if tau is None else check_tau(tau)
        D = prior.dim
        P, W, C = sp.MatrixSymbol("P", D, D), sp.MatrixSymbol("W", width, D), sp.MatrixSymbol("C", D, D)
        update = P - P * W.T * (W * P * W.T + t**2 * sp.Identity(width)).I * W * P
        actions = sp.Symbol(f"U_{width}")  # d x D matrices with unit rows
        eqs = [sp.Eq(C, prior.cov), sp.Eq(_J(layers)(P), sp.Trace(P))]
        for l in range(layers, 0, -1):
            eqs.append(sp.Eq(_J(l - 1)(P), N.MinOver(_J(l)(update), W, actions)))
        eqs.append(sp.Eq(optimum, _J(0)(C)))
        where = [(f"U_{width}", f"the {width} x {D} matrices W with unit rows (unit class)"),
                 ("C", "the prior covariance")]
        return Recursion(eqs, where)
    prior = _check_prior(prior)
    if tau is not None:
        return noisy_recursion(prior, layers, width, tau)
    if width > MAX_WRITTEN_WIDTH:
        raise InputError(f"width must be <= {MAX_WRITTEN_WIDTH} to write out the 3^d reading outcomes, got {width}")
    if layers * width > prior.n_nodes:
        raise InputError(f"budget layers * width must be <= D = {prior.n_nodes}, got {layers * width}")
    S, S0, W = sp.Symbol("S"), sp.Symbol("S_0"), sp.Symbol("W")
    actions = sp.Function(f"N_{width}")(S)
    outcomes = list(itertools.product((1, -1, 0), repeat=width))
    eqs = [sp.Eq(N.Card(S0), 2**prior.depth), sp.Eq(_J(layers)(S), N.PosteriorVariance(S))]
    for l in range(layers, 0, -1):
        total = sp.Add(*[N.Card(N.Cell(S, W, r)) / N.Card(S) * _J(l)(N.Cell(S, W, r)) for r in outcomes],
                       evaluate=False)
        eqs.append(sp.Eq(_J(l - 1)(S), N.MinOver(total, W, actions)))
    eqs.append(sp.Eq(optimum, _J(0)(S0)))
    nodes = "single nodes W" if width == 1 else f"sets W of {width} nodes"
    where = [
        (f"N_{width}(S)", f"the {nodes} (heap numbers 1..{prior.n_nodes}) whose reading is not "
                          "constant on S (a reading that cannot differ tells nothing)"),
        ("S_W^r", "the leaves of S whose noiseless readings of W have the signs r (+, - or 0: a node off the "
                  "leaf's path reads 0)"),
        ("|S|", "the number of leaves in S, all equally likely"),
        ("mu_S", "the mean of theta_s over the leaves s of S"),
    ]
    return Recursion(eqs, where)


MAX_NOISY_WRITTEN_DEPTH = 3  # the leaves' theta_m are written out (2^K rows of D entries)


def noisy_recursion(prior, layers: int, width: int = 1, tau=None) -> Recursion:
    """The Bellman recursion under the gaussian channel (docs/theory.md section 3, "under noise") for a small
    tree (``depth <= MAX_NOISY_WRITTEN_DEPTH``), layers of width 1, coordinate class, any node at every
    layer (repeats included). A belief is a weight vector ``b`` over the ``2^K`` leaves (prior times
    likelihoods, unnormalised); ``U(b) = sum_m b_m ||theta_m - mu(b)||^2`` is homogeneous of degree 1, so
    ``V_0(b) = U(b)`` and ``V_l(b) = min_n int V_{l-1}(b * p_n(phi)) dphi`` with the Gaussian
    likelihoods ``p_n(phi)_m = N(phi; theta_m[n], tau^2)``; the optimum is ``V_L(b_0)``. The leaves'
    ``theta_m`` are written out. ``fvnum.noisy_bellman`` evaluates it numerically."""
    from fvsym import _notation as N
    from fvsym._validate import check_tau

    prior = _check_prior(prior)
    layers = check_int(layers, "layers", minimum=1)
    width = check_int(width, "width", minimum=1)
    if width != 1:
        raise InputError(f"the noisy recursion is written for layers of width 1 (any node at every layer), got width={width}")
    if prior.depth > MAX_NOISY_WRITTEN_DEPTH:
        raise InputError(f"depth must be <= {MAX_NOISY_WRITTEN_DEPTH} to write out the leaves of the noisy "
                         f"recursion, got {prior.depth}")
    t = _symbols.tau if tau is None else check_tau(tau)
    if t == 0:
        raise InputError("tau = 0 is the noiseless recursion: leave out tau")
    M, D = prior.n_leaves, prior.n_nodes
    b, n, m, phi = sp.Symbol("b"), sp.Symbol("n"), sp.Symbol("m", integer=True, positive=True), sp.Symbol("phi", real=True)
    V = lambda l: sp.Function(f"V_{l}")  # noqa: E731
    U, mu = sp.Function("U"), sp.Function("mu")
    bm, theta = sp.IndexedBase("b"), sp.IndexedBase("theta")
    eqs = [sp.Eq(U(b), sp.Sum(bm[m] * N.NormSq(theta[m] - mu(b)), (m, 1, M))),
           sp.Eq(mu(b), sp.Sum(bm[m] * theta[m], (m, 1, M)) / sp.Sum(bm[m], (m, 1, M))),
           sp.Eq(sp.Function("p")(n, m, phi),
                 sp.exp(-(phi - theta[m, n]) ** 2 / (2 * t**2)) / (sp.sqrt(2 * sp.pi) * t)),
           sp.Eq(V(0)(b), U(b))]
    update = N.Reweighted(b, n, phi)
    for l in range(1, layers + 1):
        eqs.append(sp.Eq(V(l)(b), N.MinOver(sp.Integral(V(l - 1)(update), (phi, -sp.oo, sp.oo)), n,
                                            sp.Range(1, D + 1))))
    eqs.append(sp.Eq(sp.Symbol("optimal_loss"), V(layers)(sp.Symbol("b_0"))))
    for index, signs in enumerate(prior.leaves(), start=1):
        row = prior.theta(signs)
        eqs.append(sp.Eq(theta[index], sp.Tuple(*[row.get(k, 0) for k in range(1, D + 1)]), evaluate=False))
    where = [
        ("b", f"a belief: unnormalised weights (b_1, .., b_{M}) over the {M} leaves"),
        ("b*p_n(phi)", "the Bayes update after reading phi at node n: b_m p(n, m, phi) for each leaf m"),
        ("p(n, m, phi)", f"the likelihood of reading phi at node n under leaf m (gaussian channel, tau = {t})"),
        ("b_0", f"the uniform prior, b_m = 1/{M}"),
        ("theta_m", f"leaf m's latent (entries at the heap nodes 1..{D}; leaves in the order of TreePrior.leaves())"),
    ]
    return Recursion(eqs, where)


def recursion_latex(equations) -> str:
    """The equations as one LaTeX ``aligned`` block (with the definitions of a ``Recursion``)."""
    if isinstance(equations, Recursion):
        return equations.latex
    rows = [rf"{sp.latex(e.lhs)} &= {sp.latex(e.rhs)}" for e in equations]
    return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"


MAX_UNROLLED_TERMS = 200_000


def _unroll_solver(prior, layers, width):
    """``(prior, layers, solver)`` of :func:`unroll` and :func:`unrolled_size`, checked: an exact solver
    for numeric scales, the one over polynomials for the symbol ``alpha``."""
    prior = _check_prior(prior)
    layers = check_int(layers, "layers", minimum=0)
    width = check_int(width, "width", minimum=1)
    if layers * width > prior.n_nodes:
        raise InputError(f"budget layers * width must be <= D = {prior.n_nodes}, got {layers * width}")
    if prior.is_numeric:
        solver = _Solver(prior, width)
    elif prior.alpha is not None and isinstance(prior.alpha, sp.Symbol) and prior.alpha == _symbols.alpha:
        solver = _AlphaSolver(_check_alpha_depth(prior.depth), width)
    else:
        raise InputError(f"unroll needs numeric scales or the symbol alpha, got {prior!r}")
    return prior, layers, solver


def unroll(prior, layers: int, width: int, max_terms: int = MAX_UNROLLED_TERMS) -> sp.Expr:
    """The recursion expanded for one small tree: an explicit expression of ``Min`` (over the actions
    of each belief, one per distinct partition), sums over the reading outcomes with their
    probabilities ``|cell| / |S|``, and terminal losses, built unevaluated (``evaluate=False``).
    ``.doit()`` (numeric ``alpha``) or ``.subs(alpha, value).doit()`` (symbolic ``alpha``, ``depth <= 5``)
    evaluates it; the value equals ``solve(prior, layers, width).loss``. Subtrees of repeated
    beliefs are shared; more than ``max_terms`` actions in all raise a ValueError."""
    prior, layers, solver = _unroll_solver(prior, layers, width)
    memo: dict[tuple[int, int], sp.Expr] = {}
    n_terms = 0

    def J(S: int, left: int) -> sp.Expr:
        nonlocal n_terms
        size = S.bit_count()
        if left == 0 or size == 1:
            return solver.loss(S, solver.terminal(S))
        key = (S, left)
        if key in memo:
            return memo[key]
        options = []
        for _, cells in solver.choices(S):
            terms = [sp.Mul(sp.Rational(c.bit_count(), size), J(c, left - 1), evaluate=False) for _, c in cells]
            options.append(sp.Add(*terms, evaluate=False))
        n_terms += len(options)
        if n_terms > max_terms:
            raise InputError(f"the unrolled recursion has more than max_terms={max_terms} actions; "
                             "use a smaller depth, fewer layers or a larger max_terms")
        memo[key] = options[0] if len(options) == 1 else sp.Min(*options, evaluate=False)
        return memo[key]

    return J(solver.full, layers)


def unroll_cost(prior, layers: int, width: int, max_terms: int = MAX_UNROLLED_TERMS) -> tuple[float, float]:
    """``(bytes, seconds)`` of ``fv derive bellman --unroll`` (building, evaluating and printing the unrolled
    recursion), from its counts, without building it (:mod:`fvsym.guards.costs` holds the measured constants).
    Numeric scales: linear in the written-out size (:func:`unrolled_size`). Symbolic alpha: simplifying the
    ``Min`` over the actions dominates, linear in the number of distinct actions; when the optimum is zero
    (every leaf identified) the ``Min`` collapses at once and the actions cost little."""
    from fvsym.guards import costs

    prior, layers, solver = _unroll_solver(prior, layers, width)
    size, actions = _unrolled_counts(prior, layers, solver, max_terms)
    memory = costs.UNROLL_BASE_BYTES + costs.UNROLL_BYTES_PER_NODE * size
    if prior.is_numeric:
        return memory, costs.UNROLL_BASE_SECONDS + costs.UNROLL_SECONDS_PER_NODE * size
    from fvsym.priors import TreePrior

    numeric = _Solver(TreePrior(prior.depth, "1/2"), width)  # the structure only: zero for one alpha, for all
    zero = numeric.loss(numeric.full, numeric.value(numeric.full, layers)) == 0 if layers else False
    per_action = costs.UNROLL_SYMBOLIC_SECONDS_PER_ACTION[zero]
    return memory, costs.UNROLL_BASE_SECONDS + per_action * actions


def _unrolled_counts(prior, layers, solver, max_terms) -> tuple[int, int]:
    """``(nodes written out in full, distinct actions)`` of the unrolled recursion."""
    memo: dict[tuple[int, int], int] = {}
    n_terms = 0

    def size(S: int, left: int) -> int:
        nonlocal n_terms
        if left == 0 or S.bit_count() == 1:
            return 1
        if (S, left) in memo:
            return memo[(S, left)]
        total = 0
        options = list(solver.choices(S))
        n_terms += len(options)
        if n_terms > max_terms:
            raise InputError(f"the unrolled recursion has more than max_terms={max_terms} actions; "
                             "use a smaller depth, fewer layers or a larger max_terms")
        for _, cells in options:
            total += 1 + sum(2 + size(c, left - 1) for _, c in cells)
        memo[(S, left)] = total
        return total

    return size(solver.full, layers), n_terms


def unrolled_size(prior, layers: int, width: int, max_terms: int = MAX_UNROLLED_TERMS) -> int:
    """The number of nodes of :func:`unroll`'s expression written out in full (shared subtrees counted
    each time they appear, as printing and simplifying meet them): its price, counted without building it.
    Raises the ValueError of ``unroll`` past ``max_terms`` actions."""
    prior, layers, solver = _unroll_solver(prior, layers, width)
    return _unrolled_counts(prior, layers, solver, max_terms)[0]


