"""The exact noisy Bellman optimum of small trees (docs/theory.md section 3, "under noise").

Coordinate class, layers of width 1, any node readable at every layer (repeats allowed), gaussian
channel of noise ``tau`` (the tokens channel through its effective ``tau``). A belief is the vector of
leaf weights; with ``U(p) = sum_k a_k^2 - ||mu_p||^2`` the expected loss of the posterior mean,

    V_0(p) = U(p),    V_l(p) = min_n  sum_o W_o(p, n)  E_{phi ~ N(mean_o, tau^2)} V_{l-1}(post(p, n, phi)),

where ``o`` runs over the three classes of leaves that reading node ``n`` distinguishes (path passes
``n`` with +1, with -1, or avoids it; means ``+a_k, -a_k, 0``) and ``W_o`` is their mass. This is
docs/theory.md's recursion for unnormalised weights divided by the total weight (``V`` is homogeneous of
degree 1). Each expectation is a trapezoid rule over the class's normal law, of step
``h = 2 SPAN tau / (points[R - 1] - 1)`` when ``R`` layers remain, and the three classes' rules share one
lattice of readings ``h Z`` (``lattice``): the posterior after a reading depends on the reading only, so
one child belief serves every class whose rule covers it. The last reading's integrand is smooth
(analytic in a strip, so the error falls like ``exp(-2 pi d / h)``), an earlier one has kinks where the
best next node changes, whose ``O(h^2)`` error is corrected (``kink_corrected``). The last layer is
evaluated in a kernel (``_kernels._dp_last``) from the Gram matrix of the three classes' latent sums:
``||posterior mean||^2`` is a ratio of quadratic forms in the classes' likelihoods, ``O(1)`` per reading.
At the prior only one node per depth is tried (the tree's symmetry). The policy is the same recursion run
from the posterior of each sample's readings (``NoisyBellmanPolicy``), so its Monte Carlo loss estimates
the value.

The lattice, the points of the rules, the work of a solve and its price: :mod:`fvnum.optimum.noisy_work`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fvsym.errors import InputError, ResourceRefused

from fvnum.mc import _kernels
from fvnum.mc.simulate import check_inputs
from fvnum.mc.protocol import Policy
from fvnum.priors.tree import TreeSpec
from fvnum.optimum.noisy_work import (
    MAX_WORK, check_points, default_points, exact_feasible, lattice, refined_points, tree_work)

CHUNK_FLOATS = 2**22


class Quadrature:
    """Tables of one tree and noise: reading classes ``cls`` (D, 2^K) and, per number ``R`` of remaining
    layers, one lattice of readings per depth ``k`` (``lattice``): readings ``x[R]`` (K, J), rule weights
    ``w[R]`` (K, 3, J) of each class, likelihood ratios ``lik[R]`` (K, J, 3) of the classes at each
    reading (relative to the largest), ``nj[R]`` (K,) points and ``adjacent[R]`` (K, J) (whether point
    ``j + 1`` is the lattice neighbour of ``j``); leaf ``thetas`` (2^K, D), sparse as ``paths``/``pvals``."""

    def __init__(self, spec: TreeSpec, tau: float, points=(65,)):
        if not tau > 0:
            raise InputError(f"the noisy Bellman recursion needs tau > 0, got {tau}")
        self.spec, self.tau, self.points = spec, float(tau), tuple(int(p) for p in points)
        D, nl, K = spec.dim, spec.n_leaves, spec.depth
        leaves = np.arange(nl)
        nodes = np.arange(1, D + 1)
        vals = spec.values(np.repeat(leaves, D), np.tile(nodes, nl)[:, None])[:, 0].reshape(nl, D).T  # (D, nl)
        self.cls = np.where(vals > 0, 0, np.where(vals < 0, 1, 2)).astype(np.int64)  # (D, nl)
        self.x, self.w, self.lik, self.nj, self.adjacent = {}, {}, {}, {}, {}
        for R, Q in enumerate(self.points, start=1):
            rules = [lattice(float(a), self.tau, Q) for a in spec.scales]
            J = max(r[0].size for r in rules)
            self.x[R], self.w[R] = np.zeros((K, J)), np.zeros((K, 3, J))
            self.lik[R], self.adjacent[R] = np.zeros((K, J, 3)), np.zeros((K, J), dtype=bool)
            self.nj[R] = np.array([r[0].size for r in rules], dtype=np.int64)
            for k, (x, w, lik, adj) in enumerate(rules):
                n = x.size
                self.x[R][k, :n], self.w[R][k, :, :n], self.lik[R][k, :n], self.adjacent[R][k, :n] = x, w, lik, adj
        self.thetas = spec.thetas(leaves)  # (nl, D)
        self.paths = np.ascontiguousarray(spec.path_nodes(leaves), dtype=np.int64)  # (nl, K)
        self.pvals = np.ascontiguousarray(spec.scales * spec.signs(leaves), dtype=float)  # (nl, K)
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
        R = remaining
        C, J = cand.size, self.x[R].shape[1]
        per = max(1, CHUNK_FLOATS // (C * J * nl * 2))
        k = self.spec.node_depths(cand) - 1
        adjacent = self.adjacent[R][k]  # (C, J)
        out = np.zeros((M, C))
        for a in range(0, M, per):
            part = P[a : a + per]
            child = np.zeros((part.shape[0], C, J, nl))
            weight = np.zeros((part.shape[0], C, J))
            _kernels._dp_children(part, cand, self.cls, self.lik[R], self.w[R], self.nj[R], child, weight)
            live = np.flatnonzero(weight.ravel() > 0)
            flat = child.reshape(-1, nl)
            if R == 2:  # the children have one layer left: only their minimum and its kinks are needed
                g, arg = np.zeros(weight.size), np.zeros(weight.size, dtype=np.int64)
                g[live], arg[live] = self._last_min(flat[live], threads)
                out[a : a + per] = self._integrate_min(flat, g.reshape(weight.shape), arg.reshape(weight.shape),
                                                       weight, adjacent)
                continue
            vq = np.zeros((weight.size, self.spec.dim))
            vq[live] = self.q_values(flat[live], R - 1, threads=threads)
            out[a : a + per] = self.integrate(vq.reshape(weight.shape + (-1,)), weight, adjacent)
        return out

    def _integrate_min(self, flat, g, arg, weight, adjacent):
        """``integrate`` from each child's minimum ``g`` (..., J) and its node index ``arg``: the values of
        the two winners across each switching interval are computed for those intervals only."""
        a0, a1 = arg[..., :-1], arg[..., 1:]
        w0, w1 = weight[..., :-1], weight[..., 1:]
        switch = (a0 != a1) & (w0 > 0) & (w1 > 0) & np.broadcast_to(adjacent, weight.shape)[..., :-1]
        qa1, qb0 = g[..., 1:].copy(), g[..., :-1].copy()
        idx = np.flatnonzero(switch.ravel())
        if idx.size:
            J = weight.shape[-1]
            left = (idx // (J - 1)) * J + idx % (J - 1)  # flat index of child j; child j + 1 follows it
            qa1.ravel()[idx] = self._last_at(flat[left + 1], self.nodes[a0.ravel()[idx]])
            qb0.ravel()[idx] = self._last_at(flat[left], self.nodes[a1.ravel()[idx]])
        return kink_terms(g, qa1, qb0, weight, switch)

    def _last_min(self, P, threads):
        M = P.shape[0]
        g, arg = np.zeros(M), np.zeros(M, dtype=np.int64)
        parts = [slice(a, min(M, a + 4096)) for a in range(0, M, 4096)]

        def task(sl):
            _kernels._dp_last_min(P[sl], self.nodes, self.cls, self.lik[1], self.w[1], self.nj[1], self.paths,
                                  self.pvals, self.spec.scales, g[sl], arg[sl])

        _run(task, parts, threads)
        return g, arg

    def _last_at(self, P, nodes):
        out = np.zeros(P.shape[0])
        _kernels._dp_last_at(np.ascontiguousarray(P), np.ascontiguousarray(nodes, dtype=np.int64), self.cls,
                             self.lik[1], self.w[1], self.nj[1], self.paths, self.pvals, self.spec.scales, out)
        return out

    def integrate(self, vq: np.ndarray, weight: np.ndarray, adjacent: np.ndarray) -> np.ndarray:
        """``sum_j weight_j min_c vq[..., j, c]`` over the lattice, (..., J, Cn) -> (...). The minimum over
        the next node ``c`` has kinks where the best node changes; the trapezoid rule's error there,
        ``h^2 J phi(z*) (t (1 - t) - 1/6) / 2`` for a slope jump ``J`` at ``z* = z_j + t h``
        (Euler-Maclaurin with the Bernoulli polynomial ``B_2``), is added back with both candidates taken
        linear on the rule interval: error ``O(h^3)`` instead of ``O(h^2)``."""
        return kink_corrected(vq, weight, adjacent)

    def _last(self, P, cand, threads):
        M = P.shape[0]
        out = np.zeros((M, cand.size))
        parts = [slice(a, min(M, a + 4096)) for a in range(0, M, 4096)]

        def task(sl):
            _kernels._dp_last(P[sl], cand, self.cls, self.lik[1], self.w[1], self.nj[1], self.paths, self.pvals,
                              self.spec.scales, out[sl])

        _run(task, parts, threads)
        return out


def _run(task, parts, threads):
    if threads > 1 and len(parts) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=threads) as ex:
            list(ex.map(task, parts))
    else:
        for sl in parts:
            task(sl)


def kink_corrected(vq: np.ndarray, weight: np.ndarray, adjacent=None) -> np.ndarray:
    """See ``Quadrature.integrate``: ``weight`` (..., J) holds the rule weights ``sum_o W_o w_oj`` of the
    lattice points (0 for points outside it), ``vq`` (..., J, Cn); ``adjacent`` (..., J) (broadcast) says
    whether point ``j + 1`` neighbours ``j`` (default: all do)."""
    a = np.argmin(vq, axis=-1)[..., None]  # (..., J, 1)
    g = np.take_along_axis(vq, a, axis=-1)[..., 0]
    a0, a1 = a[..., :-1, :], a[..., 1:, :]
    f0, f1 = g[..., :-1], g[..., 1:]
    qa1 = np.take_along_axis(vq[..., 1:, :], a0, axis=-1)[..., 0]  # the left winner at the right end
    qb0 = np.take_along_axis(vq[..., :-1, :], a1, axis=-1)[..., 0]  # the right winner at the left end
    w0, w1 = weight[..., :-1], weight[..., 1:]
    switch = (a0[..., 0] != a1[..., 0]) & (w0 > 0) & (w1 > 0)
    if adjacent is not None:
        switch &= np.broadcast_to(adjacent, weight.shape)[..., :-1]
    return kink_terms(g, qa1, qb0, weight, switch)


def kink_terms(g, qa1, qb0, weight, switch) -> np.ndarray:
    """The corrected rule of ``kink_corrected`` from the minimum ``g`` (..., J), the left winner's value
    at the right end ``qa1`` and the right winner's at the left end ``qb0`` (..., J - 1) of each interval
    where the winner switches (``switch``)."""
    f0, f1 = g[..., :-1], g[..., 1:]
    w0, w1 = weight[..., :-1], weight[..., 1:]
    d0, d1 = f0 - qb0, qa1 - f1  # <= 0 and >= 0
    den = d1 - d0
    switch = switch & (den > 0)
    t = np.where(switch, -d0 / np.where(switch, den, 1.0), 0.5)
    corr = np.where(switch, den / 2 * (t * (1 - t) - 1.0 / 6), 0.0) * (w0 + w1) / 2
    return (g * weight).sum(axis=-1) + corr.sum(axis=-1)


def root_candidates(spec: TreeSpec) -> np.ndarray:
    """One node per depth (the leftmost): at the uniform prior every node of a depth is equivalent."""
    return np.array([1 << k for k in range(spec.depth)], dtype=np.int64)


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
class SolvedOptimum:
    """What every exact noisy solve reports (the tree's :class:`NoisyBellman`, a finite prior's
    ``fvnum.optimum.atoms_dp.FiniteNoisyBellman``): the optimum ``value`` of ``budget`` layers of width 1 at noise
    ``tau``, the first node read, the quadrature (``points``, ``how``, ``quad``), the ``policy``, and the
    quadrature ``error`` from a refined solve on ``checked_points``."""

    value: float
    budget: int
    tau: float
    first_node: int
    points: tuple
    how: str
    quad: object = field(repr=False, compare=False)
    policy: object = field(repr=False, compare=False)
    error: float | None = None
    checked_points: tuple | None = None


@dataclass(frozen=True)
class NoisyBellman(SolvedOptimum):
    """The exact noisy optimum ``value`` = ``V_B(prior)`` of ``budget`` layers of width 1 at noise ``tau``
    and its ``policy`` (a Policy: ``fvnum.mc.simulate.simulate`` runs it; ``next_node`` and ``q_values``
    inspect it). ``how`` names the quadrature.

    ``error``: the estimated quadrature error of ``value``, from refinement: the recursion is solved on two
    quadratures, ``points`` and the one of half its lattice step (``refined_points``); ``value`` is the
    refined solve and ``error = |refined - default|``. The trapezoid rules' error falls at least like the step
    squared (``O(h^2)`` at the kinks of the minimum, faster elsewhere), so the refined value's own error is
    about a quarter of this difference or less: ``error`` is a conservative estimate (measured at depth 3,
    budget 3, tau 0.5: default 0.233409, refined 0.233444, thrice refined 0.233448). Where the refined
    quadrature is too large (``MAX_WORK``), ``value`` is the default solve and ``error`` its difference from
    the coarser one (step doubled), again conservative. ``checked_points``: the second quadrature (None when
    not refined: ``refine=False``, or budget 0, where ``error`` is 0 or None)."""


    def _belief(self, nodes, readings) -> np.ndarray:
        nodes = np.asarray(nodes, dtype=np.int64).reshape(1, -1)
        readings = np.asarray(readings, dtype=float).reshape(1, -1)
        if nodes.shape != readings.shape or nodes.shape[1] >= max(self.budget, 1):
            raise InputError(f"need fewer than budget = {self.budget} readings, one per node; "
                             f"got nodes {nodes.shape[1]} and readings {readings.shape[1]}")
        if nodes.size and (nodes.min() < 1 or nodes.max() > self.quad.spec.dim):
            raise InputError(f"nodes must lie in 1..{self.quad.spec.dim}, got {nodes.ravel().tolist()}")
        ll = self.quad.log_likelihood(nodes, readings) if nodes.size else np.zeros((1, self.quad.spec.n_leaves))
        P = np.exp(ll - ll.max())
        return P / P.sum(), nodes.shape[1]

    def q_values(self, nodes=(), readings=()) -> np.ndarray:
        """(D,): expected final loss of reading each node next, after ``readings`` of ``nodes``; a
        labelled array (``fvnum.estimate.NodeValues``: entry ``i`` is node ``i + 1``; it prints
        ``node: value`` lines, ``.best`` is the node of least loss, ``.to_dict()`` maps node -> value)."""
        from fvnum.estimate import NodeValues

        P, l = self._belief(nodes, readings)
        return NodeValues(self.quad.q_values(P, self.budget - l)[0], self.quad.nodes, "expected final loss")

    def next_node(self, nodes=(), readings=()) -> int:
        """The node the optimal policy reads after ``readings`` of ``nodes`` (one per earlier layer)."""
        P, l = self._belief(nodes, readings)
        if l == 0:
            return self.first_node
        return int(self.quad.values(P, self.budget - l)[1][0])

    def to_dict(self) -> dict:
        return {"value": self.value, "error": self.error, "budget": self.budget, "tau": self.tau,
                "first_node": self.first_node, "points": self.points, "checked_points": self.checked_points,
                "how": self.how}


def noisy_bellman(prior, budget: int, channel, *, points=None, threads=None, refine: bool = True) -> NoisyBellman:
    """Exact noisy Bellman optimum (tree prior, coordinate class, ``L = budget <= 3``, ``d = 1``) under the
    gaussian channel ``fvnum.gaussian(tau)`` (or, for ``fvnum.tokens(N, s2)``, the gaussian channel at its
    effective ``tau_of_tokens(prior, N, s2)``). A finite prior (``fvnum.AtomsPrior``, ``fvnum.MixturePrior``) has its
    own (``fvnum.optimum.atoms_dp.atoms_noisy_bellman``, gaussian channel): one verb, dispatched by the prior's class
    (``fvnum.priors.analyses``).
    ``points``: quadrature points per reading class when 1, 2, .. layers remain (default ``POINTS``).
    ``refine`` (default): solve a second quadrature too and return the value with its ``error`` estimate
    (see :class:`NoisyBellman`); False: one solve, ``error`` None (the policy alone, half the work or less)."""
    from fvnum.mc.channels import check_channel
    from fvnum.mc.simulate import plain_scalar
    from fvnum.priors.analyses import analysis

    spec, channel, *_ = check_inputs(prior, check_channel(channel))
    solve = analysis(spec, "noisy_bellman")  # by the prior's class: the tree's recursion (tree_noisy_bellman), a
    # finite prior's (fvnum.optimum.atoms_dp.atoms_noisy_bellman, gaussian channel)
    if solve is None:
        raise InputError("the noisy Bellman recursion needs a tree prior or a finite prior (a Gaussian prior's "
                         "optimum is water-filling)")
    return solve(plain_scalar(budget, "budget"), channel, points=points, threads=threads, refine=refine)


def tree_noisy_bellman(spec, budget: int, channel, *, points=None, threads=None, refine: bool = True) -> NoisyBellman:
    """The exact noisy recursion on the tree prior's numeric view ``spec`` (``TreeSpec``) under ``channel``: what
    :func:`noisy_bellman` answers for a tree (registered for ``TreeSpec``, ``fvnum.priors.analyses``)."""
    from fvsym._validate import check_int

    from fvnum.guards.limits import check_resolution
    from fvnum.mc._chunks import default_threads
    from fvnum.mc.simulate import plain_scalar

    budget = check_int(plain_scalar(budget, "budget"), "budget", 0, 3)
    threads = plain_scalar(threads, "threads")

    check_resolution(spec, "the noisy Bellman recursion")
    if points is None:
        points = default_points(budget)
    points = tuple(check_int(p, "points", 3, 10_000) for p in np.atleast_1d(plain_scalar(points, "points")).tolist())
    if len(points) < budget:
        raise InputError(f"points needs one entry per layer, {budget}, got {points}")
    if channel.tau == 0:
        given = "" if channel.tau_given is None else f" (tau = {channel.tau_given:.3g} is noiseless in effect)"
        raise InputError(f"tau = 0{given} has no readings to integrate: the noiseless optimum is fvsym.bellman.solve")
    if not exact_feasible(spec, budget, points, channel.tau):
        raise ResourceRefused(f"the exact noisy recursion at depth {spec.depth}, budget {budget} costs "
                              f"{tree_work(spec, budget, points, channel.tau):.2g} > {MAX_WORK:.0g} operations; use "
                              f"fvnum.bounds", limit="work")
    threads = default_threads() if threads is None else max(1, int(threads))
    quad = Quadrature(spec, channel.tau, points)
    uniform = np.full((1, spec.n_leaves), 1.0 / spec.n_leaves)
    if budget == 0:
        value, first = float(quad.values(uniform, 0)[0][0]), 0
    else:
        V, node = quad.values(uniform, budget, root_candidates(spec), threads=threads)
        value, first = float(V[0]), int(node[0])
    used = points[:budget]
    how = (f"exact recursion, trapezoid rules of {'/'.join(map(str, used[::-1]))} points per reading class "
           f"on one lattice of readings per depth")
    error = other = None
    if budget == 0:
        error = 0.0
    elif refine:
        other = check_points(spec, budget, used, channel.tau)
        second = Quadrature(spec, channel.tau, other)
        value2 = float(second.values(uniform, budget, root_candidates(spec), threads=threads)[0][0])
        error = abs(value2 - value)
        if other == refined_points(used):  # the refined solve is the value; the default solve checks it
            how = (f"exact recursion, trapezoid rules of {'/'.join(map(str, other[::-1]))} points per reading class "
                   f"on one lattice of readings per depth; error {error:.2g} = |this - the solve at half the points|")
            value = value2
        else:
            how += f"; error {error:.2g} = |this - the solve at half the points| (a finer solve is over MAX_WORK)"
    pol = NoisyBellmanPolicy(quad, budget, first, threads=1)
    return NoisyBellman(value, budget, channel.tau, first, used, how, quad, pol, error, other)
