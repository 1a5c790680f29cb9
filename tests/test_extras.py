"""The extras (pyproject.toml): the core installs sympy, numpy, scipy, numba, matplotlib and tqdm; torch and Dask
are extras. In a fresh interpreter where torch and Dask cannot be imported (an import hook refuses them, as if
they were not installed), every module of fvsym and fvnum imports and ``fv derive`` / ``fv mc`` work, while each
command that needs an extra says in one line which one, with exit code 2."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BLOCK = textwrap.dedent('''
    import sys

    class _NotInstalled:  # torch and Dask behave as if they were not installed
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "dask", "distributed"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NotInstalled())
''')


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """Run ``python -c code`` with torch and Dask unavailable: (returncode, stdout, stderr)."""
    site = tmp_path_factory.mktemp("bare")
    (site / "sitecustomize.py").write_text(BLOCK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "FVNUM_THREADS": "1"}

    def run(code: str):
        p = subprocess.run([sys.executable, "-c", code], cwd=site, env=env, capture_output=True, text=True,
                           timeout=300)
        return p.returncode, p.stdout, p.stderr

    return run


def test_the_core_has_no_torch_and_no_dask():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {d.split(">")[0].split(";")[0].split("=")[0].strip() for d in meta["dependencies"]}
    assert core == {"sympy", "numpy", "scipy", "numba", "matplotlib", "tqdm", "tomli"}
    extras = meta["optional-dependencies"]
    assert [d.split(">")[0] for d in extras["torch"]] == ["torch"]
    assert {d.split(">")[0] for d in extras["dask"]} == {"dask", "distributed"}
    assert extras["all"] == ["fvtheory[torch,dask]"]
    # the README's one set-up command and CI install the same extras, all of them
    readme = (ROOT / "README.md").read_text()
    assert '-e ".[all,dev,docs]"' in readme and '-e ".[all,dev,docs]"' in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("argv", [
    ["reproduce", "--out", "rep-none", "--quiet", "--steps", "2"],
    ["scaling", "--out", "scaling-none", "--quiet", "--budgets", "1", "--steps-per-budget", "1"],
    ["compare", "--grid", "--out", "grid-none", "--quiet", "--steps", "2"],
    ["train", "--model", "A", "--depth", "3", "--budget", "2", "--steps", "2", "--out", "train-none"],
])
def test_without_torch_a_command_that_trains_leaves_no_folder_or_lock(bare, argv):
    out = argv[argv.index("--out") + 1]
    code = (f"import os, sys; from bridges.cli import main; rc = main({argv!r}); "
            f"print(os.path.lexists({out!r})); sys.exit(rc)")
    rc, printed, err = bare(code)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "pip install 'fvtheory[torch]'" in err, err
    assert printed.strip() == "False"  # no runs/reproduce/ and no .fv-lock left behind


@pytest.mark.heavy
def test_fvsym_and_fvnum_import_and_compute_without_torch_or_dask(bare):
    code = textwrap.dedent('''
        import importlib, json, pkgutil, sys
        import fvsym, fvnum
        names = []
        for pkg in (fvsym, fvnum):
            for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
                importlib.import_module(m.name)
                names.append(m.name)
        from fvsym import TreePrior
        from fvsym.tree import path_loss
        exact = str(path_loss().exact(alpha="1/2", K=4, B=2))
        mc = fvnum.loss_mc(TreePrior(3, "1/2"), "path", 2, fvnum.gaussian(0.3), samples=2000, seed=0).value
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "dask", "distributed"))
        print(json.dumps({"n": len(names), "exact": exact, "mc": mc, "loaded": loaded}))
    ''')
    rc, out, err = bare(code)
    assert rc == 0, err
    got = json.loads(out.splitlines()[-1])
    assert got["exact"] == "3/8" and 0 < got["mc"] < 1 and got["loaded"] == [] and got["n"] > 40


@pytest.mark.parametrize("argv, extra", [
    (["train", "--model", "A", "--prior", "tree", "--depth", "3", "--budget", "2", "--out", "runs"], "torch"),
    (["compare", "--model", "B", "--prior", "tree", "--depth", "3", "--budget", "2", "--steps", "10"], "torch"),
    (["reproduce", "--out", "rep", "--quiet"], "torch"),
    (["intervene", "."], "torch"),
    (["audit", "."], "torch"),
])
def test_a_command_that_needs_an_extra_says_which_in_one_line(bare, argv, extra):
    code = f"import sys; from bridges.cli import main; sys.exit(main({argv!r}))"
    rc, out, err = bare(code)
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"fv {argv[0]}: error: ") and f"pip install 'fvtheory[{extra}]'" in lines[0]


@pytest.mark.heavy
def test_the_core_commands_run_without_torch(bare):
    code = ("import sys; from bridges.cli import main; "
            "sys.exit(main(['derive', 'tree-loss', '--depth', '4', '--budget', '2', '--strategy', 'path', "
            "'--alpha', '1/2']) or main(['mc', '--prior', 'tree', '--depth', '3', '--alpha', '0.5', '--budget', "
            "'2', '--tau', '0.3', '--samples', '2000', '--seed', '0', '--format', 'json']))")
    rc, out, err = bare(code)
    assert rc == 0, err
    assert "value = 3/8" in out
    mc = json.loads(out[out.index("{"):])
    assert 0 < mc["value"] < 1 and mc["seed"] == 0


def test_a_room_that_needs_torch_refuses_in_one_line_from_python(bare):
    rc, out, err = bare("import bridges.training.train")
    assert rc != 0 and err.strip().splitlines()[-1].startswith("ModuleNotFoundError: bridges.training: this needs torch")
    assert "pip install 'fvtheory[torch]'" in err
    rc, out, err = bare("import bridges.runs.config, bridges.models.registry, bridges.cli; print('ok')")
    assert rc == 0 and out.strip() == "ok", err  # the configurations and the dispatcher need no torch
