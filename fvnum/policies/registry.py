"""The strategy registry: :func:`register_strategy` adds a strategy from outside the package to the map of names
to objects (``fvnum.policies.strategies.STRATEGIES``: the names of ``fv mc --strategy``, :data:`CLI_STRATEGIES`,
and of :func:`loss_mc`'s ``strategy``); each object builds, prices and describes its own policy (the built-in
ones: :mod:`fvnum.policies.builtin`). Here too :func:`loss_mc`, the Monte Carlo loss of a named strategy.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from fvsym.errors import InputError
from fvsym.strategy_names import bare_refusal

# Only the objects load at import (``fv`` lists them without loading numpy or numba); their policies import the
# engine when built. The map of names to objects is ``fvnum.policies.strategies.STRATEGIES`` (read by the guards
# too, below the engine); the built-in strategies are in it once ``fvnum.policies`` has loaded.
from fvnum.policies.builtin import BUILTIN
from fvnum.policies.strategies import STRATEGIES, Strategy, strategy_name


class _CliStrategies(Sequence):
    """The names ``fv mc --strategy`` takes (``Strategy.cli``), read from the registry when asked: a strategy
    registered before the command line is parsed is a choice too."""

    def _names(self) -> tuple:
        return tuple(name for name, s in STRATEGIES.items() if s.cli)

    def __getitem__(self, i):
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name) -> bool:
        return name in self._names()

    def __repr__(self) -> str:
        return repr(self._names())


CLI_STRATEGIES = _CliStrategies()


def register_strategy(name, description: str | None = None, build=None) -> Strategy:
    """Add a strategy from outside the package: :func:`loss_mc`, ``patching_table``, the prices, the searches whose
    candidate it is (``Strategy.roles``) and the figures (``Strategy.label``) then know it, and so does ``fv mc
    --strategy`` parsed after it is registered (:data:`CLI_STRATEGIES`). They ask the object, as they ask the
    built-in ones. Returns its object.

    Either ``register_strategy(MyStrategy(name, description, measurement, adaptive, ...))``, with ``MyStrategy`` a
    subclass of :class:`~fvnum.policies.strategies.Strategy` defining ``policy(prior, budget, channel, *, seed,
    threads)`` (and, if it has a price of its own, ``cost``), or ``register_strategy(Strategy(name, description,
    measurement, adaptive, build=..., price=..., ...))``, or ``register_strategy(name, description, build)`` (a
    strategy of no declared class, priced as a user policy). ``build(prior, channel, budget, *, layers, width, seed)``
    returns a :class:`fvnum.policies.policies.Policy` (e.g. ``CallablePolicy(fn, layers, width, name)``, or a
    subclass with ``rows``/``update``), or raises a ValueError for a prior or layout it does not apply to.
    ``prior`` is the object the caller gave; the Policy's rows are coordinates (1-based, int) or dense rows
    (float), as in ``fvnum.policies.policies``. Its Monte Carlo is priced by its ``price`` (``price(prior,
    channel, budget, samples, *, threads) -> seconds``) or its own ``cost``, else by the engine with its
    ``work``, else as a user policy's (dense rows per sample). Names of built-in strategies cannot be taken."""
    if isinstance(name, Strategy):
        if description is not None or build is not None:
            raise InputError("give a Strategy alone, or a name, a description and a build")
        strategy = name
    else:
        if not isinstance(name, str) or not name.isidentifier():
            raise InputError(f"a strategy name must be an identifier, got {name!r}")
        if name in STRATEGIES:
            raise InputError(f"strategy {name!r} is registered already")
        strategy = Strategy(name, str(description), build=build)
    if strategy.name in STRATEGIES:
        raise InputError(f"strategy {strategy.name!r} is registered already")
    if not strategy.builds or not (strategy.build is None or callable(strategy.build) or isinstance(strategy.build, str)):
        raise InputError(f"build must be callable (prior, channel, budget, *, layers, width, seed) -> Policy, or the "
                         f"strategy's class must define policy(); got {type(strategy.build).__name__}")
    STRATEGIES[strategy.name] = strategy
    return strategy


def unregister_strategy(name: str) -> None:
    """Remove a strategy added by :func:`register_strategy` (built-in ones stay)."""
    found = STRATEGIES.get(name) if isinstance(name, str) else None
    if found is None or any(found is s for s in BUILTIN):
        raise InputError(f"strategy {name!r} was not added by register_strategy")
    STRATEGIES.pop(name)



def resolve_strategy(strategy: str, measurement: str | None) -> tuple[str, str]:
    """``(strategy, measurement)`` with the class-named spellings (``optimal_nonadaptive_unit`` /
    ``_coordinate``) mapped onto ``optimal_nonadaptive`` and its class; the bare ``optimal_nonadaptive`` needs its
    ``measurement`` (else one line: say the class); for other strategies ``measurement=None`` is ``unit``."""
    spelled = STRATEGIES.get(strategy) if isinstance(strategy, str) else None
    if spelled is not None and spelled.runs_as is not None:  # a class-named spelling
        klass = spelled.measurement
        if measurement not in (None, klass):
            raise InputError(f"strategy {strategy!r} is the {klass} class; measurement={measurement!r} contradicts it")
        return spelled.runs_as, klass
    if spelled is not None and spelled.classed and measurement is None:  # one meaning per name: say the class
        raise InputError(bare_refusal(strategy))
    return strategy, "unit" if measurement is None else measurement



