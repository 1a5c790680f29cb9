"""Trained models beside the theory (bridges.analysis.compare): a trained Model C against the exact linear
theory, the theory rows, the learned routing of a hand-built model, and the prediction checks."""
import fvnum
import json
import math
from pathlib import Path

import pytest
import torch

from bridges.analysis.compare import (
    AUDIT_SAMPLES, compare, learned_routing, grid_checks, seed_summary, summary_markdown,
    theory_losses, to_markdown,
)
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.data import data_channel, fv_prior
from bridges.models.networks import linear_readout, path_model, top_levels_keys
from bridges.training.train import train

torch.set_num_threads(1)


def gaussian_optimum(data: DataConfig, budget: int) -> float:
    """``fvnum.linear_theory.gaussian_optimum`` of the prior of ``data`` at the effective noise of its tokens."""
    from fvnum.linear_theory import gaussian_optimum as optimum

    return optimum(fv_prior(data), budget, data_channel(data))


def test_trained_model_c_reaches_the_linear_theory():
    """Model C (linear keys, bilinear readout) is a linear estimator: after training it sits at the linear
    MMSE loss of the top-levels design (stated tolerance 3%) and never below the best linear loss."""
    data = DataConfig(prior="tree", depth=3, alpha=0.5, n_tokens=128)
    cfg = RunConfig(data, ModelConfig(model="C", budget=2),
                    TrainConfig(steps=400, lr=1e-2, batch=128, warmup=50, eval_every=400, eval_batches=8))
    result = train(cfg, progress=False)
    linear = linear_readout(data, top_levels_keys(data, 2))[1]
    best_linear = gaussian_optimum(data, 2)
    assert abs(result.loss / linear - 1) < 0.03
    assert result.loss > best_linear - 5 * result.stderr
    untrained = train(cfg.replace(train=dict(steps=1, warmup=1)), progress=False)
    assert untrained.loss > 1.5 * linear  # the check is not passed by an untrained model


def test_gaussian_optimum_is_water_filling_at_the_effective_noise():
    data = DataConfig(prior="gaussian", cov="isotropic", depth=2, n_tokens=100, s2=0.0)
    # isotropic C = I_3: tau^2 = 3 / 100; B <= D: D - B / (1 + tau^2) (THEORY.md section 5)
    assert gaussian_optimum(data, 2) == pytest.approx(3 - 2 / (1 + 0.03), rel=1e-12)


def test_theory_rows_are_ordered_as_the_theory_says():
    data = DataConfig(prior="tree", depth=3, alpha=0.5, n_tokens=128)
    rows = {r["name"]: r for r in theory_losses(data, 2, samples=4000, search_samples=500, dense=False, keyed=None)}
    second_moment = 1 + 0.5 + 0.25
    for r in rows.values():
        assert 0 <= r["value"] <= second_moment
    assert rows["best_adaptive"]["value"] <= rows["path"]["value"] + 5 * rows["path"]["stderr"] + 1e-12
    # the linear decoder cannot beat the Bayes decoder of the same design, nor the best linear design
    assert rows["top_levels_linear"]["value"] >= rows["top_levels"]["value"] - 5 * rows["top_levels"]["stderr"]
    assert rows["top_levels_linear"]["value"] >= rows["gaussian_optimum"]["value"] - 1e-12
    # every row says which channel it is for: the models' tokens channel, or plainly another one
    assert {r["channel"] for r in rows.values()} <= {"tokens", "gaussian", "noiseless"}
    assert rows["gaussian_optimum"]["channel"] == "gaussian" and rows["top_levels_linear"]["channel"] == "tokens"
    # the best linear design of the tokens channel reads the top levels (the prior's top eigen-directions)
    assert rows["best_linear_nonadaptive"]["value"] == pytest.approx(rows["top_levels_linear"]["value"], rel=1e-12)


def test_theory_rows_are_the_fvnum_table_of_the_models_channel():
    """bridges lays out fvnum's table: the same numbers, for the tokens channel of the data's N and s2."""
    from fvnum.theory import comparison_table

    from bridges.analysis.compare import theory_table
    from bridges.training.data import data_channel, fv_prior

    data = DataConfig(prior="gaussian", depth=3, n_tokens=64)
    table = theory_table(data, 2, samples=1000, seed=2, keyed=None)
    channel = data_channel(data)
    assert table.channel == channel and channel.kind == "tokens" and channel.n_tokens == 64
    assert table.to_dict() == comparison_table(fv_prior(data), 2, fvnum.tokens(64, keys=None), samples=1000,
                                               seed=2).to_dict()
    assert theory_losses(data, 2, samples=1000, seed=2, keyed="none") == table.to_dict()["rows"]


