"""fv reproduce end to end on tiny settings: outputs, resume from finished cells, bad folders."""
from fvnum.options import KeyedSearch
import json
import time

import pytest
import torch

from bridges.cli import main
from bridges.studies.reproduce import ReproduceConfig, reproduce

torch.set_num_threads(1)
pytestmark = pytest.mark.heavy  # the module's fixture is a whole fv reproduce run

# real_samples 300: the real-token rows on 2000 contexts (the default) are 20 of the fixture's 36 s of CPU
TINY = dict(depth=2, alpha=0.5, train_budget=2, steps=20, samples=400, workers=1, progress=False, real_samples=300)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "report"
    logs = []
    start = time.monotonic()
    result = reproduce(ReproduceConfig(out=str(out), **TINY), log=logs.append)
    logs.append(("seconds", time.monotonic() - start))
    return out, result, logs


def test_writes_report_figures_and_numbers(tiny_run):
    out, result, _ = tiny_run
    for name in ("report.md", "results.json", "theory_curves.csv", "training.csv", "fig_loss_vs_budget.png",
                 "fig_patching.png", "fig_probes.png"):
        assert (out / name).stat().st_size > 0, name
    data = json.loads((out / "results.json").read_text())
    assert {t["model"] for t in data["training"]} == {"A", "B", "C"}
    assert {t["prior"] for t in data["training"]} == {"tree", "gaussian"}
    # the keyed rows (weighted keys, the default) are the predictions of A and B
    from bridges.analysis.compare import prediction_of

    want = {("tree", "A"): "best_adaptive_keyed", ("tree", "B"): "best_nonadaptive_keyed",
            ("gaussian", "A"): "best_nonadaptive_keyed", ("gaussian", "B"): "best_nonadaptive_keyed"}
    for t in data["training"]:
        if t["model"] != "C":
            assert prediction_of(t)["name"] == want[t["prior"], t["model"]] and prediction_of(t)["keys"] == "weighted"
    # exact noiseless curve values are fvsym's: path at depth 2, budget 1, alpha 1/2 loses alpha = 1/2
    path = [r for r in data["theory_curves"] if r["strategy"] == "path" and r["noise"] == "none" and r["budget"] == 1]
    assert path[0]["exact"] == "1/2"
    report = (out / "report.md").read_text()
    assert "fig_loss_vs_budget.png" in report and "Key patching" in report and "probes" in report


def test_the_tree_cells_show_the_keyed_rows_on_real_tokens(tiny_run):
    """ReproduceConfig.real_samples (default 2000): A's and B's keyed rows on real tokens in every table of the
    tree cells, none in the Gaussian's (the rows are built on the tree), and the report's lines on them."""
    from bridges.studies.reproduce import REAL_SAMPLES

    assert ReproduceConfig().real_samples == REAL_SAMPLES == 2000
    out, _, _ = tiny_run
    data = json.loads((out / "results.json").read_text())
    real = {"best_adaptive_keyed_real", "best_nonadaptive_keyed_real"}
    for t in data["training"]:
        found = real & {r["name"] for r in t["theory"]}
        assert found == (real if t["prior"] == "tree" else set())
    assert "prediction rows on real tokens" in (out / "report.md").read_text()


def test_every_cell_and_output_passes_its_own_checks(tiny_run):
    """The checks on read (shape and range of each kind of cell) accept every cell a real run writes, and its
    JSON outputs are strict (no bare NaN)."""
    from bridges.studies.reproduce import SHAPES
    from bridges.runs.store import RunStore

    out, _, _ = tiny_run
    messages = []
    store = RunStore(out, "reproduce", log=messages.append)
    cells = sorted(p.stem for p in (out / "cells").glob("*.json"))
    kinds = {key.split("-")[0] for key in cells}
    assert {"theory", "keyed", "theory_table", "compare", "patching_theory", "probes_model"} <= kinds <= set(SHAPES)
    for key in cells:
        assert store.get(key, shape=SHAPES[key.split("-")[0]]) is not None, messages
    assert messages == []
    json.loads((out / "results.json").read_text(), parse_constant=lambda c: pytest.fail(f"bare {c}"))


