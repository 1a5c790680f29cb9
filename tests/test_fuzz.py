"""Fuzzing the ``fv`` command line, the public API and the files the API reads (issue 13 point 4, issue 23
items 2 and 5): any argument vector ends with exit code 0 and a well-formed, finite result, or exit code 2
and exactly one line on stderr; any API call returns a finite result or raises one one-line ValueError in
the project's words; never a traceback, never a hang (each call under an alarm and ``--max-seconds 5``).

Values come from the extreme ranges: subnormal and huge floats and their texts (``1e-320``, ``5e-324``,
``1.7976931348623157e308``, ``inf``, ``nan``, ``-0``), alpha next to 0 and 1, numpy scalar types, Fractions
and sympy numbers, rationals with thousands of digits; from damaged run configurations, training results
and sweep specs (truncated, bytes flipped, numbers replaced by extreme ones); and from the option classes
of issue 32 (options that do not apply to the prior, covariance or strategy, options given twice, options
abbreviated: each refused in one line naming it; tests/test_fuzz_cli.py tries every option of every command).

Example counts follow the hypothesis profile of ``tests/conftest.py``: the default (``dev``, ``ci``) keeps
this file well under 30 s; ``HYPOTHESIS_PROFILE=thorough`` runs 20 times more, and the ``slow``-marked tests
run the expensive strategies (searches, rollout, greedy over unit rows) on many more vectors.
"""
import fvnum
import contextlib
import io
import json
import math
import signal
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridges.cli import main

SCALE = max(1, settings().max_examples // 25)  # 1 under dev/ci (25 examples), 20 under thorough (500)


def examples(n: int):
    """``n`` examples per test under the default profile, ``n x SCALE`` under a larger one (random there)."""
    return settings(max_examples=n * SCALE, deadline=None, suppress_health_check=list(HealthCheck),
                    derandomize=SCALE == 1)


MANY = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))

# --- values from the extreme ranges ---------------------------------------------------------------------
EXTREME_TEXT = st.sampled_from([
    "1e-320", "5e-324", "4.9e-324", "2.2250738585072014e-308", "1e-308", "1e-300", "1e-200", "1e-160", "1.5e-154",
    "1e-155", "1e-150", "1e-100", "1e-30", "1e-12", "1e-9", "1e100", "1e150", "1e200", "1e300", "1e308",
    "1.7976931348623157e308", "1.8e308", "inf", "-inf", "nan", "NaN", "-0", "+0", "0.0", "-0.0", "0",
    "0.9999999999999999", "0.99999999999999999999", "1e-16", "1", "1/3", "2/3", "1/10000000000000000000000000000",
    "99999999999999999999/100000000000000000000", "1e-350", "1e-351", "1e351",
])
SUBNORMAL = st.floats(min_value=0.0, max_value=2.2250738585072014e-308, allow_subnormal=True)
TINY = st.floats(min_value=5e-324, max_value=1e-100)
HUGE = st.floats(min_value=1e100, max_value=1.7976931348623157e308)
HUGE_RATIONAL_TEXT = st.integers(2, 10**150).map(lambda n: f"1/{n}")  # longer than 100 characters: refused
NUMBER_TEXT = st.one_of(
    EXTREME_TEXT, SUBNORMAL.map(repr), TINY.map(repr), HUGE.map(repr), HUGE_RATIONAL_TEXT,
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.fractions(min_value=-2, max_value=2, max_denominator=1000).map(str),
    st.sampled_from(["1/2", "0.3", "-1", "3/2", "1e400", "1e-100000000", "0.5e-10000", "abc", "", "1/0",
                     "99999999999999999999", "2**70", "1,,2", "7", "0x10", "1_000", " 1/2 ", "½"]),
    st.text(max_size=8),
)
INTS = st.one_of(st.integers(-3, 40).map(str),
                 st.sampled_from(["0", "-1", "1000", "10**9", "2.5", "x", "1/2", "1e3", "9" * 30, "-0"]))


