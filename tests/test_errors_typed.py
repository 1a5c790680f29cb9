"""Issue 30 item 4: errors are typed (an input error, a resource refusal, a damaged file), each a ValueError so
existing callers keep working, raised where the docs say: the argument checks (fvsym._validate, fvnum.mc.simulate's
check_*), the guards (fvsym.guards.limits, re-exported by fvnum.guards.resources), run folders and checkpoints (bridges.runs.store,
bridges.training.checkpoint). Library refusals name no command-line flag; ``fv`` adds it."""
from __future__ import annotations
import fvnum

import pytest

from fvsym import errors
from fvsym.errors import DamagedFile, DomainError, InputError, ResourceRefused
from fvsym.priors import TreePrior


def test_every_class_is_a_value_error_with_one_public_path():
    """Issue 59 item 4: the classes live in ``fvsym.errors`` (the bottom layer) and are imported from there only;
    ``fvnum.errors`` no longer exists, ``bridges.errors`` holds the optional-dependency lines only."""
    import pathlib

    import bridges
    import bridges.errors

    for cls in (InputError, DomainError, ResourceRefused, DamagedFile):
        assert issubclass(cls, ValueError) and cls.__module__ == "fvsym.errors"
        assert not hasattr(bridges.errors, cls.__name__) and cls.__name__ not in fvnum.__all__
        assert cls.__name__ not in bridges.__all__
    assert not (pathlib.Path(fvnum.__file__).parent / "errors.py").exists()  # no module fvnum.errors
    assert bridges.errors.__all__ == ["missing_extra", "require"]
    assert issubclass(DomainError, InputError) and not issubclass(ResourceRefused, InputError)
    assert not issubclass(DamagedFile, InputError) and not issubclass(DamagedFile, ResourceRefused)
    from fvsym._formula import DomainError as formula_domain

    assert formula_domain is DomainError
    assert set(errors.__all__) == {"InputError", "DomainError", "ResourceRefused", "DamagedFile"}


@pytest.mark.parametrize("call", [
    lambda: TreePrior(4, "3/2"),  # alpha outside (0, 1): fvsym._validate
    lambda: TreePrior("four", "1/2"),
])
def test_the_argument_checks_raise_input_errors(call):
    with pytest.raises(InputError):
        call()


def test_fvnum_simulate_checks_raise_input_errors():
    from fvnum.mc.simulate import check_budget, check_samples
    from fvsym._validate import check_seed

    for call in (lambda: check_samples(1), lambda: check_seed(-1), lambda: check_budget(-2), lambda: check_samples(2.5)):
        with pytest.raises(InputError):
            call()
    from fvnum import loss_mc

    with pytest.raises(InputError, match="samples"):
        loss_mc(TreePrior(3, "1/2"), "path", 2, fvnum.gaussian(0.1), samples=1)


def test_a_formula_outside_its_domain_is_a_domain_error_and_an_input_error():
    from fvsym.tree import path_loss

    with pytest.raises(DomainError) as info:
        path_loss()(K=3, B=2, alpha=2)
    assert isinstance(info.value, InputError)


def test_the_guards_refuse_with_resource_refused_in_the_librarys_words():
    from fvsym.guards.limits import check_memory as reexported
    from fvsym.guards.limits import TIME_CAP_NOTE, check_memory, check_time, time_limit

    assert reexported is check_memory
    with time_limit(10), pytest.raises(ResourceRefused) as info:
        check_time("a job", 1e6, "; no --steps fits")
    assert info.value.limit == "time" and TIME_CAP_NOTE in str(info.value)
    assert "fv --max-seconds" not in str(info.value) and "over the limit of 10 s" in str(info.value)
    with pytest.raises(ResourceRefused) as info:
        check_memory("a job", 1e30)
    assert info.value.limit == "memory" and "of memory" in str(info.value)


