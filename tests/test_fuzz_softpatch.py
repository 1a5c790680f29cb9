"""Hostile inputs to the softmax patching study (studies/softmax/patching.py: --train-dir, --budgets, --contexts,
--samples, --keyed-samples) and the Gaussian cell of studies/softmax/study.py (--prior): one line on stderr naming
the value, exit code 2, no traceback, and nothing computed or written."""
import contextlib
import importlib.util
import io
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._cli import examples

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def script(name):
    path = os.path.join(ROOT, "studies", "softmax", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"softmax_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PATCHING = script("patching")


def refused(main, argv):
    """``(exit code, stderr)`` of ``main(argv)``; it must stop before computing anything."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    return code, err.getvalue()


def one_line(code, err, *words):
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


@pytest.mark.parametrize("argv, words", [
    (["--budgets=abc"], ["--budgets", "'abc'"]),
    (["--budgets=0"], ["--budgets", "1..4"]),
    (["--budgets=5"], ["--budgets", "'5'"]),
    (["--budgets="], ["--budgets"]),
    (["--budgets=2,,3"], ["--budgets", "'2,,3'"]),
    (["--contexts=1"], ["--contexts", ">= 2", "'1'"]),
    (["--contexts=-5"], ["--contexts", "'-5'"]),
    (["--contexts=1e9x"], ["--contexts", "'1e9x'"]),
    (["--samples=nan"], ["--samples", "'nan'"]),
    (["--keyed-samples=2.5"], ["--keyed-samples", "'2.5'"]),
    (["--train-dir"], ["--train-dir"]),
    (["--train-dir="], ["--train-dir"]),
    ([f"--train-dir={__file__}"], ["--train-dir", "not a folder"]),
    (["--bogus=1"], ["unknown options", "bogus"]),
])
def test_bad_patching_options_get_one_line(argv, words, tmp_path, monkeypatch):
    monkeypatch.setattr(PATCHING, "OUT", str(tmp_path / "patching.json"))
    one_line(*refused(PATCHING.main, argv), *words)
    assert not (tmp_path / "patching.json").exists()


@examples(25)
@given(name=st.sampled_from(["budgets", "contexts", "samples", "keyed-samples"]),
       text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))
def test_any_option_text_is_read_or_refused_in_one_line(name, text):
    """Every text either reads as a valid value or is refused in one line naming the option."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            opts = PATCHING.options([f"--{name}={text}"])
        except SystemExit as e:
            one_line(e.code, err.getvalue(), f"--{name}")
            return
    key = {"keyed-samples": "keyed_samples"}.get(name, name)
    value = opts[key]
    assert (all(1 <= b <= 4 for b in value) and value) if name == "budgets" else value >= 2


def test_the_default_train_dir_is_the_studys():
    opts = PATCHING.options([])
    assert opts["train_dir"] == os.path.join(ROOT, "studies", "softmax", "train") and opts["budgets"] == [2, 3]


@pytest.mark.parametrize("prior", ["gauss", "", "TREE", "1"])
def test_an_unknown_prior_of_the_study_gets_one_line(prior, monkeypatch, tmp_path):
    study = script("study")
    monkeypatch.setattr(study, "GAUSSIAN_OUT", str(tmp_path / "gaussian.json"))
    argv = ["--prior"] if prior == "1" else [f"--prior={prior}"]
    one_line(*refused(study.main, argv), "--prior", "tree, gaussian", repr(prior))
    assert not (tmp_path / "gaussian.json").exists()


@pytest.mark.parametrize("argv, words", [
    (["--budgets=x"], ["--budgets", "'x'"]),
    (["--budgets=0"], ["--budgets", "'0'"]),
    (["--budgets=16"], ["--budgets", "1..15"]),
    (["--seeds=-1"], ["--seeds", "'-1'"]),
    (["--steps-per-budget=0"], ["--steps-per-budget", "'0'"]),
    (["--models=AC"], ["--models", "'AC'"]),
    (["--phase=figure"], ["--phase", "'figure'"]),
    (["--depth=5"], ["--depth", "'5'"]),
])
def test_bad_options_of_the_gaussian_cell_get_one_line(argv, words, monkeypatch, tmp_path):
    study = script("study")
    monkeypatch.setattr(study, "GAUSSIAN_OUT", str(tmp_path / "gaussian.json"))
    one_line(*refused(study.main, ["--prior=gaussian", *argv]), *words)
    assert not (tmp_path / "gaussian.json").exists()


def test_a_missing_run_is_trained_from_its_recorded_command_and_found_after(tmp_path, monkeypatch):
    """The script stays re-runnable on a clean clone: a run that no folder holds is trained from the configuration of
    the command study.json records (into its own --out), then found there; --train-dir is only read; a planted
    result.json is no finished run."""
    import json

    import bridges.training.train as training
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from bridges.studies.scaling import command_of

    out, given = tmp_path / "train", tmp_path / "given"
    given.mkdir()
    cfg = RunConfig(DataConfig(prior="tree", depth=2, alpha=0.6, n_tokens=8), ModelConfig("B", 1),
                    TrainConfig(steps=3, seed=0, threads=1, out=str(out)))
    key = cfg.key()
    study = tmp_path / "study.json"
    study.write_text(json.dumps({"runs": {"tiny": {"command": command_of(cfg), "key": key},
                                          "wrong": {"command": command_of(cfg), "key": "B-other"}}}))
    monkeypatch.setattr(PATCHING, "STUDY", str(study))
    (given / key).mkdir()
    (given / key / "result.json").write_text(json.dumps({"loss": 0.0}))  # planted: not a finished run
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        folder, command = PATCHING.run_folder("tiny", str(given))
    assert folder == str(out / key) and (out / key / "result.json").is_file() and command.startswith("fv train")
    assert sorted(p.name for p in (given / key).iterdir()) == ["result.json"]  # nothing written into --train-dir
    monkeypatch.setattr(training, "train", lambda *a, **k: pytest.fail("trained again"))
    with contextlib.redirect_stderr(io.StringIO()):
        assert PATCHING.run_folder("tiny", str(given))[0] == str(out / key)
    with pytest.raises(SystemExit, match="study.json records B-other"):
        PATCHING.run_folder("wrong", str(given))
    with pytest.raises(SystemExit, match="not a run"):
        PATCHING.run_folder("absent", str(given))


@pytest.mark.parametrize("argv, words", [
    (["--budgets=x"], ["--budgets", "'x'"]),
    (["--budgets=16"], ["--budgets", "1..15"]),
    (["--seeds=-1"], ["--seeds", "'-1'"]),
    (["--models=AD"], ["--models", "'AD'"]),
    (["--phase=figure"], ["--phase", "'figure'"]),
    (["--depth=5"], ["--depth", "'5'"]),
    (["--steps=recipe", "--depth=7"], ["--steps", "'recipe'"]),
    (["--steps=scaling"], ["--steps=scaling", "depth 7"]),
    (["--samples=1"], ["--samples", "'1'"]),
    (["--samples=many"], ["--samples", "'many'"]),
    (["--families=weighted,linear"], ["--families", "'weighted,linear'"]),
])
def test_bad_options_of_the_tree_cell_get_one_line(argv, words, monkeypatch, tmp_path):
    study = script("study")
    monkeypatch.setattr(study, "OUT", str(tmp_path / "study.json"))
    one_line(*refused(study.main, argv), *words)
    assert not (tmp_path / "study.json").exists()


def test_a_softmax_twin_of_the_scaling_study_is_its_command_with_softmax_attention():
    """--depth=7 --steps=scaling: each softmax run is the committed linear run's own configuration (recipe, steps,
    seed) with softmax attention, so the two differ in their attention alone."""
    from bridges.studies.scaling import config_of_command

    study = script("study")
    for model, budget, seed in (("A", 4, 0), ("B", 2, 1), ("C", 1, 2)):
        twin = study.scaling_twin(model, budget, seed)
        linear = config_of_command(twin["command"])
        soft = study.scaling_config(model, budget, seed, "softmax")
        assert linear.key() == twin["key"]
        assert soft.model.attention == "softmax" and linear.model.attention == "linear"
        train = lambda config: {k: v for k, v in config.to_dict()["train"].items() if k != "out"}
        assert train(soft) == train(linear) and soft.data == linear.data
        assert study.scaling_config(model, budget, seed, "linear").train.out == "studies/softmax/train"
    with pytest.raises(SystemExit, match="no run of the scaling study"):
        study.scaling_twin("A", 9, 0)


def test_the_committed_runs_are_the_configs_the_study_builds():
    """Every committed run's command re-runs its key, and is the configuration ``config`` builds for it."""
    import json

    from bridges.studies.scaling import config_of_command

    study = script("study")
    for prior, name in (("tree", "study.json"), ("gaussian", "gaussian.json")):
        with open(os.path.join(ROOT, "studies", "softmax", name)) as f:
            runs = json.load(f)["runs"]
        for run in runs.values():
            cfg = config_of_command(run["command"])
            assert cfg.key() == run["key"]
            if "source" not in run and not (run["depth"] == 7 and run["attention"] == "softmax"):
                built = study.config(run["model"], run["budget"], run["seed"], run["depth"], run["attention"],
                                     run["steps"] // run["budget"], prior)
                assert built.key() == run["key"]


@pytest.mark.parametrize("text", ["[]", "{}", '{"runs": {}}', '{"runs": '])
def test_a_study_json_that_is_not_the_study_s_is_refused_and_kept(text, tmp_path, monkeypatch):
    study = script("study")
    dest = tmp_path / "study.json"
    dest.write_text(text)
    monkeypatch.setattr(study, "OUT", str(dest))
    monkeypatch.setattr(study, "train_one", lambda *a, **k: pytest.fail("trained over a damaged file"))
    if text == "{}":
        assert study.load(str(dest)) == {"runs": {}, "theory": {}}
        return
    from bridges.runs.options import run_script

    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert run_script(lambda argv: study.load(str(dest)), [], "study.py") == 2
    assert dest.read_text() == text and len(err.getvalue().splitlines()) == 1


def test_the_contrasts_are_the_ratios_of_the_seed_means(tmp_path, monkeypatch):
    import json

    study = script("study")
    runs = {}
    for model, lin, soft in (("A", (0.2, 0.4), 0.45), ("B", (0.5, 0.5), 0.8), ("C", (0.9, 0.9), 0.99)):
        for seed, loss in enumerate(lin):
            runs[f"{model}-linear-{seed}"] = dict(model=model, depth=7, budget=2, attention="linear", seed=seed, loss=loss)
        runs[f"{model}-softmax"] = dict(model=model, depth=7, budget=2, attention="softmax", seed=0, loss=soft)
    rows = lambda a, b: {"2": [{"name": "best_adaptive_keyed", "value": a}, {"name": "best_nonadaptive_keyed", "value": b}]}
    path = tmp_path / "study.json"
    path.write_text(json.dumps({"runs": runs, "theory": {"K7-weighted": rows(0.25, 0.5), "K7-softmax": rows(0.3, 0.6)}}))
    monkeypatch.setattr(study.load, "__defaults__", (str(path),))
    (line,) = [l for l in study.contrasts(7).splitlines() if l.startswith("| 2 |")]
    assert line == "| 2 | 0.60 | 0.56 | 0.50; 0.50 | 1.50 | 1.60 | 1.10 | 1.20 |"
