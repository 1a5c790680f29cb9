"""``fv scaling`` end to end at tiny settings: outputs, rows with reproducing commands, resume."""
import json
import shlex

import pytest

from bridges.cli import main
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.studies.scaling import ScalingConfig

TINY = ["--depth", "2", "--budgets", "1-2", "--seeds", "2", "--steps-per-budget", "3", "--samples", "300",
        "--search-samples", "50", "--workers", "1", "--quiet", "--keyed", "none", "--cut", "1"]


@pytest.mark.heavy
def test_scaling_end_to_end_and_resume(tmp_path, capsys):
    out = tmp_path / "study"
    assert main(["scaling", "--out", str(out), *TINY]) == 0
    for name in ("scaling.json", "scaling.csv", "fig_scaling.png", "fig_decay.png", "report.md"):
        assert (out / name).stat().st_size > 0, name
    study = json.loads((out / "scaling.json").read_text())
    rows = study["runs"]
    assert len(rows) == 3 * 2 * 2  # models x budgets x seeds
    assert {(r["model"], r["budget"], r["seed"]) for r in rows} == {
        (m, b, s) for m in "ABC" for b in (1, 2) for s in (0, 1)}
    for r in rows:
        assert r["steps"] == 3 * r["budget"] and r["loss"] > 0 and r["wall_seconds"] > 0
        assert r["command"].startswith("fv train ") and f"--seed {r['seed']}" in r["command"]
    assert set(study["fits"]["models"]) == {"A", "B", "C"}
    assert study["config"]["seeds"] == 2 and "progress" not in study["config"]  # numbers only, not display
    assert {"path", "top_levels", "top_levels_linear"} <= {t["name"] for t in study["theory"]["1"]}
    report = (out / "report.md").read_text()
    assert "Which law" in report and "Model A" in report and "Trained out?" in report and "## Time" in report
    for r in rows:  # the held-out curve of every run, for the convergence check
        assert r["history"][-1] == [r["steps"], r["loss"]] and r["device"] == "cpu"
    # a second run computes nothing new and gives the same numbers
    before = {r["key"]: r["loss"] for r in rows}
    cells = sorted(p.name for p in (out / "cells").iterdir())
    assert main(["scaling", "--out", str(out), *TINY]) == 0
    again = json.loads((out / "scaling.json").read_text())
    assert {r["key"]: r["loss"] for r in again["runs"]} == before
    assert sorted(p.name for p in (out / "cells").iterdir()) == cells


def test_the_command_of_a_row_reproduces_its_configuration():
    cfg = RunConfig(DataConfig(prior="gaussian", depth=3, alpha=0.3, cov="isotropic"), ModelConfig("B", 2, mlp_width=8),
                    TrainConfig(steps=7, seed=5, out="somewhere"))
    line = shlex.join(["fv", "train", *cfg.to_argv()])
    from bridges.cli import build_parser
    from bridges.commands import config_from_args

    args = build_parser().parse_args(shlex.split(line)[1:])
    assert config_from_args(args) == cfg


def test_a_rows_command_is_read_back_as_its_configuration():
    from bridges.studies.scaling import command_of, config_of_command

    cfg = RunConfig(DataConfig(prior="tree", depth=3, alpha=0.6), ModelConfig("A", 2, mlp_width=8),
                    TrainConfig(steps=7, seed=5, out="somewhere"))
    line = command_of(cfg)
    assert config_of_command(line) == cfg
    assert config_of_command(command_of(cfg, "elsewhere")) == cfg.replace(train=dict(out="elsewhere"))
    again = config_of_command(line).replace(train=dict(steps=14))
    assert again.key() != cfg.key() and again == cfg.replace(train=dict(steps=14))
    for bad in ("fv scaling --out x", "train --model A", 3):
        with pytest.raises(ValueError, match="not an fv train command"):
            config_of_command(bad)
    with pytest.raises(ValueError, match="unknown option --nonsense"):
        config_of_command(line + " --nonsense 1")