def test_rerun_skips_finished_cells_and_recomputes_lost_ones(tiny_run):
    out, first, _ = tiny_run
    cells = sorted((out / "cells").glob("compare-*.json"))
    lost = cells[0]
    lost.unlink()
    logs = []
    again = reproduce(ReproduceConfig(out=str(out), **TINY), log=logs.append)
    compared = [line for line in logs if line.strip().startswith("compared")]
    assert sum("(cached)" not in line for line in compared) == 1  # only the lost cell ran again
    assert lost.exists()
    assert [t["trained"]["loss"] for t in again["training"]] == [t["trained"]["loss"] for t in first["training"]]


def test_folder_of_another_kind_is_refused(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "fv-run", "version": 0, "kind": "reproduce"}))
    assert main(["reproduce", "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "another kind or version" in err and len(err.splitlines()) == 1


def test_unwritable_or_bad_output_is_a_one_line_error(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["reproduce", "--out", str(target), "--quiet"]) == 2
    assert "not a folder" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    assert main(["reproduce", "--out", str(tmp_path / "full"), "--quiet"]) == 2
    assert "not empty" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--steps", "0"], ["--budget", "9", "--depth", "2"], ["--alpha", "1.5"]])
def test_bad_options(bad, capsys):
    assert main(["reproduce", "--quiet", *bad]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.slow
def test_kill_9_after_the_first_piece_keeps_it(tmp_path):
    """A reproduce killed (SIGKILL) in the phase after the theory cells, once its first piece of that
    phase is written, keeps that piece: the resumed run reuses it instead of computing it again."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "report"
    argv = [sys.executable, "-m", "bridges.cli", "reproduce", "--out", str(out), "--depth", "2", "--budget", "2",
            "--steps", "300", "--samples", "400", "--workers", "1", "--quiet"]
    err = tmp_path / "stderr.txt"
    with open(err, "w") as stderr:
        proc = subprocess.Popen(argv, cwd=root, stdout=subprocess.DEVNULL, stderr=stderr,
                                env={**os.environ, "PYTHONPATH": str(root)})
        deadline = time.monotonic() + 600
        try:
            while not list((out / "cells").glob("compare-*.json")):
                assert proc.poll() is None, err.read_text()
                assert time.monotonic() < deadline
                time.sleep(0.2)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait()
    kept = {p.name: p.stat().st_mtime_ns for p in (out / "cells").glob("compare-*.json")}
    assert kept and len(kept) < 6  # killed part-way through the training phase
    logs = []
    again = reproduce(ReproduceConfig(out=str(out), depth=2, train_budget=2, steps=300, samples=400, workers=1,
                                      progress=False), log=logs.append)
    assert {p: (out / "cells" / p).stat().st_mtime_ns for p in kept} == kept  # reused, not rewritten
    cached = [line for line in logs if line.strip().startswith("compared") and "(cached)" in line]
    assert len(cached) == len(kept) and len(again["training"]) == 6


# --- the tree by --scales, as in fv train -----------------------------------------------------------------
@pytest.mark.parametrize("command,module,fn", [("reproduce", "reproduce", "reproduce"), ("scaling", "scaling", "scaling_study")])
def test_studies_take_scales_wherever_they_take_alpha(command, module, fn, monkeypatch, tmp_path):
    import importlib

    seen = []

    def fake(cfg, log=print, **_):  # the study itself, replaced: what the command builds is checked
        from bridges.studies.reproduce import Reproduction
        from bridges.studies.scaling import ScalingStudy

        seen.append(cfg)
        return (Reproduction(str(tmp_path), (), [], [], {}) if module == "reproduce"
                else ScalingStudy(str(tmp_path), [], {}, {"models": {}}, ()))

    monkeypatch.setattr(importlib.import_module(f"bridges.studies.{module}"), fn, fake)
    small = ["--budgets", "1-2", "--seeds", "1"] if command == "scaling" else []  # within the default time cap
    assert main([command, "--out", str(tmp_path / "o"), "--scales", "1,1/2,1/3", "--quiet", "--workers", "1",
                 *small]) == 0
    (cfg,) = seen
    assert (cfg.depth, cfg.alpha, cfg.scales) == (3, None, ("1", "1/2", "1/3"))
    data = cfg.data("tree") if command == "reproduce" else cfg.data()
    assert data.scales == ("1", "1/2", "1/3") and data.depth == 3
    assert main([command, "--out", str(tmp_path / "o"), "--alpha", "1/3", "--quiet", "--workers", "1", *small]) == 0
    assert (seen[-1].alpha, seen[-1].scales, seen[-1].depth) == (1 / 3, None, 4 if command == "reproduce" else 7)


@pytest.mark.parametrize("argv,match", [
    (["--scales", "1,1/2", "--alpha", "1/2"], "give alpha or scales, not both"),
    (["--scales", "1,1/2", "--depth", "3"], "scales"),
    (["--scales", "1,2"], "scales"),
    (["--scales", "1,1/2", "--full"], "full grid has depths 4 and 6"),
])
def test_bad_scales_of_a_study_are_one_line(argv, match, tmp_path, capsys):
    assert main(["reproduce", "--out", str(tmp_path / "o"), "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err, err


def test_theory_curves_by_scales_equal_those_by_the_same_alpha(tmp_path):
    """alpha = 1/4 is the scales (1, 1/2): every theory curve (exact, Monte Carlo with the same seed, the
    Gaussian optimum) is the same number."""
    from bridges.studies.reproduce import reproduction_curves
    from bridges.runs.store import RunStore

    small = dict(depth=2, samples=200, train_budget=1, workers=1, progress=False)
    by_alpha = reproduction_curves(ReproduceConfig(out=str(tmp_path / "a"), alpha=0.25, **small),
                             RunStore(tmp_path / "a", "reproduce"), lambda *a: None)
    by_scales = reproduction_curves(ReproduceConfig(out=str(tmp_path / "s"), scales=("1", "1/2"), **small),
                              RunStore(tmp_path / "s", "reproduce"), lambda *a: None)
    assert [r["scales"] for r in by_scales] == [["1", "1/2"]] * len(by_alpha)
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("alpha", "scales", "exact")} for r in rows]  # noqa: E731
    assert strip(by_scales) == strip(by_alpha)
    noiseless = [r for r in by_alpha if r["strategy"] == "gaussian_optimum" and r["noise"] == "none"]
    assert {r["budget"]: r["value"] for r in noiseless if r["prior"] == "gaussian"}[3] == 0.0  # exact at tau = 0


# --- the defaults: a cell where Model A's row says something true (docs/reproduce.md) ---------------------
@pytest.mark.parametrize("cell,near_zero", [
    ({}, False),
    pytest.param(dict(alpha=0.5, n_tokens=128, train_budget=3), True, marks=pytest.mark.slow),  # ~4 s more
], ids=["default cell", "old default cell"])
def test_the_default_cell_gives_model_a_a_prediction_clearly_above_0(cell, near_zero):
    """A's prediction, computed as the keyed rows compute it (``fvnum.theory.keyed_curves``: the first layer's
    best design, then the greedy adaptive policy under weighted keys) on 300 samples, without training: on the
    defaults it is more than 3 of its standard errors above 0, so A's row is a ratio (measured on 2000
    samples: 0.125 +- 0.006); on the old default cell (alpha 0.5, N 128, budget 3: three adaptive layers read
    the depth-4 tree out) it is 0 within its error, and the row could only be a difference."""
    from bridges.analysis.compare import beside_prediction
    from bridges.training.data import data_channel, fv_prior
    from fvnum.keys.nonadaptive import best_nonadaptive_keyed
    from dataclasses import replace

    from fvnum.keys.adaptive import adaptive_keyed_losses
    from fvnum.theory import prediction_row

    cfg = ReproduceConfig(**cell)
    data = cfg.data("tree")
    channel = data_channel(data)
    keyed = replace(channel, keys=cfg.keyed)
    first = best_nonadaptive_keyed(fv_prior(data), 1, keyed, seed=cfg.seed)
    found = adaptive_keyed_losses(fv_prior(data), cfg.train_budget, keyed, samples=300, search=KeyedSearch(first=first),
                                  seed=cfg.seed)[-1]
    assert prediction_row("A", [found.name, "best_nonadaptive_keyed"]) == found.name == "best_adaptive_keyed"
    value, se = found.estimate.value, found.estimate.stderr
    assert beside_prediction(value, 0.0, value, se)["near_zero"] is near_zero, (value, se)


def test_the_command_line_defaults_are_the_configs(monkeypatch, tmp_path):
    """``fv reproduce`` with no options builds ``ReproduceConfig()``, and ``--full`` builds
    ``ReproduceConfig(full=True)`` (the training issue's cell: alpha 0.5, N 128, budget 3), field by field."""
    import dataclasses

    import bridges.studies.reproduce

    seen = []
    done = bridges.studies.reproduce.Reproduction(str(tmp_path / "o"), (), [], [], {})
    monkeypatch.setattr(bridges.studies.reproduce, "reproduce", lambda cfg, log=print: seen.append(cfg) or done)
    out = str(tmp_path / "o")
    assert main(["reproduce", "--out", out, "--quiet"]) == 0
    assert main(["--max-seconds", "1e9", "reproduce", "--out", out, "--quiet", "--full"]) == 0
    default, full = (dataclasses.replace(c, progress=True) for c in seen)
    assert default == ReproduceConfig(out=out)
    assert full == ReproduceConfig(out=out, full=True)
    assert (default.depth, default.alpha, default.n_tokens, default.train_budget) == (4, 0.6, 64, 2)
    assert (full.depth, full.alpha, full.n_tokens, full.train_budget) == (4, 0.5, 128, 3)


def test_the_full_grid_keeps_its_cell_and_the_defaults_are_priced_within_10_minutes_on_2_cores():
    """``full`` trains the grid of the training issue at its own cell (patching and probes find its depth-4,
    budget-3 runs); the default run's own price (``bridges.prices.cost.reproduce_seconds``, 2 workers) is under 10
    minutes."""
    import dataclasses

    from bridges.prices.cost import reproduce_seconds
    from bridges.studies.reproduce import grid

    runs = grid(ReproduceConfig(full=True), "x")
    assert {(r.data.depth, r.model.budget, r.data.alpha, r.data.n_tokens) for r in runs} == {(4, 3, 0.5, 128),
                                                                                             (6, 4, 0.5, 128)}
    (cell,) = {(r.data.depth, r.model.budget) for r in grid(ReproduceConfig(), "x")}
    assert cell == (ReproduceConfig().depth, ReproduceConfig().train_budget)
    assert reproduce_seconds(dataclasses.replace(ReproduceConfig(), workers=2)) < 600


def test_a_reproduction_is_typed_and_reads_as_its_dict(tmp_path):
    from fvsym.errors import InputError
    from bridges.studies.reproduce import Reproduction

    r = Reproduction(str(tmp_path), ("a.md",), [{"strategy": "path", "budget": 1, "loss": 0.5}], [],
                     {"probes": {}})
    assert r["folder"] == str(tmp_path) and r.to_dict()["written"] == ["a.md"] and "probes" in r
    assert list(r.to_frame()["loss"]) == [0.5] and len(r.to_frame("training")) == 0
    with pytest.raises(InputError, match="'theory_curves', 'training'"):
        r.to_frame("bogus")
