"""Priors: the protocol and registry, the tree, Gaussian, finite-atom and mixture priors, their checks.

The room's public names are the registry's (``fvnum.priors.registry``: light, no numpy at import); each prior
is imported from its module (``fvnum.priors.atoms.AtomsPrior``, ``fvnum.priors.mixture.MixturePrior``)."""
from fvnum.priors.registry import PRIORS, Prior, PriorOption, cli_priors, register_prior

__all__ = ["PRIORS", "Prior", "PriorOption", "cli_priors", "register_prior"]
