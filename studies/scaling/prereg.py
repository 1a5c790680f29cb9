"""Pre-registration of the law study (studies/scaling/regime.md, section "Pre-registration of the law study").

Command: ``PYTHONPATH=. python studies/scaling/prereg.py [--stage=STAGE] [--table]``, stages in order (default: all):

- ``spread``: the seed spread of the committed study (studies/scaling/scaling.json): per model and budget the
  standard deviation of log loss over its 3 seeds (about the relative SD of the loss), pooled per model as the
  law test pools it (mean of the per-budget variances, 2 dof each: 12 dof per model).
- ``screen``: cheap theory curves (``path``, ``top_levels``; tokens channel, 100,000 Monte Carlo samples) on a grid
  of depth 8 and 9 (budgets 1..7 and 1..8, largest below the depth), alpha and N.
- ``keyed``: the prediction rows of Models A (``best_adaptive_keyed``, the greedy adaptive policy under weighted
  keys) and B (``best_nonadaptive_keyed``, the best one-layer weighted-key design found) on a shortlist, with
  modest sample counts (:data:`KEYED_SAMPLES`; the study uses 2,000 and 4 x 2,000 for the one-layer search).
- ``power``: ``fvnum.laws.law_power`` of every curve (the committed study's theory rows included), 3 and 5 seeds, at
  the measured spread of the model it predicts (the study's test: no floor) and at twice it, and with a floor.

Every result is cached in studies/scaling/prereg.json (written atomically after each piece), so a rerun computes only
what is missing. ``--table`` prints the Markdown tables of regime.md's pre-registration section.
"""
import dataclasses
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "prereg.json")
STUDY = os.path.join(HERE, "scaling.json")
SCREEN_SAMPLES = 100_000
SCREEN = [dict(depth=8, alpha=a, n_tokens=n) for a in (0.5, 0.6) for n in (64, 128, 256, 512)]
SCREEN += [dict(depth=8, alpha=0.5, n_tokens=n, tail=True) for n in (128, 256, 512, 1024)]
KEYED_SAMPLES = 1000  # the adaptive policy's samples
ONE_LAYER_SAMPLES = 2000  # the one-layer search's and its evaluation's samples (time: see regime.md)
SHORTLIST = [dict(depth=8, alpha=0.5, n_tokens=512, tail=True), dict(depth=8, alpha=0.6, n_tokens=64),
             dict(depth=8, alpha=0.5, n_tokens=1024, tail=True)]
# the one-layer rows (budgets 2.., tens of minutes a cell) only for the cells named by --one-layer=KEY,...
REPLICATES = 300
POWER_SEED = 0
# (seeds, spread as a multiple of the measured one, floor of the test): the study's test with 3 and 5 seeds, with a
# spread twice the measured one, and the variant with a 3% floor
POWER_CASES = ((3, 1, 0.0), (5, 1, 0.0), (3, 2, 0.0), (3, 1, 0.03), (5, 1, 0.03))
PREDICTS = {"best_adaptive_keyed": ("A", "exponential"), "path": ("A", "exponential"),
            "best_nonadaptive_keyed": ("B", "power"), "top_levels": ("B", "power")}


def budgets_of(depth: int) -> list:
    return list(range(1, depth))  # the largest budget below the depth: 1..7 at depth 8, 1..8 at depth 9


def key(cell: dict) -> str:
    return f"K{cell['depth']}-a{cell['alpha']}{'-tail' if cell.get('tail') else ''}-N{cell['n_tokens']}"


def prior_of(cell: dict):
    """The cell's tree prior: ``alpha``, or with ``tail`` the tail-geometric scales of ``fvnum.regime`` (the last
    level's variance equal to the one above: the noiseless path loss is exactly geometric up to B = depth - 1)."""
    from fvnum.regime import tail_geometric_variances, tree_prior

    if cell.get("tail"):
        return tree_prior(cell["depth"], scales=tail_geometric_variances(cell["depth"], cell["alpha"]))
    return tree_prior(cell["depth"], cell["alpha"])


def load() -> dict:
    return json.load(open(OUT)) if os.path.exists(OUT) else {}


