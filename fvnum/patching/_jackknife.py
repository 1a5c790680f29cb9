"""The mean state's own Monte Carlo error in an injection's standard error (docs/theory.md section 9).

A mean state ``Phi_bar_l`` is itself an average over ``n`` drawn contexts, so a second draw of it moves every
injected cell, and by more than the targets' own spread when ``n`` is not much larger than the targets' count
(``l = B``: every target of a prefix gets the same state). The mean contexts are split into ``G`` groups
(context ``i`` in group ``i mod G``, the contexts are independent); a cell is re-measured with each
leave-one-group-out mean state on the same targets (the first ``JACKKNIFE_TARGETS`` of them, paired), and the
delete-a-group jackknife ``(G - 1) / G * sum_g (x_g - x_bar)^2`` estimates the variance the mean state adds.
The reported standard error is ``sqrt(targets' stderr^2 + that variance)``.
"""
from __future__ import annotations

import numpy as np

MEAN_GROUPS = 8  # groups of the mean contexts (the jackknife's replicates)
JACKKNIFE_TARGETS = 4096  # targets a cell is re-measured on, per leave-one-group-out mean state
STDERR_WITH_MEANS = (f"targets and the mean state's own Monte Carlo error (delete-a-group jackknife over "
                     f"{MEAN_GROUPS} groups of the mean contexts)")
STDERR_TARGETS_ONLY = "targets only (the mean state carries no groups: its own Monte Carlo error is not included)"


def prefix_sums(prefix: np.ndarray, flat: np.ndarray, level: int, groups: int = MEAN_GROUPS):
    """Sums (G, 2^level, w) and counts (G, 2^level) of ``flat`` (n, w) by prefix index and group ``i mod G``."""
    n, w = flat.shape
    group = np.arange(n) % groups
    sums = np.zeros((groups, 2**level, w))
    np.add.at(sums, (group, prefix), flat)
    counts = np.zeros((groups, 2**level), dtype=np.int64)
    np.add.at(counts, (group, prefix), 1)
    return sums, counts


def means_of_sums(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Means (2^level, w) of group sums pooled over groups (NaN where no context has the prefix)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums.sum(0) / counts.sum(0)[:, None]


def leave_out(means, layer: int, g: int) -> np.ndarray:
    """``Phi_bar_l`` of a ``MeanState`` without its group ``g`` (2^level, w); where only group ``g`` has a
    prefix, the full mean (that replicate then adds nothing)."""
    sums, counts = means.group_sums[layer], means.group_counts[layer]
    rest = counts.sum(0) - counts[g]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (sums.sum(0) - sums[g]) / rest[:, None]
    return np.where((rest > 0)[:, None], out, means.means[layer])


def jackknife_variance(replicates) -> float:
    """The delete-a-group jackknife variance ``(G - 1) / G * sum_g (x_g - x_bar)^2`` of ``G`` replicates."""
    x = np.asarray(replicates, dtype=float)
    if x.size < 2 or np.isnan(x).any():
        return 0.0 if x.size < 2 else float("nan")
    return float((x.size - 1) / x.size * ((x - x.mean()) ** 2).sum())


def subset(size: int, total: int) -> int:
    """Targets of a chunk of ``size`` (of ``total``) re-measured per replicate: ``JACKKNIFE_TARGETS`` in all."""
    return size if total <= JACKKNIFE_TARGETS else max(2, -(-size * JACKKNIFE_TARGETS // total))


def grouped_means(leaves: np.ndarray, flats: dict, depth: int, n: int, source: str, width: int, origin: tuple = ()):
    """The ``MeanState`` of per-layer states ``flats[l]`` (n, l d) of contexts with ``leaves``, grouped by the
    prefix of their leaves, holding its ``MEAN_GROUPS`` groups' sums for the jackknife."""
    from fvnum.patching.state_tables import MeanState

    means, counts, group_sums, group_counts = {}, {}, {}, {}
    for l, flat in flats.items():
        level = min(l, depth)
        sums, count = prefix_sums(leaves >> (depth - level), flat, level)
        means[l], counts[l] = means_of_sums(sums, count), count.sum(0)
        group_sums[l], group_counts[l] = sums, count
    return MeanState(means, counts, n, source, depth, width, origin, group_sums, group_counts)
