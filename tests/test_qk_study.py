"""studies/scaling/qk.py: the qk router's runs are the study's Model A runs with the qk router, built as configs and
trained on the run engine, and qk.json is built from whatever runs have finished (typed, checksummed results)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "studies", "scaling"))
qk = pytest.importorskip("qk")  # needs torch through bridges


def finish(run, loss: float, stderr: float = 0.001) -> Path:
    """A finished run's result.json, as bridges.training.train.train writes it (format, key, checksum)."""
    from bridges.runs.store import with_checksum, write_json
    from bridges.training.train import TrainResult

    steps = run.train.steps
    result = TrainResult(run, loss, stderr, 4096, "theta", ((steps, None, loss, stderr, 1.0),), steps, True, 1.0, 1.0,
                         1.0, None, None)
    folder = Path(qk.folder_of(run))
    folder.mkdir(parents=True, exist_ok=True)
    return write_json(folder / "result.json", with_checksum(result.to_dict(), run.key()))


def test_the_planned_runs_are_the_study_runs_with_the_qk_router():
    from bridges.studies.scaling import config_of_command

    for name, router, budget, seed, factor in qk.PLAN:
        run = qk.run_of(router, budget, seed, factor, "/tmp/runs")
        base = config_of_command(qk.study_run(budget, seed)["command"])
        assert run.model.router == router and run.train.steps == factor * base.train.steps, name
        assert run.replace(model=dict(router="mlp"), train=dict(steps=base.train.steps, out=base.train.out)) == base
    # the function-vector study's qk run at budget 4 is this plan's qk-B4-s0 (the same key)
    assert qk.run_of("qk", 4, 0, 1, "/tmp/r").key() == "Aq-tree-K7-B4-N64-s0-7f008edfb6"
    assert qk.run_of("mlp", 6, 0, 1, "/tmp/r").key() == qk.study_run(6, 0)["key"]


def test_every_committed_row_s_command_re_runs_its_key():
    from bridges.studies.scaling import config_of_command

    doc = json.loads(Path(qk.OUT).read_text())
    for row in doc["runs"]:
        assert config_of_command(row["command"]).key() == row["key"]
        plan = [p for p in qk.PLAN if p[1:] == qk.cell(row)]
        assert len(plan) == 1 and qk.run_of(*plan[0][1:], "x").key() == row["key"]
    for entry in doc["reruns"].values():
        assert config_of_command(entry["command"]).key() in {r["key"] for r in doc["runs"]}


@pytest.mark.heavy
def test_report_from_finished_runs(tmp_path):
    runs = tmp_path / "runs"
    losses = {(3, 0): 0.25, (3, 1): 0.26, (4, 0): 0.15, (4, 1): 0.155, (5, 0): 0.09, (5, 1): 0.092,
              (6, 0): 0.06, (6, 1): 0.061}
    for (b, s), loss in losses.items():
        finish(qk.run_of("qk", b, s, 1, str(runs)), loss)
    doc = qk.report(str(runs), dest=str(tmp_path / "qk.json"), fig=False)
    assert json.loads((tmp_path / "qk.json").read_text())["per_budget"] == doc["per_budget"]
    assert len(doc["runs"]) == 8 and all("--out studies/scaling/qk/train" in r["command"] for r in doc["runs"])
    pred = doc["prediction"]
    assert doc["per_budget"]["4"]["qk_ratio"] == pytest.approx((0.15 + 0.155) / 2 / pred["4"])
    assert set(doc["tests"]["band"]) == {"A", "qk A", "B", "C"}
    assert doc["tests"]["decay"]["qk A"]["pair"] == ["qk A", "B"]
    assert doc["law_test"]["verdict"] in ("exponential", "power", "can't tell", "neither")
    assert doc["doubling"] == {} and doc["curve_end"] == {}


def test_the_step_curve_extrapolates_a_geometric_tail_exactly():
    law = lambda t: 0.1 + 0.08 * (t / 30000) ** -0.5  # every doubling shrinks the gain by 2^-1/2
    got = qk.step_curve([(t, law(t)) for t in (30000, 60000, 120000)])
    assert got["gain_ratio"] == pytest.approx(2 ** -0.5, rel=1e-12)
    assert got["extrapolated"] == pytest.approx(0.1, rel=1e-12)
    assert got["change_per_doubling"][1] == pytest.approx((law(120000) - law(60000)) / law(60000))
    assert got["converged"] is False  # the last doubling moved it by 16%
    # a curve whose gains grow (or a loss that rises) has no geometric tail
    assert qk.step_curve([(1, 0.2), (2, 0.19), (4, 0.17)])["extrapolated"] is None
    assert qk.step_curve([(1, 0.2), (2, 0.19), (4, 0.195)])["extrapolated"] is None
    with pytest.raises(ValueError, match="not T, 2T, 4T"):
        qk.step_curve([(1, 0.2), (2, 0.19), (3, 0.18)])


