"""studies/function_vectors/run.py keeps what is committed: its trained tables come from the checksummed cells
(no run folder needed), a source it cannot compute keeps its committed table, a partial run merges, and bad input or
a damaged file is refused in one line with exit status 2 before anything is written."""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "studies" / "function_vectors"
TRAINED = ("mlp A", "qk A", "B", "C")


def _load():
    spec = importlib.util.spec_from_file_location("function_vectors_run", STUDY / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def study(tmp_path, monkeypatch):
    """run.py working on a copy of the committed study (cells, JSON, page) in tmp_path; figures left out."""
    pytest.importorskip("torch")  # bridges' tables
    here = tmp_path / "function_vectors"
    shutil.copytree(STUDY / "cells", here / "cells")
    for name in ("function_vectors.json", "function_vectors.md"):
        shutil.copy(STUDY / name, here / name)
    module = _load()
    monkeypatch.setattr(module, "HERE", here)
    monkeypatch.setattr(module, "figures", lambda doc, names: [])
    return module


def _doc(module) -> dict:
    return json.loads((module.HERE / "function_vectors.json").read_text())


def _cell(name: str) -> dict:
    table = json.loads((STUDY / "cells" / f"{name}.json").read_text())
    table.pop("checksum")
    return table


def test_the_committed_tables_are_the_cells_and_none_is_missing():
    doc = json.loads((STUDY / "function_vectors.json").read_text())
    for kind in ("transplant", "injection"):
        for budget in ("B4", "B6"):
            for source in ("path", "keyed", *TRAINED):
                table = doc[kind][budget][source]
                assert "missing" not in table, (kind, budget, source)
                assert table == _cell(f"{kind}-{source.replace(' ', '-')}-{budget}"), (kind, budget, source)
    assert "not in the tables" not in (STUDY / "function_vectors.md").read_text()


def test_every_committed_cell_carries_a_checksum_that_verifies():
    module = _load()
    cells = sorted((STUDY / "cells").glob("*.json"))
    assert len(cells) == 24
    for path in cells:
        assert len(json.loads(path.read_text())["checksum"]) == 64
        assert module.read_cell(path.stem) == _cell(path.stem)


def test_defaults_without_the_runs_folder_keep_every_trained_table(study, tmp_path):
    before = _doc(study)
    for source in ("mlp A", "B", "C"):  # as the committed file was before: budget 4 marked missing
        for kind in ("transplant", "injection"):
            before[kind]["B4"][source] = {"missing": "no finished run"}
    (study.HERE / "function_vectors.json").write_text(json.dumps(before))
    assert study.main(["--runs", str(tmp_path / "no-runs")]) == 0
    doc = _doc(study)
    for kind in ("transplant", "injection"):
        for source in TRAINED:
            assert doc[kind]["B4"][source] == _cell(f"{kind}-{source.replace(' ', '-')}-B4")
    assert "not in the tables" not in (study.HERE / "function_vectors.md").read_text()


def test_a_source_that_cannot_be_computed_keeps_its_committed_table(study, tmp_path):
    committed = _doc(study)
    (study.HERE / "cells" / "transplant-B-B4.json").unlink()
    assert study.main(["--runs", str(tmp_path / "no-runs")]) == 0
    doc = _doc(study)
    assert doc["transplant"]["B4"]["B"] == committed["transplant"]["B4"]["B"]
    assert doc["injection"]["B4"]["B"] == committed["injection"]["B4"]["B"]


def test_only_models_at_one_budget_merges_into_the_committed_json(study, tmp_path):
    committed = _doc(study)
    assert study.main(["--budgets", "4", "--only", "models", "--runs", str(tmp_path / "no-runs")]) == 0
    doc = _doc(study)
    for kind in ("transplant", "injection"):
        assert doc[kind]["B6"] == committed[kind]["B6"]
        assert doc[kind]["B4"]["path"] == committed[kind]["B4"]["path"]
        assert doc[kind]["B4"]["keyed"] == committed[kind]["B4"]["keyed"]
    assert doc["transplant"] == committed["transplant"] and doc["injection"] == committed["injection"]


def _refused(study, capsys, argv) -> str:
    files = {p: p.read_bytes() for p in study.HERE.rglob("*") if p.is_file()}
    assert study.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    assert {p: p.read_bytes() for p in study.HERE.rglob("*") if p.is_file()} == files  # nothing written
    return err


@pytest.mark.parametrize("argv, says", [
    (["--budgets", "abc"], "--budgets 'abc'"),
    (["--budgets", "5", "--only", "models"], "5 is not a budget of this study"),
    (["--budgets", "4,"], "--budgets '4,'"),
    (["--only", "nothing"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(study, capsys, tmp_path, argv, says):
    assert says in _refused(study, capsys, [*argv, "--runs", str(tmp_path / "no-runs")])


@pytest.mark.parametrize("content, says", [
    (b"", "empty"),
    (b'{"effect": [[1.0, ', "not JSON"),
    (b"{}", "not a checksummed table"),
    (b"[]", "not a checksummed table"),
])
def test_a_damaged_or_empty_cell_is_one_line_naming_it(study, capsys, tmp_path, content, says):
    (study.HERE / "cells" / "injection-C-B6.json").write_bytes(content)
    err = _refused(study, capsys, ["--runs", str(tmp_path / "no-runs")])
    assert "injection-C-B6.json" in err and says in err


def test_a_hand_edited_cell_fails_its_checksum(study, capsys, tmp_path):
    path = study.HERE / "cells" / "transplant-mlp-A-B4.json"
    record = json.loads(path.read_text())
    record["effect"][-1][0] += 0.01
    path.write_text(json.dumps(record))
    err = _refused(study, capsys, ["--budgets", "6", "--runs", str(tmp_path / "no-runs")])
    assert "transplant-mlp-A-B4.json" in err and "checksum" in err
    copied = study.HERE / "cells" / "transplant-B-B4.json"  # a good cell under another cell's name
    shutil.copy(STUDY / "cells" / "transplant-C-B4.json", copied)
    path.write_bytes((STUDY / "cells" / path.name).read_bytes())
    assert "transplant-B-B4.json" in _refused(study, capsys, ["--runs", str(tmp_path / "no-runs")])


def test_a_damaged_json_is_refused_not_written_over(study, capsys, tmp_path):
    (study.HERE / "function_vectors.json").write_text('{"transplant": ')
    assert "function_vectors.json" in _refused(study, capsys, ["--runs", str(tmp_path / "no-runs")])


def test_the_script_itself_refuses_in_one_line():
    pytest.importorskip("torch")
    for argv in (["--budgets", "abc"], ["--budgets", "5", "--only", "models"]):
        done = subprocess.run([sys.executable, str(STUDY / "run.py"), *argv], capture_output=True, text=True,
                              cwd=ROOT, timeout=120)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr


def test_the_committed_commands_train_the_configs_the_script_builds():
    """The trained sources are RunConfigs (``config``); every committed command re-runs the same key."""
    pytest.importorskip("torch")
    from bridges.studies.scaling import config_of_command

    module = _load()
    doc = json.loads((STUDY / "function_vectors.json").read_text())
    for name, command in doc["commands"].items():
        model, router = ("A", "qk") if name.startswith("qk") else (name[0], "mlp")
        budget = int(name[-1])
        cfg = module.config(model, budget, "RUNS", router)
        assert config_of_command(command.replace(" --quiet", "").replace(" --format json", "")).key() == cfg.key()
        assert config_of_command(module.train_command(model, budget, "RUNS", router)) == cfg


def test_a_planted_result_is_no_finished_run(tmp_path):
    pytest.importorskip("torch")
    module = _load()
    cfg = module.config("B", 4, tmp_path)
    assert module.run_folder("B", 4, tmp_path, False) is None  # nothing there
    folder = tmp_path / cfg.key()
    folder.mkdir()
    (folder / "result.json").write_text(json.dumps({"loss": 0.01, "stderr": 0.001}))
    with pytest.raises(module.StudyError, match="not a training result"):
        module.run_folder("B", 4, tmp_path, False)
