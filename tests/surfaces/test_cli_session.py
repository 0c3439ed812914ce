"""The shell flow: faqstats fit-history, then session new / next / record / status / report, with --json."""

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

import faqstats as fq
from faqstats.cli import build_parser, main
from faqstats.session import EvaluationSession
from tests.paths import REPO

N = 50


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny problems (conftest.py)


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=40, n_questions=N, n_new=2, n_components=3, missing_rate=0.2, random_state=0)


@pytest.fixture
def history_npz(tmp_path, bank):
    path = tmp_path / "history.npz"
    outcomes = np.where(np.isnan(bank.history), -1, bank.history).astype(np.int8)  # -1: not observed
    np.savez(path, outcomes=outcomes, items=np.array([f"item{j}" for j in range(N)]))
    return path


@pytest.fixture
def model_npz(tmp_path, bank):
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    return fq.save_factor_model(fm, tmp_path / "fm.npz", question_ids=[f"item{j}" for j in range(N)])


def run(capsys, *argv):
    """``faqstats argv`` in-process: (exit code, parsed JSON stdout or text, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in argv else out), err


def test_fit_history_writes_a_loadable_model_with_the_items_as_ids(capsys, tmp_path, history_npz):
    code, out, _ = run(capsys, "fit-history", "--data", history_npz, "--out", tmp_path / "m.npz", "--n-components", 2,
                       "--max-iter", 20, "--device", "cpu", "--json")
    assert code == 0 and out["n_questions"] == N and out["n_components"] == 2 and out["question_ids"]
    fm = fq.load_factor_model(out["model"])
    assert fm.question_ids_ == [f"item{j}" for j in range(N)] and fm.max_iter == 20
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("\n".join(f"x{j}" for j in range(N)))
    code, text, _ = run(capsys, "fit-history", "--data", history_npz, "--out", tmp_path / "m2.npz", "--n-components", 2,
                        "--max-iter", 5, "--device", "cpu", "--question-ids", ids_file, "--quiet")
    assert code == 0 and "Wrote" in text
    assert fq.load_factor_model(tmp_path / "m2.npz").question_ids_[0] == "x0"


def test_session_flow_end_to_end(capsys, tmp_path, bank, model_npz):
    z = bank.new_outcomes[0]
    d = tmp_path / "session"
    code, st, _ = run(capsys, "session", "new", d, "--model", model_npz, "--budget", 9, "--batch-size", 3, "--seed", 4,
                      "--json")
    assert code == 0 and st["budget"] == 9 and st["n_draws"] == 0 and not st["done"]
    rounds = 0
    while True:
        code, nxt, _ = run(capsys, "session", "next", d, "--json")
        assert code == 0
        if nxt["done"]:
            assert nxt["ids"] == [] and nxt["stop_reason"] == "budget"
            break
        assert run(capsys, "session", "next", d, "--json")[1] == nxt  # pending: served again
        rounds += 1
        first, rest = nxt["ids"][:1], nxt["ids"][1:]
        args = [x for q in first for x in (q, int(z[int(q[4:])]))]
        code, st, _ = run(capsys, "session", "record", d, *args, "--json")
        assert code == 0 and st["n_answers"] == (rounds - 1) * 3 + 1
        answers = tmp_path / "answers.json"
        answers.write_text(json.dumps({q: int(z[int(q[4:])]) for q in rest}))
        assert run(capsys, "session", "record", d, "--from-json", answers)[0] == 0
    assert rounds == 3
    code, rep, _ = run(capsys, "session", "report", d, "--png", tmp_path / "run.png", "--json")
    est = fq.PAIEstimator(fq.load_factor_model(model_npz), fq.HybridSampler(), budget=9, batch_size=3,
                          random_state=4).fit(z)
    assert code == 0 and rep["done"] and rep["estimate"] == est.estimate_
    assert rep["conf_int"] == list(est.conf_int())
    assert len(rep["trajectory"]) == 8 and rep["trajectory"][-1][1] == est.estimate_
    assert (tmp_path / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, text, _ = run(capsys, "session", "report", d)
    assert code == 0 and "Estimated accuracy" in text and f"{est.estimate_:.4f}" in text
    code, text, _ = run(capsys, "session", "status", d)
    assert code == 0 and "done (budget)" in text


def test_text_output_and_next_with_n(capsys, tmp_path, model_npz):
    d = tmp_path / "s"
    code, text, _ = run(capsys, "session", "new", d, "--model", model_npz, "--budget", 10, "--stop-when-width", 0.9,
                        "--replace", "--tau", 0.4)
    assert code == 0 and "Next: faqstats session next" in text
    code, text, _ = run(capsys, "session", "next", d, "--n", 2)
    lines = text.strip().splitlines()
    assert code == 0 and len(lines) == 2 and all(line.startswith("item") for line in lines)
    qid = lines[0].split("\t")[0]
    code, text, _ = run(capsys, "session", "record", d, qid, "1")
    assert code == 0 and "Recorded 1 answer" in text and "1 pending" in text
    assert run(capsys, "session", "record", d, lines[1].split("\t")[0], "0")[0] == 0
    code, text, _ = run(capsys, "session", "report", d)
    assert code == 0 and "(still running)" in text and "Estimate" in text
    code, st, _ = run(capsys, "session", "status", d, "--json")
    assert st["sampler"]["params"]["replace"] is True and st["stop_when_width"] == 0.9


@pytest.mark.parametrize(
    "argv, match",
    [
        (["session", "record", "{d}", "item0", "1"], "not pending"),
        (["session", "record", "{d}", "{pending}", "1.5"], r"in \[0, 1\]"),
        (["session", "record", "{d}", "{pending}", "yes"], "not a number"),
        (["session", "record", "{d}", "{pending}"], "ID VALUE pairs"),
        (["session", "status", "{d}/missing"], "No faqstats session"),
        (["session", "new", "{d}", "--model", "{model}", "--budget", "5"], "already holds"),
        (["session", "new", "{d}/other", "--model", "{model}", "--budget", "1"], "budget"),
        (["session", "new", "{d}/other", "--model", "{d}/nope.npz", "--budget", "5"], "No such file"),
        (["fit-history", "--data", "{d}/nope.npz", "--out", "{d}/m.npz"], "No response matrix"),
    ],
)
def test_errors_exit_2_with_one_line_and_leave_the_session_untouched(capsys, tmp_path, model_npz, argv, match):
    d = tmp_path / "s"
    run(capsys, "session", "new", d, "--model", model_npz, "--budget", 5)
    pending = run(capsys, "session", "next", d, "--json")[1]["ids"][0]
    before = (d / "session.json").read_bytes()
    argv = [a.format(d=d, model=model_npz, pending=pending) for a in argv]
    code, _, err = run(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("faqstats: error: ")
    assert re.search(match, err)
    code, out, err = run(capsys, *argv, "--json")
    assert code == 2 and re.search(match, out["error"])
    assert (d / "session.json").read_bytes() == before


# ------------------------------------------------------------------ the tutorial runs as written
TUTORIAL = REPO / "docs" / "tutorials" / "python_callable.md"


def test_tutorial_python_callable_runs(tmp_path, monkeypatch, capsys):
    """Python blocks run in order in one namespace; plain ``faqstats ...`` lines of the bash
    blocks run through the CLI's ``main`` (``> FILE`` redirects stdout). Blocks with shell
    syntax (loops, pipes, ``$``) need jq and a grader script and are only checked to parse."""
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```(python|bash)\n(.*?)```", TUTORIAL.read_text(), flags=re.S)
    assert [lang for lang, _ in blocks].count("python") >= 5
    namespace = {"__name__": "tutorial"}
    for lang, code in blocks:
        if lang == "python":
            exec(compile(code, str(TUTORIAL), "exec"), namespace)
            continue
        if re.search(r"[$|]", code):
            for call in re.findall(r"faqstats ([^|;\n]*?)(?: \||;|$| >)", code, flags=re.M):
                args = [a for a in shlex.split(call.replace('"$id"', "item0").replace('"$(./grade.sh "$id")"', "1"))]
                build_parser().parse_args(args)
            continue
        for line in code.strip().splitlines():
            argv = shlex.split(line)
            assert argv[0] == "faqstats", line
            target = None
            if ">" in argv:
                argv, target = argv[: argv.index(">")], argv[argv.index(">") + 1]
            code = main(argv[1:])
            out, err = capsys.readouterr()
            assert code == 0, (line, err)
            if target is not None:
                Path(target).write_text(out)
    assert namespace["result_b"] == namespace["result"]
    assert (tmp_path / "runs" / "cli" / "estimate.png").stat().st_size > 0
    status = EvaluationSession.load(tmp_path / "runs" / "cli").status()
    assert status["n_answers"] == status["n_draws"] == 5 and status["pending"] == []
    # section 6: the shell's session reads the same groups and costs as the Python one
    grouped, cli = namespace["grouped"], EvaluationSession.load(tmp_path / "runs" / "grouped-cli")
    assert cli.budget == grouped.budget and cli.estimand == "macro"
    np.testing.assert_array_equal(cli.costs, grouped.costs)
    np.testing.assert_array_equal(cli.groups, grouped.groups)
    # clusters: the shell's session reads the same clusters; the Python one equals the estimator
    clustered = EvaluationSession.load(tmp_path / "runs" / "clustered-cli")
    np.testing.assert_array_equal(clustered.clusters, namespace["clustered"].clusters)
    assert namespace["clustered"].n_queries == 4 * namespace["clustered"].n_draws


def test_fit_history_learns_step_weights_that_a_session_uses(capsys, tmp_path):
    bank = fq.make_synthetic_bank(n_models=60, n_questions=N, n_new=1, n_components=3, random_state=1)
    hist = tmp_path / "complete.npz"
    np.savez(hist, outcomes=bank.history.astype(np.int8))
    code, out, _ = run(capsys, "fit-history", "--data", hist, "--out", tmp_path / "m.npz", "--n-components", 2,
                       "--max-iter", 50, "--device", "cpu", "--step-weights-budget", 12, "--json")
    assert code == 0 and out["step_weights"].endswith("m.step_weights.json")
    sw = fq.load_step_weights(out["step_weights"])
    assert sw.weights.shape == (12,)
    code, out, _ = run(capsys, "session", "new", tmp_path / "s", "--model", tmp_path / "m.npz", "--budget", 10,
                       "--step-weights", tmp_path / "m.step_weights.json", "--json")
    assert code == 0
    s = EvaluationSession.load(tmp_path / "s")
    np.testing.assert_array_equal(s._config["step_weights"], sw.weights)
    # a budget beyond the learned weights is refused by name
    code, _, err = run(capsys, "session", "new", tmp_path / "s2", "--model", tmp_path / "m.npz", "--budget", 20,
                       "--step-weights", tmp_path / "m.step_weights.json")
    assert code != 0 and "step_weights" in err


def test_step_weights_file_round_trip_and_refusals(tmp_path):
    from faqstats import StepWeights, load_step_weights, save_step_weights

    sw = StepWeights(np.array([0.5, 1.0, 1.5]), np.array([3.0, 2.0, 1.0]), np.array([3.0, 2.0, 1.0]), 4, 40, 0.9, 1.0)
    save_step_weights(sw, tmp_path / "w.json")
    back = load_step_weights(tmp_path / "w.json")
    np.testing.assert_array_equal(back.weights, sw.weights)
    assert back.variance_ratio == sw.variance_ratio
    doc = json.loads((tmp_path / "w.json").read_text())
    v1 = {key: value for key, value in doc.items() if key != "sha256"} | {"format_version": 1}  # no checksum yet
    (tmp_path / "v1.json").write_text(json.dumps(v1))
    np.testing.assert_array_equal(load_step_weights(tmp_path / "v1.json", allow_unchecked=True).weights, sw.weights)
    for bad, match in ((doc | {"format_version": 99}, "newer"), (doc | {"format": "x"}, "not a faqstats"),
                       (doc | {"n_runs": 41}, "checksum"), (v1 | {"weights": [1.0, -1.0, 1.0]}, "positive")):
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=match):
            load_step_weights(tmp_path / "bad.json", allow_unchecked=True)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not a step-weights JSON"):
        load_step_weights(tmp_path / "bad.json")


def test_options_anywhere_and_consistent_counts(capsys, tmp_path, bank, model_npz):
    """``record DIR --json ID VALUE`` is accepted (issue 19); the status counts the answer just
    recorded even while it waits for an earlier draw of its round."""
    z = bank.new_outcomes[0]
    d = tmp_path / "s"
    assert run(capsys, "session", "new", d, "--model", model_npz, "--budget", 6, "--batch-size", 3, "--json")[0] == 0
    ids = run(capsys, "session", "next", d, "--json")[1]["ids"]
    last = ids[-1]
    code, text, _ = run(capsys, "session", "record", d, last, int(z[int(last[4:])]))
    assert code == 0 and "1 of 50 questions answered, 0 of 6 draws in the estimate" in text
    code, st, _ = run(capsys, "session", "record", d, "--json", ids[0], int(z[int(ids[0][4:])]))
    assert code == 0 and st["n_answers"] == 2 and st["n_draws"] == 1
    with pytest.raises(SystemExit) as exit_:
        main(["session", "record", str(d), ids[1], "0.5", "--bogus"])
    assert exit_.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_fit_history_reads_an_npy_matrix(capsys, tmp_path, bank):
    path = tmp_path / "history.npy"
    np.save(path, np.where(np.isnan(bank.history), -1, bank.history).astype(np.int8))
    code, out, _ = run(capsys, "fit-history", "--data", path, "--out", tmp_path / "m.npz", "--n-components", 2,
                       "--max-iter", 5, "--device", "cpu", "--json")
    assert code == 0 and out["n_questions"] == N and not out["question_ids"]
    (tmp_path / "bad.npy").write_bytes(b"not an array")
    code, _, err = run(capsys, "fit-history", "--data", tmp_path / "bad.npy", "--out", tmp_path / "m2.npz")
    assert code == 2 and "bad.npy is not a readable" in err
