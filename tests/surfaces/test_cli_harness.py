"""The harness commands of the CLI (issue 19): ``fit-history --lm-eval/--inspect``, ``session next
--format lm-eval|inspect [--print tasks|samples]`` and ``session record --lm-eval/--inspect``.

In-process on the fixture runs of tests/data (written by the real lm-eval and inspect-ai; no
harness needed here). The tutorials' shell loops against the real harnesses are
``test_tutorial_shell_loop_runs`` in tests/surfaces/test_tutorials_harness.py.
"""

import fnmatch
import json
import re
import shlex
import shutil

import numpy as np
import pytest

import faqstats as fq
from faqstats.cli import main
from faqstats.integrations import read_inspect_logs, read_lm_eval_samples, write_lm_eval_samples_arg
from faqstats.integrations._common import make_question_id
from faqstats.session import EvaluationSession
from tests.paths import DATA

LM = DATA / "lm_eval"
INSPECT = DATA / "inspect"
LM_OPTS = ["--metric", "faq_count=exact_match", "--filter", "faq_count=flexible-extract"]
LM_READ = {"metric": {"faq_arith": "acc", "faq_count": "exact_match"},
           "filter": {"faq_arith": "none", "faq_count": "flexible-extract"}}
INSPECT_BANK = [INSPECT / "history", INSPECT / "odd" / "history"]
INSPECT_NEW = [INSPECT / "new_model", INSPECT / "odd" / "new_model"]
FIT = ["--n-components", "2", "--max-iter", "30", "--device", "cpu", "--quiet"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny problems (conftest.py)


def run(capsys, *argv):
    """``faqstats argv`` in-process: (exit code, parsed JSON stdout or text, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in argv and out else out), err


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The factor models fitted by ``fit-history`` on the lm-eval and on the three-task inspect bank."""
    out = tmp_path_factory.mktemp("models")
    assert main(["fit-history", "--lm-eval", str(LM / "history"), *LM_OPTS, *FIT, "--out", str(out / "lm.npz")]) == 0
    assert main(["fit-history", "--inspect", *map(str, INSPECT_BANK), "--scorer", "match", *FIT,
                 "--out", str(out / "inspect.npz")]) == 0
    return {"lm-eval": out / "lm.npz", "inspect": out / "inspect.npz"}


def new_session(capsys, models, harness, directory, budget=8, batch_size=4, seed=0):
    code, _, err = run(capsys, "session", "new", directory, "--model", models[harness], "--budget", budget,
                       "--batch-size", batch_size, "--seed", seed)
    assert code == 0, err
    return directory


def truth(harness):
    """The new model's score on every question, by id (its full run in the fixtures)."""
    matrix, _, ids = (read_lm_eval_samples(LM / "new_model", **LM_READ) if harness == "lm-eval"
                      else read_inspect_logs(INSPECT_NEW, scorer="match"))
    return dict(zip(ids, matrix[0]))


# -- fit-history ------------------------------------------------------------------------
def test_fit_history_reads_harness_runs_and_saves_their_ids(capsys, tmp_path, models):
    _, _, lm_ids = read_lm_eval_samples(LM / "history", **LM_READ)
    assert fq.load_factor_model(models["lm-eval"]).question_ids_ == lm_ids
    H, names, ids = read_inspect_logs(INSPECT_BANK, scorer="match")
    assert fq.load_factor_model(models["inspect"]).question_ids_ == ids
    assert {"odd/a%2Fb", "odd/x*y", "odd/two words", "odd/007", "odd/7", "odd/[1]", "odd/q?", "odd/50%25"} < set(ids)
    # one task's scorer named, the others' (a single one) found: the same history
    code, out, err = run(capsys, "fit-history", "--inspect", *INSPECT_BANK, "--scorer", "arith=match", *FIT,
                         "--out", tmp_path / "m.npz", "--json")
    assert code == 0, err
    assert out["harness"] == "inspect" and out["models"] == names and out["n_questions"] == len(ids)
    assert out["question_ids"] and fq.load_factor_model(tmp_path / "m.npz").question_ids_ == ids
    code, text, _ = run(capsys, "fit-history", "--out", tmp_path / "m2.npz", *FIT, "--lm-eval", LM / "history",
                        "--metric", "acc", *LM_OPTS)
    assert code == 0 and text.startswith("Read 5 model(s) from the lm-eval output (mock-a, mock-b")


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--inspect", INSPECT / "history", "--metric", "acc"], "--metric reads harness output: .* with --lm-eval"),
        (["--lm-eval", LM / "history", "--scorer", "match"], "--scorer .* goes with --inspect"),
        (["--data", LM / "asked.json", "--filter", "none"], "--filter .* goes with --lm-eval"),
        (["--lm-eval", LM / "history", "--question-ids", LM / "asked.json"], "--question-ids goes with --data"),
        (["--lm-eval", LM / "history", "--metric", "acc", "--metric", "acc_norm"], "one NAME for all tasks"),
        (["--lm-eval", LM / "history", "--metric", "faq_count="], "NAME or TASK=NAME, got 'faq_count='"),
        (["--lm-eval", LM / "history", "--metric", "t=a", "--metric", "t=b"], "task 't' is given twice"),
        (["--lm-eval", LM / "history"], r"filter 'none' is absent from .*samples_faq_count_.*Pass --filter NAME"),
        (["--inspect", INSPECT / "history"], r"several scorers \['match', 'partial'\]: Pass --scorer NAME"),
        (["--lm-eval", LM / "nowhere"], "does not exist"),
    ],
)
def test_fit_history_harness_errors_are_one_line(capsys, tmp_path, argv, match):
    code, _, err = run(capsys, "fit-history", *argv, "--out", tmp_path / "m.npz", *FIT)
    assert code == 2 and len(err.strip().splitlines()) == 1 and re.search(match, err), err
    code, out, _ = run(capsys, "fit-history", *argv, "--out", tmp_path / "m.npz", *FIT, "--json")
    assert code == 2 and re.search(match, out["error"])
    assert not (tmp_path / "m.npz").exists()