def test_learned_routing_of_the_hand_built_path_model_is_the_path():
    data = DataConfig(prior="tree", depth=3, alpha=0.5, n_tokens=512)
    routing = learned_routing(path_model(data, 3), data, n_contexts=64, n_stein=64)
    for layer in routing["layers"]:
        info = layer["channels"][0]
        assert info["on_path_node"] == pytest.approx(1.0, abs=1e-6)
        assert info["top_is_path_node"] == 1.0
        assert all(p["top_node"] == p["path_node"] for p in info["by_prefix"])


def _table(prior, depth, budget, model, loss, theory):
    return {"prior": prior, "depth": depth, "budget": budget, "model": model, "trained": {"loss": loss},
            "theory": [{"name": k, "value": v} for k, v in theory.items()]}


def test_grid_checks_follow_the_stated_thresholds():
    th = {"top_levels_linear": 0.5, "gaussian_optimum": 0.4}
    tables = [_table("tree", 6, 4, "A", 0.06, th), _table("tree", 6, 4, "B", 0.1, th),
              _table("tree", 6, 4, "C", 0.61, th),
              _table("gaussian", 6, 4, "A", 0.45, th), _table("gaussian", 6, 4, "B", 0.40, th),
              _table("gaussian", 6, 4, "C", 0.47, th)]
    got = {c["prediction"]: c["holds"] for c in grid_checks(tables)}
    assert got["tree K6 B4: A <= 0.6 x B"] is True  # 0.06 = 0.6 x 0.1
    assert got["tree K6 B4: C within 20% of linear top-levels theory"] is False  # 1.22
    assert got["Gaussian K6 B4: A within 15% of the optimum (gaussian channel)"] is True  # 1.125
    assert got["Gaussian K6 B4: C within 15% of the optimum (gaussian channel)"] is False  # 1.175
    assert got["Gaussian K6 B4: A / B in [0.85, 1.15]"] is True  # 1.125
    # with the tokens channel's row (the models' channel), that row is the bar
    tok = {**th, "best_linear_nonadaptive": 0.45}
    got = {c["prediction"]: c["holds"] for c in grid_checks(
        [_table("gaussian", 6, 4, m, v, tok) for m, v in zip("ABC", (0.45, 0.40, 0.47))])}
    assert got["Gaussian K6 B4: A within 15% of the optimum (tokens channel)"] is True  # 1.0
    assert got["Gaussian K6 B4: C within 15% of the optimum (tokens channel)"] is True  # 1.044
    md = to_markdown({**tables[0], "key": "k", "n_tokens": 128, "seed": 0, "tau": 0.1,
                      "trained": {"loss": 0.06, "stderr": 0.01, "steps": 1, "wall_s": 1.0},
                      "theory": [{"name": "path", "value": 0.1, "stderr": 0.0, "how": "exact", "what": "adaptive"}]})
    assert "**0.0600**" in md and "| path (adaptive) | 0.1000 |" in md
    # a stored row without a channel is the models' channel; without a role, fvnum.theory describes it
    assert md.rstrip().endswith("| exact | reference | coordinate | linear | tokens |")


GRID = Path(__file__).resolve().parents[2] / "studies" / "grid" / "table.json"


def _grid_cells():
    from fvnum.theory import describe_rows

    runs = json.loads(GRID.read_text())["runs"]
    return [(t, describe_rows(t["theory"])) for t in runs]


