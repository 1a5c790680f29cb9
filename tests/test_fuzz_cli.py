"""Hostile command lines (issue 32 item 4): every option of every ``fv`` command and subcommand, given twice,
under an alias, or abbreviated, is refused in one line with exit code 2, never taken (last wins) or guessed;
options that do not apply to the prior, covariance, strategy or run are refused naming the option, never
echoed. Parse-level cases use ``fv``'s own parser (nothing runs); the refusals of ``fv mc`` run through
``bridges.cli.main`` (each is refused before any work).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json

import pytest

from bridges.cli import build_parser
from tests._cli import fv

CANDIDATES = ("1", "2", "3", "1/2", "tree", "A", "weighted", "x", "runs/x")


def _commands(parser=None, path=()):
    """``(path, parser)`` of ``fv`` and every subcommand under it."""
    parser = parser or build_parser()
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _value(action) -> list[str]:
    """A value the option takes (``[]`` for a switch), or None when none of the candidates parses."""
    if action.nargs == 0:
        return []
    if action.choices:
        return [str(next(iter(action.choices)))]
    for text in CANDIDATES:
        try:
            (action.type or str)(text)
            return [text]
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            continue
    return None


def _required(parser, skip) -> list[str]:
    """The required options and positionals of ``parser`` with values (so an error is about ``skip`` only)."""
    argv = []
    for action in parser._actions:
        if action is skip or not action.required or isinstance(action, argparse._SubParsersAction):
            continue
        value = _value(action) or ["x"]
        argv += value if not action.option_strings else [action.option_strings[0], *value]
    return argv


def _options():
    cases = []
    for path, parser in _commands():
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction) or action.help is argparse.SUPPRESS:
                continue
            value = _value(action)
            if value is not None:
                cases.append((path, parser, action, value))
    return cases


OPTIONS = _options()
IDS = [" ".join(("fv", *p, a.option_strings[0])) for p, _, a, _ in OPTIONS]


def _parse(parser, path, argv) -> tuple[int, str]:
    """Exit code and stderr of ``fv <path> <argv>`` parsed (the top-level parser, as ``fv`` does)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args([*path, *argv])
    except SystemExit as exc:
        return exc.code, err.getvalue()
    return 0, err.getvalue()


def _one_line(code, err):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    return lines[0]


def test_every_command_has_its_options_checked():
    assert len(OPTIONS) > 120 and {p for p, *_ in OPTIONS} >= {(), ("mc",), ("train",), ("derive", "tree-loss")}


@pytest.mark.parametrize("path, parser, action, value", OPTIONS, ids=IDS)
def test_an_option_given_twice_is_refused(path, parser, action, value):
    flag = action.option_strings[0]
    line = _one_line(*_parse(parser, path, [*_required(parser, action), flag, *value, flag, *value]))
    assert f"{flag} is given twice" in line and "give each option once" in line
    if len(action.option_strings) > 1:  # an alias is the same option
        alias = action.option_strings[1]
        line = _one_line(*_parse(parser, path, [*_required(parser, action), flag, *value, alias, *value]))
        assert f"{alias} repeats {flag}" in line


def _prefixes(parser, flag: str) -> list:
    """The abbreviations of ``flag`` (3 characters or more) that are not options of ``parser`` themselves."""
    flags = {f for a in parser._actions for f in a.option_strings}
    return [flag[:n] for n in range(3, len(flag)) if flag[:n] not in flags]


ABBREVIABLE = [o for o in OPTIONS if _prefixes(o[1], o[2].option_strings[0])]


def test_almost_every_option_has_an_abbreviation_to_try():
    assert len(ABBREVIABLE) >= 0.9 * len(OPTIONS)


@pytest.mark.parametrize("path, parser, action, value", ABBREVIABLE,
                         ids=[" ".join(("fv", *p, a.option_strings[0])) for p, _, a, _ in ABBREVIABLE])
def test_an_abbreviated_option_is_refused_naming_the_full_one(path, parser, action, value):
    flag = action.option_strings[0]
    prefixes = _prefixes(parser, flag)
    line = _one_line(*_parse(parser, path, [*_required(parser, action), prefixes[-1], *value]))
    assert f"(options take their full names; {prefixes[-1]}: " in line and flag in line.split("full names")[1]


def test_a_long_repeated_value_is_abridged():
    line = _one_line(*_parse(None, ("mc",), ["--design", "1" * 10**6, "--design", "2"]))
    assert len(line) < 200 and "(1000000 characters)" in line


MC = ["mc", "--samples", "200", "--budget", "2", "--tau", "1/2"]
NOT_APPLYING = [
    (["--prior", "gaussian", "--cov", "isotropic", "--alpha", "0.3"], "--alpha applies to a tree"),
    (["--prior", "gaussian", "--cov", "isotropic", "--scales", "1,1/2"], "--scales applies to a tree"),
    (["--prior", "gaussian", "--cov", "isotropic", "--dim", "5", "--depth", "3"], "--depth applies to a tree"),
    (["--prior", "gaussian", "--eigenvalues", "1,1/2", "--depth", "3"], "--depth applies to a tree"),
    (["--prior", "gaussian", "--eigenvalues", "1,1/2", "--cov", "isotropic"], "--cov applies without --eigenvalues"),
    (["--prior", "gaussian", "--dim", "3"], "--dim applies to --cov isotropic"),
    (["--prior", "gaussian", "--strategy", "path"], "--strategy path applies to --prior tree only"),
    (["--prior", "gaussian", "--strategy", "greedy_coordinate"], "--strategy greedy_coordinate applies to --prior tree"),
    (["--prior", "gaussian", "--strategy", "optimal_nonadaptive_coordinate"], "applies to --prior tree only"),
    (["--prior", "gaussian", "--strategy", "optimal", "--layers", "2"], "--layers and --width apply to --prior tree"),
    (["--prior", "gaussian", "--strategy", "optimal_nonadaptive", "--measurement", "coordinate"],
     "--measurement coordinate applies to --prior tree"),
    (["--prior", "tree", "--dim", "7"], "--dim applies to --prior gaussian or atoms only"),
    (["--prior", "tree", "--cov", "isotropic"], "--cov applies to --prior gaussian only"),
    (["--strategy", "path", "--design", "1,2"], "--design applies to --strategy fixed only"),
    (["--strategy", "path", "--layers", "2"], "--layers and --width apply to strategies optimal"),
    (["--s2", "1/10"], "--s2 applies to the tokens channel"),
]


