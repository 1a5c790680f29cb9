"""The adaptive policy search under a key family (:mod:`fvnum.keys.families`; tree prior): ``d = 1``, ``L = B``.
Layer 1 reads the best single key (:func:`fvnum.keys.nonadaptive.best_nonadaptive_keyed` at budget 1); each later
layer chooses its row, per sample, to minimise the expected loss after that reading (one-step lookahead,
computed by quadrature under the exact conditional law of the new reading given the earlier ones and each
leaf), by Adam on the sphere from three starts (the Numba kernel ``fvnum.mc._kernels.keyed``; the torch
autograd reference :func:`_next_rows_torch`). ``Q`` is the best single key's, shared by the layers (softmax
keys: its ``Q``; each layer's score row ``b = beta w`` is searched whole, its norm ``beta`` included,
:func:`fvnum.keys.tree.rows_of`; their laws come from :func:`fvnum.keys.tree.geometry_of`, which the Numba
kernels do not know, so they run the torch engine). Greedy,
so the policy of budget ``B`` is the first ``B`` layers of any longer one: :func:`adaptive_keyed_losses`
returns the loss after every layer on the same samples. Readings are decoded by the exact Bayes posterior
under the family's CLT law; every loss is that decoder's.

Softmax keys have a stronger search of their own (the section at the end: :func:`adaptive_softmax_losses`, the
row :func:`best_adaptive_keyed` gives for them): each later layer also searches its own quadratic part ``Q``,
per sample, from the greedy step's choice. :func:`adaptive_keyed_losses` under softmax keys stays the greedy
search (its row is cited as "old" in docs/softmax.md).

The found policy is an achievable loss of its family: an upper bound on the family's adaptive optimum, not
a bound on any trained model (docs/theory.md, section 11).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fvnum.mc import _chunks
from fvnum.estimate import Estimate, SearchResult
from fvnum.keys.tree import SoftmaxGeometry, _torch, _Tree, first_rows, geometry_of, mixture_loss, one_thread, tree_law
from fvnum.keys.lookahead import _next_law, _next_rows, _next_rows_torch, _posterior_state, _starts
from fvnum.mc.channels import tokens_of
from fvnum.mc.simulate import check_inputs
from fvnum.priors.tree import numeric_prior
from fvsym.errors import InputError

NODE_STEP = 0.5  # quadrature nodes at most this many narrowest standard deviations apart


def _policy_layers(prior, max_budget, channel, *, samples, seed, first, steps, chunk, grid, engine, screen, node_step,
                   readings=None, canonical=False):
    """The greedy keyed policy layer by layer (the search loop shared by :func:`adaptive_keyed_losses` and
    :func:`adaptive_keyed_trace`): checks the arguments, then yields ``(first, thetas, leaves, rows, phi,
    theta_hat)`` (``first`` the layer-1 design) after every layer ``1..max_budget`` (torch tensors: ``rows`` (n, l,
    D), ``phi`` (n, l), the posterior mean ``theta_hat`` (n, D); ``thetas`` (M, D) the leaves, ``leaves`` (n,) each
    sample's). ``readings`` (n, max_budget): readings given instead of drawn (the rows are the policy's on them).
    ``canonical``: each chosen row's sign flipped (with its drawn reading) so that its largest entry is positive
    (the law of the posterior does not change: a row and its negative read the same)."""
    if engine not in ("numba", "torch"):
        raise InputError(f"engine must be 'numba' or 'torch', got {engine!r}")
    if engine == "torch" and (screen not in (None, steps) or node_step not in (None, 0)):
        raise InputError(f"the torch reference runs every start the whole way on {grid} nodes; got screen={screen!r}, "
                         f"node_step={node_step!r}")
    node_step = (NODE_STEP if engine == "numba" else 0.0) if node_step is None else float(node_step)
    if not node_step >= 0:
        raise InputError(f"node_step must be >= 0 (0: always grid nodes), got {node_step!r}")

    torch = _torch()
    family = tokens_of(channel, "the adaptive keyed search", keys=True).keys
    spec, channel, samples, seed, max_budget = check_inputs(prior, channel, samples=samples, seed=seed, budget=max_budget,
        tree="the adaptive keyed search is for the tree prior; on a Gaussian prior use best_nonadaptive_keyed")
    N, s2 = channel.n_tokens, channel.s2
    if not 1 <= max_budget <= spec.dim:
        raise InputError(f"the adaptive keyed policy reads 1 to D = {spec.dim} keys, got budget {max_budget}")
    if readings is not None:
        readings = np.asarray(readings, dtype=float)
        if readings.shape != (samples, max_budget) or not np.all(np.isfinite(readings)):
            raise InputError(f"readings must be finite, shape (samples, budget) = {(samples, max_budget)}, got "
                             f"shape {readings.shape}")
        readings = torch.tensor(readings, dtype=torch.float64)
    if first is not None and not isinstance(first, SearchResult):
        raise InputError(f"first must be a SearchResult of best_nonadaptive_keyed at budget 1, got "
                         f"{type(first).__name__}")
    if first is None:
        from fvnum.keys.nonadaptive import best_nonadaptive_keyed

        first = best_nonadaptive_keyed(spec, 1, channel, seed=seed)
    if first.design is None or np.shape(first.design)[0] != 1 or first.keys is None or first.keys.name != family:
        raise InputError(f"first must be a one-key {family} design (best_nonadaptive_keyed at budget 1), got {first!r}")
    tree = _Tree(spec)
    D = spec.dim
    with torch.no_grad():
        geo = geometry_of(tree, first.keys, s2, torch)
    if not getattr(geo, "kernel", True):  # a geometry the Numba kernels do not know (softmax): the torch engine
        engine = "torch"
    rng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.EVAL))
    leaves = spec.sample(samples, rng)
    xi = torch.tensor(rng.standard_normal((samples, max(1, max_budget))), dtype=torch.float64)
    fixed = torch.tensor(np.random.default_rng(20240229).standard_normal(D), dtype=torch.float64)
    th = torch.tensor(tree.thetas, dtype=torch.float64)
    lt = torch.tensor(leaves)
    rows = torch.tensor(first_rows(geo, first), dtype=torch.float64)[None].expand(samples, -1, -1).clone()  # (n, 1, D)
    with torch.no_grad():
        mean, cov = tree_law(tree, geo, rows, N, torch)
        m1, v1 = mean[torch.arange(samples), lt, 0], cov[torch.arange(samples), lt, 0, 0]
        phi = (m1 + torch.sqrt(v1) * xi[:, 0])[:, None] if readings is None else readings[:, :1].clone()
    for layer in range(max_budget):
        with torch.no_grad():
            mean, L, alpha, logw = _posterior_state(tree, geo, rows, phi, N, torch)
            theta_hat = torch.exp(logw) @ th
        yield first, th, lt, rows, phi, theta_hat
        if layer + 1 == max_budget:
            return
        args = (tree, geo, rows, mean, L, alpha, logw, lt, xi[:, layer + 1], fixed, N, steps, chunk, grid, torch)
        new_w, new_phi = _next_rows_torch(*args) if engine == "torch" else _next_rows(*args, screen=screen,
                                                                                     node_step=node_step)
        if canonical:
            sign = torch.where(new_w.gather(1, new_w.abs().argmax(1, keepdim=True))[:, 0] < 0, -1.0, 1.0)
            new_w, new_phi = new_w * sign[:, None], new_phi * sign
        if readings is not None:
            new_phi = readings[:, layer + 1]
        rows = torch.cat([rows, new_w[:, None, :]], dim=1)
        phi = torch.cat([phi, new_phi[:, None]], dim=1)


def _layer_result(layer: int, keys, values) -> SearchResult:
    how = (f"adaptive (d = 1, L = {layer + 1}), unit, {keys.name} keys: greedy one-step lookahead, exact Bayes "
           f"decoder under the keys' CLT law")
    return SearchResult("best_adaptive_keyed", Estimate.of(values), how, keys=keys)


def _settings(search, *names) -> dict:
    """The fields ``names`` of a ``fvnum.KeyedSearch`` (None: its defaults), as keywords."""
    from fvnum.options import KeyedSearch, check_options

    search = check_options(search, KeyedSearch, "search")
    return {name: getattr(search, name) for name in names}


@one_thread()
def adaptive_keyed_losses(prior, max_budget: int, channel, *, samples: int = 2000, seed: int = 0, search=None) -> list:
    """The greedy keyed policy (module docstring) of the key family ``channel.keys`` (``channel``:
    ``fvnum.tokens(N, s2=..., keys=...)``) run to ``max_budget`` layers on ``samples`` samples (stream
    ``EVAL``); returns one :class:`~fvnum.estimate.SearchResult` per budget ``1..max_budget`` (the loss after
    that many layers, same samples; ``keys``: the layer-1 key, whose ``Q`` every layer uses; ``design``
    None: the rows are chosen per sample). ``search`` (``fvnum.KeyedSearch``): ``first``, the layer-1 design (default:
    :func:`fvnum.keys.nonadaptive.best_nonadaptive_keyed` at budget 1). Each later layer's row: ``steps`` Adam steps from each of
    three starts (``screen < steps``: all starts for ``screen`` steps, then only the best), the lookahead
    by quadrature on at most ``grid`` nodes, no farther apart than ``node_step`` standard deviations of the
    narrowest live density (``0``: always ``grid`` nodes; default :data:`NODE_STEP`, for ``engine = "torch"``
    0: the reference takes neither ``screen`` nor ``node_step``). The defaults (25 steps, ``node_step =
    0.5``: the objective within about 1e-5 relative of 128 nodes' at a fraction of the nodes) give the
    losses of 40 steps on 128 nodes within their standard error, paired on the same samples
    (docs/benchmarks/2026-12-02-keyed.md). ``engine``: ``"numba"`` (:func:`_next_rows`) or ``"torch"`` (the
    autograd reference, :func:`_next_rows_torch`, minutes where the other takes seconds)."""
    out = []
    for layer, (design, th, lt, rows, phi, theta_hat) in enumerate(_policy_layers(
            prior, max_budget, channel, samples=samples, seed=seed,
            **_settings(search, "steps", "chunk", "grid", "engine", "screen", "node_step", "first"))):
        out.append(_layer_result(layer, design.keys, ((theta_hat - th[lt]) ** 2).sum(-1).numpy()))
    return out


@dataclass(frozen=True)
class KeyedTrace:
    """What the greedy keyed policy did on its samples (:func:`adaptive_keyed_trace`): ``keys`` the layer-1
    key (its ``Q`` and ``c`` shared by every layer; a key with row ``w`` is ``f(x) = (w.x) / (x^T Q x + c)``,
    :class:`fvnum.keys.families.WeightedKeys`), per sample ``leaves`` (n,) and ``thetas`` (n, D) its latent, per sample and
    layer ``rows`` (n, B, D) the rows read, ``phi`` (n, B) the readings and ``theta_hat`` (n, B, D) the exact
    Bayes posterior mean after that layer; ``losses`` the :class:`~fvnum.estimate.SearchResult` of every
    budget (those of :func:`adaptive_keyed_losses` with the same arguments); ``first`` the layer-1 design (pass it
    as ``first`` to run the same policy on other readings)."""

    keys: object
    leaves: np.ndarray
    thetas: np.ndarray
    rows: np.ndarray
    phi: np.ndarray
    theta_hat: np.ndarray
    losses: list
    first: SearchResult

    @property
    def budget(self) -> int:
        return self.rows.shape[1]

    def key_values(self, x, layer: int) -> np.ndarray:
        """(n, n_x) key values of layer ``layer`` (0-based) of every sample on its tokens ``x`` (n, n_x, D)."""
        x = np.asarray(x, dtype=float)
        linear = np.einsum("nid,nd->ni", x, self.rows[:, layer])
        if self.keys.name == "linear":
            return linear
        Q = self.keys.Q if self.keys.Q.ndim == 2 else np.diag(self.keys.Q)
        quad = np.einsum("nid,de,nie->ni", x, Q, x)
        return linear / (quad + self.keys.c)


@one_thread()
def adaptive_keyed_trace(prior, budget: int, channel, *, samples: int = 2000, seed: int = 0, search=None, readings=None,
                         canonical: bool = False) -> KeyedTrace:
    """The search of :func:`adaptive_keyed_losses` (same arguments, same samples, same losses) with its trace
    (:class:`KeyedTrace`): per sample and layer the rows chosen, the readings and the posterior mean.
    ``readings`` (samples, budget): the policy run on these readings instead of drawn ones (the rows it would
    choose after them; ``losses`` are then those of the posterior mean on the given readings). ``canonical``:
    the sign of every adaptive row (and its reading) chosen so that its largest entry is positive (the same
    policy up to the signs of its keys; the losses agree with the search's in law, not bit for bit)."""
    out, hats = [], []
    for layer, (design, th, lt, rows, phi, theta_hat) in enumerate(_policy_layers(
            prior, budget, channel, samples=samples, seed=seed, readings=readings,
            canonical=canonical, **_settings(search, "steps", "chunk", "grid", "engine", "screen", "node_step",
                                             "first"))):
        out.append(_layer_result(layer, design.keys, ((theta_hat - th[lt]) ** 2).sum(-1).numpy()))
        hats.append(theta_hat.numpy())
    return KeyedTrace(design.keys, lt.numpy(), th[lt].numpy(), rows.numpy(), phi.numpy(), np.stack(hats, axis=1), out,
                      design)


def adaptive_keyed_trace_cost(depth: int, dim: int, budget: int, samples: int) -> float:
    """Seconds of :func:`adaptive_keyed_trace` on the tree of ``depth`` (``dim`` coordinates): the layer-1
    search and the lookahead layers (the adaptive terms of ``fvnum.guards.limits.keyed_cost``, same constants)."""
    from fvnum.guards.limits import KEYED_ADAPTIVE, KEYED_LEAF_S, KEYED_SEARCH_S, KEYED_STATE

    leaves = 2**depth
    return (KEYED_SEARCH_S + KEYED_LEAF_S * leaves
            + samples * leaves * (KEYED_ADAPTIVE * (budget - 1) + KEYED_STATE * budget * dim))


# --- softmax keys: a quadratic part per layer (issue 31, item 2; docs/softmax.md, "A stronger adaptive softmax
# search"). The greedy search above scores every layer b.x - x^T Q x with the Q of the best single key, tuned to
# read the root, whose coordinate later layers already know. Here each later layer, per sample, searches its
# whole score: the row b and its own diagonal Q = diag(q), one value per coordinate (q = exp(lq) > 0), by the
# same one-step lookahead under the exact conditional law (docs/theory.md section 10.6: the pair terms take each
# channel's own Q, fvnum.keys.readings.softmax_law). Each layer first runs the greedy step (b with the layer-1 Q, Adam from
# the three starts of _starts), then Adam on (b, lq) from that choice; per sample the better of the two by the
# lookahead objective is read, so no layer's objective is above the greedy step's from the same state. The
# result is an achievable loss of the family (an upper bound on its adaptive optimum), a bound on no trained
# model; adaptive_softmax_losses_mc runs the same policy on real tokens.
LR_ROW, LR_LOG_Q = 0.05, 0.1  # Adam's steps on the score row and on log q
MAX_LOG_RATIO = 30.0  # log E[w w'] / E[w] E[w'] clipped there in the law (as fvnum.keys.nonadaptive.SEARCH_LOG_RATIO)
# seconds of adaptive_softmax_losses (torch, one thread, the shared 2-core machine): SOFTMAX_ROW_S per sample,
# lookahead layer, leaf and coordinate / 15 at the default steps (25 from three starts, then 40 joint; the time
# scales with 3 steps + joint_steps), plus the layer-1 design (fvnum.keys.nonadaptive's price of it, SOFTMAX_COST_FACTOR
# times the weighted one's); measured 62 CPU s for 1000 samples to budget 4 at tree depth 4 (priced 76 s;
# studies/softmax/search.json)
SOFTMAX_ROW_S = 1.5e-3


class RowQGeometry(SoftmaxGeometry):
    """Softmax rows that carry their own quadratic part (torch tensors): a row is ``[b, q]`` (2D,), scored
    ``b.x - x^T diag(q) x`` (``q > 0``); the mean and second moment ``N Cov + mean mean^T`` of any rows on every
    leaf, with the pair terms of :func:`fvnum.keys.readings.softmax_law` (``Sigma_cc' = (I + 2 Q_c + 2 Q_c')^-1``;
    ``log R`` clipped at :data:`MAX_LOG_RATIO`, as the one-layer search clips it)."""

    def __init__(self, tree: _Tree, s2, xp):
        super().__init__(tree, 1.0, 0.0, s2, xp)
        self.D = tree.spec.dim

    def mean(self, A):
        b, q = A[..., : self.D], A[..., self.D :]
        return ((b / (1.0 + 2.0 * q)) @ self.th.T).transpose(-1, -2)  # (..., M, i)

    def second(self, A, B):
        xp, th, D = self.xp, self.th, self.D
        bA, a1A, bB, a1B = A[..., :D], 1.0 + 2.0 * A[..., D:], B[..., :D], 1.0 + 2.0 * B[..., D:]
        a2 = a1A[..., :, None, :] + a1B[..., None, :, :] - 1.0  # (..., i, j, D)
        b2 = bA[..., :, None, :] + bB[..., None, :, :]
        zA = 0.5 * ((bA**2 / a1A).sum(-1) - xp.log(a1A).sum(-1))  # log E[w] (..., i)
        zB = 0.5 * ((bB**2 / a1B).sum(-1) - xp.log(a1B).sum(-1))
        log_ratio = 0.5 * ((b2**2 / a2).sum(-1) - xp.log(a2).sum(-1)) - zA[..., :, None] - zB[..., None, :]
        ma, mb = ((bA / a1A) @ th.T)[..., :, None, :], ((bB / a1B) @ th.T)[..., None, :, :]
        pm, t2 = (b2 / a2) @ th.T, (1.0 / a2) @ (th**2).T  # (..., i, j, M)
        ratio = xp.exp(xp.clamp(log_ratio, max=MAX_LOG_RATIO))[..., None]
        return (ratio * (t2 + (pm - ma) * (pm - mb) + self.s2) + ma * mb).movedim(-1, -3)


def _lookahead(tree, geo, rows, mean, L, alpha, logw, live, sub, W, N, grid, torch):
    """(c, S) expected loss after reading rows ``W`` (c, S, 2D) from the chunk's state."""
    cm, cv = _next_law(tree, geo, rows, W, mean, L, alpha, N, torch)
    return mixture_loss(cm[..., live], cv[..., live], logw[:, live][:, None, :], sub, torch, grid), cm, cv


def _adam(parts, make, fun, steps, torch):
    """``steps`` Adam steps on the free tensors ``parts`` (pairs of a tensor and its learning rate);
    ``make(*tensors)`` the rows, ``fun(rows)`` their (c, S) objective, summed over the chunk (the samples'
    parameters are their own: the sum's gradient is each sample's own)."""
    ts = [t.clone().requires_grad_(True) for t, _ in parts]
    opt = torch.optim.Adam([{"params": [t], "lr": lr} for t, (_, lr) in zip(ts, parts)])
    for _ in range(steps):
        loss = fun(make(*ts)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [t.detach() for t in ts]


def _softmax_layer(tree, geo, rows, mean, L, alpha, logw, q1, fixed, N, steps, joint_steps, chunk, grid, torch):
    """The next layer's rows (n, 2D) and, per sample, the lookahead objective of the greedy step and of the
    row read (n,), n, and the conditional law (mean, var) of the reading read on each leaf (n, M)."""
    n, D = rows.shape[0], tree.spec.dim
    out_w = torch.zeros(n, 2 * D, dtype=torch.float64)
    f_greedy, f_new = torch.zeros(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
    cm_out, cv_out = torch.zeros(n, logw.shape[1], dtype=torch.float64), torch.zeros_like(logw)
    order = torch.argsort(logw.argmax(1), stable=True)
    for a in range(0, n, chunk):
        sl = order[a : a + chunk]
        lw = logw[sl]
        live = (lw > lw.max(1, keepdim=True).values - 27.6).any(0)
        sub = tree.thetas[live.numpy()]
        state = (rows[sl], mean[sl], L[sl], alpha[sl], lw, live, sub)

        def fun(W):
            return _lookahead(tree, geo, *state[:4], state[4], live, sub, W, N, grid, torch)[0]

        with torch.no_grad():
            U0 = _starts(tree, lw, torch, fixed)  # (c, 3, D)
        qs = q1.expand(U0.shape[:-1] + (D,))

        def greedy_rows(U):
            return torch.cat([U, qs[:, : U.shape[1]]], -1)

        U, = _adam([(U0, LR_ROW)], greedy_rows, fun, steps, torch)
        with torch.no_grad():
            fa = fun(greedy_rows(U))
            best = fa.argmin(1)
            idx = torch.arange(len(sl))
            b_a = U[idx, best]

        def joint_rows(b, lq):
            return torch.cat([b, torch.exp(lq)], -1)

        b, lq = _adam([(b_a[:, None], LR_ROW), (torch.log(q1).expand_as(b_a)[:, None], LR_LOG_Q)], joint_rows, fun,
                      joint_steps, torch)  # (c, 1, D) each
        with torch.no_grad():
            W = torch.cat([greedy_rows(b_a[:, None]), joint_rows(b, lq)], 1)  # (c, 2, 2D)
            f, cm, cv = _lookahead(tree, geo, *state[:4], lw, live, sub, W, N, grid, torch)
            pick = f.argmin(1)
            out_w[sl] = W[idx, pick]
            f_greedy[sl], f_new[sl] = f[:, 0], f[idx, pick]
            cm_out[sl], cv_out[sl] = cm[idx, pick], cv[idx, pick]
    return out_w, f_greedy, f_new, cm_out, cv_out


def _check_search(prior, max_budget, channel, samples, seed, first, steps, joint_steps, chunk, grid):
    from fvsym._validate import check_int

    family = tokens_of(channel, "the adaptive softmax search", keys=True).keys
    if family != "softmax":
        raise InputError(f"the adaptive softmax search reads softmax keys: give fvnum.tokens(N, s2=..., "
                         f"keys='softmax'), got keys={family!r}")
    spec, channel, samples, seed, max_budget = check_inputs(prior, channel, samples=samples, seed=seed, budget=max_budget,
        tree="the adaptive softmax search is for the tree prior; on a Gaussian prior use best_nonadaptive_keyed")
    if not 1 <= max_budget <= spec.dim:
        raise InputError(f"the adaptive softmax policy reads 1 to D = {spec.dim} keys, got budget {max_budget}")
    steps = check_int(steps, "steps", minimum=1, maximum=10_000)
    joint_steps = check_int(joint_steps, "joint_steps", minimum=0, maximum=10_000)
    chunk = check_int(chunk, "chunk", minimum=1, maximum=100_000)
    grid = check_int(grid, "grid", minimum=8, maximum=100_000)
    if first is not None and (not isinstance(first, SearchResult) or getattr(first.keys, "name", None) != "softmax"
                              or first.keys.B is None or np.shape(first.keys.B)[0] != 1):
        raise InputError(f"first must be a one-key softmax design (best_nonadaptive_keyed at budget 1), got "
                         f"{type(first).__name__}")
    _check_time_softmax(spec, max_budget, samples, steps, joint_steps)
    return spec, channel, samples, seed, max_budget, steps, joint_steps, chunk, grid


def _softmax_policy(prior, max_budget, channel, *, samples, seed, first, steps, joint_steps, chunk, grid,
                    reader=None):
    """The search layer by layer: yields ``(thetas, leaves, rows, phi, theta_hat, f_greedy, f_new)`` after every
    layer (``rows`` (n, l, 2D): ``[b, q]`` per layer; ``f_*`` the layer's lookahead objectives, None at layer 1).
    ``reader``: a function of the samples' latents (n, D) that returns ``read(rows (n, 2D)) -> (n,)``, the
    readings of real tokens instead of draws from the law (the same ``read`` for every layer: one context)."""
    spec, channel, samples, seed, max_budget, steps, joint_steps, chunk, grid = _check_search(
        prior, max_budget, channel, samples, seed, first, steps, joint_steps, chunk, grid)
    N, s2 = channel.n_tokens, channel.s2
    torch = _torch()
    if first is None:
        from fvnum.keys.nonadaptive import best_nonadaptive_keyed

        first = best_nonadaptive_keyed(spec, 1, channel, seed=seed)
    tree, D = _Tree(spec), spec.dim
    geo = RowQGeometry(tree, s2, torch)
    q1 = torch.as_tensor(first.keys.Q, dtype=torch.float64)
    rng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.EVAL))
    leaves = spec.sample(samples, rng)
    xi = torch.tensor(rng.standard_normal((samples, max_budget)), dtype=torch.float64)
    fixed = torch.tensor(np.random.default_rng(20240229).standard_normal(D), dtype=torch.float64)
    th = torch.tensor(tree.thetas, dtype=torch.float64)
    lt, idx = torch.tensor(leaves), torch.arange(samples)
    read = None if reader is None else reader(tree.thetas[leaves])
    row1 = torch.cat([torch.as_tensor(first.keys.B[0], dtype=torch.float64), q1])
    rows = row1.expand(samples, 1, -1).clone()
    with torch.no_grad():
        m, c = tree_law(tree, geo, rows, N, torch)
        phi = (m[idx, lt, 0] + torch.sqrt(c[idx, lt, 0, 0]) * xi[:, 0])[:, None]
        if read is not None:
            phi = torch.as_tensor(read(rows[:, 0].numpy()), dtype=torch.float64)[:, None]
    f_greedy = f_new = None
    for layer in range(max_budget):
        with torch.no_grad():
            mean, L, alpha, logw = _posterior_state(tree, geo, rows, phi, N, torch)
        yield th, lt, rows, phi, torch.exp(logw) @ th, f_greedy, f_new
        if layer + 1 == max_budget:
            return
        w, f_greedy, f_new, cm, cv = _softmax_layer(tree, geo, rows, mean, L, alpha, logw, q1, fixed, N, steps,
                                                    joint_steps, chunk, grid, torch)
        new_phi = (cm[idx, lt] + torch.sqrt(cv[idx, lt]) * xi[:, layer + 1] if read is None else
                   torch.as_tensor(read(w.numpy()), dtype=torch.float64))
        rows = torch.cat([rows, w[:, None]], 1)
        phi = torch.cat([phi, new_phi[:, None]], 1)


def _softmax_result(layer: int, keys, values, how: str) -> SearchResult:
    return SearchResult("best_adaptive_keyed", Estimate.of(values),
                        f"adaptive (d = 1, L = {layer + 1}), unit, softmax keys: {how}", keys=keys)


SOFTMAX_HOW = ("one-step lookahead over the score row and a quadratic part per layer and sample, from the greedy "
               "step, exact Bayes decoder under the keys' CLT law")


@one_thread()
def adaptive_softmax_losses(prior, max_budget: int, channel, *, samples: int = 2000, seed: int = 0,
                            search=None) -> list:
    """The search of the module docstring under ``channel`` (``fvnum.tokens(N, s2=..., keys="softmax")``) run to
    ``max_budget`` layers on ``samples`` samples (stream ``EVAL``, the same samples and reading noise as :func:`fvnum.keys.adaptive.adaptive_keyed_losses`); one
    :class:`~fvnum.estimate.SearchResult` per budget ``1..max_budget`` (``keys``: the layer-1 key). ``search``
    (``fvnum.KeyedSearch``): ``steps``,
    the greedy step's Adam steps from each of its three starts; ``joint_steps``: Adam's steps on ``(b, log q)``
    after it (0: the greedy policy itself, on this geometry). ``first``: the layer-1 design (default
    :func:`fvnum.keys.nonadaptive.best_nonadaptive_keyed` at budget 1)."""
    out = []
    first, steps, joint_steps, chunk, grid = _settings(search, "first", "steps", "joint_steps", "chunk", "grid").values()
    _check_search(prior, max_budget, channel, samples, seed, first, steps, joint_steps, chunk, grid)
    first = _softmax_first(prior, first, channel, seed)
    for layer, (th, lt, rows, phi, hat, _, _) in enumerate(_softmax_policy(
            prior, max_budget, channel, samples=samples, seed=seed, first=first, steps=steps,
            joint_steps=joint_steps, chunk=chunk, grid=grid)):
        out.append(_softmax_result(layer, first.keys, ((hat - th[lt]) ** 2).sum(-1).numpy(), SOFTMAX_HOW))
    return out


def _softmax_first(prior, first, channel, seed):
    if first is not None:
        return first
    from fvnum.keys.nonadaptive import best_nonadaptive_keyed

    return best_nonadaptive_keyed(prior, 1, channel, seed=seed)


@one_thread()
def adaptive_softmax_losses_mc(prior, max_budget: int, channel, *, samples: int = 500, seed: int = 0,
                               search=None) -> list:
    """The policy of :func:`adaptive_softmax_losses` run on real tokens (``channel``: ``fvnum.tokens(N, s2=...,
    keys="softmax")``): per sample a context of ``N``
    tokens ``x ~ N(0, I)``, ``y = theta.x + N(0, s2)`` (stream ``DONOR``), every layer's reading
    ``sum_i softmax_i(b.x_i - x_i^T diag(q) x_i) y_i`` over that one context (the rows chosen from the earlier
    real readings), decoded by the law's Bayes posterior. One :class:`~fvnum.estimate.Estimate` per budget: the
    loss of a real reader, to hold against the law's (they differ by the law's finite-``N`` error only). ``search``:
    as in :func:`adaptive_softmax_losses`."""
    first, steps, joint_steps, chunk, grid = _settings(search, "first", "steps", "joint_steps", "chunk", "grid").values()
    spec, channel, *_ = _check_search(prior, max_budget, channel, samples, seed, first, steps, joint_steps, chunk, grid)
    n_tokens, s2 = channel.n_tokens, channel.s2
    from fvsym.guards.limits import check_memory

    check_memory(f"real tokens for {samples} samples of {n_tokens} tokens", 8.0 * 4 * samples * n_tokens *
                 (numeric_prior(prior).dim + 1))
    first = _softmax_first(prior, first, channel, seed)

    def reader(thetas):
        n, D = thetas.shape
        rng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.DONOR))
        X = rng.standard_normal((n, n_tokens, D))
        y = np.einsum("nid,nd->ni", X, thetas) + math.sqrt(s2) * rng.standard_normal((n, n_tokens))

        def read(rows):
            s = np.einsum("nid,nd->ni", X, rows[:, :D]) - np.einsum("nid,nd->ni", X**2, rows[:, D:])
            a = np.exp(s - s.max(1, keepdims=True))  # the largest score subtracted: the ratios do not change
            return (a * y).sum(1) / a.sum(1)

        return read

    out = []
    for th, lt, rows, phi, hat, _, _ in _softmax_policy(
            prior, max_budget, channel, samples=samples, seed=seed, first=first, steps=steps,
            joint_steps=joint_steps, chunk=chunk, grid=grid, reader=reader):
        out.append(Estimate.of(((hat - th[lt]) ** 2).sum(-1).numpy()))
    return out


