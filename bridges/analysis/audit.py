"""The audit of a trained model's measurements: the loss its own readings allow (issue 19, item 3).

``audit(result)`` (``from bridges.analysis.audit import audit``; ``fv audit RUN_DIR``), for a trained model (a
``TrainResult`` with its model, or a finished ``fv train`` run folder):

1. contexts are drawn from the run's data configuration (``seed``, data stream ``AUDIT_STREAM``); the model
   runs on them, its readings ``phi_l`` (taps ``layers.{l}.phi``), its workspaces and its own loss are kept;
2. the keys of every layer are evaluated on one FIXED token sample ``X`` (``token_sample`` x D, drawn from
   ``seed``) at the sample's own workspace (the one that layer saw) and stacked: ``F`` (n_x, B);
3. the law of the stacked readings given each latent is the CLT law of ``phi = (1/N) sum_i y_i f(x_i)`` with
   those keys (``fvnum.keys.readings.law_from_key_values``: mean ``E[(theta.x) f]`` (Stein), covariance
   ``(E[((theta.x)^2 + s2) f f^T] - mean mean^T) / N``). For an adaptive model the keys of layer ``l`` depend
   on the readings before it; the joint Gaussian of the keys evaluated at the realised workspace has the
   layer conditionals ``p(phi_l | phi_<l, theta)`` as its factors, so its density is their product;
4. the Bayes posterior mean of theta on those readings (``fvnum.keys.readings.law_posterior_mean``) and its loss:
   ``bayes_on_readings`` (the loss the model's measurements allow), ``decoder_gap`` = model - Bayes on the
   same contexts (a paired estimate: how much the model's readout leaves on the table).

Tree prior: the latents are the ``2^K`` leaves, uniform: the decoder is exact under the CLT law. Atoms prior
(docs/theory.md section 6): the latents are its ``M`` atoms with their weights, the same exact decoder (the dMMSE
posterior over the atoms, under the CLT law of the model's own readings). Gaussian
prior: self-normalised importance sampling, ``n_latents`` draws per context from the Gaussian posterior of the
readings' linearised law (mean ``A theta``, ``A`` the Stein rows, covariance averaged over the prior), weighted
by the CLT likelihood; the decoder is then an approximation, its loss an upper bound on the loss the readings
allow (any decoder's loss is; ``decoder`` says which).

Per layer and channel: the Stein row ``E grad f_l = E[x f_l(x)]`` on ``X`` (what the key measures), its
norm and the share of its energy on the nodes of each tree depth, averaged over the contexts.

Softmax attention (docs/theory.md section 2): ``F`` holds the layers' scores ``S`` where it holds the keys, the
Stein rows are ``E[x w] / E[w]`` (``w = exp(s)``) and the one call that turns ``(X, S)`` into a law is
``_reading_law`` (``fvnum.keys.readings.law_from_scores``).

Model T (``audit_measured``): its readings are its heads' outputs at the summary token, ``blocks.{l}.attn.hook_z`` at
token 0, and its context tokens attend to each other, so a reading is no average of a function of one token. The law
of its ``B`` readings given each of the prior's finitely many latents is *measured*: ``law_samples`` contexts a latent
(stream ``AUDIT_STREAM``, generator ``(seed, 10^7 + m)``) give their mean and covariance (shrunk towards its trace by
``SHRINK``), and fresh contexts are decoded by the Bayes posterior mean under those Gaussian laws. The joint law of an
adaptive model's readings is not exactly Gaussian, so the decoder is an approximation and its loss an upper bound on
the loss the readings allow. What a channel measures is its covariance row ``E[(theta - E theta)(mu_c(theta) - E
mu_c)]`` over the latents, with its energy by tree depth.

Theory comes from ``fvnum``; this module runs the model and lays the numbers out.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from fvnum.estimate import Estimate
from fvsym._validate import check_int

from bridges.runs.config import DataConfig
from bridges.training.data import ContextSampler, finite_latents, find_prior_files, step_generator
from bridges.models.networks import WorkspaceModel, _autocast
from bridges.models.taps import record
from fvsym.errors import DamagedFile, InputError

AUDIT_STREAM = 4  # data stream of audit contexts (training 0, evaluation 1, patching 2, probes 3)
EXACT = "exact Bayes under the CLT law of the readings (the 2^K leaves of the tree prior)"
EXACT_ATOMS = "exact Bayes under the CLT law of the readings (the {m} atoms of the atoms prior, by their weights)"
APPROXIMATE = ("approximate: Bayes by importance sampling, {n} draws a context from the Gaussian posterior of its "
               "readings' linearised law; an upper bound on the loss the readings allow")
_KEY_ENTRIES = 1 << 22  # token-sample entries (n_x x mlp_width) of the keys evaluated at once


@dataclass(frozen=True)
class Stein:
    """What one channel of one layer measures: ``norm`` = mean ``||E grad f||`` and ``energy_by_depth``
    = mean share of ``||E grad f||^2`` on the nodes of depth ``1..K``."""

    layer: int
    channel: int
    norm: float
    energy_by_depth: tuple

    def to_dict(self) -> dict:
        return {"layer": self.layer, "channel": self.channel, "norm": self.norm,
                "energy_by_depth": list(self.energy_by_depth)}


@dataclass(frozen=True)
class Audit:
    """The audit of one model: its own ``loss``, ``bayes_on_readings`` and the paired ``decoder_gap``
    (Estimates on the same ``samples`` contexts), in units of ``metric`` (``theta``: ``||theta_hat -
    theta||^2``; ``query``: the query MSE, same expectation); ``stein`` rows per layer and channel;
    ``decoder`` says whether the Bayes decoder is exact."""

    key: str | None
    model: str | None
    data: DataConfig
    budget: int
    layers: int
    metric: str
    loss: Estimate
    bayes_on_readings: Estimate
    decoder_gap: Estimate
    stein: tuple
    decoder: str
    samples: int
    token_sample: int
    n_latents: int
    seed: int

    def to_dict(self) -> dict:
        est = lambda e: {"value": e.value, "stderr": e.stderr, "n": e.n}  # noqa: E731
        by_layer = []
        for l in range(1, self.layers + 1):
            by_layer.append({"layer": l, "channels": [s.to_dict() for s in self.stein if s.layer == l]})
        d = self.data
        return {"key": self.key, "model": self.model, "prior": d.prior, "depth": d.depth, "alpha": d.alpha,
                **({"dim": d.dim} if d.depth is None else {}),
                **({"scales": list(d.scales)} if d.scales is not None else {}), "n_tokens": d.n_tokens, "s2": d.s2, "budget": self.budget, "metric": self.metric,
                "loss": est(self.loss), "bayes_on_readings": est(self.bayes_on_readings),
                "decoder_gap": est(self.decoder_gap), "layers": by_layer, "decoder": self.decoder,
                "samples": self.samples, "token_sample": self.token_sample, "n_latents": self.n_latents,
                "seed": self.seed}

    def lines(self) -> list[str]:
        return audit_lines(self.to_dict())

    def __repr__(self) -> str:
        return (f"Audit(model={self.model!r}, loss={self.loss.value:.4g}, bayes_on_readings="
                f"{self.bayes_on_readings.value:.4g} +- {self.bayes_on_readings.stderr:.2g}, decoder_gap="
                f"{self.decoder_gap.value:.4g} +- {self.decoder_gap.stderr:.2g}, n={self.samples})")


def _pm(e: dict, scale=None) -> str:
    """`` +- 0.0042``, or `` exact`` below floating-point noise (``fvnum.estimate.stderr_text``)."""
    from fvnum.estimate import stderr_text

    return stderr_text(e["stderr"], e["value"] if scale is None else scale, digits=2, exact=" exact", plus=" +- ")


def audit_lines(a: dict) -> list[str]:
    """The text form of an audit's ``to_dict`` (also of one stored in a table)."""
    lo, ba, gap = a["loss"], a["bayes_on_readings"], a["decoder_gap"]
    unit = "E||theta_hat - theta||^2" if a["metric"] == "theta" else "query MSE"
    size = f"depth {a['depth']}" if a.get("depth") is not None else f"D {a.get('dim', '?')}"
    measured = "measured by simulation" in a["decoder"]  # Model T (audit_measured)
    sample = f"{a['token_sample']} contexts a latent" if measured else f"token sample {a['token_sample']}"
    out = [f"audit of {a['key'] or 'a model'}: {a['prior']} prior, {size}, budget {a['budget']}, "
           f"N {a['n_tokens']} ({a['samples']} contexts, {sample}, seed {a['seed']}; {unit})",
           f"  loss (the model's own)        {lo['value']:.5g}{_pm(lo)}",
           f"  bayes_on_readings             {ba['value']:.5g}{_pm(ba)}  ({a['decoder']})",
           f"  decoder_gap (model - Bayes)   {gap['value']:+.5g}{_pm(gap, lo['value'])}  (paired)"]
    by = "depth" if a.get("depth") is not None else "coordinate"  # a prior without levels: one entry a coordinate
    row = "|cov(theta, reading)|" if measured else "|E grad f|"
    for layer in a["layers"]:
        for ch in layer["channels"]:
            depth = ", ".join(f"{e:.2f}" for e in ch["energy_by_depth"])
            out.append(f"  layer {layer['layer']} channel {ch['channel']}: {row} {ch['norm']:.3g}, "
                       f"energy by {by} [{depth}]")
    return out


