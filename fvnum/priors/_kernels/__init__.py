"""Numba kernels of the priors' exact decoders (docs/theory.md sections 2, 3, 6), beside what they serve; the
engine's strategies' kernels, which build on these, are :mod:`fvnum.mc._kernels`. No validation, no
random numbers, no allocation inside the per-sample loops: work arrays are allocated once per call
(and travel grouped in tuples), outputs are written into ``out`` arrays. Each public kernel has a plain
numpy twin in ``_reference.py``; tests hold them equal.

- ``common``: constants and tree arithmetic shared by all (path node, signed scale, ``theta_n``);
- ``coord``: coordinate readings, exact posterior over the closure, decoder;
- ``tokens``: the exact decoder of the tokens channel (the finite-N law of the one statistic),
  coordinate and unit rows; ``gig``: its Bessel-function integral, exactly and by table;
- ``dense``: unit rows, leaf enumeration, decoder, a fixed design's loss and gradient.

Tree conventions (docs/theory.md section 6; ``fvsym.heap`` states them once and ``common`` compiles its functions):
heap nodes ``1 .. D = 2^K - 1``; node ``n`` has depth ``k = bitlen(n)``; leaf ``i`` takes sign ``s_k = -1`` iff
bit ``K - k`` of ``i`` is set; its depth-``k`` path node is ``(i >> (K - k + 1)) | (1 << (k - 1))``; a path
read through noise goes on to ``2 n + [phi < 0]``; in heap numbering leaf ``i`` is node ``2^K + i``.
A node number ``0`` in a reading list means "no reading" (an idle channel) and is skipped.
"""
from fvnum.priors._kernels.common import (
    LOG2, MASS_TOL, NEG_INF, TAU0_FALLBACK, _bitlen, _child, _lae, _leaf_bit, _path_node, _signed_scale,
    _subtree_masses, _theta_at,
)
from fvnum.priors._kernels.coord import (
    _coord_done, _coord_loss, _coord_mean_at, _coord_pass, _coord_posterior, _coord_reset, _coord_scratch,
    _posterior_norm2, _sample_leaf, _tree_coord_decode,
)
from fvnum.priors._kernels.dense import _leaf_loglik, _leaf_posterior, _leaf_projections, _tree_dense_decode, _tree_dense_value_grad
from fvnum.priors._kernels.gig import TAB_CELLS, TAB_E_HI, TAB_E_LO, TAB_ROW, _gig_cell, _gig_t, _gig_t_exact, _log_gig, gig_table
from fvnum.priors._kernels.tokens import _chain_loss, _tokens_coord_decode, _tokens_dense_decode, _tokens_loglik, _tokens_posterior

__all__ = [
    "LOG2", "MASS_TOL", "NEG_INF", "TAU0_FALLBACK", "_bitlen", "_child", "_coord_done", "_coord_loss",
    "_coord_mean_at", "_coord_pass", "_coord_posterior", "_coord_reset", "_coord_scratch", "_lae", "_leaf_bit",
    "_leaf_loglik", "_leaf_posterior", "_leaf_projections", "_path_node", "_posterior_norm2", "_sample_leaf",
    "_signed_scale", "_subtree_masses", "_theta_at", "_tree_coord_decode", "_tree_dense_decode",
    "_tree_dense_value_grad", "_chain_loss", "_log_gig", "_tokens_coord_decode", "_tokens_dense_decode",
    "_tokens_loglik", "_tokens_posterior", "TAB_CELLS", "TAB_E_HI", "TAB_E_LO", "TAB_ROW", "_gig_cell", "_gig_t",
    "_gig_t_exact", "gig_table",
]
