"""Add the keyed theory rows (the prediction rows of Models A and B, weighted keys) to the stored grid table.

Command: ``PYTHONPATH=. python studies/grid/keyed_rows.py [--keyed weighted]``; rewrites studies/grid/table.json
and table.md. The trained models of studies/grid were run before the keyed rows existed and their run folders
are not kept, so ``fv compare --grid`` cannot reuse them; this script computes the keyed rows by the code
path ``fv compare --grid`` takes (``bridges.analysis.compare.keyed_cells``: ``fvnum.theory.keyed_curves`` at the
grid's settings, 2000 search samples, seed 0), once per data configuration, adds them to every run of that
cell (replacing keyed rows stored before), gives every row its role again (``fvnum.theory.describe_rows``),
re-checks the predictions and writes both tables with the writers of ``fv compare --grid``. No model is
retrained. About 10 minutes on one core (the matched Gaussian of depth 6 takes most of it).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import torch

from bridges.analysis.compare import grid_checks, grid_markdown, keyed_cells
from bridges.runs.config import DataConfig
from bridges.studies.reproduce import SEARCH_SAMPLES
from bridges.runs.store import write_atomic, write_json
from fvnum.theory import describe_rows

HERE = Path(__file__).resolve().parent
KEYED_ROWS = ("best_adaptive_keyed", "best_nonadaptive_keyed")
DESCRIBED = ("role", "models", "class")  # given again by describe_rows over the new set of rows


def data_of(run: dict) -> DataConfig:
    gaussian = run["prior"] == "gaussian"
    return DataConfig(prior=run["prior"], depth=run["depth"], alpha=run["alpha"], n_tokens=run["n_tokens"],
                      cov="matched" if gaussian else None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keyed", default="weighted", choices=("weighted", "linear"))
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    stored = json.loads((HERE / "table.json").read_text())
    runs = stored["runs"]
    rows_of = {}
    for run in runs:
        cell = (run["prior"], run["depth"], run["alpha"], run["n_tokens"], run["budget"])
        if cell not in rows_of:
            t0 = time.process_time()
            rows_of[cell] = keyed_cells(data_of(run), [run["budget"]], args.keyed, search_samples=SEARCH_SAMPLES,
                                         seed=args.seed)[str(run["budget"])]
            print(cell, [(r["name"], round(r["value"], 4), round(r["stderr"], 4)) for r in rows_of[cell]],
                  f"{time.process_time() - t0:.0f} s", file=sys.stderr, flush=True)
        theory = [r for r in run["theory"] if r["name"] not in KEYED_ROWS] + rows_of[cell]
        run["theory"] = describe_rows([{k: v for k, v in r.items() if k not in DESCRIBED} for r in theory])
    checks = grid_checks(runs)
    write_json(HERE / "table.json", {"runs": runs, "predictions": checks})
    write_atomic(HERE / "table.md", grid_markdown(runs, checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
