"""The step-doubling check of the scaling study (issue 29, item 4; studies/scaling/report.md).

Command: ``PYTHONPATH=. python studies/scaling/doubling.py [--models=BCA] [--seeds=0,1,2] [--out=DIR] [--table]``.

At the largest budget of each model in ``studies/scaling/scaling.json``, every seed's run is trained again with
twice its steps (the same command with ``--steps`` doubled and ``--out`` the doubling folder; the cosine schedule
stretches with it) and its held-out loss is paired with the study's run of the same seed. The criterion, fixed
before any run: the seed mean changes by less than 3%, ``|mean L(2T) - mean L(T)| / mean L(T) < 0.03``. The
study's "last 20% of the steps" figure says only that the schedule ended.

Runs live in ``DIR/<key>/`` (default studies/scaling/doubling/train, git-ignored) and resume after interruption;
every finished run is added to studies/scaling/doubling.json at once (atomically). ``--table`` prints the table of
report.md from doubling.json without training.
"""
import json
import math
import os
import sys

from bridges.runs.config import RunConfig
from bridges.runs.options import run_script, script_options, study_json
from bridges.runs.store import update_json
from bridges.studies.scaling import command_of, config_of_command

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "doubling.json")
CRITERION = 0.03
with open(os.path.join(HERE, "scaling.json")) as _f:
    STUDY = json.load(_f)


def study_runs(model: str) -> list[dict]:
    """The study's runs of ``model`` at its largest budget, by seed."""
    runs = [r for r in STUDY["runs"] if r["model"] == model]
    top = max(r["budget"] for r in runs)
    return sorted((r for r in runs if r["budget"] == top), key=lambda r: r["seed"])


def doubled(command: str, out: str) -> RunConfig:
    """The run of the study's ``fv train`` command with its steps doubled and its run folder moved to ``out``."""
    run = config_of_command(command)
    return run.replace(train=dict(steps=2 * run.train.steps, out=out))


def load() -> dict:
    return study_json(OUT, "step doubling")


def run(model: str, seed: int, out: str) -> None:
    name = f"{model}-s{seed}"
    if name in load():
        return
    (base,) = [r for r in study_runs(model) if r["seed"] == seed]
    from bridges.training.train import train

    run = doubled(base["command"], out)
    result = train(run, progress=False)
    shown = os.path.relpath(out, os.path.dirname(os.path.dirname(HERE)))
    entry = {"model": model, "budget": base["budget"], "seed": seed, "key": run.key(), "study_key": base["key"],
             "command": command_of(run, shown), "steps": 2 * base["steps"],
             "loss_T": base["loss"], "stderr_T": base["stderr"],
             "loss_2T": result.loss, "stderr_2T": result.stderr, "train_seconds_2T": result.train_seconds}
    update_json(OUT, lambda cells: cells.__setitem__(name, entry))
    print(f"{name}: {base['loss']:.4f} -> {result.loss:.4f} ({(result.loss - base['loss']) / base['loss']:+.1%})",
          flush=True)


def verdicts(cells: dict) -> dict:
    """Per model: the seed means at T and 2T, their relative change and whether it is under 3%."""
    out = {}
    for model in "ABC":
        rows = [e for e in cells.values() if e["model"] == model]
        if not rows:
            continue
        t = sum(e["loss_T"] for e in rows) / len(rows)
        t2 = sum(e["loss_2T"] for e in rows) / len(rows)
        change = (t2 - t) / t
        se = math.sqrt(sum(e["stderr_T"] ** 2 + e["stderr_2T"] ** 2 for e in rows)) / len(rows) / t
        out[model] = {"seeds": sorted(e["seed"] for e in rows), "budget": rows[0]["budget"], "mean_T": t,
                      "mean_2T": t2, "change": change, "change_se": se, "converged": abs(change) < CRITERION}
    return out


def table() -> str:
    cells = load()
    lines = ["| model | budget | seeds | per-seed change | mean loss, T | mean loss, 2T | change (± SE) | "
             "under 3%? |", "|---|---|---|---|---|---|---|---|"]
    for model, v in verdicts(cells).items():
        per = ", ".join(f"{(e['loss_2T'] - e['loss_T']) / e['loss_T']:+.1%}"
                        for e in sorted(cells.values(), key=lambda e: e["seed"]) if e["model"] == model)
        lines.append(f"| {model} | {v['budget']} | {', '.join(map(str, v['seeds']))} | {per} | {v['mean_T']:.4f} | "
                     f"{v['mean_2T']:.4f} | {v['change']:+.1%} ± {v['change_se']:.1%} | "
                     f"{'yes' if v['converged'] else '**no**'} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    opts = script_options(argv, {"models", "seeds", "out", "table"})
    if "table" in opts:
        print(table())
        return 0
    out = opts.get("out", os.path.join(HERE, "doubling", "train"))
    seeds, models = opts.get("seeds", "0,1,2").split(","), opts.get("models", "BCA")
    have = {(r["model"], r["seed"]) for r in STUDY["runs"]}
    if not out.strip():
        raise SystemExit("--out: give a folder (it is empty)")
    if not all(s.isdigit() for s in seeds) or not models or any((m, int(s)) not in have for m in models for s in seeds):
        raise SystemExit(f"--seeds={','.join(seeds)[:30]} --models={models[:10]}: give seeds and models of the study "
                         "(seeds among 0,1,2; models among A, B, C)")
    load()  # a damaged doubling.json is refused before anything is trained
    for seed in map(int, seeds):
        for model in models:
            run(model, seed, out)
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main, sys.argv[1:], "doubling.py"))
