"""The repository's layout: ``docs/`` holds the site's pages, tutorials, reference, assets and its own checks and
hooks; every study lives in ``studies/<study>/`` (its scripts, results, figures and pages), and the commands its
results record run from the repository's root as they stand."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS, STUDIES = ROOT / "docs", ROOT / "studies"
CODE_IN_DOCS = ("_hooks", "_check", "tutorials", "javascripts")  # the site's own code, and the executed tutorials


def _commands(node, where: str = ""):
    """``(where, command)`` for every ``command`` string of a JSON document, and every string of a ``commands``
    table or list (studies/function_vectors/function_vectors.json)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "command" and isinstance(value, str):
                yield f"{where}.{key}", value
            elif key == "commands" and isinstance(value, (dict, list)):
                items = value.items() if isinstance(value, dict) else enumerate(value)
                yield from ((f"{where}.{key}.{k}", v) for k, v in items if isinstance(v, str))
            else:
                yield from _commands(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _commands(value, f"{where}[{i}]")


def _recorded() -> list[tuple[str, str]]:
    found = []
    for path in sorted(STUDIES.rglob("*.json")):
        if "train" in path.relative_to(STUDIES).parts:  # local run folders (git-ignored)
            continue
        rel = path.relative_to(ROOT).as_posix()
        found += [(f"{rel}{where}", command) for where, command in _commands(json.loads(path.read_text()))]
    return found


RECORDED = _recorded()


def test_docs_holds_no_study_scripts():
    stray = [p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.py")
             if p.relative_to(DOCS).parts[0] not in CODE_IN_DOCS]
    assert not stray, f"scripts under docs/ (a study's belong in studies/<study>/): {stray}"


def test_the_studies_record_their_commands():
    assert len(RECORDED) >= 300
    assert {c.split()[0] for _, c in RECORDED} <= {"fv", "PYTHONPATH=."}


def test_every_recorded_script_exists_and_no_command_names_docs():
    for where, command in RECORDED:
        words = shlex.split(command)
        for word in words:
            value = word.split("=", 1)[-1]
            assert not value.startswith("docs/"), f"{where}: {command!r} names {value} (the studies left docs/)"
        for script in (w for w in words if w.endswith(".py")):
            assert (ROOT / script).is_file(), f"{where}: {command!r} names {script}, which does not exist"


def test_every_recorded_fv_command_parses():
    from bridges.cli import build_parser

    parser = build_parser()
    for where, command in RECORDED:
        if command.startswith("fv "):
            with contextlib.redirect_stderr(io.StringIO()) as err:
                try:
                    parser.parse_args(shlex.split(command)[1:])
                except SystemExit:
                    pytest.fail(f"{where}: fv refuses {command!r}: {err.getvalue().strip()}")


def _hook():
    spec = importlib.util.spec_from_file_location("studies_hook", DOCS / "_hooks" / "studies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav() -> list[str]:
    spec = importlib.util.spec_from_file_location("screenshots", DOCS / "_check" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.nav_pages()


def test_the_site_publishes_every_study_page_of_the_nav():
    pytest.importorskip("mkdocs")
    pytest.importorskip("yaml")
    published = set(_hook().study_files())
    studies = [page for page in _nav() if page.startswith("studies/")]
    assert len(studies) >= 7
    for page in studies:
        assert f"{page}.md" in published, f"the nav names {page}.md, which studies/ does not hold"
    assert not [p for p in published if not p.endswith((".md", ".png", ".svg", ".csv", ".json"))]
    assert not [p for p in published if "train" in Path(p).parts]


def test_no_page_holds_a_control_character():
    """A control character in a page (a ``\\a`` from ``"\\approx"`` written by a program) breaks MathJax in the
    browser while the build passes: none in any page of docs/ or studies/, nor in README.md."""
    import re

    bad = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "studies").rglob("*.md")]
    found = {str(p.relative_to(ROOT)): m.group() for p in pages if (m := bad.search(p.read_text(encoding="utf-8")))}
    assert not found, found
