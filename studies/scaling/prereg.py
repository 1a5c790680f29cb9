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
- ``exact``: ``exact_law_cell`` of studies/scaling/regime.json (studies/scaling/exact_law.md): the cheapest cell whose
  predictions pass to the test's precision, else the best found; its price, CPU and GPU, and its resumable command.

Every result is cached in studies/scaling/prereg.json (written atomically after each piece), so a rerun computes only
what is missing. ``--table`` prints the tables of regime.md's pre-registration section, ``--exact-table`` those of
exact_law.md; a stray argument or a damaged prereg.json is refused in one line with exit status 2."""
import dataclasses
import json
import os
import sys
import time

import numpy as np

from bridges.runs.options import run_script, script_options, study_json
from bridges.runs.store import write_atomic
from fvsym._validate import check_choice

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "prereg.json")
STUDY = os.path.join(HERE, "scaling.json")
SCREEN_SAMPLES = 100_000
SCREEN = [dict(depth=8, alpha=a, n_tokens=n) for a in (0.5, 0.6) for n in (64, 128, 256, 512)]
SCREEN += [dict(depth=8, alpha=0.5, n_tokens=n, tail=True) for n in (128, 256, 512, 1024)]
# the exact-law scan (issue 45, item 7; studies/scaling/exact_law.md): alpha 0.7 and 0.8, N 64..1024, and N 1024 at
# alpha 0.5 and 0.6, and the tail scales at N 64 (the tail-geometric scales exist for alpha <= 1/2 only)
SCREEN += [dict(depth=8, alpha=a, n_tokens=n) for a in (0.7, 0.8) for n in (64, 128, 256, 512, 1024)]
SCREEN += [dict(depth=8, alpha=a, n_tokens=1024) for a in (0.5, 0.6)]
SCREEN += [dict(depth=8, alpha=0.5, n_tokens=64, tail=True)]
KEYED_SAMPLES = 1000  # the adaptive policy's samples
ONE_LAYER_SAMPLES = 2000  # the one-layer search's and its evaluation's samples (time: see regime.md)
SHORTLIST = [dict(depth=8, alpha=0.5, n_tokens=512, tail=True), dict(depth=8, alpha=0.6, n_tokens=64),
             dict(depth=8, alpha=0.5, n_tokens=1024, tail=True)]
# the exact-law scan: the cheapest cells of alpha 0.7 and 0.8 (N 64), where `path` bends least among the new cells
SHORTLIST += [dict(depth=8, alpha=0.7, n_tokens=64), dict(depth=8, alpha=0.8, n_tokens=64)]
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
    return study_json(OUT, "preregistration", entries=False)


def save(data: dict, path: str = OUT) -> None:
    """Write ``data`` to ``path`` atomically (serialized first: a value JSON cannot hold leaves no file behind)."""
    write_atomic(path, json.dumps(data, indent=1))


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
    from fvnum import loss_mc, tokens

    prior = prior_of(cell)
    start = time.time()
    curves = {name: [loss_mc(prior, name, b, tokens(cell["n_tokens"], 0.01), samples=SCREEN_SAMPLES, seed=0).to_dict()
                     for b in budgets_of(cell["depth"])] for name in ("path", "top_levels")}
    return {**cell, "budgets": budgets_of(cell["depth"]), "samples": SCREEN_SAMPLES, "curves": curves,
            "seconds": time.time() - start}


def keyed_cell(cell: dict, data: dict, one_layer: bool) -> None:
    """The keyed rows of one cell, piece by piece into ``data['keyed'][key]`` (saved after each piece)."""
    from fvnum.keys.nonadaptive import best_nonadaptive_keyed
    from fvnum.keys.adaptive import adaptive_keyed_losses
    from fvnum.mc.channels import tokens
    from fvnum.options import KeyedSearch

    k = key(cell)
    entry = data.setdefault("keyed", {}).setdefault(k, {**cell, "budgets": budgets_of(cell["depth"]),
                                                         "samples": KEYED_SAMPLES, "seconds": {}})
    prior = prior_of(cell)
    channel = tokens(cell["n_tokens"], 0.01, keys="weighted")
    kw = dict(seed=0)
    budgets = budgets_of(cell["depth"])
    if "best_adaptive_keyed" not in entry:
        start = time.time()
        first = best_nonadaptive_keyed(prior, 1, channel, **kw)
        found = adaptive_keyed_losses(prior, max(budgets), channel, samples=KEYED_SAMPLES, search=KeyedSearch(first=first),
                                      **kw)
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
        rows[str(b)] = best_nonadaptive_keyed(prior, b, channel, samples=ONE_LAYER_SAMPLES, **kw).estimate.to_dict()
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

# --- the exact-law cell (issue 45, item 7; studies/scaling/exact_law.md) -----------------------------------------
REGIME = os.path.join(HERE, "regime.json")
EXACT_KEY = "exact_law_cell"
PASS = 0.9  # both predictions come out as predicted in at least this share of replicates (3 seeds, the study's test)
PRECISION_SHARE = 1 / 3  # a prediction is known to the test's precision when its Monte Carlo error at every tested
# budget is at most this share of the error of a 3-seed mean of trained losses (the model's spread / sqrt 3)
EXACT_OUT = "runs/exact_law"  # git-ignored (/runs/): the run folders and cells, carried between device calls
CALL_SECONDS = 570  # fv --max-seconds of one resumable call: under the 10 minutes of a device call, and over the
# start and twice the audit reserve that fv scaling --resumable requires (bridges.study_commands.resumable_scaling)
GPU_STEP = {"central": (3e-3, 20e12), "low": (1e-3, 50e12), "high": (6e-3, 8e12)}  # a step: (fixed s, FLOP/s)
GPU_NOTE = ("estimate, not a measurement: no CUDA step has been timed in this project; a step is priced as a fixed "
            "part (kernel launches of forward, backward and Adam: 3 ms; 1-6 ms) plus its counted matrix-product FLOPs "
            "(bridges.prices.flops.step_flops) at 20 TFLOP/s effective float32 (8-50), runs one after another on one "
            "GPU; evaluations, checkpoints and the start of each call not counted")


def _case(rows: list, n_seeds: int = 3, factor: float = 1, floor: float = 0.0) -> dict | None:
    return next((r for r in rows if (r["n_seeds"], r["spread_factor"], r["floor"]) == (n_seeds, factor, floor)), None)


def precision(entries: list, budgets: list, samples: int, spread: float, seconds: float | None) -> dict:
    """A theory curve's Monte Carlo precision: its largest relative error at the tested budgets (``>= cut``), the
    target (:data:`PRECISION_SHARE` x ``spread / sqrt 3``), the samples and CPU time (measured rate) to reach it."""
    from fvnum.laws import DEFAULT_CUT

    rel = max(float(e["stderr"]) / float(e["value"]) for b, e in zip(budgets, entries) if b >= DEFAULT_CUT)
    target = PRECISION_SHARE * spread / np.sqrt(3)
    need = int(np.ceil(samples * max(1.0, (rel / target) ** 2)))
    return {"max_rel_stderr": rel, "target": float(target), "samples": samples, "samples_needed": need,
            "precise": bool(rel <= target), "cpu_hours_needed": None if seconds is None else seconds * need / samples / 3600}


def judged_cells(data: dict) -> list:
    """Every keyed cell with its predictions' powers (3 seeds: the study's test, its 5-seed and 3%-floor
    variants), the Monte Carlo precision of each prediction, and whether it passes (both predictions at least
    :data:`PASS` under the study's test, and both known to the test's precision)."""
    spread, tags_of = data["spread"]["models"], {}  # {cell key: {prediction: its power tag}}
    for tag in data.get("power", {}):
        cell, name = tag.split(" | ")
        if "(keyed" in cell and name in ("best_adaptive_keyed", "best_nonadaptive_keyed"):
            tags_of.setdefault(cell.split(" (")[0], {})[name] = tag
    out = []
    for k, tags in tags_of.items():
        c = data["keyed"][k]
        judged = {"key": k, "cell": {f: c[f] for f in ("depth", "alpha", "n_tokens", "tail") if f in c},
                  "budgets": c["budgets"], "predictions": {}}
        for name in ("best_adaptive_keyed", "best_nonadaptive_keyed"):
            if name not in tags:
                judged["predictions"][name] = None
                continue
            model, law = PREDICTS[name]
            rows = data["power"][tags[name]]["rows"]
            if name == "best_adaptive_keyed":
                entries, samples, sec = c[name], c["samples"], c["seconds"].get(name)
            else:
                entries = [c[name][str(b)] for b in c["budgets"]]
                samples = c.get("one_layer_samples", ONE_LAYER_SAMPLES)
                sec = sum(v for n, v in c["seconds"].items() if n.startswith(name)) or None  # every budget's search
            r, f = _case(rows), _case(rows, 3, 1, 0.03)
            judged["predictions"][name] = {
                "model": model, "law": law, "curve": data["power"][tags[name]]["curve"], "power": r["power"],
                "power_5_seeds": _case(rows, 5)["power"], "power_floor_3pct": f["power"], "verdicts": r["fractions"],
                "verdicts_floor_3pct": f["fractions"],
                "precision": precision(entries, c["budgets"], samples, spread[model]["pooled_sd_log"], sec)}
        preds = list(judged["predictions"].values())
        judged["complete"] = all(p is not None for p in preds)
        judged["powers_pass"] = judged["complete"] and all(p["power"] >= PASS for p in preds)
        out.append({**judged, "passed": judged["powers_pass"] and all(p["precision"]["precise"] for p in preds)})
    return out


def exact_config(cell: dict, out: str = EXACT_OUT, device: str = "cuda"):
    """The study of a cell as ``fv scaling`` runs it: Models A, B, C, 3 seeds, budgets 1..depth - 1, the step rule
    of the plan (:data:`STEP_RULE` x budget), the study's theory samples, 2 workers."""
    from bridges.studies.scaling import ScalingConfig

    return ScalingConfig(out=out, depth=cell["depth"], alpha=cell["alpha"], n_tokens=cell["n_tokens"], s2=0.01,
                         budgets=tuple(budgets_of(cell["depth"])), models="ABC", seeds=3, steps_per_budget=STEP_RULE,
                         search_samples=2000, workers=2, device=device)


