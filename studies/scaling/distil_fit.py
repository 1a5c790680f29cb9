"""The keyed teacher at budget 4 (studies/scaling/distil.md): forced key fidelity of the distilled model (the
run keyed-B4-s0 of distil.py) on 512 of its training workspaces against 512 held-out ones.

Command: ``PYTHONPATH=. python studies/scaling/distil_fit.py`` (after ``distil.py --teacher=keyed --budgets=4
--seeds=0``; about 2 minutes for the search on an idle core).
"""
import json, sys, time, torch
from bridges.runs.config import RunConfig
from bridges.training.distil import DistilConfig, KeyedTeacher, _relative_errors, _student_keys, DISTIL_STREAM, HELD_OUT_STREAM
from bridges.training.data import ContextSampler
from bridges.training.checkpoint import load_model
from pathlib import Path
torch.set_num_threads(1)
from bridges.runs.options import script_options
script_options(sys.argv[1:], set())  # no options: a stray word is refused in one line
folder = Path(__file__).resolve().parent / "distil" / "train" / "A-tree-K7-B4-N64-s0-e20c2a2abe"
if not (folder / "config.json").is_file():
    print(f"distil_fit.py: no run at {folder}; run distil.py --teacher=keyed --budgets=4 --seeds=0 first", file=sys.stderr)
    sys.exit(2)
cfg = RunConfig.from_dict(json.loads((folder / "config.json").read_text()))
model, _, _ = load_model(folder, cfg)
t0 = time.perf_counter()
teacher = KeyedTeacher(cfg.data, 4, DistilConfig(teacher="keyed", seed=0))
print("trace", time.perf_counter() - t0, flush=True)
sampler = ContextSampler(cfg.data)
with torch.no_grad():
    for name, stream in (("train", DISTIL_STREAM), ("held", HELD_OUT_STREAM)):
        x, spaces, targets = teacher.batch(sampler, 512, stream, 0)
        print(name, [round(v, 4) for v in _relative_errors(targets, _student_keys(model, x, spaces))], flush=True)
