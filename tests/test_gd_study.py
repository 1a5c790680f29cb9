"""studies/gd/run.py, the Model G study: its pre-registered test decides a cell only with every seed, passes a ratio
inside the band and fails one outside, its power falls to 5% at the band's edge, bad input is one line with exit 2;
every committed run carries its command."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("gd_study_run", ROOT / "studies" / "gd" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cell_test_passes_inside_the_band_and_fails_outside():
    run = _load()
    inside = run.cell_test([1.00, 1.01, 0.99], 0.01, 1.0, 0.005)
    assert inside["decided"] and inside["passes"] and inside["ratio"] == pytest.approx(1.0)
    outside = run.cell_test([1.30, 1.31, 1.29], 0.01, 1.0, 0.005)
    assert outside["decided"] and not outside["passes"]
    edge = run.cell_test([1.24, 1.24, 1.24], 0.02, 1.0, 0.01)  # inside, but not by its error
    assert not edge["passes"]
    assert not run.cell_test([1.0], 0.01, 1.0, 0.005)["decided"]  # one seed decides nothing


def test_the_power_is_high_on_the_row_and_five_percent_at_the_edge():
    power = _load().power(0.02)
    assert power["1"] > 0.999 and power["1.25"] == pytest.approx(0.05, abs=1e-3) and power["0.8"] == pytest.approx(
        0.05, abs=1e-3)
    assert power["1.15"] > power["1.2"] > power["1.25"]


def test_bad_input_is_one_line_and_exit_status_2(capsys):
    assert _load().main(["bogus"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_grid_is_the_registered_one():
    cfgs = list(_load().configs())
    assert len(cfgs) == 36 and {c.data.dim for c in cfgs} == {15}
    assert {(c.data.n_tokens, c.model.n_layers) for c in cfgs} == {(n, l) for n in (8, 15, 30, 120) for l in (1, 2, 4)}
    assert {c.model.values for c in cfgs} == {"residual"} and {c.train.threads for c in cfgs} == {1}


def test_committed_results_hold_every_run_with_its_command():
    out = json.loads((ROOT / "studies" / "gd" / "gd.json").read_text())
    assert len(out["runs"]) >= 36 and len(out["cells"]) == 12
    for run in out["runs"].values():
        assert run["command"].startswith("fv train --") and "--model G" in run["command"] and run["loss"] >= 0
        assert "--out studies/gd/train" in run["command"]  # re-runs from the repository's root, on any machine
