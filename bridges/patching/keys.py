"""Key patching on trained (or hand-built) models, beside the theory (docs/theory.md section 8).

Target contexts draw a uniform leaf ``s``; each donor shares the target's tokens ``x_1..x_N``, label noise
and query and has a leaf ``s'`` of divergence depth ``j`` (``s'_k = s_k`` for ``k < j``, ``s'_j = -s_j``,
the signs below ``j`` uniform; ``j`` in ``1..K``, the convention of ``fvnum.patching.keys``). The donor runs
unpatched and its keys ``layers.{l}.keys`` are recorded; the target then runs with layer ``l``'s keys
replaced by them (``bridges.models.taps.patch``). A softmax-attention model (docs/theory.md section 2) has scores where a
linear one has keys: its scores ``layers.{l}.scores`` are patched (``Layer.key_tap``), and the softmax weights
follow from them. Every other layer, and the readout, act on the target's own
workspace: the same patch that ``fvnum.patching_table`` simulates on a theory strategy.

Losses are per context, in units of ``||theta_hat - theta||^2`` for decoding readouts (A, B with
``decode``, C) and the query error ``(y_hat - <theta, x_q>)^2`` for the generic readout (same expectation,
as in ``bridges.training.train``); the table says which (``metric``). Common random numbers: every cell of the
table (every layer and every divergence depth) uses the same target contexts, and the unpatched loss is
measured on them too, so ``effect = loss - unpatched`` has a paired standard error.

Sampling is chunked: chunk ``c`` of targets comes from ``step_generator(seed, PATCH_STREAM, 64 c)`` and
its donors of depth ``j`` from ``step_generator(seed, PATCH_STREAM, 64 c + j)``, so the first contexts do
not depend on ``n_contexts`` (whole chunks) nor on which depths are asked for.
"""
from __future__ import annotations

import numpy as np
import torch
from fvnum.estimate import Estimate
from fvnum.patching.keys import RANDOM_FIELDS, PatchingTable
from fvsym._validate import check_seed  # the one seed check (bridges.analysis.probes takes it from here)

from bridges.runs.config import DataConfig
from bridges.training.data import ContextSampler, Contexts, data_channel, fv_prior
from bridges.models.networks import WorkspaceModel
from bridges.models.taps import patch, record
from fvsym.errors import InputError

PATCH_STREAM = 2  # data stream of patching contexts (training uses 0, held-out evaluation 1)
CHUNK = 256  # contexts per forward pass
_CHUNK_STEPS = 64  # generator steps reserved per chunk: 0 for the targets, j for the donors of depth j


# --- inputs ----------------------------------------------------------------------------------------
def check_tree_data(data_cfg: DataConfig, what: str = "key patching",
                    why: str = "divergence depth of two leaves") -> None:
    if not isinstance(data_cfg, DataConfig):
        raise InputError(f"data_cfg must be a DataConfig, got {type(data_cfg).__name__}")
    if not data_cfg.has_leaves:  # two leaves' divergence depth, or a leaf's signs
        raise InputError(f"{what} needs the tree prior ({why}), not prior={data_cfg.prior!r}")


def _check_depth(j, depth: int, *, control: bool = False) -> int:
    """A divergence depth in ``1..K``; with ``control``, also ``0``: the no-op control, whose donor is the target
    itself (the same leaf, tokens, noise and query), so every effect is exactly 0."""
    low = 0 if control else 1
    if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or not low <= j <= depth:
        what = f"0..K={depth} (0: the no-op control, donor = target)" if control else f"1..K={depth}"
        raise InputError(f"divergence depth j must be an integer in {what}, got {j!r}")
    return int(j)


def _check_layer(layer, model: WorkspaceModel) -> int:
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 1 <= layer <= model.n_layers:
        raise InputError(f"layer must be an integer in 1..L={model.n_layers}, got {layer!r}")
    return int(layer)


def check_count(n, name: str = "n_contexts") -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise InputError(f"{name} must be an integer >= 2 (a standard error needs two), got {n!r}")
    return int(n)


def check_model_data(model, data_cfg: DataConfig) -> None:
    if not isinstance(model, torch.nn.Module) or not callable(getattr(model, "key_patch", None)):
        raise InputError(f"model must be a trained model (Models A, B, C: WorkspaceModel; T: TransformerModel), got "
                         f"{type(model).__name__}")
    if model.dim != data_cfg.dim:
        raise InputError(
            f"model works in D = {model.dim} but the data have D = {data_cfg.dim} (depth {data_cfg.depth})"
        )


