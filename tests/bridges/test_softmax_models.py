"""Softmax-attention Models A, B, C (issue 31 item 1; THEORY.md sections 2b and 7): shapes and taps, weights that
sum to 1, a hand-built Model C whose loss the theory gives, a constant score reading the mean of y, checkpoints and
resume, the keys of linear runs unchanged, patching of the scores, probes, the price, the audit's refusal, and
short training runs that lower the loss."""
import json
import math
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch

from bridges.cli import build_parser
from bridges.commands import config_from_args
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.data import ContextSampler
from bridges.models.networks import build_model, key_rows
from bridges.models.taps import patch, record, tap_names
from fvnum.keys.families import SoftmaxKeys
from fvnum.keys.readings import law_posterior_mean

torch.set_num_threads(1)
DATA = DataConfig(depth=3, n_tokens=32)
SCALING = Path(__file__).resolve().parents[2] / "studies" / "scaling" / "scaling.json"


def softmax_model(model: str, budget: int = 2, data: DataConfig = DATA, seed: int = 0):
    torch.manual_seed(seed)
    return build_model((data, ModelConfig(model, budget, mlp_width=16, attention="softmax")))


def contexts(n: int, seed: int = 0, data: DataConfig = DATA):
    sampler = ContextSampler(data)
    return sampler.sample(n, sampler.generator(seed, 5, 0))


# --- shapes, taps, weights --------------------------------------------------------------------------
@pytest.mark.parametrize("model", "ABC")
def test_shapes_and_taps_of_the_softmax_models(model):
    m = softmax_model(model)
    L, d = (2, 1) if model == "A" else (1, 2)
    assert m.attention == "softmax" and (m.n_layers, m.width, m.budget) == (L, d, 2)
    names = tap_names(m)
    for l in range(1, L + 1):
        assert {f"layers.{l}.scores", f"layers.{l}.weights", f"layers.{l}.phi"} <= set(names)
        assert f"layers.{l}.keys" not in names and m.layers[l - 1].key_tap.name == f"layers.{l}.scores"
    c = contexts(8)
    with record(m) as r:
        out = m(c.x, c.y, c.x_q)
    assert out.y_hat.shape == (8,) and out.theta_hat.shape == (8, DATA.dim) and out.workspace.shape == (8, 2)
    for l in range(1, L + 1):
        assert r[f"layers.{l}.scores"].shape == r[f"layers.{l}.weights"].shape == (8, DATA.n_tokens, d)
        assert r[f"layers.{l}.phi"].shape == (8, d)


@pytest.mark.parametrize("model", "ABC")
def test_the_weights_sum_to_one_per_channel_and_average_the_values(model):
    m = softmax_model(model)
    c = contexts(16, seed=1)
    with torch.no_grad(), record(m) as r:
        m(c.x, c.y, c.x_q)
    for l in range(1, m.n_layers + 1):
        a = r[f"layers.{l}.weights"].double()  # (batch, N, d)
        assert (a >= 0).all()
        torch.testing.assert_close(a.sum(1), torch.ones(16, m.width, dtype=torch.float64), rtol=0, atol=1e-6)
        torch.testing.assert_close(a, torch.softmax(r[f"layers.{l}.scores"].double(), 1), rtol=0, atol=1e-6)
        phi = torch.einsum("bnd,bn->bd", a, c.y.double())
        torch.testing.assert_close(r[f"layers.{l}.phi"].double(), phi, rtol=0, atol=1e-5)


def test_the_linear_model_is_unchanged_beside_its_softmax_twin():
    """The same weights read ``(1/N) sum k y`` under linear attention and ``sum softmax(k) y`` under softmax."""
    torch.manual_seed(3)
    lin = build_model((DATA, ModelConfig("B", 2, mlp_width=16)))
    soft = softmax_model("B")
    soft.load_state_dict(lin.state_dict())  # the same parameters: taps carry none
    c = contexts(8, seed=2)
    with torch.no_grad(), record(lin, "layers.1.keys") as rl, record(soft, "layers.1.scores") as rs:
        phi_lin, phi_soft = lin.encode(c.x, c.y), soft.encode(c.x, c.y)
    torch.testing.assert_close(rl["layers.1.keys"], rs["layers.1.scores"])
    torch.testing.assert_close(phi_lin, torch.einsum("bnd,bn->bd", rl["layers.1.keys"], c.y) / DATA.n_tokens)
    torch.testing.assert_close(phi_soft, torch.einsum("bnd,bn->bd", torch.softmax(rs["layers.1.scores"], 1), c.y))


