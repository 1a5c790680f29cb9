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


@pytest.mark.parametrize("damage", ["truncate", "empty", "junk"])
def test_corrupt_or_truncated_checkpoint_is_a_one_line_error(tmp_path, damage):
    cfg = cfg_in(tmp_path, "C", steps=8)
    path = tmp_path / cfg.key() / "checkpoint.pt"
    train(cfg, progress=False, stop_at=5)
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "empty": b"", "junk": b"not a checkpoint " * 20}[damage])
    with pytest.raises(ValueError, match=r"is corrupt or truncated") as info:
        train(cfg, progress=False)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


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
