"""Build the documentation site, serve it on 127.0.0.1 and shoot every page in headless Chromium.

    python docs/_check/screenshots.py                         # build, serve, shoot every page of the nav
    python docs/_check/screenshots.py --site site --pages index theory
    python docs/_check/screenshots.py --mathjax node_modules/mathjax/es5   # a machine without network

Each page is saved as ``<out>/<page>.png`` (full page, 1280 px wide) once MathJax has typeset it, and
checked in the browser: math left as LaTeX source, images that did not load, code cells of a tutorial
without any output, tables wider than the page, errors on the console. The problems are printed one a
line and the exit status is 1 if there are any, so the script also serves as a check.

Needs Chromium (Debian: ``apt-get install chromium``) and the Python package ``playwright`` (its own
browser download is not needed: ``--chromium`` names the executable, ``/usr/bin/chromium`` by default).
MathJax is loaded from a CDN as the site says; ``--mathjax DIR`` answers those requests from a local
copy of MathJax 3's ``es5`` folder (``npm install mathjax@3``) where there is no network.
The server is a ``python -m http.server`` child bound to 127.0.0.1 and is stopped by its pid.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.request import urlopen

ROOT = Path(__file__).resolve().parents[2]
CDN = "https://cdn.jsdelivr.net/npm/mathjax@3/es5/"

def nav_pages(config: Path = ROOT / "mkdocs.yml") -> list[str]:
    """Every page of the site's navigation, in its order, read from ``mkdocs.yml`` (``foo.md`` and the executed
    tutorials ``tutorials/bar.py`` are ``foo`` and ``tutorials/bar`` in the built site; a study's page
    ``studies/x/report.md``, published from the repository's ``studies/`` by docs/_hooks/studies.py, is
    ``studies/x/report``)."""
    import yaml

    pages: list[str] = []

    def walk(item):
        if isinstance(item, str):
            if not item.startswith(("http://", "https://")):
                pages.append(item.rsplit(".", 1)[0])
        elif isinstance(item, dict):
            for value in item.values():
                walk(value)
        elif isinstance(item, list):
            for value in item:
                walk(value)

    walk(yaml.safe_load(config.read_text())["nav"])
    return pages


# Runs in the page once MathJax is done: one line per problem found.
PROBE = r"""
() => {
  const problems = [];
  const main = document.querySelector("article.md-content__inner") || document.body;
  const width = main.getBoundingClientRect().width;
  // math that MathJax did not typeset: an arithmatex span still holding \( .. \) or \[ .. \]
  for (const el of main.querySelectorAll(".arithmatex")) {
    if (!el.querySelector("mjx-container")) problems.push("raw LaTeX: " + el.textContent.slice(0, 60));
  }
  for (const el of main.querySelectorAll("mjx-merror")) {
    problems.push("MathJax error: " + (el.getAttribute("data-mjx-error") || el.textContent).slice(0, 80));
  }
  // prose holding math delimiters outside any math or code: a $$ block that Markdown split
  for (const el of main.querySelectorAll("p, li, td, th, dd, h1, h2, h3, h4")) {
    const bare = el.cloneNode(true);
    for (const x of bare.querySelectorAll("code, pre, mjx-container, .arithmatex, ul, ol, p")) x.remove();
    const m = bare.textContent.match(/\$|\\\(|\\\[|\\frac|\\mathbb|\\theta/);
    if (m) problems.push("math left in the text: ..." + bare.textContent.slice(Math.max(0, m.index - 30), m.index + 30).replace(/\s+/g, " ") + "...");
  }
  // a Sphinx role of a docstring that the build left as text (:func:name)
  const role = main.innerText.match(/:(func|class|meth|mod|attr|data|obj|exc):\S+/);
  if (role) problems.push("Sphinx role left in the text: " + role[0]);
  // notebook outputs holding LaTeX ($...$) that was not typeset
  for (const el of main.querySelectorAll(".jp-RenderedLatex")) {
    if (!el.querySelector("mjx-container")) problems.push("raw LaTeX output: " + el.textContent.slice(0, 60));
  }
  // display math wider than the page: cut off in print and in a screenshot, a scroll bar on screen
  for (const el of main.querySelectorAll("div.arithmatex")) {
    if (el.scrollWidth > el.clientWidth + 2) problems.push("display math wider than the page (" + el.scrollWidth +
      " > " + el.clientWidth + " px): " + el.textContent.slice(0, 50));
  }
  for (const img of main.querySelectorAll("img")) {
    if (!img.complete || img.naturalWidth === 0) problems.push("image not loaded: " + img.getAttribute("src"));
  }
  // a code cell (not markdown) with no output area and no `hide` reason: the cell was not executed
  for (const cell of main.querySelectorAll(".jp-CodeCell")) {
    const prompt = cell.querySelector(".jp-InputPrompt");
    const count = prompt ? prompt.textContent.trim() : "";
    if (count === "In\u00a0[\u00a0]:" || count === "In [ ]:") problems.push("code cell not executed");
  }
  for (const t of main.querySelectorAll("table")) {
    const box = t.getBoundingClientRect();
    const wrap = t.closest(".md-typeset__scrollwrap, .jp-OutputArea-output");
    if (!wrap && box.width > width + 2) problems.push("table wider than the page: " + Math.round(box.width) + " px");
  }
  // text that Markdown left raw: a literal HTML tag shown as text
  const text = main.innerText;
  const tag = text.match(/<\/?(div|span|table|br|sup|sub)\b[^>]*>/);
  if (tag) problems.push("raw HTML in text: " + tag[0]);
  return problems;
}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(site: Path) -> None:
    t0 = time.time()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
                   cwd=ROOT, env=env, check=True)
    print(f"built {site} in {time.time() - t0:.0f} s")


def serve(site: Path, port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(site)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            urlopen(f"http://127.0.0.1:{port}/index.html", timeout=1).close()
            return server
        except OSError:
            time.sleep(0.1)
    stop(server)
    raise SystemExit(f"the server on 127.0.0.1:{port} did not answer")


def stop(server: subprocess.Popen) -> None:
    os.kill(server.pid, signal.SIGTERM)
    server.wait(timeout=10)


def shoot(base: str, pages: list[str], out: Path, chromium: str, mathjax: Path | None, width: int) -> list[str]:
    from playwright.sync_api import sync_playwright

    problems = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": 900})
        if mathjax is not None:
            def local(route):
                name = route.request.url[len(CDN):].split("?")[0]
                path = mathjax / name
                if path.is_file():
                    route.fulfill(path=str(path))
                else:
                    route.fulfill(status=404, body=f"not in {mathjax}: {name}")
            page.route(CDN + "**", local)
        console = []
        page.on("console", lambda m: console.append(m.text)
                if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
        page.on("pageerror", lambda e: console.append(str(e)))
        page.on("requestfailed", lambda r: console.append(f"{r.failure}: {r.url}"))
        for name in pages:
            console.clear()
            page.goto(f"{base}/{name}.html", wait_until="load")
            page.wait_for_function("() => !window.MathJax || !window.MathJax.startup"
                                   " || window.MathJax.startup.promise", timeout=20_000)
            page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
            png = out / f"{name.replace('/', '__')}.png"
            page.screenshot(path=str(png), full_page=True)
            found = page.evaluate(PROBE) + [f"console: {c[:100]}" for c in console]
            height = page.evaluate("() => document.documentElement.scrollHeight")
            print(f"{name:45s} {height:6d} px  {'ok' if not found else f'{len(found)} problem(s)'}")
            problems += [f"{name}: {p}" for p in found]
        browser.close()
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", type=Path, help="an already built site folder (default: build one now)")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "fvtheory-screenshots")
    ap.add_argument("--pages", nargs="*", default=None,
                    help="pages by path without .html (default: every page of mkdocs.yml's nav)")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--mathjax", type=Path, help="local MathJax 3 es5/ folder answering the CDN's requests")
    ap.add_argument("--width", type=int, default=1280)
    args = ap.parse_args(argv)
    if args.mathjax is not None and not (args.mathjax / "tex-mml-chtml.js").is_file():
        ap.error(f"--mathjax {args.mathjax}: no tex-mml-chtml.js there (MathJax 3's es5/ folder)")
    if not Path(args.chromium).exists():
        ap.error(f"--chromium {args.chromium}: not found (Debian: apt-get install chromium)")
    if args.pages is None:
        args.pages = nav_pages()
    site = args.site
    if site is None:
        site = Path(tempfile.mkdtemp(prefix="fvtheory-site-"))
        build(site)
    missing = [p for p in args.pages if not (site / f"{p}.html").is_file()]
    if missing:
        ap.error(f"pages not in {site}: {', '.join(missing)}")
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = serve(site, port)
    try:
        problems = shoot(f"http://127.0.0.1:{port}", args.pages, args.out, args.chromium, args.mathjax, args.width)
    finally:
        stop(server)
    print(f"screenshots in {args.out}")
    for p in problems:
        print("PROBLEM", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
