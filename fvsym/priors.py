"""Priors over the latent context theta (docs/theory.md sections 5 and 6), symbolic in their parameters.

Heap numbering of the tree (``fvsym.heap``, the one text of the rule): internal nodes ``n = 1 .. 2^K - 1``,
root 1, children ``2n`` (sign +1) and ``2n + 1`` (sign -1). Node ``n`` has depth ``k(n) = floor(log2 n) + 1``
and direction ``e_n``, which is coordinate ``n - 1`` of theta. Leaf ``i`` (``0 <= i < 2^K``) is the sign
vector whose ``k``-th most significant bit is 1 exactly when ``s_k = -1``.
"""
from __future__ import annotations

from functools import cached_property

import sympy as sp

from fvsym import _symbols
from fvsym.heap import child, leaf_bit
from fvsym._validate import _short, check_alpha, check_int, to_exact
from fvsym.errors import InputError

MAX_DEPTH = 30
MAX_GAUSSIAN_DIM = 1023  # a sympy D x D covariance: D = 1023 (the matched Gaussian at depth 10) takes seconds


def node_depth(n: int) -> int:
    """Depth ``k(n) = floor(log2 n) + 1`` of heap node ``n >= 1``."""
    if n < 1:
        raise InputError(f"node numbers start at 1, got {n}")
    return int(n).bit_length()


