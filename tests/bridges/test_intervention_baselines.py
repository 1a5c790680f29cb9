"""Baselines, single-slot transplant and self-describing tables of the interventions on models (docs/theory.md
section 9): the no-op and random-donor baselines, one slot of ``workspace.{l}``, and the header and JSON fields
naming the tensor patched, how it was changed, the seed and the sample sizes."""
import numpy as np
import pytest
import torch

from bridges.models.networks import path_model
from bridges.patching.keys import key_patching_table, path_bayes_decoder, table_from_dict
from bridges.patching.state import model_injection_table, model_state_patching_table
from bridges.runs.config import DataConfig
from fvsym.errors import InputError

torch.set_num_threads(1)
DATA = DataConfig(depth=3, n_tokens=32)


@pytest.fixture(scope="module")
def model():
    return path_model(DATA, 3, path_bayes_decoder(DATA))


@pytest.mark.parametrize("table", [model_state_patching_table, key_patching_table])
def test_random_donor_is_the_mix_of_the_divergence_depths(model, table):
    """A donor drawn uniformly has divergence depth j with probability 2^-j (and is the target itself with 2^-K):
    its effect is that mixture of the columns' effects, within 5 standard errors; the no-op column is exactly 0."""
    t = table(model, DATA, n_contexts=2048, seed=2, baselines=True)
    assert t.depths == (0, 1, 2, 3) and np.all(t.effect[:, 0] == 0.0)
    w = np.array([0.5, 0.25, 0.125])
    mix = t.effect[:, 1:] @ w
    se = np.sqrt(t.random_donor_effect_stderr**2 + (t.effect_stderr[:, 1:] ** 2) @ w**2)
    assert np.all(np.abs(t.random_donor_effect - mix) <= 5 * se), (t.random_donor_effect, mix, se)
    assert np.any(t.random_donor_effect > 5 * t.random_donor_effect_stderr)  # an uninformed donor does harm
    d = t.to_dict()
    assert d["random_donor_effect"] == t.random_donor_effect.tolist()
    assert np.array_equal(table_from_dict(d).random_donor, t.random_donor)
    assert "random donor" in t.to_markdown() and "0 (no-op)" in t.to_markdown()


def test_tables_name_the_tensor_patched_how_and_their_seed_and_sizes(model):
    transplant = model_state_patching_table(model, DATA, n_contexts=256, seed=5, depths=[1])
    keys = key_patching_table(model, DATA, n_contexts=256, seed=5, depths=[1])
    inj = model_injection_table(model, DATA, n_contexts=256, seed=5, depths=[1], layers=[2], mean_contexts=512)
    for t, patched, how in ((transplant, "workspace.{l}", "replaced by the donor's"),
                            (keys, "layers.{l}.keys", "replaced by the donor's"),
                            (inj, "workspace.{l}", "replaced by the mean workspace of the donor's prefix")):
        d = t.to_dict()
        assert (d["patched"], d["how"], d["seed"], d["n"]) == (patched, how, 5, 256)
        assert t.to_markdown().splitlines()[0].split(": ", 1)[1].startswith(f"{patched} {how}")
    assert inj.to_dict()["mean_samples"] == 512 and "mean states of 512 contexts" in inj.to_markdown()


def test_one_slot_transplant_keeps_the_other_slots(model):
    """Slot 1 of workspace.{l} holds layer 1's reading: transplanting it alone at l = 3 gives the readout the
    donor's first reading beside the target's later ones, which does harm, and not the whole transplant's."""
    one = model_state_patching_table(model, DATA, n_contexts=512, seed=1, layers=[3], depths=[1], slot=1)
    whole = model_state_patching_table(model, DATA, n_contexts=512, seed=1, layers=[1, 3], depths=[1])
    assert one.to_dict()["patched"] == "workspace.{l} slot 1"
    assert one.effect[0, 0] > 5 * one.effect_stderr[0, 0]
    assert one.effect[0, 0] != whole.effect[1, 0]
    with pytest.raises(InputError, match="slot must be an integer in 1..3"):
        model_state_patching_table(model, DATA, n_contexts=16, layers=[3], slot=4)
    with pytest.raises(InputError, match="slot must be an integer in 1..1"):
        model_state_patching_table(model, DATA, n_contexts=16, layers=[1, 3], slot=2)


