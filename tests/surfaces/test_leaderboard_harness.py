"""A leaderboard session driven from the shell through the harnesses: ``session new --models``, ``next`` and
``record --model NAME``, ``status`` and ``report`` of the leaderboard.

In-process on the fixture runs of tests/data (written by the real lm-eval and inspect-ai; the full runs of
several mock models stand in for the harness). With the ``harness`` extra (``@pytest.mark.slow``), the real
``lm_eval`` and ``inspect`` CLIs run every round in a shell loop, which is killed with SIGKILL between a
harness run and its ``record`` and then run again: the finished leaderboard equals
``LeaderboardEstimator``'s for the same seed on the models' full runs, to the last digit.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import faqstats as fq
from faqstats.cli import main
from faqstats.integrations import read_inspect_logs, read_lm_eval_samples
from faqstats.session import LeaderboardSession
from tests.paths import DATA, REPO

LM = DATA / "lm_eval"
INSPECT = DATA / "inspect"
LM_OPTS = ["--metric", "faq_count=exact_match", "--filter", "faq_count=flexible-extract"]
LM_READ = {"metric": {"faq_arith": "acc", "faq_count": "exact_match"},
           "filter": {"faq_arith": "none", "faq_count": "flexible-extract"}}
INSPECT_BANK = [INSPECT / "history", INSPECT / "odd" / "history"]
FIT = ["--n-components", "2", "--max-iter", "30", "--device", "cpu", "--quiet"]
# each model's full runs in the fixtures (lm-eval: a directory per model; inspect: its logs of the three tasks)
LM_RUNS = {"mock-a": [LM / "history" / "mock-a"], "mock-d": [LM / "history" / "mock-d"],
           "mock-new": [LM / "new_model" / "mock-new"]}
INSPECT_RUNS = {"a": ["history", "odd/history"], "c": ["history", "odd/history"], "new": ["new_model", "odd/new_model"]}
INSPECT_MODEL = {"a": "mockllm/a", "c": "mockllm/c", "new": "mockllm/new"}  # the model of each one's logs

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny problems (conftest.py)


def run(capsys, *argv):
    """``faqstats argv`` in-process: (exit code, parsed JSON stdout or text, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in argv and out else out), err


class Models(dict):
    """The factor model ``fit-history`` fits on a harness's bank (lm-eval; inspect: its three tasks), on first use."""

    def __init__(self, directory):
        super().__init__()
        self.directory = directory

    def __missing__(self, harness):
        out = self.directory / f"{harness}.npz"
        source = ([("--lm-eval", LM / "history"), *zip(LM_OPTS[::2], LM_OPTS[1::2])] if harness == "lm-eval" else
                  [("--inspect", INSPECT_BANK[0]), ("--inspect", INSPECT_BANK[1]), ("--scorer", "match")])
        assert main(["fit-history", *(str(x) for pair in source for x in pair), *FIT, "--out", str(out)]) == 0
        self[harness] = out
        return out


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return Models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def inspect_runs(tmp_path_factory):
    """Each inspect model's logs of the three tasks in a directory of its own, as a run of the harness writes them."""
    out = tmp_path_factory.mktemp("inspect_runs")
    for name, model in INSPECT_MODEL.items():
        (out / name).mkdir()
        for log in (f for d in INSPECT_RUNS[name] for f in sorted((INSPECT / d).iterdir())):
            if read_inspect_logs(log, scorer="match")[1] == [model]:
                shutil.copy(log, out / name / log.name)
    return {name: out / name for name in INSPECT_MODEL}


def full_outcomes(harness, names, question_ids):
    """Each model's score on every question of the bank, from its full run in the fixtures (rows in ``names``)."""
    rows = []
    for name in names:
        if harness == "lm-eval":
            matrix, _, ids = read_lm_eval_samples(LM_RUNS[name], **LM_READ)
        else:
            matrix, who, ids = read_inspect_logs([INSPECT / d for d in INSPECT_RUNS[name]], scorer="match")
            matrix = matrix[[who.index(INSPECT_MODEL[name])]]
        truth = dict(zip(ids, matrix[0]))
        rows.append([truth[q] for q in question_ids])
    return np.array(rows, dtype=float)


def assert_equals_estimator(board, model_path, outcomes):
    """The finished leaderboard is LeaderboardEstimator's with the CLI's policy and the same seed, exactly."""
    fm = fq.load_factor_model(model_path)
    est = fq.LeaderboardEstimator(fm, fq.HybridSampler(tau=0.5, replace=False), board.budget,
                                  random_state=board.random_state).fit(outcomes, names=list(board.names))
    got = board.result()
    for field in ("estimate", "cov", "n_queries", "df"):
        assert_array_equal(getattr(got, field), getattr(est.result_, field))
    assert got.names == est.result_.names
    for name, fitted in zip(board.names, est.estimators_):
        assert_array_equal(board.session(name).queries(), fitted.queries_)


