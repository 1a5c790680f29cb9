"""Issue 23 items 3 and 4: every long command honours --max-seconds with an estimate that is an upper
bound; training past the cap stops with its checkpoint; the lock never follows a symlink; a full disk is
one line; sweeps are checked whole before any work; progress off a terminal has no carriage returns."""
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bridges.cli import main

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]


def fv(*argv):
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue(), time.monotonic() - start


def refused(code, err, *fragments):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


# --- time caps: refused before any work, with the estimate, the cap and the largest size that fits -------
LONG = [
    (10, ["train", "--model", "A", "--depth", "4", "--budget", "3", "--steps", "100000000", "--out", ""], "--steps"),
    (None, ["reproduce", "--depth", "16", "--steps", "5"], "--depth"),
    (60, ["reproduce", "--steps", "1500"], "--depth"),
    (60, ["scaling"], "--steps-per-budget"),
    (60, ["compare", "--grid", "--steps", "1000"], "--steps"),
    (30, ["compare", "--model", "A", "--steps", "5000", "--out", ""], "limit"),
    (5, ["derive", "bellman", "--depth", "5", "--layers", "4", "--alpha", "1/2", "--unroll"], "--layers"),
]


@pytest.mark.parametrize("cap, argv, hint", LONG, ids=[" ".join(a[:3]) for _, a, _ in LONG])
def test_long_commands_are_refused_fast_under_a_cap(tmp_path, cap, argv, hint):
    argv = [a if a != "" else "" for a in argv]
    if argv[0] in ("reproduce", "scaling", "compare") and "--out" not in argv:
        argv += ["--out", tmp_path / "out"]
    code, _, err, seconds = fv(*(["--max-seconds", cap] if cap else []), *argv)
    if argv[:3] == ["reproduce", "--depth", "16"]:  # refused by the memory of its keyed rows before its time
        line = refused(code, err, "of memory, more than the", hint)
    else:
        line = refused(code, err, "would take about", "over the limit of", hint)
    assert not (tmp_path / "out").exists(), line  # nothing started, nothing written


@pytest.mark.slow
def test_training_just_under_the_cap_finishes_within_it(tmp_path):
    """The largest --steps the refusal names runs, and takes less than the cap (the estimate is an upper
    bound); one more step past a smaller cap is refused."""
    argv = ["train", "--model", "A", "--depth", "3", "--budget", "2", "--tokens", "32", "--batch", "32",
            "--eval-batches", "1", "--out", tmp_path, "--quiet", "--format", "json"]
    cap = 15
    code, _, err, _ = fv("--max-seconds", cap, *argv, "--steps", 10**7)
    most = int(re.search(r"largest --steps that fits is (\d+)", refused(code, err)).group(1))
    assert most > 100
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "bridges.cli", "--max-seconds", str(cap), *map(str, argv),
                           "--steps", str(most)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    wall = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["steps"] == most and wall < cap, (wall, cap)
    code, _, err, _ = fv("--max-seconds", cap, *argv, "--steps", most + 1, "--seed", 1)
    refused(code, err, "largest --steps that fits is")


def test_training_past_the_cap_stops_with_its_checkpoint_and_resumes(tmp_path, monkeypatch):
    import bridges.prices.cost

    monkeypatch.setattr(bridges.prices.cost, "train_seconds", lambda cfg, done=0: 1.0)  # an estimate that is wrong
    argv = ["train", "--model", "C", "--depth", "3", "--budget", "2", "--tokens", "16", "--batch", "16",
            "--steps", "1000000", "--checkpoint-every", "100000", "--eval-every", "100000", "--eval-batches", "1",
            "--out", tmp_path, "--quiet"]
    code, _, err, seconds = fv("--max-seconds", 2, *argv)
    line = refused(code, err, "stopped at step", "past the limit of 2 s", "checkpoint is kept")
    assert seconds < 30, line
    (folder,) = tmp_path.iterdir()
    from bridges.training.checkpoint import load_checkpoint

    step = load_checkpoint(folder / "checkpoint.pt")["step"]
    assert 0 < step < 1000000 and f"step {step} of" in line


# --- memory: what the guard accepts fits --------------------------------------------------------------
# VmHWM: this process's own peak (getrusage's ru_maxrss keeps the peak of the forking parent across exec)
_PEAK = ("import re, sys; from bridges.cli import main; code = main(sys.argv[1:]); "
         "kb = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1); "
         "print(int(kb) * 1024, file=sys.stderr); sys.exit(code)")


