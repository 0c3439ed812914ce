"""The ```python blocks of docs/tutorials/{lm_eval,inspect_ai}.md run against the fixtures.

The tutorials call the harness CLIs with subprocess; here stand-ins named ``lm_eval``
and ``inspect`` on PATH serve the new model's answers from a finished full run in
tests/data (``new_model``), keeping only the documents/samples asked, in the harness's
own file layout. ```bash blocks are not run.
"""

import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path

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


def _python_blocks(md):
    return re.findall(r"^```python\n(.*?)^```", md.read_text(), flags=re.S | re.M)


def _install_fake(bin_dir, name, source):
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n{source}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize(
    "tutorial, history, run_dir, tool, source",
    [
        ("lm_eval.md", "lm_eval/history", "lm_eval/new_model", "lm_eval", FAKE_LM_EVAL),
        ("inspect_ai.md", "inspect/history", "inspect/new_model", "inspect", FAKE_INSPECT),
    ],
    ids=["lm_eval", "inspect_ai"],
)
def test_tutorial_runs(tutorial, history, run_dir, tool, source, tmp_path, monkeypatch, capsys):
    if sys.platform == "win32":
        pytest.skip("the stand-in CLIs are scripts with a shebang")
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
