"""Additive steering of a trained model's workspace, beside the replacements of :mod:`bridges.patching.state`
(docs/theory.md section 9; Todd et al. add a task's mean activation to the residual stream).

Each target's ``workspace.{l}`` gets ``scale * (Phi_bar_l(donor's prefix) - Phi_bar_l(own prefix))`` added (its
first ``l d`` slots), for a sweep of scales; the donor is of divergence depth ``j`` (the injection's donors, same
stream). The *difference* of the two mean workspaces is added, not ``Phi_bar_l(donor's prefix)`` alone: every
context here already has a task, whose mean is in its state, so at scale 1 a target sitting at its own prefix's
mean lands on the donor's mean while keeping its own deviation (its readings' noise); adding the donor's mean alone
would give ``Phi_l + Phi_bar_l(donor)``, twice a mean's size, a state no context produces. (Todd et al. add to
zero-shot prompts, which hold no task to subtract.) Scale 0 is the unpatched model. Measured: the prefix accuracy
(the decoded leaf has the donor's prefix) and the loss against the target's own ``theta``, paired with the unpatched
loss; standard errors hold the mean workspaces' own Monte Carlo error (``fvnum.patching._jackknife``).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from fvnum.estimate import Estimate
from fvsym._validate import check_seed
from fvnum.patching import _jackknife as jk
from fvnum.patching.state_tables import MeanState, SteeringTable

from bridges.models.taps import patch
from bridges.patching.keys import CHUNK, _check_depth, _sizes, _targets, check_count, donor_signs, model_device
from bridges.patching.state import (INJECT_STREAM, JACKKNIFE_CONTEXTS, _check, _decoded, _Eval, _layers, _leaves, _of,
                                    _spec, model_means, workspace_words)
from bridges.runs.config import DataConfig
from bridges.training.data import ContextSampler
from fvsym.errors import InputError

SCALES = (0.5, 1.0, 2.0, 4.0)


def check_steering_scales(scales) -> tuple:
    """Distinct finite scales, at least one."""
    try:
        out = tuple(float(c) for c in np.atleast_1d(scales).tolist())
    except (TypeError, ValueError):
        raise InputError(f"scales must be numbers, got {scales!r:.60}") from None
    bad = [c for c in out if not math.isfinite(c)]
    if not out or bad:
        raise InputError(f"scales must be at least one finite number, got {scales!r:.60}")
    if len(set(out)) < len(out):
        raise InputError(f"scales must be distinct, got {', '.join(f'{c:g}' for c in out)}")
    return out


def steering_table(model, data_cfg: DataConfig, *, layers=None, scales=SCALES, depth: int = 1,
                   n_contexts: int = 2048, seed: int = 0, mean_contexts: int = 4096,
                   means: MeanState | None = None) -> SteeringTable:
    """Additive steering of ``model`` (module docstring): for each layer of ``layers`` (default ``1..L``) and scale of
    ``scales``, ``n_contexts`` targets (those of the injection with the same ``seed``) with
    ``scale * (Phi_bar_l(donor's prefix) - Phi_bar_l(own prefix))`` added to ``workspace.{l}``, donors of divergence
    depth ``depth``; the mean workspaces ``means`` (:func:`bridges.patching.state.model_mean_state`) or drawn here on
    ``mean_contexts``."""
    _check(model, data_cfg, "steering")
    n, seed = check_count(n_contexts), check_seed(seed)
    layers, K = _layers(layers, model), data_cfg.depth
    j, scales = _check_depth(depth, K), check_steering_scales(scales)
    means = model_means(model, data_cfg, means, layers, mean_contexts, seed)
    spec = _spec(data_cfg)
    sampler = ContextSampler(data_cfg, model_device(model))
    cells = [(a, l, s, c) for a, l in enumerate(layers) for s, c in enumerate(scales)]
    hits, losses = ({cell: [] for cell in cells} for _ in range(2))
    reps = {cell: [([], []) for _ in range(means.groups)] for cell in cells}
    base, own = [], {l: [] for l in layers}
    with _Eval(model):
        for ch, size in _sizes(n):
            target = _targets(sampler, seed, ch, size)
            leaves = _leaves(target.signs)
            donors = _leaves(donor_signs(target.signs, j, sampler.generator(seed, INJECT_STREAM, ch)))
            b_loss, b_leaf = _decoded(model, target, spec)
            base.append(b_loss)
            for l in layers:
                shift = K - min(l, K)
                own[l].append(np.full(size, np.nan) if b_leaf is None else ((b_leaf >> shift) == (leaves >> shift)) * 1.0)
            for cell in cells:
                _, l, _, c = cell
                shift = K - min(l, K)
                mine, theirs = leaves >> shift, donors >> shift
                loss, hit = _steered(model, target, spec, means.means[l], mine, theirs, l, c, shift)
                losses[cell].append(loss)
                hits[cell].append(hit)
                if ch * CHUNK < JACKKNIFE_CONTEXTS:
                    for group in range(means.groups):
                        r = _steered(model, target, spec, jk.leave_out(means, l, group), mine, theirs, l, c, shift)
                        reps[cell][group][0].append(r[1])
                        reps[cell][group][1].append(r[0])
    base = np.concatenate(base)
    shape = (len(layers), len(scales))
    out = {k: np.full(shape, np.nan) for k in ("acc", "acc_e", "loss", "loss_e", "eff", "eff_e")}
    for cell in cells:
        a, _, s, _ = cell
        x, y = _of(np.concatenate(hits[cell])), np.concatenate(losses[cell])
        y, z = Estimate.of(y), Estimate.of(y - base)
        va = jk.jackknife_variance([_of(np.concatenate(h)).value for h, _ in reps[cell]])
        vl = jk.jackknife_variance([np.concatenate(v).mean() for _, v in reps[cell]])
        out["acc"][a, s], out["acc_e"][a, s] = x.value, math.sqrt(x.stderr**2 + va)
        out["loss"][a, s], out["loss_e"][a, s] = y.value, math.sqrt(y.stderr**2 + vl)
        out["eff"][a, s], out["eff_e"][a, s] = z.value, math.sqrt(z.stderr**2 + vl)
    return SteeringTable(layers, scales, j, out["acc"], out["acc_e"], out["loss"], out["loss_e"], out["eff"],
                         out["eff_e"], Estimate.of(base), np.array([_of(np.concatenate(own[l])).value for l in layers]),
                         n, means.n, K, seed=seed, metric="theta" if model.decodes else "query",
                         patched=workspace_words(model),
                         stderr_includes=jk.STDERR_WITH_MEANS if means.groups else jk.STDERR_TARGETS_ONLY)


def _steered(model, target, spec, means: np.ndarray, mine, theirs, l: int, scale: float, shift: int):
    """Per-context loss and donor-prefix hit (NaN for a generic readout) with ``scale * (means[theirs] -
    means[mine])`` added to the first ``l d`` slots of ``workspace.{l}``."""
    if np.isnan(means[theirs]).any() or np.isnan(means[mine]).any():
        raise InputError(f"the mean state has no context of some prefix at layer {l}; draw more (mean_contexts)")
    width = model.state_width(l)
    vector = torch.zeros(len(mine), model.state_size, device=target.x.device)
    vector[:, :width] = torch.as_tensor(scale * (means[theirs] - means[mine]), dtype=torch.float32)
    with patch(model, f"workspace.{l}", lambda own: own + vector.to(own)):
        loss, leaf = _decoded(model, target, spec)
    return loss, np.full(len(mine), np.nan) if leaf is None else ((leaf >> shift) == theirs) * 1.0


__all__ = ["SCALES", "check_steering_scales", "steering_table"]
