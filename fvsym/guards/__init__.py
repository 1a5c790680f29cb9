"""Prices and guards of the exact layer: the time cap, the memory probe, the prices of derivations."""
from fvsym._moved import room_getattr

# fvsym.guards was one module, now fvsym.guards.limits: its names stay importable from here, loaded on first use
__getattr__ = room_getattr(__name__, "fvsym.guards.limits", ('costs', 'limits'))
