"""Training, comparing and auditing on the atoms prior (issue 30 item 2; THEORY.md section 6b): the data sample the
atoms, a run's key depends on them, a run folder keeps them, a run resumes, the theory rows name each model's
prediction, the linear theory and the audit's posterior match plain numpy references."""
from __future__ import annotations
import fvnum

import shutil

import numpy as np
import pytest
import torch

from fvnum.linear_theory import linear_loss, top_directions

from bridges.analysis.audit import AUDIT_STREAM, _latents, _reading_law, audit, load_run
from bridges.analysis.compare import theory_table
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.data import ATOMS_FILE, ContextSampler, fv_prior
from bridges.models.taps import record
from bridges.training.train import train
from fvnum.priors.atoms import AtomsPrior
from fvnum.mc.channels import make_channel
from fvsym import TreePrior

TINY = dict(steps=3, batch=8, eval_batches=1, eval_every=3, warmup=1)


def _cfg(data, model="A", budget=2, out=None, **train_kw):
    return RunConfig(data, ModelConfig(model=model, budget=budget, mlp_width=8, hidden_layers=1),
                     TrainConfig(**{**TINY, **train_kw}, out=None if out is None else str(out)))


def _drawn(M=8, D=4, **kw):
    return DataConfig(prior="atoms", diversity=M, atoms_dim=D, n_tokens=16, **kw)


def _file(tmp_path, name, atoms):
    path = tmp_path / name
    np.save(path, np.asarray(atoms, dtype=float))
    return str(path)


@pytest.mark.parametrize("model", ["A", "B", "C"])
def test_every_model_trains_on_drawn_atoms_and_the_folder_keeps_them(tmp_path, model):
    cfg = _cfg(_drawn(), model, out=tmp_path)
    result = train(cfg, progress=False)
    assert result.finished and np.isfinite(result.loss) and result.loss > 0
    kept = np.load(tmp_path / cfg.key() / ATOMS_FILE)
    np.testing.assert_array_equal(kept, AtomsPrior.draw(8, 4, seed=0).atoms)  # drawn by the run's seed
    assert cfg.key().startswith(f"{model}-atoms-D4-B2-N16-s0-")


def test_contexts_draw_their_theta_among_the_atoms():
    data = _drawn(M=5, D=3)
    sampler = ContextSampler(data)
    c = sampler.sample(400, sampler.generator(0, 0, 0))
    atoms = torch.tensor(AtomsPrior.draw(5, 3, seed=0).atoms, dtype=torch.float32)
    match = (c.theta[:, None, :] == atoms[None]).all(-1)  # (n, M)
    assert bool(match.any(1).all()) and c.signs is None
    counts = match.sum(0).numpy()  # uniform: each atom about 80 times, within 5 standard errors
    assert np.all(np.abs(counts - 80) < 5 * np.sqrt(400 * 0.2 * 0.8))
    y = (c.x * c.theta[:, None, :]).sum(-1) + c.noise
    torch.testing.assert_close(c.y, y)


def test_the_key_depends_on_the_atoms_and_not_on_where_they_are(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 4))
    b = a.copy()
    b[2, 1] += 1e-9  # one entry apart
    key = lambda path: _cfg(DataConfig(prior="atoms", atoms=path, n_tokens=16)).key()  # noqa: E731
    first, again, other = key(_file(tmp_path, "a.npy", a)), key(_file(tmp_path, "copy.npy", a)), key(_file(tmp_path, "b.npy", b))
    assert first == again != other
    drawn = {_cfg(_drawn(M=8)).key(), _cfg(_drawn(M=9)).key(), _cfg(_drawn(M=8, D=5)).key(),
             _cfg(_drawn(M=8, atoms_seed=1)).key(), _cfg(_drawn(M=8), seed=1).key()}
    assert len(drawn) == 5
    assert _cfg(_drawn(M=8), seed=1).data.atoms_seed == 1  # drawn by the run's seed unless given


def test_tree_and_gaussian_configurations_carry_no_atoms_fields():
    for data in (DataConfig(), DataConfig(prior="gaussian"), DataConfig(depth=3, alpha=0.25)):
        d = RunConfig(data).to_dict()["data"]
        assert not {"atoms", "diversity", "atoms_dim", "atoms_seed", "atoms_sha256"} & set(d)
        assert RunConfig(data).key().split("-")[2].startswith("K")


def test_the_options_give_the_configuration_back(tmp_path):
    path = _file(tmp_path, "a.npy", np.random.default_rng(0).standard_normal((5, 3)))
    for data in (_drawn(), DataConfig(prior="atoms", atoms=path, n_tokens=16)):
        cfg = _cfg(data)
        back = RunConfig.from_options({o.dest: o.parse(v) for o, v in zip(*_pairs(cfg.to_argv()))})
        assert back.key() == cfg.key()
        assert RunConfig.from_json(cfg.to_json()).key() == cfg.key()


def _pairs(argv):
    from bridges.runs.config import RUN_OPTIONS

    by_flag = {f: o for o in RUN_OPTIONS for f in (o.flag, *o.aliases)}
    return [by_flag[f] for f in argv[::2]], argv[1::2]


