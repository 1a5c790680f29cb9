"""The simulation engine of docs/theory.md section 2: a Policy object under a channel, decoded by the
posterior mean, with a standard error (:func:`simulate`; named strategies: ``fvnum.policies.registry``). The
decoder is exact except under the tokens channel on a Gaussian prior (``fvnum.mc.channels.decoder_of``
names it; every Estimate carries it in ``decoder``; docs/decoders.md).

Each chunk of samples draws, in this order and from its own seeded stream: the latents (leaf indices
for a tree prior, ``theta`` for a Gaussian prior), the gaussian-channel noise ``xi`` (n, B) (gaussian
channel only; drawn even at ``tau = 0``, so curves over ``tau`` share their noise), and the tokens
statistic (tokens channel only). The same seed therefore gives common random numbers across
strategies of the same budget, which makes their differences precise.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from fvsym._validate import _short, check_seed, integer_value
from fvsym.errors import InputError

from fvnum.mc import _chunks
from fvnum.mc._scalars import plain_scalar, plain_scalars  # noqa: F401 (read by every entry point)
from fvnum.mc.channels import Channel, decoder_of, make_channel, token_statistics
from fvnum.estimate import Moments, pool
from fvnum.priors.registry import capability, is_prior_object, numeric
from fvnum.mc.protocol import Policy, Rows, Run
from fvnum.mc.protocol import check_rows

MAX_SAMPLES = 10**10


# --- inputs ---------------------------------------------------------------------------------------
def check_samples(samples) -> int:
    n = integer_value(samples)  # ints of any kind (numpy, sympy, integral Fractions)
    if n is None:
        if isinstance(samples, (float, np.floating)) and float(samples).is_integer():
            n = int(samples)
        else:
            raise InputError(f"samples must be an integer, got {_short(samples)}")
    samples = n
    if samples < 2:
        raise InputError(f"samples must be >= 2 (a standard error needs two), got {_short(samples)}")
    if samples > MAX_SAMPLES:
        raise InputError(f"samples must be <= {MAX_SAMPLES}, got {_short(samples)}")
    return int(samples)


def check_budget(budget, maximum=None, why="") -> int:
    """Integer ``0 <= budget <= maximum`` (no upper limit when ``maximum`` is None)."""
    if integer_value(budget) is None:
        raise InputError(f"budget must be an integer, got {_short(budget)}")
    budget = integer_value(budget)
    if budget < 0:
        raise InputError(f"budget must be >= 0, got {_short(budget)}")
    if maximum is not None and budget > maximum:
        raise InputError(f"budget {_short(budget)} is too large: {why}")
    return int(budget)


_UNCHECKED = object()  # an input the entry point does not take


class Inputs(NamedTuple):
    """The checked inputs of an entry point of fvnum: ``spec`` (``TreeSpec`` or ``GaussSpec``), ``channel``,
    and the plain ints ``samples``, ``seed`` and ``budget`` (None where the entry point takes none)."""

    spec: object
    channel: Channel
    samples: int | None
    seed: int | None
    budget: int | None


def check_inputs(prior, channel, *, samples=_UNCHECKED, seed=_UNCHECKED, budget=_UNCHECKED, max_budget=None,
                 why: str = "", tree: str | None = None) -> Inputs:
    """The preamble every entry point of fvnum shares, in one order: the numeric prior
    (``fvnum.priors.tree.numeric_prior``; with ``tree``, anything but a tree prior is refused with that message),
    the channel (``fvnum.gaussian(tau)`` or ``fvnum.tokens(N)``, resolved against the prior:
    ``fvnum.mc.channels.make_channel``), then ``samples``, ``seed`` and ``budget`` (at most ``max_budget``, ``why``
    saying why), each where given."""
    spec = numeric(prior)  # a prior object itself, or the numeric view of a fvsym prior
    if tree is not None and capability(spec, "heap_depth") is None:
        raise InputError(tree)
    samples, seed, budget = plain_scalars(samples=samples, seed=seed, budget=budget).values()
    channel = make_channel(spec, channel)
    samples = None if samples is _UNCHECKED else check_samples(samples)
    seed = None if seed is _UNCHECKED else check_seed(seed)
    budget = None if budget is _UNCHECKED else check_budget(budget, max_budget, why)
    return Inputs(spec, channel, samples, seed, budget)


def check_design(design, spec, budget: int) -> np.ndarray:
    """Node list (heap numbering, 1..D) or a (B, D) matrix of unit rows."""
    if design is None:
        raise InputError("strategy 'fixed' needs a design: node numbers or a (B, D) matrix of unit rows")
    arr = np.asarray(design)
    if arr.ndim == 1 and (arr.dtype.kind in "iu" or arr.size == 0 or np.all(np.mod(arr, 1) == 0)):
        if arr.size and arr.dtype.kind == "f":
            arr = arr.astype(np.int64)
        arr = arr.astype(np.int64)
        bad = [int(x) for x in arr if not 1 <= x <= spec.dim]
        if bad:
            raise InputError(f"design node {bad[0]} is outside the tree (nodes 1..{spec.dim})")
        if arr.size != budget:
            raise InputError(f"design has {arr.size} nodes but budget is {budget}")
        return arr
    if arr.ndim == 2 and arr.dtype == object:  # rows of Fractions or sympy numbers
        try:
            arr = arr.astype(float)
        except (TypeError, ValueError):
            raise InputError("design matrix must hold numbers") from None
    if arr.ndim != 2 or arr.dtype.kind not in "fiu":
        raise InputError(f"design must be a node list or a (B, D) matrix, got an array of shape {arr.shape}")
    arr = arr.astype(float)
    if arr.shape != (budget, spec.dim):
        raise InputError(f"design matrix has shape {arr.shape}, expected (budget, D) = ({budget}, {spec.dim})")
    norms = np.linalg.norm(arr, axis=1)
    if not np.all(np.abs(norms - 1) <= 1e-6):
        i = int(np.argmax(np.abs(norms - 1)))
        raise InputError(f"design row {i} has norm {norms[i]:.6g}; rows must be unit vectors")
    return arr


# --- one chunk of draws ---------------------------------------------------------------------------
@dataclass
class Draws:
    """Random inputs of ``n`` samples: ``leaves`` (tree) or ``theta`` (Gaussian), gaussian-channel
    ``noise`` (n, B), tokens ``stat`` (n, D)."""

    n: int
    leaves: np.ndarray | None = None
    theta: np.ndarray | None = None
    noise: np.ndarray | None = None
    stat: np.ndarray | None = None

    @classmethod
    def concat(cls, parts: list) -> "Draws":
        if len(parts) == 1:
            return parts[0]
        cat = lambda name: None if getattr(parts[0], name) is None else np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
        return cls(sum(p.n for p in parts), cat("leaves"), cat("theta"), cat("noise"), cat("stat"))

    def dense(self, spec) -> np.ndarray:
        if self.theta is None:
            self.theta = spec.thetas(self.leaves)
        return self.theta


def draw_samples(spec, channel: Channel, n: int, budget: int, rng) -> Draws:
    """``n`` samples' latents and their channel's noise for ``budget`` readings (a :class:`Draws`), from ``rng``."""
    d = Draws(n)
    d.leaves, d.theta = capability(spec, "draw_latents")(n, rng)  # latents (leaf or atom indices), or theta itself
    if channel.kind == "gaussian":
        d.noise = rng.standard_normal((n, budget))
    else:
        d.stat = token_statistics([d.dense(spec)], channel.n_tokens, channel.s2, rng)[0]
    return d


def read(spec, channel: Channel, draws: Draws, rows: Rows, offset: int) -> np.ndarray:
    """Readings (n, d) of one layer whose channels are ``offset .. offset + d - 1`` of the budget."""
    n = draws.n
    if rows.coordinate:
        nodes = rows.nodes(n)
        idle = nodes == 0
        if channel.kind == "tokens":
            vals = np.take_along_axis(draws.stat, np.maximum(nodes, 1) - 1, axis=1)
            return np.where(idle, 0.0, vals)
        values = capability(spec, "coordinate_values")  # the tree reads its nodes from the leaves
        if values is not None:
            vals = values(draws.leaves, nodes)
        else:
            vals = np.take_along_axis(draws.dense(spec), np.maximum(nodes, 1) - 1, axis=1)
        vals = vals + channel.tau * draws.noise[:, offset : offset + nodes.shape[1]]
        return np.where(idle, 0.0, vals)
    W = rows.array
    src = draws.stat if channel.kind == "tokens" else draws.dense(spec)
    vals = src @ W.T if rows.shared else np.einsum("nbd,nd->nb", W, src)
    if channel.kind == "gaussian":
        vals = vals + channel.tau * draws.noise[:, offset : offset + W.shape[-2]]
    return vals


def decode_losses(spec, channel: Channel, draws: Draws, rows: list, phi: np.ndarray) -> np.ndarray:
    """Per-sample loss of the posterior mean given readings ``phi`` (n, B) of the rows ``rows``: exact on the
    tree prior under both channels (under ``tokens``: the law of the one statistic the rows read), and on a Gaussian
    prior under the gaussian channel; under ``tokens`` on a Gaussian prior the gaussian channel's decoder
    at ``tau(N)``, an approximation (``fvnum.mc.channels.decoder_of``)."""
    latents = draws.theta if draws.leaves is None else draws.leaves
    return spec.posterior_losses(channel, _design(spec, rows, draws.n), phi, latents)  # the prior's own exact decoder


def decode_means(spec, channel: Channel, draws: Draws, rows: list, phi: np.ndarray) -> np.ndarray:
    """(n, D) the posterior means of :func:`decode_losses` (the same decoder)."""
    return spec.posterior_means(channel, _design(spec, rows, draws.n), phi)


def _design(spec, rows: list, n: int) -> np.ndarray:
    """The rows read, as the prior's decoder takes them: node numbers (n, B) where it decodes nodes, else dense."""
    if capability(spec, "decodes_nodes") and all(r.coordinate for r in rows):
        return np.concatenate([r.nodes(n) for r in rows], axis=1) if rows else np.zeros((n, 0), np.int64)
    return _stack_dense(rows, n, spec.dim)


