"""Interval rules are objects (faqstats.intervals): the built-ins by name, and a rule written here,
outside faqstats, run unchanged through the estimators, the batched engine and (registered) sessions."""

import json

import numpy as np
import pytest
from scipy import stats

import faqstats as fq
from faqstats.batched import simulate
from faqstats.intervals import (NormalRule, RobustTRule, StudentTRule, interval_rule, interval_rule_name,
                                registered_interval_rules)


class InflatedWald(fq.IntervalRule):
    """A Wald interval whose normal quantile is inflated by a fixed factor (no degrees of freedom)."""

    name = "test-inflated-wald"

    def __init__(self, inflation=1.3):
        self.inflation = inflation

    def critical_value(self, alpha, alternative="two-sided", df=np.inf):
        return self.inflation * super().critical_value(alpha, alternative, np.inf)


class TwoFewerDf(fq.IntervalRule):
    """Student's t with n - 2 degrees of freedom: a rule that owns its degrees of freedom."""

    name = "test-two-fewer-df"

    def degrees_of_freedom(self, residuals, weights=None):
        x = np.asarray(residuals)
        return float(x.shape[-1] - 2)


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=60, n_questions=40, n_components=2, n_new=3, random_state=0)


@pytest.fixture(scope="module")
def fm(bank):
    return fq.LogisticFactorModel(n_components=2, max_iter=100, random_state=0).fit(bank.history)


def inflated(estimate, std_error, bounds=(0.0, 1.0), inflation=1.3, alpha=0.05):
    c = inflation * stats.norm.ppf(1 - alpha / 2)
    return tuple(np.clip([estimate - c * std_error, estimate + c * std_error], *bounds))


def test_builtin_rules_by_name_and_as_objects_agree(bank, fm):
    assert interval_rule("robust-t") == RobustTRule() and interval_rule("t") == StudentTRule()
    assert interval_rule("normal") == NormalRule() and interval_rule(NormalRule()) == NormalRule()
    assert {"robust-t", "t", "normal"} <= set(registered_interval_rules())
    z = bank.new_outcomes[0]
    for name, rule in (("robust-t", RobustTRule()), ("t", StudentTRule()), ("normal", NormalRule())):
        for kwargs in ({}, {"step_weights": np.linspace(1, 2, 15)}):
            by_name = fq.PAIEstimator(fm, budget=15, interval=name, random_state=1, **kwargs).fit(z).result_
            by_rule = fq.PAIEstimator(fm, budget=15, interval=rule, random_state=1, **kwargs).fit(z).result_
            assert by_name == by_rule and by_name.interval_rule == rule
            assert by_name.conf_int(0.1, "larger") == by_rule.conf_int(0.1, "larger")
    assert fq.PAIEstimator(fm, budget=15, interval="normal", random_state=1).fit(z).result_.df is None
    with_replacement = fq.HybridSampler(replace=True)
    assert fq.PAIEstimator(fm, with_replacement, budget=15, interval="t", random_state=1).fit(z).result_.df == 14
    # a result's JSON names its rule, and reads back equal
    result = fq.PAIEstimator(fm, budget=15, interval="t", random_state=1).fit(z).result_
    assert json.loads(result.to_json())["interval_rule"] == "t"
    assert fq.AccuracyResult(**{**result.to_dict(), "anytime_interval": None}) == result


def test_a_rule_written_outside_faqstats_runs_through_estimators_and_the_batched_engine(bank, fm):
    rule = InflatedWald()
    z = bank.new_outcomes[0]
    est = fq.PAIEstimator(fm, budget=15, interval=rule, random_state=2).fit(z)
    result = est.result_
    assert result.interval_rule is rule and result.df is None
    assert np.allclose(result.conf_int(), inflated(result.estimate, result.std_error), rtol=0, atol=1e-15)
    plain = fq.PAIEstimator(fm, budget=15, interval="normal", random_state=2).fit(z).result_
    assert plain.estimate == result.estimate and plain.std_error == result.std_error
    assert np.diff(result.conf_int())[0] > np.diff(plain.conf_int())[0]
    # the batched engine: the same intervals, run by run
    runs = simulate(bank.new_outcomes, [np.random.default_rng(s) for s in range(3)], predictor=fm, budget=15,
                    interval=rule, rows=[0, 0, 1])
    for r, (row, seed) in enumerate(((0, 0), (0, 1), (1, 2))):
        one = fq.PAIEstimator(fm, budget=15, interval=rule, random_state=np.random.default_rng(seed))
        one = one.fit(bank.new_outcomes[row]).result_
        assert runs.low[r] == pytest.approx(one.conf_int()[0], abs=1e-12)
        assert runs.high[r] == pytest.approx(one.conf_int()[1], abs=1e-12)
    # the paired estimator, on [-1, 1]
    paired = fq.PairedPAIEstimator(fm, budget=15, interval=rule, random_state=0).fit(z, bank.new_outcomes[1])
    res = paired.result_
    assert res.interval_rule is rule
    assert np.allclose(res.conf_int(), inflated(res.estimate, res.std_error, (-1.0, 1.0)), rtol=0, atol=1e-15)
    # the groups' own intervals
    groups = np.repeat(["a", "b"], 20)
    grouped = fq.PAIEstimator(fm, budget=20, interval=rule, random_state=0).fit(z, groups=groups).group_results_
    frame = grouped.conf_int()
    for g in range(2):
        expected = inflated(grouped.estimate[g], grouped.std_error[g])
        assert np.allclose(frame.iloc[g].to_numpy(), expected, rtol=0, atol=1e-15)


