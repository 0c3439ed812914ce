"""Paired comparisons (``faqstats.compare``): exact statistics by enumeration, a seeded
Monte Carlo of coverage and width against two independent evaluations, and a slow
real-data check on openllm_v1.

Enumeration walks every sampling path of the estimator's own :class:`PairedRun` on banks
of N <= 4 questions and budgets of 2-3 questions (batches of 1-3), for both designs, with
and without replacement, binary and graded outcomes, and checks to 1e-12:
E[d_t | F_{t-1}] = delta at every node (also each model's own increment), E[delta_hat] =
delta and E[V_hat] = Var(delta_hat).
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

import faqstats as fq
from faqstats.compare import ComparisonResult, PairedPAIEstimator, compare
from faqstats.estimator import martingale_variance, within_round

TOL = 1e-12
DATA_FILE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "openllm_v1.npz"


# ---------------------------------------------------------------- strategies
#: 0/1, rubric grades and fractions to 9 decimals (see ``test_unbiasedness.graded_outcomes``)
outcome_values = st.one_of(
    st.integers(0, 1).map(float), st.sampled_from([0.25, 0.5, 0.75]), st.floats(0, 1).map(lambda x: round(x, 9))
)


@st.composite
def paired_banks(draw, min_n=1, max_n=4):
    n = draw(st.integers(min_n, max_n))
    z_a = np.array(draw(st.lists(outcome_values, min_size=n, max_size=n)))
    z_b = np.array(draw(st.lists(outcome_values, min_size=n, max_size=n)))
    k = draw(st.integers(1, 2))
    coord = st.floats(-3, 3, allow_nan=False, allow_subnormal=False)
    V = np.array(draw(st.lists(st.lists(coord, min_size=k, max_size=k), min_size=n, max_size=n)))
    mean = np.array(draw(st.lists(st.floats(-2, 2), min_size=k, max_size=k)))
    A = np.array(draw(st.lists(st.lists(st.floats(-1, 1), min_size=k, max_size=k), min_size=k, max_size=k)))
    fm = fq.LogisticFactorModel.from_factors(V, mean, A @ A.T + 0.1 * np.eye(k))
    return z_a, z_b, fm


def enumerate_paired(est, z_a, z_b, reference):
    """Leaves ``(probability, increments)``; asserts the martingale property at every node."""
    run = est.new_run(z_a.size, reference=z_b if reference else None)
    delta, theta_a, theta_b = z_a.mean() - z_b.mean(), z_a.mean(), z_b.mean()
    leaves = []

    def walk(run, prob, ds):
        if len(ds) == est.budget:
            leaves.append((prob, np.array(ds)))
            return
        q_round = run.begin_round()
        assert abs(q_round.sum() - 1) < 1e-12 and (q_round >= 0).all()
        draw(run, prob, ds, q_round, min(est.batch_size, est.budget - len(ds)), [])

    def draw(run, prob, ds, q_round, left, drawn):
        if left == 0:
            run.end_round(drawn, z_a[drawn], z_b[drawn])
            walk(run, prob, ds)
            return
        q = within_round(q_round, run.available, run.replace)
        m_d = m_a = m_b = 0.0
        for j in np.flatnonzero(q > 0):
            child = copy.deepcopy(run)
            d = child.record(int(j), float(q[j]), float(z_a[j]), float(z_b[j]))
            _, _, _, _, phi_a, phi_b, _ = child.records[-1]
            m_d, m_a, m_b = m_d + q[j] * d, m_a + q[j] * phi_a, m_b + q[j] * phi_b
            draw(child, prob * q[j], ds + [d], q_round, left - 1, drawn + [int(j)])
        assert abs(m_d - delta) < TOL and abs(m_a - theta_a) < TOL and abs(m_b - theta_b) < TOL

    walk(run, 1.0, [])
    return leaves


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(data=st.data(), replace=st.booleans(), reference=st.booleans())
def test_paired_difference_unbiased_and_variance_exact(data, replace, reference):
    z_a, z_b, fm = data.draw(paired_banks(min_n=2 if not replace else 1))
    est = PairedPAIEstimator(
        fm if data.draw(st.booleans()) else None,
        budget=data.draw(st.integers(2, min(3, z_a.size) if not replace else 3)),
        tau=data.draw(st.floats(0.01, 1.0)),
        policy=data.draw(st.sampled_from(["neyman", "uniform"])),
        replace=replace,
        reference_weight=data.draw(st.one_of(st.just("auto"), st.floats(0, 1))),
        batch_size=data.draw(st.integers(1, 3)),
    )
    leaves = enumerate_paired(est, z_a, z_b, reference)
    p = np.array([w for w, _ in leaves])
    est_ = np.array([ds.mean() for _, ds in leaves])
    vhat = np.array([martingale_variance(ds) for _, ds in leaves])
    assert abs(p.sum() - 1) < 1e-12
    mean = p @ est_
    assert abs(mean - (z_a.mean() - z_b.mean())) < TOL
    assert abs(p @ vhat - p @ (est_ - mean) ** 2) < TOL


class _ScriptedRng(np.random.Generator):
    def __init__(self, path):
        super().__init__(np.random.PCG64(0))
        self._path = list(path)

    def choice(self, a, p=None, **kwargs):
        j = self._path.pop(0)
        assert p is None or p[j] > 0
        return j


@settings(max_examples=60, deadline=None)
@given(z_a=st.lists(outcome_values, min_size=2, max_size=4), data=st.data(), reference=st.booleans())
def test_sample_mean_of_differences_unbiased_with_exact_fpc_variance(z_a, data, reference):
    """No factor model, without replacement: every ordered sample is equally likely; replayed
    through ``fit``, the mean difference and its FPC variance are exactly unbiased."""
    z_a = np.array(z_a)
    z_b = np.array(data.draw(st.lists(outcome_values, min_size=z_a.size, max_size=z_a.size)))
    N, n = z_a.size, data.draw(st.integers(2, min(3, z_a.size)))
    estimates, variances = [], []
    for path in itertools.permutations(range(N), n):
        est = PairedPAIEstimator(None, budget=n, random_state=_ScriptedRng(path))
        est.fit(z_a, reference=z_b) if reference else est.fit(z_a, z_b)
        assert list(est.queries_["question"]) == list(path)
        estimates.append(est.estimate_)
        variances.append(est.std_error_**2)
    assert est.result_.method == ("reference" if reference else "paired") + "_sample_mean"
    assert abs(np.mean(estimates) - (z_a.mean() - z_b.mean())) < TOL
    assert abs(np.mean(variances) - np.var(estimates)) < TOL


def test_fit_replays_the_run_it_documents():
    """``fit`` and a hand-driven :class:`PairedRun` on the same draws give the same increments."""
    rng = np.random.default_rng(0)
    V = rng.normal(size=(12, 2))
    fm = fq.LogisticFactorModel.from_factors(V, np.zeros(2), np.eye(2))
    z_a, z_b = (rng.random(12) < 0.6).astype(float), rng.random(12)
    for kwargs, reference in [({}, False), ({"batch_size": 3}, True), ({"replace": True}, False)]:
        est = PairedPAIEstimator(fm, budget=6, random_state=1, **kwargs)
        est.fit(z_a, reference=z_b) if reference else est.fit(z_a, z_b)
        run = est.new_run(12, reference=z_b if reference else None)
        rows, ds = list(est.queries_), []
        while rows:
            q_round = run.begin_round()
            available, batch = run.available.copy(), []
            for row in rows[: est.batch_size]:
                q = within_round(q_round, available, run.replace)
                assert q[row["question"]] == row["probability"]
                if not run.replace:
                    available[row["question"]] = False
                batch.append(int(row["question"]))
                ds.append(run.record(batch[-1], row["probability"], z_a[batch[-1]], z_b[batch[-1]]))
            run.end_round(batch, z_a[batch], z_b[batch])
            rows = rows[est.batch_size :]
        assert np.array_equal(ds, est.queries_["increment"])
        assert est.estimate_ == pytest.approx(np.mean(ds), abs=1e-15)
        assert est.std_error_ == pytest.approx(np.sqrt(martingale_variance(ds)), rel=1e-12)
        assert est.estimate_ == pytest.approx(est.estimates_[0] - est.estimates_[1], abs=1e-12)
        if reference:
            assert est.estimates_[1] == pytest.approx(z_b.mean(), abs=1e-14)
            assert est.reference_weights_.shape == (2,)


# ---------------------------------------------------------------- API and errors
@pytest.mark.parametrize(
    "params, args, kwargs, err, match",
    [
        ({}, ("a",), {}, ValueError, "exactly one of outcomes_b"),
        ({}, ("a", "b"), {"reference": "b"}, ValueError, "exactly one of outcomes_b"),
        ({"budget": 1}, ("a", "b"), {}, ValueError, "budget"),
        ({"budget": 50}, ("a", "b"), {}, ValueError, "exceeds the 20 questions"),
        ({"tau": 0.0}, ("a", "b"), {}, ValueError, "tau"),
        ({"policy": "greedy"}, ("a", "b"), {}, ValueError, "policy must be"),
        ({"interval": "wide"}, ("a", "b"), {}, ValueError, "interval must be"),
        ({"reference_weight": 2.0}, ("a",), {"reference": "b"}, ValueError, "reference_weight"),
        ({"replace": "no"}, ("a", "b"), {}, TypeError, "replace must be"),
        ({}, ("a",), {"reference": "nan"}, ValueError, r"reference must be in \[0, 1\]"),
        ({}, ("a",), {"reference": "short"}, ValueError, "reference must be a 1-D array"),
        ({}, ("bad", "b"), {}, ValueError, r"outcomes must be in \[0, 1\]"),
    ],
)
def test_bad_input_gets_a_clear_error(params, args, kwargs, err, match):
    V = np.random.default_rng(0).normal(size=(20, 2))
    fm = fq.LogisticFactorModel.from_factors(V, np.zeros(2), np.eye(2))
    arrays = {"a": np.ones(20), "b": np.zeros(20), "nan": np.r_[np.nan, np.zeros(19)], "short": np.zeros(5),
              "bad": np.full(20, 1.5)}
    est = PairedPAIEstimator(fm, **{"budget": 5, **params})
    with pytest.raises(err, match=match):
        est.fit(*[arrays[a] for a in args], **{k: arrays[v] for k, v in kwargs.items()})


def test_result_interval_pvalue_and_summary():
    r = ComparisonResult(estimate=-0.9, std_error=0.2, estimate_a=0.05, estimate_b=0.95, n_queries=30,
                         n_questions=100, method="reference", variance_method="martingale", df=None)
    low, high = r.conf_int()
    assert low == -1.0 and high == pytest.approx(-0.9 + stats.norm.ppf(0.975) * 0.2)
    assert r.pvalue() == pytest.approx(2 * stats.norm.sf(4.5))
    assert r.pvalue(alternative="smaller") == pytest.approx(stats.norm.cdf(-4.5))
    assert "Accuracy B (known)" in r.summary() and "-0.9000" in r.summary()
    assert ComparisonResult(**r.to_dict()) == r
    z = np.r_[np.ones(30), np.zeros(30)]
    res = compare(z, z, budget=10, random_state=0)  # identical models: no difference, no variance
    assert res.estimate == 0 and res.std_error == 0 and res.pvalue() == 1.0


# ---------------------------------------------------------------- Monte Carlo
def _independent_interval(fm, z_a, z_b, budget, seed, alpha=0.05):
    """Two independent default PAI evaluations (``budget`` queries each); t interval with
    Welch-Satterthwaite df from the two robust dfs. Also returns the width of A's own
    interval (what a known reference would leave without using it as a control)."""
    a = fq.PAIEstimator(fm, fq.HybridSampler(), budget=budget, random_state=[*seed, 0]).fit(z_a).result_
    b = fq.PAIEstimator(fm, fq.HybridSampler(), budget=budget, random_state=[*seed, 1]).fit(z_b).result_
    va, vb = a.std_error**2, b.std_error**2
    df = (va + vb) ** 2 / (va**2 / a.df + vb**2 / b.df) if va + vb > 0 else 1.0
    half = stats.t.ppf(1 - alpha / 2, df) * np.sqrt(va + vb)
    return a.estimate - b.estimate, half, 2 * stats.t.ppf(1 - alpha / 2, a.df) * a.std_error, va + vb, va


def _paired_study(fm, pairs, budget, seeds):
    """``pairs``: ``(key, z_a, z_b)`` with ``key`` a list of ints seeding the runs."""
    rows = []
    for key, z_a, z_b in pairs:
        delta = z_a.mean() - z_b.mean()
        for s in seeds:
            est = PairedPAIEstimator(fm, budget=budget, random_state=[*key, s]).fit(z_a, z_b)
            low, high = est.conf_int()
            ind, half, alone_w, ind_v, alone_v = _independent_interval(fm, z_a, z_b, budget, [*key, s])
            ref = PairedPAIEstimator(fm, budget=budget, random_state=[*key, s]).fit(z_a, reference=z_b)
            r_low, r_high = ref.conf_int()
            rows.append((low <= delta <= high, high - low, abs(ind - delta) <= half, 2 * half,
                         r_low <= delta <= r_high, r_high - r_low, alone_w,
                         est.std_error_**2, ind_v, ref.std_error_**2, alone_v))
    return np.array(rows, dtype=float)


def test_paired_monte_carlo_coverage_and_narrower_than_independent():
    """Synthetic bank (300 questions, planted k=3), factor model on the history. Model B
    is a variant of model A: it answers like A except on a seeded 20% of the questions,
    where it answers like another new model (a fine-tune, a quantisation, a new
    checkpoint). 6 pairs x 15 seeds = 90 runs at 40 shared questions, against two
    independent default PAI runs of 40 queries each (the same 80 answers in total).
    Tolerances: paired and reference coverage >= 0.87 (nominal 0.95, MC se 0.023; 120
    runs measured 0.96 and 0.97); mean paired width / mean independent width < 0.8
    (measured 0.69; the variance ratio is 0.22, the rest is the robust-t quantile's
    penalty for the heavy-tailed differenced increments); with B as a known reference,
    width / the width of A's own PAI interval < 0.9 (measured 0.79).

    (For two models drawn independently given the planted factors there is nothing
    left to cancel once the factor model predicts well: the ratio was 0.99.)"""
    bank = fq.make_synthetic_bank(n_models=120, n_questions=300, n_new=12, n_components=3, random_state=1)
    fm = fq.LogisticFactorModel(n_components=3, alpha=0.01, max_iter=300, device="cpu", random_state=0).fit(
        bank.history
    )
    new = bank.new_outcomes.astype(float)
    rng = np.random.default_rng(2)
    pairs = []
    for i in range(6):
        flip = rng.random(new.shape[1]) < 0.2
        pairs.append(([i], new[i], np.where(flip, new[i + 6], new[i])))
    rows = _paired_study(fm, pairs, 40, range(15))
    paired_cov, paired_w, ind_cov, ind_w, ref_cov, ref_w, alone_w = rows.mean(axis=0)[:7]
    print(f"\n[synthetic] coverage paired {paired_cov:.3f} independent {ind_cov:.3f} reference {ref_cov:.3f}; "
          f"width ratio paired/independent {paired_w / ind_w:.3f}, reference/A alone {ref_w / alone_w:.3f}")
    assert paired_cov >= 0.87 and ref_cov >= 0.87, (paired_cov, ref_cov)
    assert paired_w / ind_w < 0.8, paired_w / ind_w
    assert ref_w / alone_w < 0.9, ref_w / alone_w


def _most_similar_pairs(outcomes):
    """Greedy matching of models by agreement rate (highest first): versions of one model."""
    agree = (outcomes @ outcomes.T + (1 - outcomes) @ (1 - outcomes).T) / outcomes.shape[1]
    np.fill_diagonal(agree, -np.inf)
    pairs, free = [], np.ones(len(outcomes), dtype=bool)
    for flat in np.argsort(-agree, axis=None):
        i, j = divmod(int(flat), len(outcomes))
        if i < j and free[i] and free[j]:
            pairs.append((i, j))
            free[i] = free[j] = False
    return pairs


@pytest.mark.slow
def test_paired_on_openllm_v1_coverage_and_width_ratio():
    """openllm_v1 complete rows, seeded 75% history (as in ``test_real_data.py``), k=16,
    alpha=0.1, 2000 steps; the 615 new models in 307 pairs, one seed each, at 69 shared
    questions (10%), against independent runs of 69 + 69 queries. Two pairings: random
    (seeded) and most similar (greedy matching on agreement, e.g. fine-tunes of one base).
    Reports coverage of the paired, reference and independent intervals and the width
    ratios. Asserts coverage >= 0.92 for the paired and reference designs (307 runs per
    pairing, MC se 0.012), paired narrower than independent for similar models, and at
    most 10% wider for random pairs (pairing cannot cancel uncorrelated surprises, and
    one shared policy is a compromise between the two models' own Neyman policies)."""
    if not DATA_FILE.exists():
        pytest.skip(f"real data not available: {DATA_FILE} is absent")
    matrix, _ = fq.load_response_matrix(DATA_FILE)
    complete = matrix[~np.isnan(matrix).any(axis=1)]
    perm = np.random.default_rng(0).permutation(complete.shape[0])
    n_history = int(round(0.75 * complete.shape[0]))
    history, new = complete[perm[:n_history]], complete[perm[n_history:]]
    fm = fq.LogisticFactorModel(n_components=16, alpha=0.1, max_iter=2000, random_state=0).fit(history)
    order = np.random.default_rng(1).permutation(new.shape[0])
    pairings = {"random": list(zip(order[0::2], order[1::2])), "similar": _most_similar_pairs(new)}
    ratios = {}
    for name, pairs in pairings.items():
        agree = np.mean([np.mean(new[i] == new[j]) for i, j in pairs])
        rows = _paired_study(fm, [([int(i), int(j)], new[i], new[j]) for i, j in pairs], 69, range(1))
        paired_cov, paired_w, ind_cov, ind_w, ref_cov, ref_w, alone_w, pv, iv, rv, av = rows.mean(axis=0)
        se = np.sqrt(0.95 * 0.05 / len(rows))
        print(f"\n[openllm_v1, {name} pairs, mean agreement {agree:.3f}] {len(rows)} runs: coverage paired "
              f"{paired_cov:.3f} independent {ind_cov:.3f} reference {ref_cov:.3f} (MC se {se:.3f}); mean width "
              f"paired {paired_w:.4f} independent {ind_w:.4f} reference {ref_w:.4f}; ratio paired/independent "
              f"{paired_w / ind_w:.3f}, reference/independent {ref_w / ind_w:.3f}, reference/A alone "
              f"{ref_w / alone_w:.3f}; variance ratios (mean V_hat) paired/independent {pv / iv:.3f}, "
              f"reference/A alone {rv / av:.3f}")
        assert paired_cov >= 0.92 and ref_cov >= 0.92, (name, paired_cov, ref_cov)
        ratios[name] = paired_w / ind_w
    assert ratios["similar"] < 1.0 and ratios["random"] < 1.1, ratios