def _stack_dense(rows: list, n: int, dim: int) -> np.ndarray:
    """(1, B, D) when every layer is shared by all samples, else (n, B, D)."""
    if not rows:
        return np.zeros((1, 0, dim))
    parts = [r.dense(n, dim) for r in rows]
    if not all(r.shared for r in rows):
        parts = [np.broadcast_to(p, (n,) + p.shape[1:]) for p in parts]
    return np.ascontiguousarray(np.concatenate(parts, axis=1))


def run_policy(spec, channel, policy: Policy, draws: Draws, *, donor: Draws | None = None, patch_layer: int = 0,
               informed: bool = False) -> Run:
    """Route, read and decode one chunk. With ``donor`` and ``patch_layer`` l >= 1, layer ``l`` reads the
    rows the policy chooses on the donor context (key patching, docs/theory.md section 8)."""
    n, L, d, D = draws.n, policy.layers, policy.width, spec.dim
    phi = np.zeros((n, L, d))
    chosen, actual = [], []
    state = policy.start(n)
    if donor is not None and patch_layer >= 1:
        dstate, dphi = policy.start(n), np.zeros((n, L, d))
    for l in range(L):
        rows = check_rows(policy.rows(l, state, phi[:, :l]), n=n, width=d, dim=D, layer=l)
        act = rows
        if donor is not None and l < patch_layer:
            drows = check_rows(policy.rows(l, dstate, dphi[:, :l]), n=n, width=d, dim=D, layer=l)
            if l == patch_layer - 1:
                act = drows
            else:
                dphi[:, l] = read(spec, channel, donor, drows, l * d)
                dstate = policy.update(l, dstate, drows, dphi[:, l])
        phi[:, l] = read(spec, channel, draws, act, l * d)
        state = policy.update(l, state, rows, phi[:, l])
        chosen.append(rows)
        actual.append(act)
    loss = decode_losses(spec, channel, draws, actual if informed else chosen, phi.reshape(n, L * d))
    return Run(loss, phi, chosen, actual)


