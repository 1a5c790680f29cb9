"""The query-key router of Model A (THEORY.md section 7b, ``--router qk``): its keys factorise as
``<q_l(p), kappa_l(x_i)>``; with ``r = D``, ``kappa(x) = x / (x^T Q x + c)`` and ``q_l`` the weighted-key policy's
row, Model A reads exactly what that policy reads; the default router's run keys are unchanged; it trains, prices
and patches as every router does."""
import numpy as np
import pytest
import torch

from bridges.models.networks import FunctionReadout, QKKeys, WorkspaceModel, build_model
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from fvsym import TreePrior

DATA = DataConfig(prior="tree", depth=3, alpha=0.5, n_tokens=32)


def test_q_equal_w_with_the_weighted_key_is_the_keyed_policy_exactly():
    """A with the qk router whose queries are the keyed policy's rows (chosen from the readings the model itself
    wrote) and whose token keys are the policy's weighted keys reads, layer by layer, the weighted key's reading of
    the policy's row (to float64 rounding), so it is the policy."""
    from fvnum.keys.nonadaptive import best_nonadaptive_keyed
    from fvnum.keys.contexts import _Policy, contexts, family_readings
    from fvnum.mc.channels import tokens
    from fvnum.priors.tree import numeric_prior

    prior, budget, n, N, s2 = TreePrior(3, "1/2"), 3, 24, 32, 0.01
    spec = numeric_prior(prior)
    first = best_nonadaptive_keyed(spec, 1, tokens(N, s2, keys="weighted"), seed=0)
    policy = _Policy(prior, "weighted", first, n, N, s2, 0, 25)
    leaves, X, eps = contexts(spec, n, N, s2, seed=0)
    y = np.einsum("nid,nd->ni", X, spec.thetas(leaves)) + eps
    phi_policy, rows_policy = policy.run(X, y, budget)
    Q, c = first.keys.Q, first.keys.c

    def kappa(x):  # the weighted key's token part, x / (x^T Q x + c): (batch, N, 1, D)
        w = x / ((x**2) @ torch.as_tensor(Q, dtype=x.dtype) + c).unsqueeze(-1)
        return w.unsqueeze(2)

    asked = {}

    def query(layer):
        def q(p):  # the policy's row of this layer after the readings the model wrote: (batch, 1, D)
            rows = policy.rows(p[:, : layer - 1].detach().numpy().astype(float))[:, layer - 1]
            asked[layer] = rows
            return torch.as_tensor(rows, dtype=p.dtype).unsqueeze(1)
        return q

    D = spec.dim
    keys = [QKKeys(D, budget, 1, 8, 1, D, l, query=query(l), kappa=kappa) for l in range(1, budget + 1)]
    model = WorkspaceModel(D, 1, keys, FunctionReadout(lambda p: p.new_zeros(p.shape[0], D))).double()
    with torch.no_grad():
        phi_model = model.encode(torch.as_tensor(X), torch.as_tensor(y)).numpy()
    for layer in range(1, budget + 1):  # each reading is the weighted key's reading of the policy's row: <q, m>
        exact = family_readings(first.keys, asked[layer], X, y)
        assert np.allclose(phi_model[:, layer - 1], exact, rtol=0, atol=1e-13), layer
    assert np.array_equal(asked[1], rows_policy[:, 0])  # layer 1: the policy's constant first row
    # against the policy run by itself: the same to float64 rounding, which the policy's per-sample search of
    # the next row amplifies (a change of 1e-16 in a reading moves its next row by ~1e-8)
    assert np.allclose(phi_model, phi_policy, rtol=0, atol=1e-6), np.abs(phi_model - phi_policy).max()
    assert len({tuple(r) for r in rows_policy[:, 1].round(6)}) > 1  # the rows do depend on the readings


