"""EvaluationSession with clusters (issue 15): a draw asks a whole cluster, answers may arrive
piecemeal, the clusters are stored (and checksummed) with the session and restored on load, and
the results equal one uninterrupted ``PAIEstimator(...).fit(z, clusters=)`` with the same seed.

A small planted bank (80 questions, 20 clusters of 4 and some of other sizes): a few seconds.
"""

import json

import numpy as np
import pytest

import faqstats as fq
from faqstats.io import session_checksums
from faqstats.session import EvaluationSession

N = 80


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=N, n_new=2, n_components=3, random_state=1)


@pytest.fixture(scope="module")
def ids():
    return [f"q{j}" for j in range(N)]


@pytest.fixture(scope="module")
def clusters():
    # unequal sizes (1 to 7 questions), ids unsorted strings, questions of a cluster not adjacent
    rng = np.random.default_rng(5)
    return np.array([f"p{c}" for c in rng.integers(0, 18, N)])


def _answer(z, qids):
    return [float(z[int(q[1:])]) for q in qids]


def _drive_reloading(directory, z, split=True):
    """Answer every round from ``z``, loading the session from disk before each round and (with
    ``split``) recording each round's answers in two halves, reloading in between."""
    while True:
        s = EvaluationSession.load(directory)
        if s.done:
            return s
        qids, _ = s.next_questions()
        half = len(qids) // 2 if split else len(qids)
        s.record(qids[:half], _answer(z, qids[:half]))
        if half < len(qids):
            s = EvaluationSession.load(directory)
            assert s.pending.ids == qids[half:]
            s.record(qids[half:], _answer(z, qids[half:]))


