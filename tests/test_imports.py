"""No import circles inside a package (fvsym, fvnum, bridges).

Two checks: a static one, which walks every module's imports with ``ast`` and looks for a cycle among the
modules of its package (imports at module level for every package; for fvsym and fvnum also the imports
deferred into functions, so no circle is hidden behind a late import), and a dynamic one, which imports
every module of a package *first*, in a fresh interpreter with none of the package loaded, so a circle
that only bites in some import order shows up as an ImportError."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fvsym", "fvnum", "bridges")
# Packages whose function-level imports must not form circles either (every package: the deep check).
DEEP = ("fvsym", "fvnum", "bridges")
# Modules of bridges that must stay out of every circle, deferred imports included.
OUT_OF_CIRCLES = ("runs.engine", "studies.sweep", "cli", "commands", "study_commands", "runs.store", "progress", "runs.config")
# The command-line layer of bridges: no other module of bridges imports these, deferred imports included.
CLI_MODULES = ("cli", "commands", "study_commands", "studies.sweep")


def _modules(pkg: str) -> dict[str, Path]:
    """The modules of a package, rooms included, by their dotted names inside it (``runs.config``); a
    room's ``__init__`` is its own module (``runs``), the package's own ``__init__`` is left out (it loads
    before any submodule)."""
    folder = ROOT.joinpath(*pkg.split("."))
    found = {}
    for p in folder.rglob("*.py"):
        parts = p.relative_to(folder).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and "__pycache__" not in parts:
            found[".".join(parts)] = p
    return found


def _resolve(dotted: str, modules: set[str]) -> str | None:
    """The longest module of ``modules`` that ``dotted`` (inside the package) names or lies in."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in modules:
            return name
    return None