def scalar_kinds(x: float):
    """``x`` as each kind of number a user passes: float, numpy scalars, Fraction, sympy, text."""
    kinds = [st.just(x), st.just(np.float64(x)), st.just(repr(x))]
    if math.isfinite(x):
        kinds += [st.just(Fraction(x)), st.just(sp.Float(x)), st.just(sp.Rational(Fraction(x)))]
        if abs(x) <= float(np.finfo(np.float32).max):
            kinds.append(st.just(np.float32(x)))
    return st.one_of(kinds)


API_NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).flatmap(scalar_kinds),
    SUBNORMAL.flatmap(scalar_kinds), TINY.flatmap(scalar_kinds), HUGE.flatmap(scalar_kinds),
    st.floats(min_value=0.0, max_value=1.0).flatmap(scalar_kinds),
    st.integers(-10, 10**20).flatmap(lambda n: st.sampled_from([n, np.int64(n % 2**62), np.int32(n % 2**30),
                                                               sp.Integer(n), Fraction(n)])),
    st.integers(1, 10**6).map(lambda n: Fraction(1, 10**n if n < 6000 else 10**6000)),  # huge denominators
    st.integers(2000, 6000).map(lambda n: sp.Rational(1, 3**n)),
    st.sampled_from([None, True, np.bool_(False), 1j, np.complex128(1), "1/2", "", "nan", sp.nan, sp.oo, sp.Symbol("x"),
                     [1, 2], np.array([0.5]), np.array(0.5), object()]),
)

# --- the command line -------------------------------------------------------------------------------------
DERIVE = st.tuples(
    st.just(["derive", "tree-loss"]),
    st.lists(st.tuples(st.sampled_from(["--depth", "--budget", "--layers", "--width"]), INTS), max_size=4),
    st.lists(st.tuples(st.sampled_from(["--alpha"]), NUMBER_TEXT), max_size=1),
    st.sampled_from([["--strategy", s] for s in ("path", "top_levels", "optimal", "optimal_nonadaptive_coordinate",
                                                 "optimal_nonadaptive", "greedy")]),
    st.sampled_from([[], ["--policy"], ["--format", "json"], ["--format", "latex"], ["--bogus"]]),
)
DERIVE_GAUSS = st.tuples(
    st.just(["derive", "gaussian-loss"]),
    st.lists(st.tuples(st.sampled_from(["--dim", "--budget", "--depth"]), st.integers(-1, 12).map(str)), max_size=3),
    st.lists(st.tuples(st.sampled_from(["--tau", "--alpha"]), NUMBER_TEXT), max_size=2),
    st.sampled_from([["--cov", "isotropic"], ["--cov", "matched"], []]),
    st.sampled_from([[], ["--format", "json"]]),
)
DERIVE_TREE_EXTREME = st.tuples(  # deep trees with alpha next to 0 and 1: exact numbers of thousands of digits
    st.just(["derive", "tree-loss", "--strategy", "path"]),
    st.tuples(st.just("--depth"), st.integers(1, 30).map(str)).map(lambda t: [t]),
    st.tuples(st.just("--budget"), st.integers(0, 3).map(str)).map(lambda t: [t]),
    st.tuples(st.just("--alpha"), st.one_of(EXTREME_TEXT, TINY.map(repr))).map(lambda t: [t]),
    st.sampled_from([[], ["--format", "json"]]),
)
FAST_STRATEGIES = ("path", "top_levels", "fixed", "greedy_coordinate", "bellman_noiseless")
ALL_STRATEGIES = FAST_STRATEGIES + ("optimal", "optimal_nonadaptive_unit", "rollout", "greedy_dense")


def mc_vectors(strategies, max_depth: int):
    return st.tuples(
        st.just(["mc", "--samples", "200"]),
        st.lists(st.tuples(st.sampled_from(["--depth"]), st.integers(1, max_depth).map(str)), max_size=1)
        .map(lambda d: d or [("--depth", "3")]),
        st.lists(st.tuples(st.sampled_from(["--budget", "--threads", "--seed", "--tokens"]), INTS), max_size=2),
        st.lists(st.tuples(st.sampled_from(["--alpha", "--tau", "--tau", "--s2"]), NUMBER_TEXT), max_size=2),
        st.sampled_from([["--strategy", s] for s in strategies]),
        st.sampled_from([[], ["--design", "1,2,3"], ["--design", "1,,2"], ["--prior", "gaussian"], ["--format", "json"],
                         ["--prior", "gaussian", "--cov", "isotropic"]]),
    )


