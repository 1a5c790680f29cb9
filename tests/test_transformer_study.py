"""studies/transformer/run.py: the planned runs and their commands, a report that never drops a committed row,
parking of unfinished checkpoints, and refusals in one line."""
import importlib.util
import json
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("torch")


@pytest.fixture()
def study(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("transformer_study", ROOT / "studies" / "transformer" / "run.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "TRAIN", tmp_path / "train")
    monkeypatch.setattr(module, "RESULTS", tmp_path / "transformer.json")
    monkeypatch.setattr(module, "PARKED", tmp_path / "parked")
    monkeypatch.setattr(module, "HERE", tmp_path)
    return module


def test_every_planned_run_has_a_command_that_gives_its_configuration_back(study):
    from bridges.runs.config import RUN_OPTIONS, RunConfig

    runs = study.plan()
    assert len(runs) == 25 and len({r.name for r in runs}) == 25
    for run in runs:
        argv = shlex.split(run.command())[2:]
        values = {}
        for flag, value in zip(argv[::2], argv[1::2]):
            (option,) = [o for o in RUN_OPTIONS if flag in (o.flag, *o.aliases)]
            values[option.dest] = option.parse(value) if value else None
        again = RunConfig.from_options(values)
        assert again.key() == run.config().replace(train=dict(out="studies/transformer/train")).key(), run.name
    deep4 = {r.name: r for r in runs}["T-deep-B4-s0"].config()
    assert (deep4.model.n_layers, deep4.model.n_channels, deep4.train.steps) == (4, 1, 12_000)
    wide4 = {r.name: r for r in runs}["T-wide-B4-s0"].config()
    assert (wide4.model.n_layers, wide4.model.n_channels, wide4.model.theory_name) == (1, 4, "T-wide")


def test_the_predictions_are_the_registry_rows_of_the_scaling_study(study):
    preds = study.predictions()
    assert preds["T-deep"][4][0] == pytest.approx(0.1183, abs=1e-4)  # A's best_adaptive_keyed at budget 4
    assert preds["T-wide"][4][0] == pytest.approx(0.3691, abs=1e-4)  # B's best_nonadaptive_keyed


def test_report_keeps_the_committed_rows_of_runs_this_machine_lacks(study):
    row = {"model": "T-deep", "budget": 1, "seed": 0, "prior": "tree", "loss": 0.885, "stderr": 0.007,
           "steps": 3000, "steps_per_s": 7.0, "key": "k", "command": "fv train ..."}
    study.RESULTS.write_text(json.dumps({"runs": {"T-deep-B1-s0": row}}))
    data = study.report()
    assert data["runs"]["T-deep-B1-s0"] == row  # no run folder here: the committed row stays
    assert data["summary"]["table"][0]["T-deep"]["mean"] == 0.885
    assert "0.8850 (1 seed)" in (study.HERE / "transformer.md").read_text()


def test_a_damaged_results_file_is_refused_in_one_line_and_left_alone(study):
    study.RESULTS.write_text("{not json")
    with pytest.raises(SystemExit, match="damaged") as info:
        study.report()
    assert "\n" not in str(info.value) and study.RESULTS.read_text() == "{not json"


def test_a_lane_refuses_a_run_the_plan_lacks(study, capsys):
    with pytest.raises(SystemExit, match="no run named 'T-tall-B9-s0'"):
        study.main(["train", "--only", "T-tall-B9-s0"])
    with pytest.raises(SystemExit):
        study.main(["train", "--lane", "3", "--lanes", "2"])
    assert "--lane must lie in 0..1" in capsys.readouterr().err


def test_park_and_unpark_carry_an_unfinished_checkpoint(study):
    from bridges.training.train import run_dir

    run = study.plan()[0]
    folder = run_dir(run.config())
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "checkpoint.pt").write_bytes(b"state")
    assert study.park() == [run.name]
    parked = study.PARKED / folder.name
    assert (parked / "checkpoint.pt").read_bytes() == b"state"
    (folder / "checkpoint.pt").unlink()
    assert study.unpark() == [run.name] and (folder / "checkpoint.pt").read_bytes() == b"state"
