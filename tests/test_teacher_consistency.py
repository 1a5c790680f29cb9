"""The keyed teacher's consistency check (studies/scaling/teacher.py, distil.json's ``teacher_consistency``): the
search re-run from the trace's state, the search's objective, the router's key error computed exactly, and the
k-NN predictor of rows from readings."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from fvnum import tokens
from fvnum.keys.adaptive import adaptive_keyed_trace
from fvnum.priors.tree import numeric_prior
from fvsym.priors import TreePrior

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("teacher_script", ROOT / "studies" / "scaling" / "teacher.py")
T = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(T)

PRIOR = TreePrior(3, "3/5")  # D = 7
SPEC = numeric_prior(PRIOR)
KW = dict(n_tokens=16, s2=0.01)


@pytest.fixture(scope="module")
def trace():
    return adaptive_keyed_trace(PRIOR, 3, tokens(KW["n_tokens"], KW["s2"]), samples=90, seed=2, canonical=True)


@pytest.mark.parametrize("layer", [1, 2])
def test_the_search_rerun_from_its_own_starts_gives_the_trace_rows_bit_for_bit(trace, layer):
    idx = np.arange(30, 75)  # a subset of the trace's samples: each sample's search is its own
    rows = T.search_rows(trace.first, SPEC, trace.rows[idx, :layer], trace.phi[idx, :layer], **KW)
    np.testing.assert_array_equal(T.canonical(rows), trace.rows[idx, layer])
    other = T.search_rows(trace.first, SPEC, trace.rows[idx, :layer], trace.phi[idx, :layer], **KW,
                          fixed=np.random.default_rng(1).standard_normal(SPEC.dim))
    assert not np.array_equal(other, rows)  # another fixed direction is another start
    np.testing.assert_allclose(np.linalg.norm(other, axis=-1), 1.0, rtol=1e-12)


def test_the_searchs_row_is_no_worse_than_its_starts_and_the_objective_ignores_sign_and_scale(trace):
    idx, layer = np.arange(40), 1
    u = np.random.default_rng(5).standard_normal((len(idx), 3, SPEC.dim))
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    rows = T.search_rows(trace.first, SPEC, trace.rows[idx, :layer], trace.phi[idx, :layer], **KW, starts=u)
    cands = np.concatenate([rows[:, None], -3.0 * rows[:, None], u], axis=1)
    before, after = T.objective(trace.first, SPEC, trace.rows[idx, :layer], trace.phi[idx, :layer], cands, **KW)
    np.testing.assert_allclose(after[:, 1], after[:, 0], rtol=1e-12)
    assert np.all(after[:, 0] <= after[:, 2:].min(1) + 1e-9)  # Adam from those starts ends lower than them
    assert np.all(after <= before[:, None] + 1e-9)  # a reading does not raise the Bayes loss in expectation


@pytest.mark.parametrize("layer", [1, 2])
def test_the_objective_is_the_traces_loss_in_expectation(trace, layer):
    """Before: the posterior's expected loss after ``layer`` readings; after the trace's own next row: after
    ``layer + 1``; each the mean of the trace's losses within 5 standard errors (the same samples)."""
    before, after = T.objective(trace.first, SPEC, trace.rows[:, :layer], trace.phi[:, :layer],
                                trace.rows[:, layer : layer + 1], **KW)
    for model, lost in ((before, trace.theta_hat[:, layer - 1]), (after[:, 0], trace.theta_hat[:, layer])):
        d = ((lost - trace.thetas) ** 2).sum(-1) - model
        assert abs(d.mean()) < 5 * d.std() / np.sqrt(len(d))


def test_errors_are_exact_in_their_three_modes():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((50, 7))
    h = rng.uniform(0.5, 2.0, 7)
    assert T.errors(w, w, h)["plain"] == 0.0
    flip = T.errors(-w, w, h)
    assert flip["plain"] == pytest.approx(4.0) and flip["sign"] == pytest.approx(0.0, abs=1e-12)
    assert flip["row_distance_mean"] == pytest.approx(2.0) and flip["row_distance_sign_mean"] == pytest.approx(0.0)
    double = T.errors(-2.0 * w, w, h)
    assert double["plain"] == pytest.approx(9.0) and double["sign"] == pytest.approx(1.0)
    assert double["direction"] == pytest.approx(0.0, abs=1e-12)
    zero = T.errors(np.zeros_like(w), w, h)
    assert zero["plain"] == zero["sign"] == zero["direction"] == pytest.approx(1.0)


def test_the_exact_key_error_is_the_routers_monte_carlo_one(trace):
    """``errors``' plain mode against the router's metric on fresh tokens (the keys of
    ``KeyedTeacher._keys``): numerator and denominator each within 5 standard errors."""
    rng = np.random.default_rng(3)
    w = trace.rows[:64, 1]
    p = w + 0.3 * rng.standard_normal(w.shape)
    x = rng.standard_normal((64, 4000, SPEC.dim))
    quad = (x**2) @ trace.keys.Q + trace.keys.c
    kt, kp = np.einsum("nid,nd->ni", x, w) / quad, np.einsum("nid,nd->ni", x, p) / quad
    h = trace.keys.h_
    for mc, exact in ((((kp - kt) ** 2), ((p - w) ** 2 * h).sum(-1).mean()), (kt**2, (w**2 * h).sum(-1).mean())):
        assert abs(mc.mean() - exact) < 5 * mc.std() / np.sqrt(mc.size)


