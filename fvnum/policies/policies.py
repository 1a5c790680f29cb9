"""Strategies as policies (docs/theory.md section 2): what each layer measures, given the readings so far.

The protocol every policy follows (the user's ``fn(layer, phi)``, the built-in policies' ``start``, ``rows``,
``update``, ``work_floats`` and ``run``) is :mod:`fvnum.mc.protocol`: ``Run``, ``Rows``, ``check_rows`` and
the base class ``Policy``, importable from here too. Here: the built-in policies (``FixedDesign``, ``PathPolicy``,
``TablePolicy``, ``GreedyCoordinatePolicy``, ``RolloutPolicy``, ``GreedyDensePolicy``, ``CallablePolicy``
with :func:`per_sample`, and a finite prior's ``FiniteGreedy`` and ``FiniteBellmanPolicy``).
"""
from __future__ import annotations

import math

import numpy as np
from fvsym import heap
from fvsym._validate import _short

from fvnum.mc import _kernels
from fvnum.priors._kernels.common import TAU0_FALLBACK
from fvnum.mc.protocol import Policy, Rows, Run
from fvnum.priors.atoms import GREEDY_DIRECTIONS
from fvnum.priors.tree import TreeSpec, tokens_law
from fvsym.errors import InputError

GH_POINTS = 24  # Gauss-Hermite points for the greedy lookahead's integral over the next reading


def _coordinate_run(loss, phi, nodes) -> Run:
    rows = [Rows(nodes[:, l : l + 1].copy(), True, False) for l in range(nodes.shape[1])]
    return Run(loss, phi[:, :, None], rows, rows)


class FixedDesign(Policy):
    """A non-adaptive design read in one layer: node numbers (B,) or unit rows (B, D)."""

    adaptive = False

    def __init__(self, design: np.ndarray, name: str = "fixed"):
        self.design = design
        self.layers, self.width = 1, design.shape[0]
        self.name = name

    def rows(self, layer, state, phi):
        return self.design

    def work_floats(self, spec, budget):
        return 0 if np.asarray(self.design).dtype.kind in "iu" else spec.dim

    def describe(self, prior=None, max_layers: int = 4) -> str:
        d = np.asarray(self.design)
        if d.dtype.kind in "iu":
            return f"read nodes {', '.join(map(str, d.tolist()))} in one layer (non-adaptive)"
        return f"read {d.shape[0]} unit rows in one layer (non-adaptive):\n{np.array2string(d, precision=3)}"


class PathPolicy(Policy):
    """docs/theory.md section 6: layer ``l`` reads the depth-``l`` node of the path decoded so far."""

    name = "path"

    def __init__(self, budget: int):
        self.layers, self.width = budget, 1

    def start(self, n):
        return np.ones(n, dtype=np.int64)

    def rows(self, layer, state, phi):
        return state[:, None]

    def update(self, layer, state, rows, phi_layer):
        return heap.child(rows.nodes(phi_layer.shape[0])[:, 0], phi_layer[:, 0])

    def work_floats(self, spec, budget):
        return 0

    def run(self, spec, channel, draws, budget, *, donor=None, patch_layer=0, informed=False):
        """The fused kernel ``_tree_path_sim`` (same numbers as routing layer by layer)."""
        if getattr(spec, "heap_depth", None) is None:  # the kernel walks the tree's nodes
            return None
        n, D = draws.n, spec.dim
        loss, phi, nodes = np.zeros(n), np.zeros((n, budget)), np.zeros((n, budget), dtype=np.int64)
        empty = np.zeros((0, D))
        tokens = channel.kind == "tokens"
        n_tok, sigma2 = tokens_law(spec, channel)
        _kernels._tree_path_sim(
            draws.leaves, draws.noise if not tokens else np.zeros((n, budget)), draws.stat if tokens else empty,
            channel.tau, n_tok, sigma2, spec.scales,
            donor.leaves if donor is not None else np.zeros(0, np.int64),
            donor.stat if (donor is not None and tokens) else empty,
            int(patch_layer) if donor is not None else 0, bool(informed), loss, phi, nodes,
        )
        return _coordinate_run(loss, phi, nodes)


