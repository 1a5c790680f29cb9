"""Issue 30 item 4, one calling convention (the parts that need no toy prior): a prior object where a function
takes a prior, real functions with real signatures (no callable modules), one meaning per strategy name,
Python defaults equal to the command line's, typed results from bridges and no bridges name that repeats an
fvnum name."""
from __future__ import annotations
import fvnum

import argparse
import importlib
import inspect
import pkgutil
import sys
import types
from fractions import Fraction

import pytest
import sympy as sp

from fvsym.priors import TreePrior
from fvsym.strategy_names import SAY_THE_CLASS
from fvsym.tree import tree_loss
from tests._cli import default_number, public_modules


# --- a prior object -------------------------------------------------------------------------------------------
def test_tree_loss_takes_a_tree_prior():
    assert tree_loss(TreePrior(4, "1/2"), budget=2, strategy="path").expr == sp.Rational(3, 8)
    # by brute force: the path strategy leaves the levels below B unknown, each costing a_k^2 = alpha^(k-1)
    assert sum(Fraction(1, 2) ** (k - 1) for k in (3, 4)) == Fraction(3, 8)
    for strategy in ("path", "top_levels", "optimal", "optimal_nonadaptive_coordinate"):
        new = tree_loss(TreePrior(4, "1/2"), budget=2, strategy=strategy).expr
        assert new == tree_loss(4, 2, strategy, alpha="1/2").expr == tree_loss(depth=4, budget=2, strategy=strategy,
                                                                               alpha="1/2").expr
    scales = ("1", "1/2", "1/3")
    assert tree_loss(TreePrior(3, scales=scales), budget=2, strategy="optimal").expr == \
        tree_loss(3, 2, "optimal", scales=scales).expr
    symbolic = tree_loss(TreePrior(3), budget=2, strategy="path")  # alpha symbolic: a formula in alpha
    assert [str(p) for p in symbolic.params] == ["alpha"] and symbolic("1/2") == pytest.approx(0.25)


@pytest.mark.parametrize("call, words", [
    (lambda: tree_loss(TreePrior(4, "1/2"), 2, "path", alpha="1/3"), "alpha and scales are the prior's"),
    (lambda: tree_loss(TreePrior(4, "1/2"), 2, "path", scales=(1, 1, 1, 1)), "alpha and scales are the prior's"),
    (lambda: tree_loss(TreePrior(4, "1/2")), "needs a budget and a strategy"),
    (lambda: tree_loss(TreePrior(4, "1/2"), budget=2, strategy="path", depth=4), "not both"),
    (lambda: tree_loss(), "needs a prior"),
])
def test_tree_loss_refuses_what_contradicts_its_prior_in_one_line(call, words):
    from fvsym.errors import InputError

    with pytest.raises(InputError, match=words) as info:
        call()
    assert "\n" not in str(info.value)


# --- real functions -------------------------------------------------------------------------------------------
def test_bounds_and_noisy_bellman_are_functions_with_real_signatures():
    import fvnum
    from fvnum import bounds, noisy_bellman

    for fn in (bounds, noisy_bellman, fvnum.bounds, fvnum.noisy_bellman):
        assert isinstance(fn, types.FunctionType)
        params = inspect.signature(fn).parameters
        assert list(params)[:3] == ["prior", "budget", "channel"] and "kwargs" not in params
    importlib.import_module("fvnum.optimum.bracket")  # importing the modules leaves the names the functions
    importlib.import_module("fvnum.optimum.noisy_dp")
    assert fvnum.bounds is bounds and fvnum.noisy_bellman is noisy_bellman


@pytest.mark.parametrize("pkg", ["fvsym", "fvnum", "bridges"])
def test_no_module_is_callable(pkg):
    """A module named for its function and called like it hides the signature (``(*args, **kwargs)``): none is
    (``bridges.analysis.audit.audit`` is the audit's function)."""
    package = importlib.import_module(pkg)
    callable_modules = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name in ("cli",):
            continue
        module = importlib.import_module(f"{pkg}.{info.name}")
        if callable(module):
            callable_modules.append(module.__name__)
    assert callable_modules == [], callable_modules
    assert all(type(module) is types.ModuleType for name, module in sys.modules.items()
               if name.split(".")[0] == pkg), pkg  # no module's class swapped (``sys.modules[...].__class__ =``)


