"""fvnum's rooms import in one direction (issue 59 item 5): the import graph of the rooms (the subpackages and
modules under ``fvnum/``), computed from the source with ``ast``, imports inside functions included, has no cycle,
and every arrow points down the order below.

The order, lowest first: the leaves (defaults, options, estimate, laws, model rows, row groups, decided), then
``priors`` (the distributions, their decoders and their kernels) < ``guards`` (the checks and search prices that
read no strategy) < ``mc`` (channels, the engine and its policy protocol, the strategies' kernels) < ``policies``
(the strategies, their registry, searches and prices) < ``optimum`` (the exact optima and the bracket) < ``keys``
< ``patching`` < ``linear_theory`` < ``values`` < ``theory`` < ``finite_theory`` < ``regime`` < ``plot`` < ``cli``.
A room low in the order reaches an analysis of a room above it only through a registry's late-bound
``"module:attribute"`` reference (the priors' ``PRIORS``, a prior class's analyses in ``fvnum.priors.analyses``, a
strategy's price), loaded on first use: an extension point, not an import.
"""
import ast
import importlib.util
from pathlib import Path

import fvnum

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fvnum"
ORDER = ("defaults", "options", "estimate", "laws", "model_rows", "row_groups", "decided",
         "priors", "guards", "mc", "policies", "optimum", "keys", "patching", "linear_theory", "values", "theory",
         "finite_theory", "regime", "plot", "cli")


def rooms(package: Path = PACKAGE) -> set:
    return {p.stem for p in package.glob("*.py") if p.name != "__init__.py"} | {
        p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}


def _room_of(dotted: str, names: set):
    parts = dotted.split(".")
    if parts[0] != "fvnum" or len(parts) < 2:
        return None
    if parts[1] in names:
        return parts[1]
    export = getattr(fvnum, "_EXPORTS", {}).get(parts[1])  # ``from fvnum import loss_mc``: the room that defines it
    return export.split(".")[0] if export else None


def room_graph(package: Path = PACKAGE) -> dict:
    """``{room: {room it imports: [where, ...]}}`` from every import statement of fvnum, at any depth."""
    names, graph = rooms(package), {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("").parts
        if len(rel) == 2 and rel[1] == "__init__":
            continue  # the package's own lazy namespace (fvnum.loss_mc, ...): above every room
        room = rel[1]
        where = rel[:-1]  # the package a relative import starts from
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = list(where[: len(where) - node.level + 1])
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for dotted in targets:
                other = _room_of(dotted, names)
                if other is not None and other != room:
                    graph.setdefault(room, {}).setdefault(other, []).append(f"{'/'.join(rel)}.py:{node.lineno}")
    return graph


def _cycles(graph: dict) -> list:
    """The strongly connected components of more than one room (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def test_the_order_names_every_room_once():
    assert len(ORDER) == len(set(ORDER))
    assert set(ORDER) == rooms(), set(ORDER) ^ rooms()


def test_fvnum_s_rooms_import_each_other_without_a_cycle():
    graph = room_graph()
    assert _cycles(graph) == []
    pairs = sorted((a, b) for a in graph for b in graph[a] if a < b and a in graph.get(b, {}))
    assert pairs == [], pairs


def test_every_arrow_points_down_the_order():
    rank = {room: i for i, room in enumerate(ORDER)}
    up = [f"{a} -> {b} ({', '.join(where[:3])})" for a, targets in room_graph().items() for b, where in targets.items()
          if rank[b] > rank[a]]
    assert up == [], "imports against the order: " + "; ".join(up)


def test_the_check_sees_imports_inside_functions_and_relative_ones(tmp_path):
    """The graph has teeth: a deferred import, a relative one and ``from fvnum import name`` each make an arrow."""
    fake = tmp_path / "fvnum"
    for room in ("priors", "policies"):
        (fake / room).mkdir(parents=True)
        (fake / room / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "theory.py").write_text("")
    (fake / "cli.py").write_text("")
    (fake / "priors" / "probe.py").write_text(
        "def f():\n    from fvnum.theory import comparison_table\n    return comparison_table\n"
        "from .. import cli\nfrom fvnum import loss_mc\n")
    assert set(room_graph(fake)["priors"]) == {"theory", "cli", "policies"}
    (fake / "theory.py").write_text("import fvnum.priors.probe\n")
    assert _cycles(room_graph(fake)) == [["priors", "theory"]]
