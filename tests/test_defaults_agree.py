"""Python defaults equal the command line's (issue 30 item 4): for every ``fv`` command whose Python side is a
function or a configuration dataclass, each option's parser default is the default of the parameter or field
it sets, and ``fv COMMAND`` with no options builds the configuration ``Config()`` builds. The pairs that differ
on purpose are listed below, each with its reason; a new option that differs fails here until it is listed.

``fv reproduce`` is left out: its defaults are being changed in another piece of work (its config,
``ReproduceConfig``, is held to the key family only, in tests/test_api_convention.py)."""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect

import pytest
from tests._cli import default_number

# ``fv COMMAND`` -> (module, function) whose parameters its options set; {option dest: parameter} where the names
# differ. The options not named by a parameter (``--format``, ``--prior``'s pieces, ``--quiet``) are the command
# line's own.
FUNCTIONS = {
    ("mc",): ("fvnum.policies.registry", "loss_mc", {}),
    ("bounds",): ("fvnum.optimum.bracket", "bounds", {}),
    ("compare",): ("bridges.analysis.compare", "compare", {}),
    ("audit",): ("bridges.analysis.audit", "audit", {"latents": "n_latents"}),
    ("derive", "tree-loss"): ("fvsym.tree", "tree_loss", {}),
    ("derive", "gaussian-loss"): ("fvsym.gaussian", "gaussian_loss", {}),
    ("derive", "bellman"): ("fvsym.bellman", "recursion", {}),
    ("sweep",): ("bridges.studies.sweep", "run_sweep", {"quiet": "progress"}),
}
NEGATED = {(("sweep",), "quiet")}  # a flag that is the negation of its parameter: --quiet False is progress=True

# (command, option dest): why the command line's default is not the Python default of the same parameter
DIFFER = {
    (("mc",), "s2"): "None: --s2 without --tokens is refused; the library's 0.01 applies when it is not given",
    (("mc",), "progress"): "False: a bar only when asked; the library's None draws one on a terminal",
    (("audit",), "latents"): "None: --latents on a tree run is refused (its decoder uses the leaves); the "
                             "library's 512 applies when it is not given",
    (("compare",), "keyed"): "weighted, what compare's default 'attention' (keyed_for) gives a linear model; not "
                             "given, a softmax model gets its softmax rows, as in the library",
}

# (command, option dest): options with a default whose parameter has none (the Python call must say it)
PYTHON_ASKS = {
    (("mc",), "prior"): "--prior names the prior that --depth, --alpha and the rest build; loss_mc takes the object",
    (("bounds",), "prior"): "--prior names the prior that --depth, --alpha and --scales build; bounds takes the object",
    (("mc",), "budget"): "None: the length of --design, else fv mc's example budget 3 (THEORY.md's first table); "
                         "loss_mc asks for the budget",
    (("mc",), "strategy"): "fv mc's example strategy path; loss_mc asks for the strategy",
    (("bounds",), "budget"): "fv bounds' example budget 2; bounds asks for the budget",
    (("derive", "bellman"), "width"): "one node a layer unless --width says more; recursion asks for the width",
}


def _parser_of(path: tuple[str, ...]) -> argparse.ArgumentParser:
    from bridges.cli import build_parser

    parser = build_parser()
    for name in path:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return parser


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.dest != "help" and not isinstance(a, argparse._SubParsersAction)]


@pytest.mark.parametrize("path", list(FUNCTIONS), ids=" ".join)
def test_each_option_defaults_to_its_parameters_default(path):
    module, name, renamed = FUNCTIONS[path]
    params = inspect.signature(getattr(importlib.import_module(module), name)).parameters
    compared = []
    for action in _options(_parser_of(path)):
        param = params.get(renamed.get(action.dest, action.dest))
        if param is None or (path, action.dest) in DIFFER:
            continue
        if param.default is inspect.Parameter.empty:
            given = action.default is not None and action.default is not argparse.SUPPRESS
            assert not given or (path, action.dest) in PYTHON_ASKS, (path, action.dest, action.default)
            continue
        assert (path, action.dest) not in PYTHON_ASKS, (path, action.dest)  # a stale entry: the function has one
        given = (not action.default) if (path, action.dest) in NEGATED else action.default
        assert default_number(given) == default_number(param.default), (path, action.dest, action.default, param.default)
        compared.append(action.dest)
    assert compared  # the walk found the options it should (seeds, samples, channels, ...)


def test_the_listed_exceptions_name_real_options():
    """An entry of DIFFER or PYTHON_ASKS names an option of its command (a renamed option fails here)."""
    for path, dest in (*DIFFER, *PYTHON_ASKS):
        assert dest in {a.dest for a in _options(_parser_of(path))}, (path, dest)
    mc = _parser_of(("mc",))
    assert mc.get_default("s2") is None and mc.get_default("progress") is False
    assert _parser_of(("audit",)).get_default("latents") is None


