"""The trained models: networks, the model registry, taps, precision."""
from importlib import import_module

from fvsym._moved import room_getattr

# bridges.models was one module, now bridges.models.networks: its names stay importable from here, loaded on first use
_networks = room_getattr(__name__, "bridges.models.networks", ('networks', 'precision', 'registry', 'shapes', 'taps',
                                                               'transformer'))
# the registry needs no torch: ``from bridges.models import register_model`` works without it
_REGISTRY = frozenset(["BUILT_IN", "DEFAULT_MODEL", "MODELS", "MODEL_NAMES", "ModelNames", "ModelSpec", "Recipe",
                       "adaptive_names", "check_theory", "register_model", "unregister_model"])


def __getattr__(name):
    if name in _REGISTRY:
        return getattr(import_module("bridges.models.registry"), name)
    return _networks(name)
