"""What a strategy is, in one object (docs/theory.md sections 2, 3, 5, 6): a :class:`Strategy` builds, prices and
describes its own policy. ``strategy.policy(prior, budget, channel, *, seed, threads)`` returns the
:class:`fvnum.mc.protocol.Policy` that ``loss_mc``, the tables and the searches sample;
``strategy.cost(prior, channel, budget, samples, *, threads)`` its price in seconds; ``strategy.describe()`` one line
saying what it is and the options it carries. Its options live on the object (``design``, ``fn``, ``layers``,
``width``, ``measurement``, ``search_samples``; :meth:`Strategy.using` returns a copy with some set), beside what it
is (its measurement class, adaptivity, the searches it is a candidate of, its figure label and colour).

The built-in strategies are subclasses in :mod:`fvnum.policies.builtin`; a user strategy is a subclass with its
own ``policy`` (or a plain ``Strategy`` given ``build=``), registered by ``fvnum.policies.registry.register_strategy``.
Both run through the same methods. ``STRATEGIES`` only maps names (the CLI's ``--strategy``, ``loss_mc``'s
``strategy``) to objects: the built-in ones, put there when ``fvnum.policies`` loads, and the registered ones; the
lookups at the end of this module (:func:`strategy_of`, :func:`strategy_name`, :func:`strategy_object`,
:func:`candidates`) read it.

Standard library only, and ``fvsym.errors`` (``fv`` lists the names without loading numpy or numba); what the
objects point to (a builder, a price) is a callable or a ``"module:function"`` reference loaded when first asked.

A strategy's price has two forms. ``work`` (a :class:`Work`) is the factors of the engine's own price,
``fvnum.policies.prices.mc_cost``: what one Monte Carlo sample of it costs the sampler, in memory and operations. ``price``
is a price of its own, ``price(prior, channel, budget, samples, *, threads) -> seconds`` (the numeric prior and
a ``fvnum.Channel``), checked against the time cap by ``loss_mc`` and ``fv mc`` (the memory stays the engine's); a
subclass may instead define :meth:`Strategy.cost` itself. :meth:`Strategy.cost` answers either way. A strategy
registered without either is priced like a user policy (dense rows on every sample: :data:`DENSE`).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields, replace
from typing import Callable

from fvsym.errors import InputError

MEASUREMENTS = ("unit", "coordinate")
ROLES = ("best_adaptive", "bracket", "figure")  # where a strategy takes part, each with its rank there
# best_adaptive: fvnum.optimum.bracket.best_adaptive's default candidates (the best adaptive policy found);
# bracket: fvnum.optimum.bracket.bounds's policies for the upper end of the noisy optimum's bracket (and
# fvnum.theory.comparison_table's, which names all of them); figure: the order of its curve in the report's
# loss-against-budget figure (a strategy with a label and no figure rank comes after the ranked ones)
ENGINE_PRICE = "fvnum.policies.prices:engine_seconds"  # the engine's price of a strategy without one of its own


@dataclass(frozen=True)
class Work:
    """The factors of ``fvnum.policies.prices.mc_cost`` for one strategy (see that module's docstring for the measurements).

    Operations a sample on the tree prior: ``tree_ops`` per reading, times the depth ``K`` where ``per_level``,
    times the ``2^K`` leaves where ``per_leaf``; on a Gaussian prior ``GAUSS_OPS`` per reading and coordinate,
    plus ``D^2`` per reading where ``quadratic`` (a lookahead over dense rows). ``dense_rows``: on the tree, every
    sample carries dense ``D``-vectors (the coordinate kernels do not). ``first_samples``: the tree's shared first
    row, priced as this many samples. ``search``: a search before sampling on a Gaussian prior, ``search_samples``
    x the sample's operations x ``D`` x this. ``solve``: the exact noiseless solve (``fvsym.bellman.solve``) is
    built first. ``tree_seconds``: the seconds on the tree come from the strategy's own measured model instead,
    ``fn(depth, dim, budget, samples, search_samples, threads, dense_design)``, a callable or ``"module:function"``.
    ``rows_given``: its rows are the caller's design, so a design of dense rows is priced as :data:`DENSE`.
    """

    tree_ops: float = 2.0
    per_level: bool = False
    per_leaf: bool = True
    dense_rows: bool = True
    quadratic: bool = False
    first_samples: float = 0.0
    search: float = 0.0
    solve: bool = False
    tree_seconds: Callable | str | None = None
    rows_given: bool = False

    def tree_ops_per_sample(self, depth: int, budget: int) -> float:
        """Operations of one sample of ``budget`` readings on a depth-``depth`` tree."""
        return budget * (depth if self.per_level else 1) * (2**depth if self.per_leaf else 1) * self.tree_ops


DENSE = Work()  # dense rows on every sample: a user policy, a dense fixed design, a strategy without a price
# the coordinate kernels (path, top levels, the Bellman policies, a fixed node list): 0.3 operations a reading and
# level (measured 8 to 36 ns per reading and level at depth 16 to 20, quiet to load 8; the old 4, 200 ns, lay 5 to
# 20 times over), no dense rows
COORDINATE = Work(tree_ops=0.3, per_level=True, per_leaf=False, dense_rows=False)


def load(ref):
    """A callable given as itself or as ``"module:function"`` (imported when first asked)."""
    if ref is None or callable(ref):
        return ref
    module, _, name = str(ref).partition(":")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise InputError(f"{ref!r} names no function that can be loaded ({type(e).__name__}: {e})") from None
    if not callable(found):
        raise InputError(f"{ref!r} names {type(found).__name__}, not a function")
    return found


OPTIONS = ("design", "fn", "layers", "width", "measurement", "search_samples")  # the settings of one run
STRATEGIES: dict = {}  # name -> Strategy: the built-in ones (fvnum.policies.builtin, registered when fvnum.policies
# loads) and those of fvnum.policies.registry.register_strategy; the CLI's names and every lookup below read it


@dataclass(frozen=True)
class Strategy:
    """One strategy (policy): what it is, its options, and the methods that build, price and describe its policy.

    ``name`` and ``description``; ``measurement``: ``coordinate`` (reads coordinates, one node a reading) or
    ``unit`` (dense unit rows), None where the strategy is given its rows (``fixed``, ``policy``) or takes its
    class from ``measurement=`` (the old spelling ``optimal_nonadaptive``); ``adaptive``: its rows depend on
    the readings so far (None: the caller's policy decides). ``build(prior, channel, budget, *, layers, width,
    seed) -> fvnum.policies.policies.Policy``: the policy of a strategy given as a function (None where the class
    defines :meth:`policy`, as the built-in ones do). ``work`` / ``price``: its price (module docstring).
    ``roles``: ``(role, rank)`` pairs, the searches it is a default candidate of (:data:`ROLES`) and its place
    among their candidates. ``max_budget``: ``"depth"`` or ``"dim"`` where it reads at most ``K`` or ``D``
    nodes (a candidate is skipped past it), ``needs_noise``: it applies only under noise, ``min_budget``: the
    bracket samples it from this budget, ``solved_only``: the bracket samples it only where it solves the exact
    noisy recursion (the exact noisy policy). ``runs_as``: a class-named spelling runs as this strategy with
    ``measurement`` as its class. ``label`` and ``colour``: its curve in the report's figures (None: not drawn).
    ``cli``: ``fv mc --strategy`` offers it.

    Its options (:data:`OPTIONS`, set by :meth:`using`; not part of what it is, so a strategy with options set
    equals its registered object): ``design`` (a fixed design: node list or unit rows), ``fn`` (a user policy,
    ``rows = fn(layer, phi)``), ``layers`` and ``width`` (its layout), ``measurement`` (the class of a strategy
    classed by it, :attr:`classed`) and ``search_samples`` (the samples of a design search). Class attributes:
    :attr:`takes`, the options a strategy reads beyond its layout's checks; :attr:`classed`; :attr:`quick`: its
    policy builds in no time (no solve, no search), so a plan may build it to run its checks.
    """

    name: str
    description: str
    measurement: str | None = None
    adaptive: bool | None = None
    build: Callable | str | None = None
    work: Work | None = None
    price: Callable | str | None = None
    roles: tuple = ()
    max_budget: str | None = None
    needs_noise: bool = False
    min_budget: int = 1
    solved_only: bool = False
    runs_as: str | None = None
    label: str | None = None
    colour: str | None = None
    cli: bool = True
    design: object = field(default=None, compare=False, repr=False)
    fn: Callable | None = field(default=None, compare=False, repr=False)
    layers: int | None = field(default=None, compare=False)
    width: int | None = field(default=None, compare=False)
    search_samples: int = field(default=4000, compare=False)

    takes = frozenset({"layers", "width"})  # a strategy given as a function: its build reads its layout
    classed = False
    quick = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise InputError(f"a strategy name must be an identifier, got {self.name!r}")
        if self.measurement not in (None, *MEASUREMENTS):
            raise InputError(f"strategy {self.name!r}: measurement must be one of {', '.join(MEASUREMENTS)} or None, "
                             f"got {self.measurement!r}")
        if not (self.adaptive is None or isinstance(self.adaptive, bool)):
            raise InputError(f"strategy {self.name!r}: adaptive must be True, False or None, got {self.adaptive!r}")
        for what in ("build", "price"):
            ref = getattr(self, what)
            if ref is not None and not callable(ref) and not (isinstance(ref, str) and ":" in ref):
                raise InputError(f"strategy {self.name!r}: {what} must be callable or 'module:function', got "
                                 f"{type(ref).__name__}")
        if self.work is not None and not isinstance(self.work, Work):
            raise InputError(f"strategy {self.name!r}: work must be a fvnum.policies.strategies.Work, got "
                             f"{type(self.work).__name__}")
        if not isinstance(self.roles, tuple):
            raise InputError(f"strategy {self.name!r}: roles are a tuple of (role, rank) pairs, got {self.roles!r}")
        for pair in self.roles:
            if not (isinstance(pair, tuple) and len(pair) == 2 and pair[0] in ROLES):
                raise InputError(f"strategy {self.name!r}: roles are (role, rank) pairs with role one of "
                                 f"{', '.join(ROLES)}, got {pair!r}")
        if self.max_budget not in (None, "depth", "dim"):
            raise InputError(f"strategy {self.name!r}: max_budget must be 'depth', 'dim' or None, got "
                             f"{self.max_budget!r}")

    def __str__(self) -> str:
        return self.description

    def with_build(self, build) -> "Strategy":
        return replace(self, build=build)

    def using(self, **options) -> "Strategy":
        """A copy with the options given (:data:`OPTIONS`; None keeps the object's own); ``measurement`` is set
        only on a strategy classed by it (:attr:`classed`), the others keep their class."""
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise InputError(f"strategy {self.name!r}: unknown option {unknown[0]!r}; the options are "
                             f"{', '.join(OPTIONS)}")
        given = {k: v for k, v in options.items() if v is not None and (k != "measurement" or self.classed)}
        if given.get("measurement", MEASUREMENTS[0]) not in MEASUREMENTS:
            raise InputError(f"unknown measurement class {given['measurement']!r}; choose unit or coordinate")
        return replace(self, **given) if given else self

    def policy(self, prior, budget: int, channel, *, seed: int = 0, threads=None):
        """The :class:`fvnum.mc.protocol.Policy` of this strategy for ``budget`` readings of ``prior`` (the
        object the caller gave) under ``channel`` (a ``fvnum.Channel``). Here: the prior's own policy of it
        (:meth:`prior_policy`), else the policy of ``build`` (a strategy given as a function), checked; a subclass
        defines its own. The callers check the budget (``loss_mc`` and the tables, with the channel) before they ask."""
        from fvnum.mc.protocol import Policy

        own = self.prior_policy(prior, budget, channel, seed=seed, threads=threads)
        if own is not None:
            return own
        if self.build is None:
            raise InputError(f"strategy {self.name!r} builds no policy: give it build= or define its policy()")
        pol = load(self.build)(prior, channel, budget, layers=self.layers, width=self.width, seed=seed)
        if not isinstance(pol, Policy):
            raise InputError(f"strategy {self.name!r}: its build returned {type(pol).__name__}, not a "
                             "fvnum.policies.policies.Policy")
        if pol.layers * pol.width != budget:
            raise InputError(f"strategy {self.name!r}: its policy has layers x width = {pol.layers} x {pol.width}, "
                             f"not the budget {budget}")
        return pol

    def prior_policy(self, prior, budget: int, channel, *, seed: int = 0, threads=None):
        """The policy that a prior object builds itself for this strategy, or None (the strategy builds its own): the
        prior's ``policy(strategy, channel, budget, **options)``, its own method or the one registered for the pair
        of their classes (``fvnum.priors.analyses``, as ``register_kl``: a subclass finds its base's), given this
        object. The same path for the built-in strategies and a user's."""
        from fvnum.priors.analyses import analysis
        from fvnum.priors.registry import is_prior_object

        own = analysis(prior, "policy", self) if is_prior_object(prior) else None  # a fvsym prior builds none
        if own is None:
            return None
        return own(self, channel, budget, layers=self.layers, width=self.width,
                   measurement=(self.measurement or "unit") if self.classed else "unit", samples=self.search_samples,
                   seed=seed, threads=threads)

    @property
    def builds(self) -> bool:
        """Whether it can build a policy: a ``build`` given, or a class with its own :meth:`policy`."""
        return self.build is not None or type(self).policy is not Strategy.policy

    @property
    def prices_itself(self) -> bool:
        """Whether it has a price of its own (``price``, or a class with its own :meth:`cost`) beside the engine's."""
        return self.price is not None or type(self).cost is not Strategy.cost

    def describe(self) -> str:
        """One line: its name, what it is, its class and adaptivity, and the options set on it."""
        kind = {True: "adaptive", False: "non-adaptive", None: "adaptivity of the policy given"}[self.adaptive]
        klass = (f"{self.measurement} class" if self.measurement else
                 "class given by measurement=" if self.classed else "class of its rows")
        set_ = [f"{k}={_brief(getattr(self, k))}" for k in OPTIONS if k != "measurement" and getattr(self, k) is not None
                and not (k == "search_samples" and getattr(self, k) == _DEFAULTS[k])]
        return f"{self.name}: {self.description} ({klass}, {kind}{'; ' + ', '.join(set_) if set_ else ''})"

    def rank(self, role: str):
        """Its place among the default candidates of ``role`` (None: not a candidate)."""
        return dict(self.roles).get(role)

    @property
    def engine_work(self) -> Work:
        """The factors of the engine's price: its own ``work``, else a user policy's (:data:`DENSE`)."""
        return DENSE if self.work is None else self.work

    def applies(self, depth: int, dim: int, budget: int, tau: float) -> bool:
        """Whether it can be a candidate at this size and noise (``max_budget``, ``needs_noise``)."""
        most = {"depth": depth, "dim": dim, None: budget}[self.max_budget]
        return budget <= most and not (self.needs_noise and tau == 0)

    def cost(self, prior, channel, budget: int, samples: int, *, threads: int = 1, search_samples: int = 4000,
             dense_design: bool = False, solve: bool = True) -> float:
        """Upper seconds of ``samples`` Monte Carlo samples of it on the numeric ``prior`` under ``channel``:
        its own ``price`` where it has one, else the engine's (``fvnum.policies.prices.mc_cost`` with its ``work``)."""
        if self.price is None:
            return float(load(ENGINE_PRICE)(self, prior, channel, budget, samples, threads=threads,
                                            search_samples=search_samples, dense_design=dense_design, solve=solve))
        return checked_seconds(self, load(self.price)(prior, channel, budget, samples, threads=threads))




_DEFAULTS = {f.name: f.default for f in fields(Strategy) if f.name in OPTIONS}


def _brief(value) -> str:
    if callable(value):
        return getattr(value, "__name__", type(value).__name__)
    text = repr(value.tolist() if hasattr(value, "tolist") else value)
    return text if len(text) <= 40 else text[:37] + "..."


def checked_seconds(strategy: Strategy, given) -> float:
    """A price given by ``strategy`` (its ``price``, or its own ``cost``) as seconds; NaN, a negative number or no
    number is one :class:`~fvsym.errors.InputError` line."""
    try:
        seconds = float(given)
    except (TypeError, ValueError, OverflowError):
        seconds = float("nan")
    if not seconds >= 0:  # NaN, negative or not a number: no price
        from fvsym._validate import _short

        raise InputError(f"strategy {strategy.name!r}: its price gave {_short(given)} seconds; a price is a number >= 0")
    return seconds


def strategy_of(name: str) -> Strategy | None:
    """The registered :class:`Strategy` called ``name`` (None: none is)."""
    return STRATEGIES.get(name) if isinstance(name, str) else None


def strategy_name(strategy) -> str:
    """The registry's name of ``strategy``: a registered name, or a :class:`Strategy` object registered under its
    name (the same object, or one equal to it). Anything else is one :class:`~fvsym.errors.InputError` line that
    lists the registered names (an object not registered: ``register_strategy`` adds it)."""
    from fvsym._validate import _short

    known = ", ".join(STRATEGIES)
    if isinstance(strategy, Strategy):
        if STRATEGIES.get(strategy.name) == strategy:
            return strategy.name
        raise InputError(f"strategy {strategy.name!r} is not registered (fvnum.policies.registry.register_strategy "
                         f"adds it); "
                         f"registered: {known}")
    if isinstance(strategy, str) and strategy in STRATEGIES:
        return strategy
    what = _short(strategy) if isinstance(strategy, str) else f"{type(strategy).__name__} {_short(strategy)}"
    raise InputError(f"unknown strategy {what}; choose one of {known}")


def strategy_object(strategy) -> Strategy:
    """The object of ``strategy``: the registered object of a name, or the object given (registered under its name;
    it keeps the options set on it). Anything else: :func:`strategy_name`'s one line."""
    name = strategy_name(strategy)
    return strategy if isinstance(strategy, Strategy) else STRATEGIES[name]


def taking(option: str, *, classed: bool = False) -> str:
    """The names of the ``fv mc`` strategies that take ``option`` (``Strategy.takes``; with ``classed``, only those
    classed by ``measurement=``), as a phrase: ``a``, ``a and b``, ``a, b and c``."""
    names = [n for n, s in STRATEGIES.items() if s.cli and option in s.takes and (s.classed or not classed)]
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


def candidates(role: str) -> tuple:
    """The names of the default candidates of ``role`` (:data:`ROLES`), in their ranks' order."""
    ranked = [(s.rank(role), i, s.name) for i, s in enumerate(STRATEGIES.values()) if s.rank(role) is not None]
    return tuple(name for _, _, name in sorted(ranked))


def classed_by_measurement(name: str) -> bool:
    """Whether ``name`` takes its class from ``measurement=`` (its class-named spellings run as it)."""
    return any(s.runs_as == name for s in STRATEGIES.values())


def adaptive_class(policy: str | None) -> str:
    """The measurement class of an adaptive policy found by a search: ``unit`` for one of dense unit rows, else
    ``coordinate`` (a policy not registered, or the Gaussian's water-filling design, reads as coordinate)."""
    s = strategy_of(policy)
    return "unit" if s is not None and s.adaptive and s.measurement == "unit" else "coordinate"