class TablePolicy(Policy):
    """A decision tree of reads, such as the noiseless Bellman policy of ``fvsym.bellman``.

    Each table node reads up to ``width`` tree nodes; the next table node depends on the sign outcome
    of each read node (+1, -1, or 0 when the path avoids it). Under noise each reading vector is mapped
    to the outcome of maximum posterior probability under the table node's belief (uniform over its
    leaves, as in the noiseless recursion) with the gaussian likelihood of noise ``tau``; at ``tau = 0``
    the exact outcome is found (an outcome no leaf explains, possible only under key patching, is
    mapped to the nearest one). A terminal table node (``None``) leaves the remaining layers idle.
    Under the tokens channel the outcomes are mapped with the gaussian likelihood at ``tau(N)`` (an
    approximate belief, for choosing only); the reported loss is decoded exactly.
    """

    name = "bellman_noiseless"

    def __init__(self, root, spec: TreeSpec, tau: float, layers: int, width: int, name: str = "bellman_noiseless"):
        self.layers, self.width, self.name = layers, width, name
        self.tau = tau
        self.tau_eff = tau if tau > 0 else TAU0_FALLBACK * spec.scales[-1]
        K = spec.depth
        table, index = [root], {id(root): 0}
        rows, outcomes = [], []
        t = 0
        while t < len(table):
            node = table[t]
            read = tuple(int(x) for x in node.nodes)
            if len(read) > width:
                raise InputError(f"policy node reads {len(read)} nodes, more than width {width}")
            rows.append(read + (0,) * (width - len(read)))
            counts = {}
            belief = getattr(node, "belief", None)
            leaves = np.asarray(sorted(belief), dtype=np.int64) if belief is not None else np.zeros(0, np.int64)
            if leaves.size:
                if read:
                    keys = np.sign(spec.values(leaves, np.tile(np.array(read), (leaves.size, 1)))).astype(int)
                else:
                    keys = np.zeros((leaves.size, 0), dtype=int)
                for key in map(tuple, keys.tolist()):
                    counts[key] = counts.get(key, 0) + 1
            else:
                counts = {tuple(key): 1 for key in node.children}
            total = sum(counts.values())
            outs = []
            for key, c in sorted(counts.items()):
                child = node.children.get(key) if node.children else None
                if child is not None and id(child) not in index:
                    index[id(child)] = len(table)
                    table.append(child)
                value = [key[b] * spec.scales[int(read[b]).bit_length() - 1] for b in range(len(read))]
                outs.append((value + [0.0] * (width - len(read)), math.log(c / total),
                             -1 if child is None else index[id(child)]))
            outcomes.append(outs)
            t += 1
        M = max(1, max(len(o) for o in outcomes))
        P = len(table)
        self.read = np.array(rows, dtype=np.int64).reshape(P, width)
        self.values = np.zeros((P, M, width))
        self.logp = np.full((P, M), -np.inf)
        self.child = np.full((P, M), -1, dtype=np.int64)
        for p, outs in enumerate(outcomes):
            for m, (v, lp, c) in enumerate(outs):
                self.values[p, m], self.logp[p, m], self.child[p, m] = v, lp, c
        self.depth = K

    def start(self, n):
        return np.zeros(n, dtype=np.int64)

    def rows(self, layer, state, phi):
        out = np.zeros((state.size, self.width), dtype=np.int64)
        live = state >= 0
        out[live] = self.read[state[live]]
        return out

    def update(self, layer, state, rows, phi_layer):
        new = np.full_like(state, -1)
        live = np.flatnonzero(state >= 0)
        if live.size:
            p = state[live]
            dist = ((phi_layer[live, None, :] - self.values[p]) ** 2).sum(axis=2)  # (m, M)
            score = self.logp[p] - dist / (2 * self.tau_eff**2)
            if self.tau == 0:  # exact outcome where one matches, else the nearest
                exact = np.isfinite(self.logp[p]) & (dist <= 1e-18 * (1 + (phi_layer[live, None, :] ** 2).sum(axis=2)))
                score = np.where(exact.any(axis=1, keepdims=True), np.where(exact, self.logp[p], -np.inf), score)
            best = np.argmax(score, axis=1)
            new[live] = self.child[p, best]
        return new

    def work_floats(self, spec, budget):
        return 0