@pytest.mark.heavy
def test_report_gives_each_4x_run_its_step_curve(tmp_path):
    runs = tmp_path / "runs"
    for name, loss in (("qk-B6-s0", 0.14), ("qk-B6-s0-x2", 0.135), ("qk-B6-s0-x4", 0.1325),
                       ("mlp-B6-s0-x4", 0.1)):
        _, router, budget, seed, factor = [p for p in qk.PLAN if p[0] == name][0]
        finish(qk.run_of(router, budget, seed, factor, str(runs)), loss)
    doc = qk.report(str(runs), dest=str(tmp_path / "qk.json"), fig=False)
    end = doc["curve_end"]
    assert end["qk-B6-s0-x4"]["loss_curve"] == [0.14, 0.135, 0.1325]
    assert end["qk-B6-s0-x4"]["extrapolated"] == pytest.approx(0.1325 - 0.0025)  # gains halve: 0.0025 more
    mlp = json.loads((Path(qk.HERE) / "doubling.json").read_text())["A-s0"]
    assert end["mlp-B6-s0-x4"]["loss_curve"] == [mlp["loss_T"], mlp["loss_2T"], 0.1]
    assert end["mlp-B6-s0-x4"]["steps_curve"] == [30000, 60000, 120000]
    rows = qk.table(doc).splitlines()
    assert "| qk | 0.1400 | 0.1350 | 0.1325 | -1.9% | 0.1300 |" in "\n".join(rows)


@pytest.mark.heavy
def test_report_keeps_the_committed_rows_of_runs_this_machine_lacks(tmp_path):
    doc = json.loads(Path(qk.OUT).read_text())
    doc["runs"] = [r for r in doc["runs"] if (r["router"], r["budget"], r["seed"], r["factor"]) != ("qk", 3, 0, 1)]
    committed = doc["runs"]
    dest = tmp_path / "qk.json"
    dest.write_text(json.dumps(doc))
    runs = tmp_path / "runs"  # this machine has finished qk-B3-s0 only
    finish(qk.run_of("qk", 3, 0, 1, str(runs)), 0.3, 0.002)
    doc = qk.report(str(runs), dest=str(dest), fig=False)
    assert len(doc["runs"]) == len(committed) + 1
    assert [r for r in doc["runs"] if r not in committed] == [dict(qk.finished(str(runs))["qk-B3-s0"])]
    others = [r["loss"] for r in committed if (r["router"], r["budget"], r["factor"]) == ("qk", 3, 1)]
    assert doc["per_budget"]["3"]["qk_mean"] == pytest.approx((0.3 + sum(others)) / (1 + len(others)))


def test_park_and_unpark_carry_an_unfinished_run_to_a_new_run_folder(tmp_path):
    torch = pytest.importorskip("torch")
    out, parked, fresh = tmp_path / "runs", tmp_path / "parked", tmp_path / "fresh"
    none = tmp_path / "qk.json"
    none.write_text(json.dumps({"runs": []}))  # nothing committed yet
    name, router, budget, seed, factor = qk.PLAN[-1]
    run = qk.run_of(router, budget, seed, factor, str(out))
    folder = Path(qk.folder_of(run))
    folder.mkdir(parents=True)
    torch.save({"step": 4200}, folder / "checkpoint.pt")
    assert qk.park(str(out), parked=str(parked), dest=str(none)) == {name: 4200}
    target = fresh / folder.name
    assert qk.unpark(name, str(target), parked=str(parked))
    assert (target / "checkpoint.pt").read_bytes() == (folder / "checkpoint.pt").read_bytes()
    assert not qk.unpark(name, str(target), parked=str(parked))  # a run folder's own checkpoint wins
    finish(run, 0.1)  # finished: its parked checkpoint is dropped
    assert qk.park(str(out), parked=str(parked), dest=str(none)) == {} and not (parked / f"{name}.pt").exists()
    # a run committed in qk.json is not parked, though its folder here is unfinished
    (folder / "result.json").unlink()
    row = {"router": router, "budget": budget, "seed": seed, "factor": factor}
    none.write_text(json.dumps({"runs": [{**row, "loss": 0.1, "key": run.key(), "command": "fv train"}]}))
    assert qk.park(str(out), parked=str(parked), dest=str(none)) == {}


