"""The batched engine reproduces PAIEstimator run for run."""

import numpy as np
import pytest

import faqstats as fq
from faqstats.batched import simulate
from faqstats.lockstep import Lockstep
from faqstats._inference import effective_df, interval_df
from faqstats.experiments import run_experiment


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=80, n_questions=120, n_components=3, random_state=1)


@pytest.fixture(scope="module")
def fm(bank):
    return fq.LogisticFactorModel(n_components=3, max_iter=300, random_state=0).fit(bank.history)


SAMPLERS = [
    ("fm", fq.HybridSampler()),
    ("fm", fq.HybridSampler(tau=0.05, replace=True)),
    ("fm", fq.HybridSampler(tau=0.3, beta0=0.6, rho=0.5, gamma=0.4)),
    ("fm", fq.HybridSampler(beta0=0.0)),
    ("fm", fq.NeymanSampler(tau=0.2)),
    ("fm", fq.ActiveLearningSampler(replace=True)),
    ("fm", fq.UniformSampler(replace=True)),
    (None, fq.UniformSampler()),
    (None, fq.UniformSampler(replace=True)),
    (None, fq.BernoulliAIPW(score="uniform")),
    ("fm", fq.BernoulliAIPW()),
    ("fm", fq.BernoulliAIPW(score="min", order="natural", tau=0.2, pi_floor=0.1)),
]


def _sequential(factor_model, sampler, budget, Z, rows, seeds, interval="robust-t"):
    out = []
    for row, seed in zip(rows, seeds):
        est = fq.PAIEstimator(factor_model, sampler, budget=budget, interval=interval,
                              random_state=np.random.default_rng(seed)).fit(Z[row])
        out.append((est.estimate_, est.std_error_, *est.conf_int(), est.n_queries_))
    return np.array(out)


@pytest.mark.parametrize("use_fm, sampler", SAMPLERS, ids=lambda x: repr(x) if not isinstance(x, str) else x)
def test_matches_estimator_run_for_run(bank, fm, use_fm, sampler):
    factor_model = fm if use_fm else None
    Z = bank.new_outcomes
    rows = np.arange(10) % Z.shape[0]
    seeds = [[7, r] for r in range(10)]
    runs = simulate(Z, [np.random.default_rng(s) for s in seeds], predictor=factor_model, sampler=sampler,
                    budget=15, rows=rows)
    got = np.column_stack([runs.estimate, runs.std_error, runs.low, runs.high, runs.n_queries])
    want = _sequential(factor_model, sampler, 15, Z, rows, seeds)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-11)
    assert runs.method == ("aipw" if isinstance(sampler, fq.BernoulliAIPW) else
                           "sample_mean" if factor_model is None and not sampler.replace else "pai")


def test_quadratic_form_refresh_over_long_runs(fm, bank):
    # 300 rank-one downdates pass the from-scratch refresh (every 256) of the quadratic forms
    sampler = fq.ActiveLearningSampler(tau=0.3, replace=True)
    Z = bank.new_outcomes
    runs = simulate(Z, [np.random.default_rng(s) for s in range(3)], predictor=fm, sampler=sampler, budget=300,
                    rows=[0, 1, 2])
    want = _sequential(fm, sampler, 300, Z, [0, 1, 2], range(3))
    np.testing.assert_allclose(runs.estimate, want[:, 0], atol=1e-8)


def test_chunking_and_intervals(bank, fm):
    Z = bank.new_outcomes
    gens = lambda: [np.random.default_rng(s) for s in range(9)]  # noqa: E731
    whole = simulate(Z, gens(), predictor=fm, budget=12, rows=np.arange(9) % 3)
    chunked = simulate(Z, gens(), predictor=fm, budget=12, rows=np.arange(9) % 3, max_elements=2 * Z.shape[1])
    # the same draws; chunks change the matrix shapes, so BLAS may round the sums differently (1 ulp)
    np.testing.assert_allclose(whole.estimate, chunked.estimate, rtol=1e-12, atol=0)
    for interval in ("t", "normal"):
        runs = simulate(Z, gens(), predictor=fm, budget=12, rows=np.arange(9) % 3, interval=interval, alpha=0.1)
        want = []
        for r, s in enumerate(range(9)):
            est = fq.PAIEstimator(fm, budget=12, interval=interval, random_state=np.random.default_rng(s)).fit(Z[r % 3])
            want.append(est.conf_int(alpha=0.1))
        np.testing.assert_allclose(np.column_stack([runs.low, runs.high]), want, atol=1e-8)


