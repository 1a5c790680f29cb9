"""The scaling study's training scripts (studies/scaling/doubling.py, matched.py) build configs, call ``train`` and
read typed results; bad arguments and a results file that is not the study's are refused in one line with exit
status 2, before anything is trained or written; every committed row's command re-runs its key."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "studies", "scaling")
sys.path.insert(0, HERE)
pytest.importorskip("torch")
SCRIPTS = ("doubling", "matched")


def _script(name: str, *argv: str, cwd=HERE):
    return subprocess.run([sys.executable, os.path.join(HERE, f"{name}.py"), *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT}, cwd=cwd, timeout=120)


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_committed_row_s_command_re_runs_its_key(name):
    from bridges.studies.scaling import config_of_command

    for entry in json.loads(Path(HERE, f"{name}.json").read_text()).values():
        assert config_of_command(entry["command"]).key() == entry["key"]


def test_the_doubled_run_is_the_study_s_config_with_twice_its_steps():
    import doubling
    from bridges.studies.scaling import config_of_command

    (base,) = [r for r in doubling.study_runs("B") if r["seed"] == 0]
    run = doubling.doubled(base["command"], "/tmp/x")
    assert run == config_of_command(base["command"]).replace(train=dict(steps=2 * base["steps"], out="/tmp/x"))
    assert run.key() == json.loads(Path(doubling.OUT).read_text())["B-s0"]["key"]


@pytest.mark.parametrize("name,argv,says", [
    ("doubling", ["foo"], "unexpected argument 'foo'"), ("doubling", ["--out="], "--out: give a folder"),
    ("doubling", ["--seeds=abc"], "give seeds and models"), ("doubling", ["--models=XZ"], "give seeds and models"),
    ("matched", ["foo"], "unexpected argument 'foo'"), ("matched", ["--out="], "--out: give a folder"),
    ("matched", ["--budgets=9"], "give seeds and budgets"), ("matched", ["--seeds=1,x"], "give seeds and budgets")])
def test_bad_arguments_are_one_line_and_exit_status_2(name, argv, says):
    done = _script(name, *argv)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and says in done.stderr, done.stderr


@pytest.mark.parametrize("name", SCRIPTS)
@pytest.mark.parametrize("text", ["[]", "[1]", '{"A-s0": 1}', '{"runs": ', ""])
def test_a_results_file_that_is_not_the_study_s_is_refused_and_kept(name, text, tmp_path, monkeypatch):
    from bridges.runs.options import run_script

    module = __import__(name)
    dest = tmp_path / f"{name}.json"
    dest.write_text(text)
    monkeypatch.setattr(module, "OUT", str(dest))
    trained = []
    monkeypatch.setattr(module, "run", lambda *a: trained.append(a))
    assert run_script(module.main, ["--seeds=0", f"--out={tmp_path / 'runs'}"], f"{name}.py") == 2
    assert dest.read_text() == text and not trained and not (tmp_path / "runs").exists()
