"""Numba kernels of the engine's strategies (docs/theory.md sections 2, 3, 6, 8), one module per measurement class;
the decoders' kernels (tree arithmetic, coordinate and unit-row posteriors, the tokens channel's law) are the priors'
(:mod:`fvnum.priors._kernels`), beside what they serve. No validation, no random numbers, no allocation inside the
per-sample loops: work arrays are allocated once per call (and travel grouped in tuples), outputs are written into
``out`` arrays. Each public kernel has a plain numpy twin in ``_reference.py``; tests hold them equal.

- ``path``: the path strategy fused with its channel, key patching and decoder (O(L) on its chain);
- ``greedy_coord`` / ``greedy_dense``: greedy one-step lookahead over coordinates / unit rows;
- ``rollout``: one-step rollout over the greedy step (approximate noisy Bellman);
- ``bellman``: the exact noisy Bellman recursion over leaf weights;
- ``atoms``: the greedy lookahead on a finite prior's atoms; ``keyed``: the keyed searches' Monte Carlo.
"""
from fvnum.mc._kernels import atoms
from fvnum.mc._kernels.bellman import _belief_loss, _class_weights, _dp_children, _dp_last, _dp_last_at, _dp_last_min, _posterior_at
from fvnum.mc._kernels.greedy_coord import (
    _closure_sums, _greedy_candidates, _greedy_coord_rows, _greedy_coord_scores, _greedy_pick, _greedy_scratch,
    _greedy_step, _node_gram, _node_score, _tree_greedy_sim,
)
from fvnum.mc._kernels.greedy_dense import _dense_objective, _dense_scratch, _greedy_dense_rows, _leaf_paths
from fvnum.mc._kernels.path import _tree_path_sim
from fvnum.mc._kernels.rollout import MARGIN, _greedy_next, _rollout_rows

__all__ = [
    "atoms", "MARGIN", "_belief_loss", "_class_weights", "_closure_sums", "_dense_objective", "_dense_scratch",
    "_dp_children", "_dp_last", "_dp_last_at", "_dp_last_min", "_greedy_candidates", "_greedy_coord_rows",
    "_greedy_coord_scores", "_greedy_dense_rows", "_greedy_next", "_greedy_pick", "_greedy_scratch", "_greedy_step",
    "_leaf_paths", "_node_gram", "_node_score", "_posterior_at", "_rollout_rows", "_tree_greedy_sim",
    "_tree_path_sim",
]
