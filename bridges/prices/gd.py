"""The prices of Model G (docs/theory.md section 13; ``bridges.models.gd``): its parameters, its activations and the
time of a training step, arithmetic on the configuration only (no torch), so a run is priced and memory-checked
before its network is built (``bridges.prices.memory``, ``bridges.prices.cost``).

Time: the multiply-adds of a step counted from the shapes (per layer and token ``2 D`` for the summary's reading and
``2 D`` for the residual update, ``(D + 1)^2`` three times for ``token`` values), times 3 for the backward pass, at
``NS_MAC`` ns each, plus ``LAYER_S`` a layer and ``STEP_S``. The constants were measured on this project's 2-core
machine with one thread a run while other work shared it (studies/gd/regime.md: D 15, batch 128, 130 steps/s at
N 120, L 4 and 300 to 600 at N 30, L 4), so they price a busy machine;
``bridges.prices.cost.SAFETY`` is on top.
"""
from __future__ import annotations

NS_MAC = 1.0  # ns a multiply-add of a step (forward and backward), float32, one thread: small einsums, far from peak
LAYER_S = 0.2e-3  # per layer and step: the autograd graph's small operations
STEP_S = 0.8e-3  # per step: Adam over the parameters, drawing the batch (N D normals a context)


def parameter_count(dim: int, layers: int, values: str) -> int:
    """The parameters of ``bridges.models.gd.GDModel``: per layer ``Gamma_l`` (and ``K_l`` for residual values), or
    for token values ``V``, ``Kappa`` (D x (D + 1)) and ``P``, ``Q`` ((D + 1) x (D + 1))."""
    if values == "token":
        return layers * (2 * dim * (dim + 1) + 2 * (dim + 1) ** 2)
    return layers * dim * dim * (2 if values == "residual" else 1)


def n_parameters(cfg) -> int:
    m = cfg.model
    return parameter_count(cfg.data.dim, m.layers, m.values)


def macs_per_context(cfg, n_tokens: int | None = None) -> float:
    """Multiply-adds of the forward pass of one context of ``n_tokens`` (default the data's N) tokens."""
    D, m = cfg.data.dim, cfg.model
    N = cfg.data.n_tokens if n_tokens is None else n_tokens
    per_layer = N * (3 * (D + 1) ** 2 + D) if m.values == "token" else N * 2 * D + D * D * 2
    return m.layers * per_layer + N * D  # + drawing y = X theta


def step_seconds(cfg) -> float:
    """Seconds of one training step on one thread at the run's batch (``ModelSpec.price``)."""
    return 3 * NS_MAC * 1e-9 * cfg.train.batch * macs_per_context(cfg) + LAYER_S * cfg.model.layers + STEP_S


def activation_bytes(cfg) -> float:
    """The activations a training step keeps for its backward pass (float32, at the schedule's largest batch): the
    tokens (x, y) and per layer and token the residual (token values: the whole token and its update)."""
    t, data, m = cfg.train, cfg.data, cfg.model
    n = max(data.n_tokens, t.tokens_from)
    contexts = max(t.batch, t.batch_late)
    per_token = (data.dim + 2) + m.layers * (2 * (data.dim + 1) if m.values == "token" else 2)
    return 4.0 * contexts * n * per_token * 2  # x2: autograd's temporaries beside the saved tensors
