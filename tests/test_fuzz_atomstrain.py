"""Hostile inputs of training on the atoms prior (issue 30 item 2): bad atoms files, M = 0, a D that contradicts the
file, both or neither of --atoms and --diversity, atoms options on another prior, a keyed family on atoms, absurd
sizes. Each is one line on stderr with exit code 2 (a ValueError in Python), never a traceback, and no run folder
is left behind."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridges.runs.config import DataConfig
from tests._cli import examples, fv, one_line

RUN = ("--model", "B", "--budget", "2", "--steps", "2", "--batch", "4", "--eval-batches", "1", "--tokens", "8",
       "--mlp-width", "4", "--quiet")


def _train(tmp_path, *argv):
    code, _, err = fv("train", *RUN, "--out", tmp_path / "runs", *argv)
    return code, err


def _bad_files(tmp_path):
    cases = []

    def add(name, data, says):
        p = tmp_path / name
        p.write_bytes(data) if isinstance(data, bytes) else np.save(p, data, allow_pickle=True)
        cases.append((p, says))

    add("empty.npy", b"", "no .npy header")
    add("text.npy", b"1,2,3\n", "no .npy header")
    add("vector.npy", np.arange(4.0), "(M, D) array")
    add("cube.npy", np.zeros((2, 2, 2)), "(M, D) array")
    add("none.npy", np.zeros((0, 3)), "M >= 1")
    add("objects.npy", np.array([[1, "a"]], dtype=object), "of numbers")
    add("nan.npy", np.array([[0.0, np.nan], [1.0, 2.0]]), "finite")
    add("inf.npy", np.array([[0.0, np.inf]]), "finite")
    add("huge.npy", np.array([[1e300, 0.0]]), "below")
    np.save(tmp_path / "atoms.txt.npy", np.ones((2, 2)))
    (tmp_path / "atoms.npz").write_bytes((tmp_path / "atoms.txt.npy").read_bytes())
    cases.append((tmp_path / "atoms.npz", "must be a .npy array"))
    cases.append((tmp_path / "missing.npy", "no such atoms file"))
    cases.append((tmp_path, "no such atoms file"))  # a folder
    return cases


def test_bad_atoms_files_are_one_line(tmp_path):
    for path, says in _bad_files(tmp_path):
        code, err = _train(tmp_path, "--prior", "atoms", "--atoms", path)
        one_line(code, err, says)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("argv, says", [
    (("--prior", "atoms", "--diversity", "0", "--dim", "4"), "must be >= 1"),
    (("--prior", "atoms", "--diversity", "-3", "--dim", "4"), "--diversity"),
    (("--prior", "atoms", "--diversity", "4", "--dim", "0"), "--dim"),
    (("--prior", "atoms", "--diversity", "1e3", "--dim", "4"), "must be an integer"),
    (("--prior", "atoms", "--diversity", "4"), "needs the atoms' dimension D"),
    (("--prior", "atoms"), "exactly one of atoms"),
    (("--prior", "atoms", "--dim", "4"), "exactly one of atoms"),
    (("--diversity", "4", "--dim", "4"), "applies to the atoms prior"),
    (("--prior", "gaussian", "--dim", "4"), "applies to the atoms prior"),
    (("--prior", "atoms", "--diversity", "4", "--dim", "4", "--depth", "3"), "applies to the tree and gaussian"),
    (("--prior", "atoms", "--diversity", "4", "--dim", "4", "--alpha", "1/4"), "applies to the tree and gaussian"),
    (("--prior", "atoms", "--diversity", "4", "--dim", "4", "--cov", "isotropic"), "applies to the tree and gaussian"),
    (("--prior", "atoms", "--diversity", "4", "--dim", "1"), "exceeds the dimension D = 1"),
    (("--prior", "atoms", "--diversity", "4", "--dim", "4", "--atoms-sha256", "ab" * 32), "drawn atoms"),
    (("--prior", "atoms", "--diversity", "100000000", "--dim", "1000000"), "memory"),
    (("--prior", "atoms", "--diversity", "1000000000", "--dim", "4"), "--diversity"),
])
def test_bad_atoms_options_are_one_line(tmp_path, argv, says):
    code, err = _train(tmp_path, *argv)
    one_line(code, err, says)
    assert not (tmp_path / "runs").exists()


def test_a_file_and_options_that_contradict_it(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.random.default_rng(0).standard_normal((5, 3)))
    for argv, says in ((("--atoms", path, "--diversity", "5"), "got both"),
                       (("--atoms", path, "--dim", "4"), "dimension D = 3, not the D = 4"),
                       (("--atoms", path, "--atoms-seed", "1"), "take none"),
                       (("--atoms", path, "--atoms-sha256", "0" * 64), "holds other atoms"),
                       (("--atoms", path, "--atoms-sha256", "xyz"), "64 hex digits")):
        code, err = _train(tmp_path, "--prior", "atoms", *argv)
        one_line(code, err, says)
    assert not (tmp_path / "runs").exists()


def test_compare_refuses_a_key_family_on_atoms(tmp_path):
    code, _, err = fv("compare", *RUN, "--out", tmp_path / "runs", "--prior", "atoms", "--diversity", "4", "--dim", "3",
                      "--keyed", "weighted")
    one_line(code, err, "--keyed weighted", "not built on the atoms prior")


def test_audit_of_a_run_whose_atoms_are_gone(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.random.default_rng(0).standard_normal((5, 3)))
    code, out, err = fv("train", *RUN, "--out", tmp_path / "runs", "--prior", "atoms", "--atoms", path, "--format",
                        "json")
    assert code == 0, err
    import json

    folder = json.loads(out)["run_dir"]
    code, _, err = fv("audit", folder, "--samples", "4", "--token-sample", "16", "--latents", "8")
    one_line(code, err, "uses its atoms exactly")
    np.save(f"{folder}/atoms.npy", np.zeros((5, 3)))  # the folder's copy replaced by other atoms
    from bridges.training import data as data_module
    import fvnum.priors.atoms_arrays as atoms_module

    data_module._atoms_prior.cache_clear()
    atoms_module._BY_DIGEST.clear()
    code, _, err = fv("audit", folder, "--samples", "4", "--token-sample", "16")
    one_line(code, err, "holds other atoms")


@examples(25)
@given(M=st.integers(-5, 20), D=st.integers(-5, 20), seed=st.integers(-3, 5))
def test_drawn_atoms_fields_are_accepted_or_refused_in_one_line(M, D, seed):
    try:
        data = DataConfig(prior="atoms", diversity=M, atoms_dim=D, atoms_seed=seed)
    except ValueError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
        assert M < 1 or D < 1 or seed < 0
    else:
        assert data.dim == D and data.depth is None


def test_the_configurations_limits_are_the_priors():
    import fvnum.priors.atoms_arrays as atoms_module
    from bridges.runs import config

    assert (config.ATOMS_MAX, config.ATOMS_MAX_DIM) == (atoms_module.MAX_ATOMS, atoms_module.MAX_DIM)


def test_a_training_run_over_the_time_cap_names_the_atoms_dimension_not_a_depth(tmp_path):
    code, _, err = fv("train", "--prior", "atoms", "--diversity", "16", "--dim", "8", "--model", "B", "--budget", "2",
                      "--steps", "100000000", "--out", tmp_path / "runs")
    assert "depth None" not in one_line(code, err, "at D 8, budget 2")
