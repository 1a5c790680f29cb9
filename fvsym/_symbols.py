"""Every sympy Symbol of the theory, defined once with its assumptions (docs/theory.md, Names)."""
import sympy as sp

alpha = sp.Symbol("alpha", positive=True)  # tree scale ratio, 0 < alpha < 1
tau = sp.Symbol("tau", nonnegative=True)  # channel noise standard deviation
s2 = sp.Symbol("s2", nonnegative=True)  # label noise variance
depth = sp.Symbol("K", integer=True, positive=True)  # tree depth K
budget = sp.Symbol("B", integer=True, nonnegative=True)  # communication budget B = L * d
layers = sp.Symbol("L", integer=True, positive=True)
width = sp.Symbol("d", integer=True, positive=True)
dim = sp.Symbol("D", integer=True, positive=True)  # latent dimension
n_tokens = sp.Symbol("N", integer=True, positive=True)
levels = sp.Symbol("j", integer=True, nonnegative=True)  # full levels read by top_levels
k = sp.Symbol("k", integer=True, positive=True)  # a tree level (summation index)
ratio = sp.Symbol("a", positive=True)  # N / D, tokens per latent dimension (THEORY.md section 3b, the limit)
sigma2 = sp.Symbol("sigma2", nonnegative=True)  # label noise over signal, s2 / E||theta||^2, fixed as D -> oo
eigenvalue = sp.Symbol("lambda", nonnegative=True)  # an eigenvalue of X^T X / N
step = sp.Symbol("gamma", real=True)  # a gradient-descent step size
layer = sp.Symbol("l", integer=True, positive=True)  # a layer index, 1..L


def steps(n: int) -> tuple:
    """The step sizes ``gamma_1 .. gamma_n`` of ``n`` layers (one Symbol each, real)."""
    return tuple(sp.Symbol(f"gamma_{i}", real=True) for i in range(1, int(n) + 1))


# The domain of every symbol (THEORY.md): checked whenever a Formula is evaluated. sympy's
# assumptions carry what they can express (positive, integer); ``0 < alpha < 1`` needs this table.
DOMAINS = {
    alpha: sp.Interval.open(0, 1),
    tau: sp.Interval(0, sp.oo),
    s2: sp.Interval(0, sp.oo),
    depth: sp.Range(1, sp.oo),
    budget: sp.Range(0, sp.oo),
    layers: sp.Range(1, sp.oo),
    width: sp.Range(1, sp.oo),
    dim: sp.Range(1, sp.oo),
    n_tokens: sp.Range(1, sp.oo),
    levels: sp.Range(0, sp.oo),
    k: sp.Range(1, sp.oo),
    ratio: sp.Interval.open(0, sp.oo),
    sigma2: sp.Interval(0, sp.oo),
    eigenvalue: sp.Interval.open(0, sp.oo),
    layer: sp.Range(1, sp.oo),
}

__all__ = ["DOMAINS", "alpha", "tau", "s2", "depth", "budget", "layers", "width", "dim", "n_tokens", "levels", "k",
           "ratio", "sigma2", "eigenvalue", "step", "layer", "steps"]