MC_EXTREME = st.tuples(  # always a valid vector but for the extreme numbers: the computation must run
    st.just(["mc", "--samples", "200", "--depth", "3", "--budget", "2"]),
    st.just([]),
    st.just([]),
    st.tuples(st.tuples(st.just("--tau"), NUMBER_TEXT), st.tuples(st.just("--alpha"), NUMBER_TEXT))
    .map(list),
    st.sampled_from([["--strategy", s] for s in FAST_STRATEGIES if s != "fixed"]),
    st.sampled_from([[], ["--format", "json"], ["--prior", "gaussian", "--strategy", "optimal"]]),
)
BOUNDS_EXTREME = st.tuples(
    st.just(["bounds", "--samples", "200", "--depth", "2", "--budget", "2"]),
    st.just([]),
    st.just([]),
    st.lists(st.tuples(st.sampled_from(["--tau", "--alpha"]), NUMBER_TEXT), min_size=1, max_size=2)
    .map(lambda opts: opts if any(o == "--tau" for o, _ in opts) else [*opts, ("--tau", "1/2")]),
    st.just([]),
    st.sampled_from([[], ["--format", "json"]]),
)


def flat(parts):
    """An argument vector from parts: lists of words and lists of ``(option, value)`` pairs."""
    argv = []
    for part in parts:
        for item in part:
            argv += list(item) if isinstance(item, tuple) else [item]
    return argv


class Hang(Exception):
    pass


def run(argv, limit=60):
    def alarm(*_):
        raise Hang(" ".join(argv))

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(limit)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(["--max-seconds", "5", *argv])
            except SystemExit as exc:  # only argparse's own exits are allowed out of main, and only 0 or 2
                assert exc.code in (0, 2, None), (argv, exc.code)
                code = 0 if exc.code is None else exc.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return code, out.getvalue(), err.getvalue()


def check(argv):
    """Exit 0 with a finite, well-formed result, or exit 2 with one line of the project's words."""
    code, out, err = run(argv)
    assert "Traceback" not in err, err
    for foreign in ("Exceeds the limit", "ZeroDivisionError", "KeyError", "TypingError", "numba", "sys.set_int"):
        assert foreign not in err, (argv, err)
    if code == 0:
        assert out.strip(), argv
        if "--help" in argv:
            return
        if "json" in argv:
            record = json.loads(out)
            if argv[0] == "mc":
                assert record["value"] is not None and record["stderr"] is not None, (argv, out)
        elif argv[0] in ("mc", "bounds"):
            assert "nan" not in out.lower(), (argv, out)
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1, (argv, code, err)


@examples(8)
@given(DERIVE)
def test_fv_derive_fuzz(parts):
    check(flat(parts))


@examples(6)
@given(st.one_of(DERIVE_GAUSS, DERIVE_TREE_EXTREME))
def test_fv_derive_extreme_numbers(parts):
    check(flat(parts))


@examples(8)
@given(mc_vectors(FAST_STRATEGIES, 4))
def test_fv_mc_fuzz(parts):
    check(flat(parts))


@examples(12)
@given(MC_EXTREME)
def test_fv_mc_extreme_tau_and_alpha(parts):
    check(flat(parts))


@examples(4)
@given(BOUNDS_EXTREME)
def test_fv_bounds_extreme_tau_and_alpha(parts):
    check(flat(parts))


@pytest.mark.slow
@MANY
@given(st.one_of(DERIVE, DERIVE_GAUSS, DERIVE_TREE_EXTREME, mc_vectors(ALL_STRATEGIES, 4), MC_EXTREME, BOUNDS_EXTREME))
def test_fv_fuzz_many(parts):
    check(flat(parts))


