"""Clusters from the shell and the harness readers (issue 15): ``faqstats session new
--clusters-from``, ``session next`` handing out whole clusters (ids and harness formats), status
lines, ``read_inspect_clusters`` and ``faqstats question-table --cluster-field``; driven in-process."""

import csv
import json
import re

import numpy as np
import pytest

import faqstats as fq
from faqstats.cli import main
from faqstats.integrations import read_inspect_clusters
from faqstats.session import EvaluationSession

N = 30
IDS = [f"t{j % 3}/{j}" for j in range(N)]
CLUSTERS = [f"p{j // 3}" for j in range(N)]  # 10 clusters of 3


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=40, n_questions=N, n_new=1, n_components=2, random_state=0)


@pytest.fixture
def model_npz(tmp_path, bank):
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    return fq.save_factor_model(fm, tmp_path / "fm.npz", question_ids=IDS)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in argv else out), err


@pytest.mark.parametrize("fmt", ["csv", "tsv", "json"])
def test_clusters_from_a_file_equal_the_estimator(capsys, tmp_path, bank, model_npz, fmt):
    path = tmp_path / f"clusters.{fmt}"
    costs = [1.0 + j % 4 for j in range(N)]
    if fmt == "json":
        path.write_text(json.dumps(dict(zip(IDS, CLUSTERS))))
    else:  # one table for both: a header naming the columns
        sep = "\t" if fmt == "tsv" else ","
        path.write_text(sep.join(["question_id", "cost", "cluster"]) + "\n"
                        + "".join(sep.join([q, str(c), k]) + "\n" for q, c, k in zip(IDS, costs, CLUSTERS)))
    costs_file = tmp_path / "costs.json"
    costs_file.write_text(json.dumps(dict(zip(IDS, costs))))
    d = tmp_path / "s"
    code, out, err = run(capsys, "session", "new", d, "--model", model_npz, "--clusters-from", path,
                         "--costs-from", costs_file, "--budget", 4, "--batch-size", 2, "--seed", 3)
    assert code == 0, err
    assert "10 clusters (a draw asks a whole cluster)" in out
    z = bank.new_outcomes[0]
    while True:
        code, nxt, err = run(capsys, "session", "next", d, "--json")
        if nxt["done"]:
            break
        # whole clusters: every id's cluster is complete in the round
        drawn = {CLUSTERS[IDS.index(q)] for q in nxt["ids"]}
        assert sorted(nxt["ids"]) == sorted(q for q, c in zip(IDS, CLUSTERS) if c in drawn)
        first, rest = nxt["ids"][:1], nxt["ids"][1:]
        assert run(capsys, "session", "record", d, first[0], z[IDS.index(first[0])])[0] == 0
        assert run(capsys, "session", "next", d, "--json")[1]["ids"] == rest  # the rest stays pending
        pairs = [x for q in rest for x in (q, z[IDS.index(q)])]
        assert run(capsys, "session", "record", d, *pairs)[0] == 0
    fm = fq.load_factor_model(model_npz)
    est = fq.PAIEstimator(fm, fq.HybridSampler(tau=0.5), budget=4, batch_size=2, random_state=3)
    est.fit(z, clusters=CLUSTERS, costs=costs)
    session = EvaluationSession.load(d)
    assert session.result() == est.result_
    code, out, _ = run(capsys, "session", "status", d)
    assert re.search(r"Clusters: 4 of 10 asked \(12 questions\)", out)
    st = run(capsys, "session", "report", d, "--json")[1]
    assert st["n_clusters"] == 10 and st["n_clusters_asked"] == 4 and st["n_queries"] == 12


def test_next_in_harness_formats_lists_the_whole_cluster(capsys, tmp_path, model_npz):
    path = tmp_path / "c.csv"
    path.write_text("".join(f"{q},{k}\n" for q, k in zip(IDS, CLUSTERS)))  # no header
    d = tmp_path / "s"
    assert run(capsys, "session", "new", d, "--model", model_npz, "--clusters-from", path, "--budget", 3)[0] == 0
    ids = run(capsys, "session", "next", d, "--json")[1]["ids"]
    assert len(ids) == 3
    samples = json.loads(run(capsys, "session", "next", d, "--format", "lm-eval", "--print", "samples")[1])
    assert sorted(f"{t}/{i}" for t, docs in samples.items() for i in docs) == sorted(ids)
    out = run(capsys, "session", "next", d, "--format", "inspect", "--json")[1]
    assert sorted(out["ids"]) == sorted(ids)