def _targets(node: ast.AST, pkg: str, modules: set[str], here: str) -> set[str]:
    """The modules of ``pkg`` that one import statement loads (``here``: the package its relative
    imports start from)."""
    found = set()
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base_parts = here.split(".")
            base_parts = base_parts[: len(base_parts) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module
        if base is None or not (base == pkg or base.startswith(pkg + ".")):
            return found
        inner = base[len(pkg):].lstrip(".")
        for a in node.names:  # from pkg.room import module: that module, when the name is one
            sub = f"{inner}.{a.name}" if inner else a.name
            if sub in modules:
                found.add(sub)
            elif inner:
                found.add(_resolve(inner, modules))
    elif isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.startswith(pkg + "."):
                found.add(_resolve(alias.name[len(pkg) + 1:], modules))
    return {m for m in found if m} & modules


def _module_level(tree: ast.Module):
    """Statements run at import: the module body, descending into if/try/with blocks but not into
    functions or classes' methods."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.ClassDef)):
            for child in ast.iter_child_nodes(node):
                if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    todo.append(child)
        if isinstance(node, ast.ExceptHandler):
            todo.extend(node.body)


def import_graph(pkg: str, deep: bool) -> dict[str, set[str]]:
    """``{module: modules of pkg it imports}``, every module of every room."""
    files = _modules(pkg)
    graph = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        nodes = ast.walk(tree) if deep else _module_level(tree)
        here = ".".join([pkg] + name.split(".")[: None if path.name == "__init__.py" else -1])
        graph[name] = set().union(*(_targets(n, pkg, set(files), here) for n in nodes)) - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first repeated at the end), or None."""
    state = dict.fromkeys(graph, 0)  # 0 unseen, 1 on the stack, 2 done
    stack: list[str] = []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state[w] == 1:
                return stack[stack.index(w):] + [w]
            if state[w] == 0:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if state[v] == 0:
            found = visit(v)
            if found:
                return found
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_import_graph_sees_relative_absolute_and_deferred_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "toy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\nfrom .c import f\n")
    (pkg / "b.py").write_text("import toy.c\n")
    (pkg / "c.py").write_text("def f():\n    from toy import a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert import_graph("toy", deep=False) == {"a": {"b", "c"}, "b": {"c"}, "c": set()}
    assert find_cycle(import_graph("toy", deep=False)) is None
    assert find_cycle(import_graph("toy", deep=True)) in (["a", "c", "a"], ["a", "b", "c", "a"])


@pytest.mark.parametrize("pkg", PACKAGES)
def test_no_import_circle_at_module_level(pkg):
    assert find_cycle(import_graph(pkg, deep=False)) is None


@pytest.mark.parametrize("pkg", DEEP)
def test_no_import_circle_even_through_deferred_imports(pkg):
    assert find_cycle(import_graph(pkg, deep=True)) is None


def in_cycles(graph: dict[str, set[str]]) -> set[str]:
    """The modules of ``graph`` that lie on some cycle (reachable again from one of their own imports)."""
    def reach(start):
        seen, todo = set(), list(graph[start])
        while todo:
            v = todo.pop()
            if v not in seen:
                seen.add(v)
                todo.extend(graph[v])
        return seen

    return {v for v in graph if v in reach(v)}


def test_in_cycles_finds_every_module_on_a_cycle():
    assert in_cycles({"a": {"b"}, "b": {"a", "c"}, "c": set(), "d": {"a"}}) == {"a", "b"}
    assert in_cycles({"a": {"b"}, "b": set()}) == set()


def test_engine_sweep_and_cli_lie_on_no_circle_even_through_deferred_imports():
    graph = import_graph("bridges", deep=True)
    assert set(OUT_OF_CIRCLES) <= set(graph)
    assert not in_cycles(graph) & set(OUT_OF_CIRCLES), sorted(in_cycles(graph))


def test_the_command_line_is_a_layer_on_top():
    """Nothing below the command line imports it: no module of bridges outside ``CLI_MODULES`` imports one of
    them, ``fvnum.cli`` or argparse (deferred imports included); ``commands`` and ``sweep`` import ``bridges.cli``
    never, nor ``sweep`` ``commands``."""
    graph = import_graph("bridges", deep=True)
    below = {m: sorted(graph[m] & set(CLI_MODULES)) for m in graph if m not in CLI_MODULES}
    assert not any(below.values()), {m: v for m, v in below.items() if v}
    assert "cli" not in graph["commands"] and "cli" not in graph["studies.sweep"] and "commands" not in graph["studies.sweep"]
    for name in set(graph) - set(CLI_MODULES):
        tree = ast.parse(_modules("bridges")[name].read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & {"argparse", "fvnum.cli"}, name


def test_the_engine_holds_no_command_line_code():
    """``bridges.runs.engine`` (cells, clusters, deadlines) imports neither the CLI modules nor argparse, so the
    studies that use it (sweep, reproduce, scaling) do not pull the command line in with it."""
    path = ROOT / "bridges" / "runs" / "engine.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ("bridges." if node.level else "") + (node.module or "")
            names.update([base] if node.module else [f"bridges.{a.name}" for a in node.names])
    assert not names & {"argparse", "bridges.cli", "bridges.commands", "bridges.study_commands", "bridges.studies.sweep",
                     "fvnum.cli", "fvsym.cli"}, names
    proc = subprocess.run([sys.executable, "-c", "import sys, bridges.runs.engine; print(sorted(m for m in sys.modules "
                           "if m in ('argparse', 'bridges.cli', 'bridges.commands', 'bridges.study_commands', 'bridges.studies.sweep')))"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


FRESH = """
import importlib, pkgutil, sys
pkg = sys.argv[1]
root = importlib.import_module(pkg)
names = sorted(m.name[len(pkg) + 1:] for m in pkgutil.walk_packages(root.__path__, pkg + "."))
failed = []
for name in names:
    for key in [k for k in sys.modules if k == pkg or k.startswith(pkg + ".")]:
        del sys.modules[key]
    try:
        importlib.import_module(pkg + "." + name)
    except Exception as exc:  # report every module, not only the first
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("imported:" + ",".join(names))
print("failed:" + " | ".join(failed))
"""


@pytest.mark.heavy
@pytest.mark.parametrize("pkg", PACKAGES)
def test_every_module_imports_first_in_a_fresh_interpreter(pkg):
    proc = subprocess.run([sys.executable, "-c", FRESH, pkg], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(":", 1) for line in proc.stdout.strip().splitlines() if ":" in line)
    expected = sorted(_modules(pkg))
    assert sorted(lines["imported"].split(",")) == expected
    assert lines["failed"] == "", lines["failed"]


# --- fvsym is pure math: sympy and the standard library ------------------------------------------------------
# fvsym.cli is fvsym's command-line layer (``fv derive``): nothing in fvsym imports it, and it alone may use
# argparse. Its guards are fvsym.guards.limits: no fvsym module imports fvnum or bridges (no arrow up, none whitelisted).
FVSYM_CLI_LAYER = ("cli",)
HEAVY = ("numpy", "scipy", "numba", "torch", "argparse")
PURE = """
import importlib, importlib.abc, json, sys
heavy, cli_layer, names = sys.argv[1].split(","), sys.argv[2].split(","), sys.argv[3].split(",")
loaded = [m for m in heavy if m in sys.modules]  # the interpreter's own start-up (never expected)
attempts = []


class Refuse(importlib.abc.MetaPathFinder):  # every import of a banned library is refused and recorded, so each
    allowed = ()  # module's check starts clean (a library once loaded could not be unloaded)

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".")[0]
        if top in heavy and top not in self.allowed:
            attempts.append(top)
            raise ImportError(f"{top} is refused by the purity check")
        return None


refuse = Refuse()
sys.meta_path.insert(0, refuse)
found = {"": loaded}
for name in names:
    for key in [k for k in sys.modules if k == "fvsym" or k.startswith("fvsym.")]:
        del sys.modules[key]
    refuse.allowed = ("argparse",) if name in cli_layer else ()
    attempts.clear()
    try:
        importlib.import_module("fvsym" if name == "__init__" else "fvsym." + name)
    except ImportError:
        pass  # the refused import is recorded
    found[name] = sorted(set(attempts))
print(json.dumps(found))
"""


def test_fvsym_modules_load_neither_numeric_nor_command_line_libraries():
    """Each fvsym module, imported first with the fvsym package cleared, asks for none of HEAVY (argparse
    is allowed to the CLI layer): one interpreter for all, every import of a banned library refused and
    recorded (a loaded library cannot be unloaded, so refusing keeps each module's check independent)."""
    names = sorted(_modules("fvsym")) + ["__init__"]
    proc = subprocess.run([sys.executable, "-c", PURE, ",".join(HEAVY), ",".join(FVSYM_CLI_LAYER), ",".join(names)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found.pop("") == [], "the interpreter loaded a banned library before any fvsym module"
    assert sorted(found) == sorted(names)
    bad = {name: libs for name, libs in found.items() if libs}
    assert not bad, f"fvsym modules that load banned libraries: {bad}"


def test_the_purity_check_catches_a_module_that_loads_numpy(tmp_path):
    """The check has teeth: a module of a fake fvsym package that imports numpy is named."""
    fake = tmp_path / "fvsym"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "clean.py").write_text("import math\n")
    (fake / "dirty.py").write_text("import numpy\n")
    proc = subprocess.run([sys.executable, "-c", PURE, ",".join(HEAVY), "cli", "clean,dirty,__init__"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["dirty"] == ["numpy"] and found["clean"] == [] and found["__init__"] == []


def _top_level_imports(path: Path) -> set[str]:
    names = set()
    for node in _module_level(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
    return names


def test_fvsym_imports_sympy_and_the_standard_library_only():
    """At module level every fvsym module imports sympy, the standard library and fvsym itself, the CLI layer
    included (no whitelisted arrow up). Nothing in fvsym imports the CLI layer."""
    allowed = set(sys.stdlib_module_names) | {"sympy", "fvsym"}
    for name, path in _modules("fvsym").items():
        bad = {m for m in _top_level_imports(path) if m.split(".")[0] not in allowed}
        assert not bad, f"fvsym.{name} imports {sorted(bad)}"
    graph = import_graph("fvsym", deep=True)
    assert not {name for name, targets in graph.items() if set(FVSYM_CLI_LAYER) & targets}, graph


def _all_imports(path: Path) -> set[str]:
    """Every absolute module a file imports, deferred imports (inside functions) included."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
    return names


def test_fvsym_imports_nothing_from_fvnum_or_bridges_even_deferred():
    """Issue 30 item 6: the arrow points down only. No fvsym module, its command-line layer included, imports
    fvnum or bridges, at module level or inside a function."""
    up = {name: sorted(m for m in _all_imports(path) if m.split(".")[0] in ("fvnum", "bridges"))
          for name, path in _modules("fvsym").items()}
    assert not {name: found for name, found in up.items() if found}, up


def test_the_upward_check_sees_deferred_imports(tmp_path):
    """The check has teeth: an import of fvnum inside a function is found."""
    path = tmp_path / "mod.py"
    path.write_text("import math\n\ndef f():\n    from fvnum.guards.resources import check_time\n    return check_time\n")
    assert _all_imports(path) == {"math", "fvnum.guards.resources"}
