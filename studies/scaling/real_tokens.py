"""A's and B's keyed prediction rows on real tokens, at every budget of the scaling study and at fv reproduce's cell
(issue 45, item 6; studies/scaling/real_tokens.md).

Command: ``PYTHONPATH=. python studies/scaling/real_tokens.py [--samples=2000] [--budgets=1,2,3,4,5,6] [--page]``.

The study's prediction rows (``best_adaptive_keyed``: A's, the greedy weighted-key policy; ``best_nonadaptive_keyed``:
B's, the best one-layer design found) draw each reading from the keys' CLT law. Here the same policy and the same
designs read real tokens (``fvnum.keys.real_tokens``: ``N`` tokens and labels drawn per context, every reading exact,
decoded by the exact posterior mean under the CLT law), on ``--samples`` contexts shared by A and B (paired), beside
the study's law rows and the trained seed means of A and B (studies/scaling/scaling.json). The designs are searched
again with the study's settings (``search_samples`` 2000, so 8000 design samples; seed 0); each design's own law
loss is stored beside the study's row of B (``B_design_law_here``: the same search, up to its last digits). ``--budgets``: the budgets to compute (the rest stay as
stored); ``--page``: write real_tokens.md from real_tokens.json without computing.

Resumable: every finished budget is stored in studies/scaling/real_tokens.json at once (atomically, under a lock),
with A's readings so far (``state``; the policy goes on from them in the next call; dropped once every budget is
done), so an interrupted run loses at most the budget it was on. fv reproduce's cell (tree depth 4, alpha 0.6, N 64,
budget 2) is one more entry, its law and real rows from ``fvnum.theory.keyed_curves(..., real_samples=...)``, beside
the trained numbers of docs/reproduce.md.
"""
import fvnum
import json
import math
import os
import statistics
import sys
import time

import numpy as np

from bridges.runs.options import script_options
from bridges.runs.store import read_json, update_json, write_atomic

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "real_tokens.json")
PAGE = os.path.join(HERE, "real_tokens.md")
COMMAND = "PYTHONPATH=. python studies/scaling/real_tokens.py"
with open(os.path.join(HERE, "scaling.json")) as _f:
    STUDY = json.load(_f)
CFG = STUDY["config"]
SAMPLES = 2000  # the contexts of every real row: the samples of the study's A law row (its search_samples)
# fv reproduce's default cell (bridges.studies.reproduce.DEFAULT_CELL) and its trained losses, seed 0 at 4000 steps
# (docs/reproduce.md, "What the report says on the defaults"; A's seeds 1 and 2 from its table of cells)
REPRODUCE_CELL = {"depth": 4, "alpha": 0.6, "n_tokens": 64, "s2": 0.01, "budget": 2}
REPRODUCE_TRAINED = {"A": [0.1441, 0.1252, 0.1216], "B": [0.2655]}


def prior_of(depth: int, alpha) -> object:
    from fvsym.priors import TreePrior

    return TreePrior(depth, str(alpha))


def estimate(values) -> dict:
    from fvnum.estimate import Estimate

    e = Estimate.of(values)
    return {"value": e.value, "stderr": e.stderr, "n": e.n}


def ratio(a: dict, b: dict) -> dict:
    """``a / b`` of independent estimates (``value``, ``stderr``), its standard error by the delta method."""
    r = a["value"] / b["value"]
    return {"value": r, "stderr": abs(r) * math.hypot(a["stderr"] / a["value"], b["stderr"] / b["value"])}


def paired_ratio(a: np.ndarray, b: np.ndarray) -> dict:
    """``mean(a) / mean(b)`` of losses on the same contexts, its standard error by the delta method."""
    r = a.mean() / b.mean()
    return {"value": float(r), "stderr": float((a - r * b).std(ddof=1) / math.sqrt(a.size) / b.mean())}


