"""The built-in strategies (docs/theory.md sections 2, 3, 5, 6): one subclass of
:class:`fvnum.policies.strategies.Strategy` each, whose :meth:`policy` builds its policy from the options on the
object, and :data:`BUILTIN`, their registered objects (``fvnum.policies.strategies.STRATEGIES`` maps the names to them).

Names under noise say what they are (docs/theory.md section 3): ``optimal`` is the noisy optimum, built only where it
is computed exactly (``fvnum.noisy_bellman``: tree or finite prior, ``tau > 0``, width 1, small sizes; at ``tau = 0``
the noiseless Bellman policy of ``fvsym``, which is then optimal; Gaussian prior: water-filling, optimal by Theorem
G1) and refused elsewhere with a pointer to ``fv bounds``; ``bellman_noiseless`` is the noiseless Bellman policy run
under the given noise.

A prior object (``fvnum.priors.registry``) builds its own policies of the built-in strategies first (its
``policy(strategy, channel, budget, ...)``, given the strategy object, by the pair of their classes:
``Strategy.prior_policy``; None: the shared one, built here). Standard library only at import, as
:mod:`fvnum.policies.strategies`: the engine loads when a policy is built.
"""
from __future__ import annotations

from dataclasses import replace

from fvsym.errors import InputError

from fvnum.policies.strategies import COORDINATE, DENSE, STRATEGIES, Strategy, Work


class Builtin(Strategy):
    """A built-in strategy: a prior object's own policy of it where the prior has one, else :meth:`build_on` the
    numeric prior."""

    takes = frozenset()

    def policy(self, prior, budget: int, channel, *, seed: int = 0, threads=None):
        from fvnum.priors.registry import numeric

        own = self.prior_policy(prior, budget, channel, seed=seed, threads=threads)  # by the pair of classes
        if own is not None:  # a prior object builds its own policy of this strategy (None: built below)
            return own
        return self.build_on(numeric(prior), budget, channel, seed=seed, threads=threads)

    def build_on(self, spec, budget: int, channel, *, seed: int, threads):
        """Its policy on the numeric prior ``spec`` (each built-in strategy defines it)."""
        raise InputError(f"strategy {self.name!r} builds no policy")


class Path(Builtin):
    quick = True

    def build_on(self, spec, budget, channel, *, seed, threads):
        from fvnum.mc.simulate import check_budget
        from fvnum.policies.policies import PathPolicy

        K = _tree_depth_of(spec)
        check_budget(budget, K, f"the path strategy reads one node per level, at most depth K = {K}")
        _layout(budget, self.layers, self.width)
        _deep_only(self.name, budget, self.layers, self.width)
        return PathPolicy(budget)


class TopLevels(Builtin):
    quick = True

    def build_on(self, spec, budget, channel, *, seed, threads):
        import numpy as np

        from fvnum.mc.simulate import check_budget
        from fvnum.policies.policies import FixedDesign

        check_budget(budget, *_coordinate_max(spec))
        return FixedDesign(np.arange(1, budget + 1, dtype=np.int64), self.name)


class Fixed(Builtin):
    takes = frozenset({"design"})
    quick = True

    def build_on(self, spec, budget, channel, *, seed, threads):
        from fvnum.mc.simulate import check_budget, check_design
        from fvnum.policies.policies import FixedDesign

        check_budget(budget)
        return FixedDesign(check_design(self.design, spec, budget), self.name)


class UserPolicy(Builtin):
    takes = frozenset({"fn", "layers", "width"})

    def build_on(self, spec, budget, channel, *, seed, threads):
        from fvnum.mc.simulate import check_budget
        from fvnum.policies.policies import CallablePolicy

        if self.fn is None:
            raise InputError(f"strategy {self.name!r} needs policy=callable (see fvnum.policies.policies for the "
                             "protocol)")
        check_budget(budget)
        L, d = _layout(budget, self.layers, self.width)
        return CallablePolicy(self.fn, L, d)


class Optimal(Builtin):
    takes = frozenset({"layers", "width"})

    def build_on(self, spec, budget, channel, *, seed, threads):
        if _water_filling(spec):
            return _water_filling_design(spec, budget, channel, self.name)
        _tree_nodes(self.name, spec)
        return optimal_policy(spec, channel, budget, self.layers, self.width, threads=threads)


class BellmanNoiseless(Builtin):
    takes = frozenset({"layers", "width"})

    def build_on(self, spec, budget, channel, *, seed, threads):
        from fvnum.mc.simulate import check_budget

        _tree_only(self.name, spec)
        check_budget(budget, *_coordinate_max(spec))
        L, d = _layout(budget, self.layers, self.width)
        return bellman_policy(spec, channel.tau, L, d, name=self.name)


