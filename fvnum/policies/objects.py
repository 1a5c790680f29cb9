"""What a strategy (policy) is, in one object (issue 30, item 1; docs/theory.md sections 2, 3, 5, 6): its name and
description, its measurement class (``coordinate`` or ``unit``), whether it adapts, how its Policy is built, its
price, the searches it is a candidate of, and its figure label and colour. ``STRATEGIES`` maps each name to its
:class:`Strategy`; every table, price, search and figure asks the object, not the name.

Standard library only, and ``fvsym.errors`` (``fv`` lists the names without loading numpy or numba); what the
objects point to (a builder, a price) is a callable or a ``"module:function"`` reference loaded when first asked.

A strategy's price has two forms. ``work`` (a :class:`Work`) is the factors of the engine's own price,
``fvnum.policies.prices.mc_cost``: what one Monte Carlo sample of it costs the sampler, in memory and operations. ``price``
is a price of its own, ``price(prior, channel, budget, samples, *, threads) -> seconds`` (the numeric prior and
a ``fvnum.Channel``), checked against the time cap by ``loss_mc`` and ``fv mc`` (the memory stays the engine's).
:meth:`Strategy.cost` answers either way. A strategy registered without either is priced like a user policy
(dense rows on every sample: :data:`DENSE`).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
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


@dataclass(frozen=True)
class Strategy:
    """One strategy (policy), everything the rest of the code asks of it.

    ``name`` and ``description``; ``measurement``: ``coordinate`` (reads coordinates, one node a reading) or
    ``unit`` (dense unit rows), None where the strategy is given its rows (``fixed``, ``policy``) or takes its
    class from ``measurement=`` (the old spelling ``optimal_nonadaptive``); ``adaptive``: its rows depend on
    the readings so far (None: the caller's policy decides). ``build(prior, channel, budget, *, layers, width,
    seed) -> fvnum.policies.strategies.Policy``: how a registered strategy's policy is built (None for the built-in
    ones, which :func:`fvnum.policies.registry.build_policy` builds). ``work`` / ``price``: its price (module docstring).
    ``roles``: ``(role, rank)`` pairs, the searches it is a default candidate of (:data:`ROLES`) and its place
    among their candidates. ``max_budget``: ``"depth"`` or ``"dim"`` where it reads at most ``K`` or ``D``
    nodes (a candidate is skipped past it), ``needs_noise``: it applies only under noise, ``min_budget``: the
    bracket samples it from this budget, ``solved_only``: the bracket samples it only where it solves the exact
    noisy recursion (the exact noisy policy). ``runs_as``: a class-named spelling runs as this strategy with
    ``measurement`` as its class. ``label`` and ``colour``: its curve in the report's figures (None: not drawn).
    ``cli``: ``fv mc --strategy`` offers it.
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
            raise InputError(f"strategy {self.name!r}: work must be a fvnum.policies.objects.Work, got "
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
        given = load(self.price)(prior, channel, budget, samples, threads=threads)
        try:
            seconds = float(given)
        except (TypeError, ValueError, OverflowError):
            seconds = float("nan")
        if not seconds >= 0:  # NaN, negative or not a number: no price
            from fvsym._validate import _short

            raise InputError(f"strategy {self.name!r}: its price gave {_short(given)} seconds; a price is a number "
                             f">= 0")
        return seconds


_TREE_LOOKAHEAD = Work(tree_ops=36.0, per_level=True, per_leaf=False)  # O(B K) a sample (about 400 at depth 10, B 4)

BUILTIN = (
    Strategy("path", "adaptive: read the depth-l node of the path decoded so far (L = B, d = 1)",
             "coordinate", True, work=COORDINATE, roles=(("best_adaptive", 0), ("bracket", 0), ("figure", 0)),
             max_budget="depth",
             label="path (adaptive, coordinate)", colour="C0"),
    Strategy("top_levels", "non-adaptive: the first B nodes in heap order, one layer", "coordinate", False,
             work=COORDINATE, roles=(("figure", 3),), max_budget="dim", label="top levels (one layer, coordinate)",
             colour="C1"),
    Strategy("fixed", "non-adaptive: a given design (node list or unit rows)", None, False,
             work=replace(COORDINATE, rows_given=True)),
    Strategy("optimal", "the optimum under the channel: exact noisy Bellman (small trees), noiseless Bellman at "
             "tau = 0, water-filling (Gaussian prior); elsewhere refused (see fv bounds)", "coordinate", True,
             work=replace(COORDINATE, solve=True), price="fvnum.optimum.noisy_work:mc_seconds",  # noisy: the exact policy
             roles=(("bracket", 4), ("figure", 1)), max_budget="dim", solved_only=True,
             label="Bellman optimum (adaptive, coordinate class; exact only noiseless)", colour="C2"),
    Strategy("bellman_noiseless", "the noiseless Bellman policy of fvsym, run under the channel", "coordinate", True,
             work=replace(COORDINATE, solve=True), roles=(("best_adaptive", 1), ("bracket", 3), ("figure", 2)),
             max_budget="dim",
             label="noiseless Bellman policy run under noise (not the noisy optimum)", colour="C8"),
    Strategy("optimal_nonadaptive_unit", "the best non-adaptive design of the unit class found by search (one layer)",
             "unit", False, runs_as="optimal_nonadaptive"),
    Strategy("optimal_nonadaptive_coordinate", "the best non-adaptive design of the coordinate class found by search",
             "coordinate", False, runs_as="optimal_nonadaptive", roles=(("figure", 5),),
             label="best fixed design, coordinate class (one layer)", colour="C3"),
    Strategy("optimal_nonadaptive", "old spelling: optimal_nonadaptive_unit (the default measurement='unit') or "
             "optimal_nonadaptive_coordinate; say the class", None, False,
             work=Work(search=1.0, tree_seconds="fvnum.policies.prices:nonadaptive_search_seconds"), roles=(("figure", 4),),
             label="best fixed design, coordinate class (one layer)", colour="C3"),
    Strategy("policy", "a user policy (callable, see fvnum.policies.strategies)", None, None, work=DENSE, cli=False),
    Strategy("greedy_coordinate", "adaptive: greedy one-step lookahead over coordinates", "coordinate", True,
             work=replace(_TREE_LOOKAHEAD, dense_rows=False), roles=(("best_adaptive", 2), ("bracket", 1))),
    Strategy("greedy_dense", "adaptive: greedy one-step lookahead over unit rows", "unit", True,
             # ~30 lookahead evaluations a layer, each O(lattice x 2^K K) (measured 2 to 8 ms a sample at depth 6,
             # budgets 3 and 4); the shared first row about 20 samples' work
             work=Work(tree_ops=80.0, per_level=True, per_leaf=True, quadratic=True, first_samples=20.0, search=1.0),
             roles=(("best_adaptive", 3),)),
    Strategy("rollout", "adaptive: one-step rollout over the greedy policy (approximate noisy Bellman)", "coordinate",
             True, work=replace(_TREE_LOOKAHEAD, tree_ops=36.0 * 4 * 32, quadratic=True, search=2.0,
                                tree_seconds="fvnum.policies.prices:rollout_tree_seconds"),
             roles=(("bracket", 2),), needs_noise=True, min_budget=2),
)
STRATEGIES: dict = {s.name: s for s in BUILTIN}


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
        raise InputError(f"strategy {strategy.name!r} is not registered (fvnum.policies.registry.register_strategy adds it); "
                         f"registered: {known}")
    if isinstance(strategy, str) and strategy in STRATEGIES:
        return strategy
    what = _short(strategy) if isinstance(strategy, str) else f"{type(strategy).__name__} {_short(strategy)}"
    raise InputError(f"unknown strategy {what}; choose one of {known}")


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
