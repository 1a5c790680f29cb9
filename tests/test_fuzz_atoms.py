"""Hostile inputs of the finite-atom prior and the mixture (issue 30 items 2, 3): a bad atoms file, NaN atoms,
negative weights, no atoms, a design of another dimension, sizes the guards must price and refuse. Each is one
line (exit code 2 on the command line, a ValueError in Python), never a traceback or a silent answer."""
from __future__ import annotations
import fvnum

import contextlib
import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridges.cli import main
from fvnum import loss_mc
from fvnum.linear_theory import ridge_loss
from fvnum.optimum.atoms_dp import noiseless_bellman
from fvnum.priors.atoms import AtomsPrior
from fvnum.priors.atoms_arrays import read_atoms
from fvnum.priors.mixture import MixturePrior
from fvsym import GaussianPrior, TreePrior
from tests._cli import one_line


def fv(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["mc", *[str(a) for a in argv]])
    return code, err.getvalue()


MC = ("--prior", "atoms", "--strategy", "top_levels", "--budget", "2", "--tau", "1/2", "--samples", "100")


def _files(tmp_path):
    """(name, path, what the error line says) of damaged or wrong atoms files."""
    cases = []

    def add(name, data, says):
        p = tmp_path / name
        p.write_bytes(data) if isinstance(data, bytes) else np.save(p, data, allow_pickle=True)
        cases.append((name, p, says))

    add("empty.npy", b"", "empty or no .npy header")
    add("text.npy", b"1,2,3\n4,5,6\n", "no .npy header")
    add("header.npy", b"\x93NUMPY\x01\x00\x10\x00{'descr': <f8, 'fo", "damaged .npy header")
    add("vector.npy", np.arange(4.0), "need an (M, D) array")
    add("cube.npy", np.zeros((2, 2, 2)), "need an (M, D) array")
    add("none.npy", np.zeros((0, 3)), "M >= 1")
    add("objects.npy", np.array([[1, "a"]], dtype=object), "need an (M, D) array of numbers")
    add("nan.npy", np.array([[0.0, np.nan], [1.0, 2.0]]), "atoms must be finite")
    add("huge.npy", np.array([[1e300, 0.0]]), "atom entries must be below")
    full = tmp_path / "full.npy"
    np.save(full, np.ones((50, 4)))
    add("cut.npy", full.read_bytes()[:-40], "cut short")
    (tmp_path / "atoms.txt").write_text("1 2\n3 4\n")
    cases.append(("atoms.txt", tmp_path / "atoms.txt", "must be a .npy array"))
    cases.append(("missing.npy", tmp_path / "missing.npy", "no such atoms file"))
    cases.append(("folder", tmp_path, "no such atoms file"))
    return cases


def test_bad_atoms_files_are_one_line(tmp_path):
    for name, path, says in _files(tmp_path):
        line = one_line(*fv(*MC, "--atoms", path))
        assert says in line and line.startswith("fv mc: error: --atoms"), (name, line)