@pytest.mark.parametrize("argv", [
    ["--depth", "21", "--tau", "0.1", "--strategy", "path", "--samples", "20000", "--threads", "2"],
    pytest.param(["--depth", "14", "--tokens", "128", "--strategy", "path", "--samples", "2000", "--threads", "2"],
                 marks=pytest.mark.slow),
], ids=["path-tau", "path-tokens"])
def test_memory_estimate_bounds_the_peak(argv):
    from fvnum.policies.prices import mc_cost

    proc = subprocess.run([sys.executable, "-c", _PEAK, "mc", *argv, "--format", "json"], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    peak = int(proc.stderr.strip().splitlines()[-1])
    depth, tokens = int(argv[1]), "--tokens" in argv
    estimate = mc_cost(depth=depth, dim=2**depth - 1, budget=3, strategy="path", token_channel=tokens,
                       samples=int(argv[argv.index("--samples") + 1]), threads=2)[0]
    assert peak < estimate < 3 * peak, (peak, estimate)


# --- the lock, a full disk ----------------------------------------------------------------------------
def test_lock_never_follows_a_symlink(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("mine")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / ".fv-lock").symlink_to(target)
    code, _, err, _ = fv("reproduce", "--out", folder, "--quiet")
    refused(code, err, "symbolic link")
    assert target.read_text() == "mine"
    (folder / ".fv-lock").unlink()
    (folder / ".fv-lock").symlink_to(tmp_path / "missing")  # a dangling link is not created through either
    code, _, err, _ = fv("reproduce", "--out", folder, "--quiet")
    refused(code, err, "symbolic link")
    assert not (tmp_path / "missing").exists()


def test_full_disk_during_a_checkpoint_is_one_line_and_keeps_the_previous(tmp_path, monkeypatch):
    import bridges.runs.store as store

    argv = ["train", "--model", "C", "--depth", "3", "--budget", "2", "--tokens", "16", "--batch", "16",
            "--steps", "20", "--checkpoint-every", "5", "--eval-batches", "1", "--out", tmp_path, "--quiet"]
    from bridges.training.train import train
    from bridges.commands import config_from_args
    from bridges.cli import build_parser

    cfg = config_from_args(build_parser().parse_args([str(a) for a in argv]))
    train(cfg, progress=False, stop_at=10)
    path = tmp_path / cfg.key() / "checkpoint.pt"
    before = path.read_bytes()

    from tests._cli import FullDisk as Full

    real = store._open_tmp
    monkeypatch.setattr(store, "_open_tmp", lambda fd, p: Full(fd) if p.name == "checkpoint.pt" else real(fd, p))
    code, _, err, _ = fv(*argv)
    refused(code, err, "no space left", "checkpoint.pt", "previous file is kept")
    assert path.read_bytes() == before and not list(path.parent.glob(".*.tmp"))


# --- sweeps: checked whole before any work ------------------------------------------------------------
def _spec(tmp_path, text):
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("command", ["mc", "train"])
def test_sweep_refuses_a_run_time_value_naming_the_spec_key(tmp_path, command):
    base = 'tau = 0.1\nsamples = 500' if command == "mc" else 'model = "A"\nsteps = 5'
    spec = _spec(tmp_path, f'command = "{command}"\n[base]\ndepth = 3\n{base}\n[grid]\nbudget = [1, 2, 9]\n')
    code, _, err, _ = fv("sweep", spec, "--out", tmp_path / "out", "--quiet")
    refused(code, err, "spec grid.budget = 9")
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written


def test_sweep_refuses_sizes_over_a_guard_and_over_the_cap(tmp_path):
    spec = _spec(tmp_path, 'command = "mc"\n[base]\ntau = 0.1\nstrategy = "path"\nbudget = 3\n'
                           '[grid]\ndepth = [4, 30]\n')
    code, _, err, _ = fv("sweep", spec, "--out", tmp_path / "out", "--quiet")
    refused(code, err, "spec grid.depth = 30", "memory")
    spec = _spec(tmp_path, 'command = "train"\n[base]\nmodel = "A"\ndepth = 4\nsteps = 3000\n'
                           '[grid]\nseed = [0, 1]\n')
    code, _, err, _ = fv("--max-seconds", 60, "sweep", spec, "--out", tmp_path / "out", "--quiet")
    refused(code, err, "spec cell seed=0", "over the limit of 60 s", "largest --steps that fits")
    spec = _spec(tmp_path, 'command = "train"\n[base]\nmodel = "A"\ndepth = 4\nsteps = 200\n'
                           '[grid]\nseed = [0, 1, 2, 3, 4, 5, 6, 7]\n')  # each cell fits, all of them do not
    code, _, err, _ = fv("--max-seconds", 60, "sweep", spec, "--out", tmp_path / "out", "--quiet")
    refused(code, err, "fv sweep of 8 cells", "over the limit of 60 s")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("n_keys, count", [(6, "1,000,000"), (10, "10,000,000,000")])
def test_sweep_refuses_a_huge_grid_quickly(tmp_path, n_keys, count):
    names = ["seed", "samples", "budget", "alpha", "depth", "s2", "tau", "threads", "design", "strategy"]
    grid = "\n".join(f"{n} = {list(range(2, 12))}" for n in names[:n_keys])
    spec = _spec(tmp_path, f'command = "mc"\n[grid]\n{grid}\n')
    code, _, err, seconds = fv("sweep", spec, "--out", tmp_path / "out", "--quiet")
    refused(code, err, f"{count} cells")
    assert seconds < 10


# --- compare --grid options, device in the cell key, progress off a terminal ----------------------------
def test_compare_grid_honours_model_and_refuses_one_run_options(tmp_path):
    from bridges.studies.reproduce import ReproduceConfig, grid

    assert {r.model.model for r in grid(ReproduceConfig(models="A", full=True), "x")} == {"A"}
    code, _, err, _ = fv("compare", "--grid", "--depth", "3", "--out", tmp_path)
    refused(code, err, "--depth")


def test_device_enters_the_cell_key():
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from bridges.studies.reproduce import _cell_key

    cpu = RunConfig(DataConfig(), ModelConfig("A", 3), TrainConfig(device="cpu"))
    assert _cell_key("compare", cpu) != _cell_key("compare", cpu.replace(train=dict(device="cuda")))
    assert _cell_key("compare", cpu) == _cell_key("compare", cpu.replace(train=dict(threads=2)))


def test_progress_off_a_terminal_has_no_carriage_returns(tmp_path, capsys):
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from bridges.progress import progress_bar
    from bridges.training.train import train

    cfg = RunConfig(DataConfig(depth=2, n_tokens=8), ModelConfig("C", 1), TrainConfig(steps=30, batch=8, eval_batches=1))
    train(cfg, progress=True)
    assert "\r" not in capsys.readouterr().err
    buf = io.StringIO()
    with progress_bar(total=3, desc="cells", unit="cell", file=buf, interval=0) as bar:
        for _ in range(3):
            bar.update(1)
    lines = buf.getvalue().splitlines()
    assert "\r" not in buf.getvalue() and lines[-1].startswith("cells: 3/3 cells")


def test_the_keyed_rows_are_priced_once_per_data_configuration():
    """A study's price counts the keyed rows (``fvnum.guards.limits.keyed_cost``) only where a key family is asked for,
    once per data configuration, and grows with the samples, the budgets and the tree (its constants are
    measured in docs/benchmarks/2026-12-02-keyed.md; a timed test would measure the machine's load)."""
    import dataclasses

    from bridges.runs.config import DataConfig
    from bridges.prices.cost import keyed_seconds, scaling_seconds
    from bridges.studies.scaling import ScalingConfig

    cfg = ScalingConfig(out="unused", depth=4, budgets=(1, 2), models="C", seeds=1, samples=500, search_samples=200)
    extra = scaling_seconds(cfg, train=False) - scaling_seconds(dataclasses.replace(cfg, keyed=None), train=False)
    assert extra == pytest.approx(keyed_seconds(cfg.data(), [1, 2], 200, "weighted")) and extra > 0
    assert keyed_seconds(cfg.data(), [1, 2], 200, "none") == keyed_seconds(cfg.data(), [1, 2], 200, None) == 0.0
    small = keyed_seconds(DataConfig(depth=4), [1, 2], 200, "weighted")
    assert small < keyed_seconds(DataConfig(depth=4), [1, 2], 400, "weighted")
    assert small < keyed_seconds(DataConfig(depth=4), [1, 2, 3], 200, "weighted")
    assert small < keyed_seconds(DataConfig(depth=5), [1, 2], 200, "weighted")
    gaussian = DataConfig(prior="gaussian", depth=4)
    assert 0 < keyed_seconds(gaussian, [2], 200, "weighted") < keyed_seconds(gaussian, [3], 200, "weighted")


# --- issue 32: the memory of training counts the weights, their gradients and Adam's moments -------------------
@pytest.mark.parametrize("opts", [dict(model="A"), dict(model="A", hidden_layers=3, mlp_width=20, readout="generic"),
                                  dict(model="B", depth=3, budget=4), dict(model="C", depth=5, budget=3),
                                  dict(model="B", hidden_layers=1, mlp_width=7, readout="decode")])
def test_n_parameters_counts_the_model_built(opts):
    from bridges.runs.config import RunConfig
    from bridges.prices.memory import n_parameters, train_bytes
    from bridges.models.networks import build_model

    cfg = RunConfig.from_options(opts)
    assert n_parameters(cfg) == sum(p.numel() for p in build_model(cfg).parameters())
    assert train_bytes(cfg) >= 16 * n_parameters(cfg) and cfg.memory_bytes() == train_bytes(cfg)


def test_weights_that_do_not_fit_are_refused_naming_the_width_that_fits():
    """``fv train --mlp-width 30000`` (3.6e9 parameters: 58 GB with gradients and Adam's moments) is refused
    before torch allocates anything, naming the largest --mlp-width whose training fits."""
    from bridges.runs.config import RunConfig
    from bridges.prices.memory import train_bytes
    from fvsym.guards.limits import fits_memory

    code, _, err, seconds = fv("train", "--model", "A", "--mlp-width", "30000", "--tokens", "32", "--out", "")
    line = refused(code, err, "parameters", "largest --mlp-width that fits is")
    width = int(line.split("largest --mlp-width that fits is ")[1].split()[0])
    cfg = RunConfig.from_options(dict(model="A", mlp_width=30000, tokens=32))
    assert fits_memory(train_bytes(cfg.replace(model=dict(mlp_width=width))))
    assert not fits_memory(train_bytes(cfg.replace(model=dict(mlp_width=2 * width))))
