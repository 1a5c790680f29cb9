"""The audit of Model T (bridges.analysis.audit.audit_measured): the law of its readings measured at each latent. Readings
blind to theta leave the prior's loss; readings that carry theta are decoded near the model's own loss; a deep T's
layers read the tree's levels in order; same seed, same numbers; bad input in one line."""
import math

import numpy as np
import pytest
import torch

from bridges.analysis.audit import audit, audit_measured, measured_laws, readings_of
from bridges.models.networks import build_model
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.train import train
from fvsym.errors import InputError

torch.set_num_threads(1)
DATA = DataConfig(depth=3, n_tokens=16)
SMALL = {"d_model": 16, "head_dim": 4, "mlp_width": 16}


def _model(budget=2, seed=0, **kw):
    torch.manual_seed(seed)
    return build_model((DATA, ModelConfig(model="T", budget=budget, **SMALL, **kw)))


def _prior_loss(data) -> float:
    """E||theta - E theta||^2 of the tree prior: the loss of a decoder that learns nothing (E theta = 0)."""
    from bridges.training.data import ContextSampler

    return float(ContextSampler(data).second_moment)


def test_readings_blind_to_theta_leave_the_prior_loss():
    model = _model()
    with torch.no_grad():  # the label enters through the embedding's last column: without it nothing depends on theta
        model.embed.weight[:, -1] = 0.0
    a = audit_measured(model, DATA, samples=600, law_samples=64, seed=1)
    prior = _prior_loss(DATA)
    assert abs(a.bayes_on_readings.value - prior) < 5 * a.bayes_on_readings.stderr + 1e-9


def test_a_trained_deep_t_is_decoded_near_its_own_loss_and_reads_the_levels_in_order(tmp_path):
    cfg = RunConfig(DATA, ModelConfig(model="T", budget=2, shape="deep", **SMALL),
                    TrainConfig(steps=400, batch=64, eval_every=400, eval_batches=2, seed=0, threads=1, out=str(tmp_path)))
    result = train(cfg, progress=False)
    a = audit(result, samples=800, law_samples=128)
    assert "measured by simulation" in a.decoder
    prior = _prior_loss(DATA)
    assert a.loss.value < 0.8 * prior  # it learned something to decode
    # the Bayes decoder of its readings is no worse than its own readout beyond the approximation's slack
    assert a.decoder_gap.value > -5 * a.decoder_gap.stderr - 0.05 * a.loss.value
    assert a.bayes_on_readings.value < prior - 5 * a.bayes_on_readings.stderr
    first = next(s for s in a.stein if s.layer == 1)
    assert first.energy_by_depth[0] > 0.5  # block 1 reads the root's level, as path's first reading does
    again = audit(result, samples=800, law_samples=128)
    assert again.bayes_on_readings == a.bayes_on_readings and again.loss == a.loss  # same seed, same numbers
    text = "\n".join(a.lines())
    assert "contexts a latent" in text and "|cov(theta, reading)|" in text


def test_the_measured_law_is_the_readings_mean_and_covariance_at_each_leaf():
    model = _model(budget=2, shape="wide")
    thetas = np.array([[1.0, 0.5, 0.0, 0.25, 0.0, 0.0, 0.0]])
    mean, cov = measured_laws(model, DATA, thetas, law_samples=400, seed=0, batch=128)
    assert mean.shape == (1, 2) and cov.shape == (1, 2, 2)
    from bridges.training.data import ContextSampler

    sampler = ContextSampler(DATA)  # the same draws, by hand
    g = sampler.generator(0, 4, 10_000_000)
    rows = []
    for n in (128, 128, 128, 16):
        c = sampler.contexts(torch.as_tensor(thetas[0], dtype=torch.float32).expand(n, -1).contiguous(), g)
        rows.append(readings_of(model, c.x, c.y, c.x_q)[0].double().numpy())
    r = np.concatenate(rows)
    assert np.allclose(mean[0], r.mean(0)) and np.allclose(np.diag(cov[0]), np.var(r, 0, ddof=1) * (1 + 1e-3) + 0, rtol=1e-2)


@pytest.mark.parametrize("kw, words", [
    (dict(law_samples=2), "law_samples"),
    (dict(samples=1), "samples"),
    (dict(law_samples=10**6, samples=10**6), "over 2,000,000"),
])
def test_bad_sizes_are_refused_in_one_line(kw, words):
    with pytest.raises(InputError) as err:
        audit_measured(_model(), DATA, **kw)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_gaussian_prior_has_no_latents_to_measure_at():
    data = DataConfig(prior="gaussian", depth=3, n_tokens=16)
    torch.manual_seed(0)
    model = build_model((data, ModelConfig(model="T", budget=2, **SMALL)))
    with pytest.raises(InputError, match="finitely many latents"):
        audit_measured(model, data, samples=10)
    assert not ModelConfig(model="T", budget=2).spec.audits(data)
    assert ModelConfig(model="T", budget=2).spec.audits(DATA) and not ModelConfig(model="G").spec.audited
    assert math.isfinite(_prior_loss(DATA))
