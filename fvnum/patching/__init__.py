"""Interventions on theory policies: key patching (docs/theory.md section 8), state transplant and injection (9b)."""
from fvsym._moved import room_getattr

# fvnum.patching was one module, now fvnum.patching.keys: its names stay importable from here, loaded on first use
_from_keys = room_getattr(__name__, "fvnum.patching.keys", ('keyed', 'keys', 'state', 'state_tables'))
# the state interventions (section 9b) live in fvnum.patching.state
_STATE = frozenset(['InjectionTable', 'MeanState', 'injection_table', 'mean_state', 'state_patching_table'])


def __getattr__(name):
    if name in _STATE:
        from importlib import import_module

        return getattr(import_module("fvnum.patching.state"), name)
    return _from_keys(name)

