# %% [markdown]
# # A custom adaptive policy, compared with the built-in strategies
#
# A policy decides what each layer measures from the readings so far (docs/theory.md section 2). Any Python
# function `rows = policy(layer, phi)` is one (the protocol of `fvnum.policies.policies`): `phi` holds the
# readings of the earlier layers, shape `(n, layer, d)`, for `n` samples at once, and `rows` the node
# numbers to read, shape `(n, d)`. `fvnum.loss_mc` evaluates it by Monte Carlo with the exact Bayes
# decoder; `fvnum.plot` draws it beside the built-in strategies and the exact formulas.
# Tiny settings: this page runs when the documentation is built.

# %%
import math

import numpy as np

import fvnum
from fvnum import plot
from fvnum.policies.policies import CallablePolicy
from fvsym import TreePrior
from fvsym.tree import path_loss

prior = TreePrior(4, "1/2")
TAU, SAMPLES = 0.5, 4000

# %% [markdown]
# ## The policy: the path strategy with second thoughts
#
# `confident_path` keeps reading the current path node until the posterior probability of its sign
# reaches `confidence`, and only then descends. Under the gaussian channel a re-read brings fresh noise,
# so it spends budget on certainty at the top of the tree, where a wrong branch costs most. The sign
# log-odds after readings summing to `S` of a node of amplitude `a` are `2 a S / tau^2`.

# %%
def confident_path(scales, tau, confidence=0.9):
    scales = np.asarray(scales, dtype=float)
    K, D = scales.size, 2**scales.size - 1
    threshold = math.log(confidence / (1 - confidence))

    def policy(layer, phi):
        n = phi.shape[0]
        node, total = np.ones(n, dtype=np.int64), np.zeros(n)  # (n,) node being read, its summed readings
        for l in range(layer):  # replay the earlier decisions from the readings (a stateless policy)
            live = node <= D
            total = total + phi[:, l, 0]
            amplitude = scales[np.minimum(np.frexp(node.astype(float))[1], K) - 1]
            descend = live & (2 * amplitude * np.abs(total) / tau**2 >= threshold)
            node = np.where(descend, 2 * node + (total < 0), node)
            total = np.where(descend, 0.0, total)
        return np.where(node <= D, node, 0)[:, None]  # (n, 1); 0 = idle

    return policy


scales = [float(a) for a in prior.scales]
policy = confident_path(scales, TAU)
channel = fvnum.gaussian(TAU)
est = fvnum.loss_mc(prior, "policy", 3, channel, options=fvnum.StrategyOptions(policy=policy, layers=3, width=1),
                    samples=SAMPLES, seed=0)
est

# %% [markdown]
# Printed as a decision tree at the noiseless readings (`+a_k`, `-a_k`, `0`), as the policy itself routes
# them. (At a noiseless reading it is always sure, so this tree is the path strategy's; under noise it
# re-reads.)

# %%
print(CallablePolicy(policy, 3, 1, name="confident_path").describe(prior))

# %% [markdown]
# ## Strategies compared, with error bars
#
# `plot.loss_vs_budget` takes strategy names (Monte Carlo at every budget, the same seed), formulas
# with the budget `B` left free (exact), and callables `budget -> Estimate`. It returns a matplotlib
# `Figure`.

# %%
def custom(budget):
    options = fvnum.StrategyOptions(policy=confident_path(scales, TAU), layers=budget, width=1)
    return fvnum.loss_mc(prior, "policy", budget, channel, options=options, samples=SAMPLES, seed=0)


fig = plot.loss_vs_budget(
    {"path": "path", "top levels": "top_levels", "confident path (custom)": custom,
     "path, noiseless (exact formula)": path_loss().subs(alpha="1/2", K=4)},
    budgets=range(1, 5), prior=prior, channel=channel, samples=SAMPLES, seed=0,
    look=plot.Look(title=f"tree prior, depth 4, alpha 1/2, gaussian channel tau = {TAU}"))
fig

# %% [markdown]
# ## The difference on the same samples
#
# Every strategy above ran on the same random numbers (same seed, same budget), so the difference of two
# strategies has a paired standard error from the per-sample losses (`record=True` keeps them in the Estimate's `function_vectors`).

# %%
B = 4
options = fvnum.StrategyOptions(policy=confident_path(scales, TAU), layers=B, width=1)
a = fvnum.loss_mc(prior, "policy", B, channel, options=options, samples=SAMPLES, seed=1, record=True)
b = fvnum.loss_mc(prior, "path", B, channel, samples=SAMPLES, seed=1, record=True)
d = a.function_vectors.loss - b.function_vectors.loss
print(f"confident_path - path at B = {B}: {d.mean():+.4f} +- {d.std(ddof=1) / math.sqrt(d.size):.4f} (paired)")