def trained(model: str, budget: int) -> dict:
    """The study's trained seed mean of ``model`` at ``budget``, its standard error the seeds' spread / sqrt(seeds)."""
    losses = [r["loss"] for r in STUDY["runs"] if r["model"] == model and r["budget"] == budget]
    return seed_mean(losses)


def seed_mean(losses: list) -> dict:
    se = statistics.stdev(losses) / math.sqrt(len(losses)) if len(losses) > 1 else None
    return {"value": statistics.mean(losses), "stderr": se, "seeds": losses}


def law(name: str, budget: int) -> dict:
    (row,) = [r for r in STUDY["theory"][str(budget)] if r["name"] == name]
    return {"value": row["value"], "stderr": row["stderr"], "how": row["how"]}


def beside(a_real: dict, b_real: dict, a_law: dict, b_law: dict, a_tr: dict, b_tr: dict, paired: dict) -> dict:
    out = {"A_real/A_law": ratio(a_real, a_law), "B_real/B_law": ratio(b_real, b_law), "A_real/B_real": paired}
    for name, t, r in (("A", a_tr, a_real), ("B", b_tr, b_real)):
        if t["stderr"] is not None:
            out[f"{name}_trained/{name}_real"] = ratio(t, r)
        else:
            out[f"{name}_trained/{name}_real"] = {"value": t["value"] / r["value"], "stderr": None}
    return out


def study_budget(budget: int, samples: int, first, state) -> tuple:
    """Both real rows at ``budget`` of the study's cell, A's policy going on from the readings ``state``."""
    from fvnum.keys.nonadaptive import best_nonadaptive_keyed
    from fvnum.keys.real_tokens import real_keyed_losses
    from fvnum.mc.channels import tokens

    prior, N, s2 = prior_of(CFG["depth"], CFG["alpha"]), CFG["n_tokens"], CFG["s2"]
    t0 = time.time()
    design = first if budget == 1 else best_nonadaptive_keyed(prior, budget, tokens(N, s2, keys=CFG["keyed"]),
                                                              seed=CFG["seed"], samples=4 * CFG["search_samples"])
    t1 = time.time()
    found = real_keyed_losses(prior, [budget], CFG["keyed"], n_tokens=N, s2=s2, samples=samples, seed=CFG["seed"],
                              first=first, designs={budget: design}, readings=state)
    t2 = time.time()
    a, b = found.adaptive[budget], found.nonadaptive[budget]
    a_real, b_real = estimate(a), estimate(b)
    a_law, b_law = law("best_adaptive_keyed", budget), law("best_nonadaptive_keyed", budget)
    a_tr, b_tr = trained("A", budget), trained("B", budget)
    entry = {"budget": budget, "A_real": a_real, "B_real": b_real, "A_law": a_law, "B_law": b_law,
             "A_trained": a_tr, "B_trained": b_tr,
             "ratios": beside(a_real, b_real, a_law, b_law, a_tr, b_tr, paired_ratio(a, b)),
             "B_design_law_here": design.estimate.value,  # the design's own law loss: the study's B row if the same
             "same_design_as_study": bool(abs(design.estimate.value - b_law["value"]) <= 1e-12 * max(1.0, b_law["value"])),
             "seconds": {"design_search": round(t1 - t0, 1), "real_rows": round(t2 - t1, 1)}}
    return entry, found.readings


