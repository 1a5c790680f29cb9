"""fvnum: numbers for the theory. Numba-accelerated Monte Carlo with Bayes posteriors (exact but for the
tokens channel on a Gaussian prior: docs/decoders.md)."""
from importlib import import_module
from fvsym.errors import InputError

# Public names load their module on first use (PEP 562), so ``import fvnum.cli`` (done by the ``fv``
# dispatcher for every command) does not import numba.
_EXPORTS = {
    "Channel": "channels", "tau_of_tokens": "channels", "Estimate": "estimate", "SearchResult": "estimate",
    "PatchingTable": "patching", "patching_table": "patching", "patched_loss": "patching",
    "best_adaptive": "bracket", "optimal_nonadaptive_coordinate": "search", "optimal_nonadaptive_unit": "search",
    "FunctionVectors": "simulate", "loss_mc": "registry", "per_sample": "strategies", "STRATEGIES": "registry",
    # the noisy optimum: real functions (their modules are named for what they hold: the bracket, the recursion)
    "Bounds": "bracket", "bounds": "bracket", "NoisyBellman": "noisy_dp", "noisy_bellman": "noisy_dp",
    "make_channel": "channels", "effective_tau2": "channels",
    "ComparisonTable": "theory", "TheoryRow": "theory", "comparison_table": "theory", "lmmse": "theory",
    "best_linear_loss": "theory",
    "best_nonadaptive_keyed": "keyed", "best_adaptive_keyed": "keyed_adaptive",
    "AtomsPrior": "atoms", "MixturePrior": "mixture", "PRIORS": "priors", "register_prior": "priors",
    "LawFit": "laws", "LawTest": "laws", "fit_law": "laws", "law_test": "laws", "local_decay": "laws",
    "InputError": "errors", "DomainError": "errors", "ResourceRefused": "errors", "DamagedFile": "errors",
}


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fvnum' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))


def posterior_mean(prior, design, phi, *, tau=None, tokens=None, s2=0.01, n_tokens=None, channel=None):
    """Posterior mean ``E[theta | phi]`` (n, D) given readings ``phi`` (n, B) of ``design``: node numbers
    (B,) or (n, B) (0: no reading), or unit rows (B, D) or (n, B, D). Gaussian channel (``tau``): exact
    Bayes. Tokens channel (``tokens`` = N, ``s2``): on the tree prior exact under the law of the one
    statistic read through all the rows (a repeated row adds nothing; readings off the span of the rows
    are projected on it); on a Gaussian prior the gaussian channel's decoder at
    ``tau_of_tokens(prior, tokens, s2)``, an approximation (docs/decoders.md)."""
    import numpy as np

    from .limits import check_posterior_args
    from .capabilities import capability
    from .simulate import check_inputs

    spec, channel, *_ = check_inputs(prior, tau, tokens, s2, n_tokens, channel)
    t = channel.tau
    design, phi = check_posterior_args(spec, design, phi, t)
    design = np.asarray(design)
    if design.dtype.kind in "iu":
        nodes = np.broadcast_to(design, phi.shape)
        if nodes.size and (nodes.min() < 0 or nodes.max() > spec.dim):
            raise InputError(f"design node {int(nodes.max() if nodes.max() > spec.dim else nodes.min())} "
                             f"is outside 0..{spec.dim}")
        if capability(spec, "decodes_nodes"):
            return spec.posterior_means(channel, nodes, phi)
        eye = np.vstack([np.zeros(spec.dim), np.eye(spec.dim)])
        design = eye[nodes]
    W = design.astype(float)
    if W.shape[-1] != spec.dim or W.shape[-2] != phi.shape[1] or W.ndim not in (2, 3):
        raise InputError(f"design of shape {W.shape} does not match readings of shape {phi.shape} and D = {spec.dim}")
    return spec.posterior_means(channel, W, phi)  # the prior's own exact decoder


__all__ = [
    "Bounds", "Channel", "DamagedFile", "DomainError", "InputError", "ResourceRefused", "LawFit", "LawTest", "best_adaptive_keyed", "best_nonadaptive_keyed",
    "ComparisonTable", "Estimate", "FunctionVectors", "NoisyBellman", "PatchingTable",
    "STRATEGIES", "SearchResult", "TheoryRow", "best_adaptive", "best_linear_loss", "bounds", "comparison_table",
    "effective_tau2", "fit_law", "law_test", "lmmse", "local_decay", "loss_mc", "make_channel", "noisy_bellman",
    "optimal_nonadaptive_coordinate", "optimal_nonadaptive_unit", "patched_loss", "patching_table", "per_sample",
    "posterior_mean", "tau_of_tokens",
]
