"""Contexts of docs/theory.md section 1, sampled in torch on the fly from seeded generators.

One source of truth: the scales ``a_k`` and the covariances come from ``fvsym.priors.TreePrior`` /
``GaussianPrior`` (their sympy numbers are evaluated to floats once and cached), the heap-path rule from
``fvsym.heap`` (on tensors); nothing here re-types a prior. Tree leaves: signs ``s in {+1, -1}^K``, path
``n_1 = 1``, ``n_{k+1} = 2 n_k + [s_k = -1]``; node ``n`` is coordinate ``n - 1`` of theta.

Randomness: every draw takes a ``torch.Generator``; ``step_generator(seed, stream, step)`` makes the
generator of one training step (or one held-out batch) from a ``numpy.random.SeedSequence``, so a step's
data depend only on ``(seed, stream, step)``: runs are reproducible and resumable at any step.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np
import torch

from fvsym.heap import child
from fvsym.priors import GaussianPrior, TreePrior

from bridges.runs.config import DataConfig
from fvsym.errors import InputError, reworded

TRAIN_STREAM = 0
EVAL_STREAM = 1
EVAL_SEED = 20240607  # held-out contexts are shared by every model and seed (paired comparisons)


def step_generator(seed: int, stream: int, step: int, device="cpu") -> torch.Generator:
    """The generator for ``step`` of ``stream`` under ``seed`` (independent streams via SeedSequence)."""
    state = int(np.random.SeedSequence([int(seed), int(stream), int(step)]).generate_state(1, np.uint64)[0])
    return torch.Generator(device=device).manual_seed(state)


def _exact_alpha(alpha: float) -> str:
    return repr(float(alpha))  # "0.5" -> exact 1/2 in fvsym (decimal strings are parsed exactly)


@functools.cache
def _tree_prior(depth: int, alpha: float | None, scales: tuple[str, ...] | None = None) -> TreePrior:
    """``TreePrior(depth, alpha)``, or ``TreePrior(depth, scales=scales)`` where general scales are given."""
    if scales is not None:
        return TreePrior(depth, scales=scales)
    return TreePrior(depth, _exact_alpha(alpha))


@functools.cache
def gaussian_prior(depth: int, alpha: float | None, cov: str, scales: tuple[str, ...] | None = None) -> GaussianPrior:
    if cov == "matched":
        return GaussianPrior.matched(_tree_prior(depth, alpha, scales))
    return GaussianPrior.isotropic(2**depth - 1)


ATOMS_FILE = "atoms.npy"  # a run on the atoms prior keeps its atoms in its folder (the run stays self-contained)


@functools.cache
def _atoms_prior(path, digest, diversity, dim, seed):
    from fvnum.priors.atoms import AtomsPrior
    from fvnum.priors.atoms_arrays import atoms_by_digest, read_atoms_file

    if diversity is not None:
        return AtomsPrior.draw(diversity, dim, seed)
    atoms = atoms_by_digest(digest)  # read before in this process (the configuration, the run folder)
    if atoms is None:
        try:
            atoms, _ = read_atoms_file(path, digest)
        except ValueError as exc:
            raise reworded(exc, f"{exc}; a run folder keeps its atoms in {ATOMS_FILE}: give that file as the atoms") \
                from None
    return AtomsPrior(atoms)


def atoms_prior(cfg: DataConfig):
    """The ``fvnum.priors.atoms.AtomsPrior`` of an atoms configuration: drawn by ``atoms_seed``, or the atoms of the
    digest ``atoms_sha256`` (found among the atoms read in this process, else read from ``atoms`` and checked)."""
    seed = 0 if cfg.atoms_seed is None else cfg.atoms_seed
    return _atoms_prior(cfg.atoms, cfg.atoms_sha256, cfg.diversity, cfg.atoms_dim, seed)


# the prior of a configuration's fields (depth, alpha, scales; cov; the atoms), by its registered name
_PRIOR_OF_CONFIG = {"tree": lambda cfg: _tree_prior(cfg.depth, cfg.alpha, cfg.scales),
                    "gaussian": lambda cfg: gaussian_prior(cfg.depth, cfg.alpha, cfg.cov, cfg.scales),
                    "atoms": atoms_prior}


def fv_prior(cfg: DataConfig):
    """The prior object that ``cfg`` samples from: a ``fvsym`` prior (exact numbers), or a ``fvnum`` prior
    object (the atoms prior)."""
    return _PRIOR_OF_CONFIG[cfg.prior](cfg)


def finite_latents(cfg: DataConfig):
    """``(atoms (M, D), log_weights (M,))`` of a prior whose latents are finitely many atoms given as such (a
    ``fvnum`` prior object with atoms: the atoms prior), else None (the tree's leaves are its signs, a Gaussian
    has none)."""
    from fvnum.priors.registry import is_prior_object

    prior = fv_prior(cfg)
    if not is_prior_object(prior) or getattr(prior, "atoms", None) is None:
        return None
    return np.asarray(prior.atoms, dtype=np.float64), np.asarray(prior.log_weights, dtype=np.float64)


def keep_prior_files(cfg: DataConfig, folder) -> None:
    """Keep what a run folder needs to rebuild its prior: the atoms of an atoms prior as ``atoms.npy`` (written
    atomically; one already there is checked against the run's digest, and a copy that differs is refused in
    one line). Nothing for the other priors (their fields are the prior)."""
    from pathlib import Path

    latents = finite_latents(cfg)
    if latents is None:
        return
    from fvnum.priors.atoms_arrays import atoms_digest, read_atoms_file

    path = Path(folder) / ATOMS_FILE
    atoms = latents[0]
    if path.exists():
        read_atoms_file(path, atoms_digest(atoms))
        return
    import io

    from bridges.runs.store import write_atomic

    buf = io.BytesIO()
    np.save(buf, atoms, allow_pickle=False)
    write_atomic(path, buf.getvalue())


def find_prior_files(cfg: DataConfig, folder) -> None:
    """Make the atoms a run folder keeps (``atoms.npy``, checked against the run's digest) the ones its
    configuration finds, wherever its ``atoms`` path now points (``fv audit`` of a run whose file moved)."""
    from pathlib import Path

    path = Path(folder) / ATOMS_FILE
    if cfg.atoms_sha256 is not None and path.is_file():
        from fvnum.priors.atoms_arrays import read_atoms_file

        read_atoms_file(path, cfg.atoms_sha256)


@functools.cache
def data_channel(cfg: DataConfig):
    """The ``fvnum`` channel the models see: ``tokens`` with ``N = n_tokens`` and ``s2`` of ``cfg``; its
    ``tau`` is the decoder's effective noise (``fvnum.mc.channels.effective_tau2``, the one definition)."""
    from fvnum.mc.channels import make_channel, tokens

    return make_channel(fv_prior(cfg), tokens(cfg.n_tokens, cfg.s2))


@functools.cache
def _moments(cfg: DataConfig) -> tuple[tuple[float, ...], tuple[tuple[float, ...], ...], float]:
    """(scales, covariance, E||theta||^2) as floats, evaluated once from the fvsym prior."""
    prior = fv_prior(cfg)
    scales = tuple(float(a) for a in prior.scales) if cfg.has_leaves else ()
    if finite_latents(cfg) is not None:  # a fvnum prior object: its covariance in floats already
        return scales, tuple(map(tuple, np.asarray(prior.covariance, dtype=float).tolist())), float(prior.second_moment)
    C = prior.covariance if cfg.has_leaves else prior.cov  # exact (fvsym names it so on each prior)
    cov = tuple(tuple(float(C[i, j]) for j in range(C.cols)) for i in range(C.rows))
    return scales, cov, float(prior.second_moment)


def path_nodes(signs: torch.Tensor) -> torch.Tensor:
    """Heap numbers ``n_1 .. n_K`` of the leaves ``signs`` (batch, K) -> (batch, K) long."""
    nodes = torch.empty(signs.shape, dtype=torch.long, device=signs.device)  # (batch, K)
    n = torch.ones(signs.shape[0], dtype=torch.long, device=signs.device)  # (batch,)
    for k in range(signs.shape[1]):
        nodes[:, k] = n
        n = child(n, signs[:, k])
    return nodes


def leaf_index(signs: torch.Tensor) -> torch.Tensor:
    """Leaf index (fvsym convention: bit k from the top is 1 iff ``s_k = -1``), (batch, K) -> (batch,)."""
    index = torch.zeros(signs.shape[0], dtype=torch.long, device=signs.device)  # (batch,)
    for k in range(signs.shape[1]):
        index = child(index, signs[:, k])
    return index


@dataclass(frozen=True)
class Contexts:
    """A batch of contexts. ``noise`` is kept so a donor context can share everything but ``theta``."""

    x: torch.Tensor  # (batch, N, D) token inputs x_i ~ N(0, I_D)
    y: torch.Tensor  # (batch, N) labels <theta, x_i> + eps_i
    x_q: torch.Tensor  # (batch, D) query
    theta: torch.Tensor  # (batch, D) latent context
    noise: torch.Tensor  # (batch, N) label noise eps_i ~ N(0, s2)
    signs: torch.Tensor | None = None  # (batch, K) leaf signs in {+1, -1} (tree prior), else None

    @property
    def target(self) -> torch.Tensor:
        """Noise-free query target ``<theta, x_q>``, (batch,)."""
        return (self.theta * self.x_q).sum(-1)

    @property
    def n_contexts(self) -> int:
        return self.theta.shape[0]

    def to(self, device) -> "Contexts":
        move = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in self.__dict__.items()}
        return replace(self, **move)


