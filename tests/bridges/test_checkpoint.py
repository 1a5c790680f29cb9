"""Checkpoints: resume equals an uninterrupted run; bad files and other configurations are refused."""
import shutil

import pytest
import torch

from bridges.training.checkpoint import atomic_write_bytes, load_checkpoint, load_model, restore, save_checkpoint
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.models.networks import build_model
from bridges.training.train import train

torch.set_num_threads(1)


def cfg_in(folder, model="A", **kw):
    t = dict(steps=24, batch=32, lr=1e-2, warmup=4, eval_every=8, eval_batches=1, checkpoint_every=5, out=str(folder))
    t.update(kw)
    return RunConfig(DataConfig(depth=3, n_tokens=16), ModelConfig(model, 2, mlp_width=16), TrainConfig(**t))


def _weights(result):
    return load_checkpoint(result.checkpoint)["model"]


@pytest.mark.heavy
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
    from bridges.training.checkpoint import usable_checkpoint

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


# --- issue 32: damaged results and checkpoints of finished runs -------------------------------------------------
def _edit_result(path, **changes):
    """Rewrite ``result.json`` with ``changes`` (the checksum kept as it was: a hand edit), as raw JSON text
    (``NaN`` written as the bare token Python's json writes)."""
    import json

    record = json.loads(path.read_text())
    record.update(changes)
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("change", [dict(loss=float("nan")), dict(loss=-5.0), dict(loss="abc"), dict(loss=None),
                                    dict(key="A-tree-K3-B2-N16-s0-0123456789"), dict(checksum=None), dict(history=[]),
                                    dict(stderr=float("inf"))],
                         ids=["nan", "negative", "string", "null", "another-key", "no-checksum", "no-history", "inf"])