def reproduce_cell(samples: int) -> dict:
    """fv reproduce's cell: the keyed rows (law and real) of ``fvnum.theory.keyed_curves`` at its budget, with the
    settings of fv reproduce (2000 search samples, seed 0), beside the trained losses of docs/reproduce.md."""
    from fvnum.mc.channels import make_channel
    from fvnum.priors.tree import numeric_prior
    from fvnum.theory import keyed_curves

    c = REPRODUCE_CELL
    prior = prior_of(c["depth"], c["alpha"])
    t0 = time.time()
    rows = keyed_curves(prior, [c["budget"]], make_channel(numeric_prior(prior), fvnum.tokens(c["n_tokens"], s2=c["s2"])),
                        "weighted", samples=2000, seed=0, real_samples=samples)[c["budget"]]
    found = {r.name: {"value": r.value, "stderr": r.stderr, "how": r.how} for r in rows}
    a_real, b_real = found["best_adaptive_keyed_real"], found["best_nonadaptive_keyed_real"]
    a_law, b_law = found["best_adaptive_keyed"], found["best_nonadaptive_keyed"]
    a_tr, b_tr = seed_mean(REPRODUCE_TRAINED["A"]), seed_mean(REPRODUCE_TRAINED["B"])
    return {**c, "A_real": a_real, "B_real": b_real, "A_law": a_law, "B_law": b_law, "A_trained": a_tr,
            "B_trained": b_tr, "ratios": beside(a_real, b_real, a_law, b_law, a_tr, b_tr, ratio(a_real, b_real)),
            "trained_from": "docs/reproduce.md (seed 0 at 4000 steps; A's seeds 1 and 2 from its table of cells)",
            "seconds": round(time.time() - t0, 1)}


def config(samples: int) -> dict:
    keep = ("depth", "alpha", "n_tokens", "s2", "budgets", "keyed", "search_samples", "seed")
    return {**{k: CFG[k] for k in keep}, "samples": samples, "design_samples": 4 * CFG["search_samples"],
            "command": COMMAND + (f" --samples={samples}" if samples != SAMPLES else "")}


def run(budgets: list[int], samples: int) -> None:
    from fvnum.keys.nonadaptive import best_nonadaptive_keyed
    from fvnum.mc.channels import tokens
    from fvnum.keys.tree import one_thread

    data = read_json(OUT, {})
    if data.get("config", {}).get("samples", samples) != samples:
        raise SystemExit(f"real_tokens.json holds rows of {data['config']['samples']} contexts; give --samples="
                         f"{data['config']['samples']} or move it away")
    update_json(OUT, lambda d: d.__setitem__("config", config(samples)))
    todo = [b for b in budgets if str(b) not in data.get("budgets", {})]
    with one_thread():
        if todo:
            prior = prior_of(CFG["depth"], CFG["alpha"])
            first = best_nonadaptive_keyed(prior, 1, tokens(CFG["n_tokens"], CFG["s2"], keys=CFG["keyed"]),
                                           seed=CFG["seed"])
        for b in todo:
            state = read_json(OUT, {}).get("state")
            state = None if state is None else np.array(state["readings"], dtype=float)
            if state is not None and state.shape[1] > b:  # the readings of a later budget: its first b layers
                state = state[:, :b]
            entry, readings = study_budget(b, samples, first, state)

            def save(d, entry=entry, readings=readings):
                d.setdefault("budgets", {})[str(b)] = entry
                old = d.get("state")
                if old is None or len(old["readings"][0]) < readings.shape[1]:
                    d["state"] = {"readings": readings.tolist()}

            update_json(OUT, save)
            print(f"budget {b}: A real {entry['A_real']['value']:.4f} ± {entry['A_real']['stderr']:.4f} (law "
                  f"{entry['A_law']['value']:.4f}), B real {entry['B_real']['value']:.4f} ± "
                  f"{entry['B_real']['stderr']:.4f} (law {entry['B_law']['value']:.4f}); {entry['seconds']}", flush=True)
        if "reproduce_cell" not in read_json(OUT, {}):
            cell = reproduce_cell(samples)
            update_json(OUT, lambda d: d.__setitem__("reproduce_cell", cell))
            print(f"reproduce cell: A real {cell['A_real']['value']:.4f}, B real {cell['B_real']['value']:.4f}",
                  flush=True)
    if set(map(str, CFG["budgets"])) <= set(read_json(OUT, {}).get("budgets", {})):
        update_json(OUT, lambda d: d.pop("state", None))  # every budget done: the readings are not needed


def _cell(e: dict) -> str:
    se = e.get("stderr")
    return f"{e['value']:.4f}" + (f" ± {se:.4f}" if se else "")


