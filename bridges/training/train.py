"""Training of Models A, B, C: ``train(cfg) -> TrainResult`` (docs/theory.md section 7).

Adam, linear warm-up then cosine decay to 0, fresh contexts every step (step ``t`` draws from
``step_generator(seed, TRAIN_STREAM, t)``), gradient-norm clipping, periodic held-out evaluation on a
fixed set of contexts that is the same for every model and seed (``EVAL_SEED``), a tqdm bar with the
running loss, checkpoints and resume. ``torch.manual_seed(cfg.train.seed)`` fixes the initial weights, so
on CPU a seed gives the same numbers, and a resumed run the same numbers as an uninterrupted one.

Loss units. Training minimises ``train.loss``: ``query`` is ``(y_hat - <theta, x_q>)^2`` against the
noise-free target, ``theta`` is ``||theta_hat - theta||^2``. Held-out losses are reported as
``E||theta_hat - theta||^2`` (docs/theory.md section 1): computed directly from ``theta_hat`` for decoding
readouts (A, B with ``decode``, C; ``metric = "theta"``), and as the query MSE for the generic readout
(``metric = "query"``), which has the same expectation because ``x_q ~ N(0, I)`` is independent of both.
"""
from __future__ import annotations

import json
import math
import os
import stat
import sys
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import torch
from fvnum.estimate import Estimate
from fvsym._validate import plain_error
from fvsym.errors import DamagedFile, InputError, ResourceRefused, reworded

from bridges.training._malloc import keep_freed_memory
from bridges.training.checkpoint import (DamagedCheckpoint, load_model, nonfinite_weights, restore, save_checkpoint, set_aside,
                         usable_checkpoint)
from bridges.runs.config import RunConfig
from bridges.runs.devices import check_device
from bridges.training.data import EVAL_SEED, EVAL_STREAM, TRAIN_STREAM, ContextSampler, Contexts, keep_prior_files
from bridges.models.networks import WorkspaceModel, build_model, grow
from bridges.models.precision import describe, machine
from bridges.runs.store import abridge, number_problem, verify_checksum, with_checksum, write_atomic, write_json
from bridges.models.taps import record

RESULT_FORMAT = "fv-train-result-1"
EVAL_BATCH = 256  # held-out contexts come in chunks of this size, whatever the training batch


class TrainingDiverged(ValueError):
    """The training loss, the held-out loss or the weights became NaN or infinite."""


class DamagedResult(DamagedFile):
    """A ``result.json`` that cannot be used: not JSON, not a training result, no checksum or a wrong one, a
    key that is not its configuration's, or fields of the wrong type or range (a loss that is NaN, negative or
    not a number)."""


class TimeCapReached(ResourceRefused):
    """Training ran past the time cap of the command (``fv --max-seconds``); its checkpoint is kept."""


def _say(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass(frozen=True)
class TrainResult:
    """Outcome of ``train``. ``history`` rows: ``(step, train_loss, eval_loss, eval_stderr, wall_s)``;
    ``train_loss`` is the mean training loss since the previous row (None at step 0), ``wall_s`` the
    seconds since the start of training, summed over resumed segments."""

    config: RunConfig
    loss: float  # final held-out loss, units of E||theta_hat - theta||^2
    stderr: float
    n_eval: int
    metric: str  # "theta" or "query" (see module docstring)
    history: tuple
    steps: int  # steps done so far
    finished: bool
    train_seconds: float  # time in optimisation steps (excluding evaluation and checkpoints)
    wall_seconds: float
    steps_per_s: float
    run_dir: str | None
    checkpoint: str | None
    precision: str = "fp32"  # what the key MLPs ran in: "bf16" or "fp32" (TrainConfig.precision resolved)
    machine: str | None = None  # hardware and torch of its last segment (bridges.models.precision.machine)
    model: WorkspaceModel | None = field(default=None, compare=False, repr=False)  # the trained model (not saved)

    def __repr__(self) -> str:
        c = self.config
        return (f"TrainResult(Model {c.model.model}, {c.data.prior} prior, depth {c.data.depth}, budget {c.model.budget}, "
                f"N {c.data.n_tokens}, seed {c.train.seed}: loss {self.loss:.5g} +- {self.stderr:.2g} ({self.metric}, "
                f"n={self.n_eval}); {self.steps} steps{'' if self.finished else ' (unfinished)'}, "
                f"{self.train_seconds:.1f} s, {self.precision})")

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "model"}
        d["config"] = self.config.to_dict()
        d["history"] = [list(row) for row in self.history]
        return {"format": RESULT_FORMAT, "key": self.config.key(), **d}

    @classmethod
    def from_dict(cls, d: dict) -> "TrainResult":
        if not isinstance(d, dict) or d.get("format") != RESULT_FORMAT:
            raise DamagedFile(f"not a training result (format {RESULT_FORMAT!r})")
        d = {k: v for k, v in d.items() if k not in ("format", "key", "checksum")}
        d["config"] = RunConfig.from_dict(d["config"])
        d["history"] = tuple(tuple(row) for row in d["history"])
        return cls(**d)


