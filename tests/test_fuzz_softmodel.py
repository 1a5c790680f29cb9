"""Hostile inputs of softmax attention (issue 31 item 1): an unknown ``--attention`` (command line, sweep spec,
configuration file) and softmax runs whose memory or time does not fit are refused in one line with exit code 2,
before any work and without a traceback; the price counts what the softmax adds.

Example counts follow the hypothesis profiles of ``tests/conftest.py`` (``dev``, ``ci``, ``thorough``).
"""
import contextlib
import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridges.cli import main
from bridges.runs.config import ATTENTIONS, DataConfig, ModelConfig, RunConfig, TrainConfig
from tests._cli import examples, one_line


def fv(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


BAD = st.text(min_size=0, max_size=30).filter(lambda t: t not in ATTENTIONS and not t.startswith("-") and "\x00" not in t)


@examples(10)
@given(value=BAD)
def test_an_unknown_attention_is_one_line(tmp_path_factory, value):
    out = tmp_path_factory.mktemp("runs")
    for command in ("train", "compare"):
        code, _, err = fv(command, "--model", "A", "--attention", value, "--out", out)
        one_line(code, err, "--attention")
    assert not any(out.iterdir())
    with pytest.raises(ValueError, match="attention") as info:
        ModelConfig(attention=value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("value", ["Softmax", "LINEAR", "soft", "linear,softmax", " softmax", "1", "none"])
def test_near_misses_of_attention_are_refused(tmp_path, value):
    code, _, err = fv("train", "--model", "B", "--attention", value, "--out", tmp_path)
    one_line(code, err, "--attention")


def test_a_bad_attention_in_a_sweep_spec_names_its_key(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text('command = "train"\n[base]\nmodel = "A"\nsteps = 3\n[grid]\nattention = ["linear", "cosine"]\n')
    code, _, err = fv("sweep", spec, "--out", tmp_path / "sweep")
    one_line(code, err, "grid.attention", "cosine")
    assert not (tmp_path / "sweep").exists()


def test_a_bad_attention_in_a_run_folder_is_refused():
    d = json.loads(RunConfig(model=ModelConfig(attention="softmax")).to_json())
    for bad in ("softmax2", 3, ["softmax"]):
        d["model"]["attention"] = bad
        with pytest.raises(ValueError, match="attention") as info:
            RunConfig.from_dict(d)
        assert "\n" not in str(info.value)
    d["model"]["attention"] = None  # null is the model's own default (A: linear)
    assert RunConfig.from_dict(d).model.attention == "linear"


def test_absurd_softmax_sizes_are_refused_by_the_memory_price(tmp_path):
    """Model C at depth 14 with a full workspace and a million tokens: the scores and weights alone are tens of
    terabytes; refused before torch allocates anything."""
    code, _, err = fv("train", "--model", "C", "--attention", "softmax", "--depth", "14", "--budget", "16383",
                      "--tokens", "1000000", "--out", tmp_path)
    one_line(code, err, "memory")
    assert not any(tmp_path.iterdir())


def test_the_time_price_counts_the_softmax(tmp_path):
    """A cap between the price of a linear run and that of its softmax twin refuses the softmax run only (the
    (batch, N, d) exp of every layer is priced: ``bridges.prices.cost.NS_SOFTMAX``)."""
    from bridges.prices.cost import check_train_time, train_seconds
    from fvsym.guards.limits import time_limit

    argv = ["--model", "C", "--depth", "3", "--budget", "7", "--tokens", "4096", "--steps", "20000"]
    lin = RunConfig(DataConfig(depth=3, n_tokens=4096), ModelConfig("C", 7), TrainConfig(steps=20000))
    soft = lin.replace(model=dict(attention="softmax"))
    assert train_seconds(soft) > 1.2 * train_seconds(lin)
    cap = (train_seconds(lin) + train_seconds(soft)) / 2
    code, _, err = fv("--max-seconds", cap, "train", *argv, "--attention", "softmax", "--out", tmp_path)
    one_line(code, err, "would take")
    assert not any(tmp_path.iterdir())
    with time_limit(cap):
        check_train_time(lin)  # the linear twin fits under the same cap
        with pytest.raises(ValueError, match="would take"):
            check_train_time(soft)


def test_softmax_rows_off_the_tree_prior_are_refused_before_training(tmp_path):
    """``--keyed softmax`` (the softmax prediction rows) is searched on the tree prior only: a Gaussian-prior
    comparison asking for it is refused in one line before anything is trained or written."""
    code, _, err = fv("compare", "--model", "B", "--attention", "softmax", "--prior", "gaussian", "--keyed", "softmax",
                      "--depth", "3", "--budget", "2", "--tokens", "16", "--steps", "5", "--out", tmp_path / "c")
    one_line(code, err, "tree prior only")
    assert not (tmp_path / "c").exists()
