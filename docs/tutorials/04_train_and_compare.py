# %% [markdown]
# # Train a model and compare it with the theory
#
# Model A (docs/theory.md section 7: `L = B` layers of width 1, MLP keys that see the workspace, a decoding
# readout) is trained on the tree prior, then held against the theory at the same prior, budget and
# channel: the models see sampled tokens, so the theory rows are for the `tokens` channel of the same
# `N`, or say which channel they are for. Tiny settings (depth 3, budget 2, 300 steps, a few seconds on
# one core): the model is far from converged; `fv compare` with the recipe's defaults trains it out.

# %%
import fvnum
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm in a notebook without ipywidgets

from bridges.analysis.compare import compare, to_markdown
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.train import train
from fvnum import plot

cfg = RunConfig(DataConfig(prior="tree", depth=3, alpha=0.5, n_tokens=128),
                ModelConfig(model="A", budget=2, mlp_width=32),
                TrainConfig(steps=300, batch=128, lr=3e-3, warmup=30, eval_every=100, eval_batches=8, seed=0,
                            threads=1))
result = train(cfg, progress=False)
result

# %% [markdown]
# ## The comparison table
#
# `compare` computes the theory side with `fvnum.theory.comparison_table` (Monte Carlo rows with their
# standard errors, exact rows from `fvsym` or the exact linear theory) and lays it out beside the
# trained loss, with the routing the model learned and the audit of its readings (`bridges.analysis.audit`: the
# Bayes loss on the model's own readings, and the decoder gap, model minus Bayes). `to_markdown` writes
# it as Markdown; `Markdown(...)` shows it as a table here.

# %%
from IPython.display import Markdown

table = compare(result, samples=2000, seed=0, search_samples=300, dense=False)
Markdown(to_markdown(table))

# %% [markdown]
# ## The audit
#
# `bridges.analysis.audit.audit(result)` measures the trained model against the Bayes decoder on its own
# readings: the gap says how much of the loss is the readout's rather than the routing's.

# %%
from bridges.analysis.audit import audit

audit(result)

# %% [markdown]
# ## The trained point on the theory's curves
#
# `fvnum.plot` draws trained results (anything with `to_dict()` carrying its budget) beside strategies
# evaluated under the same channel (`fvnum.tokens(128)`, the models' context length).

# %%
from fvsym import TreePrior

fig = plot.loss_vs_budget({"path": "path", "top levels": "top_levels", "trained Model A (300 steps)": [result]},
                          budgets=range(1, 3), prior=TreePrior(3, "1/2"), channel=fvnum.tokens(128),
                          samples=2000, seed=0)
fig
