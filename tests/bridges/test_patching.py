"""Key patching (THEORY.md section 8) on hand-built and random models, beside fvnum's theory table."""
import math

import numpy as np
import pytest
import torch
from fvnum.patching.keys import PatchingTable

from bridges.runs.config import DataConfig, ModelConfig
from bridges.training.data import ContextSampler, step_generator
from bridges.models.networks import build_model, path_model
from bridges.patching.keys import (
    donor_signs, key_patching_table, path_bayes_decoder, patched_losses, theory_patching_table, unpatched_losses,
)
from bridges.models.taps import patch, taps

torch.set_num_threads(1)


def test_donor_signs_agree_above_j_flip_at_j_and_are_uniform_below():
    K, n = 5, 4000
    s = ContextSampler(DataConfig(depth=K)).sample_signs(n, step_generator(0, 0, 0))
    for j in range(1, K + 1):
        d = donor_signs(s, j, step_generator(1, 0, j))
        assert d.dtype == torch.int8 and d.shape == (n, K)
        assert torch.equal(d[:, : j - 1], s[:, : j - 1]) and torch.equal(d[:, j - 1], -s[:, j - 1])
        below = d[:, j:].double()  # uniform +-1, independent of the target's own signs there
        if below.numel():
            assert below.mean(0).abs().max() <= 5 / math.sqrt(n)
            assert (below * s[:, j:].double()).mean(0).abs().max() <= 5 / math.sqrt(n)
    with pytest.raises(ValueError, match=r"divergence depth j must be an integer in 1..K=5, got 6"):
        donor_signs(s, 6, step_generator(1, 0, 0))
    with pytest.raises(ValueError, match="got 0"):
        donor_signs(s, 0, step_generator(1, 0, 0))


def test_path_model_patching_is_harmless_exactly_when_l_le_j_and_costly_otherwise():
    """Sign-decoder path model at N = 1024 (the smallest scale a_3 = 0.5 is ~12 noise units): a donor of depth j
    routes like its target above j, so the keys of layers l <= j are the target's own and every context
    loses exactly what it loses unpatched; for l > j the target reads a node off its path."""
    data = DataConfig(depth=3, n_tokens=1024)
    model = path_model(data, 3)
    n = 512
    t = key_patching_table(model, data, n_contexts=n, seed=3)
    base = unpatched_losses(model, data, n_contexts=n, seed=3)
    assert t.loss.shape == (3, 3) and t.layers == (1, 2, 3) and t.depths == (1, 2, 3) and t.metric == "theta"
    assert t.unpatched.value == base.mean() and np.all(t.unpatched_by_depth == base.mean())
    for l in (1, 2, 3):
        for j in (1, 2, 3):
            losses = patched_losses(model, data, l, j, n_contexts=n, seed=3)
            assert losses.mean() == t.loss[l - 1, j - 1]  # the same contexts as the table's cell
            if l <= j:
                assert np.array_equal(losses, base)
                assert t.effect[l - 1, j - 1] == 0 and t.effect_stderr[l - 1, j - 1] == 0
            else:
                assert t.effect[l - 1, j - 1] > 10 * t.effect_stderr[l - 1, j - 1] > 0
    # more costly the earlier the layer (THEORY.md section 8): j = 1, layers 2 and 3, paired on the same contexts
    d = patched_losses(model, data, 2, 1, n_contexts=n, seed=3) - patched_losses(model, data, 3, 1, n_contexts=n,
                                                                                  seed=3)
    assert d.mean() > 5 * d.std(ddof=1) / math.sqrt(n)


def test_bayes_path_model_matches_the_theory_table_within_five_standard_errors():
    """With fvnum's own decoder as its readout, the path model and fvnum's patched path strategy have the same
    law under the tokens channel (fvnum samples the statistic exactly in law), so every cell agrees within
    5 combined standard errors. N = 32 so that routing errors (and patches at l <= j that matter) occur."""
    data = DataConfig(depth=4, n_tokens=32)
    model = path_model(data, 3, path_bayes_decoder(data))
    m = key_patching_table(model, data, n_contexts=4096, seed=1)
    th = theory_patching_table(data, 3, samples=20_000, seed=1)
    assert m.loss.shape == th.loss.shape == (3, 4) and m.layers == th.layers and m.depths == th.depths
    z = (m.loss - th.loss) / np.sqrt(m.stderr**2 + th.stderr**2)
    assert np.abs(z).max() <= 5, z
    assert abs(m.unpatched.value - th.unpatched.value) <= 5 * math.hypot(m.unpatched.stderr, th.unpatched.stderr)
    assert m.effect[1, 0] > 10 * m.effect_stderr[1, 0]  # the pattern is there, not just agreement of noise
    assert type(m) is type(th) is PatchingTable  # one table type, one markdown writer, for theory and models
    assert set(th.to_dict()) <= set(m.to_dict())  # same layout, for side-by-side reports
    assert set(m.to_dict()) - set(th.to_dict()) == {"effect", "effect_stderr"}  # paired only for models
    assert m.to_markdown().splitlines()[2:4] == th.to_markdown().splitlines()[2:4]  # after the header line
    assert m.to_markdown().startswith("key patching: layers.{l}.keys replaced by the donor's")
    assert th.to_markdown().startswith("key patching: layer l's rows")
    assert "effect (patched - unpatched, paired):" in m.to_markdown()
    assert "effect" not in th.to_markdown() and th.metric == m.metric == "theta"


