"""Self-configuration from the history (issues 16 and 18): the choice is made on validation
models held out of the history, falls back to the sample mean when no predictor helps, and the
returned estimator is what the report says."""

import numpy as np
import pytest

import faqstats as fq
from faqstats.configure import configure_from_history


@pytest.fixture(scope="module")
def bank():
    return fq.make_synthetic_bank(n_models=160, n_questions=100, n_components=3, random_state=0)


class Contrarian(fq.GaussianProcessSurrogate):
    """Predicts the opposite of the history's question means and never learns (a useless predictor)."""

    def fit(self, X, y=None):
        super().fit(X)
        self.question_means_ = 1.0 - self.question_means_
        self.noise_ = self.noise_ * 1e9
        return self


def test_a_predictor_that_helps_is_chosen_and_refitted_on_the_whole_history(bank):
    cfg = configure_from_history(bank.history, 25, n_runs=200, random_state=0)
    # every predictor with the default policy, the other policy with the best of them
    first = cfg.table[cfg.table["policy"] == "hybrid"]
    assert first["candidate"].tolist() == ["factor", "gp", "gp-16", "gp-64", "stack"] == first["predictor"].tolist()
    best = first.loc[first["predicted_ess"].idxmax(), "predictor"]
    assert cfg.table.loc[cfg.table["policy"] != "hybrid", "candidate"].tolist() == [f"{best}/tau-0.25", f"{best}/tau-1"]
    assert cfg.choice in cfg.table["candidate"].tolist()
    # the best default-policy row, unless another policy beats it by the margin
    from faqstats.configure import POLICY_MARGIN

    t = cfg.table
    floor = (1 + POLICY_MARGIN) * first["predicted_ess"].max()
    assert cfg.predicted_ess == t["predicted_ess"][(t["policy"] == "hybrid") | (t["predicted_ess"] > floor)].max() > 1
    est = cfg.estimator
    chosen = cfg.table.set_index("candidate").loc[cfg.choice]
    assert est.sampler.tau == {"hybrid": 0.5, "tau-0.25": 0.25, "tau-1": 1.0}[chosen["policy"]]
    assert est.step_weights is not None and est.step_weights.shape == (25,)
    assert est.factor_model.n_features_in_ == 100 and "Chosen (predictor/policy):" in str(cfg)
    # the chosen predictor, refitted on the whole history, not the training part of the split
    again = type(est.factor_model)(**est.factor_model.get_params()).fit(bank.history)
    np.testing.assert_allclose(est.factor_model.posterior().predictions, again.posterior().predictions)
    assert est.set_params(random_state=0).fit(bank.new_outcomes[0]).n_queries_ == 25


def test_no_helpful_predictor_falls_back_to_the_sample_mean(bank):
    cfg = configure_from_history(bank.history, 25, candidates={"contrarian": Contrarian()}, n_runs=200)
    assert cfg.choice == "sample-mean" and cfg.predicted_ess == 1.0
    assert cfg.table["predicted_ess"].iloc[0] < 1
    est = cfg.estimator.set_params(random_state=0).fit(bank.new_outcomes[0])
    assert est.result_.method == "sample_mean" and "sample mean is used" in str(cfg).replace("\n", " ")


def test_tiny_history_gets_the_safe_choice_with_a_message():
    H = np.array([[1, 0, 1, 0, 1], [0, 1, 1, 0, 0], [1, 1, np.nan, 0, 1]], dtype=float)
    with pytest.warns(RuntimeWarning, match="no predictor can be validated"):
        cfg = configure_from_history(H, 3)
    assert cfg.choice == "sample-mean" and cfg.table.empty
    with pytest.raises(ValueError, match="budget"):
        configure_from_history(H, 9)


def test_policies_are_validated_with_the_best_predictor_and_the_winner_runs(bank):
    """The other policies run with the best predictor; the largest validation ESS wins and the
    returned estimator runs a clone of its policy."""
    policies = {"hybrid": fq.HybridSampler(), "flat": fq.HybridSampler(beta0=0.0), "low-tau": fq.HybridSampler(tau=0.3)}
    cfg = configure_from_history(bank.history, 25, candidates={"gp": fq.GaussianProcessSurrogate(n_components=8)},
                                 policies=policies, n_runs=200, random_state=0)
    t = cfg.table.set_index("candidate")
    assert t.index.tolist() == ["gp", "gp/flat", "gp/low-tau"]
    # beta0 = 0 is uniform sampling: the predictions then serve as a control variate only
    assert t.loc["gp/flat", "predicted_ess"] < t.loc["gp", "predicted_ess"]
    from faqstats.configure import POLICY_MARGIN

    eligible = t[(t["policy"] == "hybrid") | (t["predicted_ess"] > (1 + POLICY_MARGIN) * t.loc["gp", "predicted_ess"])]
    assert cfg.choice == eligible["predicted_ess"].idxmax()
    sampler = cfg.estimator.sampler
    assert sampler.get_params() == policies[t.loc[cfg.choice, "policy"]].get_params()
    assert sampler is not policies[t.loc[cfg.choice, "policy"]]  # a clone: the caller's is left alone


