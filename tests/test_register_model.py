"""The model registry used from outside the package (issue 30, item 1): a toy Model D, declared in this file as
one ``ModelSpec`` (its own small network, recipe, price and marker; held to the exact linear theory like C) and
registered with ``bridges.models.register_model``, is trained by ``fv train --model D``, accepted by
``ModelConfig``, priced, drawn and held to its theory row, with no edit inside the package; unregistering it
restores the registry. The models of THEORY.md section 7 keep their declarations and run keys."""
from __future__ import annotations

import json

import pytest
import torch

from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.models.registry import MODELS, register_model
from bridges.models.registry import BUILT_IN, ModelSpec, Recipe, check_theory, unregister_model
from tests._cli import fv

TOY_STEP_S = 1e-3  # the toy model's own price of one training step


def _toy_network(data: DataConfig, model: ModelConfig):
    """One layer of ``d = B`` channels, linear keys and the bilinear readout, built by hand (a toy network)."""
    from bridges.models.networks import BilinearReadout, LinearKeyLayer, WorkspaceModel

    return WorkspaceModel(data.dim, model.budget, [LinearKeyLayer(data.dim, model.budget)],
                          BilinearReadout(data.dim, model.budget), model.attention)


TOY = ModelSpec("D", "a copy of C built by a test, with its own recipe, price and marker", _toy_network,
                Recipe(lr=2e-2, batch=16, steps_per_budget=3), prediction=("top_levels_linear",), law="power",
                band="exact", marker=("D", "C5"), mlp_keys=False, bounded_by=("best_linear_nonadaptive",),
                price=lambda cfg: TOY_STEP_S)


@pytest.fixture
def toy():
    before = dict(MODELS)
    register_model(TOY)
    try:
        yield TOY
    finally:
        unregister_model("D")
        assert MODELS == before and list(MODELS) == list(before)


def test_the_models_of_theory_are_registered_in_order_and_speak_fvnum():
    assert list(MODELS)[:3] == list(BUILT_IN) == ["A", "B", "C"]
    for spec in MODELS.values():
        check_theory(spec)  # every row, law and band is fvnum's
    assert [MODELS[m].layers(4) for m in "ABC"] == [4, 1, 1] and [MODELS[m].width(4) for m in "ABC"] == [1, 4, 4]
    import fvnum.model_rows

    assert fvnum.model_rows.MODELS is MODELS  # one registry, read by the theory too


