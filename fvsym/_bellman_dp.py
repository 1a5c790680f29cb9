"""The exact dynamic programme behind :mod:`fvsym.bellman` (docs/theory.md section 3, noiseless
coordinate class, tree prior): the value of a belief (a set of leaves) by memoised recursion over the
tree's automorphism classes, the Pareto DP of a last layer of width ``d > 1`` and of the non-adaptive
optimum, in exact arithmetic (``_Solver``), and the same programme on sets of polynomials in ``alpha``
(``_AlphaSolver``). See :mod:`fvsym.bellman` for the method.
"""
from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import sympy as sp

from fvsym import _envelope, _symbols
from fvsym._validate import check_int
from fvsym.policy import PolicyNode
from fvsym.priors import TreePrior, node_depth, squared_scales
from fvsym.priors import check_tree_prior as _check_prior
from fvsym.errors import InputError


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
    def one_layer_tables(self, S: int, cap: int, zero, with_nodes: bool, prune) -> dict:
        """The Pareto dynamic programme of one layer on belief ``S``, over the tree from the leaves up:
        ``(b, z) -> entries`` at the root, ``b <= cap`` reads and ``z`` leaves in the "all readings zero"
        cell, each entry ``(r, q)`` (resolved cells' value, squared norm of the zero cell's summed theta),
        with the nodes read as a third item when ``with_nodes``; ``prune`` keeps the undominated entries.
        Only nodes whose reading is not constant on ``S`` are read. Shared by the numeric table
        (``nonadaptive_table``) and the table of polynomials in ``alpha`` (``nonadaptive_sets``)."""
        lcm, first_leaf = self.lcm, self.n_leaves
        tables = {}
        start = (zero, zero, ()) if with_nodes else (zero, zero)
        for i in range(self.n_leaves):
            present = (S >> i) & 1
            tables[first_leaf + i] = ({(0, present): [start]}, present)
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
                    # node n unread: the zero cells merge
                    extra_r = w * (lcm * ((cp - zp) + (cm - zm)))
                    extra_q = w * ((zp - zm) ** 2)
                    bucket = out.setdefault((b, zp + zm), [])
                    if with_nodes:
                        for rp, qp, np_ in lp:
                            for rm, qm, nm in lm:
                                bucket.append((rp + rm + extra_r, qp + qm + extra_q, np_ + nm))
                    else:
                        for rp, qp in lp:
                            for rm, qm in lm:
                                bucket.append((rp + rm + extra_r, qp + qm + extra_q))
                    if not readable or b >= cap:
                        continue
                    # node n read: both zero cells become resolved cells
                    fp = lcm // zp if zp else 0
                    fm = lcm // zm if zm else 0
                    bucket = out.setdefault((b + 1, 0), [])
                    if with_nodes:
                        for rp, qp, np_ in lp:
                            for rm, qm, nm in lm:
                                bucket.append((rp + rm + qp * fp + qm * fm + read_extra, zero, np_ + nm + (n,)))
                    else:
                        for rp, qp in lp:
                            for rm, qm in lm:
                                bucket.append((rp + rm + qp * fp + qm * fm + read_extra, zero))
            tables[n] = ({key: prune(entries) for key, entries in out.items()}, cp + cm)
        return tables[1][0]

    def nonadaptive_table(self, S: int, cap: int) -> dict[int, tuple[object, tuple[int, ...]]]:
        """For each number of reads ``b <= cap`` the best one-layer design on belief ``S`` reading at
        most ``b`` nodes: ``b -> (value, nodes)``."""
        lcm = self.lcm
        best: dict[int, tuple[object, tuple[int, ...]]] = {}
        for (b, z), entries in self.one_layer_tables(S, cap, 0, True, _pareto).items():
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
        lcm = self.lcm
        best: dict[int, list] = {}
        for (b, z), entries in self.one_layer_tables(S, cap, self.zero, False, _pareto_pairs).items():
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
        raise InputError(f"the Bellman solver needs a numeric alpha or numeric scales, got {prior!r}")
    return prior


MAX_ALPHA_DEPTH = 5  # symbolic alpha: the exact DP over sets of polynomials is certified up to here


def _check_alpha_depth(depth) -> int:
    return check_int(depth, "depth", minimum=1, maximum=MAX_ALPHA_DEPTH)
