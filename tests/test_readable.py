"""Readable objects (issue 20 item 4): reprs that say what a result is, to_dict everywhere, to_frame for
tables (pandas optional), LaTeX for formulas and recursions, policies as decision trees."""
import fvnum
import re
import sys

import numpy as np
import pytest
import sympy as sp

from fvsym import TreePrior, bellman
from fvsym.bellman_equations import WHERE_WIDTH
from fvsym.tree import path_design


def test_recursion_is_a_tuple_of_equations_with_its_definitions_and_latex():
    r = bellman.recursion(TreePrior(3), 2, 1)
    assert isinstance(r, tuple) and all(isinstance(e, sp.Eq) for e in r)
    names = [name for name, _ in r.where]
    assert names[0] == "N_1(S)" and "S_W^r" in names  # N_1(S) is used by the equations and defined
    assert "N_1(S)" in str(r.equations[2].rhs) or "N_{1}" in sp.latex(r.equations[2].rhs)
    text = str(r)
    assert text.splitlines()[0] == "|S_0| = 8" and "where N_1(S): the single nodes W" in text
    latex = r._repr_latex_()
    assert latex.startswith("$\\displaystyle \\begin{aligned}") and "\\text{where } N_{1}(S)" in latex
    assert bellman.recursion_latex(r) == r.latex
    assert r.to_dict()["where"][0]["symbol"] == "N_1(S)"


def test_recursion_latex_fits_a_page():
    """MathJax does not wrap: every definition row holds at most WHERE_WIDTH characters of text, the rest on
    continuation rows, and the optimum is named in words (not ``optimal`` with subscript ``loss``)."""
    for r in (bellman.recursion(TreePrior(3), 2, 1), bellman.recursion(TreePrior(2, "1/2"), 2, 1, tau="1/5")):
        rows = r.latex.split(" \\\\\n")
        unescape = lambda t: re.sub(r"\\([_{}])", r"\1", t).replace("\\textbackslash ", "\\")
        assert "\\mathrm{optimal\\ loss} &= " in r.latex and "optimal_{loss}" not in r.latex
        texts = [t for row in rows for t in re.findall(r"\\text\{((?:[^{}]|\\[{}])*)\}", row) if t != "where "]
        assert texts and max(len(unescape(t)) for t in texts) <= WHERE_WIDTH + 2  # ": " + a wrapped line
        shown = " ".join(unescape(t) for t in texts).split()
        assert shown == " ".join(": " + meaning for _, meaning in r.where).split()  # in full, in order


def test_policy_node_and_solution_print_as_decision_trees():
    sol = bellman.solve(TreePrior(3, "1/2"), 2, 1)
    text = repr(sol)
    assert text.startswith("BellmanSolution(loss=1/16, layers=2, width=1") and "read node 2" in text
    d = sol.to_dict()
    assert d["loss"] == "1/16" and d["loss_float"] == 0.0625 and d["policy"]["nodes"] == [2]
    big = bellman.solve(TreePrior(4, "1/2"), 4, 1).policy
    lines = repr(big).splitlines()
    assert len(lines) == bellman.REPR_LINES + 1 and lines[-1].startswith("... (") and "print(policy)" in lines[-1]
    assert str(big) == big.describe()


def test_fvnum_policies_print_their_decision_tree():
    from fvnum.policies.policies import FixedDesign, PathPolicy

    prior = TreePrior(3, "1/2")
    p = PathPolicy(2)
    assert repr(p).startswith("<PathPolicy 'path': adaptive, 2 layers of width 1")
    tree = p.describe(prior)
    # the same decision tree as the path design of fvsym (read node 1; + -> 2, - -> 3)
    design = path_design(prior, 2)
    assert tree.splitlines()[0].startswith(f"read node {design.nodes[0]}")
    assert tree.splitlines()[1].strip().startswith(f"+: read node {design.child((1,)).nodes[0]}")
    assert tree.splitlines()[4].strip().startswith(f"-: read node {design.child((-1,)).nodes[0]}")
    assert FixedDesign(np.array([1, 2, 3])).describe() == "read nodes 1, 2, 3 in one layer (non-adaptive)"
    with pytest.raises(ValueError, match="describe\\(\\) needs a tree prior"):
        p.describe()


