"""Model A started from a theory policy: the policy's keys distilled into the router MLPs.

Does trained Model A fall short of its prediction because its MLP routers cannot *represent* the adaptive
policy, or because training does not *find* it? Distillation separates the two. A teacher policy (``path``:
layer ``l`` reads ``x_{n_l}`` of the path decoded from the signs of the earlier readings,
:class:`bridges.models.PathKeys`) runs on fresh contexts; its workspace before layer ``l`` (slots ``1..l-1``
written, the rest empty, as Model A's layer ``l`` sees it) and its keys ``k_l(x_i; p)`` are the regression
data of the student's layer-``l`` MLP (mean squared error over tokens, all layers at once, Adam). Then the
readout is fitted with the routers frozen (the recipe's ``theta`` loss). What comes out is a Model A whose
routers imitate the policy as closely as its MLPs allow:

- ``fidelity``: per layer, the held-out mean squared error of the student's keys relative to the teacher's
  key variance (0 = exact imitation), measured on the teacher's contexts (teacher forcing) and on the
  student's own (its readings decide the path it follows);
- the held-out loss of the distilled model before any end-to-end training (and, through ``fv audit``, the
  loss its readings allow under the exact Bayes decoder), beside the teacher's.

``fv train --init-policy path`` (``TrainConfig.init_policy``) starts a run from it and trains end to end with
the recipe: the loss before and after that fine-tuning is the answer (docs/scaling/distil.md).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch

from .config import INIT_POLICIES as TEACHERS  # policies a Model A can be started from
from .config import DataConfig
from .data import ContextSampler
from .models import MLPKeys, WorkspaceModel, path_model

# data streams (training 0, evaluation 1, patching 2, probes 3, audit 4): key regression, readout fit, held out
DISTIL_STREAM, READOUT_STREAM, HELD_OUT_STREAM = 5, 6, 7
HELD_OUT_CONTEXTS = 512


@dataclass(frozen=True)
class DistilConfig:
    """How a teacher is distilled: ``key_steps`` Adam steps of key regression on ``batch`` fresh contexts
    each (learning rate ``lr``, cosine to 0), then ``readout_steps`` steps of the readout alone (``lr``
    ``readout_lr``); ``seed`` draws the contexts (the weights come from the run's seed)."""

    teacher: str = "path"
    key_steps: int = 4000
    readout_steps: int = 4000
    batch: int = 64
    lr: float = 3e-3
    readout_lr: float = 3e-3
    seed: int = 0

    def __post_init__(self):
        if self.teacher not in TEACHERS:
            raise ValueError(f"unknown teacher policy {self.teacher!r}; choose one of {', '.join(TEACHERS)}")
        for name in ("key_steps", "readout_steps", "batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if name == "batch" else 0):
                raise ValueError(f"{name} must be a {'positive' if name == 'batch' else 'non-negative'} integer, "
                                 f"got {value!r}")
        for name in ("lr", "readout_lr"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class DistilResult:
    """What distillation reached: ``fidelity_forced`` and ``fidelity_own`` per layer (relative key error on
    the teacher's and on the student's own workspaces) and ``seconds`` of distillation. The teacher's own loss under
    the exact Bayes decoder is its theory row (``path``), or ``bridges.audit.audit_model`` of
    :func:`teacher_model`."""

    config: DistilConfig
    fidelity_forced: tuple
    fidelity_own: tuple
    seconds: float

    def to_dict(self) -> dict:
        d = asdict(self)
        d["fidelity_forced"], d["fidelity_own"] = list(self.fidelity_forced), list(self.fidelity_own)
        return d


def teacher_model(data: DataConfig, budget: int, teacher: str = "path") -> WorkspaceModel:
    """The teacher policy as a Model A without parameters in its routers (its readout is replaced by
    :func:`distil`'s fitted one where a loss is measured)."""
    if teacher not in TEACHERS:
        raise ValueError(f"unknown teacher policy {teacher!r}; choose one of {', '.join(TEACHERS)}")
    return path_model(data, budget)


def _mlp_routers(model: WorkspaceModel) -> list[MLPKeys]:
    keys = [layer.keys for layer in model.layers]
    if model.width != 1 or not all(isinstance(k, MLPKeys) for k in keys):
        raise ValueError("distillation starts Model A (one MLP-keyed channel per layer), "
                         f"got d = {model.width} with keys {type(keys[0]).__name__}")
    return keys


def _forced_keys(student: WorkspaceModel, teacher: WorkspaceModel, x, y):
    """Teacher and student keys of every layer on the teacher's workspaces: lists of (batch, N)."""
    with torch.no_grad():
        p_full = teacher.encode(x, y)  # (batch, B)
    out_t, out_s = [], []
    for l in range(student.n_layers):
        p = torch.zeros_like(p_full)
        p[:, :l] = p_full[:, :l]  # what layer l + 1 sees: slots 1..l written
        with torch.no_grad():
            out_t.append(teacher.layers[l].keys(x, p)[..., 0])
        out_s.append(student.layers[l].keys(x, p)[..., 0])
    return out_t, out_s


def _own_keys(student: WorkspaceModel, teacher: WorkspaceModel, x, y):
    """Teacher and student keys of every layer on the student's own workspaces (no gradients)."""
    with torch.no_grad():
        p = x.new_zeros(x.shape[0], student.budget)
        out_t, out_s = [], []
        for l, layer in enumerate(student.layers):
            k = layer.keys(x, p)[..., 0]  # (batch, N)
            out_s.append(k)
            out_t.append(teacher.layers[l].keys(x, p)[..., 0])
            p = p.clone()
            p[:, l] = (k * y).mean(1)
    return out_t, out_s


def _relative_errors(targets, outputs) -> tuple:
    return tuple(float(((s - t) ** 2).mean() / t.var().clamp_min(1e-30)) for t, s in zip(targets, outputs))


def _cosine(step: int, steps: int) -> float:
    return 0.5 * (1.0 + math.cos(math.pi * step / max(1, steps)))


def _fit_readout(model: WorkspaceModel, sampler: ContextSampler, cfg: DistilConfig, stream: int) -> None:
    """The readout alone by the recipe's theta loss on fresh contexts, the routers frozen."""
    params = list(model.readout.parameters())
    if not params or cfg.readout_steps == 0:
        return
    opt = torch.optim.Adam(params, lr=cfg.readout_lr)
    for step in range(cfg.readout_steps):
        for group in opt.param_groups:
            group["lr"] = cfg.readout_lr * _cosine(step, cfg.readout_steps)
        c = sampler.sample(cfg.batch, sampler.generator(cfg.seed, stream, step))
        with torch.no_grad():
            p = model.encode(c.x, c.y)
        loss = ((model.readout(p) - c.theta) ** 2).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def distil(model: WorkspaceModel, data: DataConfig, cfg: DistilConfig | None = None, *,
           device="cpu") -> DistilResult:
    """Distil ``cfg.teacher`` into ``model``'s routers and fit its readout, in place (module docstring). The
    distilled model's held-out loss is ``bridges.train.evaluate``'s (a run with ``init_policy`` records it at
    step 0)."""
    cfg = DistilConfig() if cfg is None else cfg
    t0 = time.perf_counter()
    routers = _mlp_routers(model)
    teacher = teacher_model(data, model.budget, cfg.teacher).to(device)
    sampler = ContextSampler(data, device)
    params = [p for r in routers for p in r.parameters()]
    opt = torch.optim.Adam(params, lr=cfg.lr)
    autocast, model.autocast = model.autocast, None  # the regression in float32
    model.train()
    try:
        for step in range(cfg.key_steps):
            for group in opt.param_groups:
                group["lr"] = cfg.lr * _cosine(step, cfg.key_steps)
            c = sampler.sample(cfg.batch, sampler.generator(cfg.seed, DISTIL_STREAM, step))
            targets, outputs = _forced_keys(model, teacher, c.x, c.y)
            loss = sum(((s - t) ** 2).mean() for t, s in zip(targets, outputs))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        _fit_readout(model, sampler, cfg, READOUT_STREAM)
        held = sampler.sample(HELD_OUT_CONTEXTS, sampler.generator(cfg.seed, HELD_OUT_STREAM, 0))
        with torch.no_grad():
            forced = _relative_errors(*_forced_keys(model, teacher, held.x, held.y))
        own = _relative_errors(*_own_keys(model, teacher, held.x, held.y))
    finally:
        model.autocast = autocast
    model.eval()
    return DistilResult(cfg, forced, own, time.perf_counter() - t0)
