"""The theory side of a comparison with trained models (THEORY.md sections 3 to 7), for one prior, one
budget and one :class:`~fvnum.channels.Channel`.

Every row carries the channel it is for (``channel``): the channel the models see (``tokens``, or the
``gaussian`` channel when that is the one given), or says plainly which other one it is (``gaussian``:
the gaussian channel at the same ``tau``; ``noiseless``: ``tau = 0``). Monte Carlo rows come from
``fvnum`` under the given channel; exact rows from ``fvsym`` (sympy, then a float) or from the exact
linear theory below.

Exact linear theory (THEORY.md section 3). For a design ``W`` (B, D) and prior covariance ``C``:
``Cov(phi) = (1 + 1/N) W C W^T + tau^2 W W^T`` under ``tokens`` (``Cov(y x | theta) = (||theta||^2 + s2) I
+ theta theta^T``) and ``W C W^T + tau^2 I_B`` under ``gaussian`` (fresh noise on every row);
``E[theta phi^T] = C W^T``; the linear (LMMSE) readout is ``U = C W^T Cov(phi)^-1`` with loss ``tr C - tr(C W^T Cov(phi)^-1 W C)``
(:func:`lmmse`). Under ``tokens`` a reading is a projection ``W S`` of one statistic ``S`` whose
covariance is ``Sigma = k C + tau^2 I``, so the loss depends on the row space of ``W`` only; ``Sigma``
commutes with ``C``, and the best linear non-adaptive design reads the top ``B`` eigen-directions of
``C``: loss ``tr C - sum_{i <= B} c_i^2 / (k c_i + tau^2)`` (eigenvalues ``c_1 >= c_2 >= ..``; Ky Fan),
:func:`best_linear_loss`. Under ``gaussian`` a repeated reading brings fresh noise and the optimum is
the rank-constrained water-filling of section 5 (``fvsym.gaussian.water_filling``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from fvsym._validate import _short

from .channels import Channel, effective_tau2
from .estimate import Estimate

ROW_CHANNELS = ("tokens", "gaussian", "noiseless")


@dataclass(frozen=True)
class TheoryRow:
    """One theory number: ``value`` with ``stderr`` (0 when exact), ``how`` (``exact`` or ``mc n=..``),
    ``what`` (in words), ``channel`` (the channel the number is for), and for some rows the ``policy``
    or the ``design`` (heap node numbers) behind it."""

    name: str
    value: float
    stderr: float
    how: str
    what: str
    channel: str
    policy: str | None = None
    design: tuple | None = None

    def __post_init__(self):
        if self.channel not in ROW_CHANNELS:
            raise ValueError(f"row channel must be one of {', '.join(ROW_CHANNELS)}, got {self.channel!r}")

    @classmethod
    def exact(cls, name: str, value, what: str, channel: str, **extra) -> "TheoryRow":
        return cls(name, float(value), 0.0, "exact", what, channel, **extra)

    @classmethod
    def mc(cls, name: str, est: Estimate, what: str, channel: str, **extra) -> "TheoryRow":
        return cls(name, float(est.value), float(est.stderr), f"mc n={est.n}", what, channel, **extra)

    def to_dict(self) -> dict:
        out = {"name": self.name, "value": self.value, "stderr": self.stderr, "how": self.how, "what": self.what,
               "channel": self.channel}
        if self.policy is not None:
            out["policy"] = self.policy
        if self.design is not None:
            out["design"] = list(self.design)
        return out


@dataclass(frozen=True)
class ComparisonTable:
    """The theory rows of one comparison: ``prior`` (``tree`` | ``gaussian``), ``budget`` B, the
    ``channel`` the models see, ``samples`` and ``seed`` of the Monte Carlo rows, and ``rows``."""

    prior: str
    budget: int
    channel: Channel
    samples: int
    seed: int
    rows: tuple

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def names(self) -> tuple:
        return tuple(r.name for r in self.rows)

    def row(self, name: str) -> TheoryRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise ValueError(f"no theory row {name!r}; the table has {', '.join(self.names)}")

    @property
    def optimum_bracket(self) -> tuple | None:
        """``(lower, upper)`` of the noisy adaptive optimum (tree prior), else None."""
        if "optimum_lower" not in self.names:
            return None
        return self.row("optimum_lower").value, self.row("optimum_upper").value

    def to_dict(self) -> dict:
        return {"prior": self.prior, "budget": self.budget, **self.channel.to_dict(), "samples": self.samples,
                "seed": self.seed, "rows": [r.to_dict() for r in self.rows]}

    def to_frame(self):
        """The rows as a pandas DataFrame (one row per theory row; pandas is optional)."""
        from .estimate import to_frame

        return to_frame([r.to_dict() for r in self.rows], "a ComparisonTable")

    def __repr__(self) -> str:
        ch = self.channel
        what = f"tokens channel, N = {ch.n_tokens} (tau {ch.tau:.4g})" if ch.kind == "tokens" else f"gaussian channel, tau {ch.tau:.4g}"
        lines = [f"ComparisonTable({self.prior} prior, budget {self.budget}, {what}; mc rows: {self.samples} samples, "
                 f"seed {self.seed})"]
        width = max((len(r.name) for r in self.rows), default=4)
        for r in self.rows:
            d = r.to_dict()
            err = f" +- {d['stderr']:.2g}" if d["stderr"] else ""
            lines.append(f"  {d['name']:<{width}}  {d['value']:.5g}{err}  [{d['how']}, {d['channel']}]  {d['what']}")
        return "\n".join(lines)


# --- exact linear theory ---------------------------------------------------------------------------
@dataclass(frozen=True)
class LinearDecoder:
    """The exact linear (LMMSE) readout ``U`` (D, B) of a design under a channel, and its ``loss``."""

    U: np.ndarray
    loss: float

    def to_dict(self) -> dict:
        return {"U": self.U.tolist(), "loss": self.loss}

    def __repr__(self) -> str:
        return f"LinearDecoder(loss={self.loss:.6g}, U of shape {self.U.shape})"


def prior_covariance(prior) -> np.ndarray:
    """(D, D) float64 covariance of a numeric fvsym prior (each exact entry rounded once)."""
    from fvsym.priors import GaussianPrior, TreePrior

    if isinstance(prior, TreePrior):
        C = prior.covariance
    elif isinstance(prior, GaussianPrior):
        C = prior.cov
    else:
        raise ValueError(f"prior must be a fvsym TreePrior or GaussianPrior, got {type(prior).__name__}")
    return np.array([[float(C[i, j]) for j in range(C.cols)] for i in range(C.rows)])


def _check_channel(channel) -> Channel:
    if not isinstance(channel, Channel):
        raise ValueError(f"channel must be a fvnum Channel (fvnum.channels.make_channel), got {type(channel).__name__}")
    return channel


def _token_factor(channel: Channel) -> float:
    """``k`` of ``Cov(phi) = k W C W^T + noise``: ``1 + 1/N`` (tokens) or ``1`` (gaussian)."""
    return 1 + 1 / channel.n_tokens if channel.kind == "tokens" else 1.0


def lmmse(prior, W, channel: Channel) -> LinearDecoder:
    """Exact linear readout of the design ``W`` (B, D) under ``channel`` (module docstring)."""
    channel = _check_channel(channel)
    C = prior_covariance(prior)  # (D, D)
    W = np.asarray(W, dtype=np.float64)  # (B, D)
    if W.ndim != 2 or W.shape[1] != C.shape[0] or W.shape[0] < 1:
        raise ValueError(f"design must be (B, D) with D = {C.shape[0]}, got shape {W.shape}")
    # noise: tau^2 W W^T under tokens (one statistic S, projected), tau^2 I_B under gaussian (fresh per row)
    noise = W @ W.T if channel.kind == "tokens" else np.eye(W.shape[0])  # (B, B)
    M = _token_factor(channel) * W @ C @ W.T + channel.tau2 * noise  # (B, B) Cov(phi)
    U = np.linalg.solve(M, W @ C).T  # (D, B), M symmetric
    return LinearDecoder(U, float(np.trace(C) - np.trace(U @ W @ C)))


def top_levels_rows(dim: int, budget: int) -> np.ndarray:
    """Rows ``e_1 .. e_B`` (the first ``B`` nodes in heap order), (B, D)."""
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or not 1 <= budget <= dim:
        raise ValueError(f"budget must be an integer in 1..D={dim}, got {_short(budget)}")
    return np.eye(dim)[:budget]


def _exact_noise(prior, channel: Channel):
    """``tau^2`` as an exact sympy number (decimal inputs read exactly), from the one definition."""
    import sympy as sp

    if channel.kind == "tokens":
        return effective_tau2(prior.second_moment, sp.Rational(repr(channel.s2)), channel.n_tokens)
    return sp.Rational(repr(channel.tau)) ** 2


def _gaussian_of(prior):
    from fvsym.priors import GaussianPrior, TreePrior

    return GaussianPrior.matched(prior) if isinstance(prior, TreePrior) else prior


def best_linear_loss(prior, budget: int, channel: Channel) -> float:
    """Best linear non-adaptive loss (unit class, linear decoder) of ``budget`` rows under ``channel``:
    exact (sympy), returned as a float. ``tokens``: the top-``B`` eigen-directions; ``gaussian``:
    water-filling (module docstring)."""
    import sympy as sp
    from fvsym.gaussian import water_filling

    channel = _check_channel(channel)
    gauss = _gaussian_of(prior)
    tau2 = _exact_noise(prior, channel)
    if channel.kind == "gaussian":
        return float(water_filling(gauss.eigenvalues, budget, sp.sqrt(tau2)).loss)
    k = 1 + sp.Rational(1, channel.n_tokens)
    c = sorted(gauss.eigenvalues, key=lambda v: float(v), reverse=True)
    gain = sum((ci**2 / (k * ci + tau2) for ci in c[:budget]), sp.Integer(0))
    return float(sum(c, sp.Integer(0)) - gain)


def gaussian_optimum(prior, budget: int, channel: Channel) -> float:
    """Water-filling optimum (unit class, THEORY.md section 5) of the Gaussian with the prior's covariance
    under the *gaussian* channel at ``channel``'s ``tau``; exact in ``fvsym``, returned as a float."""
    import sympy as sp
    from fvsym.gaussian import water_filling

    channel = _check_channel(channel)
    return float(water_filling(_gaussian_of(prior).eigenvalues, budget, sp.sqrt(_exact_noise(prior, channel))).loss)


