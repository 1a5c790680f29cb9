"""A second attempt at Model A's large budgets in the scaling study's cell (studies/scaling/model_a.md).

Command: ``PYTHONPATH=. python studies/scaling/model_a.py [--out=DIR] [--only=NAME] [--table]``. Three attempts
at seed 0, each against the study's recipe (5000 x budget steps, MLP width 64, no curriculum):

- ``longer``: budget 4 with twice the recipe's steps (40000), budget 5 with 1.5 times (37500: what fitted
  the session);
- ``wider``: budget 4 with router and readout MLPs of width 128 (20000 steps);
- ``deeper``: budget 4 with three hidden layers in those MLPs instead of two (20000 steps); ``deeper-slow``:
  the same at a peak learning rate of 0.002 instead of the recipe's 0.005;
- ``curriculum``: budgets 4, 5, 6, each started from the finished run one budget below
  (``TrainConfig.init_from``, ``bridges.models.networks.grow``), 10000 steps each; the chain starts from the study's
  own budget-3 run (copied from studies/scaling/study/train when it is there, else trained again: same key);
- ``lr-high``, ``lr-low``: budget 4 at peak learning rates 0.01 and 0.0025 around the recipe's 0.005 (20000
  steps; a learning-rate scan, issue 29 item 2);
- ``noise-curriculum``: budget 4, training contexts of 512 tokens at first, falling geometrically to the cell's
  64 over the first half of the 20000 steps (``fv train --tokens-from 512``: less reading noise while the
  routers form);
- ``batch-late``: budget 4, batches of 512 contexts instead of 128 over the second half of the 20000 steps
  (``fv train --batch-late 512``: less gradient noise where the schedule fine-tunes).

Runs live in ``DIR/<key>/`` (default studies/scaling/model_a/train, git-ignored) and resume after interruption;
every finished run is added to studies/scaling/model_a.json at once (atomically), with the study's seed mean
and Model A's prediction (``best_adaptive_keyed``, from studies/scaling/scaling.json) beside it. ``--table``
prints the table of model_a.md from model_a.json without training; ``--figure`` draws fig_model_a.png from it.
"""
import json
import os
import shutil
import sys

from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig, recipe_steps
from bridges.studies.scaling_report import CONVERGED, convergence
from bridges.runs.options import script_options
from bridges.runs.store import write_atomic
from bridges.training.train import train

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "model_a.json")
STUDY = json.load(open(os.path.join(HERE, "scaling.json")))
DATA = DataConfig(prior="tree", depth=STUDY["config"]["depth"], alpha=STUDY["config"]["alpha"],
                  n_tokens=STUDY["config"]["n_tokens"], s2=STUDY["config"]["s2"])
CURRICULUM_STEPS = 10_000
NOISE_FROM = 512  # the noise curriculum's first N (8 x the cell's 64: a reading noise 8 times smaller in variance)
LATE_BATCH = 512  # the batch of the second half of the steps (4 x the recipe's 128)


def config(budget: int, out: str, **train) -> RunConfig:
    sizes = dict(mlp_width=train.pop("mlp_width", 64), hidden_layers=train.pop("hidden_layers", 2))
    return RunConfig(DATA, ModelConfig("A", budget, **sizes), TrainConfig(seed=0, out=out, **train))


def attempts(out: str) -> dict:
    """{name: [RunConfig, ...]} in the order they must run (a curriculum run needs the one before it)."""
    chain, prev = [], config(3, out)  # the study's budget-3 run of seed 0: the recipe, its key
    for b in (4, 5, 6):
        prev = config(b, out, steps=CURRICULUM_STEPS, init_from=prev.key())
        chain.append(prev)
    return {"longer": [config(b, out, steps=int(f * recipe_steps(b, "A"))) for b, f in ((4, 2), (5, 1.5))], "wider": [config(4, out, mlp_width=128)],
            "deeper": [config(4, out, hidden_layers=3)], "deeper-slow": [config(4, out, hidden_layers=3, lr=0.002)],
            "curriculum": chain, "lr-high": [config(4, out, lr=0.01)], "lr-low": [config(4, out, lr=0.0025)],
            "noise-curriculum": [config(4, out, tokens_from=NOISE_FROM)],
            "batch-late": [config(4, out, batch_late=LATE_BATCH)]}


def study_source(out: str) -> None:
    """Put the study's budget-3 run (the curriculum's start) into ``out``: copied, or trained again."""
    cfg = config(3, out)
    target = os.path.join(out, cfg.key())
    study = os.path.join(HERE, "study", "train", cfg.key())
    if not os.path.exists(os.path.join(target, "result.json")):
        if os.path.exists(os.path.join(study, "result.json")):
            shutil.copytree(study, target, dirs_exist_ok=True)
        else:
            train(cfg)


def study_mean(budget: int) -> float:
    losses = [r["loss"] for r in STUDY["runs"] if r["model"] == "A" and r["budget"] == budget]
    return sum(losses) / len(losses)


def prediction(budget: int) -> dict:
    (row,) = [r for r in STUDY["theory"][str(budget)] if r["role"] == "prediction" and "A" in r["models"]]
    return row


def entry(name: str, result) -> dict:
    c, b = result.config, result.config.model.budget
    pred = prediction(b)
    row = {"model": "A", "budget": b, "seed": c.train.seed, "steps": result.steps, "loss": result.loss,
           "history": [(h[0], h[2]) for h in result.history]}
    (conv,) = convergence([row])
    return {"attempt": name, "budget": b, "key": c.key(), "steps": result.steps, "mlp_width": c.model.mlp_width,
            "hidden_layers": c.model.hidden_layers, "lr": c.train.lr,
            "init_from": c.train.init_from, "tokens_from": c.train.tokens_from, "batch_late": c.train.batch_late,
            "loss": result.loss, "stderr": result.stderr,
            "start_loss": result.history[0][2], "change_last_20": conv["change"],
            "converged": conv["converged"], "train_seconds": result.train_seconds,
            "prediction": {"name": pred["name"], "value": pred["value"], "stderr": pred["stderr"]},
            "trained_over_prediction": result.loss / pred["value"],
            "study_mean": study_mean(b), "over_study_mean": result.loss / study_mean(b),
            "history": [list(h) for h in row["history"]]}


