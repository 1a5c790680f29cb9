"""studies/scaling/qk.py: the qk router's runs are the study's Model A commands with --router qk, and qk.json is
built from whatever runs have finished."""
import json
import os
import shlex
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "studies", "scaling"))
qk = pytest.importorskip("qk")  # needs torch through bridges


def test_the_planned_runs_are_the_study_commands_with_the_qk_router():
    for name, router, budget, seed, factor in qk.PLAN:
        argv = qk.argv_of(router, budget, seed, factor, "/tmp/runs")
        base = shlex.split(qk.study_run(budget, seed)["command"])[1:]
        got = list(argv)
        if router == "qk":
            i = got.index("--router")
            assert got[i - 2:i] == ["--model", "A"] and got[i + 1] == "qk"
            del got[i:i + 2]
        assert got[got.index("--steps") + 1] == str(factor * int(base[base.index("--steps") + 1]))
        for flag in ("--steps", "--out"):
            got.pop(got.index(flag) + 1), base.pop(base.index(flag) + 1)
        assert got == base, name
    # the function-vector study's qk run at budget 4 is this plan's qk-B4-s0 (the same key)
    assert qk.key_of(qk.argv_of("qk", 4, 0, 1, "/tmp/r")) == "Aq-tree-K7-B4-N64-s0-7f008edfb6"
    assert qk.key_of(qk.argv_of("mlp", 6, 0, 1, "/tmp/r")) == qk.study_run(6, 0)["key"]


@pytest.mark.heavy
def test_report_from_finished_runs(tmp_path):
    runs = tmp_path / "runs"
    losses = {(3, 0): 0.25, (3, 1): 0.26, (4, 0): 0.15, (4, 1): 0.155, (5, 0): 0.09, (5, 1): 0.092,
              (6, 0): 0.06, (6, 1): 0.061}
    for (b, s), loss in losses.items():
        folder = runs / qk.key_of(qk.argv_of("qk", b, s, 1, str(runs)))
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps({"loss": loss, "stderr": 0.001, "train_seconds": 1.0}))
    doc = qk.report(str(runs), dest=str(tmp_path / "qk.json"), fig=False)
    assert json.loads((tmp_path / "qk.json").read_text())["per_budget"] == doc["per_budget"]
    assert len(doc["runs"]) == 8 and all(r["command"].endswith("--out studies/scaling/qk/train") for r in doc["runs"])
    pred = doc["prediction"]
    assert doc["per_budget"]["4"]["qk_ratio"] == pytest.approx((0.15 + 0.155) / 2 / pred["4"])
    assert set(doc["tests"]["band"]) == {"A", "qk A", "B", "C"}
    assert doc["tests"]["decay"]["qk A"]["pair"] == ["qk A", "B"]
    assert doc["law_test"]["verdict"] in ("exponential", "power", "can't tell", "neither")
    assert doc["doubling"] == {} and doc["curve_end"] == {}
