"""Finite-atom priors (docs/theory.md section 6): ``theta`` is one of ``M`` atoms, uniform or weighted.

:class:`FinitePrior` is every prior with atoms and log-weights, as a prior object (``fvnum.priors.registry``): its
sampling (atom indices), moments, and the exact Bayes decoder over the atoms under the gaussian channel (the
"dMMSE" of task-diversity studies: the posterior weights ``w_m exp(-||phi - W theta_m||^2 / (2 tau^2))``). A
distribution samples and scores: what is computed about it lives in the rooms that own it, registered for its class
(``fvnum.priors.analyses``, at the end of this module): the policies of its own strategies (``greedy_coordinate``,
``greedy_dense``, ``optimal``) and their price (``fvnum.optimum.finite``, by the pair of the prior's class and the
strategy's), its noiseless and noisy Bellman optima
(``fvnum.optimum.atoms_dp``), the bracket of its noisy optimum (``fvnum.bounds``), its theory rows beside trained
models (``fvnum.finite_theory``) and its ridge baseline (``fvnum.linear_theory.ridge_loss``).
:class:`AtomsPrior` is the user's: ``AtomsPrior(atoms, weights=None)``, or ``AtomsPrior.draw(M, D, seed)`` (the
atoms drawn once from ``N(0, I_D)``), or ``AtomsPrior.of(tree)`` (the tree prior on its ``2^K`` leaves).
``read_atoms`` reads an ``(M, D)`` ``.npy`` file, sized before it is read (the atoms' checks, the reader and the
atoms by their digest: :mod:`fvnum.priors.atoms_arrays`).

The tokens channel has no exact decoder here (its law depends on ``||theta||^2``, which atoms need not
share): refused in one line.
"""
from __future__ import annotations

import math

import numpy as np

from fvsym._validate import check_int

from fvnum.priors.analyses import register_analysis
from fvnum.priors.registry import Prior, atoms_of
from fvnum.priors.atoms_arrays import MAX_ATOMS, MAX_DIM, check_atoms, check_weights, read_atoms
from fvsym.errors import InputError, reworded

GREEDY_DIRECTIONS = 2  # greedy_dense on a finite prior: the principal directions tried beside the coordinates
# (fvnum.policies.policies.FiniteGreedy); the prior's work per sample (work_floats) has room for them
DIVERSITY_SPAWN = 61  # the stream of AtomsPrior.draw: SeedSequence(seed, spawn_key=(61,)), apart from fv mc's