def save(name: str, e: dict) -> None:
    cells = json.load(open(OUT)) if os.path.exists(OUT) else {}
    cells[f"{name}-B{e['budget']}"] = e
    write_atomic(OUT, json.dumps(cells, indent=1) + "\n")


def table() -> str:
    cells = json.load(open(OUT))
    lines = ["| attempt | budget | steps | MLP | lr | loss | trained / prediction | / study mean | last 20% | "
             "minutes |", "|---|---|---|---|---|---|---|---|---|---|"]
    for e in sorted(cells.values(), key=lambda e: (e["attempt"], e["budget"])):
        lines.append(f"| {e['attempt']} | {e['budget']} | {e['steps']} | {e['hidden_layers']} x {e['mlp_width']} | "
                     f"{e['lr']:g} | "
                     f"{e['loss']:.4f} ± {e['stderr']:.4f} | {e['trained_over_prediction']:.2f} | "
                     f"{e['over_study_mean']:.2f} | {e['change_last_20']:.1%} | {e['train_seconds'] / 60:.0f} |")
    return "\n".join(lines)


MARKERS = {"longer": ("s", "C1"), "wider": ("D", "C2"), "deeper": ("v", "C4"), "deeper-slow": ("<", "C5"),
           "curriculum": ("^", "C3"), "lr-high": (">", "C6"), "lr-low": ("P", "C7"),
           "noise-curriculum": ("X", "C8"), "batch-late": ("*", "C9")}


def figure(path: str = os.path.join(HERE, "fig_model_a.png")) -> str:
    """Left: loss against budget (log scale): A's prediction, the study's seed mean and range, the attempts.
    Right: the held-out loss of every budget-4 run against the fraction of its steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = json.load(open(OUT))
    budgets = STUDY["config"]["budgets"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    pred = [prediction(b) for b in budgets]
    ax.errorbar(budgets, [r["value"] for r in pred], yerr=[2 * r["stderr"] for r in pred], color="k", capsize=2,
                label=f"prediction ({pred[0]['name']}, 2 SE)")
    ax.fill_between(budgets, [0.8 * r["value"] for r in pred], [1.25 * r["value"] for r in pred], color="k",
                    alpha=0.08, label="target band [0.8, 1.25] x prediction")
    runs = {b: [r["loss"] for r in STUDY["runs"] if r["model"] == "A" and r["budget"] == b] for b in budgets}
    ax.errorbar(budgets, [study_mean(b) for b in budgets], fmt="o-", color="C0", capsize=3,
                yerr=[[study_mean(b) - min(runs[b]) for b in budgets], [max(runs[b]) - study_mean(b) for b in budgets]],
                label="study: Model A, 3 seeds (mean, range)")
    for name, (marker, colour) in MARKERS.items():
        pts = sorted((e["budget"], e["loss"]) for e in cells.values() if e["attempt"] == name)
        if pts:
            ax.plot(*zip(*pts), marker=marker, color=colour, ls=":", ms=7, label=f"second attempt: {name}")
    ax.set(yscale="log", xlabel="budget B", ylabel="held-out loss E||theta_hat - theta||^2",
           title=f"Model A, tree depth {DATA.depth}, alpha {DATA.alpha}, N {DATA.n_tokens}")
    ax.legend(fontsize=7)
    (study4,) = [r for r in STUDY["runs"] if r["model"] == "A" and r["budget"] == 4 and r["seed"] == 0]
    curves = [("study recipe (20000 steps)", "C0", study4["history"], study4["steps"])]
    curves += [(f"{e['attempt']} ({e['steps']} steps)", MARKERS[e["attempt"]][1], e["history"], e["steps"])
               for e in cells.values() if e["budget"] == 4]
    for label, colour, hist, steps in curves:
        pts = [(s / steps, v) for s, v in hist if v is not None and s > 0]
        bx.plot(*zip(*pts), color=colour, label=label)
    bx.axhline(prediction(4)["value"], color="k", ls="--", label="prediction")
    bx.axhline(1.25 * prediction(4)["value"], color="k", ls=":", label="1.25 x prediction")
    bx.set(yscale="log", xlabel="fraction of the run's steps", ylabel="held-out loss", title="budget 4: held-out loss during training")
    bx.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    opts = script_options(argv, {"table", "figure", "out", "only"})
    if "table" in opts or "figure" in opts:
        print(table() if "table" in opts else figure())
        return 0
    out = opts.get("out", os.path.join(HERE, "model_a", "train"))
    os.makedirs(out, exist_ok=True)
    for name, cfgs in attempts(out).items():
        if opts.get("only", name) != name:
            continue
        if name == "curriculum":
            study_source(out)
        for cfg in cfgs:
            e = entry(name, train(cfg, progress=False))
            save(name, e)
            print(f"{name} B{e['budget']}: {e['loss']:.4f} = {e['trained_over_prediction']:.2f} x prediction, "
                  f"{e['over_study_mean']:.2f} x study; last 20% {e['change_last_20']:.1%} "
                  f"(converged < {CONVERGED:.0%}: {e['converged']})", flush=True)
    return 0


if __name__ == "__main__":
    from bridges.runs.options import run_script

    sys.exit(run_script(main, sys.argv[1:], "model_a.py"))
