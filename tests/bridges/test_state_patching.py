"""Function-vector interventions on models (THEORY.md section 9b) through the workspace taps, beside the theory."""
import math

import numpy as np
import pytest
import torch

import fvnum
from fvnum.patching.keys import PatchingTable
from fvnum.patching.state_tables import InjectionTable
from fvnum.patching.state import injection_table as theory_injection
from fvnum.patching.state import state_patching_table as theory_transplant

import bridges.patching as patching
from bridges.models.networks import build_model, path_model
from bridges.models.taps import patch, taps
from bridges.patching.keys import path_bayes_decoder
from bridges.patching.state import (model_injection_table, model_mean_state, model_state_patching_table,
                                    transplanted_losses)
from bridges.runs.config import DataConfig, ModelConfig
from bridges.training.data import fv_prior

torch.set_num_threads(1)


def test_bayes_path_model_transplant_matches_the_theory_table_within_five_standard_errors():
    """fvnum's decoder as the readout: the path model and fvnum's path strategy have the same law under the tokens
    channel, so the transplant tables agree cell by cell; N = 32 so that routing errors occur."""
    data = DataConfig(depth=4, n_tokens=32)
    model = path_model(data, 3, path_bayes_decoder(data))
    m = model_state_patching_table(model, data, n_contexts=4096, seed=1)
    th = theory_transplant(fv_prior(data), "path", 3, fvnum.tokens(32, s2=data.s2), samples=20_000, seed=1)
    assert type(m) is type(th) is PatchingTable and m.intervention == th.intervention == "transplant"
    assert m.loss.shape == th.loss.shape == (3, 4) and m.layers == th.layers and m.depths == th.depths
    z = (m.loss - th.loss) / np.sqrt(m.stderr**2 + th.stderr**2)
    assert np.abs(z).max() <= 5, z
    assert m.effect[2, 0] > 10 * m.effect_stderr[2, 0]  # the pattern is there, not agreement of noise alone
    assert np.all(np.abs(m.effect[0, 1:]) <= 5 * m.effect_stderr[0, 1:] + 1e-12)  # l < j: nearly harmless


def test_a_sign_routed_path_model_transplant_is_exact_where_the_donor_reads_the_same():
    """N = 1024: the sign decoder routes without error; the donor's readings of layers l < j are not the target's
    floats (other values y), but the routing and the sign readout are: effect exactly 0 where j > l."""
    data = DataConfig(depth=3, n_tokens=1024)
    model = path_model(data, 3)
    t = model_state_patching_table(model, data, n_contexts=256, seed=3)
    for a, l in enumerate(t.layers):
        for b, j in enumerate(t.depths):
            if j > l:
                assert t.effect[a, b] == 0.0
            else:
                assert t.effect[a, b] > 10 * t.effect_stderr[a, b]
    cell = transplanted_losses(model, data, 2, 1, n_contexts=256, seed=3)
    assert cell.mean() == t.loss[1, 0]


def test_a_path_model_follows_an_injected_prefix_like_the_theory():
    data = DataConfig(depth=3, n_tokens=1024)
    model = path_model(data, 3, path_bayes_decoder(data))
    m = model_injection_table(model, data, n_contexts=512, seed=0, mean_contexts=2048)
    th = theory_injection(fv_prior(data), "path", 3, fvnum.tokens(1024, s2=data.s2), samples=4000, seed=0)
    assert isinstance(m, InjectionTable) and m.strategy == "model"
    for a, l in enumerate(m.layers):
        for b, j in enumerate(m.depths):
            if j <= l:
                assert m.prefix_accuracy[a, b] >= 0.98 and th.prefix_accuracy[a, b] >= 0.98
                assert abs(m.loss[a, b] - th.loss[a, b]) <= 5 * math.hypot(m.stderr[a, b], th.stderr[a, b]) + 0.02
            else:
                assert np.isnan(m.prefix_accuracy[a, b])
    means = model_mean_state(model, data, n_contexts=2048, seed=0)
    assert means.means[3].shape == (8, 3) and means.counts[3].sum() == 2048
    assert np.allclose(np.sign(means.of(1, 0)), [1.0]) and np.allclose(np.sign(means.of(1, 1)), [-1.0])


def test_every_model_gets_its_tables_one_layer_models_one_row_and_no_hooks_left():
    data = DataConfig(depth=3, n_tokens=16)
    torch.manual_seed(0)
    for name, readout in (("A", "decode"), ("B", "decode"), ("C", "decode"), ("A", "generic")):
        model = build_model((data, ModelConfig(name, 3, mlp_width=8, readout=readout)))
        t = model_state_patching_table(model, data, n_contexts=64, seed=0)
        i = model_injection_table(model, data, n_contexts=64, seed=0, mean_contexts=256)
        assert t.loss.shape == (model.n_layers, 3) and len(i.layers) == model.n_layers
        assert t.metric == i.metric == ("query" if readout == "generic" else "theta")
        assert np.isnan(i.prefix_accuracy).all() == (readout == "generic")
        assert all(not tap._forward_hooks for tap in taps(model).values())
    assert patching.model_state_patching_table is model_state_patching_table and patching.key_patching_table


