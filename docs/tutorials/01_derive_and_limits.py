# %% [markdown]
# # Derive and take limits in a REPL
#
# Every quantity of the theory is a `Formula` (`fvsym`): a sympy expression with its parameters, their
# domains (`0 < alpha < 1`, integer depth `K` and budget `B`) and the section of docs/theory.md it implements.
# This page is executed when the documentation is built: every output below was computed then.

# %%
import sympy as sp

from fvsym import TreePrior, bellman
from fvsym.tree import path_loss, top_levels_loss, tree_loss

f = path_loss()
f  # in a notebook a Formula renders as LaTeX

# %%
print(repr(f))  # name, parameters, constraints, source

# %% [markdown]
# ## Exact values, by name
#
# `exact` substitutes exactly (strings such as `"1/2"` become rationals) and checks the domain.
# Every strategy formula takes the budget `B`; `top_levels_loss` holds where `B + 1` is a power of 2.

# %%
f.exact(alpha="1/2", K=4, B=2), top_levels_loss().exact(alpha="1/2", K=4, B=3)

# %%
try:
    f(alpha=0.5, K=4)  # a missing parameter is named
except ValueError as err:
    print(err)
try:
    f.exact(alpha="1/2", K=4, B=6)  # outside the domain: B <= K
except ValueError as err:
    print(err)

# %% [markdown]
# ## Substituting by name
#
# Use `f.subs(K=6)`, not `f.expr.subs(sp.Symbol("K"), 6)`.
#
# The symbols carry assumptions (`K` is a positive integer), so a fresh `sp.Symbol("K")` is another
# symbol and sympy's own `subs` silently matches nothing. `f.subs` works by name and returns a Formula;
# `f.symbols["K"]` is the real symbol.

# %%
print(f.expr.subs(sp.Symbol("K"), 6) == f.expr)  # the trap: nothing happened
print(f.symbols["K"], f.symbols["K"].assumptions0["integer"])  # the real symbol: an integer
g = f.subs(K=6)
g

# %% [markdown]
# ## Limits under the domain
#
# sympy cannot assume `alpha < 1`, so `sp.limit(f.expr, K, sp.oo)` fails ("depends on the sign of
# sign(log(alpha))"). `f.limit` writes `alpha = exp(-c)` with `c > 0`, takes the limit and maps back:
# the infinite-depth loss of the path strategy is exponential in the budget.

# %%
K = f.symbols["K"]
try:
    sp.limit(f.expr, K, sp.oo)
except NotImplementedError as err:
    print("sympy alone:", err)
f.limit("K", sp.oo)

# %% [markdown]
# ## Series: correct for every parameter value, or refused
#
# `sp.series(f.expr, alpha, 0, 4)` returns `O(alpha**4)`, which is false for `B < 4` (the loss starts
# at `alpha**B`). `f.series` refuses while an exponent of a vanishing base is symbolic, and expands
# exactly once it is fixed.

# %%
alpha = f.symbols["alpha"]
print("sympy alone:", sp.series(f.expr, alpha, 0, 4))
try:
    f.series("alpha", 0, 4)
except ValueError as err:
    print(err)
f.subs(K=6, B=2).series("alpha", 0, 4)

# %% [markdown]
# ## The exact optimum for every alpha, and its policy
#
# `tree_loss(..., "optimal")` without `alpha` solves the Bellman recursion (noiseless coordinate class)
# for every `alpha` in (0, 1) at once: a polynomial, or a `Piecewise` when the best policy changes.

# %%
opt = tree_loss(4, 2, "optimal")
opt.expr

# %%
sol = bellman.solve(TreePrior(4, "1/2"), layers=2, width=1)
sol  # the loss and the decision tree: which node to read after each reading

# %% [markdown]
# ## The recursion as equations
#
# `bellman.recursion` writes the Bellman recursion of docs/theory.md section 3 as sympy equations, with the
# sets it uses defined; it renders as LaTeX. With `tau` it is the recursion under noise, over beliefs.

# %%
bellman.recursion(TreePrior(3), layers=2, width=1)

# %%
print(bellman.recursion(TreePrior(2, "1/2"), layers=1, width=1, tau="1/5"))
