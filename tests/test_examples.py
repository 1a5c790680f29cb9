"""Every example runs in-process with tiny settings (outputs under tmp_path), and its numbers are sane:
finite, losses within [0, E||theta||^2], exact values equal to fvsym's (or to independent sums),
Monte Carlo within 5 standard errors of exact values, the theorems of example 02 hold and its false
claim is refuted, key patching of the hand-built path model is harmless exactly where THEORY.md says."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from fvsym import TreePrior, bellman, tree

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def load():
    """``load("01_derive_losses")`` imports an example file as a module (``examples/`` on sys.path for
    ``_cli``; registered in sys.modules so its dataclasses resolve their annotations)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(EXAMPLES))
        loaded = {}

        def _load(name: str):
            if name == "_cli":  # the very module the examples import
                return importlib.import_module("_cli")
            if name not in loaded:
                spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
                module = importlib.util.module_from_spec(spec)
                mp.setitem(sys.modules, spec.name, module)
                spec.loader.exec_module(module)
                loaded[name] = module
            return loaded[name]

        yield _load
        sys.modules.pop("_cli", None)


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setenv("FVNUM_THREADS", "1")
    yield
    torch.set_num_threads(threads)


def saved(folder: Path, results: dict) -> dict:
    """The run folder holds config.json and results.json equal to what main returned."""
    assert (folder / "config.json").is_file()
    on_disk = json.loads((folder / "results.json").read_text())
    assert on_disk == json.loads(json.dumps(results, default=str))
    return on_disk


def in_range(value: float, upper: float, slack: float = 0.0) -> bool:
    return math.isfinite(value) and -slack <= value <= upper + slack