def save(data: dict) -> None:
    tmp = f"{OUT}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1)
    os.replace(tmp, OUT)


# --- the seed spread of the committed study ---------------------------------------------------------------
def seed_spread() -> dict:
    study = json.load(open(STUDY))
    out = {"source": "studies/scaling/scaling.json (depth 7, alpha 0.6, N 64, budgets 1..6, 3 seeds)",
           "how": "sd of log loss over seeds per model and budget; pooled per model as the mean of the per-budget "
                  "variances (equal dof), which is the pooled variance law_test uses", "models": {}}
    for m in "ABC":
        per = {}
        for b in sorted({r["budget"] for r in study["runs"]}):
            ls = np.array([r["loss"] for r in study["runs"] if r["model"] == m and r["budget"] == b])
            per[str(b)] = {"losses": ls.tolist(), "sd_log": float(np.log(ls).std(ddof=1)),
                           "rel_sd": float(ls.std(ddof=1) / ls.mean()), "steps": next(
                               r["steps"] for r in study["runs"] if r["model"] == m and r["budget"] == b)}
        var = [v["sd_log"] ** 2 for v in per.values()]
        out["models"][m] = {"per_budget": per, "pooled_sd_log": float(np.sqrt(np.mean(var))),
                            "max_sd_log": float(np.sqrt(max(var))), "dof": 2 * len(var)}
    all_var = [v["sd_log"] ** 2 for m in "AB" for v in out["models"][m]["per_budget"].values()]
    out["pooled_AB_sd_log"] = float(np.sqrt(np.mean(all_var)))
    return out


# --- theory curves ------------------------------------------------------------------------------------------
def screen_cell(cell: dict) -> dict:
    from fvnum import loss_mc

    prior = prior_of(cell)
    start = time.time()
    kw = dict(n_tokens=cell["n_tokens"], s2=0.01, samples=SCREEN_SAMPLES, seed=0)
    curves = {name: [loss_mc(prior, name, b, **kw).to_dict() for b in budgets_of(cell["depth"])]
              for name in ("path", "top_levels")}
    return {**cell, "budgets": budgets_of(cell["depth"]), "samples": SCREEN_SAMPLES, "curves": curves,
            "seconds": time.time() - start}


def keyed_cell(cell: dict, data: dict, one_layer: bool) -> None:
    """The keyed rows of one cell, piece by piece into ``data['keyed'][key]`` (saved after each piece)."""
    from fvnum.keys.nonadaptive import best_nonadaptive_keyed
    from fvnum.keys.adaptive import adaptive_keyed_losses

    k = key(cell)
    entry = data.setdefault("keyed", {}).setdefault(k, {**cell, "budgets": budgets_of(cell["depth"]),
                                                         "samples": KEYED_SAMPLES, "seconds": {}})
    prior = prior_of(cell)
    kw = dict(n_tokens=cell["n_tokens"], s2=0.01, seed=0)
    budgets = budgets_of(cell["depth"])
    if "best_adaptive_keyed" not in entry:
        start = time.time()
        first = best_nonadaptive_keyed(prior, 1, **kw)
        found = adaptive_keyed_losses(prior, max(budgets), samples=KEYED_SAMPLES, first=first, **kw)
        entry["best_adaptive_keyed"] = [r.estimate.to_dict() for r in found]
        entry["first"] = first.estimate.to_dict()
        entry["seconds"]["best_adaptive_keyed"] = time.time() - start
        print(k, "best_adaptive_keyed", [round(r.estimate.value, 4) for r in found],
              f"{entry['seconds']['best_adaptive_keyed']:.0f} s", flush=True)
        save(data)
    if not one_layer:
        return
    rows = entry.setdefault("best_nonadaptive_keyed", {"1": entry["first"]})
    for b in budgets:
        if str(b) in rows:
            continue
        start = time.time()
        rows[str(b)] = best_nonadaptive_keyed(prior, b, samples=ONE_LAYER_SAMPLES, **kw).estimate.to_dict()
        entry["one_layer_samples"] = ONE_LAYER_SAMPLES
        entry["seconds"][f"best_nonadaptive_keyed {b}"] = time.time() - start
        print(k, "best_nonadaptive_keyed", b, rows[str(b)]["value"], f"{time.time() - start:.0f} s", flush=True)
        save(data)


