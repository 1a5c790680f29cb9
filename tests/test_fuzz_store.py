"""Hostile inputs of the run store (issue 32, item 3 and the run-folder bullets): cells and results of the wrong
shape or range with a valid checksum, damaged manifests, folders that are not run folders, huge values in a
sweep spec, a full disk inside a Dask cell. Every case ends in one line (exit 2 at the command line) or is set
aside and recomputed; nothing is written in a folder that is not a run folder; no traceback anywhere.

Example counts follow the hypothesis profiles of ``tests/conftest.py``; the whole file runs in well under 20 s
(the Dask case starts one worker process).
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridges.studies.reproduce import SHAPES
from bridges.runs.store import RunStore, checksum, config_key, result_problem, write_json
from tests._cli import fv, one_line

ROOT = Path(__file__).resolve().parents[1]


def plant(store: RunStore, name: str, config: dict, result) -> Path:
    """A cell of ``(name, config)`` holding ``result`` with a valid key and checksum (as ``json.dumps`` writes
    it: a NaN is the bare token ``NaN``)."""
    key = f"{name}-{config_key({'name': name, **config})}"
    content = {"name": name, "config": config, "result": result}
    path = store.path(key)
    path.write_text(json.dumps({**content, "key": key, "checksum": checksum(key, content)}))
    return path


COMPARE = {"key": "A-tree-K2-B1-N16-s0-0123456789", "model": "A", "prior": "tree", "depth": 2, "budget": 1,
           "n_tokens": 16, "tau": 0.25, "seed": 0,
           "trained": {"loss": 0.5, "stderr": 0.01, "n": 256, "steps": 10, "steps_per_s": 100.0, "wall_s": 1.0},
           "theory": [{"name": "path", "value": 0.4, "stderr": 0.01}],
           "audit": {"loss": {"value": 0.5, "stderr": 0.01, "n": 500},
                     "bayes_on_readings": {"value": 0.45, "stderr": 0.01, "n": 500},
                     "decoder_gap": {"value": -0.05, "stderr": 0.002, "n": 500}, "samples": 500, "decoder": "exact"}}


def _with(path: str, value):
    table = json.loads(json.dumps(COMPARE))
    *parents, last = path.split(".")
    where = table
    for p in parents:
        where = where[p]
    if value is KeyError:
        del where[last]
    else:
        where[last] = value
    return table


# --- item 2: cells of the wrong shape or range, with a valid checksum -------------------------------------------
@pytest.mark.parametrize("result", [
    "abc", None, {}, [], 3, True,
    _with("tau", -1.1086), _with("trained.loss", float("nan")), _with("trained.loss", -5.0),
    _with("trained.loss", "abc"), _with("trained", KeyError), _with("theory", "rows"), _with("theory", []),
    _with("audit.bayes_on_readings", {"value": -1.8004, "stderr": -1, "n": 500}),
    _with("theory", [{"name": "path", "value": float("inf")}]), _with("trained.stderr", float("-inf")),
], ids=lambda r: json.dumps(r)[:40])
def test_a_cell_of_the_wrong_shape_or_range_is_recomputed(tmp_path, result):
    """Before: TypeError/KeyError tracebacks, or a report showing nan, tau = -1.1086, Bayes -1.8004 ± -1."""
    messages = []
    store = RunStore(tmp_path / "run", "reproduce", log=messages.append)
    plant(store, "compare", {"run": 1}, result)
    calls = []
    got, cached = store.cell("compare", {"run": 1}, lambda: calls.append(1) or COMPARE, SHAPES["compare"])
    assert not cached and calls == [1] and got == COMPARE
    (line,) = messages
    assert "recomputing it" in line and "\n" not in line
    assert store.cell("compare", {"run": 1}, lambda: pytest.fail("recomputed"), SHAPES["compare"]) == (COMPARE, True)


def test_a_signed_difference_is_a_good_cell(tmp_path):
    messages = []
    store = RunStore(tmp_path / "run", "reproduce", log=messages.append)
    plant(store, "compare", {"run": 1}, COMPARE)  # decoder_gap -0.05: a difference, any sign
    assert store.cell("compare", {"run": 1}, lambda: pytest.fail("recomputed"), SHAPES["compare"]) == (COMPARE, True)
    assert messages == []


def test_a_computed_result_out_of_range_is_refused_not_stored(tmp_path):
    store = RunStore(tmp_path / "run", "reproduce", log=lambda m: pytest.fail(m))
    with pytest.raises(ValueError, match="not stored") as info:
        store.cell("theory", {"b": 1}, lambda: {"value": float("nan"), "stderr": 0.0}, SHAPES["theory"])
    assert "\n" not in str(info.value) and not list((tmp_path / "run" / "cells").iterdir())


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
              st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(["loss", "value", "stderr", "n", "tau", "trained", "theory",
                                                             "name", "decoder_gap", "audit", "key", "x"]), inner,
                                            max_size=5)),
    max_leaves=20)


@settings(deadline=None, suppress_health_check=list(HealthCheck))
@given(result=st.one_of(JSON, JSON.map(lambda v: _with("trained", v)), JSON.map(lambda v: _with("theory", v)),
                        JSON.map(lambda v: _with("audit", v))))
def test_any_checksummed_cell_is_used_whole_or_recomputed(tmp_path_factory, result):
    messages = []
    store = RunStore(tmp_path_factory.mktemp("fuzz"), "reproduce", log=messages.append)
    plant(store, "compare", {"run": 1}, result)
    found = store.get(f"compare-{config_key({'name': 'compare', 'run': 1})}", shape=SHAPES["compare"])
    if found is None:
        assert len(messages) == 1 and "\n" not in messages[0]
    else:  # what the readers use is there, of the right type and range
        r = found["result"]
        assert messages == [] and result_problem(r, SHAPES["compare"]) is None
        assert math.isfinite(r["trained"]["loss"]) and r["trained"]["loss"] >= 0 and r["tau"] >= 0
        assert all(isinstance(row["value"], (int, float)) and row["value"] >= 0 for row in r["theory"])


# --- item 3: strict JSON ------------------------------------------------------------------------------------------
def test_json_outputs_are_strict(tmp_path):
    import numpy as np

    path = write_json(tmp_path / "results.json", {"a": float("nan"), "b": [np.float64("inf"), 1.5], "c": -np.inf})
    text = path.read_text()
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c}")) == {"a": None, "b": [None, 1.5],
                                                                                   "c": None}


# --- item 5: nothing written in a folder that is not a run folder -------------------------------------------------
def _listing(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_a_folder_that_is_not_a_run_folder_is_left_as_it_was(tmp_path):
    folder = tmp_path / "theirs"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    (folder / ".lock").write_text("4242 another program\n")
    before = _listing(folder)
    one_line(*fv("reproduce", "--out", folder, "--quiet")[::2], "not empty and is not a run folder")
    assert _listing(folder) == before  # no .lock truncated, no .fv-lock, no manifest, no cells


def test_another_programs_lock_is_never_touched(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / ".lock").write_text("4242 another program\n")
    RunStore(folder, "test")  # empty but for hidden files: a new run folder, locked by its own file
    assert (folder / ".lock").read_text() == "4242 another program\n"
    assert (folder / ".fv-lock").read_text().split()[0] == str(os.getpid())


def test_the_root_folder_is_refused_without_a_trace():
    existed = os.path.lexists("/.fv-lock"), os.path.lexists("/.lock")
    with pytest.raises(ValueError, match="not empty and is not a run folder"):
        RunStore("/", "reproduce")
    assert (os.path.lexists("/.fv-lock"), os.path.lexists("/.lock")) == existed


@pytest.mark.parametrize("exists", [True, False])
def test_report_only_on_a_folder_without_a_study_writes_nothing(tmp_path, exists):
    folder = tmp_path / "study"
    if exists:
        folder.mkdir()
    code, _, err = fv("scaling", "--out", folder, "--report-only", "--budgets", "1-2", "--seeds", "1", "--quiet")
    one_line(code, err, "no finished run of this study yet")
    assert (list(folder.iterdir()) == []) if exists else not folder.exists()


# --- item 6: damaged manifests ------------------------------------------------------------------------------------
@pytest.mark.parametrize("manifest", [b"[1, 2]", b"\xff\xfe\x00garbage", b"null", b"{}", b'{"format": "fv-run"}',
                                      b"[" * 100_000, b" " * (2 << 20)],
                         ids=["list", "bytes", "null", "empty", "no-kind", "deep", "huge"])
def test_a_damaged_manifest_is_rebuilt_and_the_finished_cells_kept(tmp_path, manifest):
    folder = tmp_path / "run"
    store = RunStore(folder, "test")
    assert store.cell("c", {"a": 1}, lambda: {"value": 0.25}) == ({"value": 0.25}, False)
    (folder / "manifest.json").write_bytes(manifest)
    messages = []
    again = RunStore(folder, "test", log=messages.append)
    (line,) = messages
    assert "set aside as manifest.json.corrupt-1" in line and "kept" in line and len(line) < 400
    assert again.cell("c", {"a": 1}, lambda: pytest.fail("recomputed")) == ({"value": 0.25}, True)
    assert json.loads((folder / "manifest.json").read_text())["kind"] == "test"
    assert (folder / "manifest.json.corrupt-1").read_bytes() == manifest


def test_a_damaged_manifest_without_cells_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "manifest.json").write_text("[1, 2]")
    code, _, err = fv("reproduce", "--out", folder, "--quiet")
    one_line(code, err, "not a run folder")
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json"]


# --- item 7: short error lines, the price of --workers -------------------------------------------------------------
@pytest.mark.parametrize("where", ["value", "name", "grid"])
def test_a_huge_string_in_a_spec_gives_a_short_line(tmp_path, where):
    huge = "A" * 10_000_000
    body = {"value": f'model = "{huge}"\n[grid]\nseed = [0, 1]\n',
            "name": f'model = "A"\n{huge} = 3\n[grid]\nseed = [0, 1]\n',
            "grid": f'model = "A"\n[grid]\nseed = [0, "{huge}"]\n'}[where]
    spec = tmp_path / "spec.toml"
    spec.write_text('command = "train"\n[base]\n' + body)
    code, _, err = fv("sweep", spec, "--out", tmp_path / "out", "--quiet")
    line = one_line(code, err)
    assert len(line) < 1000 and "10,000,0" in line, line[:300]
    assert not (tmp_path / "out").exists()


def test_the_sweep_price_says_what_it_assumes_of_workers(tmp_path, monkeypatch):
    from bridges.studies import sweep

    monkeypatch.setattr(sweep, "_cpu_count", lambda: 2)
    spec = {"command": "train", "base": {"model": "A", "depth": 2, "budget": 1, "steps": 200},
            "grid": {"seed": list(range(8))}}
    from fvsym.guards.limits import time_limit

    with time_limit(30), pytest.raises(ValueError) as info:  # each cell fits, the eight of them do not
        sweep.plan(spec, tmp_path / "out", workers=8)
    assert "on 2 workers (--workers 8 priced on the 2 cores that run them at once)" in str(info.value)
    assert "priced on" not in sweep.priced_on(2) and sweep.priced_on(None) == "on 2 workers"


# --- item 8: a full disk inside a Dask cell -----------------------------------------------------------------------
def full_disk_cell() -> dict:
    """A cell (on a Dask worker) whose disk is full: the atomic writer's file refuses every write."""
    import bridges.runs.store as store

    from tests._cli import FullDisk as Full

    store._open_tmp = lambda fd, path: Full(fd)
    store.write_atomic(Path(os.environ["FV_TEST_FOLDER"]) / "checkpoint.pt", b"weights")
    return {"value": 1.0}


