#!/usr/bin/env python3
"""Check the built site's layout in headless Chromium at a 1,400 px wide window.

Usage (after the docs build; .ci/docs runs it)::

    python3 .ci/check_layout.py [docs/_build/html]

For every page of the user guide, the tutorials and the index, a copy of the page with a small
measuring script is opened with ``chromium --headless --dump-dom`` (no network), and the check
fails when

- a table is wider than the text column and does not scroll inside it (its content would be
  cut off or spill over the page-table of contents);
- the top bar's navigation links do not sit on one line.

Prints one line per page; exit status 0 when every page passes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_math import _browser  # noqa: E402

WIDTH = 1400

MEASURE = """
<script>
window.addEventListener("load", () => setTimeout(() => {
  const out = {tables: [], nav: []};
  const article = document.querySelector("article.bd-article") || document.body;
  const col = article.getBoundingClientRect();
  for (const table of article.querySelectorAll("table")) {
    // the nearest element that scrolls horizontally (the table itself or a wrapper)
    let el = table, scrolls = false;
    while (el && el !== article) {
      const ox = getComputedStyle(el).overflowX;
      if (ox === "auto" || ox === "scroll") { scrolls = true; break; }
      el = el.parentElement;
    }
    const r = table.getBoundingClientRect();
    const box = scrolls ? el.getBoundingClientRect() : r;
    out.tables.push({
      width: Math.round(table.scrollWidth), column: Math.round(col.width),
      scrolls: scrolls, box_right: Math.round(box.right), column_right: Math.round(col.right),
      head: (table.querySelector("th") || {}).textContent || ""
    });
  }
  for (const a of document.querySelectorAll(".bd-header .navbar-header-items__center .nav-link")) {
    const r = a.getBoundingClientRect();
    if (r.width > 0) out.nav.push({text: a.textContent.trim(), top: Math.round(r.top)});
  }
  const pre = document.createElement("pre");
  pre.id = "layout-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 500));
</script>
"""


def measure(page, browser):
    source = page.read_text(encoding="utf-8")
    with tempfile.NamedTemporaryFile("w", suffix=".html", dir=page.parent, delete=False, encoding="utf-8") as f:
        f.write(source.replace("</body>", MEASURE + "</body>"))
        probe = Path(f.name)
    try:
        cmd = [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={WIDTH},1000",
            "--virtual-time-budget=10000", "--dump-dom", probe.as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    finally:
        probe.unlink()
    m = re.search(r'<pre id="layout-check">(.*?)</pre>', proc.stdout, flags=re.S)
    if not m:
        raise SystemExit(f"check_layout: no measurement from {page} (exit {proc.returncode}): {proc.stderr[-1000:]}")
    import html as html_module

    return json.loads(html_module.unescape(m.group(1)))


def problems_of(result):
    problems = []
    for t in result["tables"]:
        if t["box_right"] > t["column_right"] + 1:
            problems.append(f"table {t['head']!r}... spills {t['box_right'] - t['column_right']} px out of its column")
        if t["width"] > t["column"] + 1 and not t["scrolls"]:
            problems.append(f"table {t['head']!r}... is {t['width']} px in a {t['column']} px column and does not scroll")
    tops = {n["top"] for n in result["nav"]}
    if len(tops) > 1:
        problems.append(f"the top bar's links wrap onto {len(tops)} lines: {[n['text'] for n in result['nav']]}")
    return problems


def main(argv):
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "docs" / "_build" / "html"
    pages = [
        root / "index.html",
        *sorted(root.glob("*.html")),
        *sorted((root / "guide").glob("*.html")),
        *sorted((root / "tutorials").glob("*.html")),
    ]
    skip = {"genindex.html", "search.html", "py-modindex.html"}
    pages = [p for p in dict.fromkeys(pages) if p.is_file() and p.name not in skip]
    if not pages:
        print(f"check_layout: no pages under {root} (build the docs first)")
        return 1
    browser = _browser()
    failed = False
    for page in pages:
        result = measure(page, browser)
        problems = problems_of(result)
        wide = sum(t["width"] > t["column"] + 1 for t in result["tables"])
        status = "ok" if not problems else "FAILED"
        print(f"check_layout: {page.relative_to(root)}: {len(result['tables'])} tables "
              f"({wide} scroll in their column), top bar {len({n['top'] for n in result['nav']})} line(s): {status}")
        for p in problems:
            print(f"  - {p}")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
