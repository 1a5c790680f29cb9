"""The exact noisy Bellman optimum of small finite priors (docs/theory.md sections 3 and 6).

Coordinate class, layers of width 1, any coordinate readable at every layer (repeats allowed), gaussian channel of
noise ``tau``: the finite prior's counterpart of ``fvnum.optimum.noisy_dp`` (which uses the tree's three reading classes per
node; here a coordinate's atoms may take any values). A belief is the vector ``p`` of the atoms' posterior weights;
with ``U(p) = sum_m p_m ||theta_m||^2 - ||sum_m p_m theta_m||^2``, the expected loss of the posterior mean,

    V_0(p) = U(p),    V_R(p) = min_n  E_{phi ~ sum_m p_m N(theta_mn, tau^2)}  V_{R-1}(post(p, n, phi)),

where ``post(p, n, phi)_m`` is proportional to ``p_m exp(-(phi - theta_mn)^2 / (2 tau^2))``. The expectation over
``phi`` is a trapezoid rule on one lattice of readings ``h Z`` per coordinate, ``h = 2 SPAN tau / (points[R - 1] - 1)``,
kept within ``SPAN`` standard deviations of one of the coordinate's values (the posterior depends on the reading only,
so every atom's rule shares the lattice's child beliefs): ``E f = sum_j h dens(phi_j) f(phi_j)`` with
``dens = sum_m p_m N(phi; theta_mn, tau^2)``. ``V`` is homogeneous of degree one in unnormalised weights, which the
rule uses: ``sum_j (h p . lik_j) V(post_j)``. The minimum over coordinates puts kinks in the integrand, so the rule's
error falls like ``h^2``; :func:`noisy_bellman` solves a second, refined quadrature and reports the difference.
The policy runs the same recursion from each sample's posterior (:class:`FiniteNoisyPolicy`), so its Monte Carlo
loss estimates the value.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fvsym.errors import InputError, ResourceRefused

from fvnum.optimum.noisy_dp import SolvedOptimum
from fvnum.optimum.noisy_work import default_points, refined_points
from fvnum.optimum.noisy_work import SPAN
from fvnum.policies.protocol import Policy

MAX_BUDGET = 3
MAX_WORK = 3e9  # largest work (``work``) solved exactly
RATE = 8e7  # work per second priced: measured 1.1e8 to 2.6e8 on one thread at load 3 (the leaves of trees of
# depth 2 and 3 as atoms, budgets 1 to 3, tau 0.4 to 0.7; solve and refined solve): below the slowest
OVERHEAD = 2e-3  # seconds of Python per array operation group (a coordinate of a belief chunk)
CHUNK_FLOATS = 2**21  # floats of one chunk of child beliefs


def _check_budget(budget) -> int:
    from fvsym._validate import check_int

    return check_int(budget, "budget", 0, MAX_BUDGET)


class FiniteQuadrature:
    """Tables of one finite prior and noise: ``atoms`` (M, D), ``sq`` (M,) their squared norms and, per number
    ``R`` of remaining layers and coordinate ``n``, the lattice's readings ``x[R][n]`` (J,) and rule weights
    ``lik[R][n]`` (J, M): ``h N(x_j; theta_mn, tau^2)``."""

    def __init__(self, atoms: np.ndarray, tau: float, points=(65,)):
        if not tau > 0:
            raise InputError(f"the noisy Bellman recursion needs tau > 0, got {tau}")
        self.atoms = np.ascontiguousarray(atoms, dtype=float)
        self.tau, self.points = float(tau), tuple(int(p) for p in points)
        self.sq = (self.atoms**2).sum(axis=1)
        M, D = self.atoms.shape
        self.x, self.lik = {}, {}
        for R, Q in enumerate(self.points, start=1):
            self.x[R], self.lik[R] = [], []
            for n in range(D):
                x, h = readings(self.atoms[:, n], self.tau, Q)
                z = (x[:, None] - self.atoms[None, :, n]) / self.tau
                self.x[R].append(x)
                self.lik[R].append(h * np.exp(-0.5 * z * z) / (np.sqrt(2 * np.pi) * self.tau))

    @property
    def dim(self) -> int:
        return self.atoms.shape[1]

    def terminal(self, P: np.ndarray) -> np.ndarray:
        """``U(p)`` of beliefs ``P`` (n, M), each normalised."""
        mu = P @ self.atoms
        return P @ self.sq - (mu * mu).sum(axis=1)

    def values(self, P: np.ndarray, R: int) -> tuple[np.ndarray, np.ndarray]:
        """``V_R`` of beliefs ``P`` (n, M) and the coordinate each reads next (1-based; 0 when ``R = 0``)."""
        if R == 0:
            return self.terminal(P), np.zeros(P.shape[0], dtype=np.int64)
        q = self.q_values(P, R)
        best = np.argmin(q, axis=1)
        return q[np.arange(q.shape[0]), best], best + 1

    def q_values(self, P: np.ndarray, R: int) -> np.ndarray:
        """(n, D): the expected final loss of reading each coordinate next, then acting optimally."""
        n, M = P.shape
        out = np.empty((n, self.dim))
        for c, lik in enumerate(self.lik[R]):
            J = lik.shape[0]
            step = max(1, CHUNK_FLOATS // max(1, J * M * (1 + (R > 1) * J)))
            for lo in range(0, n, step):
                Q = P[lo:lo + step, None, :] * lik[None]  # (c, J, M): unnormalised posteriors
                mass = Q.sum(axis=2)  # (c, J): h dens(x_j)
                live = mass > 0
                post = Q / np.where(live, mass, 1.0)[..., None]
                child = self.values(post.reshape(-1, M), R - 1)[0].reshape(mass.shape)
                out[lo:lo + step, c] = np.where(live, mass * child, 0.0).sum(axis=1)
        return out

    def log_likelihood(self, nodes: np.ndarray, readings: np.ndarray) -> np.ndarray:
        """(n, M) log-likelihood of each atom given readings (n, l) of coordinates (n, l), 1-based."""
        vals = self.atoms.T[nodes - 1]  # (n, l, M)
        d = (readings[:, :, None] - vals) / self.tau
        return -0.5 * (d * d).sum(axis=1)


def readings(values: np.ndarray, tau: float, points: int) -> tuple[np.ndarray, float]:
    """The readings of a coordinate whose atoms take ``values``: the points of the lattice ``h Z``,
    ``h = 2 SPAN tau / (points - 1)``, within ``SPAN`` standard deviations of one of the values (each value's
    normal law sees at least its own ``points``-point rule), and ``h``."""
    h = 2 * SPAN * tau / (int(points) - 1)
    u = np.unique(values)
    lo = np.ceil((u - SPAN * tau) / h - 1e-9).astype(np.int64)
    hi = np.floor((u + SPAN * tau) / h + 1e-9).astype(np.int64)
    idx = np.unique(np.concatenate([np.arange(a, b + 1) for a, b in zip(lo, hi)]))
    return idx * h, h


def lattice_sizes(atoms: np.ndarray, tau: float, points: int) -> list[int]:
    """Readings per coordinate of :func:`readings` (the sizes the price counts), without building them."""
    h = 2 * SPAN * tau / (int(points) - 1)
    out = []
    for n in range(atoms.shape[1]):
        u = np.unique(atoms[:, n])
        lo = np.ceil((u - SPAN * tau) / h - 1e-9)
        hi = np.floor((u + SPAN * tau) / h + 1e-9)
        total, top = 0.0, -np.inf  # the union of sorted windows
        for a, b in zip(lo, hi):
            a = max(a, top + 1)
            if b >= a:
                total += b - a + 1
                top = b
        out.append(int(total))
    return out


def work(atoms: np.ndarray, tau: float, budget: int, points=None, beliefs: float = 1.0) -> float:
    """Operations (about one multiply-add each) of ``V_budget`` on ``beliefs`` beliefs: ``J_n`` children per
    coordinate read, ``M`` weights each, and ``U`` (``M (D + 2)``) per belief of the last level."""
    budget = int(budget)
    points = default_points(budget) if points is None else tuple(points)
    M, D = atoms.shape
    total = M * (D + 2.0)
    for R in range(1, budget + 1):
        J = sum(lattice_sizes(atoms, tau, points[R - 1]))
        total = J * (3.0 * M + total)
    return beliefs * total


def solve_seconds(atoms: np.ndarray, tau: float, budget: int, points=None, refine: bool = True) -> float:
    """Upper price of :func:`noisy_bellman`: ``work / RATE`` (and the refined solve's with ``refine``)."""
    points = default_points(budget) if points is None else tuple(points)
    total = work(atoms, tau, budget, points)
    if refine and budget:
        total += work(atoms, tau, budget, refined_points(points))
    return OVERHEAD * atoms.shape[1] * budget + total / RATE


def policy_seconds(atoms: np.ndarray, tau: float, budget: int, samples: int, points=None) -> float:
    """Upper price of running the policy on ``samples`` samples: each layer after the first solves the
    recursion of the layers left from every sample's posterior."""
    points = default_points(budget) if points is None else tuple(points)
    per = sum(work(atoms, tau, R, points) for R in range(1, int(budget)))
    return int(samples) * per / RATE + OVERHEAD * atoms.shape[1] * max(0, int(budget) - 1)


def feasible(atoms: np.ndarray, tau: float, budget: int, points=None) -> bool:
    return int(budget) <= MAX_BUDGET and work(atoms, tau, budget, points) <= MAX_WORK


class FiniteNoisyPolicy(Policy):
    """The exact noisy Bellman policy of a finite prior (``L = B``, ``d = 1``): layer ``l`` reads the coordinate
    that minimises the expected final loss of the recursion from the posterior of the readings so far (the first
    coordinate is the same for every sample). State: the log posterior weights (n, M) of the atoms."""

    name = "optimal"

    def __init__(self, quad: FiniteQuadrature, log_weights: np.ndarray, budget: int, first: int):
        self.quad, self.log_weights = quad, np.asarray(log_weights, dtype=float)
        self.layers, self.width, self.first = int(budget), 1, int(first)

    def start(self, n):
        return np.tile(self.log_weights, (n, 1))

    def rows(self, layer, state, phi):
        if layer == 0:
            return np.array([self.first], dtype=np.int64)
        P = np.exp(state - state.max(axis=1, keepdims=True))
        _, node = self.quad.values(P / P.sum(axis=1, keepdims=True), self.layers - layer)
        return node[:, None]

    def update(self, layer, state, rows, phi_layer):
        return state + self.quad.log_likelihood(rows.nodes(state.shape[0]), phi_layer)

    def work_floats(self, spec, budget):
        return self.quad.atoms.shape[0] * (2 + CHUNK_FLOATS // 4096)

    def __repr__(self) -> str:
        M, D = self.quad.atoms.shape
        return (f"<FiniteNoisyPolicy 'optimal': {self.layers} layers of width 1 at tau {self.quad.tau:.4g} "
                f"(M = {M}, D = {D}), first coordinate {self.first}>")


@dataclass(frozen=True)
class FiniteNoisyBellman(SolvedOptimum):
    """The exact noisy optimum ``value`` = ``V_B(prior)`` of a finite prior, ``budget`` layers of width 1 at
    noise ``tau``, and its ``policy``. ``error``: ``|value - the solve at half the lattice step|`` (the refined
    solve is ``value``; None without ``refine``), as ``fvnum.optimum.noisy_dp.NoisyBellman.error``. ``q_values()``: the
    expected final loss of each first coordinate (its fields: ``fvnum.optimum.noisy_dp.SolvedOptimum``; ``quad`` a
    ``FiniteQuadrature``, ``policy`` a ``FiniteNoisyPolicy``)."""

    def q_values(self) -> np.ndarray:
        """(D,): the expected final loss of reading each coordinate first (labelled: ``.best``, ``.to_dict()``)."""
        from fvnum.estimate import NodeValues

        P = np.exp(self.policy.log_weights - self.policy.log_weights.max())[None]
        q = self.quad.q_values(P / P.sum(), self.budget)[0] if self.budget else np.full(self.quad.dim, self.value)
        return NodeValues(q, np.arange(1, self.quad.dim + 1), "expected final loss")

    def to_dict(self) -> dict:
        return {"value": self.value, "error": self.error, "budget": self.budget, "tau": self.tau,
                "first_node": self.first_node, "points": self.points, "checked_points": self.checked_points,
                "how": self.how}


def noisy_bellman(prior, budget: int, tau: float, *, points=None, refine: bool = True) -> FiniteNoisyBellman:
    """The exact noisy Bellman optimum of a finite prior (``prior.atoms``, ``prior.log_weights``; coordinate class,
    ``L = budget <= 3``, ``d = 1``) under the gaussian channel ``tau > 0``, with its error estimate (``refine``) and
    its policy. Sized by :func:`work` (``MAX_WORK``) and priced under the time cap."""
    from fvsym._validate import check_int

    from fvsym.guards.limits import check_time

    budget = _check_budget(budget)
    atoms, log_w = np.asarray(prior.atoms, dtype=float), np.asarray(prior.log_weights, dtype=float)
    if not tau > 0:
        raise InputError(f"tau = {tau} has no readings to integrate: the noiseless optimum is "
                         "fvnum.priors.atoms.noiseless_bellman")
    points = default_points(budget) if points is None else tuple(
        check_int(p, "points", 3, 10_000) for p in np.atleast_1d(points).tolist())
    if len(points) < budget:
        raise InputError(f"points needs one entry per layer, {budget}, got {points}")
    used = points[:budget]
    M, D = atoms.shape
    if not feasible(atoms, tau, budget, used):
        raise ResourceRefused(f"the exact noisy recursion on {M} atoms (D = {D}) at budget {budget}, tau = {tau:.4g} "
                              f"costs {work(atoms, tau, budget, used):.2g} > {MAX_WORK:.0g} operations; "
                              "greedy_coordinate bounds the optimum from above", limit="work")
    fine = refined_points(used) if refine and budget and feasible(atoms, tau, budget, refined_points(used)) else None
    check_time(f"the exact noisy recursion on {M} atoms (D = {D}, budget {budget})",
               solve_seconds(atoms, tau, budget, used, refine=fine is not None))
    P = np.exp(log_w - log_w.max())[None]
    P /= P.sum()
    quad = FiniteQuadrature(atoms, tau, used)
    V, node = quad.values(P, budget)
    value, first = float(V[0]), int(node[0])
    rule = "/".join(map(str, used[::-1]))
    how = f"exact recursion over the atoms' posteriors, trapezoid rules of {rule} points per value on one lattice " \
          "of readings per coordinate"
    error = 0.0 if budget == 0 else None
    if fine is not None:
        finer = FiniteQuadrature(atoms, tau, fine)
        V2, _ = finer.values(P, budget)
        error = abs(float(V2[0]) - value)
        value = float(V2[0])  # the refined value; the policy keeps the default rule (its price is per sample)
        how = how.replace(rule, "/".join(map(str, fine[::-1]))) + f"; error {error:.2g} = |this - the solve at " \
                                                                   "half the points|"
    policy = FiniteNoisyPolicy(quad, log_w, budget, first)
    return FiniteNoisyBellman(value, budget, float(tau), first, used, how, quad, policy, error, fine)


def bounds(prior, budget: int, channel, noiseless, *, samples: int = 20_000, seed: int = 0, exact=None,
           threads=None, progress=None):
    """Bracket the noisy adaptive optimum of a finite prior (coordinate class, ``L = budget``, ``d = 1``, gaussian
    channel), as ``fvnum.optimum.bracket.bounds`` does the tree's (a ``fvnum.optimum.bracket.Bounds``): ``lower`` the noiseless
    optimum (``noiseless(budget)``: its value, or None where it is not solved, then the trivial 0), ``upper`` the
    better Monte Carlo loss of ``greedy_coordinate`` and, where the recursion is solved, the exact policy;
    ``exact`` the solved optimum (:func:`noisy_bellman`, where its work fits and its price is under half the
    time cap; ``exact``: force it on or off), onto which the bracket collapses with its error estimate."""
    from fvnum.optimum.bracket import Bounds
    from fvnum.estimate import Estimate
    from fvnum.policies.registry import loss_mc
    from fvsym.guards.limits import check_time, max_seconds

    M, D = prior.atoms.shape
    if channel.kind != "gaussian":
        raise InputError(f"bounds on the {prior.name} prior are the gaussian channel's (its exact decoder's); give tau")
    if not 1 <= budget <= D:
        raise InputError(f"bounds need 1 <= budget <= D = {D}, got {budget}")
    tau, skipped = channel.tau, {}
    solve = tau > 0 and int(budget) <= MAX_BUDGET and feasible(prior.atoms, tau, budget)
    if solve and exact is None and solve_seconds(prior.atoms, tau, budget) > max_seconds() / 2:
        solve = False
        skipped["exact"] = (f"not solved: the exact recursion would take about "
                            f"{solve_seconds(prior.atoms, tau, budget):.3g} s, over half the time cap")
    elif tau > 0 and not solve and exact is None:
        skipped["exact"] = (f"not solved: the exact recursion is solved for budget <= {MAX_BUDGET} where its work "
                            f"fits (M = {M}, D = {D}, budget {budget}: {work(prior.atoms, tau, budget):.2g} > "
                            f"{MAX_WORK:.0g})")
    if exact is not None:
        solve = bool(exact) and tau > 0
    names = ["greedy_coordinate"] + (["optimal"] if solve else [])
    price = sum(prior.mc_seconds(n, budget, channel, samples, threads) for n in names)
    check_time(f"bounds on the {prior.name} prior (M = {M}, D = {D}, budget {budget}, {samples} samples)",
               price + (solve_seconds(prior.atoms, tau, budget) if solve else 0.0))
    lower = noiseless(budget)
    if lower is not None:
        lower_how = "noiseless Bellman optimum over the atoms' partitions, a lower bound under any noise (Blackwell)"
    else:
        lower, lower_how = 0.0, "the trivial bound 0 (the noiseless recursion is not solved on this many atoms)"
    exact_value = exact_how = exact_error = None
    if tau == 0 and lower_how.startswith("noiseless"):
        exact_value, exact_how, exact_error = lower, "noiseless Bellman optimum", 0.0
    elif solve:
        solved = noisy_bellman(prior, budget, tau)
        exact_value, exact_how, exact_error = solved.value, solved.how, solved.error
    kw = dict(tau=tau, samples=samples, seed=seed, threads=threads, progress=progress)
    found = {name: loss_mc(prior, name, budget, **kw) for name in names}
    best = min(found, key=lambda k: found[k].value)
    upper = found[best]
    if exact_value is not None:  # solved: the bracket collapses
        err = float(exact_error or 0.0)
        if exact_value - err > lower:
            lower, lower_how = exact_value - err, "the solved optimum less its error estimate (refined quadrature)"
        upper = Estimate(exact_value + err, 0.0, upper.n, "exact" if tau == 0 else
                         "the solved optimum plus its error estimate")
    inputs = {"prior": prior.name, "n_atoms": M, "dim": D, "budget": int(budget), "channel": "gaussian", "tau": tau,
              "measurement": "coordinate", "layers": int(budget), "width": 1, "samples": samples, "seed": seed}
    return Bounds(lower, lower_how, upper, best, exact_value, exact_how, found, {}, inputs, skipped, exact_error,
                  found[best])
