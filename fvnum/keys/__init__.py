"""Key families, their reading laws, and the keyed theory rows (one-layer designs, adaptive searches)."""
from fvsym._moved import room_getattr

# fvnum.keys was one module, now fvnum.keys.families: its names stay importable from here, loaded on first use
__getattr__ = room_getattr(__name__, "fvnum.keys.families", ('adaptive', 'families', 'lookahead', 'nonadaptive', 'readings', 'tree'))
