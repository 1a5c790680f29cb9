"""Model A started from a theory policy distilled into its routers (bridges.distil, TrainConfig.init_policy)."""
import json

import pytest
import torch

from bridges.data import ContextSampler
from bridges.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.distil import DistilConfig, _forced_keys, _relative_errors, distil, teacher_model
from bridges.models import build_model
from bridges.train import evaluate, train

DATA = DataConfig(depth=3, alpha=0.6, n_tokens=64)


def _model(budget: int, seed: int = 0):
    torch.manual_seed(seed)
    return build_model(RunConfig(DATA, ModelConfig("A", budget), TrainConfig(seed=seed)))


def test_path_teacher_is_the_path_policy():
    """The teacher's keys read x at the node of the path decoded from the earlier readings' signs."""
    teacher = teacher_model(DATA, 2)
    x = torch.randn(4, 5, DATA.dim)
    p = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.3, 0.0], [-0.2, 0.0]])
    k2 = teacher.layers[1].keys(x, p)[..., 0]
    nodes = torch.tensor([2, 3, 2, 3])  # n_2 = 2 n_1 + [s_1 < 0]
    assert torch.equal(k2, x[torch.arange(4), :, nodes - 1])


def test_distillation_brings_the_keys_to_the_teacher():
    model = _model(2)
    teacher = teacher_model(DATA, 2)
    sampler = ContextSampler(DATA)
    c = sampler.sample(256, sampler.generator(123, 0, 0))
    x, y = c.x, c.y
    with torch.no_grad():
        before = _relative_errors(*_forced_keys(model, teacher, x, y))
    result = distil(model, DATA, DistilConfig(key_steps=150, readout_steps=20))
    assert len(result.fidelity_forced) == len(result.fidelity_own) == 2
    with torch.no_grad():
        after = _relative_errors(*_forced_keys(model, teacher, x, y))
    # layer 1 reads x_1, a linear function of the token: learned to a small fraction of its variance
    assert after[0] < 0.05 < before[0]
    assert all(a < b for a, b in zip(after, before))
    assert result.fidelity_forced[0] < 0.05
    loss = evaluate(model, sampler, n_batches=2).value
    assert 0 < loss < 1.96  # below E||theta||^2 = 1 + 0.6 + 0.36, the loss of theta_hat = 0


def test_distil_config_refuses_bad_values():
    with pytest.raises(ValueError, match="teacher"):
        DistilConfig(teacher="optimal")
    with pytest.raises(ValueError, match="key_steps"):
        DistilConfig(key_steps=-1)
    with pytest.raises(ValueError, match="lr"):
        DistilConfig(lr=float("nan"))


def test_init_policy_in_the_key_and_checked():
    base = RunConfig(DATA, ModelConfig("A", 2), TrainConfig(steps=10))
    with_policy = RunConfig(DATA, ModelConfig("A", 2), TrainConfig(steps=10, init_policy="path"))
    assert "init_policy" not in base.to_dict()["train"]  # runs without it keep their keys
    assert with_policy.key() != base.key()
    assert RunConfig.from_dict(with_policy.to_dict()) == with_policy
    with pytest.raises(ValueError, match="init_policy"):
        RunConfig(DATA, ModelConfig("B", 2), TrainConfig(init_policy="path"))
    with pytest.raises(ValueError, match="init_policy"):
        TrainConfig(init_policy="rollout")
    with pytest.raises(ValueError, match="tree prior"):
        RunConfig(DataConfig(prior="gaussian", depth=3), ModelConfig("A", 2), TrainConfig(init_policy="path"))


def test_training_starts_from_the_distilled_model(tmp_path, monkeypatch):
    import bridges.distil as D

    monkeypatch.setattr(D, "DistilConfig", lambda **kw: DistilConfig(key_steps=60, readout_steps=30, **kw))
    cfg = RunConfig(DATA, ModelConfig("A", 2), TrainConfig(steps=20, eval_every=10, init_policy="path",
                                                           out=str(tmp_path)))
    result = train(cfg, progress=False)
    stored = json.loads((tmp_path / cfg.key() / "distil.json").read_text())
    assert len(stored["fidelity_own"]) == 2 and stored["config"]["teacher"] == "path"
    fresh = train(RunConfig(DATA, ModelConfig("A", 2), TrainConfig(steps=20, eval_every=10)), progress=False)
    assert result.history[0][2] < fresh.history[0][2]


def test_the_distilled_start_is_checkpointed(tmp_path, monkeypatch):
    """stop_at=0 keeps the distilled model; the resumed run starts from it without distilling again."""
    import bridges.distil as D

    monkeypatch.setattr(D, "DistilConfig", lambda **kw: DistilConfig(key_steps=30, readout_steps=10, **kw))
    cfg = RunConfig(DATA, ModelConfig("A", 2), TrainConfig(steps=10, eval_every=5, init_policy="path",
                                                           out=str(tmp_path)))
    start = train(cfg, progress=False, stop_at=0)
    assert not start.finished and start.steps == 0 and (tmp_path / cfg.key() / "checkpoint.pt").exists()
    monkeypatch.setattr(D, "distil", lambda *a, **k: pytest.fail("distilled again on resume"))
    done = train(cfg, progress=False)
    assert done.finished and done.history[0] == start.history[0]
