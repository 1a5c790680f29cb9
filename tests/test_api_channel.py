"""One channel argument (issue 30 item 4): a function of fvnum or bridges where the caller chooses the channel
takes it one way, ``channel=`` (a ``Channel``), or ``tau=`` (gaussian), or ``n_tokens=`` with ``s2`` (tokens);
``tokens=`` is the old spelling of ``n_tokens=``. Functions that belong to one channel take its own pieces
(``tau`` alone, or ``n_tokens`` with ``s2``, or a ``channel``)."""
from __future__ import annotations

import ast
import math

import pytest
import sympy as sp

from fvsym.priors import TreePrior
from tests._cli import public_modules

SPELLINGS = {"channel", "tau", "n_tokens", "tokens"}
ALL = {"channel", "tau", "n_tokens", "s2"}

# functions that still take the channel another way, each with why (none left: the prices of Monte Carlo and of a
# comparison table take ``token_channel``, a flag, since a price needs the channel's kind and no N)
LEFT: dict = {}


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
def test_a_function_that_lets_the_caller_choose_the_channel_takes_every_spelling(pkg):
    mixed = {}
    for name, params in _signatures(pkg).items():
        spelled = SPELLINGS & set(params)
        if name in LEFT:
            continue
        if "tokens" in spelled and "n_tokens" not in spelled:
            mixed[name] = params  # the old spelling alone
        elif len(spelled) > 1 and not ALL <= set(params):
            mixed[name] = params  # some ways, not all
    assert mixed == {}, mixed
    for name in LEFT:
        if name.startswith(pkg + "."):
            assert name in _signatures(pkg), name  # a stale entry: the function moved or was fixed


def test_plot_curve_takes_a_channel_as_loss_mc_does():
    from fvnum import plot
    from fvnum.mc.channels import make_channel

    prior = TreePrior(3, "1/2")
    kw = dict(prior=prior, samples=500, seed=2, threads=1)
    by_n = plot.curve("path", "path", [1, 2], n_tokens=16, s2=0.01, **kw)
    by_channel = plot.curve("path", "path", [1, 2], channel=make_channel(prior, n_tokens=16, s2=0.01), **kw)
    by_old = plot.curve("path", "path", [1, 2], tokens=16, **kw)
    assert by_n.values == by_channel.values == by_old.values and by_n.errors == by_channel.errors
    by_tau = plot.curve("path", "path", [1, 2], tau=0.3, **kw)
    assert by_tau.values == plot.curve("path", "path", [1, 2], channel=make_channel(prior, tau=0.3), **kw).values
    with pytest.raises(ValueError, match="not both"):
        plot.curve("path", "path", [1], channel=make_channel(prior, tau=0.3), tau=0.3, **kw)


def test_effective_tau2_takes_a_prior_and_the_channels_keywords():
    from fvnum.mc.channels import effective_tau2, make_channel

    prior = TreePrior(4, "1/2")
    exact = effective_tau2(prior, n_tokens=128, s2=sp.Rational(1, 100))
    # E||theta||^2 = sum_k a_k^2 = 1 + 1/2 + 1/4 + 1/8 = 15/8 (alpha 1/2, depth 4), exactly
    assert exact == (sp.Rational(15, 8) + sp.Rational(1, 100)) / 128
    assert effective_tau2(15 / 8, n_tokens=128, s2=0.01) == make_channel(prior, n_tokens=128, s2=0.01).tau2
    assert math.isclose(float(exact), effective_tau2(15 / 8, n_tokens=128, s2=0.01), rel_tol=1e-15)
    with pytest.raises(TypeError):
        effective_tau2(15 / 8, 0.01, 128)  # the old order (s2 before N) is no call any more: keywords only


def test_fv_mc_without_a_channel_names_its_flags_in_one_line(capsys):
    from bridges.cli import main

    assert main(["mc", "--depth", "3", "--samples", "100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tau" in err[0] and "--tokens N" in err[0] and "Traceback" not in err[0]


def test_the_third_place_is_the_channel_in_bounds_noisy_bellman_and_comparison_table():
    """``f(prior, budget, x)``: ``x`` a ``Channel`` or the gaussian channel's tau, the same value either way,
    in every function whose third parameter is the channel (``tau`` in ``bounds`` and ``noisy_bellman``,
    ``channel`` in ``comparison_table``); a value of another kind is one line naming it."""
    from fvnum import bounds, comparison_table, noisy_bellman
    from fvnum.mc.channels import make_channel
    from fvnum.errors import InputError
    from fvsym.priors import TreePrior

    prior = TreePrior(3, "1/2")
    ch = make_channel(prior, tau=0.3)
    assert noisy_bellman(prior, 2, ch).value == noisy_bellman(prior, 2, 0.3).value
    assert bounds(prior, 2, ch, samples=500).exact == bounds(prior, 2, 0.3, samples=500).exact
    kw = dict(samples=500, search_samples=50, keyed=None, dense=False)
    by_number = comparison_table(prior, 1, 0.3, **kw).to_dict()["rows"]
    assert by_number == comparison_table(prior, 1, ch, **kw).to_dict()["rows"]
    for bad in ("0.3", True):
        with pytest.raises(InputError, match="channel must be a fvnum Channel"):
            comparison_table(prior, 1, bad, **kw)


def test_the_library_never_calls_itself_with_the_old_tokens_spelling():
    """``tokens=N`` is accepted from users with a DeprecationWarning; the library's own calls spell ``n_tokens=``,
    so a tokens-channel comparison table (the first table of ``fv reproduce`` and ``fv compare``) warns nothing."""
    import warnings

    from fvnum import comparison_table
    from fvnum.mc.channels import make_channel

    prior = TreePrior(3, "1/2")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        comparison_table(prior, 2, make_channel(prior, n_tokens=16), samples=300, search_samples=50, keyed=None,
                         dense=False)
