"""Constrained linear-attention transformers, Models A, B, C of THEORY.md section 7.

A workspace ``p`` of ``B`` slots starts at zero. Layer ``l`` (1..L) computes keys ``k_i = f_l([x_i, p])``
in R^d, takes the value ``v_i = y_i``, aggregates ``phi_l = (1/N) sum_i k_i y_i`` (linear attention) and
writes ``phi_l`` into its own ``d`` slots ``(l-1) d .. l d - 1`` (direct sum; other slots unchanged).
Readout ``y_hat = <g(p), x_q>`` with ``theta_hat = g(p)`` (``decode``), or ``y_hat = g([x_q, p])``
(``generic``). Model A: ``L = B, d = 1``; B: ``L = 1, d = B``, the same MLPs; C: ``L = 1, d = B``,
keys ``W x_i`` and ``y_hat = x_q^T U p``. Taps (``bridges.taps``) sit at keys, ``phi_l``, the workspace
after each layer and ``theta_hat``.

Hand-built models for tests and theory checks: ``path_model`` (Model A whose keys follow the ``path``
policy exactly) and ``linear_model`` / ``top_levels_model`` (Model C with given keys and the exact linear
MMSE readout of the ``tokens`` channel, ``lmmse``).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from torch import nn

from .config import DataConfig, ModelConfig, RunConfig
from .data import ContextSampler, path_nodes
from .taps import Tap


class Output(NamedTuple):
    y_hat: torch.Tensor  # (batch,) prediction for the query
    theta_hat: torch.Tensor | None  # (batch, D) decoded latent; None for the generic readout
    workspace: torch.Tensor  # (batch, B) final workspace Phi_L


class MLP(nn.Module):
    """``n_in -> width -> ... -> n_out`` with GELU; the first layer is split so that a broadcast input
    (the workspace, shared by all tokens of a context) is projected once per context, not per token."""

    def __init__(self, n_in: int, n_shared: int, width: int, hidden_layers: int, n_out: int):
        super().__init__()
        self.inp = nn.Linear(n_in, width)
        self.inp_shared = nn.Linear(n_shared, width, bias=False) if n_shared else None
        body = []
        for _ in range(hidden_layers - 1):
            body += [nn.GELU(), nn.Linear(width, width)]
        self.body = nn.Sequential(*body, nn.GELU(), nn.Linear(width, n_out))

    def forward(self, u: torch.Tensor, shared: torch.Tensor | None = None) -> torch.Tensor:
        h = self.inp(u)  # (batch, [N,] width)
        if self.inp_shared is not None:
            s = self.inp_shared(shared)  # (batch, width)
            h = h + (s.unsqueeze(1) if h.dim() == 3 else s)
        return self.body(h)  # (batch, [N,] n_out)


# --- key functions: (x (batch, N, D), p (batch, B)) -> keys (batch, N, d) ------------------------------
class MLPKeys(nn.Module):
    """``k_i = f([x_i, p])``: an MLP that sees its token and the broadcast workspace."""

    def __init__(self, dim: int, budget: int, channels: int, width: int, hidden_layers: int):
        super().__init__()
        self.mlp = MLP(dim, budget, width, hidden_layers, channels)

    def forward(self, x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return self.mlp(x, p)  # (batch, N, d)


class LinearKeys(nn.Module):
    """``k_i = W x_i`` with ``W`` (d, D); ignores the workspace (Model C)."""

    def __init__(self, dim: int, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels, dim) / dim**0.5)  # (d, D)

    def forward(self, x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.T  # (batch, N, d)


class PathKeys(nn.Module):
    """The ``path`` policy as a key function of layer ``layer`` (1-based, ``d = 1``): decode the path from
    the signs of the workspace slots written so far (``s_hat_k = sign(phi_k)``, a tie counts as +1),
    ``n_1 = 1``, ``n_{k+1} = 2 n_k + [s_hat_k = -1]``, and read ``k_i = <e_{n_l}, x_i>``. No parameters."""

    def __init__(self, layer: int):
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        n = torch.ones(p.shape[0], dtype=torch.long, device=p.device)  # (batch,) node n_1 = 1
        for k in range(self.layer - 1):
            n = 2 * n + (p[:, k] < 0).long()
        if int(n.max()) > x.shape[-1]:
            raise ValueError(f"path layer {self.layer} runs past the leaves of a tree with D = {x.shape[-1]}")
        idx = (n - 1).view(-1, 1, 1).expand(-1, x.shape[1], 1)  # (batch, N, 1)
        return x.gather(2, idx)  # (batch, N, 1)


# --- readouts ------------------------------------------------------------------------------------------
class DecodeReadout(nn.Module):
    """``theta_hat = g(p)``, an MLP from the workspace to R^D."""

    decodes = True

    def __init__(self, dim: int, budget: int, width: int, hidden_layers: int):
        super().__init__()
        self.g = MLP(budget, 0, width, hidden_layers, dim)

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        return self.g(p)  # (batch, D)


class BilinearReadout(nn.Module):
    """``theta_hat = U p``, so ``y_hat = x_q^T U p`` (Model C)."""

    decodes = True

    def __init__(self, dim: int, budget: int):
        super().__init__()
        self.U = nn.Parameter(torch.randn(dim, budget) / budget**0.5)  # (D, B)

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        return p @ self.U.T  # (batch, D)


class FunctionReadout(nn.Module):
    """A fixed decoder ``theta_hat = fn(p)`` (e.g. a Bayes posterior mean from ``fvnum``)."""

    decodes = True

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__()
        self.fn = fn

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        return self.fn(p)  # (batch, D)


class GenericReadout(nn.Module):
    """``y_hat = g([x_q, p])``: no explicit ``theta_hat``."""

    decodes = False

    def __init__(self, dim: int, budget: int, width: int, hidden_layers: int):
        super().__init__()
        self.g = MLP(dim, budget, width, hidden_layers, 1)

    def forward(self, p: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
        return self.g(x_q, p).squeeze(-1)  # (batch,)


# --- the model -----------------------------------------------------------------------------------------
class Layer(nn.Module):
    def __init__(self, index: int, keys: nn.Module):
        super().__init__()
        self.index = index  # 1-based, as in THEORY.md
        self.keys = keys
        self.tap_keys = Tap(f"layers.{index}.keys")
        self.tap_phi = Tap(f"layers.{index}.phi")

    def forward(self, x: torch.Tensor, y: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        k = self.tap_keys(self.keys(x, p))  # (batch, N, d)
        phi = torch.einsum("bnd,bn->bd", k, y) / x.shape[1]  # (batch, d) linear attention, value y_i
        return self.tap_phi(phi)  # (batch, d)


class WorkspaceModel(nn.Module):
    """``L`` layers of ``d`` channels writing a ``B = L d`` slot workspace, and a readout."""

    def __init__(self, dim: int, channels: int, keys: list[nn.Module], readout: nn.Module):
        super().__init__()
        self.dim, self.channels, self.n_layers = dim, channels, len(keys)
        self.budget = channels * len(keys)
        self.layers = nn.ModuleList(Layer(l + 1, k) for l, k in enumerate(keys))
        self.tap_workspace = nn.ModuleList(Tap(f"workspace.{l + 1}") for l in range(len(keys)))
        self.readout = readout
        self.tap_theta = Tap("theta_hat") if readout.decodes else None

    @property
    def decodes(self) -> bool:
        return self.readout.decodes

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Workspace ``Phi_L``: x (batch, N, D), y (batch, N) -> (batch, B)."""
        d = self.channels
        p = x.new_zeros(x.shape[0], self.budget)  # (batch, B) empty workspace
        for l, layer in enumerate(self.layers):
            phi = layer(x, y, p)  # (batch, d)
            p = torch.cat([p[:, : l * d], phi, p[:, (l + 1) * d :]], dim=1)  # (batch, B) direct sum
            p = self.tap_workspace[l](p)
        return p

    def decode(self, p: torch.Tensor) -> torch.Tensor:
        """``theta_hat = g(p)``: (batch, B) -> (batch, D); decoding readouts only."""
        if not self.decodes:
            raise ValueError("the generic readout g([x_q, p]) does not decode theta_hat")
        return self.tap_theta(self.readout(p))

    def forward(self, x: torch.Tensor, y: torch.Tensor, x_q: torch.Tensor) -> Output:
        p = self.encode(x, y)  # (batch, B)
        if self.decodes:
            theta_hat = self.decode(p)  # (batch, D)
            return Output((theta_hat * x_q).sum(-1), theta_hat, p)
        return Output(self.readout(p, x_q), None, p)