def test_damaged_result_json_is_set_aside_and_the_run_resumed(tmp_path, uninterrupted, change):
    """A finished run's result.json is checked like a cell: a loss that is NaN, negative or not a number, another
    run's key, a missing checksum: set aside (one line) and the run resumed from its final checkpoint, the same
    numbers coming back (before: NaN and -5.0 were returned as the result, "abc" failed to format)."""
    import json

    cfg = cfg_in(tmp_path, "C")
    folder = tmp_path / cfg.key()
    train(cfg, progress=False)
    if change.get("checksum", 0) is None:
        record = json.loads((folder / "result.json").read_text())
        del record["checksum"]
        (folder / "result.json").write_text(json.dumps(record))
    else:
        _edit_result(folder / "result.json", **change)
    damaged = (folder / "result.json").read_text()
    code, out, err = _fv(_cli_args(tmp_path))
    assert code == 0 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert "result.json" in line and "set aside as result.json.corrupt-1" in line, line
    assert json.loads(out)["loss"] == uninterrupted.loss
    assert (folder / "result.json.corrupt-1").read_text() == damaged
    stored = json.loads((folder / "result.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert stored["loss"] == uninterrupted.loss and "checksum" in stored


def test_result_json_is_strict_json_with_a_checksum(tmp_path):
    import json

    from bridges.runs.store import verify_checksum

    cfg = cfg_in(tmp_path, "C", steps=6)
    train(cfg, progress=False)
    text = (tmp_path / cfg.key() / "result.json").read_text()
    record = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in result.json"))
    assert record["key"] == cfg.key() and verify_checksum(record, cfg.key())


def test_result_of_another_run_is_not_taken(tmp_path, uninterrupted):
    """A whole, checksummed result.json copied from another run folder is not this run's result."""
    cfg = cfg_in(tmp_path, "C")
    other = cfg_in(tmp_path, "C", seed=7, steps=6)
    train(other, progress=False)
    train(cfg, progress=False)
    shutil.copy(tmp_path / other.key() / "result.json", tmp_path / cfg.key() / "result.json")
    code, out, err = _fv(_cli_args(tmp_path))
    assert code == 0 and len(err.strip().splitlines()) == 1 and "another configuration" in err, err
    import json

    assert json.loads(out)["loss"] == uninterrupted.loss


def test_finished_run_with_a_checkpoint_of_the_wrong_shape_is_recomputed(tmp_path, uninterrupted):
    """docs: a checkpoint whose weights do not fit its model is set aside, not refused (before: 'does not fit
    its model', exit 2)."""
    cfg = cfg_in(tmp_path, "C")
    path = tmp_path / cfg.key() / "checkpoint.pt"
    train(cfg, progress=False)
    ck = torch.load(path, weights_only=True)
    name = next(iter(ck["model"]))
    ck["model"][name] = torch.zeros(3, 3, 3)
    torch.save(ck, path)
    code, out, err = _fv(_cli_args(tmp_path))
    assert code == 0 and "Traceback" not in err, err
    assert "set aside as checkpoint.pt.corrupt-1" in err and len(err.strip().splitlines()) == 1, err
    import json

    assert json.loads(out)["loss"] == uninterrupted.loss
    assert (path.parent / "result.json.stale-1").exists()


def test_finished_run_with_non_finite_weights_is_recomputed(tmp_path, uninterrupted):
    cfg = cfg_in(tmp_path, "C")
    path = tmp_path / cfg.key() / "checkpoint.pt"
    train(cfg, progress=False)
    ck = torch.load(path, weights_only=True)
    name = next(k for k, v in ck["model"].items() if v.is_floating_point())
    ck["model"][name] = torch.full_like(ck["model"][name], float("nan"))
    torch.save(ck, path)
    code, out, err = _fv(_cli_args(tmp_path))
    assert code == 0 and "not finite" in err and "corrupt-1" in err, err
    import json

    assert json.loads(out)["loss"] == uninterrupted.loss


def test_weights_that_become_nan_never_make_a_finished_run(tmp_path, monkeypatch):
    """The loss of the last step is finite, the step after it leaves NaN weights: one line, exit 2, no
    result.json, and the checkpoint before is kept (before: written as finished)."""
    import bridges.training.train as train_module

    real = train_module._adam

    def poisoned(model, lr, device):
        opt = real(model, lr, device)
        step = opt.step
        calls = []

        def step_then_nan(*a, **kw):
            out = step(*a, **kw)
            calls.append(1)
            if len(calls) == 24:  # the last step of cfg_in
                with torch.no_grad():
                    next(model.parameters()).fill_(float("nan"))
            return out

        opt.step = step_then_nan
        return opt

    monkeypatch.setattr(train_module, "_adam", poisoned)
    cfg = cfg_in(tmp_path, "C")
    code, out, err = _fv(_cli_args(tmp_path))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "NaN or infinite" in err and "not saved" in err
    folder = tmp_path / cfg.key()
    assert not (folder / "result.json").exists()
    assert load_checkpoint(folder / "checkpoint.pt", cfg)["step"] == 20  # the last good checkpoint is kept


def test_no_result_from_a_model_whose_weights_became_nan_without_a_folder(monkeypatch):
    import bridges.training.train as train_module

    real = train_module._adam

    def poisoned(model, lr, device):
        opt = real(model, lr, device)
        step = opt.step

        def step_then_nan(*a, **kw):
            out = step(*a, **kw)
            with torch.no_grad():
                next(model.parameters()).fill_(float("nan"))
            return out

        opt.step = step_then_nan
        return opt

    monkeypatch.setattr(train_module, "_adam", poisoned)
    with pytest.raises(ValueError, match="NaN or infinite") as info:
        train(cfg_in(None, "C", steps=1, out=None), progress=False)
    assert "\n" not in str(info.value)


def test_damaged_rng_state_falls_back_to_the_previous_checkpoint(tmp_path, uninterrupted):
    """An unfinished run whose checkpoint holds an RNG state torch refuses resumes from checkpoint.prev.pt
    (before: a RuntimeError traceback from torch.set_rng_state)."""
    cfg = cfg_in(tmp_path, "C")
    path = tmp_path / cfg.key() / "checkpoint.pt"
    train(cfg, progress=False, stop_at=10)
    ck = torch.load(path, weights_only=True)
    ck["rng"] = torch.zeros(7, dtype=torch.uint8)
    torch.save(ck, path)
    code, out, err = _fv(_cli_args(tmp_path))
    assert code == 0 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert "random-number state" in line and "resuming from checkpoint.prev.pt at step 5" in line, line
    import json

    assert json.loads(out)["loss"] == uninterrupted.loss


@pytest.mark.parametrize("name", ["checkpoint.pt", "result.json"])
def test_a_folder_where_a_file_should_be_is_set_aside(tmp_path, uninterrupted, name):
    """A finished run whose checkpoint.pt (or result.json) is a folder: set aside in one line and the run
    finished again from checkpoint.prev.pt with the same numbers (before: result.json renamed, then an error)."""
    import json

    cfg = cfg_in(tmp_path, "C")
    folder = tmp_path / cfg.key()
    train(cfg, progress=False)
    good = json.loads((folder / "result.json").read_text())
    (folder / name).unlink()
    (folder / name).mkdir()
    (folder / name / "inside.txt").write_text("kept")
    code, out, err = _fv(_cli_args(tmp_path))
    assert code == 0 and "Traceback" not in err, err
    assert json.loads(out)["loss"] == uninterrupted.loss == good["loss"]
    assert (folder / f"{name}.corrupt-1" / "inside.txt").read_text() == "kept"
    again = json.loads((folder / "result.json").read_text())
    assert again["loss"] == good["loss"] and [r[:4] for r in again["history"]] == [r[:4] for r in good["history"]]