def loss_mc(prior, strategy: str, budget: int, channel, *, samples: int = 100_000, seed: int = 0, options=None,
            record: bool = False, threads=None, progress=None):
    """Monte Carlo loss ``E||theta_hat - theta||^2`` of a strategy with the exact Bayes decoder.

    ``prior``: a fvsym ``TreePrior`` with numeric alpha/scales, a ``GaussianPrior``, or a prior object
    (``fvnum.priors.registry``: ``fvnum.priors.atoms.AtomsPrior``, ``fvnum.priors.mixture.MixturePrior``, or one registered by the user),
    which builds its own strategies and decodes with its own exact decoder.
    ``strategy``: a name of ``STRATEGIES`` or its object (with its options, :meth:`Strategy.using`; those of
    ``options`` win); the object builds the policy (``strategy.policy``). ``path`` (L = B, d = 1), ``top_levels``,
    ``fixed`` (its design, node list or (B, D) unit rows, in ``options``), ``optimal`` (the optimum under the channel where it is known
    exactly: see the module docstring; refused elsewhere), ``bellman_noiseless`` (the noiseless Bellman
    policy of ``fvsym`` for the layout of ``options``, run under noise), ``optimal_nonadaptive_unit`` and
    ``optimal_nonadaptive_coordinate`` (tree: the design found by :func:`fvnum.optimal_nonadaptive_unit` or
    ``_coordinate``, searched on ``options.search_samples`` independent samples; Gaussian: water-filling; the bare
    ``optimal_nonadaptive`` takes the class from ``options.measurement``), ``policy`` (``options.policy`` a
    callable, see ``fvnum.policies.policies``), and the adaptive policies ``greedy_coordinate``,
    ``greedy_dense`` and ``rollout`` (tree prior).
    ``channel``: ``fvnum.gaussian(tau)`` or ``fvnum.tokens(N, s2=...)``, as everywhere in fvnum; which decoder
    each channel uses: docs/decoders.md. ``options``: a ``fvnum.StrategyOptions`` (design, policy, layers, width,
    measurement, search samples).
    Returns an ``Estimate``; with ``record`` its ``function_vectors`` (``FunctionVectors``) hold the
    readings of every sample.
    Same ``seed``, same numbers, whatever ``threads`` (default: all cores; env ``FVNUM_THREADS``).
    ``progress``: a bar on stderr (None: only when stderr is a terminal).
    """
    from fvnum.policies.prices import check_loss_mc_args, check_price
    from fvnum.mc.channels import check_channel
    from fvnum.options import check_options
    from fvnum.priors.analyses import analysis
    from fvnum.priors.registry import is_prior_object, numeric
    from fvnum.mc.simulate import check_inputs, check_samples, plain_scalars, simulate

    options = check_options(options)
    channel = check_channel(channel)
    design, policy, layers, width = options.design, options.policy, options.layers, options.width
    if isinstance(strategy, Strategy):  # a registered object runs under its name, with its options (options win)
        given, strategy = strategy, strategy_name(strategy)
        design, policy = (given.design if design is None else design), (given.fn if policy is None else policy)
        layers, width = (given.layers if layers is None else layers), (given.width if width is None else width)
    # torch scalars (0-d tensors) read as the numbers they hold; other tensors refused in one line
    budget, samples, seed, layers, width, search_samples, threads = plain_scalars(
        budget=budget, samples=samples, seed=seed, layers=layers, width=width,
        search_samples=options.search_samples, threads=threads).values()
    strategy, measurement = resolve_strategy(strategy, options.measurement)
    spec = numeric(prior)  # a prior object (fvnum.priors.registry), or the numeric view of a fvsym prior
    check_loss_mc_args(spec, strategy, budget, design=design, token_channel=channel.kind == "tokens",
                       samples=samples, threads=threads, search_samples=search_samples, measurement=measurement)
    # budget: a plain int from here on (numpy, sympy or Fraction integers given)
    spec, channel, samples, seed, budget = check_inputs(spec, channel, samples=samples, seed=seed, budget=budget)
    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    own_price = analysis(spec, "check_cost") if is_prior_object(spec) else None
    if own_price is not None:  # the prior prices its own work (by its class: fvnum.priors.analyses), given the object
        own_price(STRATEGIES[strategy], budget, channel, samples, threads)
    chosen = STRATEGIES[strategy].using(design=design, fn=policy, layers=layers, width=width,
                                        measurement=measurement, search_samples=check_samples(search_samples))
    if chosen.prices_itself:  # a strategy that prices itself (optimal: the exact noisy policy)
        check_price(chosen, spec, channel, budget, samples, threads)
    pol = chosen.policy(prior, budget, channel, seed=seed, threads=threads)
    est = simulate(spec, channel, pol, budget, samples=samples, seed=seed, record=record, threads=threads,
                   progress=progress)
    if not (math.isfinite(est.value) and math.isfinite(est.stderr)):  # never a silent NaN
        raise InputError(f"the Monte Carlo loss of {strategy!r} came out {est.value} +- {est.stderr} (floating point "
                         f"failed at tau = {channel.tau:.3g}, scales or variances {_span(spec)}); please report it")
    return est


def _span(spec) -> str:
    from fvnum.mc.channels import noise_scales

    small, large = noise_scales(spec)
    return f"{small:.3g} .. {large:.3g}"
