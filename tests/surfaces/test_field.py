"""The field as experiment methods (faqstats/experiments/field.py): ProEval's BQ, the Fisher IRT
adaptive test, tinyBenchmarks' gp-IRT, run through run_methods on the same splits and seeds."""

import numpy as np
import pandas as pd
import pytest
from scipy import special

import faqstats as fq
from faqstats.experiments import run_methods
from faqstats.experiments.field import FieldMethod, IRTFisher, ProEvalBQ, TinyBenchmarks, fit_irt
from faqstats.experiments.methods import METHODS
from faqstats.experiments.records import RECORD_COLUMNS

FIELD = ["proeval", "irt-fisher", "tinybench"]


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=120, n_questions=50, n_new=4, n_components=2, random_state=0)


def _two_pl_bank(n_models, n_questions, seed):
    """A bank drawn from a 2PL model: abilities N(0, 1), slopes U(0.5, 2), difficulties N(0, 1)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    a, b = rng.uniform(0.5, 2.0, n_questions), rng.normal(size=n_questions)
    H = (rng.random((n_models, n_questions)) < special.expit(a * (theta[:, None] - b))).astype(float)
    return H, theta, a, b


def _methods():
    """The field's names, ProEval only where it is installed."""
    return [pytest.param(m, marks=pytest.mark.skipif(m == "proeval" and not _has_proeval(),
                                                      reason="proeval not installed (extra 'field')"))
            for m in FIELD]


def _has_proeval():
    try:
        import proeval  # noqa: F401
    except ImportError:
        return False
    return True


def test_registered():
    for name in FIELD:
        fm, method = METHODS[name](None)
        assert fm is None and isinstance(method, FieldMethod)


@pytest.mark.parametrize("name", _methods())
def test_runs_through_run_methods(bank, name):
    budgets = [5, 12, 50]  # 50 = the whole bank
    runs = run_methods(bank.history, bank.new_outcomes, budgets, seeds=2, methods=[name, "uniform-fpc"],
                       verbose=False)
    rec = runs.records
    assert list(rec.columns) == list(RECORD_COLUMNS)
    mine = rec[rec["method"] == name]
    assert len(mine) == 3 * 2 * 4
    assert np.isfinite(mine["estimate"]).all()
    assert (mine["n_queries"] == mine["budget"]).all()
    assert mine["estimate"].between(0, 1).all()
    summary = runs.summary().set_index(["method", "budget"])
    if name == "tinybench":  # no interval: coverage undefined, not 0
        assert mine[["std_error", "low", "high"]].isna().all().all()
        assert summary.loc[(name, 12), "coverage"] != summary.loc[(name, 12), "coverage"]
    else:
        assert (mine["low"] <= mine["estimate"] + 1e-12).all() and (mine["estimate"] <= mine["high"] + 1e-12).all()
        assert 0 <= summary.loc[(name, 12), "coverage"] <= 1
    # the same records whatever runs alongside (each method's numbers come from its own seeds)
    alone = run_methods(bank.history, bank.new_outcomes, budgets, seeds=2, methods=[name], verbose=False).records
    pd.testing.assert_frame_equal(alone.reset_index(drop=True), mine.reset_index(drop=True), check_dtype=False)


def test_irt_fisher_never_repeats_and_census_is_exact(bank):
    method = IRTFisher().fit(bank.history)
    N = bank.new_outcomes.shape[1]
    for y, truth in zip(bank.new_outcomes, bank.new_accuracy):
        for budget in (1, 7, 30):
            run = method.run(y, budget)
            assert run.n_queries == budget and np.unique(run.queried).size == budget
        census = method.run(y, N)
        assert np.array_equal(np.sort(census.queried), np.arange(N))
        assert census.estimate == pytest.approx(truth, abs=1e-12)
        assert census.low == pytest.approx(truth, abs=1e-12) and census.high == pytest.approx(truth, abs=1e-12)


def test_irt_fisher_selects_max_information_at_the_map_ability(bank):
    """Replay a run: each query is the unasked item of largest a^2 p (1 - p) at the MAP ability of the
    answers before it (Fluid Benchmarking's rule); the estimate mixes observed and predicted answers."""
    method = IRTFisher().fit(bank.history)
    a, c = method.discrimination_, method.intercept_
    y = bank.new_outcomes[1]
    run = method.run(y, 15)
    theta = 0.0
    for t, j in enumerate(run.queried):
        p = special.expit(a * theta + c)
        info = a * a * p * (1 - p)
        info[run.queried[:t]] = -np.inf
        assert j == np.argmax(info)
        asked = run.queried[:t + 1]
        # the MAP under N(0, 1): the root of the score, found independently by bisection
        score = lambda th: np.sum(a[asked] * (y[asked] - special.expit(a[asked] * th + c[asked]))) - th  # noqa: E731
        lo, hi = -4.0, 4.0
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if score(mid) > 0 else (lo, mid)
        theta = 0.5 * (lo + hi)
    rest = np.setdiff1d(np.arange(y.size), run.queried)
    expected = (y[run.queried].sum() + special.expit(a[rest] * theta + c[rest]).sum()) / y.size
    assert run.estimate == pytest.approx(expected, abs=1e-6)
    wider = IRTFisher(item_noise=True).fit(bank.history).run(y, 15)  # Bernoulli noise of the unasked added
    assert wider.estimate == pytest.approx(run.estimate) and wider.std_error > run.std_error


