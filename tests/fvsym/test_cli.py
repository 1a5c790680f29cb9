"""`fv derive`: the command line mirrors the Python API (same names, same exact values)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import sympy as sp

from bridges.cli import main
from fvsym.gaussian import gaussian_loss
from fvsym.tree import tree_loss


def run_json(capsys, argv):
    assert main(argv + ["--format", "json"]) == 0
    out = capsys.readouterr().out
    return json.loads(out)


def test_tree_loss_sanity_value(capsys):
    record = run_json(capsys, ["derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path",
                               "--alpha", "1/2"])
    assert record["value"] == "3/8"
    assert record["exact"] is True and record["float"] == 0.375
    assert record["params"] == [] and record["inputs"]["alpha"] == "1/2"
    assert sp.sympify(record["expr"]) == sp.Rational(3, 8) and record["latex"] == "\\frac{3}{8}"
    assert "source" in record


@pytest.mark.parametrize(
    "strategy, extra, kwargs",
    [
        ("path", [], {}),
        ("top_levels", [], {}),
        ("optimal", ["--layers", "3", "--width", "1"], {"layers": 3, "width": 1}),
        ("optimal_nonadaptive_coordinate", [], {}),
    ],
)
def test_tree_loss_mirrors_python_api(capsys, strategy, extra, kwargs):
    record = run_json(capsys, ["derive", "tree-loss", "--depth", "3", "--budget", "3", "--strategy", strategy,
                               "--alpha", "0.5"] + extra)
    expected = tree_loss(3, 3, strategy, alpha=sp.Rational(1, 2), **kwargs).expr
    assert sp.Rational(record["value"]) == expected  # "0.5" is read exactly as 1/2


def test_tree_loss_symbolic_alpha_has_no_value(capsys):
    record = run_json(capsys, ["derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path"])
    assert record["params"] == ["alpha"] and "value" not in record and "float" not in record
    alpha = sp.Symbol("alpha", positive=True)
    assert sp.simplify(sp.sympify(record["expr"], locals={"alpha": alpha}) - tree_loss(4, 2, "path").expr) == 0


def test_gaussian_loss_json_mirrors_python_api(capsys):
    record = run_json(capsys, ["derive", "gaussian-loss", "--dim", "7", "--budget", "3", "--tau", "1/2",
                               "--cov", "matched", "--depth", "3", "--alpha", "1/2"])
    expected = gaussian_loss(7, 3, "1/2", cov="matched", depth=3, alpha="1/2").expr
    assert sp.Rational(record["value"]) == expected and record["float"] == float(expected)
    assert record["inputs"] == {"dim": 7, "budget": 3, "tau": "1/2", "cov": "matched", "depth": 3, "alpha": "1/2"}


def test_gaussian_loss_symbolic_tau(capsys):
    record = run_json(capsys, ["derive", "gaussian-loss", "--dim", "5", "--budget", "7"])
    tau = sp.Symbol("tau", nonnegative=True)
    assert record["params"] == ["tau"] and "value" not in record
    assert sp.simplify(sp.sympify(record["expr"], locals={"tau": tau}) - gaussian_loss(5, 7).expr) == 0


def test_text_and_latex_formats(capsys):
    argv = ["derive", "gaussian-loss", "--dim", "5", "--budget", "3", "--tau", "0.5"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    value = gaussian_loss(5, 3, "1/2").expr
    assert lines[0] == f"gaussian_loss = {value}"
    assert lines[1].startswith(f"value = {value} (")
    assert main(argv + ["--format", "latex"]) == 0
    assert capsys.readouterr().out.strip() == f"gaussian_loss = {sp.latex(value)}"


def test_fv_script_in_a_subprocess():
    script = Path(sys.executable).parent / "fv"
    proc = subprocess.run(
        [str(script), "derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path",
         "--alpha", "1/2", "--format", "json"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["value"] == "3/8"


def test_policy_flag_shows_the_argmins(capsys):
    from bridges.cli import main
    from fvsym import TreePrior
    from fvsym.bellman import optimal_nonadaptive, solve

    assert main(["derive", "tree-loss", "--depth", "4", "--budget", "3", "--strategy", "optimal",
                 "--alpha", "1/2", "--policy", "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    policy = solve(TreePrior(4, "1/2"), 3, 1).policy
    assert record["policy"] == policy.to_dict()
    assert main(["derive", "tree-loss", "--depth", "5", "--budget", "4", "--strategy", "optimal_nonadaptive_coordinate",
                 "--alpha", "1/2", "--policy"]) == 0
    _, nodes = optimal_nonadaptive(TreePrior(5, "1/2"), 4)
    assert f"design: nodes {[int(n) for n in nodes]}" in capsys.readouterr().out
    # issue 13 item 18: the path and top-levels designs exist, so --policy shows them
    assert main(["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "path", "--policy",
                 "--format", "json"]) == 0
    from fvsym.tree import path_design, top_levels_design

    assert json.loads(capsys.readouterr().out)["policy"] == path_design(TreePrior(3), 2).to_dict()
    assert main(["derive", "tree-loss", "--depth", "3", "--budget", "5", "--strategy", "top_levels", "--policy",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["design"] == list(top_levels_design(TreePrior(3), 5))


def test_tree_loss_optimal_without_alpha_is_the_exact_optimum_in_alpha(capsys):
    record = run_json(capsys, ["derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "optimal"])
    alpha = sp.Symbol("alpha", positive=True)
    expr = sp.sympify(record["expr"], locals={"alpha": alpha})  # sympy-parsable
    assert sp.simplify(expr - alpha**2 * (3 * alpha + 1) / 4) == 0 and record["params"] == ["alpha"]
    assert record["pieces"][0]["lower"] == "0" and record["pieces"][0]["upper"] == "1"
    assert record["pieces"][0]["policy"]["nodes"] == [2]
    assert main(["derive", "tree-loss", "--depth", "4", "--budget", "3", "--strategy", "optimal_nonadaptive_coordinate"]) == 0
    out = capsys.readouterr().out
    assert "piece 0 < alpha < 1" in out and "design [" in out


def test_derive_bellman_prints_the_recursion(capsys):
    assert main(["derive", "bellman", "--depth", "3", "--layers", "2", "--width", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "|S_0| = 8" and lines[1].startswith("J_2(S) = ") and lines[4] == "optimal_loss = J_0(S_0)"
    # every set the equations use is defined after them (issue 20: N_1(S) was used undefined)
    assert lines[5].startswith("where N_1(S): the single nodes W") and any(l.startswith("where S_W^r:") for l in lines)
    assert main(["derive", "bellman", "--depth", "3", "--layers", "2", "--format", "latex"]) == 0
    assert capsys.readouterr().out.startswith("\\begin{aligned}")
    record = run_json(capsys, ["derive", "bellman", "--depth", "3", "--layers", "2", "--alpha", "1/3", "--unroll"])
    assert len(record["equations"]) == 5 and record["unrolled_value"] == record["solve_loss"]
    assert sp.sympify(record["unrolled"]) == sp.Rational(record["solve_loss"])
    assert main(["derive", "bellman", "--depth", "3", "--layers", "2", "--width", "5"]) == 2
    assert "width" in capsys.readouterr().err


def test_derive_bellman_prints_the_noisy_recursion_for_small_trees(capsys):
    from fvsym import TreePrior, bellman

    assert main(["derive", "bellman", "--depth", "2", "--layers", "2", "--tau", "1/5", "--alpha", "1/2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("U(b) = Sum(b[m]*||") and "V_2(b) = min_{n in {1..3}}(Integral(V_1(b*p_n(phi)), (phi, -oo, oo)))" in lines
    assert "optimal_loss = V_2(b_0)" in lines and "theta[3] = (-1, 0, sqrt(2)/2)" in lines
    record = run_json(capsys, ["derive", "bellman", "--depth", "2", "--layers", "1", "--tau", "0.2"])
    assert record["name"] == "noisy_bellman_recursion" and record["inputs"]["tau"] == "0.2"
    assert any(w["symbol"] == "b_0" for w in record["where"])
    eqs = bellman.recursion(TreePrior(2, "1/2"), 1, 1, tau="1/5")
    likelihood = eqs[2].rhs  # p(n, m, phi): the gaussian density of tau = 1/5
    phi, th = sp.Symbol("phi", real=True), sp.IndexedBase("theta")[sp.Symbol("m", integer=True, positive=True), sp.Symbol("n")]
    assert sp.simplify(sp.integrate(likelihood.subs(th, 0), (phi, -sp.oo, sp.oo))) == 1
    for argv, message in ((["--depth", "4", "--layers", "2", "--tau", "0.2"], "depth must be <= 3"),
                          (["--depth", "2", "--layers", "2", "--width", "2", "--tau", "0.2"], "width 1"),
                          (["--depth", "2", "--layers", "2", "--tau", "0.2", "--unroll"], "fv bounds"),
                          (["--depth", "2", "--layers", "2", "--tau", "0"], "tau = 0")):
        assert main(["derive", "bellman", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1


def test_latex_of_a_piecewise_optimum_has_no_plain_text_line(capsys):
    assert main(["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "optimal",
                 "--format", "latex"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "tree_loss_optimal = \\frac{\\alpha^{2}}{4}"
    assert out[1] == "\\begin{cases}" and out[-1] == "\\end{cases}" and not any(l.startswith("piece") for l in out)
    assert main(["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "optimal", "--alpha", "1/2",
                 "--policy", "--format", "latex"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "tree_loss_optimal = \\frac{1}{16}" and all(l.startswith("% ") for l in out[1:])


# --- CLI parity (issue 20 item 3) -------------------------------------------------------------------------
def test_derive_fixed_design_equals_the_python_api(capsys):
    from fvsym import TreePrior
    from fvsym.tree import coordinate_design_loss

    record = run_json(capsys, ["derive", "tree-loss", "--depth", "5", "--strategy", "fixed", "--design", "4,5,6,15",
                               "--alpha", "1/2"])
    assert record["value"] == str(coordinate_design_loss(TreePrior(5, "1/2"), [4, 5, 6, 15])) == "11/64"
    assert record["inputs"]["design"] == [4, 5, 6, 15] and record["inputs"]["budget"] == 4
    symbolic = run_json(capsys, ["derive", "tree-loss", "--depth", "3", "--strategy", "fixed", "--design", "1,2,3"])
    assert symbolic["expr"] == "alpha**2"  # levels 1, 2 read
    fixed = ["derive", "tree-loss", "--depth", "3", "--strategy", "fixed"]
    for extra, message in (([], "needs --design"), (["--budget", "3", "--design", "1,2"], "--budget must equal"),
                           (["--design", "1,99"], "99")):
        assert main(fixed + extra) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
    assert main(["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "path", "--design", "1,2"]) == 2
    assert "--design applies to --strategy fixed" in capsys.readouterr().err


def test_derive_takes_scales_wherever_it_takes_alpha(capsys):
    from fvsym import TreePrior, bellman
    from fvsym.tree import tree_loss

    scales = ["1", "1/2", "1/3"]
    record = run_json(capsys, ["derive", "tree-loss", "--scales", ",".join(scales), "--budget", "2", "--strategy", "optimal"])
    assert sp.Rational(record["value"]) == tree_loss(3, 2, "optimal", scales=scales).expr == sp.Rational(1, 36)
    assert record["inputs"]["scales"] == scales and record["inputs"]["depth"] == 3
    path = run_json(capsys, ["derive", "tree-loss", "--scales", "1,1/2,1/3", "--budget", "2", "--strategy", "path"])
    assert path["value"] == "1/9"  # the unread level: a_3^2
    unrolled = run_json(capsys, ["derive", "bellman", "--scales", "1,1/2,1/3", "--layers", "2", "--unroll"])
    assert unrolled["unrolled_value"] == unrolled["solve_loss"] == str(bellman.solve(TreePrior(3, scales=scales), 2, 1).loss)
    matched = run_json(capsys, ["derive", "gaussian-loss", "--cov", "matched", "--scales", "1,1/2", "--budget", "2",
                                "--tau", "1/2"])
    same = run_json(capsys, ["derive", "gaussian-loss", "--cov", "matched", "--depth", "2", "--alpha", "1/4",
                             "--budget", "2", "--tau", "1/2"])  # a_2 = alpha^(1/2) = 1/2
    assert matched["value"] == same["value"]
    assert main(["derive", "tree-loss", "--depth", "4", "--scales", "1,1/2", "--budget", "1", "--strategy", "path"]) == 2
    assert "--scales needs depth = 4 entries" in capsys.readouterr().err
    assert main(["derive", "tree-loss", "--alpha", "1/2", "--scales", "1,1/2", "--budget", "1", "--strategy", "path"]) == 2
    assert "not both" in capsys.readouterr().err


def test_gaussian_loss_of_any_covariance_from_a_file_or_its_eigenvalues(capsys, tmp_path):
    import numpy as np

    from fvsym.gaussian import water_filling

    exact = water_filling([sp.Integer(1), sp.Rational(1, 2), sp.Rational(1, 4)], 2, sp.Rational(1, 2)).loss
    by_eigen = run_json(capsys, ["derive", "gaussian-loss", "--budget", "2", "--tau", "1/2", "--eigenvalues", "1,1/2,1/4"])
    assert sp.Rational(by_eigen["value"]) == exact
    np.save(tmp_path / "c.npy", np.diag([1.0, 0.5, 0.25]))
    by_npy = run_json(capsys, ["derive", "gaussian-loss", "--budget", "2", "--tau", "1/2", "--cov", str(tmp_path / "c.npy")])
    assert sp.Rational(by_npy["value"]) == exact
    # a rotated covariance: the loss depends on the spectrum only (eigenvalues 3/2 and 1/2)
    (tmp_path / "c.csv").write_text("# a 2 x 2 covariance\n1, 1/2\n1/2, 1\n")
    by_csv = run_json(capsys, ["derive", "gaussian-loss", "--budget", "1", "--tau", "1/2", "--cov", str(tmp_path / "c.csv")])
    assert sp.Rational(by_csv["value"]) == water_filling([sp.Rational(3, 2), sp.Rational(1, 2)], 1, sp.Rational(1, 2)).loss
    (tmp_path / "bad.csv").write_text("1, x\n")
    for cov, message in ((str(tmp_path / "nope.csv"), "no such covariance file"), (str(tmp_path / "bad.csv"), "line 1")):
        assert main(["derive", "gaussian-loss", "--budget", "1", "--cov", cov]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
    assert main(["derive", "gaussian-loss", "--budget", "1", "--eigenvalues", "1,-1"]) == 2
    assert "eigenvalues must be >= 0" in capsys.readouterr().err
