"""``fv scaling --resumable`` (issue 45, item 7: the exact-law cell trained in calls of at most 10 minutes): a
study priced over the cap is not refused but trained in calls that each stop at the cap with their checkpoints and
exit with code 75 until the last one writes the outputs; the numbers are those of an uninterrupted run."""
import contextlib
import io
import json
import shutil
import time

import pytest

from bridges.cli import main
from bridges.runs.store import RunStore
from bridges.study_commands import CALL_AGAIN

# depth 3, N 16, Model A alone, 2 budgets x 1 seed: 600 steps, a second or a few on one core, cut by a cap of 1 s
SMALL = ["scaling", "--depth", "3", "--tokens", "16", "--budgets", "1-2", "--models", "A", "--seeds", "1",
         "--steps-per-budget", "200", "--samples", "300", "--search-samples", "50", "--workers", "1", "--quiet",
         "--keyed", "none", "--cut", "1"]


def fv(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def numbers(folder):
    study = json.loads((folder / "scaling.json").read_text())
    return {(r["model"], r["budget"], r["seed"]): (r["loss"], r["stderr"], r["steps"], r["history"])
            for r in study["runs"]}, study["fits"]


@pytest.fixture
def small_prices(monkeypatch):
    """The prices of what a call must fit made small: the theory (with the outputs priced at about 20 s at these
    sizes, a second or two of work), the audit a training cell ends with (priced 2.5 s) and the call's start, so
    that calls of 1 s train, audit and reach the theory; the training's own price is kept (the plain command
    refuses it)."""
    import bridges.analysis.audit
    import bridges.prices.cost
    import bridges.study_commands

    real, audit = bridges.prices.cost.scaling_seconds, bridges.analysis.audit.audit_cost
    monkeypatch.setattr(bridges.prices.cost, "scaling_seconds", lambda cfg, train=True: real(cfg) if train else 0.2)
    monkeypatch.setattr(bridges.analysis.audit, "audit_cost", lambda **sizes: (audit(**sizes)[0], 0.05))
    monkeypatch.setattr(bridges.study_commands, "CALL_START_S", 0.1)
    monkeypatch.setattr(bridges.study_commands, "CELL_END_S", 0.05)


@pytest.mark.slow  # about 15 s (tens of calls of 1 s): run by name in .ci/run
def test_resumable_calls_stop_at_the_cap_and_end_with_the_numbers_of_one_whole_run(tmp_path, small_prices):
    whole = tmp_path / "whole"
    assert fv("--max-seconds", 3600, *SMALL, "--out", whole)[0] == 0
    split = tmp_path / "split"
    code, _, err = fv("--max-seconds", 1, *SMALL, "--out", split)  # without --resumable: refused by the price
    assert code == 2 and "would take about" in err and not split.exists()
    store = RunStore(str(split), "scaling", create=True)
    for cell in (whole / "cells").glob("theory-*.json"):  # the theory as computed (its cells do not depend on the
        shutil.copy(cell, store.folder / "cells")         # folder): the calls below train and write the outputs
    codes, stops = [], []
    for _ in range(60):
        code, out, err = fv("--max-seconds", 1, *SMALL, "--out", split, "--resumable")
        codes.append(code)
        if code != CALL_AGAIN:
            break
        assert "call the same command again" in err and len(err.strip().splitlines()) == 1, err
        stops.append(err)
    assert codes[-1] == 0, (codes, err)
    assert any("runs trained (the others resume from their checkpoints)" in e for e in stops), stops  # mid-training
    assert "Model A" in out and (split / "report.md").is_file()
    assert numbers(split) == numbers(whole)
    # once finished, a further call trains nothing and writes the same outputs
    assert fv("--max-seconds", 1, *SMALL, "--out", split, "--resumable")[0] == 0
    assert numbers(split) == numbers(whole)


def test_resumable_refuses_a_theory_no_call_of_its_cap_can_compute(tmp_path, monkeypatch):
    import bridges.prices.cost

    real = bridges.prices.cost.scaling_seconds
    monkeypatch.setattr(bridges.prices.cost, "scaling_seconds", lambda cfg, train=True: real(cfg) if train else 1e6)
    out = tmp_path / "study"
    argv = [a if a != "200" else "3" for a in SMALL]  # a few steps: trained in the first call
    code, _, err = fv("--max-seconds", 60, *argv, "--out", out, "--resumable")
    assert code == 2 and "theory and outputs of the study" in err and "larger --max-seconds" in err, err
    assert len(list((out / "cells").glob("run-*.json"))) == 2  # the runs are trained and kept


def test_resumable_refuses_a_cap_that_cannot_hold_an_audit_twice(tmp_path):
    """A call trains until a reserve for the largest audit before its cap, so a cap under twice that (and the
    start) is refused before any work: no call of it could audit a run and keep the reserve."""
    code, _, err = fv("--max-seconds", 20, *SMALL, "--out", tmp_path / "s", "--resumable")
    assert code == 2 and "fv scaling --resumable" in err and "larger --max-seconds" in err, err
    assert not (tmp_path / "s").exists()


def test_resumable_and_report_only_exclude_each_other(tmp_path):
    code, _, err = fv(*SMALL, "--out", tmp_path / "s", "--resumable", "--report-only")
    assert code == 2 and "give one of them" in err


# --- the engine: a cell stopped by the cap ends the run once the others are back ------------------------------
def refused_for_time(i: int) -> dict:
    from fvsym.errors import ResourceRefused

    raise ResourceRefused(f"piece {i} would take about 1 h, over the limit")


def sleeps(i: int, seconds: float) -> dict:
    time.sleep(seconds)
    return {"i": i}


@pytest.mark.heavy
def test_a_cell_stopped_by_the_cap_ends_the_run_once_the_others_are_stored(tmp_path):
    from fvsym.guards.limits import time_limit

    from bridges.runs.engine import Cell, TimeCapStop, run_cells

    quiet = dict(progress=False, log=lambda *a: None)
    cells = [Cell("stop", refused_for_time, {"i": 0}), Cell("slow", sleeps, {"i": 1, "seconds": 2.0})]
    store = RunStore(str(tmp_path / "cluster"), "test", create=True)
    with time_limit(300), pytest.raises(TimeCapStop, match="^cell stop: piece 0 would take"):
        run_cells(cells, store, workers=2, **quiet)  # a local cluster: both cells start at once
    assert store.get("slow")["result"] == {"i": 1} and store.get("stop") is None
    with time_limit(300), pytest.raises(TimeCapStop):  # in this process: the same
        run_cells(cells[:1], RunStore(str(tmp_path / "here"), "test", create=True), scheduler="synchronous", **quiet)
    with pytest.raises(ValueError) as info:  # no cap (the Python API): a plain one-line error, as before
        run_cells(cells[:1], scheduler="synchronous", **quiet)
    assert not isinstance(info.value, TimeCapStop) and str(info.value).startswith("cell stop: piece 0")


def test_a_device_that_is_not_here_is_refused_before_any_work(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the device is absent, on any machine
    code, _, err = fv("--max-seconds", 60, *SMALL, "--out", tmp_path / "s", "--device", "cuda", "--resumable")
    assert code == 2 and "device 'cuda' is not available" in err and err.count("\n") == 1
    assert not (tmp_path / "s").exists()  # refused before the study folder or a cluster was made
