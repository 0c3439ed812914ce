"""Groups, costs and epochs from harness output (issue 15): lm-eval subtasks and groups, inspect tasks and
sample metadata, token counts (inspect) and request lengths (lm-eval) as costs, epochs as a graded outcome;
``faqstats question-table`` and a session started from its CSV. Against the fixtures in tests/data
(written by lm_eval 0.4.13 and inspect-ai 0.3.285) and small hand-written logs.
"""

import csv
import json
import zipfile

import numpy as np
import pytest

import faqstats as fq
from faqstats.cli import main
from faqstats.integrations import (
    read_inspect_costs,
    read_inspect_groups,
    read_inspect_logs,
    read_inspect_outcomes,
    read_lm_eval_costs,
    read_lm_eval_groups,
    read_lm_eval_samples,
    task_groups,
)
from faqstats.session import EvaluationSession
from tests.paths import DATA

LM = DATA / "lm_eval"
INSPECT = DATA / "inspect"
LM_METRIC = {"faq_arith": "acc", "faq_count": "exact_match"}
LM_FILTER = {"faq_arith": "none", "faq_count": "flexible-extract"}
EPOCHS_LOG = INSPECT / "history" / "2026-11-22T01-04-57-00-00_arith_75gRkjAxYMByu4xRgNaK4E.eval"


def _eval_samples(path):
    """``(eval header, samples)`` of an .eval log, read with zipfile and json only."""
    with zipfile.ZipFile(path) as zf:
        header = json.loads(zf.read("header.json"))["eval"]
        return header, [json.loads(zf.read(n)) for n in zf.namelist() if n.startswith("samples/")]


def _json_log(tmp_path, samples, task="quiz", model="mockllm/a", name="log.json", created="2025-01-01"):
    path = tmp_path / name
    path.write_text(json.dumps({"eval": {"model": model, "task": task, "created": created}, "samples": samples}))
    return path


# -- groups -----------------------------------------------------------------------------------
def test_task_groups_are_the_tasks_of_the_ids_read():
    _, _, lm_ids = read_lm_eval_samples(LM / "history", metric=LM_METRIC, filter=LM_FILTER)
    assert set(task_groups(lm_ids)) == {"faq_arith", "faq_count"}
    assert task_groups(["a/b/c%2Fd", "x/1"]) == ["a/b", "x"]
    with pytest.raises(ValueError, match="must look like '<task>/<id>'"):
        task_groups(["plain"])
    with pytest.raises(TypeError, match="not a single string"):
        task_groups("arith/1")


@pytest.mark.parametrize("reader", ["builtin", "inspect"])
def test_inspect_groups_default_to_the_task(reader):
    pytest.importorskip("inspect_ai") if reader == "inspect" else None
    groups = read_inspect_groups(INSPECT / "history", reader=reader)
    _, _, ids = read_inspect_logs(INSPECT / "history", scorer="match", reader="builtin")
    assert list(groups) == ids and list(groups.values()) == task_groups(ids)


def test_inspect_groups_from_sample_metadata(tmp_path):
    samples = [{"id": i, "epoch": e, "metadata": {"subject": s, "level": lvl}}
               for i, s, lvl in [(1, "bio", 1), (2, "chem", 2), (10, "bio", 3)] for e in (1, 2)]
    _json_log(tmp_path, samples)
    _json_log(tmp_path, samples[:2], model="mockllm/b", name="b.json")
    assert read_inspect_groups(tmp_path, "subject", reader="builtin") == {"quiz/1": "bio", "quiz/2": "chem",
                                                                         "quiz/10": "bio"}
    assert read_inspect_groups(tmp_path, "level", reader="builtin") == {"quiz/1": "1", "quiz/2": "2", "quiz/10": "3"}
    with pytest.raises(ValueError, match=r"\w+\.json sample 1: its metadata has no field 'topic' \(it has "
                                         r"\['level', 'subject'\]\)"):
        read_inspect_groups(tmp_path, "topic", reader="builtin")
    _json_log(tmp_path, [{"id": 1, "epoch": 1, "metadata": {"subject": "physics"}}], model="mockllm/c", name="c.json")
    with pytest.raises(ValueError, match="'physics' here and 'bio' in .*; a question has one group"):
        read_inspect_groups(tmp_path, "subject", reader="builtin")
    bad = tmp_path / "bad"
    bad.mkdir()
    _json_log(bad, [{"id": 1, "epoch": 1, "metadata": {"subject": None}}])
    with pytest.raises(ValueError, match="metadata field 'subject' is None, not a group label"):
        read_inspect_groups(bad, "subject", reader="builtin")
    with pytest.raises(TypeError, match="field must be a metadata key"):
        read_inspect_groups(bad, 3, reader="builtin")