# --- readings the theory gives ------------------------------------------------------------------------
def test_a_constant_score_reads_the_mean_of_y():
    """THEORY.md 2b: a score that does not depend on x gives the mean of the values, in every layer."""
    c = contexts(32, seed=4)
    m = softmax_model("C")
    a = softmax_model("A", budget=3)
    with torch.no_grad():
        m.layers[0].keys.weight.zero_()  # s = 0
        for layer in a.layers:  # the key MLP's last layer: no weights, a bias only, so s = b whatever x and p
            last = layer.keys.mlp.body[-1]
            last.weight.zero_()
            last.bias.fill_(1.7)
        for model in (m, a):
            p = model.encode(c.x, c.y)
            torch.testing.assert_close(p, c.y.mean(1, keepdim=True).expand(-1, model.budget), rtol=0, atol=1e-6)


def _hand_built_c(beta: float):
    """Model C, one channel: score ``s = beta x_1`` (``W = beta e_1``) and ``theta_hat = phi e_1`` (``U = e_1``)."""
    m = build_model((DATA, ModelConfig("C", 1, attention="softmax")))
    with torch.no_grad():
        m.layers[0].keys.weight.zero_()
        m.layers[0].keys.weight[0, 0] = beta
        m.readout.U.zero_()
        m.readout.U[0, 0] = 1.0
    return m


def _numpy_reading_losses(beta: float, n: int, seed: int) -> np.ndarray:
    """Plain numpy Monte Carlo of the same reading on the tree prior of ``DATA`` (depth 3, alpha 1/2): theta_1 =
    +-1 and the rest of the path (scales^2 1/2, 1/4) adds an independent N(0, 3/4) to each y_i."""
    rng = np.random.default_rng(seed)
    N, s2 = DATA.n_tokens, DATA.s2
    theta1 = rng.choice([-1.0, 1.0], size=n)  # (n,)
    x1 = rng.standard_normal((n, N))
    y = theta1[:, None] * x1 + math.sqrt(0.75) * rng.standard_normal((n, N)) + math.sqrt(s2) * rng.standard_normal((n, N))
    s = beta * x1
    a = np.exp(s - s.max(1, keepdims=True))
    phi = (a * y).sum(1) / a.sum(1)
    return 1.75 - 2 * theta1 * phi + phi**2  # ||theta - phi e_1||^2, ||theta||^2 = 1 + 1/2 + 1/4


def test_hand_built_softmax_model_c_has_the_loss_the_theory_gives():
    """THEORY.md 2b: with ``s = beta x_1`` (small beta) the reading is ``m theta_1`` plus noise of variance
    ``(|theta|^2 + s2) / N``, ``m = beta (N - 1) / N + O(beta^3)`` (the self-normalised weights
    ``(1 + beta (x_i - xbar)) / N`` to first order), so with ``theta_hat = phi e_1`` the loss is
    ``|theta|^2 - 2 m a_1^2 + m^2 a_1^2 + (|theta|^2 + s2) / N`` up to ``O(beta^2 / N)``. The model's loss
    (torch), a plain numpy Monte Carlo of the same reading and the formula agree within 5 standard errors."""
    beta, n, N, s2 = 0.1, 20_000, DATA.n_tokens, DATA.s2
    m = _hand_built_c(beta)
    c = contexts(n, seed=6)
    with torch.no_grad():
        theta_hat = m(c.x, c.y, c.x_q).theta_hat.double()
    model_losses = ((theta_hat - c.theta.double()) ** 2).sum(1).numpy()
    numpy_losses = _numpy_reading_losses(beta, n, seed=7)
    mean = beta * (N - 1) / N
    theory = 1.75 - 2 * mean + mean**2 + (1.75 + s2) / N
    se_model = model_losses.std() / math.sqrt(n)
    se_numpy = numpy_losses.std() / math.sqrt(n)
    assert abs(model_losses.mean() - theory) < 5 * se_model, (model_losses.mean(), theory, se_model)
    assert abs(numpy_losses.mean() - theory) < 5 * se_numpy, (numpy_losses.mean(), theory, se_numpy)
    assert abs(model_losses.mean() - numpy_losses.mean()) < 5 * math.hypot(se_model, se_numpy)
    # the signal is resolved: a reading without it (beta = 0) sits many standard errors higher
    assert theory + 20 * se_model < 1.75 + (1.75 + s2) / N