OPTIONS = {
    "without-replacement": {},
    "with-replacement": {"sampler": "replace"},
    "costs": {"costs": True},
    "cost-budget": {"costs": True, "budget_cost": 120.0},
    "cost-budget-replace": {"costs": True, "budget_cost": 120.0, "sampler": "replace"},
    "confidence-sequence": {"confidence_sequence": True},
    "groups": {"groups": True},
    "groups-costs-replace": {"groups": True, "costs": True, "sampler": "replace"},
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_session_with_clusters_resumes_to_the_estimators_results(tmp_path, bank, fm, ids, clusters, name):
    options = dict(OPTIONS[name])
    sampler = fq.HybridSampler(tau=0.3, replace=options.pop("sampler", None) == "replace")
    costs = np.random.default_rng(3).uniform(1.0, 20.0, N).round(2) if options.pop("costs", False) else None
    z = bank.new_outcomes[0]
    cs = options.pop("confidence_sequence", False)
    # groups: each cluster in one group (clusters p0 .. p8 early, the others late)
    groups = np.where(np.isin(clusters, [f"p{c}" for c in range(9)]), "early", "late") if options.pop(
        "groups", False) else None
    est = fq.PAIEstimator(fm, sampler, budget=7, batch_size=3, random_state=7,
                          confidence_sequence=0.05 if cs else False, **options)
    est.fit(z, clusters=clusters, costs=costs, groups=groups)
    assert est.result_.method == "pai-cluster"
    # the session takes the clusters as a mapping {question id: cluster id}, in any order
    cluster_map = dict(reversed(list(zip(ids, clusters.tolist()))))
    cost_map = None if costs is None else dict(zip(ids, costs.tolist()))
    EvaluationSession.create(tmp_path / "s", fm, ids, sampler=sampler, budget=7, batch_size=3, random_state=7,
                             clusters=cluster_map, costs=cost_map, confidence_sequence=cs, groups=groups, **options)
    s = _drive_reloading(tmp_path / "s", z)
    assert s.result() == est.result_
    np.testing.assert_array_equal(s.queries(), est.queries_)
    assert s.n_draws == len(est.queries_)
    assert s.n_queries == est.result_.n_queries
    assert s.n_clusters == np.unique(clusters).size
    assert s.n_clusters_asked == np.unique(est.queries_["cluster"]).size
    np.testing.assert_array_equal(s.clusters, clusters)
    if costs is not None:
        np.testing.assert_array_equal(s.costs, costs)
        assert s.status()["cost_spent"] == pytest.approx(est.cost_spent_)
    if cs:
        np.testing.assert_allclose(s.confidence_sequence(), est.confidence_sequence_)
    if groups is not None:
        for name in ("labels", "estimate", "std_error", "df", "n_questions", "n_asked", "n_units"):
            np.testing.assert_array_equal(getattr(s.group_results(), name), getattr(est.group_results_, name))
        assert [row["estimate"] for row in s.group_table()] == est.group_results_.estimate.tolist()


def test_next_questions_hands_out_whole_clusters(fm, ids, clusters, bank):
    z = bank.new_outcomes[1]
    s = EvaluationSession(fm, ids, budget=6, batch_size=2, random_state=0, clusters=clusters)
    qids, probabilities = s.next_questions()
    drawn = [d.question for d in s._loop.draws]
    labels = np.unique(clusters)
    # every question of the two drawn clusters, cluster by cluster, each in question order
    expected = [ids[j] for c in drawn for j in np.flatnonzero(clusters == labels[c])]
    assert qids == list(dict.fromkeys(expected))
    assert set(probabilities) <= {d.probability for d in s._loop.draws}
    # part of the first cluster: the draw is not recorded yet, the rest stays pending
    first = [ids[j] for j in np.flatnonzero(clusters == labels[drawn[0]])]
    s.record(first[:-1], _answer(z, first[:-1]))
    assert s.n_draws == 0 and s.n_answers == len(first) - 1
    assert s.pending.ids == qids[len(first) - 1:]
    assert s.next_questions().ids == qids[len(first) - 1:]  # no new round while one is pending
    s.record(first[-1:], _answer(z, first[-1:]))
    assert s.n_draws == 1 and s.n_queries == len(first)
    status = s.status()
    assert status["n_clusters"] == labels.size and status["n_clusters_asked"] == 1
    with pytest.raises(ValueError, match="not pending"):
        s.record([next(q for q in ids if q not in qids)], [1.0])


def test_sessions_without_clusters_store_no_cluster_field(tmp_path, fm, ids):
    s = EvaluationSession.create(tmp_path, fm, ids, budget=4, random_state=0)
    assert "clusters" not in json.loads((tmp_path / "session.json").read_text())["config"]
    assert s.clusters is None and s.n_clusters is None and s.status()["n_clusters_asked"] is None


def test_clusters_stored_checksummed_and_validated(tmp_path, fm, ids, clusters):
    EvaluationSession.create(tmp_path / "s", fm, ids, budget=5, random_state=0, clusters=clusters.tolist())
    state_path = tmp_path / "s" / "session.json"
    state = json.loads(state_path.read_text())
    assert state["config"]["clusters"] == clusters.tolist()
    assert EvaluationSession.load(tmp_path / "s").clusters.tolist() == clusters.tolist()
    forged = json.loads(json.dumps(state))
    forged["config"]["clusters"][0] = "elsewhere"  # a hand edit is detected
    state_path.write_text(json.dumps(forged))
    with pytest.raises(ValueError, match="settings differ from the checksums"):
        EvaluationSession.load(tmp_path / "s")
    # a forger who rewrites the checksums too: other clusters change the law, the replayed draw does not match
    state_path.write_text(json.dumps(state))
    EvaluationSession.load(tmp_path / "s").next_questions()
    forged = json.loads(state_path.read_text())
    forged["config"]["clusters"] = [f"x{j % 18:02d}" for j in range(N)]  # 18 clusters, others
    forged["checksums"] = session_checksums(forged)
    state_path.write_text(json.dumps(forged))
    with pytest.raises(ValueError, match=r"cluster \d+ was drawn with probability .* does not match the factor model"):
        EvaluationSession.load(tmp_path / "s")
    with pytest.raises(ValueError, match="no entry for 1 of the bank's 80 question ids: 'q0'"):
        EvaluationSession(fm, ids, clusters={q: "a" if j % 2 else "b" for j, q in enumerate(ids) if j})
    with pytest.raises(ValueError, match="question id 'q3' has cluster None"):
        EvaluationSession(fm, ids, clusters=[None if j == 3 else j // 4 for j in range(N)])
    with pytest.raises(ValueError, match="at least 2 clusters"):
        EvaluationSession(fm, ids, clusters=["one"] * N)
    with pytest.raises(ValueError, match="spans groups"):
        EvaluationSession(fm, ids, clusters=clusters, groups=[j % 2 for j in range(N)])
    with pytest.raises(ValueError, match="exceeds the 18 clusters"):
        EvaluationSession(fm, ids, budget=19, clusters=clusters)
