"""Every ``fv`` command the documentation quotes works as quoted (docs/*.md and README.md).

Every command of a code block is parsed by ``fv``'s own parser (an unknown, repeated or abbreviated option,
a bad value: the page is wrong), and the cheap ones (``fv derive``, ``fv mc``, ``fv bounds``) also run, with
at most a few hundred Monte Carlo samples: they must succeed, or, where the page shows the refusal on the
next line (``fv mc: error: ...``), be refused with that line. The commands that train or read files the page
only names (``cov.npy``, ``spec.toml``, a run folder) are parsed only. Inline commands in the prose are
often fragments (``fv derive tree-loss --strategy path`` in a table): their options must exist and their
values parse, a missing required option or value is allowed. This caught ``fv mc ... --strategy fixed
--tokens 16 --design 2`` in docs/decoders.md, refused at run time ("design has 1 nodes but budget is 3").
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
RUN = ("derive", "mc", "bounds")  # cheap enough to run here
SAMPLES = {"mc": 300, "bounds": 300}
PLACEHOLDER = re.compile(r"\.\.\.|<|\||\b(?:RUN_DIR|DIR|KEY|COMMAND|S|B)\b")
FILES = re.compile(r"\S+\.(?:npy|csv|toml)\b")  # files the page names but does not ship


FRAGMENT = re.compile(r"required|expected one argument|argument (?:COMMAND|QUANTITY)")
# inline commands the pages quote as refused (docs/errors-and-limits.md, "Options"): refused they must be
QUOTED_AS_REFUSED = ("fv mc --depth 3 --depth 4", "fv mc --dep 3", "fv mc --prior tree --dim 7",
                     "fv mc --prior gaussian --cov isotropic --alpha 0.3")


def _quoted() -> list[tuple[str, str, str | None]]:
    """``(page, command, refusal)``: every command quoted, with the error line the page shows after it
    (``"inline"`` for a command in the prose)."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in re.findall(r"```[^\n]*\n(.*?)```", text, re.S):
            lines = [line.strip().removeprefix("$ ") for line in block.replace("\\\n", " ").splitlines()]
            for i, line in enumerate(lines):
                synopsis = "[--" in line  # a usage line: fv audit RUN_DIR [--samples 1000] ...
                if line.startswith("fv ") and not synopsis and not re.match(r"fv [\w -]*: error:", line):
                    after = lines[i + 1] if i + 1 < len(lines) else ""
                    found.append((page.name, line, after if re.match(r"fv [\w -]*: error:", after) else None))
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for inline in re.findall(r"`(fv [^`]+)`", prose):
            inline = " ".join(inline.split())
            if " --" in inline and not PLACEHOLDER.search(inline.split(" ", 2)[-1]):
                found.append((page.name, inline, "inline"))
    return found


QUOTED = _quoted()


def _fv(argv: list[str]) -> tuple[int, str]:
    from bridges.cli import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def _cheap(argv: list[str]) -> list[str]:
    """``argv`` with at most ``SAMPLES`` Monte Carlo samples and one thread (the options as quoted otherwise)."""
    command = next(a for a in argv if not a.startswith("-") and not re.fullmatch(r"[\d.e+-]+", a))
    if command not in SAMPLES:
        return argv
    argv = list(argv)
    if "--samples" in argv:
        i = argv.index("--samples") + 1
        argv[i] = str(min(int(argv[i]), SAMPLES[command]))
    else:
        argv += ["--samples", str(SAMPLES[command])]
    return argv if "--threads" in argv else argv + ["--threads", "1"]


def test_the_pages_quote_the_refused_commands():
    assert set(QUOTED_AS_REFUSED) <= {cmd for _, cmd, _ in QUOTED}


def test_the_pages_quote_commands():
    run = [cmd for _, cmd, refusal in QUOTED if refusal != "inline"]
    assert len(run) >= 30 and any("--strategy fixed --tokens 16 --design 2 " in cmd for cmd in run)


@pytest.mark.parametrize("page, command, refusal", QUOTED, ids=[f"{p}: {c[:60]}" for p, c, _ in QUOTED])
def test_a_quoted_command_works_as_quoted(page, command, refusal):
    from bridges.cli import build_parser

    argv = shlex.split(command, comments=True)[1:]
    if command in QUOTED_AS_REFUSED:
        code, err = _fv(_cheap([*argv, "--tau", "1/2"]))
        assert code == 2 and len(err.strip().splitlines()) == 1, (page, command, err)
        return
    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            build_parser().parse_args(argv)
    except SystemExit as exc:
        fragment = refusal == "inline" and (exc.code == 0 or FRAGMENT.search(err.getvalue()))
        assert fragment, f"{page}: `{command}` is refused by fv's parser: {err.getvalue().strip()}"
        return
    words = [a for a in argv if not a.startswith("-")]
    if refusal == "inline" or not set(words) & set(RUN) or FILES.search(command) or "--max-seconds" in argv:
        return  # parsed only: in the prose, it trains, reads a file the page does not ship, or shows a time cap
    code, err = _fv(_cheap(argv))
    if refusal is None:
        assert code == 0, f"{page}: `{command}` fails: {err.strip()}"
    else:
        assert code == 2 and err.strip().splitlines()[0][:40] == refusal[:40], (page, command, err)