@pytest.mark.parametrize("argv,match", [
    (["--budgets", "0-2"], "budgets must lie in"),
    (["--budgets", "a-b"], "--budgets must be a range"),
    (["--budgets", "1-2", "--models", "AD"], "models must be distinct letters"),
    (["--budgets", "1-2", "--models", "AA"], "models must be distinct letters of ABCTG, got 'AA'"),
    (["--budgets", "1-2", "--seeds", "0"], "seeds must be"),
    (["--budgets", "1-2", "--flop-match", "A:A"], "flop_match must name a model of the study"),
    (["--budgets", "1-2", "--models", "BC", "--flop-match", "A:B"], "flop_match must name a model of the study"),
    (["--budgets", "1-2", "--flop-match", "A:Z"], "flop_match must name a model of the study"),
    (["--budgets", "1-2", "--flop-match", "AB"], "--flop-match takes two model letters as M:REF"),
])
def test_bad_options_are_one_line_errors(tmp_path, capsys, argv, match):
    assert main(["scaling", "--out", str(tmp_path / "x"), "--depth", "2", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and len(err.splitlines()) == 1


def test_steps_rule_is_stated_and_applied():
    cfg = ScalingConfig(depth=3, budgets=(1, 3), models="A", seeds=1, steps_per_budget=10)
    assert [r.train.steps for r in cfg.runs("x")] == [10, 30]
    recipe = ScalingConfig(depth=3, budgets=(1, 3), models="AB", seeds=1)
    assert [(r.model.model, r.train.steps) for r in recipe.runs("x")] == [("A", 5000), ("B", 2500), ("A", 15000),
                                                                          ("B", 7500)]


def test_a_flop_matched_model_trains_for_its_reference_flops_and_the_report_says_so():
    from bridges.prices.flops import flop_matched_steps, step_flops
    from bridges.studies.scaling_report import _steps_words

    cfg = ScalingConfig(depth=3, budgets=(1, 3), models="AB", seeds=1, steps_per_budget=100, flop_match=("A", "B"))
    runs = {(r.model.model, r.model.budget): r for r in cfg.runs("x")}
    assert runs["B", 1].train.steps == 100 and runs["B", 3].train.steps == 300  # the reference keeps the rule
    for b in (1, 3):
        a, ref = runs["A", b], runs["B", b]
        assert a.train.steps == flop_matched_steps(a, ref)
        assert abs(a.train.steps * step_flops(a) - ref.train.steps * step_flops(ref)) <= step_flops(a) / 2
    assert runs["A", 3].train.steps < 300  # a step of A at budget 3 costs more than one of B (batch 256 vs 128)
    assert f"{runs['A', 3].train.steps} at budget 3" in _steps_words(cfg)
    alone = ScalingConfig(depth=3, budgets=(1, 3), models="A", seeds=1, steps_per_budget=100, flop_match=("A", "B"))
    assert [r.train.steps for r in alone.runs("x")] == [runs["A", 1].train.steps, runs["A", 3].train.steps]


def test_convergence_reads_the_last_fifth_of_each_held_out_curve():
    from bridges.studies.scaling_report import convergence

    flat = {"model": "A", "budget": 6, "seed": 0, "steps": 1000, "loss": 0.099,
            "history": [[0, 5.0], [600, 0.2], [800, 0.1], [1000, 0.099]]}
    steep = dict(flat, seed=1, loss=0.08, history=[[0, 5.0], [700, 0.1], [900, 0.09], [1000, 0.08]])
    out = convergence([flat, steep])
    assert out[0]["step_80"] == 800 and out[0]["change"] == pytest.approx(0.01) and out[0]["converged"]
    assert out[1]["step_80"] == 700 and out[1]["change"] == pytest.approx(0.2) and not out[1]["converged"]


@pytest.mark.heavy
def test_keyed_prediction_rows_join_the_study(tmp_path):
    from bridges.studies.scaling import scaling_study

    cfg = ScalingConfig(out=str(tmp_path / "k"), depth=2, budgets=(1, 2), models="AB", seeds=1, steps_per_budget=3,
                        samples=300, search_samples=60, workers=1, progress=False, cut=1)
    result = scaling_study(cfg, log=lambda *a: None)
    rows = {t["name"]: t for t in result["theory"][2]}
    assert rows["best_adaptive_keyed"]["role"] == "prediction" and rows["best_adaptive_keyed"]["models"] == ["A"]
    assert rows["best_nonadaptive_keyed"]["models"] == ["B"] and rows["best_adaptive"]["role"] != "prediction"
    assert rows["best_adaptive_keyed"]["keys"] == "weighted"
    frame = result.to_frame("theory")  # a ScalingStudy: its theory rows with their budget, its runs
    assert sorted(set(frame["budget"])) == [1, 2] and len(result.to_frame("runs")) == len(result.runs) == 4
    assert result.to_dict()["fits"] == result.fits


def test_report_states_the_seed_spread_only_where_there_is_one():
    from bridges.studies.scaling_report import report_markdown

    def rows(seeds):
        return [{"model": "A", "budget": b, "seed": s, "loss": 0.5 / b + 0.01 * s, "wall_seconds": 60.0}
                for b in (1, 2) for s in range(seeds)]

    no_fits = {"cut": 2, "models": {}, "theory": {}}
    one = report_markdown(ScalingConfig(budgets=(1, 2), models="A", seeds=1, threads=1), rows(1), {}, no_fits)
    assert "| 1 | 0.5000 |" in one and "±" not in one
    assert "1 seed each" in one and "one seed per point" in one and "1 thread per run" in one
    three = report_markdown(ScalingConfig(budgets=(1, 2), models="A", seeds=3, threads=2), rows(3), {}, no_fits)
    assert "| 1 | 0.5100 ± 0.01 (0.5000 .. 0.5200) |" in three
    assert "3 seeds each" in three and "2 threads per run" in three


def test_report_divides_each_model_by_the_theory_it_is_held_against():
    from bridges.studies.scaling_report import report_markdown

    rows = [{"model": m, "budget": b, "seed": 0, "loss": loss, "wall_seconds": 1.0}
            for m, b, loss in [("A", 1, 0.3), ("A", 2, 0.1), ("C", 1, 0.9), ("C", 2, 0.8)]]
    theory = {1: [{"name": "best_adaptive", "value": 0.4}, {"name": "top_levels_linear", "value": 0.9}],
              2: [{"name": "best_adaptive", "value": 0.2}]}
    report = report_markdown(ScalingConfig(budgets=(1, 2), models="AC", seeds=1), rows, theory,
                             {"models": {}, "theory": {}})
    assert "| budget | A / best_adaptive | C / top_levels_linear |" in report
    assert "| 1 | 0.75 **out** | 1.00 |" in report and "| 2 | 0.50 **out** |  |" in report
    assert "- Model A: inside at 0 of 2 budgets; outside at B 1: 0.75, B 2: 0.50." in report
    assert "- Model C: inside at 1 of 1 budgets." in report


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_scaling_on_a_gpu_records_the_device(tmp_path):
    out = tmp_path / "gpu"
    assert main(["scaling", "--out", str(out), *TINY, "--device", "cuda"]) == 0
    study = json.loads((out / "scaling.json").read_text())
    assert {r["device"] for r in study["runs"]} == {"cuda"} and study["config"]["device"] == "cuda"
    assert "Device: cuda" in (out / "report.md").read_text()


@pytest.mark.heavy
def test_report_only_covers_the_finished_runs_and_trains_nothing(tmp_path, capsys):
    out = tmp_path / "study"
    one_budget = [a if a != "1-2" else "1" for a in TINY]
    assert main(["scaling", "--out", str(out), *one_budget]) == 0  # budget 1 trained
    cells = sorted(p.name for p in (out / "cells").iterdir() if p.name.startswith("run-"))
    assert main(["scaling", "--out", str(out), *TINY, "--report-only"]) == 0  # budgets 1-2 asked, 1 done
    assert sorted(p.name for p in (out / "cells").iterdir() if p.name.startswith("run-")) == cells
    study = json.loads((out / "scaling.json").read_text())
    assert {r["budget"] for r in study["runs"]} == {1} and len(study["runs"]) == 3 * 2
    assert set(study["theory"]) == {"1", "2"}
    assert "**Partial report: 6 of 12 runs finished**" in (out / "report.md").read_text()
    empty = tmp_path / "empty"
    assert main(["scaling", "--out", str(empty), *TINY, "--report-only"]) == 2
    assert "no finished run of this study yet" in capsys.readouterr().err