def test_lm_eval_groups_by_task_parent_and_group(tmp_path):
    groups = read_lm_eval_groups(LM / "history")
    _, _, ids = read_lm_eval_samples(LM / "history", metric=LM_METRIC, filter=LM_FILTER)
    assert list(groups) == ids and list(groups.values()) == task_groups(ids)
    # the fixtures' tasks are in no group: every level is the task
    assert read_lm_eval_groups(LM / "history", level="group") == groups
    # an mmlu-like tree in the results file
    d = tmp_path / "org__m"
    d.mkdir()
    for task in ("mmlu_anatomy", "mmlu_virology", "arc_easy"):
        (d / f"samples_{task}_2025-01-01T00-00-00.000001.jsonl").write_text(
            "".join(json.dumps({"doc_id": i, "filter": "none", "acc": 1.0}) + "\n" for i in range(2)))
    tree = {"mmlu": ["mmlu_stem", "mmlu_other"], "mmlu_stem": ["mmlu_anatomy"], "mmlu_other": ["mmlu_virology"]}
    (d / "results_2025-01-01T00-00-00.000001.json").write_text(json.dumps({"group_subtasks": tree}))
    parent = read_lm_eval_groups(tmp_path, level="parent")
    assert parent["mmlu_anatomy/1"] == "mmlu_stem" and parent["arc_easy/0"] == "arc_easy"
    assert set(read_lm_eval_groups(tmp_path, level="group").values()) == {"mmlu", "arc_easy"}
    assert read_lm_eval_groups(tmp_path, level="group", task="arc_easy") == {"arc_easy/0": "arc_easy",
                                                                            "arc_easy/1": "arc_easy"}
    (d / "results_2025-01-01T00-00-00.000001.json").write_text(json.dumps({"group_subtasks": {
        "a": ["b"], "b": ["a", "mmlu_anatomy"]}}))
    with pytest.raises(ValueError, match="cycle"):
        read_lm_eval_groups(tmp_path, level="group")
    with pytest.raises(ValueError, match="level must be one of"):
        read_lm_eval_groups(tmp_path, level="subject")


# -- costs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("reader", ["builtin", "inspect"])
def test_inspect_costs_are_the_token_counts_of_the_logs(reader):
    pytest.importorskip("inspect_ai") if reader == "inspect" else None
    costs = read_inspect_costs(INSPECT / "history", reader=reader)
    # independently: every model's mean over epochs of the summed total_tokens, then the mean over models
    per_model = {}
    for path in (INSPECT / "history").glob("*.eval"):
        header, samples = _eval_samples(path)
        for s in samples:
            n = sum(u["total_tokens"] for u in s["model_usage"].values())
            per_model.setdefault((header["model"], f"{header['task']}/{s['id']}"), []).append(n)
    for path in (INSPECT / "history").glob("*.json"):
        log = json.loads(path.read_text())
        for s in log["samples"]:
            n = sum(u["total_tokens"] for u in s["model_usage"].values())
            per_model.setdefault((log["eval"]["model"], f"{log['eval']['task']}/{s['id']}"), []).append(n)
    expected = {}
    for (_, qid), counts in per_model.items():
        expected.setdefault(qid, []).append(np.mean(counts))
    assert costs == {qid: pytest.approx(np.mean(v)) for qid, v in expected.items()}
    assert set(costs) == set(read_inspect_groups(INSPECT / "history", reader="builtin"))
    assert all(c > 0 for c in costs.values())
    output = read_inspect_costs(INSPECT / "history", tokens="output", reader=reader)
    inputs = read_inspect_costs(INSPECT / "history", tokens="input", reader=reader)
    assert all(inputs[q] + output[q] == pytest.approx(costs[q]) for q in costs)


