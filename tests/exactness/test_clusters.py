"""Clustered designs (``fit(clusters=)``, issue 15): exact statistics by enumeration, and coverage.

On tiny banks with Hypothesis-generated cluster assignments and outcomes (0/1 and graded), every
sampling path of cluster draws is walked (``copy.deepcopy`` of the estimator's own ``ClusterRun``,
as ``tests/exactness/test_unbiasedness.py`` does for questions), with and without replacement and with
batches, and we check to 1e-12:

* the martingale property:  E[phi_t | F_{t-1}] == theta at every node;
* unbiasedness:             E[theta_hat] == theta;
* exact variance estimate:  E[V_hat] == Var(theta_hat), for the plain mean and
  ``martingale_variance`` (as the question-level tests state it) and for the inference the
  estimator reports (finite-population weights over clusters, the census);

then a seeded Monte Carlo on a bank with strongly correlated clusters: the per-question interval
that ignores the clusters under-covers there, the cluster intervals do not.
"""

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import faqstats as fq
from faqstats._engine import ClusterRun, cluster_law
from faqstats._inference import fpc_mean, pai_inference, wald_interval
from faqstats.estimator import martingale_variance
from faqstats.loop_setup import new_loop
from faqstats.run_results import cluster_inference
from faqstats.sampling import PolicyState, within_round
from tests.exactness.test_unbiasedness import TOL, banks, sequential_samplers

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- strategies and the walk
@st.composite
def clustered_banks(draw, graded=None, min_clusters=2):
    """A tiny bank (2-6 questions), its factor model, and cluster ids with at least
    ``min_clusters`` clusters (ids are arbitrary ints, in any order)."""
    graded = draw(st.booleans()) if graded is None else graded
    z, fm = draw(banks(min_n=max(2, min_clusters), max_n=6, graded=graded))
    n = z.size
    ids = draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n).filter(
        lambda c: len(set(c)) >= min_clusters))
    labels = draw(st.permutations(range(10, 10 + n)))  # arbitrary, unsorted ids
    return z, fm, np.array([labels[c] for c in ids])


def enumerate_clusters(estimator, z, clusters, costs=None):
    """Leaves ``(probability, increments, (estimate, variance) the estimator reports)`` of every
    path of cluster draws; asserts the
    martingale property at every node. Rounds of ``batch_size`` draws share the round's law
    (successive draws without replacement renormalise it), the predictor learns between
    rounds, as in ``PAIEstimator.fit``."""
    run = new_loop(estimator, z.size, clusters=clusters, costs=costs).run
    assert isinstance(run, ClusterRun)
    theta = z.mean()
    leaves = []

    def walk(run, prob, phis):
        if len(phis) == run.budget:
            leaves.append((prob, np.array(phis), cluster_inference(estimator, run, run.table())[:2]))
            return
        q_round = run.law()
        assert q_round.shape == (run.n_clusters,)
        assert abs(q_round.sum() - 1.0) < 1e-12 and (q_round >= 0).all() and (q_round[~run.available] == 0).all()
        draw(run, prob, phis, q_round, min(estimator.batch_size, run.budget - len(phis)), [])

    def draw(run, prob, phis, q_round, left, drawn):
        if left == 0:
            run.end_round(drawn, [z[run.members[c]] for c in drawn])
            walk(run, prob, phis)
            return
        q = within_round(q_round, run.available, run.replace)
        conditional_mean = 0.0
        for c in np.flatnonzero(q > 0):
            child = copy.deepcopy(run)
            phi = child.record(int(c), float(q[c]), z[child.members[c]])
            conditional_mean += q[c] * phi
            draw(child, prob * q[c], phis + [phi], q_round, left - 1, drawn + [int(c)])
        assert abs(conditional_mean - theta) < TOL, (conditional_mean, theta)  # E[phi_t | F_{t-1}] = theta

    walk(run, 1.0, [])
    return leaves


def moments(leaves, inference):
    """``(E[estimate], Var(estimate), E[variance estimate])`` for ``inference(phis) -> (est, var)``."""
    p = np.array([leaf[0] for leaf in leaves])
    assert abs(p.sum() - 1.0) < 1e-12
    ev = np.array([inference(leaf) for leaf in leaves])
    mean = p @ ev[:, 0]
    return mean, p @ (ev[:, 0] - mean) ** 2, p @ ev[:, 1]


