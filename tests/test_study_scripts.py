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
def test_bad_arguments_are_one_line_and_exit_status_2(name, argv, says, capsys, monkeypatch):
    from bridges.runs.options import run_script

    module = __import__(name)
    monkeypatch.setattr(module, "run", lambda *a: pytest.fail("trained on bad arguments"))
    try:
        code = run_script(module.main, argv, f"{name}.py")
    except SystemExit as exc:  # script_options: its line is printed, the exit status is 2
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and says in err, err


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


# every study script of this checkout but those of studies/transformer and studies/gd (tested beside their studies),
# with a command line it must refuse before computing or writing anything
REFUSED = [("atoms/diversity.py", ["foo"]), ("atoms/trained.py", ["foo"]), ("scaling/causal.py", ["--budget=abc"]),
           ("scaling/causal.py", ["--budget=9"]), ("scaling/decided.py", ["foo"]), ("scaling/distil.py", ["--budgets=x"]),
           ("scaling/distil_fit.py", ["foo"]), ("scaling/distil_scan.py", ["foo"]), ("scaling/doubling.py", ["foo"]),
           ("scaling/matched.py", ["foo"]), ("scaling/model_a.py", ["foo"]), ("scaling/prereg.py", ["foo"]),
           ("scaling/prereg.py", ["--stage=x"]), ("scaling/qk.py", ["train", "foo"]), ("scaling/real_tokens.py",
           ["--budgets=x"]), ("scaling/regime.py", ["foo"]), ("scaling/teacher.py", ["--contexts=x"]),
           ("softmax/patching.py", ["--budgets=x"]), ("softmax/search.py", ["--samples=x"]),
           ("softmax/study.py", ["--budgets=x"]), ("theory_rows/theory_rows.py", ["foo"]),
           ("function_vectors/run.py", ["--budgets", "abc"]), ("grid/keyed_rows.py", ["foo"])]


def _committed() -> dict:
    studies = Path(ROOT, "studies")
    return {p: p.read_bytes() for p in studies.rglob("*") if p.suffix in (".json", ".md", ".png") and p.is_file()}


@pytest.mark.heavy
def test_every_study_script_refuses_bad_input_in_one_line_and_writes_nothing():
    scripts = {str(p.relative_to(Path(ROOT, "studies"))) for p in Path(ROOT, "studies").glob("*/*.py")}
    assert {s for s, _ in REFUSED} == {s for s in scripts if not s.startswith(("transformer/", "gd/"))}
    before = _committed()
    for script, argv in REFUSED:
        done = subprocess.run([sys.executable, os.path.join(ROOT, "studies", script), *argv], capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": ROOT}, cwd=os.path.dirname(
                                  os.path.join(ROOT, "studies", script)), timeout=120)
        err = done.stderr.strip().splitlines()
        if script == "grid/keyed_rows.py":  # argparse's own usage line and error line
            err = err[1:]
        assert done.returncode == 2 and len(err) == 1 and "Traceback" not in done.stderr, (script, done.stderr)
    assert _committed() == before


@pytest.mark.parametrize("script,options", [("regime", {"table", "only", "cheap"}),
                                            ("prereg", {"stage", "table", "exact-table", "one-layer"})])
def test_a_stray_word_is_refused_before_the_scan_runs(script, options, monkeypatch, capsys):
    """regime.py and prereg.py ran their whole scan on ``foo`` and rewrote their JSON with new timings."""
    import bridges.runs.options as options

    module = __import__(script)
    ran = []
    monkeypatch.setattr(options, "study_json", lambda *a, **k: ran.append(a))  # the scan's first read
    monkeypatch.setattr(module, "load", lambda *a, **k: ran.append(a), raising=False)
    monkeypatch.setattr(sys, "argv", [f"{script}.py", "foo"])
    with pytest.raises(SystemExit) as exc:
        module.main()
    assert exc.value.code == 2 and not ran and "unexpected argument 'foo'" in capsys.readouterr().err


@pytest.mark.parametrize("script,what", [("causal", "causal checks"), ("decided", "decided tests")])
@pytest.mark.parametrize("text", ["[]", "[1]", '{"runs": ', "null"])
def test_a_results_file_of_the_probes_and_tests_that_is_not_the_study_s_is_refused(script, what, text, tmp_path,
                                                                                    monkeypatch, capsys):
    from bridges.runs.options import run_script

    module = __import__(script)
    dest = tmp_path / f"{script}.json"
    dest.write_text(text)
    monkeypatch.setattr(module, "OUT", str(dest))
    argv = ["--table"] if script == "decided" else ["--only=models", "--qk-runs=" + str(tmp_path)]
    assert run_script(module.main, argv, f"{script}.py") == 2
    err = capsys.readouterr().err
    assert dest.read_text() == text and len(err.splitlines()) == 1 and f"{script}.json" in err


@pytest.mark.parametrize("text", ["[]", "{}", '{"runs": {}}', '{"runs": ['])
def test_the_atoms_trained_points_refuse_a_results_file_that_is_not_the_study_s(text, tmp_path, monkeypatch, capsys):
    sys.path.insert(0, os.path.join(ROOT, "studies", "atoms"))
    import trained

    dest = tmp_path / "trained.json"
    dest.write_text(text)
    monkeypatch.setattr(trained, "OUT", dest)
    monkeypatch.setattr(trained, "train", lambda state: pytest.fail("trained over a damaged file"))
    if text == "{}":  # an empty object is no results yet: the report is empty
        assert trained.load() == {"runs": {}, "theory": {}}
        return
    assert trained.main(["--report"]) == 2 and dest.read_text() == text
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_the_atoms_runs_are_configs_whose_commands_re_run_the_committed_keys():
    sys.path.insert(0, os.path.join(ROOT, "studies", "atoms"))
    import trained
    from bridges.studies.scaling import command_of, config_of_command

    for name, row in json.loads(Path(trained.OUT).read_text())["runs"].items():
        model, M = name.split("-M")
        cfg = trained.config(model, int(M))
        assert cfg.key() == row["key"] and config_of_command(command_of(cfg)) == cfg
        assert config_of_command(row["command"].replace(" --quiet", "").replace(" --format json", "")).key() == row["key"]