def test_inspect_costs_sum_models_average_epochs_and_take_the_latest_run(tmp_path):
    usage = {"mockllm/a": {"input_tokens": 100, "output_tokens": 20},
             "openai/grader": {"input_tokens": 30, "output_tokens": 2, "total_tokens": 32}}
    samples = [{"id": 1, "epoch": 1, "model_usage": usage},
               {"id": 1, "epoch": 2, "model_usage": {"mockllm/a": {"total_tokens": 50}}},
               {"id": 2, "epoch": 1}]  # no usage: left out
    _json_log(tmp_path, samples)
    assert read_inspect_costs(tmp_path, reader="builtin") == {"quiz/1": (152 + 50) / 2}
    # a later run of the same model replaces the earlier one's counts; another model is averaged in
    _json_log(tmp_path, [{"id": 1, "epoch": 1, "model_usage": {"m": {"total_tokens": 10}}}], name="rerun.json",
              created="2026-01-01")
    _json_log(tmp_path, [{"id": 1, "epoch": 1, "model_usage": {"m": {"total_tokens": 30}}}], model="mockllm/b",
              name="b.json")
    assert read_inspect_costs(tmp_path, reader="builtin") == {"quiz/1": 20.0}
    with pytest.raises(ValueError, match="tokens must be one of"):
        read_inspect_costs(tmp_path, tokens="all", reader="builtin")
    bad = tmp_path / "bad"
    bad.mkdir()
    _json_log(bad, [{"id": 1, "epoch": 1, "model_usage": {"m": {"total_tokens": -3}}}])
    with pytest.raises(ValueError, match=r"model_usage\['m'\]\.total_tokens must be a non-negative number"):
        read_inspect_costs(bad, reader="builtin")
    _json_log(bad, [{"id": 1, "epoch": 1}])
    with pytest.raises(ValueError, match="No sample with model_usage"):
        read_inspect_costs(bad, reader="builtin")


def test_lm_eval_costs_are_the_length_of_the_requests(tmp_path):
    costs = read_lm_eval_costs(LM / "history")
    assert set(costs) == set(read_lm_eval_groups(LM / "history"))
    # doc 0 of faq_arith: four loglikelihood requests, context + continuation each
    line = json.loads(next((LM / "history" / "mock-a").glob("samples_faq_arith_*.jsonl")).read_text().splitlines()[0])
    assert line["doc_id"] == 0
    expected = sum(len(a["arg_0"]) + len(a["arg_1"]) for a in line["arguments"].values())
    assert costs["faq_arith/0"] == expected
    # a generation: the prompt only, not the generation settings
    line = json.loads(next((LM / "history" / "mock-a").glob("samples_faq_count_*.jsonl")).read_text().splitlines()[0])
    assert costs[f"faq_count/{line['doc_id']}"] == len(line["arguments"]["gen_args_0"]["arg_0"])
    words = read_lm_eval_costs(LM / "history", tokenizer=lambda s: len(s.split()), task="faq_count")
    assert set(words) == {q for q in costs if q.startswith("faq_count/")}
    assert words[f"faq_count/{line['doc_id']}"] == len(line["arguments"]["gen_args_0"]["arg_0"].split())
    with pytest.raises(TypeError, match="tokenizer must be a function"):
        read_lm_eval_costs(LM / "history", tokenizer=3)
    d = tmp_path / "org__m"
    d.mkdir()
    (d / "samples_t_2025-01-01T00-00-00.000001.jsonl").write_text(json.dumps({"doc_id": 0, "arguments": 5}) + "\n")
    with pytest.raises(ValueError, match=r"samples_t_.*:1: 'arguments' must map each request"):
        read_lm_eval_costs(tmp_path)
    (d / "samples_t_2025-01-01T00-00-00.000001.jsonl").write_text(json.dumps({"doc_id": 0, "acc": 1}) + "\n")
    with pytest.raises(ValueError, match="needs 'doc_id' and 'arguments'"):
        read_lm_eval_costs(tmp_path)