def test_a_lane_refuses_a_run_the_plan_lacks(tmp_path):
    with pytest.raises(qk.StudyError, match="no planned run qk-B9-s0"):
        qk.train(str(tmp_path), ["qk-B9-s0"])


def test_rerun_trains_a_committed_row_from_its_command_and_records_the_comparison(tmp_path, monkeypatch):
    import bridges.training.train as training

    dest = tmp_path / "qk.json"
    dest.write_text(Path(qk.OUT).read_text())
    (row,) = [r for r in json.loads(dest.read_text())["runs"] if (r["budget"], r["seed"], r["factor"]) == (3, 0, 1)]
    calls = []

    def fake_train(cfg, progress=True):  # stands in for train: the config must be the committed command's
        calls.append(cfg)
        return training.TrainResult(cfg, row["loss"] * 1.02, 0.001, 1, "theta", (), cfg.train.steps, True, 1.0, 1.0,
                                    1.0, None, None, machine="here")

    monkeypatch.setattr(training, "train", fake_train)
    entry = qk.rerun("qk-B3-s0", str(tmp_path / "scratch"), dest=str(dest))
    (cfg,) = calls
    assert cfg.key() == row["key"] and cfg.train.out == str(tmp_path / "scratch")
    assert entry["identical"] is False and entry["relative_change"] == pytest.approx(0.02)
    assert json.loads(dest.read_text())["reruns"]["qk-B3-s0"] == entry
    doc = json.loads(dest.read_text())  # a planned run whose row is not committed yet cannot be re-run
    doc["runs"] = [r for r in doc["runs"] if (r["router"], r["budget"], r["factor"]) != ("qk", 6, 4)]
    dest.write_text(json.dumps(doc))
    with pytest.raises(qk.StudyError, match="not a committed row"):
        qk.rerun("qk-B6-s0-x4", str(tmp_path / "scratch"), dest=str(dest))
    with pytest.raises(qk.StudyError, match="not a committed row"):
        qk.rerun("qk-B9-s0", str(tmp_path / "scratch"), dest=str(dest))


def test_a_damaged_qk_json_is_a_one_line_error_not_a_fresh_start(tmp_path):
    dest = tmp_path / "qk.json"
    dest.write_text('{"runs": [')
    with pytest.raises(qk.StudyError, match="is damaged"):
        qk.committed_names(str(dest))
    with pytest.raises(qk.StudyError, match="is damaged"):
        qk.park(str(tmp_path / "runs"), parked=str(tmp_path / "parked"), dest=str(dest))


def test_an_unknown_command_is_one_line_and_exit_status_2(capsys):
    assert qk.main(["frob"]) == 2 and qk.main([]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("qk.py: ") for line in err)
    assert all(c in err[0] for c in ("train", "park", "report", "table", "rerun"))


@pytest.mark.parametrize("argv,says", [(["train", "--out="], "qk.py train: argument --out: give a folder"),
                                       (["train", "foo"], "qk.py: unrecognized arguments: foo"),
                                       (["train", "--workers=0"], "qk.py train: argument --workers"),
                                       (["train", "--only="], "qk.py train: argument --only"),
                                       (["rerun"], "qk.py rerun: the following arguments are required: name"),
                                       (["report", "--out", " "], "qk.py report: argument --out: give a folder")])
def test_bad_arguments_are_one_line_and_exit_status_2(argv, says, capsys):
    assert qk.main(argv) == 2
    out = capsys.readouterr()
    assert out.err.splitlines() == [out.err.strip()] and out.err.startswith(says) and out.out == ""


