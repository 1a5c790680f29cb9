"""Hostile inputs of ``fv reproduce``'s cell (issue 29 item 6: its defaults, ``--budget``, ``--tokens``, ``--steps``,
``--full``): each ends in one ValueError line naming the value (the command line: one line on stderr, exit code 2),
before any work and before its folder exists; never a TypeError from comparing a text with a number, never a
float budget taken as it is.

Example counts follow the hypothesis profiles of ``tests/conftest.py`` (``dev``, ``ci``, ``thorough``).
"""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridges.studies.reproduce import DEFAULT_CELL, FULL_CELL, ReproduceConfig
from tests._cli import examples, fv, one_line


@pytest.mark.parametrize("argv,fragment", [
    (["--budget", "0"], "--budget"),
    (["--budget", "-1"], "--budget"),
    (["--budget", "2.5"], "--budget"),
    (["--budget", "1e3"], "--budget"),
    # the default tree has D = 15 nodes
    (["--budget", "16"], "the training budget 16 (train_budget, fv reproduce --budget) exceeds D = 15"),
    (["--full", "--budget", "64"], "exceeds D = 15"),
    (["--depth", "1", "--budget", "2"], "exceeds D = 1"),
    (["--scales", "1,1/2", "--budget", "4"], "exceeds D = 3"),
    (["--tokens", "0"], "--tokens"),
    (["--tokens", "1/2"], "--tokens"),
    (["--tokens", "nan"], "--tokens"),
    (["--steps", "0"], "--steps"),
    (["--steps", "inf"], "--steps"),
    (["--alpha", "1"], "--alpha"),
    (["--alpha", "0"], "--alpha"),
])
def test_a_bad_cell_is_one_line_before_any_work(argv, fragment, tmp_path):
    out = tmp_path / "report"
    one_line(*fv("reproduce", "--out", out, "--quiet", *argv)[::2], fragment)
    assert not out.exists()


WHOLE = lambda v: v == v and abs(v) != float("inf") and v == int(v)  # noqa: E731  (2.0 is the count 2)
NOT_COUNTS = st.one_of(st.floats().filter(lambda v: not WHOLE(v)), st.text(max_size=5), st.booleans(),
                       st.integers(max_value=0), st.just([2]), st.just(2 + 0j))


@examples(40)
@given(name=st.sampled_from(["train_budget", "steps", "samples", "workers", "n_tokens"]), value=NOT_COUNTS)
def test_the_python_api_refuses_what_is_not_a_count_in_one_value_error(name, value):
    with pytest.raises(ValueError) as caught:
        ReproduceConfig(**{name: value})
    message = str(caught.value)
    assert "\n" not in message and (name in message or "n_tokens (N)" in message), message


@examples(25)
@given(budget=st.integers(min_value=16, max_value=10**30), full=st.booleans())
def test_a_budget_past_the_tree_is_refused_naming_the_tree(budget, full):
    with pytest.raises(ValueError, match=rf"the training budget {budget} \(train_budget, fv reproduce --budget\) "
                                         "exceeds D = 15"):
        ReproduceConfig(train_budget=budget, full=full)


@examples(25)
@given(budget=st.integers(min_value=1, max_value=15), tokens=st.integers(min_value=1, max_value=10**6),
       full=st.booleans())
def test_a_cell_that_is_given_is_kept_and_only_what_is_left_out_follows_full(budget, tokens, full):
    cell = FULL_CELL if full else DEFAULT_CELL
    given_budget = ReproduceConfig(train_budget=budget, full=full)
    given_tokens = ReproduceConfig(n_tokens=tokens, full=full)
    assert (given_budget.train_budget, given_budget.n_tokens, given_budget.alpha) == (budget, cell["n_tokens"],
                                                                                      cell["alpha"])
    assert (given_tokens.train_budget, given_tokens.n_tokens) == (cell["train_budget"], tokens)
