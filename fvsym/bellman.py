"""Exact Bellman recursion of THEORY.md section 3: noiseless coordinate class, tree prior.

A belief is the uniform distribution over a set ``S`` of leaves (a bit mask over leaf indices). Reading
node ``n`` splits ``S`` into the leaves whose path passes ``n`` with ``+``, with ``-``, and those whose
path avoids ``n`` (reading ``0``: informative too). With ``V_l(S)`` the largest expected value of
``sum_C ||sum_{s in C} theta_s||^2 / |C|`` over the final cells ``C`` that ``l`` more layers can reach,
the expected terminal loss of the belief is ``E - V_l(S) / |S|`` and

    V_0(S) = ||sum_{s in S} theta_s||^2 / |S|,    V_l(S) = max_W sum_{cells C of S under W} V_{l-1}(C),

the maximum over ``width`` nodes ``W`` whose reading is not constant on ``S``. ``V`` is memoised on a
canonical form of ``S`` under the tree's automorphisms (swapping the two children of any node).
A last layer of width ``d > 1`` (and the non-adaptive optimum, ``L = 1``, ``d = B``) is a dynamic
programme over the tree that keeps, per subtree, reads spent and size of the "all readings zero" cell,
the Pareto set of (resolved-cells value, squared norm of the zero cell's summed theta).

Arithmetic is exact: with rational ``a_k^2`` every value is an integer in units of
``1 / (lcm(1..2^K) * Q)``; otherwise a vector of integer coefficients of the ``a_k^2``, compared
through a 60-digit evaluation.

For every ``alpha`` at once (``solve_alpha``, ``optimal_nonadaptive_alpha``, behind
``tree_loss(..., alpha=None)``) the same programme runs on sets of polynomials in ``alpha`` (pruned
with certified comparisons, ``_envelope``); the exact envelope at the root gives a ``Piecewise``
with algebraic breakpoints and a policy per piece. ``recursion`` writes the recursion as sympy
equations and ``unroll`` expands it for one small tree.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from . import _envelope, _symbols
from ._validate import _short, check_int
from .priors import TreePrior, node_depth, squared_scales
from .priors import check_tree_prior as _check_prior

SOURCE = "THEORY.md §3"


# --- the decision tree ------------------------------------------------------------------------------
_SIGN_TEXT = {1: "+", -1: "-", 0: "0"}
REPR_LINES = 24  # lines of a decision tree shown by repr()


@dataclass(frozen=True)
class PolicyNode:
    """One layer of a policy: read ``nodes`` (real heap numbers for this belief), then follow
    ``children[readings]``, keyed by the reading sign of each read node (+1, -1 or 0, in the order of
    ``nodes``; only outcomes of positive probability). A child ``None`` means: nothing more to read
    (the layers are spent, or the belief is a single leaf). ``belief``: leaf indices still possible;
    ``value``: the expected terminal loss from here (exact)."""

    nodes: tuple[int, ...]
    children: dict
    belief: tuple[int, ...]
    value: sp.Expr

    def child(self, reading) -> "PolicyNode | None":
        """The policy after observing ``reading`` (one sign per read node)."""
        key = tuple(int(x) for x in reading)
        if key not in self.children:
            raise ValueError(
                f"reading {key} of nodes {self.nodes} has probability zero here; possible: {sorted(self.children)}"
            )
        return self.children[key]

    def next_nodes(self, readings) -> tuple[int, ...]:
        """Nodes to read at the next layer after the per-layer sign tuples ``readings`` (``()`` when
        nothing is left to read)."""
        node: PolicyNode | None = self
        for layer, reading in enumerate(readings):
            if node is None:
                if tuple(reading):
                    raise ValueError(f"layer {layer + 1} reads no node, got reading {tuple(reading)}")
                continue
            node = node.child(reading)
        return node.nodes if node is not None else ()

    def describe(self, indent: str = "  ") -> str:
        """Indented decision tree: ``read node 1`` then one line per outcome."""
        lines: list[str] = []

        def walk(node: PolicyNode, prefix: str, depth: int):
            what = "read node" + ("s " if len(node.nodes) > 1 else " ") + ", ".join(map(str, node.nodes))
            lines.append(
                f"{indent * depth}{prefix}{what}  [{len(node.belief)} leaves, expected loss {node.value}]"
            )
            for reading, child in node.children.items():
                signs = ",".join(_SIGN_TEXT[s] for s in reading)
                label = f"{signs}: " if len(reading) == 1 else f"({signs}): "
                if child is None:
                    lines.append(f"{indent * (depth + 1)}{label}stop")
                else:
                    walk(child, label, depth + 1)

        walk(self, "", 0)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        """The decision tree (cut after ``REPR_LINES`` lines; ``print(policy)`` shows all of it)."""
        lines = self.describe().splitlines()
        if len(lines) > REPR_LINES:
            lines = lines[:REPR_LINES] + [f"... ({len(lines) - REPR_LINES} more lines: print(policy) shows all)"]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-able form: values as exact strings plus floats, children as a list of outcomes."""
        return {
            "nodes": list(self.nodes),
            "belief": list(self.belief),
            "value": str(self.value),
            "value_float": float(self.value) if self.value.is_number else None,
            "children": [
                {"reading": list(reading), "next": None if child is None else child.to_dict()}
                for reading, child in self.children.items()
            ],
        }

    @property
    def n_policy_nodes(self) -> int:
        return 1 + sum(c.n_policy_nodes for c in self.children.values() if c is not None)


@dataclass(frozen=True)
class BellmanSolution:
    """Exact optimum ``loss`` of ``layers`` x ``width`` and its ``policy`` (``None`` when ``layers = 0``);
    ``n_states``: distinct memoised (canonical belief, layers left) states this solve visited."""

    loss: sp.Expr
    policy: PolicyNode | None
    layers: int
    width: int
    n_states: int

    def __repr__(self) -> str:
        head = (f"BellmanSolution(loss={self.loss}, layers={self.layers}, width={self.width}, "
                f"n_states={self.n_states})")
        return head + ("\npolicy: read nothing" if self.policy is None else "\npolicy:\n" + repr(self.policy))

    def to_dict(self) -> dict:
        return {"loss": sp.sstr(self.loss), "loss_float": float(self.loss) if self.loss.is_number else None,
                "layers": self.layers, "width": self.width, "n_states": self.n_states,
                "policy": None if self.policy is None else self.policy.to_dict()}


