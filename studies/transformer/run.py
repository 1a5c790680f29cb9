"""The Model T study (issue 57; docs/theory.md section 7.1): a standard transformer, deep (L = B) and wide (L = 1), on
the scaling study's cell, beside Models A and B and their predictions. The regime, the tests and their power were
written before any training: studies/transformer/regime.md.

    PYTHONPATH=. python studies/transformer/run.py plan              # the runs, their commands and the price
    PYTHONPATH=. python studies/transformer/run.py price             # time a few steps of every shape here
    PYTHONPATH=. python studies/transformer/run.py train --lane 0 --lanes 2 &   # resumable; one lane a core
    PYTHONPATH=. python studies/transformer/run.py train --only T-deep-B4-s0    # the named runs, in that order
    PYTHONPATH=. python studies/transformer/run.py report            # transformer.json, transformer.md, figures
    PYTHONPATH=. python studies/transformer/run.py interventions     # deep T's function-vector tables at budget 4
    PYTHONPATH=. python studies/transformer/run.py park | unpark     # unfinished checkpoints to/from parked/

The study drives the library through its Python API: it builds ``RunConfig`` objects, calls
``bridges.training.train.train`` (which resumes a run from its checkpoint and refuses a folder another process
holds) and reads typed ``TrainResult`` objects. Run folders live in ``studies/transformer/train/`` (not in git);
``transformer.json`` keeps every finished run's numbers and command, so ``report`` on a machine without the run
folders keeps every committed row.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAIN = HERE / "train"
RESULTS = HERE / "transformer.json"

# The cell: the scaling study's (tree depth 7, alpha 0.6, N 64, s2 0.01), where A's prediction is 3.1x below B's at
# budget 4 (0.1183 against 0.3691): the cell, kept (regime.md prices it).
CELL = dict(prior="tree", depth=7, alpha=0.6, n_tokens=64, s2=0.01)
GAUSSIAN = dict(prior="gaussian", cov="matched", depth=7, alpha=0.6, n_tokens=64, s2=0.01)
BUDGETS = (1, 2, 3, 4)
SEEDS = (0, 1, 2)
GAUSSIAN_BUDGET = 2
# Model T's sizes and recipe (docs/theory.md section 7.1's prototype): d_model 64, head_dim 16, mlp_width 128, softmax,
# Adam 3e-3, 200 warm-up steps, cosine, batch 128, clip 1, float32; 3,000 steps a unit of budget.
T_SIZES = dict(d_model=64, head_dim=16, mlp_width=128)
STEPS_PER_BUDGET = 3000


@dataclass(frozen=True)
class Run:
    """One planned run: ``model`` (``T-deep``, ``T-wide``, ``A``, ``B``), ``budget``, ``seed``, ``prior``."""

    model: str
    budget: int
    seed: int
    prior: str = "tree"

    @property
    def name(self) -> str:
        where = "" if self.prior == "tree" else "-gauss"
        return f"{self.model}{where}-B{self.budget}-s{self.seed}"

    def config(self, threads: int = 1, device: str = "cpu"):
        from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig

        data = DataConfig(**(CELL if self.prior == "tree" else GAUSSIAN))
        if self.model.startswith("T-"):
            model = ModelConfig(model="T", shape=self.model[2:], budget=self.budget, **T_SIZES)
            steps = STEPS_PER_BUDGET * self.budget
        else:  # A and B with their own recipes, as the scaling study trained them
            model, steps = ModelConfig(model=self.model, budget=self.budget), None
        train = TrainConfig(steps=steps, seed=self.seed, threads=threads, device=device, out=str(TRAIN))
        return RunConfig(data, model, train)

    def command(self) -> str:
        return "fv train " + " ".join(self.config().to_argv()).replace(str(TRAIN), "studies/transformer/train")


def plan() -> list[Run]:
    """Every run of the study, in training order: seed 0's curve first, then seeds 1 and 2; budget 1 once (deep and
    wide are one network there, L = H d = 1); then the matched Gaussian at one budget (T deep and wide, A, B)."""
    runs = []
    for seed in SEEDS:
        for budget in BUDGETS:
            runs.append(Run("T-deep", budget, seed))
            if budget > 1:
                runs.append(Run("T-wide", budget, seed))
    for model in ("T-deep", "T-wide", "A", "B"):
        runs.append(Run(model, GAUSSIAN_BUDGET, 0, "gaussian"))
    return runs


def _load() -> dict:
    if not RESULTS.exists():
        return {"runs": {}}
    try:
        data = json.loads(RESULTS.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: {RESULTS} is damaged ({exc}); restore it from git (git checkout {RESULTS.name})")
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
        raise SystemExit(f"error: {RESULTS} holds no runs table; restore it from git")
    return data


def _write(data: dict) -> None:
    from bridges.runs.store import write_atomic

    write_atomic(RESULTS, json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n")


def train_lane(lane: int, lanes: int, threads: int, only: list[str] | None, device: str) -> None:
    from bridges.training.train import train

    runs = plan()
    if only:
        names = {r.name: r for r in runs}
        unknown = [n for n in only if n not in names]
        if unknown:
            raise SystemExit(f"error: no run named {unknown[0]!r} in the plan; see `run.py plan`")
        mine = [names[n] for n in only]
    else:
        mine = [r for i, r in enumerate(runs) if i % lanes == lane]
    for run in mine:
        t0 = time.time()
        result = train(run.config(threads, device), progress=False)
        print(f"{run.name}: loss {result.loss:.4f} +- {result.stderr:.4f} ({result.steps_per_s:.1f} steps/s, "
              f"{time.time() - t0:.0f} s this call)", flush=True)


def finished() -> dict:
    """The finished runs found in the run folders, by name: loss, stderr, steps, speed, key and command."""
    from bridges.training.train import load_result, run_dir

    out = {}
    for run in plan():
        cfg = run.config()
        folder = run_dir(cfg)
        if folder is None or not (folder / "result.json").is_file():
            continue
        try:
            r = load_result(folder / "result.json", cfg)
        except Exception as exc:  # noqa: BLE001 (a damaged result is left out with a note, never a crash)
            print(f"note: {run.name}: result left out ({exc})", file=sys.stderr)
            continue
        out[run.name] = {"model": run.model, "budget": run.budget, "seed": run.seed, "prior": run.prior,
                         "loss": r.loss, "stderr": r.stderr, "steps": r.steps, "steps_per_s": r.steps_per_s,
                         "key": cfg.key(), "command": run.command()}
    return out


SCALING = HERE.parent / "scaling"
PREDICTS = {"T-deep": "best_adaptive_keyed", "T-wide": "best_nonadaptive_keyed"}  # A's and B's rows (the registry's)
REGIME = HERE / "regime.json"


def predictions() -> dict:
    """Each T shape's prediction by budget, ``(value, stderr)``: the row its theory variant is held to
    (``fvnum.model_rows.model("T-deep").prediction``: A's; ``T-wide``: B's), from the scaling study's committed
    theory tables at this cell (studies/scaling/scaling.json), the rows A and B were held to there."""
    from fvnum.theory import prediction_row

    theory = json.loads((SCALING / "scaling.json").read_text())["theory"]
    out = {}
    for model in PREDICTS:
        out[model] = {}
        for b in BUDGETS:
            rows = {r["name"]: r for r in theory[str(b)]}
            row = rows[prediction_row(model, rows)]
            out[model][b] = (row["value"], row.get("stderr") or 0.0)
    return out


def trained_ab() -> dict:
    """Models A and B at this cell, by budget: the losses of their seeds (studies/scaling/scaling.csv)."""
    import csv

    out: dict = {"A": {}, "B": {}}
    with (SCALING / "scaling.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            if row["model"] in out and int(row["budget"]) in BUDGETS:
                out[row["model"]].setdefault(int(row["budget"]), []).append(float(row["loss"]))
    return out


def power() -> dict:
    """The power of the decided tests (``fvnum.decided.decided_power``) for deep T against wide T, each on its
    prediction, 3 seeds, at the planning spread of A and B measured at this cell (pooled sd of log loss)."""
    import numpy as np
    from fvnum.decided import decided_power, pooled_spread

    ab = trained_ab()
    spread = {"T-deep": pooled_spread({b: np.array(v) for b, v in ab["A"].items()})[0],
              "T-wide": pooled_spread({b: np.array(v) for b, v in ab["B"].items()})[0]}
    preds = predictions()
    budgets = {"T-deep": list(BUDGETS), "T-wide": list(BUDGETS)}
    out = {}
    for name, scale in (("measured", 1.0), ("x3", 3.0)):
        out[name] = decided_power(preds, budgets, {m: s * scale for m, s in spread.items()}, dict.fromkeys(preds, 3),
                                  adaptive=["T-deep"], one_layer=["T-wide"], cut=2, replicates=2000, seed=0)
    return {"predictions": {m: {str(b): v for b, v in p.items()} for m, p in preds.items()}, "power": out}


def _stats(values: list[float]) -> dict:
    import numpy as np

    v = np.asarray(values, dtype=float)
    se = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else None
    return {"mean": float(v.mean()), "se": se, "n": int(v.size)}


def summary(runs: dict) -> dict:
    """The study's tables from its runs (a dict name -> run): per budget each T shape's seed mean beside its
    prediction, A and B trained beside theirs, the ratios; the decided tests (``fvnum.decided.study_tests``) of deep T
    against wide T; what the issue wanted; the Gaussian runs."""
    from fvnum.decided import study_tests

    preds, ab = predictions(), trained_ab()
    tree = [r for r in runs.values() if r["prior"] == "tree"]
    losses: dict = {"T-deep": {}, "T-wide": {}}
    for r in tree:
        losses[r["model"]].setdefault(r["budget"], []).append(r["loss"])
    for r in tree:  # budget 1: one network stands for both shapes (L = H d = 1)
        if r["model"] == "T-deep" and r["budget"] == 1:
            losses["T-wide"].setdefault(1, []).append(r["loss"])
    rows = []
    for b in BUDGETS:
        row = {"budget": b, "prediction_A": preds["T-deep"][b][0], "prediction_B": preds["T-wide"][b][0],
               "A": _stats(ab["A"][b]), "B": _stats(ab["B"][b])}
        for shape, pred in (("T-deep", "prediction_A"), ("T-wide", "prediction_B")):
            if losses[shape].get(b):
                row[shape] = {**_stats(losses[shape][b]), "over_prediction": _stats(losses[shape][b])["mean"] / row[pred]}
        if "T-deep" in row and "T-wide" in row:
            row["deep_over_wide"] = row["T-deep"]["mean"] / row["T-wide"]["mean"]
        row["predicted_ratio"] = row["prediction_A"] / row["prediction_B"]
        rows.append(row)
    tests = {}  # decided on the whole curve only: two seeds or more of both shapes at every budget (regime.md)
    if all(len(losses[m].get(b, [])) >= 2 for m in ("T-deep", "T-wide") for b in BUDGETS):
        tests = study_tests(losses, preds, adaptive=["T-deep"], one_layer=["T-wide"], cut=2)
    wanted = {"deep_T_at_most_1.25_A_prediction": {str(r["budget"]): r["T-deep"]["over_prediction"] <= 1.25
                                                   for r in rows if "T-deep" in r}}
    gauss = {r["model"]: {"loss": r["loss"], "stderr": r["stderr"], "budget": r["budget"]}
             for r in runs.values() if r["prior"] == "gaussian"}
    return {"table": rows, "tests": tests, "wanted": wanted, "gaussian": gauss}


def _fmt(s: dict | None) -> str:
    if not s:
        return "not yet"
    tail = f" ± {s['se']:.4f}" if s.get("se") is not None else " (1 seed)"
    return f"{s['mean']:.4f}{tail}" + ("" if s["n"] in (1, 3) or s.get("se") is None else f" ({s['n']} seeds)")


def page(data: dict) -> str:
    """The study's page (transformer.md), from transformer.json."""
    s = data["summary"]
    lines = ["# Model T: a standard transformer held to the theory", "",
             "Issue 57 (docs/theory.md section 7.1). The regime, the tests and their power were written before "
             "training: [regime.md](regime.md). Every run's command is in [transformer.json](transformer.json); "
             "`PYTHONPATH=. python studies/transformer/run.py report` writes this page from it.", "",
             "## Trained losses beside the predictions (tree depth 7, alpha 0.6, N 64)", "",
             "Each model's line: trained (seed mean ± standard error of the mean) against its prediction; deep T and "
             "A are held to A's prediction (`best_adaptive_keyed`), wide T and B to B's (`best_nonadaptive_keyed`). "
             "The predictions are Monte Carlo rows of the scaling study's tables; A and B are the scaling study's runs "
             "(its recipe: 5,000 and 2,500 steps a unit of budget); T has 3,000 steps a unit of budget.", "",
             "| budget | deep T | / A's prediction | wide T | / B's prediction | A | B | A's prediction | B's prediction "
             "| deep T / wide T | predicted A/B |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in s["table"]:
        d, w = r.get("T-deep"), r.get("T-wide")
        lines.append(
            f"| {r['budget']} | {_fmt(d)} | {d['over_prediction']:.2f} |" if d else f"| {r['budget']} | not yet | |")
        lines[-1] += (f" {_fmt(w)} | {w['over_prediction']:.2f} |" if w else " not yet | |")
        lines[-1] += (f" {_fmt(r['A'])} | {_fmt(r['B'])} | {r['prediction_A']:.4f} | {r['prediction_B']:.4f} | "
                      f"{r['deep_over_wide']:.2f} |" if "deep_over_wide" in r else
                      f" {_fmt(r['A'])} | {_fmt(r['B'])} | {r['prediction_A']:.4f} | {r['prediction_B']:.4f} | |")
        lines[-1] += f" {r['predicted_ratio']:.2f} |"
    lines += ["", "At budget 1 the two shapes are one network (L = H d = 1), trained once and shown in both columns.", ""]
    if s["tests"]:
        lines += ["## The decided tests (deep T against wide T)", "", "| test | model | verdict | power |", "|---|---|---|---|"]
        for test, per in s["tests"].items():
            if test not in ("band", "decay", "ratio"):
                continue  # the power's settings (power_of)
            for m, r in per.items():
                power = r.get("power")
                lines.append(f"| {test} | {m} | {r['verdict']} | {'' if power is None else f'{power:.2f}'} |")
        lines.append("")
    else:
        lines += ["## The decided tests", "", "Not applied yet: they need at least two seeds of each shape at every "
                  f"budget ({len(data['runs'])} of the {len(plan())} planned runs have finished).", ""]
    if s["gaussian"]:
        lines += ["## The matched Gaussian, budget 2 (seed 0)", "", "| model | loss |", "|---|---|"]
        lines += [f"| {m} | {g['loss']:.4f} ± {g['stderr']:.4f} |" for m, g in sorted(s["gaussian"].items())]
        lines.append("")
    lines += ["![loss against budget](fig_transformer.png)", ""]
    lines += _audit_lines(data.get("audits", {}))
    for name, iv in sorted(data.get("interventions", {}).items()):
        lines += _intervention_lines(name, iv)
    return "\n".join(lines)


def _intervention_lines(name: str, iv: dict) -> list[str]:
    """Deep T's tables beside A's and path's (where stored): the paired effects of each intervention."""
    from bridges.patching.keys import table_from_dict

    out = [f"## Function-vector tables of {name} ({iv['key']})", "",
           f"{iv['n_contexts']} target contexts (seed {iv['seed']}), the function-vectors study's; mean states of "
           f"{iv['mean_contexts']} contexts. Divergence depth 0 is the no-op control (donor = target): its effects are "
           "exactly 0. Rows: the intervention's block (layer) l; columns: the donor's divergence depth j.", ""]
    what = {"transplant": "Transplant of the summary residual after block l (`workspace.{l}`; A: its workspace)",
            "attention transplant": "Transplant of every token's attention outputs of blocks 1..l (`hook_attn_out`)",
            "keys": "Key patching: block l's keys (`hook_k`) at every context token from the donor"}
    for kind, title in what.items():
        for who in ("T", "A", "path"):
            table = iv.get(who, {}).get(kind)
            if table is None:
                continue
            md, marker = table_from_dict(table).to_markdown(), "effect (patched - unpatched, paired):"
            shown = "effect (patched - unpatched, paired)" if marker in md else "loss, patched"
            out += [f"**{title}, {who}: {shown}**", "", md.split(marker)[-1].strip(), ""]
    inj = iv["T"]["injection"]
    out += ["**Mean-state injection, T: prefix accuracy** (the decoded leaf has the injected prefix; layer l, depth j)",
            "", "| l \\ j | " + " | ".join(str(j) for j in inj["depths"]) + " |",
            "|---|" + "---|" * len(inj["depths"])]
    for l, row in zip(inj["layers"], inj["prefix_accuracy"]):
        out.append(f"| {l} | " + " | ".join("" if v is None else f"{v:.3f}" for v in row) + " |")
    probes = iv["T"]["probes"]
    out += ["", "**Probes of the summary residual after block l for the path prefix s_1..s_l** (held-out accuracy, "
            "chance)", "", "| l | T | path |", "|---|---|---|"]
    path = iv.get("path", {}).get("probes", {}).get("prefix", [])
    for l, row in enumerate(probes["prefix"], start=1):
        other = f"{path[l - 1][0]:.3f}" if l <= len(path) else ""
        out.append(f"| {l} | {row[0]:.3f} (chance {row[2]:.3f}) | {other} |")
    return out + [""]


def figure(data: dict, path: Path) -> None:
    """Loss against budget: deep and wide T (seed means, each seed as a dot), A and B trained, and the two
    predictions, on a log axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = data["summary"]["table"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    b = [r["budget"] for r in s]
    ax.plot(b, [r["prediction_A"] for r in s], "--", color="C0", label="A's prediction (deep T's)")
    ax.plot(b, [r["prediction_B"] for r in s], "--", color="C1", label="B's prediction (wide T's)")
    ax.plot(b, [r["A"]["mean"] for r in s], "o", color="C0", mfc="none", label="A trained")
    ax.plot(b, [r["B"]["mean"] for r in s], "s", color="C1", mfc="none", label="B trained")
    for shape, colour, marker in (("T-deep", "C3", "D"), ("T-wide", "C2", "v")):
        pts = [(r["budget"], r[shape]["mean"]) for r in s if shape in r]
        if pts:
            ax.plot(*zip(*pts), marker=marker, color=colour, label=f"{shape} trained (seed mean)")
        for run in data["runs"].values():
            if run["prior"] == "tree" and run["model"] == shape:
                ax.plot(run["budget"] + (0.06 if shape == "T-wide" else -0.06), run["loss"], ".", color=colour, alpha=0.5)
    ax.set_yscale("log")
    ax.set_xticks(b)
    ax.set_xlabel("budget B")
    ax.set_ylabel("held-out loss E||theta_hat - theta||^2")
    ax.set_title("Model T at tree depth 7, alpha 0.6, N 64")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


FV = HERE.parent / "function_vectors" / "function_vectors.json"  # A's and path's tables at this cell, budget 4
TOP = max(BUDGETS)


def interventions(name: str = f"T-deep-B{TOP}-s0", n_contexts: int = 2048, seed: int = 0) -> dict:
    """Deep T's function-vector tables at the top budget (docs/theory.md sections 8, 9, 7.1), on the targets and
    donors of the function-vectors study (same seed and count, so the same contexts): the transplant of the summary
    residual, the transplant of every token's attention outputs, mean-state injection, key patching (divergence depth
    0 is the no-op control, every effect exactly 0) and probes of the summary residual; beside A's and ``path``'s
    (studies/function_vectors/function_vectors.json; ``path``'s key patching and probes computed here)."""
    from bridges.analysis.audit import load_run
    from bridges.analysis.probes import theory_probes, workspace_probes
    from bridges.patching.keys import key_patching_table, theory_patching_table
    from bridges.patching.state import model_injection_table, model_state_patching_table
    from bridges.training.train import run_dir

    run = {r.name: r for r in plan()}[name]
    cfg = run.config()
    loaded = load_run(run_dir(cfg))
    model, data = loaded.model, cfg.data
    depths = tuple(range(0, data.depth + 1))
    t0 = time.time()
    mine = {"transplant": model_state_patching_table(model, data, n_contexts=n_contexts, seed=seed, depths=depths),
            "attention transplant": model_state_patching_table(model, data, n_contexts=n_contexts, seed=seed,
                                                               depths=depths, site="attention"),
            "injection": model_injection_table(model, data, n_contexts=n_contexts, seed=seed, mean_contexts=8192),
            "keys": key_patching_table(model, data, n_contexts=n_contexts, seed=seed, depths=depths),
            "probes": workspace_probes(model, data, n_contexts=4096, seed=seed)}
    fv = json.loads(FV.read_text())
    budget = f"B{run.budget}"
    out = {"run": name, "key": cfg.key(), "n_contexts": n_contexts, "seed": seed, "mean_contexts": 8192,
           "seconds": round(time.time() - t0, 1), "T": {k: v.to_dict() for k, v in mine.items()}}
    if budget in fv.get("transplant", {}):
        out["A"] = {kind: fv[kind][budget]["mlp A"] for kind in ("transplant", "injection")}
        out["path"] = {kind: fv[kind][budget]["path"] for kind in ("transplant", "injection")}
        out["path"]["keys"] = theory_patching_table(data, run.budget, samples=20_000, seed=seed).to_dict()
        out["path"]["probes"] = theory_probes(data, run.budget, samples=4096, seed=seed).to_dict()
    return out


def audits(seed: int = 0, samples: int = 2000, law_samples: int = 256) -> dict:
    """The audit of every finished tree run of T with ``seed`` (bridges.analysis.audit.audit_measured: the law of its
    readings measured at each of the 128 leaves): its own loss, the loss its readings allow, and what each block reads
    (the tree depth with the most energy of its covariance row)."""
    from bridges.analysis.audit import audit, load_run
    from bridges.training.train import run_dir

    out = {}
    for run in plan():
        folder = run_dir(run.config())
        if run.seed != seed or run.prior != "tree" or not run.model.startswith("T-") or not (folder / "result.json").is_file():
            continue
        a = audit(load_run(folder), samples=samples, law_samples=law_samples, seed=seed).to_dict()
        reads = [[max(range(len(c["energy_by_depth"])), key=lambda k: c["energy_by_depth"][k]) + 1
                  for c in layer["channels"]] for layer in a["layers"]]
        out[run.name] = {"loss": a["loss"], "bayes_on_readings": a["bayes_on_readings"], "decoder_gap": a["decoder_gap"],
                         "reads_depth": reads, "layers": a["layers"], "decoder": a["decoder"], "samples": samples,
                         "law_samples": law_samples, "seed": seed}
        print(f"{run.name}: own {a['loss']['value']:.4f}, Bayes on its readings {a['bayes_on_readings']['value']:.4f}, "
              f"reads depths {reads}", flush=True)
    return out


def _audit_lines(audited: dict) -> list[str]:
    if not audited:
        return []
    lines = ["## What T's readings allow (the audit, seed 0)", "",
             "`fv audit` of each run: the law of T's readings (its heads' outputs at the summary token) measured at each "
             "of the 128 leaves, decoded by Bayes (bridges.analysis.audit.audit_measured; an upper bound on the loss the "
             "readings allow). `reads depth`: the tree depth each block's channels read most (their covariance rows' "
             "energy). Own loss and Bayes on the same 2,000 contexts.", "",
             "| run | own loss | Bayes on its readings | gap (own - Bayes) | reads depth, block by block |",
             "|---|---|---|---|---|"]
    for name, a in sorted(audited.items(), key=lambda kv: (kv[0].split("-")[1], kv[0])):
        g = a["decoder_gap"]
        lines.append(f"| {name} | {a['loss']['value']:.4f} | {a['bayes_on_readings']['value']:.4f} ± "
                     f"{a['bayes_on_readings']['stderr']:.4f} | {g['value']:+.4f} ± {g['stderr']:.4f} | "
                     f"{' / '.join(','.join(map(str, r)) for r in a['reads_depth'])} |")
    worst = max(abs(a["decoder_gap"]["value"]) / a["loss"]["value"] for a in audited.values())
    deep = sorted((n for n in audited if n.startswith("T-deep")), key=lambda n: int(n.split("-B")[1].split("-")[0]))
    orders = "; ".join(f"{n}: {' then '.join(str(r[0]) for r in audited[n]['reads_depth'])}" for n in deep)
    lines += ["", f"Bayes on T's readings is within {100 * worst:.1f}% of T's own loss in every run: T's readout "
              "decodes what it measured, so what keeps deep T above A's prediction is what its blocks measure, not "
              f"how the summary is read. Deep T's blocks read the tree's levels top down, as `path` does, one level a "
              f"block ({orders}); where a level repeats, a block spent its channel on a level already read and none "
              "reached the next."]
    return lines + [""]


def report() -> dict:
    """transformer.json (every finished run kept, the committed ones too), transformer.md and fig_transformer.png."""
    from bridges.runs.store import write_atomic

    data = _load()
    data["runs"].update(finished())
    data.update({"cell": CELL, "sizes": T_SIZES, "steps_per_budget": STEPS_PER_BUDGET, "regime": "regime.md",
                 "planned": [r.name for r in plan()]})
    data["summary"] = summary(data["runs"])
    _write(data)
    figure(data, HERE / "fig_transformer.png")
    write_atomic(HERE / "transformer.md", page(data))
    return data


PARKED = HERE / "parked"  # unfinished runs' checkpoints, committed so the next session resumes them


def park() -> list[str]:
    """Copy every unfinished run's ``config.json`` and ``checkpoint.pt`` to ``parked/<key>/`` (the next session's
    ``unpark`` puts them back and ``train`` resumes from them); a finished run's parked copy is removed."""
    import shutil

    from bridges.training.train import run_dir

    parked = []
    for run in plan():
        folder = run_dir(run.config())
        dest = PARKED / folder.name
        if (folder / "result.json").is_file():
            shutil.rmtree(dest, ignore_errors=True)
            continue
        if not (folder / "checkpoint.pt").is_file():
            continue
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "checkpoint.pt"):
            shutil.copy2(folder / name, dest / (name + ".tmp"))
            (dest / (name + ".tmp")).replace(dest / name)
        parked.append(run.name)
    return parked


