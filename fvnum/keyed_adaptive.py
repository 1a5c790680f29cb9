"""The adaptive policy search under a key family (:mod:`fvnum.keys`; tree prior): ``d = 1``, ``L = B``.
Layer 1 reads the best single key (:func:`fvnum.keyed.best_nonadaptive_keyed` at budget 1); each later
layer chooses its row, per sample, to minimise the expected loss after that reading (one-step lookahead,
computed by quadrature under the exact conditional law of the new reading given the earlier ones and each
leaf), by Adam on the sphere from three starts (the Numba kernel ``fvnum._kernels.keyed``; the torch
autograd reference :func:`_next_rows_torch`). ``Q`` is the best single key's, shared by the layers (softmax
keys: its ``Q``; each layer's score row ``b = beta w`` is searched whole, its norm ``beta`` included,
:func:`fvnum.keyed_tree.rows_of`; their laws come from :func:`fvnum.keyed_tree.geometry_of`, which the Numba
kernels do not know, so they run the torch engine). Greedy,
so the policy of budget ``B`` is the first ``B`` layers of any longer one: :func:`adaptive_keyed_losses`
returns the loss after every layer on the same samples. Readings are decoded by the exact Bayes posterior
under the family's CLT law; every loss is that decoder's.

The found policy is an achievable loss of its family: an upper bound on the family's adaptive optimum, not
a bound on any trained model (docs/theory.md, section 11).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _chunks
from .estimate import Estimate, SearchResult
from .keyed_tree import (_torch, _Tree, _tree_mean, _tree_second, first_rows, geometry_of, mixture_loss, one_thread,
                         rows_of, tree_law)
from .keys import check_family
from .simulate import check_inputs
from .tree import numeric_prior

NODE_STEP = 0.5  # quadrature nodes at most this many narrowest standard deviations apart


def _posterior_state(tree, geo, rows, phi, N, torch):
    """Cholesky factors of the joint law of the readings so far, ``Sigma^-1 (phi - mean)`` and the log
    posterior weights, per sample and leaf."""
    mean, cov = tree_law(tree, geo, rows, N, torch)  # (n, M, l), (n, M, l, l)
    L = torch.linalg.cholesky(cov)
    r = phi[:, None, :] - mean
    alpha = torch.cholesky_solve(r[..., None], L)[..., 0]
    ll = -0.5 * (r * alpha).sum(-1) - torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    return mean, L, alpha, torch.log_softmax(ll, dim=1)


def _next_law(tree, geo, rows, w, mean, L, alpha, N, torch):
    """Conditional law (mean, var) (n, S, M) of the reading of rows ``w`` (n, S, D) given the earlier
    readings, for every leaf (Gaussian conditioning of the joint CLT law)."""
    mu = _tree_mean(tree, geo, w[..., None, :], torch)[..., 0]  # (n, S, M)
    cross = _tree_second(tree, geo, rows[:, None], w[..., None, :], torch)[..., 0]  # (n, S, M, l)
    own = _tree_second(tree, geo, w[..., None, :], w[..., None, :], torch)[..., 0, 0]  # (n, S, M)
    s_cross = (cross - mean[:, None] * mu[..., None]) / N
    s_own = (own - mu**2) / N
    S = w.shape[1]
    v = torch.cholesky_solve(s_cross[..., None], L[:, None].expand(-1, S, -1, -1, -1))[..., 0]
    cmean = mu + (s_cross * alpha[:, None]).sum(-1)
    cvar = torch.clamp(s_own - (s_cross * v).sum(-1), min=1e-14 * float(s_own.detach().max()))
    return cmean, cvar


def _starts(tree, logw, torch, fixed):
    """(n, 3, D) starting rows: the difference of the two most probable leaves, the principal direction of
    the posterior covariance (power iteration), and a fixed direction."""
    th = torch.as_tensor(tree.thetas, dtype=torch.float64)
    p = torch.exp(logw)
    top = torch.topk(logw, 2, dim=1).indices
    a = th[top[:, 0]] - th[top[:, 1]]
    mu = p @ th
    v = fixed.expand_as(mu).clone()
    for _ in range(30):
        v = (p[:, :, None] * th[None] * (th[None] @ v[:, :, None])).sum(1) - mu * (mu * v).sum(-1, keepdim=True)
        v = v / torch.clamp(torch.linalg.norm(v, dim=-1, keepdim=True), min=1e-300)
    out = torch.stack([a, v, fixed.expand_as(mu)], dim=1)
    return out / torch.clamp(torch.linalg.norm(out, dim=-1, keepdim=True), min=1e-300)


def _next_rows_torch(tree, geo, rows, mean, L, alpha, logw, lt, xcol, fixed, N, steps, chunk, grid, torch):
    """The next layer's rows and readings by autograd (the reference of :func:`_next_rows`): chunks of
    samples that share their most probable leaf, each chunk's mixtures over the leaves alive in any of its
    samples (posterior above 1e-12 of the sample's largest), Adam on the sum of the chunk's objectives."""
    samples = rows.shape[0]
    new_rows, new_phi = [], []
    order = torch.argsort(logw.argmax(1), stable=True)
    for a in range(0, samples, chunk):
        sl = order[a : a + chunk]
        live = (logw[sl] > logw[sl].max(1, keepdim=True).values - 27.6).any(0)
        sub = tree.thetas[live.numpy()]
        with torch.no_grad():
            U0 = _starts(tree, logw[sl], torch, fixed)
        U = U0.clone().requires_grad_(True)
        opt = torch.optim.Adam([U], lr=0.05)
        for _ in range(steps):
            w = rows_of(geo, U, torch)
            cm, cv = _next_law(tree, geo, rows[sl], w, mean[sl], L[sl], alpha[sl], N, torch)
            loss = mixture_loss(cm[..., live], cv[..., live], logw[sl][:, live][:, None, :], sub, torch, grid)
            opt.zero_grad()
            loss.sum().backward()
            opt.step()
        with torch.no_grad():
            w = rows_of(geo, U, torch)
            cm, cv = _next_law(tree, geo, rows[sl], w, mean[sl], L[sl], alpha[sl], N, torch)
            best = mixture_loss(cm[..., live], cv[..., live], logw[sl][:, live][:, None, :], sub, torch,
                                grid).argmin(1)
            idx = torch.arange(best.shape[0])
            new_rows.append(w[idx, best])
            n_idx = lt[sl]
            mu_t, var_t = cm[idx, best, n_idx], cv[idx, best, n_idx]
            new_phi.append(mu_t + torch.sqrt(var_t) * xcol[sl])
    back = torch.argsort(order)
    return torch.cat(new_rows)[back], torch.cat(new_phi)[back]


def _lookahead_state(tree, geo, rows, mean, L, alpha, logw, N, node_step, torch):
    """The arguments ``st`` of ``fvnum._kernels.keyed`` for the samples' current state (rows read, their
    law per leaf from :func:`_posterior_state`) and each sample's number of live leaves."""
    from ._kernels import keyed as KK

    spec = tree.spec
    M = spec.n_leaves
    m_, g_, H = (np.ascontiguousarray(v.detach().numpy(), dtype=float) for v in geo)
    gd = g_[tree.depth_of]
    R = rows.detach().numpy()
    hz = np.ascontiguousarray(R[:, :, tree.paths] * tree.values @ H.T)  # H za, (n, l, M, K)
    lw = np.ascontiguousarray(logw.detach().numpy())
    keep = lw > lw.max(1, keepdims=True) - KK.LIVE_DROP
    live = np.ascontiguousarray(np.argsort(~keep, axis=1, kind="stable"), dtype=np.int64)
    P = torch.cholesky_inverse(L).numpy()
    heap_scales = np.concatenate([[0.0], spec.scales[spec.node_depths(np.arange(1, M)) - 1]])
    st = (np.ascontiguousarray(R * gd), gd, np.ascontiguousarray(tree.paths, dtype=np.int64),
          np.ascontiguousarray(tree.values, dtype=float), m_, H, hz, np.ascontiguousarray(mean.numpy()),
          np.ascontiguousarray(alpha.numpy()), np.ascontiguousarray(P), lw, live, float((spec.scales**2).sum()),
          float(N), heap_scales, float(node_step))
    return st, keep.sum(1).astype(np.int64)


