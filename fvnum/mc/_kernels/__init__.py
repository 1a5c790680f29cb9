"""Numba kernels (docs/theory.md sections 2, 3, 6, 8), one module per measurement class. No validation, no
random numbers, no allocation inside the per-sample loops: work arrays are allocated once per call
(and travel grouped in tuples), outputs are written into ``out`` arrays. Each public kernel has a plain
numpy twin in ``_reference.py``; tests hold them equal.

- ``common``: constants and tree arithmetic shared by all (path node, signed scale, ``theta_n``);
- ``coord``: coordinate readings, exact posterior over the closure, decoder;
- ``path``: the path strategy fused with its channel, key patching and decoder (O(L) on its chain);
- ``tokens``: the exact decoder of the tokens channel (the finite-N law of the one statistic),
  coordinate and unit rows; ``gig``: its Bessel-function integral, exactly and by table;
- ``dense``: unit rows, leaf enumeration, decoder, a fixed design's loss and gradient;
- ``greedy_coord`` / ``greedy_dense``: greedy one-step lookahead over coordinates / unit rows;
- ``rollout``: one-step rollout over the greedy step (approximate noisy Bellman);
- ``bellman``: the exact noisy Bellman recursion over leaf weights.

Tree conventions (docs/theory.md section 6; ``fvsym.heap`` states them once and ``common`` compiles its functions):
heap nodes ``1 .. D = 2^K - 1``; node ``n`` has depth ``k = bitlen(n)``; leaf ``i`` takes sign ``s_k = -1`` iff
bit ``K - k`` of ``i`` is set; its depth-``k`` path node is ``(i >> (K - k + 1)) | (1 << (k - 1))``; a path
read through noise goes on to ``2 n + [phi < 0]``; in heap numbering leaf ``i`` is node ``2^K + i``.
A node number ``0`` in a reading list means "no reading" (an idle channel) and is skipped.
"""
from fvnum.mc._kernels import atoms
from fvnum.mc._kernels.bellman import _belief_loss, _class_weights, _dp_children, _dp_last, _dp_last_at, _dp_last_min, _posterior_at
from fvnum.mc._kernels.common import (
    LOG2, MASS_TOL, NEG_INF, TAU0_FALLBACK, _bitlen, _child, _lae, _leaf_bit, _path_node, _signed_scale,
    _subtree_masses, _theta_at,
)
from fvnum.mc._kernels.coord import (
    _coord_done, _coord_loss, _coord_mean_at, _coord_pass, _coord_posterior, _coord_reset, _coord_scratch,
    _posterior_norm2, _sample_leaf, _tree_coord_decode,
)
from fvnum.mc._kernels.dense import _leaf_loglik, _leaf_posterior, _leaf_projections, _tree_dense_decode, _tree_dense_value_grad
from fvnum.mc._kernels.greedy_coord import (
    _closure_sums, _greedy_candidates, _greedy_coord_rows, _greedy_coord_scores, _greedy_pick, _greedy_scratch,
    _greedy_step, _node_gram, _node_score, _tree_greedy_sim,
)
from fvnum.mc._kernels.greedy_dense import _dense_objective, _dense_scratch, _greedy_dense_rows, _leaf_paths
from fvnum.mc._kernels.path import _tree_path_sim
from fvnum.mc._kernels.gig import TAB_CELLS, TAB_E_HI, TAB_E_LO, TAB_ROW, _gig_cell, _gig_t, _gig_t_exact, _log_gig, gig_table
from fvnum.mc._kernels.tokens import _chain_loss, _tokens_coord_decode, _tokens_dense_decode, _tokens_loglik, _tokens_posterior
from fvnum.mc._kernels.rollout import MARGIN, _greedy_next, _rollout_rows

__all__ = [
    "atoms",
    "LOG2", "MASS_TOL", "MARGIN", "NEG_INF", "TAU0_FALLBACK",
    "_belief_loss", "_bitlen", "_child", "_class_weights", "_closure_sums", "_coord_done", "_coord_loss", "_coord_mean_at",
    "_coord_pass", "_coord_posterior", "_coord_reset", "_coord_scratch", "_dense_objective", "_dense_scratch",
    "_dp_children", "_dp_last", "_dp_last_at", "_dp_last_min", "_greedy_candidates", "_greedy_coord_rows", "_greedy_coord_scores",
    "_greedy_dense_rows", "_greedy_next", "_greedy_pick", "_greedy_scratch", "_greedy_step", "_lae", "_leaf_bit", "_leaf_loglik",
    "_leaf_paths", "_leaf_posterior", "_leaf_projections", "_node_gram", "_node_score", "_path_node",
    "_posterior_at", "_posterior_norm2", "_rollout_rows", "_sample_leaf", "_signed_scale", "_subtree_masses",
    "_theta_at", "_tree_coord_decode", "_tree_dense_decode", "_tree_dense_value_grad", "_tree_greedy_sim",
    "_tree_path_sim", "_chain_loss", "_log_gig", "_tokens_coord_decode", "_tokens_dense_decode", "_tokens_loglik",
    "_tokens_posterior", "TAB_CELLS", "TAB_E_HI", "TAB_E_LO", "TAB_ROW", "_gig_cell", "_gig_t", "_gig_t_exact", "gig_table",
]