# --- loading a run ---------------------------------------------------------------------------------
def load_run(run_dir):
    """The ``TrainResult`` of a finished ``fv train`` run folder with its model; one-line errors for a
    folder that is not a finished run or has a corrupt checkpoint."""
    from bridges.training.checkpoint import load_model
    from bridges.training.train import load_result

    if not str(run_dir).strip():  # Path("") is the current folder: say what was given
        raise InputError("the run folder is empty: give a finished fv train run folder (DIR/<key>/)")
    folder = Path(run_dir)
    if not folder.exists():
        raise FileNotFoundError(f"no run folder at {folder}")
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a run folder (fv train writes DIR/<key>/)")
    if not os.path.lexists(folder / "result.json"):  # anything there (a FIFO, a link) is load_result's to name
        if (folder / "checkpoint.pt").exists() or (folder / "config.json").exists():
            raise InputError(f"{folder} is not a finished fv train run (no result.json: training stopped early; "
                             f"run the same fv train command again to finish it)")
        raise InputError(f"{folder} is not an fv train run folder (no config.json, checkpoint.pt or result.json)")
    result = load_result(folder / "result.json")
    if not result.finished:
        raise InputError(f"{folder} is not a finished fv train run ({result.steps} of {result.config.train.steps} steps)")
    find_prior_files(result.config.data, folder)  # the atoms the folder keeps (atoms.npy), wherever the file went
    model, _, step = load_model(folder, result.config)
    if step != result.steps:
        raise DamagedFile(f"checkpoint {folder / 'checkpoint.pt'} is at step {step}, its result.json at step "
                         f"{result.steps}: the folder mixes two runs")
    return replace(result, model=model, run_dir=str(folder))