def model_device(model: torch.nn.Module) -> torch.device:
    for t in (*model.parameters(), *model.buffers()):
        return t.device
    return torch.device("cpu")


# --- donors ----------------------------------------------------------------------------------------
def donor_signs(signs: torch.Tensor, j: int, generator: torch.Generator) -> torch.Tensor:
    """Donor leaves of divergence depth ``j`` (1..K): ``s'_k = s_k`` for ``k < j``, ``s'_j = -s_j``, the
    ``K - j`` signs below drawn uniformly from ``generator``. ``signs`` (n, K) in {+1, -1} -> (n, K) int8."""
    if not isinstance(signs, torch.Tensor) or signs.dim() != 2:
        got = tuple(signs.shape) if isinstance(signs, torch.Tensor) else type(signs).__name__
        raise InputError(f"signs must be an (n, K) tensor of +1/-1, got {got}")
    K = signs.shape[1]
    j = _check_depth(j, K)
    below = 1 - 2 * torch.randint(0, 2, (signs.shape[0], K - j), generator=generator, device=signs.device)
    return torch.cat([signs[:, : j - 1], -signs[:, j - 1 : j], below.to(signs.dtype)], dim=1).to(torch.int8)


def _targets(sampler: ContextSampler, seed: int, chunk: int, size: int) -> Contexts:
    return sampler.sample(size, sampler.generator(seed, PATCH_STREAM, _CHUNK_STEPS * chunk))


RANDOM = "random"  # the random-donor baseline's column: a leaf drawn independently of the target's


def _donors(sampler: ContextSampler, target: Contexts, j, seed: int, chunk: int) -> Contexts:
    """The donors of divergence depth ``j`` of ``target``, sharing its tokens, label noise and query; ``j = 0`` the
    target itself (the no-op control), ``j = RANDOM`` a leaf drawn uniformly and independently of the target's
    (the random-donor baseline, its own generator step of the chunk)."""
    if j == 0:  # the no-op control: the donor is the target
        return target
    if j == RANDOM:
        g = sampler.generator(seed, PATCH_STREAM, _CHUNK_STEPS * chunk + _CHUNK_STEPS - 1)
        signs = (1 - 2 * torch.randint(0, 2, tuple(target.signs.shape), generator=g,
                                       device=target.signs.device)).to(torch.int8)
    else:
        g = sampler.generator(seed, PATCH_STREAM, _CHUNK_STEPS * chunk + j)
        signs = donor_signs(target.signs, j, g)
    return sampler.contexts(sampler.theta_from_signs(signs), g, signs=signs, x=target.x, x_q=target.x_q,
                            noise=target.noise)


def _losses(model: WorkspaceModel, c: Contexts) -> torch.Tensor:
    """Per-context loss in float64: ``||theta_hat - theta||^2`` (decoding) or the query error (generic)."""
    out = model(c.x, c.y, c.x_q)
    if model.decodes:
        return ((out.theta_hat.double() - c.theta.double()) ** 2).sum(-1)  # (batch,)
    return (out.y_hat.double() - c.target.double()) ** 2  # (batch,)


def _sizes(n: int):
    for c, start in enumerate(range(0, n, CHUNK)):
        yield c, min(CHUNK, n - start)


@torch.no_grad()
def _run(model, data_cfg, n_contexts, seed, depths, layers, *, unpatched=True):
    """Per-context losses: ``{"unpatched": (n,), (l, j): (n,)}`` as float64 numpy arrays."""
    sampler = ContextSampler(data_cfg, model_device(model))
    out = {key: [] for key in ([("base",)] if unpatched else []) + [(l, j) for j in depths for l in layers]}
    was_training = model.training
    model.eval()
    try:
        for c, size in _sizes(n_contexts):
            target = _targets(sampler, seed, c, size)
            if unpatched:
                out[("base",)].append(_losses(model, target))
            for j in depths:
                donor = _donors(sampler, target, j, seed, c)
                with record(model, [model.key_tap_name(l) for l in layers]) as keys:
                    model(donor.x, donor.y, donor.x_q)
                for l in layers:
                    with patch(model, *model.key_patch(l, keys)):
                        out[(l, j)].append(_losses(model, target))
    finally:
        model.train(was_training)
    return {k: torch.cat(v).cpu().numpy() for k, v in out.items()}


