"""Adaptive inference against gradient descent (issue 58, item 3) and Models A and B at Model G's cells (item 2's
label values), as pre-registered in regime.md's last section.

    PYTHONPATH=. python studies/gd/contrast.py price    # the runs' price from bridges.prices (CPU-hours)
    PYTHONPATH=. python studies/gd/contrast.py train    # train every run in order (resumable; one thread), reporting
    PYTHONPATH=. python studies/gd/contrast.py report   # contrast.json, contrast.md and fig_tree.png

*The tree arm*: at the scaling study's cell (tree depth 7, D = 127, alpha 0.6, N 64), for L = 1..6, ``gd_steps``
(D channels a layer, a step per layer; plain and preconditioned by the prior's covariance), ``path`` and A's and B's
predictions at budget L (one channel a layer; the scaling study's committed tables) and trained G. *The A/B arm*:
Models A and B with label values on G's isotropic Gaussian (D 15), where G1 says depth buys nothing.

A user of the library: it builds ``RunConfig``s, calls ``bridges.training.train.train`` and reads ``TrainResult``s;
run folders go to studies/gd/train/ (not in git). A report keeps every run contrast.json holds that the run folders
no longer hold, and the theory it computed once. Bad input: one line, exit status 2.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAIN_DIR = HERE / "train"
RESULTS = HERE / "contrast.json"
PAGE = HERE / "contrast.md"
FIGURE = HERE / "fig_tree.png"
SCALING = HERE.parent / "scaling" / "scaling.json"
TREE = {"depth": 7, "alpha": 0.6, "n_tokens": 64}  # the scaling study's cell (s2 0.01, the default)
TREE_LAYERS = (1, 2, 3, 4, 5, 6)
GAUSS_DEPTH, GAUSS_TOKENS = 4, (8, 15, 30, 120)  # the G grid's isotropic Gaussian: D 15
A_BUDGETS, B_BUDGETS = (1, 2, 4), (2, 4)
STEPS_A_BUDGET = 1000  # the A/B arm's steps a budget (regime.md)
MARGIN = 2.0  # combined standard errors that decide a comparison
G1_BAND = 0.10  # |A / B - 1| at most this at budgets 2 and 4 (regime.md)
GD_SAMPLES, GD_SELECT = 20_000, 4_000


def tree_configs(seeds=(0,)):
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig

    for seed in seeds:
        for L in TREE_LAYERS:
            yield RunConfig(DataConfig(prior="tree", **TREE), ModelConfig(model="G", layers=L, values="residual"),
                            TrainConfig(seed=seed, threads=1, out=str(TRAIN_DIR)))


def ab_configs():
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig

    for N in GAUSS_TOKENS:
        for model, budgets in (("A", A_BUDGETS), ("B", B_BUDGETS)):
            for b in budgets:
                yield RunConfig(DataConfig(prior="gaussian", cov="isotropic", depth=GAUSS_DEPTH, n_tokens=N),
                                ModelConfig(model=model, budget=b),
                                TrainConfig(seed=0, steps=STEPS_A_BUDGET * b, threads=1, out=str(TRAIN_DIR)))


def all_configs():
    """In training order: G on the tree (seed 0), A and B at G's cells, then G on the tree with seeds 1 and 2."""
    yield from tree_configs((0,))
    yield from ab_configs()
    yield from tree_configs((1, 2))


def price() -> dict:
    from bridges.prices.cost import SAFETY, train_seconds

    cfgs = list(all_configs())
    return {"runs": len(cfgs), "steps": sum(c.train.steps for c in cfgs),
            "cpu_hours_priced": sum(train_seconds(c) for c in cfgs) / 3600, "safety": SAFETY}


def _finished():
    from bridges.training.train import load_result

    for cfg in all_configs():
        path = TRAIN_DIR / cfg.key() / "result.json"
        if path.is_file():
            result = load_result(path, cfg)
            if result.finished:
                yield cfg, result


def _compare(a: float, sa: float, b: float, sb: float) -> str:
    """Which of two losses is lower by more than MARGIN combined standard errors: 'first', 'second' or 'neither'."""
    gap, err = b - a, math.hypot(sa, sb)
    return "first" if gap > MARGIN * err else "second" if -gap > MARGIN * err else "neither"


def tree_theory() -> list[dict]:
    """Per L: gd_steps plain and preconditioned by the prior (fvnum.gd_steps), path and A's and B's predictions at
    budget L (the scaling study's committed theory tables at this cell)."""
    from fvnum.values.gd import gd_steps
    from fvsym import TreePrior

    prior = TreePrior(TREE["depth"], str(TREE["alpha"]))
    theory = json.loads(SCALING.read_text())["theory"]
    rows = []
    for L in TREE_LAYERS:
        at = {r["name"]: r for r in theory[str(L)]}
        row = {"L": L}
        for name, pre in (("gd_steps", None), ("gd_steps_prior", "prior")):
            est = gd_steps(prior, L, TREE["n_tokens"], s2=0.01, steps="per_layer", preconditioner=pre,
                           samples=GD_SAMPLES, select_samples=GD_SELECT, seed=0)
            row[name] = {"loss": est.value, "stderr": est.stderr, "steps": list(est.steps), "how": est.how}
        for name, key in (("path", "path"), ("prediction_A", "best_adaptive_keyed"), ("prediction_B", "best_nonadaptive_keyed")):
            row[name] = {"loss": at[key]["value"], "stderr": at[key].get("stderr") or 0.0, "row": key}
        rows.append(row)
    return rows


def ab_theory() -> list[dict]:
    """Per (N, budget): the prediction A and B are both held to on a Gaussian, ``best_nonadaptive_keyed``."""
    import fvnum
    from fvsym import GaussianPrior

    prior = GaussianPrior.isotropic(2 ** GAUSS_DEPTH - 1)
    out = []
    for N in GAUSS_TOKENS:
        for b in A_BUDGETS:
            r = fvnum.best_nonadaptive_keyed(prior, b, n_tokens=N, samples=1000, seed=0)
            out.append({"N": N, "budget": b, "loss": r.estimate.value, "stderr": r.estimate.stderr})
    return out


def train_all() -> None:
    import torch

    from bridges.training.train import train

    torch.set_num_threads(1)
    for cfg in all_configs():
        r = train(cfg, progress=False)
        print(f"{cfg.key()}: loss {r.loss:.5g} ({r.steps} steps, {r.train_seconds:.0f} s)", flush=True)


def main(argv) -> int:
    commands = {"price": lambda: print(json.dumps(price(), indent=1)), "train": train_all,
                "report": lambda: print(page(report()))}
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: contrast.py {{{','.join(commands)}}}; got {' '.join(argv) or 'nothing'}", file=sys.stderr)
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    commands[argv[0]]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
