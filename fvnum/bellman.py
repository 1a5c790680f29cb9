"""The exact noisy Bellman optimum of small trees (THEORY.md section 3, "under noise").

Coordinate class, layers of width 1, any node readable at every layer (repeats allowed), gaussian
channel of noise ``tau`` (the tokens channel through its effective ``tau``). A belief is the vector of
leaf weights; with ``U(p) = sum_k a_k^2 - ||mu_p||^2`` the expected loss of the posterior mean,

    V_0(p) = U(p),    V_l(p) = min_n  sum_o W_o(p, n)  E_{phi ~ N(mean_o, tau^2)} V_{l-1}(post(p, n, phi)),

where ``o`` runs over the three classes of leaves that reading node ``n`` distinguishes (path passes
``n`` with +1, with -1, or avoids it; means ``+a_k, -a_k, 0``) and ``W_o`` is their mass. This is
THEORY.md's recursion for unnormalised weights divided by the total weight (``V`` is homogeneous of
degree 1). Each expectation is a trapezoid rule over the class's standard normal (``reading_rule``),
with ``points[R - 1]`` points when ``R`` layers remain: the last reading's integrand is smooth (analytic
in a strip), an earlier one has kinks where the best next node changes, whose ``O(h^2)`` error is
corrected (``kink_corrected``). The recursion is expanded breadth-first and the last layer is evaluated in
a kernel (``_kernels._dp_last``). At the prior only one node per depth is tried
(the tree's symmetry). The policy is the same recursion run from the posterior of each sample's
readings (``NoisyBellmanPolicy``), so its Monte Carlo loss estimates the value.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _kernels
from .channels import make_channel
from .strategies import Policy
from .tree import TreeSpec, numeric_prior

POINTS = {1: (65,), 2: (49, 161), 3: (33, 65, 81)}  # per budget: points when 1, 2, 3 layers remain
SPAN = 6.5  # each rule covers +-SPAN standard deviations of its class
MAX_WORK = 3e10  # largest last-layer work (beliefs x candidates x 3 x points x leaves) solved exactly
CHUNK_FLOATS = 2**22


class Quadrature:
    """Tables of one tree and noise: reading classes ``cls`` (D, 2^K); per number ``R`` of remaining
    layers, a rule ``x[R], w[R]`` (Q_R,) and the likelihood ratios ``lik[R]`` (D, 3, Q_R, 3) of the
    classes at each of its readings (relative to the largest); leaf ``thetas`` (2^K, D)."""

    def __init__(self, spec: TreeSpec, tau: float, points=(65,)):
        if not tau > 0:
            raise ValueError(f"the noisy Bellman recursion needs tau > 0, got {tau}")
        self.spec, self.tau, self.points = spec, float(tau), tuple(int(p) for p in points)
        D, nl = spec.dim, spec.n_leaves
        leaves = np.arange(nl)
        nodes = np.arange(1, D + 1)
        vals = spec.values(np.repeat(leaves, D), np.tile(nodes, nl)[:, None])[:, 0].reshape(nl, D).T  # (D, nl)
        amp = spec.scales[spec.node_depths(nodes) - 1]  # (D,)
        self.cls = np.where(vals > 0, 0, np.where(vals < 0, 1, 2)).astype(np.int64)  # (D, nl)
        means = np.stack([amp, -amp, np.zeros(D)], axis=1)  # (D, 3)
        self.x, self.w, self.lik = {}, {}, {}
        for R, Q in enumerate(self.points, start=1):
            x, w = reading_rule(Q)
            phi = means[:, :, None] + self.tau * x[None, None, :]  # (D, 3, Q)
            e = -((phi[..., None] - means[:, None, None, :]) ** 2) / (2 * self.tau**2)  # (D, 3, Q, 3)
            self.x[R], self.w[R] = x, w
            self.lik[R] = np.ascontiguousarray(np.exp(e - e.max(axis=3, keepdims=True)))
        self.thetas = spec.thetas(leaves)  # (nl, D)
        self.nodes = nodes.astype(np.int64)

    def log_likelihood(self, nodes, readings) -> np.ndarray:
        """(n, 2^K) log-likelihood of each leaf given readings (n, l) of nodes (n, l)."""
        nodes = np.asarray(nodes, dtype=np.int64)
        readings = np.asarray(readings, dtype=float)
        v = self.thetas[:, nodes - 1]  # (nl, n, l)
        return (-((readings[None] - v) ** 2).sum(axis=2) / (2 * self.tau**2)).T

    def values(self, P: np.ndarray, remaining: int, cand=None, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """``V_remaining`` of each belief ``P`` (M, 2^K) and the node read next (0 when nothing is left;
        ties: the first candidate)."""
        P = np.ascontiguousarray(P, dtype=float)
        cand = self.nodes if cand is None else np.asarray(cand, dtype=np.int64)
        if remaining == 0:
            mass = np.zeros(2 * P.shape[1])
            return np.array([_kernels._belief_loss(p, self.spec.scales, mass) for p in P]), np.zeros(len(P), np.int64)
        q = self.q_values(P, remaining, cand, threads)
        best = np.argmin(q, axis=1)
        return q[np.arange(len(P)), best], cand[best]

    def q_values(self, P: np.ndarray, remaining: int, cand=None, threads: int = 1) -> np.ndarray:
        """(M, C): expected final loss of reading ``cand[c]`` next and acting optimally after."""
        P = np.ascontiguousarray(P, dtype=float)
        cand = self.nodes if cand is None else np.asarray(cand, dtype=np.int64)
        M, nl = P.shape
        if remaining == 1:
            return self._last(P, cand, threads)
        C, Q = cand.size, self.points[remaining - 1]
        per = max(1, CHUNK_FLOATS // (C * 3 * Q * nl * 2))
        out = np.zeros((M, C))
        for a in range(0, M, per):
            part = P[a : a + per]
            child = np.zeros((part.shape[0], C, 3, Q, nl))
            weight = np.zeros((part.shape[0], C, 3, Q))
            _kernels._dp_children(part, cand, self.cls, self.lik[remaining], self.w[remaining], child, weight)
            vq = self.q_values(child.reshape(-1, nl), remaining - 1, threads=threads)
            out[a : a + per] = self.integrate(vq.reshape(weight.shape + (-1,)), weight)
        return out

    def integrate(self, vq: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """``sum_o W_o E_q min_c vq[..., o, q, c]`` over the reading rules, (..., C, 3, Q, Cn) -> (..., C).
        The minimum over the next node ``c`` has kinks where the best node changes; the trapezoid rule's
        error there, ``h^2 J phi(z*) (t (1 - t) - 1/6) / 2`` for a slope jump ``J`` at ``z* = z_j + t h``
        (Euler-Maclaurin with the Bernoulli polynomial ``B_2``), is added back with both candidates taken
        linear on the rule interval: error ``O(h^3)`` instead of ``O(h^2)``."""
        return kink_corrected(vq, weight)

    def _last(self, P, cand, threads):
        M = P.shape[0]
        out = np.zeros((M, cand.size))
        parts = [slice(a, min(M, a + 4096)) for a in range(0, M, 4096)]

        def task(sl):
            _kernels._dp_last(P[sl], cand, self.cls, self.lik[1], self.w[1], self.spec.scales, out[sl])

        if threads > 1 and len(parts) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=threads) as ex:
                list(ex.map(task, parts))
        else:
            for sl in parts:
                task(sl)
        return out


def kink_corrected(vq: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """See ``Quadrature.integrate``: ``weight`` (..., 3, Q) holds ``W_o w_q``, ``vq`` (..., 3, Q, Cn)."""
    W = weight.sum(axis=-1, keepdims=True)
    w = weight / np.where(W > 0, W, 1.0)  # the rule (..., 3, Q)
    a = np.argmin(vq, axis=-1)[..., None]  # (..., 3, Q, 1)
    g = np.take_along_axis(vq, a, axis=-1)[..., 0]
    a0, a1 = a[..., :-1, :], a[..., 1:, :]
    f0, f1 = g[..., :-1], g[..., 1:]
    qa1 = np.take_along_axis(vq[..., 1:, :], a0, axis=-1)[..., 0]  # the left winner at the right end
    qb0 = np.take_along_axis(vq[..., :-1, :], a1, axis=-1)[..., 0]  # the right winner at the left end
    d0, d1 = f0 - qb0, qa1 - f1  # <= 0 and >= 0
    den = d1 - d0
    switch = (a0[..., 0] != a1[..., 0]) & (den > 0)
    t = np.where(switch, -d0 / np.where(switch, den, 1.0), 0.5)
    corr = np.where(switch, den / 2 * (t * (1 - t) - 1.0 / 6), 0.0) * (w[..., :-1] + w[..., 1:]) / 2
    return (W[..., 0] * ((g * w).sum(axis=-1) + corr.sum(axis=-1))).sum(axis=-1)


def reading_rule(points: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``z`` and weights of ``E f(Z)``, ``Z ~ N(0, 1)``: the trapezoid rule of step ``2 SPAN / (points - 1)``
    on ``[-SPAN, SPAN]``, weights ``h phi(z)`` normalised. For ``f`` analytic in a strip (the posterior is
    a logistic function of the reading) its error falls like ``exp(-2 pi d / h)``, far faster than a
    Gauss-Hermite rule of as many points (measured in tests/fvnum/test_bellman.py)."""
    z = np.linspace(-SPAN, SPAN, int(points))
    w = np.exp(-0.5 * z**2)
    return z, w / w.sum()