def plain(leaf):
    phis = leaf[1]
    return phis.mean(), martingale_variance(phis)


def assert_exact(estimator, z, clusters, costs=None):
    leaves = enumerate_clusters(estimator, z, clusters, costs)
    mean, var, e_vhat = moments(leaves, plain)
    assert abs(mean - z.mean()) < TOL
    assert abs(e_vhat - var) < TOL
    # the inference the estimator reports: finite-population weights over clusters (or the
    # census) without replacement, equal weights with, the step weights when given
    n_clusters = np.unique(clusters).size
    reported = None if estimator.sampler.replace else n_clusters
    for _, phis, (est, v) in leaves:
        assert (est, v) == pai_inference(phis, weights=estimator.step_weights, n_questions=reported)[:2]
    mean, var, e_vhat = moments(leaves, lambda leaf: leaf[2])
    assert abs(mean - z.mean()) < TOL
    assert abs(e_vhat - var) < TOL
    return leaves


# ---------------------------------------------------------------- exact enumeration
@SETTINGS
@given(data=st.data(), replace=st.booleans())
def test_cluster_design_unbiased_and_variance_exact(data, replace):
    """Every sequential policy, batches of 1-3, 0/1 and graded outcomes: E[theta_hat] = theta and
    E[V_hat] = Var(theta_hat) exactly, with and without replacement."""
    z, fm, clusters = data.draw(clustered_banks())
    n_clusters = np.unique(clusters).size
    sampler = data.draw(sequential_samplers(replace))
    budget = data.draw(st.integers(2, 3 if replace else min(3, n_clusters)))
    est = fq.PAIEstimator(fm, sampler, budget=budget, batch_size=data.draw(st.integers(1, 3)),
                          cluster_score=data.draw(st.sampled_from(["root-sum-square", "sum"])))
    assert_exact(est, z, clusters)


@settings(SETTINGS, max_examples=40)
@given(data=st.data(), replace=st.booleans())
def test_cluster_design_exact_with_costs_and_step_weights(data, replace):
    """A cluster's cost (the sum of its questions') reweights the law, and fixed step weights
    reweight the increments: both leave the estimate and its variance estimate exact."""
    z, fm, clusters = data.draw(clustered_banks(min_clusters=3))
    n_clusters = np.unique(clusters).size
    costs = np.array(data.draw(st.lists(st.sampled_from([0.5, 1.0, 3.0, 10.0]), min_size=z.size,
                                        max_size=z.size)))
    w = np.array(data.draw(st.lists(st.floats(1.0, 1.9), min_size=3, max_size=3)))
    sampler = fq.HybridSampler(tau=data.draw(st.floats(0.05, 0.95)), replace=replace)
    budget = 3 if replace else min(3, n_clusters)
    est = fq.PAIEstimator(fm, sampler, budget=budget, step_weights=w)
    leaves = assert_exact(est, z, clusters, costs)
    from faqstats.estimator import weighted_martingale  # the weighted identities of "Weighted increments"

    mean, var, e_vhat = moments(leaves, lambda leaf: weighted_martingale(leaf[1], w)[:2])
    assert abs(mean - z.mean()) < TOL and abs(e_vhat - var) < TOL


def test_census_of_clusters_is_exact():
    """Without replacement, drawing every cluster gives theta on every path (variance 0)."""
    V = np.array([[1.0], [-0.5], [0.3], [0.8], [-1.2]])
    fm = fq.LogisticFactorModel.from_factors(V, np.zeros(1), np.eye(1))
    z = np.array([1.0, 0.0, 1.0, 0.25, 1.0])
    clusters = np.array([2, 0, 2, 1, 0])
    est = fq.PAIEstimator(fm, fq.HybridSampler(tau=0.3), budget=3)
    for _, phis, _ in enumerate_clusters(est, z, clusters):
        assert abs(phis[-1] - z.mean()) < TOL
    fitted = est.set_params(random_state=1).fit(z, clusters=clusters)
    assert fitted.result_.variance_method == "census (clusters)"
    assert fitted.estimate_ == pytest.approx(z.mean(), abs=TOL) and fitted.std_error_ == 0.0
    assert fitted.n_queries_ == 5


