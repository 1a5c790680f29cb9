"""Constants and small helpers shared by every kernel (inlined by numba): tree arithmetic of docs/theory.md
section 6 (``_bitlen``; ``_child``, ``_path_node`` and ``_leaf_bit``, the functions of ``fvsym.heap``
compiled; ``_signed_scale``, ``_theta_at``), ``log(e^a + e^b)``, and the posterior mass of every heap node
from leaf masses.

Inlining, in every kernel module: helpers of a few lines, and the two of ``bellman`` called per candidate
in its innermost loop (``_class_gram``, ``_lattice_loss``: cheap to compile), are inlined at the Numba IR level
(``inline="always"``); larger ones are ordinary calls that LLVM inlines or not. IR-level inlining of a large body
repeats its type inference at each call site: it made the cold compile of ``fv bounds --scales 1,1/2 --budget 2
--tau 0.3`` 113 s of CPU against 35 s without it, and made the kernels no faster (a paired timing of path,
greedy_coordinate, rollout and bellman_noiseless at depth 8, gaussian and tokens channels: within the noise)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from fvsym import heap

LOG2 = math.log(2.0)
NEG_INF = -np.inf
TAU0_FALLBACK = 1e-2  # tau -> 0 limit for observations of zero likelihood, in units of a_K
MASS_TOL = 1e-12  # outcome masses below this (contributing at most MASS_TOL sum a_k^2) are dropped


@njit(cache=True, nogil=True)
def _bitlen(n):
    k = 0
    while n > 0:
        n >>= 1
        k += 1
    return k


@njit(cache=True, nogil=True)
def _lae(a, b):
    """log(exp(a) + exp(b)), exact for -inf arguments."""
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


# the heap rule of fvsym.heap, compiled: the next path node after a sign or reading, a leaf's depth-k path
# node, and its bit [s_k = -1]
_child = njit(cache=True, nogil=True, inline="always")(heap.child)
_path_node = njit(cache=True, nogil=True, inline="always")(heap.path_node)
_leaf_bit = njit(cache=True, nogil=True, inline="always")(heap.leaf_bit)


@njit(cache=True, nogil=True, inline="always")
def _signed_scale(leaf, K, k, scales):
    """``a_k s_k`` of leaf ``leaf``: its coordinate at its depth-``k`` path node."""
    return -scales[k - 1] if _leaf_bit(leaf, K, k) else scales[k - 1]


@njit(cache=True, nogil=True, inline="always")
def _theta_at(leaf, n, K, scales):
    """Coordinate ``theta_n`` of leaf ``leaf``: ``a_k s_k`` on its path, else 0."""
    k = _bitlen(n)
    if _path_node(leaf, K, k) != n:
        return 0.0
    return _signed_scale(leaf, K, k, scales)


@njit(cache=True, nogil=True)
def _subtree_masses(mass, nl):
    """``mass[h] = mass[2h] + mass[2h+1]`` for the inner nodes, from the leaf masses ``mass[nl:]``."""
    for h in range(nl - 1, 0, -1):
        mass[h] = mass[2 * h] + mass[2 * h + 1]
