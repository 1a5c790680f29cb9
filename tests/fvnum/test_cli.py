"""``fv mc``: mirrors the Python API, JSON output, one-line errors with exit code 2."""
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
    est = loss_mc(TreePrior(4, "0.5"), "path", 3, tau=0.3, samples=3000, seed=7)
    assert (data["value"], data["stderr"], data["n"]) == (est.value, est.stderr, est.n)
    assert data["strategy"] == "path" and data["tau"] == 0.3 and data["channel"] == "gaussian"


@pytest.mark.parametrize("extra,kwargs", [
    (["--strategy", "fixed", "--design", "1,2,5", "--tau", "3/10"], dict(strategy="fixed", design=[1, 2, 5], tau=0.3)),
    (["--strategy", "top_levels", "--tokens", "64", "--s2", "0.02"], dict(strategy="top_levels", tokens=64, s2=0.02)),
    (["--strategy", "optimal", "--layers", "1", "--width", "3", "--tau", "0"],
     dict(strategy="optimal", layers=1, width=3, tau=0.0)),
])
def test_strategies_and_channels(capsys, extra, kwargs):
    code, out, _ = run(capsys, *BASE, *extra, "--format", "json")
    assert code == 0
    strategy = kwargs.pop("strategy")
    est = loss_mc(TreePrior(4, "0.5"), strategy, 3, samples=3000, seed=7, **kwargs)
    assert json.loads(out)["value"] == est.value


def test_gaussian_prior_text_output(capsys):
    code, out, _ = run(capsys, "mc", "--prior", "gaussian", "--cov", "isotropic", "--dim", "5", "--budget", "2",
                       "--strategy", "top_levels", "--tau", "0.5", "--samples", "2000")
    assert code == 0 and out.startswith("loss = ")
    est = loss_mc(GaussianPrior.isotropic(5), "top_levels", 2, tau=0.5, samples=2000, seed=0)
    assert f"{est.value:.6g}" in out
    assert abs(est.z(5 - 2 / 1.25)) < 5  # isotropic closed form, B <= D


@pytest.mark.parametrize("args,message", [
    (["--tau", "0.3", "--samples", "1"], "samples must be >= 2"),
    (["--tokens", "0"], "tokens N must be >= 1"),
    (["--tau", "-0.5"], "tau must be >= 0"),
    ([], "exactly one of tau"),
    (["--tau", "0.1", "--budget", "9"], "budget 9 is too large"),
    (["--tau", "0.1", "--strategy", "fixed", "--design", "1,2,99"], "design node 99 is outside the tree"),
    (["--tau", "0.1", "--strategy", "fixed"], "needs --design"),
    (["--tau", "abc"], "--tau must be a number"),
    (["--tau", "0.1", "--alpha", "2"], "alpha must lie in (0, 1)"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, message):
    base = ["mc", "--depth", "4", "--budget", "3", "--samples", "100"]
    code, _, err = run(capsys, *base, *args)
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
