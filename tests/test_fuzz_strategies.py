"""Hostile inputs to the strategy objects (issue 30 item 1, ``fvnum.policies.strategies.Strategy``): fields of the wrong
kind, registrations the registry cannot hold, and a strategy whose own price is no number of seconds, in Python and on
``fv mc``. Each is one line (exit code 2 on the command line, a ValueError in Python), never a traceback or a
silent answer."""
from __future__ import annotations
import fvnum

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fvnum import loss_mc
from fvnum.policies.registry import STRATEGIES, register_strategy, unregister_strategy
from fvnum.policies.strategies import MEASUREMENTS, ROLES, Strategy
from fvsym import TreePrior

from ._cli import examples, fv

NOT_A_NAME = st.one_of(st.none(), st.integers(), st.floats(allow_nan=True), st.just(""), st.just("two words"),
                       st.just("1st"), st.just("a-b"), st.binary(max_size=4))


def _first_nodes(prior, channel, budget, *, layers, width, seed):
    from fvnum.policies.policies import FixedDesign

    return FixedDesign(np.arange(1, budget + 1, dtype=np.int64), "toy_priced")


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@examples(20)
@given(name=NOT_A_NAME)
def test_a_strategy_object_refuses_a_name_that_is_not_an_identifier(name):
    with pytest.raises(ValueError, match="identifier") as caught:
        Strategy(name, "x")
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="identifier"):
        register_strategy(name, "x", _first_nodes)


@examples(20)
@given(field=st.sampled_from(("measurement", "adaptive", "roles", "max_budget", "build", "price", "work")),
       value=st.one_of(st.integers(), st.text(max_size=6), st.floats(allow_nan=True), st.tuples(st.text(max_size=3))))
def test_a_strategy_object_refuses_fields_of_the_wrong_kind(field, value):
    fine = {"measurement": (None, *MEASUREMENTS), "max_budget": (None, "depth", "dim")}
    if value in fine.get(field, ()) or (field in ("build", "price") and isinstance(value, str) and ":" in value):
        return  # an allowed value (hypothesis may draw one)
    if field == "roles" and isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 and p[0] in ROLES
                                                             for p in value):
        return
    with pytest.raises(ValueError) as caught:
        Strategy("toy_fields", "x", **{field: value})
    assert "\n" not in str(caught.value) and "toy_fields" in str(caught.value)


PRICES = {"nan": lambda *a, **k: math.nan, "negative": lambda *a, **k: -1.0, "text": lambda *a, **k: "soon",
          "none": lambda *a, **k: None, "inf": lambda *a, **k: math.inf}


@examples(10)
@given(kind=st.sampled_from(sorted(PRICES)))
def test_a_price_that_is_no_number_of_seconds_is_refused_in_one_line(kind):
    register_strategy(Strategy("toy_priced", "the first B nodes, badly priced", "coordinate", False,
                               build=_first_nodes, price=PRICES[kind]))
    try:
        code, out, err = fv("mc", "--strategy", "toy_priced", "--depth", 3, "--budget", 2, "--tau", "1/2",
                            "--samples", 100)
        line = _one_line(err)
        assert code == 2 and out == "", (code, err)
        if kind == "inf":  # a number, over any cap
            assert "over the limit" in line
        else:
            assert "toy_priced" in line and "its price gave" in line
            with pytest.raises(ValueError, match="a price is a number >= 0"):
                loss_mc(TreePrior(3, "1/2"), "toy_priced", 2, fvnum.gaussian(0.5), samples=100)
    finally:
        unregister_strategy("toy_priced")
    assert "toy_priced" not in STRATEGIES


def test_registrations_the_registry_cannot_hold_are_refused():
    s = Strategy("toy_twice", "x", build=_first_nodes)
    register_strategy(s)
    try:
        for args in ((s,), ("toy_twice", "x", _first_nodes), (Strategy("rollout", "x", build=_first_nodes),)):
            with pytest.raises(ValueError, match="registered already"):
                register_strategy(*args)
    finally:
        unregister_strategy("toy_twice")
    for name in ("path", "toy_never", 3):
        with pytest.raises(ValueError, match="not added by register_strategy"):
            unregister_strategy(name)
    code, out, err = fv("mc", "--strategy", "toy_twice", "--depth", 3, "--budget", 2, "--tau", "1/2")
    assert code == 2 and "toy_twice" in _one_line(err)  # unregistered: no longer a choice


@pytest.mark.parametrize("ref", ["fvnum.no_such_module:f", "fvnum.guards.limits:no_such_price", "fvnum.policies.prices:RATE"])
def test_a_price_named_by_a_reference_that_loads_nothing_is_refused_in_one_line(ref):
    register_strategy(Strategy("toy_ref", "the first B nodes, priced by a reference", "coordinate", False,
                               build=_first_nodes, price=ref))
    try:
        code, out, err = fv("mc", "--strategy", "toy_ref", "--depth", 3, "--budget", 2, "--tau", "1/2",
                            "--samples", 100)
        assert code == 2 and out == "" and ref in _one_line(err), (code, err)
    finally:
        unregister_strategy("toy_ref")
