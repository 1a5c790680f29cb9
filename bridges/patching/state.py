"""Function-vector interventions on trained (or hand-built) models: transplant of the workspace and injection
of mean workspaces (docs/theory.md section 9), beside key patching (:mod:`bridges.patching.keys`) and beside the
theory's tables (:mod:`fvnum.patching.state`).

The target contexts and their donors are those of key patching with the same ``seed`` (the same chunks of the
same stream, :mod:`bridges.patching.keys`): a donor of divergence depth ``j`` shares the target's tokens, label
noise and query. Both interventions act through the tap ``workspace.{l}`` (the workspace after layer ``l``
wrote its slots, ``bridges.models.taps``), with ``patch``, which refuses a patch that no forward pass reached:

- **Transplant at layer l**: the donor runs unpatched and its ``workspace.{l}`` is recorded (slots ``1..l d``;
  the later slots are still empty); the target runs with its ``workspace.{l}`` replaced by it, so layers
  ``l+1..L`` read the target's tokens from the donor's state and the readout decodes the final state.
- **Mean workspace** :func:`model_mean_state`: ``Phi_bar_l(s_1..s_l)``, the mean of ``workspace.{l}`` over
  ``mean_contexts`` fresh contexts (their own stream) grouped by the prefix of their leaves.
- **Injection**: the target's ``workspace.{l}`` is replaced by the mean workspace of its donor's prefix
  (the target's prefix with ``s_j`` flipped, the signs below ``j`` uniform; ``j <= min(l, K)``); measured, the
  prefix accuracy (the leaf nearest ``theta_hat``, ``fvnum.patching.state.nearest_leaves``, has the injected
  prefix) and the loss against the target's own ``theta``. Its standard errors hold the targets' spread and the
  mean workspaces' own Monte Carlo error: each cell is measured again on the first ``JACKKNIFE_CONTEXTS`` targets
  with the mean workspace of each leave-one-group-out replicate of the mean contexts (8 groups), and their
  jackknife variance is added (``fvnum.patching._jackknife``; the table's ``stderr_includes`` says so).

A one-layer model (B, C) has one row (``l = 1``): the readout alone acts on the transplanted or injected state,
no later layer can be steered. Losses are per context, paired with the unpatched loss on the same targets.
"""
from __future__ import annotations

import numpy as np
import torch
from fvnum.estimate import Estimate
from fvsym._validate import check_seed
from fvnum.patching.keys import PatchingTable  # noqa: F401  (the transplant's table type)
from fvnum.patching import _jackknife as jk
from fvnum.patching._jackknife import grouped_means
from fvnum.patching.state import _cells, _injection_of, nearest_leaves
from fvnum.patching.state_tables import InjectionTable, MeanState

from bridges.models.taps import patch, record
from bridges.patching.keys import (CHUNK, _check_depth, _check_layer, _donors, _losses, _sizes, _targets,
                                   check_count, check_model_data, check_tree_data, donor_signs, model_device,
                                   paired_table)
from bridges.runs.config import DataConfig
from bridges.training.data import ContextSampler, fv_prior, leaf_index
from fvsym.errors import InputError

MEAN_STREAM, INJECT_STREAM = 8, 9  # data streams: mean-workspace contexts, injected prefixes (patching uses 2)
JACKKNIFE_CONTEXTS = 512  # targets (whole chunks) re-measured with each leave-one-group-out mean state


def _layers(layers, model) -> tuple:
    if layers is None:
        return tuple(range(1, model.n_layers + 1))
    out = tuple(_check_layer(l, model) for l in np.atleast_1d(layers).tolist())
    if not out:
        raise InputError(f"layers must name at least one layer in 1..L={model.n_layers}")
    return out


def _depths(depths, K: int) -> tuple:
    out = tuple(range(1, K + 1)) if depths is None else tuple(_check_depth(j, K) for j in np.atleast_1d(depths).tolist())
    if not out:
        raise InputError("depths must name at least one divergence depth")
    return out


def _check(model, data_cfg, what):
    check_tree_data(data_cfg, what, "prefixes of leaves")
    check_model_data(model, data_cfg)


def _leaves(signs: torch.Tensor) -> np.ndarray:
    """(n,) leaf indices of signs (n, K) as numpy (:func:`bridges.training.data.leaf_index`, ``fvnum``'s numbering)."""
    return leaf_index(signs).cpu().numpy()


class _Eval:
    """The model in eval mode, without gradients, for the duration of a ``with``."""

    def __init__(self, model):
        self.model = model

    def __enter__(self):
        self.was, self.grad = self.model.training, torch.is_grad_enabled()
        self.model.eval()
        torch.set_grad_enabled(False)
        return self.model

    def __exit__(self, *exc):
        self.model.train(self.was)
        torch.set_grad_enabled(self.grad)


