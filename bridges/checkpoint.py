"""Checkpoints of a training run: state dicts, the configuration, the optimizer, the step, RNG state.

Written atomically (a temporary file in the same folder, flushed, then ``os.replace``), so an interrupted
write never leaves a half-written ``checkpoint.pt``; read with ``torch.load(weights_only=True)`` (only
tensors and plain containers, no arbitrary code). Every problem with a file is a one-line ``ValueError``
naming the file and the problem: corrupt or truncated, not a checkpoint, or another configuration.
"""
from __future__ import annotations

from pathlib import Path

import torch

from .config import RunConfig
from .store import atomic_write_bytes, write_atomic

FORMAT = "fv-checkpoint-1"
_REQUIRED = ("format", "key", "config", "step", "model", "optimizer", "rng")


atomic_write_text = write_atomic  # deprecated name of bridges.store.write_atomic; remove once train.py imports that


def save_checkpoint(path, cfg: RunConfig, *, step: int, model, optimizer, extra: dict | None = None) -> Path:
    """Write a checkpoint of ``model`` and ``optimizer`` after ``step`` training steps. ``extra`` holds
    plain values (numbers, strings, lists, dicts, tensors) such as the loss history."""
    payload = {
        "format": FORMAT,
        "key": cfg.key(),
        "config": cfg.to_json(),
        "step": int(step),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": torch.get_rng_state(),
        "extra": dict(extra or {}),
    }
    return atomic_write_bytes(Path(path), lambda f: torch.save(payload, f))


def load_checkpoint(path, cfg: RunConfig | None = None, *, map_location="cpu") -> dict:
    """Read a checkpoint; with ``cfg``, refuse one written for another configuration."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint file at {path}")
    try:
        ck = torch.load(path, map_location=map_location, weights_only=True)
    except (PermissionError, IsADirectoryError):
        raise
    except Exception as exc:  # torch raises RuntimeError, EOFError, KeyError, UnpicklingError, ...
        reason = (str(exc).strip().splitlines() or [""])[0][:120]
        detail = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
        raise ValueError(f"checkpoint {path} is corrupt or truncated ({detail})") from None
    if not isinstance(ck, dict) or ck.get("format") != FORMAT or any(k not in ck for k in _REQUIRED):
        raise ValueError(f"{path} is not an fv checkpoint (format {FORMAT!r})")
    if cfg is not None and ck["key"] != cfg.key():
        try:
            diffs = cfg.differences(RunConfig.from_json(ck["config"]))
        except ValueError:
            diffs = []
        what = "; ".join(diffs[:3]) or f"key {ck['key']} vs {cfg.key()}"
        raise ValueError(f"checkpoint {path} is from another configuration ({what})")
    return ck


def restore(ck: dict, model, optimizer=None) -> int:
    """Load a checkpoint's weights (and optimizer state, RNG state) into live objects; returns the step."""
    try:
        model.load_state_dict(ck["model"])
        if optimizer is not None:
            optimizer.load_state_dict(ck["optimizer"])
    except (RuntimeError, ValueError, KeyError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:120]
        raise ValueError(f"checkpoint does not fit this model ({first})") from None
    torch.set_rng_state(ck["rng"].cpu())
    return int(ck["step"])


def load_model(path, cfg: RunConfig | None = None, *, device="cpu"):
    """The model stored in a checkpoint, ready for evaluation: ``(model, cfg, step)``. ``path`` is a
    checkpoint file or a run folder (``out/<key>/``)."""
    from .models import build_model

    path = Path(path)
    if path.is_dir():
        path = path / "checkpoint.pt"
    ck = load_checkpoint(path, cfg, map_location=device)
    cfg = RunConfig.from_json(ck["config"]) if cfg is None else cfg
    model = build_model(cfg).to(device)
    try:
        model.load_state_dict(ck["model"])
    except RuntimeError as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:120]
        raise ValueError(f"checkpoint {path} does not fit its model ({first})") from None
    return model.eval(), cfg, int(ck["step"])
