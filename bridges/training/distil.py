"""Model A started from a theory policy: the policy's keys distilled into the router MLPs.

Does trained Model A fall short of its prediction because its MLP routers cannot *represent* the adaptive
policy, or because training does not *find* it? Distillation separates the two. A teacher policy (``path``:
layer ``l`` reads ``x_{n_l}`` of the path decoded from the signs of the earlier readings,
:class:`bridges.models.networks.PathKeys`, :class:`PathTeacher`; ``keyed``: A's prediction policy, the greedy adaptive
search of the weighted key family, from its trace, :class:`KeyedTeacher`) runs on its contexts; its workspace
before layer ``l`` (slots ``1..l-1`` written, the rest empty, as Model A's layer ``l`` sees it) and its keys
``k_l(x_i; p)`` are the regression data of the student's layer-``l`` MLP (mean squared error over tokens, all
layers at once, Adam). Then the readout is fitted with the routers frozen (the recipe's ``theta`` loss). What
comes out is a Model A whose routers imitate the policy as closely as its MLPs allow:

- ``fidelity``: per layer, the held-out mean squared error of the student's keys relative to the teacher's
  key variance (0 = exact imitation), measured on the teacher's contexts (teacher forcing) and on the
  student's own (its readings decide the path it follows);
- the held-out loss of the distilled model before any end-to-end training (and, through ``fv audit``, the
  loss its readings allow under the exact Bayes decoder), beside the teacher's.

``fv train --init-policy path|keyed`` (``TrainConfig.init_policy``) starts a run from it and trains end to end with
the recipe: the loss before and after that fine-tuning is the answer (studies/scaling/distil.md).
"""
from __future__ import annotations
from fvnum.options import KeyedSearch

import math
import time
from dataclasses import asdict, dataclass

import torch

from bridges.runs.config import INIT_POLICIES as TEACHERS  # policies a Model A can be started from
from bridges.runs.config import DataConfig
from bridges.training.data import ContextSampler, fv_prior
from bridges.models.networks import MLPKeys, WorkspaceModel, path_model
from fvsym.errors import InputError

# data streams (training 0, evaluation 1, patching 2, probes 3, audit 4): key regression, readout fit, held out
DISTIL_STREAM, READOUT_STREAM, HELD_OUT_STREAM = 5, 6, 7
HELD_OUT_CONTEXTS = 512
TRACE_SAMPLES = 4096  # the keyed teacher's search: its samples (the last HELD_OUT_CONTEXTS held out)


