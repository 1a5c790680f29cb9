"""Layering (bridges -> fvnum -> fvsym; fvsym loads sympy only) and bad input at the command line:
one line on stderr, exit code 2, never a traceback."""
import fvnum
import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from bridges.cli import main
from fvsym import GaussianPrior, TreePrior

ROOT = Path(__file__).resolve().parents[1]


def loaded_after(code: str, heavy) -> list[str]:
    """Run ``code`` in a fresh interpreter and return which of ``heavy`` it left in sys.modules."""
    probe = f"{code}\nimport sys\nprint('loaded:' + ','.join(m for m in {tuple(heavy)!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("loaded:"), proc.stdout
    return [m for m in last.removeprefix("loaded:").split(",") if m]


IMPORT_ALL = """
import importlib, pkgutil, {pkg}
for info in pkgutil.iter_modules({pkg}.__path__):
    importlib.import_module("{pkg}." + info.name)
"""


def test_fvsym_and_all_its_modules_load_no_numeric_stack():
    assert loaded_after(IMPORT_ALL.format(pkg="fvsym"), ["numpy", "scipy", "numba", "torch"]) == []


def test_fvnum_and_all_its_modules_load_no_torch():
    assert loaded_after(IMPORT_ALL.format(pkg="fvnum"), ["torch"]) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path", "--alpha", "1/2"],
        ["derive", "gaussian-loss", "--cov", "matched", "--depth", "3", "--budget", "2", "--tau", "1/3"],
    ],
)
def test_fv_derive_loads_no_numba_or_torch(argv):
    code = f"from bridges.cli import main\nassert main({argv!r}) == 0"
    assert loaded_after(code, ["numba", "torch"]) == []


