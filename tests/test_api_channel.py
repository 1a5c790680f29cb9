"""One channel argument (issue 59 item 1): a channel object, ``fvnum.gaussian(tau)`` or ``fvnum.tokens(N, s2=...,
keys=...)``, is the one way to give a channel in the Python API. A public function of fvnum or bridges that takes
a channel takes it as ``channel`` and no ``tau``, ``n_tokens``, ``tokens`` or ``s2`` beside it; functions that
belong to one channel take its own pieces (``tau`` alone, or ``n_tokens`` with ``s2``). The command line keeps its
flags (``--tau``, ``--tokens``, ``--s2``) and builds the object."""
from __future__ import annotations

import ast
import math

import pytest
import sympy as sp

import fvnum
from fvsym.priors import TreePrior
from tests._cli import public_modules

PIECES = {"tau", "n_tokens", "tokens", "s2"}


def _signatures(pkg: str) -> dict[str, list[str]]:
    """Parameter names of the public functions and methods of a package's public modules, read from the source
    (no import): ``module.function`` or ``module.Class.method`` -> names."""
    found = {}
    for module, tree in public_modules(pkg):
        for node in tree.body:
            defs = [(node.name, node)] if isinstance(node, ast.FunctionDef) else []
            if isinstance(node, ast.ClassDef):
                defs = [(f"{node.name}.{f.name}", f) for f in node.body if isinstance(f, ast.FunctionDef)]
            for name, fn in defs:
                if name.split(".")[-1].startswith("_") or name.startswith("_"):
                    continue
                a = fn.args
                found[f"{module}.{name}"] = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return found


@pytest.mark.parametrize("pkg", ["fvnum", "bridges"])
def test_a_function_that_takes_a_channel_takes_it_whole(pkg):
    mixed = {name: params for name, params in _signatures(pkg).items() if "channel" in params and PIECES & set(params)}
    assert mixed == {}, mixed
    assert "tokens" not in {p for params in _signatures(pkg).values() for p in params}  # the old spelling: gone


def test_the_channel_objects():
    prior = TreePrior(4, "1/2")
    g, t = fvnum.gaussian(0.3), fvnum.tokens(128, s2=0.02, keys="linear")
    assert (g.kind, g.tau, g.keys) == ("gaussian", 0.3, None)
    assert (t.kind, t.n_tokens, t.s2, t.keys, t.tau) == ("tokens", 128, 0.02, "linear", None)  # tau: the prior's
    assert t.resolve(prior).tau == fvnum.tau_of_tokens(prior, 128, 0.02) == math.sqrt((15 / 8 + 0.02) / 128)
    assert fvnum.tokens(16).keys == "weighted" and fvnum.tokens(16, keys="none").keys is None
    for bad, words in ((lambda: fvnum.gaussian(-1), "tau must be >= 0"), (lambda: fvnum.tokens(0), "tokens N"),
                       (lambda: fvnum.tokens(8, s2=-1), "s2"), (lambda: fvnum.tokens(8, keys="x"), "key family")):
        with pytest.raises(ValueError, match=words) as info:
            bad()
        assert "\n" not in str(info.value)


def test_plot_curve_takes_a_channel_as_loss_mc_does():
    from fvnum import plot
    from fvnum.mc.channels import make_channel

    prior = TreePrior(3, "1/2")
    kw = dict(prior=prior, samples=500, seed=2, threads=1)
    by_object = plot.curve("path", "path", [1, 2], channel=fvnum.tokens(16, s2=0.01), **kw)
    resolved = plot.curve("path", "path", [1, 2], channel=make_channel(prior, fvnum.tokens(16, s2=0.01)), **kw)
    assert by_object.values == resolved.values and by_object.errors == resolved.errors
    assert by_object.values == tuple(fvnum.loss_mc(prior, "path", b, fvnum.tokens(16), samples=500, seed=2).value
                                     for b in (1, 2))
    with pytest.raises(ValueError, match="channel must be a channel"):
        plot.curve("path", "path", [1], channel=0.3, **kw)


def test_effective_tau2_takes_a_prior_and_the_channels_keywords():
    from fvnum.mc.channels import effective_tau2, make_channel

    prior = TreePrior(4, "1/2")
    exact = effective_tau2(prior, n_tokens=128, s2=sp.Rational(1, 100))
    # E||theta||^2 = sum_k a_k^2 = 1 + 1/2 + 1/4 + 1/8 = 15/8 (alpha 1/2, depth 4), exactly
    assert exact == (sp.Rational(15, 8) + sp.Rational(1, 100)) / 128
    assert effective_tau2(15 / 8, n_tokens=128, s2=0.01) == make_channel(prior, fvnum.tokens(128, s2=0.01)).tau2
    assert math.isclose(float(exact), effective_tau2(15 / 8, n_tokens=128, s2=0.01), rel_tol=1e-15)
    with pytest.raises(TypeError):
        effective_tau2(15 / 8, 0.01, 128)  # the old order (s2 before N) is no call any more: keywords only


def test_fv_mc_without_a_channel_names_its_flags_in_one_line(capsys):
    from bridges.cli import main

    assert main(["mc", "--depth", "3", "--samples", "100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tau" in err[0] and "--tokens N" in err[0] and "Traceback" not in err[0]


def test_the_fourth_place_is_the_channel_of_every_verb_and_a_number_there_is_one_line():
    """``f(prior, strategy, budget, channel)`` (``f(prior, budget, channel)`` without a strategy): the channel object
    or the channel resolved against the prior give the same value; a number in its place is one line naming the
    two ways to build a channel."""
    from fvnum import bounds, comparison_table, loss_mc, noisy_bellman
    from fvsym.errors import InputError
    from fvnum.mc.channels import make_channel

    prior = TreePrior(3, "1/2")
    ch, resolved = fvnum.gaussian(0.3), make_channel(prior, fvnum.gaussian(0.3))
    assert noisy_bellman(prior, 2, ch).value == noisy_bellman(prior, 2, resolved).value
    assert bounds(prior, 2, ch, samples=500).exact == bounds(prior, 2, resolved, samples=500).exact
    kw = dict(samples=500, search_samples=50, dense=False)
    assert comparison_table(prior, 1, ch, **kw).to_dict()["rows"] == comparison_table(prior, 1, resolved, **kw).to_dict()["rows"]
    for call in (lambda bad: comparison_table(prior, 1, bad, **kw), lambda bad: noisy_bellman(prior, 2, bad),
                 lambda bad: bounds(prior, 2, bad), lambda bad: loss_mc(prior, "path", 2, bad, samples=10)):
        for bad in (0.3, "0.3", True, None):
            with pytest.raises(InputError, match=r"channel must be a channel, fvnum.gaussian\(tau\) or "
                                                 r"fvnum.tokens\(N\), got ") as info:
                call(bad)
            assert "\n" not in str(info.value)


def test_the_library_never_warns_on_its_own_calls():
    """A tokens-channel comparison table (the first table of ``fv reproduce`` and ``fv compare``) warns nothing."""
    import warnings

    from fvnum import comparison_table

    prior = TreePrior(3, "1/2")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        comparison_table(prior, 2, fvnum.tokens(16, keys=None), samples=300, search_samples=50, dense=False)
