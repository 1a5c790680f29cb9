"""Trained points on the atoms prior (issue 30, item 2): Models A, B, C at two task diversities M.

    OMP_NUM_THREADS=1 PYTHONPATH=. python studies/atoms/trained.py            # resumable; --report to only lay out

Atoms ``--diversity M --dim 8`` drawn by seed 0 (``fvnum.priors.atoms.AtomsPrior.draw``), budget 4, N = 64 tokens, training
seed 0, one thread, the six runs one at a time (each a ``RunConfig`` trained by ``bridges.training.train.train``,
recorded with its typed result and the ``fv train`` command that re-runs it). Beside each
trained loss: the model's prediction row on atoms (``fvnum.finite_theory.finite_comparison_table``: A the best adaptive
policy found with the dMMSE decoder, B the best fixed design found with the dMMSE decoder, C the exact linear
theory), and the dMMSE and ridge baselines. Results: ``studies/atoms/trained.json`` (written atomically after each run
or theory table, so an interrupted script resumes); run folders under ``studies/atoms/train/`` (not committed). Bad
input, or a trained.json that is not the study's, is refused in one line with exit status 2 before anything is written.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = HERE / "trained.json"
RUNS = HERE / "train"
DIM, BUDGET, TOKENS, SEED = 8, 4, 64, 0
DIVERSITIES = (16, 1024)
STEPS = {"A": 3000, "B": 3000, "C": 3000}  # about 15% of the recipe's A steps: six runs in about 20 CPU-minutes
EVAL_EVERY = 1000
THEORY = dict(samples=4000, search_samples=1000, seed=0)


def config(model: str, M: int):
    """The ``RunConfig`` of ``model`` at diversity ``M`` (its run folder relative to the repository's root)."""
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig

    return RunConfig(DataConfig(prior="atoms", diversity=M, atoms_dim=DIM, n_tokens=TOKENS), ModelConfig(model, BUDGET),
                     TrainConfig(steps=STEPS[model], eval_every=EVAL_EVERY, threads=1, seed=SEED,
                                 out=str(RUNS.relative_to(ROOT))))


def load() -> dict:
    """trained.json ({"runs": {}, "theory": {}} where there is none yet); one that is damaged or not the study's is
    a one-line InputError."""
    from bridges.runs.options import study_json

    state = study_json(OUT, "trained points")
    if not state:
        return {"runs": {}, "theory": {}}
    if set(state) != {"runs", "theory"}:
        from fvsym.errors import InputError

        raise InputError(f"{OUT} is not the study's trained points (runs and theory); restore it (git checkout) first")
    return state


def save(state: dict) -> None:
    from bridges.runs.store import write_json

    write_json(OUT, state)


def train(state: dict) -> None:
    from bridges.studies.scaling import command_of
    from bridges.training.train import train as fit

    os.chdir(ROOT)  # the run folders are relative to the repository's root, as in the commands
    for M in DIVERSITIES:
        for model in STEPS:
            name = f"{model}-M{M}"
            if name in state["runs"]:
                continue
            cfg = config(model, M)
            start = time.perf_counter()
            result = fit(cfg, progress=False)
            state["runs"][name] = {"command": command_of(cfg), "model": model, "diversity": M, "key": cfg.key(),
                                   "loss": result.loss, "stderr": result.stderr, "steps": result.steps,
                                   "wall_seconds": round(time.perf_counter() - start, 1),
                                   "train_seconds": result.wall_seconds}
            save(state)
            print(f"{name}: {result.loss:.4f} +- {result.stderr:.2g} ({result.wall_seconds:.0f} s)")


def theory(state: dict) -> None:
    from bridges.analysis.compare import theory_losses
    from bridges.runs.config import DataConfig

    for M in DIVERSITIES:
        if str(M) in state["theory"]:
            continue
        data = DataConfig(prior="atoms", diversity=M, atoms_dim=DIM, atoms_seed=SEED, n_tokens=TOKENS)
        start = time.perf_counter()
        rows = theory_losses(data, BUDGET, keyed=None, **THEORY)
        state["theory"][str(M)] = {"rows": rows, "settings": THEORY, "seconds": round(time.perf_counter() - start, 1)}
        save(state)
        print(f"theory at M = {M}: {time.perf_counter() - start:.0f} s")


def report(state: dict) -> str:
    from fvnum.theory import prediction_row

    lines = ["| M | model | trained | prediction (row) | trained / prediction | dMMSE, coordinates 1..4 | "
             "dMMSE, best adaptive | ridge, best design | linear theory (C) |", "|---:|---|---:|---|---:|---:|---:|---:|---:|"]
    for M in DIVERSITIES:
        rows = {r["name"]: r for r in state["theory"].get(str(M), {}).get("rows", [])}
        for model in STEPS:
            run = state["runs"].get(f"{model}-M{M}")
            if run is None or not rows:
                continue
            pred = rows[prediction_row(model, rows)]
            se = lambda r: f" ± {r['stderr']:.2g}" if r["stderr"] else ""  # noqa: E731
            lines.append(f"| {M} | {model} | {run['loss']:.3f} ± {run['stderr']:.2g} | {pred['value']:.3f}{se(pred)} "
                         f"({pred['name']}) | {run['loss'] / pred['value']:.2f} | {rows['top_levels']['value']:.3f} | "
                         f"{rows['best_adaptive']['value']:.3f} | {rows['gaussian_optimum']['value']:.3f} | "
                         f"{rows['top_levels_linear']['value']:.3f} |")
    return "\n".join(lines)


def main(args: list[str]) -> int:
    unknown = [a for a in args if a != "--report"]
    if unknown:
        print(f"trained.py: unknown options: {' '.join(unknown)[:60]}; the only option is --report", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from bridges.runs.options import run_script

    return run_script(_main, args, "trained.py")


def _main(args: list[str]) -> int:
    state = load()
    if "--report" not in args:
        train(state)
        theory(state)
    print(report(state))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
