"""Layering (bridges -> fvnum -> fvsym; fvsym loads sympy only) and bad input at the command line:
one line on stderr, exit code 2, never a traceback."""
import subprocess
import sys
from pathlib import Path

import pytest

from bridges.cli import main
from fvsym import GaussianPrior

ROOT = Path(__file__).resolve().parents[1]


def loaded_after(code: str, heavy) -> list[str]:
    """Run ``code`` in a fresh interpreter and return which of ``heavy`` it left in sys.modules."""
    probe = f"{code}\nimport sys\nprint('loaded:' + ','.join(m for m in {tuple(heavy)!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("loaded:"), proc.stdout
    return [m for m in last.removeprefix("loaded:").split(",") if m]


IMPORT_ALL = """
import importlib, pkgutil, {pkg}
for info in pkgutil.iter_modules({pkg}.__path__):
    importlib.import_module("{pkg}." + info.name)
"""


def test_fvsym_and_all_its_modules_load_no_numeric_stack():
    assert loaded_after(IMPORT_ALL.format(pkg="fvsym"), ["numpy", "scipy", "numba", "torch"]) == []


def test_fvnum_and_all_its_modules_load_no_torch():
    assert loaded_after(IMPORT_ALL.format(pkg="fvnum"), ["torch"]) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path", "--alpha", "1/2"],
        ["derive", "gaussian-loss", "--cov", "matched", "--depth", "3", "--budget", "2", "--tau", "1/3"],
    ],
)
def test_fv_derive_loads_no_numba_or_torch(argv):
    code = f"from bridges.cli import main\nassert main({argv!r}) == 0"
    assert loaded_after(code, ["numba", "torch"]) == []


BAD = [
    (["derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path", "--alpha", "3/2"], "3/2"),
    (["derive", "tree-loss", "--depth", "0", "--budget", "1", "--strategy", "path", "--alpha", "1/2"], "depth"),
    (["derive", "tree-loss", "--depth", "3", "--budget", "-1", "--strategy", "path"], "-1"),
    (["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "greedy"], "greedy"),
    (["derive", "tree-loss", "--depth", "3", "--budget", "9", "--strategy", "top_levels"], "9"),
    (["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", "path", "--alpha", "x"], "'x'"),
    (["derive", "tree-loss", "--depth", "three", "--budget", "2", "--strategy", "path"], "three"),
    (["derive", "gaussian-loss", "--dim", "4", "--budget", "2", "--tau", "-1"], "-1"),
    (["derive", "gaussian-loss", "--dim", "4", "--budget", "-2"], "-2"),
    (["derive", "gaussian-loss", "--dim", "0", "--budget", "2"], "dim"),
    (["derive", "gaussian-loss", "--cov", "matched", "--depth", "3", "--budget", "2", "--alpha", "3/2"], "3/2"),
    (["derive", "gaussian-loss", "--cov", "matched", "--depth", "0", "--budget", "2"], "depth"),
    (["derive", "gaussian-loss", "--cov", "matched", "--dim", "5", "--depth", "3", "--budget", "2"], "5"),
    (["derive", "gaussian-loss", "--cov", "wishart", "--dim", "5", "--budget", "2"], "wishart"),
    (["derive", "gaussian-loss", "--cov", "tree", "--depth", "3", "--budget", "2"], "now called 'matched'"),
    (["derive", "volume", "--depth", "3"], "volume"),
]


@pytest.mark.parametrize("argv, named", BAD, ids=[" ".join(a[1:]) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(capsys, argv, named):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0] and named in lines[0], err
    assert "Traceback" not in err


def test_bad_input_through_the_fv_script_has_no_traceback():
    script = Path(sys.executable).parent / "fv"
    proc = subprocess.run(
        [str(script), "derive", "tree-loss", "--depth", "4", "--budget", "2", "--strategy", "path", "--alpha", "3/2"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "3/2" in proc.stderr and "Traceback" not in proc.stderr


def test_non_psd_covariance_is_a_one_line_value_error():
    with pytest.raises(ValueError, match="not PSD: smallest eigenvalue -1") as info:
        GaussianPrior([[1, 2], [2, 1]])
    assert "\n" not in str(info.value)
