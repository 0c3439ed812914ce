"""The documentation site speaks to users: the pages say what a user can run and read, nothing of
how they were written (no issue numbers, internal paths or notes of the machine they were measured
on); the index's Quickstart is the README's; the results page's headline figure is made from the
summaries kept beside it."""

import importlib.util
import re

import pandas as pd
import pytest

from tests.paths import REPO

DOCS = REPO / "docs"


def _site_pages():
    """The Markdown and reST sources sphinx builds into pages (docs/results/ holds data, not pages)."""
    pages = []
    for path in sorted(DOCS.rglob("*")):
        rel = path.relative_to(DOCS)
        if path.suffix not in {".md", ".rst"} or rel.parts[0] in {"results", "_build", "generated", "auto_examples"}:
            continue
        pages.append(path)
    # the gallery's scripts become pages too (sphinx-gallery)
    pages += sorted((REPO / "examples").glob("*.py")) + sorted((REPO / "examples").glob("*.rst"))
    return pages


#: what a page for users must not say: issue numbers, the project's private data folder and notes,
#: and anecdotes of the machine the docs were written on
FORBIDDEN = [
    r"\bissues? ?#?\d+",
    r"\bissue-\d+",
    r"\.\./shared",
    r"NOTES\.md",
    r"load average",
    r"other agents",
    r"sharing the machine",
    r"helper jobs?",
    r"/work/",
]


def test_pages_found():
    names = {p.name for p in _site_pages()}
    assert {"index.md", "results.md", "statistics.md", "performance.md"} <= names


@pytest.mark.parametrize("page", _site_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_page_speaks_to_users(page):
    text = page.read_text(encoding="utf-8")
    found = [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for pattern in FORBIDDEN
        for m in re.finditer(pattern, text, flags=re.I)
    ]
    assert not found, f"{page.relative_to(REPO)} mentions {found}"


def _python_blocks(text):
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_index_quickstart_is_the_readme_quickstart():
    readme = (REPO / "README.md").read_text()
    index = (DOCS / "index.md").read_text()
    readme_qs = re.search(r"## Quickstart\n\n```python\n(.*?)```", readme, flags=re.S).group(1)
    index_qs = re.search(r"## Quickstart\n\n```python\n(.*?)```", index, flags=re.S).group(1)
    assert index_qs == readme_qs


def test_index_install_line_is_one_that_works():
    """faqstats is not on PyPI: the index installs from a clone."""
    index = (DOCS / "index.md").read_text()
    assert not re.search(r"pip install faqstats\b", index)
    assert "pip install -e ." in index


def test_results_images_exist():
    text = (DOCS / "results.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert "results/headline/headline.png" in images
    missing = [img for img in images if not (DOCS / img).is_file()]
    assert not missing


def test_headline_table_is_what_the_kept_summaries_give():
    """headline.csv (the plotted numbers) is make_figure.py's table of the summaries in docs/results/."""
    script = DOCS / "results" / "headline" / "make_figure.py"
    spec = importlib.util.spec_from_file_location("headline_make_figure", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = module.headline_table()
    kept = pd.read_csv(script.parent / "headline.csv")
    pd.testing.assert_frame_equal(table.reset_index(drop=True), kept, check_dtype=False, atol=1e-9)
    # every bank has the default, the ceiling, ProEval and the baseline at three budgets
    assert set(table["bank"]) == {"openllm_v1", "thin", "sparse", "large"}
    assert (table.groupby("bank")["method"].nunique() == 4).all()
    assert len(table) == 4 * 4 * 3
