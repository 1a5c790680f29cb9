"""The trained models: networks, the model registry, taps, precision."""
from fvsym._moved import room_getattr

# bridges.models was one module, now bridges.models.networks: its names stay importable from here, loaded on first use
__getattr__ = room_getattr(__name__, "bridges.models.networks", ('networks', 'precision', 'registry', 'taps'))
