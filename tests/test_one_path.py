"""One public path per name (issue 59 item 4): the moved-path import hook is gone, no module of the repository
imports a path that moved into a room, and every import the docs show works with only the extras it needs."""
import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The 48 paths that moved into rooms in issue 46 (old -> new); the old ones are gone.
MOVED = {
    "bridges._malloc": "bridges.training._malloc",
    "bridges.audit": "bridges.analysis.audit",
    "bridges.checkpoint": "bridges.training.checkpoint",
    "bridges.compare": "bridges.analysis.compare",
    "bridges.config": "bridges.runs.config",
    "bridges.cost": "bridges.prices.cost",
    "bridges.data": "bridges.training.data",
    "bridges.distil": "bridges.training.distil",
    "bridges.engine": "bridges.runs.engine",
    "bridges.figures": "bridges.studies.figures",
    "bridges.flops": "bridges.prices.flops",
    "bridges.model_registry": "bridges.models.registry",
    "bridges.options": "bridges.runs.options",
    "bridges.precision": "bridges.models.precision",
    "bridges.probes": "bridges.analysis.probes",
    "bridges.reproduce": "bridges.studies.reproduce",
    "bridges.results": "bridges.runs.results",
    "bridges.scaling": "bridges.studies.scaling",
    "bridges.store": "bridges.runs.store",
    "bridges.sweep": "bridges.studies.sweep",
    "bridges.taps": "bridges.models.taps",
    "bridges.train": "bridges.training.train",
    "bridges.train_memory": "bridges.prices.memory",
    "fvnum._chunks": "fvnum.mc._chunks",
    "fvnum._kernels": "fvnum.mc._kernels",
    "fvnum._reference": "fvnum.mc._reference",
    "fvnum.atoms": "fvnum.priors.atoms",
    "fvnum.atoms_dp": "fvnum.optimum.atoms_dp",
    "fvnum.bracket": "fvnum.optimum.bracket",
    "fvnum.capabilities": "fvnum.priors.capabilities",
    "fvnum.channels": "fvnum.mc.channels",
    "fvnum.keyed": "fvnum.keys.nonadaptive",
    "fvnum.keyed_adaptive": "fvnum.keys.adaptive",
    "fvnum.keyed_patching": "fvnum.patching.keyed",
    "fvnum.keyed_tree": "fvnum.keys.tree",
    "fvnum.limits": "fvnum.guards.limits",
    "fvnum.mixture": "fvnum.priors.mixture",
    "fvnum.noisy_dp": "fvnum.optimum.noisy_dp",
    "fvnum.prior_checks": "fvnum.priors.checks",
    "fvnum.registry": "fvnum.policies.registry",
    "fvnum.resources": "fvnum.guards.resources",
    "fvnum.search": "fvnum.policies.search",
    "fvnum.simulate": "fvnum.mc.simulate",
    "fvnum.strategies": "fvnum.policies.policies",
    "fvnum.strategy_objects": "fvnum.policies.strategies",
    "fvnum.tree": "fvnum.priors.tree",
    "fvsym.costs": "fvsym.guards.costs",
}
SOURCES = ("fvsym", "fvnum", "bridges", "tests", "docs", "studies", "benchmarks", "examples")


def _python_files():
    for top in SOURCES:
        yield from sorted((ROOT / top).rglob("*.py"))


