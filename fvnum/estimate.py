"""The result types of fvnum: `Estimate`, a Monte Carlo number with its standard error (docs/theory.md
section 4); `SearchResult`, what a search for a good design or policy found; `NodeValues`, one value per
tree node; and the exact, order-fixed pooling of per-chunk statistics that makes results independent of
the thread count."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fvsym.errors import InputError


# A standard error this small beside its value's size is floating-point rounding, not sampling: a column whose every
# sample is the same number (a cell 0 by construction, a loss the policy reaches on every sample) sums its rounding
# into a standard error of 1e-17 or 7e-12. Such a number prints as exact (:func:`stderr_text`).
FLOAT_NOISE = 1e-9  # relative to max(|value|, FLOAT_NOISE_SCALE)
FLOAT_NOISE_SCALE = 1e-3  # the size below which a value counts as this (losses here are of order 1e-3 .. 1)


def below_noise(stderr, value=0.0) -> bool:
    """Whether ``stderr`` is no sampling error at all: None, 0, NaN or within floating-point noise of ``value``
    (at most :data:`FLOAT_NOISE` times ``max(|value|, FLOAT_NOISE_SCALE)``)."""
    if stderr is None:
        return True
    stderr, value = abs(float(stderr)), abs(float(value)) if value is not None and math.isfinite(value) else 0.0
    return math.isnan(stderr) or stderr <= FLOAT_NOISE * max(value, FLOAT_NOISE_SCALE)


def stderr_text(stderr, value=0.0, *, digits: int = 1, exact: str = "exact", plus: str = "") -> str:
    """The one way a standard error is printed: ``plus + f"{stderr:.{digits}g}"`` (``"0.004"``; with
    ``plus=" ± "``: ``" ± 0.004"``), or ``exact`` where it is below floating-point noise (:func:`below_noise`):
    a table's ± column says ``exact``, an inline ``value ± se`` gives ``exact=" (exact)"`` or ``""``. Never
    ``± 1e-17``, ``± 7e-12`` or ``± 0``."""
    if below_noise(stderr, value):
        return exact
    return f"{plus}{float(stderr):.{digits}g}"


def value_text(value, stderr, fmt: str = ".4f", *, digits: int = 1, scale=None) -> str:
    """``"0.1441 ± 0.004"``, or ``"0.1441 (exact)"`` where the standard error is below floating-point noise
    (:func:`stderr_text`). ``scale``: the size the noise is measured against where the value is a difference
    (an effect: the losses it is the difference of); a value itself within that noise prints as ``0``."""
    value = float(value)
    size = abs(value) if scale is None else abs(float(scale))
    if below_noise(stderr, size):
        shown = 0.0 if below_noise(value, size) else value
        return f"{shown:{fmt}} (exact)"
    return f"{value:{fmt}} ± {float(stderr):.{digits}g}"


@dataclass(frozen=True)
class Estimate:
    """``value`` (the sample mean), ``stderr`` (sample standard deviation / sqrt(n)), ``n`` (samples).

    ``how`` says how the number was obtained: ``"mc"`` (Monte Carlo) unless stated otherwise;
    ``decoder``, for a loss, which decoder produced it (``fvnum.mc.channels.decoder_of``: ``"exact: ..."`` or
    ``"approximate: ..."``), None where not applicable. ``function_vectors``: the readings of every
    sample (``fvnum.mc.simulate.FunctionVectors``) when they were recorded (``loss_mc(..., record=True)``),
    else None; not part of equality or of ``to_dict()``.
    """

    value: float
    stderr: float
    n: int
    how: str = "mc"
    decoder: str | None = None
    function_vectors: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, values, how: str = "mc") -> "Estimate":
        """The mean of per-sample ``values`` with its standard error (sample standard deviation / sqrt(n))."""
        v = np.asarray(values, dtype=float).ravel()
        if v.size < 2:
            raise InputError(f"an estimate needs at least 2 samples, got {v.size}")
        return cls(float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)), int(v.size), how)

    def z(self, exact: float) -> float:
        """``(value - exact) / stderr``; ``0`` when both agree exactly with no spread, else ``inf``."""
        diff = self.value - float(exact)
        if self.stderr > 0:
            return diff / self.stderr
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)

    def to_dict(self) -> dict:
        out = {"value": self.value, "stderr": self.stderr, "n": self.n, "how": self.how}
        if self.decoder is not None:
            out["decoder"] = self.decoder
        return out

    def __str__(self) -> str:
        return f"{self.value:.6g}{stderr_text(self.stderr, self.value, digits=2, exact=' exact', plus=' +- ')} ({self.how}, n={self.n})"


@dataclass(frozen=True, eq=False)
class SearchResult:
    """What a search found: the one result type of every search of fvnum (design searches, the best
    adaptive policy), as a solver returns one result object.

    ``name``: the strategy name of the design or of the winning policy; ``estimate``: its loss on fresh
    samples (stream ``EVAL``, so the selection does not bias it); ``how``: how it was found; ``design``:
    the design of a non-adaptive result, node numbers (B,) (coordinate class) or unit rows (B, D), None
    for an adaptive policy; ``policy``: the Policy object (``fvnum.mc.simulate.simulate`` runs it);
    ``candidates``: ``{name: Estimate}`` of the policies compared, on the selection stream (``SELECT``),
    for a search among named policies, else empty; ``keys``: for a search under a key family
    (``fvnum.keys.nonadaptive``), the keys found (a ``fvnum.keys.families`` family object with its parameters: a design's keys,
    or an adaptive policy's first-layer key), else None (the linear keys of the tokens channel)."""

    name: str
    estimate: Estimate
    how: str
    design: Any = None
    policy: Any = field(default=None, repr=False)
    candidates: dict = field(default_factory=dict)
    keys: Any = field(default=None, repr=False)

    @property
    def value(self) -> float:
        """The loss found (``estimate.value``)."""
        return self.estimate.value

    def to_dict(self) -> dict:
        return {"name": self.name, "estimate": self.estimate.to_dict(), "how": self.how,
                "design": None if self.design is None else np.asarray(self.design).tolist(),
                "candidates": {k: v.to_dict() for k, v in self.candidates.items()},
                **({} if self.keys is None else {"keys": self.keys.to_dict()})}

    def __repr__(self) -> str:
        lines = [f"SearchResult({self.name}: loss {self.estimate}; {self.how})"]
        if self.keys is not None:
            lines.append(f"  keys: {self.keys!r}")
        if self.design is not None:
            d = np.asarray(self.design)
            lines.append("  design: nodes " + ", ".join(map(str, d.tolist())) if d.dtype.kind in "iu"
                         else f"  design: {d.shape[0]} unit rows\n{np.array2string(d, precision=3)}")
        if self.candidates:
            lines.append("  candidates compared:")
        lines += [f"    {name:18s} {est}" for name, est in self.candidates.items()]
        return "\n".join(lines)

    __str__ = __repr__


def to_frame(records, what: str = "this table"):
    """A pandas DataFrame of ``records`` (a list of dicts); pandas is optional: without it, one clear
    ImportError (``to_dict()`` gives the same numbers)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(f"to_frame() of {what} needs pandas (pip install pandas); "
                          "to_dict() gives the same numbers without it") from None
    return pd.DataFrame.from_records(list(records))


class NodeValues(np.ndarray):
    """A 1-d float array of one value per tree node, labelled: ``nodes[i]`` is the node of entry ``i``
    (e.g. the Q-values of the noisy Bellman recursion). Prints as ``node: value`` lines; ``best``: the
    node of the smallest value; ``to_dict()``: ``{node: value}``."""

    def __new__(cls, values, nodes, what: str = "value"):
        obj = np.asarray(values, dtype=float).view(cls)
        if obj.ndim != 1 or len(nodes) != obj.shape[0]:
            raise InputError(f"need one value per node, got {obj.shape} values for {len(nodes)} nodes")
        obj.nodes, obj.what = tuple(int(n) for n in nodes), what
        return obj

    def __array_finalize__(self, obj):
        self.nodes = getattr(obj, "nodes", ())
        self.what = getattr(obj, "what", "value")

    def __array_wrap__(self, out, context=None, return_scalar=False):
        if out.shape != (len(self.nodes),):  # a reduction or a reshape loses the labels
            plain = np.asarray(out).view(np.ndarray)
            return plain[()] if return_scalar else plain
        return super().__array_wrap__(out, context, return_scalar)

    @property
    def best(self) -> int:
        return self.nodes[int(np.argmin(np.asarray(self)))]

    def to_dict(self) -> dict:
        return {n: float(v) for n, v in zip(self.nodes, np.asarray(self))}

    def __repr__(self) -> str:
        if self.ndim != 1 or len(self.nodes) != self.shape[0]:
            return repr(np.asarray(self))
        best = self.best
        lines = [f"{self.what} by node ({len(self.nodes)} nodes; best: node {best})"]
        lines += [f"  node {n:>3}: {float(v):.6g}" + ("  <- best" if n == best else "")
                  for n, v in zip(self.nodes, np.asarray(self))]
        return "\n".join(lines)

    __str__ = __repr__


@dataclass(frozen=True)
class Moments:
    """Count, mean and sum of squared deviations of one chunk of per-sample values."""

    n: int
    mean: float
    m2: float

    @classmethod
    def of(cls, values: np.ndarray) -> "Moments":
        values = np.asarray(values, dtype=float)
        if values.size == 0:
            return cls(0, 0.0, 0.0)
        mean = float(values.mean())
        return cls(int(values.size), mean, float(((values - mean) ** 2).sum()))

    def __add__(self, other: "Moments") -> "Moments":  # Chan et al. pairwise update
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        n = self.n + other.n
        delta = other.mean - self.mean
        return Moments(n, self.mean + delta * other.n / n, self.m2 + other.m2 + delta**2 * self.n * other.n / n)

    def estimate(self) -> Estimate:
        if self.n < 2:
            raise InputError(f"an estimate needs at least 2 samples, got {self.n}")
        return Estimate(self.mean, math.sqrt(max(self.m2, 0.0) / (self.n - 1) / self.n), self.n)


def pool(parts) -> Moments:
    """Sum of Moments in the given order (fixed order: deterministic floating point)."""
    total = Moments(0, 0.0, 0.0)
    for part in parts:
        total = total + part
    return total
