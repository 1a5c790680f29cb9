"""Gradient descent in context, its mean-field limit (docs/theory.md section 13, the row ``gd_steps``).

L layers with residual values and ``d = D`` channels a layer are L steps of preconditioned gradient descent on
the context's squared error, ``theta_hat_l = theta_hat_(l-1) + Gamma_l (1/N) sum_i x_i (y_i - <theta_hat_(l-1), x_i>)``
from ``theta_hat_0 = 0``. With scalar steps ``Gamma_l = gamma_l I`` and ``S = X^T X / N``, ``b = X^T y / N``:

    theta - theta_hat_L = Q(S) theta - P(S) X^T eps / N,   Q(lambda) = prod_l (1 - gamma_l lambda),
    P(lambda) = (1 - Q(lambda)) / lambda,

an identity of polynomials in ``S``. ``X`` is rotation invariant, so ``E[Q(S)^2]`` is a multiple of ``I`` and for
any prior independent of the tokens (tree, Gaussian, atoms)

    E||theta - theta_hat_L||^2 = E||theta||^2 E[tr Q(S)^2] / D + (s2 / N) E[tr S P(S)^2].

**The limit** ``N, D -> oo``, ``N / D = a``: ``tr f(S) / D -> int rho_MP(lambda; a) f(lambda) dlambda``, the
Marchenko-Pastur law of ``X^T X / N`` (ratio ``c = D / N = 1/a``; an atom of mass ``1 - a`` at 0 when ``a < 1``).
Its moments are the Narayana polynomials ``m_k = sum_(j=0)^(k-1) N(k, j+1) a^-j`` (:func:`mp_moment`), so the loss
relative to the prior's, ``int rho_MP Q^2 + (sigma2 / a) int rho_MP lambda P^2`` with ``sigma2 = s2 / E||theta||^2``
(the label noise over the signal, held fixed as ``D`` grows; with ``s2`` fixed it vanishes in the limit), is a
polynomial in the steps and ``1/a`` (:func:`gd_steps_loss`).

**One step per layer** (noiseless). The minimum of ``int rho Q^2`` over polynomials of degree ``L`` with
``Q(0) = 1`` is ``1 / K_L(0, 0)``, ``K_L(0, 0) = sum_(n<=L) P_n(0)^2 / ||P_n||^2`` with ``P_n`` the monic orthogonal
polynomials of ``rho_MP``. Their Jacobi parameters (from the moments) are ``alpha_0 = 1``, ``alpha_n = 1 + 1/a``,
``beta_n = 1/a``, so ``P_n(0)`` solves ``P_(n+1) = -(1 + c) P_n - c P_(n-1)``, ``P_0 = 1``, ``P_1 = -1``: ``(-1)^n``;
``||P_n||^2 = c^n``; the loss is ``1 / sum_(n=0)^L a^n`` (``1/(L+1)`` at ``a = 1``). The minimiser is orthogonal to
``lambda rho_MP``, a semicircle centred at ``mu = 1 + 1/a`` of radius ``2 / sqrt(a)`` (Jacobi parameters ``mu``,
``c``), so ``Q`` is a Chebyshev polynomial of the second kind with real zeros: ``gamma_l = 1 / (mu + 2 cos(pi l /
(L+1)) / sqrt(a))``, ``l = 1..L``.

**One shared step** ``Gamma_l = (gamma / L) I``. ``int rho (1 - g lambda)^(2L)`` is convex in ``g = gamma / L``,
and its derivative ``-2L int lambda rho (1 - g lambda)^(2L-1)`` vanishes at ``g = 1 / mu = a / (1 + a)`` because
``lambda rho_MP`` is symmetric about ``mu`` (its odd central moments vanish): each layer takes the one-step optimum.
With ``M_n = int rho (mu - lambda)^n = mu M_(n-1) - int lambda rho (mu - lambda)^(n-1)`` and the semicircle's
central moments ``Catalan(m) a^-m`` (order ``2m``), the loss is ``1 - sum_(m<L) Catalan(m) a^-m / mu^(2m+1)``:
``1/(1+a)`` at ``L = 1``, ``(1+2a)/(1+a)^3`` at ``L = 2`` (3/8 at ``a = 1``, against 1/3 with a step per layer).
Summed to infinity the series leaves ``max(0, 1 - a)``, the atom no step can reach, so the loss is that plus the
tail ``sum_(m>=L)``: ``Catalan(L) a^-L`` at large ``a``, against ``a^-L`` with a step per layer.

With label noise (``sigma2 > 0``) the loss is still quadratic in the coefficients of ``Q``: its minimum over
polynomials is a rational function of ``a`` and ``sigma2`` at each ``L`` (:func:`gd_steps_noisy_limit`), attained by
real per-layer steps where the minimiser's zeros are real (at small ``sigma2``; a lower bound otherwise); the shared step has a
closed form at ``L = 1``, ``(1 + sigma2) / (1 + sigma2 + a)``, and exact algebraic numbers otherwise
(:func:`gd_steps_optimum`). The finite-``N`` row on any prior is ``fvnum.gd_steps``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from fvsym import _symbols
from fvsym._formula import Formula
from fvsym._validate import check_choice, check_int, to_exact
from fvsym.errors import InputError

SOURCE = "docs/theory.md §13"
STEPS = ("shared", "per_layer")  # one step shared by the layers (Gamma_l = gamma / L), or a step of each layer's own
MAX_EXACT_LAYERS = 12  # the exact (sympy) optimum with label noise: a (L+1) x (L+1) system or a degree 2L-1 root

_a, _L, _s2, _lam, _g, _l = (_symbols.ratio, _symbols.layers, _symbols.sigma2, _symbols.eigenvalue, _symbols.step,
                             _symbols.layer)
_n = sp.Symbol("n", integer=True, nonnegative=True)  # summation indices
_j = sp.Symbol("j", integer=True, nonnegative=True)


def check_steps(steps) -> str:
    """One of :data:`STEPS` (a one-line ValueError naming them otherwise)."""
    return check_choice(steps, "steps", STEPS)


def check_ratio(a):
    """``a = N / D`` in (0, oo), exact (``"1/2"`` is a Rational)."""
    value = to_exact(a, "a (N/D)")
    if not value.is_number or value.is_real is not True or not value > 0:
        raise InputError(f"a (N/D) must be a number in (0, oo), got {a!r}")
    return value


def check_layers(layers, maximum: int | None = None) -> int:
    return check_int(layers, "layers (L)", 1, maximum)


# --- the Marchenko-Pastur law ----------------------------------------------------------------------------------
def _moment(k: int):
    """``m_k(a)``: Narayana numbers ``N(k, j+1) = C(k, j+1) C(k, j) / k`` weighting ``c^j = a^-j``."""
    if k == 0:
        return sp.Integer(1)
    return sp.expand(sum(sp.binomial(k, j + 1) * sp.binomial(k, j) / k * _a**-j for j in range(k)))


@cache
def mp_moment(k: int) -> Formula:
    """``int rho_MP(lambda; a) lambda^k dlambda``, the limit of ``E tr (X^T X / N)^k / D`` at ``N / D = a``."""
    k = check_int(k, "k (moment order)", 0)
    return Formula(f"mp_moment_{k}", _moment(k), (_a,), SOURCE + " (Marchenko-Pastur moments, Narayana numbers)",
                   doc=f"the {k}-th moment of the Marchenko-Pastur law of X^T X / N, N / D = a")


@cache
def mp_density() -> Formula:
    """The continuous part of ``rho_MP``: ``a sqrt((lambda_+ - lambda)(lambda - lambda_-)) / (2 pi lambda)`` on
    ``lambda_+- = (1 +- 1/sqrt(a))^2``, 0 outside; the atom at 0 has mass ``max(0, 1 - a)`` (:func:`mp_atom`)."""
    lo, hi = (1 - 1 / sp.sqrt(_a)) ** 2, (1 + 1 / sp.sqrt(_a)) ** 2
    expr = _a * sp.sqrt(sp.Max(0, (hi - _lam) * (_lam - lo))) / (2 * sp.pi * _lam)
    return Formula("mp_density", expr, (_a, _lam), SOURCE + " (Marchenko-Pastur law)",
                   doc="density of the continuous part of the Marchenko-Pastur law of X^T X / N")


@cache
def mp_atom() -> Formula:
    """Mass of ``rho_MP`` at ``lambda = 0``: ``max(0, 1 - a)`` (``X^T X`` has rank ``min(N, D)``)."""
    return Formula("mp_atom", sp.Max(0, 1 - _a), (_a,), SOURCE + " (Marchenko-Pastur law)",
                   doc="mass of the Marchenko-Pastur law at 0")


def _integral(poly, weight: int = 0):
    """``int rho_MP lambda^weight poly(lambda)`` for a polynomial in ``lambda``."""
    p = sp.Poly(sp.expand(poly), _lam)
    return sp.expand(sum(c * _moment(m[0] + weight) for m, c in zip(p.monoms(), p.coeffs())))


def _jacobi(moments, n_max: int):
    """Jacobi parameters ``(alpha_0..alpha_n_max, beta_1..beta_n_max)`` of the measure with these moments, by
    Gram-Schmidt on the monic polynomials (``moments[k]`` for ``k <= 2 n_max + 1``)."""
    def inner(p, q):
        poly = sp.Poly(sp.expand(p * q), _lam)
        return sp.cancel(sum(c * moments[m[0]] for m, c in zip(poly.monoms(), poly.coeffs())))

    polys, norms, alphas, betas = [sp.Integer(1)], [inner(1, 1)], [], []
    for n in range(n_max + 1):
        alphas.append(sp.cancel(inner(_lam * polys[n], polys[n]) / norms[n]))
        previous = polys[n - 1] * betas[-1] if n else 0
        polys.append(sp.expand((_lam - alphas[n]) * polys[n] - previous))
        norms.append(inner(polys[-1], polys[-1]))
        betas.append(sp.cancel(norms[-1] / norms[n]))
    return alphas, betas


@cache
def mp_jacobi() -> dict:
    """Jacobi parameters of ``rho_MP`` and of ``lambda rho_MP``, derived from the moments (up to order 4) and
    checked constant: ``{"rho": (alpha_0, alpha, beta), "lambda_rho": (mu, beta)}``."""
    c = 1 / _a
    alphas, betas = _jacobi([_moment(k) for k in range(10)], 3)
    shifted_alphas, shifted_betas = _jacobi([_moment(k + 1) for k in range(10)], 3)
    assert all(sp.cancel(x - alphas[1]) == 0 for x in alphas[1:]) and sp.cancel(alphas[1] - 1 - c) == 0
    assert all(sp.cancel(x - c) == 0 for x in betas + shifted_betas)
    assert all(sp.cancel(x - 1 - c) == 0 for x in shifted_alphas)
    return {"rho": (alphas[0], alphas[1], betas[0]), "lambda_rho": (shifted_alphas[0], shifted_betas[0])}


# --- the limit at fixed steps -------------------------------------------------------------------------------
def _step_symbols(layers: int, steps: str) -> tuple:
    return (_g,) if steps == "shared" else _symbols.steps(layers)


def _q_polynomial(layers: int, steps: str, gammas):
    if steps == "shared":
        return (1 - gammas[0] * _lam / layers) ** layers
    return sp.prod([1 - g * _lam for g in gammas])


@cache
def gd_steps_loss(layers: int, steps: str = "shared") -> Formula:
    """Loss of ``layers`` steps of gradient descent relative to the prior's, at given steps, in the limit:
    ``int rho_MP Q^2 + (sigma2 / a) int rho_MP lambda P^2`` (params ``a``, the steps, ``sigma2``). ``shared``: one
    step ``gamma`` (each layer ``gamma / L``); ``per_layer``: ``gamma_1 .. gamma_L``."""
    layers, steps = check_layers(layers, MAX_EXACT_LAYERS), check_steps(steps)
    gammas = _step_symbols(layers, steps)
    Q = sp.expand(_q_polynomial(layers, steps, gammas))
    P = sp.cancel((1 - Q) / _lam)
    expr = _integral(Q**2) + _s2 / _a * _integral(_lam * P**2)
    return Formula(f"gd_steps_loss_{steps}_L{layers}", sp.expand(expr), (_a,) + gammas + (_s2,),
                   SOURCE + " (gradient descent, Marchenko-Pastur limit at fixed steps)",
                   doc=f"loss / prior's loss of {layers} steps of gradient descent ({steps} steps), N / D = a")


# --- the optimum over the steps ------------------------------------------------------------------------------
@cache
def gd_steps_limit(steps: str = "shared") -> Formula:
    """The optimum over the steps of the noiseless limit, relative to the prior's loss, for every ``L``: params
    ``(a, L)``. ``per_layer``: ``1 / sum_(n=0)^L a^n``; ``shared``: ``1 - sum_(n<L) Catalan(n) a^-n / mu^(2n+1)``,
    ``mu = 1 + 1/a`` (module docstring; the numeric view loses about ``log10(1/loss)`` digits to the subtraction).
    ``f(a=1, L=2)`` evaluates; ``f.subs(L=2).expr`` is the rational function of ``a`` (and ``f.subs(L=2).numba`` its
    compiled view: a sum to a symbolic bound does not compile)."""
    steps = check_steps(steps)
    jac = mp_jacobi()
    if steps == "per_layer":
        alpha0, alpha, beta = jac["rho"]
        p = sp.Function("p")
        at_zero = sp.rsolve(p(_n + 2) + alpha * p(_n + 1) + beta * p(_n), p(_n), {p(0): 1, p(1): -alpha0})
        assert at_zero is not None and sp.simplify(at_zero - (-1) ** _n) == 0
        kernel = sp.Sum(sp.simplify(at_zero**2 / beta**_n), (_n, 0, _L))  # K_L(0, 0) = sum P_n(0)^2 / ||P_n||^2
        expr = 1 / kernel
        how = "1 / K_L(0, 0) from the Jacobi parameters of rho_MP"
    else:
        mu, beta = jac["lambda_rho"]  # lambda rho_MP: a semicircle of centre mu, variance beta
        # int rho (1 - lambda/mu)^n = M_n / mu^n with M_n = int rho (mu - lambda)^n = mu M_(n-1) - s_(n-1), s_j the
        # j-th central moment of the semicircle (Catalan(j/2) beta^(j/2) for even j, 0 for odd): unrolled to 2L,
        central = sp.binomial(2 * _n, _n) / (_n + 1) * beta**_n  # s_(2n)
        expr = 1 - sp.Sum(central / mu ** (2 * _n + 1), (_n, 0, _L - 1))
        how = ("int rho_MP (1 - lambda / mu)^(2L) = 1 - sum_(n<L) Catalan(n) a^-n / mu^(2n+1), mu = 1 + 1/a "
               "(each layer's step a / (1 + a))")
    return Formula(f"gd_steps_limit_{steps}", expr, (_a, _L), SOURCE + f" (gradient descent limit, {steps} steps)",
                   doc=f"noiseless loss / prior's loss of L steps of gradient descent, {steps} steps optimised, "
                       f"N, D -> oo at N / D = a: {how}")


@cache
def gd_step_sizes(steps: str = "shared") -> Formula:
    """The optimal steps of the noiseless limit. ``shared``: ``gamma`` (each layer ``gamma / L``), params
    ``(a, L)``; ``per_layer``: ``gamma_l``, params ``(a, L, l)``, ``l <= L``, the reciprocal zeros of the Chebyshev
    polynomial of ``lambda rho_MP`` (their order does not matter: the steps commute)."""
    steps = check_steps(steps)
    mu, beta = mp_jacobi()["lambda_rho"]
    if steps == "shared":
        return Formula("gd_step_sizes_shared", sp.simplify(_L / mu), (_a, _L),
                       SOURCE + " (optimal shared step)", doc="the optimal shared step gamma (each layer gamma / L)")
    zero = mu + 2 * sp.sqrt(beta) * sp.cos(sp.pi * _l / (_L + 1))  # zeros of U_L on the semicircle lambda rho_MP
    return Formula("gd_step_sizes_per_layer", 1 / zero, (_a, _L, _l), SOURCE + " (optimal per-layer steps)",
                   doc="the optimal step of layer l (any order)", constraints=(sp.Le(_l, _L),))


def _noisy_quadratic(layers: int):
    """``(H, e0)``: the loss with label noise as ``q^T H q`` over the coefficients ``q`` of ``Q``, ``q_0 = 1``."""
    c = 1 / _a
    return sp.Matrix(layers + 1, layers + 1, lambda i, j: _moment(i + j)
                     + (_s2 * c * _moment(i + j - 1) if i and j else 0))


@cache
def gd_steps_noisy_limit(layers: int, steps: str = "per_layer") -> Formula:
    """The optimum over the steps of the limit with label noise, params ``(a, sigma2)``, at ``layers`` layers:
    ``per_layer``: ``1 / (H^-1)_00`` of the quadratic form of the loss in ``Q``'s coefficients (a rational
    function), the minimum over all polynomials ``Q`` with ``Q(0) = 1``. Real steps attain it only where that ``Q``
    has real zeros; with label noise it often has not (``a = 1``, ``sigma2 = 1``, ``L = 2`` already), and there it is a
    lower bound on gradient descent with real steps (:func:`gd_steps_optimum` says which); ``shared``: ``(1 + sigma2) / (1 + sigma2 + a)`` at ``L = 1``; beyond, no closed form (the root of a
    polynomial of degree ``2L - 1``: :func:`gd_steps_optimum` gives it exactly at given numbers)."""
    layers, steps = check_layers(layers, MAX_EXACT_LAYERS), check_steps(steps)
    if steps == "shared" and layers > 1:
        raise InputError(f"the shared step with label noise has no closed form at L = {layers} (a root of degree "
                         f"{2 * layers - 1}); use gd_steps_optimum(a, {layers}, 'shared', sigma2=...)")
    if steps == "shared":  # L = 1: the loss is quadratic in gamma
        loss = gd_steps_loss(1, "shared").expr
        best = sp.solve(sp.diff(loss, _g), _g)[0]
        expr = sp.factor(loss.subs(_g, best))
    else:
        expr = sp.factor(1 / _noisy_quadratic(layers).inv()[0, 0])
    return Formula(f"gd_steps_noisy_limit_{steps}_L{layers}", expr, (_a, _s2),
                   SOURCE + f" (gradient descent limit with label noise, {steps} steps)",
                   doc=f"loss / prior's loss of {layers} steps of gradient descent ({steps} steps optimised), "
                       f"N / D = a, label noise sigma2 = s2 / E||theta||^2")


@dataclass(frozen=True)
class GDOptimum:
    """The optimum of the limit at given numbers: ``loss`` (relative to the prior's) and the ``steps``
    (``(gamma,)`` shared, ``(gamma_1, .., gamma_L)`` per layer), exact sympy numbers (algebraic where they are
    roots), and ``how``."""

    loss: sp.Expr
    steps: tuple
    how: str

    def to_dict(self) -> dict:
        return {"loss": sp.sstr(self.loss), "loss_float": float(self.loss),
                "steps": [float(s) for s in self.steps], "how": self.how}


def gd_steps_optimum(a, layers, steps: str = "shared", sigma2=0) -> GDOptimum:
    """The limit's optimum over the steps at ``a = N / D`` (exact: ``"1/2"``, ints, Rationals; a float is taken at
    its exact value), ``layers`` L and label noise ``sigma2 = s2 / E||theta||^2``. Noiseless: the closed forms
    (:func:`gd_steps_limit`, :func:`gd_step_sizes`). With noise: per layer, the quadratic form's minimiser ``Q``
    and its reciprocal zeros (refused, in one line, where a zero is not real: no real steps attain it); shared, the
    real root of the derivative with the least loss."""
    a = check_ratio(a)
    layers, steps = check_layers(layers, MAX_EXACT_LAYERS), check_steps(steps)
    s2 = to_exact(sigma2, "sigma2")
    if not s2.is_number or not s2 >= 0:
        raise InputError(f"sigma2 must be a number >= 0, got {sigma2!r}")
    if s2 == 0:
        loss = sp.nsimplify(gd_steps_limit(steps).subs(L=layers).exact(a=a))
        sizes = gd_step_sizes(steps)
        found = (sizes.exact(a=a, L=layers),) if steps == "shared" else \
            tuple(sp.simplify(sizes.exact(a=a, L=layers, l=i)) for i in range(1, layers + 1))
        return GDOptimum(sp.simplify(loss), found, "exact: closed form (noiseless)")
    if steps == "per_layer":
        H = _noisy_quadratic(layers).subs({_a: a, _s2: s2})
        q = H.inv()[:, 0]
        loss = sp.nsimplify(1 / q[0])
        Q = sp.Poly([q[i] / q[0] for i in reversed(range(layers + 1))], _lam)
        zeros = Q.real_roots()
        if len(zeros) != layers:
            raise InputError(f"the per-layer optimum over polynomials at a = {a}, sigma2 = {s2}, L = {layers} has "
                             f"complex zeros: no real steps attain it, and its loss {float(loss):.6g} is a lower bound "
                             f"on gradient descent with real steps")
        return GDOptimum(loss, tuple(1 / z for z in zeros), "exact: quadratic form in Q's coefficients, its zeros")
    loss = gd_steps_loss(layers, "shared").expr.subs({_a: a, _s2: s2})
    poly = sp.Poly(sp.expand(loss), _g)
    candidates = poly.diff(_g).real_roots()
    best = min(candidates, key=lambda r: float(poly.eval(r).evalf(30)))
    return GDOptimum(poly.eval(best), (best,), "exact: the real root of the derivative with the least loss")


__all__ = ["GDOptimum", "MAX_EXACT_LAYERS", "STEPS", "check_steps", "gd_step_sizes", "gd_steps_limit", "gd_steps_loss",
           "gd_steps_noisy_limit", "gd_steps_optimum", "mp_atom", "mp_density", "mp_jacobi", "mp_moment"]