class FinitePrior(Prior):
    """A prior with finitely many atoms: ``atoms`` (M, D) floats and ``log_weights`` (M,) normalised (their
    exponentials sum to 1). Subclasses set both through :meth:`_set` (validated)."""

    name = "finite"

    def _set(self, atoms: np.ndarray, weights: np.ndarray | None) -> None:
        atoms = check_atoms(atoms)
        M = atoms.shape[0]
        if weights is None:
            log_w = np.full(M, -math.log(M))
        else:
            w = check_weights(weights, M)
            with np.errstate(divide="ignore"):
                log_w = np.log(w / w.sum())
        atoms.flags.writeable = False
        log_w.flags.writeable = False
        self.atoms, self.log_weights = atoms, log_w
        self.uniform = weights is None or bool(np.all(log_w == log_w[0]))

    # --- sizes and moments ------------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return int(self.atoms.shape[1])

    @property
    def n_atoms(self) -> int:
        return int(self.atoms.shape[0])

    @property
    def weights(self) -> np.ndarray:
        return np.exp(self.log_weights)

    @property
    def mean(self) -> np.ndarray:
        return self.weights @ self.atoms

    @property
    def covariance(self) -> np.ndarray:
        centred = self.atoms - self.mean
        C = (centred * self.weights[:, None]).T @ centred
        return (C + C.T) / 2  # symmetric to the last bit

    @property
    def second_moment(self) -> float:
        return float(self.weights @ (self.atoms**2).sum(axis=1))

    @property
    def eigenvalues(self) -> np.ndarray:
        return np.sort(np.maximum(np.linalg.eigvalsh(self.covariance), 0.0))[::-1]

    # --- sampling -----------------------------------------------------------------------------------------
    def sample(self, n: int, rng) -> np.ndarray:
        """``n`` atom indices drawn by the weights."""
        if self.uniform:
            return rng.integers(0, self.n_atoms, size=n, dtype=np.int64)
        cum = np.cumsum(self.weights)
        return np.minimum(np.searchsorted(cum, rng.random(n) * cum[-1], side="right"), self.n_atoms - 1)

    def thetas(self, latents) -> np.ndarray:
        return self.atoms[np.asarray(latents, dtype=np.int64)]

    # --- the exact decoder (dMMSE) --------------------------------------------------------------------
    def log_posterior(self, design, phi, tau: float) -> np.ndarray:
        """(n, M) log posterior weights (unnormalised) given readings ``phi`` (n, B) of ``design``: node numbers
        (B,) or (n, B) (coordinate ``n`` is ``e_n``; 0: idle) or unit rows (B, D) or (n, B, D). Without noise
        the atoms that explain the readings (to rounding), or the nearest where none does."""
        d2 = self._distances(design, phi)
        if tau > 0:
            return self.log_weights - d2 / (2.0 * tau * tau)
        scale = 1.0 + float(np.abs(self.atoms).max()) ** 2
        tol = 1e-18 * scale * max(1, np.asarray(phi).shape[1])
        alive = d2 <= d2.min(axis=1, keepdims=True) + tol
        return np.where(alive, self.log_weights, -np.inf)

    def posterior_weights(self, design, phi, tau: float) -> np.ndarray:
        """(n, M) posterior weights over the atoms (each row sums to 1)."""
        lp = self.log_posterior(design, phi, tau)
        w = np.exp(lp - lp.max(axis=1, keepdims=True))
        return w / w.sum(axis=1, keepdims=True)

    def posterior_means(self, channel, design, phi) -> np.ndarray:
        self._check_channel(channel)
        return self.posterior_weights(design, phi, channel.tau) @ self.atoms

    def posterior_losses(self, channel, design, phi, latents) -> np.ndarray:
        """(n,) ``||E[theta | phi] - theta||^2`` with ``theta`` the atoms ``latents``."""
        mean = self.posterior_means(channel, design, phi)
        return ((mean - self.thetas(latents)) ** 2).sum(axis=1)

    def _distances(self, design, phi) -> np.ndarray:
        phi = np.asarray(phi, dtype=float)
        design = np.asarray(design)
        if design.dtype.kind in "iu":
            nodes = np.broadcast_to(design, phi.shape)
            proj = self.atoms.T[np.maximum(nodes, 1) - 1]  # (n, B, M)
            diff = np.where((nodes > 0)[:, :, None], phi[:, :, None] - proj, 0.0)
        else:
            W = design.astype(float)
            proj = np.einsum("mbd,kd->mbk", W[None] if W.ndim == 2 else W, self.atoms)  # (m, B, M)
            diff = phi[:, :, None] - proj
        return (diff * diff).sum(axis=1)

    def _check_channel(self, channel) -> None:
        if channel.kind != "gaussian":
            raise InputError(f"the {self.name} prior has an exact decoder under the gaussian channel only (the "
                             "tokens channel's law depends on ||theta||^2); give fvnum.gaussian(tau)")

    # --- the decoder's work -----------------------------------------------------------------------------
    def work_floats(self, budget: int) -> int:
        return self.n_atoms * (max(budget, 1) + 3 + self.dim + GREEDY_DIRECTIONS)

    @property
    def second_moment_matrix(self) -> np.ndarray:
        """``S = E[theta theta^T]`` (D, D): the covariance plus ``mean mean^T``."""
        S = (self.atoms * self.weights[:, None]).T @ self.atoms
        return (S + S.T) / 2

    # --- derived priors ---------------------------------------------------------------------------------------
    def rotated(self, Q) -> "AtomsPrior":
        """The same prior turned by an orthogonal ``Q`` (D, D): atoms ``Q theta_m``."""
        Q = np.asarray(Q, dtype=float)
        if Q.shape != (self.dim, self.dim) or not np.allclose(Q @ Q.T, np.eye(self.dim), atol=1e-9):
            raise InputError(f"Q must be an orthogonal ({self.dim}, {self.dim}) matrix, got shape {Q.shape}")
        return AtomsPrior(self.atoms @ Q.T, self.weights)

    def to_dict(self) -> dict:
        return {"prior": self.name, "n_atoms": self.n_atoms, "dim": self.dim, "uniform": self.uniform}

    def __repr__(self) -> str:
        how = "uniform" if self.uniform else "weighted"
        return f"{type(self).__name__}(M={self.n_atoms}, D={self.dim}, {how})"


