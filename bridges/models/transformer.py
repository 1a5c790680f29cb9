"""Model T, a standard transformer held to the theory (docs/theory.md section 7.1).

The ``N`` context tokens are embedded linearly, ``e_i = E [x_i, y_i]`` (``d_model``), beside one learned *summary*
token ``e_0``; no positions (the context is exchangeable). ``L`` pre-LayerNorm blocks, ``h <- h + Attn_l(LN(h))``
then ``h <- h + MLP_l(LN(h))`` (one hidden layer of ``mlp_width``, GELU); attention has ``H`` heads, each with
queries and keys of ``head_dim`` and values of ``d`` (``width``, the theory's channels), ``W_O`` maps the ``H d``
values back to ``d_model``; every token attends to every token, ``softmax`` (scaled by ``head_dim^-1/2``) or
``linear`` (scores ``q.k`` averaged over the ``N + 1`` tokens). Readout ``theta_hat = R LN(h_0)`` from the summary
token, trained with the theta loss as Model A is. Budget: the summary receives ``H d`` scalars a block,
``B = L H d``.

Taps (``bridges.models.taps``), with TransformerLens's names and the blocks numbered ``1..L`` as docs/theory.md numbers
layers (TransformerLens's ``blocks.0`` is ``blocks.1`` here):

- ``blocks.{l}.attn.hook_q`` / ``hook_k``  (batch, N + 1, H, head_dim)  queries and keys (token 0 is the summary)
- ``blocks.{l}.attn.hook_v``  (batch, N + 1, H, d)  values
- ``blocks.{l}.attn.hook_z``  (batch, N + 1, H, d)  the heads' outputs, before ``W_O``
- ``blocks.{l}.hook_attn_out`` / ``hook_mlp_out`` / ``hook_resid_post``  (batch, N + 1, d_model)
- ``workspace.{l}``  (batch, d_model)  the summary token's residual after block ``l``: the state ``Phi_l``
- ``theta_hat``  (batch, D)  the decoded latent
"""
from __future__ import annotations

import math

from bridges.errors import require

require(__name__)  # torch: without it, one line naming the extra

import torch
from torch import nn
from torch.nn import functional as F

from bridges.models.networks import Output
from bridges.models.taps import Tap
from bridges.runs.config import DataConfig, ModelConfig
from fvsym.errors import InputError


class Attention(nn.Module):
    """``H`` heads over every token; ``softmax`` or ``linear`` scores."""

    def __init__(self, index: int, d_model: int, heads: int, head_dim: int, width: int, attention: str):
        super().__init__()
        if attention not in ("linear", "softmax"):
            raise InputError(f"attention must be 'linear' or 'softmax', got {attention!r}")
        self.heads, self.head_dim, self.width, self.attention = heads, head_dim, width, attention
        self.W_Q = nn.Linear(d_model, heads * head_dim)
        self.W_K = nn.Linear(d_model, heads * head_dim)
        self.W_V = nn.Linear(d_model, heads * width)
        self.W_O = nn.Linear(heads * width, d_model)
        prefix = f"blocks.{index}.attn."
        self.hook_q, self.hook_k = Tap(prefix + "hook_q"), Tap(prefix + "hook_k")
        self.hook_v, self.hook_z = Tap(prefix + "hook_v"), Tap(prefix + "hook_z")

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        b, T, _ = h.shape
        H = self.heads
        q = self.hook_q(self.W_Q(h).view(b, T, H, self.head_dim))  # (batch, T, H, head_dim)
        k = self.hook_k(self.W_K(h).view(b, T, H, self.head_dim))  # (batch, T, H, head_dim)
        v = self.hook_v(self.W_V(h).view(b, T, H, self.width))  # (batch, T, H, d)
        if self.attention == "softmax":
            z = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))  # (b, H, T, d)
            z = z.transpose(1, 2)  # (batch, T, H, d)
        else:  # scores q.k averaged over the tokens: (1/T) sum_j (q_i . k_j) v_j, keys and values first
            kv = torch.einsum("bjhe,bjhw->bhew", k, v) / T  # (batch, H, head_dim, d)
            z = torch.einsum("bihe,bhew->bihw", q, kv)  # (batch, T, H, d)
        z = self.hook_z(z)
        return self.W_O(z.reshape(b, T, H * self.width))  # (batch, T, d_model)


