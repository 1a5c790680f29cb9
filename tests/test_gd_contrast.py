"""studies/gd/contrast.py (issue 58, item 3 and the A/B arm): its runs are the pre-registered ones, every committed
run's command re-runs its key from the repository's root, the page is the committed JSON's, the decisions follow
from the committed numbers, and bad input or a results file that is not the study's is one line with exit 2."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("gd_contrast", ROOT / "studies" / "gd" / "contrast.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _committed() -> dict:
    return json.loads((ROOT / "studies" / "gd" / "contrast.json").read_text())


def test_the_runs_are_the_registered_ones():
    c = _load()
    tree = list(c.tree_configs((0,)))
    assert [cfg.model.n_layers for cfg in tree] == [1, 2, 3, 4, 5, 6]
    assert {(cfg.data.depth, cfg.data.alpha, cfg.data.n_tokens, cfg.data.dim) for cfg in tree} == {(7, 0.6, 64, 127)}
    ab = list(c.ab_configs())
    assert {(cfg.model.model, cfg.model.budget) for cfg in ab} == {("A", 1), ("A", 2), ("A", 4), ("B", 2), ("B", 4)}
    assert {cfg.data.n_tokens for cfg in ab} == {8, 15, 30, 120} and {cfg.data.dim for cfg in ab} == {15}
    assert all(cfg.train.steps == 1000 * cfg.model.budget for cfg in ab)


def test_every_committed_run_re_runs_its_key_from_the_root():
    from bridges.studies.scaling import config_of_command

    runs = _committed()["runs"]
    assert runs
    for key, run in runs.items():
        assert "--out studies/gd/train" in run["command"]
        assert config_of_command(run["command"]).key() == key


def test_the_page_is_the_committed_json_and_the_decisions_follow_from_its_numbers():
    c, out = _load(), _committed()
    assert c.page(out) == (ROOT / "studies" / "gd" / "contrast.md").read_text()
    assert c.tree_table(out["runs"], out["theory"]["tree"]) == out["tree"]
    assert c.ab_table(out["runs"], out["theory"]["ab"]) == out["ab"]
    for row in out["tree"]:
        if "G" in row:
            a, g = row["prediction_A"], row["G"]
            gap, err = g["loss"] - a["loss"], math.hypot(a["stderr"], g["stderr"])
            want = "prediction_A" if gap > 2 * err else "trained G" if -gap > 2 * err else "neither"
            assert row["equal_depth"]["prediction_A"] == want
    for cell in out["ab"]:
        if "A_over_B" in cell:
            assert cell["A_over_B"]["passes"] == (abs(cell["A"]["loss"] / cell["B"]["loss"] - 1) <= 0.10)


@pytest.mark.parametrize("text", ["[]", "{}", '{"runs": ', '{"runs": 3}'])
def test_a_results_file_that_is_not_the_studys_is_refused_in_one_line(text, tmp_path, monkeypatch, capsys):
    c = _load()
    fake = tmp_path / "contrast.json"
    fake.write_text(text)
    monkeypatch.setattr(c, "RESULTS", fake)
    from bridges.runs.options import run_script

    assert run_script(c.main, ["report"], "contrast.py") == 2
    assert fake.read_text() == text  # nothing rewritten
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_bad_words_are_one_line_and_exit_status_2(capsys):
    assert _load().main(["bogus"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_finished_results_reads_only_finished_runs_of_the_configs_given(tmp_path):
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from bridges.training.train import finished_results, train

    def cfg(seed):
        return RunConfig(DataConfig(depth=3, n_tokens=8), ModelConfig(model="B", budget=1),
                         TrainConfig(steps=4, batch=8, eval_every=4, eval_batches=1, seed=seed, threads=1,
                                     out=str(tmp_path)))

    done = train(cfg(0), progress=False)
    found = list(finished_results([cfg(0), cfg(1)]))  # seed 1 never ran
    assert [(c.key(), r.loss) for c, r in found] == [(cfg(0).key(), done.loss)]