SITES = ("workspace", "attention")  # what a transplant replaces (Model T has both; A, B, C the workspace)


def workspace_words(model) -> str:
    """``workspace.{l}``, and for Model T what it is: the summary token's residual after block ``l``."""
    return "workspace.{l}" + (" (the summary token's residual after block l, hook_resid_post)"
                              if hasattr(model, "blocks") else "")


def _names(layers) -> dict:
    return {l: f"workspace.{l}" for l in layers}


def _sites(model, layers, site: str) -> dict:
    """The taps a transplant at each layer replaces: ``workspace.{l}`` (the workspace; Model T's summary residual
    after block ``l``), or, ``site="attention"`` (Model T), every token's attention output of blocks ``1..l``."""
    if site not in SITES:
        raise InputError(f"site must be one of {', '.join(SITES)}, got {site!r}")
    if site == "workspace":
        return {l: [f"workspace.{l}"] for l in layers}
    if not hasattr(model, "blocks"):
        raise InputError(f"site='attention' transplants the attention outputs of Model T's blocks; "
                         f"{type(model).__name__} has none (its state is the workspace: site='workspace')")
    return {l: [f"blocks.{b}.hook_attn_out" for b in range(1, l + 1)] for l in layers}


# --- transplant ----------------------------------------------------------------------------------------
def transplanted_losses(model, data_cfg: DataConfig, layer: int, j: int, *, n_contexts: int = 2048,
                        seed: int = 0, site: str = "workspace") -> np.ndarray:
    """Per-context losses (n_contexts,) float64 with the target's ``Phi_l`` (``workspace.{layer}``) replaced by
    its donor's of divergence depth ``j`` (``0``: the donor is the target, the no-op control): the cell
    ``(layer, j)`` of :func:`model_state_patching_table`."""
    _check(model, data_cfg, "a state transplant")
    layer, j = _check_layer(layer, model), _check_depth(j, data_cfg.depth, control=True)
    return _transplants(model, data_cfg, check_count(n_contexts), check_seed(seed), (j,), (layer,),
                        site)[(layer, j)]


def _transplants(model, data_cfg, n, seed, depths, layers, site="workspace", slot=None) -> dict:
    sampler = ContextSampler(data_cfg, model_device(model))
    names = _sites(model, layers, site)
    recorded = sorted({name for group in names.values() for name in group})
    out = {key: [] for key in [("base",)] + [(l, j) for j in depths for l in layers]}
    with _Eval(model):
        for c, size in _sizes(n):
            target = _targets(sampler, seed, c, size)
            out[("base",)].append(_losses(model, target))
            for j in depths:
                donor = _donors(sampler, target, j, seed, c)
                with record(model, recorded) as state:
                    model(donor.x, donor.y, donor.x_q)
                for l in layers:
                    values = {name: state[name] if slot is None else _one_slot(state[name], slot)
                              for name in names[l]}
                    with patch(model, values):
                        out[(l, j)].append(_losses(model, target))
    return {k: torch.cat(v).cpu().numpy() for k, v in out.items()}


def _one_slot(donor: torch.Tensor, slot: int):
    """The patch that replaces slot ``slot`` (from 1) of the target's own tap by the donor's, the rest kept."""
    def replace(own: torch.Tensor) -> torch.Tensor:
        out = own.clone()
        out[:, slot - 1] = donor[:, slot - 1].to(own)
        return out

    return replace


def _check_slot(slot, model, layers, site) -> int | None:
    if slot is None:
        return None
    if site != "workspace":
        raise InputError(f"slot={slot!r} transplants one slot of workspace.{{l}}; site={site!r} has none (site='workspace')")
    top = min(model.state_width(l) for l in layers)
    if isinstance(slot, bool) or not isinstance(slot, (int, np.integer)) or not 1 <= slot <= top:
        raise InputError(f"slot must be an integer in 1..{top} (the slots every layer {', '.join(map(str, layers))} "
                         f"has written), got {slot!r}")
    return int(slot)


