"""Fuzzing the ``fv`` command line and the API (issue 13, point 4): any argument vector ends with exit
code 0 and a well-formed result, or exit code 2 and exactly one line on stderr; never a traceback, never a
hang (each call under a time limit and a small ``--max-seconds``). Small example counts by default, many
under ``-m slow``."""
import contextlib
import io
import json
import signal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridges.cli import main

NUMBERS = st.one_of(
    st.sampled_from(["1/2", "0.3", "0", "-1", "1", "3/2", "1e400", "1e-100000000", "0.5e-10000", "nan", "inf",
                     "abc", "", "1/0", "99999999999999999999", "2**70", "1,,2", "-0", "1e-300", "7"]),
    st.integers(-10**6, 10**6).map(str),
    st.fractions(min_value=-2, max_value=2, max_denominator=1000).map(str),
    st.text(max_size=8),
)
INTS = st.one_of(st.integers(-3, 40).map(str), st.sampled_from(["0", "-1", "1000", "10**9", "2.5", "x", "1/2"]))

DERIVE = st.tuples(
    st.just(["derive", "tree-loss"]),
    st.lists(st.tuples(st.sampled_from(["--depth", "--budget", "--layers", "--width"]), INTS), max_size=4),
    st.lists(st.tuples(st.sampled_from(["--alpha"]), NUMBERS), max_size=1),
    st.sampled_from([["--strategy", s] for s in ("path", "top_levels", "optimal", "optimal_nonadaptive", "greedy")]),
    st.sampled_from([[], ["--policy"], ["--format", "json"], ["--format", "latex"], ["--bogus"]]),
)
MC = st.tuples(
    st.just(["mc", "--samples", "200"]),
    st.lists(st.tuples(st.sampled_from(["--depth", "--budget", "--threads", "--seed", "--dim", "--tokens"]), INTS),
             max_size=3),
    st.lists(st.tuples(st.sampled_from(["--alpha", "--tau", "--s2"]), NUMBERS), max_size=2),
    st.sampled_from([["--strategy", s] for s in ("path", "top_levels", "fixed", "greedy_coordinate")]),
    st.sampled_from([[], ["--design", "1,2,3"], ["--design", "1,,2"], ["--prior", "gaussian"], ["--format", "json"]]),
)


def flat(parts):
    head, ints, nums, strategy, extra = parts
    argv = list(head)
    for opt, value in [*ints, *nums]:
        argv += [opt, value]
    return argv + list(strategy) + list(extra)


class Hang(Exception):
    pass


def run(argv, limit=60):
    def alarm(*_):
        raise Hang(" ".join(argv))

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(limit)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--max-seconds", "5", *argv])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return code, out.getvalue(), err.getvalue()


def check(argv):
    code, out, err = run(argv)
    assert "Traceback" not in err, err
    if code == 0:
        assert out.strip()
        if "json" in argv:
            json.loads(out)
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1, (argv, err)


FAST = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
MANY = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


@FAST
@given(DERIVE)
def test_fv_derive_fuzz(parts):
    check(flat(parts))


@FAST
@given(MC)
def test_fv_mc_fuzz(parts):
    check(flat(parts))


@pytest.mark.slow
@MANY
@given(st.one_of(DERIVE, MC))
def test_fv_fuzz_many(parts):
    check(flat(parts))


@pytest.mark.slow
@MANY
@given(st.lists(st.sampled_from(["train", "compare", "reproduce", "scaling", "sweep", "bounds", "--model", "Z",
                                 "--alpha", "1/2", "--tokens", "0", "--jobs", "1000", "--unknown", "-1", "1e400"]),
                max_size=6))
def test_fv_unknown_vectors_refused_or_fine(argv):
    if argv and argv[0] in ("train", "compare", "reproduce", "scaling") and "--out" not in argv:
        argv = [*argv, "--out", "/nonexistent-parent-\0"]  # never trains: the folder is refused
    check(argv) if argv else None


API_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**20), st.floats(allow_nan=True),
                       st.text(max_size=4), st.lists(st.integers(-3, 3), max_size=3), st.complex_numbers())


@FAST
@given(depth=API_VALUES, alpha=API_VALUES)
def test_tree_prior_api_fuzz(depth, alpha):
    from fvsym import TreePrior

    try:
        TreePrior(depth, alpha)
    except ValueError as exc:
        assert "\n" not in str(exc)


@FAST
@given(design=API_VALUES, budget=API_VALUES)
def test_loss_mc_api_fuzz(design, budget):
    from fvnum import loss_mc
    from fvsym import TreePrior

    try:
        loss_mc(TreePrior(3, "1/2"), "fixed", budget, design=design, tau=0.1, samples=100)
    except ValueError as exc:
        assert "\n" not in str(exc)