def test_tinybench_uses_exactly_the_budget_even_with_equal_items():
    H, *_ = _two_pl_bank(150, 30, seed=1)
    H = np.hstack([H, H[:, :10]])  # 10 duplicated questions: equal IRT parameters, equal k-means points
    method = TinyBenchmarks(n_dims_grid=(1, 2)).fit(H[:-3])
    for budget in (3, 20, 39, 40):
        for seed in (0, 1):
            run = method.run(H[-1], budget, random_state=seed)
            assert run.n_queries == budget and np.unique(run.queried).size == budget
            assert np.isnan([run.std_error, run.low, run.high]).all()
    census = method.run(H[-1], H.shape[1], random_state=0)
    assert census.estimate == pytest.approx(H[-1].mean(), abs=1e-12)
    # the anchors are fixed per seed (shared by every new model), and differ between seeds
    assert np.array_equal(method.run(H[-2], 20, random_state=0).queried, method.run(H[-1], 20, random_state=0).queried)
    assert not np.array_equal(method.run(H[-1], 20, random_state=0).queried,
                              method.run(H[-1], 20, random_state=5).queried)


def test_tinybench_lambda_and_weights():
    H, *_ = _two_pl_bank(200, 40, seed=2)
    method = TinyBenchmarks(n_dims_grid=(1,)).fit(H[:-1])
    assert method.n_dims_ == 1 and method.bias_ == method.validation_errors_[1] > 0
    assert method.variance_ == pytest.approx(np.mean(np.var(H[:-1], axis=1)))
    anchors, weights = method._anchors(10, 3)
    assert weights.sum() == pytest.approx(1.0) and (weights > 0).all()
    run = method.run(H[-1], 10, random_state=3)
    A, c = method.discrimination_, method.intercept_
    y = H[-1]
    from faqstats.experiments.field import _mle_ability

    theta = _mle_ability(y[anchors], A[anchors], c[anchors])
    rest = np.setdiff1d(np.arange(40), anchors)
    pirt = 0.25 * y[anchors].mean() + 0.75 * special.expit(A[rest] @ theta + c[rest]).mean()
    lam = method.bias_ ** 2 / (method.bias_ ** 2 + method.variance_ / 40)
    assert run.estimate == pytest.approx(lam * (weights @ y[anchors]) + (1 - lam) * pirt)


def test_fit_irt_recovers_a_two_pl_model():
    """Seeded: 2,000 models x 40 items from a 2PL; the fitted slopes and difficulties track the truth
    (correlation > 0.95) and the abilities are standardised."""
    H, theta, a, b = _two_pl_bank(2000, 40, seed=3)
    A, c, ability = fit_irt(H, 1)
    sign = np.sign(np.corrcoef(ability[:, 0], theta)[0, 1])
    assert np.corrcoef(sign * A[:, 0], a)[0, 1] > 0.95
    assert np.corrcoef(-c / (sign * A[:, 0]), b)[0, 1] > 0.95
    assert np.corrcoef(sign * ability[:, 0], theta)[0, 1] > 0.9
    assert abs(ability.mean()) < 1e-8 and ability.std(ddof=1) == pytest.approx(1.0, abs=1e-6)
    # missing cells are skipped: the same fit on a masked history still tracks the slopes
    masked = H.copy()
    masked[np.random.default_rng(0).random(H.shape) < 0.3] = np.nan
    A2, c2, _ = fit_irt(masked, 1)
    assert abs(np.corrcoef(A2[:, 0], a)[0, 1]) > 0.9


def test_bad_input(bank):
    with pytest.raises(ValueError, match="not fitted"):
        IRTFisher().run(bank.new_outcomes[0], 5)
    method = IRTFisher().fit(bank.history)
    with pytest.raises(ValueError, match="budget"):
        method.run(bank.new_outcomes[0], 51)
    with pytest.raises(ValueError, match="0/1"):
        method.run(np.full(50, 0.5), 5)
    with pytest.raises(ValueError, match="theta_range"):
        IRTFisher(theta_range=(1, 2)).fit(bank.history)
    with pytest.raises(ValueError, match="tolerance"):
        run_methods(bank.history, bank.new_outcomes, [5], seeds=1, methods=["tinybench:tolerance=-1"], verbose=False)


def test_proeval_reproduces_proevals_own_estimate():
    """Our wrapper gives ProEval's own BQPriorSampler.sample numbers (its final estimate and integral
    sd) on a tiny bank, and subsamples the history when it is larger than max_history."""
    pytest.importorskip("proeval")
    from proeval.sampler import BQPriorSampler

    H, *_ = _two_pl_bank(31, 25, seed=4)
    history, target = H[:-1], H[-1]
    df = pd.DataFrame({f"label_m{i}": col for i, col in enumerate(np.vstack([history, target]))})
    for budget in (1, 6, 25):
        theirs = BQPriorSampler().sample(df, target_model=f"m{history.shape[0]}", budget=budget, pretrain_mode="all")
        ours = ProEvalBQ().fit(history).run(target, budget, random_state=0)
        assert list(ours.queried) == list(theirs.selected_indices)
        assert ours.estimate == pytest.approx(theirs.estimates[-1], abs=1e-10)
        assert ours.std_error == pytest.approx(np.sqrt(theirs.integral_variance[-1]), abs=1e-10)
        assert ours.high - ours.estimate == pytest.approx(1.959964 * ours.std_error, rel=1e-6)
    small = ProEvalBQ(max_history=10).fit(history)
    a, b = small.run(target, 6, random_state=0), small.run(target, 6, random_state=1)
    assert small._design_key(0) != small._design_key(1) and not np.array_equal(a.queried, b.queried)
    assert ProEvalBQ().fit(history)._design_key(0) == ProEvalBQ().fit(history)._design_key(1)  # no subsample


def test_proeval_missing_is_a_clear_error(bank, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_proeval(name, *args, **kwargs):
        if name.startswith("proeval"):
            raise ImportError("no proeval")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_proeval)
    with pytest.raises(ImportError, match=r"faqstats\[field\]"):
        ProEvalBQ().fit(bank.history)
