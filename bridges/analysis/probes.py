"""Function-vector probes (docs/theory.md section 9): how well the workspace after layer ``l`` decodes the
path prefix ``s_1 .. s_l`` and each sign ``s_k``.

The probe is linear: a ridge-regularised least-squares fit of one-hot targets on standardised
features (with a bias), fitted on one half of the samples and scored on the other (held out).
It works on plain arrays, so the same code probes a trained model's workspace and the theory
strategy's function vector ``Phi_l``: ``workspace_probes`` (a model's recorded ``workspace.{l}``) and
``theory_probes`` (``fvnum``'s ``Phi_l``) at the bottom import torch and fvnum only when called.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from fvsym.errors import InputError

from bridges.runs.results import DictLayout


@dataclass(frozen=True)
class ProbeScore:
    """Held-out accuracy of a probe with its binomial standard error and the chance level."""

    accuracy: float
    stderr: float
    chance: float
    n_test: int

    def to_dict(self) -> dict:
        return {"accuracy": self.accuracy, "stderr": self.stderr, "chance": self.chance, "n_test": self.n_test}


def _design(features: np.ndarray, mean, scale) -> np.ndarray:
    z = (features - mean) / scale
    return np.hstack([z, np.ones((z.shape[0], 1))])


def linear_probe(features, labels, *, ridge: float = 1e-3, seed: int = 0) -> ProbeScore:
    """Fit a linear probe ``features -> labels`` on a random half, score accuracy on the other half.

    ``features``: (n, f) array; ``labels``: (n,) integer classes.
    """
    X = np.asarray(features, dtype=float)
    y = np.asarray(labels)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise InputError(f"probe needs features (n, f) and labels (n,), got {X.shape} and {y.shape}")
    if X.shape[0] < 4:
        raise InputError(f"probe needs at least 4 samples, got {X.shape[0]}")
    classes, y_idx = np.unique(y, return_inverse=True)
    rng = np.random.default_rng(seed)
    order = rng.permutation(X.shape[0])
    half = X.shape[0] // 2
    train, test = order[:half], order[half:]
    chance = float(np.bincount(y_idx[train], minlength=len(classes)).max() / len(train))
    if len(classes) == 1 or X.shape[1] == 0:
        majority = np.bincount(y_idx[train], minlength=len(classes)).argmax()
        acc = float(np.mean(y_idx[test] == majority))
    else:
        mean = X[train].mean(axis=0)
        scale = X[train].std(axis=0) + 1e-12
        A = _design(X[train], mean, scale)
        T = np.eye(len(classes))[y_idx[train]]
        coef = np.linalg.solve(A.T @ A + ridge * len(train) * np.eye(A.shape[1]), A.T @ T)
        pred = (_design(X[test], mean, scale) @ coef).argmax(axis=1)
        acc = float(np.mean(pred == y_idx[test]))
    n = len(test)
    return ProbeScore(acc, float(np.sqrt(max(acc * (1 - acc), 1.0 / n) / n)), chance, n)


def _triple(p: ProbeScore) -> list:
    return [p.accuracy, p.stderr, p.chance]


def prefix_labels(signs: np.ndarray, length: int) -> np.ndarray:
    """Integer code of the prefix ``s_1 .. s_length`` of each row of ``signs`` (n, K) in {+1, -1}."""
    signs = np.asarray(signs)
    code = np.zeros(signs.shape[0], dtype=np.int64)
    for k in range(length):
        code = 2 * code + (signs[:, k] < 0)
    return code


@dataclass(frozen=True)
class ProbeTable(DictLayout):
    """Linear probes of every layer's function vector (:func:`probe_layers`, :func:`workspace_probes`,
    :func:`theory_probes`): ``prefix[l-1] = [accuracy, stderr, chance]`` of decoding the path prefix
    ``s_1..s_l`` (capped at K) from layer ``l``'s state; ``sign[l-1][k]`` the accuracy of the sign ``s_{k+1}``
    alone; ``final_prefix[m-1]`` the prefix ``s_1..s_m`` from the last state; ``control`` the prefix probe on
    rows shuffled across samples (None where not run); ``n`` contexts (or samples) and ``layers`` L where known.
    ``to_dict()`` is the JSON layout of the run store; ``to_frame()`` one row per layer."""

    prefix: list
    sign: list
    final_prefix: list
    control: list | None = None
    n: int | None = None
    layers: int | None = None

    def to_dict(self) -> dict:
        d = {"prefix": self.prefix, "sign": self.sign, "final_prefix": self.final_prefix}
        if self.control is not None:
            d["control"] = self.control
        if self.n is not None:
            d["n"], d["layers"] = self.n, self.layers
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ProbeTable":
        return cls(d["prefix"], d["sign"], d["final_prefix"], d.get("control"), d.get("n"), d.get("layers"))

    def to_frame(self):
        """One row per layer ``l``: the prefix probe (accuracy, stderr, chance), its shuffled control, and the
        accuracy of each sign ``s_k`` alone (``sign_1..sign_K``); pandas is optional."""
        from fvnum.estimate import to_frame

        rows = []
        for l, (acc, se, chance) in enumerate(self.prefix, start=1):
            row = {"layer": l, "prefix_accuracy": acc, "prefix_stderr": se, "chance": chance}
            if self.control is not None:
                row["control_accuracy"] = self.control[l - 1][0]
            row.update({f"sign_{k}": a for k, a in enumerate(self.sign[l - 1], start=1)})
            rows.append(row)
        return to_frame(rows, "a ProbeTable")


def probe_layers(workspaces, signs, *, seed: int = 0, control: bool = False) -> ProbeTable:
    """Probe every layer's function vector.

    ``workspaces``: list over layers ``l = 1..L`` of (n, f_l) arrays (the state after layer ``l``);
    ``signs``: (n, K) leaf signs. Returns ``{"prefix": [[acc, se, chance] per layer],
    "sign": [[acc per k] per layer], "final_prefix": [[acc, se, chance] per m]}`` where ``prefix[l-1]``
    decodes ``s_1..s_l`` (capped at ``K``) from layer ``l``'s state and ``final_prefix[m-1]`` decodes
    ``s_1..s_m`` from the last state (so one-layer models compare with deep ones level by level), as a
    :class:`ProbeTable` (``n`` and ``layers`` set).
    ``control=True`` adds ``"control"``: the prefix probe of each layer on the same features with their rows
    shuffled across samples (same marginals, no relation to the leaf), which must stay at chance.
    """
    signs = np.asarray(signs)
    if signs.ndim != 2:
        raise InputError(f"signs must be an (n, K) array, got shape {signs.shape}")
    K = signs.shape[1]
    prefix, per_sign, ctrl = [], [], []
    shuffle = np.random.default_rng([seed, 1]).permutation(signs.shape[0])
    for l, ws in enumerate(workspaces, start=1):
        m = min(l, K)
        labels = prefix_labels(signs, m)
        p = linear_probe(ws, labels, seed=seed)
        prefix.append([p.accuracy, p.stderr, p.chance])
        per_sign.append([linear_probe(ws, signs[:, k], seed=seed).accuracy for k in range(K)])
        if control:
            c = linear_probe(np.asarray(ws)[shuffle], labels, seed=seed)
            ctrl.append([c.accuracy, c.stderr, c.chance])
    final = np.asarray(workspaces[-1])
    return ProbeTable(prefix, per_sign,
                      [_triple(linear_probe(final, prefix_labels(signs, m), seed=seed)) for m in range(1, K + 1)],
                      ctrl if control else None, int(signs.shape[0]), len(prefix))


# --- probes of models and of the theory (torch and fvnum are imported inside) -----------------------
PROBE_STREAM = 3  # data stream of probe contexts (training 0, held-out evaluation 1, patching 2)
_PROBE_CHUNK = 256


def workspace_probes(model, data_cfg, *, n_contexts: int = 4096, seed: int = 0) -> ProbeTable:
    """``probe_layers`` (with the shuffled control) on a model's recorded workspace ``workspace.{l}`` after
    each layer ``l = 1..L`` (one entry for the one-layer Models B and C), over ``n_contexts`` fresh
    tree-prior contexts (chunk ``c`` drawn from ``step_generator(seed, PROBE_STREAM, c)``); half fit the
    probes, half score them. ``n``: the contexts, ``layers``: L."""
    import torch

    from bridges.training.data import ContextSampler
    from bridges.patching.keys import check_count, check_model_data, check_seed, check_tree_data, model_device
    from bridges.models.taps import record

    check_tree_data(data_cfg)
    check_model_data(model, data_cfg)
    n, seed = check_count(n_contexts), check_seed(seed)
    if n < 4:
        raise InputError(f"n_contexts must be >= 4 for a held-out probe, got {n}")
    sampler = ContextSampler(data_cfg, model_device(model))
    L = model.n_layers
    names = [f"workspace.{l}" for l in range(1, L + 1)]
    feats, signs = [[] for _ in names], []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for c, start in enumerate(range(0, n, _PROBE_CHUNK)):
                ctx = sampler.sample(min(_PROBE_CHUNK, n - start), sampler.generator(seed, PROBE_STREAM, c))
                with record(model, names) as r:
                    model(ctx.x, ctx.y, ctx.x_q)
                for f, name in zip(feats, names):
                    f.append(r[name].double().cpu().numpy())
                signs.append(ctx.signs.cpu().numpy())
    finally:
        model.train(was_training)
    return probe_layers([np.concatenate(f) for f in feats], np.concatenate(signs), seed=seed, control=True)


def theory_probes(data_cfg, budget: int, strategy: str = "path", *, samples: int = 4096, seed: int = 0) -> ProbeTable:
    """``probe_layers`` (with the shuffled control) on the function vectors ``Phi_l`` of a theory strategy
    (``fvnum.loss_mc(..., record=True).function_vectors`` under the tokens channel of ``data_cfg``'s ``N`` and ``s2``).
    ``n``: the samples, ``layers``: L of the strategy."""
    from fvnum import loss_mc, tokens
    from fvnum.priors.tree import numeric_prior

    from bridges.training.data import fv_prior
    from bridges.patching.keys import check_tree_data

    check_tree_data(data_cfg)
    prior = fv_prior(data_cfg)
    fv = loss_mc(prior, strategy, budget, tokens(data_cfg.n_tokens, data_cfg.s2), samples=samples, seed=seed,
                 record=True).function_vectors
    L = fv.phi.shape[1]
    signs = numeric_prior(prior).signs(fv.leaves)
    return probe_layers([fv.Phi(l) for l in range(1, L + 1)], signs, seed=seed, control=True)


PREDICTION_STATES = ("readings", "posterior")


def prediction_probes(data_cfg, budget: int, *, samples: int = 4096, seed: int = 0,
                      state: str = "readings") -> ProbeTable:
    """``probe_layers`` (with the shuffled control) on the state of Model A's prediction policy
    (``best_adaptive_keyed``: the greedy adaptive keyed search behind A's prediction row,
    ``fvnum.keys.adaptive.adaptive_keyed_trace`` on ``samples`` samples, seed ``seed``) after each layer ``l``:
    ``state="readings"``, its readings ``phi_1..phi_l``, as Model A's workspace holds its own; ``"posterior"``,
    the exact Bayes posterior mean of ``theta`` after them (D numbers: what the readings say, made linear; the
    policy's rows change with the sample, so what a raw reading means depends on the readings before it, which a
    linear probe of the readings cannot follow). The search chooses its rows per sample, so there is no fixed key
    to patch: this is the probe half of the causal tables only. Priced before it runs
    (``fvnum.keys.adaptive.adaptive_keyed_trace_cost``; a time cap refuses it in one line)."""
    from fvnum.keys.adaptive import adaptive_keyed_trace, adaptive_keyed_trace_cost
    from fvsym.guards.limits import check_time
    from fvnum.mc.channels import tokens
    from fvnum.priors.tree import numeric_prior

    from bridges.training.data import fv_prior
    from bridges.patching.keys import check_count, check_seed, check_tree_data

    check_tree_data(data_cfg, "probing the prediction policy", "the signs of a leaf")
    n, seed = check_count(samples, "samples"), check_seed(seed)
    if n < 4:
        raise InputError(f"samples must be >= 4 for a held-out probe, got {n}")
    if state not in PREDICTION_STATES:
        raise InputError(f"state must be one of {', '.join(PREDICTION_STATES)}, got {state!r:.40}")
    check_time(f"the prediction policy's search at depth {data_cfg.depth}, budget {budget} on {n} samples",
               adaptive_keyed_trace_cost(data_cfg.depth, data_cfg.dim, budget, n))
    prior = fv_prior(data_cfg)
    trace = adaptive_keyed_trace(prior, budget, tokens(data_cfg.n_tokens, data_cfg.s2, keys="weighted"), samples=n,
                                 seed=seed)
    signs = numeric_prior(prior).signs(trace.leaves)
    states = ([trace.phi[:, :l] for l in range(1, budget + 1)] if state == "readings"
              else [trace.theta_hat[:, l] for l in range(budget)])
    return probe_layers(states, signs, seed=seed, control=True)
