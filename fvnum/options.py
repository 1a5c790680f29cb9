"""The options that travel together, each one frozen object (scipy's way: settings on objects, few verbs).

:class:`StrategyOptions`: how a named strategy is built (its fixed design, its callable policy, its layout, the
measurement class and the samples of its search), taken by every verb that runs a strategy (``fvnum.loss_mc``,
the patching, transplant and injection tables, ``fvnum.mean_state``). :class:`PatchSpec`: what a patching table
patches (its layers and divergence depths, the informed decoder, the contexts of an injection's mean state).
"""
from __future__ import annotations

from dataclasses import dataclass

from fvsym._validate import _short
from fvsym.errors import InputError

SEARCH_SAMPLES = 4000  # the samples of a strategy's own search (optimal_nonadaptive_*) when not given


@dataclass(frozen=True, eq=False)
class StrategyOptions:
    """How a named strategy is built. ``design``: the node list or unit rows of ``fixed``; ``policy``: the
    callable of ``policy`` (``fvnum.policies.policies``); ``layers`` x ``width``: the layout (default the
    strategy's own: width 1); ``measurement``: the class of ``optimal_nonadaptive`` (``unit`` or ``coordinate``);
    ``search_samples``: the independent samples of the design search of ``optimal_nonadaptive_*``."""

    design: object = None
    policy: object = None
    layers: int | None = None
    width: int | None = None
    measurement: str | None = None
    search_samples: int = SEARCH_SAMPLES


@dataclass(frozen=True, eq=False)
class PatchSpec:
    """What a patching table patches. ``layers``: the patched (transplanted, injected) layers (default all);
    ``depths``: the donors' divergence depths (default 1..K); ``informed``: key patching decodes with the rows
    read (``fvnum.patching_table``); ``mean_samples``: the contexts of the mean state an injection draws for itself
    (``fvnum.injection_table``; default its ``samples``)."""

    layers: tuple | None = None
    depths: tuple | None = None
    informed: bool = False
    mean_samples: int | None = None


def check_options(options, kind=StrategyOptions, name: str = "options"):
    """``options`` itself (a ``kind``), ``kind()`` for None; anything else one line naming it."""
    if options is None:
        return kind()
    if not isinstance(options, kind):
        raise InputError(f"{name} must be a fvnum.{kind.__name__}, got {_short(options)}")
    return options


@dataclass(frozen=True, eq=False)
class KeyedSearch:
    """How the greedy keyed policies search their rows (``fvnum.keys.adaptive``): ``first`` the layer-1 design (a
    ``SearchResult``; default ``best_nonadaptive_keyed`` at budget 1), ``steps`` Adam steps from each of three
    starts, ``screen`` (all starts for that many steps, then only the best), the lookahead by quadrature on at
    most ``grid`` nodes no farther apart than ``node_step`` standard deviations, ``chunk`` samples at a time,
    ``engine`` ``"numba"`` or ``"torch"`` (the reference), and for softmax keys ``joint_steps`` Adam steps on
    ``(b, log q)`` after the greedy step."""

    first: object = None
    steps: int = 25
    chunk: int = 200
    grid: int = 128
    engine: str = "numba"
    screen: int | None = None
    node_step: float | None = None
    joint_steps: int = 40