# --- the table -------------------------------------------------------------------------------------
def _mc_kw(channel: Channel) -> dict:
    if channel.kind == "tokens":
        return {"tokens": channel.n_tokens, "s2": channel.s2}
    return {"tau": channel.tau}


def comparison_table(prior, budget: int, channel: Channel | None = None, *, tau=None, n_tokens=None, tokens=None,
                     s2=0.01, samples: int = 20_000, seed: int = 0, search_samples: int = 2_000,
                     dense: bool = True) -> ComparisonTable:
    """Theory rows for ``prior`` and ``budget`` under ``channel`` (the channel the models see): a
    ``Channel``, or the keywords of every fvnum function, ``tau=`` or ``n_tokens=`` (``tokens=``) with ``s2``.

    Tree prior: ``path``, the best adaptive policy found, the noisy adaptive optimum's bracket
    (``optimum_lower`` (noiseless), ``optimum_upper``, and ``optimum_exact`` where solved; ``fvnum.bounds``),
    ``top_levels`` (Bayes decoder), the best non-adaptive coordinate and unit designs (searched under the
    noise). Gaussian prior: the water-filling design's Monte Carlo loss (``optimal_mc``). Both: ``top_levels``
    with the exact linear decoder (``top_levels_linear``), the best linear non-adaptive loss
    (``best_linear_nonadaptive``) and the Gaussian optimum under the gaussian channel at the same ``tau``
    (``gaussian_optimum``). ``dense=False`` skips the unit-class searches (the slowest rows).
    """
    from fvsym.priors import TreePrior

    from .optimum import best_adaptive, bounds
    from .registry import loss_mc
    from .search import optimal_nonadaptive_coordinate, optimal_nonadaptive_unit
    from .tree import numeric_prior

    if channel is None or tau is not None or n_tokens is not None or tokens is not None:
        from .channels import make_channel

        channel = make_channel(numeric_prior(prior), tau, tokens, s2, n_tokens=n_tokens, channel=channel)
    channel = _check_channel(channel)
    spec = numeric_prior(prior)
    B, ch = budget, channel.kind
    kw = dict(_mc_kw(channel), samples=samples, seed=seed)
    rows = []
    if isinstance(prior, TreePrior):
        if B <= prior.depth:
            rows.append(TheoryRow.mc("path", loss_mc(prior, "path", B, **kw), "adaptive, coordinate", ch))
        # the greedy dense policy costs milliseconds a sample at depth 6: its search uses fewer samples
        few = dict(_mc_kw(channel), samples=min(samples, 4 * search_samples), seed=seed,
                   select_samples=min(1000, search_samples))
        name, est = best_adaptive(prior, B, **few)
        rows.append(TheoryRow.mc("best_adaptive", est, f"adaptive: {name}", ch, policy=name))
        br = bounds(prior, B, **few,
                    candidates=("path", "greedy_coordinate", "rollout", "bellman_noiseless", "optimal"))
        rows.append(TheoryRow.exact("optimum_lower", br.lower,
                                    f"noisy adaptive optimum ({ch} channel) >= this: {br.lower_how}", "noiseless"))
        rows.append(TheoryRow.mc("optimum_upper", br.upper, f"noisy adaptive optimum <= this: {br.policy}", ch,
                                 policy=br.policy))
        if br.exact is not None:
            rows.append(TheoryRow.exact("optimum_exact", br.exact, f"noisy adaptive optimum: {br.exact_how}",
                                        "gaussian"))
        rows.append(TheoryRow.mc("top_levels", loss_mc(prior, "top_levels", B, **kw), "non-adaptive, coordinate", ch))
        nodes, est = optimal_nonadaptive_coordinate(prior, B, **_mc_kw(channel), samples=search_samples, seed=seed)
        rows.append(TheoryRow.mc("best_nonadaptive_coordinate", est, "non-adaptive, coordinate (searched)", ch,
                                 design=tuple(int(n) for n in nodes)))
        if dense:
            _, est = optimal_nonadaptive_unit(prior, B, **_mc_kw(channel), samples=search_samples, seed=seed)
            rows.append(TheoryRow.mc("best_nonadaptive_unit", est, "non-adaptive, unit (searched)", ch))
    else:
        rows.append(TheoryRow.mc("optimal_mc", loss_mc(prior, "optimal", B, **kw),
                                 f"water-filling design, {ch} channel", ch))
    linear = lmmse(prior, top_levels_rows(spec.dim, B), channel).loss
    rows.append(TheoryRow.exact("top_levels_linear", linear, "non-adaptive, coordinate, linear decoder", ch))
    rows.append(TheoryRow.exact("best_linear_nonadaptive", best_linear_loss(prior, B, channel),
                                "best linear non-adaptive (unit class, linear decoder)", ch))
    if ch == "gaussian":
        what = "Gaussian of the same covariance, optimal (= best linear non-adaptive)"
    else:
        what = (f"Gaussian of the same covariance, optimal under the gaussian channel at the same tau "
                f"(not the models' {ch} channel, not a bound for it)")
    rows.append(TheoryRow.exact("gaussian_optimum", gaussian_optimum(prior, B, channel), what, "gaussian"))
    return ComparisonTable("tree" if isinstance(prior, TreePrior) else "gaussian", int(B), channel, int(samples),
                           int(seed), tuple(rows))


__all__ = [
    "ComparisonTable", "LinearDecoder", "TheoryRow", "best_linear_loss", "comparison_table", "gaussian_optimum",
    "lmmse", "prior_covariance", "top_levels_rows",
]
