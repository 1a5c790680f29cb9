"""fvnum: numbers for the theory. Numba-accelerated Monte Carlo with Bayes posteriors (exact but for the
tokens channel on a Gaussian prior: docs/decoders.md)."""
from importlib import import_module

# Public names load their module on first use (PEP 562), so ``import fvnum.cli`` (done by the ``fv``
# dispatcher for every command) does not import numba.
_EXPORTS = {
    "Channel": "mc.channels", "gaussian": "mc.channels", "tokens": "mc.channels", "tau_of_tokens": "mc.channels",
    "StrategyOptions": "options", "PatchSpec": "options", "KeyedSearch": "options", "Estimate": "estimate", "SearchResult": "estimate",
    "PatchingTable": "patching.keys", "patching_table": "patching.keys", "patched_loss": "patching.keys",
    "state_patching_table": "patching.state", "mean_state": "patching.state", "injection_table": "patching.state",
    "MeanState": "patching.state_tables", "InjectionTable": "patching.state_tables", "keyed_patching_table": "patching.keyed",
    "best_adaptive": "optimum.bracket", "optimal_nonadaptive_coordinate": "policies.search", "optimal_nonadaptive_unit": "policies.search",
    "FunctionVectors": "mc.simulate", "loss_mc": "policies.registry", "per_sample": "policies.policies", "STRATEGIES": "policies.strategies",
    # the noisy optimum: real functions (their modules are named for what they hold: the bracket, the recursion)
    "Bounds": "optimum.bracket", "bounds": "optimum.bracket", "NoisyBellman": "optimum.noisy_dp", "noisy_bellman": "optimum.noisy_dp",
    "effective_tau2": "mc.channels",
    "ComparisonTable": "theory", "TheoryRow": "theory", "comparison_table": "theory", "lmmse": "linear_theory",
    "best_linear_loss": "linear_theory",
    "best_nonadaptive_keyed": "keys.nonadaptive", "best_adaptive_keyed": "keys.adaptive",
    "AtomsPrior": "priors.atoms", "MixturePrior": "priors.mixture", "PRIORS": "priors.registry", "register_prior": "priors.registry",
    "LawFit": "laws", "LawTest": "laws", "fit_law": "laws", "law_test": "laws", "local_decay": "laws",
    # docs/theory.md section 13: value families (label, residual) and the gradient-descent row
    "gd_steps": "values.gd", "GDEstimate": "values.gd", "VALUES": "values.families", "value_family": "values.families",
}


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fvnum' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))


def posterior_mean(prior, design, phi, channel):
    """Posterior mean ``E[theta | phi]`` (n, D) given readings ``phi`` (n, B) of ``design``: node numbers
    (B,) or (n, B) (0: no reading), or unit rows (B, D) or (n, B, D). Gaussian channel (``fvnum.gaussian(tau)``):
    exact Bayes. Tokens channel (``fvnum.tokens(N, s2)``): on the tree prior exact under the law of the one
    statistic read through all the rows (a repeated row adds nothing; readings off the span of the rows
    are projected on it); on a Gaussian prior the gaussian channel's decoder at
    ``tau_of_tokens(prior, N, s2)``, an approximation (docs/decoders.md)."""
    import numpy as np

    from fvsym.errors import InputError
    from fvnum.guards.limits import check_posterior_args
    from fvnum.priors.capabilities import capability
    from fvnum.mc.channels import check_channel
    from fvnum.mc.simulate import check_inputs

    spec, channel, *_ = check_inputs(prior, check_channel(channel))
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
    "Bounds", "Channel", "KeyedSearch", "PatchSpec", "StrategyOptions", "gaussian", "tokens", "GDEstimate", "VALUES", "gd_steps", "value_family", "LawFit", "LawTest", "best_adaptive_keyed", "best_nonadaptive_keyed",
    "ComparisonTable", "Estimate", "FunctionVectors", "InjectionTable", "MeanState", "NoisyBellman", "PatchingTable",
    "STRATEGIES", "SearchResult", "TheoryRow", "best_adaptive", "best_linear_loss", "bounds", "comparison_table",
    "effective_tau2", "fit_law", "law_test", "lmmse", "local_decay", "loss_mc", "noisy_bellman",
    "injection_table", "keyed_patching_table", "mean_state", "optimal_nonadaptive_coordinate", "optimal_nonadaptive_unit",
    "patched_loss", "patching_table", "per_sample", "posterior_mean", "state_patching_table", "tau_of_tokens",
]
