"""Checkpoints: resume equals an uninterrupted run; bad files and other configurations are refused."""
import shutil

import pytest
import torch

from bridges.checkpoint import atomic_write_bytes, load_checkpoint, load_model, restore, save_checkpoint
from bridges.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.models import build_model
from bridges.train import train

torch.set_num_threads(1)


def cfg_in(folder, model="A", **kw):
    t = dict(steps=24, batch=32, lr=1e-2, warmup=4, eval_every=8, eval_batches=1, checkpoint_every=5, out=str(folder))
    t.update(kw)
    return RunConfig(DataConfig(depth=3, n_tokens=16), ModelConfig(model, 2, mlp_width=16), TrainConfig(**t))


def _weights(result):
    return load_checkpoint(result.checkpoint)["model"]


@pytest.mark.parametrize("model", ["A", "C"])
def test_resumed_run_gives_the_same_numbers_as_an_uninterrupted_one(tmp_path, model):
    whole = train(cfg_in(tmp_path / "whole", model), progress=False)
    cfg = cfg_in(tmp_path / "split", model)
    part = train(cfg, progress=False, stop_at=11)  # interrupted between checkpoints and evaluations
    assert not part.finished and part.steps == 11 and load_checkpoint(part.checkpoint, cfg)["step"] == 11
    saved = tmp_path / "step10.pt"
    resumed = train(cfg, progress=False)
    assert resumed.finished and resumed.loss == whole.loss and resumed.stderr == whole.stderr
    assert [r[:4] for r in resumed.history] == [r[:4] for r in whole.history]
    for name, w in _weights(whole).items():
        assert torch.equal(w, _weights(resumed)[name]), name
        assert torch.equal(w, resumed.model.state_dict()[name])
    stored = train(cfg, progress=False)  # finished: the stored result and the stored model come back
    assert stored == resumed and torch.equal(next(stored.model.parameters()), next(resumed.model.parameters()))
    loaded, loaded_cfg, step = load_model(tmp_path / "split" / cfg.key())
    assert loaded_cfg == cfg and step == 24 and not loaded.training
    # losing work after a checkpoint: restart from an older one and finish identically
    part2 = train(cfg_in(tmp_path / "old", model), progress=False, stop_at=10)
    shutil.copy(part2.checkpoint, saved)
    train(cfg_in(tmp_path / "old", model), progress=False, stop_at=13)
    shutil.copy(saved, part2.checkpoint)
    again = train(cfg_in(tmp_path / "old", model), progress=False)
    assert again.loss == whole.loss and [r[:4] for r in again.history] == [r[:4] for r in whole.history]


def test_no_resume_starts_over_and_matches(tmp_path):
    cfg = cfg_in(tmp_path, "B", steps=10)
    first = train(cfg, progress=False, stop_at=6)
    fresh = train(cfg, progress=False, resume=False)
    assert fresh.finished and fresh.steps == 10 and first.steps == 6
    assert fresh.loss == train(cfg_in(tmp_path / "ref", "B", steps=10), progress=False).loss


def _cli_args(folder, model="C", steps=24):  # the command line of cfg_in(folder, model, steps=steps)
    return ["train", "--model", model, "--depth", "3", "--tokens", "16", "--budget", "2", "--mlp-width", "16",
            "--steps", str(steps), "--batch", "32", "--lr", "0.01", "--warmup", "4", "--eval-every", "8",
            "--eval-batches", "1", "--checkpoint-every", "5", "--out", str(folder), "--quiet", "--format", "json"]


def _fv(argv):
    import contextlib
    import io

    from bridges.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    return train(cfg_in(tmp_path_factory.mktemp("whole"), "C"), progress=False)


DAMAGES = [("truncate", f) for f in (0.0, 0.1, 0.5, 0.9, -1)] + [("empty", None), ("junk", None), ("foreign", None)]