def test_one_layer_models_give_one_row_and_the_first_layer_patch_never_matters():
    """Layer 1's keys see an empty workspace, so a donor (same tokens) has the target's keys: effect exactly 0."""
    data = DataConfig(depth=3, n_tokens=16)
    torch.manual_seed(0)
    for name, readout in (("B", "decode"), ("C", "decode"), ("A", "generic")):
        model = build_model((data, ModelConfig(name, 3, mlp_width=8, readout=readout)))
        t = key_patching_table(model, data, n_contexts=64, seed=0)
        assert t.loss.shape == (model.n_layers, 3)
        assert np.all(t.effect[0] == 0)
        assert t.metric == ("query" if readout == "generic" else "theta")
        assert set(t.to_dict()["depths"]) == {1, 2, 3}


def test_same_seed_same_numbers_and_no_hooks_left():
    data = DataConfig(depth=3, n_tokens=16)
    torch.manual_seed(1)
    model = build_model((data, ModelConfig("A", 3, mlp_width=8)))
    a = key_patching_table(model, data, n_contexts=40, seed=5, depths=(1, 3))
    b = key_patching_table(model, data, n_contexts=40, seed=5, depths=(3,))
    c = key_patching_table(model, data, n_contexts=40, seed=6, depths=(1, 3))
    assert np.array_equal(a.loss[:, 1], b.loss[:, 0])  # columns do not depend on which others are asked for
    assert not np.array_equal(a.loss, c.loss)
    assert all(not t._forward_hooks for t in taps(model).values())


def test_patch_errors_on_unknown_taps_and_removes_its_hooks_when_the_body_raises():
    data = DataConfig(depth=3, n_tokens=16)
    model = path_model(data, 2)
    c = ContextSampler(data).sample(4, step_generator(0, 0, 0))
    with pytest.raises(ValueError, match="unknown tap 'layers.3.keys'"):
        with patch(model, "layers.3.keys", torch.zeros(4, 16, 1)):
            model(c.x, c.y, c.x_q)
    with pytest.raises(KeyError, match="inside"):
        with patch(model, "layers.2.keys", torch.zeros(4, 16, 1)):
            model(c.x, c.y, c.x_q)
            raise KeyError("inside")
    assert all(not t._forward_hooks for t in taps(model).values())
    out = model(c.x, c.y, c.x_q)  # unpatched again: layer 2 reads its own node, not zeros
    assert torch.all(out.workspace[:, 1] != 0)


def test_bad_inputs_are_one_line_value_errors():
    data = DataConfig(depth=3, n_tokens=16)
    model = path_model(data, 2)
    cases = [
        (lambda: patched_losses(model, data, 0, 1, n_contexts=8), "layer must be an integer in 1..L=2, got 0"),
        (lambda: patched_losses(model, data, 3, 1, n_contexts=8), "got 3"),
        (lambda: patched_losses(model, data, 1, 4, n_contexts=8),
         r"divergence depth j must be an integer in 0\.\.K=3 \(0: the no-op control, donor = target\), got 4"),
        (lambda: patched_losses(model, data, 1, True, n_contexts=8), "got True"),
        (lambda: key_patching_table(model, data, n_contexts=1), "n_contexts must be an integer >= 2"),
        (lambda: key_patching_table(model, data, depths=(-1,)), "got -1"),  # 0 is the no-op control
        (lambda: key_patching_table(model, data, seed=-1), "seed must be an integer >= 0"),
        (lambda: key_patching_table(model, DataConfig(depth=4)), "model works in D = 7 but the data have D = 15"),
        (lambda: key_patching_table(model, DataConfig(prior="gaussian", depth=3)), "needs the tree prior"),
        (lambda: theory_patching_table(DataConfig(prior="gaussian", depth=3), 2, samples=10), "needs the tree prior"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message) as info:
            call()
        assert "\n" not in str(info.value)
