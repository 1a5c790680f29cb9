"""The scaling study's report (``report.md``, written by :func:`bridges.studies.scaling.scaling_study`): the tables
of loss against budget, trained against theory, the audit, the decided tests (``fits.tests``, studies/scaling/regime.md),
the law test as a diagnostic, convergence and time."""
from __future__ import annotations

import math

from bridges.models.registry import MODELS

CONVERGED = 0.03  # the last 20% of a run's steps change its held-out loss by less than this (relative)


def convergence(rows: list[dict]) -> list[dict]:
    """Per run: the held-out loss at 80% of its steps (the last evaluation at or before) and at the end, the
    relative change over the last 20%, and whether it is below :data:`CONVERGED`."""
    out = []
    for r in rows:
        hist = [(s, v) for s, v in (r.get("history") or []) if v is not None]
        if len(hist) < 2:
            continue
        mark = 0.8 * r["steps"]
        before = [h for h in hist if h[0] <= mark]
        if not before:
            continue
        step80, at80 = before[-1]
        change = (at80 - r["loss"]) / at80
        out.append({"model": r["model"], "budget": r["budget"], "seed": r["seed"], "steps": r["steps"],
                    "step_80": step80, "loss_80": at80, "loss": r["loss"], "change": change,
                    "converged": abs(change) < CONVERGED})
    return out


def _summary(rows, model, budget):
    import statistics

    ls = [r["loss"] for r in rows if r["model"] == model and r["budget"] == budget]
    if not ls:
        return None
    spread = statistics.stdev(ls) if len(ls) > 1 else 0.0
    return statistics.mean(ls), spread, min(ls), max(ls), len(ls)


def _law_line(name: str, entry: dict) -> str:
    t = entry.get("test")
    if t is None:
        return f"| {name} | {entry.get('predicted') or ''} | | | | {entry.get('test_refused', '')} |"
    r, e = t["fits"]["exponential"], t["fits"]["power"]
    predicted = entry.get("predicted")
    agrees = "" if predicted is None or t["verdict"] in ("can't tell", "neither") else (
        " (as predicted)" if t["verdict"] == predicted else " (**not as predicted**)")
    return (f"| {name} | {predicted or ''} | {r['value']:.3g} [{r['ci'][0]:.3g}, {r['ci'][1]:.3g}] | "
            f"{e['value']:.3g} [{e['ci'][0]:.3g}, {e['ci'][1]:.3g}] | {t['chi2']['exponential']:.3g} / "
            f"{t['chi2']['power']:.3g} (dof {t['dof']}) | **{t['verdict']}**{agrees} |")


def _power(entry: dict) -> str:
    p = entry.get("power")
    return "power -" if p is None else f"{p:.2f}"


def _decided_section(fits) -> list[str]:
    tests = fits.get("tests") or {}
    if not tests or "refused" in tests:
        return ["", "## The decided tests", "", f"Not run: {tests.get('refused', 'fewer than two seeds')}."] \
            if tests else []
    lines = ["", "## The decided tests", "",
             "Fixed before they were applied, with their power (studies/scaling/regime.md, \"The decided tests\"; "
             "`fvnum.decided`): `band`, the seed mean in [0.8, 1.25] of the prediction at every budget; `decay`, "
             "one-sided, the adaptive model's local decay above the one-layer model's at every budget >= 2; `ratio`, "
             "the log ratio of the pair falls with the budget with the predictions' slope, within its error. Power: "
             "the fraction of synthetic studies that pass when the models sit on their predictions (at the study's "
             "own seed spread).", "",
             "| model | band (power) | decay: pair (power) | ratio: pair, slope vs predicted (power) |",
             "|---|---|---|---|"]
    for m, band in tests["band"].items():
        d, r = tests["decay"].get(m), tests["ratio"].get(m)
        cells = [f"**{band['verdict']}** ({_power(band)}); worst ratio "
                 f"{max(band['ratios'].values(), key=lambda x: abs(math.log(x))):.2f}"]
        cells.append("" if d is None else f"**{d['verdict']}**: {'-'.join(d['pair'])} ({_power(d)})")
        cells.append("" if r is None else f"**{r['verdict']}**: {'-'.join(r['pair'])}" + (
            f", {r['slope']:.3f} ± {r['slope_se']:.3f} vs {r['predicted_slope']:.3f} ± {r['predicted_slope_se']:.3f}"
            if "slope" in r else f" ({r.get('refused', '')})") + f" ({_power(r)})")
        lines.append(f"| Model {m} | " + " | ".join(cells) + " |")
    return lines


