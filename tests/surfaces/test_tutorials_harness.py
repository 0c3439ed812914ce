"""The tutorials docs/tutorials/{lm_eval,inspect_ai}.md run as written: their ```python blocks
(``test_tutorial_runs``) and, with the real harness, their ```bash blocks as one shell script
(``test_tutorial_shell_loop_runs``: faqstats fit-history, session new, the next / harness /
record loop, session report; of the ```console blocks, which are examples, the ``faqstats``
commands run where they stand and must print lines of the shape shown).

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

The inspect bank has three tasks: tests/data/inspect/history and, under ``odd/``,
tests/data/inspect/odd/history (sample ids with '/', glob characters, a space, ``007``
next to ``7``).
"""

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.paths import DATA, REPO

ROOT = REPO

FAKE_LM_EVAL = r'''
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
samples = args[args.index("--samples") + 1]
samples = json.loads(samples if samples.startswith("{") else Path(samples).read_text())
out = Path(args[args.index("--output_path") + 1])
tasks = args[args.index("--tasks") + 1].split(",")
assert set(tasks) == set(samples), (tasks, samples)
for src in (f for d in os.environ["FAQ_FIXTURE_RUN"].split(os.pathsep) for f in Path(d).rglob("samples_*.jsonl")):
    task = src.name[len("samples_"):].rsplit("_", 1)[0]
    if task not in samples:
        continue
    keep = [l for l in src.read_text().splitlines() if json.loads(l)["doc_id"] in samples[task]]
    dest = out / src.parent.name / "samples_{}_2099-01-01T00-00-00.000001.jsonl".format(task)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(keep) + "\n")
'''