# -- in-process, the fixtures' full runs as the harness's output ---------------------------------
# (inspect: reading its logs with inspect-ai takes seconds, hence slow)
@pytest.mark.parametrize("harness", ["lm-eval", pytest.param("inspect", marks=pytest.mark.slow)])
def test_leaderboard_from_harness_output(capsys, tmp_path, models, request, harness):
    names = list(LM_RUNS) if harness == "lm-eval" else list(INSPECT_RUNS)
    inspect_runs = request.getfixturevalue("inspect_runs") if harness == "inspect" else None
    board_dir, model = tmp_path / "board", models[harness]
    capsys.readouterr()  # what fit-history printed
    code, text, err = run(capsys, "session", "new", board_dir, "--model", model, "--models", *names,
                          "--budget", 8, "--batch-size", 3, "--seed", 3)
    assert code == 0, err
    assert text.startswith(f"Created a leaderboard session in {board_dir} (3 models, ")
    assert f"budget 8: {names[0]} 3, {names[1]} 3, {names[2]} 2; batch size 3, seed 3" in text
    code, text, _ = run(capsys, "session", "status", board_dir)
    assert code == 0 and "3 models running" in text and "The leaderboard needs two answers of every model." in text
    fmt = "lm-eval" if harness == "lm-eval" else "inspect"
    for name in names:
        while True:
            code, payload, err = run(capsys, "session", "next", board_dir, "--model", name, "--format", fmt, "--json")
            assert code == 0, err
            if payload["done"]:
                break
            if harness == "lm-eval":
                sources = [x for run_dir in LM_RUNS[name] for x in ("--lm-eval", run_dir)]
            else:
                sources = ["--inspect", inspect_runs[name]]
            code, st, err = run(capsys, "session", "record", board_dir, "--model", name, *sources, "--json")
            assert code == 0, err
            assert st["recorded"] == payload["ids"]
        code, _, err = run(capsys, "session", "next", board_dir, "--model", name, "--format", fmt, "--print", "tasks")
        assert code == 0 and err.startswith(f"faqstats: Done (budget): nothing left to ask of model {name}.")
    board = LeaderboardSession.load(board_dir)
    assert board.done
    # batch size 3: each model's session is PAIEstimator's with that batch size and its spawned generator
    outcomes = full_outcomes(harness, names, board.session(names[0]).question_ids)
    fm = fq.load_factor_model(models[harness])
    for name, z, b, g in zip(names, outcomes, board.budgets, np.random.default_rng(3).spawn(3)):
        one = fq.PAIEstimator(fm, fq.HybridSampler(tau=0.5), int(b), batch_size=3, random_state=g).fit(z)
        assert board.session(name).result() == one.result_
    code, text, err = run(capsys, "session", "report", board_dir, "--png", tmp_path / "leaderboard")
    assert code == 0, err
    joint = board.result()
    frame = joint.to_frame()
    lines = text.splitlines()
    head = lines.index("Leaderboard, 95% intervals and ranks for all models at once (max-t):")
    for line, (name, row) in zip(lines[head + 2:], frame.iterrows()):  # most accurate first
        assert line.split()[:3] == [name, f"{row['estimate']:.4f}", f"{row['std_error']:.4f}"]
        best, worst = int(row["best"]), int(row["worst"])
        rank = str(best) if best == worst else f"{best}-{worst}"
        assert line.split()[-1] == rank
    assert f"May be best: {', '.join(joint.may_be_best())}." in lines
    assert "Differences, 95% intervals for all pairs at once:" in lines
    assert (tmp_path / "leaderboard.png").stat().st_size > 0
    code, st, _ = run(capsys, "session", "status", board_dir, "--json")
    assert st["done"] and [r["model"] for r in st["leaderboard"]["rows"]] == frame.index.tolist()
    code, text, _ = run(capsys, "session", "report", board_dir, "--model", names[1])
    assert code == 0 and text.startswith(f"Session {board_dir / board.session(names[1]).directory.name}: ")