def test_no_trained_model_of_the_grid_beats_a_row_called_a_bound_or_an_optimum():
    """Over the grid's trained cells (studies/grid/table.json): a trained model does not beat, by more than 2 SE
    + 1%, a row that is a lower bound proven for it or that is called an optimum and names it; every model
    has exactly one prediction row. The check has teeth: the noiseless coordinate optimum, were it called a
    bound for Model A, would be beaten by far."""
    checked = 0
    for t, rows in _grid_cells():
        model, trained = t["model"], t["trained"]
        assert sum(r["role"] == "prediction" and model in r["models"] for r in rows) == 1
        for r in rows:
            called = r["role"] == "lower_bound" or "optim" in r["name"]
            if not (called and model in r["models"]):
                continue
            slack = 2 * math.hypot(trained["stderr"], r.get("stderr") or 0.0) + 0.01 * r["value"]
            assert trained["loss"] >= r["value"] - slack, (t["key"], r["name"], trained["loss"], r["value"])
            checked += 1
    assert checked >= 5  # Model C against the best linear loss in every cell
    # the keyed rows are the predictions of A and B, say they bound no trained model, and are not beaten beyond noise
    for t, rows in _grid_cells():
        if t["model"] == "C":
            continue
        (pred,) = [r for r in rows if r["role"] == "prediction" and t["model"] in r["models"]]
        assert pred["name"] in ("best_adaptive_keyed", "best_nonadaptive_keyed") and pred["keys"] == "weighted"
        assert "upper bound on that family's optimum, not a bound on any trained model" in pred["what"]
        slack = 2 * math.hypot(t["trained"]["stderr"], pred["stderr"]) + 0.01 * pred["value"]
        assert t["trained"]["loss"] >= pred["value"] - slack, (t["key"], pred["name"], t["trained"]["loss"], pred["value"])
    a = next(t for t, _ in _grid_cells() if (t["model"], t["prior"], t["depth"]) == ("A", "tree", 4))
    lower = next(r for r in a["theory"] if r["name"] == "optimum_lower")
    assert a["trained"]["loss"] < lower["value"] / 10  # why optimum_lower names no model


def test_seed_summary_aggregates_seeds_beside_the_prediction():
    tables = [t for t, _ in _grid_cells()]
    summary = {(r["prior"], r["depth"], r["budget"], r["model"]): r for r in seed_summary(tables)}
    b = summary[("tree", 6, 4, "B")]
    losses = [t["trained"]["loss"] for t in tables if (t["prior"], t["depth"], t["model"]) == ("tree", 6, "B")]
    assert b["n_seeds"] == 2 and b["mean"] == pytest.approx(sum(losses) / 2)
    assert b["spread"] == pytest.approx(abs(losses[0] - losses[1]) / math.sqrt(2))
    assert b["prediction"] == "best_nonadaptive_keyed" and b["ratio"] == pytest.approx(b["mean"] / b["prediction_value"])
    # the keyed rows (weighted keys) are the predictions of A and B in every cell: trained / prediction reported
    for (prior, depth, budget, model), r in summary.items():
        want = {"A": "best_adaptive_keyed" if prior == "tree" else "best_nonadaptive_keyed",
                "B": "best_nonadaptive_keyed", "C": "top_levels_linear"}[model]
        assert r["prediction"] == want, (prior, model)
        assert r["difference"] == pytest.approx(r["mean"] - r["prediction_value"]) and r["difference_se"] > 0
        if (prior, depth, model) == ("tree", 4, "A"):  # 0.00053 +- 0.00027: 0 within 3 SE, so no ratio
            assert r["ratio"] is None and r["prediction_value"] < 3 * r["prediction_stderr"]
        else:
            assert r["ratio"] == pytest.approx(r["mean"] / r["prediction_value"]), (prior, model)
    # stored tables named the water-filling row optimal_mc: read under its name, it is no optimum under tokens
    gaussian = {r["name"]: r for r in _grid_cells()[-1][1]}
    assert "water_filling_mc" in gaussian and gaussian["water_filling_mc"]["renamed_from"] == "optimal_mc"
    md = summary_markdown(seed_summary(tables))
    assert "| tree | 6 | 4 | B | " in md and "(2 seeds) | best_nonadaptive_keyed" in md
    a = summary[("tree", 4, 3, "A")]
    assert f"| difference {a['difference']:+.2g} ± {a['difference_se']:.2g} |" in md and "| 0.595 |" not in md