@dataclass(frozen=True)
class DistilConfig:
    """How a teacher is distilled: ``key_steps`` Adam steps of key regression on ``batch`` fresh contexts
    each (learning rate ``lr``, cosine to 0), then ``readout_steps`` steps of the readout alone (``lr``
    ``readout_lr``); ``seed`` draws the contexts (the weights come from the run's seed); ``trace_samples``: the
    ``keyed`` teacher's search runs on that many samples (the regression's workspaces; some held out)."""

    teacher: str = "path"
    key_steps: int = 4000
    readout_steps: int = 4000
    batch: int = 64
    lr: float = 3e-3
    readout_lr: float = 3e-3
    seed: int = 0
    trace_samples: int = TRACE_SAMPLES

    def __post_init__(self):
        if self.teacher not in TEACHERS:
            raise InputError(f"unknown teacher policy {self.teacher!r}; choose one of {', '.join(TEACHERS)}")
        for name in ("key_steps", "readout_steps", "batch", "trace_samples"):
            value = getattr(self, name)
            least = {"batch": 1, "trace_samples": 4}.get(name, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise InputError(f"{name} must be an integer >= {least}, got {value!r}")
        for name in ("lr", "readout_lr"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise InputError(f"{name} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class DistilResult:
    """What distillation reached: ``fidelity_forced`` and ``fidelity_own`` per layer (relative key error on
    the teacher's and on the student's own workspaces) and ``seconds`` of distillation. The teacher's own loss under
    the exact Bayes decoder: ``teacher_loss`` (value, stderr) for ``keyed`` (its search's loss on its trace); for
    ``path`` its theory row, or ``bridges.analysis.audit.audit_model`` of :func:`teacher_model`."""

    config: DistilConfig
    fidelity_forced: tuple
    fidelity_own: tuple
    seconds: float
    teacher_loss: dict | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["fidelity_forced"], d["fidelity_own"] = list(self.fidelity_forced), list(self.fidelity_own)
        if self.teacher_loss is None:
            del d["teacher_loss"]  # path: as before
        return d


def teacher_model(data: DataConfig, budget: int, teacher: str = "path") -> WorkspaceModel:
    """The ``path`` policy as a Model A without parameters in its routers (its readout is replaced by
    :func:`distil`'s fitted one where a loss is measured). The ``keyed`` teacher is a search, not a model:
    :class:`KeyedTeacher`."""
    if teacher not in TEACHERS:
        raise InputError(f"unknown teacher policy {teacher!r}; choose one of {', '.join(TEACHERS)}")
    if teacher != "path":
        raise InputError(f"the {teacher} teacher is a search over rows per sample, not a fixed model; use "
                         "KeyedTeacher")
    return path_model(data, budget)


def _masked(p_full: torch.Tensor, l: int) -> torch.Tensor:
    """What layer ``l + 1`` sees of a full workspace (batch, B): slots ``1..l`` written, the rest zero."""
    p = torch.zeros_like(p_full)
    p[:, :l] = p_full[:, :l]
    return p


class PathTeacher:
    """The ``path`` policy (:func:`teacher_model`) as regression data: fresh contexts of the cell, the
    teacher's own workspaces and keys."""

    name = "path"

    def __init__(self, data: DataConfig, budget: int, cfg: "DistilConfig", device="cpu"):
        self.model = teacher_model(data, budget).to(device)
        self.seed = cfg.seed

    def batch(self, sampler: ContextSampler, n: int, stream: int, step: int):
        """Tokens x (n, N, D) and, per layer, the teacher's workspace before it (n, B) and keys (n, N)."""
        c = sampler.sample(n, sampler.generator(self.seed, stream, step))
        with torch.no_grad():
            p_full = self.model.encode(c.x, c.y)  # (n, B)
            spaces = [_masked(p_full, l) for l in range(self.model.n_layers)]
            return c.x, spaces, self.keys_on(c.x, spaces)

    def keys_on(self, x, spaces) -> list:
        """The teacher's keys (n, N) of every layer on given workspaces (one (n, B) per layer)."""
        with torch.no_grad():
            return [self.model.layers[l].keys(x, p)[..., 0] for l, p in enumerate(spaces)]


class KeyedTeacher:
    """A's prediction policy (``fvnum.keys.adaptive``: the greedy adaptive search of the weighted key family
    at the run's cell) as regression data: the search's trace on ``TRACE_SAMPLES`` samples (stream ``EVAL`` of
    ``seed``; the last ``HELD_OUT_CONTEXTS`` held out), each sample's readings as the workspaces and its rows'
    keys ``f(x) = (w_l.x) / (x^T Q x + c)`` on fresh tokens as the targets (each row's sign chosen so that its
    largest entry is positive: ``canonical``, else the target would flip with the search's choice). Each
    layer's keys are scaled to unit mean square (``scale``, with its readings: the Bayes loss of readings does
    not change with the scale of a key; the keys themselves are of order ``1 / q`` and would leave the MLP
    tiny targets and workspaces).
    On other workspaces (the student's own readings) the search is run again on those readings
    (:meth:`keys_on`)."""

    name = "keyed"

    def __init__(self, data: DataConfig, budget: int, cfg: "DistilConfig", device="cpu"):
        from fvnum.keys.adaptive import adaptive_keyed_trace
        from fvnum.mc.channels import tokens

        n = cfg.trace_samples
        check_keyed_teacher(data, budget, n)
        self.data, self.budget, self.seed, self.device = data, budget, cfg.seed, torch.device(device)
        self.channel = tokens(data.n_tokens, data.s2, keys="weighted")
        self.trace = adaptive_keyed_trace(fv_prior(data), budget, self.channel, samples=n, seed=cfg.seed,
                                          canonical=True)
        keys = self.trace.keys
        Q = torch.as_tensor(keys.Q, dtype=torch.float32, device=self.device)
        self._Q = torch.diag(Q) if Q.ndim == 1 else Q  # (D, D)
        self._c = float(keys.c)
        self._rows = torch.as_tensor(self.trace.rows, dtype=torch.float32, device=self.device)  # (n, B, D)
        self._phi = torch.as_tensor(self.trace.phi, dtype=torch.float32, device=self.device)  # (n, B)
        self.n_held = min(HELD_OUT_CONTEXTS, n // 2)
        self.n_train = n - self.n_held
        g = torch.Generator(device=self.device).manual_seed(cfg.seed)
        x = torch.randn(min(self.n_train, 256), data.n_tokens, data.dim, generator=g, device=self.device)
        keys = torch.stack([self._keys(x, self._rows[: x.shape[0], l]) for l in range(budget)])  # (B, n, N)
        self.scale = keys.pow(2).mean((1, 2)).rsqrt()  # (B,) each layer's keys to unit mean square

    @property
    def loss(self):
        """The policy's own loss (exact Bayes decoder on its readings): the search's Estimate at the budget."""
        return self.trace.losses[-1].estimate

    def _keys(self, x, rows) -> torch.Tensor:
        """Keys (n, N) of rows (n, D) on tokens x (n, N, D), unscaled."""
        quad = torch.einsum("nid,de,nie->ni", x, self._Q, x)
        return torch.einsum("nid,nd->ni", x, rows) / (quad + self._c)

    def _data(self, idx, g, n_tokens):
        x = torch.randn(len(idx), n_tokens, self.data.dim, generator=g, device=self.device)  # (n, N, D)
        phi = self._phi[idx] * self.scale  # the readings of the scaled keys
        spaces = [_masked(phi, l) for l in range(self.budget)]
        return x, spaces, [self.scale[l] * self._keys(x, self._rows[idx, l]) for l in range(self.budget)]

    def batch(self, sampler: ContextSampler, n: int, stream: int, step: int):
        """Tokens x (n, N, D) and, per layer, a trace sample's workspace before it (n, B) and its keys (n, N):
        training samples for the key streams, the held-out ones for ``HELD_OUT_STREAM``."""
        g = sampler.generator(self.seed, stream, step)
        if stream == HELD_OUT_STREAM:
            idx = torch.arange(self.n_train, self.n_train + min(n, self.n_held), device=self.device)
        else:
            idx = torch.randint(0, self.n_train, (n,), generator=g, device=self.device)
        return self._data(idx, g, sampler.cfg.n_tokens)

    def keys_on(self, x, spaces) -> list:
        """The policy's keys on given workspaces: its rows after the readings of the last workspace (the
        search run on those readings, the layer-1 design of the trace)."""
        from fvnum.keys.adaptive import adaptive_keyed_trace

        readings = spaces[-1] / self.scale.to(x.dtype)  # slots 1..B-1 (the last reading changes no row)
        again = adaptive_keyed_trace(fv_prior(self.data), self.budget, self.channel, samples=x.shape[0],
                                     seed=self.seed, search=KeyedSearch(first=self.trace.first),
                                     readings=readings.double().cpu().numpy(), canonical=True)
        rows = torch.as_tensor(again.rows, dtype=x.dtype, device=x.device)
        return [self.scale[l] * self._keys(x, rows[:, l]) for l in range(self.budget)]


def check_keyed_teacher(data: DataConfig, budget: int, samples: int = TRACE_SAMPLES) -> float:
    """The keyed teacher's price (the search's trace on ``samples`` samples and its re-run on the
    held-out contexts, ``fvnum.keys.adaptive.adaptive_keyed_trace_cost``): seconds, or a one-line ValueError
    over the time cap."""
    from fvnum.keys.adaptive import adaptive_keyed_trace_cost
    from fvsym.guards.limits import check_time

    seconds = adaptive_keyed_trace_cost(data.depth, data.dim, budget, samples + HELD_OUT_CONTEXTS)
    check_time(f"the keyed teacher's search at depth {data.depth}, budget {budget} on "
               f"{samples + HELD_OUT_CONTEXTS} samples", seconds, "; the path teacher needs no search")
    return seconds


TEACHER_CLASSES = {"path": PathTeacher, "keyed": KeyedTeacher}


def _mlp_routers(model: WorkspaceModel) -> list[MLPKeys]:
    keys = [layer.keys for layer in model.layers]
    if model.width != 1 or not all(isinstance(k, MLPKeys) for k in keys):
        raise InputError("distillation starts Model A (one MLP-keyed channel per layer), "
                         f"got d = {model.width} with keys {type(keys[0]).__name__}")
    return keys


def _student_keys(student: WorkspaceModel, x, spaces) -> list:
    """The student's keys (n, N) of every layer on given workspaces."""
    return [layer.keys(x, p)[..., 0] for layer, p in zip(student.layers, spaces)]


def _own_spaces(student: WorkspaceModel, x, y) -> list:
    """The student's own workspace before every layer (no gradients)."""
    with torch.no_grad():
        p = x.new_zeros(x.shape[0], student.budget)
        spaces = []
        for l, layer in enumerate(student.layers):
            spaces.append(p)
            p = p.clone()
            p[:, l] = (layer.keys(x, p)[..., 0] * y).mean(1)
    return spaces


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
    distilled model's held-out loss is ``bridges.training.train.evaluate``'s (a run with ``init_policy`` records it at
    step 0)."""
    cfg = DistilConfig() if cfg is None else cfg
    t0 = time.perf_counter()
    routers = _mlp_routers(model)
    teacher = TEACHER_CLASSES[cfg.teacher](data, model.budget, cfg, device)
    sampler = ContextSampler(data, device)
    params = [p for r in routers for p in r.parameters()]
    opt = torch.optim.Adam(params, lr=cfg.lr)
    autocast, model.autocast = model.autocast, None  # the regression in float32
    model.train()
    try:
        for step in range(cfg.key_steps):
            for group in opt.param_groups:
                group["lr"] = cfg.lr * _cosine(step, cfg.key_steps)
            x, spaces, targets = teacher.batch(sampler, cfg.batch, DISTIL_STREAM, step)
            outputs = _student_keys(model, x, spaces)
            loss = sum(((s - t) ** 2).mean() for t, s in zip(targets, outputs))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        _fit_readout(model, sampler, cfg, READOUT_STREAM)
        with torch.no_grad():
            x, spaces, targets = teacher.batch(sampler, HELD_OUT_CONTEXTS, HELD_OUT_STREAM, 0)
            forced = _relative_errors(targets, _student_keys(model, x, spaces))
            held = sampler.sample(HELD_OUT_CONTEXTS, sampler.generator(cfg.seed, HELD_OUT_STREAM, 0))
            spaces = _own_spaces(model, held.x, held.y)
            own = _relative_errors(teacher.keys_on(held.x, spaces), _student_keys(model, held.x, spaces))
    finally:
        model.autocast = autocast
    model.eval()
    loss = getattr(teacher, "loss", None)
    return DistilResult(cfg, forced, own, time.perf_counter() - t0,
                        None if loss is None else {"value": loss.value, "stderr": loss.stderr})
