# %% [markdown]
# # Residual values: gradient descent in context and its limit
#
# With the label as the value (docs/theory.md sections 2-3, Models A, B, C) every reading is a projection of `theta`
# whose noise does not depend on what was read before, so on a Gaussian prior depth buys nothing (Theorem G1).
# With the *residual* as the value, `v_i = y_i - <theta_hat, x_i>`, each layer reads what is left to explain, and
# `L` layers of `D` channels are `L` steps of preconditioned gradient descent on the context's squared error
# (docs/theory.md section 13): deep linear self-attention. This page derives the row `gd_steps` in its mean-field
# limit `N, D -> oo` at `N / D = a` (`fvsym.gd`) and sets it beside the finite-`N` Monte Carlo (`fvnum.gd_steps`).
# It is executed when the documentation is built: every output below was computed then.

# %%
import numpy as np
import sympy as sp

from fvsym import GaussianPrior
from fvsym import gd
from fvsym import symbols as S

a = S.ratio  # the symbol a = N / D, positive

# %% [markdown]
# ## The Marchenko-Pastur moments
#
# After `L` steps with scalar steps `gamma_l` the error is `Q(S) theta` (noiseless), `Q(lambda) = prod_l (1 -
# gamma_l lambda)`, with `S = X^T X / N`. In the limit, `tr S^k / D` tends to the `k`-th moment of the
# Marchenko-Pastur law of `X^T X / N` (an atom of mass `1 - a` at 0 when `a < 1`): a Narayana polynomial in `1/a`.

# %%
[gd.mp_moment(k).expr for k in range(5)]

# %% [markdown]
# The convention checked against random matrices: `N = 400` tokens, `D = 200` (`a = 2`), one draw.

# %%
rng = np.random.default_rng(0)
X = rng.standard_normal((400, 200))
eig = np.linalg.eigvalsh(X.T @ X / 400)
[(k, round(float((eig**k).mean()), 3), round(float(gd.mp_moment(k)(a=2)), 3)) for k in range(1, 5)]

# %% [markdown]
# ## The limit, in closed form
#
# One step shared by the layers (`Gamma_l = (gamma / L) I`): the loss relative to the prior's is
# `min over gamma of int rho_MP (1 - gamma lambda / L)^(2L)`. The minimum sits where every layer takes the one-step
# optimum `a / (1 + a)`, because `lambda rho_MP` is a semicircle symmetric about `1 + 1/a`; the sum left is a
# Catalan series. `f.expr` holds for every `L`; `f(a=1, L=2)` evaluates it.

# %%
f = gd.gd_steps_limit("shared")
f

# %%
f(a=1, L=2), f.subs(L=2).expr, f.subs(L=1).expr

# %% [markdown]
# A step of its own at each layer: `min over gamma_1..gamma_L of int rho_MP prod_l (1 - gamma_l lambda)^2`. The
# minimum over polynomials with `Q(0) = 1` is `1 / K_L(0, 0)`, from the orthogonal polynomials of `rho_MP`, whose
# Jacobi parameters are constant (`fvsym.gd.mp_jacobi`): `1 / (1 + a + ... + a^L)`.

# %%
p = gd.gd_steps_limit("per_layer")
p.expr, p.expr.doit(), p(a=1, L=2)

# %% [markdown]
# At `a = 1` and two layers: 1/3 with a step per layer, 3/8 with a shared one (docs/theory.md says so). The optimal
# steps are closed forms too: shared `gamma = L a / (1 + a)`; per layer the reciprocal zeros of a Chebyshev
# polynomial, `1 / (1 + 1/a + 2 cos(pi l / (L + 1)) / sqrt(a))`.

# %%
shared_step = gd.gd_step_sizes("shared")
per_layer_step = gd.gd_step_sizes("per_layer")
shared_step.expr, per_layer_step.expr, [per_layer_step.exact(a=1, L=2, l=i) for i in (1, 2)]

# %% [markdown]
# ## Depth's advantage against `N / D`
#
# One layer gives `1 / (1 + a)` either way. Four layers gain most at `a` of order 1; the gain (a difference of
# losses) vanishes as `a -> oo`, where `X^T X / N -> I` and one step is already nearly exact. The ratio does not
# vanish: four layers fall like `a^-4` (per layer) or `14 a^-4` (shared, Catalan(4)), one layer like `1/a`.

# %%
gain = p.subs(L=1) - p.subs(L=4)
gain.expr, gain.limit("a", sp.oo), sp.limit(p.subs(L=4).expr * a**4, a, sp.oo), sp.limit(f.subs(L=4).expr * a**4, a, sp.oo)

# %%
ratios = np.array([0.25, 0.5, 1, 2, 4, 8, 16])
{"a": ratios.tolist(),
 "L=1": np.round(p(a=ratios, L=1), 4).tolist(),
 "L=4, shared": np.round(f(a=ratios, L=4), 4).tolist(),
 "L=4, per layer": np.round(p(a=ratios, L=4), 4).tolist()}