class OptimalNonadaptive(Builtin):
    """The best non-adaptive design found by search, of its class: ``measurement`` (the bare
    ``optimal_nonadaptive`` is classed by the option; its class-named spellings run as it with their own)."""

    takes = frozenset({"measurement", "search_samples"})

    @property
    def classed(self) -> bool:
        return self.runs_as is None

    def build_on(self, spec, budget, channel, *, seed, threads):
        from fvnum.mc.channels import gaussian
        from fvnum.mc.simulate import check_budget
        from fvnum.policies.policies import FixedDesign
        from fvnum.policies.search import optimal_nonadaptive_coordinate, optimal_nonadaptive_unit

        name = self.runs_as or self.name
        if _water_filling(spec):
            return _water_filling_design(spec, budget, channel, name)
        _tree_nodes(name, spec)
        measurement = self.measurement or "unit"
        check_budget(budget, *((None, "") if measurement == "unit" else _coordinate_max(spec)))
        search = optimal_nonadaptive_unit if measurement == "unit" else optimal_nonadaptive_coordinate
        found = search(spec, budget, gaussian(channel.tau), samples=self.search_samples, seed=seed, threads=threads)
        return FixedDesign(found.design, name)


class Lookahead(Builtin):
    """The adaptive lookahead policies of a tree prior (greedy and rollout): one reading a layer."""

    def build_on(self, spec, budget, channel, *, seed, threads):
        from fvnum.guards.limits import check_resolution
        from fvnum.mc.simulate import check_budget

        _tree_only(self.name, spec)
        check_budget(budget)
        _deep_only(self.name, budget, self.layers, self.width)
        check_resolution(spec, f"strategy {self.name!r}")
        return self.lookahead(spec, budget, channel, seed=seed)


class GreedyCoordinate(Lookahead):
    def lookahead(self, spec, budget, channel, *, seed):
        from fvnum.policies.policies import GreedyCoordinatePolicy as Greedy

        return Greedy(spec, channel.tau, budget, allow_repeat=channel.kind == "gaussian")


class GreedyDense(Lookahead):
    def lookahead(self, spec, budget, channel, *, seed):
        from fvnum.policies.policies import GreedyDensePolicy as Greedy

        return Greedy(spec, channel.tau, budget)


class Rollout(Lookahead):
    def lookahead(self, spec, budget, channel, *, seed):
        from fvnum.policies.policies import RolloutPolicy

        if channel.tau == 0:
            given = "" if channel.tau_given is None else (f", and tau = {channel.tau_given:.3g} is noiseless in effect "
                                                          "(at most 1e-9 a_K)")
            raise InputError(f"strategy {self.name!r} needs noise (tau > 0){given}; at tau = 0 use 'optimal'")
        return RolloutPolicy(spec, channel.tau, budget, allow_repeat=channel.kind == "gaussian", seed=seed)


def optimal_policy(spec, channel, budget: int, layers=None, width=None, threads=None):
    """``optimal`` on a tree prior: the noiseless Bellman policy at ``tau = 0`` (any layout), the exact
    noisy Bellman policy under noise where ``fvnum.noisy_bellman`` solves it, else a ValueError."""
    from fvsym.errors import ResourceRefused

    from fvnum.guards.limits import check_resolution
    from fvnum.mc.channels import gaussian
    from fvnum.mc.simulate import check_budget
    from fvnum.priors.analyses import analysis

    if channel.tau == 0:
        check_budget(budget, *_coordinate_max(spec))
        L, d = _layout(budget, layers, width)
        return bellman_policy(spec, 0.0, L, d, name="optimal")
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
        solved = solve(budget, gaussian(channel.tau), threads=threads, refine=False)
    except ResourceRefused as exc:
        if getattr(exc, "limit", None) != "work":
            raise
        raise refused from None
    return solved.policy


def bellman_policy(spec, tau: float, layers: int, width: int, name: str = "bellman_noiseless"):
    """The noiseless-optimal policy of ``fvsym.bellman.solve`` as a TablePolicy (run under noise ``tau``)."""
    import numpy as np

    from fvsym import bellman

    from fvnum.policies.policies import FixedDesign, TablePolicy

    solution = bellman.solve(spec.exact_prior(), layers, width)  # the exact numbers where the prior has them
    if solution.policy is None:  # nothing to read
        return FixedDesign(np.zeros(0, dtype=np.int64), name)
    return TablePolicy(solution.policy, spec, tau, layers, width, name=name)


def layout(budget: int, layers, width, default_width: int = 1) -> tuple[int, int]:
    """``(layers, width)`` of ``budget`` readings from either or both (neither: ``default_width``); one line where
    they do not divide the budget."""
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


_layout = layout


def _coordinate_max(spec) -> tuple:
    return spec.dim, f"a coordinate design reads at most D = {spec.dim} distinct nodes"


def _water_filling(spec) -> bool:
    from fvnum.priors.capabilities import capability

    return bool(capability(spec, "linear_posterior"))  # Gaussian: by Theorem G1 water-filling is optimal


def _water_filling_design(spec, budget, channel, name):
    from fvnum.mc.simulate import check_budget
    from fvnum.policies.policies import FixedDesign
    from fvnum.priors.gaussian import numeric_optimal_design

    check_budget(budget)
    return FixedDesign(numeric_optimal_design(spec, budget, channel.tau), name)