def test_the_default_routers_keys_are_unchanged_and_qk_is_marked():
    a = RunConfig(DataConfig(prior="tree", depth=7, alpha=0.6, n_tokens=64),
                  ModelConfig("A", 6, readout="decode"),
                  TrainConfig(steps=30000, batch=128, lr=0.005, warmup=200, schedule="cosine", loss="theta",
                              eval_every=200, eval_batches=16, seed=0))
    assert a.key() == "A-tree-K7-B6-N64-s0-7bb66f6d84"  # the function-vectors study's run, trained before qk existed
    assert "router" not in a.model.to_dict() and "query_dim" not in a.model.to_dict()
    qk = a.replace(model=dict(router="qk"))
    assert qk.key().startswith("Aq-tree-K7-B6-N64-s0-") and qk.key() != a.key()
    assert qk.replace(model=dict(query_dim=16)).key() != qk.key()
    assert RunConfig.from_dict(qk.to_dict()) == qk  # the run's config.json reads back


@pytest.mark.parametrize("kw, match", [
    (dict(model="B", router="qk"), "applies to the adaptive models"),
    (dict(model="C", router="qk"), "applies to the adaptive models"),
    (dict(model="A", query_dim=4), "query_dim applies to router='qk' only"),
    (dict(model="A", router="qk", query_dim=0), "query_dim"),
    (dict(model="A", router="attention"), "router"),
])
def test_bad_router_options_are_one_line_errors(kw, match):
    with pytest.raises(ValueError, match=match) as info:
        ModelConfig(budget=3, **kw)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("budget, r, attention", [(1, None, "linear"), (3, None, "linear"), (3, 4, "softmax")])
def test_the_price_counts_the_qk_models_parameters(budget, r, attention):
    from bridges.prices.memory import n_parameters

    cfg = RunConfig(DATA, ModelConfig("A", budget, mlp_width=16, router="qk", query_dim=r, attention=attention))
    model = build_model(cfg)
    assert n_parameters(cfg) == sum(p.numel() for p in model.parameters())
    assert model.layers[0].keys.query(torch.zeros(2, budget)).shape == (2, 1, r or DATA.dim)


def test_a_short_qk_run_lowers_the_loss_and_patches_through_the_taps():
    from bridges.patching.keys import key_patching_table
    from bridges.patching.state import model_state_patching_table
    from bridges.training.train import train

    cfg = RunConfig(DATA, ModelConfig("A", 2, mlp_width=32, router="qk"),
                    TrainConfig(steps=300, batch=64, warmup=20, eval_every=300, eval_batches=2))
    result = train(cfg, progress=False)
    start, end, se = result.history[0][2], result.history[-1][2], result.history[-1][3]
    assert end < 0.5 * start and end + 5 * se < 1.75, (start, end, se)
    keys = key_patching_table(result.model, DATA, n_contexts=256, seed=0, depths=(1, 3))
    state = model_state_patching_table(result.model, DATA, n_contexts=256, seed=0, depths=(1, 3))
    assert keys.loss.shape == state.loss.shape == (2, 2)
    assert np.all(np.abs(keys.effect[0]) < 1e-6)  # layer 1's query is a constant: its keys are the donor's own
    assert state.effect[1, 0] > 0.1 and abs(state.effect[0, 1]) < 5 * state.effect_stderr[0, 1] + 1e-6


def test_the_studies_take_the_qk_router_for_a_alone(tmp_path):
    from bridges.cli import build_parser
    from bridges.studies.scaling import ScalingConfig
    from bridges.studies.sweep import plan
    from bridges.study_commands import scaling_config

    cfg = scaling_config(build_parser().parse_args(["scaling", "--router", "qk", "--budgets", "2", "--seeds", "1"]))
    assert cfg == ScalingConfig(router="qk", budgets=(2,), seeds=1)
    routers = {r.model.model: r.model.router for r in cfg.runs("train")}
    assert routers == {"A": "qk", "B": "mlp", "C": "mlp"}  # B and C keep their runs (and keys)
    with pytest.raises(ValueError, match="router must be one of mlp, qk"):
        ScalingConfig(router="QK")
    spec = {"command": "train", "base": {"prior": "tree", "depth": 3, "budget": 2, "steps": 10, "model": "A"},
            "grid": {"router": ["mlp", "qk"]}}
    _, cells, points = plan(spec, tmp_path)
    keys = [c.kwargs["run"]["model"].get("router", "mlp") for c in cells]
    assert keys == ["mlp", "qk"] and len(points) == 2
