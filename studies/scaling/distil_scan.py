"""The keyed teacher at budget 4 (studies/scaling/distil.md): the key regression alone (no readout) at the
study cell, seed 0, for MLP widths and regression steps; forced key fidelity on training and held-out trace
workspaces.

Command: ``PYTHONPATH=. python studies/scaling/distil_scan.py`` (the search, then three regressions; tens of
minutes on a loaded 2-core machine).
"""
import math, sys, time, torch
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.distil import DistilConfig, KeyedTeacher, _relative_errors, _student_keys, DISTIL_STREAM, HELD_OUT_STREAM
from bridges.training.data import ContextSampler
from bridges.models.networks import build_model
from bridges.runs.options import script_options
script_options(sys.argv[1:], set())  # no options: a stray word is refused in one line
torch.set_num_threads(1)
DATA = DataConfig(prior="tree", depth=7, alpha=0.6, n_tokens=64, s2=0.01)
t0 = time.perf_counter()
teacher = KeyedTeacher(DATA, 4, DistilConfig(teacher="keyed", seed=0))
print("trace", round(time.perf_counter() - t0), flush=True)
sampler = ContextSampler(DATA)
for width, steps in ((64, 4000), (256, 4000), (64, 16000)):
    torch.manual_seed(0)
    model = build_model(RunConfig(DATA, ModelConfig("A", 4, mlp_width=width, hidden_layers=2), TrainConfig(seed=0)))
    params = [p for layer in model.layers for p in layer.keys.parameters()]
    opt = torch.optim.Adam(params, lr=3e-3)
    t0 = time.perf_counter()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = 3e-3 * 0.5 * (1 + math.cos(math.pi * step / steps))
        x, spaces, targets = teacher.batch(sampler, 64, DISTIL_STREAM, step)
        loss = sum(((s - t) ** 2).mean() for t, s in zip(targets, _student_keys(model, x, spaces)))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    out = {}
    with torch.no_grad():
        for name, stream in (("train", DISTIL_STREAM), ("held", HELD_OUT_STREAM)):
            x, spaces, targets = teacher.batch(sampler, 512, stream, 0)
            out[name] = [round(v, 3) for v in _relative_errors(targets, _student_keys(model, x, spaces))]
    print(f"width {width} steps {steps}: {out} ({time.perf_counter() - t0:.0f} s)", flush=True)