def _law_section(cfg, fits, held) -> list[str]:
    cut = fits.get("cut", cfg.cut)
    lines = ["", "## Which law (diagnostic)", "",
             "A labelled diagnostic since the decided tests above: at the study's seed spread this test asks for a law "
             "to 1-2% at every budget (studies/scaling/regime.md). "
             f"The law test (`fvnum.laws.law_test`) over budgets {cut} and up: both laws are straight lines in log "
             f"loss (against B, and against log B), fitted by weighted least squares to the mean log loss per budget. "
             f"Trained models are weighted by their seed spread pooled over budgets (judged with the F "
             f"distribution), theory curves by their Monte Carlo error plus a 1% relative floor. Budgets below {cut} "
             "are left out: the first reading sees the whole context (the top node's dense measurement), a drop "
             "that no law in the budget describes. Verdict: the law whose chi2 is smaller by more than 9 "
             "(about 3 standard deviations) wins if it fits (p > 0.01); `can't tell` otherwise; `neither` when no "
             "law fits. The rate r (loss ~ c r^B) and the exponent e (loss ~ c B^-e) with 95% intervals.", "",
             "| what | predicted law | r [95%] | e [95%] | chi2 exponential / power | verdict |",
             "|---|---|---|---|---|---|"]
    for m, entry in fits["models"].items():
        lines.append(_law_line(f"Model {m}", entry))
    for name, entry in fits["theory"].items():
        if entry.get("predicted"):
            lines.append(_law_line(f"theory: {name}", entry))
    decays = {f"Model {m}": e["decay"] for m, e in fits["models"].items() if e.get("decay")}
    for m, bs in held.items():
        name = _one_name(bs)
        if fits["theory"].get(name, {}).get("decay"):
            decays[f"{name} ({m}'s prediction)"] = fits["theory"][name]["decay"]
    if decays:
        budgets = sorted({d["budget"] for ds in decays.values() for d in ds})
        lines += ["", "### Local decay", "",
                  "`log L(B) - log L(B+1)` with its 95% interval (seed spread, or Monte Carlo error): constant for "
                  "a geometric law, shrinking like e / B for a power law (fig_decay.png).", "",
                  "![local decay](fig_decay.png)", "",
                  "| B -> B+1 | " + " | ".join(decays) + " |", "|---" * (1 + len(decays)) + "|"]
        for b in budgets:
            cells = []
            for ds in decays.values():
                d = next((d for d in ds if d["budget"] == b), None)
                cells.append("" if d is None else f"{d['value']:.3f} [{d['ci'][0]:.3f}, {d['ci'][1]:.3f}]")
            lines.append(f"| {b} -> {b + 1} | " + " | ".join(cells) + " |")
    return lines


def _steps_words(cfg) -> str:
    if cfg.steps_per_budget is not None:
        words = f"{cfg.steps_per_budget} x budget steps"
    else:
        words = "the recipe's steps (" + ", ".join(f"{m} {MODELS[m].recipe.steps_per_budget}" for m in cfg.models) + " x budget)"
    if cfg.flop_match is not None:
        m, ref = cfg.flop_match
        per = ", ".join(f"{cfg.steps(b, m)} at budget {b}" for b in cfg.budgets)
        words += (f"; Model {m} FLOP-matched to Model {ref} (the steps whose training FLOPs, counted on both models, "
                  f"equal {ref}'s run at the same budget: {per})")
    return words


def _run_name(c: dict) -> str:
    return f"{c['model']} B{c['budget']} s{c['seed']} ({c['change']:+.1%})"