FAKE_INSPECT = r'''
import fnmatch, json, os, sys, zipfile
from pathlib import Path
args = sys.argv[1:]
selectors = args[args.index("--sample-id") + 1].split(",")
log_dir = Path(args[args.index("--log-dir") + 1])
log_dir.mkdir(parents=True, exist_ok=True)
for src in sorted(f for d in os.environ["FAQ_FIXTURE_RUN"].split(os.pathsep) for f in Path(d).glob("*.eval")):
    with zipfile.ZipFile(src) as zf:
        header = json.loads(zf.read("header.json"))
        task = header["eval"]["task"]
        wanted = {s.split(":", 1)[1] if s.startswith(task + ":") else s for s in selectors
                  if ":" not in s or s.startswith(task + ":")}
        samples = [json.loads(zf.read(n)) for n in zf.namelist() if n.startswith("samples/")]
    # selectors are glob patterns, as inspect reads them
    header["samples"] = [s for s in samples if any(fnmatch.fnmatchcase(str(s["id"]), w) for w in wanted)]
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


def _blocks(md, lang="python"):
    return re.findall(rf"^```{lang}\n(.*?)^```", md.read_text(), flags=re.S | re.M)


# the fixture runs of each tutorial: (history, written where the tutorial reads it), the new model's full run
TUTORIALS = {
    "lm_eval": ("lm_eval.md", [("lm_eval/history", "lm_eval_runs")], ["lm_eval/new_model"]),
    "inspect": ("inspect_ai.md", [("inspect/history", "inspect_logs"), ("inspect/odd/history", "inspect_logs/odd")],
                ["inspect/new_model", "inspect/odd/new_model"]),
}


def _setup_tutorial(tool, real, source, tmp_path, monkeypatch):
    """The tutorial's working directory: the history where it reads it, the harness CLI first on PATH."""
    if real:
        source = (REAL_LM_EVAL if tool == "lm_eval" else REAL_INSPECT).format(data=str(DATA))
        install_real_tasks(tool, tmp_path)
    tutorial, histories, run_dirs = TUTORIALS[tool]
    for src, dest in histories:
        shutil.copytree(DATA / src, tmp_path / dest)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _install_fake(bin_dir, tool, source)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAQ_FIXTURE_RUN", os.pathsep.join(str(DATA / r) for r in run_dirs))
    monkeypatch.chdir(tmp_path)
    return ROOT / "docs" / "tutorials" / tutorial, [DATA / r for r in run_dirs], bin_dir


def _install_fake(bin_dir, name, source):
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n{source}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("real", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["stand-in", "real"])
@pytest.mark.parametrize("tool, source", [("lm_eval", FAKE_LM_EVAL), ("inspect", FAKE_INSPECT)],
                         ids=["lm_eval", "inspect_ai"])
def test_tutorial_runs(tool, source, real, tmp_path, monkeypatch, capsys):
    if sys.platform == "win32":
        pytest.skip("the CLIs put on PATH are scripts with a shebang")
    if real:
        pytest.importorskip("lm_eval" if tool == "lm_eval" else "inspect_ai")
    tutorial, run_dirs, _ = _setup_tutorial(tool, real, source, tmp_path, monkeypatch)
    blocks = _blocks(tutorial)
    assert len(blocks) >= 3
    namespace = {"__name__": "__tutorial__"}
    for block in blocks:
        exec(compile(block, tutorial.name, "exec"), namespace)
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
    outcomes = reader(run_dirs, asked, **options)
    np.testing.assert_array_equal(est.queries_["outcome"], outcomes)
    if real:  # what the real harness writes and the stand-ins do not
        written = "new_model_runs/round-*/*/results_*.json" if tool == "lm_eval" else "new_model_logs/round-*/*.eval"
        assert len(list(tmp_path.glob(written))) >= len(namespace["rounds"])


# -- the output the tutorials show ------------------------------------------------------------
# A ```console block's "$ faqstats ..." command runs after the ```bash blocks before it; the
# lines it prints must have the shape of those shown: each shown line read as a pattern, its
# numbers free (NUMBER) and its runs of blanks any width, the line counts equal. ``session next``
# names the round's questions, which depend on the fit: its lines have the shapes given here, and
# the lines shown must have them too, so that a tutorial and the command line cannot drift apart.
NUMBER = r"-?\d+(?:\.\d+)?"
IDS = r"[\w.-]+"
ROUND_OUTPUT = {
    r"session next \S+ --format lm-eval": [rf"--tasks {IDS}(?:,{IDS})* --samples '\{{.*\}}'"],
    r"session next \S+ --format lm-eval --print tasks": [rf"{IDS}(?:,{IDS})*"],
    r"session next \S+ --format lm-eval --print samples": [
        rf'\{{"{IDS}": \[\d+(?:, \d+)*\](?:, "{IDS}": \[\d+(?:, \d+)*\])*\}}'],
    r"session next \S+ --format inspect": [r"--sample-id (?:'[^']+'|[\w@%+=:,./-]+)"],
    r"session next \S+ --format inspect --print samples": [r"[^,:\s]+:[^,]+(?:,[^,:]+:[^,]+)*"],
}


def _shape(line):
    """A shown line as a pattern: numbers free, blank runs of any width."""
    parts = re.split(rf"({NUMBER}|\s+)", line.strip())
    return "".join(NUMBER if re.fullmatch(NUMBER, p) else r"\s+" if p.isspace() else re.escape(p) for p in parts if p)


def _console_commands(block):
    """``(command, lines shown)`` of each ``$ faqstats ...`` in a console block (``\\`` continues a line)."""
    commands, current = [], None
    for line in block.replace("\\\n", " ").splitlines():
        if line.startswith("$ "):
            current = (line[2:].strip(), [])
            commands.append(current)
        elif current is not None:
            current[1].append(line)
    return [(cmd, shown) for cmd, shown in commands if cmd.startswith("faqstats ")]


def _check_shown_output(command, shown, printed):
    subcommand = " ".join(command.split()[1:])
    override = [pats for pattern, pats in ROUND_OUTPUT.items() if re.fullmatch(pattern, subcommand)]
    printed = printed.rstrip("\n").splitlines()
    assert len(printed) == len(shown), (command, shown, printed)
    for k, (doc_line, line) in enumerate(zip(shown, printed)):
        pattern = override[0][k] if override else _shape(doc_line)
        assert re.fullmatch(pattern, doc_line.strip()), f"the tutorial's {command!r} shows {doc_line!r}, not {pattern}"
        assert re.fullmatch(pattern, line.strip()), f"{command!r} printed {line!r}; the tutorial shows {doc_line!r}"


def test_shown_output_shapes():
    """The shape check itself: numbers may vary, words and layout may not."""
    shape = _shape("Estimate 0.4719, 95% CI [0.1275, 0.8163].")
    assert re.fullmatch(shape, "Estimate 0.5, 90% CI [0.0000, 1.0000].")
    assert not re.fullmatch(shape, "Estimate 0.5, 90% interval [0.0000, 1.0000].")
    assert not re.fullmatch(shape, "Estimate 0.5 (90% CI [0.0000, 1.0000]).")
    _check_shown_output("faqstats session next d --format lm-eval --print tasks", ["a_b,c"], "x\n")
    with pytest.raises(AssertionError):
        _check_shown_output("faqstats session next d --format lm-eval --print tasks", ["a_b,c"], "x y\n")
    with pytest.raises(AssertionError):  # a line more than shown
        _check_shown_output("faqstats session status d", ["Session d: 1 of 2"], "Session d: 1 of 2\nPending: x\n")
    block = "$ faqstats session next d \\\n    --format inspect\n--sample-id a:1\n$ lm_eval --tasks x\n"
    assert _console_commands(block) == [("faqstats session next d      --format inspect", ["--sample-id a:1"])]


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["lm_eval", "inspect"], ids=["lm_eval", "inspect_ai"])
def test_tutorial_shell_loop_runs(tool, tmp_path, monkeypatch):
    """The ```bash blocks, in order, each as a bash script, with the real harness and this tree's
    ``faqstats`` first on PATH: the session ends after its budget, with the new model's own
    scores recorded, and its interval holds the new model's accuracy over the whole bank. The
    ``faqstats`` commands of the ```console blocks run where they stand, printing what they show."""
    if sys.platform == "win32":
        pytest.skip("bash and scripts with a shebang")
    pytest.importorskip("lm_eval" if tool == "lm_eval" else "inspect_ai")
    from faqstats.integrations import read_inspect_logs, read_lm_eval_samples
    from faqstats.session import EvaluationSession

    tutorial, run_dirs, bin_dir = _setup_tutorial(tool, True, None, tmp_path, monkeypatch)
    _install_fake(bin_dir, "faqstats", f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                                      "from faqstats.cli import main\nsys.exit(main())\n")
    blocks = re.findall(r"^```(bash|console)\n(.*?)^```", tutorial.read_text(), flags=re.S | re.M)
    script = "\n".join(body for lang, body in blocks if lang == "bash")
    assert "session record" in script and "session report" in script
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    stdout = stderr = ""
    checked = []
    for lang, body in blocks:
        if lang == "bash":
            done = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=540)
            stdout, stderr = stdout + done.stdout, stderr + done.stderr
            assert done.returncode == 0, done.stderr[-3000:]
            continue
        for command, shown in _console_commands(body):
            done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr[-3000:]
            _check_shown_output(command, shown, done.stdout)
            checked.append(command.split()[2])
    assert {"next", "report"} <= set(checked), checked
    assert "done (budget)" in stdout and "faqstats: Done (budget)" in stderr, stderr[-3000:]
    assert "faqstats: error" not in stderr and "faqstats: note" not in stderr

    session = EvaluationSession.load(tmp_path / "new_model")
    assert session.done and session.n_draws == session.budget and session.pending.ids == []
    if tool == "lm_eval":
        metric = {"faq_arith": "acc", "faq_count": "exact_match"}
        full, _, ids = read_lm_eval_samples(run_dirs, metric=metric, filter={"faq_count": "flexible-extract",
                                                                             "faq_arith": "none"})
        rounds = list(tmp_path.glob("new_model_runs/round-*/*/results_*.json"))
    else:
        full, _, ids = read_inspect_logs(run_dirs, scorer="match")
        rounds = list(tmp_path.glob("new_model_logs/round-*"))
    assert ids == session.question_ids and len(rounds) == session.budget // session.batch_size
    queries = session.queries()
    asked = [ids[q] for q in queries["question"]]
    np.testing.assert_array_equal(queries["outcome"], full[0, queries["question"]])  # the harness's own scores
    if tool == "inspect":  # a sample id with '/' went through the real inspect (seed 0 asks odd/a%2Fb)
        assert any("%2F" in qid for qid in asked), asked
    low, high = session.result().conf_int(alpha=session.alpha)
    assert low <= full.mean() <= high


@pytest.mark.slow
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
