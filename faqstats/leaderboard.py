"""Several models evaluated on one bank at once: a leaderboard with simultaneous intervals and rank intervals."""

import inspect
import numbers

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from ._progress import progress_bar
from ._validation import check_generator, check_scalar
from .estimator import PAIEstimator
from .adaptive_allocation import fit_adaptive
from .design import sample_mean_design
from .joint import JointResults, SampleMeans
from .sampling import UniformSampler
from .selection import select_configuration
from .shared_draws import fit_shared

__all__ = ["LeaderboardEstimator", "fit_independent", "model_budgets"]

#: select_configuration's options that from_history passes on (the rest are the estimator's parameters)
_CONFIGURE_OPTIONS = frozenset(inspect.signature(select_configuration).parameters) - {"history", "budget"}


def model_budgets(budget, K):
    """Each of K models' share of ``budget``: ``budget // K``, the first ``budget % K`` models one more."""
    return (np.full(K, budget // K) + (np.arange(K) < budget % K)).astype(int)


def fit_independent(board, models, names):
    """Run the independent design for ``board``: one PAI run per model on its share of the budget.

    Sets ``board.estimators_``, ``board.queries_`` and ``board.n_queries_``.

    Parameters
    ----------
    board : LeaderboardEstimator
    models : sequence of K arrays of shape (N,) or callables
    names : sequence of K str

    Returns
    -------
    JointResults
        The covariance is diagonal (independent runs).
    """
    K = len(models)
    budgets = model_budgets(board.budget, K)
    seeds = check_generator(board.random_state).spawn(K)
    sampler = board.sampler
    if sampler is None and board.predictor is None:
        sampler = UniformSampler()  # the sample means (a policy with scores needs a predictor)
    board.estimators_ = []
    with progress_bar(K, "models", board.verbose) as bar:
        for z, b, seed in zip(models, budgets, seeds):
            est = PAIEstimator(board.predictor, None if sampler is None else clone(sampler), int(b),
                               interval=board.interval, batch_size=board.batch_size, step_weights=board.step_weights,
                               predict_every=board.predict_every, random_state=seed)
            board.estimators_.append(est.fit(z))
            bar.update(1)
    fitted = board.estimators_
    board.queries_ = [e.queries_ for e in fitted]
    board.n_queries_ = np.array([e.n_queries_ for e in fitted])
    se = np.array([e.std_error_ for e in fitted])
    df = np.array([np.inf if e.result_.df is None else e.result_.df for e in fitted])
    means = None
    if sample_mean_design(board.predictor, sampler):  # each model its own uniform draws
        means = SampleMeans(fitted[0].result_.n_questions, shared=False)
    return JointResults(np.array([e.estimate_ for e in fitted]), np.diag(se**2), tuple(names),
                        board.n_queries_.copy(), board.simultaneous, df, sample_means=means)


class LeaderboardEstimator(BaseEstimator):
    """K models' accuracies from one budget, with intervals and ranks that hold for all of them at once.

    In the independent design each model is evaluated by its own PAI run: its estimate is exactly
    unbiased and the runs are independent, so the estimates' covariance is diagonal and the max-t
    intervals over all models (or all pairwise differences) are Sidak's. In the shared design every
    draw asks one question of all models, drawn from the mean of their own policies' laws: every
    estimate and difference is still exactly unbiased, and the estimates' full covariance (from the
    joint martingale of their increments) enters the intervals. The differences gain where the
    models' errors move together: much for the sample means (no predictor), little when a good
    predictor has already explained what the models share. ``result_`` is a
    :class:`~faqstats.joint.JointResults`: simultaneous intervals, differences, rank intervals and
    the set of models that may be best.

    Parameters
    ----------
    predictor : Predictor or None, default=None
        A fitted predictor, shared by every model's run (as in :class:`~faqstats.PAIEstimator`).
    sampler : Sampler or None, default=None
        The policy of every model (cloned for each run); ``None``: ``HybridSampler()``, or
        ``UniformSampler()`` without a predictor (the sample means).
    budget : int, default=100
        Questions asked in all, over all models: split evenly in the independent design (the first
        models get the remainder); ``budget // K`` draws in the shared design, each asked of all K.
    design : {"independent", "shared", "adaptive"}, default="independent"
        How the questions are drawn: each model its own (``"independent"``), one question for all
        models at each draw (``"shared"``), or ``"adaptive"`` (see ``stop`` and ``alpha``).
    stop : {"budget", "best", "rank-width"}, default="budget"
        When the adaptive design stops: at the budget (each model its own draws, the next query to the
        leader or its challenger), once every model but one has been shown not to be the best by a wealth
        betting against it (``"best"``), or once every rank interval is at most ``rank_width`` wide
        (``"rank-width"``); the last two ask one question of every model still in doubt at a time.
    rank_width : int or None, default=None
        The widest rank interval (``worst - best``) that ``stop="rank-width"`` accepts.
    alpha : float in (0, 1), default=0.05
        The adaptive design's joint level. With ``stop="budget"`` each model's confidence sequence holds
        at ``1 - alpha / K``; with ``"best"`` the wealths get ``0.9 alpha`` and each accuracy's sequence
        ``0.05 alpha / K``, each difference's ``0.05 alpha / (K (K - 1) / 2)``; with ``"rank-width"`` each
        accuracy's ``0.1 alpha / K`` and each difference's ``0.9 alpha / (K (K - 1) / 2)``.
    interval : str or IntervalRule, default="robust-t"
        Each run's interval rule (its variance estimate enters the joint intervals).
    simultaneous : {"max-t", "bonferroni"}, default="max-t"
        How the joint intervals are made.
    batch_size : int, default=1
        Questions drawn per round; the posteriors learn between rounds only.
    step_weights : array-like of shape (>= budget // K + 1,) or None, default=None
        Every model's increment weights, as in :class:`~faqstats.PAIEstimator` (the independent design only).
    predict_every : int, default=1
        As in :class:`~faqstats.PAIEstimator` (the independent design only).
    random_state : int, Generator or None, default=None
        Seeds every model's run.
    verbose : bool, default=False
        A progress bar over the models (over the draws in the shared design).

    Attributes
    ----------
    result_ : JointResults
        The leaderboard.
    estimators_ : list of PAIEstimator or None
        Each model's fitted run (independent design; ``None`` in the shared design).
    estimate_ : ndarray of shape (K,)
        The models' estimates.
    stop_reason_ : str
        Why the adaptive design stopped: ``"budget"``, ``"best"``, ``"rank-width"`` or ``"exhausted"``
        (every question asked of every model).
    allocation_ : ndarray of int
        The adaptive design's models in the order they were asked.
    n_queries_ : ndarray of shape (K,)
        Distinct questions asked of each model.
    queries_ : list of structured ndarray, or structured ndarray
        The draws: each model's ``queries_`` (independent design), or one row per shared draw with
        ``question``, ``probability`` and each model's ``outcome``, ``increment`` and ``prediction``
        (fields of shape ``(K,)``).

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=60, n_questions=300, n_new=4, random_state=0)
    >>> fm = fq.LogisticFactorModel(n_components=3, max_iter=100, random_state=0).fit(bank.history)
    >>> board = LeaderboardEstimator(fm, budget=240, random_state=0).fit(bank.new_outcomes, names=list("abcd"))
    >>> board.result_.conf_int().shape, board.result_.rank_intervals().columns.tolist()
    ((4, 2), ['best', 'worst'])
    >>> shared = LeaderboardEstimator(fm, budget=240, design="shared", random_state=0).fit(bank.new_outcomes)
    >>> shared.n_queries_.tolist(), shared.queries_["increment"].shape
    ([60, 60, 60, 60], (60, 4))
    """

    def __init__(self, predictor=None, sampler=None, budget=100, *, design="independent", stop="budget", rank_width=None,
                 alpha=0.05, interval="robust-t", simultaneous="max-t", batch_size=1, step_weights=None,
                 predict_every=1, random_state=None, verbose=False):
        self.predictor = predictor
        self.sampler = sampler
        self.budget = budget
        self.design = design
        self.stop = stop
        self.rank_width = rank_width
        self.alpha = alpha
        self.interval = interval
        self.simultaneous = simultaneous
        self.batch_size = batch_size
        self.step_weights = step_weights
        self.predict_every = predict_every
        self.random_state = random_state
        self.verbose = verbose

    @classmethod
    def from_history(cls, history, budget, n_models, *, random_state=0, **params):
        """A leaderboard configured from the history alone, as :meth:`PAIEstimator.from_history
        <faqstats.PAIEstimator.from_history>` configures one model's run.

        The predictor and policy are those :func:`~faqstats.configure_from_history` picks for one
        model's share of the budget, ``ceil(budget / n_models)`` queries (the draws of the shared design:
        ``budget // n_models``); the independent design also takes its step weights and ``predict_every``.

        Parameters
        ----------
        history : array-like of shape (n_models_seen, N)
            Earlier models' outcomes (NaN = not observed).
        budget : int
            Queries over all models (the estimator's ``budget``).
        n_models : int
            K, the models the leaderboard will evaluate.
        random_state : int, Generator or None, default=0
            Seeds the configuration (0 for ``None`` or a Generator) and the estimator.
        **params
            Keyword arguments of :func:`~faqstats.configure_from_history` (``n_runs``, ``candidates``,
            ``policies``, ``verbose``, ...), and the estimator's other parameters (``design``, ``interval``, ...).

        Returns
        -------
        LeaderboardEstimator
            Unfitted.

        Examples
        --------
        >>> import faqstats as fq
        >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_new=3, n_components=2, random_state=0)
        >>> board = LeaderboardEstimator.from_history(bank.history, budget=60, n_models=3, design="shared",
        ...                                           n_runs=50, verbose=False)
        >>> board.fit(bank.new_outcomes).n_queries_.tolist()
        [20, 20, 20]
        """
        n_models = int(check_scalar(n_models, "n_models", kind=numbers.Integral, low=2))
        check_scalar(budget, "budget", kind=numbers.Integral, low=2 * n_models)
        options = {k: params.pop(k) for k in list(params) if k in _CONFIGURE_OPTIONS}
        seed = 0 if random_state is None or isinstance(random_state, np.random.Generator) else random_state
        shared = params.get("design", "independent") != "independent"
        share = int(budget) // n_models if shared else -(-int(budget) // n_models)  # the largest model's share
        chosen = select_configuration(history, share, random_state=seed, **options).params
        if not shared:  # each model's own run, as PAIEstimator.from_history would configure it
            params = {"step_weights": chosen.get("step_weights"), "predict_every": chosen.get("predict_every", 1),
                      **params}
        return cls(chosen["predictor"], chosen["sampler"], budget, random_state=random_state, **params)

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
        if self.design != "independent" and (self.step_weights is not None or self.predict_every != 1):
            raise ValueError(f"step_weights and predict_every apply to the independent design (each model its own "
                             f"PAIEstimator run), not to design={self.design!r}.")
        if self.design == "shared":
            self.result_ = fit_shared(self, models, names)
            self.estimate_ = self.result_.estimate
            return self
        if self.design == "adaptive":
            self.result_, self.allocation_, self.stop_reason_ = fit_adaptive(self, models, names)
            self.estimate_, self.n_queries_ = self.result_.estimate, self.result_.n_queries
            return self
        self.result_ = fit_independent(self, models, names)
        self.estimate_ = self.result_.estimate
        return self

    def conf_int(self, alpha=None, simultaneous=True):
        """:meth:`JointResults.conf_int <faqstats.joint.JointResults.conf_int>` of the last fit.

        Parameters
        ----------
        alpha : float in (0, 1) or None, default=None
            One minus the (joint) level; ``None``: 0.05, or the adaptive design's ``alpha``.
        simultaneous : bool, default=True
            Intervals for all models at once.

        Returns
        -------
        pandas.DataFrame
            Indexed by model: ``lower``, ``upper``.
        """
        check_is_fitted(self, "result_")
        return self.result_.conf_int(alpha, simultaneous)

    def summary(self, alpha=None):
        """:meth:`JointResults.summary <faqstats.joint.JointResults.summary>` of the last fit.

        Parameters
        ----------
        alpha : float in (0, 1) or None, default=None
            One minus the joint level; ``None``: 0.05, or the adaptive design's ``alpha``.

        Returns
        -------
        statsmodels.iolib.summary2.Summary
        """
        check_is_fitted(self, "result_")
        return self.result_.summary(alpha)
