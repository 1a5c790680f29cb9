"""Model A started from a theory policy distilled into its routers (bridges.training.distil, TrainConfig.init_policy)."""
import json

import pytest
import torch

from bridges.training.data import ContextSampler
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.distil import (DistilConfig, KeyedTeacher, PathTeacher, _relative_errors, _student_keys, distil,
                            teacher_model)
from bridges.models.networks import build_model
from bridges.training.train import evaluate, train

DATA = DataConfig(depth=3, alpha=0.6, n_tokens=64)


def _model(budget: int, seed: int = 0, data: DataConfig = DATA):
    torch.manual_seed(seed)
    return build_model(RunConfig(data, ModelConfig("A", budget), TrainConfig(seed=seed)))


def test_path_teacher_is_the_path_policy():
    """The teacher's keys read x at the node of the path decoded from the earlier readings' signs."""
    teacher = teacher_model(DATA, 2)
    x = torch.randn(4, 5, DATA.dim)
    p = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.3, 0.0], [-0.2, 0.0]])
    k2 = teacher.layers[1].keys(x, p)[..., 0]
    nodes = torch.tensor([2, 3, 2, 3])  # n_2 = 2 n_1 + [s_1 < 0]
    assert torch.equal(k2, x[torch.arange(4), :, nodes - 1])


def _forced(model, teacher, sampler, stream=0):
    """Relative key errors of ``model`` on the teacher's workspaces (a fixed batch of its data)."""
    with torch.no_grad():
        x, spaces, targets = teacher.batch(sampler, 256, stream, 123)
        return _relative_errors(targets, _student_keys(model, x, spaces))


def test_distillation_brings_the_keys_to_the_teacher():
    model = _model(2)
    teacher = PathTeacher(DATA, 2, DistilConfig(seed=123))
    sampler = ContextSampler(DATA)
    before = _forced(model, teacher, sampler)
    result = distil(model, DATA, DistilConfig(key_steps=150, readout_steps=20))
    assert len(result.fidelity_forced) == len(result.fidelity_own) == 2
    after = _forced(model, teacher, sampler)
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
    with pytest.raises(ValueError, match="trace_samples"):
        DistilConfig(trace_samples=2)
    with pytest.raises(ValueError, match="not a fixed model"):
        teacher_model(DATA, 2, "keyed")


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


@pytest.mark.heavy
def test_training_starts_from_the_distilled_model(tmp_path, monkeypatch):
    import bridges.training.distil as D

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
    import bridges.training.distil as D

    monkeypatch.setattr(D, "DistilConfig", lambda **kw: DistilConfig(key_steps=30, readout_steps=10, **kw))
    cfg = RunConfig(DATA, ModelConfig("A", 2), TrainConfig(steps=10, eval_every=5, init_policy="path",
                                                           out=str(tmp_path)))
    start = train(cfg, progress=False, stop_at=0)
    assert not start.finished and start.steps == 0 and (tmp_path / cfg.key() / "checkpoint.pt").exists()
    monkeypatch.setattr(D, "distil", lambda *a, **k: pytest.fail("distilled again on resume"))
    done = train(cfg, progress=False)
    assert done.finished and done.history[0] == start.history[0]


# --- the keyed teacher: A's prediction policy from the search's trace --------------------------------
KEYED_DATA = DataConfig(depth=3, alpha=0.6, n_tokens=16)  # N 16: the policy's loss far from 0 at budget 2
KEYED = DistilConfig(teacher="keyed", key_steps=300, readout_steps=100, trace_samples=600)


@pytest.fixture(scope="module")
def keyed_teacher():
    return KeyedTeacher(KEYED_DATA, 2, KEYED)


def test_keyed_teacher_is_the_search_trace(keyed_teacher):
    """Its keys are the trace's rows' weighted keys, scaled to unit mean square with their readings; the
    search replayed on the trace's own (scaled) readings chooses the same rows: the same targets."""
    t = keyed_teacher
    assert t.trace.rows.shape == (600, 2, 7) and t.n_held == 300 and t.loss.value == t.trace.losses[-1].estimate.value
    sampler = ContextSampler(KEYED_DATA)
    x, spaces, targets = t.batch(sampler, 300, 7, 0)  # the held-out stream: the trace's last 300 samples
    assert torch.equal(spaces[0], torch.zeros_like(spaces[0])) and torch.all(spaces[1][:, 1] == 0)
    phi = torch.as_tensor(t.trace.phi[300:, 0], dtype=torch.float32)
    torch.testing.assert_close(spaces[1][:, 0], phi * t.scale[0])
    rows = torch.as_tensor(t.trace.rows[300:, 1])
    Q = torch.as_tensor(t.trace.keys.Q)  # the diagonal: f(x) = (w.x) / (x^T Q x + c)
    xd = x.double()
    want = (xd @ rows[:, :, None])[..., 0] / ((xd**2) @ Q + t.trace.keys.c) * float(t.scale[1])
    torch.testing.assert_close(targets[1].double(), torch.as_tensor(want), rtol=1e-4, atol=1e-5)
    for target in targets:
        assert 0.5 < float(target.pow(2).mean()) < 2.0  # scaled to unit mean square (on other samples)
    again = t.keys_on(x, spaces)
    close = [float((a - b).abs().max(1).values.lt(1e-3).float().mean()) for a, b in zip(again, targets)]
    assert close[0] == 1.0 and close[1] > 0.95  # the replay: rows chosen again on float32 readings


def _keyed_distillation(teacher, cfg, layer2: float, factor: float):
    from bridges.analysis.audit import audit_model

    model = _model(2, data=KEYED_DATA)
    sampler = ContextSampler(KEYED_DATA)
    before = _forced(model, teacher, sampler, stream=7)
    result = distil(model, KEYED_DATA, cfg)
    after = _forced(model, teacher, sampler, stream=7)
    assert after[0] < 0.1 < before[0] and after[1] < layer2 and after[1] < before[1]
    assert result.fidelity_forced[0] < 0.1 and result.fidelity_own[0] < 0.1 and result.fidelity_own[1] < layer2 + 0.1
    assert result.teacher_loss["value"] == teacher.loss.value
    bayes = audit_model(model, KEYED_DATA, samples=400).bayes_on_readings.value
    assert teacher.loss.value / factor < bayes < factor * teacher.loss.value


@pytest.mark.heavy
def test_keyed_distillation_imitates_the_policy(keyed_teacher):
    """Distilled keys on the trace's held-out contexts: layer 1 (one key for all samples) within 10% of its
    variance, layer 2 (a row per sample, a jumpy function of the first reading) within 75% and better than
    before, after 300 steps on 300 workspaces; the loss its readings allow (audit) within a factor 2.5 of the
    policy's own."""
    _keyed_distillation(keyed_teacher, KEYED, layer2=0.75, factor=2.5)


@pytest.mark.slow
def test_keyed_distillation_imitates_the_policy_closely():
    """Longer (1500 steps on 2000 workspaces): layer 2 within 35%, the audit within 25% of the policy's loss."""
    cfg = DistilConfig(teacher="keyed", key_steps=1500, readout_steps=300, trace_samples=2512)
    _keyed_distillation(KeyedTeacher(KEYED_DATA, 2, cfg), cfg, layer2=0.35, factor=1.25)