def test_a_toy_model_trains_from_the_command_line(toy, tmp_path):
    code, out, err = fv("train", "--model", "D", "--depth", "2", "--budget", "2", "--eval-every", "2",
                        "--eval-batches", "1", "--out", tmp_path, "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    cfg = RunConfig.from_dict(result["config"])
    assert (cfg.model.model, cfg.train.steps, cfg.train.batch, cfg.train.lr) == ("D", 6, 16, 2e-2)  # its recipe
    assert cfg.key().startswith("D-tree-K2-B2-N128-s0-") and (tmp_path / cfg.key() / "result.json").is_file()
    assert 0 < result["loss"] < 10


def test_a_toy_model_is_a_model_everywhere(toy):
    from bridges.prices.cost import step_seconds
    from bridges.studies.figures import model_marker
    from bridges.models.networks import build_model
    from fvnum.regime import agrees
    from fvnum.theory import predicted_law, prediction_row, row_kind

    cfg = RunConfig(DataConfig(depth=3), ModelConfig(model="D", budget=3), TrainConfig(precision="fp32"))
    assert (cfg.model.n_layers, cfg.model.n_channels, cfg.train.steps) == (1, 3, 9)
    torch.manual_seed(0)
    net = build_model(cfg)
    assert [type(layer.keys).__name__ for layer in net.layers] == ["LinearKeyLayer"] and net.budget == 3
    assert step_seconds(cfg) == TOY_STEP_S  # its own price
    assert model_marker("D") == ("D", "C5")
    names = ["best_adaptive", "best_nonadaptive_unit", "top_levels_linear", "best_linear_nonadaptive"]
    assert prediction_row("D", names) == prediction_row("C", names) == "top_levels_linear"
    assert row_kind("top_levels_linear", names)["models"] == ("C", "D")
    assert row_kind("best_linear_nonadaptive", names)["models"] == ("C", "D")  # the bound proven for both
    assert predicted_law("D") == "power" and agrees("D", 1.04) and not agrees("D", 1.06)
    with pytest.raises(ValueError, match="model D has the bilinear readout; readout='generic' applies to A and B"):
        ModelConfig(model="D", readout="generic")


def test_unregistering_restores_the_choices():
    with pytest.raises(ValueError, match="unknown model 'D'; choose one of A, B, C"):
        ModelConfig(model="D")
    code, out, err = fv("train", "--model", "D", "--depth", "2", "--budget", "2")
    assert code == 2 and not out and len(err.strip().splitlines()) == 1 and "'A', 'B', 'C'" in err


@pytest.mark.parametrize("change, words", [
    (dict(name="A"), "registered already"), (dict(name="d"), "one capital letter"),
    (dict(name="DD"), "one capital letter"), (dict(law="linear"), "law must be one of exponential, power"),
    (dict(prediction=("top_levels_lin",)), "unknown theory row 'top_levels_lin'"),
    (dict(prediction=()), "names no row"), (dict(band="loose"), "unknown band 'loose'"),
    (dict(bounded_by=("path",)), "no lower bound"), (dict(marker="o"), "marker must be"),
    (dict(network="no module"), "network must be"), (dict(description="two\nlines"), "one line"),
    (dict(adaptive=1), "adaptive must be True or False"), (dict(recipe=Recipe(1e-3, 16, 3)), None),
])
def test_bad_specs_are_refused_in_one_line(change, words):
    import dataclasses

    if words is None:  # a good spec: registered, then removed
        register_model(dataclasses.replace(TOY, **change))
        assert unregister_model("D").recipe.lr == 1e-3
        return
    with pytest.raises(ValueError, match=words) as info:
        register_model(dataclasses.replace(TOY, **change))
    assert "\n" not in str(info.value) and "D" not in MODELS


def test_bad_recipes_and_registrations_are_refused():
    with pytest.raises(ValueError, match="recipe lr must be a finite number > 0"):
        Recipe(lr=0.0, batch=1, steps_per_budget=1)
    with pytest.raises(ValueError, match="recipe batch must be an integer >= 1"):
        Recipe(lr=1e-3, batch=2.5, steps_per_budget=1)
    with pytest.raises(ValueError, match="register_model takes a ModelSpec"):
        register_model("D")
    with pytest.raises(ValueError, match="it stays registered"):
        unregister_model("A")
    with pytest.raises(ValueError, match="'Z' is not registered"):
        unregister_model("Z")


def test_fvnum_alone_knows_the_models_of_the_theory():
    """fvnum imports nothing of bridges, and alone it knows A, B, C and T by their theory: the rows they are held to,
    the bound proven for C, their laws, T's shapes held to A's and B's rows; an unknown name is one line naming the
    choices."""
    import subprocess
    import sys

    code = ("import sys\nfrom fvnum.theory import MODELS, prediction_row, predicted_law, row_kind\n"
            "assert list(MODELS) == ['A', 'B', 'C', 'T', 'G'] and not any(m.startswith('bridges') for m in sys.modules)\n"
            "names = ['best_adaptive', 'top_levels_linear', 'best_linear_nonadaptive']\n"
            "assert prediction_row('A', names) == 'best_adaptive' and prediction_row('C', names) == 'top_levels_linear'\n"
            "assert row_kind('top_levels_linear', names)['role'] == 'prediction'\n"
            "assert row_kind('best_linear_nonadaptive', names)['models'] == ('C',)\n"
            "assert (predicted_law('A'), predicted_law('B')) == ('exponential', 'power')\n"
            "assert (predicted_law('T-deep'), predicted_law('T-wide')) == ('exponential', 'power')\n"
            "keyed = ['best_adaptive_keyed', 'best_nonadaptive_keyed']\n"
            "assert (prediction_row('T-deep', keyed), prediction_row('T-wide', keyed)) == tuple(keyed)\n"
            "assert row_kind('best_adaptive_keyed', keyed)['models'] == ('A',)\n"
            "assert prediction_row('G-residual', ['gd_steps', 'path']) == 'gd_steps' and predicted_law('G-label') == 'power'\n"
            "try:\n    prediction_row('Z', names)\nexcept ValueError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "model must be one of A, B, C, T, G, got 'Z'"


def test_a_price_that_is_no_number_of_seconds_is_refused_in_one_line():
    import dataclasses

    from bridges.prices.cost import step_seconds

    register_model(dataclasses.replace(TOY, price=lambda cfg: float("nan")))
    try:
        with pytest.raises(ValueError, match="model D: its price gave nan seconds a step") as info:
            step_seconds(RunConfig(DataConfig(depth=2), ModelConfig(model="D", budget=2)))
        assert "\n" not in str(info.value)
    finally:
        unregister_model("D")


def test_the_documented_import_of_the_registry_needs_no_torch():
    """``from bridges.models import register_model`` (the documented path) loads the registry alone: it works where
    torch is not installed, and the networks stay unloaded."""
    import subprocess
    import sys

    code = ("import sys\nsys.modules['torch'] = None  # torch unavailable\n"
            "from bridges.models import MODELS, ModelSpec, Recipe, register_model\n"
            "assert 'bridges.models.networks' not in sys.modules\nprint(' '.join(MODELS))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "A B C T G"
