"""fv sweep on dask.distributed: specs checked before any work, cells keyed by configuration, the same numbers
in-process, on a local cluster and on a running one, a killed worker's cell retried, a killed client resumed,
an unreachable scheduler refused at once.

One ``LocalCluster`` (two worker processes, 127.0.0.1 only) serves the module; its teardown closes it and
kills, by pid, only worker processes it started that are still alive.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bridges.runs import engine
from bridges.studies import sweep
from bridges.cli import main
from bridges.runs.engine import Cell, run_cells
from bridges.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
MC = {"command": "mc", "base": {"depth": 3, "tau": "3/10", "samples": 3000},
      "grid": {"budget": [1, 2], "strategy": ["path", "top_levels"], "seed": [0, 1]}}
TRAIN = {"command": "train", "base": {"model": "A", "depth": 2, "budget": 1, "steps": 6, "batch": 16, "mlp_width": 4,
                                      "eval_every": 3, "eval_batches": 1, "warmup": 1},
         "grid": {"seed": [0, 1]}}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def local_cluster():
    """A real LocalCluster of two worker processes; yields ``(address, worker_pids)``, where
    ``worker_pids()`` lists the pids of its live workers and records every pid it hands out."""
    from distributed import LocalCluster

    started: set[int] = set()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None)

    def worker_pids() -> list[int]:
        pids = [w.process.pid for w in cluster.workers.values() if w.process is not None and w.process.pid]
        started.update(pids)
        return pids

    worker_pids()
    try:
        yield cluster.scheduler_address, worker_pids
    finally:
        worker_pids()
        cluster.close()
        for pid in started:  # only processes this fixture started
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _write_spec(path: Path, spec: dict) -> Path:
    lines = [f"{k} = {json.dumps(v)}" for k, v in spec.items() if k not in ("base", "grid")]
    for table in ("base", "grid"):
        lines.append(f"[{table}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in spec.get(table, {}).items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _numbers(rows) -> list[tuple]:
    return [tuple(v for k, v in r.items()) for r in rows]


# --- specs --------------------------------------------------------------------------------------------
def test_cells_are_every_combination_keyed_by_the_full_configuration(tmp_path):
    spec, cells, points = sweep.plan(MC, tmp_path)
    assert len(cells) == 8 and len({c.key for c in cells}) == 8
    assert points[0] == {"budget": 1, "strategy": "path", "seed": 0}
    assert points[-1] == {"budget": 2, "strategy": "top_levels", "seed": 1}
    # the key hashes the parsed configuration: spelling, order and explicit defaults do not change it
    same = {"command": "mc", "base": {"samples": 3000, "tau": "3/10", "depth": 3, "prior": "tree"},
            "grid": {"seed": [0, 1], "strategy": ["path", "top_levels"], "budget": [1, 2]}}
    assert {c.key for c in sweep.plan(same, tmp_path)[1]} == {c.key for c in cells}
    other = {**MC, "base": {**MC["base"], "samples": 3001}}
    assert not {c.key for c in sweep.plan(other, tmp_path)[1]} & {c.key for c in cells}
    dashed = {**TRAIN, "base": {**TRAIN["base"], "eval-every": 3}}
    del dashed["base"]["eval_every"]
    assert [c.key for c in sweep.plan(dashed, tmp_path)[1]] == [c.key for c in sweep.plan(TRAIN, tmp_path)[1]]


@pytest.mark.parametrize("spec, key", [
    ({"command": "fit", "grid": {"seed": [0]}}, "command = 'fit'"),
    ({**MC, "base": {**MC["base"], "nope": 1}}, "base.nope"),
    ({**MC, "grid": {"budget": [1, "two"]}}, "grid.budget = 'two'"),
    ({"command": "train", "base": {"depth": 2}, "grid": {"model": ["A", "Z"]}}, "grid.model = 'Z'"),
    ({**TRAIN, "base": {"model": "A", "depth": 2}, "grid": {"budget": [1, 9]}}, "budget=9"),  # D = 3
    ({**MC, "base": {**MC["base"], "tau": "-1"}}, "tau"),
    ({**MC, "grid": {}}, "grid is empty"),
    ({**MC, "grid": {"seed": []}}, "grid.seed"),
    ({**MC, "grid": {"seed": 3}}, "grid.seed"),
    ({**TRAIN, "base": {**TRAIN["base"], "out": "elsewhere"}}, "base.out"),
    ({**TRAIN, "base": {**TRAIN["base"], "steps": True}}, "base.steps"),
    ({**MC, "base": {**MC["base"], "budget": 2}}, "'budget' is given twice"),
    ({"command": "train", "base": {"depth": 2}, "grid": {"seed": [0]}}, "needs model"),
    ({**MC, "extra": 1}, "unknown key 'extra'"),
])
def test_bad_spec_is_one_line_naming_the_key_before_any_work(spec, key, tmp_path, capsys):
    out = tmp_path / "out"
    path = _write_spec(tmp_path / "spec.toml", spec)
    assert main(["sweep", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fv sweep: error: ") and len(err.splitlines()) == 1 and key in err, err
    assert not out.exists()  # nothing written, no cluster started


def test_unreadable_spec_and_bad_workers(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "missing.toml"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "bad.toml").write_text("command = [\n")
    assert main(["sweep", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "o")]) == 2
    path = _write_spec(tmp_path / "spec.toml", MC)
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "0"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and "does not exist" in errors[0] and "not valid TOML" in errors[1]
    assert "workers must be >= 1, got 0" in errors[2]


# --- schedulers that do not answer ------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_scheduler_that_does_not_answer_is_one_line_and_exit_2_within_seconds(tmp_path, capsys, monkeypatch):
    path = _write_spec(tmp_path / "spec.toml", MC)
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--scheduler",
                 f"tcp://127.0.0.1:{_free_port()}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no Dask scheduler answers at tcp://127.0.0.1:" in err
    # a port that accepts connections but never speaks Dask: refused after CONNECT_TIMEOUT
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT", 0.5)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--scheduler",
                     "127.0.0.1:%d" % silent.getsockname()[1]]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no Dask scheduler answered within 0.5 s" in err


# --- same numbers everywhere ---------------------------------------------------------------------------------
@pytest.mark.heavy
def test_same_cells_same_numbers_in_process_and_on_a_cluster(local_cluster, tmp_path, capsys):
    """(A LocalCluster started by the sweep itself: tests/test_examples.py, example 06.)"""
    address, _ = local_cluster
    here = sweep.run_sweep(MC, out=tmp_path / "here", scheduler="synchronous", progress=False, log=lambda *a: None)
    path = _write_spec(tmp_path / "mc.toml", MC)
    assert main(["sweep", str(path), "--out", str(tmp_path / "cluster"), "--scheduler", address, "--quiet",
                 "--format", "json"]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert _numbers(here.rows) == _numbers(remote["rows"])
    assert here.n_cells == here.n_computed == 8 and here.n_cached == 0
    values = {(r["budget"], r["strategy"], r["seed"]): r for r in here.rows}
    assert values[(2, "path", 0)]["value"] != values[(2, "path", 1)]["value"]  # the seed is used
    # the results files: one row per cell, the CSV and the JSON agree with what run returned
    csv_lines = (tmp_path / "cluster" / "results.csv").read_text().splitlines()
    assert csv_lines[0] == "budget,strategy,seed,value,stderr,n,key" and len(csv_lines) == 9
    data = json.loads((tmp_path / "cluster" / "results.json").read_text())
    assert [{k: v for k, v in r.items() if k != "result"} for r in data["rows"]] == remote["rows"]
    assert data["spec"] == {"command": "mc", **{k: MC[k] for k in ("base", "grid")}}

    train_here = sweep.run_sweep(TRAIN, out=tmp_path / "t_here", scheduler="synchronous", progress=False,
                           log=lambda *a: None)
    train_there = sweep.run_sweep(TRAIN, out=tmp_path / "t_there", scheduler=address, progress=False, log=lambda *a: None)
    assert _numbers(train_here.rows) == _numbers(train_there.rows)
    assert train_here.rows[0]["loss"] != train_here.rows[1]["loss"]
    for r in train_there.rows:  # checkpoints live under --out
        run = json.loads((tmp_path / "t_there" / "cells" / f"{r['key']}.json").read_text())["result"]
        assert Path(run["run_dir"]).parent == (tmp_path / "t_there" / "train").resolve()


def test_rerun_computes_only_missing_cells(tmp_path):
    out = tmp_path / "o"
    first = sweep.run_sweep(MC, out=out, scheduler="synchronous", progress=False, log=lambda *a: None)
    lost = sorted((out / "cells").glob("*.json"))[:3]
    for p in lost:
        p.unlink()
    again = sweep.run_sweep(MC, out=out, scheduler="synchronous", progress=False, log=lambda *a: None)
    assert (again.n_computed, again.n_cached) == (3, 5)
    assert again.rows == first.rows
    assert sweep.run_sweep(MC, out=out, scheduler="synchronous", progress=False, log=lambda *a: None).n_computed == 0


# --- fv reproduce on the same engine -------------------------------------------------------------------------
def test_reproduce_training_cells_give_the_same_numbers_on_a_cluster(local_cluster, tmp_path):
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from bridges.studies.reproduce import train_cell
    from bridges.training.train import train

    address, _ = local_cluster
    runs = [RunConfig(DataConfig(depth=2), ModelConfig(model=m, budget=1, mlp_width=4),
                      TrainConfig(steps=5, batch=16, warmup=1, eval_every=5, eval_batches=1, out=str(tmp_path / m)))
            for m in ("A", "C")]
    cells = [Cell.keyed("train", r.key_dict(), train_cell, {"run": r.to_dict()}) for r in runs]
    there = run_cells(cells, RunStore(tmp_path / "store", "test"), scheduler=address, progress=False,
                      log=lambda *a: None)
    for run, result in zip(runs, there.values()):
        assert result["run_key"] == run.key() and (tmp_path / run.model.model / run.key() / "result.json").exists()
        here = train(run.replace(train={"out": None}), progress=False)
        assert (result["loss"], result["stderr"], result["n"]) == (here.loss, here.stderr, here.n_eval)


def test_reproduce_refuses_a_scheduler_that_does_not_answer_at_once(tmp_path, capsys):
    assert main(["reproduce", "--out", str(tmp_path / "r"), "--scheduler", f"tcp://127.0.0.1:{_free_port()}",
                 "--quiet"]) == 2
    assert not (tmp_path / "r").exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no Dask scheduler answers" in err
    assert main(["reproduce", "--out", str(tmp_path / "r"), "--workers", "0", "--quiet"]) == 2
    assert "workers must be >= 1, got 0" in capsys.readouterr().err


# --- nothing lost ----------------------------------------------------------------------------------------
def slow_cell(i: int, marks: str, seconds: float) -> dict:
    """A test cell: leaves a mark ``<i>-<pid>`` when it starts, then sleeps."""
    Path(marks, f"{i}-{os.getpid()}").touch()
    time.sleep(seconds)
    return {"i": i, "pid": os.getpid()}


def _marks(folder: Path) -> list[tuple[int, int]]:
    return sorted(tuple(int(x) for x in p.name.split("-")) for p in folder.iterdir())


@pytest.mark.heavy
def test_killed_worker_cell_is_retried_and_every_cell_comes_back_once(local_cluster, tmp_path):
    address, worker_pids = local_cluster
    marks = tmp_path / "marks"
    marks.mkdir()
    store = RunStore(tmp_path / "store", "test")
    cells = [Cell(f"slow-{i}", slow_cell, {"i": i, "marks": str(marks), "seconds": 0.8}) for i in range(4)]
    outcome = {}

    def client():
        try:
            outcome["results"] = run_cells(cells, store, scheduler=address, progress=False, log=lambda *a: None)
        except BaseException as exc:  # noqa: BLE001  (reported by the test)
            outcome["error"] = exc

    thread = threading.Thread(target=client)
    thread.start()
    deadline = time.monotonic() + 30
    while not any(marks.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.01)
    victim_cell, victim = _marks(marks)[0]
    assert victim in worker_pids()  # a real worker process of the cluster
    os.kill(victim, signal.SIGKILL)
    thread.join(60)
    assert not thread.is_alive() and "error" not in outcome, outcome.get("error")
    results = outcome["results"]
    assert list(results) == [c.key for c in cells]
    assert [r["i"] for r in results.values()] == [0, 1, 2, 3]
    started = [pid for i, pid in _marks(marks) if i == victim_cell]
    assert len(started) == 2 and victim in started  # the killed cell ran again, in another process
    assert results[f"slow-{victim_cell}"]["pid"] != victim
    assert sorted(p.stem for p in (tmp_path / "store" / "cells").glob("*.json")) == sorted(results)
    deadline = time.monotonic() + 30
    while len(worker_pids()) < 2 and time.monotonic() < deadline:  # the nanny restarts the worker
        time.sleep(0.05)
    assert victim not in worker_pids() and len(worker_pids()) == 2


def test_killed_client_rerun_computes_only_missing_cells(tmp_path):
    marks, out = tmp_path / "marks", tmp_path / "store"
    marks.mkdir()
    script = (
        "from bridges.runs.store import RunStore; from bridges.runs.engine import Cell, run_cells\n"
        "from tests.bridges.test_sweep import slow_cell\n"
        f"cells = [Cell(f'slow-{{i}}', slow_cell, {{'i': i, 'marks': {str(marks)!r}, 'seconds': 0.4}})\n"
        "         for i in range(8)]\n"
        f"run_cells(cells, RunStore({str(out)!r}, 'test'), scheduler='synchronous', progress=False)\n"
    )
    client = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list((out / "cells").glob("*.json")) and time.monotonic() < deadline and client.poll() is None:
            time.sleep(0.01)
        client.kill()  # mid-sweep, no clean-up
    finally:
        client.kill()
        client.wait(10)
    done_before = {p.stem for p in (out / "cells").glob("*.json")}
    assert 1 <= len(done_before) < 8
    cells = [Cell(f"slow-{i}", slow_cell, {"i": i, "marks": str(marks), "seconds": 0.0}) for i in range(8)]
    # same keys, other kwargs: the stored cells must come from the store, not run again
    results = run_cells(cells, RunStore(out, "test"), scheduler="synchronous", progress=False, log=lambda *a: None)
    ran_again = sorted(i for i, pid in _marks(marks) if pid == os.getpid())
    assert ran_again == sorted(int(k.split("-")[1]) for k in set(results) - done_before)
    assert len(results) == 8 and [r["i"] for r in results.values()] == list(range(8))


def test_a_cell_that_raises_stops_the_run_with_one_line_naming_it(tmp_path):
    cells = [Cell.keyed("mc", {"argv": ["--budget=9", "--depth=2"]}, sweep.run_command,
                        {"command": "mc", "argv": ["--budget=9", "--depth=2", "--tau=0", "--samples=10"]})]
    with pytest.raises(ValueError, match=f"^cell {cells[0].key}: ") as info:
        run_cells(cells, RunStore(tmp_path, "test"), scheduler="synchronous", progress=False, log=lambda *a: None)
    assert "\n" not in str(info.value)
    assert not list((tmp_path / "cells").glob("*.json"))


def test_cells_are_checked(tmp_path):
    with pytest.raises(ValueError, match="cell key must be"):
        Cell("a/b", slow_cell, {})
    with pytest.raises(ValueError, match="JSON-able"):
        Cell("a", slow_cell, {"x": object()})
    with pytest.raises(ValueError, match="share the key"):
        run_cells([Cell("a", slow_cell, {"i": 1}), Cell("a", slow_cell, {"i": 2})], scheduler="synchronous")