@pytest.mark.parametrize("loss, loss_se, pred, pred_se, ratio", [
    (0.06, 0.01, 0.05, 0.001, 1.2),        # clearly above 0: the ratio
    (0.06, 0.01, 0.1, 0.0, 0.6),           # exact and positive: the ratio
    (0.19, 0.002, 3.4e-8, 3e-8, None),     # example 04's default: 0 within its error (the ratio was 5.6e6)
    (0.015, 0.001, 0.0004, 0.00014, None),  # 2.9 SE: still 0 within 3 SE
    (0.015, 0.001, 0.0, 0.0, None),        # exactly 0
    (0.015, 0.001, -0.001, 0.01, None),    # a Monte Carlo row below 0
])
def test_a_prediction_zero_within_its_error_gets_the_difference_not_a_ratio(loss, loss_se, pred, pred_se, ratio):
    from bridges.analysis.compare import beside_prediction, beside_text

    b = beside_prediction(loss, loss_se, pred, pred_se)
    assert b["difference"] == pytest.approx(loss - pred) and b["difference_se"] == pytest.approx(math.hypot(loss_se, pred_se))
    if ratio is None:
        assert b["ratio"] is None and b["near_zero"] and beside_text(b).startswith("difference ")
    else:
        assert b["ratio"] == pytest.approx(ratio) and not b["near_zero"] and beside_text(b) == f"{ratio:.3f}"
    md = to_markdown({"model": "A", "prior": "tree", "depth": 3, "budget": 2, "n_tokens": 128, "seed": 0, "tau": 0.1,
                      "key": "k", "trained": {"loss": loss, "stderr": loss_se, "steps": 1, "wall_s": 1.0},
                      "theory": [{"name": "best_adaptive_keyed", "value": pred, "stderr": pred_se, "how": "mc",
                                  "what": "adaptive", "keys": "weighted"}]})
    first = md.splitlines()[2]  # the model's own line, under the heading
    assert first.startswith(f"Model A: trained {loss:.4f} ± {loss_se:.1g} against its prediction ")
    assert ("): ratio " in first) == (ratio is not None) and ("): difference " in first) == (ratio is None)


def test_compare_attaches_the_audit_and_the_prediction(tmp_path):
    data = DataConfig(prior="tree", depth=2, alpha=0.5, n_tokens=64)
    cfg = RunConfig(data, ModelConfig(model="B", budget=2),
                    TrainConfig(steps=3, warmup=1, eval_every=3, eval_batches=1))
    result = train(cfg, progress=False)
    theory = theory_losses(data, 2, samples=500, search_samples=100, keyed=None)
    table = compare(result, theory=theory)
    assert table["audit"]["model"] == "B" and table["audit"]["bayes_on_readings"]["n"] == AUDIT_SAMPLES
    assert all({"role", "models", "class", "keys"} <= set(r) for r in table["theory"])
    md = to_markdown(table)
    from bridges.analysis.compare import beside_of

    b = beside_of(table)  # a ratio, or the difference where the prediction is 0 within its error
    assert b["prediction"] == "best_nonadaptive_unit" and b["difference"] == pytest.approx(
        table["trained"]["loss"] - b["prediction_value"])
    beside = "ratio" if b["ratio"] is not None else "difference"
    assert "Audit of its readings, all on the audit's own" in md
    assert md.splitlines()[2].startswith("Model B: trained ") and f"(best_nonadaptive_unit): {beside} " in md


@pytest.mark.heavy
def test_one_name_per_measurement_class_and_the_class_always_said(capsys):
    """fv mc: optimal_nonadaptive_unit / _coordinate; the bare name is refused unless --measurement says the
    class; fv derive: optimal_nonadaptive_coordinate is its (only) class, the bare name refused."""
    from bridges.cli import main

    mc = ["mc", "--depth", "3", "--budget", "2", "--tau", "0.3", "--samples", "500", "--format", "json"]
    assert main([*mc, "--strategy", "optimal_nonadaptive_unit"]) == 0
    unit = json.loads(capsys.readouterr().out)
    assert main([*mc, "--strategy", "optimal_nonadaptive"]) == 2  # no class: refused, saying the class names
    assert "say the class: optimal_nonadaptive_coordinate or optimal_nonadaptive_unit" in capsys.readouterr().err
    assert main([*mc, "--strategy", "optimal_nonadaptive", "--measurement", "unit"]) == 0  # the class said
    out = capsys.readouterr()
    assert json.loads(out.out) == unit and (unit["strategy"], unit["measurement"]) == ("optimal_nonadaptive_unit", "unit")
    assert "note: --strategy optimal_nonadaptive --measurement unit is --strategy optimal_nonadaptive_unit" in out.err
    assert main([*mc, "--strategy", "optimal_nonadaptive_coordinate"]) == 0
    assert json.loads(capsys.readouterr().out)["measurement"] == "coordinate"
    assert main([*mc, "--strategy", "optimal_nonadaptive_unit", "--measurement", "coordinate"]) == 2
    assert "contradicts" in capsys.readouterr().err
    derive = ["derive", "tree-loss", "--depth", "4", "--budget", "2", "--alpha", "1/2", "--format", "json"]
    assert main([*derive, "--strategy", "optimal_nonadaptive_coordinate"]) == 0
    new = json.loads(capsys.readouterr().out)
    assert new["inputs"]["measurement"] == "coordinate"
    assert main([*derive, "--strategy", "optimal_nonadaptive"]) == 2  # fv derive refuses the bare name too
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "say the class: optimal_nonadaptive_coordinate or optimal_nonadaptive_unit" in err[0]


