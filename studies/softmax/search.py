"""A stronger adaptive softmax search at the depth-4 cell (issue 31, item 2; docs/softmax.md, last section).

Command: ``PYTHONPATH=. python studies/softmax/search.py [--samples=1000] [--seed=0] [--table]``.

Tree prior, depth 4, alpha 0.6, N 64, s2 0.01 (the cell of docs/softmax.md), budgets 1-4, on the same
``samples`` samples (stream EVAL of ``seed``) and the same layer-1 key (``best_nonadaptive_keyed`` at budget 1):

- ``old``: the greedy softmax policy (``fvnum.keys.adaptive.adaptive_keyed_losses``, every layer with the
  layer-1 key's ``Q``): the softmax prediction row of A in docs/softmax.md before this section;
- ``new``: ``fvnum.keys.adaptive.adaptive_softmax_losses`` (a quadratic part per layer and sample, searched
  from the greedy step), the row ``fvnum.theory.keyed_curves`` now gives A under softmax keys;
- ``tokens``: the new policy run on real tokens (``adaptive_softmax_losses_mc``: one context of N tokens per
  sample, every layer's softmax average over it), decoded by the same law-based Bayes posterior.

Beside them trained softmax A (docs/softmax.md's table: seed means, 3 seeds at budgets 1-2, 1 at 3-4).
Written to ``studies/softmax/search.json`` (atomically) with the CPU seconds of each part; ``--table`` prints the
table of docs/softmax.md from it without computing anything.
"""
from fvnum.options import KeyedSearch
import json
import os
import sys
import time

from bridges.runs.options import script_options
from bridges.runs.store import write_atomic

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "search.json")
CELL = {"depth": 4, "alpha": "0.6", "n_tokens": 64, "s2": 0.01, "budgets": [1, 2, 3, 4]}
TRAINED_A = {1: 0.7085, 2: 0.2073, 3: 0.0382, 4: 0.0025}  # softmax A, docs/softmax.md (seed means)
BAND = (0.8, 1.25)


def compute(samples: int, seed: int) -> dict:
    from fvnum.keys.nonadaptive import best_nonadaptive_keyed
    from fvnum.keys.adaptive import adaptive_keyed_losses, adaptive_softmax_losses, adaptive_softmax_losses_mc
    from fvsym.priors import TreePrior

    prior = TreePrior(CELL["depth"], CELL["alpha"])
    from fvnum.mc.channels import tokens as tokens_channel

    channel = tokens_channel(CELL["n_tokens"], CELL["s2"], keys="softmax")
    kw = dict(seed=seed)
    B = max(CELL["budgets"])
    seconds = {}

    def timed(name, fun):
        start = time.process_time()
        out = fun()
        seconds[name] = round(time.process_time() - start, 1)
        print(f"{name}: {seconds[name]} CPU s", flush=True)
        return out

    first = timed("first", lambda: best_nonadaptive_keyed(prior, 1, channel, **kw))
    old = timed("old", lambda: adaptive_keyed_losses(prior, B, channel, samples=samples, search=KeyedSearch(first=first), **kw))
    new = timed("new", lambda: adaptive_softmax_losses(prior, B, channel, samples=samples, search=KeyedSearch(first=first), **kw))
    tokens = timed("tokens", lambda: adaptive_softmax_losses_mc(prior, B, channel, samples=samples, search=KeyedSearch(first=first), **kw))
    rows = []
    for b in CELL["budgets"]:
        o, n, t = old[b - 1].estimate, new[b - 1].estimate, tokens[b - 1]
        rows.append({"budget": b, "old": o.to_dict(), "new": n.to_dict(), "tokens": t.to_dict(),
                     "trained_softmax_A": TRAINED_A[b], "trained_over_new": TRAINED_A[b] / n.value if n.value else None,
                     "trained_over_tokens": TRAINED_A[b] / t.value if t.value else None})
    return {"cell": CELL, "samples": samples, "seed": seed, "first_key": {"B": first.keys.B.tolist(),
            "Q": first.keys.Q.tolist()}, "how_new": new[-1].how, "cpu_seconds": seconds, "rows": rows,
            "command": f"PYTHONPATH=. python studies/softmax/search.py --samples={samples} --seed={seed}"}


def _pm(e: dict) -> str:
    return f"{e['value']:.4f} ± {e['stderr']:.4f}"


def table(data: dict) -> str:
    lines = ["| B | old row (greedy, layer-1 Q) | new row (Q per layer) | new policy, real tokens | "
             "trained softmax A | trained / new row | trained / real tokens |", "|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        ratio = "—" if r["trained_over_new"] is None else f"{r['trained_over_new']:.2f}"
        tok = "—" if r["trained_over_tokens"] is None else f"{r['trained_over_tokens']:.2f}"
        lines.append(f"| {r['budget']} | {_pm(r['old'])} | {_pm(r['new'])} | {_pm(r['tokens'])} | "
                     f"{r['trained_softmax_A']:.4f} | {ratio} | {tok} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    opts = script_options(argv, {"samples", "seed", "table"})
    if "table" in opts:
        with open(OUT) as f:
            print(table(json.load(f)))
        return
    try:
        data = compute(int(opts.get("samples", 1000)), int(opts.get("seed", 0)))
    except ValueError as e:  # a bad number, or the library's refusal: one line, exit code 2
        print(f"studies/softmax/search.py: error: {e}", file=sys.stderr)
        raise SystemExit(2)
    write_atomic(OUT, json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(table(data))


if __name__ == "__main__":
    from bridges.runs.options import run_script

    sys.exit(run_script(main, sys.argv[1:], "search.py"))
