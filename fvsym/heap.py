"""The heap numbering of the tree prior and the path through it (docs/theory.md section 6), typed once.

Internal nodes ``n = 1 .. 2^K - 1``, root 1, children ``2n`` (sign +1) and ``2n + 1`` (sign -1); node ``n``
is coordinate ``n - 1`` of theta. A leaf is its signs ``s_1 .. s_K``, or its index ``i`` (``0 <= i < 2^K``)
whose bit ``K - k`` is 1 exactly when ``s_k = -1``. The path of a leaf is ``n_1 = 1``,
``n_{k+1} = 2 n_k + [s_k = -1]``; a policy routing by noisy readings decodes ``s_hat_k = sign(phi_k)``, a tie
counting as +1, so the same rule routes by signs and by readings: ``[x < 0]``.

Pure arithmetic (comparisons, ``+``, ``*``, shifts): every function works on Python ints, numpy arrays and
torch tensors alike (elementwise, broadcasting), and the Numba kernels compile these very functions
(``fvnum.priors._kernels.common``), so the rule has one text everywhere.
"""
from __future__ import annotations


def child(node, x):
    """``2 n + [x < 0]``: the node after ``node`` on the path, where ``x`` is the sign ``s_k`` there or a
    reading ``phi_k`` of it (decoded as ``sign(phi_k)``, a tie counting as +1). From ``node = 0`` the same
    steps build a leaf's index from its signs."""
    return 2 * node + (x < 0)


def sign(x):
    """``s_hat = sign(x)`` in ``{+1, -1}``, a tie counting as +1 (an integer, or an integer array)."""
    return 1 - 2 * (x < 0)


def path_node(leaf, depth, k):
    """``n_k``, the depth-``k`` node (``1 <= k <= depth``) on the path of leaf index ``leaf``:
    ``(leaf >> (K - k + 1)) | 2^(k - 1)``."""
    return (leaf >> (depth - k + 1)) | (1 << (k - 1))


def leaf_bit(leaf, depth, k):
    """``[s_k = -1]`` of leaf index ``leaf``: its bit ``K - k``."""
    return (leaf >> (depth - k)) & 1