def test_fv_bounds_says_the_channel_of_its_exact_value(capsys):
    from bridges.cli import main

    assert main(["bounds", "--depth", "2", "--budget", "1", "--tokens", "64", "--samples", "500"]) == 0
    assert "exact under the gaussian channel at the same tau (no exact value for tokens" in capsys.readouterr().out
    assert main(["bounds", "--depth", "2", "--budget", "1", "--tokens", "64", "--samples", "500", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["exact_channel"] == "gaussian"


def test_the_report_legend_does_not_call_the_noiseless_policy_an_optimum():
    from bridges.studies.figures import STYLE

    label = STYLE["bellman_noiseless"][0]
    assert "not the noisy optimum" in label and "Bellman optimum" not in label
    assert "coordinate class" in STYLE["optimal_nonadaptive"][0]


def _one_run(model="A", loss=0.9335, audit=True):
    t = {"model": model, "prior": "gaussian", "depth": 4, "budget": 2, "n_tokens": 64, "seed": 0, "tau": 0.1, "key": "k",
         "trained": {"loss": loss, "stderr": 0.004, "n": 4096, "steps": 4000, "wall_s": 100.0},
         "theory": [{"name": "best_nonadaptive_keyed", "value": 0.9267, "stderr": 0.001, "how": "mc n=8000",
                     "what": "keyed", "keys": "weighted"}]}
    if audit:  # Gaussian A of the report: the audit's own 200 contexts, where the model has 0.870
        t["audit"] = {"samples": 200, "decoder": "importance sampling", "loss": {"value": 0.870, "stderr": 0.03},
                      "bayes_on_readings": {"value": 0.879, "stderr": 0.03}, "decoder_gap": {"value": -0.009, "stderr": 0.004}}
    return t


def test_one_seed_prints_one_seed_not_a_zero_spread():
    summary = seed_summary([_one_run()])
    assert summary[0]["n_seeds"] == 1 and summary[0]["spread"] is None
    md = summary_markdown(summary)
    assert "| 0.9335 (1 seed) |" in md and "± 0 " not in md and "± 0.0 " not in md
    two = summary_markdown(seed_summary([_one_run(), {**_one_run(loss=0.9435), "seed": 1}]))
    assert "| 0.9385 ± 0.0071 (2 seeds) |" in two


def test_the_audit_columns_say_they_are_on_the_audits_own_contexts():
    # before: trained 0.9335 beside Bayes 0.879 and a gap of -0.009, on two samples and unsaid
    summary = seed_summary([_one_run()])
    assert summary[0]["audit_loss"] == 0.870 and summary[0]["audit_samples"] == 200
    md = summary_markdown(summary)
    assert ("| model on the audit's own contexts (how many) | Bayes on its readings on the audit's own contexts |"
            in md)
    assert "| 0.8700 (200) | 0.8790 | -0.0090 |" in md  # model - Bayes = the gap, on one sample of 200 contexts
    one = to_markdown(_one_run())
    assert ("Audit of its readings, all on the audit's own 200 contexts: model 0.8700 ± 0.03, Bayes on its readings "
            "0.8790 ± 0.03, decoder gap (model - Bayes, paired) -0.0090 ± 0.004; the trained 0.9335 above is on the "
            "4096 held-out contexts") in one


def test_a_comparison_opens_with_the_models_line_and_its_prediction_row():
    lines = to_markdown(_one_run(audit=False)).splitlines()
    assert lines[2] == ("Model A: trained 0.9335 ± 0.004 against its prediction 0.9267 ± 0.001 "
                        "(best_nonadaptive_keyed): ratio 1.007")
    table = lines[lines.index("| what | loss | ± | how | role | class | keys | channel |") + 2:]
    assert table[0].startswith("| **trained Model A** | **0.9335** |")
    assert table[1] == "| *its prediction* | | | | | | | |" and table[2].startswith("| best_nonadaptive_keyed (keyed) |")