def test_steering_sweeps_the_scale_from_no_change_to_the_donor_s_prefix(model):
    """Scale 0 is the unpatched model, bit for bit; scale 1 moves a target at its own prefix's mean onto the donor's,
    so the path model decodes the donor's prefix; the table says what was added and where."""
    from bridges.patching import steering_table

    t = steering_table(model, DATA, scales=(0, 0.5, 1, 2), n_contexts=512, mean_contexts=1024, seed=0)
    assert t.scales == (0.0, 0.5, 1.0, 2.0) and t.loss.shape == (3, 4)
    assert np.all(t.effect[:, 0] == 0.0) and np.all(t.prefix_accuracy[:, 0] == 0.0)
    assert np.all(t.prefix_accuracy[:, 2] > 0.9) and np.all(t.prefix_accuracy[:, 1] < t.prefix_accuracy[:, 2])
    d = t.to_dict()
    assert (d["patched"], d["seed"], d["n"], d["mean_samples"]) == ("workspace.{l}", 0, 512, 1024)
    assert d["how"].startswith("added: scale * (Phi_bar_l(donor's prefix) - Phi_bar_l(own prefix))")
    assert t.to_markdown().startswith("steering: workspace.{l} added")
    for bad, word in (((), "at least one"), ((1, 1), "distinct"), ((float("nan"),), "finite"), ("x", "numbers")):
        with pytest.raises(InputError, match=word):
            steering_table(model, DATA, scales=bad, n_contexts=16, mean_contexts=64)


# --- fv intervene ------------------------------------------------------------------------------------------
def test_fv_intervene_baselines_slot_and_steering(run_folder, capsys):
    import json

    from bridges.cli import main

    assert main(["intervene", str(run_folder), "--table", "all", "--baselines", "--contexts", "64",
                 "--mean-contexts", "256", "--scales", "1/2,2", "--seed", "3", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["seed"], d["contexts"], d["mean_contexts"], d["theory_samples"]) == (3, 64, 256, None)
    for kind in ("transplant", "keys"):
        t = d[kind]["model"]
        assert t["depths"][0] == 0 and len(t["random_donor"]) == len(t["layers"]) and t["seed"] == 3
        assert t["n"] == 64 and t["patched"] and t["how"]
    assert d["steering"]["model"]["scales"] == [0.5, 2.0] and d["steering"]["model"]["mean_samples"] == 256
    assert d["injection"]["model"]["stderr_includes"].startswith("targets and the mean state")
    assert main(["intervene", str(run_folder), "--table", "transplant", "--slot", "1", "--layers", "2",
                 "--contexts", "32"]) == 0
    assert "transplant: workspace.{l} slot 1 replaced by the donor's (the other slots kept)" in capsys.readouterr().out
    assert main(["intervene", str(run_folder), "--table", "steering", "--depths", "2", "--contexts", "32",
                 "--mean-contexts", "256", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["steering"]["model"]["depth_j"] == 2


@pytest.mark.parametrize("args, message", [
    (["--table", "injection", "--baselines"], "--baselines adds the no-op and random-donor baselines"),
    (["--table", "keys", "--slot", "1"], "--slot transplants one slot"),
    (["--table", "both", "--scales", "1"], "--scales sets the steering's scales"),
    (["--table", "steering", "--scales", "1,1"], "--scales must be distinct"),
    (["--table", "steering", "--scales", "1,,2"], "--scales"),
    (["--table", "transplant", "--slot", "5"], "slot must be an integer in 1..1"),
    (["--table", "steering", "--depths", "1,2"], "--table steering takes one divergence depth"),
])
def test_fv_intervene_refuses_baselines_slot_and_scales_in_one_line(run_folder, capsys, args, message):
    from bridges.cli import main

    assert main(["intervene", str(run_folder), "--contexts", "16", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0], err


def test_the_api_tour_s_load_run_example_runs(run_folder, capsys):
    """docs/api-tour.md documents load_run (what it returns) with an example; the example runs on a finished run."""
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "api-tour.md").read_text()
    section = page[page.index("### Loading a finished run"):]
    assert "load_run(run_dir)" in section and "TrainResult" in section
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    code = code.replace('"runs/A-tree-K3-B2-N128-s0-302d5e5bd6"', repr(str(run_folder)))
    code = code.replace("mean_contexts=4096", "n_contexts=64, mean_contexts=256").replace("n_contexts=2048", "n_contexts=64")
    code = code.replace("slot=1)", "slot=1, n_contexts=32)").replace("(model, data, baselines=True)", "(model, data, baselines=True, n_contexts=32)")
    code = code.replace("scales=(0.5, 1, 2, 4))", "scales=(0.5, 1, 2, 4), n_contexts=32, mean_contexts=256)")
    namespace = {}
    exec(compile(code, "api-tour.md", "exec"), namespace)
    assert namespace["t"].to_dict()["seed"] == 0 and "transplant: workspace.{l}" in capsys.readouterr().out


def test_model_t_tables_name_its_hooks():
    from tests.bridges.test_transformer import DATA as T_DATA, _model

    m = _model()
    keys = key_patching_table(m, T_DATA, n_contexts=16, depths=(1,))
    attention = model_state_patching_table(m, T_DATA, n_contexts=16, depths=(1,), site="attention")
    workspace = model_state_patching_table(m, T_DATA, n_contexts=16, depths=(1,))
    assert keys.to_dict()["patched"] == "blocks.{l}.attn.hook_k at the context tokens (the summary token's own key kept)"
    assert attention.to_dict()["patched"].startswith("blocks.{1..l}.hook_attn_out")
    assert "hook_resid_post" in workspace.to_dict()["patched"]
    assert workspace.to_markdown().startswith("transplant: workspace.{l} (the summary token's residual after block l")
