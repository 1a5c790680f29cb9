"""Every list on a page of the site or a study starts after a blank line: Python-Markdown (mkdocs) renders a list
written straight under a paragraph line as more of the paragraph, its items run together with their dashes."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ITEM = re.compile(r"^([-*]|\d+\.) ")
# lines a list may follow directly: blank, indented (a list item's continuation), a heading, an item, a table
# row, a quote or HTML
OPENS = re.compile(r"^(\s|#|[-*] |\d+\. |\||>|<)")


def glued_lists(text: str) -> list[int]:
    """Line numbers (1-based) of list items written straight under a paragraph line, outside code fences."""
    lines, fence, found = text.split("\n"), False, []
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
        elif not fence and i and ITEM.match(line) and lines[i - 1].strip() and not OPENS.match(lines[i - 1]):
            found.append(i + 1)
    return found


def test_the_rule_finds_a_glued_list_and_passes_a_separated_one():
    assert glued_lists("A paragraph:\n- an item\n- another") == [2]
    assert glued_lists("A paragraph:\n\n- an item\n  more of it\n- another") == []
    assert glued_lists("```\ntext\n- not a list\n```") == []


def test_no_page_glues_a_list_to_a_paragraph():
    pages = [p for p in [*ROOT.glob("docs/**/*.md"), *ROOT.glob("studies/**/*.md"), ROOT / "README.md"]
             if p.is_file() and "train" not in p.relative_to(ROOT).parts]
    glued = {str(p.relative_to(ROOT)): n for p in pages if (n := glued_lists(p.read_text(encoding="utf-8")))}
    assert glued == {}, glued
