"""``fv mc``: mirrors the Python API, JSON output, one-line errors with exit code 2."""
import fvnum
import json

import pytest

from bridges.cli import main
from fvnum import loss_mc
from fvsym.priors import GaussianPrior, TreePrior

BASE = ["mc", "--prior", "tree", "--depth", "4", "--alpha", "0.5", "--budget", "3", "--samples", "3000", "--seed", "7"]


def run(capsys, *args):
    try:
        code = main([*args])
    except SystemExit as exc:  # argparse's own errors (a value its type refuses)
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_equals_the_python_api(capsys):
    code, out, _ = run(capsys, *BASE, "--strategy", "path", "--tau", "0.3", "--format", "json")
    assert code == 0
    data = json.loads(out)
    est = loss_mc(TreePrior(4, "0.5"), "path", 3, fvnum.gaussian(0.3), samples=3000, seed=7)
    assert (data["value"], data["stderr"], data["n"]) == (est.value, est.stderr, est.n)
    assert data["strategy"] == "path" and data["tau"] == 0.3 and data["channel"] == "gaussian"


@pytest.mark.parametrize("extra,kwargs", [
    (["--strategy", "fixed", "--design", "1,2,5", "--tau", "3/10"],
     dict(strategy="fixed", channel=fvnum.gaussian(0.3), options=fvnum.StrategyOptions(design=[1, 2, 5]))),
    (["--strategy", "top_levels", "--tokens", "64", "--s2", "0.02"],
     dict(strategy="top_levels", channel=fvnum.tokens(64, s2=0.02))),
    (["--strategy", "optimal", "--layers", "1", "--width", "3", "--tau", "0"],
     dict(strategy="optimal", channel=fvnum.gaussian(0.0), options=fvnum.StrategyOptions(layers=1, width=3))),
])
def test_strategies_and_channels(capsys, extra, kwargs):
    code, out, _ = run(capsys, *BASE, *extra, "--format", "json")
    assert code == 0
    strategy, channel = kwargs.pop("strategy"), kwargs.pop("channel")
    est = loss_mc(TreePrior(4, "0.5"), strategy, 3, channel, samples=3000, seed=7, **kwargs)
    assert json.loads(out)["value"] == est.value


def test_gaussian_prior_text_output(capsys):
    code, out, _ = run(capsys, "mc", "--prior", "gaussian", "--cov", "isotropic", "--dim", "5", "--budget", "2",
                       "--strategy", "top_levels", "--tau", "0.5", "--samples", "2000")
    assert code == 0 and out.startswith("loss = ")
    est = loss_mc(GaussianPrior.isotropic(5), "top_levels", 2, fvnum.gaussian(0.5), samples=2000, seed=0)
    assert f"{est.value:.6g}" in out
    assert abs(est.z(5 - 2 / 1.25)) < 5  # isotropic closed form, B <= D