@pytest.mark.parametrize("error", [MemoryError(), RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                                   RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate")])
def test_chunk_out_of_memory_is_run_again_in_halves(bank, fm, monkeypatch, error):
    """A chunk that runs out of memory after drawing is retried in halves from the same
    generator states: the same results as without memory trouble, and a warning."""

    Z = bank.new_outcomes
    gens = lambda: [np.random.default_rng(s) for s in range(9)]  # noqa: E731
    whole = simulate(Z, gens(), predictor=fm, budget=12, rows=np.arange(9) % 3)
    run, sizes = Lockstep.run, []

    released = []

    def short_of_memory(self, Zc, generators):
        sizes.append(len(generators))
        released.append(self.posterior is None)  # the failed chunk's blocks dropped
        out = run(self, Zc, generators)  # the chunk's generators are consumed before the failure
        if len(generators) > 2:
            raise error
        return out

    monkeypatch.setattr(Lockstep, "run", short_of_memory)
    done = []
    with pytest.warns(ResourceWarning, match="out of memory with 9 runs per chunk; going on with 4"):
        runs = simulate(Z, gens(), predictor=fm, budget=12, rows=np.arange(9) % 3, progress=done.append)
    np.testing.assert_allclose(runs.estimate, whole.estimate, rtol=1e-12, atol=0)  # (up to BLAS rounding by shape)
    np.testing.assert_allclose(runs.low, whole.low, rtol=1e-12)  # batched variances sum per chunk
    assert sizes[:3] == [9, 4, 2] and sum(done) == 9 and max(done) <= 2
    assert released[:3] == [True, True, True]


def test_other_errors_and_single_run_chunks_are_not_retried(bank, fm, monkeypatch):

    def fail(error):
        def run(self, Zc, generators):
            raise error
        return run

    Z = bank.new_outcomes
    monkeypatch.setattr(Lockstep, "run", fail(ValueError("bad input")))
    with pytest.raises(ValueError, match="bad input"):
        simulate(Z, [np.random.default_rng(s) for s in range(4)], predictor=fm, budget=12, rows=[0, 1, 2, 0])
    monkeypatch.setattr(Lockstep, "run", fail(MemoryError()))
    with pytest.raises(MemoryError), pytest.warns(ResourceWarning):
        simulate(Z, [np.random.default_rng(s) for s in range(4)], predictor=fm, budget=12, rows=[0, 1, 2, 0])


def test_float32_close_to_float64(bank, fm):
    Z = bank.new_outcomes
    a = simulate(Z, [np.random.default_rng(s) for s in range(6)], predictor=fm, budget=20, dtype="float64")
    b = simulate(Z, [np.random.default_rng(s) for s in range(6)], predictor=fm, budget=20, dtype="float32")
    # float32 may move a draw across a bucket boundary now and then; most runs agree closely
    assert np.mean(np.abs(a.estimate - b.estimate) < 1e-4) >= 0.8


def test_robust_df_matches_effective_df():
    rng = np.random.default_rng(0)
    phi = rng.standard_t(3, size=(20, 30))
    phi[0] = 0.5  # zero variance row
    np.testing.assert_allclose(interval_df("robust-t", phi), [effective_df(row) for row in phi])


def test_errors(bank, fm):
    Z = bank.new_outcomes
    with pytest.raises(ValueError, match="complete"):
        simulate(np.where(Z == 1, np.nan, Z), [0], predictor=fm, budget=5)
    with pytest.raises(ValueError, match="rows"):
        simulate(Z, [0, 1], predictor=fm, budget=5, rows=[0])
    with pytest.raises(ValueError, match="budget"):
        simulate(Z, [0], predictor=fm, budget=10_000)
    with pytest.raises(ValueError, match="needs a fitted factor_model"):
        simulate(Z, [0], sampler=fq.NeymanSampler(), budget=5)


def test_experiment_engines_agree(bank):
    matrix = np.vstack([bank.history, bank.new_outcomes])
    kwargs = dict(budgets=(0.1,), seeds=2, max_models=4, factor_model={"n_components": 3, "max_iter": 100},
                  methods=("faq", "uniform-fpc", "ht-uniform"), verbose=False)
    a = run_experiment(matrix, engine="batched", **kwargs).records
    b = run_experiment(matrix, engine="sequential", **kwargs).records
    for field in ("estimate", "std_error", "low", "high"):
        np.testing.assert_allclose(a[field], b[field], atol=1e-8)
    np.testing.assert_array_equal(a["covered"], b["covered"])


def test_kept_increments_and_ranges_match_the_sequential_run(bank, fm):
    import copy

    from faqstats._engine import SequentialRun

    Z = bank.new_outcomes
    runs = simulate(Z, [np.random.default_rng(3)], predictor=fm, budget=10, rows=[2], keep_increments=True)
    est = fq.PAIEstimator(fm, budget=10, random_state=np.random.default_rng(3)).fit(Z[2])
    np.testing.assert_allclose(runs.increments[0], est.queries_["increment"], atol=1e-12)
    # replay the run to get each round's announced range
    run = SequentialRun(fq.HybridSampler(), fm.posterior(), Z.shape[1], 10)
    for t, row in enumerate(est.queries_):
        q = run.law()
        np.testing.assert_allclose(runs.increment_ranges[0, t], run.increment_range(q), atol=1e-12)
        run.record(int(row["question"]), row["probability"], row["outcome"])
        run.end_round([int(row["question"])], [row["outcome"]])
    assert copy.deepcopy(runs).increments.shape == (1, 10)


def test_keep_increments_is_refused_for_the_stream_design_before_any_work(bank, fm):
    with pytest.raises(ValueError, match="keep_increments"):
        simulate(bank.new_outcomes, [0], predictor=fm, sampler=fq.BernoulliAIPW(), budget=5, keep_increments=True)


class _Easiest(fq.Sampler):  # a policy with numpy scores only: asked run by run
    def scores(self, state):
        return state.predictions + 0.1


ROUND_SAMPLERS = [
    ("fm", fq.HybridSampler()),
    ("fm", fq.HybridSampler(tau=0.2, replace=True)),
    ("fm", fq.NeymanSampler(tau=0.3)),
    ("fm", fq.ActiveLearningSampler(tau=0.3)),
    ("fm", _Easiest()),
    ("fm", _Easiest(replace=True)),
    (None, fq.UniformSampler()),
    (None, fq.UniformSampler(replace=True)),
]
ROUND_SETTINGS = [
    dict(batch_size=2),
    dict(batch_size=4),
    dict(batch_size=4, confidence_sequence=True),
    dict(confidence_sequence=0.1),
    dict(stop_when_width=0.42),
    dict(stop_when_width=0.42, batch_size=3),
    dict(stop_when_width=0.42, batch_size=2, predict_every=3),
]


@pytest.mark.parametrize("use_fm, sampler", ROUND_SAMPLERS, ids=lambda x: repr(x) if not isinstance(x, str) else x)
def test_rounds_confidence_sequences_and_stopping_match_the_estimator(bank, fm, use_fm, sampler):
    """batch_size, confidence sequences and stop_when_width: every run is PAIEstimator's run
    with the same generator (estimate, standard error, interval, queries, stop, anytime interval),
    and leaves its generator where the estimator leaves it."""
    factor_model = fm if use_fm else None
    Z = bank.new_outcomes
    R, budget = 6, 36
    rows = np.arange(R) % Z.shape[0]
    for settings in ROUND_SETTINGS:
        gens = [np.random.default_rng([11, r]) for r in range(R)]
        runs = simulate(Z, gens, predictor=factor_model, sampler=sampler, budget=budget, rows=rows,
                        alpha=0.1 if settings.get("confidence_sequence") == 0.1 else 0.05, **settings)
        for r in range(R):
            g = np.random.default_rng([11, r])
            est = fq.PAIEstimator(factor_model, sampler, budget=budget, random_state=g, **settings).fit(Z[rows[r]])
            res = est.result_
            got = [runs.estimate[r], runs.std_error[r], runs.low[r], runs.high[r]]
            want = [est.estimate_, est.std_error_, *est.conf_int(alpha=res.anytime_alpha or 0.05)]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-10, err_msg=f"{settings} run {r}")
            assert runs.n_queries[r] == est.n_queries_ and runs.n_draws[r] == len(est.queries_)
            assert runs.stop_reason[r] == est.stop_reason_
            if res.anytime_interval is None:
                assert runs.anytime_low is None and runs.anytime_alpha is None
            else:
                assert runs.anytime_alpha == res.anytime_alpha
                np.testing.assert_allclose([runs.anytime_low[r], runs.anytime_high[r]], res.anytime_interval,
                                           rtol=0, atol=1e-10)
            assert gens[r].random() == g.random()  # the same uniforms used


def test_runs_stop_at_their_own_rounds_in_one_chunk(bank, fm):
    Z = bank.new_outcomes
    gens = [np.random.default_rng([3, r]) for r in range(12)]
    runs = simulate(Z, gens, predictor=fm, budget=30, rows=np.arange(12) % 3, stop_when_width=0.42, batch_size=2,
                    keep_increments=True)
    assert set(runs.stop_reason) == {"width", "budget"}  # some stopped, some ran out of budget
    assert set(runs.n_draws.tolist()) == {28, 30}
    assert np.all(runs.n_draws[runs.stop_reason == "budget"] == 30)
    assert np.all(runs.n_draws % 2 == 0)  # after a round
    for r, n in enumerate(runs.n_draws):  # the increments of the draws made, then NaN
        assert np.all(np.isfinite(runs.increments[r, :n])) and np.all(np.isnan(runs.increments[r, n:]))
        assert np.all(np.isnan(runs.increment_ranges[r, n:]))
    width = runs.stop_reason == "width"
    np.testing.assert_array_equal(runs.low[width], runs.anytime_low[width])  # the sequence's interval
    assert np.all(runs.anytime_high[width] - runs.anytime_low[width] <= 0.42)
    assert np.all(runs.anytime_high[~width] - runs.anytime_low[~width] > 0.42)


def test_many_confidence_sequences_are_the_single_ones():
    from faqstats.confseq import BettingConfidenceSequence, BettingConfidenceSequences

    rng = np.random.default_rng(0)
    x = rng.uniform(-0.5, 1.5, size=(4, 60))
    lo, hi = x - rng.uniform(0, 1, size=x.shape), x + rng.uniform(0, 1, size=x.shape)
    many = BettingConfidenceSequences(4, alpha=0.1, truncation=0.9, horizon=60)
    ones = [BettingConfidenceSequence(alpha=0.1, truncation=0.9, horizon=60) for _ in range(4)]
    for t in range(60):
        runs = np.arange(4) if t < 30 else np.array([0, 2])  # runs 1 and 3 stop at 30
        many.update(x[runs, t], lo[runs, t], hi[runs, t], runs)
        for r in runs:
            ones[r].update(x[r, t], lo[r, t], hi[r, t])
    low, high = many.interval()
    np.testing.assert_array_equal(np.column_stack([low, high]), [cs.interval() for cs in ones])
    assert many.n.tolist() == [60, 30, 60, 30]


def test_the_paper_variance_is_refused_by_name(bank, fm):
    sampler = fq.HybridSampler(replace=True)
    name = "variance='paper'"
    with pytest.raises(ValueError, match=f"simulate does not cover {name}"):
        simulate(bank.new_outcomes, [0], predictor=fm, sampler=sampler, budget=5, variance="paper")


def test_stop_when_width_needs_the_sequence_level(bank, fm):
    with pytest.raises(ValueError, match="alpha=0.05"):
        simulate(bank.new_outcomes, [0], predictor=fm, budget=5, stop_when_width=0.3, alpha=0.1)


def test_the_sweep_runs_groups_costs_and_clusters_batched_as_the_estimator(bank, caplog):
    from faqstats.experiments import run_methods

    kwargs = dict(seeds=2, methods=["uniform-fpc", "neyman"], verbose=False, groups=np.arange(120) // 40,
                  costs=np.linspace(1.0, 2.0, 120), clusters=np.arange(120) // 4)
    with caplog.at_level("WARNING", logger="faqstats.experiments.sweep"):
        batched = run_methods(bank.history, bank.new_outcomes[:2], [6], **kwargs)
    assert not caplog.records  # no fallback, nothing to say
    sequential = run_methods(bank.history, bank.new_outcomes[:2], [6], engine="sequential", **kwargs)
    assert np.isfinite(batched.records["cost_spent"]).all()
    for got, want in ((batched.records, sequential.records), (batched.group_records, sequential.group_records)):
        numbers = got.select_dtypes("number").columns
        np.testing.assert_allclose(got[numbers].to_numpy(float), want[numbers].to_numpy(float), atol=1e-10)


def test_stopped_runs_weigh_their_increments_as_the_estimator(bank, fm):
    Z, w = bank.new_outcomes, np.linspace(1.0, 2.0, 30)
    kw = dict(budget=30, step_weights=w, stop_when_width=0.42, batch_size=2)
    runs = simulate(Z, [np.random.default_rng([4, r]) for r in range(4)], predictor=fm, rows=[0, 1, 2, 0], **kw)
    assert np.any(runs.n_draws < 30)
    for r, row in enumerate([0, 1, 2, 0]):
        est = fq.PAIEstimator(fm, random_state=np.random.default_rng([4, r]), **kw).fit(Z[row])
        assert runs.n_draws[r] == len(est.queries_)
        np.testing.assert_allclose([runs.estimate[r], runs.std_error[r], runs.df[r]],
                                   [est.estimate_, est.std_error_, est.result_.df], rtol=0, atol=1e-10)