def context_losses(model: WorkspaceModel, c: Contexts, kind: str) -> torch.Tensor:
    """Per-context loss (batch,): ``theta`` = ||theta_hat - theta||^2, ``query`` = (y_hat - <theta, x_q>)^2."""
    out = model(c.x, c.y, c.x_q)
    if kind == "theta":
        return ((out.theta_hat - c.theta) ** 2).sum(-1)  # (batch,)
    return (out.y_hat - c.target) ** 2  # (batch,)


def readout_losses(model: WorkspaceModel, p: torch.Tensor, c: Contexts, kind: str) -> torch.Tensor:
    """Per-context loss (batch,) of the model's readout applied to the workspace ``p`` (batch, B)."""
    if kind == "theta":
        return ((model.decode(p) - c.theta) ** 2).sum(-1)  # (batch,)
    y_hat = (model.decode(p) * c.x_q).sum(-1) if model.decodes else model.readout(p, c.x_q)
    return (y_hat - c.target) ** 2  # (batch,)


def training_loss(model: WorkspaceModel, c: Contexts, kind: str, aux_readout: float = 0.0) -> torch.Tensor:
    """The training objective (a scalar): the mean context loss, plus, with ``aux_readout`` W > 0,
    ``W * mean over l < L`` of the mean loss of the readout of the workspace after layer ``l`` (the tap
    ``workspace.l``: slots ``l+1..B`` still zero), so each layer's reading must pay off on its own."""
    if aux_readout == 0 or model.n_layers < 2:
        return context_losses(model, c, kind).mean()
    names = [f"workspace.{l}" for l in range(1, model.n_layers)]
    with record(model, names, detach=False) as partial:
        final = context_losses(model, c, kind).mean()
    aux = torch.stack([readout_losses(model, partial[name], c, kind).mean() for name in names]).mean()
    return final + aux_readout * aux


@torch.no_grad()
def evaluate(model: WorkspaceModel, sampler: ContextSampler, *, n_batches: int, batch: int = EVAL_BATCH,
             seed: int = EVAL_SEED) -> Estimate:
    """Held-out loss in units of ``E||theta_hat - theta||^2`` on ``n_batches`` seeded batches of ``batch``
    contexts (an Estimate: mean per context, its standard error over the ``n`` contexts); with the defaults
    every model of a data configuration sees the same contexts."""
    was_training = model.training
    model.eval()
    kind = "theta" if model.decodes else "query"
    losses = torch.cat([
        context_losses(model, sampler.sample(batch, sampler.generator(seed, EVAL_STREAM, i)), kind).double()
        for i in range(n_batches)
    ])  # (n_batches * batch,)
    model.train(was_training)
    n = losses.numel()
    stderr = float(losses.std() / math.sqrt(n)) if n > 1 else float("nan")
    return Estimate(float(losses.mean()), stderr, n, "mc: held-out contexts")


def lr_factor(step: int, steps: int, warmup: int, schedule: str) -> float:
    """Learning-rate multiplier at 0-based ``step``: linear warm-up, then cosine to 0 (or constant)."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def resolve_device(name: str) -> torch.device:
    """The torch device ``name`` if this machine runs it (``bridges.runs.devices.check_device``: cpu, cuda[:i]
    where torch sees it, mps where torch sees it); a one-line InputError otherwise. ``train`` asks it first,
    before its run folder is touched."""
    return torch.device(check_device(name))


def run_dir(cfg: RunConfig) -> Path | None:
    """``out/<key>/`` of a run (None without ``train.out``)."""
    return Path(cfg.train.out) / cfg.key() if cfg.train.out else None


def finished_results(configs):
    """``(cfg, TrainResult)`` for each of ``configs`` whose run folder holds a finished result (checked by
    :func:`load_result`: its checksum and its key); a study's report reads its runs this way."""
    for cfg in configs:
        folder = run_dir(cfg)
        if folder is not None and (folder / "result.json").is_file():
            result = load_result(folder / "result.json", cfg)
            if result.finished:
                yield cfg, result


