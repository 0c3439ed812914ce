"""Sphinx configuration of the faqstats documentation.

Build (warnings are errors)::

    pip install -e ".[docs]"
    sphinx-build -W -b html docs docs/_build/html

or ``.ci/docs``, which does both. The build is offline: no intersphinx inventories are fetched.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# the work tree's faqstats, not an installed copy
sys.path.insert(0, str(ROOT))

import faqstats  # noqa: E402

#: the modules whose ``__all__`` the API reference covers (checked at build time)
PUBLIC_MODULES = ("faqstats", "faqstats.experiments", "faqstats.integrations", "faqstats.batched")

# the gallery draws with matplotlib's object API; no display here
os.environ.setdefault("MPLBACKEND", "Agg")

# The gallery runs in this process. Its problems are small, and torch's intra-op threads
# contending for a few shared cores made the build 5x slower (2 min 51 s against 31 s
# with one thread, on the 2-core CI machine under load).
import torch  # noqa: E402

torch.set_num_threads(1)

project = "faqstats"
author = "faqstats developers"
copyright = "faqstats developers"
release = faqstats.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",  # with a local MathJax 3 (below): formulas render with no network
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "results/**",  # CSV/JSON/PNG outputs that results.md shows or links to; not pages
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.md5",
    "auto_examples/*.json",
    "auto_examples/*.codeobj.json",
    "**/*.ipynb",
]

# -- MyST: the Markdown pages of docs/ are the user guide ------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
# docs/*.md link to sections of each other as page.md#heading-slug (GitHub's slugs)
myst_heading_anchors = 3

# -- autodoc / autosummary / numpydoc ------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"  # the numpydoc Parameters sections already give the types
autoclass_content = "class"
autodoc_member_order = "groupwise"

numpydoc_show_class_members = False  # the class template lists the members itself
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False  # its default aliases point into intersphinx inventories
# numpydoc validation: a warning (an error under -W) for every failed check on a documented
# object. The set is the checks the current docstrings pass; left out are the style checks
# GL02, GL07, PR04, PR07-PR09, RT01, RT03, SA01, SA03, SA04, SS01-SS03, SS05, SS06, ES01 and
# EX01 (every public name's Examples section is checked by tests/surfaces/test_docstrings.py instead).
numpydoc_validate = True
numpydoc_validation_checks = {
    "GL01", "GL03", "GL05", "GL06", "GL08", "GL09", "GL10",  # layout; GL08: every documented object has a docstring
    "PR01", "PR02", "PR03",  # the Parameters section names every parameter, none other, in signature order
    "PR05", "PR06", "PR10",  # type spelling
    "RT02", "RT04", "RT05", "SA02", "SS04", "YD01",  # RT02: a single return value is its type, unnamed
}
# Inherited scikit-learn methods (get_params, set_params, ...) and dataclass machinery are
# not ours to fix.
numpydoc_validation_exclude = {
    r"\.get_params$",
    r"\.set_params$",
    r"\.set_fit_request$",
    r"\.set_score_request$",
    r"\.get_metadata_routing$",
    r"\.__init__$",
    r"\.__repr__$",
    r"\.__eq__$",
    # a class attribute that is None until a rule names itself (the class docstring documents it)
    r"^faqstats\.IntervalRule\.name$",
}


def _public_names():
    """``(module name, name, object)`` for every name of a public module's ``__all__``."""
    import importlib

    for modname in PUBLIC_MODULES:
        module = importlib.import_module(modname)
        for name in module.__all__:
            yield modname, name, getattr(module, name)


def _inherited_docstrings():
    """Public class methods that inherit their docstring, as exclusion patterns.

    A method with no docstring of its own that overrides a documented one
    (``UniformSampler.scores``...) shows the parent's on its page (``autodoc_inherit_docstrings``),
    but numpydoc validates the object's own empty ``__doc__`` and would report GL08 for each.
    """
    import inspect

    names = set()
    for modname, name, cls in _public_names():
        if not inspect.isclass(cls):
            continue
        for attr, value in vars(cls).items():
            if (
                not attr.startswith("_")
                and callable(value)
                and not getattr(value, "__doc__", None)
                and any(getattr(getattr(base, attr, None), "__doc__", None) for base in cls.__mro__[1:])
            ):
                names.add("^" + re.escape(f"{modname}.{name}.{attr}") + "$")
    return names


numpydoc_validation_exclude |= _inherited_docstrings()


