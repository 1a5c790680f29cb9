# %% [markdown]
# # Key patching: a causal test of the routing
#
# A target context (leaf `s`) runs with the keys of layer `l` replaced by those that its donor (leaf
# `s'`: the same tokens `x_i`, label noise and query; `s'` first differs from `s` at depth `j`) computes
# at layer `l` (docs/theory.md section 8). For the path strategy, layer `l` reads node `n_l(s')`, equal to
# `n_l(s)` iff `l <= j`: the patch is harmless for `l <= j` and costly for `l > j`.
#
# The same `PatchingTable` comes from the theory (`fvnum.patching_table`, the strategy simulated) and from
# a model (`bridges.patching.key_patching_table`, hooks on the model's named tap points). Here the model is
# Model A built by hand to route like the path strategy, with the theory's Bayes decoder as its readout:
# its table must equal the theory's within Monte Carlo error. Tiny settings: a few seconds.

# %%
import numpy as np

from bridges.runs.config import DataConfig
from bridges.studies.figures import patching_png
from bridges.models.networks import path_model
from bridges.patching import key_patching_table, path_bayes_decoder, theory_patching_table

data = DataConfig(prior="tree", depth=3, alpha=0.5, n_tokens=128)
BUDGET = 3
theory = theory_patching_table(data, BUDGET, samples=4000, seed=0)
theory

# %%
model = path_model(data, BUDGET, readout=path_bayes_decoder(data))
patched = key_patching_table(model, data, n_contexts=2048, seed=0)
patched

# %% [markdown]
# ## Theory against the model, cell by cell
#
# The difference of the two tables in units of their combined standard error: no cell should be far
# from 0 (they are independent samples of the same experiment).

# %%
z = (patched.loss - theory.loss) / np.sqrt(patched.stderr**2 + theory.stderr**2)
print("z-scores (rows: patched layer l, columns: divergence depth j):")
print(np.array2string(z, precision=2))
print("largest |z|:", float(np.abs(z).max()))

# %% [markdown]
# As a DataFrame (long form: one row per cell), for your own analysis:

# %%
theory.to_frame().head()

# %% [markdown]
# ## The picture
#
# The increase of the loss over the unpatched loss, for the theory and the model: zero on and above the
# diagonal `l <= j`, largest for an early layer patched by a donor that diverges at the root.

# %%
from IPython.display import Image

Image(patching_png({"theory: path strategy": theory.to_dict(), "hand-built path model": patched.to_dict()}))
