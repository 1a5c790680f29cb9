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

A strategy's policy and its price on a prior (:data:`PAIRED`) are registered for a pair of types, as ``register_kl``
registers a pair of distributions: ``register_analysis(FinitePrior, "policy", implementation,
strategy=GreedyCoordinate)``, ``implementation(prior, strategy, ...)`` with the strategy object itself. The strategy
class may be a ``"module:Class"`` string too (resolved on first lookup: the priors sit below the strategies in
fvnum's rooms). ``analysis(prior, verb, strategy)`` walks the prior's classes as above, and at each one its own
method, then the pairs registered for it, the strategy's classes from its own (a subclass of a built-in strategy
finds the built-in's), then the implementation registered for the prior's class alone.

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
PAIRED = ("policy", "mc_seconds")  # the verbs registered for a (prior class, strategy class) pair too
_ANALYSES: dict = {}  # verb -> {prior class: implementation (a callable or "module:attribute")}
_PAIRS: dict = {}  # verb -> {(prior class, strategy class or "module:Class"): implementation}


def register_analysis(prior_type, verb: str, implementation=None, *, strategy=None, replace: bool = False):
    """Register ``implementation`` of ``verb`` (one of :data:`VERBS`) for priors of class ``prior_type`` and its
    subclasses; with ``strategy`` (a strategy class or ``"module:Class"``; verbs of :data:`PAIRED`), for that pair:
    the strategies of that class and its subclasses on those priors. Without ``implementation``, a decorator that
    registers the function it decorates. A verb already registered for that class (or pair) is refused unless
    ``replace``."""
    if not isinstance(prior_type, type):
        raise InputError(f"register_analysis takes a prior class, got {type(prior_type).__name__} {prior_type!r}")
    if verb not in VERBS:
        raise InputError(f"unknown analysis {verb!r}; choose one of {', '.join(VERBS)}")
    if strategy is not None and verb not in PAIRED:
        raise InputError(f"analysis {verb!r} is registered for a prior class alone; a strategy pairs with "
                         f"{' and '.join(PAIRED)}")
    if strategy is not None and not isinstance(strategy, type) and not (isinstance(strategy, str) and ":" in strategy):
        raise InputError(f"register_analysis's strategy is a strategy class or 'module:Class', got "
                         f"{type(strategy).__name__} {strategy!r}")
    if implementation is None:
        def decorate(function):
            register_analysis(prior_type, verb, function, strategy=strategy, replace=replace)
            return function

        return decorate
    if not (isinstance(implementation, str) and ":" in implementation) and not callable(implementation):
        raise InputError(f"an analysis is a callable or 'module:attribute', got {implementation!r}")
    table, key = (_ANALYSES, prior_type) if strategy is None else (_PAIRS, (prior_type, strategy))
    table = table.setdefault(verb, {})  # a "module:Class" strategy stays a string until first looked up
    if isinstance(strategy, type):  # a class given: the pairs named by string are loaded to compare with it
        _resolve(table)
    if key in table and not replace:
        pair = "" if strategy is None else f" with {getattr(strategy, '__name__', strategy)}"
        raise InputError(f"analysis {verb!r} of {prior_type.__name__}{pair} is registered already (give replace=True "
                         "to replace it)")
    table[key] = implementation
    return implementation


def unregister_analysis(prior_type, verb: str, *, strategy=None) -> None:
    """Remove the implementation of ``verb`` registered for ``prior_type`` (and ``strategy``; none: nothing to do)."""
    if strategy is None:
        _ANALYSES.get(verb, {}).pop(prior_type, None)
        return
    table = _resolve(_PAIRS.get(verb, {}))
    table.pop((prior_type, _load(strategy)), None)


def analysis(prior, verb: str, strategy=None):
    """The implementation of ``verb`` for ``prior``, bound to it (call it with the verb's other arguments), or
    None where the prior has none: its own method, or the implementation registered for its class or the nearest
    of its base classes; given a ``strategy`` object, the pairs registered for each of these classes and the
    strategy's class or the nearest of its bases come before the prior's class alone (see the module docstring)."""
    if verb not in VERBS:
        raise InputError(f"unknown analysis {verb!r}; choose one of {', '.join(VERBS)}")
    table = _ANALYSES.get(verb, {})
    pairs = _resolve(_PAIRS.get(verb, {})) if strategy is not None else {}
    for klass in type(prior).__mro__:
        if verb in vars(klass) and callable(vars(klass)[verb]):  # the prior's own method
            return getattr(prior, verb)
        for kind in type(strategy).__mro__ if pairs else ():
            if (klass, kind) in pairs:
                return partial(_load(pairs[klass, kind]), prior)
        if klass in table:
            return partial(_load(table[klass]), prior)
    return None


def paired(prior, verb: str, strategy):
    """The implementation of ``verb`` registered for the pair of ``prior``'s class and ``strategy``'s (the nearest
    of their bases, the prior's first), bound to the prior; None where no pair is registered. The prior's own
    methods and the implementations registered for its class alone are :func:`analysis`'s."""
    pairs = _resolve(_PAIRS.get(verb, {}))
    for klass in type(prior).__mro__:
        for kind in type(strategy).__mro__:
            if (klass, kind) in pairs:
                return partial(_load(pairs[klass, kind]), prior)
    return None


def _resolve(pairs: dict) -> dict:
    """The pairs with their ``"module:Class"`` strategy classes loaded (in place, once each)."""
    for key in [k for k in pairs if isinstance(k[1], str)]:
        pairs.setdefault((key[0], _load(key[1])), pairs.pop(key))  # a class registered as itself stays
    return pairs


def _load(target):
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)