def model_state_patching_table(model, data_cfg: DataConfig, *, n_contexts: int = 2048, seed: int = 0, depths=None,
                               layers=None, site: str = "workspace", baselines: bool = False,
                               slot: int | None = None) -> PatchingTable:
    """Loss of ``model`` with its workspace ``Phi_l`` transplanted from a donor of divergence depth ``j``, for the
    layers ``layers`` (default ``1..L``) and ``depths`` (default ``1..K``; ``0`` is the no-op control, donor =
    target, whose effects are exactly 0), on ``n_contexts`` target contexts shared by every cell (those of
    ``key_patching_table`` with the same ``seed``); ``effect`` is paired. ``site``: ``workspace`` (Model T: the
    summary token's residual after block ``l``, ``hook_resid_post`` at the summary) or ``attention`` (Model T only:
    every token's attention outputs ``hook_attn_out`` of blocks ``1..l``, the table ``attention transplant``).
    ``baselines``: the no-op control (``j = 0``) and the random-donor baseline (a leaf drawn independently of the
    target's, the table's ``random_donor`` columns). ``slot``: transplant slot ``slot`` (from 1) of
    ``workspace.{l}`` only, the target's other slots kept."""
    from bridges.patching.keys import RANDOM, check_depths

    _check(model, data_cfg, "a state transplant")
    n, seed = check_count(n_contexts), check_seed(seed)
    layers = _layers(layers, model)
    depths = check_depths(depths, data_cfg.depth, baselines)
    slot = _check_slot(slot, model, layers, site)
    runs = _transplants(model, data_cfg, n, seed, depths + (RANDOM,) * baselines, layers, site, slot)
    patched = (workspace_words(model) + ("" if slot is None else f" slot {slot}")) if site == "workspace" else \
        "blocks.{1..l}.hook_attn_out (every token's attention output)"
    return paired_table(runs, layers, depths, n, "theta" if model.decodes else "query",
                        "transplant" if site == "workspace" else "attention transplant", seed=seed, patched=patched,
                        how="replaced by the donor's" + ("" if slot is None else " (the other slots kept)"))


# --- mean workspaces and injection ---------------------------------------------------------------------
def model_mean_state(model, data_cfg: DataConfig, *, n_contexts: int = 4096, seed: int = 0,
                     layers=None) -> MeanState:
    """``Phi_bar_l(s_1..s_l)`` of ``model`` for each layer of ``layers`` (default all): the mean of
    ``workspace.{l}``'s first ``l d`` slots over ``n_contexts`` fresh contexts (their own stream) grouped by
    the prefix of their leaves (``fvnum.patching.state_tables.MeanState``, rows by prefix index)."""
    _check(model, data_cfg, "a mean state")
    n, seed = check_count(n_contexts), check_seed(seed)
    layers = _layers(layers, model)
    sampler = ContextSampler(data_cfg, model_device(model))
    names = _names(layers)
    leaves, states = [], {l: [] for l in layers}
    with _Eval(model):
        for c, size in _sizes(n):
            ctx = sampler.sample(size, sampler.generator(seed, MEAN_STREAM, c))
            with record(model, names.values()) as state:
                model(ctx.x, ctx.y, ctx.x_q)
            leaves.append(_leaves(ctx.signs))
            for l in layers:
                states[l].append(state[names[l]][:, : model.state_width(l)].double().cpu().numpy())
    leaves = np.concatenate(leaves)
    return grouped_means(leaves, {l: np.concatenate(states[l]) for l in layers}, data_cfg.depth, n,
                         f"model {getattr(model, 'name', type(model).__name__)}", model.width)


