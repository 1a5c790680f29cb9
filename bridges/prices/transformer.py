"""The prices of Model T (docs/theory.md section 7.1; ``bridges.models.transformer``): its parameters, its activations
and the time of a training step, arithmetic on the configuration only (no torch), so a run is priced and
memory-checked before its network is built (``bridges.prices.memory``, ``bridges.prices.cost``).

Time: the multiply-adds of a step counted from the shapes (the embedding of every token, per block and token the
projections ``q, k, v, W_O`` and the MLP, the attention's ``T (head_dim + d)`` per head and token, the readout of
the summary), times 3 for the backward pass, at ``NS_MAC`` ns each, plus ``BLOCK_S`` a block and ``STEP_S``. The
constants were measured on this project's 2-core machine with one thread a run while other work shared it
(depth 7, N 64, batch 128, d_model 64, head_dim 16, mlp_width 128: deep T 31 ms a step at budget 1 and 99 ms at
budget 4, wide T 44 ms at budget 4), so they price a busy machine; ``bridges.prices.cost.SAFETY`` is on top.
"""
from __future__ import annotations

NS_MAC = 0.045  # ns a multiply-add of a step (forward and backward), float32, one thread
BLOCK_S = 1.5e-3  # per block and step: LayerNorms, GELU, softmax and the autograd graph's small operations
STEP_S = 4e-3  # per step: Adam over the parameters, drawing the batch


def parameter_count(dim: int, layers: int, heads: int, width: int, *, head_dim: int, d_model: int,
                    mlp_width: int) -> int:
    """The parameters of ``bridges.models.transformer.TransformerModel`` (weights and biases)."""
    attn = 2 * (d_model * heads * head_dim + heads * head_dim) + d_model * heads * width + heads * width \
        + heads * width * d_model + d_model
    block = 2 * 2 * d_model + attn + d_model * mlp_width + mlp_width + mlp_width * d_model + d_model
    return (dim + 1) * d_model + d_model + d_model + layers * block + 2 * d_model + d_model * dim + dim


def _shape(cfg):
    from bridges.models.shapes import resolved

    L, H, d = resolved(cfg.model)
    return L, H, d, cfg.model.head_dim, cfg.model.d_model, cfg.model.mlp_width


def n_parameters(cfg) -> int:
    L, H, d, hd, dm, mw = _shape(cfg)
    return parameter_count(cfg.data.dim, L, H, d, head_dim=hd, d_model=dm, mlp_width=mw)


def macs_per_context(cfg, n_tokens: int | None = None) -> float:
    """Multiply-adds of the forward pass of one context of ``n_tokens`` (default the data's N) tokens."""
    L, H, d, hd, dm, mw = _shape(cfg)
    T = (cfg.data.n_tokens if n_tokens is None else n_tokens) + 1  # the summary token too
    block = dm * (2 * H * hd + H * d) + H * d * dm + 2 * dm * mw + T * H * (hd + d)
    return T * ((cfg.data.dim + 1) * dm + L * block) + dm * cfg.data.dim


def step_seconds(cfg) -> float:
    """Seconds of one training step on one thread at the run's batch (``ModelSpec.price``)."""
    L = _shape(cfg)[0]
    return 3 * NS_MAC * 1e-9 * cfg.train.batch * macs_per_context(cfg) + BLOCK_S * L + STEP_S


def activation_bytes(cfg) -> float:
    """The activations a training step keeps for its backward pass (float32, at the schedule's largest batch): per
    token and block the LayerNorms, ``q, k, v``, the heads' outputs, the residual and the MLP's hidden layer twice,
    and the softmax weights of every head over the ``T`` tokens."""
    L, H, d, hd, dm, mw = _shape(cfg)
    t, data = cfg.train, cfg.data
    n = max(data.n_tokens, t.tokens_from) + 1
    contexts = max(t.batch, t.batch_late)
    per_token = (data.dim + 2) + dm + L * (6 * dm + 2 * H * hd + 2 * H * d + 2 * mw
                                          + (2 * n * H if cfg.model.attention == "softmax" else 0))
    return 4.0 * contexts * n * per_token * 2  # x2: autograd's temporaries beside the saved tensors
