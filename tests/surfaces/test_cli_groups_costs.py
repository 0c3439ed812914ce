"""faqstats session new --groups-from / --costs-from / --budget-cost / --estimand, and the per-group
table of session status and report (issue 15), driven in-process."""

import json
import re

import numpy as np
import pytest

import faqstats as fq
from faqstats.cli import main
from faqstats.session import EvaluationSession

N = 30
IDS = [f"t{j % 3}/{j}" for j in range(N)]


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=40, n_questions=N, n_new=1, n_components=2, random_state=0)


@pytest.fixture
def model_npz(tmp_path, bank):
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    return fq.save_factor_model(fm, tmp_path / "fm.npz", question_ids=IDS)


COSTS = [1.0 + j % 4 for j in range(N)]


@pytest.fixture
def costs_csv(tmp_path):
    path = tmp_path / "costs.csv"
    path.write_text("question_id,cost\n" + "".join(f"{q},{c}\n" for q, c in zip(IDS, COSTS)))
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in argv else out), err


def _finish(capsys, d, z):
    while True:
        nxt = run(capsys, "session", "next", d, "--json")[1]
        if nxt["done"]:
            return
        pairs = [x for q in nxt["ids"] for x in (q, z[IDS.index(q)])]
        assert run(capsys, "session", "record", d, *pairs)[0] == 0


def test_groups_and_cost_budget_from_the_shell_equal_the_estimator(capsys, tmp_path, bank, model_npz, costs_csv):
    d = tmp_path / "s"
    code, out, err = run(capsys, "session", "new", d, "--model", model_npz, "--costs-from", costs_csv,
                         "--budget-cost", 40, "--groups-from", "tasks", "--estimand", "macro",
                         "--min-group-share", 0.2, "--batch-size", 3, "--seed", 4)
    assert code == 0, err
    assert re.search(r"3 groups, estimand macro, costs per question, cost budget 40 = \d+ draws", out)
    z = bank.new_outcomes[0]
    _finish(capsys, d, z)
    fm = fq.load_factor_model(model_npz)
    groups = np.array([q.split("/")[0] for q in IDS])
    est = fq.PAIEstimator(fm, fq.HybridSampler(), batch_size=3, random_state=4, budget_cost=40.0, estimand="macro",
                          min_group_share=0.2).fit(z, groups=groups, costs=np.array(COSTS))
    session = EvaluationSession.load(d)
    assert session.result() == est.result_
    st = run(capsys, "session", "status", d, "--json", "--simultaneous")[1]
    assert st["cost_spent"] == pytest.approx(est.cost_spent_) and st["estimand"] == "macro"
    frame = est.group_results_.to_frame()
    assert [r["group"] for r in st["groups"]] == ["t0", "t1", "t2"]
    np.testing.assert_allclose([r["estimate"] for r in st["groups"]], frame["estimate"])
    np.testing.assert_allclose([r["simultaneous_upper"] for r in st["groups"]],
                               est.group_results_.conf_int(simultaneous=True)["upper"])
    # the text: estimand, cost line, and one aligned row per group
    code, text, _ = run(capsys, "session", "report", d)
    assert code == 0
    assert "Estimand: macro (the mean of the groups' accuracies)." in text
    assert re.search(r"Cost spent [\d.]+ of a cost budget of 40 \(\d+ draws at an expected [\d.]+ per draw\)\.", text)
    lines = text.splitlines()
    k = lines.index("Groups (3), 95% intervals:")
    assert lines[k + 1].split() == ["group", "questions", "asked", "estimate", "std_err", "lower", "upper"]
    row = lines[k + 2].split()
    assert row[0] == "t0" and row[1] == "10" and float(row[3]) == pytest.approx(frame["estimate"].iloc[0], abs=1e-4)
    code, text, _ = run(capsys, "session", "status", d, "--simultaneous")
    assert "Groups (3), 95% intervals (simult: for all groups at once):" in text
    assert "simult_upper" in text


@pytest.mark.parametrize("layout", ["csv-no-header", "csv-three-columns", "json-object", "json-pairs", "tsv"])
def test_groups_and_costs_files_in_every_layout(capsys, tmp_path, model_npz, layout):
    labels = {q: ("hard" if j % 2 else "easy") for j, q in enumerate(IDS)}
    costs = dict(zip(IDS, COSTS))
    if layout == "csv-no-header":
        gpath, cpath = tmp_path / "g.csv", tmp_path / "c.csv"
        gpath.write_text("".join(f"{q},{g}\n" for q, g in labels.items()))
        cpath.write_text("".join(f"{q},{c}\n" for q, c in costs.items()))
    elif layout == "csv-three-columns":  # one table for both, the columns named by its header
        gpath = cpath = tmp_path / "table.csv"
        gpath.write_text("id,cost,group\n" + "".join(f"{q},{costs[q]},{labels[q]}\n" for q in IDS))
    elif layout == "tsv":
        gpath = cpath = tmp_path / "table.tsv"
        gpath.write_text("question_id\tgroup\tcost\n" + "".join(f"{q}\t{labels[q]}\t{costs[q]}\n" for q in IDS))
    else:
        gpath, cpath = tmp_path / "g.json", tmp_path / "c.json"
        if layout == "json-object":
            gpath.write_text(json.dumps(labels))
            cpath.write_text(json.dumps(costs))
        else:
            gpath.write_text(json.dumps([[q, g] for q, g in labels.items()]))
            cpath.write_text(json.dumps([[q, c] for q, c in costs.items()]))
    code, _, err = run(capsys, "session", "new", tmp_path / "s", "--model", model_npz, "--budget", 6,
                       "--groups-from", gpath, "--costs-from", cpath)
    assert code == 0, err
    s = EvaluationSession.load(tmp_path / "s")
    assert s.groups.tolist() == [labels[q] for q in IDS]
    np.testing.assert_array_equal(s.costs, COSTS)