# --- its price -------------------------------------------------------------------------------------
# Measured (fv audit of Model A, tree, depth 4, and Model B, matched Gaussian, depth 4; 200 to 800 contexts,
# token samples 2048 to 16384; the 2-core machine at load 4 to 5): 8.5 us per context and token for A (two
# layers of keys re-evaluated, 16 leaves), 56 us for B (512 latents) plus 65 ms a context (the importance
# sampler), about 4 s to start (torch, the run); peak RSS 330 to 455 MB; Model A with 100 hidden layers, 200
# contexts on 2048 tokens: 41 s. Per context and token the price counts, for the keys re-evaluated (layers
# 2..L), AUDIT_NS_KEY ns per unit of their first and last layers (W (D + B + d)) and AUDIT_NS_SQUARE ns per
# multiply-add of their hidden W x W layers, and AUDIT_NS_LAW ns per latent and entry of its law
# (D + k + k^2), times AUDIT_SAFETY.
# On a quiet machine the same audits run 4 to 10 times faster (Model A, 400 contexts on 8192 tokens: 3.9 s,
# 0.73 us per context and token): the constants price the quiet machine about 1.2 to 2 times over.
AUDIT_NS_KEY, AUDIT_NS_SQUARE, AUDIT_NS_LAW, AUDIT_CONTEXT_S, AUDIT_START_S, AUDIT_SAFETY = 0.27, 0.017, 0.7, 0.012, 1.5, 1.5
AUDIT_BASE_BYTES = 350e6