# --- exact arithmetic -------------------------------------------------------------------------------
class _Lin:
    """``sum_k c_k a_k^2`` with integer ``c_k`` (for irrational ``a_k^2``), ordered by a 60-digit value."""

    __slots__ = ("coeffs", "key")

    def __init__(self, coeffs, key):
        self.coeffs = coeffs
        self.key = key

    def __add__(self, other):
        if isinstance(other, int):
            if other:
                raise TypeError("only 0 can be added to a _Lin")
            return self
        return _Lin(tuple(a + b for a, b in zip(self.coeffs, other.coeffs)), self.key + other.key)

    __radd__ = __add__

    def __mul__(self, m: int):
        return _Lin(tuple(m * a for a in self.coeffs), self.key * m)

    __rmul__ = __mul__

    def _k(self, other):
        return other.key if isinstance(other, _Lin) else other

    def __lt__(self, other):
        return self.key < self._k(other)

    def __gt__(self, other):
        return self.key > self._k(other)

    def __le__(self, other):
        return self.key <= self._k(other)

    def __ge__(self, other):
        return self.key >= self._k(other)


@functools.lru_cache(maxsize=1 << 20)
def _canon(mask: int, height: int) -> int:
    """Canonical representative of a leaf set of a subtree with ``2^height`` leaves under child swaps."""
    if height == 0:
        return mask
    half = 1 << (height - 1)
    lo = _canon(mask & ((1 << half) - 1), height - 1)
    hi = _canon(mask >> half, height - 1)
    if lo > hi:
        lo, hi = hi, lo
    return lo | (hi << half)