def test_harness_costs_drive_a_session(tmp_path):
    """The readers' mappings go straight into a session (ids of the history's bank)."""
    H, _, ids = read_inspect_logs(INSPECT / "history", scorer="match", reader="builtin")
    rng = np.random.default_rng(0)
    fm = fq.LogisticFactorModel.from_factors(rng.normal(size=(len(ids), 2)), prior_mean=np.zeros(2),
                                             prior_cov=np.eye(2))
    costs = read_inspect_costs(INSPECT / "history", reader="builtin")
    session = EvaluationSession(fm, ids, budget=4, costs=costs, budget_cost=60.0, random_state=0,
                                groups=read_inspect_groups(INSPECT / "history", reader="builtin"))
    assert session.costs.tolist() == [costs[q] for q in ids] and session.budget == 5
    assert session.groups.tolist() == task_groups(ids)


# -- epochs -----------------------------------------------------------------------------------
def test_epochs_are_read_as_a_graded_outcome_and_recorded_as_one(tmp_path, capsys):
    """A sample run for several epochs is one question whose outcome is the mean over the epochs
    (a graded outcome in [0, 1]); the session records it as such."""
    header, samples = _eval_samples(EPOCHS_LOG)
    assert header["config"]["epochs"] == 2
    by_id = {}
    for s in samples:
        by_id.setdefault(f"arith/{s['id']}", []).append(1.0 if s["scores"]["match"]["value"] == "C" else 0.0)
    ids = sorted(by_id, key=lambda q: int(q.split("/")[1]))
    means = [np.mean(by_id[q]) for q in ids]
    assert 0.5 in means  # some samples were right in one epoch and wrong in the other
    np.testing.assert_array_equal(read_inspect_outcomes(EPOCHS_LOG, ids, scorer="match"), means)
    # a session over these 8 questions, all asked in one round, recorded from the log by the CLI
    rng = np.random.default_rng(1)
    fm = fq.LogisticFactorModel.from_factors(rng.normal(size=(8, 2)), prior_mean=np.zeros(2), prior_cov=np.eye(2))
    fq.save_factor_model(fm, tmp_path / "fm.npz", question_ids=ids)
    d = tmp_path / "s"
    assert main(["session", "new", str(d), "--model", str(tmp_path / "fm.npz"), "--budget", "8",
                 "--batch-size", "8"]) == 0
    assert main(["session", "next", str(d)]) == 0
    assert main(["session", "record", str(d), "--inspect", str(EPOCHS_LOG), "--scorer", "match"]) == 0, \
        capsys.readouterr().err
    session = EvaluationSession.load(d)
    q = session.queries()
    np.testing.assert_array_equal(q["outcome"], [means[j] for j in q["question"]])
    # a census: the estimate is the mean of the graded outcomes, with no sampling error
    assert session.result().estimate == pytest.approx(np.mean(means))


