"""Gaussian prior (docs/theory.md section 5): posterior covariance and loss of a design, rank-constrained
water-filling, the optimal unit-class design, and Theorem G1 (no advantage of depth).

Everything is exact for exact inputs (integers, Rationals, strings such as ``"1/2"``) and symbolic
where a Symbol is passed; this module loads sympy only (the numeric check of Theorem G1 by BFGS is
:func:`fvnum.priors.gaussian.numeric_deep_shallow_gap`).

Water-filling, derived. With weight ``s_i`` on the eigen-direction of ``c_i`` the loss is
``sum_i c_i / (1 + s_i c_i / tau^2)``. Each term is convex in ``s_i``, and the reduction
``c_i - c_i / (1 + s_i c_i / tau^2) = s_i c_i^2 / (tau^2 + s_i c_i)`` grows with ``c_i``, so weight
belongs on the largest eigenvalues: a design of rank ``<= B`` is best on the top ``min(B, D)``
eigen-directions, and there the problem is convex. Its KKT conditions with the top ``j`` directions
active give the water level ``nu`` as the root of the linear equation ``sum_{i<=j} (nu - tau^2/c_i) = B``:

    nu_j = (B + tau^2 S_j) / j,   S_j = sum_{i<=j} 1/c_i,   s_i = nu_j - tau^2 / c_i,
    loss_j = j^2 tau^2 / (B + tau^2 S_j) + sum_{i>j} c_i.

The top-``j`` solution is feasible (every ``s_i >= 0``) iff ``tau^2 G_j <= B`` with
``G_j = sum_{i<=j} (1/c_j - 1/c_i)``, which grows with ``j``; the optimum uses the largest feasible
``j <= min(B, D+)`` (``D+``: the number of nonzero eigenvalues). For ``tau = 0`` every ``j`` is
feasible and the loss is the sum of the ``D - B`` smallest eigenvalues.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from fvsym import _symbols
from fvsym._formula import Formula
from fvsym._validate import _short, check_choice, check_int, check_tau, to_exact
from fvsym.priors import GaussianPrior, TreePrior
from fvsym.errors import InputError

MAX_TREE_DEPTH = 12  # matched Gaussian of a tree: D = 2^K - 1 eigenvalues, handled exactly
COVARIANCES = ("matched", "isotropic")  # THEORY.md section 5: the matched Gaussian of the tree, or I_D


def check_covariance(cov) -> str:
    """One of ``COVARIANCES`` (one-line ValueError naming them otherwise)."""
    return check_choice(cov, "cov", COVARIANCES)


@dataclass(frozen=True)
class WaterFilling:
    """Optimum of rank-constrained water-filling.

    ``loss``: the minimal ``sum_i c_i / (1 + s_i c_i / tau^2)``; ``weights``: the optimal ``s_i``,
    aligned with the eigenvalues as given. Both are sympy expressions (``Piecewise`` when ``tau`` or
    the eigenvalues are symbolic and the active set depends on them).
    """

    loss: sp.Expr
    weights: tuple

    def to_dict(self) -> dict:
        return {"loss": sp.sstr(self.loss), "loss_float": float(self.loss) if self.loss.is_number else None,
                "weights": [sp.sstr(w) for w in self.weights]}


@dataclass(frozen=True)
class DepthComparison:
    """Theorem G1: optimal losses of the deep (``L = B, d = 1``) and shallow (``L = 1, d = B``) systems.

    ``shallow`` is the exact water-filling optimum. ``deep`` comes from the route named in ``route``:
    ``"numeric"``: a float, numerical optimisation (BFGS) of the sequential (Bellman) problem
    (:func:`fvnum.priors.gaussian.numeric_deep_shallow_gap`);
    ``"symbolic"``: exact (sympy), from the identity "deep sequential posterior = shallow stacked
    posterior" checked to simplify to zero (``identity_checked``) and the trace of the sequential
    posterior of an optimal design. ``gap = deep - shallow`` (zero by Theorem G1).
    """

    deep: object
    shallow: sp.Expr
    route: str = "numeric"
    identity_checked: bool = False
    detail: str = ""

    @property
    def gap(self):
        if self.route == "numeric":
            return self.deep - float(self.shallow)
        return sp.simplify(self.deep - self.shallow)

    def to_dict(self) -> dict:
        return {"deep": str(self.deep), "shallow": sp.sstr(self.shallow), "gap": str(self.gap),
                "route": self.route, "identity_checked": self.identity_checked, "detail": self.detail}


# --- posterior of a design ---------------------------------------------------------------
def _as_gaussian(prior) -> GaussianPrior:
    """A GaussianPrior as given, the matched Gaussian of a TreePrior, or a matrix (validated)."""
    if isinstance(prior, GaussianPrior):
        return prior
    if isinstance(prior, TreePrior):
        return GaussianPrior.matched(prior)
    return GaussianPrior(prior)


def _covariance(prior) -> sp.Matrix:
    return prior.covariance if isinstance(prior, TreePrior) else _as_gaussian(prior).cov


def _design(W, dim: int) -> sp.Matrix:
    W = sp.Matrix(W) if not isinstance(W, sp.MatrixBase) else W
    if W.rows == 0 or W.cols == 0:
        return sp.zeros(0, dim)
    if W.cols != dim:
        raise InputError(f"design must have {dim} columns (the latent dimension), got shape {W.shape}")
    return W.applyfunc(lambda x: to_exact(x, "design entry"))


def _gain(C: sp.Matrix, W: sp.Matrix, tau) -> sp.Matrix:
    """``(W C W^T + tau^2 I)^-1``, or the pseudo-inverse of ``W C W^T`` when ``tau = 0``.

    The pseudo-inverse is the ``tau -> 0`` limit of ``C W^T (W C W^T + tau^2 I)^-1 W C``: on the null
    space of ``W C W^T`` the vector ``C W^T v`` vanishes, so only the range contributes.
    """
    M = W * C * W.T
    if tau.is_zero:
        return M.pinv()
    return (M + tau**2 * sp.eye(W.rows)).inv()


def posterior_covariance(cov, W, tau) -> sp.Matrix:
    """Posterior covariance ``P = (C^-1 + W^T W / tau^2)^-1`` after measuring ``W theta + tau xi``.

    Computed as ``P = C - C W^T (W C W^T + tau^2 I)^-1 W C``, which needs no inverse of ``C`` (valid
    for singular ``C``) and, with the pseudo-inverse, also holds at ``tau = 0``. ``cov`` is a
    GaussianPrior, a TreePrior (its covariance) or a symmetric PSD matrix; ``W`` is ``k x D``
    (``k = 0`` allowed); ``tau >= 0`` a number or a Symbol. Exact for exact inputs.
    """
    P = stacked_posterior(cov, W, tau)
    return P.applyfunc(lambda x: x if x.is_Rational else sp.simplify(x))


def design_loss(prior, W, tau):
    """Loss ``tr P`` of the fixed design ``W`` (docs/theory.md section 4 and 5), exact for exact inputs.

    ``tr P`` is also the loss of the best *linear* decoder (LMMSE) for any prior with covariance
    ``C``, e.g. a TreePrior, which is accepted directly.
    """
    C = _covariance(prior)
    W = _design(W, C.rows)
    t = check_tau(tau)
    if W.rows == 0:
        return sp.simplify(C.trace())
    CW = C * W.T
    reduction = (_gain(C, W, t) * (CW.T * CW)).trace()  # tr(C W^T G W C) = tr(G W C^2 W^T)
    return sp.simplify(C.trace() - reduction)


# --- water-filling -----------------------------------------------------------------------
@cache
def _water_level():
    """Water level of the top-``j`` KKT solution: the root ``nu`` of ``j nu - tau^2 S_j = B``
    (from ``s_i = nu - tau^2 / c_i`` summed over the active set), solved once symbolically."""
    nu, j, B, tau, S = sp.symbols("nu j B tau S")
    (root,) = sp.solve(sp.Eq(j * nu - tau**2 * S, B), nu)
    return sp.Lambda((j, B, tau, S), root)


def _kkt_level(j, budget, tau, inv_sum):
    return _water_level()(j, budget, tau, inv_sum)


def _kkt_loss(j, budget, tau, inv_sum, rest):
    """Loss of the top-``j`` KKT solution: each active term is ``c_i / (nu c_i / tau^2) = tau^2 / nu``."""
    return j**2 * tau**2 / (budget + tau**2 * inv_sum) + rest


def _decreasing_order(c: list) -> list[int]:
    if all(v.is_number for v in c):
        # numeric order of exact values (radicals, CRootOf); stable: ties keep their order
        return sorted(range(len(c)), key=lambda i: -float(sp.re(sp.N(c[i], 30))))
    for i in range(len(c) - 1):  # symbolic: taken as given, refuted only where decidable
        if (c[i] - c[i + 1]).is_negative:
            raise InputError(f"symbolic eigenvalues must be given largest first, got {c[i]} before {c[i + 1]}")
    return list(range(len(c)))


def water_filling(eigenvalues, budget, tau) -> WaterFilling:
    """Rank-constrained water-filling (docs/theory.md section 5), solved exactly through its KKT conditions.

    Minimises ``sum_i c_i / (1 + s_i c_i / tau^2)`` over ``s_i >= 0`` with ``sum s_i = B`` and at most
    ``B`` nonzero (a design of ``B`` unit rows has rank ``<= B``; ``budget > len(eigenvalues)`` is
    allowed). ``tau = 0`` gives the sum of the ``D - B`` smallest eigenvalues. Numeric eigenvalues
    may come in any order; symbolic ones must be given largest first. A symbolic ``tau`` (or
    symbolic eigenvalues) gives a ``Piecewise`` over the active-set size. See the module docstring
    for the derivation.
    """
    c = [to_exact(v, "eigenvalue") for v in eigenvalues]
    if not c:
        raise InputError("water_filling needs at least one eigenvalue")
    for v in c:
        if v.is_negative:
            raise InputError(f"eigenvalues must be >= 0, got {v}")
    B = check_int(budget, "budget", minimum=0)
    t = check_tau(tau)
    order = _decreasing_order(c)
    cs = [c[i] for i in order]
    D = len(cs)
    rank = {i: r for r, i in enumerate(order)}  # position of eigenvalue i in decreasing order
    n_pos = sum(1 for v in cs if not v.is_zero)

    weights_sorted: list = [sp.Integer(0)] * D
    if n_pos == 0:  # C = 0: nothing to learn; spread the budget over the first min(B, D) directions
        for i in range(min(B, D)):
            weights_sorted[i] = sp.Rational(B, min(B, D))
        return WaterFilling(sp.Integer(0), tuple(weights_sorted[rank[i]] for i in range(D)))

    J = min(B, n_pos)
    total = sum(cs, sp.Integer(0))
    if J == 0:  # no budget: nothing measured
        return WaterFilling(total, tuple(sp.Integer(0) for _ in range(D)))
    prefix, inv_sum = [sp.Integer(0)], [sp.Integer(0)]
    for v in cs[:J]:
        prefix.append(prefix[-1] + v)
        inv_sum.append(inv_sum[-1] + 1 / v)

    loss_pieces, weight_pieces = [], [[] for _ in range(D)]
    for j in range(J, 0, -1):
        gap = j / cs[j - 1] - inv_sum[j]  # G_j = sum_{i<=j} (1/c_j - 1/c_i) >= 0
        if not gap.is_number:
            gap = sp.simplify(gap)
        feasible = sp.true if gap == 0 else sp.sympify(t**2 * gap <= B)
        if feasible == sp.false:
            continue
        nu = _kkt_level(j, B, t, inv_sum[j])
        loss_j = sp.simplify(_kkt_loss(j, B, t, inv_sum[j], total - prefix[j]))
        loss_pieces.append((loss_j, feasible))
        for i in range(D):
            weight_pieces[i].append((nu - t**2 / cs[i] if i < j else sp.Integer(0), feasible))
        if feasible == sp.true:
            break
    if not loss_pieces or loss_pieces[-1][1] != sp.true:  # j = 1 is always feasible (G_1 = 0)
        raise AssertionError("water-filling: no feasible active set")  # pragma: no cover

    def piecewise(pieces):
        return pieces[0][0] if len(pieces) == 1 else sp.Piecewise(*pieces)

    loss = piecewise(loss_pieces)
    weights_sorted = [piecewise(p) for p in weight_pieces]
    return WaterFilling(loss, tuple(weights_sorted[rank[i]] for i in range(D)))


@cache
def isotropic_loss() -> Formula:
    """Optimal loss for ``C = I_D``, budget ``B`` and noise ``tau`` (unit class), derived from the
    water-filling KKT solution: with every ``c_i = 1``, ``S_j = j``, the unmeasured rest is ``D - j``
    and ``G_j = 0``, so every ``j`` is feasible and the optimum takes ``j = min(B, D)``.
    """
    D, B, tau = _symbols.dim, _symbols.budget, _symbols.tau
    j, i = sp.Symbol("j", integer=True, positive=True), sp.Symbol("i", integer=True, positive=True)
    c = sp.Integer(1)  # every eigenvalue of I_D
    inv_sum = sp.summation(1 / c, (i, 1, j))
    rest = sp.summation(c, (i, j + 1, D))
    gap = sp.summation(1 / c - 1 / c, (i, 1, j))
    if gap != 0:  # pragma: no cover - a derivation step, not an input check
        raise AssertionError("isotropic water-filling: the active set is not free")
    loss_j = _kkt_loss(j, B, tau, inv_sum, rest)
    expr = sp.Piecewise(
        (sp.simplify(loss_j.subs(j, B)), B <= D),
        (sp.simplify(loss_j.subs(j, D)), True),
    )
    return Formula(
        "isotropic_loss",
        expr,
        (D, B, tau),
        "docs/theory.md section 5: water-filling for C = I_D (B <= D and B > D)",
        doc=isotropic_loss.__doc__ or "",
    )


# --- optimal design ----------------------------------------------------------------------
def _eigenbasis(C: sp.Matrix) -> tuple[list, list]:
    """Eigenvalues (largest first where numeric) and orthonormal eigenvectors of symmetric ``C``."""
    if C.is_diagonal():
        vals = [C[i, i] for i in range(C.rows)]
        vecs = [sp.eye(C.rows)[:, i] for i in range(C.rows)]
    else:
        vals, vecs = [], []
        for value, _, basis in C.eigenvects():
            for v in sp.GramSchmidt(basis, True):
                vals.append(value)
                vecs.append(v.applyfunc(sp.simplify))
    order = _decreasing_order(vals)
    return [vals[i] for i in order], [vecs[i] for i in order]


def _is_one(x) -> bool:
    """Exactly 1, or within rounding of 1 when the weights are floats (a float ``tau``)."""
    return x == 1 or (x.has(sp.Float) and abs(float(x) - 1) < 1e-9)


def _unit_rows(weights: list, n_rows: int) -> sp.Matrix:
    """``n_rows x j`` matrix with unit rows and ``M^T M = diag(weights)`` (``sum weights = n_rows``).

    Rotation construction: start from the rows ``sqrt(s_i) e_i`` (then zero rows), which are mutually
    orthogonal with squared norms ``s_i``. Pick an unfinished row ``a`` with norm^2 ``n_a > 1`` and one
    ``b`` with ``n_b < 1`` and rotate the pair: ``r_a <- c r_a + s r_b``, ``r_b <- -s r_a + c r_b``
    with ``c^2 = (1 - n_b)/(n_a - n_b)``. A rotation of two rows keeps ``M^T M``; the new ``r_a`` has
    norm exactly 1 (finished) and ``r_b`` has ``n_a + n_b - 1``, still orthogonal to the unfinished
    rows. Each step finishes a row and the norms keep summing to the number of unfinished rows, so
    after at most ``n_rows - 1`` steps every row is a unit vector (a constructive Schur-Horn step).
    """
    j = len(weights)
    rows = [[sp.sqrt(w) if col == i else sp.Integer(0) for col in range(j)] for i, w in enumerate(weights)]
    rows += [[sp.Integer(0)] * j for _ in range(n_rows - j)]
    norms = list(weights) + [sp.Integer(0)] * (n_rows - j)
    open_rows = [r for r in range(n_rows) if not _is_one(norms[r])]
    while open_rows:
        a = next(r for r in open_rows if norms[r] > 1)
        b = next(r for r in open_rows if norms[r] < 1)
        cos2 = (1 - norms[b]) / (norms[a] - norms[b])
        cos, sin = sp.sqrt(cos2), sp.sqrt(1 - cos2)
        ra, rb = rows[a], rows[b]
        rows[a] = [sp.simplify(cos * x + sin * y) for x, y in zip(ra, rb)]
        rows[b] = [sp.simplify(-sin * x + cos * y) for x, y in zip(ra, rb)]
        norms[a], norms[b] = sp.Integer(1), norms[a] + norms[b] - 1
        open_rows = [r for r in open_rows if not _is_one(norms[r])]
    return sp.Matrix(rows) if n_rows else sp.zeros(0, j)


def optimal_design(prior, budget, tau) -> sp.Matrix:
    """An optimal unit-class design (``B x D``, unit rows) for a Gaussian prior; its ``design_loss``
    equals ``water_filling(eigenvalues, B, tau).loss``.

    The water-filling weights ``s_i`` live on the top eigen-directions ``v_i`` of ``C``; the design
    must satisfy ``W^T W = sum_i s_i v_i v_i^T`` with unit rows. Write ``W = M V^T`` with ``V`` the
    active eigenvectors and ``M`` (``B x j``) built by :func:`_unit_rows`: exact rotations of the
    rows ``sqrt(s_i) e_i`` that make every row a unit vector while keeping ``M^T M = diag(s)``.
    Integer weights (e.g. isotropic ``B <= D``) give plain eigen-directions. ``tau`` must be a number.
    """
    C = _covariance(prior)
    B = check_int(budget, "budget", minimum=0)
    t = check_tau(tau)
    if not t.is_number:
        raise InputError(f"optimal_design needs a numeric tau (the active set depends on it), got {_short(tau)}")
    vals, vecs = _eigenbasis(C)
    if not all(v.is_number for v in vals):
        raise InputError("optimal_design needs a numeric covariance")
    weights = water_filling(vals, B, t).weights
    active = [i for i, s in enumerate(weights) if s != 0]
    if B == 0:
        return sp.zeros(0, C.rows)
    M = _unit_rows([weights[i] for i in active], B)
    V = sp.Matrix.hstack(*[vecs[i] for i in active])
    return (M * V.T).applyfunc(sp.simplify)


# --- Theorem G1 --------------------------------------------------------------------------
def sequential_posterior(cov, W, tau) -> sp.Matrix:
    """Posterior covariance of the deep system: the rows of ``W`` read one per layer (width 1), each
    a rank-one Bayes update ``P <- P - P w w^T P / (w^T P w + tau^2)`` (docs/theory.md section 3 for a
    Gaussian belief; the update does not depend on the value read). Exact, symbolic where the
    inputs are (``tau``, the covariance, the rows of ``W``)."""
    P = _covariance(cov)
    W = _design(W, P.rows)
    t = check_tau(tau)
    for r in range(W.rows):
        w = W[r, :].T
        u = P * w
        denom = (w.T * u)[0] + t**2
        if denom.is_zero:
            continue  # nothing left to learn along w (only at tau = 0)
        P = P - u * u.T / denom
    return P


def stacked_posterior(cov, W, tau) -> sp.Matrix:
    """Posterior covariance of the shallow system, every row of ``W`` read in one layer:
    ``C - C W^T (W C W^T + tau^2 I)^-1 W C``, unsimplified (:func:`posterior_covariance` is this,
    simplified entry by entry)."""
    C = _covariance(cov)
    W = _design(W, C.rows)
    t = check_tau(tau)
    if W.rows == 0:
        return C
    CW = C * W.T
    return C - CW * _gain(C, W, t) * CW.T


def _vanishes(expr) -> bool:
    return sp.cancel(sp.together(expr)) == 0


def g1_identity(cov, W=None, tau=None) -> sp.Matrix:
    """Theorem G1 as an identity: ``sequential_posterior - stacked_posterior``, simplified entry by
    entry; the zero matrix for every input. ``W=None`` takes ``W`` of generic symbolic entries
    ``w_{r,c}`` (an integer ``W`` means that many generic rows) and ``tau=None`` a symbolic ``tau``,
    so a zero result is a proof for all designs and noise levels of that size."""
    C = _covariance(cov)
    t = _symbols.tau if tau is None else check_tau(tau)
    if W is None or isinstance(W, int):
        rows = 2 if W is None else check_int(W, "rows", minimum=1)
        W = sp.Matrix(rows, C.rows, lambda r, c: sp.Symbol(f"w_{r + 1}{c + 1}", real=True))
    diff = sequential_posterior(C, W, t) - stacked_posterior(C, W, t)
    return diff.applyfunc(lambda x: sp.cancel(sp.together(x)))


def _deep_shallow_symbolic(gauss: GaussianPrior, B: int, t) -> DepthComparison:
    """Exact route of Theorem G1 (symbolic ``tau`` or covariance)."""
    C = gauss.cov
    shallow = water_filling(gauss.eigenvalues, B, t).loss
    rows = max(1, min(B, 2) if C.rows * min(B, 2) <= 6 else 1)
    identity = g1_identity(C, rows, t)
    checked = all(x == 0 for x in identity)
    if not checked:  # pragma: no cover - would refute Theorem G1
        raise AssertionError(f"sequential and stacked posteriors differ: {identity}")
    detail = (f"sequential - stacked posterior simplified to zero for {rows} generic symbolic row(s) and "
              f"{'symbolic' if not t.is_number else 'this'} tau; the posterior does not depend on the "
              "values read, so a deep policy is a fixed sequence, i.e. a fixed design, and ")
    weights = water_filling(gauss.eigenvalues, B, t).weights
    if all(w.is_Integer for w in weights) and C.is_diagonal():
        # integer weights: the optimal design reads eigen-directions, whatever tau is
        order = [i for i, w in enumerate(weights) for _ in range(int(w))]
        W = sp.Matrix([[1 if c == i else 0 for c in range(C.rows)] for i in order]) if order \
            else sp.zeros(0, C.rows)
        deep = sp.simplify(sequential_posterior(C, W, t).trace())
        detail += f"the deep loss is tr P after reading eigen-directions {[i + 1 for i in order]} one per layer"
    elif t.is_number and all(x.is_number for x in C):
        W = optimal_design(gauss, B, t)
        deep = sp.simplify(sequential_posterior(C, W, t).trace())
        detail += "the deep loss is tr P after reading the optimal design's rows one per layer"
    else:
        deep = shallow
        detail += ("the deep optimum is the minimum over fixed designs, the water-filling optimum "
                   "(the optimal design depends on tau here, so it is not built)")
    return DepthComparison(deep, shallow, "symbolic", checked, detail)


def deep_shallow_gap(prior, budget, tau) -> DepthComparison:
    """Theorem G1, exactly: the deep optimum (``L = B`` layers of width 1) equals the shallow one
    (``L = 1``); the result's ``gap`` is ``deep - shallow`` (route ``"symbolic"``, see :func:`g1_identity`
    and :class:`DepthComparison`). Symbolic ``tau`` or covariance allowed. The independent numeric check
    (BFGS over the sequence of rows) is :func:`fvnum.priors.gaussian.numeric_deep_shallow_gap`."""
    gauss = _as_gaussian(prior)
    B = check_int(budget, "budget", minimum=0)
    return _deep_shallow_symbolic(gauss, B, check_tau(tau))


# --- the API behind `fv derive gaussian-loss` --------------------------------------------
def gaussian_loss(dim, budget, tau=None, cov="isotropic", depth=None, alpha=None, *, eigenvalues=None,
                  scales=None) -> Formula:
    """Optimal unit-class loss of a Gaussian prior for budget ``B`` and noise ``tau`` (docs/theory.md section 5).

    ``cov="isotropic"``: ``C = I_dim`` (:func:`isotropic_loss` at ``D = dim``). ``cov="matched"``: the
    matched Gaussian of ``TreePrior(depth, alpha)`` (``alpha=None``: symbolic; or of
    ``TreePrior(depth, scales=scales)``); ``dim`` may be omitted or must equal ``2^depth - 1``. Any other
    covariance: ``cov`` a ``GaussianPrior``, a sympy Matrix or a list of rows, or ``eigenvalues`` (the
    spectrum of ``C``: the loss depends on nothing else), solved by :func:`water_filling`.
    ``tau=None`` keeps ``tau`` symbolic. Exact with exact (e.g. ``"1/2"``) inputs; the Formula's params
    are the symbols left free.
    """
    if eigenvalues is not None or not isinstance(cov, str):
        return _custom_gaussian_loss(dim, budget, tau, cov, depth, alpha, eigenvalues, scales)
    if scales is not None:
        if cov != "matched" or alpha is not None:
            raise InputError("scales apply to cov 'matched' (instead of alpha)")
        tree = TreePrior(check_int(depth, "depth", minimum=1), scales=scales)
        return _custom_gaussian_loss(dim, budget, tau, GaussianPrior.matched(tree), None, None, None, None,
                                     what=f"matched Gaussian of {tree!r}")
    cov = check_covariance(cov)
    B = check_int(budget, "budget", minimum=0)
    t = _symbols.tau if tau is None else check_tau(tau)
    a = None if alpha is None else to_exact(alpha, "alpha")
    return _gaussian_loss(None if dim is None else check_int(dim, "dim", minimum=1), B, t, cov,
                          None if depth is None else check_int(depth, "depth", minimum=1), a)


def _custom_gaussian_loss(dim, budget, tau, cov, depth, alpha, eigenvalues, scales, what=None) -> Formula:
    """``gaussian_loss`` of a covariance given as a prior, a matrix or its eigenvalues (water-filling)."""
    if depth is not None or alpha is not None or scales is not None:
        raise InputError("depth, alpha and scales apply only to cov 'matched'")
    if eigenvalues is not None:
        if not isinstance(cov, str) or cov != "isotropic":
            raise InputError("give the covariance (cov) or its eigenvalues, not both")
        if isinstance(eigenvalues, (str, bytes)) or not hasattr(eigenvalues, "__iter__"):
            raise InputError(f"eigenvalues must be a sequence of numbers >= 0, got {eigenvalues!r:.60}")
        values = tuple(to_exact(v, "eigenvalue") for v in eigenvalues)
        if not values:
            raise InputError("eigenvalues must not be empty")
        for v in values:
            if v.is_number and v < 0:
                raise InputError(f"eigenvalues must be >= 0 (C is a covariance), got {v}")
        what = what or f"covariance of eigenvalues {', '.join(map(str, values))}"
    else:
        prior = cov if isinstance(cov, GaussianPrior) else GaussianPrior(cov)
        values = prior.eigenvalues
        what = what or f"the given {prior.dim} x {prior.dim} covariance"
    if dim is not None and check_int(dim, "dim", minimum=1) != len(values):
        raise InputError(f"dim must equal the covariance's dimension {len(values)}, got {dim}")
    B = check_int(budget, "budget", minimum=0)
    t = _symbols.tau if tau is None else check_tau(tau)
    expr = water_filling(list(values), B, t).loss
    params = tuple(s for s in (_symbols.alpha, _symbols.tau) if s in expr.free_symbols)
    return Formula("gaussian_loss", expr, params, f"docs/theory.md section 5: water-filling, {what}")


@cache
def _gaussian_loss(dim, B, t, cov, depth, alpha) -> Formula:
    if cov == "isotropic":
        if depth is not None or alpha is not None:
            raise InputError("depth and alpha apply only to cov 'matched', not 'isotropic'")
        if dim is None:
            raise InputError("cov 'isotropic' needs dim")
        f = isotropic_loss()
        expr = sp.simplify(f.expr.subs({_symbols.dim: dim, _symbols.budget: B, _symbols.tau: t}))
        source = f"{f.source}; D = {dim}"
    else:
        if depth is None:
            raise InputError("cov 'matched' needs depth")
        if depth > MAX_TREE_DEPTH:
            raise InputError(f"depth must be <= {MAX_TREE_DEPTH} for cov 'matched' (D = 2^depth - 1), got {depth}")
        tree = TreePrior(depth, _symbols.alpha if alpha is None else alpha)
        if dim is not None and dim != tree.n_nodes:
            raise InputError(f"dim must equal 2^depth - 1 = {tree.n_nodes} for cov 'matched', got {dim}")
        # eigenvalues of the matched covariance, largest first: a_k^2 / 2^(k-1), 2^(k-1) times
        eigenvalues = [sp.simplify(a**2 / 2**k) for k, a in enumerate(tree.scales) for _ in range(2**k)]
        expr = water_filling(eigenvalues, B, t).loss
        source = f"docs/theory.md section 5: water-filling, matched Gaussian of {tree!r}"
    params = tuple(s for s in (_symbols.alpha, _symbols.tau) if s in expr.free_symbols)
    return Formula("gaussian_loss", expr, params, source)


__all__ = [
    "COVARIANCES",
    "DepthComparison",
    "WaterFilling",
    "check_covariance",
    "deep_shallow_gap",
    "design_loss",
    "g1_identity",
    "gaussian_loss",
    "isotropic_loss",
    "optimal_design",
    "posterior_covariance",
    "sequential_posterior",
    "stacked_posterior",
    "water_filling",
]
