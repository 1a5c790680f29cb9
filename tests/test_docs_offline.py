"""The site renders its formulas with no network: MathJax ships with it (docs/javascripts/mathjax/), mkdocs.yml
loads nothing from another host, and a page of formulas built with the site's own configuration is typeset in
headless Chromium with the network off (docs/_check/screenshots.py, which also reports any request that would
need a network)."""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MATHJAX = DOCS / "javascripts" / "mathjax"
CHROMIUM = "/usr/bin/chromium"


def _config() -> dict:
    yaml = pytest.importorskip("yaml")

    class Loader(yaml.SafeLoader):  # mkdocs.yml may hold !!python/name tags; none is needed here
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)


def _check():
    spec = importlib.util.spec_from_file_location("screenshots", DOCS / "_check" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_loads_nothing_from_another_host():
    config = _config()
    assets = [*config.get("extra_javascript", []), *config.get("extra_css", [])]
    remote = [a for a in assets if re.match(r"^[a-z]+://|^//", str(a))]
    assert not remote, f"mkdocs.yml loads from the network: {remote}"
    for asset in assets:
        assert (DOCS / asset).is_file(), f"mkdocs.yml names {asset}, which docs/ does not hold"
    assert config["theme"].get("font") is False  # no request to a font service
    assert "javascripts/mathjax/tex-mml-chtml.js" in config["extra_javascript"]
    assert config["extra_javascript"].index("javascripts/mathjax.js") < config["extra_javascript"].index(
        "javascripts/mathjax/tex-mml-chtml.js")  # the configuration is read by MathJax as it starts


def test_mathjax_ships_whole():
    """Everything tex-mml-chtml.js loads on demand is beside it: the TeX packages that docs/javascripts/mathjax.js
    asks for and the CommonHTML fonts."""
    assert (MATHJAX / "tex-mml-chtml.js").stat().st_size > 1_000_000
    assert (MATHJAX / "LICENSE").is_file() and "3.2.2" in (MATHJAX / "SOURCE.txt").read_text()
    for package in re.findall(r"\[tex\]/(\w+)", (DOCS / "javascripts" / "mathjax.js").read_text()):
        assert (MATHJAX / "input" / "tex" / "extensions" / f"{package}.js").is_file(), package
    fonts = {p.name for p in (MATHJAX / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff")}
    assert {"MathJax_Main-Regular.woff", "MathJax_Math-Italic.woff", "MathJax_Size1-Regular.woff"} <= fonts
    assert len(fonts) == 23
    size = sum(p.stat().st_size for p in MATHJAX.rglob("*") if p.is_file())
    assert size < 3_000_000, f"docs/javascripts/mathjax holds {size} bytes"


def test_the_check_refuses_every_host_but_its_own_server():
    check = _check()
    assert check.local("http://127.0.0.1:8123/theory.html") and check.local("data:font/woff;base64,AAAA")
    for url in ("https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js", "http://10.0.0.1/x.js",
                "https://fonts.googleapis.com/css", "http://example.org:80/"):
        assert not check.local(url), url
    assert "theory" in check.MATH_PAGES
    assert any("--host-resolver-rules" in a and "~NOTFOUND" in a for a in check.OFFLINE)


def _site(tmp_path: Path, page: str, extra_javascript=None) -> Path:
    """A one-page site built with mkdocs.yml's theme, Markdown extensions, scripts and styles."""
    yaml = pytest.importorskip("yaml")
    pytest.importorskip("mkdocs")
    config = _config()
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copytree(DOCS / "javascripts", docs / "javascripts")
    shutil.copytree(DOCS / "stylesheets", docs / "stylesheets")
    (docs / "theory.md").write_text(page)
    (docs / "index.md").write_text("# index\n")
    mini = {"site_name": "offline check", "docs_dir": str(docs), "site_dir": str(tmp_path / "site"),
            "strict": True, "use_directory_urls": False, "theme": config["theme"], "plugins": [],
            "markdown_extensions": config["markdown_extensions"], "extra_css": config["extra_css"],
            "extra_javascript": extra_javascript or config["extra_javascript"]}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(mini))
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(tmp_path / "mkdocs.yml")],
                   check=True, capture_output=True, timeout=300)
    return tmp_path / "site"


PAGE = r"""# Formulas

The latent \(\theta \in \mathbb{R}^D\) and the loss

$$
L(B) = \frac{\alpha^K - \alpha^B}{\alpha - 1}, \qquad \text{path\_loss}
$$

and \(\tau^2 = \sigma^2 / N\).
"""


def _shoot(site: Path, tmp_path: Path) -> list[str]:
    pytest.importorskip("playwright")
    if not Path(CHROMIUM).exists():
        pytest.skip("no Chromium at /usr/bin/chromium (Debian: apt-get install chromium)")
    check = _check()
    port = check.free_port()
    server = check.serve(site, port)
    try:
        return check.shoot(f"http://127.0.0.1:{port}", ["theory"], tmp_path / "png", CHROMIUM, 1280)
    finally:
        check.stop(server)


@pytest.mark.heavy
def test_formulas_render_with_the_network_off(tmp_path, capsys):
    problems = _shoot(_site(tmp_path, PAGE), tmp_path)
    assert problems == []
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("theory")][0]
    assert int(line.split("px")[1].split("formulas")[0]) >= 3, line  # three formulas typeset


@pytest.mark.heavy
def test_the_check_fails_a_site_that_needs_the_network(tmp_path):
    """MathJax from a CDN, as the site loaded it before it shipped its own: with the network off no formula is
    typeset, and the check says so."""
    site = _site(tmp_path, PAGE + '\n![remote](https://example.org/figure.png)\n',
                 ["javascripts/mathjax.js", "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"])
    problems = "\n".join(_shoot(site, tmp_path))
    assert "request to the network (refused): https://cdn.jsdelivr.net/npm/mathjax@3" in problems
    assert "request to the network (refused): https://example.org/figure.png" in problems
    assert "raw LaTeX" in problems and "no typeset math" in problems