@pytest.mark.parametrize("content, option, match", [
    ("t0/0,1\n", "--costs-from", r"c\.csv has no cost for 29 of the bank's 30 question ids: 't1/1', 't2/2'"),
    ("{ids_but_first}t0/0,0\n", "--costs-from", r"c\.csv:30: the cost of question id 't0/0' must be finite and "
                                                r"positive, got '0'"),
    ("{ids_but_first}t0/0,-2\n", "--costs-from", "must be finite and positive, got '-2'"),
    ("{ids_but_first}t0/0,inf\n", "--costs-from", "must be finite and positive, got 'inf'"),
    ("{ids_but_first}t0/0,cheap\n", "--costs-from", r"c\.csv:30: the cost of question id 't0/0' is not a number"),
    ("{ids}t0/0,2\n", "--costs-from", r"c\.csv:31: question id 't0/0' appears more than once"),
    ("", "--costs-from", r"c\.csv is empty"),
    ("qid,price,weight\n", "--costs-from", r"header \['qid', 'price', 'weight'\] has no 'cost' column"),
    ("t0/0,1,2\n", "--costs-from", r"c\.csv:1: without a header a row is 'question_id,cost'"),
    ("json:[1, 2]", "--costs-from", r"c\.json must hold a JSON object"),
    ("json:{", "--costs-from", r"c\.json is not valid JSON"),
    ("json:{\"t0/0\": true}", "--costs-from", "no cost for 29"),
    ("bytes", "--costs-from", r"c\.csv is not UTF-8 text"),
    ("missing", "--costs-from", r"cannot read \S*nope\.csv: No such file or directory"),
    ("missing", "--groups-from", r"cannot read \S*nope\.csv: No such file or directory"),
    ("t0/0,a\n", "--groups-from", r"c\.csv has no group for 29 of the bank's 30"),
])
def test_bad_files_are_named(capsys, tmp_path, model_npz, content, option, match):
    d = tmp_path / "s"
    suffix = ".json" if content.startswith("json:") else ".csv"
    path = tmp_path / f"c{suffix}"
    lines = [f"{q},{c}\n" for q, c in zip(IDS, COSTS)]
    if content == "bytes":
        path.write_bytes(b"t0/0,\xff\n")
    elif content == "missing":
        path = tmp_path / "nope.csv"
    else:
        text = content.removeprefix("json:") if content.startswith("json:") else content.format(
            ids="".join(lines), ids_but_first="".join(lines[1:]))
        path.write_text(text)
    code, _, err = run(capsys, "session", "new", d, "--model", model_npz, "--budget", 6, option, path)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert re.search(match, err), err
    assert not (d / "session.json").exists()


@pytest.mark.parametrize("argv, match", [
    (["--budget", 6, "--budget-cost", 10, "--costs-from", "{costs}"], "give --budget .* or --budget-cost"),
    ([], "give --budget .* or --budget-cost"),
    (["--budget-cost", 10], "--budget-cost needs --costs-from"),
    (["--budget", 6, "--estimand", "macro"], "need --groups-from"),
    (["--budget", 6, "--min-group-share", 0.2], "need --groups-from"),
    (["--budget-cost", 1.5, "--costs-from", "{costs}"], "buys 0 draw"),
    (["--budget", 6, "--groups-from", "tasks", "--stratify", "--costs-from", "{costs}"], "not available with stratify"),
])
def test_bad_option_combinations(capsys, tmp_path, model_npz, costs_csv, argv, match):
    argv = [str(a).format(costs=costs_csv) for a in argv]
    code, _, err = run(capsys, "session", "new", tmp_path / "s", "--model", model_npz, *argv)
    assert code == 2 and re.search(match, err), err


def test_groups_from_tasks_needs_harness_ids(capsys, tmp_path, bank):
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    path = fq.save_factor_model(fm, tmp_path / "fm.npz", question_ids=[f"item{j}" for j in range(N)])
    code, _, err = run(capsys, "session", "new", tmp_path / "s", "--model", path, "--budget", 6, "--groups-from", "tasks")
    assert code == 2 and "--groups-from tasks needs harness question ids '<task>/<id>'" in err


def test_status_without_groups_or_costs_is_unchanged(capsys, tmp_path, model_npz):
    d = tmp_path / "s"
    run(capsys, "session", "new", d, "--model", model_npz, "--budget", 4, "--batch-size", 2)
    _finish(capsys, d, np.ones(N))
    _, text, _ = run(capsys, "session", "status", d)
    assert text.splitlines()[1].startswith("Estimate ") and len(text.splitlines()) == 2
    assert "Cost" not in text and "Groups" not in text
    st = run(capsys, "session", "status", d, "--json")[1]
    assert st["costs"] is False and st["groups"] is None and st["cost_spent"] is None


def test_ids_of_other_questions_are_ignored_with_a_note(capsys, tmp_path, model_npz):
    path = tmp_path / "c.csv"
    path.write_text("".join(f"{q},{c}\n" for q, c in zip(IDS, COSTS)) + "other/1,5\nother/2,-1\n")
    code, _, err = run(capsys, "session", "new", tmp_path / "s", "--model", model_npz, "--budget", 6,
                       "--costs-from", path)
    assert code == 0
    assert "c.csv: 2 id(s) that are not questions of the session's bank are ignored: 'other/1', 'other/2'" in err
    np.testing.assert_array_equal(EvaluationSession.load(tmp_path / "s").costs, COSTS)