def adaptive_softmax_cost(depth: int, dim: int, budget: int, samples: int, *, steps: int = 25,
                          joint_steps: int = 40) -> float:
    """Seconds of :func:`adaptive_softmax_losses` (or of :func:`adaptive_softmax_losses_mc`, whose tokens cost
    little beside the search) on the tree of ``depth`` (``dim`` coordinates) to ``budget`` layers: the layer-1
    design and, per sample, lookahead layer and leaf, the greedy step and the joint one (:data:`SOFTMAX_ROW_S`)."""
    from fvnum.keys.nonadaptive import SOFTMAX_COST_FACTOR
    from fvnum.guards.limits import KEYED_LEAF_S, KEYED_SEARCH_S

    leaves, work = 2**depth, (3 * steps + joint_steps) / 115.0
    return (SOFTMAX_COST_FACTOR * (KEYED_SEARCH_S + KEYED_LEAF_S * leaves)
            + SOFTMAX_ROW_S * samples * leaves * (dim / 15.0) * (budget - 1) * work)


def _check_time_softmax(spec, budget: int, samples: int, steps: int, joint_steps: int) -> None:
    """Refuse in one line (:func:`fvsym.guards.limits.check_time`) a search priced over the time cap."""
    from fvsym.guards.limits import check_time

    check_time(f"the adaptive softmax search (tree depth {spec.depth}, budget {budget}, {samples} samples)",
               adaptive_softmax_cost(spec.depth, spec.dim, budget, samples, steps=steps, joint_steps=joint_steps))


def has_adaptive_search(prior) -> bool:
    """Whether :func:`best_adaptive_keyed` applies to ``prior`` (the tree prior)."""
    from fvnum.priors.capabilities import capability

    return capability(numeric_prior(prior), "heap_depth") is not None


def best_adaptive_keyed(prior, budget: int, channel, *, samples: int = 2000, seed: int = 0,
                        search=None) -> SearchResult:
    """The best adaptive keyed policy found (``d = 1``, ``L = B``) at ``budget`` layers under ``channel``
    (``fvnum.tokens(N, s2=..., keys=...)``, ``keys`` the family): under softmax keys
    :func:`adaptive_softmax_losses` (a quadratic part per layer), else :func:`adaptive_keyed_losses`; ``search``
    a ``fvnum.KeyedSearch``."""
    kw = dict(samples=samples, seed=seed, search=search)
    if tokens_of(channel, "best_adaptive_keyed", keys=True).keys == "softmax":
        return adaptive_softmax_losses(prior, budget, channel, **kw)[-1]
    return adaptive_keyed_losses(prior, budget, channel, **kw)[-1]