def audit_cost(*, tree: bool, depth: int, dim: int, layers: int, width: int, budget: int, mlp_width: int,
               hidden_layers: int, samples: int, token_sample: int, n_latents: int = 512,
               batch: int = 256, atoms: int | None = None) -> tuple[float, float]:
    """``(bytes, seconds)`` of :func:`audit_model` (upper estimates, see the constants above): memory = the
    keys of a batch on the token sample ``F`` (batch, n_x, B), the layers' token projections, the keys'
    activations of one evaluation (three alive at once: no gradients are kept), the laws' chunks, the Stein
    rows and losses, and the interpreter. ``atoms``: the exact decoder's latents are that many atoms (with
    ``tree`` True: exact), not the ``2^depth`` leaves."""
    D, B, d, W, H, n_x = dim, budget, width, max(1, mlp_width), max(1, hidden_layers), token_sample
    k = B
    M = (2**depth if atoms is None else atoms) if tree else n_latents
    b = min(batch, samples)
    from fvnum.keys.readings import MAX_CHUNK

    memory = (AUDIT_BASE_BYTES + 8.0 * b * n_x * B + 4.0 * layers * W * n_x + 12.0 * n_x * D
              + 12.0 * max(_KEY_ENTRIES, n_x * max(W, D)) + 8.0 * MAX_CHUNK * (3 + k)
              + 16.0 * samples * B * D + 32.0 * samples + (8.0 * n_latents * (D + k + k * k) if not tree else 0))
    keys = max(layers - 1, 0) * (AUDIT_NS_KEY * W * (D + B + d) + AUDIT_NS_SQUARE * W * W * (H - 1))
    law_units = M * (D + k + k * k) + k * D
    seconds = samples * n_x * (keys + AUDIT_NS_LAW * law_units) * 1e-9
    if not tree:
        seconds += samples * AUDIT_CONTEXT_S * n_latents / 512
    return memory, AUDIT_START_S + AUDIT_SAFETY * seconds