def test_the_stein_rows_of_a_softmax_channel():
    """``key_rows`` of a softmax channel: ``E[grad w] / E[w] = E[w grad s] / E[w]``; for C's linear score
    ``s = w.x`` the gradient is ``w`` at every sample, so the row is ``w`` exactly."""
    m = softmax_model("C", budget=3)
    rows = key_rows(m, 1, torch.zeros(4, 3), n_samples=64)
    torch.testing.assert_close(rows, m.layers[0].keys.weight.detach().expand(4, -1, -1))
    a = softmax_model("A", budget=2)
    p = torch.zeros(3, 2)
    rows = key_rows(a, 1, p, n_samples=128, seed=2)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 128, DATA.dim, generator=g).requires_grad_(True)
    s = a.layers[0].keys(x, p)[..., 0]  # (3, 128)
    (grad,) = torch.autograd.grad(s.sum(), x)
    w = torch.exp(s.detach())
    expected = (w[..., None] * grad).sum(1) / w.sum(1, keepdim=True)  # (3, D)
    torch.testing.assert_close(rows[:, 0], expected)


# --- the key of a run -----------------------------------------------------------------------------------
def test_linear_keys_are_unchanged():
    assert ModelConfig(attention="linear") == ModelConfig() and "attention" not in ModelConfig().to_dict()
    lin = RunConfig(DATA, ModelConfig("A", 2, attention="linear"))
    assert lin.key() == RunConfig(DATA, ModelConfig("A", 2)).key()
    soft = RunConfig(DATA, ModelConfig("A", 2, attention="softmax"))
    assert soft.key() != lin.key() and soft.key().startswith("As-tree-K3-B2-N32-s0-")
    assert soft.to_dict()["model"]["attention"] == "softmax"
    # the keys recorded in a committed study: its rows' command lines (written before softmax existed) give them
    rows = json.loads(SCALING.read_text())["runs"]
    assert len(rows) > 10
    for row in rows:
        args = build_parser().parse_args(shlex.split(row["command"])[1:])
        cfg = config_from_args(args)
        assert cfg.model.attention == "linear" and cfg.key() == row["key"], row["command"]


@pytest.mark.parametrize("model", "ABC")
def test_softmax_configuration_round_trips(model):
    cfg = RunConfig(DATA, ModelConfig(model, 2, mlp_width=8, attention="softmax"), TrainConfig(steps=7, out="x"))
    assert RunConfig.from_json(cfg.to_json()) == cfg
    argv = cfg.to_argv()
    assert argv[argv.index("--attention") + 1] == "softmax"
    assert config_from_args(build_parser().parse_args(["train", *argv])) == cfg
    assert RunConfig.from_options({"model": model, "budget": 2, "attention": "softmax"}).model.attention == "softmax"
    assert cfg.train.lr == RunConfig(DATA, ModelConfig(model, 2)).train.lr  # the recipe of the linear twin
    assert cfg.train.steps == 7 and RunConfig(DATA, ModelConfig(model, 2, attention="softmax")).train == \
        RunConfig(DATA, ModelConfig(model, 2)).train


def test_bad_attention_is_refused():
    with pytest.raises(ValueError, match="attention"):
        ModelConfig(attention="quadratic")
    with pytest.raises(ValueError, match="attention"):
        RunConfig.from_dict({"model": {"model": "A", "attention": 1}})


# --- the price -------------------------------------------------------------------------------------------
def test_softmax_is_priced_above_its_linear_twin():
    from bridges.prices.cost import step_seconds
    from bridges.prices.memory import train_bytes

    for model in "ABC":
        lin = RunConfig(DataConfig(depth=6, n_tokens=256), ModelConfig(model, 8), TrainConfig(batch=512))
        soft = lin.replace(model=dict(attention="softmax"))
        d = soft.model.n_channels
        extra = 4.0 * 512 * 256 * 2 * soft.model.n_layers * d  # the (batch, N, d) scores and weights of every layer
        assert train_bytes(soft) == pytest.approx(train_bytes(lin) + extra)
        assert step_seconds(soft) > step_seconds(lin)


# --- checkpoints, resume, training ------------------------------------------------------------------------
def _small(folder, model, **kw):
    t = dict(steps=24, batch=32, lr=1e-2, warmup=4, eval_every=8, eval_batches=1, checkpoint_every=5, out=str(folder))
    t.update(kw)
    return RunConfig(DataConfig(depth=3, n_tokens=16), ModelConfig(model, 2, mlp_width=16, attention="softmax"),
                     TrainConfig(**t))


