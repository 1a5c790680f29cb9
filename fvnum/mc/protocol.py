"""The policy protocol (docs/theory.md section 2): what the engine (:mod:`fvnum.mc.simulate`) asks of a policy at each
layer, given the readings so far, and the base class of the built-in policies (:mod:`fvnum.policies.policies`).

User policies (``loss_mc(..., strategy="policy", policy=fn, layers=L, width=d)``) follow one protocol,
vectorised over the ``n`` samples of a batch::

    rows = fn(layer, phi)

- ``layer``: the 0-based index of the layer being routed (``0 .. L-1``);
- ``phi``: float array ``(n, layer, d)``, the readings of the earlier layers (sample ``s``'s function
  vector ``Phi_layer`` is ``phi[s].ravel()``); ``fn`` must not modify it;
- ``rows``: either **node numbers**, an integer array ``(n, d)`` (coordinate class, heap numbering of
  docs/theory.md section 6, or coordinate index + 1 for a Gaussian prior; ``0`` leaves that channel idle),
  or **unit rows**, a float array ``(n, d, D)`` whose rows have norm 1 (unit class). A ``(d,)`` integer
  array or a ``(d, D)`` float array is shared by every sample (a non-adaptive layer).
Anything else raises a ``ValueError`` naming the layer and the shapes.
:func:`fvnum.policies.policies.per_sample` turns a function of one sample's readings ``(layer, d) -> (d,) nodes
or (d, D) rows`` into this protocol.

Built-in policies (used by ``loss_mc``, ``patching_table`` and ``best_adaptive``) implement the same
protocol with an explicit per-sample state: ``start(n)``, ``rows(layer, state, phi)``,
``update(layer, state, rows, phi_layer)``. ``update`` receives the rows the policy *chose*: under key
patching the target keeps routing by its own choices although it read the donor's rows.
Two more methods let the engine (``fvnum.mc.simulate``) dispatch without asking what a policy is:
``work_floats(spec, budget)`` (its memory per sample, which sizes the chunks) and ``run(spec, channel,
draws, ...)``, a fused kernel returning a ``Run``, or None to be routed layer by layer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fvsym.errors import InputError


@dataclass
class Run:
    """Per-sample results of one chunk: ``loss`` (n,), readings ``phi`` (n, L, d), the rows the policy
    chose (``rows``, one ``Rows`` per layer) and those actually read (``actual``, differ under patching)."""

    loss: np.ndarray
    phi: np.ndarray
    rows: list
    actual: list


@dataclass(frozen=True)
class Rows:
    """One layer's measurement: ``nodes`` (int, (n, d) or shared (d,)) or ``dense`` ((n, d, D) or (d, D))."""

    array: np.ndarray
    coordinate: bool
    shared: bool

    def nodes(self, n: int) -> np.ndarray:
        return np.broadcast_to(self.array, (n, self.array.shape[-1])) if self.shared else self.array

    def dense(self, n: int, dim: int) -> np.ndarray:
        """(n, d, D) or, when shared, (1, d, D)."""
        if self.coordinate:
            nodes = self.array[None] if self.shared else self.array
            out = np.zeros(nodes.shape + (dim,))
            idx = np.nonzero(nodes > 0)
            out[idx + (nodes[idx] - 1,)] = 1.0
            return out
        return self.array[None] if self.shared else self.array


def check_rows(out, *, n: int, width: int, dim: int, layer: int, allow_idle: bool = True) -> Rows:
    """Validate what a policy returned (see the module docstring)."""
    arr = np.asarray(out)
    expected = (
        f"expected node numbers of shape (n, width) = ({n}, {width}) or ({width},), or unit rows of shape "
        f"(n, width, D) = ({n}, {width}, {dim}) or ({width}, {dim})"
    )
    if arr.dtype.kind in "iu" or arr.dtype == bool:
        if arr.dtype == bool or arr.shape not in ((n, width), (width,)):
            raise InputError(f"policy returned an array of shape {arr.shape} at layer {layer}; {expected}")
        lo = 0 if allow_idle else 1
        if arr.size and (arr.min() < lo or arr.max() > dim):
            bad = arr.min() if arr.min() < lo else arr.max()
            raise InputError(f"policy returned node {bad} at layer {layer}, outside the nodes {lo}..{dim}")
        return Rows(np.ascontiguousarray(arr, dtype=np.int64), True, arr.ndim == 1)
    if arr.dtype.kind != "f":
        raise InputError(f"policy returned {arr.dtype} values at layer {layer}; {expected}")
    if arr.shape not in ((n, width, dim), (width, dim)):
        raise InputError(f"policy returned rows of shape {arr.shape} at layer {layer}; {expected}")
    norms = np.linalg.norm(arr, axis=-1)
    if not np.all(np.abs(norms - 1) <= 1e-6):
        bad = norms.ravel()[np.argmax(np.abs(norms - 1).ravel())]
        raise InputError(f"policy returned a row of norm {bad:.6g} at layer {layer}; rows must be unit vectors")
    return Rows(np.ascontiguousarray(arr, dtype=float), False, arr.ndim == 2)


