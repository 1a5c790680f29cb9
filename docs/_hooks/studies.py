"""MkDocs hook: the studies are published from where they live, ``studies/<study>/`` at the repository's top
(beside the code, not under ``docs/``). Every page, figure and data file of a study (``.md``, ``.png``,
``.svg``, ``.csv``, ``.json``) joins the site's files with the repository's root as its source folder, so its
path on the site is ``studies/<study>/<file>`` as in the repository: the nav names ``studies/scaling/report.md``,
a page of ``docs/`` links ``studies/softmax/fig_K4.png``, a study page links ``../../training.md``.

``on_files`` runs before the nav is built. ``exclude_docs`` (mkdocs.yml) applies to these files too, by the
same paths: a study's resumable state (``studies/scaling/study/``) and its local run folders (``**/train/``)
stay off the site. Scripts (``.py``) are not published."""
from __future__ import annotations

import os
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
STUDIES = "studies"
PUBLISHED = (".md", ".png", ".svg", ".csv", ".json")
SKIPPED = {"train", "__pycache__"}  # local run folders (git-ignored, large) and caches: not even walked


def study_files(root: Path = ROOT) -> list[str]:
    """The published files under ``root/studies``, as paths relative to ``root`` (``/``-separated, sorted)."""
    found = []
    for folder, dirs, names in os.walk(root / STUDIES):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not d.startswith("."))
        rel = Path(folder).relative_to(root)
        found += [(rel / n).as_posix() for n in sorted(names) if n.endswith(PUBLISHED) and not n.startswith(".")]
    return found


def on_files(files, config):
    for path in study_files():
        if files.get_file_from_path(path) is None:  # a docs/studies/ file of the same path would win
            files.append(File(path, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files