@pytest.mark.parametrize("model", ["A", "C"])
def test_softmax_checkpoint_round_trip_and_resume_give_the_same_numbers(tmp_path, model):
    from bridges.training.checkpoint import load_model
    from bridges.training.train import train

    whole = train(_small(tmp_path / "whole", model), progress=False)
    cfg = _small(tmp_path / "split", model)
    part = train(cfg, progress=False, stop_at=11)
    assert not part.finished and part.steps == 11
    resumed = train(cfg, progress=False)
    assert resumed.finished and resumed.loss == whole.loss and resumed.stderr == whole.stderr
    assert [r[:4] for r in resumed.history] == [r[:4] for r in whole.history]
    for name, w in whole.model.state_dict().items():
        assert torch.equal(w, resumed.model.state_dict()[name]), name
    loaded, loaded_cfg, step = load_model(tmp_path / "split" / cfg.key())
    assert loaded_cfg == cfg and step == 24 and loaded.attention == "softmax"
    c = contexts(16, seed=8, data=cfg.data)
    with torch.no_grad():
        torch.testing.assert_close(loaded(c.x, c.y, c.x_q).y_hat, resumed.model(c.x, c.y, c.x_q).y_hat, rtol=0, atol=0)
    config = json.loads((tmp_path / "split" / cfg.key() / "config.json").read_text())
    assert config["model"]["attention"] == "softmax"


def test_a_nonfinite_score_stops_training_in_one_line(monkeypatch):
    """A score that overflows makes the softmax NaN; the training guard stops the run with one line."""
    import bridges.training.train as train_module

    build = train_module.build_model

    def overflowing(cfg):
        model = build(cfg)
        with torch.no_grad():
            model.layers[0].keys.weight.fill_(math.inf)
        return model

    monkeypatch.setattr(train_module, "build_model", overflowing)
    cfg = _small(None, "C", out=None, steps=3, eval_every=3)
    with pytest.raises(train_module.TrainingDiverged, match="softmax attention a score may have overflowed") as info:
        train_module.train(cfg, progress=False)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("model", "ABC")
def test_a_short_softmax_run_lowers_the_loss(model):
    """300 steps at depth 3, N 32: the held-out loss falls well below its start and below the zero decoder's
    ``E||theta||^2 = 1.75``, by more than 5 standard errors."""
    from bridges.training.train import train

    cfg = RunConfig(DATA, ModelConfig(model, 2, mlp_width=32, attention="softmax"),
                    TrainConfig(steps=300, batch=64, warmup=20, eval_every=300, eval_batches=2))
    result = train(cfg, progress=False)
    start, end, se = result.history[0][2], result.history[-1][2], result.history[-1][3]
    assert end < 0.5 * start and end + 5 * se < 1.75, (start, end, se)


# --- patching, probes, audit ---------------------------------------------------------------------------
def test_key_patching_patches_the_scores():
    from bridges.patching.keys import key_patching_table

    m = softmax_model("A", budget=2)
    target, donor = contexts(8, seed=9), contexts(8, seed=10)
    with torch.no_grad(), record(m, "layers.2.scores") as r:
        m(donor.x, donor.y, donor.x_q)
    with torch.no_grad(), patch(m, "layers.2.scores", r["layers.2.scores"]) as calls, record(m, "layers.2.weights") as w:
        m(target.x, target.y, target.x_q)
    assert calls == {"layers.2.scores": 1}
    torch.testing.assert_close(w["layers.2.weights"], torch.softmax(r["layers.2.scores"], 1))
    table = key_patching_table(m, DATA, n_contexts=64, seed=0)
    assert table.loss.shape == (2, 3) and np.isfinite(table.loss).all()
    assert np.abs(table.effect).max() > 0  # the patch changes the model's readings


def test_probes_of_a_softmax_model():
    from bridges.analysis.probes import workspace_probes

    out = workspace_probes(softmax_model("A", budget=2), DATA, n_contexts=64, seed=0)
    assert out["layers"] == 2 and len(out["prefix"]) == 2 and out["n"] == 64


