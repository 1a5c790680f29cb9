"""Constrained linear-attention transformers, Models A, B, C of docs/theory.md section 7.

A workspace ``p`` of ``B`` slots starts at zero. Layer ``l`` (1..L) computes keys ``k_i = f_l([x_i, p])``
in R^d, takes the value ``v_i = y_i``, aggregates ``phi_l = (1/N) sum_i k_i y_i`` (linear attention) and
writes ``phi_l`` into its own ``d`` slots ``(l-1) d .. l d - 1`` (direct sum; other slots unchanged).
Readout ``y_hat = <g(p), x_q>`` with ``theta_hat = g(p)`` (``decode``), or ``y_hat = g([x_q, p])``
(``generic``). Model A: ``L = B, d = 1``; B: ``L = 1, d = B``, the same MLPs; C: ``L = 1, d = B``,
keys ``W x_i`` and ``y_hat = x_q^T U p``. Taps (``bridges.models.taps``) sit at keys, ``phi_l``, the workspace
after each layer and ``theta_hat``.

Softmax attention (``ModelConfig.attention = "softmax"``, docs/theory.md section 2): the key function's output is
read as a score ``s_{l,c}(x_i, p)`` and the layer aggregates ``phi_{l,c} = sum_i softmax_i(s_{l,c}) y_i``, a
self-normalised average of the values (``torch.softmax`` over the tokens, which subtracts the maximum; in
float32 whatever the autocast). A and B score with the same key MLPs; C's bilinear score
``s_c = q_c(p) . W_c x_i`` sees the empty workspace at its one layer, so ``q_c`` is a learned constant vector
per channel and ``s_c = (W_c^T q_c) . x_i``: one learned row per channel, the ``LinearKeyLayer`` weight. Taps:
``layers.{l}.scores`` and ``layers.{l}.weights`` (batch, N, d) in place of ``layers.{l}.keys``; key patching
patches the scores (``Layer.key_tap``).

Hand-built models for tests and theory checks: ``path_model`` (Model A whose keys follow the ``path``
policy exactly) and ``linear_model`` / ``top_levels_model`` (Model C with given keys and the exact linear
MMSE readout of the ``tokens`` channel, ``linear_readout``).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from bridges.errors import require

require(__name__)  # torch: without it, one line naming the extra

import torch
from torch import nn

from fvsym.heap import child, sign

from bridges.runs.config import DataConfig, ModelConfig, RunConfig
from bridges.training.data import ContextSampler, data_channel, fv_prior, path_nodes
from bridges.models.taps import Tap
from fvsym.errors import InputError


class Output(NamedTuple):
    y_hat: torch.Tensor  # (batch,) prediction for the query
    theta_hat: torch.Tensor | None  # (batch, D) decoded latent; None for the generic readout
    workspace: torch.Tensor  # (batch, B) final workspace Phi_L


class MLP(nn.Module):
    """``n_in -> mlp_width -> ... -> n_out`` with GELU; the first layer is split so that a broadcast input
    (the workspace, shared by all tokens of a context) is projected once per context, not per token.
    ``projected``: the token part ``inp(u)`` computed beforehand (``WorkspaceModel`` does it for all layers
    from one transposed copy of the tokens); the result is the same function."""

    def __init__(self, n_in: int, n_shared: int, mlp_width: int, hidden_layers: int, n_out: int):
        super().__init__()
        self.inp = nn.Linear(n_in, mlp_width)
        self.inp_shared = nn.Linear(n_shared, mlp_width, bias=False) if n_shared else None
        body = []
        for _ in range(hidden_layers - 1):
            body += [nn.GELU(), nn.Linear(mlp_width, mlp_width)]
        self.body = nn.Sequential(*body, nn.GELU(), nn.Linear(mlp_width, n_out))

    def forward(self, u: torch.Tensor, shared: torch.Tensor | None = None, *,
                projected: torch.Tensor | None = None) -> torch.Tensor:
        h = self.inp(u) if projected is None else projected  # (batch, [N,] mlp_width)
        if self.inp_shared is not None:
            s = self.inp_shared(shared)  # (batch, mlp_width)
            h = h + (s.unsqueeze(1) if h.dim() == 3 else s)
        return self.body(h)  # (batch, [N,] n_out)

    def forward_tokens_major(self, projected_t: torch.Tensor, shared: torch.Tensor | None, n_tokens: int) -> torch.Tensor:
        """The same function on the token part given feature-major, ``projected_t`` (mlp_width, batch * N)
        = ``inp(u)^T``: every activation stays contiguous (mlp_width, batch, N), each layer is one plain
        matmul and the workspace part broadcasts along the last axis. Returns (n_out, batch, N)."""
        width, T = projected_t.shape
        h = projected_t.view(width, T // n_tokens, n_tokens)  # (mlp_width, batch, N)
        if self.inp_shared is not None and shared is not None:
            h = h + self.inp_shared(shared).T.unsqueeze(-1)  # (mlp_width, batch, 1) broadcast over tokens
        for module in self.body:
            if isinstance(module, nn.Linear):
                h = torch.addmm(module.bias.unsqueeze(1), module.weight, h.view(h.shape[0], T))
                h = h.view(-1, T // n_tokens, n_tokens)  # (out, batch, N)
            else:
                h = module(h)
        return h  # (n_out, batch, N)


# --- key functions: (x (batch, N, D), p (batch, B)) -> keys (batch, N, d) ------------------------------
class MLPKeys(nn.Module):
    """``k_i = f([x_i, p])``: an MLP that sees its token and the broadcast workspace.

    ``token_linear`` is the token part of its first layer, ``x_i -> W x_i + b``: the same input for every
    layer, so ``WorkspaceModel`` computes it for every layer from one shared copy of the tokens and passes
    ``projected``."""

    def __init__(self, dim: int, budget: int, width: int, mlp_width: int, hidden_layers: int):
        super().__init__()
        self.mlp = MLP(dim, budget, mlp_width, hidden_layers, width)

    @property
    def token_linear(self) -> nn.Linear:
        return self.mlp.inp

    def forward(self, x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return self.mlp(x, p)  # (batch, N, d)

    def from_projection(self, projected_t: torch.Tensor, p: torch.Tensor | None, n_tokens: int) -> torch.Tensor:
        """Keys from the token part computed beforehand, feature-major (mlp_width, batch * N); ``p`` None
        means the empty workspace (its projection is zero). Returns (batch, N, d)."""
        return self.mlp.forward_tokens_major(projected_t, p, n_tokens).permute(1, 2, 0)


class QKKeys(nn.Module):
    """The query-key router of docs/theory.md section 7: ``k_i = <q_l(p), kappa_l(x_i)>`` per channel, ``q_l`` an MLP of
    the workspace alone (layer 1, which sees the empty workspace: a learned constant), ``kappa_l`` an MLP of the
    token alone, both into ``R^r`` for each of the ``d`` channels (``query_dim`` r). The reading factorises,
    ``phi_l = <q_l(p), m_l>`` with ``m_l = (1/N) sum_i kappa_l(x_i) y_i``; the keys are formed (and tapped) as
    for every router, so key patching and the taps see them. ``query`` and ``kappa`` may be given as callables
    (``p (batch, B) -> (batch, d, r)``, ``x (batch, N, D) -> (batch, N, d, r)``) in place of the MLPs: a theory
    policy as a router (with ``r = D``, ``kappa(x) = x / (x^T Q x + c)`` and ``q_l`` the weighted-key policy's row,
    Model A is that policy exactly)."""

    token_linear = None  # the token part is kappa's own MLP, not shared with the workspace

    def __init__(self, dim: int, budget: int, width: int, mlp_width: int, hidden_layers: int, query_dim: int,
                 layer: int, *, query: Callable | None = None, kappa: Callable | None = None):
        super().__init__()
        self.width, self.query_dim, self.layer = width, query_dim, layer
        self._query, self._kappa = query, kappa
        if query is None:
            if layer == 1:
                self.q0 = nn.Parameter(torch.randn(width, query_dim) / query_dim**0.5)  # (d, r)
            else:
                self.q = MLP(budget, 0, mlp_width, hidden_layers, width * query_dim)
        if kappa is None:
            self.kappa = MLP(dim, 0, mlp_width, hidden_layers, width * query_dim)

    def query(self, p: torch.Tensor) -> torch.Tensor:
        """``q_l(p)``: (batch, d, r)."""
        if self._query is not None:
            return self._query(p)
        if self.layer == 1:
            return self.q0.expand(p.shape[0], -1, -1)
        return self.q(p).view(p.shape[0], self.width, self.query_dim)

    def token_keys(self, x: torch.Tensor) -> torch.Tensor:
        """``kappa_l(x_i)``: (batch, N, d, r)."""
        if self._kappa is not None:
            return self._kappa(x)
        return self.kappa(x).view(*x.shape[:2], self.width, self.query_dim)

    def forward(self, x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        q, kap = self.query(p), self.token_keys(x)  # (batch, d, r), (batch, N, d, r)
        return torch.einsum("bcr,bncr->bnc", q.to(kap.dtype), kap)  # (batch, N, d)


class LinearKeyLayer(nn.Module):
    """``k_i = W x_i`` with ``W`` (d, D); ignores the workspace (Model C)."""

    token_linear = None  # nothing to share between layers

    def __init__(self, dim: int, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width, dim) / dim**0.5)  # (d, D)

    def forward(self, x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.T  # (batch, N, d)


class PathKeys(nn.Module):
    """The ``path`` policy as a key function of layer ``layer`` (1-based, ``d = 1``): decode the path from
    the signs of the workspace slots written so far (``s_hat_k = sign(phi_k)``, a tie counts as +1),
    ``n_1 = 1``, ``n_{k+1} = 2 n_k + [s_hat_k = -1]`` (``fvsym.heap.child``), and read ``k_i = <e_{n_l}, x_i>``.
    No parameters."""

    token_linear = None

    def __init__(self, layer: int):
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        n = torch.ones(p.shape[0], dtype=torch.long, device=p.device)  # (batch,) node n_1 = 1
        for k in range(self.layer - 1):
            n = child(n, p[:, k])
        if int(n.max()) > x.shape[-1]:
            raise InputError(f"path layer {self.layer} runs past the leaves of a tree with D = {x.shape[-1]}")
        idx = (n - 1).view(-1, 1, 1).expand(-1, x.shape[1], 1)  # (batch, N, 1)
        return x.gather(2, idx)  # (batch, N, 1)


# --- readouts ------------------------------------------------------------------------------------------
class DecodeReadout(nn.Module):
    """``theta_hat = g(p)``, an MLP from the workspace to R^D."""

    decodes = True

    def __init__(self, dim: int, budget: int, mlp_width: int, hidden_layers: int):
        super().__init__()
        self.g = MLP(budget, 0, mlp_width, hidden_layers, dim)

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

    def __init__(self, dim: int, budget: int, mlp_width: int, hidden_layers: int):
        super().__init__()
        self.g = MLP(dim, budget, mlp_width, hidden_layers, 1)

    def forward(self, p: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
        return self.g(x_q, p).squeeze(-1)  # (batch,)


# --- the model -----------------------------------------------------------------------------------------
class Layer(nn.Module):
    """One layer: keys (linear attention) or scores (softmax attention) of the tokens and the workspace, and
    the reading ``phi_l`` (batch, d) of the values ``y_i``."""

    def __init__(self, index: int, keys: nn.Module, attention: str = "linear"):
        super().__init__()
        if attention not in ("linear", "softmax"):
            raise InputError(f"attention must be 'linear' or 'softmax', got {attention!r}")
        self.index = index  # 1-based, as in THEORY.md
        self.keys = keys
        self.attention = attention
        if attention == "linear":
            self.tap_keys = Tap(f"layers.{index}.keys")
        else:
            self.tap_scores = Tap(f"layers.{index}.scores")
            self.tap_weights = Tap(f"layers.{index}.weights")
        self.tap_phi = Tap(f"layers.{index}.phi")

    @property
    def key_tap(self) -> Tap:
        """The tap that key patching replaces: the keys, or the scores of a softmax layer."""
        return self.tap_keys if self.attention == "linear" else self.tap_scores

    def forward(self, x: torch.Tensor, y: torch.Tensor, p: torch.Tensor, projected: torch.Tensor | None = None,
                autocast: torch.dtype | None = None) -> torch.Tensor:
        """phi_l (batch, d). ``projected``: the token part of the keys, feature-major (see ``MLPKeys``)."""
        with _autocast(x.device, autocast):
            if projected is None:
                k = self.keys(x, p)  # (batch, N, d)
            else:  # layer 1 reads the empty workspace
                k = self.keys.from_projection(projected, p if self.index > 1 else None, x.shape[1])
        k = self.key_tap(k.to(y.dtype))  # (batch, N, d) in the data dtype (float32) from here on
        if self.attention == "linear":
            phi = torch.einsum("bnd,bn->bd", k, y) / x.shape[1]  # (batch, d) linear attention, value y_i
        else:
            a = self.tap_weights(torch.softmax(k, dim=1))  # (batch, N, d) over the tokens, max subtracted
            phi = torch.einsum("bnd,bn->bd", a, y)  # (batch, d) self-normalised average of y_i
        return self.tap_phi(phi)  # (batch, d)


def _autocast(device: torch.device, dtype: torch.dtype | None):
    """bfloat16 autocast on ``device`` when ``dtype`` is given, else a no-op context."""
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


class WorkspaceModel(nn.Module):
    """``L`` layers of ``d`` channels writing a ``B = L d`` slot workspace, and a readout; ``attention``
    ``linear`` or ``softmax`` (the key functions' outputs are then the scores).

    ``autocast``: None (float32 throughout) or ``torch.bfloat16``, the precision of the key MLPs (the
    bulk of the work); aggregation, workspace, readout and loss stay float32 (``bridges.models.precision``)."""

    def __init__(self, dim: int, width: int, keys: list[nn.Module], readout: nn.Module, attention: str = "linear"):
        super().__init__()
        self.dim, self.width, self.n_layers = dim, width, len(keys)
        self.budget = width * len(keys)
        self.attention = attention  # "linear" or "softmax" (THEORY.md section 2b): the keys are then scores
        self.layers = nn.ModuleList(Layer(l + 1, k, attention) for l, k in enumerate(keys))
        self.tap_workspace = nn.ModuleList(Tap(f"workspace.{l + 1}") for l in range(len(keys)))
        self.readout = readout
        self.tap_theta = Tap("theta_hat") if readout.decodes else None
        self.autocast: torch.dtype | None = None

    @property
    def decodes(self) -> bool:
        return self.readout.decodes

    # --- what the interventions ask of a model (bridges.patching) ---------------------------------------
    @property
    def state_size(self) -> int:
        """Entries of the tap ``workspace.{l}``: the ``B`` slots."""
        return self.budget

    def state_width(self, layer: int) -> int:
        """Entries of ``workspace.{layer}`` that hold ``Phi_layer``: the ``layer d`` slots written so far."""
        return layer * self.width

    def key_patch(self, layer: int, donor: dict):
        """``(tap name, value)`` that key patching of ``layer`` applies, from the donor's recorded taps ``donor``:
        the layer's keys (a softmax layer's scores), all replaced."""
        name = self.key_tap_name(layer)
        return name, donor[name]

    def key_tap_name(self, layer: int) -> str:
        return self.layers[layer - 1].key_tap.name  # keys, or a softmax layer's scores

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Workspace ``Phi_L``: x (batch, N, D), y (batch, N) -> (batch, B)."""
        d = self.width
        projected = self.token_projections(x)  # L x (batch, N, mlp_width) or L x None
        p = x.new_zeros(x.shape[0], self.budget)  # (batch, B) empty workspace
        for l, layer in enumerate(self.layers):
            phi = layer(x, y, p, projected[l], self.autocast)  # (batch, d)
            p = torch.cat([p[:, : l * d], phi, p[:, (l + 1) * d :]], dim=1)  # (batch, B) direct sum
            p = self.tap_workspace[l](p)
        return p

    def token_projections(self, x: torch.Tensor) -> list[torch.Tensor | None]:
        """The token part ``W_l x_i + b_l`` of every layer's first key layer, feature-major: layer ``l``
        gets a contiguous (mlp_width, batch * N) block. It does not depend on the workspace, so the
        tokens are transposed (and cast to the autocast dtype) once for all layers; one matmul per layer
        keeps each layer's weight gradient a plain matmul (a single stacked matmul would concatenate the
        layers' gradients in the backward pass). Layers whose keys have no such part get None."""
        linears = [layer.keys.token_linear for layer in self.layers]
        if any(lin is None for lin in linears):
            return [None] * len(linears)
        tokens_t = x.reshape(-1, x.shape[-1]).T  # (D, batch * N)
        if self.autocast is not None:
            tokens_t = tokens_t.to(self.autocast)
        with _autocast(x.device, self.autocast):
            return [torch.addmm(lin.bias.unsqueeze(1), lin.weight, tokens_t) for lin in linears]

    def decode(self, p: torch.Tensor) -> torch.Tensor:
        """``theta_hat = g(p)``: (batch, B) -> (batch, D); decoding readouts only."""
        if not self.decodes:
            raise InputError("the generic readout g([x_q, p]) does not decode theta_hat")
        return self.tap_theta(self.readout(p))

    def forward(self, x: torch.Tensor, y: torch.Tensor, x_q: torch.Tensor) -> Output:
        p = self.encode(x, y)  # (batch, B)
        if self.decodes:
            theta_hat = self.decode(p)  # (batch, D)
            return Output((theta_hat * x_q).sum(-1), theta_hat, p)
        return Output(self.readout(p, x_q), None, p)


