"""Mixed precision of the key MLPs: which dtype ``precision = auto | bf16 | fp32`` means on a device.

The key MLPs of Models A and B carry almost all multiply-adds (every token, every layer). Under ``bf16``
they run in bfloat16 autocast; master weights, the optimizer, the aggregation ``phi_l``, the workspace,
the readout and the loss stay float32 (``bridges.models.networks.Layer``). ``auto`` picks bfloat16 only where the
hardware multiplies it natively and the model has MLP keys (Model C's linear keys gain nothing):

- CUDA: ``torch.cuda.is_bf16_supported()``;
- CPU: AVX512-BF16 or AMX tiles (x86), which multiply bfloat16 several times faster than float32;
  elsewhere bfloat16 on the CPU is emulated and slower, so ``auto`` keeps float32.
"""
from __future__ import annotations

import functools

from bridges.errors import require

require(__name__)  # torch: without it, one line naming the extra

import torch

from bridges.runs.config import PRECISIONS
from fvsym.errors import InputError


@functools.cache
def native_bf16(device_type: str) -> bool:
    """Whether ``device_type`` (``cpu``, ``cuda``, ...) multiplies bfloat16 natively."""
    if device_type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device_type == "cpu":
        probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)
    return False


def autocast_dtype(precision: str, device, *, has_mlp_keys: bool) -> torch.dtype | None:
    """The autocast dtype of the key MLPs (None: float32 throughout)."""
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    device_type = torch.device(device).type
    if precision == "fp32" or not has_mlp_keys:
        return None
    if precision == "bf16":
        return torch.bfloat16
    return torch.bfloat16 if native_bf16(device_type) else None


def describe(dtype: torch.dtype | None) -> str:
    """``bf16`` or ``fp32``: the precision a model actually runs its keys in."""
    return "bf16" if dtype == torch.bfloat16 else "fp32"


@functools.cache
def machine(device_type: str) -> str:
    """The hardware and torch a run's numbers came from, e.g. ``cpu: AMD EPYC (x86_64, avx512_bf16), torch 2.13.0``.
    A seed gives the same numbers on the same kind of machine; bfloat16 kernels differ between CPU families (AMX
    against AVX512-BF16), so a run re-made on another one may differ at the seeds' spread."""
    import platform

    if device_type == "cuda" and torch.cuda.is_available():
        name = torch.cuda.get_device_name()
    else:
        name = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as f:
                name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
        except OSError:
            pass
        kernels = [k for k, probe in (("amx", "_is_amx_tile_supported"), ("avx512_bf16", "_is_avx512_bf16_supported"))
                   if bool(getattr(torch.cpu, probe, lambda: False)())]
        name = f"{name} ({', '.join([platform.machine()] + kernels)})"
    return f"{device_type}: {name}, torch {torch.__version__}"
