"""What a reader meets on the site's pages: the project's own theory page cited (never the specification file, which
is not in the repository), the bridges reference opening with what each module is for, figures at page width, and
the function-vector study's numbers in tables."""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SPEC = "THEORY.md"


def test_no_page_cites_the_specification_file():
    pages = [ROOT / "README.md", *DOCS.rglob("*.md"), *(DOCS / "tutorials").glob("*.py"),
             *(ROOT / "studies" / "function_vectors").glob("*.md")]
    found = [str(p.relative_to(ROOT)) for p in pages if SPEC in p.read_text(encoding="utf-8")]
    assert not found, f"pages citing {SPEC}, which is not in the repository (cite docs/theory.md): {found}"


def test_no_docstring_or_message_cites_the_specification_file():
    """Docstrings (the API reference, help()) and messages: every string literal of the packages (comments aside)."""
    found = []
    for package in ("fvsym", "fvnum", "bridges"):
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if SPEC not in text:
                continue
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.STRING and SPEC in tok.string:
                    found.append(f"{path.relative_to(ROOT)}:{tok.start[0]}")
    assert not found, f"strings citing {SPEC} (cite docs/theory.md): {found}"


def test_the_bridges_reference_opens_with_what_each_module_is_for():
    text = (DOCS / "reference" / "bridges.md").read_text()
    blocks = re.findall(r"^::: (bridges\.[\w.]+)", text, re.M)
    first = text.index("\n::: ")
    table = re.findall(r"^\| \[`(bridges\.[\w.]+)`\]\(#\1\) \| (.+) \|$", text[:first], re.M)
    assert [m for m, _ in table] == blocks, "the table lists every module documented below, in the same order"
    assert all(len(what) > 20 for _, what in table)
    for block in re.split(r"\n(?=::: )", text[first:])[1:]:  # constants are left out where members are listed
        assert "members: false" in block or '"!^[A-Z][A-Z0-9_]*$"' in block, block.splitlines()[0]


def test_the_findings_figures_stand_at_page_width():
    lines = (DOCS / "findings.md").read_text().splitlines()
    assert not [ln for ln in lines if ln.lstrip().startswith("|") and "![" in ln], "a figure inside a table cell"
    assert sum(ln.startswith("![") for ln in lines) >= 3


def test_the_function_vector_study_gives_its_numbers_as_tables():
    page = (ROOT / "studies" / "function_vectors" / "function_vectors.md").read_text()
    found = page[page.index("## Found"):page.index("## Budget")]
    prose = [p for p in found.split("\n\n") if p.strip() and not p.lstrip().startswith("|")]
    tables = [p for p in found.split("\n\n") if p.lstrip().startswith("|")]
    assert len(tables) >= 5
    for paragraph in prose:
        numbers = re.findall(r"\b\d+\.\d+", paragraph)
        assert len(numbers) <= 1, f"numbers in prose (put them in a table): {numbers} in {paragraph[:80]!r}"