def _r(e: dict) -> str:
    return f"{e['value']:.2f}" + (f" ± {e['stderr']:.2f}" if e.get("stderr") else "")


def page() -> str:
    data = read_json(OUT, {})
    cfg = data["config"]
    rows = [data["budgets"][k] for k in sorted(data.get("budgets", {}), key=int)]
    head = ("| budget | A real | A law | A trained | A real / law | A trained / real | B real | B law | B trained | "
            "B real / law | B trained / real | A real / B real |")
    lines = [
        "# A's and B's prediction rows on real tokens",
        "",
        f"Written by `{cfg['command']}` from [real_tokens.json](real_tokens.json) (issue 45, item 6).",
        "",
        "The prediction rows of the scaling study ([report.md](report.md)) are computed under the law of the "
        "readings: `best_adaptive_keyed` (Model A's prediction, the greedy weighted-key policy) and "
        "`best_nonadaptive_keyed` (Model B's, the best one-layer design found) draw every reading from the keys' "
        "CLT law given the leaf. Here the same policy and the same designs read real tokens "
        "(`fvnum.keys.real_tokens`; `comparison_table(..., real_samples=n)` adds them to a table as "
        "`best_adaptive_keyed_real` and `best_nonadaptive_keyed_real`): every context draws its leaf, "
        f"N = {cfg['n_tokens']} tokens and their labels (s2 {cfg['s2']}), each key reads its exact average over "
        "those tokens, and the readings are decoded as in the law rows, by the exact posterior mean under the CLT "
        "law. The decoder does not know the readings are real, so each row is an achievable loss; its gap to the "
        "law's row is what the CLT misses at this N. A and B read the same "
        f"{cfg['samples']} contexts (seed {cfg['seed']}), so A real / B real is paired. Losses are "
        "E ||theta_hat - theta||^2 with their standard errors (over contexts for the real rows, over the law's "
        "samples for the law rows, over the 3 trained seeds for the trained means; ratios by the delta method).",
        "",
        f"## The scaling study's cell (tree depth {cfg['depth']}, alpha {cfg['alpha']}, N {cfg['n_tokens']})",
        "",
        head, "|---" * 12 + "|",
    ]
    for e in rows:
        r = e["ratios"]
        lines.append(f"| {e['budget']} | {_cell(e['A_real'])} | {_cell(e['A_law'])} | {_cell(e['A_trained'])} | "
                     f"{_r(r['A_real/A_law'])} | {_r(r['A_trained/A_real'])} | {_cell(e['B_real'])} | "
                     f"{_cell(e['B_law'])} | {_cell(e['B_trained'])} | {_r(r['B_real/B_law'])} | "
                     f"{_r(r['B_trained/B_real'])} | {_r(r['A_real/B_real'])} |")
    same = [e["budget"] for e in rows if not e["same_design_as_study"]]
    gaps = [abs(e["B_design_law_here"] - e["B_law"]["value"]) / e["B_law"]["stderr"] for e in rows if e["budget"] in same]
    here = ", ".join(f"{e['B_design_law_here']:.4f}" for e in rows if e["budget"] in same)
    lines += ["", "B's designs were searched again with the study's settings; "
              + ("each is the study's (its law loss equals the study's `best_nonadaptive_keyed` row)." if not same
                 else f"at budgets {', '.join(map(str, same))} the search does not repeat the study's bit for bit (the "
                      f"design found here has a law loss of "
                      f"{here} "
                      f"on its own samples against the study's row; the differences are at most "
                      f"{max(gaps):.2f} of the row's standard error): the same design up to the search's last digits.")]
    lines += ["", _findings(rows)]
    cell = data.get("reproduce_cell")
    if cell:
        r = cell["ratios"]
        lines += ["", f"## fv reproduce's cell (tree depth {cell['depth']}, alpha {cell['alpha']}, N "
                      f"{cell['n_tokens']}, budget {cell['budget']})", "",
                  "The rows `fv reproduce` now shows in its theory tables (`ReproduceConfig.real_samples`), computed "
                  f"here with its settings; trained losses from {cell['trained_from']}.", "",
                  "| model | real | law | trained (seed mean) | real / law | trained / real |", "|---|---|---|---|---|---|",
                  f"| A | {_cell(cell['A_real'])} | {_cell(cell['A_law'])} | {_cell(cell['A_trained'])} | "
                  f"{_r(r['A_real/A_law'])} | {_r(r['A_trained/A_real'])} |",
                  f"| B | {_cell(cell['B_real'])} | {_cell(cell['B_law'])} | {_cell(cell['B_trained'])} | "
                  f"{_r(r['B_real/B_law'])} | {_r(r['B_trained/B_real'])} |", "",
                  f"A real / B real: {_r(r['A_real/B_real'])} (not paired here: the rows' own standard errors)."]
    secs = [e["seconds"] for e in rows]
    lines += ["", f"Time on the shared 2-core machine (two trainings running beside it), one thread: design searches "
                  f"{sum(s['design_search'] for s in secs):.0f} s, real rows {sum(s['real_rows'] for s in secs):.0f} s, "
                  f"and about a minute for the layer-1 key. A's policy chooses layer b's rows by running the search "
                  f"of layers 2..b again on the readings so far (b - 1 lookahead layers), and each budget is one "
                  f"resumable step, which first rebuilds the earlier layers' rows from the stored readings (b - 2 "
                  f"more)."]
    return "\n".join(lines) + "\n"