def test_knn_recovers_a_smooth_target_and_not_noise():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (3000, 2))
    f = np.stack([np.sin(3 * x[:, 0]), np.cos(2 * x[:, 1]) * x[:, 0], x[:, 0] * x[:, 1]], axis=1)
    xt = rng.uniform(-1, 1, (300, 2))
    ft = np.stack([np.sin(3 * xt[:, 0]), np.cos(2 * xt[:, 1]) * xt[:, 0], xt[:, 0] * xt[:, 1]], axis=1)
    a, b = T.standardize(x, xt)
    h = np.ones(3)
    held = T.knn_rows(a, f, b, (1, 4))
    assert T.errors(held[1], ft, h)["plain"] < 0.01 and T.errors(held[4], ft, h)["plain"] < 0.01
    loo = T.knn_rows(a, f, None, (1,))
    assert T.errors(loo[1], f, h)["plain"] < 0.01 and not np.array_equal(loo[1], f)  # not its own neighbour
    noise, noise_t = rng.standard_normal((3000, 3)), rng.standard_normal((300, 3))
    for k in (1, 4):  # independent of x: E|mean of k draws - y|^2 / E|y|^2 = 1 + 1/k
        pred = T.knn_rows(a, noise, b, (k,))[k]
        d = ((pred - noise_t) ** 2).sum(-1)
        assert abs(d.mean() / 3.0 - (1 + 1 / k)) < 5 * d.std() / np.sqrt(len(d)) / 3.0


def test_knn_with_aligned_signs_recovers_a_target_defined_up_to_sign():
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (2000, 1))
    f = np.stack([np.ones(2000), x[:, 0], x[:, 0] ** 2], axis=1)
    y = f * rng.choice([-1.0, 1.0], (2000, 1))  # a random sign per sample
    a, b = T.standardize(x[:1800], x[1800:])
    h = np.ones(3)
    plain, aligned = (T.knn_rows(a, y[:1800], b, (8,), align_sign=s)[8] for s in (False, True))
    assert T.errors(plain, y[1800:], h)["sign"] > 0.5  # averaging signs at random cancels the rows
    assert T.errors(aligned, y[1800:], h)["sign"] < 0.01
    assert T.canonical(-f)[0, 0] > 0 and np.array_equal(T.canonical(y), T.canonical(f))


@pytest.mark.heavy
def test_the_consistency_entry_is_the_same_from_the_same_seeds_and_resumes(tmp_path, monkeypatch):
    for name, value in dict(DEPTH=3, BUDGET=3, N_TOKENS=16, TRACE_SAMPLES=120, HELD_OUT=40, KS=(1, 2),
                            RERUNS=(("same", {}), ("fixed-1", {"fixed": 1}), ("random-1", {"random": 1}),
                                    ("steps-100", {"steps": 30})), NEARBY=(0.01,)).items():
        monkeypatch.setattr(T, name, value)
    monkeypatch.setattr(T, "_summary", lambda layer, e: "")
    (tmp_path / "a").mkdir()
    one = T.consistency(str(tmp_path / "a"), 20)
    again = T.consistency(str(tmp_path / "a"), 20)  # resumed: everything from the kept pieces
    (tmp_path / "b").mkdir()
    other = T.consistency(str(tmp_path / "b"), 20)  # computed afresh
    assert one["seconds"] == one["seconds_this_run"] and again["seconds"] > again["seconds_this_run"]  # kept: counted
    for e in (one, again, other):
        e.pop("seconds"), e.pop("seconds_this_run")
    assert one == again == other
    for layer in ("2", "3"):
        entry = one["layers"][layer]
        assert entry["rerun"]["same_start_identical"] and entry["rerun"]["same"]["plain"] == 0.0
        assert entry["rerun"]["same"]["excess_mean"] == 0.0
        assert entry["knn"]["train"] == 80 and entry["knn"]["held_out"] == 40 and entry["rerun"]["contexts"] == 20


def test_the_pages_tables_are_printed_from_distil_json():
    from bridges.runs.store import read_json

    tc = read_json(T.OUT)["teacher_consistency"]
    one, two = T.table().split("\n\n")
    assert len(one.splitlines()) == len(two.splitlines()) == 2 + len(tc["layers"])
    for layer, e in tc["layers"].items():
        assert e["rerun"]["same_start_identical"]  # the re-run reproduces the teacher's rows bit for bit
        row = [r for r in two.splitlines() if r.startswith(f"| {layer} |")][0]
        assert f"{e['mean_row']['held_out']['plain']:.3f}" in row and f"k = {e['knn']['best_k']}:" in row
    assert tc["command"] == T.COMMAND and tc["cell"]["trace_samples"] == 4096