def root_candidates(spec: TreeSpec) -> np.ndarray:
    """One node per depth (the leftmost): at the uniform prior every node of a depth is equivalent."""
    return np.array([1 << k for k in range(spec.depth)], dtype=np.int64)


def default_points(budget: int) -> tuple:
    return POINTS[min(max(budget, 1), 3)][:max(budget, 1)]


def work(spec: TreeSpec, budget: int, points=None) -> float:
    """Last-layer work of the exact recursion (beliefs x candidates x 3 x points x leaves)."""
    if budget == 0:
        return 0.0
    points = default_points(budget) if points is None else points
    beliefs = 1.0
    for R in range(budget, 1, -1):
        beliefs *= (spec.depth if R == budget else spec.dim) * 3 * points[R - 1]
    return beliefs * spec.dim * 3 * points[0] * spec.n_leaves


def exact_feasible(spec, budget: int, points=None) -> bool:
    """Whether the exact recursion is small enough: tree prior, ``budget <= 3``, work below MAX_WORK."""
    return isinstance(spec, TreeSpec) and budget <= 3 and work(spec, budget, points) <= MAX_WORK


class NoisyBellmanPolicy(Policy):
    """The exact noisy Bellman policy (``L = B``, ``d = 1``): layer ``l`` reads the node that minimises
    the expected final loss of the recursion from the posterior of the readings so far (the first node
    is the same for every sample). State: the log-likelihood (n, 2^K) of each leaf."""

    name = "optimal"

    def __init__(self, quad: Quadrature, budget: int, first: int, threads: int = 1):
        self.quad, self.layers, self.width, self.first, self.threads = quad, budget, 1, int(first), threads

    def start(self, n):
        return np.zeros((n, self.quad.spec.n_leaves))

    def rows(self, layer, state, phi):
        if layer == 0:
            return np.array([self.first], dtype=np.int64)
        P = np.exp(state - state.max(axis=1, keepdims=True))
        _, node = self.quad.values(P / P.sum(axis=1, keepdims=True), self.layers - layer, threads=self.threads)
        return node[:, None]

    def update(self, layer, state, rows, phi_layer):
        nodes = rows.nodes(state.shape[0])
        return state + self.quad.log_likelihood(nodes, phi_layer)

    def work_floats(self, spec, budget):
        return spec.n_leaves * (1 + 3 * max(self.quad.points) * spec.dim)

    def __repr__(self) -> str:
        return (f"<NoisyBellmanPolicy 'optimal': {self.layers} layers of width 1 at tau {self.quad.tau:.4g} "
                f"(depth {self.quad.spec.depth}), first node {self.first}; print(policy) shows its decision tree>")

    def __str__(self) -> str:
        return self.describe()

    def describe(self, prior=None, max_layers: int = 3, points: int = 121) -> str:
        """The policy as a decision tree over reading intervals: after each layer, the readings ``phi_l``
        of the node read split into intervals on which the next node is the same (found on a grid of
        ``points`` readings over the range a reading takes, boundaries refined by bisection); below each
        interval the tree goes on for the reading at its middle. ``prior`` is not needed (the policy
        holds its tree)."""
        spec, tau = self.quad.spec, self.quad.tau
        span = float(spec.scales[0]) + 4 * tau
        grid = np.linspace(-span, span, int(points))
        lines: list[str] = []

        def next_nodes(nodes, readings, r):
            """The node read after ``readings`` of ``nodes`` and reading ``r`` (array) of the last node."""
            n = r.size
            allnodes = np.tile(np.asarray(nodes, dtype=np.int64), (n, 1))
            allread = np.column_stack([np.tile(np.asarray(readings[:-1], dtype=float), (n, 1)), r]) if readings \
                else r[:, None]
            state = self.quad.log_likelihood(allnodes, allread)
            return self.rows(len(nodes), state, None)[:, 0]

        def walk(nodes, readings, indent, label):
            layer = len(nodes)  # nodes already read
            pad = "  " * indent
            node = self.first if layer == 0 else int(next_nodes(nodes, readings, np.array([readings[-1]]))[0])
            lines.append(f"{pad}{label}read node {node}  [layer {layer + 1} of {self.layers}]")
            if layer + 1 >= self.layers:
                return
            if layer + 1 >= max_layers:
                lines.append(f"{pad}  ...  ({self.layers - layer - 1} more layers)")
                return
            nodes2, phi = nodes + [node], f"phi_{layer + 1}"
            chosen = next_nodes(nodes2, readings + [0.0], grid)
            cuts = []
            for i in np.flatnonzero(chosen[1:] != chosen[:-1]):
                lo, hi = grid[i], grid[i + 1]
                for _ in range(30):
                    mid = 0.5 * (lo + hi)
                    if next_nodes(nodes2, readings + [0.0], np.array([mid]))[0] == chosen[i]:
                        lo = mid
                    else:
                        hi = mid
                cut = 0.5 * (lo + hi)
                cuts.append((0.0 if abs(cut) < 1e-6 * span else cut, i))  # a symmetric cut shows as 0
            edges = [-np.inf] + [c for c, _ in cuts] + [np.inf]
            starts = [0] + [i + 1 for _, i in cuts] + [grid.size]
            for a in range(len(edges) - 1):
                inside = grid[starts[a]:starts[a + 1]]
                if a == 0 and len(edges) == 2:
                    text = f"any {phi}: "
                elif a == 0:
                    text = f"{phi} < {edges[1]:.4g}: "
                elif a == len(edges) - 2:
                    text = f"{phi} >= {edges[a]:.4g}: "
                else:
                    text = f"{edges[a]:.4g} <= {phi} < {edges[a + 1]:.4g}: "
                rep = float(inside[inside.size // 2]) if inside.size else float(edges[a])
                if len(edges) > 2 and layer + 2 < self.layers:
                    text += f"(below: at {phi} = {rep:.3g}) "
                walk(nodes2, readings + [rep], indent + 1, text)

        walk([], [], 0, "")
        return "\n".join(lines)


@dataclass(frozen=True)
class NoisyBellman:
    """The exact noisy optimum ``value`` = ``V_B(prior)`` of ``budget`` layers of width 1 at noise ``tau``
    and its ``policy`` (a Policy: ``fvnum.simulate.simulate`` runs it; ``next_node`` and ``q_values``
    inspect it). ``how`` names the quadrature."""

    value: float
    budget: int
    tau: float
    first_node: int
    points: tuple
    how: str
    quad: Quadrature = field(repr=False, compare=False)
    policy: NoisyBellmanPolicy = field(repr=False, compare=False)

    def _belief(self, nodes, readings) -> np.ndarray:
        nodes = np.asarray(nodes, dtype=np.int64).reshape(1, -1)
        readings = np.asarray(readings, dtype=float).reshape(1, -1)
        if nodes.shape != readings.shape or nodes.shape[1] >= max(self.budget, 1):
            raise ValueError(f"need fewer than budget = {self.budget} readings, one per node; "
                             f"got nodes {nodes.shape[1]} and readings {readings.shape[1]}")
        if nodes.size and (nodes.min() < 1 or nodes.max() > self.quad.spec.dim):
            raise ValueError(f"nodes must lie in 1..{self.quad.spec.dim}, got {nodes.ravel().tolist()}")
        ll = self.quad.log_likelihood(nodes, readings) if nodes.size else np.zeros((1, self.quad.spec.n_leaves))
        P = np.exp(ll - ll.max())
        return P / P.sum(), nodes.shape[1]

    def q_values(self, nodes=(), readings=()) -> np.ndarray:
        """(D,): expected final loss of reading each node next, after ``readings`` of ``nodes``; a
        labelled array (``fvnum.estimate.NodeValues``: entry ``i`` is node ``i + 1``; it prints
        ``node: value`` lines, ``.best`` is the node of least loss, ``.to_dict()`` maps node -> value)."""
        from .estimate import NodeValues

        P, l = self._belief(nodes, readings)
        return NodeValues(self.quad.q_values(P, self.budget - l)[0], self.quad.nodes, "expected final loss")

    def next_node(self, nodes=(), readings=()) -> int:
        """The node the optimal policy reads after ``readings`` of ``nodes`` (one per earlier layer)."""
        P, l = self._belief(nodes, readings)
        if l == 0:
            return self.first_node
        return int(self.quad.values(P, self.budget - l)[1][0])

    def to_dict(self) -> dict:
        return {"value": self.value, "budget": self.budget, "tau": self.tau, "first_node": self.first_node,
                "points": self.points, "how": self.how}


def noisy_bellman(prior, budget: int, tau=None, *, tokens=None, s2=0.01, n_tokens=None, channel=None, points=None,
                  threads=None) -> NoisyBellman:
    """Exact noisy Bellman optimum (tree prior, coordinate class, ``L = budget <= 3``, ``d = 1``) under the
    gaussian channel ``tau`` (or the tokens channel's effective ``tau_of_tokens(prior, tokens, s2)``).
    ``points``: quadrature points per reading class when 1, 2, .. layers remain (default ``POINTS``)."""
    from fvsym._validate import check_int

    from ._chunks import default_threads

    spec = numeric_prior(prior)
    if not isinstance(spec, TreeSpec):
        raise ValueError("the noisy Bellman recursion needs a tree prior (a Gaussian prior's optimum is water-filling)")
    channel = make_channel(spec, tau, tokens, s2, n_tokens=n_tokens, channel=channel)
    budget = check_int(budget, "budget", 0, 3)
    from .limits import check_resolution

    check_resolution(spec, "the noisy Bellman recursion")
    if points is None:
        points = default_points(budget)
    points = tuple(check_int(p, "points", 3, 10_000) for p in np.atleast_1d(points).tolist())
    if len(points) < budget:
        raise ValueError(f"points needs one entry per layer, {budget}, got {points}")
    if channel.tau == 0:
        given = "" if channel.tau_given is None else f" (tau = {channel.tau_given:.3g} is noiseless in effect)"
        raise ValueError(f"tau = 0{given} has no readings to integrate: the noiseless optimum is fvsym.bellman.solve")
    if not exact_feasible(spec, budget, points):
        raise ValueError(f"the exact noisy recursion at depth {spec.depth}, budget {budget} costs "
                         f"{work(spec, budget, points):.2g} > {MAX_WORK:.0g} operations; use fvnum.bounds")
    threads = default_threads() if threads is None else max(1, int(threads))
    quad = Quadrature(spec, channel.tau, points)
    uniform = np.full((1, spec.n_leaves), 1.0 / spec.n_leaves)
    if budget == 0:
        value, first = float(quad.values(uniform, 0)[0][0]), 0
    else:
        V, node = quad.values(uniform, budget, root_candidates(spec), threads=threads)
        value, first = float(V[0]), int(node[0])
    how = f"exact recursion, trapezoid rules of {'/'.join(map(str, points[:budget][::-1]))} points per reading class"
    pol = NoisyBellmanPolicy(quad, budget, first, threads=1)
    return NoisyBellman(value, budget, channel.tau, first, points[:budget], how, quad, pol)
