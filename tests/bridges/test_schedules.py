"""Training schedules of the batch (``TrainConfig.tokens_from``, a noise curriculum, large N first;
``TrainConfig.batch_late``, larger batches late): keys unchanged when off, the schedule's tokens and batch
sizes step by step, the batches training really draws, their price and memory, and bad values in one line."""
import math

import pytest

from bridges.training import data as data_module
from bridges.runs.config import CURRICULUM_FRACTION, LATE_FRACTION, DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.prices.cost import mean_load, step_seconds, train_seconds
from bridges.training.train import train
from bridges.prices.memory import activation_bytes
from tests._cli import fv

DATA = DataConfig(prior="tree", depth=3, n_tokens=8)


def _config(steps=8, batch=4, **train):
    return RunConfig(DATA, ModelConfig(model="A", budget=2, mlp_width=8, hidden_layers=1),
                     TrainConfig(steps=steps, batch=batch, eval_every=steps, eval_batches=1, out=None, **train))


def test_keys_and_dictionaries_unchanged_when_off():
    plain = _config()
    off = _config(tokens_from=0, batch_late=0)
    assert off.key() == plain.key() and off.to_dict() == plain.to_dict()
    assert "tokens_from" not in plain.to_dict()["train"] and "batch_late" not in plain.to_dict()["train"]
    on = _config(tokens_from=64, batch_late=16)
    assert on.key() != plain.key() and on.to_dict()["train"]["tokens_from"] == 64
    assert RunConfig.from_json(on.to_json()) == on
    assert RunConfig.from_json(plain.to_json()).train.tokens_from == 0


def test_the_curriculum_falls_geometrically_to_n_and_stays_there():
    t = _config(steps=1000, tokens_from=512).train
    ramp = int(CURRICULUM_FRACTION * 1000)
    tokens = [t.tokens_at(s, 8) for s in range(1000)]
    assert tokens[0] == 512 and all(n == 8 for n in tokens[ramp:])
    assert all(a >= b for a, b in zip(tokens, tokens[1:]))  # never rises
    half = ramp // 2  # halfway down the ramp: the geometric mean of N0 and N
    assert tokens[half] == round(math.sqrt(512 * 8))
    assert [t.batch_at(s) for s in (0, 999)] == [4, 4]


def test_larger_batches_start_late():
    t = _config(steps=10, batch=4, batch_late=32).train
    late = math.ceil(LATE_FRACTION * 10)
    assert [t.batch_at(s) for s in range(10)] == [4] * late + [32] * (10 - late)
    assert all(t.tokens_at(s, 8) == 8 for s in range(10))


def test_training_draws_the_scheduled_batches(monkeypatch):
    drawn = []
    sample = data_module.ContextSampler.sample

    def spy(self, n, generator, n_tokens=None):
        c = sample(self, n, generator, n_tokens)
        drawn.append(tuple(c.x.shape[:2]))
        return c

    monkeypatch.setattr(data_module.ContextSampler, "sample", spy)
    cfg = _config(steps=8, batch=4, tokens_from=32, batch_late=6)
    result = train(cfg, progress=False)
    assert math.isfinite(result.loss)
    t = cfg.train
    want = [(t.batch_at(s), t.tokens_at(s, 8)) for s in range(8)]
    train_batches = [shape for shape in drawn if shape[0] != 256]  # held-out batches: 256 contexts of N tokens
    assert train_batches == want and want[0] == (4, 32) and want[-1] == (6, 8)
    assert all(shape == (256, 8) for shape in drawn if shape[0] == 256)


def test_the_price_and_the_memory_follow_the_schedule():
    plain, curriculum = _config(steps=1000), _config(steps=1000, tokens_from=64)
    late = _config(steps=1000, batch_late=16)
    tokens, contexts = mean_load(curriculum)
    ramp_mean = sum(curriculum.train.tokens_at(s, 8) for s in range(1000)) / 1000
    assert math.isclose(tokens, 4 * ramp_mean) and contexts == 4
    assert mean_load(late) == (8 * (500 * 4 + 500 * 16) / 1000, (500 * 4 + 500 * 16) / 1000)
    assert mean_load(plain) is None and mean_load(late, done=1000) is None
    assert step_seconds(curriculum, mean_load(curriculum)) > step_seconds(plain)
    assert train_seconds(late) > train_seconds(plain) and train_seconds(curriculum) > train_seconds(plain)
    assert activation_bytes(curriculum) == 8 * activation_bytes(plain)  # the first batch: 64 tokens, not 8
    assert activation_bytes(late) == 4 * activation_bytes(plain)


BASE = ("train", "--prior", "tree", "--depth", "3", "--tokens", "8", "--model", "A", "--budget", "2",
        "--mlp-width", "8", "--hidden-layers", "1", "--steps", "1", "--out", "")


@pytest.mark.parametrize("flag, value, says", [
    ("--tokens-from", "8", "above the data's N = 8"),
    ("--tokens-from", "4", "got 4"),
    ("--tokens-from", "-1", ">= 0"),
    ("--tokens-from", "1.5", "integer"),
    ("--batch-late", "-2", ">= 0"),
    ("--batch-late", "many", "integer"),
])
def test_bad_schedules_get_one_line(flag, value, says):
    code, _, err = fv(*BASE, flag, value)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err and says in lines[0], err
    assert flag.lstrip("-").split("-")[0] in lines[0]


@pytest.mark.parametrize("flag, names", [("--tokens-from", "--tokens-from N0"), ("--batch-late", "--batch-late NB")])
def test_a_schedule_over_the_memory_is_refused_naming_its_own_option(flag, names):
    """Only the schedule's largest batch is too large: the refusal says so and names the largest N0 / NB that fits."""
    code, _, err = fv(*BASE, flag, str(10**12))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "schedule's largest batch" in lines[0] and f"the largest {names} that fits is" in lines[0], err
