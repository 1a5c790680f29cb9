"""Hostile inputs of the bench part (issue 30, items 7 and 4): the paired benchmark's options, a strategy that is no
registered name, and the channel's old spelling ``tokens=`` given nonsense: one line each (exit code 2 from a
command), never a traceback nor another exception type."""
import fvnum
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from fvsym.errors import InputError
from fvsym.priors import TreePrior

from tests._cli import examples, fv

ROOT = Path(__file__).resolve().parents[1]
PRIOR = TreePrior(3, "1/2")


@pytest.mark.parametrize("argv, named", [
    (["--pairs=-1"], "'-1'"), (["--pairs=1e3"], "'1e3'"), (["--pairs=²"], "'²'"), (["--pairs=101"], "'101'"),
    (["--pairs="], "''"), (["--baseline="], "''"), (["--baseline=--output=/tmp/x"], "--output=/tmp/x"),
    (["--baseline=HEAD;true"], "HEAD;true"), (["--quick=0"], "--quick='0'"), (["--no-suite=yes"], "'yes'"),
    (["--out="], "''"), (["--out=" + __file__], "test_fuzz_bench.py"), (["-q"], "'-q'"), (["--bogus"], "bogus"),
])
def test_the_paired_benchmark_refuses_bad_options_in_one_line_and_leaves_no_worktree(argv, named):
    before = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True).stdout
    proc = subprocess.run([sys.executable, "benchmarks/paired.py", "--no-suite", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert named in lines[0] and proc.stdout == ""
    assert subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True).stdout == before


HOSTILE = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=80), st.binary(max_size=8),
                    st.lists(st.text(max_size=5), max_size=3), st.dictionaries(st.text(max_size=3), st.integers()))


@examples(40)
@given(value=HOSTILE)
def test_a_strategy_that_is_no_registered_name_is_one_input_error_line(value):
    from fvnum.policies.registry import STRATEGIES, strategy_name

    if isinstance(value, str) and value in STRATEGIES:
        assert strategy_name(value) == value
        return
    with pytest.raises(InputError) as caught:
        strategy_name(value)
    line = str(caught.value)
    assert "\n" not in line and len(line) < 600 and line.startswith("unknown strategy")


@examples(40)
@given(value=HOSTILE | st.integers(min_value=10**6, max_value=10**400) | st.just(float("nan")))
def test_tokens_given_nonsense_is_one_line(value):
    from fvnum.mc.channels import make_channel

    try:
        channel = make_channel(PRIOR, fvnum.tokens(value))
    except ValueError as e:
        assert "\n" not in str(e) and len(str(e)) < 600
        return
    assert channel.kind == "tokens" and channel.n_tokens == value and 1 <= channel.n_tokens


@pytest.mark.parametrize("argv", [
    ["mc", "--strategy", "optimal", "--depth", 4, "--budget", 2, "--tau", "nan"],
    ["mc", "--strategy", "optimal", "--depth", 4, "--budget", 2, "--tau", 0.3, "--samples", 10**11],
    ["mc", "--strategy", "optimal", "--depth", 4, "--budget", 2, "--tokens", -3],
])
def test_fv_mc_of_the_noisy_optimum_with_hostile_numbers_is_one_line(argv):
    code, out, err = fv(*argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