# --- the shared command line ---------------------------------------------------------------------------
def test_cli_parses_every_field_type_and_rejects_bad_input(load, tmp_path, capsys):
    _cli, ex = load("_cli"), load("03_custom_adaptive_policy")
    cfg = _cli.parse(ex.Config, ["--taus=0.1, 0.2", "--figure=false", "--budget", "3", "--alpha=0.25",
                                 f"--out={tmp_path}"])
    assert (cfg.taus, cfg.figure, cfg.budget, cfg.alpha, cfg.out) == ((0.1, 0.2), False, 3, 0.25, str(tmp_path))
    assert cfg.samples == ex.Config().samples  # untouched fields keep their defaults
    assert _cli.parse(ex.Config, ["--alpha=1/4"]).alpha == 0.25  # numbers read as everywhere in fv (exact rationals)
    for argv, message in ((["--nope=1"], "unknown option --nope"), (["--budget=two"], "--budget must be an integer"),
                          (["--figure=maybe"], "--figure must be true or false"), (["--taus=0.1,,0.2"], "empty item"),
                          (["budget=2"], "unexpected argument"), (["--budget=9"], "budget must lie in 1..depth")):
        with pytest.raises(ValueError, match=message):
            _cli.parse(ex.Config, argv)
        assert _cli.run(ex.main, ex.Config, argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err
    assert _cli.run(ex.main, ex.Config, ["--help"]) == 0
    assert "--confidence=<float>" in capsys.readouterr().out
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert _cli.run(ex.main, ex.Config, [f"--out={blocker}"]) == 2  # not a folder: one line, exit 2


# --- 01: derivations -------------------------------------------------------------------------------------
def test_01_exact_values_equal_fvsym_and_independent_sums(load, tmp_path):
    ex = load("01_derive_losses")
    K, B, alpha = 3, 2, sp.Rational(1, 3)
    r = ex.main(ex.Config(depth=K, budget=B, alpha="1/3", out=str(tmp_path)))
    saved(tmp_path, r)
    exact = {k: sp.sympify(v) for k, v in r["exact"].items() if k != "gaussian_isotropic"}
    assert exact["path"] == sum(alpha ** (k - 1) for k in range(B + 1, K + 1))  # THEORY.md 6, summed here
    assert exact["second_moment"] == sum(alpha ** (k - 1) for k in range(1, K + 1))
    prior = TreePrior(K, "1/3")
    assert exact["top_levels"] == tree.coordinate_design_loss(prior, range(1, B + 1))
    assert exact["optimal"] == bellman.solve(prior, B, 1).loss
    assert exact["optimal_nonadaptive"] == bellman.optimal_nonadaptive(prior, B)[0]
    assert exact["optimal"] <= exact["path"] <= exact["second_moment"]
    assert exact["optimal"] <= exact["optimal_nonadaptive"] <= exact["top_levels"]
    assert 0 < exact["gaussian_matched_optimum"] <= exact["second_moment"]
    assert r["numpy_view"]["path"] == pytest.approx(float(exact["path"]), rel=1e-14)
    assert sp.sympify(r["formulas"]["path_loss"]["expr"]).free_symbols == {sp.Symbol("alpha"), sp.Symbol("K"),
                                                                           sp.Symbol("B")}
    assert r["formulas"]["path_loss"]["latex"] == tree.path_loss().latex
    a = sp.Symbol("alpha")
    assert sp.simplify(sp.sympify(r["scaling_exponents"]["path"]) - sp.log(a)) == 0
    assert sp.simplify(sp.sympify(r["scaling_exponents"]["top_levels"]) - sp.log(a) / sp.log(2)) == 0
    assert r["bellman"]["policy"]["nodes"] == list(bellman.solve(prior, B, 1).policy.nodes)
    transcript = (tmp_path / "transcript.txt").read_text()
    assert ">>> sol.loss" in transcript and r["exact"]["optimal"] in transcript


# --- 02: hypothesis -------------------------------------------------------------------------------------
def test_02_theorems_hold_and_a_false_claim_gets_a_checked_counterexample(load, tmp_path):
    ex, _cli = load("02_theorem_with_hypothesis"), load("_cli")
    r = ex.main(ex.Config(n_examples=3, out=str(tmp_path / "true")))
    saved(tmp_path / "true", r)
    assert r["all_hold"] and set(r["theorems"]) == set(ex.Config().theorems)
    for name, t in r["theorems"].items():
        assert t["holds"] and t["counterexample"] is None and 1 <= t["passed"] <= 3, name

    argv = ["--theorems=path_is_optimal", "--n_examples=10", f"--out={tmp_path / 'false'}"]
    assert _cli.run(ex.main, ex.Config, argv, ok=ex.all_hold) == 1  # the script's exit status
    r = json.loads((tmp_path / "false" / "results.json").read_text())
    c = r["theorems"]["path_is_optimal"]["counterexample"]
    assert not r["all_hold"] and c is not None
    ex_ = c["example"]  # re-check the counter-example independently: the optimum beats path there
    prior = TreePrior(ex_["depth"], ex_["alpha"])
    optimal = bellman.solve(prior, ex_["budget"], 1).loss
    path = sum(sp.Rational(ex_["alpha"]) ** (k - 1) for k in range(ex_["budget"] + 1, ex_["depth"] + 1))
    assert optimal < path and sp.Rational(c["numbers"]["optimal"]) == optimal


# --- 03: a custom policy by Monte Carlo ------------------------------------------------------------------
def test_03_confident_path_routes_like_path_when_sure_and_rereads_when_not(load):
    ex = load("03_custom_adaptive_policy")
    scales = [1.0, 0.5 ** 0.5, 0.5]  # depth 3, alpha 1/2
    sure = ex.confident_path(scales, 0.0, 0.9)
    phi = np.array([[[0.9], [-0.6]], [[-1.1], [0.7]]])  # (n=2, layers=2, d=1)
    assert sure(0, phi[:, :0]).tolist() == [[1], [1]]
    assert sure(1, phi[:, :1]).tolist() == [[2], [3]]  # + -> node 2, - -> node 3
    assert sure(2, phi).tolist() == [[5], [6]]
    unsure = ex.confident_path(scales, 1.0, 0.9)  # log-odds 2 a S / tau^2 = 0.2 < log 9: read node 1 again
    small = np.array([[[0.1]], [[3.0]]])
    assert unsure(1, small).tolist() == [[1], [2]]
    past = ex.confident_path(scales, 0.0, 0.9)(3, np.ones((1, 3, 1)))
    assert past.tolist() == [[0]]  # past the leaves: idle


def test_03_estimates_are_sane_and_match_exact_values_at_zero_noise(load, tmp_path):
    ex = load("03_custom_adaptive_policy")
    cfg = ex.Config(depth=3, budget=2, taus=(0.0, 0.5), samples=2000, out=str(tmp_path))
    r = ex.main(cfg)
    saved(tmp_path, r)
    assert (tmp_path / "loss_vs_tau.png").stat().st_size > 0
    prior = TreePrior(3, "0.5")
    E = float(prior.second_moment)
    rows = {(row["tau"], row["strategy"]): row for row in r["rows"]}
    assert len(rows) == 2 * len(ex.STRATEGIES)
    for row in rows.values():
        assert in_range(row["value"], E) and row["stderr"] >= 0 and row["n"] == 2000
    exact_path = float(tree.tree_loss(3, 2, "path", alpha="1/2").expr)
    assert rows[(0.0, "path")]["value"] == pytest.approx(exact_path, abs=1e-12)  # every sample loses the same
    assert rows[(0.0, "confident_path")]["value"] == rows[(0.0, "path")]["value"]  # at tau = 0 it is path
    top = rows[(0.0, "top_levels")]
    exact_top = float(tree.coordinate_design_loss(prior, (1, 2)))
    assert abs(top["value"] - exact_top) <= 5 * top["stderr"]
    d0, d5 = r["confident_minus_path"]
    assert d0 == {"tau": 0.0, "value": 0.0, "stderr": 0.0}
    noisy = rows[(0.5, "confident_path")]["value"] - rows[(0.5, "path")]["value"]
    assert d5["value"] == pytest.approx(noisy, abs=1e-12)  # paired difference of the same samples


# --- 04: training and the comparison table ---------------------------------------------------------------
@pytest.mark.heavy
def test_04_trains_and_compares_with_sane_theory(load, tmp_path):
    ex = load("04_train_and_compare")
    cfg = ex.Config(steps=40, batch=32, mlp_width=8, theory_samples=500, search_samples=200, dense=False,
                    progress=False, out=str(tmp_path))
    r = ex.main(cfg)
    saved(tmp_path, r)
    table = r["table"]
    E = float(TreePrior(3, "1/2").second_moment)
    trained, untrained = table["trained"]["loss"], r["history"][0][2]
    assert math.isfinite(trained) and 0 <= trained < untrained  # training reduced the held-out loss
    assert table["trained"]["steps"] == 40
    theory = {row["name"]: row for row in table["theory"]}
    for row in theory.values():
        assert in_range(row["value"], E, 5 * (row["stderr"] or 0)), row
    # the Gaussian optimum is the best linear non-adaptive loss: top levels with a linear decoder is one
    assert theory["top_levels_linear"]["value"] >= theory["gaussian_optimum"]["value"] - 1e-12
    best, path = theory["best_adaptive"], theory["path"]  # the best adaptive policy found includes path
    assert best["value"] <= path["value"] + 5 * math.hypot(best["stderr"], path["stderr"])
    markdown = (tmp_path / "comparison.md").read_text()
    assert "**trained Model A**" in markdown and "| path (" in markdown


# --- 05: key patching ------------------------------------------------------------------------------------
def test_05_path_model_matches_theory_and_patching_is_harmless_iff_l_le_j(load, tmp_path):
    ex = load("05_key_patching")
    cfg = ex.Config(models=("path", "trained"), n_contexts=256, theory_samples=2000, steps=10, mlp_width=8,
                    batch=32, progress=False, figure=False, out=str(tmp_path))
    r = ex.main(cfg)
    saved(tmp_path, r)
    E = float(TreePrior(3, "1/2").second_moment)
    theory, path = r["theory"], r["models"]["path"]["table"]
    for t in (theory, path, r["models"]["trained"]["table"]):
        assert np.isfinite(t["loss"]).all() and np.min(t["loss"]) >= 0
        assert t["layers"] == [1, 2, 3] and t["depths"] == [1, 2, 3]
    for t in (theory, path):  # a Bayes decoder never loses more than the prior variance (10 steps of training may)
        assert np.max(t["loss"]) <= E
    effect, se = np.array(path["effect"]), np.array(path["effect_stderr"])
    for a, l in enumerate(path["layers"]):
        for b, j in enumerate(path["depths"]):
            if l <= j:  # the donor's keys at layer l are the target's own
                assert abs(effect[a, b]) <= 5 * se[a, b], (l, j)
            else:
                assert effect[a, b] > 5 * se[a, b] and effect[a, b] > 0.1, (l, j)
    assert r["models"]["path"]["max_abs_z_vs_theory"] <= 5  # the hand-built model is the theory in torch
    e_theory, se_theory = ex.effects(theory), np.array(theory["stderr"])  # j = 1: the earlier layer costs more
    assert e_theory[1, 0] - e_theory[2, 0] > 5 * math.hypot(se_theory[1, 0], se_theory[2, 0])


# --- 06: a sweep on a local Dask cluster ------------------------------------------------------------------
@pytest.mark.heavy
def test_06_sweep_on_a_local_cluster_matches_exact_values_and_the_in_process_run(load, tmp_path):
    from bridges.studies import sweep

    ex = load("06_sweep")
    cfg = ex.Config(tau="0", samples=2000, budgets=(1, 2), seeds=(0,), workers=1, progress=False, out=str(tmp_path))
    r = ex.main(cfg)
    saved(tmp_path, r)
    assert (r["n_computed"], r["n_cached"]) == (4, 0) and len(r["rows"]) == 4
    prior = TreePrior(3, "1/2")
    for row in r["rows"]:
        exact = float(sp.Rational(row["exact_noiseless"]))
        if row["strategy"] == "path":  # noiseless path: every sample loses the same
            assert row["value"] == pytest.approx(exact, abs=1e-12)
        else:
            assert exact == float(tree.coordinate_design_loss(prior, range(1, row["budget"] + 1)))
            assert abs(row["value"] - exact) <= 5 * row["stderr"] + 1e-12 and row["n"] == 2000
    # the same cells in this process give the same numbers; the spec file reruns from the shell unchanged
    here = sweep.run_sweep(cfg.spec(), out=tmp_path / "here", scheduler="synchronous", progress=False, log=lambda *a: None)
    assert [(h["value"], h["stderr"], h["key"]) for h in here.rows] == [(x["value"], x["stderr"], x["key"])
                                                                        for x in r["rows"]]
    again = sweep.run_sweep(tmp_path / "spec.toml", out=tmp_path / "sweep", progress=False, log=lambda *a: None)
    assert (again.n_computed, again.n_cached) == (0, 4)