# --- one meaning per strategy name ----------------------------------------------------------------------------
def test_the_bare_optimal_nonadaptive_is_refused_everywhere_saying_the_class(capsys):
    from bridges.cli import main
    from fvnum import loss_mc

    with pytest.raises(ValueError, match=SAY_THE_CLASS):
        loss_mc(TreePrior(3, "1/2"), "optimal_nonadaptive", 2, fvnum.gaussian(0.1), samples=100)
    for argv in (["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "optimal_nonadaptive"],
                 ["mc", "--depth", "3", "--budget", "2", "--strategy", "optimal_nonadaptive", "--samples", "100"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and SAY_THE_CLASS in err[0] and "Traceback" not in err[0]
    # the class said, in the name or by the measurement, gives one meaning: the same numbers
    kw = dict(samples=500, seed=3)
    ch = fvnum.gaussian(0.1)
    named = loss_mc(TreePrior(3, "1/2"), "optimal_nonadaptive_coordinate", 2, ch,
                    options=fvnum.StrategyOptions(search_samples=200), **kw)
    said = loss_mc(TreePrior(3, "1/2"), "optimal_nonadaptive", 2, ch,
                   options=fvnum.StrategyOptions(measurement="coordinate", search_samples=200), **kw)
    assert named == said


def test_fv_derive_class_named_spelling_is_tree_losss_formula(capsys):
    import json

    from bridges.cli import main

    assert main(["derive", "tree-loss", "--depth", "4", "--budget", "3", "--strategy",
                 "optimal_nonadaptive_coordinate", "--alpha", "1/2", "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert sp.Rational(record["value"]) == tree_loss(TreePrior(4, "1/2"), budget=3,
                                                     strategy="optimal_nonadaptive_coordinate").expr


# --- Python defaults equal the command line's -----------------------------------------------------------------
def _subparsers():
    from bridges.cli import build_parser

    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


# ``fv COMMAND`` -> the function it calls. An option's default None on the command line means "not given"
# where the function's own default then applies; those pairs are named here with why.
CALLED = {"mc": ("fvnum.policies.registry", "loss_mc"), "bounds": ("fvnum.optimum.bracket", "bounds"),
          "compare": ("bridges.analysis.compare", "compare"), "audit": ("bridges.analysis.audit", "audit_model")}
NOT_GIVEN = {("mc", "s2"): "None: --s2 without --tokens is refused; the library's 0.01 applies",
             ("mc", "progress"): "False: a bar on a terminal only, the library's None (auto)",
             ("compare", "keyed"): "weighted, as compare's 'attention' (keyed_for) for a linear model; not given, a "
                                   "softmax model gets its softmax rows, as in the library (tests/test_edges.py)"}


def test_the_command_lines_defaults_equal_the_functions_they_call():
    found = 0
    subparsers = _subparsers()
    for command, (module, name) in CALLED.items():
        signature = inspect.signature(getattr(importlib.import_module(module), name))
        for action in subparsers[command]._actions:
            param = signature.parameters.get(action.dest)
            if param is None or param.default is inspect.Parameter.empty or (command, action.dest) in NOT_GIVEN:
                continue
            found += 1
            assert default_number(action.default) == default_number(param.default), (command, action.dest, action.default,
                                                                         param.default)
    assert found >= 12  # the walk compared the options it should (samples, seeds, channels, keys, ...)


def test_comparison_tables_default_to_the_key_family_of_fv_compare():
    from bridges.analysis.compare import compare, theory_table
    from fvnum.defaults import KEYED
    from fvnum.theory import comparison_table

    assert KEYED == "weighted"
    assert _subparsers()["compare"].get_default("keyed") == KEYED
    assert inspect.signature(theory_table).parameters["keyed"].default == KEYED
    assert inspect.signature(fvnum.tokens).parameters["keys"].default == KEYED  # comparison_table's keyed rows
    assert "keyed" not in inspect.signature(comparison_table).parameters
    from bridges.analysis.compare import BY_ATTENTION, keyed_for
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig

    assert inspect.signature(compare).parameters["keyed"].default == BY_ATTENTION  # a model: its attention's rows
    assert keyed_for(RunConfig(DataConfig(prior="tree", depth=3), ModelConfig("A", 2))) == KEYED
    from bridges.studies.reproduce import ReproduceConfig
    from bridges.studies.scaling import ScalingConfig

    assert ReproduceConfig().keyed == ScalingConfig().keyed == KEYED


def test_a_key_family_is_the_tokens_channels_and_the_gaussian_channel_has_none():
    from fvnum.theory import comparison_table

    from fvnum.defaults import KEYED

    assert fvnum.tokens(16).keys == KEYED and fvnum.gaussian(0.1).keys is None
    table = comparison_table(TreePrior(2, "1/2"), 1, fvnum.gaussian(0.1), samples=100, search_samples=50)
    assert not any(r.name.endswith("_keyed") for r in table.rows)


# --- typed results and one name per thing in bridges ----------------------------------------------------------
def test_compare_returns_a_typed_result_with_its_dict_layout():
    from dataclasses import fields

    from bridges.analysis.compare import Comparison

    names = [f.name for f in fields(Comparison)]
    assert names[:3] == ["key", "model", "prior"] and {"trained", "theory", "routing", "audit"} <= set(names)
    c = Comparison("k", "A", "tree", 2, 1, 64, 0.5, None, "tokens", 0.1, 0,
                   {"loss": 0.2, "stderr": 0.01}, [{"name": "path", "value": 0.25, "stderr": 0.0}])
    d = c.to_dict()
    assert d["trained"] == c["trained"] == {"loss": 0.2, "stderr": 0.01} and "routing" not in d and "audit" not in c
    assert c.get("scales") is None and list(d)[:3] == ["key", "model", "prior"]
    frame = pytest.importorskip("pandas") and c.to_frame()
    assert list(frame["name"]) == ["trained", "path"]


def _public_definitions(pkg: str) -> dict[str, str]:
    """Top-level ``def`` / ``class`` names of a package's public modules (no ``_`` module, no command line module),
    read from the source (no import): name -> module."""
    import ast

    found = {}
    for module, tree in public_modules(pkg):
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                found[node.name] = module
    return found


# bridges names that still repeat an fvnum / fvsym name, each with why (their modules belong to other changes)
REPEATS_LEFT: dict = {}  # none left: the torch key layer is LinearKeyLayer, the reproduction's curves and figure
# reproduction_curves and reproduction_figure, a run configuration's tree prior private (bridges.training.data._tree_prior)
# names THEORY.md section 9b binds: the theory's tables keep them (fvnum.patching.state); a trained model's mirrors sit
# in the mirrored file (bridges.patching.state) and say that they act on a model, with the same table types back
MIRRORED = {"state_patching_table": "model_state_patching_table", "mean_state": "model_mean_state",
            "injection_table": "model_injection_table"}


def test_no_bridges_function_repeats_an_fvnum_name():
    import bridges.analysis.audit
    import bridges.analysis.compare
    import bridges.models.networks
    import fvnum.theory

    for name in ("keyed_curves", "prediction_checks"):
        assert hasattr(fvnum.theory, name) and not hasattr(bridges.analysis.compare, name)
    assert callable(bridges.analysis.compare.keyed_cells) and callable(bridges.analysis.compare.grid_checks)
    # the torch twins of fvnum.linear_theory.lmmse and fvsym.tree.top_levels_design are named for what they return
    assert not hasattr(bridges.models.networks, "lmmse") and not hasattr(bridges.models.networks, "top_levels_design")
    assert callable(bridges.models.networks.linear_readout) and callable(bridges.models.networks.top_levels_keys)
    assert not hasattr(bridges.analysis.audit, "softmax_law")  # fvnum.keys.readings.softmax_law is the law; the audit calls it
    below = {**_public_definitions("fvsym"), **_public_definitions("fvnum")}
    repeats = {name: (module, below[name]) for name, module in _public_definitions("bridges").items()
               if name in below}
    assert set(repeats) == set(REPEATS_LEFT), repeats
    for name, mirror in MIRRORED.items():  # a mirror sits in the mirrored file of both layers
        assert below[name] == "fvnum.patching.state" and _public_definitions("bridges")[mirror] == "bridges.patching.state"