@pytest.mark.parametrize("extra, message", NOT_APPLYING, ids=[" ".join(e) for e, _ in NOT_APPLYING])
def test_fv_mc_refuses_an_option_that_does_not_apply(extra, message):
    code, out, err = fv(*MC, *extra)
    assert message in _one_line(code, err) and not out


def test_the_isotropic_gaussian_echoes_no_alpha():
    code, out, err = fv(*MC, "--prior", "gaussian", "--cov", "isotropic", "--dim", "3", "--strategy", "optimal",
                        "--format", "json")
    assert code == 0, err
    record = json.loads(out)
    assert record["alpha"] is None and record["dim"] == 3 and record["cov"] == "isotropic"
    code, out, err = fv(*MC, "--prior", "gaussian", "--cov", "isotropic", "--depth", "2", "--strategy", "top_levels")
    assert code == 0 and "alpha=" not in out and "dim=3" in out, (out, err)


def test_sweep_cells_parse_fv_mc_with_the_same_checks():
    """``fv sweep`` builds ``fv mc``'s parser with a class of its own: repeats are refused there too (as a
    ValueError it reports with the spec key)."""
    from bridges.studies.sweep import _mc_parser

    parser = _mc_parser()
    args = parser.parse_args(["--depth=3", "--tau=1/2", "--samples=200"])
    assert args.depth == 3
    with pytest.raises(ValueError, match="--n-tokens repeats --tokens"):
        parser.parse_args(["--tokens=3", "--n-tokens=4"])
    with pytest.raises(ValueError, match="unrecognized arguments: --dep"):
        parser.parse_args(["--dep=3", "--tau=1/2"])
    assert parser.parse_args(["--depth=4", "--tau=1/2"]).depth == 4  # the parser is reused cell after cell


@pytest.mark.parametrize("prior", ["tree", "gaussian"])
def test_fv_audit_latents_apply_to_gaussian_runs_only(monkeypatch, prior):
    """``--latents`` (the prior draws of the Gaussian decoder) on a tree run, whose decoder uses its 2^K
    leaves, is refused in one line; on a Gaussian run it is passed on (default 512 when not given)."""
    from types import SimpleNamespace

    import bridges.analysis.audit

    run = SimpleNamespace(config=SimpleNamespace(data=SimpleNamespace(prior=prior, has_leaves=prior == "tree")))
    taken = []

    class Done:
        def to_dict(self):
            return {"n_latents": taken[-1]}

        def lines(self):
            return [f"n_latents {taken[-1]}"]

    monkeypatch.setattr(bridges.analysis.audit, "load_run", lambda folder: run)
    monkeypatch.setattr(bridges.analysis.audit, "audit", lambda result, **kw: taken.append(kw["n_latents"]) or Done())
    code, out, err = fv("audit", "runs/x", "--latents", "64")
    if prior == "tree":
        assert "--latents applies to runs of a Gaussian prior" in _one_line(code, err) and not taken
    else:
        assert code == 0 and taken == [64], err
    code, out, err = fv("audit", "runs/x")
    assert code == 0 and taken[-1] == 512, err


def test_fv_train_takes_back_the_command_line_of_every_run(tmp_path):
    """``RunConfig.to_argv`` spells every field, those a model does not use included (Model C's MLP size, part
    of its key): the command line parses back to the same run, options given once."""
    from bridges.commands import config_from_args
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig

    for cfg in (RunConfig(DataConfig(depth=3), ModelConfig("C", 2, mlp_width=16)),
                RunConfig(DataConfig(prior="gaussian", cov="isotropic", depth=3), ModelConfig("B", 2))):
        args = build_parser().parse_args(["train", *cfg.to_argv()])
        assert config_from_args(args) == cfg


def test_fv_compare_grid_refuses_a_run_option_given_at_its_default(tmp_path):
    code, out, err = fv("compare", "--grid", "--mlp-width", 64, "--out", tmp_path / "g")
    assert "does not take --mlp-width" in _one_line(code, err) and not (tmp_path / "g").exists()


@pytest.mark.parametrize("command", [["reproduce"], ["scaling"], ["compare", "--grid"], ["sweep", "spec.toml"]])
def test_workers_beside_a_scheduler_are_refused_before_anything_is_written(tmp_path, command):
    code, out, err = fv(*command, "--scheduler", "tcp://127.0.0.1:1", "--workers", 2, "--out", tmp_path / "o")
    assert "--workers sizes the local Dask cluster" in _one_line(code, err) and not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv", [["mc", "--strategy", "x" * 10**6], ["mc", "--tau", "1", "--prior", "gaussian",
                                                                         "--cov", "y" * 10**6, "--strategy", "optimal"]])
def test_an_error_line_with_a_huge_value_is_abridged(argv):
    code, out, err = fv(*argv)
    line = _one_line(code, err)
    assert len(line) < 600 and not out, len(line)