def _next_rows(tree, geo, rows, mean, L, alpha, logw, lt, xcol, fixed, N, steps, chunk, grid, torch, screen=None,
               node_step=0.0):
    """The next layer's rows and readings (``fvnum._kernels.keyed``): per sample, its own live leaves
    (posterior above 1e-12 of its largest), the objective's gradient written out, Adam from the three starts
    of :func:`_starts`; ``chunk`` is not used (the reference's batching)."""
    from ._kernels import keyed as KK

    screen = steps if screen is None else screen
    spec = tree.spec
    n, K, D = rows.shape[0], spec.depth, spec.dim
    st, n_live = _lookahead_state(tree, geo, rows, mean, L, alpha, logw, N, node_step, torch)
    paths, vals, lw = st[2], st[3], st[10]
    U0 = np.zeros((n, 3, D))
    KK._power_starts(lw, paths, vals, fixed.numpy(), U0)
    out_w, out_phi = np.zeros((n, D)), np.zeros(n)
    wk = KK.work_arrays(int(n_live.max()), K, rows.shape[1], D)
    KK._adam_rows(U0, n_live, np.ascontiguousarray(lt.numpy(), dtype=np.int64),
                  np.ascontiguousarray(xcol.numpy()), int(steps), int(screen), 0.05, int(grid), st, wk, out_w, out_phi)
    return torch.from_numpy(out_w), torch.from_numpy(out_phi)