def build_model(cfg: RunConfig | tuple[DataConfig, ModelConfig]) -> WorkspaceModel:
    """Model A, B or C for a run configuration (weights from torch's current RNG state)."""
    data, mc = (cfg.data, cfg.model) if isinstance(cfg, RunConfig) else cfg
    D, B, d, w, h = data.dim, mc.budget, mc.channels, mc.width, mc.hidden_layers
    if mc.model == "C":
        return WorkspaceModel(D, d, [LinearKeys(D, d)], BilinearReadout(D, B))
    keys = [MLPKeys(D, B, d, w, h) for _ in range(mc.layers)]
    readout = DecodeReadout(D, B, w, h) if mc.readout == "decode" else GenericReadout(D, B, w, h)
    return WorkspaceModel(D, d, keys, readout)


def key_rows(model: WorkspaceModel, layer: int, workspace: torch.Tensor, *, n_samples: int = 1024,
             seed: int = 0) -> torch.Tensor:
    """What layer ``layer`` (1-based) measures given the workspace before it: the Stein rows
    ``W_l(p) = E_x[grad_x k_l(x; p)]`` (THEORY.md section 2: ``E[y k(x)] = <theta, E grad k(x)>``), estimated
    with ``n_samples`` seeded ``x ~ N(0, I_D)`` per context. workspace (batch, B) -> rows (batch, d, D)."""
    if not 1 <= layer <= model.n_layers:
        raise ValueError(f"layer must lie in 1..{model.n_layers}, got {layer}")
    keys = model.layers[layer - 1].keys
    g = torch.Generator(device=workspace.device).manual_seed(seed)
    x = torch.randn(workspace.shape[0], n_samples, model.dim, generator=g, device=workspace.device)  # (batch, M, D)
    x.requires_grad_(True)
    rows = []
    with torch.enable_grad():
        k = keys(x, workspace.detach())  # (batch, M, d)
        for c in range(model.channels):
            (grad,) = torch.autograd.grad(k[..., c].sum(), x, retain_graph=c + 1 < model.channels)
            rows.append(grad.mean(1))  # (batch, D)
    return torch.stack(rows, 1)  # (batch, d, D)