def mlp_network(data: DataConfig, mc: ModelConfig) -> WorkspaceModel:
    """Models A and B: ``L`` layers of ``d`` channels (the model's shape, ``mc.n_layers`` and ``mc.n_channels``) with MLP
    keys of ``[x_i, p]`` (or, ``mc.router == "qk"``, the query-key router :class:`QKKeys`), and the ``decode`` or
    ``generic`` MLP readout."""
    D, B, d, w, h = data.dim, mc.budget, mc.n_channels, mc.mlp_width, mc.hidden_layers
    if getattr(mc, "router", "mlp") == "qk":  # THEORY.md section 7b
        r = mc.query_dim_for(D)
        keys = [QKKeys(D, B, d, w, h, r, l + 1) for l in range(mc.n_layers)]
    else:
        keys = [MLPKeys(D, B, d, w, h) for _ in range(mc.n_layers)]
    readout = DecodeReadout(D, B, w, h) if mc.readout == "decode" else GenericReadout(D, B, w, h)
    return WorkspaceModel(D, d, keys, readout, mc.attention)


def linear_network(data: DataConfig, mc: ModelConfig) -> WorkspaceModel:
    """Model C: one layer of ``d = B`` channels, linear keys ``W x_i`` and the bilinear readout ``x_q^T U p``."""
    return WorkspaceModel(data.dim, mc.budget, [LinearKeyLayer(data.dim, mc.budget)], BilinearReadout(data.dim, mc.budget),
                          mc.attention)