# --- power ---------------------------------------------------------------------------------------------------
def curve_values(entries) -> list:
    return [float(e["value"]) for e in entries]


def power_rows(name: str, budgets: list, values: list, spread: dict) -> list:
    from fvnum.laws import law_power

    model, target = PREDICTS[name]
    sd = spread["models"][model]["pooled_sd_log"]
    out = []
    for n_seeds, factor, floor in POWER_CASES:
        p = law_power(budgets, values, spread=factor * sd, n_seeds=n_seeds, target=target, replicates=REPLICATES,
                      floor=floor, seed=POWER_SEED)
        out.append({"n_seeds": n_seeds, "spread_factor": factor, "floor": floor, **p.to_dict()})
    return out


def all_curves(data: dict) -> dict:
    """Every curve with its cell: {cell key: {"budgets": [...], name: [values]}}."""
    out = {}
    study = json.load(open(STUDY))
    bs = sorted(int(b) for b in study["theory"])
    out["K7-a0.6-N64 (committed study, 2000 samples)"] = {"budgets": bs, **{
        n: [next(t["value"] for t in study["theory"][str(b)] if t["name"] == n) for b in bs]
        for n in ("best_adaptive_keyed", "best_nonadaptive_keyed", "path", "top_levels")}}
    for k, c in data.get("screen", {}).items():
        out[f"{k} (screen)"] = {"budgets": c["budgets"], **{n: curve_values(v) for n, v in c["curves"].items()}}
    for k, c in data.get("keyed", {}).items():
        entry = {"budgets": c["budgets"]}
        if "best_adaptive_keyed" in c:
            entry["best_adaptive_keyed"] = curve_values(c["best_adaptive_keyed"])
        rows = c.get("best_nonadaptive_keyed", {})
        if all(str(b) in rows for b in c["budgets"]):
            entry["best_nonadaptive_keyed"] = [rows[str(b)]["value"] for b in c["budgets"]]
        out[f"{k} (keyed, {c['samples']} / {c.get('one_layer_samples', '-')} samples)"] = entry
    return out


# --- the plan: FLOPs per step, matched schedules, the step-doubling check, the price ---------------------------
CHOSEN = dict(depth=8, alpha=0.6, n_tokens=64)  # the best cell found (regime.md: none reaches 90% power)
STEP_RULE = 5000  # steps per unit of budget of the step-matched arm (A's recipe, for A and B alike)


