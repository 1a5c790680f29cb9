"""The exact Bellman optima of small finite priors (docs/theory.md sections 3 and 6): noisy (below) and noiseless
(:func:`noiseless_bellman`, the recursion over the partitions of the atoms that coordinate readings induce).

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
error falls like ``h^2``; :func:`atoms_noisy_bellman` solves a second, refined quadrature and reports the difference.
The policy runs the same recursion from each sample's posterior (:class:`FiniteNoisyPolicy`), so its Monte Carlo
loss estimates the value.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from fvsym.errors import InputError, ResourceRefused

from fvnum.optimum.noisy_dp import SolvedOptimum
from fvnum.optimum.noisy_work import default_points, refined_points
from fvnum.optimum.noisy_work import SPAN
from fvnum.mc.protocol import Policy

MAX_BUDGET = 3
MAX_WORK = 3e9  # largest work (``work``) solved exactly
RATE = 8e7  # work per second priced: measured 1.1e8 to 2.6e8 on one thread at load 3 (the leaves of trees of
# depth 2 and 3 as atoms, budgets 1 to 3, tau 0.4 to 0.7; solve and refined solve): below the slowest
OVERHEAD = 2e-3  # seconds of Python per array operation group (a coordinate of a belief chunk)
CHUNK_FLOATS = 2**21  # floats of one chunk of child beliefs
BELLMAN_MAX_ATOMS = 64  # the noiseless recursion over partitions: at most this many atoms
BELLMAN_OP_SECONDS = 2e-5  # per cell and design of the noiseless recursion (numpy on a few atoms)


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
    """Upper price of :func:`atoms_noisy_bellman`: ``work / RATE`` (and the refined solve's with ``refine``)."""
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


def atoms_noisy_bellman(prior, budget: int, channel, *, points=None, threads=None,
                        refine: bool = True) -> FiniteNoisyBellman:
    """The exact noisy Bellman optimum of a finite prior (``prior.atoms``, ``prior.log_weights``; coordinate class,
    ``L = budget <= 3``, ``d = 1``) under the gaussian channel ``fvnum.gaussian(tau)``, ``tau > 0``, with its error
    estimate (``refine``) and its policy: what ``fvnum.noisy_bellman`` answers for a finite prior (registered for its
    class, ``fvnum.priors.analyses``; ``threads``: one, numpy's). Sized by :func:`work` (``MAX_WORK``) and priced under
    the time cap."""
    from fvsym._validate import check_int

    from fvsym.guards.limits import check_time
    from fvnum.mc.channels import check_channel

    if check_channel(channel).kind != "gaussian":
        raise InputError(f"the exact noisy recursion on the {prior.name} prior is the gaussian channel's (its "
                         "decoder's); give fvnum.gaussian(tau)")
    tau = channel.tau
    budget = _check_budget(budget)
    atoms, log_w = np.asarray(prior.atoms, dtype=float), np.asarray(prior.log_weights, dtype=float)
    if not tau > 0:
        raise InputError(f"tau = {tau} has no readings to integrate: the noiseless optimum is "
                         "fvnum.optimum.atoms_dp.noiseless_bellman")
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


# --- the noiseless Bellman recursion over partitions (docs/theory.md sections 3, 6) -------------------------
@dataclass(frozen=True)
class FiniteBellman:
    """The noiseless optimum of a finite prior in the coordinate class (docs/theory.md section 3): ``value`` (the
    loss), ``layers`` x ``width``, ``design`` (the first layer's coordinates, 1-based), ``n_states`` (cells
    solved); ``best(cell, layers_left)`` the coordinates to read on a cell (a sorted tuple of atom indices)."""

    value: float
    layers: int
    width: int
    design: tuple
    n_states: int
    solver: object

    def best(self, cell: tuple, layers_left: int) -> tuple:
        return self.solver.best(cell, layers_left)

    def to_dict(self) -> dict:
        return {"loss": self.value, "layers": self.layers, "width": self.width, "design": list(self.design),
                "n_states": self.n_states, "how": "exact: noiseless Bellman recursion over partitions of the atoms"}


class _Partitions:
    """``V(S, l) = min over designs W of sum over the cells C of S that W's readings induce of V(C, l - 1)``,
    ``V(S, 0) = sum_{m in S} w_m ||theta_m - mu_S||^2``, memoised on (cell, l)."""

    def __init__(self, atoms, weights, width):
        self.atoms, self.weights, self.width = atoms, weights, width
        self.designs = list(combinations(range(atoms.shape[1]), width))
        self.memo = {}

    def terminal(self, cell) -> float:
        if len(cell) == 1:  # one atom left: known exactly (no rounding residue)
            return 0.0
        idx = list(cell)
        w, A = self.weights[idx], self.atoms[idx]
        mu = w @ A / w.sum()
        return float(w @ ((A - mu) ** 2).sum(axis=1))

    def cells(self, cell, design):
        idx = np.array(cell)
        keys = self.atoms[np.ix_(idx, design)]
        _, inverse = np.unique(keys, axis=0, return_inverse=True)
        return [tuple(idx[inverse.ravel() == k].tolist()) for k in range(inverse.max() + 1)]

    def value(self, cell, layers) -> float:
        return self._solve(cell, layers)[0]

    def best(self, cell, layers) -> tuple:
        return self._solve(cell, layers)[1]

    def _solve(self, cell, layers):
        if layers == 0 or len(cell) == 1:
            return self.terminal(cell), ()
        key = (cell, layers)
        if key not in self.memo:
            best = (math.inf, ())
            for design in self.designs:
                v = sum(self._solve(c, layers - 1)[0] for c in self.cells(cell, list(design)))
                if not best[1] or v < best[0] - 1e-12 * abs(best[0]):  # ties: the first design
                    best = (v, tuple(d + 1 for d in design))
            self.memo[key] = best
        return self.memo[key]


def noiseless_bellman(prior, layers, width=1) -> FiniteBellman:
    """The exact noiseless optimum of a finite prior (``prior.atoms``, or a tree's leaves) with ``layers`` layers
    of ``width`` coordinates: the recursion over the partitions of the atoms (docs/theory.md sections 3, 6). Sized:
    at most ``BELLMAN_MAX_ATOMS`` atoms, and priced (cells times designs) under the time cap."""
    from math import comb

    from fvsym._validate import check_int
    from fvsym.guards.limits import check_time

    from fvnum.priors.registry import atoms_of

    atoms, log_w = atoms_of(prior)
    M, D = atoms.shape
    L = check_int(layers, "layers", minimum=0, maximum=64)
    d = check_int(width, "width", minimum=1, maximum=D)
    if M > BELLMAN_MAX_ATOMS:
        raise InputError(f"the noiseless Bellman recursion over partitions takes at most {BELLMAN_MAX_ATOMS} atoms, "
                         f"got M = {M}")
    n_designs = comb(D, d)
    cells = sum(min(M, n_designs**k) for k in range(L + 1))  # cells met at each depth, at most M apart
    check_time(f"the noiseless Bellman recursion on {M} atoms (D = {D}, {L} layers of width {d})",
               BELLMAN_OP_SECONDS * cells * n_designs * max(1, min(L, M)))
    weights = np.exp(log_w)
    solver = _Partitions(atoms, weights, d)
    full = tuple(range(M))
    value = solver.value(full, L) / float(weights.sum())
    return FiniteBellman(value, L, d, solver.best(full, L), len(solver.memo), solver)