def test_same_seed_same_numbers():
    data = DataConfig(depth=3, n_tokens=16)
    torch.manual_seed(1)
    model = build_model((data, ModelConfig("A", 3, mlp_width=8)))
    a = model_state_patching_table(model, data, n_contexts=64, seed=5)
    b = model_state_patching_table(model, data, n_contexts=64, seed=5)
    c = model_state_patching_table(model, data, n_contexts=64, seed=6)
    assert np.array_equal(a.loss, b.loss) and not np.array_equal(a.loss, c.loss)


def test_leaf_index_is_fvnum_s_numbering():
    from bridges.training.data import leaf_index
    from fvnum.priors.tree import numeric_prior

    spec = numeric_prior(fv_prior(DataConfig(depth=4)))
    leaves = np.arange(16)
    signs = torch.as_tensor(spec.signs(leaves), dtype=torch.int8)
    assert np.array_equal(leaf_index(signs).numpy(), leaves)


def test_bad_inputs_and_a_patch_that_never_ran_are_refused():
    data = DataConfig(depth=3, n_tokens=16)
    model = build_model((data, ModelConfig("A", 3, mlp_width=8)))
    with pytest.raises(ValueError, match="layer must be an integer in 1..L=3, got 4"):
        model_state_patching_table(model, data, n_contexts=8, layers=(4,))
    with pytest.raises(ValueError, match="divergence depth j must be an integer in 1..K=3, got 0"):
        model_injection_table(model, data, n_contexts=8, depths=(0,))
    with pytest.raises(ValueError, match="needs the tree prior"):
        model_state_patching_table(model, DataConfig(prior="gaussian", depth=3), n_contexts=8)
    with pytest.raises(ValueError, match="n_contexts must be an integer >= 2"):
        model_injection_table(model, data, n_contexts=1)
    with pytest.raises(ValueError, match="no context among the mean state"):
        model_injection_table(model, data, n_contexts=16, mean_contexts=2)
    with pytest.raises(RuntimeError, match="never ran"):  # the tap refuses a patch no forward pass reached
        with patch(model, "workspace.2", torch.zeros(4, 3)):
            pass


# --- fv intervene --------------------------------------------------------------------------------------------
def test_fv_intervene_json_is_the_python_api_s_tables(run_folder, capsys):
    import json

    from bridges.analysis.audit import load_run
    from bridges.cli import main

    assert main(["intervene", str(run_folder), "--contexts", "64", "--mean-contexts", "256", "--theory",
                 "--samples", "500", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["transplant"]) == set(d["injection"]) == {"model", "path"}
    assert d["transplant"]["model"]["intervention"] == "transplant" and d["injection"]["path"]["intervention"] == "injection"
    run = load_run(run_folder)
    again = model_state_patching_table(run.model, run.config.data, n_contexts=64, seed=0)
    assert np.allclose(np.array(d["transplant"]["model"]["loss"]), again.loss, rtol=1e-12)
    assert main(["intervene", str(run_folder), "--table", "injection", "--contexts", "32", "--layers", "2",
                 "--depths", "1,2"]) == 0
    text = capsys.readouterr().out
    assert "prefix accuracy" in text and "transplant" not in text


@pytest.mark.parametrize("args, message", [
    (["--depths", "1,7"], "divergence depth j must be an integer in 0..K=3 (0: the no-op control, donor = target), got 7"),
    (["--depths", "x"], "--depths"),
    (["--contexts", "1"], "--contexts"),
    (["--contexts", "10000000", "--mean-contexts", "10000000"], "would take about"),
])
def test_fv_intervene_refuses_in_one_line(run_folder, capsys, args, message):
    from bridges.cli import main

    assert main(["--max-seconds", "60", "intervene", str(run_folder), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0], err


def test_fv_intervene_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    from bridges.cli import main

    assert main(["intervene", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not an fv train run folder" in err[0]


def test_model_injection_stderr_covers_the_spread_of_the_mean_states_across_their_seeds():
    """The same targets, mean workspaces of six seeds: the loss's sd across them is within the reported standard
    error's scale, which holds the mean state's own error (the targets' stderr alone is far smaller)."""
    data = DataConfig(depth=3, n_tokens=32)
    model = path_model(data, 3, path_bayes_decoder(data))
    tables = [model_injection_table(model, data, n_contexts=512, seed=0, layers=[3], depths=[1],
                                    means=model_mean_state(model, data, n_contexts=128, seed=s, layers=[3]))
              for s in range(1, 7)]
    loss = np.array([t.loss[0, 0] for t in tables])
    stderr = np.median([t.stderr[0, 0] for t in tables])
    assert loss.std(ddof=1) < 3 * stderr and stderr < 5 * loss.std(ddof=1)
    assert tables[0].to_dict()["stderr_includes"].startswith("targets and the mean state")
    assert tables[0].to_dict()["patched"] == "workspace.{l}" and tables[0].to_dict()["seed"] == 0
