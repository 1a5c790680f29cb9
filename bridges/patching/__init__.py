"""Interventions on trained models: key patching (docs/theory.md section 8), state transplant and injection (9b)."""
from bridges.errors import require

require(__name__)  # this room needs torch: without it, one line naming the extra

from fvsym._moved import room_getattr

# bridges.patching was one module, now bridges.patching.keys: its names stay importable from here, loaded on first use
_from_keys = room_getattr(__name__, "bridges.patching.keys", ('keys', 'state'))
# the state interventions (section 9b) live in bridges.patching.state
_STATE = frozenset(['injection_table', 'mean_state', 'state_patching_table', 'transplanted_losses'])


def __getattr__(name):
    if name == "steering_table":  # additive steering (section 9), bridges.patching.steering
        from bridges.patching.steering import steering_table

        return steering_table
    if name in _STATE:
        from importlib import import_module

        return getattr(import_module("bridges.patching.state"), name)
    return _from_keys(name)