class _Solver:
    """Memoised ``V_l(S)`` for one prior and one width."""

    def __init__(self, prior: TreePrior, width: int):
        K = prior.depth
        self.K, self.width = K, width
        self.n_leaves = 1 << K
        self.full = (1 << self.n_leaves) - 1
        self.lcm = math.lcm(*range(1, self.n_leaves + 1))
        self.squared = squared_scales(prior)
        self.second_moment = sp.expand(sum(self.squared))
        self._arithmetic(K)
        # node masks: sub(n) and its + half (sub(2n)) and - half (sub(2n+1))
        self.n_nodes = self.n_leaves - 1
        self.level = [0] * (self.n_nodes + 1)
        self.sub = [0] * (self.n_nodes + 1)
        self.plus = [0] * (self.n_nodes + 1)
        self.minus = [0] * (self.n_nodes + 1)
        for n in range(1, self.n_nodes + 1):
            k = node_depth(n)
            size = 1 << (K - k + 1)
            start = (n - (1 << (k - 1))) * size
            self.level[n] = k - 1
            self.sub[n] = ((1 << size) - 1) << start
            self.plus[n] = ((1 << (size // 2)) - 1) << start
            self.minus[n] = self.sub[n] ^ self.plus[n]
        self.memo: dict[tuple[int, int], object] = {}
        self.terminal_memo: dict[int, object] = {}
        self.resolved_value = self.terminal(1)  # a single leaf: ||theta_s||^2 = E (scaled)
        self._nonadaptive_full = None

    def _arithmetic(self, K: int):
        if all(w.is_Rational for w in self.squared):
            self.unit = math.lcm(*(int(w.q) for w in self.squared))
            self.w = [int(w * self.unit) for w in self.squared]
            self.rational = True
        else:
            import mpmath

            ctx = mpmath.mp.clone()
            ctx.dps = 60
            floats = [ctx.mpf(str(sp.N(w, 70))) for w in self.squared]
            self.w = [
                _Lin(tuple(1 if i == k else 0 for i in range(K)), floats[k]) for k in range(K)
            ]
            self.rational = False

    # --- values ----------------------------------------------------------------------------------
    def exact(self, value):
        """A stored value as an exact sympy number (``G``, not yet divided by ``|S|``)."""
        if self.rational:
            return sp.Rational(value, self.lcm * self.unit)
        return sp.expand(sum(sp.Rational(c, self.lcm) * w for c, w in zip(value.coeffs, self.squared)))

    def loss(self, S: int, value):
        """Expected terminal loss ``E - G / |S|`` of belief ``S`` with stored value ``G``."""
        return sp.expand(self.second_moment - self.exact(value) / S.bit_count())

    def canon(self, S: int) -> int:
        return _canon(S, self.K)

    def terminal(self, S: int):
        """``V_0(S) = ||sum_S theta||^2 / |S|`` (scaled)."""
        c = self.canon(S)
        v = self.terminal_memo.get(c)
        if v is None:
            v = 0
            for n in range(1, self.n_nodes + 1):
                if S & self.sub[n]:
                    diff = (S & self.plus[n]).bit_count() - (S & self.minus[n]).bit_count()
                    if diff:
                        v = v + diff * diff * self.w[self.level[n]]
            v = v * (self.lcm // S.bit_count())
            self.terminal_memo[c] = v
        return v

    def resolving_layers(self, S: int) -> int:
        """Layers that surely resolve ``S`` (more cannot help): every informative layer shrinks every
        cell, so ``|S| - 1``; and the path strategy from the lowest common ancestor of ``S`` needs one
        read per level below it, the number of leaf-index bits in which members of ``S`` differ."""
        lowest = (S & -S).bit_length() - 1
        return min(S.bit_count() - 1, (lowest ^ (S.bit_length() - 1)).bit_length())

    def informative(self, S: int) -> list[int]:
        """Nodes whose reading is not constant on ``S`` (at least two of +, -, 0 possible)."""
        out = []
        for n in range(1, self.n_nodes + 1):
            outcomes = (S & self.plus[n] != 0) + (S & self.minus[n] != 0) + (S & self.sub[n] != S)
            if outcomes >= 2:
                out.append(n)
        return out

    def split(self, S: int, nodes) -> list[tuple[tuple[int, ...], int]]:
        """Cells of ``S`` under reading ``nodes``, with their sign outcomes (non-empty cells only)."""
        cells = [((), S)]
        for n in nodes:
            new = []
            for key, c in cells:
                for sign, part in ((1, c & self.plus[n]), (-1, c & self.minus[n]), (0, c & ~self.sub[n])):
                    if part:
                        new.append((key + (sign,), part))
            cells = new
        return cells

    def choices(self, S: int):
        """Candidate readings of one layer: ``width`` informative nodes (fewer if there are fewer),
        skipping choices whose partition repeats one already listed."""
        nodes = self.informative(S)
        seen = set()
        for choice in itertools.combinations(nodes, min(self.width, len(nodes))):
            cells = self.split(S, choice)
            signature = frozenset(c for _, c in cells)
            if signature in seen:
                continue
            seen.add(signature)
            yield choice, cells

    def value(self, S: int, layers: int):
        """``V_layers(S)`` (scaled), memoised on the canonical form of ``S``."""
        size = S.bit_count()
        if layers == 0 or size == 1:
            return self.terminal(S)
        layers = min(layers, self.resolving_layers(S))
        key = (self.canon(S), layers)
        v = self.memo.get(key)
        if v is not None:
            return v
        if layers == 1 and self.width > 1:
            v = self.nonadaptive(S, self.width)[0]
        else:
            v, perfect = None, self.resolved_value * size  # no policy beats resolving every leaf
            for _, cells in self.choices(S):
                total = 0
                for _, cell in cells:
                    total = total + self.value(cell, layers - 1)
                if v is None or total > v:
                    v = total
                    if not v < perfect:
                        break
        self.memo[key] = v
        return v

    # --- one layer of width d: Pareto dynamic programme over the tree -----------------------------------
    def nonadaptive_table(self, S: int, cap: int) -> dict[int, tuple[object, tuple[int, ...]]]:
        """For each number of reads ``b <= cap`` the best one-layer design on belief ``S``:
        ``b -> (value, nodes)``. Only nodes whose reading is not constant on ``S`` are read."""
        lcm, first_leaf = self.lcm, self.n_leaves
        tables = {}
        for i in range(self.n_leaves):
            present = (S >> i) & 1
            tables[first_leaf + i] = ({(0, present): [(0, 0, ())]}, present)
        for n in range(first_leaf - 1, 0, -1):
            tp, cp = tables.pop(2 * n)
            tm, cm = tables.pop(2 * n + 1)
            w = self.w[self.level[n]]
            inside = S & self.sub[n]
            readable = (S & self.plus[n] != 0) + (S & self.minus[n] != 0) + (inside != S) >= 2
            out: dict[tuple[int, int], list] = {}
            read_extra = lcm * (cp + cm) * w
            for (bp, zp), lp in tp.items():
                for (bm, zm), lm in tm.items():
                    b = bp + bm
                    if b > cap:
                        continue
                    # node n unread: the zero cells merge
                    extra_r = lcm * ((cp - zp) + (cm - zm)) * w
                    extra_q = (zp - zm) ** 2 * w
                    bucket = out.setdefault((b, zp + zm), [])
                    for rp, qp, np_ in lp:
                        for rm, qm, nm in lm:
                            bucket.append((rp + rm + extra_r, qp + qm + extra_q, np_ + nm))
                    # node n read: both zero cells become resolved cells
                    if readable and b < cap:
                        fp = lcm // zp if zp else 0
                        fm = lcm // zm if zm else 0
                        bucket = out.setdefault((b + 1, 0), [])
                        for rp, qp, np_ in lp:
                            for rm, qm, nm in lm:
                                bucket.append((rp + rm + qp * fp + qm * fm + read_extra, 0, np_ + nm + (n,)))
            tables[n] = ({key: _pareto(entries) for key, entries in out.items()}, cp + cm)
        best: dict[int, tuple[object, tuple[int, ...]]] = {}
        for (b, z), entries in tables[1][0].items():
            f = lcm // z if z else 0
            for r, q, nodes in entries:
                total = r + q * f
                if b not in best or total > best[b][0]:
                    best[b] = (total, tuple(sorted(nodes)))
        # at most b reads: carry the best smaller design up
        out_best, running = {}, None
        for b in range(cap + 1):
            if b in best and (running is None or best[b][0] > running[0]):
                running = best[b]
            out_best[b] = running
        return out_best

    def nonadaptive(self, S: int, cap: int):
        return self.nonadaptive_table(S, cap)[cap]

    def full_nonadaptive(self, cap: int | None = None):
        """The one-layer table of the full belief for every budget up to ``cap`` (default D); only the
        budgets asked for are built (the table for ``B <= D`` is exponentially larger)."""
        cap = self.n_nodes if cap is None else cap
        if self._nonadaptive_full is None or len(self._nonadaptive_full) <= cap:
            self._nonadaptive_full = self.nonadaptive_table(self.full, cap)
        return self._nonadaptive_full

    # --- the policy ----------------------------------------------------------------------------------
    def policy(self, S: int, layers: int) -> PolicyNode | None:
        size = S.bit_count()
        if layers == 0 or size == 1:
            return None
        target = self.value(S, layers)
        effective = min(layers, self.resolving_layers(S))
        if effective == 1 and self.width > 1:
            choice = self.nonadaptive(S, self.width)[1]
            cells = self.split(S, choice)
        else:  # the first best choice, in the order value() scans them
            best, perfect = None, self.resolved_value * size
            for candidate, candidate_cells in self.choices(S):
                total = 0
                for _, cell in candidate_cells:
                    total = total + self.value(cell, effective - 1)
                if best is None or total > best:
                    best, choice, cells = total, candidate, candidate_cells
                    if not best < perfect:
                        break
        children = {key: self.policy(cell, layers - 1) for key, cell in cells}
        belief = tuple(i for i in range(self.n_leaves) if (S >> i) & 1)
        return PolicyNode(nodes=tuple(choice), children=children, belief=belief, value=self.loss(S, target))


def _pareto(entries):
    """Entries ``(r, q, nodes)`` not dominated in both ``r`` and ``q`` (larger is better)."""
    entries.sort(key=lambda e: (e[0], e[1]), reverse=True)
    kept, best_q = [], None
    for e in entries:
        if best_q is None or e[1] > best_q:
            kept.append(e)
            best_q = e[1]
    return kept


# --- the optimum as a function of alpha: a DP over sets of candidate polynomials ----------------------
class _Vec(tuple):
    """Integer coefficients of ``1, alpha, .., alpha^(K-1)`` (``w_k = a_k^2 = alpha^(k-1)``)."""

    __slots__ = ()

    def __add__(self, other):
        if isinstance(other, int):
            if other:
                raise TypeError("only 0 can be added to a _Vec")
            return self
        return _Vec(a + b for a, b in zip(self, other))

    __radd__ = __add__

    def __mul__(self, m: int):
        return _Vec(m * a for a in self)

    __rmul__ = __mul__


class _AlphaSolver(_Solver):
    """``V_l(S)`` as a set of polynomials in ``alpha`` whose pointwise maximum on ``(0, 1)`` is the
    value for every ``alpha`` at once. Sums over reading outcomes are Minkowski sums, the maximum
    over actions is a union; after each step :func:`_envelope.prune` drops the polynomials that are
    certified (Bernstein coefficients, exact integers) to lie below the others on ``[0, 1]``, so no
    polynomial that is best somewhere is ever lost. The same tree structure and canonical forms as
    the numeric solver; the last layer of width ``d > 1`` (and ``L = 1``, ``d = B``) runs the Pareto
    programme with pairs of polynomials, dropping only pairs dominated in both entries on ``[0, 1]``."""

    def __init__(self, depth: int, width: int):
        self.alpha = _symbols.alpha
        super().__init__(TreePrior(depth, self.alpha), width)

    def _arithmetic(self, K: int):
        self.w = [_Vec(1 if i == k else 0 for i in range(K)) for k in range(K)]
        self.rational = False
        self.zero = _Vec(0 for _ in range(K))

    def terminal(self, S: int):
        v = super().terminal(S)
        return self.zero if isinstance(v, int) else v

    def exact(self, value):
        return sp.expand(sum(sp.Rational(c, self.lcm) * self.alpha**k for k, c in enumerate(value)))

    def value(self, S: int, layers: int):
        size = S.bit_count()
        if layers == 0 or size == 1:
            return (self.terminal(S),)
        layers = min(layers, self.resolving_layers(S))
        key = (self.canon(S), layers)
        v = self.memo.get(key)
        if v is not None:
            return v
        if layers == 1 and self.width > 1:
            v = self.nonadaptive_sets(S, self.width)[self.width]
        else:
            perfect = self.resolved_value * size
            candidates = []
            for _, cells in self.choices(S):
                total = [self.zero]
                for _, cell in cells:
                    total = _envelope.prune([a + b for a in total for b in self.value(cell, layers - 1)])
                if total == [perfect]:
                    candidates = total
                    break
                candidates.extend(total)
            v = tuple(_envelope.prune(candidates))
        self.memo[key] = v
        return v

    def nonadaptive_sets(self, S: int, cap: int) -> dict[int, tuple]:
        """For each number of reads ``b <= cap`` the candidate values of one-layer designs on ``S``
        reading at most ``b`` nodes (the set version of ``nonadaptive_table``)."""
        lcm, first_leaf = self.lcm, self.n_leaves
        zero = self.zero
        tables = {}
        for i in range(self.n_leaves):
            present = (S >> i) & 1
            tables[first_leaf + i] = ({(0, present): [(zero, zero)]}, present)
        for n in range(first_leaf - 1, 0, -1):
            tp, cp = tables.pop(2 * n)
            tm, cm = tables.pop(2 * n + 1)
            w = self.w[self.level[n]]
            readable = (S & self.plus[n] != 0) + (S & self.minus[n] != 0) + (S & self.sub[n] != S) >= 2
            out: dict[tuple[int, int], list] = {}
            read_extra = w * (lcm * (cp + cm))
            for (bp, zp), lp in tp.items():
                for (bm, zm), lm in tm.items():
                    b = bp + bm
                    if b > cap:
                        continue
                    extra_r = w * (lcm * ((cp - zp) + (cm - zm)))
                    extra_q = w * ((zp - zm) ** 2)
                    bucket = out.setdefault((b, zp + zm), [])
                    for rp, qp in lp:
                        for rm, qm in lm:
                            bucket.append((rp + rm + extra_r, qp + qm + extra_q))
                    if readable and b < cap:
                        fp = lcm // zp if zp else 0
                        fm = lcm // zm if zm else 0
                        bucket = out.setdefault((b + 1, 0), [])
                        for rp, qp in lp:
                            for rm, qm in lm:
                                bucket.append((rp + rm + qp * fp + qm * fm + read_extra, zero))
            tables[n] = ({key: _pareto_pairs(entries) for key, entries in out.items()}, cp + cm)
        best: dict[int, list] = {}
        for (b, z), entries in tables[1][0].items():
            f = lcm // z if z else 0
            best.setdefault(b, []).extend(r + q * f for r, q in entries)
        out_best, running = {}, []
        for b in range(cap + 1):
            running = _envelope.prune(running + best.get(b, []))
            out_best[b] = tuple(running)
        return out_best

    def gain_of_cells(self, cells) -> _Vec:
        return sum((self.terminal(c) for c in cells), self.zero)

    def symbolic_policy(self, S: int, node: "PolicyNode | None") -> "PolicyNode | None":
        """The same decision tree with every ``value`` a polynomial in ``alpha`` (the expected loss
        of following it from that belief, for every ``alpha``)."""
        if node is None:
            return None
        children = {key: self.symbolic_policy(cell, node.children.get(key)) for key, cell in self.split(S, node.nodes)}
        value = self.loss(S, self.gain_of_cells(self.policy_cells(S, node)))
        return PolicyNode(nodes=node.nodes, children=children, belief=node.belief, value=value)

    def policy_cells(self, S: int, node: "PolicyNode | None") -> list[int]:
        """The final cells (leaf masks) a policy reaches from belief ``S``."""
        if node is None:
            return [S]
        out = []
        for key, cell in self.split(S, node.nodes):
            out.extend(self.policy_cells(cell, node.children.get(key)))
        return out


def _pareto_pairs(entries):
    """Pairs ``(r, q)`` of polynomials not dominated in both entries on ``[0, 1]`` by another pair
    (larger is better; only certified dominations drop a pair)."""
    entries = list(dict.fromkeys(entries))
    if len(entries) <= 1:
        return entries
    probes = [Fraction(i, 8) for i in range(9)]
    values = [tuple((_envelope.evaluate(r, x), _envelope.evaluate(q, x)) for x in probes) for r, q in entries]
    kept = []
    for i, (r, q) in enumerate(entries):
        dominated = False
        for j, (r2, q2) in enumerate(entries):
            if j == i or any(a2 < a or b2 < b for (a, b), (a2, b2) in zip(values[i], values[j])):
                continue
            if _envelope.dominates(r2, r) and _envelope.dominates(q2, q):
                dominated = True
                break
        if not dominated:
            kept.append(i)
    return [entries[i] for i in kept]


@functools.lru_cache(maxsize=16)
def _alpha_solver(depth: int, width: int) -> _AlphaSolver:
    return _AlphaSolver(depth, width)


@functools.lru_cache(maxsize=64)
def _solver(prior: TreePrior, width: int) -> _Solver:
    return _Solver(prior, width)


def _check_numeric(prior) -> TreePrior:
    prior = _check_prior(prior)
    if not prior.is_numeric:
        raise ValueError(f"the Bellman solver needs a numeric alpha or numeric scales, got {prior!r}")
    return prior


# --- public API ------------------------------------------------------------------------------------
def solve(prior: TreePrior, layers: int, width: int) -> BellmanSolution:
    """Exact optimal loss and policy with ``layers`` layers of ``width`` coordinate readings each
    (noiseless, tree prior with numeric ``alpha`` or scales). ``layers * width = 0`` reads nothing:
    the loss is ``E||theta||^2`` and the policy ``None``."""
    prior = _check_numeric(prior)
    layers = check_int(layers, "layers", minimum=0)
    width = check_int(width, "width", minimum=0)
    if layers * width > prior.n_nodes:
        raise ValueError(f"budget layers * width must be <= D = {prior.n_nodes}, got {layers * width}")
    if layers * width == 0:
        loss = sp.expand(sum(squared_scales(prior)))
        return BellmanSolution(loss=loss, policy=None, layers=layers, width=width, n_states=0)
    solver = _solver(prior, width)
    solver.memo = {}  # n_states counts this solve's states; the terminal values stay cached
    S = solver.full
    value = solver.value(S, layers)
    policy = solver.policy(S, layers)
    return BellmanSolution(
        loss=solver.loss(S, value), policy=policy, layers=layers, width=width, n_states=len(solver.memo)
    )


def optimal_nonadaptive(prior: TreePrior, budget: int) -> tuple[sp.Expr, tuple[int, ...]]:
    """The ``L = 1``, ``d = B`` optimum: ``(loss, nodes)`` with the best fixed design (sorted nodes)."""
    prior = _check_numeric(prior)
    budget = check_int(budget, "budget", minimum=0)
    if budget > prior.n_nodes:
        raise ValueError(f"budget must be <= D = {prior.n_nodes}, got {budget}")
    solver = _solver(prior, 1)
    value, nodes = solver.full_nonadaptive(budget)[budget]
    return solver.loss(solver.full, value), nodes


# --- the optimum in symbolic alpha -----------------------------------------------------------------
@dataclass(frozen=True)
class AlphaPiece:
    """One piece of the optimum: on ``lower < alpha < upper`` the optimal loss is the polynomial
    ``loss``, attained by ``policy`` (adaptive: a decision tree) or ``design`` (non-adaptive: nodes).
    ``sample``: a rational inside the piece at which the policy was found and its value checked;
    the policy's node values are polynomials in ``alpha``."""

    lower: sp.Expr
    upper: sp.Expr
    loss: sp.Expr
    sample: sp.Rational
    policy: PolicyNode | None = None
    design: tuple[int, ...] | None = None

    def __repr__(self) -> str:
        what = f"design {list(self.design)}" if self.design is not None else (
            "read nothing" if self.policy is None else f"policy reading node {', '.join(map(str, self.policy.nodes))} first")
        return f"AlphaPiece({self.lower} < alpha < {self.upper}: loss {self.loss}; {what}; checked at alpha = {self.sample})"

    def to_dict(self) -> dict:
        out = {"lower": sp.sstr(self.lower), "upper": sp.sstr(self.upper),
               "lower_float": float(self.lower), "upper_float": float(self.upper),
               "loss": sp.sstr(self.loss), "sample": sp.sstr(self.sample)}
        if self.design is not None:
            out["design"] = [int(n) for n in self.design]
        else:
            out["policy"] = None if self.policy is None else self.policy.to_dict()
        return out


@dataclass(frozen=True)
class AlphaOptimum:
    """The exact optimum as a function of ``alpha`` on ``(0, 1)``: ``loss`` is a ``Piecewise`` of
    polynomials in ``alpha`` (a plain polynomial when one policy is best everywhere) with exact
    algebraic breakpoints; ``pieces`` lists each interval with its optimal policy or design.
    ``n_candidates``: polynomials left at the root before the exact envelope was taken."""

    loss: sp.Expr
    pieces: tuple[AlphaPiece, ...]
    layers: int
    width: int
    nonadaptive: bool
    n_candidates: int

    @property
    def breakpoints(self) -> tuple:
        return tuple(p.upper for p in self.pieces[:-1])

    def at(self, alpha):
        """The exact optimal loss at a number ``alpha`` in ``(0, 1)``."""
        from ._validate import check_alpha

        a = check_alpha(alpha)
        if not a.is_number:
            raise ValueError(f"at() needs a number alpha, got {_short(alpha)}")
        for piece in self.pieces:
            if (a <= piece.upper) == sp.true:
                return sp.expand(piece.loss.subs(_symbols.alpha, a))
        return sp.expand(self.pieces[-1].loss.subs(_symbols.alpha, a))  # pragma: no cover

    def __repr__(self) -> str:
        kind = "non-adaptive" if self.nonadaptive else "adaptive"
        lines = [f"AlphaOptimum({kind}, layers={self.layers}, width={self.width}, {len(self.pieces)} "
                 f"piece{'s' if len(self.pieces) != 1 else ''})"]
        return "\n".join(lines + [f"  {p!r}" for p in self.pieces])

    def _repr_latex_(self) -> str:
        return f"$\\displaystyle {pieces_latex(self.pieces)}$"

    def to_dict(self) -> dict:
        return {"loss": sp.sstr(self.loss), "layers": self.layers, "width": self.width,
                "nonadaptive": self.nonadaptive, "n_candidates": self.n_candidates,
                "breakpoints": [sp.sstr(b) for b in self.breakpoints],
                "pieces": [p.to_dict() for p in self.pieces]}


MAX_ALPHA_DEPTH = 5


def _assemble(solver: _AlphaSolver, gains, layers: int, width: int, nonadaptive: bool) -> AlphaOptimum:
    """Exact envelope of the root candidates, one policy per piece (found by the numeric solver at the
    piece's sample and checked to have exactly the piece's polynomial as its value)."""
    alpha = _symbols.alpha
    S = solver.full
    budget = layers * width
    pieces = []
    for lower, upper, sample, gain in _envelope.upper_envelope(list(gains), alpha):
        loss = solver.loss(S, gain)
        prior = TreePrior(solver.K, sample)
        if nonadaptive:
            value, design = optimal_nonadaptive(prior, budget)
            reached = solver.gain_of_cells([c for _, c in solver.split(S, design)])
            policy = None
        else:
            sol = solve(prior, layers, width)
            value, policy, design = sol.loss, sol.policy, None
            reached = solver.gain_of_cells(solver.policy_cells(S, policy))
        if value != loss.subs(alpha, sample) or reached != gain:  # pragma: no cover - a solver bug
            raise AssertionError(f"piece ({lower}, {upper}): policy value {reached} != envelope {gain}")
        pieces.append(AlphaPiece(lower, upper, loss, sample, solver.symbolic_policy(S, policy), design))
    expr = piecewise_in_alpha([(p.upper, p.loss) for p in pieces])
    return AlphaOptimum(expr, tuple(pieces), layers, width, nonadaptive, len(gains))


def piecewise_in_alpha(pieces) -> sp.Expr:
    """``[(upper_1, expr_1), ..., (1, expr_m)]`` (increasing upper ends) as one expression:
    ``Piecewise((expr_1, alpha < upper_1), ..., (expr_m, True))``, or ``expr_1`` alone."""
    alpha = _symbols.alpha
    if len(pieces) == 1:
        return pieces[0][1]
    return sp.Piecewise(*[(e, alpha < upper) for upper, e in pieces[:-1]], (pieces[-1][1], True))


def pieces_latex(pieces) -> str:
    """The pieces of an optimum as one LaTeX ``cases`` block: each loss, its interval of ``alpha`` and
    what attains it (the design, or the first node the policy reads). No plain-text line."""
    rows = []
    for p in pieces:
        if p.design is not None:
            what = rf"\text{{design }} \{{{', '.join(map(str, p.design))}\}}"
        elif p.policy is not None:
            what = rf"\text{{policy reading node {', '.join(map(str, p.policy.nodes))} first}}"
        else:
            what = r"\text{read nothing}"
        rows.append(rf"{sp.latex(p.loss)} & {sp.latex(p.lower)} < \alpha < {sp.latex(p.upper)},\ {what}")
    return "\\begin{cases}\n" + " \\\\\n".join(rows) + "\n\\end{cases}"


def _check_alpha_depth(depth) -> int:
    return check_int(depth, "depth", minimum=1, maximum=MAX_ALPHA_DEPTH)


def solve_alpha(depth: int, layers: int, width: int) -> AlphaOptimum:
    """The exact Bellman optimum of ``layers`` x ``width`` (noiseless coordinate class) for every
    ``alpha`` in ``(0, 1)`` at once: a ``Piecewise`` of polynomials with certified pieces and their
    policies (see :class:`_AlphaSolver` and :mod:`fvsym._envelope`). ``depth <= 5``."""
    depth = _check_alpha_depth(depth)
    layers = check_int(layers, "layers", minimum=0)
    width = check_int(width, "width", minimum=0)
    n_nodes = 2**depth - 1
    if layers * width > n_nodes:
        raise ValueError(f"budget layers * width must be <= D = {n_nodes}, got {layers * width}")
    solver = _alpha_solver(depth, max(width, 1))
    gains = (solver.zero,) if layers * width == 0 else solver.value(solver.full, layers)  # memo kept
    return _assemble(solver, gains, layers, width, nonadaptive=False)


def optimal_nonadaptive_alpha(depth: int, budget: int) -> AlphaOptimum:
    """The exact ``L = 1``, ``d = B`` optimum for every ``alpha`` in ``(0, 1)``, with each piece's
    best fixed design. ``depth <= 5``."""
    depth = _check_alpha_depth(depth)
    budget = check_int(budget, "budget", minimum=0)
    n_nodes = 2**depth - 1
    if budget > n_nodes:
        raise ValueError(f"budget must be <= D = {n_nodes}, got {budget}")
    solver = _alpha_solver(depth, 1)
    if solver._nonadaptive_full is None:
        solver._nonadaptive_full = solver.nonadaptive_sets(solver.full, n_nodes)
    return _assemble(solver, solver._nonadaptive_full[budget], 1, budget, nonadaptive=True)


# --- the recursion as equations ---------------------------------------------------------------------
MAX_WRITTEN_WIDTH = 4  # the sum over the 3^d reading outcomes is written out term by term


def _J(l: int):
    return sp.Function(f"J_{l}")


class Recursion(tuple):
    """The equations of a Bellman recursion (a tuple of ``sp.Eq``, terminal value first, optimum last)
    with ``where``: the definitions of the sets and maps they use, as ``(symbol, meaning)`` text pairs.
    Prints as the equations and the definitions, and as LaTeX in a notebook (``_repr_latex_``)."""

    where: tuple = ()

    def __new__(cls, equations, where=()):
        self = super().__new__(cls, equations)
        self.where = tuple(where)
        return self

    @property
    def equations(self) -> tuple:
        return tuple(self)

    def lines(self) -> list:
        """The text form: one ``lhs = rhs`` line per equation, then ``where`` lines."""
        out = [f"{sp.sstr(e.lhs)} = {sp.sstr(e.rhs)}" for e in self]
        return out + [f"where {name}: {meaning}" for name, meaning in self.where]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return str(self)

    @property
    def latex(self) -> str:
        """The equations as one ``aligned`` block, the definitions as text rows after them."""
        rows = [rf"{sp.latex(e.lhs)} &= {sp.latex(e.rhs)}" for e in self]
        rows += [rf"&\text{{where }} {latex} \text{{: {_latex_text(meaning)}}}" for latex, meaning in self._where_latex()]
        return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"

    def _where_latex(self):
        return [(_WHERE_LATEX.get(name, rf"\mathrm{{{name}}}"), meaning) for name, meaning in self.where]

    def _repr_latex_(self) -> str:
        return f"$\\displaystyle {self.latex}$"

    def to_dict(self) -> dict:
        return {"equations": [{"lhs": sp.sstr(e.lhs), "rhs": sp.sstr(e.rhs), "latex": sp.latex(e)} for e in self],
                "where": [{"symbol": n, "meaning": m} for n, m in self.where], "latex": self.latex}


def _latex_text(text: str) -> str:
    return text.replace("\\", r"\textbackslash ").replace("_", r"\_").replace("{", r"\{").replace("}", r"\}")


_WHERE_LATEX = {
    "N_d(S)": r"N_{d}(S)", "N_1(S)": r"N_{1}(S)", "N_2(S)": r"N_{2}(S)", "N_3(S)": r"N_{3}(S)",
    "N_4(S)": r"N_{4}(S)", "S_W^r": r"S_{W}^{r}", "|S|": r"\left|S\right|", "mu_S": r"\mu_{S}",
    "U_d": r"U_{d}", "U(b)": r"U(b)", "mu(b)": r"\mu(b)", "p_n(phi)": r"p_{n}(\phi)", "theta_m": r"\theta_{m}",
    "b_0": r"b_{0}", "b*p_n(phi)": r"b \odot p_{n}(\phi)", "p(n, m, phi)": r"p(n, m, \phi)", "b": "b",
}


def recursion(prior, layers: int, width: int, tau=None) -> Recursion:
    """The Bellman recursion of THEORY.md section 3 as sympy equations (``sp.Eq``), from the terminal
    value to the optimum. Print them with ``str``/``sp.latex`` (or :func:`recursion_latex`).

    ``TreePrior`` (noiseless coordinate class, the model :func:`solve` solves): a belief ``S`` is a set
    of equally likely leaves; an action ``W`` is a set of ``width`` nodes whose reading is not constant
    on ``S`` (the set ``N_d(S)``); each node reads ``+``, ``-`` or ``0``, so the expectation over the
    reading is the written-out sum over the ``3^d`` outcomes ``r`` of ``P(r) = |S_W^r| / |S|`` times the
    value at the Bayes update ``S_W^r``::

        J_L(S) = (1/|S|) sum_{s in S} ||theta_s - mu_S||^2
        J_{l-1}(S) = min_{W in N_d(S)} sum_r |S_W^r| / |S| J_l(S_W^r),   l = L .. 1
        optimal_loss = J_0(S_0),   |S_0| = 2^K

    ``GaussianPrior`` (gaussian channel, noise ``tau``, symbolic by default): the belief is the
    posterior covariance ``P``, whose update does not depend on the reading (the expectation over
    the reading is trivial), ``J_L(P) = tr P`` and ``J_{l-1}(P) = min_W J_l(P - P W^T (W P W^T +
    tau^2 I)^-1 W P)``, ``optimal_loss = J_0(C)``. :func:`unroll` expands the tree version."""
    from . import _notation as N
    from .priors import GaussianPrior

    layers = check_int(layers, "layers", minimum=1)
    width = check_int(width, "width", minimum=1)
    optimum = sp.Symbol("optimal_loss")
    if isinstance(prior, GaussianPrior):
        from ._validate import check_tau

        t = _symbols.tau if tau is None else check_tau(tau)
        D = prior.dim
        P, W, C = sp.MatrixSymbol("P", D, D), sp.MatrixSymbol("W", width, D), sp.MatrixSymbol("C", D, D)
        update = P - P * W.T * (W * P * W.T + t**2 * sp.Identity(width)).I * W * P
        actions = sp.Symbol(f"U_{width}")  # d x D matrices with unit rows
        eqs = [sp.Eq(C, prior.cov), sp.Eq(_J(layers)(P), sp.Trace(P))]
        for l in range(layers, 0, -1):
            eqs.append(sp.Eq(_J(l - 1)(P), N.MinOver(_J(l)(update), W, actions)))
        eqs.append(sp.Eq(optimum, _J(0)(C)))
        where = [(f"U_{width}", f"the {width} x {D} matrices W with unit rows (unit class)"),
                 ("C", "the prior covariance")]
        return Recursion(eqs, where)
    prior = _check_prior(prior)
    if tau is not None:
        return noisy_recursion(prior, layers, width, tau)
    if width > MAX_WRITTEN_WIDTH:
        raise ValueError(f"width must be <= {MAX_WRITTEN_WIDTH} to write out the 3^d reading outcomes, got {width}")
    if layers * width > prior.n_nodes:
        raise ValueError(f"budget layers * width must be <= D = {prior.n_nodes}, got {layers * width}")
    S, S0, W = sp.Symbol("S"), sp.Symbol("S_0"), sp.Symbol("W")
    actions = sp.Function(f"N_{width}")(S)
    outcomes = list(itertools.product((1, -1, 0), repeat=width))
    eqs = [sp.Eq(N.Card(S0), 2**prior.depth), sp.Eq(_J(layers)(S), N.PosteriorVariance(S))]
    for l in range(layers, 0, -1):
        total = sp.Add(*[N.Card(N.Cell(S, W, r)) / N.Card(S) * _J(l)(N.Cell(S, W, r)) for r in outcomes],
                       evaluate=False)
        eqs.append(sp.Eq(_J(l - 1)(S), N.MinOver(total, W, actions)))
    eqs.append(sp.Eq(optimum, _J(0)(S0)))
    nodes = "single nodes W" if width == 1 else f"sets W of {width} nodes"
    where = [
        (f"N_{width}(S)", f"the {nodes} (heap numbers 1..{prior.n_nodes}) whose reading is not "
                          "constant on S (a reading that cannot differ tells nothing)"),
        ("S_W^r", "the leaves of S whose noiseless readings of W have the signs r (+, - or 0: a node off the "
                  "leaf's path reads 0)"),
        ("|S|", "the number of leaves in S, all equally likely"),
        ("mu_S", "the mean of theta_s over the leaves s of S"),
    ]
    return Recursion(eqs, where)


MAX_NOISY_WRITTEN_DEPTH = 3  # the leaves' theta_m are written out (2^K rows of D entries)


def noisy_recursion(prior, layers: int, width: int = 1, tau=None) -> Recursion:
    """The Bellman recursion under the gaussian channel (THEORY.md section 3, "under noise") for a small
    tree (``depth <= MAX_NOISY_WRITTEN_DEPTH``), layers of width 1, coordinate class, any node at every
    layer (repeats included). A belief is a weight vector ``b`` over the ``2^K`` leaves (prior times
    likelihoods, unnormalised); ``U(b) = sum_m b_m ||theta_m - mu(b)||^2`` is homogeneous of degree 1, so
    ``V_0(b) = U(b)`` and ``V_l(b) = min_n int V_{l-1}(b * p_n(phi)) dphi`` with the Gaussian
    likelihoods ``p_n(phi)_m = N(phi; theta_m[n], tau^2)``; the optimum is ``V_L(b_0)``. The leaves'
    ``theta_m`` are written out. ``fvnum.noisy_bellman`` evaluates it numerically."""
    from . import _notation as N
    from ._validate import check_tau

    prior = _check_prior(prior)
    layers = check_int(layers, "layers", minimum=1)
    width = check_int(width, "width", minimum=1)
    if width != 1:
        raise ValueError(f"the noisy recursion is written for layers of width 1 (any node at every layer), got width={width}")
    if prior.depth > MAX_NOISY_WRITTEN_DEPTH:
        raise ValueError(f"depth must be <= {MAX_NOISY_WRITTEN_DEPTH} to write out the leaves of the noisy "
                         f"recursion, got {prior.depth}")
    t = _symbols.tau if tau is None else check_tau(tau)
    if t == 0:
        raise ValueError("tau = 0 is the noiseless recursion: leave out tau")
    M, D = prior.n_leaves, prior.n_nodes
    b, n, m, phi = sp.Symbol("b"), sp.Symbol("n"), sp.Symbol("m", integer=True, positive=True), sp.Symbol("phi", real=True)
    V = lambda l: sp.Function(f"V_{l}")  # noqa: E731
    U, mu = sp.Function("U"), sp.Function("mu")
    bm, theta = sp.IndexedBase("b"), sp.IndexedBase("theta")
    eqs = [sp.Eq(U(b), sp.Sum(bm[m] * N.NormSq(theta[m] - mu(b)), (m, 1, M))),
           sp.Eq(mu(b), sp.Sum(bm[m] * theta[m], (m, 1, M)) / sp.Sum(bm[m], (m, 1, M))),
           sp.Eq(sp.Function("p")(n, m, phi),
                 sp.exp(-(phi - theta[m, n]) ** 2 / (2 * t**2)) / (sp.sqrt(2 * sp.pi) * t)),
           sp.Eq(V(0)(b), U(b))]
    update = N.Reweighted(b, n, phi)
    for l in range(1, layers + 1):
        eqs.append(sp.Eq(V(l)(b), N.MinOver(sp.Integral(V(l - 1)(update), (phi, -sp.oo, sp.oo)), n,
                                            sp.Range(1, D + 1))))
    eqs.append(sp.Eq(sp.Symbol("optimal_loss"), V(layers)(sp.Symbol("b_0"))))
    for index, signs in enumerate(prior.leaves(), start=1):
        row = prior.theta(signs)
        eqs.append(sp.Eq(theta[index], sp.Tuple(*[row.get(k, 0) for k in range(1, D + 1)]), evaluate=False))
    where = [
        ("b", f"a belief: unnormalised weights (b_1, .., b_{M}) over the {M} leaves"),
        ("b*p_n(phi)", "the Bayes update after reading phi at node n: b_m p(n, m, phi) for each leaf m"),
        ("p(n, m, phi)", f"the likelihood of reading phi at node n under leaf m (gaussian channel, tau = {t})"),
        ("b_0", f"the uniform prior, b_m = 1/{M}"),
        ("theta_m", f"leaf m's latent (entries at the heap nodes 1..{D}; leaves in the order of TreePrior.leaves())"),
    ]
    return Recursion(eqs, where)


def recursion_latex(equations) -> str:
    """The equations as one LaTeX ``aligned`` block (with the definitions of a ``Recursion``)."""
    if isinstance(equations, Recursion):
        return equations.latex
    rows = [rf"{sp.latex(e.lhs)} &= {sp.latex(e.rhs)}" for e in equations]
    return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"


MAX_UNROLLED_TERMS = 200_000


def unroll(prior, layers: int, width: int, max_terms: int = MAX_UNROLLED_TERMS) -> sp.Expr:
    """The recursion expanded for one small tree: an explicit expression of ``Min`` (over the actions
    of each belief, one per distinct partition), sums over the reading outcomes with their
    probabilities ``|cell| / |S|``, and terminal losses, built unevaluated (``evaluate=False``).
    ``.doit()`` (numeric ``alpha``) or ``.subs(alpha, value).doit()`` (symbolic ``alpha``, ``depth <= 5``)
    evaluates it; the value equals ``solve(prior, layers, width).loss``. Subtrees of repeated
    beliefs are shared; more than ``max_terms`` actions in all raise a ValueError."""
    prior = _check_prior(prior)
    layers = check_int(layers, "layers", minimum=0)
    width = check_int(width, "width", minimum=1)
    if layers * width > prior.n_nodes:
        raise ValueError(f"budget layers * width must be <= D = {prior.n_nodes}, got {layers * width}")
    if prior.is_numeric:
        solver = _Solver(prior, width)
    elif prior.alpha is not None and isinstance(prior.alpha, sp.Symbol) and prior.alpha == _symbols.alpha:
        solver = _AlphaSolver(_check_alpha_depth(prior.depth), width)
    else:
        raise ValueError(f"unroll needs numeric scales or the symbol alpha, got {prior!r}")
    memo: dict[tuple[int, int], sp.Expr] = {}
    n_terms = 0

    def J(S: int, left: int) -> sp.Expr:
        nonlocal n_terms
        size = S.bit_count()
        if left == 0 or size == 1:
            return solver.loss(S, solver.terminal(S))
        key = (S, left)
        if key in memo:
            return memo[key]
        options = []
        for _, cells in solver.choices(S):
            terms = [sp.Mul(sp.Rational(c.bit_count(), size), J(c, left - 1), evaluate=False) for _, c in cells]
            options.append(sp.Add(*terms, evaluate=False))
        n_terms += len(options)
        if n_terms > max_terms:
            raise ValueError(f"the unrolled recursion has more than max_terms={max_terms} actions; "
                             "use a smaller depth, fewer layers or a larger max_terms")
        memo[key] = options[0] if len(options) == 1 else sp.Min(*options, evaluate=False)
        return memo[key]

    return J(solver.full, layers)


def unrolled_size(prior, layers: int, width: int, max_terms: int = MAX_UNROLLED_TERMS) -> int:
    """The number of nodes of :func:`unroll`'s expression written out in full (shared subtrees counted
    each time they appear, as printing and simplifying meet them): its price, counted without building it.
    Raises the ValueError of ``unroll`` past ``max_terms`` actions."""
    prior = _check_prior(prior)
    layers = check_int(layers, "layers", minimum=0)
    width = check_int(width, "width", minimum=1)
    if layers * width > prior.n_nodes:
        raise ValueError(f"budget layers * width must be <= D = {prior.n_nodes}, got {layers * width}")
    if prior.is_numeric:
        solver = _Solver(prior, width)
    elif prior.alpha is not None and isinstance(prior.alpha, sp.Symbol) and prior.alpha == _symbols.alpha:
        solver = _AlphaSolver(_check_alpha_depth(prior.depth), width)
    else:
        raise ValueError(f"unroll needs numeric scales or the symbol alpha, got {prior!r}")
    memo: dict[tuple[int, int], int] = {}
    n_terms = 0

    def size(S: int, left: int) -> int:
        nonlocal n_terms
        if left == 0 or S.bit_count() == 1:
            return 1
        if (S, left) in memo:
            return memo[(S, left)]
        total = 0
        options = list(solver.choices(S))
        n_terms += len(options)
        if n_terms > max_terms:
            raise ValueError(f"the unrolled recursion has more than max_terms={max_terms} actions; "
                             "use a smaller depth, fewer layers or a larger max_terms")
        for _, cells in options:
            total += 1 + sum(2 + size(c, left - 1) for _, c in cells)
        memo[(S, left)] = total
        return total

    return size(solver.full, layers)


__all__ = ["AlphaOptimum", "AlphaPiece", "BellmanSolution", "PolicyNode", "Recursion", "noisy_recursion",
           "optimal_nonadaptive", "optimal_nonadaptive_alpha", "pieces_latex", "recursion", "recursion_latex", "solve",
           "solve_alpha", "unroll", "unrolled_size"]
