"""Checkpoints of a training run: state dicts, the configuration, the optimizer, the step, RNG state.

Written atomically (a temporary file in the same folder, flushed, then ``os.replace``), so an interrupted
write never leaves a half-written ``checkpoint.pt``; read with ``torch.load(weights_only=True)`` (only
tensors and plain containers, no arbitrary code). Every problem with a file is a one-line ``ValueError``
naming the file and the problem: corrupt or truncated, not a checkpoint, or another configuration.

Damage. Each save keeps the checkpoint it replaces as ``checkpoint.prev.pt``. :func:`usable_checkpoint`
returns the newest checkpoint that loads and fits its model; a damaged file (truncated, empty, not an fv
checkpoint, not a file at all (a folder), weights that do not fit or are not finite, an RNG state torch
refuses: a :class:`DamagedCheckpoint`) is renamed ``NAME.corrupt-<n>`` (set aside, not deleted) and
reported in one line, and training resumes from the previous checkpoint or starts from scratch. A
checkpoint of another configuration is refused (the folder holds someone else's run). Weights that are not
finite are never saved (:func:`save_checkpoint` refuses them).
"""
from __future__ import annotations

import errno
import pickle
import re
import struct
import sys
import warnings
import zipfile
from pathlib import Path

import torch

from fvsym.errors import DamagedFile

from bridges.runs.config import RunConfig
from bridges.runs.store import atomic_write_bytes, set_aside

FORMAT = "fv-checkpoint-1"
_REQUIRED = ("format", "key", "config", "step", "model", "optimizer", "rng")




class DamagedCheckpoint(DamagedFile):
    """A checkpoint file that cannot be used: corrupt, truncated, empty, not an fv checkpoint, or holding
    weights or state that do not fit its model, or weights that are not finite."""


class NonFiniteWeights(ValueError):
    """A model whose weights are not all finite (NaN or infinite): never saved as a checkpoint."""


def nonfinite_weights(state: dict) -> str | None:
    """The name of the first floating-point tensor of a state dict that is not finite everywhere, or None."""
    for name, value in state.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return str(name)
    return None


def previous_path(path) -> Path:
    """``checkpoint.prev.pt`` beside ``checkpoint.pt``: the checkpoint the last save replaced."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def save_checkpoint(path, cfg: RunConfig, *, step: int, model, optimizer, extra: dict | None = None) -> Path:
    """Write a checkpoint of ``model`` and ``optimizer`` after ``step`` training steps. ``extra`` holds
    plain values (numbers, strings, lists, dicts, tensors) such as the loss history. Weights that are not
    finite are refused (:class:`NonFiniteWeights`, one line), and the previous checkpoint is kept."""
    bad = nonfinite_weights(model.state_dict())
    if bad is not None:
        raise NonFiniteWeights(f"the weights of {cfg.key()} became NaN or infinite ({bad}) at step {int(step)}; "
                               f"not saved (the previous checkpoint is kept); try a lower lr than {cfg.train.lr:g}")
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
    path = Path(path)
    return atomic_write_bytes(path, lambda f: torch.save(payload, f), keep=previous_path(path))


ZIP_MAGIC = b"PK\x03\x04"  # torch.save writes a zip archive; fv never reads any other format (a pickle runs code)
# what torch.load raises for a file's own content (map_location is always the CPU, so never for a device)
_CONTENT_ERRORS = (pickle.UnpicklingError, EOFError, RuntimeError, ValueError, KeyError, IndexError, TypeError,
                   AttributeError, UnicodeDecodeError, zipfile.BadZipFile, struct.error, ImportError)


def load_checkpoint(path, cfg: RunConfig | None = None, *, map_location="cpu") -> dict:
    """Read a checkpoint; with ``cfg``, refuse one written for another configuration. The file is read on the CPU
    (so a failure on ``map_location`` is never taken for damage), then its weights are moved there. Only a file
    whose own content fails (not a torch zip archive, truncated, objects other than tensors and plain
    containers) is a :class:`DamagedCheckpoint`; any other failure propagates as it is."""
    path = Path(path)
    if not path.is_file():
        if path.exists():
            raise DamagedCheckpoint(f"checkpoint {path} is not a file")
        raise FileNotFoundError(f"no checkpoint file at {path}")
    with open(path, "rb") as f:
        head = f.read(len(ZIP_MAGIC))
    if head != ZIP_MAGIC:
        what = "is empty" if not head else ("is not a torch checkpoint (no zip archive: a plain pickle or another "
                                            "format, never unpickled)")
        raise DamagedCheckpoint(f"checkpoint {path} {what}")
    try:
        with warnings.catch_warnings():  # torch's advice about weights_only is not the user's business
            warnings.simplefilter("ignore")
            ck = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise DamagedCheckpoint(f"checkpoint {path} holds objects other than tensors and plain containers (refused "
                                "unread: fv loads weights only)") from None
    except OSError as exc:  # a truncated archive makes torch seek before its start (EINVAL); others are the disk's
        if exc.errno != errno.EINVAL:
            raise
        raise DamagedCheckpoint(f"checkpoint {path} is corrupt or truncated (its zip archive cannot be read)") from None
    except _CONTENT_ERRORS as exc:
        raise DamagedCheckpoint(f"checkpoint {path} is corrupt or truncated ({first_sentence(exc)})") from None
    if not isinstance(ck, dict) or ck.get("format") != FORMAT or any(k not in ck for k in _REQUIRED):
        raise DamagedCheckpoint(f"{path} is not an fv checkpoint (format {FORMAT!r})")
    if cfg is not None and ck["key"] != cfg.key():
        try:
            diffs = cfg.differences(RunConfig.from_json(ck["config"]))
        except ValueError:
            diffs = []
        what = "; ".join(diffs[:3]) or f"key {ck['key']} vs {cfg.key()}"
        raise DamagedFile(f"checkpoint {path} is from another configuration ({what})", path=path)
    if str(map_location) != "cpu" and isinstance(ck["model"], dict):  # the device's own failures propagate
        ck["model"] = {k: v.to(map_location) if isinstance(v, torch.Tensor) else v for k, v in ck["model"].items()}
    return ck


def first_sentence(exc: BaseException, limit: int = 100) -> str:
    """``TypeName: the first sentence of the message`` of ``exc``, cut at a word (with ``...``) past ``limit``
    characters, for a one-line report."""
    text = " ".join((str(exc).strip().splitlines() or [""])[0].split())
    text = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0].rstrip(".")
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def restore(ck: dict, model, optimizer=None) -> int:
    """Load a checkpoint's weights (and optimizer state, RNG state) into live objects; returns the step."""
    try:
        model.load_state_dict(ck["model"])
        if optimizer is not None:
            optimizer.load_state_dict(ck["optimizer"])
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        raise DamagedCheckpoint(f"checkpoint does not fit this model ({first_sentence(exc, 120)})") from None
    _set_rng(ck["rng"])
    return int(ck["step"])