BAD = [
    (["derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path", "--alpha", "3/2"], "3/2"),
    (["derive", "tree-loss", "--depth", "0", "--budget", "1", "--strategy", "path", "--alpha", "1/2"], "depth"),
    (["derive", "tree-loss", "--depth", "3", "--budget", "-1", "--strategy", "path"], "-1"),
    (["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "greedy"], "greedy"),
    (["derive", "tree-loss", "--depth", "3", "--budget", "9", "--strategy", "top_levels"], "9"),
    (["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "path", "--alpha", "x"], "'x'"),
    (["derive", "tree-loss", "--depth", "three", "--budget", "2", "--strategy", "path"], "three"),
    (["derive", "gaussian-loss", "--dim", "4", "--budget", "2", "--tau", "-1"], "-1"),
    (["derive", "gaussian-loss", "--dim", "4", "--budget", "-2"], "-2"),
    (["derive", "gaussian-loss", "--dim", "0", "--budget", "2"], "dim"),
    (["derive", "gaussian-loss", "--cov", "matched", "--depth", "3", "--budget", "2", "--alpha", "3/2"], "3/2"),
    (["derive", "gaussian-loss", "--cov", "matched", "--depth", "0", "--budget", "2"], "depth"),
    (["derive", "gaussian-loss", "--cov", "matched", "--dim", "5", "--depth", "3", "--budget", "2"], "5"),
    (["derive", "gaussian-loss", "--cov", "wishart", "--dim", "5", "--budget", "2"], "wishart"),
    (["derive", "gaussian-loss", "--cov", "tree", "--depth", "3", "--budget", "2"], "no such covariance file 'tree'"),
    (["derive", "volume", "--depth", "3"], "volume"),
]


@pytest.mark.parametrize("argv, named", BAD, ids=[" ".join(a[1:]) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(capsys, argv, named):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0] and named in lines[0], err
    assert "Traceback" not in err


def test_bad_input_through_the_fv_script_has_no_traceback():
    script = Path(sys.executable).parent / "fv"
    proc = subprocess.run(
        [str(script), "derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path", "--alpha", "3/2"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "3/2" in proc.stderr and "Traceback" not in proc.stderr


def test_non_psd_covariance_is_a_one_line_value_error():
    with pytest.raises(ValueError, match="not PSD: smallest eigenvalue -1") as info:
        GaussianPrior([[1, 2], [2, 1]])
    assert "\n" not in str(info.value)


# --- extreme numbers (issue 23 item 2) ------------------------------------------------------------------


def cli(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


TINY_TAUS = ["1e-160", "1e-200", "1e-300", "5e-324", "1e-320", "1e-340"]


@pytest.mark.parametrize("strategy", ["path", "top_levels", "greedy_coordinate", "bellman_noiseless"])
def test_tau_below_the_noiseless_bound_is_computed_at_zero_and_recorded(strategy):
    from fvnum import loss_mc

    prior = TreePrior(4, "1/2")
    noiseless = loss_mc(prior, strategy, 3, fvnum.gaussian(0), samples=2000, seed=1)
    for tau in [float(t) for t in TINY_TAUS] + [1e-9 * 0.5**1.5]:  # up to 1e-9 a_K
        est = loss_mc(prior, strategy, 3, fvnum.gaussian(tau), samples=2000, seed=1)
        assert (est.value, est.stderr) == (noiseless.value, noiseless.stderr), (strategy, tau)


def test_tau_just_above_the_noiseless_bound_is_computed_with_noise_and_agrees():
    from fvnum import loss_mc
    from fvnum.mc.channels import make_channel

    prior = TreePrior(4, "1/2")
    tau = 3e-9 * 0.5**1.5  # 3e-9 a_K: computed as given, and still noiseless within the noise
    assert make_channel(prior, fvnum.gaussian(tau)).tau == tau
    for strategy in ("path", "greedy_coordinate"):
        a = loss_mc(prior, strategy, 3, fvnum.gaussian(tau), samples=2000, seed=2)
        b = loss_mc(prior, strategy, 3, fvnum.gaussian(0), samples=2000, seed=2)
        assert abs(a.value - b.value) <= 5 * math.hypot(a.stderr, b.stderr) + 1e-15, (strategy, a, b)


def test_fv_mc_tiny_tau_prints_a_finite_loss_and_records_what_it_computed(capsys):
    base = ["mc", "--depth", "4", "--alpha", "0.5", "--budget", "3", "--samples", "1000"]
    code, out, _ = cli([*base, "--strategy", "path", "--tau", "0"], capsys)
    noiseless = out.splitlines()[0]
    for tau in TINY_TAUS:
        code, out, err = cli([*base, "--strategy", "path", "--tau", tau], capsys)
        assert code == 0 and out.splitlines()[0] == noiseless and "nan" not in out, (tau, out, err)
        assert ("noiseless in effect" in out) == (float(tau) > 0)  # 1e-340 is 0 as a float: plainly noiseless
    code, out, _ = cli([*base, "--strategy", "top_levels", "--tau", "1e-160", "--format", "json"], capsys)
    record = json.loads(out)
    assert code == 0 and record["tau"] == 0.0 and record["tau_given"] == 1e-160 and record["value"] == 0.375


def test_fv_bounds_and_rollout_at_tiny_tau(capsys):
    code, out, err = cli(["bounds", "--depth", "2", "--alpha", "1/2", "--budget", "2", "--tau", "1e-200",
                          "--samples", "1000", "--format", "json"], capsys)
    record = json.loads(out)
    assert code == 0, err
    assert record["lower"]["value"] == record["upper"]["value"] == record["exact"] == 0  # noiseless: all read
    code, _, err = cli(["mc", "--depth", "3", "--budget", "2", "--strategy", "rollout", "--tau", "1e-300",
                        "--samples", "100"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "1e-300 is noiseless in effect" in err


def test_tau_between_the_float_range_and_the_noiseless_bound_is_refused_naming_both_ends():
    from fvnum import loss_mc

    prior = TreePrior(4, "1e-20")  # scales 1 .. 1e-30: tau = 1e-29 is neither noiseless nor computable
    with pytest.raises(ValueError, match=r"tau = 1e-29 .* give tau >= 1e-14, or tau <= 1e-39 \(noiseless") as info:
        loss_mc(prior, "path", 3, fvnum.gaussian(1e-29), samples=100)
    assert "\n" not in str(info.value)
    assert math.isfinite(loss_mc(prior, "path", 3, fvnum.gaussian(1e-12), samples=100).value)


def test_huge_tau_gives_the_prior_loss_or_one_line(capsys):
    from fvnum import loss_mc

    prior = TreePrior(4, "1/2")
    m = sum(float(a) ** 2 for a in prior.scales)
    for strategy in ("path", "greedy_coordinate", "top_levels"):
        est = loss_mc(prior, strategy, 3, fvnum.gaussian(1e100), samples=500)
        assert est.value == pytest.approx(m, rel=1e-12) and est.stderr < 1e-12 * m  # every leaf has |theta|^2 = m
    gauss = GaussianPrior.isotropic(3, "1/2")
    est = loss_mc(gauss, "optimal", 2, fvnum.gaussian(1e100), samples=2000)  # water-filling keeps its budget at huge tau
    assert abs(est.z(1.5)) < 5
    code, _, err = cli(["mc", "--tau", "1.7976931348623157e308", "--samples", "100"], capsys)
    assert code == 2 and "--tau must be <= 1e+100, got 1.7976931348623157e308" in err


def test_water_filling_keeps_the_budget_at_huge_tau():
    from fvnum.priors.gaussian import water_filling_weights

    for tau in (1e-200, 1.0, 1e50, 1e100):
        w = water_filling_weights((2.0, 1.0, 0.5), 2, tau)
        assert w.sum() == pytest.approx(2.0, rel=1e-12), (tau, w)


def test_alpha_next_to_0_and_1(capsys):
    code, out, _ = cli(["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "path",
                        "--alpha", "1e-300", "--format", "json"], capsys)
    assert code == 0 and sp.Rational(json.loads(out)["value"]) == sp.Rational(1, 10**600)  # a_3^2 = alpha^2
    code, out, _ = cli(["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "path",
                        "--alpha", "0.99999999999999999999", "--format", "json"], capsys)
    assert code == 0 and sp.Rational(json.loads(out)["value"]) == sp.Rational(1 - sp.Rational(1, 10**20)) ** 2
    code, _, err = cli(["mc", "--depth", "4", "--alpha", "1e-300", "--tau", "0.1", "--samples", "100"], capsys)
    assert code == 2 and "a_2 = 1e-150" in err and "(1e-75, 1e+75)" in err and len(err.splitlines()) == 1
    assert TreePrior(4, 1 - 1e-16).alpha == sp.Rational(9999999999999999, 10**16)
    assert TreePrior(4, 1e-300).alpha == sp.Rational(1, 10**300)
    with pytest.raises(ValueError, match=r"alpha must lie in \(0, 1\), got 1e-340 \(as a float: 0\)"):
        from fvsym._validate import check_real

        check_real("1e-340", "alpha", 0, 1, open_low=True, open_high=True, shown="1e-340")


def test_exact_results_too_long_to_print_are_one_line_in_the_projects_words(capsys):
    code, _, err = cli(["derive", "tree-loss", "--depth", "30", "--budget", "2", "--strategy", "path",
                        "--alpha", "1e-300"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "digits" in err and "Exceeds" not in err


NUMBER_KINDS = [np.float64(0.5), np.float32(0.5), Fraction(1, 2), sp.Rational(1, 2), sp.Float(0.5), "1/2", 0.5]
INTEGER_KINDS = [np.int64(2), np.int32(2), sp.Integer(2), Fraction(2), 2]


@pytest.mark.parametrize("alpha", NUMBER_KINDS, ids=lambda v: type(v).__name__)
def test_every_kind_of_number_is_a_number(alpha):
    from fvnum import loss_mc
    from fvnum.mc.channels import make_channel
    from fvsym.tree import tree_loss

    prior = TreePrior(4, alpha)
    inexact = isinstance(alpha, sp.Float)  # a sympy Float: compared in value
    same = (lambda a, b: all(float(x) == pytest.approx(float(y), rel=1e-15) for x, y in zip(a, b))) if inexact \
        else (lambda a, b: tuple(a) == tuple(b))
    assert same(prior.scales, TreePrior(4, "1/2").scales)
    assert same(TreePrior(3, scales=[1, alpha, alpha]).scales, (1, sp.Rational(1, 2), sp.Rational(1, 2)))
    assert same(GaussianPrior.isotropic(np.int64(3), alpha).cov, sp.eye(3) / 2)
    assert make_channel(prior, fvnum.gaussian(alpha)).tau == 0.5
    assert float(tree_loss(3, 2, "path")(alpha)) == 0.25
    ref = loss_mc(prior, "path", 2, fvnum.gaussian(0.5), samples=500, seed=3)
    assert loss_mc(prior, "path", 2, fvnum.gaussian(alpha), samples=500, seed=3) == ref


@pytest.mark.parametrize("n", INTEGER_KINDS, ids=lambda v: type(v).__name__)
def test_every_kind_of_integer_is_an_integer(n):
    from fvnum import loss_mc

    prior = TreePrior(n, "1/2")
    assert prior.depth == 2
    ref = loss_mc(prior, "path", 2, fvnum.gaussian(0.5), samples=1000, seed=2)
    assert loss_mc(prior, "path", n, fvnum.gaussian(0.5), samples=500 * n, seed=n) == ref
    assert loss_mc(prior, "fixed", 1, fvnum.gaussian(0.5), options=fvnum.StrategyOptions(design=[n]), samples=500, seed=2).n == 500


def test_numpy_arrays_are_numbers_too():
    assert TreePrior(3, scales=np.array([1.0, 0.5, 0.25])).scales == (1, sp.Rational(1, 2), sp.Rational(1, 4))
    assert GaussianPrior(np.eye(3)).cov == sp.eye(3)


@pytest.mark.parametrize("value", [Fraction(1, 10**5000 + 1), sp.Rational(1, 3**9000), 10**5000],
                         ids=["Fraction", "Rational", "int"])
def test_huge_exact_numbers_are_refused_in_the_projects_words(value):
    from fvnum import loss_mc

    for call in (lambda: TreePrior(4, value), lambda: GaussianPrior([[value]]),
                 lambda: loss_mc(TreePrior(3, "1/2"), "path", 2, fvnum.gaussian(value), samples=100)):
        with pytest.raises(ValueError, match="digits") as info:
            call()
        assert "Exceeds the limit" not in str(info.value) and "\n" not in str(info.value)


def test_a_nan_loss_is_never_returned(monkeypatch):
    from fvnum import loss_mc
    from fvnum.mc import simulate
    from fvnum.estimate import Estimate

    monkeypatch.setattr(simulate, "simulate", lambda *a, **k: Estimate(math.nan, math.nan, 100))
    with pytest.raises(ValueError, match="came out nan"):
        loss_mc(TreePrior(3, "1/2"), "path", 2, fvnum.gaussian(0.5), samples=100)


def test_a_design_matrix_of_fractions_is_a_design_matrix():
    from fvnum import loss_mc

    prior = TreePrior(3, "1/2")
    rows = [[Fraction(1), 0, 0, 0, 0, 0, 0], [0, sp.Integer(1), 0, 0, 0, 0, 0]]
    assert loss_mc(prior, "fixed", 2, fvnum.gaussian(0.5), options=fvnum.StrategyOptions(design=rows), samples=200) == \
        loss_mc(prior, "fixed", 2, fvnum.gaussian(0.5), options=fvnum.StrategyOptions(design=np.eye(7)[:2]), samples=200)


def test_lookahead_policies_refuse_scales_they_cannot_resolve_and_work_up_to_there():
    from fvnum import loss_mc

    with pytest.raises(ValueError, match="cannot resolve the deepest level") as info:
        loss_mc(TreePrior(4, "1e-6"), "greedy_coordinate", 3, fvnum.gaussian(0), samples=100)  # it would tie the path strategy
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="cannot resolve the deepest level"):
        loss_mc(TreePrior(3, "1e-8"), "optimal", 2, fvnum.gaussian(1e-11), samples=100)
    prior = TreePrior(4, "1e-4")  # a_K^2 / E||theta||^2 = 1e-12: still resolved, greedy is optimal here
    greedy = loss_mc(prior, "greedy_coordinate", 3, fvnum.gaussian(0), samples=2000, seed=4)
    best = loss_mc(prior, "bellman_noiseless", 3, fvnum.gaussian(0), samples=2000, seed=5)
    path = loss_mc(prior, "path", 3, fvnum.gaussian(0), samples=2000, seed=5)
    assert abs(greedy.value - best.value) <= 5 * math.hypot(greedy.stderr, best.stderr) and greedy.value < path.value / 4