@pytest.mark.parametrize("damage, where", DAMAGES, ids=[f"{d}-{w}" for d, w in DAMAGES])
def test_damaged_checkpoint_is_set_aside_and_training_resumes(tmp_path, uninterrupted, damage, where):
    cfg = cfg_in(tmp_path, "C")
    path = tmp_path / cfg.key() / "checkpoint.pt"
    train(cfg, progress=False, stop_at=10)  # checkpoint.pt at step 10, checkpoint.prev.pt at step 5
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) - 1] if where == -1 else data[: int(len(data) * where)])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "junk":
        path.write_bytes(b"not a checkpoint " * 20)
    else:
        torch.save({"weights": torch.ones(2)}, path)
    damaged = path.read_bytes()
    code, out, err = _fv(_cli_args(tmp_path))
    assert code == 0 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert str(path) in line and "set aside as checkpoint.pt.corrupt-1" in line, line
    assert "resuming from checkpoint.prev.pt at step 5" in line, line
    assert (path.parent / "checkpoint.pt.corrupt-1").read_bytes() == damaged  # kept, not deleted
    import json

    assert json.loads(out)["loss"] == uninterrupted.loss  # the same numbers as a run never interrupted


def test_both_checkpoints_damaged_restarts_from_scratch(tmp_path, uninterrupted):
    cfg = cfg_in(tmp_path, "C")
    path = tmp_path / cfg.key() / "checkpoint.pt"
    train(cfg, progress=False, stop_at=10)
    path.write_bytes(b"")
    path.with_name("checkpoint.prev.pt").write_bytes(path.with_name("checkpoint.prev.pt").read_bytes()[:100])
    messages = []
    from bridges.checkpoint import usable_checkpoint

    assert usable_checkpoint(path, cfg, log=messages.append) is None
    (line,) = messages
    assert "checkpoint.pt.corrupt-1" in line and "checkpoint.prev.pt.corrupt-1" in line and "from scratch" in line
    assert train(cfg, progress=False).loss == uninterrupted.loss


def test_finished_run_with_a_damaged_checkpoint_is_recomputed(tmp_path, uninterrupted, capsys):
    cfg = cfg_in(tmp_path, "C")
    folder = tmp_path / cfg.key()
    train(cfg, progress=False)
    (folder / "checkpoint.pt").write_bytes((folder / "checkpoint.pt").read_bytes()[:300])
    again = train(cfg, progress=False)
    assert again.finished and again.loss == uninterrupted.loss
    assert (folder / "result.json.stale-1").exists() and (folder / "checkpoint.pt.corrupt-1").exists()
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    (folder / "result.json").write_text("{not json")  # a damaged result: set aside, the run comes back
    assert train(cfg, progress=False).loss == uninterrupted.loss and (folder / "result.json.corrupt-1").exists()


def test_checkpoint_of_another_configuration_is_refused(tmp_path):
    cfg = cfg_in(tmp_path, "A", steps=5)
    result = train(cfg, progress=False, stop_at=3)
    other = cfg.replace(model=dict(budget=3))
    with pytest.raises(ValueError, match=r"from another configuration \(model.budget: 3 vs 2\)"):
        load_checkpoint(result.checkpoint, other)
    # also through train(): a run folder must hold the run it is named after
    folder = tmp_path / other.key()
    folder.mkdir()
    shutil.copy(result.checkpoint, folder / "checkpoint.pt")
    with pytest.raises(ValueError, match="from another configuration"):
        train(other, progress=False)
    (folder / "config.json").write_text(cfg.to_json())
    with pytest.raises(ValueError, match="belongs to another configuration"):
        train(other, progress=False)


def test_not_a_checkpoint_and_mismatched_weights(tmp_path):
    path = tmp_path / "plain.pt"
    torch.save({"weights": torch.ones(2)}, path)
    with pytest.raises(ValueError, match="is not an fv checkpoint"):
        load_checkpoint(path)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="is empty"):
        load_checkpoint(path)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.pt")
    cfg = cfg_in(tmp_path, "C")
    torch.manual_seed(0)
    model = build_model(cfg)
    save_checkpoint(tmp_path / "c.pt", cfg, step=0, model=model, optimizer=torch.optim.Adam(model.parameters()))
    with pytest.raises(ValueError, match="does not fit this model"):
        restore(load_checkpoint(tmp_path / "c.pt"), build_model(cfg.replace(model=dict(model="B"))))


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "f.bin"
    atomic_write_bytes(path, lambda f: f.write(b"old"))

    def failing(f):
        f.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write_bytes(path, failing)
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["f.bin"]
