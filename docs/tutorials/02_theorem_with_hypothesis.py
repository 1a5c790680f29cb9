# %% [markdown]
# # Test a theorem with hypothesis
#
# A theorem of docs/theory.md is a claim about every prior, budget and noise level. `fvsym` computes each
# side exactly, so a property test can check the claim on many random instances, and
# [hypothesis](https://hypothesis.readthedocs.io) shrinks a failure to a minimal counter-example.
# Executed when the documentation is built (a few seconds).

# %%
from fractions import Fraction

import sympy as sp
from hypothesis import given, settings, strategies as st

from fvnum.priors import gaussian as fvnum_gaussian
from fvsym import GaussianPrior, TreePrior, bellman, gaussian, symbols
from fvsym.tree import tree_loss

alphas = st.fractions(min_value=Fraction(1, 20), max_value=Fraction(19, 20), max_denominator=20)
trees = st.integers(2, 4).flatmap(lambda K: st.tuples(st.just(K), st.integers(1, K), alphas))

# %% [markdown]
# ## Adaptive beats the path strategy, and never loses to a fixed design
#
# On the noiseless tree prior the exact Bellman optimum (`L = B` layers of width 1) is at most the
# path loss, which is at most `E||theta||^2`; and at most the best fixed design of the same budget.

# %%
checked = []


@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(trees)
def optimum_below_path_and_fixed_designs(example):
    depth, budget, a = example
    alpha = f"{a.numerator}/{a.denominator}"
    prior = TreePrior(depth, alpha)
    optimum = bellman.solve(prior, budget, 1).loss
    path = tree_loss(depth, budget, "path", alpha=alpha).expr
    fixed, _ = bellman.optimal_nonadaptive(prior, budget)
    assert optimum <= path <= prior.second_moment  # exact rationals: no tolerance
    assert optimum <= fixed
    checked.append((depth, budget, alpha, optimum, path))


optimum_below_path_and_fixed_designs()
print(f"{len(checked)} random trees checked; e.g. depth, budget, alpha, optimum, path =", checked[-1])

# %% [markdown]
# ## A false claim, shrunk to its counter-example
#
# "The path strategy is optimal" is false: in the noiseless coordinate class a zero reading is
# informative (docs/theory.md section 6), so the optimum beats path. hypothesis finds and shrinks it.

# %%
@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(trees)
def path_is_optimal(example):
    depth, budget, a = example
    alpha = f"{a.numerator}/{a.denominator}"
    path = tree_loss(depth, budget, "path", alpha=alpha).expr
    optimum = bellman.solve(TreePrior(depth, alpha), budget, 1).loss
    assert path <= optimum, f"depth {depth}, budget {budget}, alpha {alpha}: path {path} > optimum {optimum}"


try:
    path_is_optimal()
except AssertionError as err:
    print("counter-example (shrunk by hypothesis):", err)

# %% [markdown]
# ## Theorem G1: no advantage of depth on a Gaussian prior
#
# The posterior covariance does not depend on the readings, so the deep optimum (`L = B` layers of
# width 1, found by optimising the sequential problem numerically) equals the shallow one (one layer,
# exact water-filling). On random diagonal covariances and noise levels:

# %%
spectra = st.lists(st.fractions(min_value=Fraction(1, 10), max_value=3, max_denominator=10), min_size=2, max_size=3)
noise = st.fractions(min_value=Fraction(1, 10), max_value=1, max_denominator=10)
gaps = []


@settings(max_examples=4, deadline=None, database=None, derandomize=True)
@given(spectra, st.integers(1, 2), noise)
def g1(values, budget, tau):
    prior = GaussianPrior(sp.diag(*[sp.Rational(v.numerator, v.denominator) for v in values]))
    result = fvnum_gaussian.numeric_deep_shallow_gap(prior, budget, sp.Rational(tau.numerator, tau.denominator), seed=0)
    assert abs(result.gap) <= 1e-6 * (1 + float(result.shallow)), result.to_dict()  # deep is a float optimum
    gaps.append(result.gap)


g1()
print("largest |deep - shallow| over the examples:", max(abs(g) for g in gaps))

# %% [markdown]
# With a symbolic `tau` the same theorem is proved exactly (route `symbolic`: the deep and the shallow
# posteriors simplify to the same matrix):

# %%
gaussian.deep_shallow_gap(GaussianPrior.isotropic(3), 2, symbols.tau).to_dict()