def test_noisy_policy_prints_reading_intervals_and_labelled_q_values():
    import fvnum

    s = fvnum.noisy_bellman(TreePrior(2, "1/2"), 2, fvnum.gaussian(0.2))
    assert repr(s.policy).startswith("<NoisyBellmanPolicy 'optimal': 2 layers of width 1 at tau 0.2")
    lines = str(s.policy).splitlines()
    assert lines[0] == "read node 1  [layer 1 of 2]"
    assert lines[1].strip() == "phi_1 < 0: read node 3  [layer 2 of 2]"
    assert lines[2].strip() == "phi_1 >= 0: read node 2  [layer 2 of 2]"
    for r, node in ((-0.4, 3), (-0.01, 3), (0.01, 2), (0.9, 2)):  # the printed tree is the policy's
        assert s.next_node([1], [r]) == node
    q = s.q_values([1], [0.8])
    assert q.shape == (3,) and q.nodes == (1, 2, 3) and q.best == s.next_node([1], [0.8]) == 2
    assert q.to_dict()[2] == pytest.approx(float(q[1])) and isinstance(q.min(), float)
    text = repr(q)
    assert text.startswith("expected final loss by node (3 nodes; best: node 2)") and "node   2:" in text


def _table():
    from fvnum.mc.channels import Channel
    from fvnum.theory import ComparisonTable, TheoryRow

    rows = (TheoryRow("path", 0.17, 0.002, "mc n=1000", "adaptive, coordinate", "tokens"),
            TheoryRow.exact("top_levels_linear", 0.43, "non-adaptive, coordinate, linear decoder", "tokens"))
    return ComparisonTable("tree", 3, Channel("tokens", 0.12, 128, 0.01), 1000, 0, rows)


def test_tables_become_data_frames_and_print_as_tables():
    pd = pytest.importorskip("pandas")
    table = _table()
    frame = table.to_frame()
    assert isinstance(frame, pd.DataFrame) and list(frame["name"]) == ["path", "top_levels_linear"]
    assert frame.loc[0, "value"] == 0.17 and frame.loc[1, "stderr"] == 0.0
    text = repr(table)
    assert text.startswith("ComparisonTable(tree prior, budget 3, tokens channel, N = 128")
    assert "path" in text.splitlines()[1] and "0.17 +- 0.002" in text

    from fvnum.estimate import Estimate
    from fvnum.patching.keys import PatchingTable

    pt = PatchingTable(np.array([[0.1, 0.2], [0.3, 0.4]]), np.full((2, 2), 0.01), Estimate(0.05, 0.01, 100),
                       np.array([0.05, 0.06]), np.array([0.01, 0.01]), 100, "path", (1, 2), (1, 2))
    f = pt.to_frame()
    assert len(f) == 4 and f.loc[(f.layer == 2) & (f.depth == 1), "loss"].item() == 0.3
    assert f.loc[f.depth == 2, "unpatched"].tolist() == [0.06, 0.06]
    assert repr(pt).startswith("PatchingTable(path, key patching, metric theta, 2 layers x 2 divergence depths")


def test_to_frame_without_pandas_is_one_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"to_frame\(\) of a ComparisonTable needs pandas \(pip install pandas\)"):
        _table().to_frame()


def test_every_public_result_has_to_dict():
    from bridges.analysis.probes import ProbeScore
    from fvnum.linear_theory import LinearDecoder
    from fvsym.gaussian import water_filling

    wf = water_filling([sp.Integer(2), sp.Integer(1)], 1, sp.Rational(1, 2))
    assert wf.to_dict()["loss"] == sp.sstr(wf.loss)
    assert LinearDecoder(np.eye(2), 0.5).to_dict() == {"U": [[1.0, 0.0], [0.0, 1.0]], "loss": 0.5}
    assert ProbeScore(0.9, 0.01, 0.5, 100).to_dict()["accuracy"] == 0.9
    opt = bellman.solve_alpha(3, 2, 1)
    assert repr(opt).startswith("AlphaOptimum(adaptive, layers=2, width=1, 1 piece)")
    assert "\\begin{cases}" in opt._repr_latex_()