def _policy_layers(prior, max_budget, family, *, n_tokens, s2, samples, seed, first, steps, chunk, grid, engine,
                   screen, node_step, readings=None, canonical=False):
    """The greedy keyed policy layer by layer (the search loop shared by :func:`adaptive_keyed_losses` and
    :func:`adaptive_keyed_trace`): checks the arguments, then yields ``(first, thetas, leaves, rows, phi,
    theta_hat)`` (``first`` the layer-1 design) after every layer ``1..max_budget`` (torch tensors: ``rows`` (n, l,
    D), ``phi`` (n, l), the posterior mean ``theta_hat`` (n, D); ``thetas`` (M, D) the leaves, ``leaves`` (n,) each
    sample's). ``readings`` (n, max_budget): readings given instead of drawn (the rows are the policy's on them).
    ``canonical``: each chosen row's sign flipped (with its drawn reading) so that its largest entry is positive
    (the law of the posterior does not change: a row and its negative read the same)."""
    if engine not in ("numba", "torch"):
        raise ValueError(f"engine must be 'numba' or 'torch', got {engine!r}")
    if engine == "torch" and (screen not in (None, steps) or node_step not in (None, 0)):
        raise ValueError(f"the torch reference runs every start the whole way on {grid} nodes; got screen={screen!r}, "
                         f"node_step={node_step!r}")
    node_step = (NODE_STEP if engine == "numba" else 0.0) if node_step is None else float(node_step)
    if not node_step >= 0:
        raise ValueError(f"node_step must be >= 0 (0: always grid nodes), got {node_step!r}")

    torch = _torch()
    family = check_family(family)
    spec, channel, samples, seed, max_budget = check_inputs(
        prior, n_tokens=n_tokens, s2=s2, samples=samples, seed=seed, budget=max_budget,
        tree="the adaptive keyed search is for the tree prior; on a Gaussian prior use best_nonadaptive_keyed")
    N, s2 = channel.n_tokens, channel.s2
    if not 1 <= max_budget <= spec.dim:
        raise ValueError(f"the adaptive keyed policy reads 1 to D = {spec.dim} keys, got budget {max_budget}")
    if readings is not None:
        readings = np.asarray(readings, dtype=float)
        if readings.shape != (samples, max_budget) or not np.all(np.isfinite(readings)):
            raise ValueError(f"readings must be finite, shape (samples, budget) = {(samples, max_budget)}, got "
                             f"shape {readings.shape}")
        readings = torch.tensor(readings, dtype=torch.float64)
    if first is not None and not isinstance(first, SearchResult):
        raise ValueError(f"first must be a SearchResult of best_nonadaptive_keyed at budget 1, got "
                         f"{type(first).__name__}")
    if first is None:
        from .keyed import best_nonadaptive_keyed

        first = best_nonadaptive_keyed(spec, 1, family, n_tokens=N, s2=s2, seed=seed)
    if first.design is None or np.shape(first.design)[0] != 1 or first.keys is None or first.keys.name != family:
        raise ValueError(f"first must be a one-key {family} design (best_nonadaptive_keyed at budget 1), got {first!r}")
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