class Block(nn.Module):
    """One pre-LayerNorm block; the summary token's residual after it is ``workspace.{index}``."""

    def __init__(self, index: int, d_model: int, heads: int, head_dim: int, width: int, mlp_width: int,
                 attention: str):
        super().__init__()
        self.index = index
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(index, d_model, heads, head_dim, width, attention)
        self.mlp = nn.Sequential(nn.Linear(d_model, mlp_width), nn.GELU(), nn.Linear(mlp_width, d_model))
        prefix = f"blocks.{index}."
        self.hook_attn_out, self.hook_mlp_out = Tap(prefix + "hook_attn_out"), Tap(prefix + "hook_mlp_out")
        self.hook_resid_post = Tap(prefix + "hook_resid_post")
        self.tap_workspace = Tap(f"workspace.{index}")

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.hook_attn_out(self.attn(self.ln1(h)))  # (batch, T, d_model)
        h = h + self.hook_mlp_out(self.mlp(self.ln2(h)))
        h = self.hook_resid_post(h)
        summary = self.tap_workspace(h[:, 0])  # (batch, d_model): Phi_l
        return torch.cat([summary.unsqueeze(1), h[:, 1:]], 1)


class TransformerModel(nn.Module):
    """Model T: ``L`` blocks of ``H`` heads of ``d`` values over the context and a summary token."""

    decodes = True

    def __init__(self, dim: int, layers: int, heads: int, width: int, *, head_dim: int, d_model: int,
                 mlp_width: int, attention: str = "softmax"):
        super().__init__()
        self.dim, self.n_layers, self.heads, self.value_width = dim, layers, heads, width
        self.width = heads * width  # the theory's channels a layer: what the summary receives from a block
        self.budget = layers * self.width
        self.d_model, self.attention = d_model, attention
        self.embed = nn.Linear(dim + 1, d_model)  # e_i = E [x_i, y_i]
        self.summary = nn.Parameter(torch.randn(d_model) / math.sqrt(d_model))  # e_0
        self.blocks = nn.ModuleList(Block(l + 1, d_model, heads, head_dim, width, mlp_width, attention)
                                    for l in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.readout = nn.Linear(d_model, dim)  # theta_hat = R LN(h_0)
        self.tap_theta = Tap("theta_hat")
        self.autocast: torch.dtype | None = None  # float32 throughout (the run records it)

    # --- what the interventions ask of a model (bridges.patching) ---------------------------------------
    @property
    def state_size(self) -> int:
        """Entries of the tap ``workspace.{l}``: the summary token's residual, ``d_model``."""
        return self.d_model

    def state_width(self, layer: int) -> int:
        """Entries of ``workspace.{layer}`` that hold ``Phi_layer``: the whole summary residual."""
        return self.d_model

    def key_tap_name(self, layer: int) -> str:
        return f"blocks.{layer}.attn.hook_k"

    def key_patch(self, layer: int, donor: dict):
        """``(tap name, function)`` of key patching at block ``layer``: the keys of every context token replaced by
        the donor's (``hook_k``), the summary token's own key kept."""
        name = self.key_tap_name(layer)
        keys = donor[name]

        def replace(k: torch.Tensor) -> torch.Tensor:
            return torch.cat([k[:, :1], keys[:, 1:].to(k)], 1)

        return name, replace

    def embed_tokens(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The residual stream before block 1: the summary token, then the ``N`` embedded tokens,
        (batch, N + 1, d_model)."""
        tokens = self.embed(torch.cat([x, y.unsqueeze(-1)], -1))  # (batch, N, d_model)
        return torch.cat([self.summary.expand(x.shape[0], 1, -1), tokens], 1)

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The summary token's residual after the last block, ``Phi_L``: (batch, d_model)."""
        h = self.embed_tokens(x, y)
        for block in self.blocks:
            h = block(h)
        return h[:, 0]

    def decode(self, p: torch.Tensor) -> torch.Tensor:
        """``theta_hat = R LN(p)`` of a summary residual ``p`` (batch, d_model): (batch, D)."""
        return self.tap_theta(self.readout(self.ln_f(p)))

    def forward(self, x: torch.Tensor, y: torch.Tensor, x_q: torch.Tensor) -> Output:
        p = self.encode(x, y)  # (batch, d_model)
        theta_hat = self.decode(p)  # (batch, D)
        return Output((theta_hat * x_q).sum(-1), theta_hat, p)


def transformer_network(data: DataConfig, mc: ModelConfig) -> TransformerModel:
    """Model T of a run configuration: its shape (``bridges.models.shapes``), sizes and attention."""
    from bridges.models.shapes import resolved

    L, H, d = resolved(mc)
    return TransformerModel(data.dim, L, H, d, head_dim=mc.head_dim, d_model=mc.d_model, mlp_width=mc.mlp_width,
                            attention=mc.attention)