def test_fit_history_repeated_source_options_add_up(capsys, tmp_path):
    """``--lm-eval A --lm-eval B`` reads both (argparse would keep only B), and the same
    output given twice is refused: its scores would count twice."""
    code, out, err = run(capsys, "fit-history", "--lm-eval", LM / "history" / "mock-a", "--lm-eval",
                         LM / "history" / "mock-b", LM / "history" / "mock-c", *LM_OPTS, *FIT, "--out",
                         tmp_path / "m.npz", "--json")
    assert code == 0, err
    assert out["models"] == ["mock-a", "mock-b", "mock-c"]
    code, _, err = run(capsys, "fit-history", "--inspect", INSPECT / "history", "--inspect", INSPECT / "history",
                       "--scorer", "match", *FIT, "--out", tmp_path / "m2.npz")
    assert code == 2 and re.search(r"--inspect: \S+history is given twice\.\n$", err), err


def test_fit_history_takes_one_source(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(["fit-history", "--data", "x.npz", "--lm-eval", str(LM / "history"), "--out", str(tmp_path / "m.npz")])
    assert exit_.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_merged_runs_are_a_one_line_warning(capsys, tmp_path):
    history = shutil.copytree(LM / "history", tmp_path / "runs")
    first = next((history / "mock-a").glob("samples_faq_arith_*.jsonl"))
    shutil.copy(first, first.with_name("samples_faq_arith_2099-01-01T00-00-00.000001.jsonl"))  # a re-run
    code, _, err = run(capsys, "fit-history", "--lm-eval", history, *LM_OPTS, *FIT, "--out", tmp_path / "m.npz")
    assert code == 0 and err.count("\n") == 1 and err.startswith("faqstats: warning: model 'mock-a': 2 runs")


# -- session next --format ----------------------------------------------------------------
def test_next_format_lm_eval(capsys, tmp_path, models):
    d = new_session(capsys, models, "lm-eval", tmp_path / "s")
    code, text, _ = run(capsys, "session", "next", d, "--format", "lm-eval")
    assert code == 0
    pending = EvaluationSession.load(d).pending.ids
    samples = write_lm_eval_samples_arg(pending)
    assert shlex.split(text) == ["--tasks", ",".join(samples), "--samples", json.dumps(samples)]
    # the bare values, as "$(...)" gives them; the same round until it is recorded
    assert run(capsys, "session", "next", d, "--format", "lm-eval", "--print", "tasks")[1] == ",".join(samples) + "\n"
    assert json.loads(run(capsys, "session", "next", d, "--print", "samples", "--format", "lm-eval")[1]) == samples
    code, out, _ = run(capsys, "session", "next", d, "--format", "lm-eval", "--json")
    assert out["ids"] == pending and out["tasks"] == list(samples) and out["samples"] == samples
    code, text, _ = run(capsys, "session", "next", d)  # the plain ids of the same round
    assert [line.split("\t")[0] for line in text.splitlines()] == pending


def _unescape(selector):
    return re.sub(r"\[([*?\[])\]", r"\1", selector)


def test_next_format_inspect_round_trips_every_id(capsys, tmp_path, models):
    """A round of the whole bank: every selector names its task and matches its own sample id only."""
    n = len(truth("inspect"))
    d = new_session(capsys, models, "inspect", tmp_path / "s", budget=n, batch_size=n)
    code, value, _ = run(capsys, "session", "next", d, "--format", "inspect", "--print", "samples")
    assert code == 0 and value.endswith("\n") and value.count("\n") == 1
    pending = EvaluationSession.load(d).pending.ids
    selectors = value.strip().split(",")
    assert len(selectors) == n
    back = [make_question_id(*s.split(":", 1)) for s in map(_unescape, selectors)]
    assert back == pending
    pairs = [s.split(":", 1) for s in selectors]  # (task, glob pattern of the sample id)
    for task, pattern in pairs:
        matched = [(t, _unescape(p)) for t, p in pairs if t == task and fnmatch.fnmatchcase(_unescape(p), pattern)]
        assert matched == [(task, _unescape(pattern))]
    code, tasks, _ = run(capsys, "session", "next", d, "--format", "inspect", "--print", "tasks")
    assert sorted(tasks.split()) == ["arith", "odd", "words"]
    code, line, _ = run(capsys, "session", "next", d, "--format", "inspect")
    assert shlex.split(line) == ["--sample-id", value.strip()]
    # the census: recorded from the new model's full run, the exact mean with width 0
    code, st, err = run(capsys, "session", "record", d, "--inspect", INSPECT_NEW[0], "--inspect", INSPECT_NEW[1],
                        "--scorer", "match", "--json")
    assert code == 0, err
    assert st["done"] and st["ignored"] == [] and st["recorded"] == pending
    assert st["estimate"] == pytest.approx(np.mean(list(truth("inspect").values())))
    assert st["conf_int"][1] - st["conf_int"][0] == pytest.approx(0)


def test_next_print_is_empty_once_done_and_its_refusals(capsys, tmp_path, models):
    d = new_session(capsys, models, "lm-eval", tmp_path / "s", budget=4, batch_size=4)
    for argv in (["--print", "tasks"], ["--format", "lm-eval", "--print", "tasks", "--json"]):
        code, _, err = run(capsys, "session", "next", d, *argv)
        assert code == 2 and "--print prints one bare value of --format lm-eval or --format inspect" in err
    with pytest.raises(SystemExit):
        main(["session", "next", str(d), "--format", "harness"])
    assert "invalid choice: 'harness'" in capsys.readouterr().err
    assert EvaluationSession.load(d).pending.ids == []  # refused before drawing
    run(capsys, "session", "next", d, "--format", "lm-eval")
    code, _, err = run(capsys, "session", "record", d, "--lm-eval", LM / "new_model", *LM_OPTS)
    assert code == 0, err
    code, out, err = run(capsys, "session", "next", d, "--format", "lm-eval", "--print", "samples")
    assert code == 0 and out == "" and err.startswith("faqstats: Done (budget)")
    code, out, _ = run(capsys, "session", "next", d, "--format", "lm-eval", "--json")
    assert out["done"] and out["tasks"] == [] and out["samples"] is None
    code, text, _ = run(capsys, "session", "next", d, "--format", "inspect")
    assert code == 0 and text.startswith("Done (budget)")


def test_next_format_needs_harness_ids(capsys, tmp_path):
    bank = fq.make_synthetic_bank(n_models=20, n_questions=10, n_components=2, random_state=0)
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    fq.save_factor_model(fm, tmp_path / "fm.npz", question_ids=[f"item{j}" for j in range(10)])
    run(capsys, "session", "new", tmp_path / "s", "--model", tmp_path / "fm.npz", "--budget", 3)
    code, _, err = run(capsys, "session", "next", tmp_path / "s", "--format", "lm-eval")
    assert code == 2 and "the session's question ids must look like '<task>/<id>', got 'item" in err


# -- session record --lm-eval / --inspect ---------------------------------------------------
def test_record_reads_exactly_the_pending_ids(capsys, tmp_path, models):
    d = new_session(capsys, models, "lm-eval", tmp_path / "s")
    values = truth("lm-eval")
    pending = run(capsys, "session", "next", d, "--json")[1]["ids"]
    # options in any order: the harness output before the session directory, --json in between
    code, st, err = run(capsys, "session", "record", "--lm-eval", LM / "new_model", "--json", d, *LM_OPTS)
    assert code == 0, err
    assert st["recorded"] == pending and st["n_draws"] == 4 and st["pending"] == []
    assert set(st["ignored"]) == set(values) - set(pending)  # the rest of the full run: read past
    session = EvaluationSession.load(d)
    np.testing.assert_array_equal(session.queries()["outcome"], [values[q] for q in pending])
    pending = run(capsys, "session", "next", d, "--json")[1]["ids"]
    code, text, _ = run(capsys, "session", "record", d, *LM_OPTS[2:], "--lm-eval", LM / "new_model", *LM_OPTS[:2])
    assert code == 0 and re.match(r"Recorded 4 answer\(s\) from .*new_model \(16 other scored sample\(s\) there "
                                  r"were not pending and are ignored: '", text)
    assert "done (budget)" in text
    code, _, err = run(capsys, "session", "record", d, "--lm-eval", LM / "new_model", *LM_OPTS)
    assert code == 2 and "The session is done (budget)" in err


def test_record_with_an_asked_id_missing_is_a_one_line_error_that_records_nothing(capsys, tmp_path, models):
    d = new_session(capsys, models, "lm-eval", tmp_path / "s")
    pending = run(capsys, "session", "next", d, "--json")[1]["ids"]
    # the new model's run without the line of the last pending document
    task, doc = pending[-1].split("/")
    out = shutil.copytree(LM / "new_model", tmp_path / "run")
    samples = next(out.rglob(f"samples_{task}_*.jsonl"))
    lines = [line for line in samples.read_text().splitlines() if json.loads(line)["doc_id"] != int(doc)]
    samples.write_text("\n".join(lines) + "\n")
    before = (d / "session.json").read_bytes()
    # with lm-eval's results file beside it, the file is refused for counting fewer documents than that file
    code, _, err = run(capsys, "session", "record", d, "--lm-eval", out, *LM_OPTS)
    assert code == 2 and re.search(rf"{samples.name} has \d+ documents with filter .* counted \d+", err), err
    for results in out.rglob("results_*.json"):  # without it, the asked id without a line is named
        results.unlink()
    code, _, err = run(capsys, "session", "record", d, "--lm-eval", out, *LM_OPTS)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert re.search(rf"--lm-eval .*run has no score for 1 of the asked question ids: '{pending[-1]}'\. Nothing was "
                     "recorded", err), err
    code, res, _ = run(capsys, "session", "record", d, "--lm-eval", out, *LM_OPTS, "--json")
    assert code == 2 and pending[-1] in res["error"]
    assert (d / "session.json").read_bytes() == before


@pytest.mark.parametrize(
    "argv, match",
    [
        (["{pending}", "1", "--lm-eval", LM / "new_model"], "give answers one way"),
        (["--from-json", "x.json", "--inspect", INSPECT / "new_model"], "give answers one way"),
        (["--lm-eval", LM / "new_model", "--inspect", INSPECT / "new_model"], "--lm-eval or --inspect, not both"),
        (["--lm-eval", LM / "new_model", "--scorer", "match"], "--scorer .* goes with --inspect"),
        (["--inspect", INSPECT / "new_model", *LM_OPTS], "--metric .* goes with --lm-eval"),
        (["--lm-eval", LM / "new_model", "--filter", "none"], "filter 'none' is absent from .* Nothing was recorded"),
        (["--inspect", INSPECT / "new_model"],
         r"--inspect .*new_model has no scored sample of the tasks asked \(faq_arith, faq_count\)"),
        (["--lm-eval", LM / "new_model", "--metric", "faq_cont=acc"], r"--metric faq_cont=acc: no task 'faq_cont' in "
                                                                      r"the session's bank \(its tasks: faq_arith, "),
        (["--lm-eval", LM / "new_model", "--lm-eval", str(LM / "new_model") + "/"], "new_model/ is given twice"),
        ([], r"expected ID VALUE pairs \(or --from-json, --lm-eval, --inspect\), got 0"),
    ],
)
def test_record_refusals(capsys, tmp_path, models, argv, match):
    d = new_session(capsys, models, "lm-eval", tmp_path / "s")
    pending = run(capsys, "session", "next", d, "--json")[1]["ids"]
    before = (d / "session.json").read_bytes()
    code, _, err = run(capsys, "session", "record", d, *[str(a).format(pending=pending[0]) for a in argv])
    # one error line (after a note, when an option given differs from the stored one)
    lines = [line for line in err.strip().splitlines() if not line.startswith("faqstats: note: ")]
    assert code == 2 and len(lines) == 1 and re.search(match, lines[0]), err
    assert (d / "session.json").read_bytes() == before


def test_record_reads_with_the_options_stored_by_fit_history(capsys, tmp_path, models):
    """fit-history stores its --metric/--filter/--scorer with the model and the session's copy;
    record reads with them; an option given replaces the stored one of its name, with a one-line
    note when it reads a task of the bank otherwise; a model without them reads with the defaults."""
    stored = fq.load_factor_model(models["lm-eval"]).metadata_["reader"]
    assert stored == {"harness": "lm-eval",
                      "options": {"metric": {"default": "acc", "tasks": {"faq_count": "exact_match"}},
                                  "filter": {"default": "none", "tasks": {"faq_count": "flexible-extract"}}}}
    assert fq.load_factor_model(models["inspect"]).metadata_["reader"] == {
        "harness": "inspect", "options": {"scorer": {"default": "match", "tasks": {}}}}
    values = truth("lm-eval")
    d = new_session(capsys, models, "lm-eval", tmp_path / "s", budget=12)
    assert EvaluationSession.load(d).factor_model.metadata_["reader"] == stored
    for argv, note in [([], None),  # the stored options
                       (LM_OPTS + ["--metric", "faq_arith=acc"], None),  # the same reading, written otherwise
                       (["--filter", "faq_count=flexible-extract", "--filter", "faq_arith=none", "--metric",
                         "faq_arith=acc_norm", "--metric", "faq_count=exact_match"],
                        "reading with --metric acc --metric faq_arith=acc_norm --metric faq_count=exact_match, not the "
                        "--metric acc --metric faq_count=exact_match that 'faqstats fit-history' stored with the "
                        "factor model for task(s) faq_arith; read every round of a session the same way.")]:
        pending = run(capsys, "session", "next", d, "--json")[1]["ids"]
        code, st, err = run(capsys, "session", "record", d, "--lm-eval", LM / "new_model", *argv, "--json")
        assert code == 0, err
        assert err == ("" if note is None else f"faqstats: note: {note}\n")
        assert st["recorded"] == pending and st["reader"]["harness"] == "lm-eval"
        if not argv:
            assert st["reader"] == stored
    # the last round read acc_norm for faq_arith (equal to acc in these fixtures; that the option
    # given is what is read shows in test_record_refusals: --filter none fails on faq_count)
    assert st["reader"]["options"]["metric"] == {"default": "acc", "tasks": {"faq_arith": "acc_norm",
                                                                             "faq_count": "exact_match"}}
    session = EvaluationSession.load(d)
    queries = session.queries()
    np.testing.assert_array_equal(queries["outcome"], [values[session.question_ids[q]] for q in queries["question"]])

    # a model fitted on an .npz (nothing stored): the reader's defaults, the options as before
    fm = fq.load_factor_model(models["lm-eval"])
    plain = fq.save_factor_model(fm, tmp_path / "plain.npz", question_ids=fm.question_ids_)
    assert "reader" not in fq.load_factor_model(plain).metadata_
    run(capsys, "session", "new", tmp_path / "p", "--model", plain, "--budget", 4, "--batch-size", 4)
    run(capsys, "session", "next", tmp_path / "p")
    code, _, err = run(capsys, "session", "record", tmp_path / "p", "--lm-eval", LM / "new_model")
    assert code == 2 and "filter 'none' is absent from" in err
    code, _, err = run(capsys, "session", "record", tmp_path / "p", "--lm-eval", LM / "new_model", *LM_OPTS)
    assert code == 0 and err == ""
    # the other harness's options do not apply, and a note says so
    d = new_session(capsys, models, "lm-eval", tmp_path / "s2")
    run(capsys, "session", "next", d)
    code, _, err = run(capsys, "session", "record", d, "--inspect", INSPECT / "new_model")
    assert code == 2 and err.startswith("faqstats: note: the factor model was fitted on lm-eval output; its reader "
                                        "options do not apply to --inspect.\n")


def test_stored_reader_options_are_checked_on_load(tmp_path):
    from faqstats.io import check_reader_options

    fm = fq.LogisticFactorModel.from_factors(np.eye(3)[:, :2], np.zeros(2), np.eye(2))
    good = {"harness": "inspect", "options": {"scorer": {"default": None, "tasks": {"t": "match"}}}}
    path = fq.save_factor_model(fm, tmp_path / "fm.npz", reader=good)
    assert fq.load_factor_model(path).metadata_["reader"] == good
    for bad, match in [({"harness": "helm", "options": {}}, "unknown harness 'helm'"),
                       ({"harness": "inspect", "options": {"scorer": "match"}}, "must be a mapping with 'default'"),
                       ({"harness": "inspect", "options": {"sorcerer": {"default": None, "tasks": {}}}},
                        "unknown option 'sorcerer'"),
                       ({"harness": "lm-eval", "options": {"metric": {"default": 3, "tasks": {}}}}, "'default' must"),
                       ({"harness": "lm-eval", "options": {"metric": {"default": "acc", "tasks": {"t": ""}}}},
                        "'tasks'"),
                       ([1], "must be a mapping with the keys")]:
        with pytest.raises(ValueError, match=match):
            check_reader_options(bad)
        with pytest.raises(ValueError, match=match):
            fq.save_factor_model(fm, tmp_path / "x.npz", reader=bad)
        # written by hand into a file's metadata: refused on load, naming the file
        with np.load(path) as data:
            arrays = {key: data[key] for key in data.files}
        meta = json.loads(arrays["metadata_json"].tobytes()) | {"reader": bad}
        arrays["metadata_json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        np.savez(tmp_path / "edited.npz", **arrays)
        with pytest.raises(ValueError, match=r"edited\.npz: metadata 'reader' .*" + match):
            fq.load_factor_model(tmp_path / "edited.npz")


def test_record_without_a_pending_round(capsys, tmp_path, models):
    d = new_session(capsys, models, "inspect", tmp_path / "s")
    code, _, err = run(capsys, "session", "record", d, "--inspect", INSPECT_NEW[0], "--scorer", "match")
    assert code == 2 and f"no question is pending: run 'faqstats session next {d} --format inspect'" in err
