"""The audit of a model whose readings have no key-function law: Model T (docs/theory.md section 7.1).

Model A's audit (``bridges.analysis.audit``) writes the law of the readings from the keys, functions of one token
and the workspace. Model T's readings are its heads' outputs at the summary token, ``blocks.{l}.attn.hook_z`` at
token 0 (``H d`` a block, ``B = L H d`` in all): its context tokens attend to each other, so a reading is no average
of a function of one token. Its law given each latent is therefore *measured*:

1. for each of the prior's finitely many latents ``theta_m`` (the tree's ``2^K`` leaves, uniform; the atoms prior's
   atoms, by their weights), ``law_samples`` contexts are drawn with that ``theta`` (data stream ``AUDIT_STREAM``,
   generator ``(seed, m)``), the model runs on them and the mean ``mu_m`` and covariance ``Sigma_m`` of the ``B``
   readings are kept (the covariance shrunk towards its trace by ``SHRINK``, so it stays invertible);
2. on ``samples`` fresh contexts from the prior the model's own loss is measured and the Bayes posterior mean of
   ``theta`` under the Gaussian laws ``N(mu_m, Sigma_m)`` (``fvnum.keys.families.posterior_mean``, the same decoder
   as A's audit) gives ``bayes_on_readings``; ``decoder_gap`` = model - Bayes on the same contexts (paired).

A reading is an attention average over ``N`` tokens, so its law is near Gaussian for the ``N`` of the studies; the
joint law of an adaptive model's readings is not exactly Gaussian, so the decoder is an approximation and its loss
an upper bound on the loss the readings allow (``decoder`` says so). What a channel measures: its *covariance row*
``E[(theta - E theta) (mu_c(theta) - E mu_c)]`` over the latents, with its share of energy by tree depth (a Stein row
where the reading is linear in the tokens, the row of A's audit).
"""
from __future__ import annotations

import numpy as np
import torch

from fvnum.estimate import Estimate
from fvsym._validate import check_int
from fvsym.errors import InputError

from bridges.analysis.audit import AUDIT_STREAM, Audit, _latents, _stein
from bridges.models.taps import record
from bridges.runs.config import DataConfig
from bridges.training.data import ContextSampler

SHRINK = 1e-3  # Sigma_m + SHRINK tr(Sigma_m) / B I: a measured covariance stays invertible
MAX_CONTEXTS = 2_000_000  # latents x law_samples + samples: beyond this the audit is refused (minutes of forward passes)
MEASURED = ("approximate: Bayes under Gaussian laws of the readings measured by simulation ({n} contexts a latent, "
            "{m} latents); an upper bound on the loss the readings allow")


def readings_of(model, x, y, x_q) -> tuple[torch.Tensor, object]:
    """``(readings (b, B), output)``: the heads' outputs at the summary token of every block, in block order."""
    names = [f"blocks.{l}.attn.hook_z" for l in range(1, model.n_layers + 1)]
    with torch.no_grad(), record(model, names) as rec:
        out = model(x, y, x_q)
    return torch.cat([rec[n][:, 0].flatten(1) for n in names], 1), out


def measured_laws(model, data: DataConfig, thetas: np.ndarray, *, law_samples: int, seed: int, batch: int):
    """``(mean (M, B), cov (M, B, B))`` of the readings given each latent (module docstring, step 1)."""
    sampler = ContextSampler(data)
    means, covs = [], []
    for m, theta in enumerate(thetas):
        g = sampler.generator(seed, AUDIT_STREAM, 10_000_000 + m)
        rows = []
        for start in range(0, law_samples, batch):
            n = min(batch, law_samples - start)
            c = sampler.contexts(torch.as_tensor(theta, dtype=torch.float32).expand(n, -1).contiguous(), g)
            rows.append(readings_of(model, c.x, c.y, c.x_q)[0].double().numpy())
        r = np.concatenate(rows)
        cov = np.atleast_2d(np.cov(r, rowvar=False))
        means.append(r.mean(0))
        covs.append(cov + SHRINK * max(np.trace(cov), 1e-300) / len(cov) * np.eye(len(cov)))
    return np.stack(means), np.stack(covs)


def audit_measured(model, data: DataConfig, *, samples: int = 1000, law_samples: int = 256, seed: int = 0,
                   batch: int = 256, key: str | None = None, name: str | None = None) -> Audit:
    """Audit Model T (or any model with ``blocks.{l}.attn.hook_z`` taps) on contexts of ``data``: module docstring.
    Same ``seed``, same numbers."""
    from fvnum.keys.families import ReadingLaw, posterior_mean

    if not hasattr(model, "blocks"):
        raise InputError(f"the measured audit needs a model with blocks (Model T), got {type(model).__name__}")
    if not isinstance(data, DataConfig) or data.dim != model.dim:
        raise InputError(f"the model has D = {model.dim}; the data configuration must match, got {data!r:.80}")
    samples = check_int(samples, "samples", 2, 10**7)
    law_samples = check_int(law_samples, "law_samples (contexts a latent)", 8, 10**6)
    seed = check_int(seed, "seed", 0, 2**63 - 1)
    batch = check_int(batch, "batch", 1, 10**5)
    latents = _latents(data)
    if latents is None:
        raise InputError("the audit of Model T measures its readings' law at each latent, so it needs finitely many "
                         f"latents (the tree or the atoms prior), not prior={data.prior!r}")
    thetas, log_prior = latents
    contexts = len(thetas) * law_samples + samples
    if contexts > MAX_CONTEXTS:
        raise InputError(f"the audit of {name or 'Model T'} would run {contexts:,} contexts ({len(thetas)} latents x "
                         f"{law_samples} + {samples}), over {MAX_CONTEXTS:,}: lower law_samples or samples")
    was_training = model.training
    model.eval()
    try:
        mean, cov = measured_laws(model, data, thetas, law_samples=law_samples, seed=seed, batch=batch)
        law = ReadingLaw(mean, cov)
        sampler = ContextSampler(data)
        own, bayes = [], []
        for i, start in enumerate(range(0, samples, batch)):
            c = sampler.sample(min(batch, samples - start), sampler.generator(seed, AUDIT_STREAM, i))
            phi, out = readings_of(model, c.x, c.y, c.x_q)
            theta = c.theta.double().numpy()
            own.append(((out.theta_hat.double().numpy() - theta) ** 2).sum(1))
            bayes.append(((posterior_mean(thetas, log_prior, law, phi.double().numpy()) - theta) ** 2).sum(1))
    finally:
        model.train(was_training)
    own, bayes = np.concatenate(own), np.concatenate(bayes)
    w = np.exp(log_prior - log_prior.max())
    w /= w.sum()
    centred_theta, centred_mu = thetas - w @ thetas, mean - w @ mean
    rows = np.einsum("m,md,mb->bd", w, centred_theta, centred_mu)[None]  # (1, B, D): each channel's covariance row
    L = model.n_layers
    return Audit(key, name, data, mean.shape[1], L, "theta", Estimate.of(own), Estimate.of(bayes),
                 Estimate.of(own - bayes), _stein(rows, L, mean.shape[1] // L, data.depth),
                 MEASURED.format(n=law_samples, m=len(thetas)), samples, law_samples, len(thetas), seed)


__all__ = ["MAX_CONTEXTS", "MEASURED", "audit_measured", "measured_laws", "readings_of"]
