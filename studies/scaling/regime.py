"""The scaling study's regime, chosen by the theory before training (studies/scaling/regime.md).

Command: ``PYTHONPATH=. python studies/scaling/regime.py [--cheap] [--only=KEY] [--table]``. Step 1 (about a minute):
``path`` and ``top_levels`` under the tokens channel over a grid of depth, alpha and N, budgets 1..6, each curve's law
test (``fvnum.laws.law_test``, cut 2) at two relative floors: 1% (the theory's own precision) and 3% (about the
relative error of a 3-seed mean of trained models, the precision the study will have). Step 2 (``--cheap`` skips it;
tens of minutes a cell): the prediction rows of Models A and B under weighted keys (``best_adaptive_keyed``,
``best_nonadaptive_keyed``) for the shortlisted cells. Every cell is written to studies/scaling/regime.json as soon as
it is done (atomically), and a re-run skips finished cells. regime.json also holds ``exact_law_cell``, written by
``studies/scaling/prereg.py --stage=exact`` (studies/scaling/exact_law.md): not a cell of this scan.
"""
import json
import os
import sys
import time

from fvnum.regime import assess, tail_geometric_variances, theory_curves

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "regime.json")
BUDGETS = tuple(range(1, 7))
FLOORS = (0.01, 0.03)
GRID = [dict(depth=k, alpha=a, n_tokens=n) for k in (7, 8, 9, 10) for a in (0.4, 0.5, 0.6) for n in (64, 128, 256)]
GRID += [dict(depth=k, alpha=0.5, n_tokens=n, tail=True) for k in (7, 8) for n in (128, 256, 512)]
SHORTLIST = [dict(depth=7, alpha=0.6, n_tokens=64), dict(depth=7, alpha=0.5, n_tokens=128),
             dict(depth=7, alpha=0.5, n_tokens=256, tail=True)]
KEYED_SAMPLES = 1000


def key(cell: dict, keyed: bool) -> str:
    tail = "-tail" if cell.get("tail") else ""
    return f"K{cell['depth']}-a{cell['alpha']}{tail}-N{cell['n_tokens']}" + ("-keyed" if keyed else "")


def save(k: str, cell: dict) -> None:
    """Add one cell to regime.json (re-read first, so that runs on several cores can share the file)."""
    cells = json.load(open(OUT)) if os.path.exists(OUT) else {}
    cells[k] = cell
    tmp = f"{OUT}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(cells, fh, indent=1)
    os.replace(tmp, OUT)


def compute(cell: dict, keyed: bool) -> dict:
    scales = tail_geometric_variances(cell["depth"], cell["alpha"]) if cell.get("tail") else None
    start = time.time()
    curves = theory_curves(cell["depth"], cell["alpha"], cell["n_tokens"], BUDGETS, scales=scales, keyed=keyed,
                           samples=20_000, keyed_samples=KEYED_SAMPLES)
    seconds = time.time() - start
    out = {**cell, "variances": None if scales is None else [str(v) for v in scales], "seconds": seconds,
           "curves": {n: [e.to_dict() for e in es] for n, es in curves.items()}, "tests": {}}
    for floor in FLOORS:
        r = assess(cell["depth"], cell["alpha"], cell["n_tokens"], BUDGETS, curves, floor=floor)
        out["tests"][str(floor)] = {"separating": r.separating, "separation": r.separation,
                                    "curves": {n: t.to_dict() for n, t in r.tests.items()}}
    return out


def main() -> None:
    from bridges.runs.options import script_options, study_json

    script_options(sys.argv[1:], {"table", "only", "cheap"})  # a stray word is refused before anything is computed
    cells = study_json(OUT, "regime scan")
    if "--table" in sys.argv:  # the scan as Markdown (the table of regime.md)
        print(markdown(cells))
        return
    only = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")]
    plan = [(c, False) for c in GRID] + ([] if "--cheap" in sys.argv else [(c, True) for c in SHORTLIST])
    plan = [(c, k) for c, k in plan if not only or key(c, k) in only]
    for cell, keyed in plan:
        k = key(cell, keyed)
        if k in cells:
            continue
        cells[k] = compute(cell, keyed)
        verdicts = {n: t["verdict"] for n, t in cells[k]["tests"]["0.03"]["curves"].items()}
        print(k, f"{cells[k]['seconds']:.0f} s", verdicts, flush=True)
        save(k, cells[k])


def markdown(cells: dict) -> str:
    """The scan as tables (regime.md's data part): one row per cell, the verdict of each curve at both floors."""
    names = ("path", "top_levels", "best_adaptive_keyed", "best_nonadaptive_keyed")
    lines = ["| cell | " + " | ".join(f"{n} (1% / 3%)" for n in names) + " | separating at 3% | margin |",
             "|---" * (len(names) + 3) + "|"]
    for k, c in cells.items():
        if "tests" not in c:  # not a cell of the scan: exact_law_cell (studies/scaling/prereg.py, exact_law.md)
            continue
        cur = [c["tests"][str(f)]["curves"] for f in FLOORS]
        row = []
        for n in names:
            if n not in cur[0]:
                row.append("")
                continue
            decay = ", ".join(f"{d['value']:.2f}" for d in cur[1][n]["decay"])
            row.append(f"{cur[0][n]['verdict']} / {cur[1][n]['verdict']} (decay {decay})")
        sep = c["tests"]["0.03"]
        lines.append(f"| {k} | " + " | ".join(row) + f" | {'yes' if sep['separating'] else 'no'} | "
                     f"{sep['separation']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    from bridges.runs.options import run_script

    sys.exit(run_script(lambda argv: main() or 0, sys.argv[1:], "regime.py"))