@one_thread()
def adaptive_keyed_losses(prior, max_budget: int, family: str = "weighted", *, n_tokens: int = 128, s2: float = 0.01,
                          samples: int = 2000, seed: int = 0, first: SearchResult | None = None, steps: int = 25,
                          chunk: int = 200, grid: int = 128, engine: str = "numba", screen: int | None = None,
                          node_step: float | None = None) -> list:
    """The greedy keyed policy (module docstring) run to ``max_budget`` layers on ``samples`` samples (stream
    ``EVAL``); returns one :class:`~fvnum.estimate.SearchResult` per budget ``1..max_budget`` (the loss after
    that many layers, same samples; ``keys``: the layer-1 key, whose ``Q`` every layer uses; ``design``
    None: the rows are chosen per sample). ``first``: the layer-1 design (default:
    :func:`fvnum.keyed.best_nonadaptive_keyed` at budget 1). Each later layer's row: ``steps`` Adam steps from each of
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
            prior, max_budget, family, n_tokens=n_tokens, s2=s2, samples=samples, seed=seed, first=first, steps=steps,
            chunk=chunk, grid=grid, engine=engine, screen=screen, node_step=node_step)):
        out.append(_layer_result(layer, design.keys, ((theta_hat - th[lt]) ** 2).sum(-1).numpy()))
    return out


@dataclass(frozen=True)
class KeyedTrace:
    """What the greedy keyed policy did on its samples (:func:`adaptive_keyed_trace`): ``keys`` the layer-1
    key (its ``Q`` and ``c`` shared by every layer; a key with row ``w`` is ``f(x) = (w.x) / (x^T Q x + c)``,
    :class:`fvnum.keys.WeightedKeys`), per sample ``leaves`` (n,) and ``thetas`` (n, D) its latent, per sample and
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
def adaptive_keyed_trace(prior, budget: int, family: str = "weighted", *, n_tokens: int = 128, s2: float = 0.01,
                         samples: int = 2000, seed: int = 0, first: SearchResult | None = None, steps: int = 25,
                         chunk: int = 200, grid: int = 128, engine: str = "numba", screen: int | None = None,
                         node_step: float | None = None, readings=None, canonical: bool = False) -> KeyedTrace:
    """The search of :func:`adaptive_keyed_losses` (same arguments, same samples, same losses) with its trace
    (:class:`KeyedTrace`): per sample and layer the rows chosen, the readings and the posterior mean.
    ``readings`` (samples, budget): the policy run on these readings instead of drawn ones (the rows it would
    choose after them; ``losses`` are then those of the posterior mean on the given readings). ``canonical``:
    the sign of every adaptive row (and its reading) chosen so that its largest entry is positive (the same
    policy up to the signs of its keys; the losses agree with the search's in law, not bit for bit)."""
    out, hats = [], []
    for layer, (design, th, lt, rows, phi, theta_hat) in enumerate(_policy_layers(
            prior, budget, family, n_tokens=n_tokens, s2=s2, samples=samples, seed=seed, first=first, steps=steps,
            chunk=chunk, grid=grid, engine=engine, screen=screen, node_step=node_step, readings=readings,
            canonical=canonical)):
        out.append(_layer_result(layer, design.keys, ((theta_hat - th[lt]) ** 2).sum(-1).numpy()))
        hats.append(theta_hat.numpy())
    return KeyedTrace(design.keys, lt.numpy(), th[lt].numpy(), rows.numpy(), phi.numpy(), np.stack(hats, axis=1), out,
                      design)


def adaptive_keyed_trace_cost(depth: int, dim: int, budget: int, samples: int) -> float:
    """Seconds of :func:`adaptive_keyed_trace` on the tree of ``depth`` (``dim`` coordinates): the layer-1
    search and the lookahead layers (the adaptive terms of ``fvnum.limits.keyed_cost``, same constants)."""
    from .limits import KEYED_ADAPTIVE, KEYED_LEAF_S, KEYED_SEARCH_S, KEYED_STATE

    leaves = 2**depth
    return (KEYED_SEARCH_S + KEYED_LEAF_S * leaves
            + samples * leaves * (KEYED_ADAPTIVE * (budget - 1) + KEYED_STATE * budget * dim))


def has_adaptive_search(prior) -> bool:
    """Whether :func:`best_adaptive_keyed` applies to ``prior`` (the tree prior)."""
    from .capabilities import capability

    return capability(numeric_prior(prior), "heap_depth") is not None


def best_adaptive_keyed(prior, budget: int, family: str = "weighted", **kw) -> SearchResult:
    """The best adaptive keyed policy found (``d = 1``, ``L = B``): :func:`adaptive_keyed_losses` at
    ``budget`` layers."""
    return adaptive_keyed_losses(prior, budget, family, **kw)[-1]