def plan(cell: dict, n_seeds: int) -> dict:
    """Schedules and prices of the study in ``cell``: the step-matched arm (A, B, C at ``STEP_RULE x budget`` steps,
    ``fv scaling --steps-per-budget``), the FLOP-matched arm (A at the steps whose FLOPs match B's step-matched
    run: ``bridges.prices.flops.step_flops``, the matrix-product FLOPs of one training step counted by torch on each model
    at its recipe's batch), the step-doubling check (A, B, C at twice the steps at the largest budget), each run priced by
    ``bridges.prices.cost.train_seconds`` (the project's upper estimate) and by the previous study's measured seconds
    per priced second."""
    from bridges.prices.cost import train_seconds
    from bridges.prices.flops import flop_matched_steps, step_flops
    from bridges.studies.scaling import ScalingConfig

    budgets = budgets_of(cell["depth"])
    base = ScalingConfig(out="runs/prereg", depth=cell["depth"], alpha=cell["alpha"], n_tokens=cell["n_tokens"],
                         budgets=tuple(budgets), seeds=n_seeds, steps_per_budget=STEP_RULE, workers=2)
    runs = base.runs("runs/prereg/train")
    # the FLOP-matched arm: A alone, its steps matched to B's step-matched run (fv scaling --models A --flop-match A:B)
    flop_cfg = dataclasses.replace(base, models="A", flop_match=("A", "B"))
    flop_runs = flop_cfg.runs("runs/prereg/train")
    seed0 = {(r.model.model, r.model.budget): r for r in runs if r.train.seed == 0}
    rows = []
    for b in budgets:
        fa, fb, fc = (step_flops(seed0[m, b]) for m in "ABC")
        rows.append({"budget": b, "flops_A": fa, "flops_B": fb, "flops_C": fc, "ratio_A_B": fa / fb,
                     "steps": STEP_RULE * b, "B_steps_matching_A": flop_matched_steps(seed0["B", b], seed0["A", b]),
                     "A_steps_matching_B": flop_cfg.steps(b, "A")})
    step_matched = [(r.model.model, r.model.budget, train_seconds(r)) for r in runs]
    matching = {x["budget"]: x for x in rows}
    flop_runs_b = [r.replace(train=dict(steps=matching[r.model.budget]["B_steps_matching_A"]))
                   for r in runs if r.model.model == "B"]
    top = max(budgets)
    doubling = [r.replace(train=dict(steps=2 * r.train.steps)) for r in runs if r.model.budget == top]  # paired by seed
    hours = lambda xs: sum(xs) / 3600  # noqa: E731
    price = {"step_matched": hours(s for *_, s in step_matched),
             "flop_matched_A": hours(train_seconds(r) for r in flop_runs),
             "step_doubling": hours(train_seconds(r) for r in doubling)}
    price["total"] = sum(price.values())
    price["not_planned_flop_matched_B"] = hours(train_seconds(r) for r in flop_runs_b)
    return {"cell": cell, "budgets": budgets, "n_seeds": n_seeds, "schedule": rows, "price_cpu_hours": price,
            "price_by_model": {m: hours(s for mm, _, s in step_matched if mm == m) for m in "ABC"},
            "flop_matched_A_steps": {str(r.model.budget): r.train.steps for r in flop_runs if r.train.seed == 0},
            "doubling_steps": {r.model.model: r.train.steps for r in doubling if r.train.seed == 0},
            "doubling_runs": len(doubling)}


def calibration() -> dict:
    """The previous study's measured training CPU time against its price (``bridges.prices.cost.train_seconds`` of the
    same runs, rebuilt by ``ScalingConfig`` with the committed config; their keys are checked against the rows)."""
    from bridges.prices.cost import train_seconds
    from bridges.studies.scaling import ScalingConfig

    study = json.load(open(STUDY))
    c = study["config"]
    cfg = ScalingConfig(out=c["out"], depth=c["depth"], alpha=c["alpha"], n_tokens=c["n_tokens"],
                        budgets=tuple(c["budgets"]), seeds=c["seeds"], workers=c["workers"])
    priced = {r.key(): train_seconds(r) for r in cfg.runs(c["out"] + "/train")}
    out = {}
    for m in "ABC":
        rs = [r for r in study["runs"] if r["model"] == m]
        if any(r["key"] not in priced for r in rs):
            raise ValueError(f"the rebuilt runs of model {m} do not match the committed keys")
        measured = sum(r["train_seconds"] for r in rs)
        p = sum(priced[r["key"]] for r in rs)
        out[m] = {"measured_hours": measured / 3600, "priced_hours": p / 3600, "ratio": measured / p}
    return out

# --- tables for regime.md ---------------------------------------------------------------------------------------
def _pw(rows, n_seeds, factor, floor) -> str:
    r = next((r for r in rows if r["n_seeds"] == n_seeds and r["spread_factor"] == factor and r["floor"] == floor),
             None)
    return "" if r is None else f"{r['power']:.2f}"


def _mix(rows) -> str:
    r = next(r for r in rows if r["n_seeds"] == 3 and r["spread_factor"] == 1 and r["floor"] == 0)
    short = {"exponential": "exp", "power": "pow", "can't tell": "ct", "neither": "nei"}
    return " ".join(f"{short[k]} {v:.2f}" for k, v in r["fractions"].items() if v > 0)


