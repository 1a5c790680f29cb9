"""The trained models as the theory sees them: one registry, ``MODELS`` (name -> model object, in the order they
were registered), shared with ``bridges`` (``bridges.models.networks.MODELS`` is this dict).

Models A, B, C of docs/theory.md section 7 are declared here, once, by what the theory says of them
(:class:`ModelTheory`); ``bridges`` attaches the torch side to each (its network, recipe, figure marker and
price: ``bridges.models.registry.ModelSpec``, which carries the same fields) and registers models of its own with
``bridges.models.networks.register_model``. fvnum reads only the theory's side of a model object, by name
(``fvnum.theory``, ``fvnum.regime``):

- ``name``: its letter; ``description``: one line;
- ``prediction``: the rows of ``fvnum.theory`` it is held to, first present wins (``prediction_row``);
- ``law``: the law of loss against budget it should follow, one of :data:`LAWS` (``predicted_law``);
- ``band``: the name of its agreement band in ``fvnum.regime.AGREEMENT`` (``agrees``);
- ``bounded_by``: the bound rows proven for it (``TheoryRow.bounds_below``);
- ``adaptive``: whether its layers read the workspace written before them (depth), and ``mlp_keys``: whether
  its keys are MLPs (else linear keys and a linear readout); the checks of docs/theory.md section 7
  (``prediction_checks``) pair the models by these two.

Standard library only: ``bridges.runs.config`` reads the registry without loading numpy.
"""
from __future__ import annotations

from dataclasses import dataclass

from fvsym.errors import InputError

LAWS = ("exponential", "power")  # fvnum.laws: depth decays exponentially, one layer as a power


@dataclass(frozen=True)
class ModelTheory:
    """What the theory says of a trained model (the fields above). ``bridges.models.registry.ModelSpec`` adds the
    network, recipe, marker and price of the same model."""

    name: str
    description: str
    prediction: tuple[str, ...]
    law: str
    band: str
    adaptive: bool = False
    mlp_keys: bool = True
    bounded_by: tuple[str, ...] = ()

    def theory(self) -> dict:
        """The theory's fields, as keyword arguments (``ModelSpec.of`` builds a full model from them)."""
        return {name: getattr(self, name) for name in THEORY_FIELDS}


THEORY_FIELDS = tuple(ModelTheory.__dataclass_fields__)

# THEORY.md section 7. A: adaptive, held to the best adaptive policy found for its class and keys; B: one layer,
# the best non-adaptive design; C: linear keys, the exact linear theory of one layer (bounded by Ky Fan).
MODELS_OF_THEORY = (
    ModelTheory("A", "L = B layers of one channel, MLP keys of [x_i, p] (adaptive: each layer reads the workspace)",
                prediction=("best_adaptive_keyed", "best_adaptive", "best_nonadaptive_keyed", "water_filling_mc"),
                law="exponential", band="searched", adaptive=True),
    ModelTheory("B", "one layer of d = B channels, the same MLP keys (non-adaptive)",
                prediction=("best_nonadaptive_keyed", "best_nonadaptive_unit", "water_filling_mc"),
                law="power", band="searched"),
    ModelTheory("C", "one layer of d = B channels, linear keys W x_i and the bilinear readout x_q^T U p",
                prediction=("top_levels_linear",), law="power", band="exact", mlp_keys=False,
                bounded_by=("best_linear_nonadaptive",)),
)
BUILT_IN = tuple(m.name for m in MODELS_OF_THEORY)
MODELS: dict = {m.name: m for m in MODELS_OF_THEORY}  # name -> model object, in the order registered


def model(name: str):
    """The registered model ``name``; InputError (one line naming the choices) for any other name."""
    if not isinstance(name, str) or name not in MODELS:
        raise InputError(f"model must be one of {', '.join(MODELS)}, got {name!r}")
    return MODELS[name]


__all__ = ["BUILT_IN", "LAWS", "MODELS", "MODELS_OF_THEORY", "ModelTheory", "THEORY_FIELDS", "model"]