class ContextSampler:
    """Samples contexts for ``cfg`` on ``device`` in ``dtype`` (float32 by default)."""

    def __init__(self, cfg: DataConfig, device="cpu", dtype=torch.float32):
        self.cfg = cfg
        self.device = torch.device(device)
        self.dtype = dtype
        scales, cov, second_moment = _moments(cfg)
        self.scales = torch.tensor(scales, dtype=dtype, device=self.device)  # (K,) tree only, else (0,)
        self.cov = torch.tensor(cov, dtype=torch.float64)  # (D, D) exact prior covariance, float64
        latents = finite_latents(cfg)
        self.atoms = self.atom_weights = None  # (M, D), (M,): a prior of finitely many atoms, sampled by index
        if latents is not None:
            self.atoms = torch.tensor(latents[0], dtype=dtype, device=self.device)
            self.atom_weights = torch.tensor(np.exp(latents[1]), dtype=torch.float64, device=self.device)
            self.uniform = bool(np.all(latents[1] == latents[1][0]))
        if self.atoms is not None:  # no Cholesky factor: M < D atoms have a singular covariance
            self.chol = None
        elif _is_diagonal(self.cov):
            chol = torch.diag(self.cov.diagonal().sqrt())  # (D, D)
        else:
            chol = torch.linalg.cholesky(self.cov)  # (D, D)
        if self.atoms is None:
            self.chol = chol.to(device=self.device, dtype=dtype)  # (D, D) lower factor of the covariance
        self.second_moment = second_moment  # E||theta||^2

    @property
    def prior(self):
        return fv_prior(self.cfg)

    @property
    def dim(self) -> int:
        return self.cfg.dim

    @property
    def channel(self):
        """The ``fvnum`` channel of these contexts (:func:`data_channel`)."""
        return data_channel(self.cfg)

    @property
    def tau2(self) -> float:
        """Effective channel noise of an N-token context, ``(E||theta||^2 + s2) / N`` (docs/theory.md section 2)."""
        return self.channel.tau2

    def generator(self, seed: int, stream: int, step: int) -> torch.Generator:
        return step_generator(seed, stream, step, self.device)

    # --- theta -----------------------------------------------------------------------
    def sample_signs(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """Uniform leaves, (n, K) in {+1, -1} (tree prior only)."""
        self._need_tree()
        bits = torch.randint(0, 2, (n, self.cfg.depth), generator=generator, device=self.device)
        return (1 - 2 * bits).to(torch.int8)  # (n, K)

    def theta_from_signs(self, signs: torch.Tensor) -> torch.Tensor:
        """``theta_s = sum_k a_k s_k e_{n_k}``, (n, K) -> (n, D)."""
        self._need_tree()
        signs = signs.to(self.device)
        theta = torch.zeros(signs.shape[0], self.dim, dtype=self.dtype, device=self.device)  # (n, D)
        theta.scatter_(1, path_nodes(signs) - 1, self.scales * signs.to(self.dtype))
        return theta

    def sample_theta(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``theta`` (n, D) from the prior, and the leaf signs (n, K) for the tree prior (else None)."""
        if self.cfg.has_leaves:
            signs = self.sample_signs(n, generator)
            return self.theta_from_signs(signs), signs
        if self.atoms is not None:  # one atom per context, by the weights
            if self.uniform:
                index = torch.randint(0, self.atoms.shape[0], (n,), generator=generator, device=self.device)
            else:
                index = torch.multinomial(self.atom_weights, n, replacement=True, generator=generator)
            return self.atoms[index], None
        z = torch.randn(n, self.dim, generator=generator, dtype=self.dtype, device=self.device)  # (n, D)
        return z @ self.chol.T, None

    # --- tokens ----------------------------------------------------------------------
    def contexts(self, theta, generator, *, signs=None, x=None, x_q=None, noise=None,
                 n_tokens: int | None = None) -> Contexts:
        """Tokens for given ``theta`` (n, D). Pass ``x`` (n, N, D), ``x_q`` (n, D) and/or ``noise`` (n, N)
        to reuse them (a donor context that differs from its target only in theta, docs/theory.md section 8);
        whatever is not given is drawn from ``generator`` in the order x, noise, x_q. ``n_tokens``: N of these
        contexts (default the data's; a noise curriculum trains on more)."""
        n, N, D = theta.shape[0], self.cfg.n_tokens if n_tokens is None else n_tokens, self.dim
        kw = dict(generator=generator, dtype=self.dtype, device=self.device)
        if x is None:
            x = torch.randn(n, N, D, **kw)  # (n, N, D)
        if noise is None:
            noise = torch.randn(n, N, **kw) * self.cfg.s2**0.5  # (n, N)
        if x_q is None:
            x_q = torch.randn(n, D, **kw)  # (n, D)
        if x.shape != (n, N, D) or noise.shape != (n, N) or x_q.shape != (n, D):
            raise InputError(
                f"shared tensors must have shapes x {(n, N, D)}, noise {(n, N)}, x_q {(n, D)}; got "
                f"{tuple(x.shape)}, {tuple(noise.shape)}, {tuple(x_q.shape)}"
            )
        y = torch.einsum("bnd,bd->bn", x, theta) + noise  # (n, N)
        return Contexts(x=x, y=y, x_q=x_q, theta=theta, noise=noise, signs=signs)

    def sample(self, n: int, generator: torch.Generator, n_tokens: int | None = None) -> Contexts:
        """``n`` fresh contexts (of ``n_tokens`` tokens; default the data's N): theta (then signs), x, noise,
        x_q, in that order from ``generator``."""
        theta, signs = self.sample_theta(n, generator)
        return self.contexts(theta, generator, signs=signs, n_tokens=n_tokens)

    def _need_tree(self):
        if not self.cfg.has_leaves:
            raise InputError(f"leaf signs exist only for the tree prior, not prior={self.cfg.prior!r}")


def _is_diagonal(M: torch.Tensor) -> bool:
    return bool(torch.equal(M, torch.diag(M.diagonal())))
