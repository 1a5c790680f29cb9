"""Hostile inputs to Model A started from A's prediction policy (the keyed teacher: fvnum.keys.adaptive's
trace, bridges.training.distil, ``fv train --init-policy keyed``, studies/scaling/distil.py --teacher): each gets one
clear line (a ValueError in the library, exit 2 from the command line), refused before the search runs."""
from fvnum.options import KeyedSearch
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridges.training.distil import DistilConfig
from fvnum.keys.adaptive import adaptive_keyed_trace, adaptive_keyed_trace_cost
from fvnum.mc.channels import tokens
from fvsym.priors import TreePrior
from tests._cli import fv

TREE = TreePrior(2, "1/2")  # D = 3
ROOT = Path(__file__).resolve().parents[1]


def one_line(err: str, *fragments):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in lines[0], err


TRAIN = ("train", "--model", "A", "--init-policy", "keyed", "--steps", "1", "--out", "")


@pytest.mark.parametrize("extra, fragment", [
    (("--prior", "gaussian", "--depth", "3", "--budget", "2"), "tree prior"),
    (("--prior", "tree", "--depth", "3", "--budget", "4"), "budget <= depth"),
])
def test_fv_train_init_policy_keyed_refused_in_one_line(extra, fragment):
    code, _, err = fv(*TRAIN, *extra)
    assert code == 2
    one_line(err, fragment)


def test_fv_train_unknown_policy_and_other_models():
    code, _, err = fv("train", "--model", "A", "--init-policy", "keyd", "--steps", "1", "--out", "")
    assert code == 2 and "keyd" in err and "Traceback" not in err
    code, _, err = fv("train", "--model", "B", "--init-policy", "keyed", "--prior", "tree", "--depth", "3",
                      "--budget", "2", "--steps", "1", "--out", "")
    assert code == 2
    one_line(err, "init_policy")


def test_the_keyed_teachers_search_is_priced_before_it_runs():
    """Depth 6, budget 4: one training step fits a 10 s cap (about 5 s with the start), the search (about a
    minute) does not: refused in one line, naming it."""
    code, _, err = fv("--max-seconds", "10", *TRAIN, "--prior", "tree", "--depth", "6", "--budget", "4")
    assert code == 2
    one_line(err, "keyed teacher's search", "depth 6, budget 4", "--max-seconds")


@given(depth=st.integers(1, 12), budget=st.integers(1, 12), samples=st.integers(2, 10**6))
def test_trace_prices_are_finite_positive_and_grow(depth, budget, samples):
    dim = 2**depth - 1
    price = adaptive_keyed_trace_cost(depth, dim, budget, samples)
    assert math.isfinite(price) and price > 0
    assert adaptive_keyed_trace_cost(depth, dim, budget, 2 * samples) > price
    assert adaptive_keyed_trace_cost(depth, dim, budget + 1, samples) > price


BAD_READINGS = st.one_of(
    st.tuples(st.integers(0, 5), st.integers(0, 4)).filter(lambda s: s != (4, 2)).map(np.zeros),
    st.sampled_from([np.nan, np.inf, -np.inf]).map(lambda v: np.full((4, 2), v)),
)


@given(readings=BAD_READINGS)
def test_trace_refuses_bad_readings_before_searching(readings):
    with pytest.raises(ValueError, match="readings must be finite, shape") as excinfo:
        adaptive_keyed_trace(TREE, 2, tokens(128), samples=4, readings=readings, search=KeyedSearch(first="not a design"))
    assert "\n" not in str(excinfo.value)


@given(value=st.one_of(st.integers(max_value=3), st.booleans(), st.floats(), st.text(max_size=3)))
def test_distil_config_refuses_bad_trace_samples(value):
    with pytest.raises(ValueError, match="trace_samples must be an integer >= 4") as excinfo:
        DistilConfig(teacher="keyed", trace_samples=value)
    assert "\n" not in str(excinfo.value)


def test_distil_script_refuses_an_unknown_teacher(capsys):
    spec = importlib.util.spec_from_file_location("distil_script", ROOT / "studies" / "scaling" / "distil.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--teacher=optimal", "--table"]) == 2
    err = capsys.readouterr().err
    one_line(err, "--teacher", "optimal")
    assert script.cell(4, 0, "keyed") == "keyed-B4-s0" and script.cell(4, 0) == "B4-s0"
