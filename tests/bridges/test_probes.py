"""Function-vector probes (THEORY.md section 9) on plain arrays, the hand-built path model and the theory."""
import math

import numpy as np
import pytest
import torch

from bridges.runs.config import DataConfig, ModelConfig
from bridges.models.networks import build_model, path_model
from bridges.analysis.probes import linear_probe, prefix_labels, probe_layers, theory_probes, workspace_probes

torch.set_num_threads(1)

# N = 256 at depth 4: tau ~ 0.086, the smallest read scale a_3 = 0.5 is ~6 noise units, so the path is
# decoded correctly in all but ~1e-8 of the contexts.
DATA = DataConfig(depth=4, n_tokens=256)
N_CONTEXTS = 2048


def _at_chance(acc: float, classes: int, n_test: int) -> bool:
    p = 1 / classes
    return abs(acc - p) <= 5 * math.sqrt(p * (1 - p) / n_test)


def test_prefix_labels_follow_the_leaf_index_convention():
    signs = np.array([[1, 1, 1], [1, -1, 1], [-1, 1, -1], [-1, -1, -1]])
    assert prefix_labels(signs, 3).tolist() == [0, 2, 5, 7]
    assert prefix_labels(signs, 1).tolist() == [0, 0, 1, 1]


def test_random_features_stay_at_chance_and_a_planted_sign_is_found():
    rng = np.random.default_rng(0)
    n = 4000
    signs = rng.choice([-1, 1], size=(n, 3))
    noise = rng.standard_normal((n, 5))
    for m in (1, 2, 3):
        p = linear_probe(noise, prefix_labels(signs, m), seed=1)
        assert _at_chance(p.accuracy, 2**m, p.n_test)
    planted = np.hstack([noise, signs[:, :2] + 0.1 * rng.standard_normal((n, 2))])
    out = probe_layers([noise, planted], signs, seed=2, control=True)
    assert out["prefix"][1][0] == 1.0 and _at_chance(out["prefix"][0][0], 2, n - n // 2)
    assert out["sign"][1][:2] == [1.0, 1.0] and _at_chance(out["sign"][1][2], 2, n - n // 2)
    assert all(_at_chance(acc, 2**l, n - n // 2) for l, (acc, _, _) in enumerate(out["control"], start=1))
    with pytest.raises(ValueError, match="probe needs features"):
        linear_probe(noise, signs[:10, 0])


def _check_path_pattern(out: dict, n: int):
    """Workspace after layer l: prefix s_1..s_l decoded (accuracy ~1), s_{l+1} at chance, control at chance."""
    n_test = n - n // 2
    assert out["layers"] == 3 and len(out["prefix"]) == 3
    for l in (1, 2, 3):
        acc, se, _ = out["prefix"][l - 1]
        assert acc >= 0.995, (l, acc)
        assert all(a >= 0.995 for a in out["sign"][l - 1][:l])
        assert _at_chance(out["sign"][l - 1][l], 2, n_test), (l, out["sign"][l - 1])
        assert _at_chance(out["control"][l - 1][0], 2**l, n_test), (l, out["control"][l - 1])


def test_path_model_workspace_resolves_the_path_prefix_layer_by_layer_and_theory_agrees():
    model = path_model(DATA, 3)
    out = workspace_probes(model, DATA, n_contexts=N_CONTEXTS, seed=0)
    assert out["n"] == N_CONTEXTS
    _check_path_pattern(out, N_CONTEXTS)
    theory = theory_probes(DATA, 3, samples=N_CONTEXTS, seed=0)
    _check_path_pattern(theory, N_CONTEXTS)
    for (a, sa, _), (b, sb, _) in zip(out["prefix"], theory["prefix"]):
        assert abs(a - b) <= 5 * math.hypot(sa, sb)
    assert workspace_probes(model, DATA, n_contexts=N_CONTEXTS, seed=0) == out  # same seed, same numbers


def test_one_layer_models_have_one_workspace_and_bad_inputs_raise():
    torch.manual_seed(0)
    data = DataConfig(depth=3, n_tokens=16)
    for name in ("B", "C"):
        out = workspace_probes(build_model((data, ModelConfig(name, 3, mlp_width=8))), data, n_contexts=64, seed=0)
        assert out["layers"] == 1 and len(out["prefix"]) == 1 and len(out["sign"][0]) == 3
    model = path_model(data, 2)
    with pytest.raises(ValueError, match="needs the tree prior"):
        workspace_probes(model, DataConfig(prior="gaussian", depth=3), n_contexts=64)
    with pytest.raises(ValueError, match="n_contexts must be >= 4"):
        workspace_probes(model, data, n_contexts=3)
    with pytest.raises(ValueError, match="needs the tree prior"):
        theory_probes(DataConfig(prior="gaussian", depth=3), 2, samples=64)


def test_final_prefix_decodes_levels_a_one_layer_state_holds():
    """From a state that holds s_1 and s_2 exactly (and nothing of s_3), prefixes of length 1 and 2 decode
    and length 3 does not."""
    import numpy as np

    from bridges.analysis.probes import probe_layers

    rng = np.random.default_rng(0)
    signs = rng.choice([1, -1], size=(4000, 3))
    state = signs[:, :2] + 0.05 * rng.normal(size=(4000, 2))
    out = probe_layers([state], signs)
    (a1, _, _), (a2, _, _), (a3, se3, c3) = out["final_prefix"]
    assert a1 > 0.99 and a2 > 0.99
    assert a3 < 0.5 + 5 * se3  # s_3 unknown: at most half of the 8 prefixes can be right


def test_probe_tables_are_typed_with_their_dict_layout_and_a_frame():
    """``probe_layers`` returns a ``ProbeTable``: ``to_dict()`` is the run store's layout (it round-trips),
    ``table["prefix"]`` reads it as before, ``to_frame()`` holds one row per layer."""
    import pandas as pd

    from bridges.analysis.probes import ProbeTable

    rng = np.random.default_rng(0)
    signs = rng.choice([-1.0, 1.0], size=(400, 2))
    table = probe_layers([signs[:, :1], signs], signs, seed=0, control=True)
    assert isinstance(table, ProbeTable) and (table.n, table.layers) == (400, 2)
    assert table["prefix"] == table.prefix and "control" in table and ProbeTable.from_dict(table.to_dict()) == table
    frame = table.to_frame()
    assert isinstance(frame, pd.DataFrame) and list(frame["layer"]) == [1, 2]
    assert list(frame["prefix_accuracy"]) == [row[0] for row in table.prefix]
    assert {"control_accuracy", "sign_1", "sign_2"} <= set(frame.columns)


@pytest.mark.heavy
def test_prediction_policy_probes_are_the_probes_of_its_trace_readings():
    """``prediction_probes`` is ``probe_layers`` on the search's readings ``phi_1..phi_l`` (same samples, same
    seed), its first reading resolves ``s_1`` (the root is the first thing every adaptive policy reads), and the
    shuffled control stays at chance."""
    from fvnum.keys.adaptive import adaptive_keyed_trace
    from fvnum.mc.channels import tokens
    from fvnum.priors.tree import numeric_prior

    from bridges.training.data import fv_prior
    from bridges.analysis.probes import prediction_probes

    data = DataConfig(prior="tree", depth=3, alpha=0.6, n_tokens=64, s2=0.01)
    table = prediction_probes(data, 2, samples=400, seed=1)
    trace = adaptive_keyed_trace(fv_prior(data), 2, tokens(64, 0.01, keys="weighted"), samples=400, seed=1)
    signs = numeric_prior(fv_prior(data)).signs(trace.leaves)
    direct = probe_layers([trace.phi[:, :1], trace.phi[:, :2]], signs, seed=1, control=True)
    assert table.to_dict() == direct.to_dict()
    acc, se, chance = table.prefix[0]
    assert acc > chance + 5 * se + 0.2
    for c_acc, c_se, c_chance in table.control:
        assert abs(c_acc - c_chance) < 5 * max(c_se, 0.02)
    with pytest.raises(ValueError, match="samples"):
        prediction_probes(data, 2, samples=2)
    with pytest.raises(ValueError, match="state must be one of readings, posterior"):
        prediction_probes(data, 2, samples=400, state="keys")
    posterior = prediction_probes(data, 2, samples=400, seed=1, state="posterior")
    by_hand = probe_layers([trace.theta_hat[:, 0], trace.theta_hat[:, 1]], signs, seed=1, control=True)
    assert posterior.to_dict() == by_hand.to_dict()