class TreePrior:
    """Hierarchical tree prior of docs/theory.md section 6.

    ``TreePrior(depth, alpha)`` uses ``a_k = alpha^((k-1)/2)``; ``alpha`` may be a number (exact
    when given as an int, Fraction or string like ``"1/2"``) or a Symbol (default: symbolic alpha).
    ``TreePrior(depth, scales=(a_1, ..., a_K))`` takes general scales ``a_1 >= ... >= a_K > 0``.
    """

    def __init__(self, depth: int, alpha=_symbols.alpha, *, scales=None):
        self.depth = check_int(depth, "depth", minimum=1, maximum=MAX_DEPTH)
        if scales is not None:
            if alpha is not _symbols.alpha:
                raise InputError(f"give alpha or scales, not both (got alpha={_short(alpha)} and scales)")
            if isinstance(scales, (str, bytes)) or not hasattr(scales, "__iter__"):
                raise InputError(f"scales must be a sequence of {self.depth} numbers, got {_short(scales)}")
            scales = tuple(to_exact(a, "scales") for a in scales)
            if len(scales) != self.depth:
                raise InputError(f"scales must have depth={self.depth} entries, got {len(scales)}")
            for i, a in enumerate(scales):
                if a.is_number and not a > 0:
                    raise InputError(f"scales must be > 0, got a_{i + 1} = {a}")
            for i in range(self.depth - 1):
                gap = scales[i] - scales[i + 1]
                if gap.is_number and gap.is_real and gap < 0:
                    raise InputError(
                        f"scales must be non-increasing, got a_{i + 1} = {scales[i]} < a_{i + 2} = {scales[i + 1]}"
                    )
            self.alpha = None
            self.scales = scales
        else:
            self.alpha = check_alpha(alpha)
            self.scales = tuple(self.alpha ** sp.Rational(k - 1, 2) for k in range(1, self.depth + 1))

    # --- sizes -------------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        """``D = 2^K - 1``."""
        return 2**self.depth - 1

    dim = n_nodes

    @property
    def n_leaves(self) -> int:
        return 2**self.depth

    @property
    def is_numeric(self) -> bool:
        return all(a.is_number for a in self.scales)

    def with_alpha(self, alpha) -> "TreePrior":
        """The same tree with ``alpha`` fixed (only for priors built from ``alpha``)."""
        if self.alpha is None:
            raise InputError("this TreePrior was built from explicit scales, not alpha")
        return TreePrior(self.depth, alpha)

    # --- structure ---------------------------------------------------------------------
    def check_node(self, n: int) -> int:
        return check_int(n, "node", minimum=1, maximum=self.n_nodes)

    def amplitude(self, n: int):
        """``a_{k(n)}``: the value ``|theta_n|`` takes when the path passes node ``n``."""
        return self.scales[node_depth(self.check_node(n)) - 1]

    def leaf_signs(self, index: int) -> tuple[int, ...]:
        index = check_int(index, "leaf index", minimum=0, maximum=self.n_leaves - 1)
        return tuple(1 - 2 * leaf_bit(index, self.depth, k) for k in range(1, self.depth + 1))

    def leaf_index(self, signs) -> int:
        self._check_signs(signs)
        index = 0
        for s in signs:
            index = child(index, int(s))
        return index

    def leaves(self) -> list[tuple[int, ...]]:
        """All ``2^K`` sign vectors, in leaf-index order."""
        return [self.leaf_signs(i) for i in range(self.n_leaves)]

    def path(self, signs) -> tuple[int, ...]:
        """Path nodes ``n_1 .. n_K`` of a leaf."""
        self._check_signs(signs)
        nodes, n = [], 1
        for s in signs:
            nodes.append(n)
            n = child(n, int(s))
        return tuple(nodes)

    def theta(self, signs) -> dict[int, sp.Expr]:
        """Nonzero coordinates ``{node: a_k s_k}`` of ``theta_s``."""
        return {n: self.scales[k] * s for k, (n, s) in enumerate(zip(self.path(signs), signs))}

    def theta_vector(self, signs) -> sp.Matrix:
        v = sp.zeros(self.n_nodes, 1)
        for n, value in self.theta(signs).items():
            v[n - 1] = value
        return v

    def _check_signs(self, signs):
        if len(signs) != self.depth or any(s not in (1, -1) for s in signs):
            raise InputError(f"a leaf is {self.depth} signs in {{+1, -1}}, got {tuple(signs)!r}")

    # --- moments -----------------------------------------------------------------------
    def variance(self, n: int):
        """Prior variance of coordinate ``n``: ``a_k^2 / 2^(k-1)``."""
        k = node_depth(self.check_node(n))
        return sp.simplify(self.scales[k - 1] ** 2 / 2 ** (k - 1))

    @cached_property
    def mean(self) -> sp.Matrix:
        return sp.zeros(self.n_nodes, 1)

    @cached_property
    def covariance(self) -> sp.Matrix:
        return sp.diag(*[self.variance(n) for n in range(1, self.n_nodes + 1)])

    @cached_property
    def second_moment(self):
        """``E||theta||^2 = sum_k a_k^2`` (``(1 - alpha^K) / (1 - alpha)`` for the alpha scales)."""
        return sp.factor(sp.simplify(sum(a**2 for a in self.scales)))

    def __repr__(self) -> str:
        if self.alpha is not None:
            return f"TreePrior(depth={self.depth}, alpha={self.alpha})"
        return f"TreePrior(depth={self.depth}, scales={self.scales})"

    def __eq__(self, other) -> bool:
        return isinstance(other, TreePrior) and (self.depth, self.scales) == (other.depth, other.scales)

    def __hash__(self) -> int:
        return hash((TreePrior, self.depth, self.scales))


def squared_scales(prior: TreePrior) -> tuple:
    """``w_k = a_k^2`` for ``k = 1..K`` (every loss of the tree prior is linear in these)."""
    return tuple(sp.powsimp(sp.expand(a**2)) for a in prior.scales)


def check_tree_prior(prior) -> TreePrior:
    """``prior`` itself if it is a TreePrior, else a one-line ValueError."""
    if not isinstance(prior, TreePrior):
        raise InputError(f"prior must be a TreePrior, got {type(prior).__name__}")
    return prior