def _convergence_section(rows) -> list[str]:
    conv = convergence(rows)
    if not conv:
        return []
    top = {}
    for c in conv:
        if c["budget"] >= top.get(c["model"], 0):
            top[c["model"]] = c["budget"]
    mine = [c for c in conv if c["budget"] == top[c["model"]]]
    bad = [c for c in conv if not c["converged"]]
    lines = ["", "## Trained out?", "",
             f"Held-out loss at 80% of the steps and at the end, for the largest budget of each model (all runs: "
             f"{len(conv) - len(bad)} of {len(conv)} change by less than {CONVERGED:.0%} over their last 20% of steps"
             + ("; not: " + ", ".join(_run_name(c) for c in bad) if bad else "") + ").", "",
             "| model | budget | seed | steps | loss at 80% | final | change | < 3% |", "|---|---|---|---|---|---|---|---|"]
    for c in sorted(mine, key=lambda c: (c["model"], c["seed"])):
        lines.append(f"| {c['model']} | {c['budget']} | {c['seed']} | {c['steps']} | {c['loss_80']:.4f} | "
                     f"{c['loss']:.4f} | {c['change']:+.1%} | {'yes' if c['converged'] else '**no**'} |")
    return lines


def _time_section(cfg, rows) -> list[str]:
    per = {}
    for r in rows:
        per.setdefault(r["model"], []).append(r.get("train_seconds") or r["wall_seconds"])
    devices = sorted({r.get("device", cfg.device) for r in rows})
    lines = ["", "## Time", "",
             f"Device: {', '.join(devices)}; {_count(cfg.threads, 'thread')} per run. CPU time of training summed "
             "over the runs (one thread each, so CPU-hours):", "",
             "| model | runs | hours | per run (min .. max, minutes) |", "|---|---|---|---|"]
    for m, ts in sorted(per.items()):
        lines.append(f"| {m} | {len(ts)} | {sum(ts) / 3600:.2f} | {min(ts) / 60:.1f} .. {max(ts) / 60:.1f} |")
    return lines