@settings(SETTINGS, max_examples=30)
@given(z=st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=8, max_size=8), budget=st.integers(2, 4))
def test_cluster_sample_mean_exact(z, budget):
    """No predictor, uniform draws of 4 equal clusters without replacement: the reported cluster
    sample mean and its FPC variance are exactly unbiased (the census included)."""
    z = np.array(z)
    est = fq.PAIEstimator(None, fq.UniformSampler(), budget=budget)
    leaves = enumerate_clusters(est, z, np.array([3, 1, 3, 2, 0, 0, 1, 2]))
    mean, var, e_vhat = moments(leaves, lambda leaf: leaf[2])
    assert abs(mean - z.mean()) < TOL and abs(e_vhat - var) < TOL


def test_enumeration_detects_a_wrong_cluster_increment(monkeypatch):
    """The checks can fail. Dividing the cluster's residual by the probability of one of its
    questions (q_t(c) / m_c) is biased, and so is an increment that reads only the first answer
    of the cluster (the others replaced by their predictions): the walk sees it."""
    V = np.array([[1.0], [-0.5], [0.3]])
    fm = fq.LogisticFactorModel.from_factors(V, np.zeros(1), np.eye(1))
    z, clusters = np.array([1.0, 1.0, 0.0]), np.array([0, 0, 1])
    est = fq.PAIEstimator(fm, fq.HybridSampler(tau=0.5, replace=True), budget=2)
    run = new_loop(est, 3, clusters=clusters).run
    q, base, P = run.law(), run.base(), run.cluster_predictions()
    wrong = sum(q[c] * (base + (z[run.members[c]].sum() - P[c]) / (q[c] / run.sizes[c])) / 3 for c in range(2))
    assert abs(wrong - z.mean()) > 1e-3

    class FirstAnswerOnly(ClusterRun):
        def record(self, question, probability, outcome):
            outcome = np.asarray(outcome, dtype=float).copy()
            outcome[1:] = self.predictions[self.members[int(question)][1:]]
            return super().record(question, probability, outcome)

    monkeypatch.setattr("faqstats.loop_setup.ClusterRun", FirstAnswerOnly)
    with pytest.raises(AssertionError):
        enumerate_clusters(est, z, clusters)


def test_singleton_clusters_are_the_question_design():
    """Each question its own cluster (ids in question order): the same law, draws and estimate
    as without clusters."""
    ids = 7 * np.arange(60) - 100
    bank = fq.make_synthetic_bank(n_models=40, n_questions=60, n_components=2, random_state=3)
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    z = bank.new_outcomes[0]
    for replace in (False, True):
        kw = dict(budget=15, batch_size=2, random_state=4)
        plain_ = fq.PAIEstimator(fm, fq.HybridSampler(replace=replace), **kw).fit(z)
        clustered = fq.PAIEstimator(fm, fq.HybridSampler(replace=replace), **kw).fit(z, clusters=ids)
        assert clustered.estimate_ == pytest.approx(plain_.estimate_, rel=1e-10)
        assert clustered.std_error_ == pytest.approx(plain_.std_error_, rel=1e-8)
        np.testing.assert_array_equal(clustered.cluster_labels_[clustered.queries_["cluster"]],
                                      ids[plain_.queries_["question"]])


