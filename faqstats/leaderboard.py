"""Several models evaluated on one bank at once: a leaderboard with simultaneous intervals and rank intervals."""

import numbers

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from ._progress import progress_bar
from ._validation import check_generator, check_scalar
from .estimator import PAIEstimator
from .adaptive_allocation import fit_adaptive
from .joint import JointResults
from .shared_draws import fit_shared

__all__ = ["LeaderboardEstimator"]


class LeaderboardEstimator(BaseEstimator):
    """K models' accuracies from one budget, with intervals and ranks that hold for all of them at once.

    Each model is evaluated by its own PAI run (the independent design): its estimate is exactly
    unbiased and the runs are independent, so the estimates' covariance is diagonal and the
    max-t intervals over all models (or all pairwise differences) are Sidak's. ``result_`` is a
    :class:`~faqstats.joint.JointResults`: simultaneous intervals, differences, rank intervals and
    the set of models that may be best.

    Parameters
    ----------
    predictor : Predictor or None, default=None
        A fitted predictor, shared by every model's run (as in :class:`~faqstats.PAIEstimator`).
    sampler : Sampler or None, default=None
        The policy of every run (cloned for each).
    budget : int, default=100
        Questions asked in all, over all models (split evenly; the first models get the remainder).
    design : {"independent", "shared", "adaptive"}, default="independent"
        TODO(design helpers): how the questions are drawn.
    stop : {"budget", "best"}, default="budget"
        When the adaptive design stops: at the budget, or once one model's lower bound exceeds every
        other's upper bound ("best"); it records ``stop_reason_``, ``n_queries_`` and ``allocation_``.
    alpha : float in (0, 1), default=0.05
        The adaptive design's joint level: each model's confidence sequence holds at ``1 - alpha / K``.
    interval : str or IntervalRule, default="robust-t"
        Each run's interval rule (its variance estimate enters the joint intervals).
    simultaneous : {"max-t", "bonferroni"}, default="max-t"
        How the joint intervals are made.
    random_state : int, Generator or None, default=None
        Seeds every model's run.
    verbose : bool, default=False
        A progress bar over the models.

    Attributes
    ----------
    result_ : JointResults
        The leaderboard.
    estimators_ : list of PAIEstimator
        Each model's fitted run.
    estimate_ : ndarray of shape (K,)
        The models' estimates.

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=300, n_new=4, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=3, max_iter=100, random_state=0).fit(bank.history)
    >>> board = LeaderboardEstimator(fm, budget=240, random_state=0).fit(bank.new_outcomes, names=list("abcd"))
    >>> board.result_.conf_int().shape, board.result_.rank_intervals().columns.tolist()
    ((4, 2), ['best', 'worst'])
    """

    def __init__(self, predictor=None, sampler=None, budget=100, *, design="independent", stop="budget", alpha=0.05,
                 interval="robust-t", simultaneous="max-t", random_state=None, verbose=False):
        self.predictor = predictor
        self.sampler = sampler
        self.budget = budget
        self.design = design
        self.stop = stop
        self.alpha = alpha
        self.interval = interval
        self.simultaneous = simultaneous
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, outcomes, y=None, names=None):
        """Evaluate every model and build the leaderboard.

        Parameters
        ----------
        outcomes : array-like of shape (K, N), or a sequence of K arrays or callables
            Each model's outcomes in [0, 1] (only the asked ones are read), or a function mapping
            question indices to that model's outcomes (as :meth:`PAIEstimator.fit` takes).
        y : None
            Ignored.
        names : sequence of str or None, default=None
            The models' names; ``None``: ``"0"``, ``"1"``, ...

        Returns
        -------
        self
        """
        models = list(outcomes) if not isinstance(outcomes, np.ndarray) else list(np.atleast_2d(outcomes))
        K = len(models)
        if K < 2:
            raise ValueError(f"a leaderboard needs at least 2 models, got {K}.")
        names = [str(k) for k in range(K)] if names is None else [str(n) for n in names]
        if len(names) != K or len(set(names)) != K:
            raise ValueError(f"names must be {K} distinct names, one per model; got {names!r}.")
        check_scalar(self.budget, "budget", kind=numbers.Integral, low=2 * K)
        if self.simultaneous not in ("max-t", "bonferroni"):
            raise ValueError(f"simultaneous must be 'max-t' or 'bonferroni', got {self.simultaneous!r}.")
        if self.design not in ("independent", "shared", "adaptive"):
            raise ValueError(f"design must be 'independent', 'shared' or 'adaptive', got {self.design!r}.")
        if self.design == "shared":
            self.result_ = fit_shared(self, models, names)  # TODO(shared helper): also sets estimators_/queries
            self.estimate_ = self.result_.estimate
            return self
        if self.design == "adaptive":
            self.result_, self.allocation_, self.stop_reason_ = fit_adaptive(self, models, names)
            self.estimate_, self.n_queries_ = self.result_.estimate, self.result_.n_queries
            return self
        budgets = np.full(K, self.budget // K) + (np.arange(K) < self.budget % K)
        seeds = check_generator(self.random_state).spawn(K)
        self.estimators_ = []
        with progress_bar(K, "models", self.verbose) as bar:
            for z, b, seed in zip(models, budgets, seeds):
                est = PAIEstimator(self.predictor, None if self.sampler is None else clone(self.sampler), int(b),
                                   interval=self.interval, random_state=seed)
                self.estimators_.append(est.fit(z))
                bar.update(1)
        self.estimate_ = np.array([e.estimate_ for e in self.estimators_])
        se = np.array([e.std_error_ for e in self.estimators_])
        self.result_ = JointResults(self.estimate_, np.diag(se**2), tuple(names),
                                    np.array([e.n_queries_ for e in self.estimators_]), self.simultaneous,
                                    np.array([np.inf if e.result_.df is None else e.result_.df for e in self.estimators_]))
        return self

    def conf_int(self, alpha=0.05, simultaneous=True):
        """:meth:`JointResults.conf_int <faqstats.joint.JointResults.conf_int>` of the last fit.

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05
            One minus the (joint) level.
        simultaneous : bool, default=True
            Intervals for all models at once.

        Returns
        -------
        pandas.DataFrame
            Indexed by model: ``lower``, ``upper``.
        """
        check_is_fitted(self, "result_")
        return self.result_.conf_int(alpha, simultaneous)

    def summary(self, alpha=0.05):
        """:meth:`JointResults.summary <faqstats.joint.JointResults.summary>` of the last fit.

        Parameters
        ----------
        alpha : float in (0, 1), default=0.05
            One minus the joint level.

        Returns
        -------
        statsmodels.iolib.summary2.Summary
        """
        check_is_fitted(self, "result_")
        return self.result_.summary(alpha)
