"""Training speed of Models A, B, C against the machine's matmul rates, measured in one run.

    python benchmarks/bench_train.py                          # depth 6, budget 4, batch 256, N 128, 2 threads
    python benchmarks/bench_train.py --baseline ../base       # also time a checkout of an earlier commit
    python benchmarks/bench_train.py --device cuda --threads 16

For each model it prints training steps per second (``train()``'s own clock: optimisation steps only,
fresh contexts every step, as in a real run), the multiply-adds of one step counted from the shapes
(forward x 3 for forward and backward), and the fraction of the machine's float32 and bfloat16 matmul
rates (square 2048 matmuls, measured in the same run) that this reaches. Every timing runs in a fresh
process; with ``--baseline DIR`` (a ``git worktree`` of an earlier commit) the two implementations
alternate, ``--repeats`` times, and the median ratio is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, dataclasses
import torch
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.train import train
a = json.loads(sys.argv[1])
fields = {f.name for f in dataclasses.fields(TrainConfig)}
tc = dict(steps=a["steps"], batch=a["batch"], lr=a["lr"], loss=a["loss"], warmup=min(200, a["steps"] // 10 + 1),
          eval_every=a["steps"], eval_batches=16 if a["steps"] >= 1000 else 1,
          threads=a["threads"], device=a["device"], seed=a["seed"])
if a["precision"] and "precision" in fields:
    tc["precision"] = a["precision"]
mfields = {f.name for f in dataclasses.fields(ModelConfig)}
mk = dict(model=a["model"], budget=a["budget"], hidden_layers=a["hidden_layers"])
mk["mlp_width" if "mlp_width" in mfields else "width"] = a["mlp_width"]
cfg = RunConfig(DataConfig(depth=a["depth"], n_tokens=a["tokens"]), ModelConfig(**mk), TrainConfig(**tc))
r = train(cfg, progress=False)
prec = getattr(r, "precision", "fp32")
print(json.dumps({"steps_per_s": r.steps_per_s, "loss": r.loss, "stderr": r.stderr, "precision": prec}))
"""