def test_a_stopped_run_resumes_and_its_audit_finds_the_atoms_in_its_folder(tmp_path):
    atoms = np.random.default_rng(5).standard_normal((6, 3))
    path = _file(tmp_path, "mine.npy", atoms)
    cfg = _cfg(DataConfig(prior="atoms", atoms=path, n_tokens=16), "B", out=tmp_path / "runs", steps=4, eval_every=2)
    part = train(cfg, progress=False, stop_at=2)
    assert not part.finished and part.steps == 2
    whole = train(cfg, progress=False)
    assert whole.finished and whole.steps == 4
    shutil.move(path, tmp_path / "moved.npy")  # the user's file goes away: the run folder keeps its atoms
    from bridges.training import data as data_module

    data_module._atoms_prior.cache_clear()
    import fvnum.priors.atoms_arrays as atoms_module

    atoms_module._BY_DIGEST.clear()
    run = load_run(tmp_path / "runs" / cfg.key())
    np.testing.assert_array_equal(fv_prior(run.config.data).atoms, atoms)
    assert audit(run, samples=20, token_sample=256).bayes_on_readings.value >= 0


def test_the_theory_rows_name_each_models_prediction_on_atoms():
    data = _drawn(M=6, D=4)
    table = theory_table(data, 2, samples=400, search_samples=200, keyed=None)
    assert {m: table.prediction(m).name for m in "ABC"} == {
        "A": "best_adaptive", "B": "best_nonadaptive_unit", "C": "top_levels_linear"}
    assert table.row("best_linear_nonadaptive").bounds_below("C")
    assert table.row("best_adaptive").channel == "gaussian" and table.row("top_levels_linear").channel == "tokens"
    with pytest.raises(ValueError, match="keyed rows .* not built on the atoms prior"):
        theory_table(data, 2, samples=400, search_samples=200, keyed="softmax")


def test_the_linear_theory_on_atoms_is_the_trees_on_its_leaves_and_matches_monte_carlo():
    tree = TreePrior(3, "1/2")
    leaves = AtomsPrior.of(tree)
    channel = make_channel(leaves, fvnum.tokens(16, s2=0.01))
    from fvnum.linear_theory import lmmse, top_levels_rows

    W = top_levels_rows(7, 3)
    assert linear_loss(leaves, W, channel) == pytest.approx(lmmse(tree, W, channel).loss, rel=1e-12)
    # atoms with a mean: the readout without intercept, by Monte Carlo of the tokens (plain numpy)
    prior = AtomsPrior(np.random.default_rng(2).standard_normal((5, 3)) + 0.7)
    N, s2, n = 8, 0.01, 40_000
    channel = make_channel(prior, fvnum.tokens(N, s2=s2))
    W = top_directions(prior, 2)
    S = prior.second_moment_matrix
    G = (1 + 1 / N) * W @ S @ W.T + channel.tau2 * W @ W.T
    U = S @ W.T @ np.linalg.inv(G)  # (D, B) the best readout without intercept
    rng = np.random.default_rng(0)
    theta = prior.atoms[rng.integers(0, 5, n)]  # (n, D)
    x = rng.standard_normal((n, N, 3))
    y = np.einsum("ntd,nd->nt", x, theta) + np.sqrt(s2) * rng.standard_normal((n, N))
    phi = np.einsum("nt,ntd,bd->nb", y, x, W) / N
    err = ((phi @ U.T - theta) ** 2).sum(1)
    assert abs(err.mean() - linear_loss(prior, W, channel)) < 5 * err.std() / np.sqrt(n)


def test_the_audits_posterior_over_the_atoms_is_the_brute_force_one(tmp_path):
    """Model C (linear keys, one layer): its readings phi, the keys on the audit's token sample, then the posterior
    over the atoms computed in plain numpy: each atom's Gaussian (CLT) density of phi times its prior weight."""
    cfg = _cfg(_drawn(M=4, D=3), "C", out=None)
    model = train(cfg, progress=False).model
    data, N, s2 = cfg.data, cfg.data.n_tokens, cfg.data.s2
    thetas, log_prior = _latents(data)
    np.testing.assert_array_equal(thetas, AtomsPrior.draw(4, 3, seed=0).atoms)
    n_x, n = 512, 6
    rng = np.random.default_rng(np.random.SeedSequence([0, AUDIT_STREAM]))
    X = rng.standard_normal((n_x, 3))
    W = model.layers[0].keys.weight.detach().double().numpy()  # (B, D)
    F = X @ W.T  # (n_x, B) the keys on the token sample
    sampler = ContextSampler(data)
    c = sampler.sample(n, sampler.generator(0, AUDIT_STREAM, 0))
    with torch.no_grad(), record(model, ["layers.1.phi"]) as rec:
        model(c.x, c.y, c.x_q)
    phi = rec["layers.1.phi"].double().numpy()  # (n, B)
    from fvnum.keys.readings import law_posterior_mean

    law = _reading_law("linear", X, F, thetas, n_tokens=N, s2=s2)
    engine = law_posterior_mean(thetas, log_prior, law, phi)
    brute = []
    for p in phi:
        logs = []
        for m, theta in enumerate(thetas):
            t = X @ theta  # (n_x,)
            mean = (t[:, None] * F).mean(0)
            cov = ((((t**2 + s2)[:, None] * F).T @ F) / n_x - np.outer(mean, mean)) / N
            r = p - mean
            logs.append(log_prior[m] - 0.5 * r @ np.linalg.solve(cov, r) - 0.5 * np.linalg.slogdet(cov)[1])
        w = np.exp(np.array(logs) - max(logs))
        brute.append(w @ thetas / w.sum())
    np.testing.assert_allclose(engine, np.array(brute), rtol=1e-7, atol=1e-9)