def _record_docstrings():
    """The docstrings of the public dataclasses, as exact-match patterns.

    The result records (``AccuracyResult``, ``SyntheticBank``, ``PolicyState``...) document
    their fields under Attributes, what users read; PR01 wants the generated ``__init__``'s
    parameters, the same fields, under Parameters too. tests/surfaces/test_docstrings.py checks
    instead that the Attributes section names every field, in order.
    """
    import dataclasses
    import pydoc

    return [
        r"\A" + re.escape(pydoc.getdoc(obj)) + r"\Z"
        for _, _, obj in _public_names()
        if isinstance(obj, type) and dataclasses.is_dataclass(obj)
    ]


# PR01 is not checked on the public dataclasses' own docstrings (their methods are checked).
numpydoc_validation_overrides = {"PR01": _record_docstrings()}

# -- sphinx-gallery: examples/ executed at build time ---------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",  # every plot_*.py runs
    "doc_module": ("faqstats",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"faqstats": None},
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "min_reported_time": 5,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
}

# -- math: MathJax 3 served from the site itself ---------------------------------------------
# Sphinx's default is MathJax from a CDN, so no formula renders without network access (and
# MathJax 4 fetches its fonts from the CDN even when its script is local). The pip package
# sphinx-mathjax-offline (the docs extra) ships MathJax 3.2.2's files (fonts and TeX extensions
# included); they are copied to _static/mathjax/. .ci/check_math.py opens the built statistics
# page in headless Chromium and checks that every formula typeset.


def _mathjax_static():
    """The folder that holds the ``mathjax/`` tree of the sphinx-mathjax-offline package."""
    import importlib.util

    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "the docs need MathJax's files from the sphinx-mathjax-offline package: "
            'pip install -e ".[docs]"'
        )
    return str(Path(spec.origin).parent / "static")


mathjax_path = "mathjax/tex-chtml.js"  # relative to _static/

# -- HTML -----------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"faqstats {release}"
html_static_path = ["_static", _mathjax_static()]
html_css_files = ["faqstats.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    # offline build: no version switcher or remote icons
}
html_show_sourcelink = False
html_context = {"default_mode": "light"}

# no intersphinx: the build machine has no internet
intersphinx_mapping: dict = {}


# -- every public name has an API page -------------------------------------------------------
def _check_api_coverage(app):
    """Warn (an error under -W) about a public name missing from the API pages."""
    from sphinx.util import logging

    logger = logging.getLogger("faqstats.docs")
    listed = set()
    for page in DOCS.glob("api*.rst"):
        current = None
        for line in page.read_text().splitlines():
            m = re.match(r"\s*\.\. currentmodule:: (\S+)", line)
            if m:
                current = m.group(1)
                continue
            m = re.match(r"^\s{3,}(~?[\w.]+)\s*$", line)
            if m and current is not None:
                listed.add(f"{current}.{m.group(1).lstrip('~')}")
    for modname, name, _ in _public_names():
        if f"{modname}.{name}" not in listed:
            logger.warning(f"{modname}.{name} is in __all__ but on no API page (docs/api*.rst)")


_SKIPPED_MEMBERS = re.compile(r"^(set_\w+_request|get_metadata_routing)$")


def _skip_member(app, what, name, obj, skip, options):
    """Leave out scikit-learn's metadata-routing methods (generated per estimator, not ours)."""
    if _SKIPPED_MEMBERS.match(name):
        return True
    return None


def _constant_docstring(app, what, name, obj, options, lines):
    """Show a re-exported constant's docstring on its page.

    autodoc reads a constant's docstring (the string after ``NAME = ...``) in the module the
    page names, but the public modules re-export constants assigned in their submodules
    (``faqstats.experiments.DEFAULT_BUDGETS`` in ``faqstats.experiments.sweep``): autodoc
    finds none there and falls back to the value's type's docstring (``tuple``'s). The
    docstring is taken from the module that assigns the name instead.
    """
    import importlib
    import pkgutil

    from sphinx.pycode import ModuleAnalyzer

    if what != "data":
        return
    modname, _, attr = name.rpartition(".")
    package = importlib.import_module(modname)
    submodules = pkgutil.walk_packages(getattr(package, "__path__", []), prefix=modname + ".")
    for candidate in [modname, *(m.name for m in submodules)]:
        if getattr(importlib.import_module(candidate), attr, None) is not obj:
            continue
        analyzer = ModuleAnalyzer.for_module(candidate)
        analyzer.analyze()
        if ("", attr) in analyzer.attr_docs:
            lines[:] = list(analyzer.attr_docs["", attr])
            return


def setup(app):
    app.connect("builder-inited", _check_api_coverage)
    app.connect("autodoc-skip-member", _skip_member)
    # before numpydoc's handler (priority 500), which then renders the docstring's sections
    app.connect("autodoc-process-docstring", _constant_docstring, priority=400)
