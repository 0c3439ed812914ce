"""The README's quickstart runs as written, and its set-up commands are the ones CI uses."""

import re

from tests.paths import REPO

README = REPO / "README.md"


def _python_blocks(text):
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_quickstart_runs(capsys):
    (code,) = _python_blocks(README.read_text())
    assert len(code.strip().splitlines()) <= 20
    exec(compile(code, "README-quickstart", "exec"), {})
    out = capsys.readouterr().out
    assert "95% CI" in out and "uniform sample mean CI" in out


def test_ci_runs_the_readme_test_command():
    text = README.read_text()
    setup = re.search(r"## Set-up.*?```bash\n(.*?)```", text, flags=re.S).group(1).strip().splitlines()
    assert len(setup) == 2
    test_cmd = setup[1].split("#")[0].strip()
    ci = (README.parent / ".ci" / "run").read_text()
    assert test_cmd.replace("python ", "python3 ") in ci


def test_architecture_page_examples_run(capsys):
    """docs/architecture.md's examples (a policy, a predictor, ...) run through every path as the page says."""
    blocks = _python_blocks((README.parent / "docs" / "architecture.md").read_text())
    assert len(blocks) >= 2
    for k, code in enumerate(blocks):
        exec(compile(code, f"architecture.md, example {k + 1}", "exec"), {})
    assert "faqstats accuracy estimate" in capsys.readouterr().out
