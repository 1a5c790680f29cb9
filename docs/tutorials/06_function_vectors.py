# %% [markdown]
# # Function vectors: transplant the workspace, inject a mean state
#
# The workspace `Phi_l` (the readings of layers `1..l`) is the theory's function vector: a state that carries the
# context's latent at finer and finer scales and steers what the later layers read. In language models the
# experiment that defines a function vector intervenes on such a state: Hendel et al. (2023) patch a "task vector"
# from one context into another, Todd et al. (2024) add a task's mean activation to a new prompt. This engine
# computes what the theory says each intervention does (docs/theory.md section 9) and runs the same intervention on a
# model through its named taps.
#
# - **Transplant at layer `l`**: the target's `Phi_l` is replaced by its donor's (a leaf that first differs at
#   depth `j`; same tokens, label noise and query); layers `l+1..L` read the target's tokens from that state.
# - **Injection**: `Phi_l` is replaced by the mean workspace `Phi_bar_l` of another prefix of the tree; does the
#   model decode a leaf in that prefix's subtree?
#
# Tiny settings (depth 4, budget 3): the whole tutorial runs in about half a minute (24 s measured on 2 busy cores
# with the Numba kernels compiled; one reader measured 35 s).

# %% [markdown]
# ## The theorist's view: what the path strategy does
#
# For `path` under the gaussian channel with shared noise, a donor that diverges below the transplanted layers
# (`j > l`) hands the target its own readings: the effect is exactly zero, bit for bit. Where `j <= l` the
# target is routed into the donor's subtree: the loss grows the earlier the divergence.

# %%
import numpy as np

import fvnum
from fvsym.priors import TreePrior

prior = TreePrior(4, 0.6)
table = fvnum.state_patching_table(prior, "path", 3, fvnum.gaussian(0.2), samples=4000, seed=0)
table

# %%
print("effect (transplanted - unpatched, paired); rows l, columns j:")
print(np.array2string(table.effect, precision=3))
print("zero where j > l, bit for bit:", all(table.effect[l - 1, j - 1] == 0 for l in table.layers
                                            for j in table.depths if j > l))

# %% [markdown]
# The mean workspaces `Phi_bar_l(s_1..s_l)`, one row per prefix (bit 1 for a sign -1, first level first):

# %%
means = fvnum.mean_state(prior, "path", 3, fvnum.gaussian(0.2), samples=8000, seed=1)
print(means)
print("Phi_bar_2 of the prefix (+, -):", means.of(2, [1, -1]))

# %% [markdown]
# ## The interpretability researcher's view: a trained model
#
# A small Model A (depth 4, budget 3, 600 steps: far from converged, enough to route) and the same transplant
# through its `workspace.{l}` taps (`bridges.models.taps.patch`, which refuses a patch that no forward pass
# reached). The table has the theory's type, so the two lay out side by side.

# %%
from bridges.patching import model_state_patching_table
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.train import train

data = DataConfig(prior="tree", depth=4, alpha=0.6, n_tokens=64)
cfg = RunConfig(data, ModelConfig("A", 3, mlp_width=32),
                TrainConfig(steps=600, batch=128, lr=5e-3, warmup=50, eval_every=200, eval_batches=4, seed=0))
model = train(cfg, progress=False).model
trained = model_state_patching_table(model, data, n_contexts=1024, seed=0)
trained

# %%
theory = fvnum.state_patching_table(prior, "path", 3, fvnum.tokens(64, s2=data.s2), samples=4000, seed=0)
print("effect, theory (path, tokens channel):")
print(np.array2string(theory.effect, precision=2))
print("effect, trained Model A:")
print(np.array2string(trained.effect, precision=2))

# %% [markdown]
# ## Injection: does a mean state steer the later layers?
#
# Each target gets the mean workspace of its donor's prefix at layer `l` (divergence depth `j <= l`). The
# theory says a deep adaptive model follows the injected prefix: its later layers read inside that subtree.
# Chance is `2^-l`.

# %%
from bridges.patching import model_injection_table

theory_inj = fvnum.injection_table(prior, "path", 3, fvnum.tokens(64, s2=data.s2), samples=4000, seed=0)
model_inj = model_injection_table(model, data, n_contexts=1024, seed=0, mean_contexts=4096)
print(theory_inj)
print(model_inj)

# %% [markdown]
# As long tables (pandas) for your own analysis, and the picture (`bridges.studies.figures.function_vectors_png`):

# %%
model_inj.to_frame().head()

# %%
from IPython.display import Image

from bridges.studies.figures import function_vectors_png

Image(function_vectors_png({"theory: path": theory.to_dict(), "Model A (600 steps)": trained.to_dict()},
                           {"theory: path": theory_inj.to_dict(), "Model A (600 steps)": model_inj.to_dict()}))

# %% [markdown]
# The same tables of a finished run folder come from the command line, with the theory beside them:
#
# ```
# fv intervene DIR/<key>/ --theory --format json
# ```
#
# At the scaling study's cell (depth 7, budgets 4 and 6) the trained A, B and C and A's prediction policy are in
# [the function-vector study](../studies/function_vectors/function_vectors.html).
