"""Model G beside the gradient-descent row (docs/theory.md section 13): the ``gd_steps`` row at a run's own ``D``, ``N``,
label noise and ``L`` (``fvnum.gd_steps``, steps chosen per layer on one stream of contexts and the loss measured on
another), its Marchenko-Pastur limit at ``a = N / D`` (``fvsym.gd.gd_steps_limit``, noiseless, relative to the
prior's loss) and the ratio of a trained run to the row. It computes no theory: both numbers come from fvnum and
fvsym.
"""
from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

from fvsym.errors import InputError

SAMPLES = 20_000  # contexts of the row's Monte Carlo (its EVAL stream)
SELECT_SAMPLES = 4_000  # contexts the per-layer steps are chosen on (SELECT stream)


@dataclass(frozen=True)
class GDRow:
    """``gd_steps`` at one cell: ``loss`` with ``stderr`` (units of ``E||theta_hat - theta||^2``), the ``steps``
    chosen, ``relative`` (over the prior's ``E||theta||^2``), ``limit`` (the noiseless limit at ``a = N / D``,
    relative) and ``how``."""

    prior: str
    dim: int
    n_tokens: int
    layers: int
    steps_kind: str
    loss: float
    stderr: float
    relative: float
    limit: float
    steps: tuple
    how: str

    def to_dict(self) -> dict:
        d = asdict(self)
        d["steps"] = list(self.steps)
        return d


@functools.lru_cache(maxsize=256)
def _row(data, layers: int, steps: str, samples: int, select_samples: int, seed: int) -> GDRow:
    from fvnum.mc.channels import tokens
    from fvnum.values.gd import gd_steps
    from fvsym.gd import gd_steps_limit

    from bridges.training.data import fv_prior

    est = gd_steps(fv_prior(data), layers, tokens(data.n_tokens, data.s2), steps=steps, samples=samples,
                   select_samples=select_samples, seed=seed)
    limit = float(gd_steps_limit(steps)(a=data.n_tokens / data.dim, L=layers))
    return GDRow(data.prior, data.dim, data.n_tokens, layers, steps, float(est.value), float(est.stderr),
                 float(est.relative.value), limit, tuple(est.steps), est.how)


def gd_row(cfg, *, steps: str = "per_layer", samples: int = SAMPLES, select_samples: int = SELECT_SAMPLES,
           seed: int = 0) -> GDRow:
    """The ``gd_steps`` row Model G's run ``cfg`` (a ``RunConfig``) is held to: its data's prior, ``D``, ``N`` and
    ``s2``, and its ``L`` (``per_layer`` steps: a trained G's layers are not tied). Cached per cell."""
    if not cfg.model.spec.values:
        raise InputError(f"gd_row holds model G to gradient descent; model {cfg.model.model} has no values option")
    return _row(cfg.data, cfg.model.n_layers, steps, samples, select_samples, seed)


def theory_rows(cfg, *, samples: int = SAMPLES, seed: int = 0) -> list[dict]:
    """The theory rows of ``fv compare --model G`` (``bridges.analysis.compare.compare``), as row dicts: ``gd_steps``
    (a step per layer: G's prediction), ``gd_steps_shared`` (one step shared by the layers) and ``gd_steps_limit``
    (the per-layer Marchenko-Pastur limit at ``a = N / D``, noiseless, times the prior's ``E||theta||^2``)."""
    per_layer = gd_row(cfg, samples=samples, seed=seed)
    shared = gd_row(cfg, steps="shared", samples=samples, seed=seed)
    L, prior_loss = per_layer.layers, per_layer.loss / per_layer.relative
    what = f"{L} steps of preconditioned gradient descent (D channels a layer, residual values) at D {per_layer.dim}, N {per_layer.n_tokens}"
    return [
        {"name": "gd_steps", "value": per_layer.loss, "stderr": per_layer.stderr, "how": per_layer.how,
         "what": f"{what}, a step per layer {[round(g, 4) for g in per_layer.steps]}", "channel": "tokens"},
        {"name": "gd_steps_shared", "value": shared.loss, "stderr": shared.stderr, "how": shared.how,
         "what": f"{what}, one step shared by the layers", "channel": "tokens"},
        {"name": "gd_steps_limit", "value": per_layer.limit * prior_loss, "stderr": 0.0,
         "how": "exact (fvsym.gd.gd_steps_limit, per layer)",
         "what": f"the limit N, D -> oo at a = N / D = {per_layer.n_tokens / per_layer.dim:.4g}, a step per layer, "
                 "noiseless, times E||theta||^2", "channel": "noiseless"},
    ]


def ratio(result, row: GDRow) -> float:
    """A trained run's held-out loss over the row's."""
    return result.loss / row.loss if row.loss > 0 else math.inf


__all__ = ["GDRow", "SAMPLES", "SELECT_SAMPLES", "gd_row", "ratio", "theory_rows"]