@pytest.mark.parametrize("content, name, match", [
    ("question_id,cluster\n" + "".join(f"{q},p\n" for q in IDS[1:]), "c.csv", r"c\.csv has no cluster for 1 of "
     r"the bank's 30 question ids: 't0/0'"),
    ("question_id,cluster\n" + "".join(f"{q},{'' if j == 4 else 'p'}\n" for j, q in enumerate(IDS)), "c.csv",
     r"c\.csv:6: the cluster of question id 't1/4' must be a non-empty string"),
    (json.dumps({q: "one" for q in IDS}), "c.json", "at least 2 clusters"),
    (json.dumps({q: [1] for q in IDS}), "c.json", r"the cluster of question id 't0/0' must be"),
    ("question_id,cluster\n" + "".join(f"{q},p{j}\n" for j, q in enumerate(IDS)) + "t0/0,p9\n", "c.csv",
     r"c\.csv:32: question id 't0/0' appears more than once"),
])
def test_bad_cluster_files_are_refused_by_file_line_and_id(capsys, tmp_path, model_npz, content, name, match):
    path = tmp_path / name
    path.write_text(content)
    code, _, err = run(capsys, "session", "new", tmp_path / "s", "--model", model_npz, "--clusters-from", path,
                       "--budget", 3)
    assert code == 2 and re.search(match, err), err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "s").exists()


def test_clusters_spanning_groups_or_too_large_a_budget_are_refused(capsys, tmp_path, model_npz):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(dict(zip(IDS, CLUSTERS))))
    code, _, err = run(capsys, "session", "new", tmp_path / "s", "--model", model_npz, "--clusters-from", path,
                       "--groups-from", "tasks", "--budget", 3)
    assert code == 2 and "cluster 'p0' spans groups ['t0', 't1', 't2']" in err
    code, _, err = run(capsys, "session", "new", tmp_path / "s", "--model", model_npz, "--clusters-from", path,
                       "--budget", 11)
    assert code == 2 and "exceeds the 10 clusters" in err


def test_clusters_nested_in_groups_from_the_shell(capsys, tmp_path, bank, model_npz):
    path = tmp_path / "q.csv"  # one table: each cluster in one group
    path.write_text("question_id,group,cluster\n" + "".join(
        f"{q},{'early' if j < 12 else 'late'},{k}\n" for j, (q, k) in enumerate(zip(IDS, CLUSTERS))))
    d = tmp_path / "s"
    code, out, err = run(capsys, "session", "new", d, "--model", model_npz, "--clusters-from", path,
                         "--groups-from", path, "--budget", 4, "--batch-size", 2, "--seed", 1)
    assert code == 0, err
    assert "2 groups, estimand micro, 10 clusters" in out
    z = bank.new_outcomes[0]
    while not (nxt := run(capsys, "session", "next", d, "--json")[1])["done"]:
        assert run(capsys, "session", "record", d, *[x for q in nxt["ids"] for x in (q, z[IDS.index(q)])])[0] == 0
    groups = ["early" if j < 12 else "late" for j in range(N)]
    est = fq.PAIEstimator(fq.load_factor_model(model_npz), fq.HybridSampler(tau=0.5), budget=4, batch_size=2,
                          random_state=1).fit(z, clusters=CLUSTERS, groups=groups)
    st = run(capsys, "session", "status", d, "--json")[1]
    assert [row["estimate"] for row in st["groups"]] == est.group_results_.estimate.tolist()
    assert sum(row["n_asked"] for row in st["groups"]) == 4  # cluster draws
    out = run(capsys, "session", "status", d)[1]
    assert "Groups (2)" in out and "Clusters: 4 of 10 asked (12 questions)" in out


# -- inspect: clusters from sample metadata ---------------------------------------------------
def _json_log(directory, samples, task="quiz"):
    directory.mkdir(exist_ok=True)
    (directory / f"{task}.json").write_text(json.dumps(
        {"eval": {"model": "mockllm/a", "task": task, "created": "2025-01-01"}, "samples": samples}))


def test_read_inspect_clusters_and_question_table(tmp_path, capsys, monkeypatch):
    from faqstats.integrations import inspect_ai

    monkeypatch.setattr(inspect_ai, "inspect_reader", lambda reader: None)  # hand-written logs: the built-in reader
    logs = tmp_path / "logs"
    _json_log(logs, [{"id": i, "epoch": 1, "metadata": {"passage": i // 2, "s": "x"},
                      "model_usage": {"m": {"total_tokens": 10 + i}}} for i in range(4)])
    _json_log(logs, [{"id": 0, "epoch": 1, "metadata": {"passage": 0, "s": "y"}}], task="other")
    clusters = read_inspect_clusters(logs, "passage")
    # the same metadata value in two tasks names two clusters
    assert clusters == {"other/0": "other/0", "quiz/0": "quiz/0", "quiz/1": "quiz/0", "quiz/2": "quiz/1",
                        "quiz/3": "quiz/1"}
    out = tmp_path / "t.csv"
    assert main(["question-table", "--inspect", str(logs), "--cluster-field", "passage", "--out", str(out)]) == 0
    assert "3 clusters (metadata.passage)" in capsys.readouterr().out
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["question_id"]: r["cluster"] for r in rows} == clusters
    with pytest.raises(ValueError, match="has no field 'nope'"):
        read_inspect_clusters(logs, "nope")
    _json_log(tmp_path / "bad", [{"id": 1, "epoch": 1, "metadata": {"passage": 1.5}}])
    with pytest.raises(ValueError, match="not a cluster label"):
        read_inspect_clusters(tmp_path / "bad", "passage")
    assert main(["question-table", "--lm-eval", str(logs), "--cluster-field", "passage", "--out", str(out)]) == 2
    assert "--cluster-field reads inspect sample metadata" in capsys.readouterr().err