def build_model(cfg: RunConfig | tuple[DataConfig, ModelConfig]) -> WorkspaceModel:
    """The network of a run configuration's model (its ``ModelSpec.network``, ``bridges.models.registry``; weights
    from torch's current RNG state), with the configuration's attention (softmax: the same key functions give the
    scores; C's bilinear score is one row per channel). A model with MLP keys runs them under the precision of
    ``cfg.train`` (a ``RunConfig``)."""
    data, mc = (cfg.data, cfg.model) if isinstance(cfg, RunConfig) else cfg
    spec = mc.spec
    model = spec.build(data, mc)
    if isinstance(cfg, RunConfig) and spec.mlp_keys:
        from bridges.models.precision import autocast_dtype

        model.autocast = autocast_dtype(cfg.train.precision, cfg.train.device, has_mlp_keys=True)
    return model


def grow(source: WorkspaceModel, target: WorkspaceModel) -> WorkspaceModel:
    """Start Model A ``target`` (budget ``B``) from the trained Model A ``source`` (budget ``b < B``), in place:
    layers ``1..b`` and the readout take the source's weights, every weight that reads the workspace is the
    source's on slots ``1..b`` and zero on the new slots ``b+1..B``, and layers ``b+1..B`` keep their fresh
    weights. Layer ``l <= b`` sees the same workspace as in the source (slots ``>= l`` are still empty) and
    the readout is blind to the new slots, so ``target`` computes exactly ``source``'s function until
    training moves the new weights: the curriculum of ``TrainConfig.init_from``."""
    if source.width != 1 or target.width != 1:
        raise InputError(f"grow takes Model A (one channel per layer), got d = {source.width} and {target.width}")
    if source.budget >= target.budget or source.dim != target.dim:
        raise InputError(f"grow needs a smaller source of the same dimension: budget {source.budget} -> "
                         f"{target.budget}, D {source.dim} -> {target.dim}")
    b, mine = source.budget, target.state_dict()
    with torch.no_grad():
        for name, weight in source.state_dict().items():
            new = mine.get(name)
            if new is None or new.shape[:-1] != weight.shape[:-1] or new.shape[-1] < weight.shape[-1]:
                raise InputError(f"the source's weight {name} {tuple(weight.shape)} does not fit the target "
                                 f"({None if new is None else tuple(new.shape)}): other MLP sizes or readout")
            if new.shape == weight.shape:
                new.copy_(weight)
            else:  # reads the workspace: the source's slots 1..b, zero on the new ones
                new.zero_()
                new[..., :b] = weight
    return target