@pytest.mark.heavy
def test_a_full_disk_in_a_dask_cell_is_one_line_and_no_worker_traceback(tmp_path):
    script = (
        "import sys\n"
        "from bridges.runs.engine import Cell, run_cells\n"
        "from bridges.runs.store import RunStore\n"
        "from tests.test_fuzz_store import full_disk_cell\n"
        f"store = RunStore({str(tmp_path / 'run')!r}, 'test')\n"
        "try:\n"
        "    run_cells([Cell('disk-1', full_disk_cell)], store, workers=1, progress=True, log=lambda *a: None)\n"
        "except OSError as exc:\n"
        "    print(f'fv test: error: {exc.strerror} ({exc.filename})', file=sys.stderr)\n"
        "    sys.exit(2)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "FV_TEST_FOLDER": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "Compute Failed" not in proc.stderr, proc.stderr
    assert "no space left on the device while writing checkpoint.pt" in proc.stderr
    assert not list((tmp_path / "run" / "cells").glob("*.json"))


def test_a_cell_that_is_a_folder_is_set_aside_and_written_again(tmp_path):
    messages = []
    store = RunStore(tmp_path / "run", "test", log=messages.append)
    key = f"c-{config_key({'name': 'c', 'a': 1})}"
    store.path(key).mkdir()
    assert store.cell("c", {"a": 1}, lambda: {"value": 0.25}) == ({"value": 0.25}, False)
    assert "set aside" in messages[0] and store.path(key).is_file()
    assert store.path(key).with_name(f"{key}.json.corrupt-1").is_dir()


def test_read_json_gives_the_default_before_the_first_result_and_refuses_a_damaged_file(tmp_path):
    import json

    from bridges.runs.store import read_json, write_json

    path = tmp_path / "results.json"
    assert read_json(path, {}) == {}
    write_json(path, {"a": 1})
    assert read_json(path, {}) == {"a": 1}
    path.write_text('{"a": ')  # cut short
    with pytest.raises(json.JSONDecodeError):
        read_json(path, {})