class GreedyCoordinatePolicy(Policy):
    """Greedy one-step lookahead over coordinates: each layer reads the node that minimises the
    expected posterior loss after that one reading, given the exact posterior so far (computed with
    noise ``tau``; a Gauss-Hermite rule integrates over the new reading). Rereading a node is allowed
    only if ``allow_repeat`` (useful under the gaussian channel, useless under ``tokens``). Under the
    tokens channel the belief that chooses the nodes is this gaussian one at ``tau(N)``, an approximation;
    the reported loss is decoded exactly (the law of the tokens, ``fvnum.mc.channels.decoder_of``).
    Cost O(closure x K) per step (``_kernels._greedy_coord_rows``): only the read nodes, their
    ancestors and one node per depth of each unread subtree are candidates (the nodes of a depth in an
    unread subtree are equivalent), scored in the order of their noiseless bound (branch and bound)."""

    name = "greedy_coordinate"

    def __init__(self, spec: TreeSpec, tau: float, budget: int, allow_repeat: bool = True):
        self.spec, self.tau, self.allow_repeat = spec, tau, allow_repeat
        self.layers, self.width = budget, 1
        x, w = np.polynomial.hermite_e.hermegauss(GH_POINTS)
        self.gh_x, self.gh_w = x, w / w.sum()

    def start(self, n):
        return np.zeros((n, 0), dtype=np.int64)

    def rows(self, layer, state, phi):
        n = state.shape[0]
        out = np.zeros(n, dtype=np.int64)
        _kernels._greedy_coord_rows(np.ascontiguousarray(state), np.ascontiguousarray(phi.reshape(n, -1)),
                                    self.tau, self.spec.scales, self.gh_x, self.gh_w, self.allow_repeat, out)
        return out[:, None]

    def update(self, layer, state, rows, phi_layer):
        return np.concatenate([state, rows.nodes(state.shape[0])], axis=1)

    def work_floats(self, spec, budget):
        return 0

    def run(self, spec, channel, draws, budget, *, donor=None, patch_layer=0, informed=False):
        """The fused kernel ``_tree_greedy_sim`` (no key patching: then None)."""
        if donor is not None and patch_layer >= 1:
            return None
        n = draws.n
        loss, phi, nodes = np.zeros(n), np.zeros((n, budget)), np.zeros((n, budget), dtype=np.int64)
        tokens = channel.kind == "tokens"
        n_tok, sigma2 = tokens_law(spec, channel)
        _kernels._tree_greedy_sim(draws.leaves, np.zeros((n, budget)) if tokens else draws.noise,
                                  draws.stat if tokens else np.zeros((0, spec.dim)), channel.tau, n_tok, sigma2, spec.scales,
                                  self.gh_x, self.gh_w, self.allow_repeat, loss, phi, nodes)
        return _coordinate_run(loss, phi, nodes)