def model_injection_table(model, data_cfg: DataConfig, *, n_contexts: int = 2048, seed: int = 0, depths=None,
                          layers=None, mean_contexts: int = 4096, means: MeanState | None = None) -> InjectionTable:
    """Mean-workspace injection into ``model`` (module docstring): for each layer ``l`` of ``layers`` and
    divergence depth ``j <= min(l, K)`` of ``depths``, the prefix accuracy and the loss of ``n_contexts`` targets
    whose ``workspace.{l}`` holds the mean workspace of their donor's prefix (``means`` from :func:`model_mean_state`,
    or one computed here on ``mean_contexts``). Prefix accuracy needs ``theta_hat``: for a generic readout it is
    NaN and the loss is the query error."""
    _check(model, data_cfg, "a mean-state injection")
    n, seed = check_count(n_contexts), check_seed(seed)
    layers, K = _layers(layers, model), data_cfg.depth
    depths = _depths(depths, K)
    means = model_means(model, data_cfg, means, layers, mean_contexts, seed)
    spec = _spec(data_cfg)
    sampler = ContextSampler(data_cfg, model_device(model))
    cells = _cells(layers, depths, K)  # the control (the target's own prefix, j = 0) last
    acc = {c: [] for c in range(len(cells))}
    loss = {c: [] for c in range(len(cells))}
    base, own = [], {l: [] for l in layers}
    reps = [[([], []) for _ in range(means.groups)] for _ in cells]  # (hits, losses) per cell and group
    with _Eval(model):
        for ch, size in _sizes(n):
            target = _targets(sampler, seed, ch, size)
            leaves = _leaves(target.signs)
            b_loss, b_leaf = _decoded(model, target, spec)
            base.append(b_loss)
            for l in layers:
                shift = K - min(l, K)
                own[l].append(np.full(size, np.nan) if b_leaf is None else ((b_leaf >> shift) == (leaves >> shift)) * 1.0)
            g = sampler.generator(seed, INJECT_STREAM, ch)
            for c, (_, l, _, j) in enumerate(cells):
                own_leaves = leaves if j == 0 else _leaves(donor_signs(target.signs, j, g))
                prefix = own_leaves >> (K - min(l, K))
                missing = np.unique(prefix[means.counts[l][prefix] == 0])
                if missing.size:
                    raise InputError(f"no context among the mean state's {means.n} has the prefix {int(missing[0])} "
                                     f"at layer {l}; draw more (mean_contexts)")
                c_loss, c_hit = _injected(model, target, spec, means.means[l], prefix, l, K)
                loss[c].append(c_loss)
                acc[c].append(c_hit)
                if ch * CHUNK < JACKKNIFE_CONTEXTS:  # the cell again with each leave-one-group-out mean state
                    for group in range(means.groups):
                        r_loss, r_hit = _injected(model, target, spec, jk.leave_out(means, l, group), prefix, l, K)
                        reps[c][group][0].append(r_hit)
                        reps[c][group][1].append(r_loss)
    base = np.concatenate(base)
    stats = [Estimate.of(base)] + [_of(np.concatenate(own[l])) for l in layers]
    for c in range(len(cells)):
        x, y = np.concatenate(acc[c]), np.concatenate(loss[c])
        stats += [_of(x), Estimate.of(y), Estimate.of(y - base)]
    for c in range(len(cells)):
        for hits, losses in reps[c]:
            stats += [_of(np.concatenate(hits)), Estimate.of(np.concatenate(losses))]
    table = _injection_of(stats, layers, depths, cells, n, "model", means.n, K, None, groups=means.groups, seed=seed)
    from dataclasses import replace

    return replace(table, metric="theta" if model.decodes else "query", patched=workspace_words(model))


def _injected(model, target, spec, means: np.ndarray, prefix: np.ndarray, l: int, K: int):
    """Per-context loss and prefix hit (NaN for a generic readout) of ``target`` with ``workspace.{l}`` replaced by
    ``means[prefix]`` (rows by prefix index)."""
    state = torch.zeros(len(prefix), model.state_size, device=target.x.device)
    state[:, : model.state_width(l)] = torch.as_tensor(means[prefix], dtype=torch.float32)
    with patch(model, f"workspace.{l}", state):
        loss, leaf = _decoded(model, target, spec)
    return loss, np.full(len(prefix), np.nan) if leaf is None else ((leaf >> (K - min(l, K))) == prefix) * 1.0


def model_means(model, data_cfg, means, layers, mean_contexts: int, seed: int) -> MeanState:
    """The mean states an injection or a steering uses: ``means`` checked (this model's, holding ``layers``), or
    :func:`model_mean_state` drawn on ``mean_contexts`` contexts."""
    if means is None:
        return model_mean_state(model, data_cfg, n_contexts=mean_contexts, seed=seed, layers=layers)
    if not isinstance(means, MeanState) or means.width != model.width or any(l not in means.means for l in layers):
        raise InputError("means must be the MeanState of this model (bridges.patching.model_mean_state) holding layers "
                         + ", ".join(map(str, layers)))
    return means


def _of(values: np.ndarray) -> Estimate:
    if np.isnan(values).any():
        return Estimate(float("nan"), float("nan"), len(values))
    return Estimate.of(values)


def _spec(data_cfg):
    from fvnum.priors.tree import numeric_prior

    return numeric_prior(fv_prior(data_cfg))


def _decoded(model, c, spec) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-context loss and the leaf nearest ``theta_hat`` (None for a generic readout)."""
    out = model(c.x, c.y, c.x_q)
    if not model.decodes:
        return ((out.y_hat.double() - c.target.double()) ** 2).cpu().numpy(), None
    theta_hat = out.theta_hat.double()
    loss = ((theta_hat - c.theta.double()) ** 2).sum(-1).cpu().numpy()
    return loss, nearest_leaves(spec, theta_hat.cpu().numpy())


__all__ = ["INJECT_STREAM", "MEAN_STREAM", "SITES", "model_injection_table", "model_mean_state",
           "model_state_patching_table", "transplanted_losses", "CHUNK"]