def _set_rng(rng) -> None:
    """``torch.set_rng_state(rng)``; a state torch refuses is a :class:`DamagedCheckpoint`."""
    try:
        torch.set_rng_state(rng.cpu())
    except (RuntimeError, ValueError, TypeError, AttributeError) as exc:
        raise DamagedCheckpoint(f"checkpoint holds a damaged random-number state ({first_sentence(exc, 120)})") \
            from None


_EXTRA = ("history", "train_s", "wall_s", "window")


def _check_usable(ck: dict, cfg: RunConfig, path: Path) -> None:
    """Raise ``DamagedCheckpoint`` unless the weights, optimizer and RNG state of ``ck`` fit ``cfg``'s model."""
    from bridges.models.networks import build_model

    rng = ck["rng"]
    extra = ck.get("extra")
    step = ck["step"]
    if not isinstance(rng, torch.Tensor) or rng.dtype != torch.uint8 or not isinstance(extra, dict) \
            or any(k not in extra for k in _EXTRA) or isinstance(step, bool) or not isinstance(step, int) \
            or not 0 <= step <= cfg.train.steps:
        raise DamagedCheckpoint(f"checkpoint {path} lacks part of the training state")
    if not isinstance(ck["model"], dict) or nonfinite_weights(ck["model"]) is not None:
        raise DamagedCheckpoint(f"checkpoint {path} holds weights that are not finite"
                                + ("" if not isinstance(ck["model"], dict) else f" ({nonfinite_weights(ck['model'])})"))
    model = build_model(cfg)
    state = torch.get_rng_state()
    try:
        restore(ck, model, torch.optim.Adam(model.parameters()))  # the RNG state too: torch checks it
    except DamagedCheckpoint as exc:
        raise DamagedCheckpoint(f"{path}: {exc}") from None
    finally:
        torch.set_rng_state(state)


def usable_checkpoint(path, cfg: RunConfig, *, map_location="cpu", log=None) -> dict | None:
    """The newest checkpoint of a run that loads and fits ``cfg``: ``path``, else its previous one
    (:func:`previous_path`); None when there is none (start from scratch). Every damaged file on the way
    is set aside (``NAME.corrupt-<n>``) and the whole story is one line through ``log`` (stderr by default).
    A checkpoint of another configuration raises ``ValueError``."""
    log = log if log is not None else (lambda message: print(message, file=sys.stderr))
    path = Path(path)
    notes = []
    for candidate in (path, previous_path(path)):
        if not candidate.exists():
            continue
        try:
            ck = load_checkpoint(candidate, cfg, map_location=map_location)
            _check_usable(ck, cfg, candidate)
        except DamagedCheckpoint as exc:
            notes.append(f"{exc}: set aside as {set_aside(candidate).name}")
            continue
        if notes:
            log("; ".join(notes) + f"; resuming from {candidate.name} at step {int(ck['step'])}")
        return ck
    if notes:
        log("; ".join(notes) + "; training starts from scratch")
    return None


def load_model(path, cfg: RunConfig | None = None, *, device="cpu"):
    """The model stored in a checkpoint, ready for evaluation: ``(model, cfg, step)``. ``path`` is a
    checkpoint file or a run folder (``out/<key>/``)."""
    from bridges.models.networks import build_model

    path = Path(path)
    if path.is_dir():
        path = path / "checkpoint.pt"
    ck = load_checkpoint(path, cfg, map_location=device)
    cfg = RunConfig.from_json(ck["config"]) if cfg is None else cfg
    model = build_model(cfg).to(device)
    try:
        model.load_state_dict(ck["model"])
    except (RuntimeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DamagedCheckpoint(f"checkpoint {path} does not fit its model ({first_sentence(exc, 120)})") from None
    bad = nonfinite_weights(ck["model"])
    if bad is not None:
        raise DamagedCheckpoint(f"checkpoint {path} holds weights that are not finite ({bad})")
    step = ck["step"]
    if isinstance(step, bool) or not isinstance(step, int):
        raise DamagedCheckpoint(f"checkpoint {path} lacks part of the training state (its step)")
    return model.eval(), cfg, step
