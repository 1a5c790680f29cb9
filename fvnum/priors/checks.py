"""The float checks of the priors' numbers (what ``fvnum.priors.capabilities.Capabilities.check_floats``,
``check_resolution`` and ``check_noiseless_readings`` run for the tree and the Gaussian): numbers the kernels
square must stay normal doubles, lookahead scores must resolve the deepest level, noiseless readings must come
from some leaf. Standard library and numpy (loaded inside), so ``fvnum.guards.limits`` names them without loading more.
"""
from __future__ import annotations

from fvsym.errors import InputError

SCALE_RANGE = (1e-75, 1e75)  # float tree scales: a_k^2 (losses) and a_k^4 (their squares, the SEs) stay normal
VARIANCE_RANGE = (1e-150, 1e150)  # the largest variance of a Gaussian prior, for the same reason
RESOLUTION = 1e-13  # a_K^2 / sum a_k^2 below this: lookahead scores in doubles cannot see the deepest level


def check_variance(eigenvalues) -> None:
    """The largest variance of a Gaussian prior in ``VARIANCE_RANGE`` (losses and their squares stay normal)."""
    import numpy as np

    lo, hi = VARIANCE_RANGE
    top = float(np.max(eigenvalues)) if np.size(eigenvalues) else 0.0
    if top != 0 and not lo < top < hi:
        raise InputError(f"the Gaussian prior's largest variance {top:.3g} is outside ({lo:g}, {hi:g}), where "
                         f"losses and their standard errors are normal floats; rescale the covariance")


def check_scales(scales) -> None:
    """Float scales of a tree prior must neither underflow (a tiny alpha at a large depth) nor overflow:
    each ``a_k`` in ``SCALE_RANGE``, so that losses, their squares and the standard errors are normal floats."""
    import numpy as np

    lo, hi = SCALE_RANGE
    ok = (scales > lo) & (scales < hi)
    if not ok.all():
        k = int(np.argmin(ok))
        what = "underflow" if not scales[k] > lo else "overflow"
        fix = f"; use a larger alpha or depth <= {k}" if what == "underflow" and k >= 1 else ""
        raise InputError(f"the tree's scales a_k {what} in floating point: a_{k + 1} = {scales[k]:.3g}, and "
                         f"every a_k must lie in ({lo:g}, {hi:g}){fix}")


def check_level_resolution(scales, what: str) -> None:
    """:func:`check_resolution` of a tree's level ``scales``: ``a_K^2`` at least ``RESOLUTION`` of their sum."""
    w = scales.astype(float) ** 2
    ratio = float(w.min() / w.sum())
    if ratio < RESOLUTION:
        raise InputError(f"{what} compares expected losses near E||theta||^2 = {w.sum():.3g} in doubles and cannot "
                         f"resolve the deepest level (a_K^2 = {w.min():.3g}, {ratio:.1e} of it; it needs at least "
                         f"{RESOLUTION:g}): use path, top_levels, fixed or bellman_noiseless, or a smaller depth")


def check_tree_readings(depth: int, scales, nodes, phi, rtol: float = 1e-9) -> None:
    """Noiseless (``tau = 0``) readings ``phi`` (n, B) of coordinate ``nodes`` (n, B; 0 = no reading) of a
    tree prior must be produced by some leaf: each reading is ``0`` (the path avoids the node) or
    ``+-a_k`` (it passes, sign = the branch), and together they must leave at least one leaf.
    One-line ValueError naming the first impossible sample. ``O(B K)`` per sample."""
    import numpy as np

    scales = np.asarray(scales, dtype=float)
    nodes = np.asarray(nodes)
    phi = np.asarray(phi, dtype=float)
    for i in range(phi.shape[0]):
        on, zeros = {}, set()
        for n, x in zip(nodes[i].tolist(), phi[i].tolist()):
            if n == 0:
                continue
            a = scales[int(n).bit_length() - 1]
            if abs(x) <= rtol * a:
                zeros.add(int(n))
            elif abs(abs(x) - a) <= rtol * a:
                s = 1 if x > 0 else -1
                if on.get(int(n), s) != s:
                    raise InputError(f"readings of sample {i} are impossible without noise: node {n} read both signs")
                on[int(n)] = s
            else:
                raise InputError(f"reading {x!r} of node {n} (sample {i}) is impossible without noise (tau = 0): "
                                 f"it must be 0 or +-{a:g}")
        if not _tree_consistent(depth, on, zeros):
            raise InputError(f"readings of sample {i} are impossible without noise (tau = 0): no leaf of the tree "
                             f"produces them")


def _tree_consistent(depth: int, on: dict, zeros: set) -> bool:
    region = 1  # the subtree the path must end in
    if on:
        deepest = max(on, key=lambda n: n.bit_length())
        for n, s in on.items():  # every passed node is an ancestor of the deepest, on the right branch
            shift = deepest.bit_length() - n.bit_length()
            if deepest >> shift != n:
                return False
            below = 2 * n + (0 if s > 0 else 1)
            if shift and deepest >> (shift - 1) != below:
                return False
        region = 2 * deepest + (0 if on[deepest] > 0 else 1)
        for z in zeros:  # a zero on the forced path is impossible
            shift = region.bit_length() - z.bit_length()
            if shift >= 1 and region >> shift == z:
                return False
    if region.bit_length() > depth:  # a single leaf: nothing below to exclude
        return True
    inside = {z for z in zeros if z.bit_length() >= region.bit_length()
              and z >> (z.bit_length() - region.bit_length()) == region}

    def covered(n):  # every leaf below n is excluded by a zero reading
        if n in inside:
            return True
        if n.bit_length() >= depth or not any(z.bit_length() > n.bit_length()
                                              and z >> (z.bit_length() - n.bit_length()) == n for z in inside):
            return False
        return covered(2 * n) and covered(2 * n + 1)

    return not covered(region)