def _imported(tree: ast.AST):
    """Every dotted name an ``import`` or ``from ... import`` of ``tree`` reaches (module and module.name)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "find_spec") and node.args and isinstance(node.args[0], ast.Constant):
            yield node.lineno, str(node.args[0].value)


def test_the_moved_path_hook_is_gone():
    assert not (ROOT / "fvsym" / "_moved.py").exists()
    spec = importlib.util.find_spec("fvsym._moved")  # (an editable install elsewhere may still hold the file)
    assert spec is None or ROOT not in Path(spec.origin).parents
    import bridges  # noqa: F401
    import fvnum  # noqa: F401

    finders = [type(f).__name__ for f in sys.meta_path]
    assert "_MovedFinder" not in finders, finders
    for old in ("fvnum.keyed_patching", "fvnum.tree", "bridges.train", "fvsym.costs"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


def test_no_module_imports_an_old_path():
    found = []
    for path in _python_files():
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:  # pragma: no cover (every file of the repository parses)
            raise AssertionError(f"{path} does not parse") from None
        found += [f"{path.relative_to(ROOT)}:{line} {name}" for line, name in _imported(tree) if name in MOVED]
    assert not found, "old paths imported (use the new ones): " + "; ".join(found)


def test_every_new_path_exists():
    for new in MOVED.values():
        assert importlib.util.find_spec(new) is not None, new


IMPORT_LINE = re.compile(r"^\s*((?:from\s+(?:fvnum|fvsym|bridges)[\w.]*\s+import\s+[\w, ]+)|"
                         r"(?:import\s+(?:fvnum|fvsym|bridges)[\w.]*(?:\s+as\s+\w+)?))\s*(?:#.*)?$")
INLINE = re.compile(r"`((?:from\s+(?:fvnum|fvsym|bridges)[\w.]*\s+import\s+[\w, ]+)|"
                    r"(?:import\s+(?:fvnum|fvsym|bridges)[\w.]*))`")


def documented_imports() -> list:
    """The import statements of the docs' pages and the README (code blocks and inline code)."""
    found = set()
    for page in sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]:
        text = page.read_text(encoding="utf-8")
        for line in text.splitlines():
            m = IMPORT_LINE.match(line)
            if m:
                found.add(m.group(1).strip().rstrip(","))
        found.update(m.group(1).strip().rstrip(",") for m in INLINE.finditer(text))
    return sorted(found)


def _run(code: str):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_every_documented_import_works():
    imports = documented_imports()
    assert len(imports) >= 20, imports
    code = "\n".join(imports)
    done = _run(code)
    assert done.returncode == 0, done.stderr[-2000:]


BLOCK_TORCH = ("import sys\n"
               "class _NoTorch:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name == 'torch' or name.startswith('torch.'):\n"
               "            raise ModuleNotFoundError(f'No module named {name!r} (blocked)')\n"
               "sys.meta_path.insert(0, _NoTorch())\n"
               "sys.modules.pop('torch', None)\n")


def test_the_documented_imports_of_fvnum_and_fvsym_and_the_model_registry_need_no_torch():
    """torch is an extra: fvnum's and fvsym's documented imports, and ``from bridges.models import register_model``
    (the registry needs none), work with torch blocked by a meta-path finder, and load no torch."""
    light = [i for i in documented_imports() if re.match(r"(from|import) (fvnum|fvsym)\b", i)]
    light.append("from bridges.models import MODELS, ModelSpec, Recipe, register_model")
    code = BLOCK_TORCH + "\n".join(light) + "\nassert 'torch' not in sys.modules\nprint('ok')\n"
    done = _run(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    refused = _run(BLOCK_TORCH + "import torch\n")
    assert refused.returncode != 0 and "blocked" in refused.stderr


def test_rooms_name_their_public_names_explicitly():
    """A room's ``__init__`` imports the names it documents; no room forwards names of another module lazily."""
    for init in sorted(ROOT.glob("*/**/__init__.py")):
        if init.parts[len(ROOT.parts)] not in ("fvsym", "fvnum", "bridges"):
            continue
        tree = ast.parse(init.read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        rel = init.relative_to(ROOT)
        if rel.as_posix() not in ("fvnum/__init__.py", "bridges/__init__.py"):  # the packages' lazy public API
            assert "__getattr__" not in defined, f"{rel}: a lazy forwarding __getattr__"
    import bridges.models
    import fvnum.keys
    import fvnum.priors
    from fvnum.keys.families import LinearKeys
    from fvnum.priors.registry import register_prior

    assert fvnum.keys.LinearKeys is LinearKeys and fvnum.priors.register_prior is register_prior
    assert bridges.models.register_model is importlib.import_module("bridges.models.registry").register_model
