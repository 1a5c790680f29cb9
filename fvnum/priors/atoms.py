"""Finite-atom priors (docs/theory.md section 6): ``theta`` is one of ``M`` atoms, uniform or weighted.

:class:`FinitePrior` is every prior with atoms and log-weights, as a prior object (``fvnum.priors.registry``): its
sampling (atom indices), moments, the exact Bayes decoder over the atoms under the gaussian channel (the
"dMMSE" of task-diversity studies: the posterior weights ``w_m exp(-||phi - W theta_m||^2 / (2 tau^2))``),
its own strategies (``greedy_coordinate`` and ``greedy_dense``; ``optimal``: without noise the noiseless
Bellman recursion over the partitions of the atoms that coordinate readings induce, under noise the exact noisy
recursion of ``fvnum.optimum.atoms_dp`` where its work fits), its ridge baseline (the
Gaussian prior of its mean and covariance, whose loss is given by the Gaussian formulas of docs/theory.md section
5) and its price. :class:`AtomsPrior` is the user's: ``AtomsPrior(atoms, weights=None)``, or
``AtomsPrior.draw(M, D, seed)`` (the atoms drawn once from ``N(0, I_D)``), or ``AtomsPrior.of(tree)`` (the
tree prior on its ``2^K`` leaves). ``read_atoms`` reads an ``(M, D)`` ``.npy`` file, sized before it is read
(the atoms' checks, the reader and the atoms by their digest: :mod:`fvnum.priors.atoms_arrays`).

The tokens channel has no exact decoder here (its law depends on ``||theta||^2``, which atoms need not
share): refused in one line.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from fvsym._validate import _short, check_int

from fvnum.priors.registry import Prior, atoms_of
from fvnum.priors.atoms_arrays import MAX_ATOMS, MAX_DIM, check_atoms, check_weights, read_atoms
from fvnum.policies.strategies import GREEDY_DIRECTIONS
from fvsym.errors import InputError, reworded

DECODE_OPS = 3  # per sample, atom and (reading + coordinate) of the decoder
RATE = 2e7  # elementary operations per second and thread (as fvnum.guards.limits)
GREEDY_RATE = 3e8  # the lookahead kernel's inner loop (grid point x atom x coordinate) per second and thread: measured
# 6.5e8 at M = 1024 and 4096, D = 8, budget 4, tau 0.35, on 2 cores at load 9 (studies/atoms/diversity.py)
BELLMAN_MAX_ATOMS = 64
BELLMAN_ROUTE_SECONDS = 2e-5  # per sample and layer of the noiseless policy (a Python lookup of its cell)
BELLMAN_OP_SECONDS = 2e-5  # per cell and design of the noiseless recursion (numpy on a few atoms)
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
                             "tokens channel's law depends on ||theta||^2); give tau")

    # --- strategies, price ---------------------------------------------------------------------------
    def policy(self, strategy: str, channel, budget: int, *, layers=None, width=None, **options):
        """``greedy_coordinate``, ``greedy_dense`` and (noiseless) ``optimal``; None for the shared strategies
        (``fixed``, ``top_levels``, ``policy``); a one-line ValueError for the others."""
        from fvnum.policies.strategies import FiniteBellmanPolicy, FiniteGreedy

        if strategy in ("fixed", "top_levels", "policy"):
            return None
        self._check_channel(channel)
        if strategy in ("greedy_coordinate", "greedy_dense"):
            if (layers not in (None, budget)) or (width not in (None, 1)):
                raise InputError(f"strategy {strategy!r} has layers = budget and width = 1")
            return FiniteGreedy(self, channel.tau, budget, dense=strategy == "greedy_dense")
        if strategy == "optimal" and channel.tau == 0:
            L, d = _layout(budget, layers, width)
            return FiniteBellmanPolicy(noiseless_bellman(self, L, d), name="optimal")
        if strategy == "optimal":
            from fvnum.optimum import atoms_dp

            if (layers not in (None, budget)) or (width not in (None, 1)) or not atoms_dp.feasible(
                    self.atoms, channel.tau, budget):
                raise InputError(f"strategy 'optimal' under noise (tau = {channel.tau:.4g}) on the {self.name} prior is "
                                 f"solved exactly only for width 1 and budget <= {atoms_dp.MAX_BUDGET} where the "
                                 f"recursion's work fits (M = {self.n_atoms}, D = {self.dim}, budget {budget} does "
                                 "not); greedy_coordinate is an upper bound, and the noiseless optimum (tau = 0) a "
                                 "lower one (fvnum.bounds brackets it)")
            return self.noisy_bellman(budget, channel.tau, refine=False).policy
        raise InputError(f"strategy {strategy!r} does not apply to the {self.name} prior; choose fixed, top_levels, "
                         "greedy_coordinate, greedy_dense, policy, or optimal (at tau = 0; under noise for width 1 "
                         "and budget <= 3 where its recursion fits)")

    def noisy_bellman(self, budget: int, tau: float, *, points=None, refine: bool = True):
        """The exact noisy optimum on these atoms (``fvnum.optimum.atoms_dp.noisy_bellman``: coordinate class, width 1,
        budget <= 3 where its work fits); ``fvnum.noisy_bellman`` asks this method of a finite prior."""
        from fvnum.optimum import atoms_dp

        return atoms_dp.noisy_bellman(self, budget, tau, points=points, refine=refine)

    def bounds(self, budget: int, channel, *, samples: int = 20_000, seed: int = 0, exact=None, threads=None,
               progress=None):
        """The bracket of the noisy optimum on these atoms (``fvnum.optimum.atoms_dp.bounds``); ``fvnum.bounds`` asks this
        method of a finite prior."""
        from fvnum.optimum import atoms_dp

        def noiseless(layers):  # None beyond the recursion's size: the bracket then starts at 0
            return noiseless_bellman(self, layers).value if self.n_atoms <= BELLMAN_MAX_ATOMS else None

        return atoms_dp.bounds(self, budget, channel, noiseless, samples=samples, seed=seed, exact=exact,
                               threads=threads, progress=progress)

    def work_floats(self, budget: int) -> int:
        return self.n_atoms * (max(budget, 1) + 3 + self.dim + GREEDY_DIRECTIONS)

    def check_cost(self, strategy: str, budget: int, channel, samples: int, threads=None) -> None:
        """Refuse (one-line ValueError) a Monte Carlo run over the time cap or the memory (``fvnum.guards.resources``):
        the decoder ``DECODE_OPS M (B + D)`` a sample; the greedy lookahead, per layer, its candidates times
        ``M (D + 1)`` times the grid (at most ``GRID_MAX`` points; the distinct readings without noise)."""
        from fvnum.mc._chunks import default_threads
        from fvsym.guards.limits import check_memory, check_time

        self._check_channel(channel)
        threads = default_threads() if threads is None else int(threads)
        M, D, B = self.n_atoms, self.dim, max(int(budget), 1)
        seconds = self.mc_seconds(strategy, budget, channel, samples, threads)
        what = f"Monte Carlo of {strategy!r} on the {self.name} prior (M = {M}, D = {D}, budget {budget})"
        check_memory(what, 8.0 * (M * D + 256 * threads * self.work_floats(B)))
        check_time(f"{what} with {samples} samples", seconds)

    def mc_seconds(self, strategy: str, budget: int, channel, samples: int, threads=None) -> float:
        """Estimated seconds of :func:`fvnum.loss_mc` of ``strategy`` on this prior (:meth:`check_cost`'s price)."""
        from fvnum.mc._chunks import default_threads
        from fvnum.mc._kernels.atoms import GRID_MAX, GRID_STEP, GRID_TAIL

        threads = default_threads() if threads is None else int(threads)
        M, D, B = self.n_atoms, self.dim, max(int(budget), 1)
        ops = DECODE_OPS * M * (B + D) / RATE
        if strategy in ("greedy_coordinate", "greedy_dense"):
            span = float(np.ptp(self.atoms)) if M > 1 else 0.0
            tau = channel.tau
            grid = 1 if tau == 0 else min(GRID_MAX, (span + 2 * GRID_TAIL * tau) / (GRID_STEP * tau))
            cands = D + (GREEDY_DIRECTIONS if strategy == "greedy_dense" else 0)
            ops += B * cands * M * (D + 1) * (grid + math.log2(M + 1)) / GREEDY_RATE
            ops += (B * M * D * D / RATE if strategy == "greedy_dense" else 0)
        if strategy == "optimal" and channel.tau > 0:  # the exact noisy policy: its solve, then a solve per sample
            from fvnum.optimum import atoms_dp

            if atoms_dp.feasible(self.atoms, channel.tau, B):
                return (atoms_dp.solve_seconds(self.atoms, channel.tau, B, refine=False) + samples * ops
                        + atoms_dp.policy_seconds(self.atoms, channel.tau, B, samples))
        elif strategy == "optimal":  # the noiseless policy routes each sample in Python, a cell lookup per layer
            ops += B * BELLMAN_ROUTE_SECONDS
        return samples * ops / max(1, min(threads, samples // 256 + 1))

    # --- the ridge baseline -------------------------------------------------------------------------------
    def ridge(self):
        """The Gaussian prior of the atoms' covariance (``fvsym.GaussianPrior``; its mean does not change a
        loss): the Bayes decoder as ``M -> infinity``, the linear (LMMSE) one on the atoms."""
        from fvsym.priors import GaussianPrior

        return GaussianPrior(self.covariance)

    def ridge_loss(self, design, tau: float) -> float:
        """Exact loss of the ridge (LMMSE) decoder on this prior for a fixed ``design`` (node numbers or unit
        rows): ``tr P`` of docs/theory.md section 5 with the atoms' covariance (``fvnum.priors.gaussian.design_loss``);
        the loss of a linear decoder depends on the prior through its first two moments only."""
        from fvnum.priors.gaussian import GaussSpec, design_loss

        return design_loss(GaussSpec.from_cov(self.covariance), _rows(design, self.dim), float(tau))

    def ridge_optimum(self, budget: int, tau: float) -> float:
        """The ridge decoder's best loss with ``budget`` unit rows (water-filling on the atoms' covariance;
        by Theorem G1 no adaptive design of a linear-Gaussian decoder does better)."""
        from fvnum.priors.gaussian import GaussSpec, design_loss, optimal_design

        spec = GaussSpec.from_cov(self.covariance)
        return design_loss(spec, optimal_design(spec, int(budget), float(tau)), float(tau))

    # --- the theory beside trained models (bridges.analysis.compare, fv compare) ---------------------------------------
    @property
    def second_moment_matrix(self) -> np.ndarray:
        """``S = E[theta theta^T]`` (D, D): the covariance plus ``mean mean^T``."""
        S = (self.atoms * self.weights[:, None]).T @ self.atoms
        return (S + S.T) / 2

    def linear_loss(self, design, channel) -> float:
        """Exact loss of the best linear readout WITHOUT intercept, ``theta_hat = U phi``, of a fixed ``design``
        (node numbers or unit rows (B, D)) with linear keys: Model C's readout ``x_q^T U p`` (docs/theory.md sections 3,
        7). It depends on the prior through ``S = E[theta theta^T]`` only, exactly, for any ``N``: under ``tokens``
        ``E[phi phi^T] = (1 + 1/N) W S W^T + tau^2 W W^T`` (``E[y^2 x x^T | theta] = (||theta||^2 + s2) I + 2 theta
        theta^T``), under ``gaussian`` ``W S W^T + tau^2 I``; loss ``tr S - tr(S W^T E[phi phi^T]^-1 W S)``."""
        S, W = self.second_moment_matrix, _rows(design, self.dim)
        if channel.kind == "tokens":
            G = (1 + 1 / channel.n_tokens) * W @ S @ W.T + channel.tau2 * W @ W.T
        else:
            G = W @ S @ W.T + channel.tau2 * np.eye(W.shape[0])
        SW = S @ W.T  # (D, B)
        return float(np.trace(S) - np.trace(SW @ np.linalg.pinv(G, hermitian=True) @ SW.T))

    def top_directions(self, budget: int) -> np.ndarray:
        """The ``budget`` leading eigen-directions of ``S = E[theta theta^T]`` as unit rows (B, D): the best linear
        design without intercept under either channel (``E[phi phi^T]`` commutes with ``S``; Ky Fan)."""
        _, V = np.linalg.eigh(self.second_moment_matrix)
        return np.ascontiguousarray(V[:, ::-1][:, : int(budget)].T)

    def comparison_table(self, budget: int, channel, *, samples: int = 20_000, seed: int = 0,
                         search_samples: int = 2_000, dense: bool = True, keyed=None, threads=None):
        """The theory rows beside Models A, B, C trained on this prior (a ``fvnum.theory.ComparisonTable``; the
        models see the ``tokens`` ``channel``). Each model's prediction (``fvnum.model_rows``):

        - A: ``best_adaptive``, the better of the path-free adaptive policies ``greedy_coordinate`` and
          ``greedy_dense`` (``greedy_dense`` only with ``dense``) with the dMMSE decoder, chosen on
          ``search_samples`` samples and reported on them (the best adaptive policy found on atoms; an upper bound
          on the linear-key adaptive optimum of the gaussian channel);
        - B: ``best_nonadaptive_unit``, the best of the fixed designs: the top eigen-directions of ``S``, of the
          covariance, and the first ``B`` coordinates, with the dMMSE decoder (chosen on ``search_samples``
          samples of another seed, reported on ``samples``);
        - C: ``top_levels_linear``, the exact linear theory of the top eigen-directions of ``S`` (no intercept,
          as C's readout) under the models' channel, equal to ``best_linear_nonadaptive`` (Ky Fan: no linear
          estimator with linear keys and no intercept beats it, a lower bound for C).

        dMMSE rows are computed under the gaussian channel at the models' ``tau`` (the atoms prior's exact decoder
        is the gaussian channel's: under ``tokens`` the noise reveals ``||theta||^2``, which the atoms do not
        share), and say so (``channel: gaussian``); they are references for the trained models, not bounds.
        Reference rows: ``top_levels`` (dMMSE, coordinates ``1..B``), ridge (the Gaussian of the atoms' mean and
        covariance) on those coordinates (``ridge_top_levels``) and with its best design (``gaussian_optimum``),
        exact. Keyed rows (``keyed``) are not built on this prior: refused in one line."""
        from fvnum.policies.registry import loss_mc
        from fvnum.theory import ComparisonTable, TheoryRow, _with_roles

        if keyed is not None:
            raise InputError(f"keyed rows (key family {keyed!r}) are not built on the {self.name} prior: their laws "
                             "and searches are the tree's and the Gaussian's; give keyed=None (fv compare: --keyed none)")
        B = check_int(budget, "budget", minimum=1, maximum=self.dim)
        tau = channel.tau
        gauss = {"tau": tau, "threads": threads, "progress": False}
        here = f"dMMSE decoder, gaussian channel at the models' tau = {tau:.4g}"
        rows = [TheoryRow.mc("top_levels", loss_mc(self, "top_levels", B, samples=samples, seed=seed, **gauss),
                             f"non-adaptive, coordinates 1..B, {here}", "gaussian")]
        found = []
        for strategy in ("greedy_coordinate", "greedy_dense")[: 2 if dense else 1]:
            found.append((loss_mc(self, strategy, B, samples=search_samples, seed=seed, **gauss), strategy))
        est, name = min(found, key=lambda f: f[0].value)
        rows.append(TheoryRow.mc("best_adaptive", est, f"best adaptive policy found on atoms: {name} (of "
                                 f"{', '.join(n for _, n in found)}), {here}", "gaussian", policy=name))
        designs = {"top eigen-directions of E[theta theta^T]": self.top_directions(B),
                   "top eigen-directions of the covariance": _top_eigen(self.covariance, B),
                   "coordinates 1..B": np.arange(1, B + 1, dtype=np.int64)}
        scored = [(loss_mc(self, "fixed", B, design=d, samples=search_samples, seed=seed + 1, **gauss).value, what)
                  for what, d in designs.items()]
        what = min(scored)[1]
        est = loss_mc(self, "fixed", B, design=designs[what], samples=samples, seed=seed, **gauss)
        rows.append(TheoryRow.mc("best_nonadaptive_unit", est, f"best non-adaptive design found: {what} (of "
                                 f"{len(designs)} fixed designs), {here}", "gaussian"))
        linear = self.linear_loss(self.top_directions(B), channel)
        rows.append(TheoryRow.exact("top_levels_linear", linear, "exact linear theory: the top eigen-directions of "
                                    "E[theta theta^T], linear keys, linear readout without intercept (Model C's)",
                                    channel.kind))
        rows.append(TheoryRow.exact("best_linear_nonadaptive", linear, "best linear non-adaptive loss (any linear "
                                    "keys, linear readout without intercept; Ky Fan on E[theta theta^T]): no such "
                                    "estimator beats it", channel.kind))
        coords = np.arange(1, B + 1, dtype=np.int64)
        rows.append(TheoryRow.exact("ridge_top_levels", self.ridge_loss(coords, tau), "ridge (the Gaussian of the "
                                    "atoms' mean and covariance) on coordinates 1..B, gaussian channel at the same tau",
                                    "gaussian"))
        rows.append(TheoryRow.exact("gaussian_optimum", self.ridge_optimum(B, tau), "ridge with its best unit design "
                                    "(water-filling on the atoms' covariance), gaussian channel at the same tau",
                                    "gaussian"))
        return ComparisonTable(self.name, B, channel, int(samples), int(seed), _with_roles(rows))

    def comparison_seconds(self, budget: int, channel, *, samples: int = 20_000, search_samples: int = 2_000,
                           dense: bool = True, threads=None) -> float:
        """The price of :meth:`comparison_table` (its Monte Carlo runs, by :meth:`mc_seconds`)."""
        from fvnum.mc.channels import make_channel

        gauss = make_channel(self, tau=channel.tau)
        mc = lambda strategy, n: self.mc_seconds(strategy, budget, gauss, n, threads)  # noqa: E731
        adaptive = mc("greedy_coordinate", search_samples) + (mc("greedy_dense", search_samples) if dense else 0.0)
        return adaptive + 2 * mc("top_levels", samples) + 3 * mc("top_levels", search_samples)

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
        from fvnum.mc.simulate import check_seed

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


# --- the noiseless Bellman recursion over partitions --------------------------------------------------
@dataclass(frozen=True)
class FiniteBellman:
    """The noiseless optimum of a finite prior in the coordinate class (docs/theory.md section 3): ``value`` (the
    loss), ``layers`` x ``width``, ``design`` (the first layer's coordinates, 1-based), ``n_states`` (cells
    solved); ``best(cell, layers_left)`` the coordinates to read on a cell (a sorted tuple of atom indices)."""

    value: float
    layers: int
    width: int
    design: tuple
    n_states: int
    solver: object

    def best(self, cell: tuple, layers_left: int) -> tuple:
        return self.solver.best(cell, layers_left)

    def to_dict(self) -> dict:
        return {"loss": self.value, "layers": self.layers, "width": self.width, "design": list(self.design),
                "n_states": self.n_states, "how": "exact: noiseless Bellman recursion over partitions of the atoms"}


class _Partitions:
    """``V(S, l) = min over designs W of sum over the cells C of S that W's readings induce of V(C, l - 1)``,
    ``V(S, 0) = sum_{m in S} w_m ||theta_m - mu_S||^2``, memoised on (cell, l)."""

    def __init__(self, atoms, weights, width):
        self.atoms, self.weights, self.width = atoms, weights, width
        self.designs = list(combinations(range(atoms.shape[1]), width))
        self.memo = {}

    def terminal(self, cell) -> float:
        if len(cell) == 1:  # one atom left: known exactly (no rounding residue)
            return 0.0
        idx = list(cell)
        w, A = self.weights[idx], self.atoms[idx]
        mu = w @ A / w.sum()
        return float(w @ ((A - mu) ** 2).sum(axis=1))

    def cells(self, cell, design):
        idx = np.array(cell)
        keys = self.atoms[np.ix_(idx, design)]
        _, inverse = np.unique(keys, axis=0, return_inverse=True)
        return [tuple(idx[inverse.ravel() == k].tolist()) for k in range(inverse.max() + 1)]

    def value(self, cell, layers) -> float:
        return self._solve(cell, layers)[0]

    def best(self, cell, layers) -> tuple:
        return self._solve(cell, layers)[1]

    def _solve(self, cell, layers):
        if layers == 0 or len(cell) == 1:
            return self.terminal(cell), ()
        key = (cell, layers)
        if key not in self.memo:
            best = (math.inf, ())
            for design in self.designs:
                v = sum(self._solve(c, layers - 1)[0] for c in self.cells(cell, list(design)))
                if not best[1] or v < best[0] - 1e-12 * abs(best[0]):  # ties: the first design
                    best = (v, tuple(d + 1 for d in design))
            self.memo[key] = best
        return self.memo[key]


def noiseless_bellman(prior, layers, width=1) -> FiniteBellman:
    """The exact noiseless optimum of a finite prior (``prior.atoms``, or a tree's leaves) with ``layers`` layers
    of ``width`` coordinates: the recursion over the partitions of the atoms (docs/theory.md sections 3, 6). Sized:
    at most ``BELLMAN_MAX_ATOMS`` atoms, and priced (cells times designs) under the time cap."""
    from math import comb

    from fvsym.guards.limits import check_time

    atoms, log_w = atoms_of(prior)
    M, D = atoms.shape
    L = check_int(layers, "layers", minimum=0, maximum=64)
    d = check_int(width, "width", minimum=1, maximum=D)
    if M > BELLMAN_MAX_ATOMS:
        raise InputError(f"the noiseless Bellman recursion over partitions takes at most {BELLMAN_MAX_ATOMS} atoms, "
                         f"got M = {M}")
    n_designs = comb(D, d)
    cells = sum(min(M, n_designs**k) for k in range(L + 1))  # cells met at each depth, at most M apart
    check_time(f"the noiseless Bellman recursion on {M} atoms (D = {D}, {L} layers of width {d})",
               BELLMAN_OP_SECONDS * cells * n_designs * max(1, min(L, M)))
    weights = np.exp(log_w)
    solver = _Partitions(atoms, weights, d)
    full = tuple(range(M))
    value = solver.value(full, L) / float(weights.sum())
    return FiniteBellman(value, L, d, solver.best(full, L), len(solver.memo), solver)


# --- helpers -------------------------------------------------------------------------------------------------
def _top_eigen(matrix, budget: int) -> np.ndarray:
    """The ``budget`` leading eigen-directions of a symmetric ``matrix`` as unit rows (B, D)."""
    _, V = np.linalg.eigh(np.asarray(matrix, dtype=float))
    return np.ascontiguousarray(V[:, ::-1][:, : int(budget)].T)


def _rows(design, dim: int) -> np.ndarray:
    """A design as unit rows (B, D): node numbers (coordinates 1..D) become ``e_n``."""
    arr = np.asarray(design)
    if arr.ndim == 1:
        if arr.size and (arr.dtype.kind not in "iu" or arr.min() < 1 or arr.max() > dim):
            raise InputError(f"a coordinate design holds coordinates 1..{dim}, got {_short(design)}")
        W = np.zeros((arr.size, dim))
        W[np.arange(arr.size), arr.astype(np.int64) - 1] = 1.0
        return W
    W = arr.astype(float)
    if W.ndim != 2 or W.shape[1] != dim:
        raise InputError(f"a design of unit rows has shape (B, {dim}), got {W.shape}")
    return W


def _layout(budget: int, layers, width) -> tuple[int, int]:
    from fvnum.policies.registry import _layout as layout

    return layout(budget, layers, width)