def test_leaderboard_refusals_are_one_line(capsys, tmp_path, models):
    model = models["lm-eval"]
    cases = [
        (["new", tmp_path / "b", "--model", model, "--models", "x", "y", "x", "--budget", 8], "'x' is given twice"),
        (["new", tmp_path / "b", "--model", model, "--models", "x", "y", "z", "--budget", 5],
         r"budget=5 is too small for 3 models: each model needs at least 2 queries \(a budget of at least 6\)"),
        (["new", tmp_path / "b", "--model", model, "--models", "x", "--budget", 8], "at least 2 models"),
        (["new", tmp_path / "b", "--model", model, "--models", "x", "y"], "--models needs --budget"),
        (["new", tmp_path / "b", "--model", model, "--models", "x", "y", "--budget", 8, "--groups-from", "tasks",
          "--stop-when-width", "0.2"], r"does not take --stop-when-width, --groups-from"),
    ]
    for argv, match in cases:
        code, _, err = run(capsys, "session", *argv)
        assert code == 2 and len(err.strip().splitlines()) == 1 and re.search(match, err), err
        assert not (tmp_path / "b").exists()
    assert run(capsys, "session", "new", tmp_path / "b", "--model", model, "--models", "x", "y", "--budget", 4)[0] == 0
    assert run(capsys, "session", "new", tmp_path / "one", "--model", model, "--budget", 4)[0] == 0
    cases = [
        (["next", tmp_path / "b"], r"is a leaderboard of 2 models \(x, y\): name one with --model NAME"),
        (["record", tmp_path / "b", "q", "1"], "name one with --model NAME"),
        (["next", tmp_path / "b", "--model", "z"], "unknown model 'z': the leaderboard's models are 'x', 'y'"),
        (["record", tmp_path / "b", "--model", "x", "--lm-eval", LM / "new_model"],
         r"no question is pending: run 'faqstats session next \S+ --model x --format lm-eval'"),
        (["next", tmp_path / "one", "--model", "x"], "is a one-model session, not a leaderboard"),
        (["status", tmp_path / "b", "--simultaneous"], "a leaderboard's intervals hold for all models at once"),
        (["report", tmp_path / "b", "--png", tmp_path / "p.png"], "nothing to plot yet"),
    ]
    for argv, match in cases:
        code, out, err = run(capsys, "session", *argv, "--json")
        assert code == 2 and re.search(match, out["error"]) and len(err.strip().splitlines()) == 1, err