def test_a_predictor_equal_to_an_earlier_one_is_validated_once():
    bank = fq.make_synthetic_bank(n_models=24, n_questions=60, n_components=2, random_state=1)
    # 18 training models: ranks 32 and 64 are both capped at 17, the same fit
    candidates = {"gp": fq.GaussianProcessSurrogate(), "gp-64": fq.GaussianProcessSurrogate(n_components=64),
                  "gp-8": fq.GaussianProcessSurrogate(n_components=8)}
    cfg = configure_from_history(bank.history, 12, candidates=candidates, policies={"hybrid": fq.HybridSampler()},
                                 n_runs=60, random_state=0)
    assert cfg.table["candidate"].tolist() == ["gp", "gp-8"]


@pytest.mark.parametrize("policies, match", [({}, "at least one"), ({"aipw": fq.BernoulliAIPW()}, "sequential"),
                                             ({"bad": fq.HybridSampler(tau=2.0)}, "tau")])
def test_bad_policies_are_refused(bank, policies, match):
    with pytest.raises(ValueError, match=match):
        configure_from_history(bank.history, 25, policies=policies, n_runs=20)


def test_default_candidates_add_shrunk_surrogates_for_thin_histories():
    from faqstats.configure import THIN_HISTORY, default_candidates

    thin, thick = default_candidates(THIN_HISTORY - 1), default_candidates(THIN_HISTORY)
    assert [thin[n].shrinkage for n in ("gp-shrink-0.5", "gp-shrink-0.8")] == [0.5, 0.8]
    assert not any(n.startswith("gp-shrink") for n in thick)
    assert "gp-64" in thick and "gp-64" not in thin
    assert isinstance(thick["stack"], fq.StackedPredictor) and "stack" not in thin  # it needs validation rows


def test_another_policy_needs_a_margin_over_the_default(bank, monkeypatch):
    """The same validation figures: with a huge margin the default policy is kept, with none the best wins."""
    import faqstats.selection as selection

    policies = {"hybrid": fq.HybridSampler(), "low-tau": fq.HybridSampler(tau=0.2)}
    kw = dict(candidates={"gp": fq.GaussianProcessSurrogate(n_components=8)}, policies=policies, n_runs=200,
              random_state=0)
    monkeypatch.setattr(selection, "POLICY_MARGIN", 0.0)
    free = configure_from_history(bank.history, 25, **kw)
    monkeypatch.setattr(selection, "POLICY_MARGIN", 10.0)
    kept = configure_from_history(bank.history, 25, **kw)
    pd_free, pd_kept = free.table.set_index("candidate"), kept.table.set_index("candidate")
    assert np.allclose(pd_free["predicted_ess"], pd_kept["predicted_ess"])  # same runs
    assert free.choice == pd_free["predicted_ess"].idxmax() and kept.choice == "gp"
    assert kept.estimator.sampler.tau == 0.5


def test_a_clearly_worse_candidate_is_left_at_the_first_round(bank, capsys):
    """n_runs=None: every candidate gets a quarter of the runs first; a useless one stays there
    (fewer runs in its row) and cannot be chosen; the best gets the full runs."""
    candidates = {"gp": fq.GaussianProcessSurrogate(n_components=8), "contrarian": Contrarian(),
                  "gp-2": fq.GaussianProcessSurrogate(n_components=2)}
    cfg = configure_from_history(bank.history, 25, candidates=candidates, policies={"hybrid": fq.HybridSampler()},
                                 random_state=0, verbose=False)
    t = cfg.table.set_index("candidate")
    assert t.loc["contrarian", "runs"] < t["runs"].max() == cfg.n_runs
    assert t.loc["contrarian", "predicted_ess"] < 1 < min(t.loc["gp", "predicted_ess"], t.loc["gp-2", "predicted_ess"])
    assert cfg.choice in ("gp", "gp-2") and t.loc[cfg.choice, "runs"] == t["runs"].max()
    assert "first round" in str(cfg)
    assert capsys.readouterr().err == ""  # verbose=False: no progress bar