def exact_command(cell: dict, seconds: int = CALL_SECONDS) -> str | None:
    """The resumable ``fv scaling --device cuda`` command of a cell (None for the tail scales, whose amplitudes
    ``2^(-(k-1)/2)`` are irrational: ``--scales`` takes rational ones)."""
    if cell.get("tail"):
        return None
    k = cell["depth"]
    return (f"fv --max-seconds {seconds} scaling --out {EXACT_OUT} --depth {k} --alpha {cell['alpha']} --tokens "
            f"{cell['n_tokens']} --s2 0.01 --budgets 1-{k - 1} --models ABC --seeds 3 --steps-per-budget "
            f"{STEP_RULE} --search-samples 2000 --workers 2 --device cuda --resumable")


def exact_price(cell: dict, calibration: dict) -> dict:
    """A cell's price: CPU (``bridges.prices.cost``: one thread a run, summed; ``fv scaling``'s own on 2 cores; by
    the previous study's measured / priced ratios), audits, and GPU (:data:`GPU_STEP`, an estimate: :data:`GPU_NOTE`)."""
    from bridges.prices.cost import audit_seconds, scaling_seconds, train_seconds
    from bridges.prices.flops import step_flops
    from bridges.study_commands import CALL_START_S, CELL_END_S

    cfg = exact_config(cell, device="cpu")
    runs = cfg.runs(f"{EXACT_OUT}/train")
    flops = {(r.model.model, r.model.budget): step_flops(r) for r in runs if r.train.seed == 0}
    gpu = {name: sum(r.train.steps * (fixed + flops[r.model.model, r.model.budget] / rate) for r in runs) / 3600
           for name, (fixed, rate) in GPU_STEP.items()}
    theory = scaling_seconds(cfg, train=False)
    per_model = {m: sum(train_seconds(r) for r in runs if r.model.model == m) / 3600 for m in "ABC"}
    steps = sum(r.train.steps for r in runs)
    audits = [audit_seconds(r) for r in runs]  # each training cell ends with its run's audit (CPU, not in the price)
    reserve = max(audits) + CELL_END_S  # a resumable call trains until this long before its cap
    per_call = CALL_SECONDS - CALL_START_S - reserve
    if per_call < reserve:
        raise ValueError(f"a call of {CALL_SECONDS} s cannot hold the start and twice the audit reserve {reserve:.0f} s")
    work = gpu["central"] * 3600 + sum(audits) / cfg.workers  # the GPU's steps, and the audits on the 2 workers
    return {"runs": len(runs), "steps": steps, "cpu_thread_hours": sum(per_model.values()),
            "cpu_thread_hours_by_model": per_model,
            "cpu_thread_hours_calibrated": sum(h * calibration[m]["ratio"] for m, h in per_model.items()),
            "fv_scaling_hours_2_cores": scaling_seconds(cfg) / 3600, "theory_cpu_hours": theory / 3600,
            "gpu_hours": gpu, "gpu_note": GPU_NOTE,
            "audit_cpu_hours": sum(audits) / 3600, "audit_reserve_seconds": reserve,
            "training_seconds_per_call": per_call,
            "resumable_calls": int(np.ceil(work / per_call)),
            "calls_note": "calls of the command to train every run (GPU central estimate, and the audits priced by "
                          "bridges.prices.cost.audit_seconds on the 2 workers), each training for its cap less the "
                          "start and the audit reserve; then one call with theory_cap_seconds for the theory",
            "flops_per_step": {f"{m}{b}": f for (m, b), f in sorted(flops.items())}}