def check_audit_cost(what: str = "fv audit", **sizes) -> None:
    """Refuse (one-line ValueError) an audit priced over the memory available or the time cap, naming the
    largest ``token_sample`` (memory) or ``samples`` (time) that fits. ``sizes``: :func:`audit_cost`'s."""
    from fvsym.guards.limits import check_memory, check_time, fits_memory, fits_time, largest_fitting

    memory, seconds = audit_cost(**sizes)
    n, n_x = sizes["samples"], sizes["token_sample"]
    label = f"{what} of {n} contexts on a token sample of {n_x}"
    if not fits_memory(memory):
        xs = [2**j for j in range(1, 41) if 2**j < n_x]
        hint = largest_fitting("token sample", xs, lambda x: fits_memory(audit_cost(**{**sizes, "token_sample": x})[0]))
        check_memory(label, memory, hint)
    if not fits_time(seconds):
        lo, hi = 1, n  # the largest number of contexts that fits, by bisection (the price grows with it)
        while hi - lo > max(1, lo // 100):
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits_time(audit_cost(**{**sizes, "samples": mid})[1]) else (lo, mid)
        if lo >= 2 and fits_time(audit_cost(**{**sizes, "samples": lo})[1]):
            hint = f"; at this token sample at most {lo} contexts (--samples) fit"
        else:
            xs = [2**j for j in range(1, 41) if 2**j < n_x]
            hint = largest_fitting("token sample", xs, lambda x: fits_time(
                audit_cost(**{**sizes, "samples": 2, "token_sample": x})[1])).replace("fits", "fits with 2 contexts")
        check_time(label, seconds, hint)


def _hidden_layers(model: WorkspaceModel) -> int:
    keys = model.layers[0].keys
    body = getattr(getattr(keys, "mlp", None), "body", None)
    return sum(isinstance(m, torch.nn.Linear) for m in body) if body is not None else 1


# --- the audit -------------------------------------------------------------------------------------
def audit(result, *, samples: int = 1000, token_sample: int = 8192, n_latents: int = 512, seed: int = 0,
          batch: int = 256, law_samples: int = 256) -> Audit:
    """Audit a trained model: ``result`` is a ``TrainResult`` with its model or a finished run folder
    (module docstring). Model T's readings are no key functions of one token: its audit measures their law at each
    latent (``law_samples`` contexts a latent; :func:`audit_measured`). Same ``seed``, same numbers."""
    if isinstance(result, (str, Path)):
        result = load_run(result)
    if getattr(result, "model", None) is None or not hasattr(result, "config"):
        raise InputError("audit needs a TrainResult with its model (bridges.training.train.train, or a run folder)")
    cfg = result.config
    if hasattr(result.model, "blocks"):  # Model T: the law of its readings is measured
        return audit_measured(result.model, cfg.data, samples=samples, law_samples=law_samples, seed=seed,
                              batch=batch, key=cfg.key(), name=cfg.model.model)
    return audit_model(result.model, cfg.data, samples=samples, token_sample=token_sample, n_latents=n_latents,
                       seed=seed, batch=batch, key=cfg.key(), name=cfg.model.model)


def _latents(data: DataConfig):
    """``(thetas (M, D), log prior weights (M,))`` of a prior with finitely many latents, whose Bayes decoder is
    exact: the tree's ``2^K`` leaves (uniform), the atoms prior's atoms (by their weights); None for a Gaussian."""
    if data.has_leaves:
        leaves = _leaves(data)
        return leaves, np.zeros(len(leaves))
    return finite_latents(data)


def _leaves(data: DataConfig) -> np.ndarray:
    """(2^K, D) float64: the leaves of the tree prior (uniform)."""
    sampler = ContextSampler(data, dtype=torch.float64)
    K = data.depth
    bits = (torch.arange(2**K)[:, None] >> torch.arange(K - 1, -1, -1)[None, :]) & 1  # (2^K, K)
    return sampler.theta_from_signs((1 - 2 * bits).to(torch.int8)).numpy()


def _gaussian_posterior_mean(X, F, phi, C, n_latents: int, n_tokens: int, s2: float, rng,
                             attention: str = "linear") -> np.ndarray:
    """Posterior mean of theta ~ N(0, C) given the readings ``phi`` (k,) of keys ``F`` (n_x, k) on ``X``, by
    self-normalised importance sampling: ``n_latents`` draws from the Gaussian posterior of the linearised law
    (mean ``A theta`` with the Stein rows ``A``, the prior-averaged covariance), weighted by the CLT likelihood
    over the linearised one (both over the k readings only, so the weights stay tame). Softmax attention: ``F``
    are the scores; the proposal linearises with the keys ``w / E[w]`` (``w = exp(s)``, the same Stein rows and,
    to first order, the same noise, docs/theory.md section 2), the likelihood is the softmax law (``_reading_law``)."""
    from fvnum.keys.readings import law_posterior_mean

    scores = F
    if attention == "softmax":
        w = np.exp(F - F.max(0, keepdims=True))  # (n_x, k)
        F = w / w.mean(0, keepdims=True)  # the linear keys of the same Stein rows, for the proposal only
    n_x, k = F.shape
    A = F.T @ X / n_x  # (k, D) Stein rows: E[(theta.x) f] = A theta
    q = np.einsum("id,de,ie->i", X, C, X)  # (n_x,) x^T C x
    noise = ((F * (q + s2)[:, None]).T @ F / n_x - A @ C @ A.T) / n_tokens  # (k, k) E_theta Cov(phi | theta)
    noise = 0.5 * (noise + noise.T) + 1e-12 * np.trace(noise) * np.eye(k)
    S = A @ C @ A.T + noise  # Cov(phi)
    G = np.linalg.solve(S, A @ C).T  # (D, k) gain: posterior mean m = G phi, covariance C - G A C
    m, P = G @ phi, C - G @ A @ C
    L = np.linalg.cholesky(0.5 * (P + P.T) + 1e-12 * np.trace(C) * np.eye(len(C)))
    thetas = m + rng.standard_normal((n_latents, len(C))) @ L.T  # (M, D) draws of the proposal
    resid = phi - thetas @ A.T  # (M, k)
    lin = -0.5 * np.einsum("mk,mk->m", resid @ np.linalg.inv(noise), resid)  # linearised log-likelihood
    law = _reading_law(attention, X, scores, thetas, n_tokens=n_tokens, s2=s2)
    # law_posterior_mean adds the CLT log-likelihood; prior / proposal = (linearised likelihood)^-1 up to a constant
    return law_posterior_mean(thetas, -lin, law, phi)


def _reading_law(attention: str, X: np.ndarray, F: np.ndarray, thetas, *, n_tokens: int, s2: float):
    """The CLT law of the readings of keys ``F`` (n_x, k) on the token sample ``X`` (n_x, D) given each latent of
    ``thetas`` (``fvnum.keys.readings.ReadingLaw``): ``fvnum.keys.readings.law_from_key_values`` for linear attention; for softmax
    attention ``F`` holds the scores ``S`` and the law is the self-normalised one of docs/theory.md section 2,
    ``fvnum.keys.readings.law_from_scores(X, S, thetas, n_tokens=, s2=)``."""
    from fvnum.keys.readings import law_from_key_values, law_from_scores

    if attention == "linear":
        return law_from_key_values(X, F, thetas, n_tokens=n_tokens, s2=s2)
    return law_from_scores(X, F, thetas, n_tokens=n_tokens, s2=s2)


def _keys_at(model: WorkspaceModel, layer: int, X: torch.Tensor, projected, p: torch.Tensor | None) -> torch.Tensor:
    """Keys of layer ``layer`` on the token sample ``X`` (n_x, D) at each workspace ``p`` (b, B) (None: the
    empty workspace, one row), as the model computes them (its autocast): (b, n_x, d) float32; the scores of a
    softmax-attention layer."""
    keys = model.layers[layer - 1].keys
    b = 1 if p is None else p.shape[0]
    n_x = X.shape[0]
    with torch.no_grad(), _autocast(X.device, model.autocast):
        if projected is not None:
            k = keys.from_projection(projected.repeat(1, b), p, n_x)
        else:
            empty = X.new_zeros(1, model.budget) if p is None else p
            k = keys(X.expand(b, -1, -1), empty)
    return k.float()  # (b, n_x, d)


def audit_model(model: WorkspaceModel, data: DataConfig, *, samples: int = 1000, token_sample: int = 8192,
                n_latents: int = 512, seed: int = 0, batch: int = 256, key: str | None = None,
                name: str | None = None) -> Audit:
    """Audit ``model`` on contexts of ``data`` (module docstring); ``key`` and ``name`` only label it."""
    from fvnum.keys.readings import ReadingLaw
    from fvnum.keys.readings import law_posterior_mean

    if not isinstance(model, WorkspaceModel):
        why = (" (Model T's readings are its heads' outputs at the summary token: audit() measures their law, "
               "audit_measured)" if hasattr(model, "blocks") else "")
        raise InputError(f"audit needs a model of keys and a workspace (A, B, C), got {type(model).__name__}{why}")
    if not isinstance(data, DataConfig) or data.dim != model.dim:
        raise InputError(f"the model has D = {model.dim}; the data configuration must match, got {data!r:.80}")
    samples = check_int(samples, "samples", 2, 10**7)
    token_sample = check_int(token_sample, "token sample", 2, 10**7)
    n_latents = check_int(n_latents, "n_latents", 2, 10**6)
    seed = check_int(seed, "seed", 0, 2**63 - 1)
    batch = check_int(batch, "batch", 1, 10**6)
    L, d, B, D = model.n_layers, model.width, model.budget, model.dim
    latents = _latents(data)  # the exact decoder's latents: the tree's 2^K leaves, the atoms; None for a Gaussian
    tree = latents is not None
    atoms = None if data.has_leaves or not tree else len(latents[0])
    check_audit_cost(f"the audit of {name or 'a model'}", tree=tree, depth=data.depth, dim=D, layers=L, width=d,
                     budget=B, mlp_width=_mlp_width(model), hidden_layers=_hidden_layers(model), samples=samples,
                     token_sample=token_sample, n_latents=n_latents, batch=batch, atoms=atoms)
    thetas, log_prior = latents if tree else (None, None)  # (M, D), (M,)
    decoder = (EXACT if atoms is None else EXACT_ATOMS.format(m=atoms)) if tree else APPROXIMATE.format(n=n_latents)
    C = ContextSampler(data, dtype=torch.float64).cov.numpy()  # (D, D) prior covariance
    proposal_rng = np.random.default_rng(np.random.SeedSequence([seed, AUDIT_STREAM, 1]))
    N, s2 = data.n_tokens, data.s2
    rng = np.random.default_rng(np.random.SeedSequence([seed, AUDIT_STREAM]))
    X64 = rng.standard_normal((token_sample, D))  # (n_x, D) the fixed token sample
    device = next(iter(model.parameters()), torch.zeros(0)).device
    X = torch.from_numpy(X64).float().to(device)
    projected = model.token_projections(X[None])  # L x (mlp_width, n_x) or L x None
    with torch.no_grad():
        first = _keys_at(model, 1, X, projected[0], None)[0].double().cpu().numpy()  # (n_x, d) layer 1: empty workspace
    attention = model.attention
    shared = _reading_law(attention, X64, first, thetas, n_tokens=N, s2=s2) if L == 1 and tree else None
    sub = max(1, _KEY_ENTRIES // (token_sample * max(_mlp_width(model), D)))
    sampler = ContextSampler(data, device)
    was_training = model.training
    model.eval()
    own, bayes, rows = [], [], []
    names = [f"layers.{l}.phi" for l in range(1, L + 1)] + [f"workspace.{l}" for l in range(1, L)]
    try:
        for i, start in enumerate(range(0, samples, batch)):
            b = min(batch, samples - start)
            c = sampler.sample(b, sampler.generator(seed, AUDIT_STREAM, i))
            with torch.no_grad(), record(model, names) as rec:
                out = model(c.x, c.y, c.x_q)
            phi = torch.cat([rec[f"layers.{l}.phi"] for l in range(1, L + 1)], 1).double().cpu().numpy()  # (b, B)
            F = np.empty((b, token_sample, B))  # keys of every layer on X at each context's own workspace
            F[:, :, :d] = first[None]
            for l in range(2, L + 1):
                p = rec[f"workspace.{l - 1}"]
                for a in range(0, b, sub):
                    F[a : a + sub, :, (l - 1) * d : l * d] = _keys_at(model, l, X, projected[l - 1], p[a : a + sub]).cpu().numpy()
            rows.append(_stein_rows(attention, X64, F))  # (b, B, D)
            if not tree:
                theta_b = np.stack([_gaussian_posterior_mean(X64, F[j], phi[j], C, n_latents, N, s2, proposal_rng,
                                                             attention) for j in range(b)])
            else:
                if shared is not None:
                    law = shared
                else:
                    laws = [_reading_law(attention, X64, F[j], thetas, n_tokens=N, s2=s2) for j in range(b)]
                    law = ReadingLaw(np.stack([w.mean for w in laws]), np.stack([w.cov for w in laws]))
                theta_b = law_posterior_mean(thetas, log_prior, law, phi)  # (b, D)
            theta = c.theta.double().cpu().numpy()
            if model.decodes:
                own.append(((out.theta_hat.double().cpu().numpy() - theta) ** 2).sum(1))
                bayes.append(((theta_b - theta) ** 2).sum(1))
            else:
                target, x_q = c.target.double().cpu().numpy(), c.x_q.double().cpu().numpy()
                own.append((out.y_hat.double().cpu().numpy() - target) ** 2)
                bayes.append(((theta_b * x_q).sum(1) - target) ** 2)
    finally:
        model.train(was_training)
    own, bayes = np.concatenate(own), np.concatenate(bayes)
    return Audit(key, name, data, B, L, "theta" if model.decodes else "query", Estimate.of(own), Estimate.of(bayes),
                 Estimate.of(own - bayes), _stein(np.concatenate(rows), L, d, data.depth), decoder, samples,
                 token_sample, len(thetas) if tree else n_latents, seed)


def _stein_rows(attention: str, X: np.ndarray, F: np.ndarray) -> np.ndarray:
    """Stein rows of keys ``F`` (b, n_x, k) on ``X`` (n_x, D): ``E[x f(x)]`` (linear), or ``E[x w] / E[w]`` with
    ``w = exp(s)`` for scores (softmax, docs/theory.md section 2), the token sample's own averages. (b, k, D)."""
    if attention == "linear":
        return np.einsum("nd,bnk->bkd", X, F) / X.shape[0]
    w = np.exp(F - F.max(1, keepdims=True))  # (b, n_x, k)
    return np.einsum("nd,bnk->bkd", X, w / w.sum(1, keepdims=True))


def _mlp_width(model: WorkspaceModel) -> int:
    lin = model.layers[0].keys.token_linear
    return lin.out_features if lin is not None else 1


def _stein(rows: np.ndarray, L: int, d: int, depth: int | None) -> tuple:
    """Per layer and channel: mean ``||row||`` and mean energy share by node depth (``depth`` None, a prior
    without a heap of nodes such as the atoms prior: by coordinate); rows (n, B, D)."""
    D = rows.shape[-1]
    node_depth = np.array([int(n).bit_length() if depth is not None else n for n in range(1, D + 1)])  # (D,)
    depth = int(node_depth.max())
    sq = rows**2
    total = np.maximum(sq.sum(-1, keepdims=True), 1e-300)
    share = sq / total  # (n, B, D)
    out = []
    for l in range(1, L + 1):
        for c in range(d):
            j = (l - 1) * d + c
            by_depth = tuple(float(share[:, j, node_depth == k].sum(1).mean()) for k in range(1, depth + 1))
            out.append(Stein(l, c + 1, float(np.sqrt(sq[:, j].sum(1)).mean()), by_depth))
    return tuple(out)


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
    from fvnum.keys.readings import ReadingLaw, law_posterior_mean

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
            bayes.append(((law_posterior_mean(thetas, log_prior, law, phi.double().numpy()) - theta) ** 2).sum(1))
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


__all__ = ["AUDIT_STREAM", "Audit", "MEASURED", "Stein", "audit", "audit_cost", "audit_lines", "audit_measured",
           "audit_model", "check_audit_cost", "load_run", "measured_laws", "readings_of"]
