"""Training speed of Model T (deep and wide) against Model A at the same cell and budget, measured in one run.

    python benchmarks/bench_transformer.py                       # the T study's cell: depth 7, alpha 0.6, N 64, budget 4
    python benchmarks/bench_transformer.py --budget 2 --threads 2 --repeats 5
    python benchmarks/bench_transformer.py --device cuda          # where a GPU is lent

Each timing is a fresh process running ``bridges.training.train.train`` for ``--steps`` optimisation steps with the
study's configuration (Model T: d_model 64, head_dim 16, mlp_width 128, batch 128, softmax, float32; Model A: its
recipe, batch 128, its precision); the models alternate ``--repeats`` times, so a busy machine slows all of them
alike, and the median steps per second of each is printed with the ratio to A's, beside the step price
(``bridges.prices.cost.step_seconds``) so the price can be checked against the clock.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.prices.cost import step_seconds
from bridges.training.train import train
a = json.loads(sys.argv[1])
data = DataConfig(prior="tree", depth=a["depth"], alpha=a["alpha"], n_tokens=a["tokens"])
if a["model"] == "A":
    model = ModelConfig(model="A", budget=a["budget"])
else:
    model = ModelConfig(model="T", shape=a["model"][2:], budget=a["budget"], d_model=64, head_dim=16, mlp_width=128)
cfg = RunConfig(data, model, TrainConfig(steps=a["steps"], batch=128, warmup=1, eval_every=a["steps"], eval_batches=1,
                                         threads=a["threads"], device=a["device"], out=None))
r = train(cfg, progress=False)
print(json.dumps({"steps_per_s": r.steps_per_s, "priced_steps_per_s": 1 / step_seconds(cfg)}))
"""

MODELS = ("A", "T-deep", "T-wide")


def run_child(args, model: str) -> dict:
    payload = dict(model=model, depth=args.depth, alpha=args.alpha, tokens=args.tokens, budget=args.budget,
                   steps=args.steps, threads=args.threads, device=args.device)
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(payload)], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), **_env()})
    if done.returncode != 0:
        raise SystemExit(f"error: the timing of {model} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--depth", type=int, default=7)
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--budget", type=int, default=4)
    p.add_argument("--steps", type=int, default=150, help="optimisation steps a timing (default 150)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", default=None, metavar="FILE", help="also write the numbers to FILE")
    args = p.parse_args(argv)
    if args.budget < 1 or args.steps < 2 or args.repeats < 1 or args.threads < 1:
        p.error("--budget >= 1, --steps >= 2, --repeats >= 1 and --threads >= 1")
    runs = {m: [] for m in MODELS}
    for _ in range(args.repeats):
        for m in MODELS:
            runs[m].append(run_child(args, m))
    print(f"depth {args.depth}, alpha {args.alpha}, N {args.tokens}, budget {args.budget}, batch 128, "
          f"{args.threads} thread(s), {args.device}; median of {args.repeats} alternating fresh processes")
    base = statistics.median(r["steps_per_s"] for r in runs["A"])
    out = {}
    for m in MODELS:
        rate = statistics.median(r["steps_per_s"] for r in runs[m])
        priced = runs[m][0]["priced_steps_per_s"]
        out[m] = {"steps_per_s": rate, "priced_steps_per_s": priced, "step_time_over_A": base / rate}
        print(f"  {m:7s} {rate:6.2f} steps/s  (priced {priced:6.2f}: clock/price {priced / rate:4.2f})  "
              f"a step costs {base / rate:4.2f}x A's")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