def exact_law(data: dict) -> dict:
    """``exact_law_cell`` of regime.json: the cheapest passing cell (the cost grows with N at depth 8, and the
    price says so), else the best found, marked as not passing (the most power under the study's test for the
    weaker prediction, then under the 3%-floor variant, then the sum, then the cheaper)."""
    import math

    cells = judged_cells(data)
    complete = [c for c in cells if c["complete"]]
    for c in complete:
        c["hours_2_cores"] = exact_price(c["cell"], data["calibration"])["fv_scaling_hours_2_cores"]
    passing = sorted((c for c in complete if c["passed"]), key=lambda c: c["hours_2_cores"])

    def score(c):
        a, f = [[x[k] for x in c["predictions"].values()] for k in ("power", "power_floor_3pct")]
        return min(a), min(f), sum(a), sum(f), -c["hours_2_cores"]

    chosen = passing[0] if passing else max(complete, key=score)
    command = exact_command(chosen["cell"])
    price = exact_price(chosen["cell"], data["calibration"])
    rule = (f"the cheapest cell whose predictions (A: best_adaptive_keyed exponential, B: best_nonadaptive_keyed "
            f"power) both come out as predicted in >= {PASS:.0%} of replicates of the study's test (3 seeds, no floor, "
            "the measured spread) and are known to its precision (Monte Carlo error <= 1/3 of a 3-seed mean's)")
    rule += "" if passing else ("; none does, so the best found: the most power for the weaker prediction under the "
                                "study's test, then under the 3%-floor variant, then the sums, then the cheaper")
    out = {"passed": bool(chosen["passed"]), "rule": rule,
           "cell": {**chosen["cell"], "budgets": chosen["budgets"], "s2": 0.01, "models": "ABC", "seeds": 3,
                    "steps_per_budget": STEP_RULE},
           "key": chosen["key"], "predictions": chosen["predictions"], "price": price, "command": command,
           "call_seconds": CALL_SECONDS,
           "candidates": [{"key": c["key"], "complete": c["complete"], "passed": c["passed"],
                           "powers": {n: None if p is None else {k: p[k] for k in (
                               "power", "power_5_seeds", "power_floor_3pct")} for n, p in c["predictions"].items()},
                           "hours_2_cores": c.get("hours_2_cores")} for c in cells]}
    if command is not None:  # parsed as fv parses it: the study priced above, trained in resumable calls
        import shlex

        from bridges.cli import build_parser
        from bridges.study_commands import scaling_config

        args = build_parser().parse_args(shlex.split(command)[1:])
        if scaling_config(args) != exact_config(chosen["cell"]) or not args.resumable:
            raise ValueError(f"the command does not run the priced study: {command}")
        theory_cap = int(math.ceil(price["theory_cpu_hours"] * 3600 / 600) * 600)  # the call that writes the report
        out["theory_command"] = command.replace(f"--max-seconds {CALL_SECONDS}", f"--max-seconds {theory_cap}")
        out["theory_cap_seconds"] = theory_cap
    return out