@pytest.mark.parametrize("args,message", [
    (["--tau", "0.3", "--samples", "1"], "samples must be >= 2"),
    (["--tokens", "0"], "tokens N must be >= 1"),
    (["--tau", "-0.5"], "tau must be >= 0"),
    ([], "exactly one of --tau"),
    (["--tau", "0.1", "--budget", "9"], "budget 9 is too large"),
    (["--tau", "0.1", "--strategy", "fixed", "--design", "1,2,99"], "design node 99 is outside the tree"),
    (["--tau", "0.1", "--strategy", "fixed"], "needs --design"),
    (["--tau", "abc"], "--tau must be a number"),
    (["--tau", "0.1", "--alpha", "2"], "alpha must lie in (0, 1)"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, message):
    base = {"--depth": "4", "--budget": "3", "--samples": "100"}  # each option once: args replace these
    base = [item for flag, value in base.items() if flag not in args for item in (flag, value)]
    code, _, err = run(capsys, "mc", *base, *args)
    assert code == 2
    assert message in err and err.count("\n") == 1


def test_tau_and_tokens_are_exclusive(capsys):
    assert main(["mc", "--tau", "0.1", "--tokens", "5"]) == 2
    assert "not allowed" in capsys.readouterr().err


def test_the_dispatcher_does_not_load_numba():
    import subprocess
    import sys

    code = "import sys, bridges.cli; bridges.cli.build_parser(); print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# --- CLI parity and one channel vocabulary (issue 20 item 3) ------------------------------------------------
def test_mc_and_bounds_take_scales_and_the_n_tokens_alias(capsys):
    scales = ["1", "7/10", "1/2", "7/20"]
    code, out, _ = run(capsys, "mc", "--prior", "tree", "--scales", ",".join(scales), "--budget", "3", "--tau", "0.3",
                       "--samples", "3000", "--seed", "7", "--format", "json")
    assert code == 0
    record = json.loads(out)
    est = loss_mc(TreePrior(4, scales=scales), "path", 3, fvnum.gaussian(0.3), samples=3000, seed=7)
    assert record["value"] == est.value and record["scales"] == scales and record["alpha"] is None
    a = json.loads(run(capsys, *BASE, "--tokens", "64", "--format", "json")[1])
    b = json.loads(run(capsys, *BASE, "--n-tokens", "64", "--format", "json")[1])
    assert a == b and a["tokens"] == 64
    code, out, _ = run(capsys, "bounds", "--scales", "1,1/2", "--budget", "1", "--tau", "0.3", "--samples", "500",
                       "--format", "json")
    assert code == 0 and json.loads(out)["scales"] == ["1", "1/2"]
    code, _, err = run(capsys, "mc", "--scales", "1,1/2", "--alpha", "0.5", "--budget", "1", "--tau", "0.3")
    assert code == 2 and "not both" in err


def test_mc_of_a_covariance_from_a_file_or_eigenvalues_matches_water_filling(capsys, tmp_path):
    import sympy as sp

    from fvsym.gaussian import water_filling

    exact = float(water_filling([sp.Rational(3, 2), sp.Rational(1, 2)], 1, sp.Rational(1, 2)).loss)
    (tmp_path / "c.csv").write_text("1 0.5\n0.5 1\n")
    for source in (["--cov", str(tmp_path / "c.csv")], ["--eigenvalues", "3/2,1/2"]):
        code, out, err = run(capsys, "mc", "--prior", "gaussian", *source, "--budget", "1", "--strategy", "optimal",
                             "--tau", "1/2", "--samples", "20000", "--seed", "3", "--format", "json")
        assert code == 0, err
        r = json.loads(out)
        assert abs(r["value"] - exact) < 5 * r["stderr"]  # Monte Carlo vs the exact water-filling optimum
    code, _, err = run(capsys, "mc", "--prior", "gaussian", "--eigenvalues", "1,1", "--scales", "1,1/2", "--budget", "1",
                       "--tau", "0.3")
    assert code == 2 and "--scales applies to a tree" in err and "not to --eigenvalues" in err


def test_one_channel_vocabulary_across_the_python_api():
    import fvnum
    from fvnum.mc.channels import make_channel
    from fvnum.theory import comparison_table

    prior = TreePrior(3, "1/2")
    kw = dict(samples=1000, seed=0, threads=1)
    a = fvnum.loss_mc(prior, "path", 2, fvnum.tokens(64), **kw)
    assert a == fvnum.loss_mc(prior, "path", 2, make_channel(prior, fvnum.tokens(64)), **kw)  # resolved: the same
    assert fvnum.bounds(prior, 2, fvnum.tokens(64), exact=False, **kw).upper == \
        fvnum.bounds(prior, 2, make_channel(prior, fvnum.tokens(64)), exact=False, **kw).upper
    assert fvnum.patching_table(prior, "path", 2, fvnum.tokens(64), samples=300, seed=0).unpatched == \
        fvnum.patching_table(prior, "path", 2, fvnum.tokens(64), samples=300, seed=0).unpatched
    small = dict(samples=300, seed=0, search_samples=100, dense=False)  # keys read tokens: none here
    by_kw = comparison_table(prior, 2, fvnum.gaussian(0.2), **small)
    assert by_kw.to_dict() == comparison_table(prior, 2, make_channel(prior, fvnum.gaussian(0.2)), **small).to_dict()
    for old in (dict(tau=0.1), dict(n_tokens=64), dict(tokens=64)):  # the old keywords are no more
        with pytest.raises(TypeError):
            fvnum.loss_mc(prior, "path", 2, samples=10, **old)
