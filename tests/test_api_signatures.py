"""Short signatures in one order (issue 59 item 3): no public function of fvsym, fvnum or bridges takes more than
10 parameters (options that travel together are one frozen object: ``fvnum.StrategyOptions``, ``fvnum.PatchSpec``,
``fvnum.KeyedSearch``, ``fvnum.plot.Look``), and every verb takes ``(prior, strategy, budget, channel, *, samples, seed, ...)``, or
``(prior, budget, channel, *, samples, seed, ...)`` where it has no strategy."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pathlib

import pytest

MAX_PARAMETERS = 10
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _documented_modules() -> list[str]:
    """The modules (or objects) the API reference pages document (``::: name`` lines of docs/reference)."""
    names = []
    for page in sorted((ROOT / "docs" / "reference").glob("*.md")):
        names += [line.split()[1] for line in page.read_text().splitlines() if line.startswith("::: ")]
    return names


def _public(module) -> list[tuple[str, object]]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")
                 and getattr(vars(module)[n], "__module__", None) == module.__name__]
    return [(n, getattr(module, n)) for n in names if hasattr(module, n)]


def _callables(name: str, obj) -> list[tuple[str, object]]:
    """The functions of a public name: itself, or a class's public methods (a dataclass's generated ``__init__``,
    a record of fields, is not a function anyone calls with positional arguments in a row)."""
    if inspect.isfunction(obj):
        return [(name, obj)]
    if not inspect.isclass(obj):
        return []
    out = []
    for attr, member in vars(obj).items():
        if attr.startswith("_") and attr != "__init__":
            continue
        if attr == "__init__" and dataclasses.is_dataclass(obj):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if inspect.isfunction(member):
            out.append((f"{name}.{attr}", member))
    return out


def _walk() -> dict[str, object]:
    found = {}
    for where in ["fvsym", "fvnum", "bridges", *_documented_modules()]:
        try:
            module = importlib.import_module(where)
        except ImportError:  # an object documented on its own (``fvnum.posterior_mean``, ``fvsym.Formula``)
            parent, _, attr = where.rpartition(".")
            found.update(_callables(where, getattr(importlib.import_module(parent), attr)))
            continue
        for name, obj in _public(module):
            found.update(_callables(f"{where}.{name}", obj))
    return found


def _count(fn) -> int:
    return len([p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")])


def test_the_walk_sees_the_public_api():
    found = _walk()
    assert len(found) > 300 and "fvnum.loss_mc" in found and "fvnum.plot.loss_vs_budget" in found


def test_no_public_function_takes_more_than_ten_parameters():
    long = {name: _count(fn) for name, fn in _walk().items() if _count(fn) > MAX_PARAMETERS}
    assert long == {}, long


VERBS = ("loss_mc", "patching_table", "patched_loss", "state_patching_table", "injection_table", "mean_state")
NO_STRATEGY = ("comparison_table", "bounds", "noisy_bellman", "best_adaptive", "optimal_nonadaptive_unit",
               "optimal_nonadaptive_coordinate", "best_nonadaptive_keyed", "best_adaptive_keyed", "keyed_patching_table")


@pytest.mark.parametrize("name", VERBS + NO_STRATEGY)
def test_the_verbs_share_one_argument_order(name):
    import fvnum

    params = list(inspect.signature(getattr(fvnum, name)).parameters.values())
    head = ["prior", "strategy", "budget", "channel"] if name in VERBS else ["prior", "budget", "channel"]
    assert [p.name for p in params[:len(head)]] == head, name
    assert all(p.default is inspect.Parameter.empty for p in params[:len(head)]), name  # said, never defaulted
    rest = {p.name: p for p in params[len(head):]}
    assert {"samples", "seed"} <= set(rest) or name == "noisy_bellman", name  # the exact recursion samples nothing
    keyword_only = [p.name for p in params[len(head):] if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    assert keyword_only == (["pair"] if name == "patched_loss" else []), name  # the rest by keyword
    assert not {"tau", "n_tokens", "tokens", "s2"} & set(rest), name  # the channel is one object


# the keyed searches, their patching and gradient descent in context (their second argument: a budget, the largest
# budget of a greedy search's losses, or gradient descent's layers): the tokens channel, one object
KEYED = {"fvnum.best_nonadaptive_keyed": "budget", "fvnum.best_adaptive_keyed": "budget",
         "fvnum.keyed_patching_table": "budget", "fvnum.gd_steps": "layers",
         "fvnum.keys.nonadaptive.gaussian_keyed": "budget", "fvnum.keys.adaptive.adaptive_keyed_losses": "max_budget",
         "fvnum.keys.adaptive.adaptive_keyed_trace": "budget",
         "fvnum.keys.adaptive.adaptive_softmax_losses": "max_budget",
         "fvnum.keys.adaptive.adaptive_softmax_losses_mc": "max_budget"}


@pytest.mark.parametrize("name", sorted(KEYED))
def test_the_keyed_verbs_and_gd_take_the_channel_third(name):
    module, _, attr = name.rpartition(".")
    params = list(inspect.signature(getattr(importlib.import_module(module), attr)).parameters.values())
    head = ["prior", KEYED[name], "channel"]
    assert [p.name for p in params[:3]] == head, name
    assert all(p.default is inspect.Parameter.empty for p in params[:3]), name  # said, never defaulted
    rest = {p.name: p for p in params[3:]}
    assert {"samples", "seed"} <= set(rest), name
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[3:]), name
    assert not {"tau", "n_tokens", "tokens", "s2", "family"} & set(rest), name  # the channel is one object
    assert len(params) <= MAX_PARAMETERS, name


def test_a_keyed_design_s_check_on_real_tokens_takes_the_channel_after_the_design():
    from fvnum.keys.nonadaptive import tokens_loss_mc

    params = list(inspect.signature(tokens_loss_mc).parameters)
    assert params[:3] == ["prior", "result", "channel"] and not {"n_tokens", "s2", "family"} & set(params)


def test_the_finite_prior_s_analyses_take_the_same_channel_argument():
    """A finite prior's ``noisy_bellman``, ``bounds`` and theory table (found by its class through
    ``fvnum.priors.analyses``: ``fvnum.optimum.atoms_dp``, ``fvnum.optimum.finite``, ``fvnum.finite_theory``) take
    the channel object where the tree's take it."""
    from fvnum.finite_theory import finite_comparison_table
    from fvnum.optimum.atoms_dp import atoms_noisy_bellman
    from fvnum.optimum.finite import finite_bounds

    for fn in (atoms_noisy_bellman, finite_bounds, finite_comparison_table):
        assert list(inspect.signature(fn).parameters)[:3] == ["prior", "budget", "channel"]


