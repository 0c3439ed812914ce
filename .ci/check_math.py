#!/usr/bin/env python3
"""Check that every formula of a built docs page typesets in a real browser, offline.

Usage (after the docs build; .ci/docs runs it)::

    python3 .ci/check_math.py [docs/_build/html/statistics.html ...]

Each page is opened with Debian's ``chromium --headless --dump-dom`` with every host name
unresolvable (so a CDN cannot stand in for the MathJax the site ships), given time for MathJax
to finish, and its rendered DOM is read back. The check fails when

- the page loads MathJax (or any script) from the network;
- raw TeX delimiters (``\\(``, ``\\)``, ``\\[``, ``\\]``, ``$$``) remain in the rendered text;
- fewer MathJax containers than math elements (``span.math``, ``div.math``) were produced;
- MathJax reported an error (``mjx-merror``) for a formula.

It prints ``typeset/total`` per page. Exit status 0 when every page passes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PAGES = [ROOT / "docs" / "_build" / "html" / "statistics.html"]
DELIMITERS = ("\\(", "\\)", "\\[", "\\]", "$$")


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit(
        "check_math: no headless browser found (apt-get install -y chromium); "
        "the math check needs one"
    )


def _text_only(html):
    """The page's body with scripts, styles and tags removed (what a reader sees)."""
    body = html[html.find("<body") :] if "<body" in html else html
    body = re.sub(r"<script\b.*?</script>", "", body, flags=re.S | re.I)
    body = re.sub(r"<style\b.*?</style>", "", body, flags=re.S | re.I)
    # MathJax's hidden MathML copy for screen readers holds no TeX; drop tags, keep text
    return re.sub(r"<[^>]+>", " ", body)


def dump_dom(page, browser, budget_ms=30000):
    """The DOM of ``page`` after its scripts ran, from headless Chromium with no network."""
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--no-first-run",
        "--allow-file-access-from-files",
        # every host name fails to resolve: a page that needs a CDN fails here as it would offline
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--virtual-time-budget={budget_ms}",  # let MathJax's asynchronous typesetting finish
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or "<html" not in proc.stdout:
        raise SystemExit(
            f"check_math: {browser} failed on {page} (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
        )
    return proc.stdout


def check_page(page, browser):
    """Problems found on one page (an empty list when it passes) and the counts."""
    problems = []
    source = page.read_text(encoding="utf-8")
    n_math = len(re.findall(r'<(?:span|div) class="math\b', source))
    remote = re.findall(r'<script[^>]+src="(https?:[^"]+)"', source)
    if remote:
        problems.append(f"scripts loaded from the network: {remote}")
    if n_math == 0:
        problems.append("no math elements in the built page (was it built from statistics.md?)")
    dom = dump_dom(page, browser)
    text = _text_only(dom)
    for delim in DELIMITERS:
        count = text.count(delim)
        if count:
            at = text.find(delim)
            context = " ".join(text[max(0, at - 60) : at + 60].split())
            problems.append(f"{count} raw {delim!r} left in the rendered page, e.g. ...{context}...")
    n_typeset = len(re.findall(r"<mjx-container\b", dom))
    if n_typeset < n_math:
        problems.append(f"only {n_typeset} of {n_math} formulas typeset")
    n_errors = len(re.findall(r"<mjx-merror\b", dom))
    if n_errors:
        problems.append(f"{n_errors} formulas failed to typeset (mjx-merror)")
    return problems, n_typeset, n_math


def main(argv):
    pages = list(dict.fromkeys(Path(p).resolve() for p in argv)) or DEFAULT_PAGES
    browser = _browser()
    failed = False
    for page in pages:
        if not page.is_file():
            print(f"check_math: {page} does not exist (build the docs first: bash .ci/docs)")
            failed = True
            continue
        problems, n_typeset, n_math = check_page(page, browser)
        status = "ok" if not problems else "FAILED"
        print(f"check_math: {page.name}: {n_typeset}/{n_math} formulas typeset offline: {status}")
        for problem in problems:
            print(f"  - {problem}")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
