"""The memory price of training one run (``fv train``; ``bridges.runs.config.RunConfig.memory_bytes`` and
``check_resources``): the activations, the weights with their gradients and Adam's moments, and the
interpreter. Arithmetic on the configuration only (no torch), in a module that imports nothing of ``bridges``,
so that the configuration can price itself without an import circle (``bridges.prices.cost`` re-exports it)."""
from __future__ import annotations

BASE_BYTES = 300e6  # the interpreter and torch
PARAM_BYTES = 16.0  # per parameter (float32): the weight, its gradient and Adam's two moments
STATE_COPY_BYTES = 4.0  # per parameter: the checkpoint's serialised state dict, while it is written


def n_parameters(cfg) -> int:
    """The parameters of ``bridges.models.networks.build_model(cfg)``, counted without torch: Model C ``d D + D B``;
    Models A and B, per layer a key MLP ``[x, p] -> d`` (the qk router: ``kappa: x -> d r`` and ``q: p -> d r``, layer
    1's a constant) and the readout's MLP (``decode``: ``p -> D``;
    ``generic``: ``[x_q, p] -> 1``), each ``n_in W + W + n_shared W + (H - 1)(W^2 + W) + W n_out + n_out``."""
    d, m = cfg.data, cfg.model
    if m.spec.shaped:  # Model T: its own count (bridges.prices.transformer)
        from bridges.prices.transformer import n_parameters as shaped_parameters

        return shaped_parameters(cfg)
    if m.spec.values:  # Model G: its own count (bridges.prices.gd)
        from bridges.prices.gd import n_parameters as gd_parameters

        return gd_parameters(cfg)
    D, B, W, H, width = d.dim, m.budget, m.mlp_width, m.hidden_layers, m.n_channels
    if not m.spec.mlp_keys:  # linear keys and the bilinear readout
        return width * D + D * B

    def mlp(n_in, n_shared, n_out):
        return n_in * W + W + n_shared * W + (H - 1) * (W * W + W) + W * n_out + n_out

    readout = mlp(B, 0, D) if m.readout == "decode" else mlp(D, B, 1)
    if getattr(m, "router", "mlp") == "qk":  # per layer kappa: D -> d r; q: p -> d r (layer 1: a constant d r)
        dr = width * m.query_dim_for(D)
        return m.n_layers * mlp(D, 0, dr) + dr + (m.n_layers - 1) * mlp(B, 0, dr) + readout
    return m.n_layers * mlp(D, B, width) + readout


def activation_bytes(cfg) -> float:
    """The batch of contexts and the key MLPs' activations on every token of every layer (float32, kept for
    the backward pass; at the schedule's largest batch); softmax attention adds its scores and weights, ``2 d`` numbers a token and layer."""
    d, m, t = cfg.data, cfg.model, cfg.train
    if m.spec.shaped:  # Model T: its blocks' activations (bridges.prices.transformer)
        from bridges.prices.transformer import activation_bytes as shaped_activations

        return shaped_activations(cfg)
    if m.spec.values:  # Model G: its tokens and residuals (bridges.prices.gd)
        from bridges.prices.gd import activation_bytes as gd_activations

        return gd_activations(cfg)
    # the largest batch of the schedule: a noise curriculum's first (tokens_from), or larger batches late
    tokens = max(t.batch * max(d.n_tokens, t.tokens_from), max(t.batch, t.batch_late) * d.n_tokens)
    per_token = 3 * (d.dim + 2) + 2 * m.n_layers * (m.mlp_width * m.hidden_layers + d.dim + m.budget)
    if getattr(m, "router", "mlp") == "qk":  # kappa's (batch, N, d, r) token keys of every layer
        per_token += 2 * m.n_layers * m.n_channels * m.query_dim_for(d.dim)
    if m.attention == "softmax":
        per_token += 2 * m.n_layers * m.n_channels  # the (batch, N, d) scores and softmax weights of every layer
    return 4.0 * tokens * per_token  # measured 5 to 11 bytes per hidden unit and token (8 priced)


def train_bytes(cfg) -> float:
    """Estimated peak memory of training ``cfg`` on the CPU: :func:`activation_bytes`, the parameters with
    their gradients and Adam's moments (``PARAM_BYTES`` each, :func:`n_parameters`) and a checkpoint's copy,
    and the interpreter with torch (``BASE_BYTES``)."""
    return activation_bytes(cfg) + (PARAM_BYTES + STATE_COPY_BYTES) * n_parameters(cfg) + BASE_BYTES


def check_train_memory(cfg, what: str | None = None) -> None:
    """Refuse (one-line ValueError) a run whose training would not fit in the memory available, naming the
    largest size that fits: ``--tokens-from N0`` or ``--batch-late NB`` when only the schedule's largest batch
    does not fit, ``--tokens N`` when the weights fit and the activations do not, else the largest
    ``--mlp-width`` (or ``--hidden-layers``) at which the weights fit."""
    from fvsym.guards.limits import check_memory, fits_memory, largest_fitting

    need = train_bytes(cfg)
    if fits_memory(need):
        return
    d, t = cfg.data, cfg.train
    schedule = ""
    if (t.tokens_from or t.batch_late) and fits_memory(train_bytes(cfg.replace(train=dict(tokens_from=0, batch_late=0)))):
        # the schedule's largest batch is what does not fit: name the largest N0 / NB that does
        hint = ""
        if t.tokens_from:
            sizes = [n for n in (2**k for k in range(0, 41)) if d.n_tokens < n < t.tokens_from]
            hint += largest_fitting("--tokens-from N0", sizes, lambda n: fits_memory(train_bytes(cfg.replace(
                train=dict(tokens_from=n, batch_late=0)))))
        if t.batch_late:
            sizes = [n for n in (2**k for k in range(0, 41)) if n < t.batch_late]
            hint += largest_fitting("--batch-late NB", sizes, lambda n: fits_memory(train_bytes(cfg.replace(
                train=dict(tokens_from=0, batch_late=n)))))
        schedule = (f" at the schedule's largest batch ({max(t.batch, t.batch_late)} contexts late, "
                    f"{max(d.n_tokens, t.tokens_from)} tokens first)")
    elif fits_memory(train_bytes(cfg.replace(data=dict(n_tokens=1), train=dict(tokens_from=0, batch_late=0)))):
        sizes = [2**k for k in range(0, 41) if 2**k < cfg.data.n_tokens]
        hint = largest_fitting("--tokens N", sizes, lambda n: fits_memory(train_bytes(cfg.replace(data=dict(n_tokens=n)))))
    elif not cfg.model.spec.mlp_keys:
        hint = "; the weights alone do not fit: a smaller depth"
    else:
        widths = [w for w in (2**k for k in range(0, 31)) if w < cfg.model.mlp_width]
        hint = largest_fitting("--mlp-width", widths, lambda w: fits_memory(train_bytes(cfg.replace(model=dict(mlp_width=w)))))
        if cfg.model.hidden_layers > 1:
            layers = range(1, cfg.model.hidden_layers)
            hint += largest_fitting("--hidden-layers", layers, lambda h: fits_memory(
                train_bytes(cfg.replace(model=dict(hidden_layers=h))))).replace("; the largest", " (or the largest", 1)
            hint += ")" if "(or" in hint else ""
    check_memory(what or f"training {cfg.model.model} at depth {d.depth} with N = {d.n_tokens} tokens, batch "
                 f"{t.batch}, {n_parameters(cfg):.3g} parameters (weights, gradients and Adam's moments){schedule}",
                 need, hint)
