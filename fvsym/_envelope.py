"""Certified upper envelopes of polynomials on ``[0, 1]`` (the optimum of docs/theory.md section 3 as a
function of ``alpha``).

A polynomial is a tuple of integer coefficients, lowest degree first. Two operations:

- :func:`prune` drops polynomials that are certified to lie below the pointwise maximum of the
  others on ``[0, 1]`` and keeps the rest: a superset of the envelope, never a wrong drop. The
  certificate is exact: on each cell of a fixed rational grid, ``p - q`` written in the Bernstein
  basis of the cell (integer arithmetic) has only nonnegative coefficients, hence ``p >= q`` there.
- :func:`upper_envelope` is the exact envelope: every root in ``(0, 1)`` of every pairwise difference
  (irreducible factors over the rationals, roots as exact ``Rational`` or ``CRootOf``), one rational
  sample strictly between consecutive roots, and the exact argmax at each sample. Between two
  consecutive roots no difference changes sign, so the argmax at the sample is the argmax on the
  whole interval: the pieces and their exact algebraic breakpoints are certified, not sampled.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction
from math import comb

import sympy as sp

GRID = 32  # cells of the pruning grid
SUBDIVISIONS = 3  # halvings of a cell before a certificate is given up (the polynomial is then kept)


def evaluate(p, x: Fraction) -> Fraction:
    value = Fraction(0)
    for c in reversed(p):
        value = value * x + c
    return value


@functools.lru_cache(maxsize=None)
def _cell_matrix(n: int, a: Fraction, h: Fraction) -> tuple:
    """Integer matrix ``M`` with ``M c`` a positive multiple of the Bernstein coefficients on
    ``[a, a + h]`` of the degree-``n`` polynomial with coefficients ``c``: the shift
    ``p(a + h t) = sum_j t^j sum_k c_k C(k, j) a^(k-j) h^j``, then ``b_i = sum_{j<=i} C(i,j)/C(n,j) q_j``."""
    shift = [[Fraction(comb(k, j)) * a ** (k - j) * h**j if k >= j else Fraction(0) for k in range(n + 1)]
             for j in range(n + 1)]
    rows = []
    for i in range(n + 1):
        rows.append([sum(Fraction(comb(i, j), comb(n, j)) * shift[j][k] for j in range(i + 1)) for k in range(n + 1)])
    scale = 1
    for row in rows:
        for x in row:
            scale = math.lcm(scale, x.denominator)
    return tuple(tuple(int(x * scale) for x in row) for row in rows)


def _nonnegative(d, a: Fraction, h: Fraction, depth: int = SUBDIVISIONS) -> bool:
    """Certify ``d >= 0`` on ``[a, a + h]`` (Bernstein coefficients, with subdivision)."""
    M = _cell_matrix(len(d) - 1, a, h)
    bern = [sum(m * c for m, c in zip(row, d)) for row in M]
    if all(b >= 0 for b in bern):
        return True
    if bern[0] < 0 or bern[-1] < 0 or depth == 0:  # negative at an end point, or give up
        return False
    half = h / 2
    return _nonnegative(d, a, half, depth - 1) and _nonnegative(d, a + half, half, depth - 1)


def dominates(p, q) -> bool:
    """Certified ``p >= q`` on all of ``[0, 1]`` (on each grid cell)."""
    d = tuple(x - y for x, y in zip(p, q))
    h = Fraction(1, GRID)
    return all(_nonnegative(d, Fraction(i, GRID), h) for i in range(GRID))


def _dominates_on(p, q, a: Fraction, h: Fraction) -> bool:
    return _nonnegative(tuple(x - y for x, y in zip(p, q)), a, h)


@functools.lru_cache(maxsize=None)
def _midpoint_powers(n: int, grid: int) -> tuple:
    """``(2 grid)^n x^k`` at the cell midpoints ``x = (2i + 1) / (2 grid)``, as integers."""
    g2 = 2 * grid
    return tuple(tuple((2 * i + 1) ** k * g2 ** (n - k) for k in range(n + 1)) for i in range(grid))


def prune(polys, grid: int = GRID) -> list:
    """A sublist of ``polys`` (distinct) that still has the same pointwise maximum on ``[0, 1]``.

    The winners at the midpoint of each grid cell stay; any other polynomial is dropped only if on
    every cell one of that cell's winners is certified to lie above it on the whole closed cell."""
    polys = list(dict.fromkeys(polys))
    if len(polys) <= 1:
        return polys
    winners_at = []
    for row in _midpoint_powers(len(polys[0]) - 1, grid):  # exact, scaled values at the midpoints
        values = [sum(c * w for c, w in zip(p, row)) for p in polys]
        top = max(values)
        winners_at.append([i for i, v in enumerate(values) if v == top])
    winners = set().union(*map(set, winners_at))
    keep = set(winners)
    h = Fraction(1, grid)
    for i, q in enumerate(polys):
        if i in winners:
            continue
        for cell in range(grid):
            a = Fraction(cell, grid)
            if not any(_dominates_on(polys[j], q, a, h) for j in winners_at[cell]):
                keep.add(i)
                break
    return [polys[i] for i in sorted(keep)]