@given(st.binary(max_size=300))
def test_any_bytes_as_an_atoms_file_are_read_or_refused_in_one_line(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("bytes") / "atoms.npy"
    path.write_bytes(data)
    code, err = fv(*MC, "--atoms", path)
    if code != 0:
        assert "--atoms" in one_line(code, err)


@pytest.mark.parametrize("argv, says", [
    (("--diversity", "0", "--dim", "3"), "--diversity"),
    (("--diversity", "4"), "--diversity M needs --dim D"),
    (("--diversity", "4", "--dim", "3", "--atoms", "x.npy"), "exactly one of --atoms"),
    (("--dim", "3"), "exactly one of --atoms"),
    (("--diversity", "10000000000000", "--dim", "8"), "diversity M must be <="),
    (("--diversity", "100000000", "--dim", "100000"), "memory"),
    (("--diversity", "4", "--dim", "3", "--depth", "3"), "--depth applies to --prior tree or gaussian"),
    (("--diversity", "4", "--dim", "3", "--alpha", "1/2"), "--alpha applies"),
])
def test_bad_diversity_options_are_one_line(argv, says):
    base = [a for a in MC]
    assert says in one_line(*fv(*base, *argv))


def test_options_of_the_atoms_prior_are_refused_on_other_priors():
    line = one_line(*fv("--prior", "tree", "--diversity", "4", "--tau", "1/2"))
    assert "--diversity applies to --prior atoms only" in line
    line = one_line(*fv("--prior", "gaussian", "--atoms", "a.npy", "--tau", "1/2"))
    assert "--atoms applies to --prior atoms only" in line


@pytest.mark.parametrize("argv, says", [
    (("--strategy", "fixed", "--design", "1,9"), "design node 9"),
    (("--strategy", "path"), "does not apply to the atoms prior"),
    (("--strategy", "optimal", "--width", "2"), "solved exactly only for width 1"),
    (("--strategy", "rollout"), "does not apply"),
])
def test_strategies_and_designs_that_do_not_fit_are_one_line(argv, says):
    base = ["--prior", "atoms", "--diversity", "6", "--dim", "8", "--budget", "2", "--tau", "1/2", "--samples", "100"]
    assert says in one_line(*fv(*base, *argv))


def test_the_tokens_channel_is_refused_on_atoms():
    line = one_line(*fv("--prior", "atoms", "--diversity", "6", "--dim", "3", "--strategy", "top_levels",
                        "--budget", "2", "--tokens", "64"))
    assert "gaussian channel only" in line


def test_absurd_work_is_priced_and_refused():
    line = one_line(*fv("--prior", "atoms", "--diversity", "200000", "--dim", "8", "--strategy", "greedy_coordinate",
                        "--budget", "4", "--tau", "1/2", "--samples", "10000000"))
    assert "would take about" in line
    p = AtomsPrior.draw(200_000, 8, seed=0)
    with pytest.raises(ValueError, match="would take about"):
        loss_mc(p, "fixed", 2, fvnum.gaussian(0.5), options=fvnum.StrategyOptions(design=[1, 2]), samples=10**9)


@pytest.mark.parametrize("atoms, weights, says", [
    ([[0.0, np.nan]], None, "atoms must be finite"),
    ([[0.0, np.inf], [1, 1]], None, "atoms must be finite"),
    (np.zeros((0, 3)), None, "M >= 1"),
    (np.zeros((3, 0)), None, "D >= 1"),
    ([1.0, 2.0], None, "(M, D) array"),
    ("atoms", None, "(M, D) array of numbers"),
    ([["a", "b"]], None, "(M, D) array of numbers"),
    ([[1.0], [2.0]], [1, -1], "non-negative"),
    ([[1.0], [2.0]], [0, 0], "sum to more than 0"),
    ([[1.0], [2.0]], [1, 2, 3], "one per atom"),
    ([[1.0], [2.0]], [1, np.nan], "finite"),
    ([[1.0], [2.0]], "ab", "non-negative numbers"),
])
def test_bad_atoms_in_python_are_one_line(atoms, weights, says):
    with pytest.raises(ValueError) as exc:
        AtomsPrior(atoms, weights)
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_a_design_of_another_dimension_is_refused():
    p = AtomsPrior.draw(5, 3, seed=0)
    with pytest.raises(ValueError, match="design"):
        loss_mc(p, "fixed", 2, fvnum.gaussian(0.5), options=fvnum.StrategyOptions(design=np.eye(4)[:2]), samples=100)
    with pytest.raises(ValueError, match="design"):
        loss_mc(p, "fixed", 2, fvnum.gaussian(0.5), options=fvnum.StrategyOptions(design=[1, 4]), samples=100)
    with pytest.raises(ValueError, match="coordinate"):
        ridge_loss(p, [0, 1], 0.5)
    with pytest.raises(ValueError, match="unit rows"):
        ridge_loss(p, np.eye(4)[:2], 0.5)


def test_bad_mixtures_and_solves_are_one_line():
    tree = TreePrior(2, "1/2")
    for args, says in (
        (([tree, TreePrior(3, "1/2")], [1, 1]), "share their dimension"),
        (([], []), "non-empty"),
        (([tree], [-1]), "non-negative"),
        (([tree, tree], [1]), "one per component"),
        (([GaussianPrior.isotropic(3)], [1]), "has no atoms"),
        (([TreePrior(2)], [1]), "numeric"),
    ):
        with pytest.raises(ValueError, match=says):
            MixturePrior(*args)
    with pytest.raises(ValueError, match="orthogonal"):
        AtomsPrior.of(tree).rotated(np.ones((3, 3)))
    with pytest.raises(ValueError, match="at most 64 atoms"):
        noiseless_bellman(AtomsPrior.draw(65, 2, seed=0), 1)
    with pytest.raises(ValueError, match="no such atoms file"):
        read_atoms("/nonexistent/atoms.npy")
