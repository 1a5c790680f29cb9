"""Only a checkpoint that itself fails to parse or verify is set aside (issue 56 item 6): any other failure while
reading it propagates and renames nothing; a pickle is refused unread in the project's own line, with no torch
warning; a truncated checkpoint's message ends at a word."""
import errno
import io
import pickle
import warnings

import pytest
import torch

from bridges.training import checkpoint
from bridges.training.checkpoint import DamagedCheckpoint, first_sentence, load_checkpoint, usable_checkpoint
from bridges.training.train import load_result, train
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from tests._cli import fv, one_line


def _cfg(out) -> RunConfig:
    return RunConfig(DataConfig(depth=3), ModelConfig(model="A", budget=2),
                     TrainConfig(steps=4, eval_every=2, eval_batches=1, out=str(out)))


@pytest.fixture
def finished(tmp_path):
    cfg = _cfg(tmp_path)
    train(cfg, progress=False)
    return cfg, tmp_path / cfg.key()


def _names(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("failure", [MemoryError("no memory"), OSError(errno.EIO, "Input/output error"),
                                     KeyboardInterrupt()])
def test_a_failure_that_is_not_the_files_own_renames_nothing(finished, monkeypatch, failure):
    cfg, folder = finished
    names = _names(folder)

    def load(*args, **kw):
        raise failure

    monkeypatch.setattr(checkpoint.torch, "load", load)
    with pytest.raises(type(failure)):
        usable_checkpoint(folder / "checkpoint.pt", cfg)
    with pytest.raises(type(failure)):
        train(cfg, progress=False)  # the finished run: its stored result and checkpoint are read
    assert _names(folder) == names and load_result(folder / "result.json", cfg).finished


def test_a_device_that_fails_after_reading_is_not_damage(finished, monkeypatch):
    cfg, folder = finished
    names = _names(folder)

    def to(self, *args, **kw):
        raise RuntimeError("PyTorch is not linked with support for xla devices")

    monkeypatch.setattr(torch.Tensor, "to", to)
    with pytest.raises(RuntimeError, match="xla"):
        load_checkpoint(folder / "checkpoint.pt", cfg, map_location="xla")
    monkeypatch.undo()
    assert _names(folder) == names


class _Runs:
    def __reduce__(self):
        import os

        return (os.mkdir, ("/tmp/fv-unpickled-a-checkpoint",))


@pytest.mark.parametrize("kind", ["plain", "unsafe", "torch-unsafe", "legacy"])
def test_a_pickle_as_checkpoint_is_refused_unread_in_one_line(finished, kind, recwarn):
    cfg, folder = finished
    path = folder / "checkpoint.pt"
    if kind == "plain":
        path.write_bytes(pickle.dumps({"format": "fv-checkpoint-1", "model": {}}))
    elif kind == "unsafe":
        path.write_bytes(pickle.dumps(_Runs()))
    elif kind == "torch-unsafe":
        torch.save({"format": _Runs()}, path)
    else:
        buffer = io.BytesIO()
        torch.save({"format": "x"}, buffer, _use_new_zipfile_serialization=False)
        path.write_bytes(buffer.getvalue())
    code, _, err = fv("intervene", folder, "--contexts", "2", "--mean-contexts", "2")
    line = one_line(code, err, str(path))
    assert ("is not a torch checkpoint" if kind != "torch-unsafe" else "holds objects other than tensors") in line
    assert "weights_only" not in err and "Warning" not in err and not recwarn.list
    import os

    assert not os.path.exists("/tmp/fv-unpickled-a-checkpoint")


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.99])
def test_a_truncated_checkpoint_is_said_in_whole_words(finished, fraction):
    cfg, folder = finished
    path = folder / "checkpoint.pt"
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * fraction)])
    with pytest.raises(DamagedCheckpoint) as info:
        load_checkpoint(path, cfg)
    message = str(info.value)
    assert message.endswith(")") and "truncated" in message, message
    inner = message[message.index("(") + 1:-1]
    assert inner.split()[-1].rstrip(".") in {"directory", "read", "archive", "..."} or inner.endswith(" ..."), message


def test_first_sentence_cuts_at_a_word():
    exc = RuntimeError("PytorchStreamReader failed reading zip archive: failed finding central directory. This is an "
                       "internal miniz error. If you are seeing this error")
    assert first_sentence(exc) == ("RuntimeError: PytorchStreamReader failed reading zip archive: failed finding "
                                   "central directory")
    long = ValueError("word " * 60)
    said = first_sentence(long, 50)
    assert said.endswith(" ...") and all(w in ("ValueError:", "word", "...") for w in said.split())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert first_sentence(KeyError()) == "KeyError"
