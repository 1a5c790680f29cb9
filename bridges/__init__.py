"""bridges: the torch side. Trains Models A, B, C of THEORY.md section 7 and holds them against the
theory of ``fvnum`` and ``fvsym``: it trains, measures and lays tables out; the theory rows come from
``fvnum.theory``.

Public names (``__all__``) load their module on first use (PEP 562), so ``import bridges`` (done by the
``fv`` dispatcher) loads neither torch nor numba.
"""
from importlib import import_module

_EXPORTS = {
    # configurations (standard library only)
    "DataConfig": "config", "ModelConfig": "config", "RunConfig": "config", "TrainConfig": "config",
    # data, models, training
    "ContextSampler": "data", "Contexts": "data", "data_channel": "data", "fv_prior": "data",
    "step_generator": "data",
    "WorkspaceModel": "models", "build_model": "models", "grow": "models", "key_rows": "models", "linear_model": "models",
    "linear_readout": "models", "path_model": "models", "top_levels_keys": "models", "top_levels_model": "models",
    "TrainResult": "train", "evaluate": "train", "load_result": "train",
    "load_checkpoint": "checkpoint", "load_model": "checkpoint", "save_checkpoint": "checkpoint",
    "RunStore": "store", "write_atomic": "store",
    # taps and the measurements of sections 8 and 9
    "patch": "taps", "record": "taps",
    "key_patching_table": "patching", "patched_losses": "patching", "path_bayes_decoder": "patching",
    "theory_patching_table": "patching", "unpatched_losses": "patching",
    "ProbeScore": "probes", "ProbeTable": "probes", "linear_probe": "probes", "probe_layers": "probes", "theory_probes": "probes",
    "workspace_probes": "probes",
    # the audit of a model's measurements (the function: bridges.audit.audit)
    "Audit": "audit", "audit_model": "audit",
    # comparisons with the theory
    "Comparison": "compare", "learned_routing": "compare", "grid_checks": "compare", "theory_losses": "compare",
    "theory_table": "compare", "to_markdown": "compare",
    # studies
    "ReproduceConfig": "reproduce", "Reproduction": "reproduce",
    "ScalingConfig": "scaling", "ScalingStudy": "scaling",
    "Cell": "engine", "run_cells": "engine", "SweepResult": "sweep",
}

# Names that are also submodules (``train``, ``compare``, ``audit``, ``reproduce``, ``taps``) are not exported:
# the package attribute is the submodule (``bridges.train.train``, ``bridges.compare.compare``,
# ``bridges.audit.audit``), as an import of the submodule would make it anyway. No module is callable.


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bridges' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))


__all__ = sorted(_EXPORTS)