def test_the_command_line_names_its_flag_where_the_library_names_the_cap(capsys):
    """``fv`` prints the same line as before the guards moved: the flag, not the library's words."""
    from bridges.cli import main

    code = main(["--max-seconds", "0.001", "derive", "tree-loss", "--depth", "8", "--budget", "3",
                 "--strategy", "optimal", "--alpha", "1/2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "(fv --max-seconds S raises it)" in err[0] and "time_limit" not in err[0], err


def test_the_noisy_recursion_over_its_work_cap_is_a_resource_refusal():
    from fvnum import noisy_bellman

    with pytest.raises(ResourceRefused, match="use fvnum.bounds"):
        noisy_bellman(TreePrior(8, "1/2"), 3, fvnum.gaussian(0.3))


def test_a_run_folder_of_another_kind_is_a_damaged_file(tmp_path):
    from bridges.runs.store import RunStore

    RunStore(tmp_path / "run", "reproduce", log=lambda m: None)
    with pytest.raises(DamagedFile) as info:
        RunStore(tmp_path / "run", "scaling", log=lambda m: None)
    assert info.value.path == tmp_path / "run" / "manifest.json"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "manifest.json").write_text("{not json")
    with pytest.raises(DamagedFile, match="not valid JSON"):
        RunStore(tmp_path / "other", "reproduce", log=lambda m: None)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not a run folder"):
        RunStore(tmp_path / "full", "reproduce", log=lambda m: None)


def test_a_damaged_checkpoint_is_a_damaged_file(tmp_path):
    from bridges.training.checkpoint import DamagedCheckpoint, load_checkpoint

    assert issubclass(DamagedCheckpoint, DamagedFile)
    path = tmp_path / "checkpoint.pt"
    for content in (b"", b"half a checkpoint"):
        path.write_bytes(content)
        with pytest.raises(DamagedFile, match="checkpoint"):
            load_checkpoint(path)


def test_no_library_module_raises_a_plain_value_error():
    """Every refusal of fvsym, fvnum and bridges is one of the typed classes (an AST walk: a bare
    ``raise ValueError(...)`` anywhere in the three packages fails this test and names its line)."""
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    plain = []
    for package in ("fvsym", "fvnum", "bridges"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Raise) and node.exc is not None:
                    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                    if isinstance(exc, ast.Name) and exc.id == "ValueError":
                        plain.append(f"{path.relative_to(root)}:{node.lineno}")
    assert plain == []


def test_reworded_keeps_the_class_and_its_fields():
    from fvsym.errors import reworded

    refused = reworded(ResourceRefused("over the cap", limit="memory"), "cell x: over the cap")
    assert type(refused) is ResourceRefused and refused.limit == "memory" and str(refused) == "cell x: over the cap"
    damaged = reworded(DamagedFile("bad", path="f.json"), "init_from: bad")
    assert type(damaged) is DamagedFile and damaged.path == "f.json"
    plain = reworded(ValueError("x"), "y")
    assert type(plain) is InputError and str(plain) == "y"


def test_damaged_files_of_every_reader_are_damaged_files(tmp_path):
    """A damaged .npy header, a cut-short .npy, a training result of another format, atoms of another digest."""
    import numpy as np

    from bridges.runs.config import RunConfig
    from bridges.training.train import DamagedResult, TrainResult
    from fvnum.priors.atoms_arrays import read_atoms_file
    from fvsym.npyfile import read_matrix

    assert issubclass(DamagedResult, DamagedFile)
    head = tmp_path / "head.npy"
    head.write_bytes(b"\x93NUMPY\x01\x00\xff\xff{'descr': broken")
    def any_shape(shape, nbytes):
        return None

    with pytest.raises(DamagedFile):
        read_matrix(head, "atoms", "an (M, D) array", any_shape)
    good = tmp_path / "atoms.npy"
    np.save(good, np.arange(12.0).reshape(4, 3))
    cut = tmp_path / "cut.npy"
    cut.write_bytes(good.read_bytes()[:-8])
    with pytest.raises(DamagedFile, match="cut short"):
        read_matrix(cut, "atoms", "an (M, D) array", any_shape)
    with pytest.raises(DamagedFile, match="other atoms"):
        read_atoms_file(str(good), "0" * 64)
    with pytest.raises(DamagedFile, match="not a training result"):
        TrainResult.from_dict({"format": "something else"})
    with pytest.raises(DamagedFile, match="not valid JSON"):
        RunConfig.from_json("{")
    with pytest.raises(InputError, match="unknown run configuration sections"):
        RunConfig.from_dict({"bogus": {}})