class RolloutPolicy(Policy):
    """Approximate noisy Bellman policy (``L = B``, ``d = 1``, coordinate class; repeats allowed unless
    ``allow_repeat`` is False, as under the tokens channel): one-step rollout over the greedy policy
    (``_kernels._rollout_rows``). Each layer but the last tries the ``n_cand`` nodes of best greedy
    score, each followed by the greedy policy to the end, over rollouts (leaves from the posterior,
    channel noise) with the same random numbers for every candidate and every sample (drawn once from
    ``seed``: a deterministic policy), and keeps the greedy node unless another is better by more than
    ``_kernels.MARGIN`` standard errors of the paired differences. The first layer's belief (the prior)
    is shared by every sample, so it is decided once on ``first_rollouts`` rollouts; later layers use
    ``n_rollouts`` per sample. The last layer is the greedy step itself. So it departs from
    ``greedy_coordinate`` only where lookahead pays (``fv bounds`` measures both on common random numbers).
    The comparison stops early: each candidate is first rolled out on the fraction ``screen`` of the
    rollouts and goes on to the rest only if its mean final loss there is below the greedy node's
    (``screen = 1``: every candidate on every rollout).
    Under the tokens channel its rollouts use the gaussian likelihood at ``tau(N)`` (an approximate belief,
    for choosing only); the reported loss is decoded exactly (the law of the tokens)."""

    name = "rollout"

    def __init__(self, spec: TreeSpec, tau: float, budget: int, *, n_rollouts: int = 32, first_rollouts: int = 4096,
                 n_cand: int = 4, screen: float = 0.25, allow_repeat: bool = True, seed: int = 0):
        if isinstance(screen, bool) or not isinstance(screen, (int, float, np.integer, np.floating)) or not 0 < screen <= 1:
            raise InputError(f"screen must be a fraction in (0, 1], got {screen!r}")
        for key, val in (("n_rollouts", n_rollouts), ("first_rollouts", first_rollouts), ("n_cand", n_cand)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < (2 if key != "n_cand" else 1):
                raise InputError(f"{key} must be an integer >= {2 if key != 'n_cand' else 1}, got {_short(val)}")
        self.spec, self.tau, self.layers, self.width = spec, float(tau), budget, 1
        self.n_cand, self.allow_repeat, self.screen = int(n_cand), bool(allow_repeat), float(screen)
        rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(7,)))
        self.U = rng.random((int(n_rollouts), spec.depth))
        self.Z = rng.standard_normal((int(n_rollouts), max(budget, 1)))
        self.U0 = rng.random((int(first_rollouts), spec.depth))
        self.Z0 = rng.standard_normal((int(first_rollouts), max(budget, 1)))
        self.greedy = GreedyCoordinatePolicy(spec, tau, budget, allow_repeat=self.allow_repeat)
        self.first = self._rows(np.zeros((1, 0), np.int64), np.zeros((1, 0)), self.U0, self.Z0) if budget > 1 else None

    def start(self, n):
        return np.zeros((n, 0), dtype=np.int64)

    def _rows(self, nodes, readings, U, Z):
        out = np.zeros(nodes.shape[0], dtype=np.int64)
        _kernels._rollout_rows(np.ascontiguousarray(nodes), np.ascontiguousarray(readings), self.tau,
                               self.spec.scales, self.greedy.gh_x, self.greedy.gh_w, self.allow_repeat, U, Z,
                               self.layers, self.n_cand, max(2, int(round(self.screen * U.shape[0]))), out)
        return out

    def rows(self, layer, state, phi):
        n = state.shape[0]
        if layer == self.layers - 1:
            return self.greedy.rows(layer, state, phi)
        if layer == 0:  # the same belief for every sample: decided once
            return self.first
        return self._rows(state, phi.reshape(n, -1), self.U, self.Z)[:, None]

    def update(self, layer, state, rows, phi_layer):
        return np.concatenate([state, rows.nodes(state.shape[0])], axis=1)

    def work_floats(self, spec, budget):
        return ROLLOUT_CHUNK_FLOATS  # milliseconds a sample: chunks of ~1024 samples keep every thread busy


ROLLOUT_CHUNK_FLOATS = 4096
ROLLOUT_OVERHEAD_SECONDS = 0.2  # building the policy and routing its layers, per call