# -- faqstats question-table ------------------------------------------------------------------
def _table(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_question_table_from_inspect_feeds_a_session(tmp_path, capsys):
    out = tmp_path / "table.csv"
    assert main(["question-table", "--inspect", str(INSPECT / "history"), "--out", str(out)]) == 0
    rows = _table(out)
    costs = read_inspect_costs(INSPECT / "history", reader="builtin")
    assert [r["question_id"] for r in rows] == list(costs)
    assert all(float(r["cost"]) == pytest.approx(costs[r["question_id"]]) and r["group"] == r["task"] for r in rows)
    capsys.readouterr()
    # the history's model, then a session over it with the table's groups and costs
    assert main(["fit-history", "--inspect", str(INSPECT / "history"), "--scorer", "match", "--n-components", "2",
                 "--max-iter", "30", "--device", "cpu", "--out", str(tmp_path / "bank.npz"), "--quiet"]) == 0
    d = tmp_path / "s"
    assert main(["session", "new", str(d), "--model", str(tmp_path / "bank.npz"), "--groups-from", str(out),
                 "--costs-from", str(out), "--budget-cost", "60", "--estimand", "macro", "--seed", "0"]) == 0
    session = EvaluationSession.load(d)
    assert session.costs.tolist() == [costs[q] for q in session.question_ids]
    assert set(session.groups) == {"arith", "words"} and session.estimand == "macro"
    # --groups-from tasks gives the same groups
    assert main(["session", "new", str(tmp_path / "t"), "--model", str(tmp_path / "bank.npz"), "--groups-from",
                 "tasks", "--budget", "4"]) == 0
    assert EvaluationSession.load(tmp_path / "t").groups.tolist() == session.groups.tolist()


def test_question_table_from_lm_eval_and_refusals(tmp_path, capsys):
    out = tmp_path / "lm.csv"
    assert main(["question-table", "--lm-eval", str(LM / "history"), "--out", str(out), "--group", "group",
                 "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["n_questions"] == 20 and payload["cost"] == "characters of the requests"
    rows = _table(out)
    costs = read_lm_eval_costs(LM / "history")
    assert {r["question_id"]: float(r["cost"]) for r in rows} == costs
    for argv, match in [
        (["--lm-eval", str(LM / "history"), "--group", "metadata.subject"], "goes with --inspect"),
        (["--lm-eval", str(LM / "history"), "--tokens", "output"], "--tokens goes with --inspect"),
        (["--inspect", str(INSPECT / "history"), "--group", "parent"], "with --inspect use task or metadata.FIELD"),
        (["--inspect", str(INSPECT / "history"), "--group", "metadata.subject"], "has no field 'subject'"),
        (["--inspect", str(tmp_path / "nope")], "does not exist"),
    ]:
        assert main(["question-table", *argv, "--out", str(tmp_path / "x.csv")]) == 2
        err = capsys.readouterr().err
        assert match in err and len(err.strip().splitlines()) == 1, err


def test_question_table_without_every_cost_writes_no_cost_column_and_round_trips(tmp_path, capsys, monkeypatch):
    """Logs without token counts for every question: no cost column (an empty cost would be refused by
    --costs-from); the file still gives a session its groups, and --costs-from says what it lacks."""
    from faqstats.integrations import inspect_ai

    monkeypatch.setattr(inspect_ai, "inspect_reader", lambda reader: None)  # hand-written logs: the built-in reader
    logs = tmp_path / "logs"
    logs.mkdir()
    _json_log(logs, [{"id": 1, "epoch": 1, "metadata": {"s": "x"}, "model_usage": {"m": {"total_tokens": 9}}},
                     {"id": 2, "epoch": 1, "metadata": {"s": "y"}}])
    out = tmp_path / "t.csv"
    assert main(["question-table", "--inspect", str(logs), "--group", "metadata.s", "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert "1 question(s) have no token counts" in captured.err and "has no cost column" in captured.err
    assert json.loads(captured.out)["cost"] is None
    assert _table(out) == [{"question_id": "quiz/1", "task": "quiz", "group": "x"},
                           {"question_id": "quiz/2", "task": "quiz", "group": "y"}]
    fm = fq.LogisticFactorModel.from_factors(np.eye(2), np.zeros(2), np.eye(2))
    model = fq.save_factor_model(fm, tmp_path / "m.npz", question_ids=["quiz/1", "quiz/2"])
    assert main(["session", "new", str(tmp_path / "s"), "--model", str(model), "--groups-from", str(out),
                 "--budget", "2"]) == 0
    assert EvaluationSession.load(tmp_path / "s").groups.tolist() == ["x", "y"]
    capsys.readouterr()
    assert main(["session", "new", str(tmp_path / "c"), "--model", str(model), "--costs-from", str(out),
                 "--budget-cost", "5"]) == 2
    err = capsys.readouterr().err
    assert "t.csv: its header ['question_id', 'task', 'group'] has no 'cost' column" in err, err
    # every cost there: the column is written and read back exactly
    _json_log(logs, [{"id": 1, "epoch": 1, "metadata": {"s": "x"}, "model_usage": {"m": {"total_tokens": 9}}},
                     {"id": 2, "epoch": 1, "metadata": {"s": "y"}, "model_usage": {"m": {"total_tokens": 2.5}}}])
    assert main(["question-table", "--inspect", str(logs), "--group", "metadata.s", "--out", str(out)]) == 0
    assert main(["session", "new", str(tmp_path / "d"), "--model", str(model), "--costs-from", str(out),
                 "--budget", "2"]) == 0
    assert EvaluationSession.load(tmp_path / "d").costs.tolist() == [9.0, 2.5]