# --- the public estimator -------------------------------------------------------------------------
@dataclass(frozen=True)
class FunctionVectors:
    """The readings of every sample, ``Estimate.function_vectors`` of ``loss_mc(..., record=True)`` (docs/theory.md
    section 9).

    ``phi`` (n, L, d): the readings of every layer, so ``Phi_l = phi[:, :l].reshape(n, l * d)``;
    ``nodes`` (n, L, d): the nodes read (coordinate policies), else None; ``rows`` (L, d, D): the design
    of a non-adaptive dense strategy, else None; ``leaves`` (n,) for a tree prior (the path prefix
    ``s_1..s_l`` of a sample follows from its leaf) or the atom indices of a finite prior (``fvnum.priors.atoms``),
    ``theta`` (n, D) for a Gaussian prior; ``loss`` (n,).
    """

    phi: np.ndarray
    loss: np.ndarray
    nodes: np.ndarray | None = None
    rows: np.ndarray | None = None
    leaves: np.ndarray | None = None
    theta: np.ndarray | None = None

    def Phi(self, layer: int) -> np.ndarray:
        """The function vector after ``layer`` layers, (n, layer * d)."""
        return self.phi[:, :layer].reshape(self.phi.shape[0], -1)

    def to_dict(self) -> dict:
        """Every array as nested lists (None where absent)."""
        return {k: None if v is None else np.asarray(v).tolist()
                for k, v in (("phi", self.phi), ("loss", self.loss), ("nodes", self.nodes), ("rows", self.rows),
                             ("leaves", self.leaves), ("theta", self.theta))}

    def __repr__(self) -> str:
        n, L, d = self.phi.shape
        extra = ", ".join(f"{k} {np.shape(v)}" for k, v in (("nodes", self.nodes), ("rows", self.rows),
                                                           ("leaves", self.leaves), ("theta", self.theta)) if v is not None)
        return (f"FunctionVectors({n} samples, {L} layers of width {d}: phi {self.phi.shape}, mean loss "
                f"{float(np.mean(self.loss)):.5g}" + (f"; {extra}" if extra else "") + ")")