def key_rows(model: WorkspaceModel, layer: int, workspace: torch.Tensor, *, n_samples: int = 1024,
             seed: int = 0) -> torch.Tensor:
    """What layer ``layer`` (1-based) measures given the workspace before it: the Stein rows
    ``W_l(p) = E_x[grad_x k_l(x; p)]`` (docs/theory.md section 2: ``E[y k(x)] = <theta, E grad k(x)>``), estimated
    with ``n_samples`` seeded ``x ~ N(0, I_D)`` per context; for softmax attention the rows of section 2b,
    ``E[grad w] / E[w] = E[w grad s] / E[w]`` with ``w = exp(s)``, the same samples self-normalised.
    workspace (batch, B) -> rows (batch, d, D)."""
    if not 1 <= layer <= model.n_layers:
        raise InputError(f"layer must lie in 1..{model.n_layers}, got {layer}")
    keys = model.layers[layer - 1].keys
    g = torch.Generator(device=workspace.device).manual_seed(seed)
    x = torch.randn(workspace.shape[0], n_samples, model.dim, generator=g, device=workspace.device)  # (batch, M, D)
    x.requires_grad_(True)
    rows = []
    with torch.enable_grad():
        k = keys(x, workspace.detach())  # (batch, M, d)
        for c in range(model.width):
            (grad,) = torch.autograd.grad(k[..., c].sum(), x, retain_graph=c + 1 < model.width)  # (batch, M, D)
            if model.attention == "softmax":
                a = torch.softmax(k[..., c].detach(), dim=1)  # (batch, M) w / sum w over the samples
                rows.append(torch.einsum("bm,bmd->bd", a, grad))  # (batch, D)
            else:
                rows.append(grad.mean(1))  # (batch, D)
    return torch.stack(rows, 1)  # (batch, d, D)


