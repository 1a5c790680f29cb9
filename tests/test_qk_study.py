"""studies/scaling/qk.py: the qk router's runs are the study's Model A commands with --router qk, and qk.json is
built from whatever runs have finished."""
import json
import os
import shlex
import sys
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "studies", "scaling"))
qk = pytest.importorskip("qk")  # needs torch through bridges


def test_the_planned_runs_are_the_study_commands_with_the_qk_router():
    for name, router, budget, seed, factor in qk.PLAN:
        argv = qk.argv_of(router, budget, seed, factor, "/tmp/runs")
        base = shlex.split(qk.study_run(budget, seed)["command"])[1:]
        got = list(argv)
        if router == "qk":
            i = got.index("--router")
            assert got[i - 2:i] == ["--model", "A"] and got[i + 1] == "qk"
            del got[i:i + 2]
        assert got[got.index("--steps") + 1] == str(factor * int(base[base.index("--steps") + 1]))
        for flag in ("--steps", "--out"):
            got.pop(got.index(flag) + 1), base.pop(base.index(flag) + 1)
        assert got == base, name
    # the function-vector study's qk run at budget 4 is this plan's qk-B4-s0 (the same key)
    assert qk.key_of(qk.argv_of("qk", 4, 0, 1, "/tmp/r")) == "Aq-tree-K7-B4-N64-s0-7f008edfb6"
    assert qk.key_of(qk.argv_of("mlp", 6, 0, 1, "/tmp/r")) == qk.study_run(6, 0)["key"]


@pytest.mark.heavy
def test_report_from_finished_runs(tmp_path):
    runs = tmp_path / "runs"
    losses = {(3, 0): 0.25, (3, 1): 0.26, (4, 0): 0.15, (4, 1): 0.155, (5, 0): 0.09, (5, 1): 0.092,
              (6, 0): 0.06, (6, 1): 0.061}
    for (b, s), loss in losses.items():
        folder = runs / qk.key_of(qk.argv_of("qk", b, s, 1, str(runs)))
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps({"loss": loss, "stderr": 0.001, "train_seconds": 1.0}))
    doc = qk.report(str(runs), dest=str(tmp_path / "qk.json"), fig=False)
    assert json.loads((tmp_path / "qk.json").read_text())["per_budget"] == doc["per_budget"]
    assert len(doc["runs"]) == 8 and all(r["command"].endswith("--out studies/scaling/qk/train") for r in doc["runs"])
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
        folder = runs / qk.key_of(qk.argv_of(router, budget, seed, factor, str(runs)))
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps({"loss": loss, "stderr": 0.001, "train_seconds": 1.0}))
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
    folder = runs / qk.key_of(qk.argv_of("qk", 3, 0, 1, str(runs)))
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps({"loss": 0.3, "stderr": 0.002, "train_seconds": 1.0}))
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
    folder = out / qk.key_of(qk.argv_of(router, budget, seed, factor, str(out)))
    folder.mkdir(parents=True)
    torch.save({"step": 4200}, folder / "checkpoint.pt")
    assert qk.park(str(out), parked=str(parked), dest=str(none)) == {name: 4200}
    target = fresh / folder.name
    assert qk.unpark(name, str(target), parked=str(parked))
    assert (target / "checkpoint.pt").read_bytes() == (folder / "checkpoint.pt").read_bytes()
    assert not qk.unpark(name, str(target), parked=str(parked))  # a run folder's own checkpoint wins
    (folder / "result.json").write_text("{}")  # finished: its parked checkpoint is dropped
    assert qk.park(str(out), parked=str(parked), dest=str(none)) == {} and not (parked / f"{name}.pt").exists()
    # a run committed in qk.json is not parked, though its folder here is unfinished
    (folder / "result.json").unlink()
    row = {"router": router, "budget": budget, "seed": seed, "factor": factor}
    none.write_text(json.dumps({"runs": [row]}))
    assert qk.park(str(out), parked=str(parked), dest=str(none)) == {}


def test_a_lane_refuses_a_run_the_plan_lacks(tmp_path):
    with pytest.raises(SystemExit, match="no planned run qk-B9-s0"):
        qk.train(str(tmp_path), ["qk-B9-s0"])


def test_rerun_trains_a_committed_row_from_its_command_and_records_the_comparison(tmp_path, monkeypatch):
    dest = tmp_path / "qk.json"
    dest.write_text(Path(qk.OUT).read_text())
    (row,) = [r for r in json.loads(dest.read_text())["runs"] if (r["budget"], r["seed"], r["factor"]) == (3, 0, 1)]
    calls = []

    def fake_fv(argv):  # stands in for fv train: the argv must be the committed command with the scratch folder
        calls.append(argv)
        folder = Path(argv[argv.index("--out") + 1]) / qk.key_of(argv[:-1])
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps({"loss": row["loss"] * 1.02}))
        return 0

    monkeypatch.setattr(qk, "fv", fake_fv)
    entry = qk.rerun("qk-B3-s0", str(tmp_path / "scratch"), dest=str(dest))
    (argv,) = calls
    assert shlex.join(argv[:-1]) == row["command"][3:].replace("studies/scaling/qk/train", str(tmp_path / "scratch"))
    assert entry["identical"] is False and entry["relative_change"] == pytest.approx(0.02)
    assert json.loads(dest.read_text())["reruns"]["qk-B3-s0"] == entry
    doc = json.loads(dest.read_text())  # a planned run whose row is not committed yet cannot be re-run
    doc["runs"] = [r for r in doc["runs"] if (r["router"], r["budget"], r["factor"]) != ("qk", 6, 4)]
    dest.write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match="not a committed row"):
        qk.rerun("qk-B6-s0-x4", str(tmp_path / "scratch"), dest=str(dest))
    with pytest.raises(SystemExit, match="not a committed row"):
        qk.rerun("qk-B9-s0", str(tmp_path / "scratch"), dest=str(dest))


def test_a_damaged_qk_json_is_a_one_line_error_not_a_fresh_start(tmp_path):
    dest = tmp_path / "qk.json"
    dest.write_text('{"runs": [')
    with pytest.raises(SystemExit, match="is damaged"):
        qk.committed_names(str(dest))
    with pytest.raises(SystemExit, match="is damaged"):
        qk.park(str(tmp_path / "runs"), parked=str(tmp_path / "parked"), dest=str(dest))


def test_an_unknown_command_prints_the_usage_and_exits_2(capsys):
    assert qk.main(["frob"]) == 2 and qk.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage:") and all(c in err for c in ("train", "park", "report", "table", "rerun"))