def test_the_label_noise_has_one_default_everywhere(capsys):
    """``s2`` (the tokens channel's label noise) defaults to one value in every function and configuration that
    takes it and in every command's option; ``fv mc`` without ``--s2`` runs at it (its record says so)."""
    import json

    from bridges.cli import main
    from bridges.runs.config import DataConfig
    from bridges.studies.scaling import ScalingConfig
    from fvnum.mc.channels import Channel, tau_of_tokens, tokens

    s2 = inspect.signature(tokens).parameters["s2"].default  # the one way to give the tokens channel
    for fn in (tau_of_tokens, Channel):
        assert inspect.signature(fn).parameters["s2"].default == s2, fn.__name__
    assert tokens(8).s2 == s2
    assert DataConfig().s2 == ScalingConfig().s2 == s2
    for path in (("bounds",), ("train",), ("compare",), ("scaling",)):
        assert default_number(_parser_of(path).get_default("s2")) == default_number(s2), path
    assert main(["mc", "--depth", "2", "--budget", "1", "--tokens", "8", "--samples", "50", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["s2"] == s2


# --- the configuration dataclasses ----------------------------------------------------------------------------
# (section, field): why ``fv train``'s default is not the field's
RUN_DIFFER = {("train", "out"): "fv train writes run folders under runs/ by default; train(RunConfig()) in Python "
                                "writes none unless out is given"}
# options the command line asks for where the configuration has a default, with why
RUN_ASKS = {"model": "a run names its model on the command line (--model A|B|C); ModelConfig() is DEFAULT_MODEL's"}


@pytest.mark.parametrize("command", ["train", "compare"])
def test_a_run_with_no_options_is_the_default_run_configuration(command):
    from bridges.runs.config import DEFAULT_MODEL, DEFAULT_OUT, RunConfig

    parser = _parser_of((command,))
    assert {a.dest for a in _options(parser) if a.required} <= set(RUN_ASKS)  # fv compare --grid needs none
    args = parser.parse_args(["--model", DEFAULT_MODEL])
    built = RunConfig.from_options(vars(args))
    default = RunConfig()
    assert built.data == default.data and built.model == default.model
    assert dataclasses.replace(built.train, out=None) == default.train  # the one listed difference
    assert built.train.out == DEFAULT_OUT and default.train.out is None and RUN_DIFFER


@pytest.mark.parametrize("command", ["train", "compare"])
def test_each_run_option_defaults_to_its_field_or_leaves_it_to_the_field(command):
    """A run option's default is its field's, or None where the field's default applies (``--depth``: the
    config's depth, or the number of ``--scales``)."""
    from bridges.runs.config import RUN_OPTIONS, DataConfig, ModelConfig, TrainConfig

    kinds = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}
    parser = _parser_of((command,))
    for option in RUN_OPTIONS:
        field = {f.name: f for f in dataclasses.fields(kinds[option.section])}[option.field]
        given = parser.get_default(option.dest)
        if (option.section, option.field) in RUN_DIFFER or given is None:
            continue
        assert default_number(given) == default_number(field.default), (option.dest, given, field.default)


def test_fv_compares_own_options_default_to_compare():
    from bridges.analysis.compare import compare

    params = inspect.signature(compare).parameters
    parser = _parser_of(("compare",))
    for dest in ("samples", "seed"):
        assert parser.get_default(dest) == params[dest].default, dest
    from bridges.analysis.compare import keyed_for
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig

    linear = RunConfig(DataConfig(prior="tree", depth=3), ModelConfig("A", 2))
    assert parser.get_default("keyed") == keyed_for(linear, params["keyed"].default)  # what the default gives it


def test_fv_scaling_with_no_options_is_the_default_scaling_config():
    from bridges.study_commands import scaling_config
    from bridges.studies.scaling import ScalingConfig

    assert scaling_config(_parser_of(("scaling",)).parse_args([])) == ScalingConfig()


def test_fv_audit_with_no_options_calls_audit_with_its_defaults(monkeypatch):
    """The arguments ``fv audit RUN_DIR`` passes are audit's own defaults (``--latents`` not given: 512)."""
    from types import SimpleNamespace

    import bridges.analysis.audit
    from bridges.cli import main

    defaults = {k: p.default for k, p in inspect.signature(bridges.analysis.audit.audit).parameters.items()
                if p.default is not inspect.Parameter.empty}
    run = SimpleNamespace(config=SimpleNamespace(data=SimpleNamespace(prior="gaussian", has_leaves=False)))
    taken = {}

    class Done:
        def to_dict(self):
            return {}

        def lines(self):
            return []

    def fake(result, **kw):
        taken.update(kw)
        return Done()

    monkeypatch.setattr(bridges.analysis.audit, "load_run", lambda folder: run)
    monkeypatch.setattr(bridges.analysis.audit, "audit", fake)
    assert main(["audit", "runs/x", "--format", "json"]) == 0
    assert set(taken) == {"samples", "token_sample", "n_latents", "seed", "law_samples"}
    assert taken == {k: defaults[k] for k in taken}, (taken, defaults)