# --- hand-built models ---------------------------------------------------------------------------------
def path_model(data: DataConfig, budget: int, readout: nn.Module | Callable | None = None) -> WorkspaceModel:
    """Model A (``L = budget, d = 1``) whose layer ``l`` reads ``e_{n_l}`` of the decoded path exactly.

    ``readout``: a module or a function ``p (batch, B) -> theta_hat (batch, D)``; default the sign decoder
    ``theta_hat = sum_k a_k s_hat_k e_{n_k}`` over the decoded path (the Bayes decoder when ``tau = 0``).
    """
    if data.prior != "tree" or not 1 <= budget <= data.depth:
        raise ValueError(
            f"the path model needs the tree prior and 1 <= budget <= depth={data.depth}, got budget={budget}"
        )
    if readout is None:
        readout = _sign_decoder(data)
    if not isinstance(readout, nn.Module):
        readout = FunctionReadout(readout)
    return WorkspaceModel(data.dim, 1, [PathKeys(l) for l in range(1, budget + 1)], readout)


def _sign_decoder(data: DataConfig) -> Callable[[torch.Tensor], torch.Tensor]:
    sampler = ContextSampler(data)

    def decode(p: torch.Tensor) -> torch.Tensor:
        B = p.shape[1]
        signs = torch.where(p < 0, -1, 1).to(torch.int8)  # (batch, B) s_hat, tie -> +1
        full = torch.cat([signs, signs.new_ones(p.shape[0], data.depth - B)], 1)  # (batch, K) padded
        theta = sampler.theta_from_signs(full).to(p)  # (batch, D)
        mask = torch.zeros_like(theta)  # (batch, D)
        mask.scatter_(1, path_nodes(full)[:, :B] - 1, 1.0)
        return theta * mask  # only the decoded prefix

    return decode


def lmmse(data: DataConfig, W) -> tuple[torch.Tensor, float]:
    """Linear MMSE readout of a fixed design ``W`` (B, D) under the ``tokens`` channel, exactly.

    With ``phi = (1/N) sum_i y_i W x_i``: ``E[phi phi^T] = (1 + 1/N) W C W^T + tau^2 W W^T`` with
    ``tau^2 = (E||theta||^2 + s2) / N`` (Isserlis), ``E[theta phi^T] = C W^T``; so ``U = C W^T M^-1`` and
    ``loss = tr C - tr(U W C)``. Returns ``(U (D, B) float64, loss)``."""
    sampler = ContextSampler(data)
    C = sampler.cov  # (D, D) float64
    W = torch.as_tensor(W, dtype=torch.float64)  # (B, D)
    N = data.n_tokens
    M = (1 + 1 / N) * W @ C @ W.T + sampler.tau2 * W @ W.T  # (B, B)
    U = torch.linalg.solve(M, W @ C).T  # (D, B), M symmetric
    return U, float(torch.trace(C) - torch.trace(U @ W @ C))


def linear_model(data: DataConfig, W) -> WorkspaceModel:
    """Model C with keys ``W`` (B, D) and its exact linear MMSE readout (weights set by hand)."""
    W = torch.as_tensor(W, dtype=torch.float64)
    B = W.shape[0]
    model = build_model((data, ModelConfig(model="C", budget=B)))
    U, _ = lmmse(data, W)
    with torch.no_grad():
        model.layers[0].keys.weight.copy_(W)
        model.readout.U.copy_(U)
    return model


def top_levels_design(data: DataConfig, budget: int) -> torch.Tensor:
    """Rows ``e_1 .. e_B`` (the first ``B`` nodes in heap order), (B, D)."""
    if not 1 <= budget <= data.dim:
        raise ValueError(f"budget must lie in 1..D={data.dim}, got {budget}")
    return torch.eye(data.dim, dtype=torch.float64)[:budget]


def top_levels_model(data: DataConfig, budget: int) -> WorkspaceModel:
    """Model C reading the ``top_levels`` design with the linear MMSE readout."""
    return linear_model(data, top_levels_design(data, budget))
