"""Every docstring example in the package runs and prints what it says; every public name has one."""

import ast
import dataclasses
import doctest
import importlib
import inspect
import pkgutil
import re

import pytest

import faqstats
from tests.paths import REPO

MODULES = sorted(m.name for m in pkgutil.walk_packages(faqstats.__path__, prefix="faqstats."))
FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


def _public_modules():
    """docs/conf.py's ``PUBLIC_MODULES``: the modules whose ``__all__`` the API reference covers."""
    tree = ast.parse((REPO / "docs" / "conf.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PUBLIC_MODULES" for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError("docs/conf.py defines no PUBLIC_MODULES")


PUBLIC = [(modname, name) for modname in _public_modules() for name in importlib.import_module(modname).__all__]


def attribute_docstrings(module):
    """``{name: (docstring, line)}``: the string right after a module-level assignment, the
    docstring autodoc shows for a constant (which has no ``__doc__`` of its own)."""
    body = ast.parse(inspect.getsource(module)).body
    docs = {}
    for node, after in zip(body, body[1:]):
        if not (isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name):
                docs[target.id] = (after.value.value, after.lineno)
    return docs


def public_docstring(modname, name):
    """The docstring the API page of ``modname.name`` shows."""
    obj = getattr(importlib.import_module(modname), name)
    if inspect.isclass(obj) or inspect.isroutine(obj):
        return inspect.cleandoc(obj.__doc__ or "")
    for defining in MODULES:  # a constant: its docstring is in the module that assigns it
        module = importlib.import_module(defining)
        if getattr(module, name, None) is obj and name in attribute_docstrings(module):
            return inspect.cleandoc(attribute_docstrings(module)[name][0])
    return ""


def section(doc, title):
    """The body of a numpydoc section of a cleaned docstring ("" when absent)."""
    m = re.search(rf"^{title}\n-{{{len(title)}}}\n(.*?)(?=^\w[\w ]*\n-{{3,}}\n|\Z)", doc, re.M | re.S)
    return m.group(1) if m else ""


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    """``doctest.testmod`` of the module, plus the examples in its constants' docstrings."""
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder().find(module)
    parser = doctest.DocTestParser()
    for attr, (doc, line) in attribute_docstrings(module).items():
        tests.append(parser.get_doctest(doc, dict(vars(module)), f"{name}.{attr}", module.__file__, line - 1))
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


@pytest.mark.parametrize("modname, name", PUBLIC, ids=[f"{m}.{n}" for m, n in PUBLIC])
def test_public_name_has_examples(modname, name):
    """Every public name's API page has an Examples section that test_docstring_examples runs."""
    examples = section(public_docstring(modname, name), "Examples")
    assert ">>>" in examples, f"{modname}.{name}: no Examples section with a doctest in its docstring"


RECORDS = [(m, n) for m, n in PUBLIC if dataclasses.is_dataclass(getattr(importlib.import_module(m), n))]


@pytest.mark.parametrize("modname, name", RECORDS, ids=[f"{m}.{n}" for m, n in RECORDS])
def test_record_fields_documented(modname, name):
    """A public dataclass documents its fields under Attributes, in order (docs/conf.py skips
    numpydoc's PR01 for them, which looks under Parameters); a field inherited from a
    dataclass base is documented there."""
    cls = getattr(importlib.import_module(modname), name)
    documented = []
    for base in reversed(cls.__mro__):
        if dataclasses.is_dataclass(base) and "__doc__" in vars(base):
            for line in section(inspect.cleandoc(base.__doc__ or ""), "Attributes").splitlines():
                if line[:1].isalpha() or line[:1] == "_":  # a "name[, name...] [: type]" line
                    documented += line.split(" : ")[0].split(", ")
    assert documented == [f.name for f in dataclasses.fields(cls)]