class GaussianPrior:
    """``theta ~ N(0, C)`` (docs/theory.md section 5). ``C`` must be square, symmetric and PSD."""

    def __init__(self, cov):
        C = _matrix(cov)
        if C.rows != C.cols or C.rows == 0:
            raise InputError(f"covariance must be a non-empty square matrix, got shape {C.shape}")
        check_int(C.rows, "covariance dimension D", minimum=1, maximum=MAX_GAUSSIAN_DIM)
        for x in set(C):  # few distinct entries in the usual (diagonal, isotropic) matrices
            to_exact(x, "covariance entry")
        if C != C.T and any(sp.simplify(C[i, j] - C[j, i]) != 0 for i in range(C.rows) for j in range(i)):
            raise InputError("covariance must be symmetric")
        if C.is_diagonal():
            for i in range(C.rows):
                if C[i, i].is_number and C[i, i] < 0:
                    raise InputError(f"covariance is not PSD: diagonal entry {i} is {C[i, i]}")
        elif all(x.is_number for x in C):
            lam_min = min(sp.N(e) for e in C.evalf().eigenvals(multiple=True, simplify=False, rational=False)) \
                if C.rows <= 4 else _min_eig_numeric(C)
            if lam_min < -1e-12:
                raise InputError(f"covariance is not PSD: smallest eigenvalue {float(lam_min):.3g}")
        self.cov = C

    @classmethod
    def isotropic(cls, dim: int, variance=1) -> "GaussianPrior":
        dim = check_int(dim, "dim", minimum=1, maximum=MAX_GAUSSIAN_DIM)
        return cls(sp.eye(dim) * to_exact(variance, "variance"))

    @classmethod
    def matched(cls, tree: TreePrior) -> "GaussianPrior":
        """The Gaussian with the tree prior's mean and covariance."""
        tree = check_tree_prior(tree)
        if tree.n_nodes > MAX_GAUSSIAN_DIM:
            raise InputError(f"the matched Gaussian of depth {tree.depth} has D = {tree.n_nodes} > "
                             f"{MAX_GAUSSIAN_DIM}; the largest depth that fits is {MAX_GAUSSIAN_DIM.bit_length()}")
        return cls(tree.covariance)

    @property
    def dim(self) -> int:
        return self.cov.rows

    @property
    def mean(self) -> sp.Matrix:
        return sp.zeros(self.dim, 1)

    @property
    def second_moment(self):
        return sp.simplify(self.cov.trace())

    @cached_property
    def eigenvalues(self) -> tuple:
        """Eigenvalues of ``C``, largest first where they are numbers."""
        if self.cov.is_diagonal():
            vals = [self.cov[i, i] for i in range(self.dim)]
        else:
            try:  # real roots of the characteristic polynomial (C is symmetric): exact, orderable
                vals = self.cov.charpoly().all_roots()
            except (NotImplementedError, sp.PolynomialError):  # symbolic entries
                vals = self.cov.eigenvals(multiple=True)
        try:
            return tuple(sorted(vals, key=lambda v: -float(v)))
        except TypeError:
            return tuple(vals)

    def __repr__(self) -> str:
        return f"GaussianPrior(dim={self.dim})"


def _matrix(cov) -> sp.Matrix:
    """``cov`` as a sympy Matrix: a Matrix, a numpy array or nested sequences of numbers (one-line errors)."""
    if isinstance(cov, sp.MatrixBase):
        return sp.Matrix(cov)
    if isinstance(cov, (str, bytes)) or not hasattr(cov, "__len__"):
        raise InputError(f"covariance must be a square matrix of numbers, got {type(cov).__name__} {_short(cov)}")
    shape = getattr(cov, "shape", None)
    if shape is not None and len(shape) == 2 and max(shape) > MAX_GAUSSIAN_DIM:
        raise InputError(f"covariance dimension D must be <= {MAX_GAUSSIAN_DIM}, got shape {tuple(shape)}")
    rows = list(cov)
    if len(rows) > MAX_GAUSSIAN_DIM:
        raise InputError(f"covariance dimension D must be <= {MAX_GAUSSIAN_DIM}, got {len(rows)} rows")
    if not rows or any(isinstance(r, (str, bytes)) or not hasattr(r, "__len__") for r in rows):
        raise InputError("covariance must be a non-empty square matrix of numbers (a list of rows)")
    if any(len(r) != len(rows) for r in rows):
        raise InputError(f"covariance must be square, got {len(rows)} rows of lengths {sorted({len(r) for r in rows})}")
    return sp.Matrix([[to_exact(x, "covariance entry") for x in r] for r in rows])


def _min_eig_numeric(C: sp.Matrix):
    import numpy as np  # only for large explicit matrices

    return float(np.linalg.eigvalsh(np.array(C.evalf(), dtype=float)).min())
