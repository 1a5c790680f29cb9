"""Hostile inputs to the law of softmax readings (fvnum.keys.families: law_from_scores, SoftmaxKeys, finite_n_terms;
the softmax key family of the keyed searches): each gets one clear line (a ValueError naming the value),
never a traceback from deep inside numpy, never a silent inf or nan."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fvnum import tokens
from fvnum.keys.nonadaptive import best_nonadaptive_keyed
from fvnum.keys.families import FAMILIES, SoftmaxKeys, check_family
from fvnum.keys.readings import law_from_scores
from fvnum.keys.readings import finite_n_terms
from fvsym.priors import GaussianPrior, TreePrior
from tests._cli import one_message

TREE = TreePrior(2, "1/2")  # D = 3
THETAS = np.array([[0.5, -0.2, 0.1], [0.0, 0.3, 0.4]])
X = np.random.default_rng(0).standard_normal((50, 3))


def test_softmax_is_a_key_family():
    assert "softmax" in FAMILIES and check_family("softmax") == "softmax"


@given(st.integers(0, 49), st.integers(0, 1), st.sampled_from([np.inf, -np.inf, np.nan]))
def test_a_score_that_overflows_is_named_in_one_line(t, c, bad):
    S = X[:, :2].copy()
    S[t, c] = bad
    for call in (lambda: law_from_scores(X, S, THETAS, n_tokens=16, s2=0.01),
                 lambda: finite_n_terms(X, S, THETAS, n_tokens=16, s2=0.01)):
        with pytest.raises(ValueError) as e:
            call()
        one_message(e, "softmax scores must be finite", f"token {t}", f"channel {c}")


@given(st.floats(min_value=-1e300, max_value=1e300))
def test_large_finite_scores_give_a_finite_law(shift):
    """log-sum-exp: any finite shift of the scores is safe and changes nothing."""
    S = X[:, :1] + shift
    if not np.all(np.isfinite(S)):
        return
    law = law_from_scores(X, S, THETAS, n_tokens=16, s2=0.01)
    assert np.all(np.isfinite(law.mean)) and np.all(np.isfinite(law.cov))


@given(st.sampled_from([np.inf, -np.inf, np.nan]))
def test_beta_not_finite_is_refused(bad):
    with pytest.raises(ValueError) as e:
        SoftmaxKeys(np.array([[bad, 0.0, 0.0]]))
    one_message(e, "beta not finite")


@given(st.floats(min_value=40.0, max_value=1e150))
def test_a_law_that_overflows_is_refused_in_one_line(beta):
    keys = SoftmaxKeys(np.array([[beta, 0.0, 0.0]]))
    with pytest.raises(ValueError) as e:
        keys.law(THETAS, n_tokens=16, s2=0.01)
    one_message(e, "overflows")


def test_a_score_function_that_overflows_is_refused_in_one_line():
    keys = SoftmaxKeys.of_scores(lambda x: np.where(x[:, :1] > 2.0, np.inf, x[:, :1]), 3, n_samples=500)
    with pytest.raises(ValueError) as e:
        keys.law(THETAS, n_tokens=16, s2=0.01)
    one_message(e, "softmax scores must be finite", "token")
    Xc = np.full((2, 4, 3), 3.0)
    with pytest.raises(ValueError) as e:
        keys.readings(Xc, np.ones((2, 4)))
    one_message(e, "softmax scores must be finite")


@pytest.mark.parametrize("call,fragment", [
    (lambda: SoftmaxKeys(np.ones((2, 3)), -0.1), "Q >= 0"),
    (lambda: SoftmaxKeys(np.ones((2, 3)), np.ones((3, 3))), "diagonal Q"),
    (lambda: SoftmaxKeys(np.ones((2, 3)), np.ones(2)), "Q must be"),
    (lambda: SoftmaxKeys(np.ones((2, 3, 1))), "(k, D)"),
    (lambda: SoftmaxKeys(np.ones((1, 3))).law(np.ones((2, 2)), n_tokens=16, s2=0.01), "thetas must be"),
    (lambda: SoftmaxKeys(np.ones((1, 3))).law(THETAS, n_tokens=0, s2=0.01), "tokens N"),
    (lambda: SoftmaxKeys(np.ones((1, 3))).bias(THETAS, n_tokens=-1), "tokens N"),
    (lambda: SoftmaxKeys.of_scores("not a function", 3), "callable"),
    (lambda: SoftmaxKeys.of_scores(np.sin, 3).stein_rows(), "stein_rows"),
    (lambda: law_from_scores(X, X[:10, :1], THETAS, n_tokens=16, s2=0.01), "same T"),
    (lambda: law_from_scores(X, X[:, :1], THETAS, n_tokens=16, s2=-1.0), "s2"),
    (lambda: best_nonadaptive_keyed(GaussianPrior.matched(TREE), 1, tokens(16, keys="softmax")), "tree prior only"),
    (lambda: check_family("Softmax"), "key family"),
])
def test_bad_arguments_get_one_line(call, fragment):
    with pytest.raises(ValueError) as e:
        call()
    one_message(e, fragment)


def fv(*argv):
    import contextlib
    import io

    from bridges.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_cli_lists_softmax_and_refuses_it_off_the_tree_in_one_line():
    code, out, _ = fv("compare", "--help")
    assert code == 0 and "softmax" in out.split("--keyed", 1)[1].split("\n")[0]
    code, _, err = fv("compare", "--prior", "gaussian", "--model", "B", "--depth", "3", "--budget", "2", "--keyed",
                      "softmax")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "--keyed softmax" in lines[0] and "tree prior" in lines[0], lines[0]