@pytest.mark.slow
@MANY
@given(st.lists(st.sampled_from(["train", "compare", "reproduce", "scaling", "sweep", "bounds", "--model", "Z",
                                 "--alpha", "1/2", "--tokens", "0", "--jobs", "1000", "--unknown", "-1", "1e400",
                                 "--tau", "1e-320", "5e-324", "nan", "-0"]),
                max_size=6))
def test_fv_unknown_vectors_refused_or_fine(argv):
    if argv and argv[0] in ("train", "compare", "reproduce", "scaling") and "--out" not in argv:
        argv = [*argv, "--out", "/nonexistent-parent-\0"]  # never trains: the folder is refused
    check(argv) if argv else None


# --- options: ones that do not apply, given twice, abbreviated (issue 32 item 4) -----------------------------
# valid, quick vectors, and for each the options that do not apply to it (the extra words, the flag named)
OPTION_BASES = [
    (["mc", "--samples", "200", "--depth", "3", "--budget", "2", "--tau", "1/2", "--strategy", "path"],
     [(["--dim", "7"], "--dim"), (["--cov", "matched"], "--cov"), (["--eigenvalues", "1,1"], "--eigenvalues"),
      (["--design", "1,2"], "--design"), (["--layers", "2"], "--layers"), (["--measurement", "unit"], "--measurement"),
      (["--s2", "1/10"], "--s2")]),
    (["mc", "--samples", "200", "--prior", "gaussian", "--cov", "isotropic", "--dim", "3", "--budget", "2", "--tau",
      "1/2", "--strategy", "optimal"],
     [(["--alpha", "1/2"], "--alpha"), (["--scales", "1,1/2"], "--scales"), (["--depth", "2"], "--depth"),
      (["--layers", "1"], "--layers"), (["--measurement", "coordinate"], "--measurement"), (["--s2", "1/10"], "--s2")]),
    (["mc", "--samples", "200", "--prior", "gaussian", "--eigenvalues", "1,1/2", "--budget", "1", "--tokens", "16",
      "--strategy", "top_levels"],
     [(["--depth", "2"], "--depth"), (["--alpha", "0.3"], "--alpha"), (["--cov", "isotropic"], "--cov"),
      (["--dim", "2"], "--dim"), (["--width", "1"], "--width")]),
    (["mc", "--samples", "200", "--prior", "gaussian", "--budget", "2", "--tau", "1/2", "--strategy", "top_levels"],
     [(["--dim", "5"], "--dim"), (["--strategy", "path"], "--strategy"), (["--measurement", "unit"], "--measurement")]),
    (["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "path", "--alpha", "1/2"],
     [(["--width", "3"], "--width"), (["--design", "1,2"], "--design"), (["--scales", "1,1/2,1/4"], "--scales")]),
    (["bounds", "--depth", "2", "--budget", "2", "--tau", "1/2", "--samples", "200"], [(["--s2", "1/10"], "--s2")]),
]


@st.composite
def option_mutants(draw):
    """A valid vector of OPTION_BASES changed in one way: an option that does not apply added, an option of
    it given again, or an option of it abbreviated; with the words the refusal names."""
    base, not_applying = draw(st.sampled_from(OPTION_BASES))
    argv = list(base)
    flags = [i for i, word in enumerate(argv) if word.startswith("--")]
    how = draw(st.sampled_from(["not applying", "twice", "abbreviated"]))
    if how == "not applying":
        extra, flag = draw(st.sampled_from(not_applying))
        if flag == "--strategy":  # a second --strategy would be a repeat: replace the base's
            i = argv.index("--strategy")
            argv[i + 1] = extra[1]
            return argv, ["--strategy path applies to --prior tree only"]
        at = draw(st.sampled_from([*flags, len(argv)]))  # before one of its options, or at the end
        return argv[:at] + extra + argv[at:], [flag]
    i = draw(st.sampled_from(flags))
    flag, value = argv[i], argv[i + 1]
    if how == "twice":
        at = draw(st.sampled_from([*flags, len(argv)]))  # the same value again, anywhere (a bad one: refused first)
        return argv[:at] + [flag, value] + argv[at:], [f"{flag} is given twice"]
    prefix = draw(st.integers(3, len(flag) - 1).map(lambda n: flag[:n]))
    if any(f == prefix for f in argv[i:i + 1] + ["--tau", "--dim", "--cov", "--s2", "--seed"]):
        return argv + [flag, value], [f"{flag} is given twice"]
    argv[i] = prefix
    return argv, ["options take their full names", f"{prefix}: "]


@examples(24)
@given(option_mutants())
def test_options_that_do_not_apply_repeat_or_abbreviate_are_refused(mutant):
    argv, named = mutant
    code, out, err = run(argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err and not out, (argv, code, err)
    assert all(word in lines[0] for word in named), (argv, lines[0])


# --- the Python API -----------------------------------------------------------------------------------------
def refused_or_finite(call):
    """``call()`` returns (its value), or raises one one-line ValueError in the project's words."""
    try:
        return call()
    except ValueError as exc:
        text = str(exc)
        assert "\n" not in text and text, text
        for foreign in ("Exceeds the limit", "sys.set_int", "Invalid literal", "could not convert"):
            assert foreign not in text, text
        return None


API_VALUES = st.one_of(API_NUMBER, st.text(max_size=4), st.lists(st.integers(-3, 3), max_size=3))


@examples(10)
@given(depth=API_VALUES, alpha=API_VALUES)
def test_tree_prior_api_fuzz(depth, alpha):
    from fvsym import TreePrior

    prior = refused_or_finite(lambda: TreePrior(depth, alpha))
    if prior is not None:
        assert 1 <= prior.depth <= 30 and 0 < prior.alpha < 1
        repr(prior)  # printable (no 4300-digit limit)


@examples(10)
@given(scales=st.lists(API_NUMBER, min_size=1, max_size=3))
def test_tree_prior_scales_api_fuzz(scales):
    from fvnum import loss_mc
    from fvsym import TreePrior

    prior = refused_or_finite(lambda: TreePrior(len(scales), scales=scales))
    if prior is not None:
        est = refused_or_finite(lambda: loss_mc(prior, "path", 1, fvnum.gaussian(0.1), samples=50))
        assert est is None or (math.isfinite(est.value) and math.isfinite(est.stderr))


@examples(10)
@given(tau=API_NUMBER, alpha=st.sampled_from(["1/2", "1/100", 0.999, np.float64(1e-20)]),
       strategy=st.sampled_from(["path", "top_levels", "greedy_coordinate", "bellman_noiseless"]))
def test_loss_mc_tau_api_fuzz(tau, alpha, strategy):
    from fvnum import loss_mc
    from fvsym import TreePrior

    prior = TreePrior(3, alpha)
    est = refused_or_finite(lambda: loss_mc(prior, strategy, 2, fvnum.gaussian(tau), samples=100))
    if est is not None:
        assert math.isfinite(est.value) and math.isfinite(est.stderr), (tau, est)
        # every leaf has norm^2 M = sum a_k^2 and the estimate is a mix of leaves: a loss of at most 4 M
        assert 0 <= est.value <= 4 * (1 + 1e-12) * sum(float(a) ** 2 for a in prior.scales)


@examples(8)
@given(design=API_VALUES, budget=API_VALUES)
def test_loss_mc_api_fuzz(design, budget):
    from fvnum import loss_mc
    from fvsym import TreePrior

    refused_or_finite(lambda: loss_mc(TreePrior(3, "1/2"), "fixed", budget, fvnum.gaussian(0.1), options=fvnum.StrategyOptions(design=design), samples=100))


@examples(8)
@given(variance=API_NUMBER, tau=API_NUMBER, dim=st.sampled_from([1, 3, np.int64(2), sp.Integer(2)]))
def test_gaussian_prior_api_fuzz(variance, tau, dim):
    from fvnum import loss_mc
    from fvsym import GaussianPrior

    prior = refused_or_finite(lambda: GaussianPrior.isotropic(dim, variance))
    if prior is not None:
        est = refused_or_finite(lambda: loss_mc(prior, "optimal", 1, fvnum.gaussian(tau), samples=50))
        assert est is None or (math.isfinite(est.value) and math.isfinite(est.stderr))


@examples(8)
@given(tau=API_NUMBER, tokens=API_NUMBER, s2=API_NUMBER)
def test_channel_api_fuzz(tau, tokens, s2):
    from fvnum import tau_of_tokens
    from fvnum.mc.channels import make_channel
    from fvsym import TreePrior

    prior = TreePrior(3, "1/2")
    ch = refused_or_finite(lambda: make_channel(prior, fvnum.gaussian(tau)))
    assert ch is None or (ch.tau >= 0 and math.isfinite(ch.tau2))
    t = refused_or_finite(lambda: tau_of_tokens(prior, tokens, s2))
    assert t is None or (t > 0 and math.isfinite(t))


@examples(8)
@given(alpha=API_NUMBER)
def test_formula_evaluation_api_fuzz(alpha):
    from fvsym.tree import tree_loss

    f = tree_loss(3, 2, "path")
    value = refused_or_finite(lambda: f(alpha))
    if value is not None:
        v = np.asarray(value, dtype=float)
        assert np.all(np.isfinite(v)) and np.all((0 <= v) & (v <= 1)), (alpha, value)
    exact = refused_or_finite(lambda: f.exact(alpha=alpha))
    if exact is not None and exact.is_number:
        assert 0 < exact < 1, (alpha, exact)


# --- damaged files -------------------------------------------------------------------------------------------
def damage(text: str, data) -> str:
    """``text`` truncated, with bytes replaced, or with one number replaced by an extreme one."""
    how = data.draw(st.sampled_from(["truncate", "flip", "number", "insert"]))
    if how == "truncate":
        return text[: data.draw(st.integers(0, len(text)))]
    if how == "flip":
        i = data.draw(st.integers(0, max(len(text) - 1, 0)))
        return text[:i] + data.draw(st.characters()) + text[i + 1:]
    if how == "insert":
        i = data.draw(st.integers(0, len(text)))
        return text[:i] + data.draw(st.text(max_size=6)) + text[i:]
    import re

    spots = [m.span() for m in re.finditer(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text)]
    if not spots:
        return text
    a, b = data.draw(st.sampled_from(spots))
    return text[:a] + data.draw(st.one_of(EXTREME_TEXT, st.sampled_from(["1e999", "-1e999", "9" * 5000]))) + text[b:]


@examples(12)
@given(data=st.data())
def test_damaged_run_configuration(data):
    from bridges.runs.config import RunConfig

    text = damage(RunConfig().to_json(), data)
    cfg = refused_or_finite(lambda: RunConfig.from_json(text))
    if cfg is not None:
        assert RunConfig.from_json(cfg.to_json()) == cfg  # what was accepted is valid and round-trips


SPEC = """command = "mc"
[base]
depth = 3
strategy = "path"
tau = "1/2"
samples = 200
[grid]
budget = [1, 2]
seed = [0, 1]
"""


@examples(12)
@given(data=st.data())
def test_damaged_sweep_spec(data):
    from bridges.studies.sweep import load_spec

    text = damage(SPEC, data)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.toml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        refused_or_finite(lambda: load_spec(path))


@examples(6)
@given(data=st.data())
def test_damaged_training_result(data):
    from bridges.runs.config import RunConfig
    from bridges.training.train import load_result

    cfg = RunConfig()
    record = json.dumps({"format": "fv-result-1", "key": cfg.key(), "config": cfg.to_dict(), "loss": 0.5,
                         "stderr": 0.01, "n_eval": 2048, "metric": "theta", "history": [[200, 0.7, 0.6, 0.01, 1.5]],
                         "steps": 200, "finished": False, "train_seconds": 1.0, "wall_seconds": 1.2,
                         "steps_per_s": 200.0, "run_dir": None, "checkpoint": None, "precision": "fp32"})
    text = damage(record, data)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "result.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        refused_or_finite(lambda: load_result(path))