def rollout_step_seconds(depth: int, readings: int) -> float:
    """Upper price of one greedy step inside a rollout after ``readings`` readings at depth ``K``:
    ``(1.2 + 0.04 K t + 0.004 K^2 t)`` microseconds (the candidates grow like ``t K``, their subtree
    classes like ``t K^2``), with every candidate rolled out in full. The old price, 7.5 times this, lay
    1.5 to 7 times over what was measured on 2 shared cores at load 9 (depth 3..20, budget 3..10, tau 0.3 and 1),
    and 5 to 20 times over in issue 32's measurements (depth 3, 4, 6, budgets 3 to 6, quiet to load 9); this one
    lies about twice over a quiet machine and near what a machine at load 9 takes
    (docs/benchmarks/2026-12-03-prices.md). The constant was 0.6 until the 688 samples it accepted at depth 3,
    budget 8 under a cap of 3 s took 3.0-3.4 s of CPU (2026-12-07, a core beside another test worker): at small
    depths the constant is most of a step, and it is doubled."""
    K, t = int(depth), max(1, int(readings))
    return 1e-6 * (1.2 + 0.04 * K * t + 0.004 * K * K * t)


def rollout_seconds(depth: int, budget: int, samples: int, threads: int = 1, *, n_cand: int = 4,
                    n_rollouts: int = 32, first_rollouts: int = 4096) -> float:
    """Upper price of ``samples`` samples of the rollout policy: every candidate rolled out on every
    rollout (the early stop of the comparison only saves), ``L - l - 1`` greedy steps per rollout at
    layer ``l``, the first layer once on ``first_rollouts``; the top candidates and the last greedy
    layer cost about one step a layer. Samples run in chunks of about 1024 over ``threads``."""
    L, K = max(int(budget), 1), int(depth)
    # rollout_step_seconds(K, t) = 1e-6 (1.2 + g t) for t >= 1; the sums over the layers in closed form (a budget
    # of 10^9 is priced in microseconds, not summed step by step)
    g = 0.04 * K + 0.004 * K * K
    # layers l = 1 .. L-2, each rolling out steps t = l+1 .. L-1: sum of (L-1-l) steps; sum over l of the t's
    # = sum_{t=1}^{L-1} t (t - 1) = (L-1) L (L-2) / 3
    later = 1e-6 * (1.2 * (L - 2) * (L - 1) / 2 + g * (L - 1) * L * (L - 2) / 3) if L > 2 else 0.0
    per = n_cand * n_rollouts * later + L * rollout_step_seconds(K, L)
    first = n_cand * first_rollouts * 1e-6 * (1.2 * (L - 1) + g * (L - 1) * L / 2) if L > 1 else 0.0
    busy = max(1, min(int(threads), -(-int(samples) // 1024)))
    return ROLLOUT_OVERHEAD_SECONDS + first + samples * per / busy


class GreedyDensePolicy(Policy):
    """Greedy one-step lookahead over unit rows (d = 1, L = B): each layer reads the unit row that
    maximises the expected squared norm of the next posterior mean (equivalently, minimises the expected
    loss after that one reading) under the exact leaf posterior so far, found by projected gradient
    ascent on the sphere from several deterministic starts (``_kernels._greedy_dense_rows``). The first
    layer's row is the same for every sample and is optimised once, with more starts. At ``tau = 0`` a
    generic row identifies the leaf, so a fixed random row is read. Under the tokens channel the belief
    that chooses the rows is the gaussian one at ``tau(N)`` (readings treated as independent), an
    approximation; the reported loss is decoded exactly (the law of the tokens)."""

    name = "greedy_dense"

    def __init__(self, spec: TreeSpec, tau: float, budget: int, *, n_iter: int = 20, n_extra: int = 2,
                 n_ascend: int = 2, first_extra: int = 16, live_tol: float = 1e-3):
        self.spec, self.tau, self.layers, self.width = spec, float(tau), budget, 1
        self.n_iter, self.n_ascend, self.live_tol = int(n_iter), int(n_ascend), float(live_tol)
        rng = np.random.default_rng(20240229)  # fixed starts shared by all samples: deterministic policy
        unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
        self.extra = unit(rng.standard_normal((max(1, n_extra), spec.dim)))
        first = unit(rng.standard_normal((max(1, first_extra), spec.dim)))
        self.first, self.first_value = self._choose(np.zeros((1, 0, spec.dim)), np.zeros((1, 0)), first, 5 * self.n_iter, 8)

    def _choose(self, Wh, phi, extra, n_iter, n_ascend):
        n = phi.shape[0]
        out, value = np.zeros((n, self.spec.dim)), np.zeros(n)
        _kernels._greedy_dense_rows(np.ascontiguousarray(Wh), np.ascontiguousarray(phi), self.tau, self.spec.scales,
                                    extra, n_iter, n_ascend, self.live_tol, out, value)
        return out, value

    def start(self, n):
        return np.zeros((n, 0, self.spec.dim))

    def rows(self, layer, state, phi):
        if layer == 0:
            return self.first  # (1, D): shared
        n = state.shape[0]
        out, _ = self._choose(state, phi.reshape(n, layer), self.extra, self.n_iter, self.n_ascend)
        return out[:, None, :]

    def update(self, layer, state, rows, phi_layer):
        n = state.shape[0]
        new = np.broadcast_to(rows.dense(n, self.spec.dim), (n, 1, self.spec.dim))
        return np.concatenate([state, new], axis=1)


class CallablePolicy(Policy):
    """A user function following the module's protocol (stateless); its loss is decoded by the channel's
    decoder (``fvnum.mc.simulate.decode_losses``)."""

    def __init__(self, fn, layers: int, width: int, name: str = "policy"):
        if not callable(fn):
            raise InputError(f"policy must be callable, got {type(fn).__name__}")
        self.fn, self.layers, self.width, self.name = fn, layers, width, name

    def rows(self, layer, state, phi):
        view = phi.view()
        view.flags.writeable = False
        return self.fn(layer, view)


def per_sample(fn):
    """Wrap ``fn(layer, phi_s) -> (d,) nodes or (d, D) rows`` (one sample's readings ``phi_s`` of shape
    ``(layer, d)``) into the vectorised policy protocol. Convenient, and slow for many samples."""

    def vectorised(layer, phi):
        outs = [np.asarray(fn(layer, phi[s])) for s in range(phi.shape[0])]
        return np.stack(outs) if outs else np.zeros((0, 1), dtype=np.int64)

    vectorised.__wrapped__ = fn
    return vectorised


class FiniteGreedy(Policy):
    """Greedy one-step lookahead on a finite prior (``fvnum.priors.atoms``; ``L = B``, ``d = 1``): each layer reads the
    candidate that maximises the expected squared norm of the next posterior mean (equivalently, minimises the
    expected loss after that one read) under the exact posterior over the atoms so far
    (``_kernels.atoms._atoms_greedy_rows``). Candidates: the coordinates ``e_1 .. e_D`` (``greedy_coordinate``;
    repeats allowed: under noise a repeated read is informative), and for ``greedy_dense`` also the
    ``GREEDY_DIRECTIONS`` leading principal directions of each sample's posterior covariance (unit rows). The first
    layer's belief is the prior, shared by every sample: decided once. State: the log posterior weights (n, M)."""

    def __init__(self, spec, tau: float, budget: int, *, dense: bool = False):
        self.spec, self.tau, self.dense = spec, float(tau), bool(dense)
        self.layers, self.width = budget, 1
        self.name = "greedy_dense" if dense else "greedy_coordinate"
        self.n_directions = GREEDY_DIRECTIONS if dense else 0
        self.first = self._choose(spec.log_weights[None, :]) if budget else None

    def _candidates(self, logw: np.ndarray) -> np.ndarray:
        """(m, C, D) candidate rows: the coordinates (shared, m = 1), or per sample with its principal directions."""
        D = self.spec.dim
        eye = np.eye(D)[None]
        if not self.dense:
            return eye
        w = np.exp(logw - logw.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        A = self.spec.atoms
        mean = w @ A
        cov = np.einsum("nm,md,me->nde", w, A, A) - mean[:, :, None] * mean[:, None, :]
        vecs = np.linalg.eigh(cov)[1][:, :, ::-1][:, :, : self.n_directions]  # (n, D, k), largest first
        dirs = np.swapaxes(vecs, 1, 2) * np.where(vecs.sum(axis=1) < 0, -1.0, 1.0)[:, :, None]  # a fixed sign
        return np.concatenate([np.broadcast_to(eye, (logw.shape[0], D, D)), dirs], axis=1)

    def _choose(self, logw: np.ndarray) -> np.ndarray:
        """(n,) nodes (coordinate candidates) or (n, D) unit rows."""
        cands = self._candidates(logw)
        P = np.ascontiguousarray(np.einsum("mcd,kd->mck", cands, self.spec.atoms))
        best = np.zeros(logw.shape[0], dtype=np.int64)
        _kernels.atoms._atoms_greedy_rows(P, np.ascontiguousarray(logw), np.ascontiguousarray(self.spec.atoms),
                                          self.tau, best)
        if not self.dense:
            return best + 1
        rows = cands[np.arange(cands.shape[0]) if cands.shape[0] > 1 else 0, best]
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    def start(self, n):
        return np.tile(self.spec.log_weights, (n, 1))

    def rows(self, layer, state, phi):
        if layer == 0:
            return self.first  # shared by every sample: (1,) node or (1, D) row
        out = self._choose(state)
        return out[:, None] if not self.dense else out[:, None, :]

    def update(self, layer, state, rows, phi_layer):
        n = state.shape[0]
        design = rows.nodes(n) if rows.coordinate else rows.dense(n, self.spec.dim)
        return state + self.spec.log_posterior(design, phi_layer, self.tau) - self.spec.log_weights

    def work_floats(self, spec, budget):
        return spec.work_floats(budget)


class FiniteBellmanPolicy(Policy):
    """The noiseless optimal policy of a finite prior (``fvnum.optimum.atoms_dp.noiseless_bellman``): each sample's belief is
    the cell of atoms its readings left alive; each layer reads the cell's optimal coordinates. Noiseless only."""

    def __init__(self, solution, name: str = "optimal"):
        self.solution, self.name = solution, name
        self.layers, self.width = solution.layers, solution.width
        self.atoms = solution.solver.atoms

    def start(self, n):
        return np.ones((n, self.atoms.shape[0]), dtype=bool)

    def rows(self, layer, state, phi):
        out = np.zeros((state.shape[0], self.width), dtype=np.int64)
        left = self.layers - layer
        memo = {}
        for i, alive in enumerate(state):
            cell = tuple(np.flatnonzero(alive).tolist())
            if cell not in memo:
                memo[cell] = self.solution.best(cell, left)
            nodes = memo[cell]
            out[i, : len(nodes)] = nodes
        return out

    def update(self, layer, state, rows, phi_layer):
        nodes = rows.nodes(state.shape[0])
        vals = self.atoms.T[np.maximum(nodes, 1) - 1]  # (n, d, M)
        match = np.where((nodes > 0)[:, :, None], vals == phi_layer[:, :, None], True).all(axis=1)
        new = state & match
        lost = ~new.any(axis=1)  # readings no atom explains (key patching): the belief stays
        new[lost] = state[lost]
        return new

    def work_floats(self, spec, budget):
        return spec.work_floats(budget)
