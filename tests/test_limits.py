"""Issue 13 (hardening): every input works or gets one clear line; resource guards refuse, before any
work, what would not fit; the run store detects damaged cells; one lock per run folder."""
import fvnum
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sympy as sp

from bridges.cli import main
from fvsym import GaussianPrior, TreePrior

ROOT = Path(__file__).resolve().parents[1]


def fv(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def one_line_error(code, err, *fragments):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in lines[0], lines[0]


# --- item 1, 2: resource guards at refused sizes, under a memory cap, in seconds ------------------------
REFUSED = [
    ["derive", "tree-loss", "--depth", "30", "--budget", "5", "--strategy", "optimal_nonadaptive_coordinate", "--alpha", "1/2"],
    ["derive", "tree-loss", "--depth", "30", "--strategy", "fixed", "--design", "1,2,5,9"],  # top_levels: closed
    ["derive", "tree-loss", "--depth", "30", "--budget", "3", "--strategy", "optimal", "--alpha", "1/2"],
    ["mc", "--depth", "30", "--tau", "0.1", "--samples", "100"],
    ["mc", "--depth", "30", "--tau", "0.1", "--samples", "100", "--strategy", "greedy_coordinate"],
    ["mc", "--prior", "gaussian", "--cov", "isotropic", "--dim", "100000", "--tau", "0.1", "--strategy", "optimal"],
    ["mc", "--prior", "gaussian", "--cov", "matched", "--depth", "12", "--tau", "0.1", "--strategy", "optimal"],
    ["bounds", "--depth", "30", "--tau", "0.5"],
    ["train", "--model", "A", "--tokens", "10000000", "--out", ""],
    ["compare", "--model", "A", "--tokens", "10000000", "--out", ""],
    ["reproduce", "--jobs", "1000"],
    ["scaling", "--workers", "1000"],
]


@pytest.mark.parametrize("argv", REFUSED, ids=[" ".join(a[:4]) for a in REFUSED])
def test_refused_sizes_exit_2_in_seconds(argv):
    code, _, err = fv(*argv)
    one_line_error(code, err)
    assert any(w in err for w in ("fits", "must be <=", "> 1023", "limit")), err


def _cap_memory():  # 3 GB of address space: the refused sizes need terabytes
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


@pytest.mark.parametrize("argv", [REFUSED[0], REFUSED[3]], ids=["derive", "mc"])
def test_refused_in_a_subprocess_under_a_memory_cap(argv):
    proc = subprocess.run([sys.executable, "-m", "bridges.cli", *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, preexec_fn=_cap_memory)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "fits" in proc.stderr


def test_optimal_nonadaptive_builds_only_the_budget_asked():
    from fvsym import bellman

    loss, nodes = bellman.optimal_nonadaptive(TreePrior(8, "1/2"), 3)  # was > 4 GB (the table up to D = 255)
    assert loss == sp.Rational(39, 128) and len(nodes) == 3
    from fvsym.tree import coordinate_design_loss

    assert coordinate_design_loss(TreePrior(8, "1/2"), nodes) == loss


def test_time_cap_is_an_option():
    argv = ["derive", "tree-loss", "--depth", "10", "--budget", "3", "--strategy", "optimal", "--alpha", "1/2"]
    code, _, err = fv("--max-seconds", "1", *argv)  # priced 5.6 s; depth 8 fits in 1 s
    one_line_error(code, err, "--max-seconds", "largest depth that fits")


# --- items 3, 4, 16: numbers and options ------------------------------------------------------------------
BAD = [
    (["mc", "--tau", "1e400"], "exponent"),
    (["mc", "--tau", "0.1", "--strategy", "fixed", "--design", "99999999999999999999,1,2"], "99999"),
    (["mc", "--tau", "0.1", "--strategy", "fixed", "--design", "1,,2,3"], "empty item"),
    (["derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path", "--alpha", "1e-100000000"], "exponent"),
    (["derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path", "--alpha", "0.5e-10000"], "exponent"),
    (["derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path", "--width", "3"], "--width"),
    (["mc", "--tau", "0.1", "--threads", "0"], "threads"),
    (["mc", "--tau", "0.1", "--threads", "-1"], "threads"),
    (["mc", "--tau", "0.1", "--threads", "1000"], "threads"),
    (["mc", "--tau", "0.1", "--dim", "7"], "--dim"),
    (["mc", "--tau", "0.1", "--s2", "0.1"], "--s2"),
    (["compare", "--model", "A", "--samples", "0"], "samples"),
    (["scaling", "--budgets", "1,,3"], "empty item"),
    (["train", "--model", "A", "--alpha", "1e999"], "exponent"),
]


@pytest.mark.parametrize("argv, fragment", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_values_one_line(argv, fragment):
    code, _, err = fv(*argv)
    one_line_error(code, err, fragment)


def test_every_command_takes_exact_rationals(tmp_path):
    code, out, _ = fv("mc", "--alpha", "1/2", "--tau", "3/10", "--samples", "500", "--format", "json")
    assert code == 0 and json.loads(out)["tau"] == 0.3
    from bridges.cli import build_parser

    parser = build_parser()
    for command in ("train", "compare"):
        args = parser.parse_args([command, "--model", "A", "--alpha", "1/2", "--s2", "1/100", "--lr", "3/1000"])
        assert (args.alpha, args.s2, args.lr) == (0.5, 0.01, 0.003)
    for command in ("reproduce", "scaling"):
        assert parser.parse_args([command, "--alpha", "1/3"]).alpha == 1 / 3


def test_tokens_json_shows_the_decoders_tau():  # item 18
    code, out, _ = fv("mc", "--tokens", "128", "--samples", "500", "--format", "json")
    from fvnum import tau_of_tokens

    assert code == 0 and json.loads(out)["tau"] == pytest.approx(tau_of_tokens(TreePrior(4, "1/2"), 128, 0.01))


# --- items 6, 5: closed pipes and read-only folders --------------------------------------------------------
def test_closed_pipe_is_quiet():
    proc = subprocess.run(f"{sys.executable} -m bridges.cli derive tree-loss --depth 4 --budget 3 --strategy optimal "
                          f"--alpha 1/2 --policy | head -1", shell=True, capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.stdout.count("\n") == 1 and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_unwritable_out_is_one_line(tmp_path):  # item 5 (as root a read-only folder is writable: a file blocks)
    (tmp_path / "file").write_text("")
    for command in ("train", "compare"):
        code, _, err = fv(command, "--model", "C", "--depth", "2", "--budget", "1", "--steps", "2",
                          "--out", str(tmp_path / "file" / "x"))
        one_line_error(code, err)


# --- items 11, 12, 13: the Python API -----------------------------------------------------------------------
def test_float_alpha_is_read_by_its_shortest_decimal():
    from fvsym import bellman

    assert bellman.solve(TreePrior(4, 0.3), 2, 1).loss == sp.Rational(171, 4000)


@pytest.mark.parametrize("call, fragment", [
    (lambda: TreePrior(3, "1/2", scales=[1, 1, 1]), "not both"),
    (lambda: TreePrior(4, None), "None"),
    (lambda: TreePrior(4, [0.5]), "alpha"),
    (lambda: TreePrior(4, 0.5 + 0.1j), "alpha"),
    (lambda: TreePrior(3, scales=5), "scales"),
    (lambda: GaussianPrior([[float("nan")]]), "finite"),
    (lambda: GaussianPrior("x"), "covariance"),
    (lambda: GaussianPrior([[1, 0], [0]]), "square"),
    (lambda: GaussianPrior.isotropic(10**9), "1023"),
])
def test_priors_refuse_in_one_line(call, fragment):
    with pytest.raises(ValueError) as info:
        call()
    assert fragment in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(strategy="fixed", options=fvnum.StrategyOptions(design=["a", 1, 2])), "'a'"),
    (dict(strategy="fixed", options=fvnum.StrategyOptions(design=[2**70, 1, 2])), "outside the tree"),
    (dict(strategy="path", options=fvnum.StrategyOptions(design=[1, 2, 3])), "'fixed' only"),
    (dict(strategy="path", threads=0), "threads"),
    (dict(strategy=3), "strategy"),
])
def test_loss_mc_refuses_in_one_line(kwargs, fragment):
    from fvnum import loss_mc

    with pytest.raises(ValueError) as info:
        loss_mc(TreePrior(4, "1/2"), budget=3, channel=fvnum.gaussian(0.1), samples=100, **kwargs)
    assert fragment in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("design, phi, tau, fragment", [
    ([1], [[0.3]], 0, "impossible"),            # node 1 reads 0 or +-1 without noise
    ([1], [[0.0]], 0, "impossible"),            # the root is on every path
    ([2, 3], [[1 / 2**0.5, 1 / 2**0.5]], 0, "impossible"),  # both children of the root on one path
    ([2, 5], [[1 / 2**0.5, -0.5]], 0, "impossible"),        # node 5 is below the - branch of 2, not +
    ([1], [[float("nan")]], 0.1, "finite"),
    ([1], [[float("inf")]], 0.1, "finite"),
    ([1, 2], [[0.1]], 0.1, "shape"),
    (["a"], [[0.1]], 0.1, "design"),
])
def test_posterior_mean_refuses_impossible_readings(design, phi, tau, fragment):
    from fvnum import posterior_mean

    with pytest.raises(ValueError) as info:
        posterior_mean(TreePrior(3, "1/2"), design, phi, fvnum.gaussian(tau))
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_posterior_mean_accepts_every_possible_noiseless_reading():
    import numpy as np

    from fvnum import posterior_mean
    from fvnum.priors.tree import numeric_prior

    spec = numeric_prior(TreePrior(3, "1/2"))
    leaves = np.arange(8)
    for design in ([1, 2, 3], [2, 5], [4, 5, 6, 7], [3]):
        nodes = np.broadcast_to(np.array(design), (8, len(design)))
        phi = spec.values(leaves, nodes)
        mean = posterior_mean(TreePrior(3, "1/2"), design, phi, fvnum.gaussian(0))
        assert np.isfinite(mean).all()


def test_train_refuses_a_non_config():
    from bridges.training.train import train

    with pytest.raises(ValueError, match="RunConfig"):
        train("x")


# --- items 7, 8, 14, 17: the run store -----------------------------------------------------------------------
def test_damaged_and_edited_cells_are_reported_and_recomputed(tmp_path):
    from bridges.runs.store import RunStore

    messages = []
    store = RunStore(tmp_path / "run", "test", log=messages.append)
    calls = []

    def compute():
        calls.append(1)
        return {"value": 0.25}

    assert store.cell("c", {"a": 1}, compute) == ({"value": 0.25}, False)
    assert store.cell("c", {"a": 1}, compute) == ({"value": 0.25}, True) and len(calls) == 1
    (path,) = (tmp_path / "run" / "cells").glob("*.json")
    record = json.loads(path.read_text())
    record["result"]["value"] = 123.456  # item 8: a hand edit
    path.write_text(json.dumps(record))
    assert store.cell("c", {"a": 1}, compute) == ({"value": 0.25}, False) and len(calls) == 2
    path.write_text("{}")  # item 7: valid JSON of the wrong shape
    store._reported.clear()
    assert store.cell("c", {"a": 1}, compute) == ({"value": 0.25}, False) and len(calls) == 3
    assert len(messages) == 2 and "checksum" in messages[0] and "lacks" in messages[1]
    assert all("\n" not in m for m in messages)


def test_one_process_per_run_folder(tmp_path):
    from bridges.runs.store import RunStore

    RunStore(tmp_path / "run", "reproduce")
    RunStore(tmp_path / "run", "reproduce")  # the same process may reopen it
    code = f"from bridges.runs.store import RunStore; RunStore({str(tmp_path / 'run')!r}, 'reproduce')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode != 0 and f"process {os.getpid()}" in proc.stderr


def test_stale_temporary_files_are_removed(tmp_path):
    from bridges.runs.store import write_atomic

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = tmp_path / f".checkpoint.pt.{dead}.abc123.tmp"
    stale.write_bytes(b"half a checkpoint")
    mine = tmp_path / f".checkpoint.pt.{os.getpid()}.live.tmp"
    mine.write_bytes(b"being written")
    write_atomic(tmp_path / "checkpoint.pt", b"whole")
    assert not stale.exists() and mine.exists() and (tmp_path / "checkpoint.pt").read_bytes() == b"whole"


# --- issue 32 item 1: --max-seconds watched during work --------------------------------------------------------
def test_the_watchdog_ends_a_block_past_its_cap_in_one_line(monkeypatch):
    """In-process, with the exit replaced: past the cap plus its grace the watchdog writes one line naming the
    cap and how to raise it, then exits with code 2; a block that ends in time, an inactive watchdog and one
    outside a time limit never fire."""
    from fvnum.guards import resources
    from fvnum.guards.resources import watch_grace, watchdog
    from fvsym.guards.limits import time_limit

    assert watch_grace(10) == 2.0 and watch_grace(3600) == 180.0  # within 10% or a few seconds of the cap
    monkeypatch.setattr(resources, "WATCH_GRACE_S", 0.05)
    codes, buf = [], io.StringIO()
    with time_limit(0.1), watchdog("fv test", exit=codes.append, stream=buf) as dog:
        deadline = time.monotonic() + 10
        while not codes and time.monotonic() < deadline:
            sum(range(10_000))  # Python work holding the GIL between switches
    assert codes == [2] and dog.fired
    lines = buf.getvalue().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fv test: error: stopped after")
    assert "past the limit of 0.1 s" in lines[0] and "--max-seconds" in lines[0]
    for dog in (watchdog("fv test", exit=codes.append, stream=buf, active=False), watchdog("fv t", exit=codes.append)):
        with (time_limit(0.05) if not dog.active else contextlib.nullcontext()), dog:
            time.sleep(0.3)
        assert not dog.fired
    with time_limit(5), watchdog("fv test", exit=codes.append, stream=buf) as dog:
        pass
    time.sleep(0.1)
    assert not dog.fired and codes == [2]


WATCHED = r"""
import sys, time
import fvnum.optimum.bracket as b
def slow(*args):  # work the price did not see: pure Python, holding the GIL between switches
    while True:
        sum(range(10_000))
b.noiseless_lower = slow
from bridges.cli import main
sys.exit(main(["--max-seconds", "2", "bounds", "--depth", "2", "--budget", "1", "--tau", "0.3", "--samples", "10",
               "--threads", "1"], watch=True))
"""


@pytest.mark.heavy
def test_a_command_past_its_cap_ends_within_it_plus_a_few_seconds():
    """``fv --max-seconds 2 bounds`` whose work runs forever (unpriced, simulated): the command line's watchdog
    ends it with exit code 2 and one line within the cap plus a few seconds; an in-process call of ``main``
    (tests, notebooks) installs none."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", WATCHED], capture_output=True, text=True, env=env, timeout=120,
                          cwd=ROOT)
    t_after = time.monotonic() - t0
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("fv bounds: error: stopped after") and "past the limit of 2 s" in lines[0]
    after_start = float(lines[0].split("stopped after ")[1].split(" s")[0])
    assert after_start < 2 + 2 + 3, lines[0]  # the cap, its grace, a few seconds; the wall clock is not asserted
    assert t_after > 2


def test_the_coordinate_search_price_counts_the_classes_the_search_counts():
    """``fvnum.guards.limits.count_classes`` (the one count, beside the price) is the number of classes the search enumerates."""
    from fvnum.guards.limits import count_classes
    from fvnum.policies.search import coordinate_classes

    for depth in range(1, 5):
        for budget in range(1, min(2**depth, 5)):
            assert count_classes(depth, budget) == len(coordinate_classes(depth, budget))