def run_child(src: Path, args, model: str, *, steps: int, seed: int = 0, lr: float = 1e-3, loss: str = "query") -> dict:
    payload = dict(model=model, steps=steps, batch=args.batch, lr=lr, loss=loss, threads=args.threads, device=args.device,
                   seed=seed, precision=args.precision, budget=args.budget, depth=args.depth, tokens=args.tokens,
                   hidden_layers=args.hidden_layers, mlp_width=args.mlp_width)
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS=str(args.threads))
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(payload)], cwd=src, env=env, capture_output=True,
                         text=True)
    if out.returncode:
        raise SystemExit(f"timing in {src} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def step_macs(model: str, args) -> int:
    """Multiply-adds of one training step (forward x 3), counted from the shapes of THEORY.md section 7."""
    D, B, N, w, h, batch = 2**args.depth - 1, args.budget, args.tokens, args.mlp_width, args.hidden_layers, args.batch
    if model == "C":
        forward = N * D * B + N * B + D * B  # keys W x_i, aggregation, bilinear readout
    else:
        L, d = (B, 1) if model == "A" else (1, B)
        per_token = D * w + (h - 1) * w * w + w * d + d  # key MLP on one token, and its share of phi
        per_context = B * w  # the broadcast workspace part of each layer's first key layer
        readout = B * w + (h - 1) * w * w + w * D
        forward = L * (N * per_token + per_context) + readout
    return 3 * forward * batch


def matmul_rate(dtype_name: str, device: str, threads: int, n: int = 2048) -> float:
    import torch

    torch.set_num_threads(threads)
    dtype = getattr(torch, {"fp32": "float32", "bf16": "bfloat16"}[dtype_name])
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    a @ b
    sync()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(4):
            a @ b
        sync()
        best = min(best, (time.perf_counter() - t) / 4)
    return 2 * n**3 / best  # FLOP/s


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--budget", type=int, default=4)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--mlp-width", type=int, default=64)
    p.add_argument("--hidden-layers", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="auto", help="auto | bf16 | fp32 (the current implementation)")
    p.add_argument("--models", default="ABC", help="models to time, e.g. A, BC or B,C (default ABC)")
    p.add_argument("--steps", type=int, default=0, help="steps per timing (default: A 300, B 600, C 1000; the first steps set up kernels)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--baseline", default=None, metavar="DIR", help="checkout of an earlier commit to time too")
    p.add_argument("--loss-steps", type=int, default=0,
                   help="also train Model A this many steps (lr 3e-3, theta loss) with each implementation and "
                   "print the held-out losses, to check that speed did not change what is learned")
    p.add_argument("--loss-seeds", type=int, default=2, help="seeds for --loss-steps (default 2)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the numbers to FILE")
    args = p.parse_args(argv)
    args.models = args.models.replace(",", "").upper()
    if not args.models or set(args.models) - set("ABC"):
        p.error(f"--models takes letters of A, B, C, got {args.models!r}")

    import torch

    rates = {name: matmul_rate(name, args.device, args.threads) for name in ("fp32", "bf16")}
    device_name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"
    print(f"device {args.device} ({device_name}), {args.threads} threads, torch {torch.__version__}")
    print(f"matmul rates (2048^3): fp32 {rates['fp32'] / 1e9:.0f} GFLOP/s, bf16 {rates['bf16'] / 1e9:.0f} GFLOP/s")
    print(f"depth {args.depth}, budget {args.budget}, batch {args.batch}, N {args.tokens}, "
          f"mlp_width {args.mlp_width}, {args.hidden_layers} hidden layers")
    default_steps = {"A": 300, "B": 600, "C": 1000}
    impls = [("current", ROOT)] + ([("baseline", Path(args.baseline).resolve())] if args.baseline else [])
    rows = []
    for model in args.models:
        steps = args.steps or default_steps[model]
        runs = {name: [] for name, _ in impls}
        for _ in range(args.repeats):
            for name, src in impls:
                runs[name].append(run_child(src, args, model, steps=steps))
        macs = step_macs(model, args)
        row = {"model": model, "macs_per_step": macs}
        for name, _ in impls:
            rate = statistics.median(r["steps_per_s"] for r in runs[name])
            row[name] = {"steps_per_s": rate, "precision": runs[name][0]["precision"],
                         "all": [r["steps_per_s"] for r in runs[name]],
                         "frac_fp32": 2 * macs * rate / rates["fp32"], "frac_bf16": 2 * macs * rate / rates["bf16"]}
        if args.baseline:
            row["speedup"] = statistics.median(
                c["steps_per_s"] / b["steps_per_s"] for c, b in zip(runs["current"], runs["baseline"]))
        rows.append(row)
        for name, _ in impls:
            r = row[name]
            print(f"model {model} {name:8s} {r['precision']}: {r['steps_per_s']:7.1f} steps/s  "
                  f"({macs / 1e9:.2f} GMAC/step; {100 * r['frac_fp32']:.0f}% of fp32 peak, "
                  f"{100 * r['frac_bf16']:.0f}% of bf16 peak)")
        if args.baseline:
            print(f"model {model} speed-up current/baseline: {row['speedup']:.2f}x (median of {args.repeats} paired runs)")
    losses = {}
    if args.loss_steps:
        for name, src in impls:
            losses[name] = [run_child(src, args, "A", steps=args.loss_steps, seed=s, lr=3e-3, loss="theta")
                            for s in range(args.loss_seeds)]
            vals = ", ".join(f"{r['loss']:.4f} +- {r['stderr']:.1g}" for r in losses[name])
            print(f"model A {name:8s} held-out loss after {args.loss_steps} steps, seeds 0..{args.loss_seeds - 1}: {vals}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "device_name": device_name,
                                               "threads": args.threads, "rates": rates, "rows": rows,
                                               "losses": losses}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
