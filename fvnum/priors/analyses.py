"""The analyses of a prior, found by its type (issue 59 item 5), as ``torch.distributions.register_kl`` finds a
KL divergence: a prior object samples and scores (``fvnum.priors.registry.Prior``); what is computed about it (the
policies of its own strategies and their price, its noisy optimum, its bracket, its theory rows) lives in the
room that owns that analysis, registered here for the prior's class.

``register_analysis(FinitePrior, "bounds", implementation)`` registers ``implementation(prior, *args, **kw)``: a
callable, or a ``"module:attribute"`` string loaded on first use, so that a room low in the import order can name
an analysis of a room above it without importing it (as ``PRIORS`` names its classes). Without an implementation it
returns a decorator. :func:`analysis` answers the implementation for a prior, bound to it: walking the prior's
classes from its own, a method of that name defined on a class (a prior that computes it itself, such as a user's
prior speaking the protocol) or an implementation registered for it, whichever comes first; None where neither.

The verbs (:data:`VERBS`), each dispatched by one public function: ``policy`` and ``check_cost`` (``fvnum.loss_mc``),
``mc_seconds`` (the price of its Monte Carlo), ``noisy_bellman`` (``fvnum.noisy_bellman``), ``bounds``
(``fvnum.bounds``), ``comparison_table`` (``fvnum.comparison_table``) and ``comparison_seconds`` (its price).
Standard library only.
"""
from __future__ import annotations

from functools import partial
from importlib import import_module

from fvsym.errors import InputError

VERBS = ("policy", "check_cost", "mc_seconds", "noisy_bellman", "bounds", "comparison_table", "comparison_seconds")
_ANALYSES: dict = {}  # verb -> {prior class: implementation (a callable or "module:attribute")}


def register_analysis(prior_type, verb: str, implementation=None, *, replace: bool = False):
    """Register ``implementation`` of ``verb`` (one of :data:`VERBS`) for priors of class ``prior_type`` and its
    subclasses; without ``implementation``, a decorator that registers the function it decorates. A verb already
    registered for that class is refused unless ``replace``."""
    if not isinstance(prior_type, type):
        raise InputError(f"register_analysis takes a prior class, got {type(prior_type).__name__} {prior_type!r}")
    if verb not in VERBS:
        raise InputError(f"unknown analysis {verb!r}; choose one of {', '.join(VERBS)}")
    if implementation is None:
        def decorate(function):
            register_analysis(prior_type, verb, function, replace=replace)
            return function

        return decorate
    if not (isinstance(implementation, str) and ":" in implementation) and not callable(implementation):
        raise InputError(f"an analysis is a callable or 'module:attribute', got {implementation!r}")
    table = _ANALYSES.setdefault(verb, {})
    if prior_type in table and not replace:
        raise InputError(f"analysis {verb!r} of {prior_type.__name__} is registered already (give replace=True to "
                         "replace it)")
    table[prior_type] = implementation
    return implementation


def unregister_analysis(prior_type, verb: str) -> None:
    """Remove the implementation of ``verb`` registered for ``prior_type`` (none: nothing to do)."""
    _ANALYSES.get(verb, {}).pop(prior_type, None)


def analysis(prior, verb: str):
    """The implementation of ``verb`` for ``prior``, bound to it (call it with the verb's other arguments), or
    None where the prior has none: its own method, or the implementation registered for its class or the nearest
    of its base classes (see the module docstring)."""
    if verb not in VERBS:
        raise InputError(f"unknown analysis {verb!r}; choose one of {', '.join(VERBS)}")
    table = _ANALYSES.get(verb, {})
    for klass in type(prior).__mro__:
        if verb in vars(klass) and callable(vars(klass)[verb]):  # the prior's own method
            return getattr(prior, verb)
        if klass in table:
            return partial(_load(table[klass]), prior)
    return None


def _load(target):
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)