def _roots_in_unit_interval(diffs, x: sp.Symbol) -> list:
    """Sorted exact roots in ``(0, 1)`` of the nonzero polynomials ``diffs`` (coefficient tuples)."""
    factors = set()
    for d in diffs:
        poly = sp.Poly(list(reversed(d)), x, domain="ZZ")
        if poly.is_zero:
            continue
        for f, _ in poly.factor_list()[1]:
            if f.degree() >= 1:
                factors.add(-f if f.LC() < 0 else f)
    roots = []
    for f in factors:
        for r in f.real_roots():
            if 0 < r < 1:
                roots.append(r)
    roots = list(dict.fromkeys(roots))
    roots.sort(key=lambda r: sp.N(r, 60))
    return roots


def _between(lo, hi) -> sp.Rational:
    """The rational with the smallest denominator strictly between the exact numbers ``lo < hi``
    (a readable sample), found by scanning denominators and checked exactly."""
    a, b = sp.N(lo, 50), sp.N(hi, 50)
    for q in range(2, 4097):
        p = sp.floor(a * q) + 1
        x = sp.Rational(p, q)
        if x < b and (lo < x) == sp.true and (x < hi) == sp.true:
            return x
    digits = 50  # pragma: no cover - roots closer than 1/4096
    while True:  # pragma: no cover
        mid = sp.Rational(str(sp.N((sp.N(lo, digits) + sp.N(hi, digits)) / 2, digits)))
        if (lo < mid) == sp.true and (mid < hi) == sp.true:
            return mid
        digits *= 2


def upper_envelope(polys, x: sp.Symbol) -> list[tuple]:
    """Exact pieces ``(lo, hi, sample, p)`` of the pointwise maximum of ``polys`` on ``(0, 1)``,
    in increasing order: ``p`` (one of ``polys``) is the maximum on ``(lo, hi)``; ``lo``/``hi`` are
    exact algebraic numbers (``0`` and ``1`` at the ends); ``sample`` is a rational inside."""
    polys = list(dict.fromkeys(polys))
    n = len(polys)
    diffs = [tuple(a - b for a, b in zip(polys[i], polys[j])) for i in range(n) for j in range(i + 1, n)]
    roots = _roots_in_unit_interval(diffs, x)
    bounds = [sp.Integer(0)] + roots + [sp.Integer(1)]
    pieces = []
    for lo, hi in zip(bounds, bounds[1:]):
        sample = _between(lo, hi)
        s = Fraction(int(sample.p), int(sample.q))
        values = [evaluate(p, s) for p in polys]
        best = polys[values.index(max(values))]
        if pieces and pieces[-1][3] == best:
            pieces[-1] = (pieces[-1][0], hi, pieces[-1][2], best)
        else:
            pieces.append((lo, hi, sample, best))
    return pieces


__all__ = ["dominates", "evaluate", "prune", "upper_envelope"]
