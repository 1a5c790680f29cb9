"""Torch scalars read as the numbers they hold, before the checks of an entry point (``fvnum.mc.simulate``) or of a
channel (``fvnum.mc.channels``); torch is never imported here."""
from __future__ import annotations

from fvsym._validate import _short
from fvsym.errors import InputError


def plain_scalar(value, name: str):
    """A torch scalar (a 0-d tensor, detached and moved to the CPU) as its Python number, so the checks
    that follow read it like any number; a torch tensor of another shape is refused in one line. Anything
    else is returned as it is (torch is never imported here)."""
    if not (type(value).__module__ or "").startswith("torch") or not hasattr(value, "dim"):
        return value
    try:
        dims = int(value.dim())
    except Exception:  # noqa: BLE001 - a torch object that is no tensor: left to the checks
        return value
    if dims != 0:
        raise InputError(f"{name} must be a number, got a torch tensor of shape {tuple(value.shape)}")
    try:
        return value.detach().cpu().item()
    except Exception:  # noqa: BLE001 - e.g. a meta tensor: it holds no value
        raise InputError(f"{name} must be a number, got a torch tensor without a value ({_short(value)})") from None


def plain_scalars(**values) -> dict:
    """:func:`plain_scalar` of every keyword (``name=value``), as a dict."""
    return {name: plain_scalar(v, name) for name, v in values.items()}
