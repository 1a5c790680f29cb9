"""MkDocs hook: the Sphinx roles of the docstrings (``:func:`bounds```, ``:class:`~fvnum.Estimate```) as the
API reference shows them. mkdocstrings renders the docstrings as Markdown, which leaves the role in the
text (``:func:bounds``); this drops the role, keeps the name as code, and links it to its entry where the
same page documents exactly one object of that name (``bounds`` on the fvnum page links to
``fvnum.optimum.bracket.bounds``)."""
from __future__ import annotations

import re

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|obj|exc|const):<code>~?\.?([\w.]+)(\(\))?</code>")
ANCHOR = re.compile(r'\bid="([\w.]+)"')


def link(html: str) -> str:
    ids = ANCHOR.findall(html)

    def one(m: re.Match) -> str:
        name, call = m.group(1), m.group(2) or ""
        shown = f"<code>{name}{call}</code>"
        found = [i for i in ids if i == name] or [i for i in ids if i.endswith("." + name)]
        return f'<a href="#{found[0]}">{shown}</a>' if len(found) == 1 else shown

    return ROLE.sub(one, html)


def on_page_content(html, page, config, files):
    return link(html)