# %% [markdown]
# With label values and `D` channels a layer, every layer reads the same statistic `X^T y / N`, so the state
# after `L` layers holds nothing the first layer did not: depth buys nothing beyond one layer, at every `N`. That
# row is the `L = 1` row above, flat in `L`; the contrast with residual values is what G1's scope is about.
#
# ## Label noise
#
# With `s2 > 0` the loss gains `(sigma2 / a) int rho_MP lambda P(lambda)^2`, `P = (1 - Q) / lambda`, where
# `sigma2 = s2 / E||theta||^2` is the noise over the signal, held fixed as `D` grows (with `s2` fixed the term
# vanishes in the limit). One layer: `(1 + sigma2) / (1 + sigma2 + a)`.

# %%
gd.gd_steps_noisy_limit(1, "shared").expr, gd.gd_steps_noisy_limit(2).expr

# %% [markdown]
# The per-layer formula is the minimum over polynomials `Q`; real steps attain it only where that `Q` has real
# zeros. With a little noise they are real; with more, they are not, and the formula is a lower bound on gradient
# descent with real steps (`gd_steps_optimum` says which).

# %%
print(gd.gd_steps_optimum(1, 2, "per_layer", sigma2="1/10").to_dict())
try:
    gd.gd_steps_optimum(1, 2, "per_layer", sigma2=1)
except ValueError as err:
    print(err)

# %% [markdown]
# ## Beside the finite-`N` Monte Carlo
#
# `fvnum.gd_steps(prior, L, fvnum.tokens(N, s2=...), steps=..., samples=..., seed=...)` runs `L` steps on sampled
# contexts of `N` tokens (the tokens channel, one object), on any prior. The steps are chosen on one stream of
# contexts and the loss is measured on an independent one, so the estimate is unbiased for the chosen steps. Its
# `relative` view divides by `E||theta||^2`, the scale of the limit. On the isotropic Gaussian the gap to the limit
# shrinks like `1 / D` (at `L = 1` and a fixed step it is exactly `1 - 2 gamma + gamma^2 (1 + (D + 1 + s2) / N)`).
# Here `s2 = 0.01`, the default.

# %%
from fvnum import gd_steps, tokens

rows = []
for ratio in (0.5, 1, 2):
    for L in (1, 2, 4):
        for steps in ("shared", "per_layer"):
            limit = float(gd.gd_steps_limit(steps)(a=ratio, L=L))
            cells = [gd_steps(GaussianPrior.isotropic(D), L, tokens(int(ratio * D)), steps=steps, samples=2000,
                              select_samples=1000, seed=0).relative for D in (16, 64)]
            rows.append({"a": ratio, "L": L, "steps": steps, "limit": round(limit, 4),
                         **{f"D = {D}": f"{c.value:.4f} ± {c.stderr:.4f}" for D, c in zip((16, 64), cells)}})

from IPython.display import Markdown

header = "| " + " | ".join(rows[0]) + " |\n|" + "---|" * len(rows[0]) + "\n"
Markdown(header + "\n".join("| " + " | ".join(str(v) for v in r.values()) + " |" for r in rows))

# %% [markdown]
# ## Beside a trained Model G
#
# Model G (docs/theory.md section 13: deep linear self-attention with residual values and a summary token) is held to
# these rows: to `gd_steps` at its own `D` and `N` (a step per layer, since its layers are not tied), with the limit
# beside. Here a small G (D = 7, N = 14, so a = 2; two layers) trains for 800 steps (a few seconds), through the
# same Python API the studies use. The study of the whole grid is [studies/gd](../studies/gd/gd.md).

# %%
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.train import train

cfg = RunConfig(DataConfig(prior="gaussian", cov="isotropic", depth=3, n_tokens=14), ModelConfig(model="G", layers=2),
                TrainConfig(steps=800, eval_every=800, out=None, seed=0))
trained = train(cfg, progress=False)
row = gd_steps(GaussianPrior.isotropic(7), 2, tokens(14), steps="per_layer", samples=4000, select_samples=2000,
               seed=0)
limit = float(gd.gd_steps_limit("per_layer")(a=2, L=2))
Markdown(f"| | loss | relative to the prior's |\n|---|---|---|\n"
         f"| trained G (800 steps) | {trained.loss:.4f} ± {trained.stderr:.4f} | {trained.loss / 7:.4f} |\n"
         f"| `gd_steps`, a step a layer, D = 7, N = 14 | {row.value:.4f} ± {row.stderr:.4f} | {row.relative.value:.4f} |\n"
         f"| limit N, D -> oo at a = 2 | | {limit:.4f} |\n\n"
         f"Trained G / `gd_steps`: {trained.loss / row.value:.3f}. The gap between `gd_steps` and the limit is the "
         f"finite size (it shrinks like 1/D).")
