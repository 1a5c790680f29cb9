"""Value families (docs/theory.md section 13): the value ``v_i`` a linear key reads, ``phi = (1/N) sum_i v_i f(x_i)``.

- ``label`` (default, sections 2-3, Models A, B, C): ``v_i = y_i``.
- ``residual``: ``v_i = y_i - <theta_hat, x_i>``, ``theta_hat`` decoded from the state. Given the error
  ``e = theta - theta_hat``, ``(x_i, v_i)`` has the law of a token of the latent ``e``: ``v_i = <e, x_i> + eps_i``.
  So every key family's law holds with ``theta`` replaced by ``e`` (linear keys ``W``: mean ``W e``, covariance
  ``((|e|^2 + s2) W W^T + W e e^T W^T) / N``), to leading order in ``1/N`` where ``theta_hat`` is computed from the
  same tokens (then readings of different layers are correlated, and the exact loss is a Monte Carlo over the
  tokens: :func:`fvnum.values.gd.gd_steps`).

With ``d = D`` channels reading every direction and ``theta_hat_l = theta_hat_(l-1) + Gamma_l phi_l``, residual
values are L steps of preconditioned gradient descent (:func:`fvnum.mc._reference.gd_errors` runs them literally).
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from fvsym._validate import check_choice
from fvsym.errors import InputError

VALUES = ("label", "residual")  # docs/theory.md, Names: the value families of the theory; label is the default
DEFAULT_VALUES = "label"


class ValueFamily(ABC):
    """What a value carries: ``values(X, y, theta_hat)`` (n, N) and the law of the readings of ``keys``
    (a ``fvnum.keys.families.KeyFamily``) given the latents and the state's estimates."""

    name = ""

    @abstractmethod
    def errors(self, thetas, theta_hats):
        """What the readings measure, ``theta - E[values' estimate]`` per context (n, D)."""

    @abstractmethod
    def values(self, X, y, theta_hat=None) -> np.ndarray:
        """The values ``v_i`` of every token (n, N)."""

    def readings(self, keys, X, y, theta_hat=None) -> np.ndarray:
        """(n, k) exact readings ``(1/N) sum_i v_i f(x_i)`` of ``n`` contexts: tokens ``X`` (n, N, D), labels ``y``
        (n, N), the state's estimates ``theta_hat`` (n, D) (None: zero)."""
        return keys.readings(X, self.values(X, y, theta_hat))

    def law(self, keys, thetas, theta_hats=None, *, n_tokens, s2):
        """The readings' CLT law (a ``ReadingLaw``: mean (M, k), cov (M, k, k)) for each latent ``thetas`` (M, D)
        with the state's estimate ``theta_hats`` (M, D) (None: zero), ``theta_hat`` held fixed."""
        return keys.law(self.errors(thetas, theta_hats), n_tokens=n_tokens, s2=s2)

    def to_dict(self) -> dict:
        return {"values": self.name}

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _estimates(theta_hat, X):
    if theta_hat is None:
        return np.zeros((X.shape[0], X.shape[-1]))
    theta_hat = np.asarray(theta_hat, dtype=float)
    if theta_hat.shape != (X.shape[0], X.shape[-1]):
        raise InputError(f"theta_hat must have shape (n, D) = {(X.shape[0], X.shape[-1])}, got {theta_hat.shape}")
    return theta_hat


class LabelValues(ValueFamily):
    """``v_i = y_i``: every reading is a projection of ``theta`` with noise independent of what was read before."""

    name = "label"

    def errors(self, thetas, theta_hats=None):
        return np.asarray(thetas, dtype=float)

    def values(self, X, y, theta_hat=None) -> np.ndarray:
        return np.asarray(y, dtype=float)


class ResidualValues(ValueFamily):
    """``v_i = y_i - <theta_hat, x_i>``: readings of the error ``theta - theta_hat``, whose noise shrinks as the
    estimate improves."""

    name = "residual"

    def errors(self, thetas, theta_hats=None):
        thetas = np.asarray(thetas, dtype=float)
        if theta_hats is None:
            return thetas
        theta_hats = np.asarray(theta_hats, dtype=float)
        if theta_hats.shape != thetas.shape:
            raise InputError(f"theta_hats must have the shape of thetas {thetas.shape}, got {theta_hats.shape}")
        return thetas - theta_hats

    def values(self, X, y, theta_hat=None) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        return np.asarray(y, dtype=float) - np.einsum("nid,nd->ni", X, _estimates(theta_hat, X))


FAMILIES = {"label": LabelValues(), "residual": ResidualValues()}


def value_family(values: str = DEFAULT_VALUES) -> ValueFamily:
    """The value family named ``values`` (one of :data:`VALUES`; one-line ValueError otherwise)."""
    return FAMILIES[check_choice(values, "values", VALUES)]


__all__ = ["DEFAULT_VALUES", "FAMILIES", "LabelValues", "ResidualValues", "VALUES", "ValueFamily", "value_family"]
