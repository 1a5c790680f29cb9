"""Hostile inputs of the model registry (issue 30 item 1): a model that is not registered, given to ``fv train``,
``fv scaling --models``, a run configuration file or ``ModelConfig``, is refused in one line with exit code 2 (or one
``ValueError`` line), naming the registered models, before any work and without a traceback.

Example counts follow the hypothesis profiles of ``tests/conftest.py`` (``dev``, ``ci``, ``thorough``).
"""
import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from bridges.runs.config import ModelConfig, RunConfig
from bridges.models.registry import MODELS
from tests._cli import examples, fv


def _one_line_exit_2(code, out, err):
    lines = err.strip().splitlines()
    assert code == 2 and not out and len(lines) == 1 and "Traceback" not in err, (code, err)
    return lines[0]


@examples(25)
@given(st.text(min_size=0, max_size=12))
def test_any_unregistered_model_of_fv_train_is_one_line(name):
    assume(name not in MODELS and not name.startswith("-") and "\x00" not in name)
    line = _one_line_exit_2(*fv("train", "--model", name, "--depth", "2", "--budget", "1", "--steps", "1"))
    assert "--model" in line and all(repr(m) in line for m in MODELS)


@pytest.mark.parametrize("models", ["AD", "AA", "a", "A B", "ABCD"])
def test_unregistered_models_of_a_study_are_one_line(models):
    line = _one_line_exit_2(*fv("scaling", "--models", models, "--budgets", "1-2"))
    assert "models must be distinct letters of ABC" in line


@examples(25)
@given(st.one_of(st.text(max_size=8), st.integers(), st.none(), st.lists(st.sampled_from("ABC"), max_size=3)))
def test_model_config_refuses_anything_unregistered_in_one_line(model):
    assume(not (isinstance(model, str) and model in MODELS))
    with pytest.raises(ValueError) as info:
        ModelConfig(model=model)
    assert "\n" not in str(info.value) and "choose one of A, B, C" in str(info.value)


def test_a_configuration_file_of_an_unregistered_model_is_one_line():
    text = RunConfig().to_json().replace('"model": "A"', '"model": "Q"')
    with pytest.raises(ValueError, match="unknown model 'Q'; choose one of A, B, C") as info:
        RunConfig.from_json(text)
    assert "\n" not in str(info.value) and json.loads(text)["model"]["model"] == "Q"
