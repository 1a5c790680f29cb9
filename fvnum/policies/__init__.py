"""Strategies as policies: the strategy objects and their names (``strategies``, ``builtin``, ``registry``), the
policies (``protocol``, ``policies``), the design searches (``search``). Loading the room registers the built-in
strategies (:mod:`fvnum.policies.builtin`), so every lookup by name finds them."""
from fvnum.policies import builtin  # noqa: F401 (registers the built-in strategies)
