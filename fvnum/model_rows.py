"""The trained models as the theory sees them: one registry, ``MODELS`` (name -> model object, in the order they
were registered), shared with ``bridges`` (``bridges.models.MODELS`` is this dict).

Models A, B, C of docs/theory.md section 7 are declared here, once, by what the theory says of them
(:class:`ModelTheory`); ``bridges`` attaches the torch side to each (its network, recipe, figure marker and
price: ``bridges.models.registry.ModelSpec``, which carries the same fields) and registers models of its own with
``bridges.models.register_model``. fvnum reads only the theory's side of a model object, by name
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
    variants: tuple = ()

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
# docs/theory.md section 7.1: Model T, a standard transformer, whose prediction depends on its shape. Its variants are the
# named shapes, each a model of the theory by itself (``model("T-deep")``): deep T (L = B, H d = 1) is held to A's
# prediction, wide T (L = 1, H d = B) to B's. The theory's rows are predictions for T, not bounds (section 7c).
_A, _B = MODELS_OF_THEORY[:2]
MODEL_T = ModelTheory(
    "T", "a standard pre-LayerNorm transformer with a summary token; shape deep (L = B, H d = 1) or wide (L = 1, H d = B)",
    prediction=_A.prediction, law="exponential", band="searched", adaptive=True, mlp_keys=False,
    variants=(ModelTheory("T-deep", "Model T of shape deep: L = B blocks, one head of one value", prediction=_A.prediction,
                          law="exponential", band="searched", adaptive=True, mlp_keys=False),
              ModelTheory("T-wide", "Model T of shape wide: one block, B heads of one value", prediction=_B.prediction,
                          law="power", band="searched", mlp_keys=False)))
# docs/theory.md section 13: Model G, deep linear self-attention whose values are residuals; with K_l = Gamma_l it is L
# steps of preconditioned gradient descent, so it is held to ``gd_steps`` (per-layer steps) at its own D and N.
MODEL_G = ModelTheory(
    "G", "deep linear self-attention, L layers of D heads into a summary holding theta_hat; values residual, label or token",
    prediction=("gd_steps",), law="exponential", band="searched", mlp_keys=False,
    variants=(ModelTheory("G-residual", "Model G with residual values: L steps of preconditioned gradient descent",
                          prediction=("gd_steps",), law="exponential", band="searched", mlp_keys=False),
              ModelTheory("G-label", "Model G with label values: depth buys nothing beyond one layer (G1)",
                          prediction=("gd_steps",), law="power", band="searched", mlp_keys=False),
              ModelTheory("G-token", "Model G with token values: full linear self-attention, beyond gradient descent",
                          prediction=("gd_steps",), law="exponential", band="searched", mlp_keys=False)))
BUILT_IN = tuple(m.name for m in MODELS_OF_THEORY)
DECLARED = (*BUILT_IN, MODEL_T.name, MODEL_G.name)  # the models of docs/theory.md (sections 7, 7.1, 13): never unregistered
MODELS: dict = {m.name: m for m in (*MODELS_OF_THEORY, MODEL_T, MODEL_G)}  # name -> model object, in the order registered


def model(name: str):
    """The registered model ``name``, or a named variant of one (``T-deep``: a shape of Model T); InputError (one line
    naming the choices) for any other name."""
    if isinstance(name, str) and name in MODELS:
        return MODELS[name]
    if isinstance(name, str) and "-" in name:
        base = MODELS.get(name.split("-", 1)[0])
        for variant in getattr(base, "variants", ()):
            if variant.name == name:
                return variant
    raise InputError(f"model must be one of {', '.join(MODELS)}, got {name!r}")


def plain_models() -> dict:
    """The registered models the theory checks by their letter (section 7's predictions, the rows' model lists):
    those without variants. A model with variants (T) is held to a row by its variant's name instead."""
    return {name: spec for name, spec in MODELS.items() if not getattr(spec, "variants", ())}


__all__ = ["BUILT_IN", "DECLARED", "LAWS", "MODELS", "MODELS_OF_THEORY", "MODEL_G", "MODEL_T", "ModelTheory", "THEORY_FIELDS", "model",
           "plain_models"]