MAX_RESULT_BYTES = 256 << 20  # a result.json is kilobytes (its history); a larger file is not one


def load_result(path, cfg: RunConfig | None = None) -> TrainResult:
    """The ``TrainResult`` stored in a run's ``result.json``, checked like a cell: its checksum, its own key
    (that of its configuration), and every field of the right type and range (a finite, non-negative loss).
    A damaged file is a one-line :class:`DamagedResult`; with ``cfg``, the result of another configuration
    is a ``ValueError`` that says so."""
    path = Path(path)
    odd = not_regular(path)
    if odd:
        raise DamagedResult(f"{path} is {odd}, not a training result")
    try:
        size = path.stat().st_size
        if size > MAX_RESULT_BYTES:
            raise DamagedResult(f"{path} is {size:,} bytes, not a training result")
        record = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise DamagedResult(f"{path} is not a readable training result ({abridge(plain_error(exc), 100)})") from None
    if not isinstance(record, dict) or record.get("format") != RESULT_FORMAT:
        raise DamagedResult(f"{path} is not a training result (format {RESULT_FORMAT!r})")
    key = record.get("key")
    if "checksum" not in record:
        raise DamagedResult(f"{path} has no checksum (written before results were checksummed, or edited; the "
                            "same fv train command checks the run and writes it again)")
    if not isinstance(key, str) or not verify_checksum(record, key):
        raise DamagedResult(f"{path} fails its checksum (edited or corrupted)")
    problem = _result_problem(record)
    if problem:
        raise DamagedResult(f"{path} {problem}")
    try:
        result = TrainResult.from_dict(record)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DamagedResult(f"{path} is not a readable training result ({abridge(plain_error(exc), 100)})") from None
    if result.config.key() != key:
        raise DamagedResult(f"{path} carries the key {abridge(key, 40)}, not its configuration's "
                            f"({result.config.key()})")
    if result.finished != (result.steps == result.config.train.steps) or result.steps > result.config.train.steps:
        raise DamagedResult(f"{path} says {result.steps} of {result.config.train.steps} steps, "
                            f"{'finished' if result.finished else 'unfinished'}")
    if cfg is not None and key != cfg.key():
        raise InputError(f"{path} holds the result of another configuration ({abridge(key, 40)})")
    return result


def not_regular(path) -> str | None:
    """What ``path`` is when it exists and is not a regular file (``a FIFO``, ``a link to /dev/zero``, ``a folder``,
    ``a link to nothing``), read without opening it; None for a regular file or nothing there."""
    path = Path(path)
    if not os.path.lexists(path):
        return None
    link = f"a link to {abridge(os.readlink(path), 60)}" if path.is_symlink() else None
    try:
        mode = path.stat().st_mode
    except OSError:
        return link or "unreadable"
    if stat.S_ISREG(mode):
        return None
    kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a socket"
            if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")
    return f"{link} ({kind})" if link else kind


_NUMBERS = {"loss": False, "stderr": False, "train_seconds": False, "wall_seconds": False, "steps_per_s": True}


def _result_problem(record: dict) -> str | None:
    """What is wrong with the fields of a training result (read back from JSON), or None."""
    for name, optional in _NUMBERS.items():
        v = record.get(name)
        if v is None and optional:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"has {abridge(v, 40)} where its {name} (a number) is expected"
    for name, low in (("n_eval", 1), ("steps", 0)):
        v = record.get(name)
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            return f"has {abridge(v, 40)} where its {name} (an integer >= {low}) is expected"
    if not isinstance(record.get("finished"), bool) or record.get("metric") not in ("theta", "query"):
        return "lacks its finished flag or its metric"
    history = record.get("history")
    if not isinstance(history, list) or not history or any(not isinstance(r, list) or len(r) != 5 for r in history):
        return "has no history of evaluations"
    for name in ("run_dir", "checkpoint", "precision", "machine"):
        if record.get(name) is not None and not isinstance(record[name], str):
            return f"has {abridge(record[name], 40)} where its {name} is expected"
    return number_problem({k: v for k, v in record.items() if k != "config"}, "result.json")


