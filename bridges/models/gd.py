"""Model G, deep linear self-attention in context (docs/theory.md section 13): no MLP, no normalisation.

The ``N`` context tokens carry ``(x_i, r_i)``, ``r_i = y_i`` at the start, beside one *summary* token that holds
``theta_hat`` (zero at the start). Layer ``l = 1..L``:

- ``D`` heads write into the summary: head ``k`` has a learned query against keys linear in ``x_j`` and value
  ``r_j``, so the summary adds ``Gamma_l m_l`` to ``theta_hat``, ``m_l = (1/N) sum_j x_j r_j`` (``Gamma_l`` learned,
  D x D);
- one more head updates every token's ``r_i`` by ``- (1/N) sum_j (x_i^T K_l x_j) r_j = - x_i^T K_l m_l`` (``K_l``
  learned, D x D).

``values`` says what the values read: ``residual`` (the running ``r_j``; with ``K_l = Gamma_l`` the layers are L
steps of preconditioned gradient descent on the context's squared error, ``theta_hat_l = theta_hat_(l-1) +
Gamma_l (1/N) X^T (y - X theta_hat_(l-1))``, so ``fvnum.gd_steps`` is its prediction); ``label`` (the original
``y_j`` at every layer, no ``r`` update: depth buys nothing beyond one layer in the mean-field limit); ``token``
(full linear self-attention: with ``z_j = (x_j, r_j)`` and ``M_l = (1/N) sum_j z_j z_j^T``, head ``k`` of the summary
adds ``v_k^T M_l kappa_k`` to ``theta_hat_k`` and every token moves, ``z_i <- z_i + P_l M_l Q_l z_i``, its ``x_i`` too;
residual values are the case ``v_k = e_r``, ``kappa_k = (Gamma_l[k], 0)``, ``P_l = -e_r e_r^T``, ``Q_l = K_l^T`` on
the x block). The summary receives ``D`` scalars a layer: budget ``L D``. Readout: ``theta_hat`` itself, trained with
the theta loss.

Taps (``bridges.models.taps``), layers numbered ``1..L``:

- ``workspace.{l}``  (batch, D)  ``theta_hat`` after layer ``l``
- ``layers.{l}.residual``  (batch, N)  ``r`` after layer ``l`` (for ``label`` values the labels, never updated)
- ``theta_hat``  (batch, D)  the decoded latent
"""
from __future__ import annotations

import math

from bridges.errors import require

require(__name__)  # torch: without it, one line naming the extra

import torch
from torch import nn

from bridges.models.networks import Output
from bridges.models.shapes import VALUES
from bridges.models.taps import Tap
from bridges.runs.config import DataConfig, ModelConfig
from fvsym.errors import InputError

INIT_SCALE = 0.1  # learned matrices start as INIT_SCALE / sqrt(D) times standard normals (near zero, not zero)


