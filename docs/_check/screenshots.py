"""Build the documentation site, serve it on 127.0.0.1 and shoot every page in headless Chromium.

    python docs/_check/screenshots.py                         # build, serve, shoot every page of the nav
    python docs/_check/screenshots.py --site site --pages index theory

The browser has no network: Chromium resolves no host name but 127.0.0.1 and every request to another host
is refused and reported, so the check sees the site as a reader without a network does (MathJax ships with
the site, docs/javascripts/mathjax/). Each page is saved as ``<out>/<page>.png`` (full page, 1280 px wide)
once MathJax has typeset it, and checked in the browser: math left as LaTeX source (and no typeset math at
all on the pages that hold formulas, ``MATH_PAGES``), requests to the network, images that did not load, code
cells of a tutorial without any output, tables or output wider than the page, errors on the console. The
problems are printed one a line and the exit status is 1 if there are any, so the script also serves as a check.

Needs Chromium (Debian: ``apt-get install chromium``) and the Python package ``playwright`` (its own
browser download is not needed: ``--chromium`` names the executable, ``/usr/bin/chromium`` by default).
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
MATH_PAGES = ("theory", "tutorials/01_derive_and_limits")  # pages that hold formulas: each must show typeset math (mjx-container)
OFFLINE = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]  # Chromium resolves no other host

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
  // a text output (a table the library prints) whose rows wrap: more lines on screen than in the text
  for (const pre of main.querySelectorAll(".jp-OutputArea-output pre")) {
    const lines = pre.textContent.replace(/\n+$/, "").split("\n").length;
    const style = getComputedStyle(pre);
    const lh = parseFloat(style.lineHeight) || 1.3 * parseFloat(style.fontSize);
    const pad = parseFloat(style.paddingTop) + parseFloat(style.paddingBottom);
    if (pre.scrollHeight - pad > (lines + 0.5) * lh) problems.push("output wraps its rows (" + Math.round((pre.scrollHeight - pad) / lh) +
      " lines on screen, " + lines + " in the text): " + pre.textContent.slice(0, 50).replace(/\s+/g, " "));
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


def local(url: str) -> bool:
    """A request the site may make with no network: its own server on 127.0.0.1, a file, or an inline resource."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.scheme in ("data", "blob", "about", "file") or (parts.scheme in ("http", "https")
                                                          and parts.hostname in ("127.0.0.1", "localhost"))


def shoot(base: str, pages: list[str], out: Path, chromium: str, width: int,
          math_pages=MATH_PAGES) -> list[str]:
    """Screenshot and check each page with the network off; one string a problem."""
    from playwright.sync_api import Error as PlaywrightError, sync_playwright

    problems = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", *OFFLINE])
        page = browser.new_page(viewport={"width": width, "height": 900})
        network = []  # requests that would need a network: refused, and each one is a problem

        def refuse(route):
            network.append(route.request.url)
            route.abort("internetdisconnected")

        page.route(lambda url: not local(url), refuse)
        console = []
        page.on("console", lambda m: console.append(m.text)
                if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
        page.on("pageerror", lambda e: console.append(str(e)))
        page.on("requestfailed", lambda r: console.append(f"{r.failure}: {r.url}") if local(r.url) else None)
        for name in pages:
            console.clear(), network.clear()
            page.goto(f"{base}/{name}.html", wait_until="load")
            loaded = True
            try:  # window.MathJax is the site's configuration until MathJax itself has loaded
                page.wait_for_function("() => window.MathJax && window.MathJax.startup"
                                       " && window.MathJax.startup.promise", timeout=20_000)
                page.evaluate("() => MathJax.startup.promise")
            except PlaywrightError:
                loaded = False
            png = out / f"{name.replace('/', '__')}.png"
            page.screenshot(path=str(png), full_page=True)
            found = page.evaluate(PROBE) + [f"console: {c[:100]}" for c in console]
            found += [f"request to the network (refused): {u[:100]}" for u in dict.fromkeys(network)]
            if not loaded:
                found.append("MathJax did not load in 20 s")
            typeset = page.evaluate("() => document.querySelectorAll('mjx-container').length")
            if name in math_pages and typeset == 0:
                found.append("no typeset math on a page of formulas (MathJax did not run)")
            height = page.evaluate("() => document.documentElement.scrollHeight")
            print(f"{name:45s} {height:6d} px {typeset:5d} formulas  {'ok' if not found else f'{len(found)} problem(s)'}")
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
    ap.add_argument("--width", type=int, default=1280)
    args = ap.parse_args(argv)
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
        problems = shoot(f"http://127.0.0.1:{port}", args.pages, args.out, args.chromium, args.width)
    finally:
        stop(server)
    print(f"screenshots in {args.out}")
    for p in problems:
        print("PROBLEM", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