def save_regime_key(key_: str, value: dict) -> None:
    """Put ``value`` under ``key_`` in studies/scaling/regime.json (re-read first; written atomically)."""
    cells = json.load(open(REGIME)) if os.path.exists(REGIME) else {}
    save({**cells, key_: value}, REGIME)


# --- tables for regime.md ---------------------------------------------------------------------------------------
def _pw(rows, n_seeds, factor, floor) -> str:
    r = _case(rows, n_seeds, factor, floor)
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


def exact_markdown(data: dict) -> str:
    """The tables of studies/scaling/exact_law.md: the scan at depth 8 (every curve's local decays, powers and
    verdicts), the predictions of the keyed cells with their Monte Carlo precision, and the chosen cell."""
    short = {"exponential": "exp", "power": "pow", "can't tell": "ct", "neither": "nei"}
    mix = lambda f: " ".join(f"{short[k]} {v:.2f}" if v >= 0.01 else f"{short[k]} {v:.3f}"  # noqa: E731
                             for k, v in f.items() if v > 0)
    lines = ["| cell | curve (predicts) | local decay B -> B+1 | 3 seeds | 5 seeds | 3 seeds, floor 3% | "
             "verdicts (3 seeds) |", "|---" * 7 + "|"]
    for tag, entry in data.get("power", {}).items():
        cell, name = tag.split(" | ")
        if not cell.startswith("K8"):
            continue
        rows = entry["rows"]
        decay = ", ".join(f"{x:.2f}" for x in -np.diff(np.log(entry["curve"])))
        lines.append(f"| {cell} | `{name}` ({': '.join(PREDICTS[name])}) | {decay} | {_pw(rows, 3, 1, 0.0)} | "
                     f"{_pw(rows, 5, 1, 0.0)} | {_pw(rows, 3, 1, 0.03)} | {mix(_case(rows)['fractions'])} |")
    lines += ["", "| cell | prediction | power (3 seeds) | floor 3% | verdicts, floor 3% | largest MC error | "
              "needed (1/3 of a 3-seed mean's) | samples for it | CPU-hours for it | passes |", "|---" * 10 + "|"]
    for c in judged_cells(data):
        for name, p in c["predictions"].items():
            if p is None:
                lines.append(f"| {c['key']} | `{name}` | not computed | | | | | | | no |")
                continue
            pr = p["precision"]
            hours = "" if pr["cpu_hours_needed"] is None else f"{pr['cpu_hours_needed']:.1f}"
            lines.append(f"| {c['key']} | `{name}` ({p['model']}: {p['law']}) | {p['power']:.2f} | "
                         f"{p['power_floor_3pct']:.2f} | {mix(p['verdicts_floor_3pct'])} | "
                         f"{100 * pr['max_rel_stderr']:.1f}% | {100 * pr['target']:.2f}% | {pr['samples_needed']:,} | "
                         f"{hours} | {'yes' if c['passed'] else 'no'} |")
    cells = json.load(open(REGIME)) if os.path.exists(REGIME) else {}
    pr = cells.get(EXACT_KEY, {}).get("price")
    rows = [("CPU, one thread a run, summed (`bridges.prices.cost.train_seconds`)", "cpu_thread_hours"),
            ("CPU, the same by the previous study's measured / priced ratios", "cpu_thread_hours_calibrated"),
            ("`fv scaling`'s own price on this machine's 2 cores (`--workers 2`; what `--max-seconds` checks)",
             "fv_scaling_hours_2_cores"), ("of which the theory and outputs (CPU, one thread)", "theory_cpu_hours"),
            ("the audits each training cell ends with (CPU, one thread; not in that price)", "audit_cpu_hours")]
    if pr:
        lines += ["", "| price of the chosen cell's study | hours |", "|---|---|"]
        lines += [f"| {label} | {pr[k]:.1f} |" for label, k in rows] + [
            "| GPU, estimated (low / central / high) | " + " / ".join(f"{pr['gpu_hours'][k]:.1f}" for k in (
                "low", "central", "high")) + " |"]
    return "\n".join(lines)


def main() -> None:
    stage = check_choice(script_options(sys.argv[1:], {"stage", "table", "exact-table", "one-layer"}).get("stage", "all"),
                         "--stage", ("spread", "screen", "keyed", "plan", "power", "exact", "all"))
    data = load()
    if "--table" in sys.argv:
        print(markdown(data))
        return
    if "--exact-table" in sys.argv:
        print(exact_markdown(data))
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
        curves_now = all_curves(data)
        stale = [t for t in powers if t.split(" | ")[0] not in curves_now]  # a label changed: a row was added
        for tag in stale:
            del powers[tag]
        if stale:
            save(data)
        for cell, curves in curves_now.items():
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
    if stage in ("exact", "all"):
        ex = exact_law(data)
        save_regime_key(EXACT_KEY, ex)
        print(EXACT_KEY, ex["key"], "passed" if ex["passed"] else "not passing",
              {k: round(v, 1) for k, v in ex["price"]["gpu_hours"].items()}, ex["command"], flush=True)


if __name__ == "__main__":
    sys.exit(run_script(lambda argv: main() or 0, sys.argv[1:], "prereg.py"))