def patched_losses(model: WorkspaceModel, data_cfg: DataConfig, layer: int, j: int, *, n_contexts: int = 2048,
                   seed: int = 0) -> np.ndarray:
    """Per-context losses (n_contexts,) float64 with layer ``layer``'s keys patched from a donor of divergence
    depth ``j``; units: ``||theta_hat - theta||^2`` for decoding readouts, the query error for the generic one.
    The same contexts as the cell ``(layer, j)`` of ``key_patching_table`` with the same ``seed``."""
    check_tree_data(data_cfg)
    check_model_data(model, data_cfg)
    layer, j = _check_layer(layer, model), _check_depth(j, data_cfg.depth, control=True)
    n, seed = check_count(n_contexts), check_seed(seed)
    return _run(model, data_cfg, n, seed, (j,), (layer,), unpatched=False)[(layer, j)]


def unpatched_losses(model: WorkspaceModel, data_cfg: DataConfig, *, n_contexts: int = 2048,
                     seed: int = 0) -> np.ndarray:
    """Per-context losses (n_contexts,) of the target contexts of ``patched_losses`` without a patch."""
    check_tree_data(data_cfg)
    check_model_data(model, data_cfg)
    n, seed = check_count(n_contexts), check_seed(seed)
    return _run(model, data_cfg, n, seed, (), ())[("base",)]


# --- the table -------------------------------------------------------------------------------------
def key_patching_table(model: WorkspaceModel, data_cfg: DataConfig, *, n_contexts: int = 2048, seed: int = 0,
                       depths=None, baselines: bool = False) -> PatchingTable:
    """Loss of ``model`` with layer ``l``'s keys patched from a donor of divergence depth ``j``, for layers
    ``1..L`` and ``depths`` (default ``1..K``; ``0`` is the no-op control, donor = target, whose effects are exactly
    0), on ``n_contexts`` target contexts shared by every cell. Model T: block ``l``'s keys ``hook_k`` at every
    context token (the summary token's own key kept). ``baselines``: the no-op control (``j = 0``) and the
    random-donor baseline (a leaf drawn independently of the target's; the table's ``random_donor`` columns)."""
    check_tree_data(data_cfg)
    check_model_data(model, data_cfg)
    n, seed = check_count(n_contexts), check_seed(seed)
    K = data_cfg.depth
    depths = check_depths(depths, K, baselines)
    layers = tuple(range(1, model.n_layers + 1))
    return paired_table(_run(model, data_cfg, n, seed, depths + (RANDOM,) * baselines, layers), layers, depths, n,
                        "theta" if model.decodes else "query", seed=seed, patched=key_tensor(model))


def check_depths(depths, K: int, baselines: bool = False) -> tuple:
    """Divergence depths of a model's table (default ``1..K``; ``0`` the no-op control), distinct; ``baselines``
    puts the no-op control first where it is not there."""
    out = tuple(range(1, K + 1)) if depths is None else \
        tuple(_check_depth(j, K, control=True) for j in np.atleast_1d(depths).tolist())
    if not out:
        raise InputError("depths must name at least one divergence depth")
    if len(set(out)) < len(out):
        raise InputError(f"depths must be distinct, got {', '.join(map(str, out))}")
    if not isinstance(baselines, bool):
        raise InputError(f"baselines must be True or False, got {baselines!r}")
    return (0, *out) if baselines and 0 not in out else out


def key_tensor(model) -> str:
    """The tensor key patching replaces in ``model``, its layer written ``{l}``."""
    if hasattr(model, "blocks"):
        return "blocks.{l}.attn.hook_k at the context tokens (the summary token's own key kept)"
    return model.key_tap_name(1).replace("1", "{l}", 1)