def test_help_names_the_leaderboard_options(capsys):
    for command, words in (("new", ["--models NAME [NAME ...]", "a leaderboard"]), ("next", ["--model NAME"]),
                           ("record", ["--model NAME"]), ("status", ["--model NAME", "leaderboard"]),
                           ("report", ["--model NAME", "leaderboard"]), ("", ["rank intervals", "leaderboard"])):
        with pytest.raises(SystemExit):
            main(["session", *([command] if command else []), "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert all(w in text for w in words), (command, text)


# -- the real lm_eval and inspect CLIs, a shell loop killed between a run and its record ---------
WRAPPER_HEAD = r'''
import atexit, os, signal, sys
sys.path.insert(0, {data!r})
import make_harness_fixtures as fixtures
count_file = os.environ["FAQ_RUN_COUNT"]
n = int(open(count_file).read() or 0) + 1 if os.path.exists(count_file) else 1
open(count_file, "w").write(str(n))
if n == int(os.environ.get("FAQ_KILL_AT", 0)):  # the run completes; then the whole loop dies before recording
    atexit.register(lambda: os.killpg(os.getpgrp(), signal.SIGKILL))
'''

REAL_LM_EVAL = WRAPPER_HEAD + r'''
fixtures._register_lm_mock()
from lm_eval.__main__ import cli_evaluate
sys.argv = ["lm_eval", *sys.argv[1:]]
cli_evaluate()
'''

REAL_INSPECT = WRAPPER_HEAD + r'''
from inspect_ai.model import modelapi
ABILITY = {{**fixtures.INSPECT_MODELS, fixtures.INSPECT_NEW[0]: fixtures.INSPECT_NEW[1]}}

@modelapi(name="faqmock")
def faqmock():
    from inspect_ai.model._providers.mockllm import MockLLM

    class FaqMock(MockLLM):
        def __init__(self, model_name, *args, **kwargs):
            super().__init__(model_name, custom_outputs=fixtures.mock_outputs(model_name, ABILITY[model_name]))

    return FaqMock

from inspect_ai._cli.main import main
sys.argv = ["inspect", *sys.argv[1:]]
main()
'''

# one model after the other, a harness run per round, each in a fresh directory (a rerun never merges with it)
LM_LOOP = r'''
for spec in {specs}; do
    IFS=: read -r model ability style <<< "$spec"
    while tasks=$(faqstats session next board --model "$model" --format lm-eval --print tasks) && [ -n "$tasks" ]; do
        out=$(mktemp -d "runs/$model.XXXXXX")
        lm_eval --model faq_mock --model_args "pretrained=$model,ability=$ability,style=$style" \
            --include_path my_tasks/ --tasks "$tasks" \
            --samples "$(faqstats session next board --model "$model" --format lm-eval --print samples)" \
            --log_samples --output_path "$out" || exit 1
        faqstats session record board --model "$model" --lm-eval "$out" || exit 1
    done
done
'''

INSPECT_LOOP = r'''
for model in {specs}; do
    while ids=$(faqstats session next board --model "$model" --format inspect --print samples) && [ -n "$ids" ]; do
        out=$(mktemp -d "runs/$model.XXXXXX")
        inspect eval my_tasks.py --model "faqmock/$model" --sample-id "$ids" --log-dir "$out" || exit 1
        faqstats session record board --model "$model" --inspect "$out" || exit 1
    done
done
'''


def _install(bin_dir, name, source):
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n{source}")
    path.chmod(0o755)


def _real_setup(harness, tmp_path, monkeypatch):
    """The task files, the harness CLI (and this tree's ``faqstats``) first on PATH, the working directory."""
    sys.path.insert(0, str(DATA))
    try:
        import make_harness_fixtures as fixtures
    finally:
        sys.path.remove(str(DATA))
    if harness == "lm-eval":
        (tmp_path / "my_tasks").mkdir()
        fixtures._write_lm_tasks((tmp_path / "my_tasks").resolve())
    else:
        (tmp_path / "my_tasks.py").write_text((DATA / "harness_tasks.py").read_text())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = "lm_eval" if harness == "lm-eval" else "inspect"
    _install(bin_dir, tool, (REAL_LM_EVAL if harness == "lm-eval" else REAL_INSPECT).format(data=str(DATA)))
    _install(bin_dir, "faqstats", f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
                                  "from faqstats.cli import main\nsys.exit(main())\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAQ_RUN_COUNT", str(tmp_path / "runs.count"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    return fixtures


@pytest.mark.slow
@pytest.mark.parametrize("harness", ["lm-eval", "inspect"])
def test_real_harness_leaderboard_resumes_after_sigkill(tmp_path, monkeypatch, models, harness):
    if sys.platform == "win32":
        pytest.skip("bash, process groups and scripts with a shebang")
    pytest.importorskip("lm_eval" if harness == "lm-eval" else "inspect_ai")
    fixtures = _real_setup(harness, tmp_path, monkeypatch)
    if harness == "lm-eval":  # two models, 3 + 2 queries: the first model gets the remainder
        names, budget, kill_at = ["mock-a", "mock-new"], 5, 3
        abilities = {**fixtures.LM_MODELS, fixtures.LM_NEW[0]: fixtures.LM_NEW[1:]}
        loop = LM_LOOP.format(specs=" ".join(f"{n}:{abilities[n][0]}:{abilities[n][1]}" for n in names))
    else:  # three models, 2 queries each
        names, budget, kill_at = ["a", "c", "new"], 6, 4
        loop = INSPECT_LOOP.format(specs=" ".join(names))
    assert main(["session", "new", "board", "--model", str(models[harness]), "--models", *names,
                 "--budget", str(budget), "--seed", "7"]) == 0

    monkeypatch.setenv("FAQ_KILL_AT", str(kill_at))
    killed = subprocess.run(["bash", "-c", loop], capture_output=True, text=True, timeout=540, start_new_session=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    board = LeaderboardSession.load("board")  # the kill left a loadable leaderboard: the recorded rounds kept
    assert not board.done and (tmp_path / "runs.count").read_text() == str(kill_at)
    drawn = [board.session(n).n_draws for n in names]
    pending = [len(board.session(n).pending.ids) for n in names]
    assert sum(drawn) == kill_at - 1 and sum(pending) == 1  # the killed round ran but was never recorded

    monkeypatch.delenv("FAQ_KILL_AT")
    done = subprocess.run(["bash", "-c", loop], capture_output=True, text=True, timeout=540, start_new_session=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "faqstats: error" not in done.stderr and "faqstats: note" not in done.stderr
    assert (tmp_path / "runs.count").read_text() == str(budget + 1)  # the killed round, run again
    board = LeaderboardSession.load("board")
    assert board.done and [board.session(n).n_draws for n in names] == board.budgets.tolist()
    outcomes = full_outcomes(harness, names, board.session(names[0]).question_ids)
    assert_equals_estimator(board, models[harness], outcomes)
    report = subprocess.run(["faqstats", "session", "report", "board"], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0 and "May be best: " in report.stdout