class AtomsPrior(FinitePrior):
    """``theta`` is one of the ``M`` rows of ``atoms`` (M, D), uniform or by ``weights`` (non-negative, summing to
    more than 0; normalised here). docs/theory.md section 6."""

    name = "atoms"

    def __init__(self, atoms, weights=None):
        self._set(atoms, weights)

    @classmethod
    def draw(cls, n_atoms, dim, seed=0) -> "AtomsPrior":
        """``n_atoms`` atoms drawn once from ``N(0, I_dim)`` by ``seed`` (the task diversity ``M`` of Raventós et
        al.); the stream ``SeedSequence(seed, spawn_key=(61,))`` is not one a Monte Carlo run of the same seed
        draws from."""
        from fvsym.guards.limits import check_memory
        from fvsym._validate import check_seed

        M = check_int(n_atoms, "diversity M", minimum=1, maximum=MAX_ATOMS)
        D = check_int(dim, "dim D", minimum=1, maximum=MAX_DIM)
        check_memory(f"{M} atoms of dimension {D}", 8.0 * M * D * 2)
        rng = np.random.default_rng(np.random.SeedSequence(check_seed(seed), spawn_key=(DIVERSITY_SPAWN,)))
        return cls(rng.standard_normal((M, D)))

    @classmethod
    def of(cls, prior) -> "AtomsPrior":
        """A prior with atoms as an ``AtomsPrior`` (the tree prior: its ``2^K`` leaves, uniform)."""
        atoms, log_w = atoms_of(prior)
        return cls(atoms, np.exp(log_w))


# --- a prior from the command line's options (the atoms as arrays: fvnum.priors.atoms_arrays) -----------
def atoms_from_options(args) -> AtomsPrior:
    """``fv mc --prior atoms``: ``--atoms FILE.npy``, or ``--diversity M --dim D`` drawn by ``--seed``."""
    given_file, given_m = getattr(args, "atoms", None), getattr(args, "diversity", None)
    if (given_file is None) == (given_m is None):
        raise InputError("the atoms prior needs exactly one of --atoms FILE.npy or --diversity M (with --dim D)")
    if given_file is not None:
        if getattr(args, "dim", None) is not None:
            raise InputError(f"--dim applies to --diversity (the file gives its own D), got --dim {args.dim}")
        try:
            return AtomsPrior(read_atoms(given_file))
        except ValueError as exc:
            raise reworded(exc, f"--atoms: {exc}") from None
    if getattr(args, "dim", None) is None:
        raise InputError("--diversity M needs --dim D (the atoms' dimension)")
    return AtomsPrior.draw(given_m, args.dim, getattr(args, "seed", 0))


# --- the analyses of a finite prior, in the rooms that own them (fvnum.priors.analyses; loaded on first use) ---------
# the policy of a strategy and its price, by the pair of classes (the strategy's as "module:Class": the strategies sit
# above the priors); the other built-in strategies are refused, a user's builds its own (or registers its pair)
_BUILTIN, _OWN = "fvnum.policies.builtin:", "fvnum.optimum.finite:"
for _shared in ("Fixed", "TopLevels", "UserPolicy"):  # built by the strategy itself, as on every prior
    register_analysis(FinitePrior, "policy", _OWN + "shared_policy", strategy=_BUILTIN + _shared)
register_analysis(FinitePrior, "policy", _OWN + "refused_policy", strategy=_BUILTIN + "Builtin")
register_analysis(FinitePrior, "policy", _OWN + "greedy_coordinate_policy", strategy=_BUILTIN + "GreedyCoordinate")
register_analysis(FinitePrior, "mc_seconds", _OWN + "greedy_coordinate_seconds", strategy=_BUILTIN + "GreedyCoordinate")
register_analysis(FinitePrior, "policy", _OWN + "greedy_dense_policy", strategy=_BUILTIN + "GreedyDense")
register_analysis(FinitePrior, "mc_seconds", _OWN + "greedy_dense_seconds", strategy=_BUILTIN + "GreedyDense")
register_analysis(FinitePrior, "policy", _OWN + "finite_optimal_policy", strategy=_BUILTIN + "Optimal")
register_analysis(FinitePrior, "mc_seconds", _OWN + "finite_optimal_seconds", strategy=_BUILTIN + "Optimal")
register_analysis(FinitePrior, "check_cost", "fvnum.optimum.finite:check_finite_cost")
register_analysis(FinitePrior, "mc_seconds", "fvnum.optimum.finite:finite_mc_seconds")
register_analysis(FinitePrior, "noisy_bellman", "fvnum.optimum.atoms_dp:atoms_noisy_bellman")
register_analysis(FinitePrior, "bounds", "fvnum.optimum.finite:finite_bounds")
register_analysis(FinitePrior, "comparison_table", "fvnum.finite_theory:finite_comparison_table")
register_analysis(FinitePrior, "comparison_seconds", "fvnum.finite_theory:finite_comparison_seconds")