def markdown(data: dict) -> str:
    sp = data["spread"]
    lines = ["| model | " + " | ".join(f"B {b}" for b in sp["models"]["A"]["per_budget"]) + " | pooled (12 dof) |",
             "|---" * (2 + len(sp["models"]["A"]["per_budget"])) + "|"]
    for m, v in sp["models"].items():
        lines.append(f"| {m} | " + " | ".join(f"{x['sd_log']:.4f}" for x in v["per_budget"].values())
                     + f" | **{v['pooled_sd_log']:.4f}** |")
    lines += ["", "| cell | curve (predicts) | local decay B -> B+1 | 3 seeds | 5 seeds | 3 seeds, 2x spread | "
              "3 seeds, floor 3% | 5 seeds, floor 3% | verdicts (3 seeds) |", "|---" * 9 + "|"]
    for tag, entry in data.get("power", {}).items():
        cell, name = tag.split(" | ")
        model, law = PREDICTS[name]
        decay = ", ".join(f"{x:.2f}" for x in -np.diff(np.log(entry["curve"])))
        rows = entry["rows"]
        shown = " | ".join(_pw(rows, *case) for case in POWER_CASES)
        lines.append(f"| {cell} | `{name}` ({model}: {law}) | {decay} | {shown} | {_mix(rows)} |")
    if "plan" in data:
        pl = data["plan"]
        lines += ["", "| budget | GFLOP/step A | GFLOP/step B | GFLOP/step C | A / B | steps (A, B, C) | "
                  "B's steps matching A's FLOPs | A's steps matching B's FLOPs |", "|---" * 8 + "|"]
        for r in pl["schedule"]:
            gflops = " | ".join(f"{r[f'flops_{m}'] / 1e9:.{2 if m != 'C' else 3}f}" for m in "ABC")
            lines.append(f"| {r['budget']} | {gflops} | {r['ratio_A_B']:.2f} | {r['steps']} | "
                         f"{r['B_steps_matching_A']} | {r['A_steps_matching_B']} |")
        pr = pl["price_cpu_hours"]
        cal = data["calibration"]
        lines += ["", "| part | priced CPU-hours (bridges.prices.cost) |", "|---|---|"]
        for k, v in pr.items():
            lines.append(f"| {k} | {v:.1f} |")
        lines += ["", "| model | previous study: measured CPU-hours | priced | measured / priced |",
                  "|---|---|---|---|"]
        for m, c in cal.items():
            lines.append(f"| {m} | {c['measured_hours']:.2f} | {c['priced_hours']:.2f} | {c['ratio']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    stage = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--stage=")), "all")
    data = load()
    if "--table" in sys.argv:
        print(markdown(data))
        return
    if stage in ("spread", "all"):
        data["spread"] = seed_spread()
        save(data)
        print("spread", {m: round(v["pooled_sd_log"], 4) for m, v in data["spread"]["models"].items()}, flush=True)
    if stage in ("screen", "all"):
        screen = data.setdefault("screen", {})
        for cell in SCREEN:
            if key(cell) not in screen:
                screen[key(cell)] = screen_cell(cell)
                save(data)
                print("screen", key(cell), f"{screen[key(cell)]['seconds']:.0f} s", flush=True)
    if stage in ("keyed", "all"):
        for cell in SHORTLIST:  # every cell's adaptive row first (cheaper), then the one-layer rows
            keyed_cell(cell, data, one_layer=False)
        wanted = [k for a in sys.argv if a.startswith("--one-layer=") for k in a.split("=", 1)[1].split(",")]
        for cell in SHORTLIST:
            if key(cell) in wanted:
                keyed_cell(cell, data, one_layer=True)
    if stage in ("plan", "all"):
        data["plan"] = plan(CHOSEN, 3)
        data["calibration"] = calibration()
        save(data)
        print("plan", key(CHOSEN), {k: round(v, 1) for k, v in data["plan"]["price_cpu_hours"].items()}, flush=True)
    if stage in ("power", "all"):
        spread = data["spread"]
        powers = data.setdefault("power", {})
        for cell, curves in all_curves(data).items():
            for name, values in curves.items():
                if name == "budgets" or name not in PREDICTS:
                    continue
                tag = f"{cell} | {name}"
                if powers.get(tag, {}).get("curve") == values:
                    continue
                powers[tag] = {"curve": values, "budgets": curves["budgets"],
                               "rows": power_rows(name, curves["budgets"], values, spread)}
                save(data)
                best = [r for r in powers[tag]["rows"] if r["spread_factor"] == 1 and r["floor"] == 0]
                print("power", tag, [(r["n_seeds"], r["power"]) for r in best], flush=True)


if __name__ == "__main__":
    main()
