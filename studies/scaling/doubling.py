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
import shlex
import sys

from bridges.cli import build_parser, main as fv
from bridges.commands import config_from_args, train_argv
from bridges.runs.store import read_json, update_json
from bridges.runs.options import script_options

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


def doubled(command: str, out: str) -> list[str]:
    """The study's ``fv train`` command with its steps doubled and its run folder moved to ``out``."""
    argv = train_argv(command)
    return train_argv(command, {"--steps": 2 * int(argv[argv.index("--steps") + 1]), "--out": out})


def load() -> dict:
    return read_json(OUT, {})


def run(model: str, seed: int, out: str) -> None:
    name = f"{model}-s{seed}"
    if name in load():
        return
    (base,) = [r for r in study_runs(model) if r["seed"] == seed]
    argv = doubled(base["command"], out)
    key = config_from_args(build_parser().parse_args(argv)).key()
    code = fv(argv + ["--quiet"])
    if code:
        raise SystemExit(f"{name}: fv train exited {code}")
    with open(os.path.join(out, key, "result.json")) as f:
        result = json.load(f)
    shown = os.path.relpath(out, os.path.dirname(os.path.dirname(HERE)))
    entry = {"model": model, "budget": base["budget"], "seed": seed, "key": key, "study_key": base["key"],
             "command": "fv " + shlex.join(argv).replace(out, shown), "steps": 2 * base["steps"],
             "loss_T": base["loss"], "stderr_T": base["stderr"],
             "loss_2T": result["loss"], "stderr_2T": result["stderr"],
             "train_seconds_2T": result.get("train_seconds")}
    update_json(OUT, lambda cells: cells.__setitem__(name, entry))
    print(f"{name}: {base['loss']:.4f} -> {result['loss']:.4f} "
          f"({(result['loss'] - base['loss']) / base['loss']:+.1%})", flush=True)


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
    os.makedirs(out, exist_ok=True)
    for seed in [int(s) for s in opts.get("seeds", "0,1,2").split(",")]:
        for model in opts.get("models", "BCA"):
            run(model, seed, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