def paired_table(runs: dict, layers, depths, n: int, metric: str, intervention: str = "key", *, seed=None,
                 patched=None, how=None) -> PatchingTable:
    """The ``PatchingTable`` of a model's per-context losses ``runs`` (``("base",)`` unpatched, ``(l, j)`` each
    cell, on the same targets; ``(l, RANDOM)`` the random-donor baseline where run): mean, standard error and the
    paired effect of every cell."""
    base = runs[("base",)]
    shape = (len(layers), len(depths))
    loss, err, eff, eff_err = (np.zeros(shape) for _ in range(4))
    for a, l in enumerate(layers):
        for b, j in enumerate(depths):
            cell, effect = Estimate.of(runs[(l, j)]), Estimate.of(runs[(l, j)] - base)
            loss[a, b], err[a, b], eff[a, b], eff_err[a, b] = cell.value, cell.stderr, effect.value, effect.stderr
    random = {}
    if (layers[0], RANDOM) in runs:
        cells = [(Estimate.of(runs[(l, RANDOM)]), Estimate.of(runs[(l, RANDOM)] - base)) for l in layers]
        random = dict(zip(RANDOM_FIELDS, (np.array([c.value for c, _ in cells]), np.array([c.stderr for c, _ in cells]),
                                          np.array([e.value for _, e in cells]), np.array([e.stderr for _, e in cells]))))
    unpatched = Estimate.of(base)
    return PatchingTable(loss, err, unpatched, np.full(len(depths), unpatched.value),
                         np.full(len(depths), unpatched.stderr), n, "model", tuple(layers), tuple(depths),
                         metric=metric, effect=eff, effect_stderr=eff_err, intervention=intervention, seed=seed,
                         patched=patched, how=how, **random)


def table_from_dict(d: dict) -> PatchingTable:
    """The ``PatchingTable`` of its ``to_dict()`` (a stored table, theory or model), to lay it out again."""
    arrays = {k: None if d.get(k) is None else np.asarray(d[k], dtype=float)
              for k in ("loss", "stderr", "unpatched_by_depth", "unpatched_stderr_by_depth", "effect", "effect_stderr")}
    u = d["unpatched"]
    return PatchingTable(arrays["loss"], arrays["stderr"], Estimate(u["value"], u["stderr"], u["n"], u.get("how", "mc"),
                                                                    u.get("decoder")),
                         arrays["unpatched_by_depth"], arrays["unpatched_stderr_by_depth"], d["n"], d["strategy"],
                         tuple(d["layers"]), tuple(d["depths"]), metric=d.get("metric", "theta"),
                         effect=arrays["effect"], effect_stderr=arrays["effect_stderr"], decoder=d.get("decoder"),
                         intervention=d.get("intervention", "key"), seed=d.get("seed"), patched=d.get("patched"),
                         how=d.get("how"), **{k: None if d.get(k) is None else np.asarray(d[k], dtype=float)
                                              for k in RANDOM_FIELDS})


def theory_patching_table(data_cfg: DataConfig, budget: int, *, samples: int = 20_000, seed: int = 0,
                          strategy: str = "path", depths=None):
    """``fvnum.patching_table`` for the prior, ``N`` and ``s2`` of ``data_cfg`` (tokens channel), budget ``budget``:
    the same ``PatchingTable`` type as :func:`key_patching_table`."""
    from fvnum.mc.channels import tokens
    from fvnum.options import PatchSpec
    from fvnum.patching.keys import patching_table

    check_tree_data(data_cfg)
    return patching_table(fv_prior(data_cfg), strategy, budget, tokens(data_cfg.n_tokens, data_cfg.s2),
                          samples=samples, seed=seed, patch=PatchSpec(depths=depths))


# --- the theory's decoder as a readout -------------------------------------------------------------
def path_bayes_decoder(data_cfg: DataConfig):
    """The readout ``fvnum`` uses for the ``path`` strategy, as a function ``p (batch, B) -> theta_hat (batch, D)``
    for ``bridges.models.networks.path_model(data, B, readout=...)``: the exact posterior mean of the tree prior
    given readings ``p_k`` of the nodes ``n_k`` routed by their signs (``n_{k+1} = 2 n_k + [p_k < 0]``), under
    the exact law of the tokens channel (``fvnum.priors.tree.posterior_means``, docs/decoders.md).
    Not differentiable (computed in numpy)."""
    from fvnum.priors.tree import numeric_prior, posterior_means

    check_tree_data(data_cfg)
    spec = numeric_prior(fv_prior(data_cfg))
    channel = data_channel(data_cfg)

    def decode(p: torch.Tensor) -> torch.Tensor:
        readings = p.detach().double().cpu().numpy()  # (batch, B)
        nodes = np.ones(readings.shape, dtype=np.int64)  # (batch, B) routed nodes
        for k in range(1, readings.shape[1]):
            nodes[:, k] = 2 * nodes[:, k - 1] + (readings[:, k - 1] < 0)
        mean = posterior_means(spec, channel, nodes, readings)  # (batch, D)
        return torch.from_numpy(mean).to(device=p.device, dtype=p.dtype)

    return decode
