"""The strategy registry: every named strategy of ``fv mc`` and :func:`loss_mc`, and how its Policy is
built (docs/theory.md sections 2, 3, 5, 6). The CLI's choices and the API's checks both read ``STRATEGIES``.

Names under noise say what they are (docs/theory.md section 3): ``optimal`` is the noisy optimum, built
only where it is computed exactly (``fvnum.noisy_bellman``: tree or finite prior, ``tau > 0``, width 1, small sizes;
at ``tau = 0`` the noiseless Bellman policy of ``fvsym``, which is then optimal; Gaussian prior:
water-filling, optimal by Theorem G1) and refused elsewhere with a pointer to ``fv bounds``;
``bellman_noiseless`` is the noiseless Bellman policy run under the given noise.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from fvsym.errors import InputError
from fvsym.strategy_names import BARE, bare_refusal

# Only the objects load at import (``fv`` lists them without loading numpy or numba); the builders import the
# engine when called. Each strategy is one ``fvnum.policies.objects.Strategy`` (class, adaptivity, price,
# candidate roles, figure label): STRATEGIES maps its name to it.
from fvnum.policies.objects import MEASUREMENTS, STRATEGIES, Strategy, load, strategy_name  # noqa: F401 (its names)


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


def _builtin_names() -> frozenset:
    from fvnum.policies.objects import BUILTIN

    return frozenset(s.name for s in BUILTIN)


def register_strategy(name, description: str | None = None, build=None) -> Strategy:
    """Add a strategy from outside the package: :func:`loss_mc`, ``patching_table``, every caller of
    :func:`build_policy`, the prices, the searches whose candidate it is (``Strategy.roles``) and the figures
    (``Strategy.label``) then know it, and so does ``fv mc --strategy`` parsed after it is registered
    (:data:`CLI_STRATEGIES`). Returns its object.

    Either ``register_strategy(Strategy(name, description, measurement, adaptive, build=..., price=..., ...))``
    or ``register_strategy(name, description, build)`` (a strategy of no declared class, priced as a user policy).
    ``build(prior, channel, budget, *, layers, width, seed)`` returns a :class:`fvnum.policies.strategies.Policy`
    (e.g. ``CallablePolicy(fn, layers, width, name)``, or a subclass with ``rows``/``update``), or raises a
    ValueError for a prior or layout it does not apply to. ``prior`` is the object the caller gave; the Policy's
    rows are coordinates (1-based, int) or dense rows (float), as in ``fvnum.policies.strategies``. Its Monte Carlo is
    priced by its ``price`` (``price(prior, channel, budget, samples, *, threads) -> seconds``), else by the
    engine with its ``work``, else as a user policy's (dense rows per sample). Names of built-in strategies
    cannot be taken."""
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
    if strategy.build is None or not (callable(strategy.build) or isinstance(strategy.build, str)):
        raise InputError(f"build must be callable (prior, channel, budget, *, layers, width, seed) -> Policy, got "
                         f"{type(strategy.build).__name__}")
    STRATEGIES[strategy.name] = strategy
    return strategy


def unregister_strategy(name: str) -> None:
    """Remove a strategy added by :func:`register_strategy` (built-in ones stay)."""
    if not isinstance(name, str) or name not in STRATEGIES or name in _builtin_names():
        raise InputError(f"strategy {name!r} was not added by register_strategy")
    STRATEGIES.pop(name)


def _registered(name, prior, channel, budget, layers, width, seed):
    from fvnum.mc.protocol import Policy

    pol = load(STRATEGIES[name].build)(prior, channel, budget, layers=layers, width=width, seed=seed)
    if not isinstance(pol, Policy):
        raise InputError(f"strategy {name!r}: its build returned {type(pol).__name__}, not a fvnum.policies.strategies.Policy")
    if pol.layers * pol.width != budget:
        raise InputError(f"strategy {name!r}: its policy has layers x width = {pol.layers} x {pol.width}, not the "
                         f"budget {budget}")
    return pol


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
    if strategy == BARE and measurement is None:  # one meaning per name: the class is said, here or in the name
        raise InputError(bare_refusal(strategy))
    return strategy, "unit" if measurement is None else measurement


def _layout(budget: int, layers, width, default_width: int = 1) -> tuple[int, int]:
    if layers is None and width is None:
        width = default_width
    if width is None:
        if layers < 1 or budget % layers:
            raise InputError(f"budget {budget} is not a multiple of layers {layers}")
        width = budget // layers
    if layers is None:
        if width < 1 or budget % width:
            raise InputError(f"budget {budget} is not a multiple of width {width}")
        layers = budget // width
    if layers * width != budget:
        raise InputError(f"layers x width = {layers} x {width} does not equal the budget {budget}")
    return int(layers), int(width)


def _tree_depth_of(spec) -> int:
    from fvnum.priors.capabilities import capability

    if capability(spec, "heap_depth") is not None:
        return spec.heap_depth
    K = (spec.dim + 1).bit_length() - 1
    if 2**K - 1 != spec.dim:
        raise InputError(f"the path strategy needs a tree layout, D = 2^K - 1; the {_name(spec)} prior has D = {spec.dim}")
    return K


def _name(spec) -> str:
    return getattr(spec, "name", None) or type(spec).__name__


def _deep_only(strategy, budget, layers, width):
    if (layers not in (None, budget)) or (width not in (None, 1)):
        raise InputError(f"strategy {strategy!r} has layers = budget and width = 1")


def build_policy(prior, spec, channel, strategy: str, budget: int, *, design=None, policy=None,
                 layers=None, width=None, measurement="unit", samples=4000, seed=0, threads=None):
    """The Policy object for a named strategy (searches run here for ``optimal_nonadaptive``)."""
    import numpy as np

    from fvnum.priors.gaussian import optimal_design as gaussian_optimal_design
    from fvnum.guards.limits import check_resolution
    from fvnum.priors.analyses import analysis
    from fvnum.priors.registry import capability, is_prior_object
    from fvnum.mc.simulate import check_budget, check_design
    from fvnum.policies.strategies import (
        CallablePolicy, FixedDesign, GreedyCoordinate, GreedyDense, PathPolicy, RolloutPolicy,
    )

    strategy = strategy_name(strategy)  # a registered name or object; else one line listing the names
    if STRATEGIES[strategy].build is not None:  # registered from outside: its builder decides where it applies
        check_budget(budget)
        return _registered(strategy, prior, channel, budget, layers, width, seed)
    own = analysis(spec, "policy") if is_prior_object(spec) else None  # by the prior's class (fvnum.priors.analyses)
    if own is not None:  # a prior object builds its own strategies (None: a shared one, built below)
        pol = own(strategy, channel, budget, layers=layers, width=width, measurement=measurement,
                  samples=samples, seed=seed, threads=threads)
        if pol is not None:
            return pol
    if strategy == "path":
        K = _tree_depth_of(spec)
        check_budget(budget, K, f"the path strategy reads one node per level, at most depth K = {K}")
        _layout(budget, layers, width)
        _deep_only(strategy, budget, layers, width)
        return PathPolicy(budget)
    coord_max = (spec.dim, f"a coordinate design reads at most D = {spec.dim} distinct nodes")
    if strategy == "top_levels":
        check_budget(budget, *coord_max)
        return FixedDesign(np.arange(1, budget + 1, dtype=np.int64), "top_levels")
    if strategy == "fixed":
        check_budget(budget)
        return FixedDesign(check_design(design, spec, budget), "fixed")
    if strategy == "policy":
        if policy is None:
            raise InputError("strategy 'policy' needs policy=callable (see fvnum.policies.strategies for the protocol)")
        check_budget(budget)
        L, d = _layout(budget, layers, width)
        return CallablePolicy(policy, L, d)
    if capability(spec, "linear_posterior"):  # Gaussian: by Theorem G1 water-filling is optimal, adaptive or not
        if strategy not in ("optimal", "optimal_nonadaptive"):
            raise InputError(f"strategy {strategy!r} needs a tree prior")
        check_budget(budget)
        return FixedDesign(gaussian_optimal_design(spec, budget, channel.tau), strategy)
    if capability(spec, "heap_depth") is None:  # the rest read the nodes of a tree
        raise InputError(f"strategy {strategy!r} needs a tree prior (its nodes); it does not apply to the "
                         f"{_name(spec)} prior")
    if strategy == "bellman_noiseless":
        check_budget(budget, *coord_max)
        L, d = _layout(budget, layers, width)
        return bellman_policy(prior, spec, channel.tau, L, d, name="bellman_noiseless")
    if strategy == "optimal":
        return optimal_policy(prior, spec, channel, budget, layers, width, threads=threads)
    if strategy == "optimal_nonadaptive":
        from fvnum.policies.search import optimal_nonadaptive_coordinate, optimal_nonadaptive_unit

        if measurement not in MEASUREMENTS:
            raise InputError(f"unknown measurement class {measurement!r}; choose unit or coordinate")
        check_budget(budget, *((None, "") if measurement == "unit" else coord_max))
        search = optimal_nonadaptive_unit if measurement == "unit" else optimal_nonadaptive_coordinate
        found = search(spec, budget, channel.tau, samples=samples, seed=seed, threads=threads)
        return FixedDesign(found.design, "optimal_nonadaptive")
    check_budget(budget)
    _deep_only(strategy, budget, layers, width)
    check_resolution(spec, f"strategy {strategy!r}")
    if strategy == "greedy_coordinate":
        return GreedyCoordinate(spec, channel.tau, budget, allow_repeat=channel.kind == "gaussian")
    if strategy == "rollout":
        if channel.tau == 0:
            given = "" if channel.tau_given is None else f", and tau = {channel.tau_given:.3g} is noiseless in effect (at most 1e-9 a_K)"
            raise InputError(f"strategy 'rollout' needs noise (tau > 0){given}; at tau = 0 use 'optimal'")
        return RolloutPolicy(spec, channel.tau, budget, allow_repeat=channel.kind == "gaussian", seed=seed)
    return GreedyDense(spec, channel.tau, budget)


def optimal_policy(prior, spec, channel, budget: int, layers=None, width=None, threads=None):
    """``optimal`` on a tree prior: the noiseless Bellman policy at ``tau = 0`` (any layout), the exact
    noisy Bellman policy under noise where ``fvnum.noisy_bellman`` solves it, else a ValueError."""
    from fvsym.errors import ResourceRefused

    from fvnum.guards.limits import check_resolution
    from fvnum.mc.channels import make_channel
    from fvnum.mc.simulate import check_budget
    from fvnum.priors.analyses import analysis

    if channel.tau == 0:
        check_budget(budget, spec.dim, f"a coordinate design reads at most D = {spec.dim} distinct nodes")
        L, d = _layout(budget, layers, width)
        return bellman_policy(prior, spec, 0.0, L, d, name="optimal")
    check_budget(budget)
    _layout(budget, layers, width)
    check_resolution(spec, "strategy 'optimal' under noise")
    refused = InputError(
        f"strategy 'optimal' under noise (tau = {channel.tau:.4g}) is solved exactly only for width 1 and "
        f"budget <= 3 on small trees (depth {spec.depth}, budget {budget} is not); the noisy optimum is "
        f"bracketed by `fv bounds` (fvnum.bounds), its noiseless policy is 'bellman_noiseless'")
    if (layers not in (None, budget)) or (width not in (None, 1)) or budget > 3:
        raise refused
    solve = analysis(spec, "noisy_bellman")  # the tree's exact recursion (fvnum.optimum.noisy_dp), by its class
    try:  # the policy only; a size whose work the recursion refuses is refused as above
        solved = solve(budget, make_channel(spec, tau=channel.tau), threads=threads, refine=False)
    except ResourceRefused as exc:
        if getattr(exc, "limit", None) != "work":
            raise
        raise refused from None
    return solved.policy


def bellman_policy(prior, spec, tau: float, layers: int, width: int, name: str = "bellman_noiseless"):
    """The noiseless-optimal policy of ``fvsym.bellman.solve`` as a TablePolicy (run under noise ``tau``)."""
    import numpy as np

    from fvsym import bellman

    from fvnum.policies.strategies import FixedDesign, TablePolicy

    solution = bellman.solve(spec.exact_prior(), layers, width)  # the exact numbers where the prior has them
    if solution.policy is None:  # nothing to read
        return FixedDesign(np.zeros(0, dtype=np.int64), name)
    return TablePolicy(solution.policy, spec, tau, layers, width, name=name)


def loss_mc(prior, strategy: str, budget: int, *, tau=None, tokens=None, s2=0.01, n_tokens=None, channel=None,
            design=None, policy=None,
            layers=None, width=None, samples: int = 100_000, seed: int = 0, record: bool = False,
            measurement: str | None = None, search_samples: int = 4000, threads=None, progress=None):
    """Monte Carlo loss ``E||theta_hat - theta||^2`` of a strategy with the exact Bayes decoder.

    ``prior``: a fvsym ``TreePrior`` with numeric alpha/scales, a ``GaussianPrior``, or a prior object
    (``fvnum.priors.registry``: ``fvnum.priors.atoms.AtomsPrior``, ``fvnum.priors.mixture.MixturePrior``, or one registered by the user),
    which builds its own strategies and decodes with its own exact decoder.
    ``strategy``: one of ``STRATEGIES``: ``path`` (L = B, d = 1), ``top_levels``, ``fixed`` (``design`` =
    node list or (B, D) unit rows), ``optimal`` (the optimum under the channel where it is known
    exactly: see the module docstring; refused elsewhere), ``bellman_noiseless`` (the noiseless Bellman
    policy of ``fvsym`` for ``layers`` x ``width``, run under noise), ``optimal_nonadaptive_unit`` and
    ``optimal_nonadaptive_coordinate`` (tree: the design found by :func:`fvnum.optimal_nonadaptive_unit` or
    ``_coordinate``, searched on ``search_samples`` independent samples; Gaussian: water-filling; the old
    spelling ``optimal_nonadaptive`` takes the class from ``measurement``, default ``unit``), ``policy`` (``policy`` = a callable, see ``fvnum.policies.strategies``), and the adaptive
    policies ``greedy_coordinate``, ``greedy_dense`` and ``rollout`` (tree prior).
    Channel: exactly one of ``tau`` (gaussian), ``n_tokens`` = N (tokens channel with label noise ``s2``;
    ``tokens=N`` is the same, the CLI's name) or ``channel`` (a ``fvnum.Channel``), as everywhere in fvnum
    (``fvnum.mc.channels.make_channel``); which decoder each channel uses: docs/decoders.md.
    Returns an ``Estimate``; with ``record`` its ``function_vectors`` (``FunctionVectors``) hold the
    readings of every sample.
    Same ``seed``, same numbers, whatever ``threads`` (default: all cores; env ``FVNUM_THREADS``).
    ``progress``: a bar on stderr (None: only when stderr is a terminal).
    """
    from fvnum.policies.prices import check_loss_mc_args, check_price
    from fvnum.priors.analyses import analysis
    from fvnum.priors.registry import is_prior_object, numeric
    from fvnum.mc.simulate import check_inputs, check_samples, plain_scalars, simulate

    # torch scalars (0-d tensors) read as the numbers they hold; other tensors refused in one line
    tau, tokens, s2, n_tokens, budget, samples, seed, layers, width, search_samples, threads = plain_scalars(
        tau=tau, tokens=tokens, s2=s2, n_tokens=n_tokens, budget=budget, samples=samples, seed=seed, layers=layers,
        width=width, search_samples=search_samples, threads=threads).values()
    if isinstance(strategy, Strategy):  # a registered object runs under its name
        strategy = strategy_name(strategy)
    strategy, measurement = resolve_strategy(strategy, measurement)
    spec = numeric(prior)  # a prior object (fvnum.priors.registry), or the numeric view of a fvsym prior
    named = tokens is not None or n_tokens is not None or (channel is not None and getattr(channel, "kind", "") == "tokens")
    check_loss_mc_args(spec, strategy, budget, design=design, token_channel=named, samples=samples,
                       threads=threads, search_samples=search_samples, measurement=measurement)
    # budget: a plain int from here on (numpy, sympy or Fraction integers given)
    spec, channel, samples, seed, budget = check_inputs(spec, tau, tokens, s2, n_tokens, channel, samples=samples,
                                                        seed=seed, budget=budget)
    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    own_price = analysis(spec, "check_cost") if is_prior_object(spec) else None
    if own_price is not None:  # the prior prices its own work (by its class: fvnum.priors.analyses)
        own_price(strategy, budget, channel, samples, threads)
    if STRATEGIES[strategy].price is not None:  # a strategy that prices itself (optimal: the exact noisy policy)
        check_price(STRATEGIES[strategy], spec, channel, budget, samples, threads)
    pol = build_policy(prior, spec, channel, strategy, budget, design=design, policy=policy, layers=layers,
                       width=width, measurement=measurement, samples=check_samples(search_samples), seed=seed,
                       threads=threads)
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
