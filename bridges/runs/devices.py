"""The torch devices fv runs on, checked before anything on disk is touched.

fv trains and evaluates on ``cpu``, on ``cuda`` / ``cuda:<i>`` where torch sees that CUDA device, and on ``mps``
where torch sees Apple's GPU. Every other name torch parses (``xla``, ``lazy``, ``meta``, ``hpu``,
``privateuseone``, ...) is refused by its name, as is a CPU with an index (``cpu:99``: there is one CPU device).

:func:`check_device_name` reads the name only (no torch): every ``--device`` option (``fv train``, ``compare``,
``scaling``, the cells of ``fv sweep``) reads its text through it. :func:`check_device` adds what torch on this
machine can run; ``bridges.training.train.resolve_device`` (the first thing ``train`` does) and the commands whose
runs train here call it before they write. A refusal is one :class:`~fvsym.errors.InputError` line naming the
device. Standard library only at import (torch is imported by :func:`check_device`).
"""
from __future__ import annotations

import re

from fvsym.errors import InputError

DEVICE_TYPES = ("cpu", "cuda", "mps")
DEVICES_SAID = "cpu, cuda or cuda:<i> (where torch sees CUDA devices), or mps (on a Mac)"
_NAME = re.compile(r"(cpu|cuda|mps)(?::(\d{1,6}))?")


def check_device_name(name) -> str:
    """``name`` if it names a device fv runs on (``cpu``, ``cpu:0``, ``cuda``, ``cuda:<i>``, ``mps``, ``mps:0``);
    a one-line :class:`InputError` naming it otherwise. Reads the name only: whether this machine has it is
    :func:`check_device`'s question."""
    if not isinstance(name, str):
        raise InputError(f"device must be a name such as 'cpu' or 'cuda', got {type(name).__name__} {name!r:.40}")
    match = _NAME.fullmatch(name)
    if match is None:
        shown = repr(name) if len(name) <= 40 else repr(name[:30] + "...")
        raise InputError(f"device {shown} is not one fv runs on: use {DEVICES_SAID}")
    kind, index = match.group(1), match.group(2)
    if kind in ("cpu", "mps") and index is not None and int(index) != 0:
        raise InputError(f"device {name!r} does not exist: there is one {kind.upper()} device, {kind} (or {kind}:0)")
    return name


def check_device(name) -> str:
    """``name`` if torch on this machine can run it (:func:`check_device_name`, then: CUDA devices that torch
    sees, with the index below their count; MPS where torch sees it); a one-line :class:`InputError` naming
    the device and what this machine has otherwise. Imports torch (missing: its ``ModuleNotFoundError``)."""
    check_device_name(name)
    kind, _, index = name.partition(":")
    if kind == "cpu":
        return name
    import torch

    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise InputError(f"device {name!r} is not available: torch sees no CUDA device here (use cpu)")
        if index and int(index) >= count:
            seen = "cuda:0" if count == 1 else f"cuda:0 .. cuda:{count - 1}"
            raise InputError(f"device {name!r} is not available: torch sees {count} CUDA "
                             f"device{'s' if count > 1 else ''} here ({seen})")
        return name
    if not torch.backends.mps.is_available():
        raise InputError(f"device {name!r} is not available: torch sees no MPS device here (use cpu)")
    return name