def train(cfg: RunConfig, *, progress: bool = True, resume: bool = True, stop_at: int | None = None) -> TrainResult:
    """Train the model of ``cfg``; see the module docstring.

    With ``cfg.train.out`` the run lives in ``out/<key>/`` (``config.json``, ``checkpoint.pt``,
    ``result.json``); ``resume`` continues from its checkpoint, or returns the stored result of a finished
    run. ``result.model`` is the trained model (in eval mode; also restored for a stored result).
    ``stop_at``: stop after that many steps (checkpointed, ``finished=False``), as an interruption would.
    """
    if not isinstance(cfg, RunConfig):
        raise InputError(f"train needs a RunConfig, got {type(cfg).__name__} {cfg!r:.60}")
    cfg.check_resources()
    device = resolve_device(cfg.train.device)
    if stop_at is not None and not 0 <= stop_at <= cfg.train.steps:
        raise InputError(f"stop_at must lie in 0..steps={cfg.train.steps}, got {stop_at}")
    keep_freed_memory()  # reuse activation memory across steps instead of page-faulting it in again
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.train.threads)
    try:
        return _train(cfg, device, progress, resume, stop_at)
    finally:
        torch.set_num_threads(threads)


def _train(cfg: RunConfig, device, progress, resume, stop_at) -> TrainResult:
    tc = cfg.train
    folder = run_dir(cfg)
    ckpt_path = folder / "checkpoint.pt" if folder else None
    source = None
    if tc.init_from is not None and not (folder and os.path.lexists(folder)):
        source = _init_source(cfg)  # a refused --init-from leaves no run folder behind
    if folder:
        if os.path.lexists(folder) and not folder.is_dir():
            raise NotADirectoryError(f"run folder {folder} exists and is not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("checkpoint.pt", "checkpoint.prev.pt", "result.json", "config.json"):
            path = folder / name
            if os.path.lexists(path) and not path.is_file():  # a folder, a link to nothing, a device
                _say(f"{path} is not a file: set aside as {set_aside(path).name}")
        if resume and (folder / "result.json").exists():
            stored = _stored_result(folder, cfg, device)
            if stored is not None:
                return stored
        if (folder / "config.json").exists():
            try:
                stored = RunConfig.from_json((folder / "config.json").read_text())
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                aside = set_aside(folder / "config.json")
                _say(f"{folder / 'config.json'} is damaged ({abridge(str(exc), 80)}): set aside as {aside.name}")
                stored = cfg
            if stored.key() != cfg.key():
                diffs = "; ".join(cfg.differences(stored)[:3])
                raise InputError(f"{folder} belongs to another configuration ({diffs})")
        write_atomic(folder / "config.json", cfg.to_json() + "\n")
        keep_prior_files(cfg.data, folder)  # the atoms of an atoms prior, as atoms.npy

    ck = None
    if resume and ckpt_path is not None:
        ck = usable_checkpoint(ckpt_path, cfg, map_location=device, log=_say)  # damaged files set aside
    torch.manual_seed(tc.seed)
    model = build_model(cfg).to(device)
    if ck is None and tc.init_from is not None:
        _grow_from(cfg, model, device, source)
    elif ck is None and tc.init_policy is not None:
        _distil_into(cfg, model, device, folder)
    optimizer = _adam(model, tc.lr, device)
    sampler = ContextSampler(cfg.data, device)
    step, history, train_s, wall_s, window = 0, [], 0.0, 0.0, [0.0, 0]
    if ck is not None:
        step = restore(ck, model, optimizer)
        extra = ck["extra"]
        history = [tuple(r) for r in extra["history"]]
        train_s, wall_s, window = extra["train_s"], extra["wall_s"], list(extra["window"])

    t_start = time.perf_counter()

    def wall() -> float:  # seconds of this run, over all resumed segments
        return wall_s + time.perf_counter() - t_start

    def checkpoint():
        if ckpt_path is not None:
            extra = dict(history=[list(r) for r in history], train_s=train_s, wall_s=wall(), window=list(window))
            save_checkpoint(ckpt_path, cfg, step=step, model=model, optimizer=optimizer, extra=extra)

    def eval_row() -> Estimate:
        est = evaluate(model, sampler, n_batches=tc.eval_batches)
        train_loss = window[0] / window[1] if window[1] else None
        window[:] = [0.0, 0]
        history.append((step, train_loss, est.value, est.stderr, wall()))
        return est

    end = tc.steps if stop_at is None else stop_at
    if step == 0 and not history:
        eval_row()  # the untrained (or distilled) model, for reference
        if tc.init_policy is not None:
            checkpoint()  # the distilled start is kept: a resumed run does not distil again
    bar = _progress(cfg, step, progress)
    running = None
    from fvsym.guards.limits import time_over

    over = time_over()  # () -> seconds past the command's time cap, or None (no cap: the Python API)
    try:
        model.train()
        while step < end:
            t0 = time.perf_counter()
            for group in optimizer.param_groups:
                group["lr"] = tc.lr * lr_factor(step, tc.steps, tc.warmup, tc.schedule)
            c = sampler.sample(tc.batch_at(step), sampler.generator(tc.seed, TRAIN_STREAM, step),
                               tc.tokens_at(step, cfg.data.n_tokens))
            loss = training_loss(model, c, tc.loss, tc.aux_readout)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if tc.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
            optimizer.step()
            step += 1
            value = loss.item()
            if not math.isfinite(value):
                why = "; with softmax attention a score may have overflowed" if cfg.model.attention == "softmax" else ""
                raise TrainingDiverged(f"training loss became {value} at step {step}{why}; try a lower lr than {tc.lr:g}")
            train_s += time.perf_counter() - t0
            window[0] += value
            window[1] += 1
            running = value if running is None else 0.95 * running + 0.05 * value
            if step % tc.eval_every == 0 or step == tc.steps:
                est = eval_row()
                bar.set_postfix(loss=f"{running:.4f}", eval=f"{est.value:.4f}", refresh=False)
            elif step % 10 == 0:
                bar.set_postfix(loss=f"{running:.4f}", refresh=False)
            bar.update(1)
            if step % tc.checkpoint_every == 0 or step == end:
                checkpoint()
            elif over is not None and step % 10 == 0 and over() is not None:
                checkpoint()
                raise TimeCapReached(over.message(f"training {cfg.key()} stopped at step {step} of {tc.steps}")
                                     + "; its checkpoint is kept: run again (with a larger cap) to resume")
    finally:
        bar.close()
    if history[-1][0] != step:  # stopped between evaluations: evaluate now (not part of the checkpoint)
        eval_row()
    _, _, value, stderr, _ = history[-1]
    bad = nonfinite_weights(model.state_dict())
    if bad is not None or not (math.isfinite(value) and math.isfinite(stderr)):
        what = f"the weights ({bad})" if bad is not None else f"the held-out loss ({value})"
        raise TrainingDiverged(f"{what} of {cfg.key()} became NaN or infinite at step {step}; no result is written "
                               f"(try a lower lr than {tc.lr:g})")
    n_eval = tc.eval_batches * EVAL_BATCH
    result = TrainResult(
        config=cfg, loss=value, stderr=stderr, n_eval=n_eval, metric="theta" if model.decodes else "query",
        history=tuple(history), steps=step, finished=step == tc.steps, train_seconds=train_s, wall_seconds=wall(),
        steps_per_s=step / train_s if train_s > 0 else float("nan"), run_dir=str(folder) if folder else None,
        checkpoint=str(ckpt_path) if ckpt_path is not None and ckpt_path.exists() else None,
        precision=describe(model.autocast), machine=machine(device.type), model=model.eval(),
    )
    if folder and result.finished:
        write_json(folder / "result.json", with_checksum(result.to_dict(), cfg.key()))
    return result


def _stored_result(folder: Path, cfg: RunConfig, device) -> TrainResult | None:
    """The stored result of a finished run with its model; None (and the damaged file set aside, in one
    line) when ``result.json`` or the checkpoint cannot be used: training then resumes (from the newest good
    checkpoint) or starts over, and writes the result again."""
    path = folder / "result.json"
    try:
        result = load_result(path, cfg)
    except ValueError as exc:  # damaged, or the result of another configuration (not this run's): set aside
        _say(f"{exc}: set aside as {set_aside(path).name}; the run is resumed from its checkpoint (or recomputed)")
        return None
    if not result.finished:
        _say(f"{path} holds an unfinished run: set aside as {set_aside(path, 'stale').name}; resuming")
        return None
    try:
        model, _, step = load_model(folder, cfg, device=device)
    except DamagedCheckpoint:  # usable_checkpoint sets it aside and says so in one line
        set_aside(path, "stale")
        return None
    except FileNotFoundError:
        step = None
    if step != result.steps:
        where = "missing" if step is None else f"at step {step}"
        _say(f"the checkpoint of finished run {folder} is {where}: result.json set aside as "
             f"{set_aside(path, 'stale').name}; resuming from the last good checkpoint")
        return None
    return replace(result, model=model, run_dir=str(folder), checkpoint=str(folder / "checkpoint.pt"))


def _init_source(cfg: RunConfig) -> RunConfig:
    """The configuration of the finished run ``cfg.train.init_from`` in the same ``out``, checked to start
    ``cfg`` (``grow``); a one-line ValueError when that run is missing, unfinished, or not a smaller Model A
    of the same data."""
    key = cfg.train.init_from
    folder = Path(cfg.train.out) / key
    if not (folder / "result.json").is_file():
        raise InputError(f"init_from: no finished run {key} in {cfg.train.out} (train it there first)")
    try:
        s = load_result(folder / "result.json").config
    except ValueError as exc:
        raise reworded(exc, f"init_from: {exc}") from None
    m = cfg.model
    if s.key() != key:
        raise InputError(f"init_from: {folder} holds the run {s.key()}, not {key}")
    problems = [f"{what} {a!r} vs {b!r}" for what, a, b in (
        ("model", s.model.model, m.model), ("mlp_width", s.model.mlp_width, m.mlp_width),
        ("hidden_layers", s.model.hidden_layers, m.hidden_layers), ("readout", s.model.readout, m.readout),
        ("attention", s.model.attention, m.attention), ("router", s.model.router, m.router),
        ("query_dim", s.model.query_dim_for(s.data.dim), m.query_dim_for(cfg.data.dim)))
        if a != b]
    if s.data.to_dict() != cfg.data.to_dict():
        problems.append("other data (" + "; ".join(cfg.differences(s)[:2]) + ")")
    if not s.model.budget < m.budget:
        problems.append(f"budget {s.model.budget} is not below {m.budget}")
    if problems:
        raise InputError(f"init_from: run {key} cannot start this one: " + ", ".join(problems))
    return s


def _grow_from(cfg: RunConfig, model: WorkspaceModel, device, source: RunConfig | None = None) -> None:
    """Start ``model`` from the finished run ``cfg.train.init_from`` in the same ``out`` (``grow``; the
    source checked by :func:`_init_source` unless given)."""
    s = _init_source(cfg) if source is None else source
    folder = Path(cfg.train.out) / cfg.train.init_from
    try:
        small, _, _ = load_model(folder, s, device=device)
    except (DamagedCheckpoint, FileNotFoundError) as exc:
        raise reworded(exc, f"init_from: {exc}") from None
    grow(small, model)


def _distil_into(cfg: RunConfig, model: WorkspaceModel, device, folder: Path | None) -> None:
    """Start ``model`` from ``cfg.train.init_policy`` distilled into its routers (``bridges.training.distil``); what
    the distillation reached goes to ``distil.json`` in the run folder."""
    from bridges.training.distil import DistilConfig, distil

    result = distil(model, cfg.data, DistilConfig(teacher=cfg.train.init_policy, seed=cfg.train.seed), device=device)
    if folder is not None:
        write_atomic(folder / "distil.json", json.dumps(result.to_dict(), indent=2) + "\n")


def _adam(model: torch.nn.Module, lr: float, device: torch.device) -> torch.optim.Adam:
    """Adam; the fused kernel (one pass over all parameters) where this torch has it for ``device``."""
    try:
        return torch.optim.Adam(model.parameters(), lr=lr, fused=device.type in ("cpu", "cuda"))
    except (RuntimeError, TypeError):
        return torch.optim.Adam(model.parameters(), lr=lr)


def _progress(cfg: RunConfig, start: int, enabled: bool):
    from bridges.progress import progress_bar

    return progress_bar(total=cfg.train.steps, initial=start, enabled=enabled, unit="step",
                        desc=f"model {cfg.model.model} {cfg.data.prior} K{cfg.data.depth} B{cfg.model.budget}")