# ---------------------------------------------------------------- the law over clusters
def test_cluster_law_floor_and_scores():
    """The floor is the question floor summed over the cluster; the scores are combined as documented."""
    state = PolicyState(predictions=np.array([0.5, 0.5, 0.9, 0.1]), available=np.array([True, True, True, False]),
                        step=2, budget=3)
    codes, sizes = np.array([0, 0, 1, 2]), np.array([2, 1, 1])
    available = np.array([True, True, False])
    s = state.oracle_scores()
    q = cluster_law(fq.NeymanSampler(tau=0.4), state, codes, sizes, available)
    S = np.array([np.hypot(s[0], s[1]), s[2]])
    np.testing.assert_allclose(q[:2], 0.4 * np.array([2, 1]) / 3 + 0.6 * S / S.sum(), rtol=1e-12)
    assert q[2] == 0
    q = cluster_law(fq.NeymanSampler(tau=0.4), state, codes, sizes, available, score="sum")
    S = np.array([s[0] + s[1], s[2]])
    np.testing.assert_allclose(q[:2], 0.4 * np.array([2, 1]) / 3 + 0.6 * S / S.sum(), rtol=1e-12)
    q = cluster_law(fq.NeymanSampler(tau=0.4), state, codes, sizes, available, root_costs=np.array([2.0, 1.0, 1.0]))
    S = np.array([np.hypot(s[0], s[1]) / 2, s[2]])
    np.testing.assert_allclose(q[:2], 0.4 * np.array([2, 1]) / 3 + 0.6 * S / S.sum(), rtol=1e-12)
    np.testing.assert_allclose(cluster_law(fq.UniformSampler(), state, codes, sizes, available), [2 / 3, 1 / 3, 0])


class Fixed(fq.Sampler):
    """A policy defined by its law, not its scores."""

    def probabilities(self, state):
        q = np.where(state.available, np.arange(1.0, state.available.size + 1), 0.0)
        return q / q.sum()


def test_probability_policies_draw_a_question_and_ask_its_cluster():
    state = PolicyState(predictions=np.full(4, 0.5), available=np.ones(4, bool), step=1, budget=2)
    q = cluster_law(Fixed(), state, np.array([1, 0, 1, 0]), np.array([2, 2]), np.ones(2, bool))
    np.testing.assert_allclose(q, [6 / 10, 4 / 10])
    z, fm, clusters = np.array([1.0, 0.0, 1.0, 1.0]), fq.LogisticFactorModel.from_factors(
        np.array([[1.0], [-1.0], [0.5], [0.2]]), np.zeros(1), np.eye(1)), np.array([1, 0, 1, 2])
    for replace in (False, True):
        assert_exact(fq.PAIEstimator(fm, Fixed(replace=replace), budget=2, batch_size=2), z, clusters)
    with pytest.raises(ValueError, match="overrides probabilities"):
        fq.PAIEstimator(fm, Fixed(tau=0.5), budget=2).fit(z, clusters=clusters, costs=np.ones(4))


# ---------------------------------------------------------------- the estimator
def test_fit_with_clusters_reads_every_question_and_reports_them():
    bank = fq.make_synthetic_bank(n_models=40, n_questions=90, n_components=2, random_state=0)
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    z = bank.new_outcomes[1]
    clusters = np.repeat([f"passage-{i:02d}" for i in range(30)], 3)
    asked = []

    def oracle(ids):
        asked.append(ids.tolist())
        return z[ids]

    est = fq.PAIEstimator(fm, budget=8, batch_size=2, confidence_sequence=True, random_state=0)
    est.fit(oracle, clusters=clusters)
    q = est.queries_
    assert len(q) == 8 and len(asked) == 4 and all(len(a) == 6 for a in asked)  # one call per round
    assert est.n_queries_ == 24 == q["size"].sum()
    for row, ids in zip(q, [ids[i:i + 3] for ids in asked for i in (0, 3)]):
        assert (clusters[ids] == est.cluster_labels_[row["cluster"]]).all()
        assert row["outcome"] == z[ids].sum()
    assert est.result_.method == "pai-cluster" and "30 clusters" in est.result_.design
    assert est.confidence_sequence_.shape == (4, 3)
    # the array path asks the same questions
    again = fq.PAIEstimator(fm, budget=8, batch_size=2, confidence_sequence=True, random_state=0)
    again.fit(z, clusters=clusters)
    assert again.estimate_ == est.estimate_


