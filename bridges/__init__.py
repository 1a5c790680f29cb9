"""bridges: the torch side. Trains Models A, B, C of docs/theory.md section 7 and holds them against the
theory of ``fvnum`` and ``fvsym``: it trains, measures and lays tables out; the theory rows come from
``fvnum.theory``.

Public names (``__all__``) load their module on first use (PEP 562), so ``import bridges`` (done by the
``fv`` dispatcher) loads neither torch nor numba.
"""
from importlib import import_module

_EXPORTS = {
    # configurations (standard library only)
    "DataConfig": "runs.config", "ModelConfig": "runs.config", "RunConfig": "runs.config", "TrainConfig": "runs.config",
    # data, models, training
    "ContextSampler": "training.data", "Contexts": "training.data", "data_channel": "training.data", "fv_prior": "training.data",
    "step_generator": "training.data",
    "WorkspaceModel": "models.networks", "build_model": "models.networks", "grow": "models.networks", "key_rows": "models.networks", "linear_model": "models.networks",
    "linear_readout": "models.networks", "path_model": "models.networks", "top_levels_keys": "models.networks", "top_levels_model": "models.networks",
    "TrainResult": "training.train", "evaluate": "training.train", "load_result": "training.train",
    "load_checkpoint": "training.checkpoint", "load_model": "training.checkpoint", "save_checkpoint": "training.checkpoint",
    "RunStore": "runs.store", "write_atomic": "runs.store",
    # taps and the measurements of sections 8 and 9
    "patch": "models.taps", "record": "models.taps",
    "key_patching_table": "patching.keys", "patched_losses": "patching.keys", "path_bayes_decoder": "patching.keys",
    "theory_patching_table": "patching.keys", "unpatched_losses": "patching.keys",
    "ProbeScore": "analysis.probes", "ProbeTable": "analysis.probes", "linear_probe": "analysis.probes", "probe_layers": "analysis.probes", "theory_probes": "analysis.probes",
    "workspace_probes": "analysis.probes",
    # the audit of a model's measurements (the function: bridges.analysis.audit.audit)
    "Audit": "analysis.audit", "audit_model": "analysis.audit",
    # comparisons with the theory
    "Comparison": "analysis.compare", "learned_routing": "analysis.compare", "grid_checks": "analysis.compare", "theory_losses": "analysis.compare",
    "theory_table": "analysis.compare", "to_markdown": "analysis.compare",
    # studies
    "ReproduceConfig": "studies.reproduce", "Reproduction": "studies.reproduce",
    "ScalingConfig": "studies.scaling", "ScalingStudy": "studies.scaling",
    "Cell": "runs.engine", "run_cells": "runs.engine", "SweepResult": "studies.sweep",
}

# Names that are also submodules (``train``, ``compare``, ``audit``, ``reproduce``, ``taps``) are not exported:
# the package attribute is the submodule (``bridges.training.train.train``, ``bridges.analysis.compare.compare``,
# ``bridges.analysis.audit.audit``), as an import of the submodule would make it anyway. No module is callable.


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bridges' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))


__all__ = sorted(_EXPORTS)