def _softmax_design_reference(data, B, n, seed):
    """Bayes loss of softmax Model C with score rows ``B`` on real tokens, decoded under the closed-form law
    of ``fvnum.keys.families.SoftmaxKeys(B)``: plain numpy contexts (leaf, tokens, values), exact softmax readings."""
    rng = np.random.default_rng(seed)
    keys = SoftmaxKeys(B)
    sampler = ContextSampler(data, dtype=torch.float64)
    K = data.depth
    bits = (torch.arange(2**K)[:, None] >> torch.arange(K - 1, -1, -1)[None, :]) & 1
    thetas = sampler.theta_from_signs((1 - 2 * bits).to(torch.int8)).numpy()
    m = rng.integers(0, len(thetas), n)
    X = rng.standard_normal((n, data.n_tokens, data.dim))
    y = np.einsum("nid,nd->ni", X, thetas[m]) + math.sqrt(data.s2) * rng.standard_normal((n, data.n_tokens))
    law = keys.law(thetas, n_tokens=data.n_tokens, s2=data.s2)
    est = law_posterior_mean(thetas, np.zeros(len(thetas)), law, keys.readings(X, y))
    losses = ((est - thetas[m]) ** 2).sum(1)
    return float(losses.mean()), float(losses.std(ddof=1) / math.sqrt(n))


def test_the_softmax_audit_of_model_c_is_the_bayes_loss_of_its_scores():
    """Hand-built softmax Model C (score rows B): Bayes on its own readings (the audit, law from its scores on a
    token sample, ``fvnum.keys.readings.law_from_scores``) is the Bayes loss of the same scores under the closed-form law
    of ``SoftmaxKeys(B)`` on real tokens, within 5 standard errors."""
    from bridges.analysis.audit import audit_model

    data = DataConfig(prior="tree", depth=3, alpha=0.5, n_tokens=64)
    B = np.array([[1.2, 0, 0, 0, 0, 0, 0], [0.6, 0.9, -0.9, 0, 0, 0, 0]])
    model = build_model((data, ModelConfig("C", 2, attention="softmax")))
    with torch.no_grad():
        model.layers[0].keys.weight.copy_(torch.as_tensor(B, dtype=torch.float32))
    a = audit_model(model, data, samples=600, token_sample=20_000, seed=1)
    ref, ref_se = _softmax_design_reference(data, B, 6000, seed=2)
    assert abs(a.bayes_on_readings.value - ref) < 5 * math.hypot(a.bayes_on_readings.stderr, ref_se)
    # the readings carry the signal: far below the prior's loss with no reading (the squared norm of theta)
    assert a.bayes_on_readings.value < 0.7 * float((np.array([1, 0.5, 0.25]) ** 2).sum())


@pytest.mark.parametrize("prior", ["tree", "gaussian"])
def test_the_audit_of_a_softmax_model_runs_on_both_priors(prior):
    from bridges.analysis.audit import audit_model

    data = DataConfig(prior=prior, depth=3, n_tokens=32)
    for model in ("A", "C"):
        a = audit_model(softmax_model(model, data=data), data, samples=16, token_sample=512, n_latents=16)
        assert np.isfinite(a.bayes_on_readings.value) and a.bayes_on_readings.value > 0


def test_a_sweep_over_attention():
    from bridges.studies.sweep import plan

    spec = {"command": "train", "base": {"model": "B", "depth": 3, "budget": 2, "steps": 5},
            "grid": {"attention": ["linear", "softmax"]}}
    _, cells, points = plan(spec, "unused")
    assert [p["attention"] for p in points] == ["linear", "softmax"] and len({c.key for c in cells}) == 2
    linear = RunConfig.from_options({"model": "B", "depth": 3, "budget": 2, "steps": 5})
    assert cells[0].kwargs["run"]["model"] == linear.to_dict()["model"] and "attention" not in cells[0].config["run"]["model"]


def test_softmax_model_a_grows_from_a_softmax_run_only(tmp_path):
    """The curriculum (``init_from``) starts a softmax Model A from a smaller softmax run, never from a linear one
    (the same weights would read other numbers)."""
    from bridges.training.train import train

    t = dict(steps=6, batch=16, warmup=1, eval_every=6, eval_batches=1, out=str(tmp_path))
    data = DataConfig(depth=3, n_tokens=16)
    small_soft = train(RunConfig(data, ModelConfig("A", 1, mlp_width=8, attention="softmax"), TrainConfig(**t)),
                       progress=False)
    small_lin = train(RunConfig(data, ModelConfig("A", 1, mlp_width=8), TrainConfig(**t)), progress=False)
    big = RunConfig(data, ModelConfig("A", 2, mlp_width=8, attention="softmax"),
                    TrainConfig(**t, init_from=small_soft.config.key()))
    grown = train(big, progress=False)
    assert grown.finished and grown.model.attention == "softmax"
    with pytest.raises(ValueError, match="attention 'linear' vs 'softmax'"):
        train(big.replace(train=dict(init_from=small_lin.config.key())), progress=False)