@pytest.mark.heavy
def test_the_script_refuses_bad_arguments_in_one_line(tmp_path):
    """Run as a script (no traceback): ``train --out=`` and ``train foo``."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    for argv in (["train", "--out="], ["train", "foo"]):
        done = subprocess.run([sys.executable, os.path.join(qk.HERE, "qk.py"), *argv], capture_output=True,
                              text=True, env=env, cwd=tmp_path)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize("text", ["[]", "{}", '{"runs": {}}', '{"runs": [1]}', "null"])
def test_a_qk_json_that_is_not_the_study_s_is_refused_and_not_rewritten(text, tmp_path, monkeypatch, capsys):
    dest = tmp_path / "qk.json"
    dest.write_text(text)
    with pytest.raises(qk.StudyError, match="not the study's qk.json|damaged"):
        qk.report(str(tmp_path / "runs"), dest=str(dest), fig=False)
    assert dest.read_text() == text
    monkeypatch.setattr(qk, "OUT", str(dest))
    assert qk.main(["report", "--out", str(tmp_path / "runs")]) == 2
    assert dest.read_text() == text and len(capsys.readouterr().err.splitlines()) == 1


@pytest.mark.parametrize("planted", [{"loss": 0.01, "stderr": 0.001, "train_seconds": 1.0},
                                     "checksum", "format", "key"])
def test_a_planted_result_is_not_reported_as_a_finished_run(planted, tmp_path, capsys):
    doc = json.loads(Path(qk.OUT).read_text())
    doc["runs"] = [r for r in doc["runs"] if (r["router"], r["budget"], r["seed"], r["factor"]) != ("qk", 3, 0, 1)]
    dest = tmp_path / "qk.json"
    dest.write_text(json.dumps(doc))
    run = qk.run_of("qk", 3, 0, 1, str(tmp_path / "runs"))
    path = finish(run, 0.3)
    if isinstance(planted, dict):  # a result.json without its format and checksum
        path.write_text(json.dumps(planted))
    else:  # a finished result edited: its checksum, its format or its key no longer fit
        record = json.loads(path.read_text())
        record.update({"checksum": {"loss": 0.01}, "format": {"format": "fv-train-result-0"},
                       "key": {"key": "Aq-other"}}[planted])
        path.write_text(json.dumps(record))
    assert "qk-B3-s0" not in qk.finished(str(tmp_path / "runs"))
    assert "not reported" in capsys.readouterr().err
    assert not (set(qk.committed_names(str(dest))) & {"qk-B3-s0"})
    assert qk.result_of(run, quiet=True) is None  # and train trains it again


@pytest.mark.heavy
def test_train_hands_the_unfinished_runs_to_the_engine(tmp_path, monkeypatch):
    import bridges.runs.engine as engine

    dest = tmp_path / "qk.json"
    doc = json.loads(Path(qk.OUT).read_text())
    doc["runs"] = [r for r in doc["runs"] if r["factor"] == 1 and r["budget"] != 6]
    dest.write_text(json.dumps(doc))
    monkeypatch.setattr(qk, "OUT", str(dest))
    runs = tmp_path / "runs"
    finish(qk.run_of("qk", 6, 1, 1, str(runs)), 0.1)  # finished here: not trained again
    seen = []
    monkeypatch.setattr(engine, "run_cells", lambda cells, store, **kw: seen.append((cells, store, kw)))
    assert qk.train(str(runs)) == 0
    ((cells, store, kw),) = seen
    assert [c.name for c in cells] == ["qk-B6-s0", "qk-B6-s2", "qk-B6-s0-x2", "mlp-B6-s0-x4", "qk-B6-s0-x4"]
    assert kw["scheduler"] == engine.SYNCHRONOUS and store.folder == runs / "engine"
    assert all(c.fn is qk.train_cell for c in cells)
    from bridges.runs.config import RunConfig

    assert RunConfig.from_dict(cells[0].kwargs["run"]) == qk.run_of("qk", 6, 0, 1, str(runs))


def test_a_cell_trains_its_run_and_its_result_is_read_back_typed(tmp_path):
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from bridges.runs.engine import SYNCHRONOUS, Cell, run_cells

    run = RunConfig(DataConfig(prior="tree", depth=3, alpha=0.6, n_tokens=8), ModelConfig("A", 2, mlp_width=4),
                    TrainConfig(steps=3, batch=8, eval_every=3, eval_batches=1, out=str(tmp_path / "runs")))
    (row,) = run_cells([Cell("tiny", qk.train_cell, {"name": "tiny", "run": run.to_dict()})], None,
                       scheduler=SYNCHRONOUS, progress=False).values()
    result = qk.result_of(run)
    assert result is not None and result.loss == row["loss"] and row["key"] == run.key() and result.steps == 3