def test_a_rule_owns_its_degrees_of_freedom_in_every_path(bank, fm):
    rule = TwoFewerDf()
    z = bank.new_outcomes[0]
    result = fq.PAIEstimator(fm, fq.HybridSampler(replace=True), budget=12, interval=rule,
                             random_state=3).fit(z).result_
    assert result.df == 10.0
    low, high = result.conf_int()
    c = stats.t.ppf(0.975, 10)
    assert low == pytest.approx(result.estimate - c * result.std_error, abs=1e-14)
    runs = simulate(bank.new_outcomes[:1], [np.random.default_rng(3)], predictor=fm,
                    sampler=fq.HybridSampler(replace=True), budget=12, interval=rule)
    assert runs.df.tolist() == [10.0] and runs.low[0] == pytest.approx(low, abs=1e-12)
    mean = fq.PAIEstimator(None, fq.UniformSampler(), budget=12, interval=rule, random_state=3).fit(z).result_
    assert mean.method == "sample_mean" and mean.df == 10.0


def test_a_session_runs_a_registered_rule_and_refuses_an_unregistered_one(tmp_path, bank, fm):
    z = bank.new_outcomes[0]
    ids = [f"q{j}" for j in range(z.size)]
    rule = InflatedWald(1.25)
    rule.name = "test-session-inflated-wald"  # this instance's own name: registered below
    with pytest.raises(ValueError, match="register_interval_rule"):
        fq.EvaluationSession(fm, ids, budget=10, interval=rule, random_state=0)
    with pytest.raises(ValueError, match="register_interval_rule"):
        interval_rule_name(InflatedWald(1.25))  # another instance, not registered under its name
    assert fq.register_interval_rule(rule) is rule
    est = fq.PAIEstimator(fm, budget=10, batch_size=2, interval=rule, random_state=0).fit(z)
    session = fq.EvaluationSession.create(tmp_path / "s", fm, ids, budget=10, batch_size=2, interval=rule,
                                          random_state=0)
    while not session.done:
        got, _ = session.next_questions()
        session = fq.EvaluationSession.load(tmp_path / "s")  # resume: the rule comes back by its name
        session.record(got, [float(z[int(q[1:])]) for q in got])
    assert session.result() == est.result_ and session.result().interval_rule == rule
    assert session.result().conf_int() == est.result_.conf_int()
    state = json.loads((tmp_path / "s" / "session.json").read_text())
    assert state["config"]["interval"] == "test-session-inflated-wald"
    # a session whose rule is not registered (as in a fresh process) is refused, saying what to do
    state["config"]["interval"] = "test-never-registered"
    del state["checksums"]
    (tmp_path / "s" / "session.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match="register_interval_rule"):
        fq.EvaluationSession.load(tmp_path / "s", allow_unchecked=True)


def test_interval_rule_errors():
    with pytest.raises(TypeError, match="pass InflatedWald()"):
        interval_rule(InflatedWald)
    with pytest.raises(ValueError, match="interval must be"):
        interval_rule("bootstrap")
    with pytest.raises(TypeError, match="IntervalRule instance"):
        fq.register_interval_rule("normal")
    with pytest.raises(ValueError, match="another interval rule is registered as 'normal'"):
        fq.register_interval_rule(type("MyNormal", (fq.IntervalRule,), {"name": "normal"})())
    nameless = fq.IntervalRule()
    with pytest.raises(ValueError, match="non-empty string"):
        fq.register_interval_rule(nameless)
    class Replaced(InflatedWald):
        name = "test-replaced-wald"

    fq.register_interval_rule(Replaced(1.5))
    fq.register_interval_rule(Replaced(1.5))  # the same rule again: nothing to replace
    with pytest.raises(ValueError, match="replace=True"):
        fq.register_interval_rule(Replaced(2.0))
    assert fq.register_interval_rule(Replaced(2.0), replace=True) == interval_rule("test-replaced-wald")
    assert interval_rule("test-replaced-wald").inflation == 2.0
    with pytest.raises(ValueError, match="interval must be"):
        fq.PAIEstimator(None, fq.UniformSampler(), budget=5, interval="bootstrap").fit(np.ones(10))