class Policy:
    """Base class of the built-in policies: ``layers`` L, ``width`` d; stateless by default."""

    layers: int = 1
    width: int = 1
    adaptive: bool = True
    name: str = "policy"

    def start(self, n: int):
        return None

    def rows(self, layer: int, state, phi: np.ndarray):  # pragma: no cover (every subclass defines it)
        raise NotImplementedError(f"{type(self).__name__} must define rows(layer, state, phi)")

    def update(self, layer: int, state, rows: Rows, phi_layer: np.ndarray):
        return state

    def work_floats(self, spec, budget: int) -> int:
        """Floats of work per sample beyond the draws (default: per-sample dense rows)."""
        return spec.dim * (budget + 1)

    def run(self, spec, channel, draws, budget: int, *, donor=None, patch_layer: int = 0, informed: bool = False):
        """A fused kernel's ``Run`` of one chunk, or None (the engine then routes layer by layer)."""
        return None

    # --- reading a policy -----------------------------------------------------------------------
    def __repr__(self) -> str:
        kind = "adaptive" if self.adaptive else "non-adaptive"
        return (f"<{type(self).__name__} {self.name!r}: {kind}, {self.layers} layer{'s' if self.layers != 1 else ''} "
                f"of width {self.width}; print(policy.describe(prior)) shows its decision tree>")

    def describe(self, prior=None, max_layers: int = 4) -> str:
        """The policy as a decision tree on a tree prior: the nodes each layer reads after each noiseless
        outcome (``+`` / ``-``: the reading ``+a_k`` / ``-a_k`` of a node on the leaf's path, ``0``: off
        it) of the nodes read before, as the policy itself routes them (its ``rows`` and ``update``), for
        the first ``max_layers`` layers. ``prior``: a numeric ``TreePrior`` (or ``TreeSpec``); policies
        that hold one need none."""
        from fvnum.priors.tree import numeric_prior

        spec = getattr(self, "spec", None) if prior is None else numeric_prior(prior)
        if getattr(spec, "heap_depth", None) is None:  # it walks the tree's leaves
            raise InputError(f"describe() needs a tree prior for {type(self).__name__}: policy.describe(TreePrior(K, alpha))")
        lines: list[str] = []
        leaves = np.arange(spec.n_leaves)

        def walk(layer, state, phi, alive, indent, label):
            pad = "  " * indent
            if layer >= self.layers:
                lines.append(f"{pad}{label}stop  [{alive.size} lea{'f' if alive.size == 1 else 'ves'}]")
                return
            if layer >= max_layers:
                lines.append(f"{pad}{label}...  ({self.layers - layer} more layers)")
                return
            rows = check_rows(self.rows(layer, state, phi), n=1, width=self.width, dim=spec.dim, layer=layer)
            if not rows.coordinate:
                lines.append(f"{pad}{label}read unit rows (dense: no finite decision tree)")
                return
            nodes = rows.nodes(1)[0]
            read = [int(n) for n in nodes if n > 0]
            what = "read nothing" if not read else "read node" + ("s " if len(read) > 1 else " ") + ", ".join(map(str, read))
            lines.append(f"{pad}{label}{what}  [layer {layer + 1}, {alive.size} leaves]")
            values = spec.values(alive, np.tile(nodes, (alive.size, 1)))  # (m, d) noiseless readings
            outcomes = {}
            for leaf, v in zip(alive, values):
                outcomes.setdefault(tuple(np.sign(v).astype(int).tolist()), (v, []))[1].append(leaf)
            for key in sorted(outcomes, key=lambda k: [(x == 0, -x) for x in k]):  # +, -, then 0
                v, members = outcomes[key]
                reading = v[None, :]  # (1, d)
                nxt = self.update(layer, state, rows, reading)
                signs = ",".join({1: "+", -1: "-", 0: "0"}[k] for k, n in zip(key, nodes) if n > 0) or "-"
                walk(layer + 1, nxt, np.concatenate([phi, reading[:, None, :]], axis=1), np.array(members),
                     indent + 1, f"{signs}: ")

        walk(0, self.start(1), np.zeros((1, 0, self.width)), leaves, 0, "")
        return "\n".join(lines)
