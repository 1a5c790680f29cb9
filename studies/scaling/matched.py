"""Model A FLOP-matched to Model B in the scaling study's cell (issue 29, item 3; studies/scaling/report.md).

Command: ``PYTHONPATH=. python studies/scaling/matched.py [--budgets=6,5,4,3,2,1] [--seeds=0,1,2] [--out=DIR]
[--table]``.

The study trains A for 5000 x budget steps at batch 128 and B for 2500 x budget steps at batch 256, so at budget 6
A gets 2.9 times B's compute. Here every A run of the study (``studies/scaling/scaling.json``) is trained again with
the steps whose training FLOPs equal those of B's run at the same budget (``bridges.prices.flops.flop_matched_steps``:
matrix-product FLOPs of one step counted by torch on both models; about 5,000-5,250 steps at every budget), the
rest of its command unchanged (the cosine schedule shrinks with the steps). The question: is A's advantage over B
bought with compute? The law test of the FLOP-matched A is the study's (``fvnum.laws.law_test``, budgets 2..6,
the seeds as points).

Runs live in ``DIR/<key>/`` (default studies/scaling/matched/train, git-ignored) and resume after interruption;
every finished run is merged into studies/scaling/matched.json at once (atomically, under a lock: one process per
core may share it). ``--table`` prints the tables of report.md from matched.json without training.
"""
import json
import os
import statistics
import sys

from bridges.prices.flops import flop_matched_steps, step_flops
from bridges.runs.options import run_script, script_options, study_json
from bridges.runs.store import update_json
from bridges.studies.scaling import command_of, config_of_command

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "matched.json")
with open(os.path.join(HERE, "scaling.json")) as _f:
    STUDY = json.load(_f)


def study_run(model: str, budget: int, seed: int) -> dict:
    (row,) = [r for r in STUDY["runs"] if r["model"] == model and r["budget"] == budget and r["seed"] == seed]
    return row


def load() -> dict:
    return study_json(OUT, "FLOP-matched runs")


def save(name: str, entry: dict) -> None:
    """Add one run to matched.json (under a lock: one process of this script per core may share it)."""
    update_json(OUT, lambda cells: cells.__setitem__(name, entry))


def run(budget: int, seed: int, out: str) -> None:
    name = f"A-B{budget}-s{seed}"
    if name in load():
        return
    a, b = study_run("A", budget, seed), study_run("B", budget, seed)
    a_cfg, b_cfg = config_of_command(a["command"]), config_of_command(b["command"])
    if a_cfg.key() != a["key"] or b_cfg.key() != b["key"]:
        raise SystemExit(f"{name}: the study's commands no longer build the study's keys (the code changed)")
    steps = flop_matched_steps(a_cfg, b_cfg)
    if steps == a["steps"]:  # budget 1: the study's run is already matched (the same key): its row is the result
        result, key, command = a, a["key"], a["command"]
    else:
        from bridges.training.train import train

        run = a_cfg.replace(train=dict(steps=steps, out=out))
        trained = train(run, progress=False)
        result = {"loss": trained.loss, "stderr": trained.stderr, "train_seconds": trained.train_seconds}
        key, command = run.key(), command_of(run, os.path.relpath(out, os.path.dirname(os.path.dirname(HERE))))
    save(name, {"model": "A", "budget": budget, "seed": seed, "key": key, "steps": steps, "command": command,
                "loss": result["loss"], "stderr": result["stderr"], "train_seconds": result.get("train_seconds"),
                "flops_per_step": step_flops(a_cfg), "train_flops": steps * step_flops(a_cfg),
                "study_A": {"key": a["key"], "steps": a["steps"], "loss": a["loss"],
                            "train_flops": a["steps"] * step_flops(a_cfg)},
                "study_B": {"key": b["key"], "steps": b["steps"], "loss": b["loss"],
                            "flops_per_step": step_flops(b_cfg), "train_flops": b["steps"] * step_flops(b_cfg)}})
    print(f"{name}: {steps} steps (B's FLOPs), loss {result['loss']:.4f} (study A {a['loss']:.4f} at "
          f"{a['steps']} steps, B {b['loss']:.4f})", flush=True)


def prediction(budget: int, model: str) -> float:
    (row,) = [r for r in STUDY["theory"][str(budget)] if r["role"] == "prediction" and model in r["models"]]
    return row["value"]


def table() -> str:
    """Per budget: FLOP-matched A beside the study's (step-matched by A's recipe) A and B, their seed means."""
    from fvnum.laws import law_test

    cells = load()
    lines = ["| budget | seeds | A steps (FLOP-matched) | A, FLOP-matched | A, study (5000 x budget steps) | B, study | "
             "A FLOP-matched / B | A study / B | predictions A / B | A FLOP-matched / A's prediction |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    pts = []
    for budget in sorted({e["budget"] for e in cells.values()}):
        rows = sorted((e for e in cells.values() if e["budget"] == budget), key=lambda e: e["seed"])
        fm = [e["loss"] for e in rows]
        seeds = [e["seed"] for e in rows]
        a = [study_run("A", budget, s)["loss"] for s in seeds]
        b = [study_run("B", budget, s)["loss"] for s in seeds]
        sd = f" ± {statistics.stdev(fm):.4f}" if len(fm) > 1 else ""
        pts += [(budget, x) for x in fm]
        lines.append(f"| {budget} | {', '.join(map(str, seeds))} | {rows[0]['steps']} | {statistics.mean(fm):.4f}"
                     f"{sd} | {statistics.mean(a):.4f} | {statistics.mean(b):.4f} | "
                     f"{statistics.mean(fm) / statistics.mean(b):.2f} | {statistics.mean(a) / statistics.mean(b):.2f} | "
                     f"{prediction(budget, 'A') / prediction(budget, 'B'):.2f} | "
                     f"{statistics.mean(fm) / prediction(budget, 'A'):.2f} |")
    seeds_at = {b: sum(1 for x, _ in pts if x == b) for b, _ in pts}
    if len([b for b in seeds_at if b >= 2]) >= 4 and min(seeds_at.values()) >= 2:  # the test's minimum
        test = law_test(*zip(*pts)).to_dict()
        lines += ["", f"Law test of FLOP-matched A (budgets 2 and up, seeds as points): **{test['verdict']}** "
                      f"(chi2 exponential / power: {test['chi2']['exponential']:.3g} / {test['chi2']['power']:.3g})."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    opts = script_options(argv, {"budgets", "seeds", "out", "table"})
    if "table" in opts:
        print(table())
        return 0
    out = opts.get("out", os.path.join(HERE, "matched", "train"))
    seeds, budgets = opts.get("seeds", "0,1,2").split(","), opts.get("budgets", "6,5,4,3,2,1").split(",")
    have = {(r["budget"], r["seed"]) for r in STUDY["runs"] if r["model"] == "A"}
    if not out.strip():
        raise SystemExit("--out: give a folder (it is empty)")
    if not all(w.isdigit() for w in seeds + budgets) or any((int(b), int(s)) not in have for b in budgets for s in seeds):
        raise SystemExit(f"--seeds={','.join(seeds)[:30]} --budgets={','.join(budgets)[:30]}: give seeds and budgets "
                         "of the study (seeds among 0,1,2; budgets among 1..6)")
    load()  # a damaged matched.json is refused before anything is trained
    for seed in map(int, seeds):
        for budget in map(int, budgets):
            run(budget, seed, out)
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main, sys.argv[1:], "matched.py"))