# --- hand-built models ---------------------------------------------------------------------------------
def path_model(data: DataConfig, budget: int, readout: nn.Module | Callable | None = None) -> WorkspaceModel:
    """Model A (``L = budget, d = 1``) whose layer ``l`` reads ``e_{n_l}`` of the decoded path exactly.

    ``readout``: a module or a function ``p (batch, B) -> theta_hat (batch, D)``; default the sign decoder
    ``theta_hat = sum_k a_k s_hat_k e_{n_k}`` over the decoded path (the Bayes decoder when ``tau = 0``).
    """
    if not data.has_leaves or not 1 <= budget <= data.depth:
        raise InputError(
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
        signs = sign(p).to(torch.int8)  # (batch, B) s_hat, tie -> +1
        full = torch.cat([signs, signs.new_ones(p.shape[0], data.depth - B)], 1)  # (batch, K) padded
        theta = sampler.theta_from_signs(full).to(p)  # (batch, D)
        mask = torch.zeros_like(theta)  # (batch, D)
        mask.scatter_(1, path_nodes(full)[:, :B] - 1, 1.0)
        return theta * mask  # only the decoded prefix

    return decode


def linear_readout(data: DataConfig, W) -> tuple[torch.Tensor, float]:
    """The linear MMSE readout of a fixed design ``W`` (B, D) under the ``tokens`` channel of ``data``, exactly
    (``fvnum.linear_theory.lmmse``: ``Cov(phi) = (1 + 1/N) W C W^T + tau^2 W W^T``). Returns
    ``(U (D, B) float64, loss)``."""
    from fvnum.linear_theory import lmmse as exact_lmmse

    W = torch.as_tensor(W, dtype=torch.float64).numpy()  # (B, D)
    dec = exact_lmmse(fv_prior(data), W, data_channel(data))
    return torch.from_numpy(dec.U), dec.loss


def linear_model(data: DataConfig, W) -> WorkspaceModel:
    """Model C with keys ``W`` (B, D) and its exact linear MMSE readout (weights set by hand)."""
    W = torch.as_tensor(W, dtype=torch.float64)
    B = W.shape[0]
    model = WorkspaceModel(data.dim, B, [LinearKeyLayer(data.dim, B)], BilinearReadout(data.dim, B))
    U, _ = linear_readout(data, W)
    with torch.no_grad():
        model.layers[0].keys.weight.copy_(W)
        model.readout.U.copy_(U)
    return model


def top_levels_keys(data: DataConfig, budget: int) -> torch.Tensor:
    """Model C's keys for the ``top_levels`` design: rows ``e_1 .. e_B`` (the first ``B`` nodes in heap order), (B, D)
    float64 (``fvnum.linear_theory.top_levels_rows`` as a tensor)."""
    from fvnum.linear_theory import top_levels_rows

    return torch.from_numpy(top_levels_rows(data.dim, budget))


def top_levels_model(data: DataConfig, budget: int) -> WorkspaceModel:
    """Model C reading the ``top_levels`` design with the linear MMSE readout."""
    return linear_model(data, top_levels_keys(data, budget))