def test_clusters_with_the_loop_options():
    """Stopping on the confidence sequence's width, predictions on a schedule in float32, and
    the other policies run over clusters."""
    bank = fq.make_synthetic_bank(n_models=60, n_questions=400, n_components=2, random_state=0)
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    z, clusters = bank.new_outcomes[0], np.arange(400) // 4
    est = fq.PAIEstimator(fm, budget=100, batch_size=4, stop_when_width=0.2, random_state=0).fit(z, clusters=clusters)
    low, high = est.result_.anytime_interval
    assert est.stop_reason_ == "width" and high - low <= 0.2 and len(est.queries_) < 100
    for kwargs in ({"predict_every": 3, "dtype": "float32"}, {"sampler": fq.VarianceReductionSampler()},
                   {"sampler": fq.ActiveLearningSampler(replace=True)}):
        est = fq.PAIEstimator(fm, budget=20, random_state=0, **kwargs).fit(z, clusters=clusters)
        low, high = est.conf_int()
        assert len(est.queries_) == 20 and low < est.estimate_ < high and abs(est.estimate_ - z.mean()) < 0.15


def test_cluster_sample_mean_and_costs():
    """No predictor, uniform draws of equal clusters without replacement: the cluster sample mean
    (C / N) mean Y_c with the FPC variance of the cluster totals; costs per cluster."""
    rng = np.random.default_rng(0)
    z = (rng.random(40) < 0.6).astype(float)
    clusters = np.arange(40) // 4
    est = fq.PAIEstimator(None, fq.UniformSampler(), budget=5, random_state=0).fit(z, clusters=clusters)
    Y = np.bincount(clusters, z)[est.queries_["cluster"]]
    mean, var = fpc_mean(Y, 10)
    assert est.result_.method == "cluster_sample_mean"
    assert est.estimate_ == pytest.approx(mean / 4) and est.std_error_ == pytest.approx(np.sqrt(var) / 4)
    costs = rng.uniform(1, 3, 40)
    est = fq.PAIEstimator(None, fq.UniformSampler(), budget_cost=20.0, random_state=0).fit(z, clusters=clusters,
                                                                                        costs=costs)
    per_cluster = np.bincount(clusters, costs)
    assert est.cost_per_draw_ == pytest.approx(per_cluster.mean())
    assert len(est.queries_) == int(20.0 // per_cluster.mean())
    assert est.cost_spent_ == pytest.approx(per_cluster[est.queries_["cluster"]].sum())
    # unequal clusters: the Des Raj increments (size-proportional uniform law), not the sample mean
    est = fq.PAIEstimator(None, fq.UniformSampler(), budget=5, random_state=0).fit(z, clusters=np.arange(40) // 6)
    assert est.result_.method == "pai-cluster"


@pytest.mark.parametrize(
    "kwargs, fit_kwargs, match",
    [
        ({}, {"clusters": np.arange(5)}, "one cluster id per question"),
        ({}, {"clusters": np.r_[np.arange(9), np.nan]}, "NaN"),
        ({}, {"clusters": [None] + list(range(9))}, "None"),
        ({}, {"clusters": np.array([1, "a"] * 5, dtype=object)}, "sortable"),
        ({}, {"clusters": np.zeros(10)}, "at least 2 clusters"),
        ({"budget": 6}, {"clusters": np.arange(10) // 2}, "exceeds the 5 clusters"),
        ({}, {"clusters": np.arange(10) // 2, "groups": np.arange(10) % 2}, r"cluster 0 spans groups \[0, 1\]"),
        ({"min_group_share": 0.2}, {"clusters": np.arange(10) // 2, "groups": np.arange(10) // 6},
         "min_group_share are not available with clusters"),
        ({"estimand": "macro"}, {"clusters": np.arange(10) // 2}, "estimand='micro'"),
        ({"stratify": True}, {"clusters": np.arange(10) // 2}, "stratify"),
        ({"variance": "paper", "sampler": fq.HybridSampler(replace=True)}, {"clusters": np.arange(10) // 2},
         "variance='martingale'"),
        ({"sampler": fq.BernoulliAIPW()}, {"clusters": np.arange(10) // 2}, "sequential Sampler"),
        ({"budget_cost": 5.0}, {"clusters": np.arange(10) // 2}, "budget_cost needs costs"),
    ],
)
def test_clusters_bad_input(kwargs, fit_kwargs, match):
    bank = fq.make_synthetic_bank(n_models=20, n_questions=10, n_components=2, random_state=0)
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    est = fq.PAIEstimator(fm, **{"budget": 3, **kwargs})
    with pytest.raises(ValueError, match=match):
        est.fit(bank.new_outcomes[0], **fit_kwargs)


# ---------------------------------------------------------------- coverage under correlated clusters
def correlated_cluster_bank(n_models=160, n_clusters=40, size=8, spread=2.5, seed=0):
    """Outcomes ``(n_models, N)`` with a model-specific effect per cluster (``spread`` on the logit
    scale: the questions of a cluster move together for every model, beyond what the factors
    share), the cluster ids, and the planted factor model (two factors and an offset) without
    the cluster effects, from the first 120 models."""
    rng = np.random.default_rng(seed)
    n = n_clusters * size
    V = np.c_[rng.normal(0, 1, (n, 2)), rng.normal(0, 0.5, n)]  # the last column: the question's offset
    U = np.c_[rng.normal(0, 1, (n_models, 2)), np.ones(n_models)]
    b = np.repeat(rng.normal(0, spread, (n_models, n_clusters)), size, axis=1)
    outcomes = (rng.random((n_models, n)) < 1 / (1 + np.exp(-(U @ V.T + b)))).astype(float)
    return outcomes, np.arange(n) // size, fq.LogisticFactorModel.from_factors(V, model_factors=U[:120])


@pytest.mark.slow
def test_cluster_interval_covers_where_the_per_question_interval_does_not():
    """Seeded Monte Carlo (40 models x 6 seeds = 240 runs of 8 clusters of 8 out of 40): the
    cluster intervals (uniform cluster sample mean, and PAI with the planted factor model, blind
    to the cluster effects) cover at least 0.90; the per-question interval on the same uniform
    draws (the 64 answers read as a simple random sample of questions) covers at most 0.85. The
    standard error of a coverage near 0.95 over 240 runs is 0.014, so 0.90 is more than three
    below nominal; the naive interval covers about 0.70 here (measured naive / cluster mean / PAI:
    0.69 / 0.95 / 0.95; 0.72 / 0.97 / 0.95 on the bank of seed 1), its standard error about 0.03."""
    outcomes, clusters, fm = correlated_cluster_bank()
    hits = {"naive": [], "cluster mean": [], "pai-cluster": []}
    for z in outcomes[120:]:
        theta = z.mean()
        for seed in range(6):
            uniform = fq.PAIEstimator(None, fq.UniformSampler(), budget=8, random_state=seed).fit(z, clusters=clusters)
            low, high = uniform.conf_int()
            hits["cluster mean"].append(low <= theta <= high)
            asked = np.isin(clusters, uniform.queries_["cluster"])
            mean, var = fpc_mean(z[asked], z.size)  # ignoring the clusters
            low, high = wald_interval(mean, np.sqrt(var), df=asked.sum() - 1)
            hits["naive"].append(low <= theta <= high)
            pai = fq.PAIEstimator(fm, fq.HybridSampler(), budget=8, random_state=seed).fit(z, clusters=clusters)
            low, high = pai.conf_int()
            hits["pai-cluster"].append(low <= theta <= high)
    coverage = {k: float(np.mean(v)) for k, v in hits.items()}
    assert len(hits["naive"]) == 240
    assert coverage["naive"] <= 0.85, coverage
    assert coverage["cluster mean"] >= 0.90 and coverage["pai-cluster"] >= 0.90, coverage


# ---------------------------------------------------------------- clusters nested in groups
def enumerate_cluster_groups(estimator, z, clusters, groups):
    """Leaves ``(probability, (n, G) group increments)`` of every path of cluster draws with
    ``groups``; asserts E[group increment | F_{t-1}] = the group's accuracy at every node."""
    run = new_loop(estimator, z.size, clusters=clusters, groups=groups).run
    codes = run.group_codes
    thetas = np.bincount(codes, z) / np.bincount(codes)
    leaves = []

    def walk(run, prob):
        if run.step > run.budget:
            leaves.append((prob, np.array(run.group_rows)))
            return
        q = run.law()
        conditional_mean = np.zeros(thetas.size)
        for c in np.flatnonzero(q > 0):
            child = copy.deepcopy(run)
            child.record(int(c), float(q[c]), z[child.members[c]])
            conditional_mean += q[c] * child.group_rows[-1]
            child.end_round([int(c)], [z[child.members[c]]])
            walk(child, prob * q[c])
        np.testing.assert_allclose(conditional_mean, thetas, atol=TOL, rtol=0)

    walk(run, 1.0)
    return leaves, thetas


@settings(SETTINGS, max_examples=80)
@given(data=st.data(), replace=st.booleans())
def test_groups_of_clusters_unbiased_and_variance_exact(data, replace):
    """Clusters nested in groups (``fit(groups=, clusters=)``): every group's increments are a
    martingale with mean the group's accuracy, so its estimate is exactly unbiased and the
    variance estimate the estimator reports (finite-population weights over clusters, the
    census) is exactly unbiased for the estimate's variance."""
    z, fm, clusters = data.draw(clustered_banks())
    labels = np.unique(clusters)
    of_cluster = dict(zip(labels.tolist(), data.draw(st.lists(st.sampled_from(["x", "y"]), min_size=labels.size,
                                                              max_size=labels.size))))
    groups = np.array([of_cluster[c] for c in clusters.tolist()])
    sampler = data.draw(sequential_samplers(replace))
    budget = data.draw(st.integers(2, 3 if replace else min(3, labels.size)))
    est = fq.PAIEstimator(fm, sampler, budget=budget)
    leaves, thetas = enumerate_cluster_groups(est, z, clusters, groups)
    p = np.array([leaf[0] for leaf in leaves])
    reported = None if replace else labels.size
    for g in range(thetas.size):
        ev = np.array([pai_inference(rows[:, g], n_questions=reported)[:2] for _, rows in leaves])
        mean = p @ ev[:, 0]
        assert abs(mean - thetas[g]) < TOL
        assert abs(p @ ev[:, 1] - p @ (ev[:, 0] - mean) ** 2) < TOL


def test_groups_of_clusters_in_fit():
    """``group_results_`` of a clustered fit: the inference of each group's increments, cluster
    draws per group, and a clear refusal of a cluster spanning two groups."""
    bank = fq.make_synthetic_bank(n_models=40, n_questions=40, n_new=1, n_components=2, random_state=0)
    fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    z, clusters = bank.new_outcomes[0], np.arange(40) // 4
    groups = np.where(clusters < 4, "a", "b")
    est = fq.PAIEstimator(fm, budget=6, batch_size=2, random_state=0).fit(z, clusters=clusters, groups=groups)
    res = est.group_results_
    assert res.labels.tolist() == ["a", "b"] and res.n_questions.tolist() == [16, 24]
    assert res.n_units.tolist() == [4, 6] and res.n_asked.sum() == 6
    drawn = est.queries_["cluster"]
    assert res.n_asked.tolist() == [int(np.sum(drawn < 4)), int(np.sum(drawn >= 4))]
    assert est.result_.method == "pai-cluster"  # the headline is unchanged by the groups
    plain = fq.PAIEstimator(fm, budget=6, batch_size=2, random_state=0).fit(z, clusters=clusters)
    assert plain.result_ == est.result_ and plain.group_results_ is None
    # a census of the clusters is exact for every group too
    census = fq.PAIEstimator(fm, budget=10, random_state=1).fit(z, clusters=clusters, groups=groups)
    np.testing.assert_allclose(census.group_results_.estimate, [z[:16].mean(), z[16:].mean()], atol=TOL)
    np.testing.assert_array_equal(census.group_results_.std_error, 0.0)
    with pytest.raises(ValueError, match=r"cluster 0 spans groups \['a', 'b'\]: with clusters every cluster"):
        fq.PAIEstimator(fm, budget=3).fit(z, clusters=clusters, groups=np.where(np.arange(40) % 2, "a", "b"))
    with pytest.raises(ValueError, match="use estimand='micro'"):
        fq.PAIEstimator(fm, budget=3, estimand="macro").fit(z, clusters=clusters, groups=groups)