def _tree_only(name, spec) -> None:
    """Refuse a prior without a tree's nodes: a Gaussian one (water-filling is its optimum) or another."""
    if _water_filling(spec):
        raise InputError(f"strategy {name!r} needs a tree prior")
    _tree_nodes(name, spec)


def _tree_nodes(name, spec) -> None:
    from fvnum.priors.capabilities import capability

    if capability(spec, "heap_depth") is None:  # the rest read the nodes of a tree
        raise InputError(f"strategy {name!r} needs a tree prior (its nodes); it does not apply to the "
                         f"{_name(spec)} prior")


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


def _deep_only(name, budget, layers, width):
    if (layers not in (None, budget)) or (width not in (None, 1)):
        raise InputError(f"strategy {name!r} has layers = budget and width = 1")


_TREE_LOOKAHEAD = Work(tree_ops=36.0, per_level=True, per_leaf=False)  # O(B K) a sample (about 400 at depth 10, B 4)

BUILTIN = (
    Path("path", "adaptive: read the depth-l node of the path decoded so far (L = B, d = 1)",
         "coordinate", True, work=COORDINATE, roles=(("best_adaptive", 0), ("bracket", 0), ("figure", 0)),
         max_budget="depth",
         label="path (adaptive, coordinate)", colour="C0"),
    TopLevels("top_levels", "non-adaptive: the first B nodes in heap order, one layer", "coordinate", False,
              work=COORDINATE, roles=(("figure", 3),), max_budget="dim", label="top levels (one layer, coordinate)",
              colour="C1"),
    Fixed("fixed", "non-adaptive: a given design (node list or unit rows)", None, False,
          work=replace(COORDINATE, rows_given=True)),
    Optimal("optimal", "the optimum under the channel: exact noisy Bellman (small trees), noiseless Bellman at "
            "tau = 0, water-filling (Gaussian prior); elsewhere refused (see fv bounds)", "coordinate", True,
            work=replace(COORDINATE, solve=True), price="fvnum.optimum.noisy_work:mc_seconds",  # noisy: the exact policy
            roles=(("bracket", 4), ("figure", 1)), max_budget="dim", solved_only=True,
            label="Bellman optimum (adaptive, coordinate class; exact only noiseless)", colour="C2"),
    BellmanNoiseless("bellman_noiseless", "the noiseless Bellman policy of fvsym, run under the channel", "coordinate",
                     True, work=replace(COORDINATE, solve=True),
                     roles=(("best_adaptive", 1), ("bracket", 3), ("figure", 2)), max_budget="dim",
                     label="noiseless Bellman policy run under noise (not the noisy optimum)", colour="C8"),
    OptimalNonadaptive("optimal_nonadaptive_unit", "the best non-adaptive design of the unit class found by search "
                       "(one layer)", "unit", False, runs_as="optimal_nonadaptive"),
    OptimalNonadaptive("optimal_nonadaptive_coordinate", "the best non-adaptive design of the coordinate class found "
                       "by search", "coordinate", False, runs_as="optimal_nonadaptive", roles=(("figure", 5),),
                       label="best fixed design, coordinate class (one layer)", colour="C3"),
    OptimalNonadaptive("optimal_nonadaptive", "old spelling: optimal_nonadaptive_unit (the default "
                       "measurement='unit') or optimal_nonadaptive_coordinate; say the class", None, False,
                       work=Work(search=1.0, tree_seconds="fvnum.policies.prices:nonadaptive_search_seconds"),
                       roles=(("figure", 4),), label="best fixed design, coordinate class (one layer)", colour="C3"),
    UserPolicy("policy", "a user policy (callable, see fvnum.policies.policies)", None, None, work=DENSE, cli=False),
    GreedyCoordinate("greedy_coordinate", "adaptive: greedy one-step lookahead over coordinates", "coordinate", True,
                     work=replace(_TREE_LOOKAHEAD, dense_rows=False), roles=(("best_adaptive", 2), ("bracket", 1))),
    GreedyDense("greedy_dense", "adaptive: greedy one-step lookahead over unit rows", "unit", True,
                # ~30 lookahead evaluations a layer, each O(lattice x 2^K K) (measured 2 to 8 ms a sample at depth 6,
                # budgets 3 and 4); the shared first row about 20 samples' work
                work=Work(tree_ops=80.0, per_level=True, per_leaf=True, quadratic=True, first_samples=20.0,
                          search=1.0),
                roles=(("best_adaptive", 3),)),
    Rollout("rollout", "adaptive: one-step rollout over the greedy policy (approximate noisy Bellman)", "coordinate",
            True, work=replace(_TREE_LOOKAHEAD, tree_ops=36.0 * 4 * 32, quadratic=True, search=2.0,
                               tree_seconds="fvnum.policies.prices:rollout_tree_seconds"),
            roles=(("bracket", 2),), needs_noise=True, min_budget=2),
)
STRATEGIES.update((s.name, s) for s in BUILTIN)  # registered when fvnum.policies loads (its __init__)