def _findings(rows: list) -> str:
    """The paragraph the numbers say: real beside law in standard errors, and the trained models beside the real rows."""
    def z(real, law):
        se = math.hypot(real["stderr"], law["stderr"])
        return (real["value"] - law["value"]) / se if se else 0.0

    def span(key):
        vals = [e["ratios"][key]["value"] for e in rows]
        return f"{min(vals):.2f} to {max(vals):.2f}"

    za = [z(e["A_real"], e["A_law"]) for e in rows]
    zb = [z(e["B_real"], e["B_law"]) for e in rows]
    budgets = ", ".join(str(e["budget"]) for e in rows)
    far = [f"{m} at budget {e['budget']} ({v:+.1f})" for e, a, b in zip(rows, za, zb) for m, v in (("A", a), ("B", b))
           if abs(v) > 3]
    below = sum(v < 0 for v in za + zb)
    by_budget = ", ".join(f"{e['ratios']['A_trained/A_real']['value']:.2f}" for e in rows)
    text = (f"Real beside law, in combined standard errors (budgets {budgets}): A {', '.join(f'{v:+.1f}' for v in za)}; "
            f"B {', '.join(f'{v:+.1f}' for v in zb)}; "
            + (f"beyond 3 of them: {', '.join(far)}. " if far else "none beyond 3 of them. ")
            + f"{below} of the {len(za + zb)} real rows lie below their law rows (the budgets share their contexts, so "
            f"these are not independent draws): real / law is {span('A_real/A_law')} for A and "
            f"{span('B_real/B_law')} for B. On real tokens at N {CFG['n_tokens']} the policy and the designs do what "
            f"the law rows say, or a little better. Trained / real: A {span('A_trained/A_real')} (by budget: "
            f"{by_budget}), B "
            f"{span('B_trained/B_real')}: B sits on its row on real tokens too, and A's gap to its prediction from "
            f"budget 3 on is not the CLT's (the real rows are lower still).")
    return text


def main(argv: list[str]) -> int:
    opts = script_options(argv, {"samples", "budgets", "page"})
    if "page" not in opts:
        budgets = [int(b) for b in opts.get("budgets", ",".join(map(str, CFG["budgets"]))).split(",")]
        run(sorted(budgets), int(opts.get("samples", SAMPLES)))
    write_atomic(PAGE, page())
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    from bridges.runs.options import run_script

    sys.exit(run_script(main, sys.argv[1:], "real_tokens.py"))
