"""The trained models as the theory sees them: one registry, ``MODELS`` (name -> model object, in the order they
were registered), shared with ``bridges`` (``bridges.models.MODELS`` is this dict; ``bridges.models.register_model``
fills it, the models of THEORY.md section 7 when ``bridges`` declares them).

fvnum reads only the theory's side of a model object, by name (``fvnum.theory``, ``fvnum.regime``):

- ``name``: its letter or name;
- ``prediction``: the rows of ``fvnum.theory`` it is held to, first present wins (``prediction_row``);
- ``law``: the law of loss against budget it should follow, one of :data:`LAWS` (``predicted_law``);
- ``band``: the name of its agreement band in ``fvnum.regime.AGREEMENT`` (``agrees``);
- ``bounded_by``: the bound rows proven for it (``TheoryRow.bounds_below``);
- ``adaptive``: whether its layers read the workspace written before them (depth), and ``mlp_keys``: whether
  its keys are MLPs (else linear keys and a linear readout); the checks of THEORY.md section 7
  (``prediction_checks``) pair the models by these two.

fvnum alone knows no model: until ``bridges`` registers them, theory tables mark no prediction rows and
``prediction_row`` refuses every name. Standard library only: ``bridges.config`` reads the registry without loading
numpy.
"""
from __future__ import annotations

from fvsym.errors import InputError

LAWS = ("exponential", "power")  # fvnum.laws: depth decays exponentially, one layer as a power
MODELS: dict = {}  # name -> model object (bridges.model_registry.ModelSpec), in the order registered


def model(name: str):
    """The registered model ``name``; InputError (one line naming the choices) for any other name."""
    if not MODELS:
        raise InputError(f"no model is registered, so none is {name!r} (importing bridges.model_registry declares the "
                         "models of THEORY.md section 7)")
    if not isinstance(name, str) or name not in MODELS:
        raise InputError(f"model must be one of {', '.join(MODELS)}, got {name!r}")
    return MODELS[name]


__all__ = ["LAWS", "MODELS", "model"]