def unpark() -> list[str]:
    """Put parked checkpoints back into run folders that have none (or an older one): ``train`` resumes them."""
    import shutil

    from bridges.training.train import run_dir

    restored = []
    for run in plan():
        folder = run_dir(run.config())
        src = PARKED / folder.name
        if not (src / "checkpoint.pt").is_file() or (folder / "result.json").is_file():
            continue
        mine = folder / "checkpoint.pt"
        if mine.is_file() and mine.stat().st_mtime >= (src / "checkpoint.pt").stat().st_mtime:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "checkpoint.pt"):
            shutil.copy2(src / name, folder / name)
        restored.append(run.name)
    return restored


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="run.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("plan", help="the runs and their commands")
    t = sub.add_parser("train", help="train this lane's runs (resumable)")
    t.add_argument("--lane", type=int, default=0)
    t.add_argument("--lanes", type=int, default=1)
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--device", default="cpu")
    t.add_argument("--only", type=lambda s: [x for x in s.split(",") if x], default=None)
    sub.add_parser("report", help="transformer.json, transformer.md and fig_transformer.png from the finished runs")
    sub.add_parser("power", help="the decided tests' power before training (regime.json)")
    sub.add_parser("park", help="copy unfinished runs' checkpoints to parked/ (committed for the next session)")
    sub.add_parser("unpark", help="put parked checkpoints back into the run folders")
    iv = sub.add_parser("interventions", help="deep T's function-vector tables at the top budget (into transformer.json)")
    iv.add_argument("--run", default=f"T-deep-B{TOP}-s0")
    sub.add_parser("audits", help="the audit of every finished tree run of seed 0 (into transformer.json)")
    args = p.parse_args(argv)
    if args.command == "plan":
        for run in plan():
            print(f"{run.name:18s} {run.command()}")
        return 0
    if args.command == "train":
        if not 0 <= args.lane < args.lanes:
            p.error(f"--lane must lie in 0..{args.lanes - 1}, got {args.lane}")
        train_lane(args.lane, args.lanes, args.threads, args.only, args.device)
        return 0
    if args.command == "power":
        from bridges.runs.store import write_atomic

        data = power()
        write_atomic(REGIME, json.dumps(data, indent=1, sort_keys=True) + "\n")
        for name, res in data["power"].items():
            for test, per in res["tests"].items():
                for m, r in per.items():
                    print(f"spread {name:8s} {test:5s} {m}: power {r['power']:.3f}"
                          + (f"; against x1.5: {r['power_against']['power']:.3f}" if "power_against" in r else ""))
        return 0
    if args.command in ("park", "unpark"):
        names = park() if args.command == "park" else unpark()
        print(f"{args.command}: {', '.join(names) or 'nothing'}")
        return 0
    if args.command == "interventions":
        if args.run not in {r.name for r in plan()}:
            p.error(f"--run must name a run of the plan, got {args.run!r}")
        tables = interventions(args.run)  # minutes: the file is read after, so runs reported meanwhile are kept
        data = _load()
        data.setdefault("interventions", {})[args.run] = tables
        _write(data)
        print(f"{args.run}: the function-vector tables in {RESULTS.name} ({data['interventions'][args.run]['seconds']} s)")
        return 0
    if args.command == "audits":
        audited = audits()  # minutes: the file is read after, so runs reported meanwhile are kept
        data = _load()
        data.setdefault("audits", {}).update(audited)
        _write(data)
        print(f"{len(audited)} audits in {RESULTS.name}")
        return 0
    if args.command == "report":
        data = report()
        print(f"{len(data['runs'])} of {len(plan())} runs in {RESULTS.name}; transformer.md and fig_transformer.png written")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
