"""Absurd values for every option of every ``fv`` command (issue 56 item 6), generated from the argument parser:
0, -1, NaN, huge, a repeated list item, the empty string, a path where a number belongs. Each case runs in this
process through ``bridges.cli.main`` under ``fv --max-seconds 2`` (work priced over it is refused before it
starts; nothing trains for real) and must either work (exit 0) or be refused in one line with exit code 2, never a
traceback, within seconds."""
from __future__ import annotations

import argparse
import contextlib
import io
import time

import pytest

from bridges.cli import build_parser, main

ABSURD = ("0", "-1", "nan", "1e400", "99999999999999999999", "1,1", "", "-0", "inf", "PATH", "meta")
CAP = "5"  # fv --max-seconds: every accepted case is priced against it before it starts
SECONDS = 20  # the most one case may take (a refusal takes a fraction of a second)
# Tiny sizes per command, so that a case that is accepted does a moment's work (the fuzzed option replaces its own)
_RUN = ["--model", "A", "--depth", "3", "--budget", "2", "--steps", "1", "--eval-every", "1", "--eval-batches", "1"]
TINY = {
    ("train",): [*_RUN, "--quiet"],
    ("compare",): [*_RUN, "--samples", "100", "--quiet"],
    ("mc",): ["--depth", "2", "--budget", "1", "--tau", "0.1", "--samples", "100"],
    ("bounds",): ["--depth", "2", "--budget", "1", "--tau", "0.1", "--samples", "100"],
    ("derive", "tree-loss"): ["--depth", "2", "--budget", "1", "--alpha", "1/2"],
    ("derive", "gaussian-loss"): ["--budget", "1", "--dim", "3"],
    ("derive", "bellman"): ["--depth", "2", "--layers", "1"],
    ("intervene",): ["--contexts", "2", "--mean-contexts", "2", "--depths", "1", "--layers", "1"],
    ("audit",): ["--samples", "2", "--token-sample", "2"],
    ("scaling",): ["--budgets", "1", "--steps-per-budget", "1", "--seeds", "1", "--models", "A", "--samples", "100",
                   "--search-samples", "100", "--quiet"],
    ("reproduce",): ["--steps", "1", "--samples", "100", "--quiet"],
}


def _commands(parser=None, path=()):
    """``(path, parser)`` of every command and subcommand of ``fv`` that runs (a leaf of the tree of parsers)."""
    parser = parser or build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _commands(sub, (*path, name))


def _required(parser, path, skip, run) -> list[str]:
    """The tiny arguments of the command (:data:`TINY`) without ``skip``'s own, then values for its other required
    options and positionals: a tiny run folder for RUN_DIR, the first choice, else a small number."""
    flags = {f: a for a in parser._actions for f in a.option_strings}
    argv, tiny = [], TINY.get(path, [])
    i = 0
    while i < len(tiny):
        action = flags[tiny[i]]
        width = 1 if action.nargs == 0 else 2
        if action is not skip:
            argv += tiny[i:i + width]
        i += width
    given = {flags[w] for w in argv if w in flags}
    for action in parser._actions:
        if action is skip or action in given or not action.required \
                or isinstance(action, argparse._SubParsersAction):
            continue
        if action.choices:
            value = str(next(iter(action.choices)))
        elif not action.option_strings:
            value = str(run)
        else:
            value = "A" if action.dest == "model" else "1"
        argv += [value] if not action.option_strings else [action.option_strings[0], value]
    return argv


def _cases():
    cases = []
    for path, parser in _commands():
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.nargs == 0 \
                    or action.help is argparse.SUPPRESS:
                continue
            cases.append((path, parser, action))
    return cases


CASES = _cases()


def test_the_fuzz_covers_every_command():
    commands = {p[0] for p, *_ in CASES}
    assert {"derive", "mc", "bounds", "train", "compare", "audit", "intervene", "reproduce", "scaling",
            "sweep"} <= commands and len(CASES) > 150


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished tiny run (Model A, depth 3, budget 2, 2 steps): the RUN_DIR of audit and intervene."""
    out = tmp_path_factory.mktemp("fuzzrun")
    assert main(["train", "--model", "A", "--depth", "3", "--budget", "2", "--steps", "2", "--eval-every", "1",
                 "--eval-batches", "1", "--out", str(out), "--quiet"]) == 0
    (folder,) = out.iterdir()
    return folder


def _fv(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


@pytest.mark.heavy
@pytest.mark.parametrize("path, parser, action", CASES,
                         ids=[" ".join(("fv", *p, a.option_strings[0] if a.option_strings else a.dest))
                              for p, _, a in CASES])
def test_an_absurd_value_works_or_is_refused_in_one_line(path, parser, action, run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # whatever an accepted case writes (runs/, ...) stays here
    prefix = [] if path == () else ["--max-seconds", CAP]
    failures = []
    for value in ABSURD:
        value = str(tmp_path) if value == "PATH" else value
        given = [value] if not action.option_strings else [action.option_strings[0], value]
        argv = [*prefix, *path, *_required(parser, path, action, run), *given]
        start = time.monotonic()
        try:
            code, err = _fv(argv)
        except BaseException as exc:  # noqa: BLE001 - any escape is the finding
            failures.append(f"{argv}: raised {type(exc).__name__}: {str(exc)[:200]}")
            continue
        took = time.monotonic() - start
        lines = err.strip().splitlines()
        if "Traceback" in err or code not in (0, 2) or (code == 2 and len(lines) != 1) or took > SECONDS:
            failures.append(f"{argv}: exit {code} after {took:.1f} s, stderr {err[-300:]!r}")

    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("value", [v for v in ABSURD if v != "PATH"])
def test_an_absurd_time_cap_works_or_is_refused_in_one_line(value):
    code, err = _fv(["--max-seconds", value, "mc", *TINY[("mc",)]])
    lines = err.strip().splitlines()
    assert "Traceback" not in err and (code == 0 or (code == 2 and len(lines) == 1 and "--max-seconds" in lines[0]))
