"""Named tap points: read and patch the activations the theory talks about (docs/theory.md sections 7-9).

A model places a ``Tap(name)`` (an ``nn.Identity``) at each such activation. Tap names are explicit and
independent of module paths; layers are numbered ``1..L`` as in docs/theory.md:

- ``layers.{l}.keys``  (batch, N, d)  keys ``k_i`` of layer ``l``
- ``layers.{l}.scores``  (batch, N, d)  softmax attention (docs/theory.md section 2), in place of the keys: the
  scores ``s_i`` of layer ``l``
- ``layers.{l}.weights`` (batch, N, d)  softmax attention: the weights ``a_i = softmax_i(s_i)`` (each channel's
  sum to 1 over the tokens)
- ``layers.{l}.phi``   (batch, d)     the aggregated statistic ``phi_l = (1/N) sum_i k_i y_i`` (softmax:
  ``sum_i a_i y_i``)
- ``workspace.{l}``    (batch, B)     the workspace after layer ``l`` wrote its slots
- ``theta_hat``        (batch, D)     the decoded latent (decoding readouts only)

``tap_context``, ``record`` and ``patch`` are context managers that always remove their hooks (also when
the body raises), and raise ``ValueError`` naming the tap and listing the available ones for an unknown
name. ``patch`` raises if the patch never ran inside its context (a patch must not silently do nothing).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterable, Mapping

from bridges.errors import require

require(__name__)  # torch: without it, one line naming the extra

import torch
from torch import nn
from fvsym.errors import InputError


class Tap(nn.Identity):
    """A named identity at an activation; hooks on it read or replace the activation."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def extra_repr(self) -> str:
        return repr(self.name)


def taps(model: nn.Module) -> dict[str, Tap]:
    """Every tap of ``model`` by name (module order: layers, workspace, readout)."""
    found: dict[str, Tap] = {}
    for module in model.modules():
        if isinstance(module, Tap):
            if module.name in found and found[module.name] is not module:
                raise InputError(f"two taps are named {module.name!r}")
            found[module.name] = module
    return found


def tap_names(model: nn.Module) -> list[str]:
    return list(taps(model))


def _lookup(model: nn.Module, names: Iterable[str]) -> dict[str, Tap]:
    available = taps(model)
    out = {}
    for name in names:
        if name not in available:
            raise InputError(f"unknown tap {name!r}; available: {', '.join(available) or '(none)'}")
        out[name] = available[name]
    return out


@contextmanager
def tap_context(model: nn.Module, fns: Mapping[str, Callable[[torch.Tensor], torch.Tensor | None]]):
    """Call ``fns[name](activation)`` at each named tap during forward passes inside the context; a
    returned tensor replaces the activation, ``None`` keeps it. Hooks are removed on exit."""
    found = _lookup(model, fns)
    handles = []
    try:
        for name, tap in found.items():
            fn = fns[name]
            handles.append(tap.register_forward_hook(lambda _m, _inp, out, fn=fn: fn(out)))
        yield
    finally:
        for h in handles:
            h.remove()


@contextmanager
def record(model: nn.Module, names: str | Iterable[str] | None = None, *, detach: bool = True):
    """Yield a dict that the forward passes inside the context fill with ``{name: activation}`` (the
    latest pass wins). ``names=None`` records every tap. ``detach=False`` keeps the autograd graph."""
    if isinstance(names, str):
        names = [names]
    names = tap_names(model) if names is None else list(names)
    store: dict[str, torch.Tensor] = {}

    def keeper(name):
        def fn(out):
            store[name] = out.detach() if detach else out
            return None

        return fn

    with tap_context(model, {name: keeper(name) for name in names}):
        yield store


@contextmanager
def patch(model: nn.Module, name, value=None, *, strict: bool = True):
    """Replace activations: ``patch(model, "layers.2.keys", donor_keys)`` or with a function of the
    activation, or several at once ``patch(model, {name: value_or_fn, ...})``. A tensor must have the
    activation's shape. With ``strict`` (default) a patch that no forward pass reached raises on exit.
    Yields a dict ``{name: number of times applied}``."""
    patches = dict(name) if isinstance(name, Mapping) else {name: value}
    if not patches:
        raise InputError("patch needs at least one tap name")
    calls = {n: 0 for n in patches}

    def replacer(n, v):
        def fn(out):
            calls[n] += 1
            if callable(v):
                return v(out)
            if not isinstance(v, torch.Tensor):
                raise InputError(f"patch for tap {n!r} must be a tensor or a function, got {type(v).__name__}")
            if v.shape != out.shape:
                raise InputError(f"patch for tap {n!r} has shape {tuple(v.shape)}, the activation {tuple(out.shape)}")
            return v.to(device=out.device, dtype=out.dtype)

        return fn

    with tap_context(model, {n: replacer(n, v) for n, v in patches.items()}):
        yield calls
    missing = [n for n, c in calls.items() if c == 0]
    if strict and missing:
        names = ", ".join(map(repr, missing))
        raise RuntimeError(f"patch of tap {names} never ran: no forward pass inside the context reached it")
