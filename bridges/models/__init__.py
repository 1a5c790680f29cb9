"""The trained models: networks (``bridges.models.networks``, torch), the model registry, taps, precision.

The room's public names are the model registry's (``bridges.models.registry``), which needs no torch:
``from bridges.models import register_model`` works without it."""
from bridges.models.registry import (BUILT_IN, DEFAULT_MODEL, MODEL_NAMES, MODELS, ModelNames, ModelSpec, Recipe,
                                     adaptive_names, check_theory, register_model, unregister_model)

__all__ = ["BUILT_IN", "DEFAULT_MODEL", "MODELS", "MODEL_NAMES", "ModelNames", "ModelSpec", "Recipe",
           "adaptive_names", "check_theory", "register_model", "unregister_model"]
