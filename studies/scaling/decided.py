"""The decided tests of the scaling study, planned (studies/scaling/regime.md, "The decided tests"; issue 45, item 5).

Command: ``PYTHONPATH=. python studies/scaling/decided.py [--table]``: the power of ``band``, ``decay`` and ``ratio``
(``fvnum.decided``) for MLP A, B and C (budgets 1-6) and qk A (budgets 3-6, against B), 3 seeds each, at the
committed seed spread (qk A: MLP A's, its own seeds not yet trained when this was written) and at twice it, around
the study's prediction rows (studies/scaling/scaling.json, with their Monte Carlo errors). Written to
studies/scaling/decided.json; ``--table`` prints regime.md's table from it. Applying the tests is the study's own
``fits.tests`` (``bridges.studies.scaling.decided_tests``) and qk.json's ``tests`` (studies/scaling/qk.py).
"""
import json
import os
import sys

import numpy as np

from bridges.runs.store import read_json, write_json
from fvnum.decided import TESTS, decided_power, pooled_spread
from fvnum.theory import prediction_row

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "decided.json")
with open(os.path.join(HERE, "scaling.json")) as _f:
    STUDY = json.load(_f)
QK_BUDGETS = (3, 4, 5, 6)
N_SEEDS = 3
REPLICATES = 2000
ADAPTIVE, ONE_LAYER = ("A", "qk A"), ("B", "C")


def trained() -> dict:
    """model -> budget -> the committed study's losses by seed."""
    out: dict = {}
    for r in STUDY["runs"]:
        out.setdefault(r["model"], {}).setdefault(int(r["budget"]), []).append(r["loss"])
    return out


def predictions(models=("A", "B", "C")) -> dict:
    """model -> budget -> (value, stderr) of its prediction row in the study's theory; qk A is held to A's."""
    out: dict = {}
    for m in models:
        for b, rows in STUDY["theory"].items():
            name = prediction_row(m, [t["name"] for t in rows])
            (t,) = [t for t in rows if t["name"] == name]
            out.setdefault(m, {})[int(b)] = (t["value"], t.get("stderr") or 0.0)
    out["qk A"] = {b: out["A"][b] for b in QK_BUDGETS}
    return out


def plan() -> dict:
    losses = trained()
    spreads = {m: pooled_spread({b: np.array(v) for b, v in losses[m].items()})[0] for m in losses}
    spreads["qk A"] = spreads["A"]
    preds = predictions()
    budgets = {m: sorted(preds[m]) for m in ("A", "qk A", "B", "C")}
    n = dict.fromkeys(budgets, N_SEEDS)
    out = {"prediction_rows": {m: prediction_row(m, [t["name"] for t in STUDY["theory"]["1"]]) for m in "ABC"},
           "budgets": budgets, "n_seeds": n, "replicates": REPLICATES}
    for label, factor in (("spread", 1), ("twice the spread", 2)):
        s = {m: factor * v for m, v in spreads.items()}
        out[label] = decided_power(preds, budgets, s, n, adaptive=ADAPTIVE, one_layer=ONE_LAYER,
                                   replicates=REPLICATES, seed=0)
    write_json(OUT, out)
    return out


def table(doc: dict) -> str:
    lines = ["| model | budgets | spread (sd log loss) | band | band detects x1.5 at the top budget | decay (pair) | "
             "ratio (pair) | the same at twice the spread: band / decay / ratio |", "|---|---|---|---|---|---|---|---|"]
    one, two = doc["spread"]["tests"], doc["twice the spread"]["tests"]
    for m in ("A", "qk A", "B", "C"):
        b = doc["budgets"][m]
        pair = {"A": "A-B", "qk A": "qk A-B", "B": "A-B", "C": "A-C"}[m]
        cells = [f"{one[t][m]['power']:.3f}" for t in TESTS]
        again = " / ".join(f"{two[t][m]['power']:.3f}" for t in TESTS)
        lines.append(f"| {m} | {b[0]}-{b[-1]} | {doc['spread']['spreads'][m]:.4f} | {cells[0]} | "
                     f"{one['band'][m]['power_against']['power']:.3f} | {cells[1]} ({pair}) | {cells[2]} ({pair}) | "
                     f"{again} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from bridges.runs.options import script_options, study_json

    doc = study_json(OUT, "decided tests", entries=False) or None if "table" in script_options(argv, {"table"}) else None
    print(table(doc or plan()))
    return 0


if __name__ == "__main__":
    from bridges.runs.options import run_script

    sys.exit(run_script(main, sys.argv[1:], "decided.py"))