def _one_name(names_by_budget: dict) -> str:
    """The prediction row's name when it is the same at every budget that has one, else ``prediction``."""
    names = {n for n in names_by_budget.values() if n}
    return names.pop() if len(names) == 1 else "prediction"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def report_markdown(cfg, rows, theory, fits, planned: int | None = None) -> str:
    """The report; ``planned`` (the study's number of runs) marks a report of fewer finished runs as partial."""
    budgets = list(cfg.budgets)
    total_wall = sum(r["wall_seconds"] for r in rows)
    value = {b: {t["name"]: t["value"] for t in theory.get(b, [])} for b in budgets}  # theory row values
    names = sorted({n for vs in value.values() for n in vs})
    lines = [
        "# Scaling study: loss against budget", "",
        f"Tree prior, depth {cfg.depth}, {cfg.tree}, N {cfg.n_tokens} tokens (tokens channel), s2 {cfg.s2}; "
        f"models {', '.join(cfg.models)}, budgets {budgets[0]}..{budgets[-1]}, {_count(cfg.seeds, 'seed')} each, trained with "
        f"the recipe (docs/training.md) for {_steps_words(cfg)}. The regime was chosen by the theory before training "
        f"([regime.md](regime.md)). Training time summed over the {len(rows)} runs: {total_wall / 60:.0f} minutes "
        f"({_count(cfg.threads, 'thread')} per run, {cfg.workers or 'one per core'} at a time).",
        *([] if planned is None or len(rows) >= planned else [
            "", f"**Partial report: {len(rows)} of {planned} runs finished** (`fv scaling --report-only`); the "
            "study resumes with `fv scaling` and the same options."]),
        "", "![loss against budget](fig_scaling.png)", "",
        "Losses are E||theta_hat - theta||^2 on 4096 held-out contexts; "
        + ("one seed per point. " if cfg.seeds == 1 else "mean ± standard deviation over seeds (min .. max). ")
        + "Theory at the same noise, tokens channel, Monte Carlo with exact Bayes decoding "
        "(`fvnum`), except `top_levels_linear` and `gaussian_optimum` (exact linear theory).", "",
        "| budget | " + " | ".join(f"Model {m}" for m in cfg.models) + " | " + " | ".join(names) + " |",
        "|---" * (1 + len(cfg.models) + len(names)) + "|",
    ]
    for b in budgets:
        cells = []
        for m in cfg.models:
            s = _summary(rows, m, b)
            cells.append("" if s is None else f"{s[0]:.4f}" if s[4] == 1
                         else f"{s[0]:.4f} ± {s[1]:.2g} ({s[2]:.4f} .. {s[3]:.4f})")
        cells += [f"{value[b][n]:.4f}" if n in value[b] else "" for n in names]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    from fvnum.theory import prediction_row

    held = {m: {b: prediction_row(m, value[b]) for b in budgets} for m in cfg.models}
    held = {m: bs for m, bs in held.items() if any(bs.values())}
    if held:
        lines += ["", "## Trained against theory", "",
                  "Seed mean of each model over the theory row it is held against (`fvnum.theory.prediction_row`: "
                  "A the best adaptive policy found, B the best one-layer unit design, both for their class and "
                  "keys, C the exact linear theory of one layer); the row's name where it changes with the budget.",
                  "", "| budget | " + " | ".join(f"{m} / {_one_name(bs)}" for m, bs in held.items()) + " |",
                  "|---" * (1 + len(held)) + "|"]
        from fvnum.regime import agrees, band

        inside = {m: [] for m in held}
        for b in budgets:
            cells = []
            for m, rows_of in held.items():
                s, name = _summary(rows, m, b), rows_of[b]
                ref = value[b].get(name) if name else None
                shown = "" if _one_name(rows_of) != "prediction" else f" ({name})"
                if s is None or not ref:
                    cells.append("")
                    continue
                ok = agrees(m, s[0] / ref)
                inside[m].append((b, s[0] / ref, ok))
                cells.append(f"{s[0] / ref:.2f}{shown}" + ("" if ok else " **out**"))
            lines.append(f"| {b} | " + " | ".join(cells) + " |")
        lines += ["", "Asked of every budget: " + "; ".join(
            f"{m} / prediction in [{band(m)[0]:g}, {band(m)[1]:g}]" for m in held) + " (`fvnum.regime.AGREEMENT`).",
                  ""]  # a blank line before the list, which Markdown needs to make it one
        for m, got in inside.items():
            out = [f"B {b}: {r:.2f}" for b, r, ok in got if not ok]
            lines.append(f"- Model {m}: inside at {sum(ok for *_, ok in got)} of {len(got)} budgets"
                         + (f"; outside at {', '.join(out)}." if out else "."))
    audited = [r for r in rows if r.get("audit")]
    if audited:
        lines += ["", "## Audit of the models' readings", "",
                  "Per model and budget (seed means): its own loss and the Bayes posterior mean on its own readings "
                  "under their CLT law given each leaf (`fv audit`, bridges.analysis.audit: keys evaluated on a fixed token "
                  "sample at each context's own workspace): the loss its measurements allow, and the decoder gap "
                  "(model - Bayes, paired).", "",
                  "| budget | " + " | ".join(f"{m}: own / Bayes on readings / gap" for m in cfg.models) + " |",
                  "|---" * (1 + len(cfg.models)) + "|"]
        for b in budgets:
            cells = []
            for m in cfg.models:
                mine = [r["audit"] for r in audited if r["model"] == m and r["budget"] == b]
                if not mine:
                    cells.append("")
                    continue
                mean = lambda k: sum(a[k]["value"] for a in mine) / len(mine)  # noqa: E731
                cells.append(f"{mean('loss'):.4f} / {mean('bayes_on_readings'):.4f} / {mean('decoder_gap'):+.4f}")
            lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines += _decided_section(fits)
    lines += _law_section(cfg, fits, held)
    lines += _convergence_section(rows)
    lines += _time_section(cfg, rows)
    lines += ["", "Every run is reproduced by the `command` of its row in scaling.json (or scaling.csv).", ""]
    return "\n".join(lines)