def draw_floats(spec, channel: Channel, budget: int) -> int:
    """Floats drawn per sample (sets the random block size: strategy-independent)."""
    dense_theta = capability(spec, "coordinate_values") is None or channel.kind == "tokens"
    return 1 + budget + (spec.dim if dense_theta else 0) + (spec.dim if channel.kind == "tokens" else 0)


def work_floats(spec, channel: Channel, pol: Policy, budget: int) -> int:
    """Floats of work per sample of a policy (sets its chunk size)."""
    decoder = spec.work_floats(budget) if is_prior_object(spec) and hasattr(spec, "work_floats") else 0  # its decoder
    return draw_floats(spec, channel, budget) + 4 * budget + pol.work_floats(spec, budget) + decoder


def blocks(spec, channel: Channel, pol: Policy, budget: int, factor: int = 1) -> dict:
    """Random block (strategy-independent; room for a dense latent per sample) and the policy's chunk."""
    block = _chunks.block_size(draw_floats(spec, channel, budget) + spec.dim)
    return {"block": block, "chunk": _chunks.chunk_size(factor * work_floats(spec, channel, pol, budget), block)}


def simulate(spec, channel: Channel, pol: Policy, budget: int, *, samples: int, seed: int, record=False,
             threads=None, progress=False, purpose=_chunks.EVAL):
    """The Estimate of a Policy object; with ``record``, its ``function_vectors`` hold every sample's readings."""

    def chunk(sizes, rngs):
        draws = Draws.concat([draw_samples(spec, channel, n, budget, rng) for n, rng in zip(sizes, rngs)])
        size = draws.n
        run = pol.run(spec, channel, draws, budget)  # a fused kernel, or None: routed layer by layer
        if run is None:
            run = run_policy(spec, channel, pol, draws)

        extra = None
        if record:
            nodes = (np.stack([r.nodes(size) for r in run.rows], axis=1)
                     if run.rows and all(r.coordinate for r in run.rows) else None)
            extra = (run.phi, run.loss, nodes, draws.leaves, draws.theta if draws.leaves is None else None)
        return Moments.of(run.loss), extra

    parts = _chunks.run_chunks(chunk, samples, seed, **blocks(spec, channel, pol, budget), purpose=purpose,
                               threads=threads, progress=progress)
    est = replace(pool(p[0] for p in parts).estimate(), decoder=decoder_of(spec, channel))
    if not record:
        return est
    cat = lambda i: None if parts[0][1][i] is None else np.concatenate([p[1][i] for p in parts])  # noqa: E731
    rows = None
    if not pol.adaptive and np.asarray(pol.design).dtype.kind not in "iu":
        rows = np.asarray(pol.design)[None]
    return replace(est, function_vectors=FunctionVectors(cat(0), cat(1), cat(2), rows, cat(3), cat(4)))
