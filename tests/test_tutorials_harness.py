"""The ```python blocks of docs/tutorials/{lm_eval,inspect_ai}.md run as written.

The tutorials call the harness CLIs with subprocess. Two ways here, each an ``lm_eval``
and an ``inspect`` put first on PATH:

* ``stand-in`` (no harness needed): scripts that serve the new model's answers from a
  finished full run in tests/data (``new_model``), keeping only the documents/samples
  asked, in the harness's own file layout;
* ``real`` (the ``harness`` extra, which CI installs; skipped without it): the real
  CLIs (``lm_eval.__main__.cli_evaluate``, ``inspect_ai._cli.main.main``) on the real
  task files (``my_tasks/`` and ``my_tasks.py``), with only the model replaced: the
  tutorial's model name is mapped onto the mock model that wrote the fixtures' new-model
  run (tests/data/make_harness_fixtures.py), so the scores read back must equal that
  run's.

```bash blocks are not run.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"

FAKE_LM_EVAL = r'''
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
samples = json.loads(Path(args[args.index("--samples") + 1]).read_text())
out = Path(args[args.index("--output_path") + 1])
tasks = args[args.index("--tasks") + 1].split(",")
assert set(tasks) == set(samples), (tasks, samples)
for src in Path(os.environ["FAQ_FIXTURE_RUN"]).rglob("samples_*.jsonl"):
    task = src.name[len("samples_"):].rsplit("_", 1)[0]
    if task not in samples:
        continue
    keep = [l for l in src.read_text().splitlines() if json.loads(l)["doc_id"] in samples[task]]
    dest = out / src.parent.name / "samples_{}_2099-01-01T00-00-00.000001.jsonl".format(task)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(keep) + "\n")
'''

FAKE_INSPECT = r'''
import json, os, sys, zipfile
from pathlib import Path
args = sys.argv[1:]
selectors = args[args.index("--sample-id") + 1].split(",")
log_dir = Path(args[args.index("--log-dir") + 1])
log_dir.mkdir(parents=True, exist_ok=True)
for src in sorted(Path(os.environ["FAQ_FIXTURE_RUN"]).glob("*.eval")):
    with zipfile.ZipFile(src) as zf:
        header = json.loads(zf.read("header.json"))
        task = header["eval"]["task"]
        wanted = {s.split(":", 1)[1] if s.startswith(task + ":") else s for s in selectors
                  if ":" not in s or s.startswith(task + ":")}
        samples = [json.loads(zf.read(n)) for n in zf.namelist() if n.startswith("samples/")]
    header["samples"] = [s for s in samples if str(s["id"]) in wanted]
    (log_dir / (src.stem + ".json")).write_text(json.dumps(header))
'''


# the real CLIs with the fixtures' mock model in place of the tutorial's
REAL_LM_EVAL = r'''
import sys
sys.path.insert(0, {data!r})
import make_harness_fixtures as fixtures
fixtures._register_lm_mock()
name, ability, style = fixtures.LM_NEW
args = sys.argv[1:]
args[args.index("--model") + 1] = "faq_mock"
args[args.index("--model_args") + 1] = f"pretrained={{name}},ability={{ability}},style={{style}}"
from lm_eval.__main__ import cli_evaluate
sys.argv = ["lm_eval", *args]
cli_evaluate()
'''

REAL_INSPECT = r'''
import sys
sys.path.insert(0, {data!r})
import make_harness_fixtures as fixtures
from inspect_ai.model import modelapi

@modelapi(name="faqmock")
def faqmock():
    from inspect_ai.model._providers.mockllm import MockLLM

    class FaqMock(MockLLM):
        def __init__(self, model_name, *args, **kwargs):
            super().__init__(model_name, custom_outputs=fixtures.mock_outputs(*fixtures.INSPECT_NEW))

    return FaqMock

args = sys.argv[1:]
args[args.index("--model") + 1] = "faqmock/" + fixtures.INSPECT_NEW[0]
from inspect_ai._cli.main import main
sys.argv = ["inspect", *args]
main()
'''


def install_real_tasks(tool, directory):
    """The task files the tutorials name: ``my_tasks/`` (lm-eval) or ``my_tasks.py`` (inspect)."""
    sys.path.insert(0, str(DATA))
    try:
        import make_harness_fixtures as fixtures
    finally:
        sys.path.remove(str(DATA))
    if tool == "lm_eval":
        (directory / "my_tasks").mkdir()
        fixtures._write_lm_tasks((directory / "my_tasks").resolve())
    else:
        shutil.copy(DATA / "harness_tasks.py", directory / "my_tasks.py")


def _python_blocks(md):
    return re.findall(r"^```python\n(.*?)^```", md.read_text(), flags=re.S | re.M)


def _install_fake(bin_dir, name, source):
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n{source}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("real", [False, True], ids=["stand-in", "real"])
@pytest.mark.parametrize(
    "tutorial, history, run_dir, tool, source",
    [
        ("lm_eval.md", "lm_eval/history", "lm_eval/new_model", "lm_eval", FAKE_LM_EVAL),
        ("inspect_ai.md", "inspect/history", "inspect/new_model", "inspect", FAKE_INSPECT),
    ],
    ids=["lm_eval", "inspect_ai"],
)
def test_tutorial_runs(tutorial, history, run_dir, tool, source, real, tmp_path, monkeypatch, capsys):
    if sys.platform == "win32":
        pytest.skip("the CLIs put on PATH are scripts with a shebang")
    if real:
        pytest.importorskip("lm_eval" if tool == "lm_eval" else "inspect_ai")
        source = (REAL_LM_EVAL if tool == "lm_eval" else REAL_INSPECT).format(data=str(DATA))
        install_real_tasks(tool, tmp_path)
    blocks = _python_blocks(ROOT / "docs" / "tutorials" / tutorial)
    assert len(blocks) >= 3
    target = "lm_eval_runs" if tool == "lm_eval" else "inspect_logs"
    shutil.copytree(DATA / history, tmp_path / target)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _install_fake(bin_dir, tool, source)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAQ_FIXTURE_RUN", str(DATA / run_dir))
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__tutorial__"}
    for block in blocks:
        exec(compile(block, f"{tutorial}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "95% CI" in out
    est = namespace["est"]
    low, high = est.confint()
    assert 0 <= low <= high <= 1 and est.n_queries_ == est.budget
    asked = [qid for round_ids in namespace["rounds"] for qid in round_ids]
    assert len(asked) == len(set(asked)) == est.budget
    assert (tmp_path / "bank.npz").exists()
    # the scores read back are the new model's on exactly the ids asked
    reader = namespace["read_lm_eval_outcomes" if tool == "lm_eval" else "read_inspect_outcomes"]
    options = {"metric": namespace["metric"], "filter": namespace["filter"]} if tool == "lm_eval" else {"scorer": "match"}
    outcomes = reader(DATA / run_dir, asked, **options)
    np.testing.assert_array_equal(est.queries_["outcome"], outcomes)
    if real:  # what the real harness writes and the stand-ins do not
        written = "new_model_runs/round-*/*/results_*.json" if tool == "lm_eval" else "new_model_logs/round-*/*.eval"
        assert len(list(tmp_path.glob(written))) >= len(namespace["rounds"])


def test_inspect_ids_round_trip_real(tmp_path, monkeypatch):
    """Ids with '/', glob characters, spaces and leading zeros go through the real ``inspect eval``."""
    pytest.importorskip("inspect_ai")
    from faqstats.integrations import inspect_sample_id_arg, read_inspect_logs, read_inspect_outcomes

    install_real_tasks("inspect", tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _install_fake(bin_dir, "inspect", REAL_INSPECT.format(data=str(DATA)))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)

    def inspect_eval(log_dir, *extra):
        subprocess.run(["inspect", "eval", "my_tasks.py", "--model", "openai/new-model", "--log-dir", log_dir, *extra],
                       check=True, capture_output=True)  # fmt: skip

    inspect_eval("full")
    full, _, ids = read_inspect_logs("full", scorer="match")
    odd = [qid for qid in ids if qid.startswith("odd/")]
    assert {"odd/a%2Fb", "odd/x*y", "odd/two words", "odd/007", "odd/7", "odd/[1]", "odd/q?", "odd/50%25"} == set(odd)
    truth = dict(zip(ids, full[0]))
    for k, asked in enumerate([odd + ["arith/3", "words/w-kiwi"], ["odd/7", "odd/[1]", "odd/x*y"], ["arith/7"]]):
        inspect_eval(f"asked-{k}", "--sample-id", inspect_sample_id_arg(asked))
        np.testing.assert_array_equal(read_inspect_outcomes(f"asked-{k}", asked, scorer="match"), [truth[q] for q in asked])
        ran = read_inspect_logs(f"asked-{k}", scorer="match")[2]
        # inspect reads "007" and 7 as the same selector: asking one runs both; nothing else runs
        twins = {"odd/7", "odd/007"}
        assert set(ran) - set(asked) <= (twins if twins & set(asked) else set())