class GDLayer(nn.Module):
    """One layer of Model G: ``D`` heads into the summary and one head that updates the tokens."""

    def __init__(self, index: int, dim: int, values: str):
        super().__init__()
        self.index, self.dim, self.values = index, dim, values
        s = INIT_SCALE / math.sqrt(dim)
        if values == "token":
            e = dim + 1  # a token (x, r)
            self.V = nn.Parameter(torch.randn(dim, e) * s)  # head k's value row v_k
            self.Kappa = nn.Parameter(torch.randn(dim, e) * s)  # head k's key row kappa_k (its query folded in)
            self.P = nn.Parameter(torch.randn(e, e) * s)  # the token head's output map
            self.Q = nn.Parameter(torch.randn(e, e) * s)  # the token head's query-key product
        else:
            self.Gamma = nn.Parameter(torch.randn(dim, dim) * s)  # Gamma_l
            if values == "residual":
                self.K = nn.Parameter(torch.randn(dim, dim) * s)  # K_l
        self.tap_residual = Tap(f"layers.{index}.residual")
        self.tap_workspace = Tap(f"workspace.{index}")

    def forward(self, x: torch.Tensor, r: torch.Tensor, y: torch.Tensor, theta_hat: torch.Tensor):
        N = x.shape[1]
        if self.values == "token":
            z = torch.cat([x, r.unsqueeze(-1)], -1)  # (batch, N, D + 1)
            M = torch.einsum("bje,bjf->bef", z, z) / N  # (batch, D + 1, D + 1)
            theta_hat = theta_hat + torch.einsum("ke,bef,kf->bk", self.V, M, self.Kappa)  # (batch, D)
            z = z + torch.einsum("ef,bfg,gh,bih->bie", self.P, M, self.Q, z)  # (batch, N, D + 1)
            x, r = z[..., :-1], z[..., -1]
        else:
            v = r if self.values == "residual" else y  # (batch, N) the values
            m = torch.einsum("bjd,bj->bd", x, v) / N  # (batch, D)  (1/N) sum_j x_j v_j
            theta_hat = theta_hat + m @ self.Gamma.T  # (batch, D)  + Gamma_l m
            if self.values == "residual":
                r = r - torch.einsum("bid,bd->bi", x, m @ self.K.T)  # (batch, N)  - x_i^T K_l m
        return x, self.tap_residual(r), self.tap_workspace(theta_hat)


class GDModel(nn.Module):
    """Model G: ``L`` layers of deep linear self-attention over the context and a summary token (``theta_hat``)."""

    decodes = True

    def __init__(self, dim: int, layers: int, values: str = "residual"):
        super().__init__()
        if values not in VALUES:
            raise InputError(f"values must be one of {', '.join(VALUES)}, got {values!r} (docs/theory.md section 13)")
        self.dim, self.n_layers, self.values = dim, layers, values
        self.width = dim  # the summary receives D scalars a layer
        self.budget = layers * dim
        self.blocks = nn.ModuleList(GDLayer(l + 1, dim, values) for l in range(layers))
        self.tap_theta = Tap("theta_hat")
        self.autocast: torch.dtype | None = None  # float32 throughout

    @property
    def state_size(self) -> int:
        """Entries of the tap ``workspace.{l}``: ``theta_hat``, D."""
        return self.dim

    def state_width(self, layer: int) -> int:
        return self.dim

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``theta_hat`` after the last layer, (batch, D)."""
        r = y  # (batch, N)
        theta_hat = x.new_zeros(x.shape[0], self.dim)  # (batch, D) the summary, empty at the start
        for layer in self.blocks:
            x, r, theta_hat = layer(x, r, y, theta_hat)
        return theta_hat

    def decode(self, p: torch.Tensor) -> torch.Tensor:
        """The summary holds ``theta_hat``: the readout is the identity (tapped)."""
        return self.tap_theta(p)

    def forward(self, x: torch.Tensor, y: torch.Tensor, x_q: torch.Tensor) -> Output:
        p = self.encode(x, y)  # (batch, D)
        theta_hat = self.decode(p)  # (batch, D)
        return Output((theta_hat * x_q).sum(-1), theta_hat, p)

    def set_steps(self, gammas, *, K=None) -> "GDModel":
        """Set ``Gamma_l = gamma_l I`` and ``K_l = gamma_l I`` (or ``K_l = K[l] I``) by hand (residual and label
        values): then residual values are ``L`` steps of gradient descent with steps ``gamma_l``. Returns self."""
        if self.values == "token" or len(gammas) != self.n_layers:
            raise InputError(f"set_steps takes {self.n_layers} steps of a model with residual or label values")
        K = gammas if K is None else K
        eye = torch.eye(self.dim, dtype=self.blocks[0].Gamma.dtype)
        with torch.no_grad():
            for layer, g, k in zip(self.blocks, gammas, K):
                layer.Gamma.copy_(float(g) * eye)
                if self.values == "residual":
                    layer.K.copy_(float(k) * eye)
        return self


def gd_network(data: DataConfig, mc: ModelConfig) -> GDModel:
    """Model G of a run configuration: ``layers`` and ``values``."""
    return GDModel(data.dim, mc.layers, mc.values)
