"""The Model T study (issue 57; docs/theory.md section 7.1): a standard transformer, deep (L = B) and wide (L = 1), on
the scaling study's cell, beside Models A and B and their predictions. The regime, the tests and their power were
written before any training: studies/transformer/regime.md.

    PYTHONPATH=. python studies/transformer/run.py plan              # the runs, their commands and the price
    PYTHONPATH=. python studies/transformer/run.py price             # time a few steps of every shape here
    PYTHONPATH=. python studies/transformer/run.py train --lane 0 --lanes 2 &   # resumable; one lane a core
    PYTHONPATH=. python studies/transformer/run.py train --only T-deep-B4-s0    # the named runs, in that order
    PYTHONPATH=. python studies/transformer/run.py report            # transformer.json, transformer.md, figures

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
            r = load_result(folder, cfg)
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
    for row in csv.DictReader((SCALING / "scaling.csv").open()):
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
    sub.add_parser("collect", help="add the finished runs found here to transformer.json")
    sub.add_parser("power", help="the decided tests' power before training (regime.json)")
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
    if args.command == "collect":
        data = _load()
        data["runs"].update(finished())
        _write(data)
        print(f"{len(data['runs'])} runs in {RESULTS.name}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