def _definitions() -> dict[str, set[tuple[str, str]]]:
    """Every public function and class the walk sees, by its short name: the distinct objects (``__module__``,
    ``__qualname__``) behind it, wherever it is imported from."""
    found: dict[str, set[tuple[str, str]]] = {}
    for where in ["fvsym", "fvnum", "bridges", *_documented_modules()]:
        try:
            pairs = _public(importlib.import_module(where))
        except ImportError:  # an object documented on its own
            parent, _, attr = where.rpartition(".")
            pairs = [(attr, getattr(importlib.import_module(parent), attr))]
        for name, obj in pairs:
            if inspect.isfunction(obj) or inspect.isclass(obj):
                found.setdefault(name, set()).add((obj.__module__, obj.__qualname__))
    return found


def test_each_public_name_is_defined_once():
    """Issue 59 item 3: a short name means one thing. The user-facing verb keeps its name at one path; any other
    definition says what it is in its name, or is private to its module."""
    twice = {name: sorted(f"{m}.{q}" for m, q in objects)
             for name, objects in _definitions().items() if len(objects) > 1}
    assert twice == {}, "defined more than once:\n" + "\n".join(f"{n}: {', '.join(o)}" for n, o in twice.items())


def test_every_name_a_module_lists_exists():
    """``__all__`` names only what the module holds (the walk skips a name that is not there, so a stale one after a
    rename would hide the new name from the tests above)."""
    for where in ["fvsym", "fvnum", "bridges", *_documented_modules()]:
        try:
            module = importlib.import_module(where)
        except ImportError:
            continue
        missing = [n for n in getattr(module, "__all__", ()) if not hasattr(module, n)]
        assert missing == [], (where, missing)
