"""A keyed policy whose posterior has collapsed (a small tree, many tokens) has zero search starts: its rows are
any unit vector, not a ZeroDivisionError from inside the kernel."""
import numpy as np

from fvnum import PatchSpec, keyed_patching_table, tokens
from fvsym.priors import TreePrior


def test_a_collapsed_posterior_does_not_crash_the_search():
    t = keyed_patching_table(TreePrior(3, "0.6"), 3, tokens(64, keys="weighted"), samples=40, seed=0,
                             patch=PatchSpec(depths=(1,)))
    assert np.isfinite(t.loss).all() and t.unpatched.value < 1e-3
    assert (t.loss[1:, 0] > 0.1).all()  # a donor's key at layer 2 or 3 still costs the leaf it reads
