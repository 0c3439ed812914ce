"""The shared design of a leaderboard: every draw asks one question of all K models, with one known probability.

Each model keeps its own posterior and PAI increment; the common law is the mean of the models' own policy laws,
so every estimate and every difference is exactly unbiased, and the K increments' joint martingale gives the
estimates' full covariance (docs/statistics.md, "Paired comparisons", generalised to K models).
"""

from itertools import combinations

import numpy as np

from ._engine import Oracle, QueryLoop, RoundDrawing, SequentialRun
from ._inference import census_mean, fpc_mean, interval_df, pai_inference
from ._progress import progress_bar
from ._validation import check_generator
from .design import check_design, outcomes_bank_size, sample_mean_design
from .joint import JointResults, SampleMeans
from .loop_setup import predictor_for
from .sampling import HybridSampler, Sampler, UniformSampler

__all__ = ["SharedRun", "fit_shared", "shared_inference", "shared_query_dtype"]


def shared_query_dtype(n_models):
    """The dtype of :attr:`SharedRun.table`'s rows: the question, ``q_t`` and each model's outcome, increment and
    prediction (fields of shape ``(n_models,)``).

    Parameters
    ----------
    n_models : int
        K, the models answering every draw.

    Returns
    -------
    numpy.dtype

    Examples
    --------
    >>> shared_query_dtype(3).names
    ('question', 'probability', 'outcome', 'increment', 'prediction')
    """
    shape = (int(n_models),)
    return np.dtype([("question", np.int64), ("probability", np.float64), ("outcome", np.float64, shape),
                     ("increment", np.float64, shape), ("prediction", np.float64, shape)])


class SharedRun(RoundDrawing):
    """K models answering the same draws: a :class:`~faqstats._engine.SequentialRun` per model (its own
    posterior and increments) and one law, the mean of theirs, that a :class:`~faqstats._engine.QueryLoop` drives.

    Parameters
    ----------
    sampler : Sampler
        Every model's policy.
    predictors : sequence of posteriors
        One engine posterior per model (:func:`faqstats.loop_setup.predictor_for`).
    n_questions : int
        The bank size N.
    budget : int
        Draws T; each asks one question of every model.

    Examples
    --------
    >>> import faqstats as fq
    >>> from faqstats.loop_setup import predictor_for
    >>> run = SharedRun(fq.UniformSampler(), [predictor_for(None, 4), predictor_for(None, 4)], 4, 2)
    >>> run.law()
    array([0.25, 0.25, 0.25, 0.25])
    >>> phi = run.record(1, 0.25, (1.0, 0.0))
    >>> phi.tolist(), run.table()["outcome"].tolist()
    ([1.0, 0.0], [[1.0, 0.0]])
    """

    design = "shared"
    unit = "question"  # (named in replay_round's error)

    def __init__(self, sampler, predictors, n_questions, budget):
        self.sampler = sampler
        self.runs = [SequentialRun(sampler, p, n_questions, budget) for p in predictors]
        first = self.runs[0]
        self.n_models = len(self.runs)
        self.n_questions, self.budget, self.replace = first.n_questions, first.budget, first.replace
        self.records = []

    @property
    def available(self):
        """The askable questions (the same for every model)."""
        return self.runs[0].available

    @property
    def step(self):
        """The next draw, 1-based."""
        return self.runs[0].step

    @property
    def done(self):
        """Whether all ``budget`` draws are recorded."""
        return self.runs[0].done

    @property
    def progress(self):
        """Draws recorded."""
        return self.runs[0].progress

    def round_size(self, requested):
        """Draws in the next round: ``requested``, or fewer at the end of the budget.

        Parameters
        ----------
        requested : int

        Returns
        -------
        int
        """
        return self.runs[0].round_size(requested)

    def law(self):
        """``q_t`` of the round's first draw: the mean of the models' own policy laws.

        Every model's own law is a valid law on the askable questions with the uniform floor ``tau / |R|`` (or
        whatever the policy guarantees), so their mean is one too, with the same floor: every weight
        ``1 / q_t`` stays bounded, the probability of each question is known exactly, and draws go where any
        model's own policy would send them. One law for all makes every model's increment exactly unbiased
        with the same draw, hence every difference too.

        Returns
        -------
        ndarray of shape (N,)
        """
        return np.mean([run.law() for run in self.runs], axis=0)

    tracker = None  # (no stratified design: RoundDrawing draws from the common law alone)

    def increment_range(self, law):
        """Each model's bounds on its next increment whatever ``law`` draws.

        Parameters
        ----------
        law : ndarray of shape (N,)

        Returns
        -------
        low : ndarray of shape (K,)
        high : ndarray of shape (K,)
        """
        low, high = zip(*(run.increment_range(law) for run in self.runs))
        return np.array(low), np.array(high)

    def record(self, question, probability, outcome):
        """Record every model's answer to ``question``.

        Parameters
        ----------
        question : int
        probability : float
            ``q_t(question)``, the same for every model.
        outcome : sequence of K floats

        Returns
        -------
        ndarray of shape (K,)
            The models' increments ``phi_t``.
        """
        outcome = np.asarray(outcome, dtype=float).reshape(-1)
        if outcome.size != self.n_models:
            raise ValueError(f"a shared draw needs one outcome per model ({self.n_models}), got {outcome.size}.")
        phi = np.array([run.record(question, probability, z) for run, z in zip(self.runs, outcome)])
        predictions = np.array([run.records[-1][4] for run in self.runs])
        self.records.append((question, probability, outcome, phi, predictions))
        return phi

    def end_round(self, questions, outcomes):
        """Each model's posterior learns its own answers of the round, in draw order.

        Parameters
        ----------
        questions : sequence of int
        outcomes : sequence of K-sequences
        """
        for k, run in enumerate(self.runs):
            run.end_round(questions, [z[k] for z in outcomes])

    def table(self):
        """The draws so far.

        Returns
        -------
        structured ndarray of :func:`shared_query_dtype`
        """
        return np.array(self.records, dtype=shared_query_dtype(self.n_models))


def _psd(cov):
    """``cov`` symmetrised, with rounding's tiny negative eigenvalues set to zero."""
    cov = (cov + cov.T) / 2
    w, U = np.linalg.eigh(cov)
    if w.size == 0 or w.min() >= 0:
        return cov
    # in exact arithmetic the polarised covariance is R' diag(c) R with weights c >= 0 (pai_inference's variance is
    # a weighted sum of squared residuals, bilinear in the increments): a negative eigenvalue is rounding only
    if w.min() < -1e-9 * max(float(w.max()), np.finfo(float).tiny):
        raise FloatingPointError(f"the shared design's covariance has eigenvalue {w.min()!r}: not a rounding error.")
    cov = (U * np.clip(w, 0.0, None)) @ U.T
    np.fill_diagonal(cov, np.maximum(np.diag(cov), 0.0))  # (a zero variance stays zero, not -1e-19)
    return cov


def shared_inference(increments, *, interval="robust-t", n_questions=None, census=None):
    """Estimates, covariance and degrees of freedom of K models' PAI increments on shared draws.

    Each model's estimate, variance and ``df`` are :func:`~faqstats._inference.pai_inference`'s of its own
    increments; the covariance of models ``a`` and ``b`` is ``(v_a + v_b - v_{a-b}) / 2``, with ``v_{a-b}`` the
    variance of the difference increments (the bilinear form of the same estimator: exactly unbiased whenever the
    variances are, and positive semi-definite), whose own ``df`` is the pair's.

    Parameters
    ----------
    increments : array-like of shape (T, K)
        Every draw's K increments.
    interval : str or IntervalRule, default="robust-t"
        The rule whose degrees of freedom each model and each pair gets.
    n_questions : int or None, default=None
        The bank size for draws without replacement (``None``: with replacement).
    census : array-like of shape (K,) or None, default=None
        Without replacement with every question asked: each model's exact mean.

    Returns
    -------
    estimate : ndarray of shape (K,)
    cov : ndarray of shape (K, K)
    df : ndarray of shape (K,)
        ``inf``: normal.
    pair_df : ndarray of shape (K, K)
        The degrees of freedom of each difference's interval (``df`` on the diagonal).

    Examples
    --------
    >>> from faqstats import martingale_variance
    >>> phi = np.array([[0.2, 0.3], [0.9, 0.7], [0.4, 0.6]])
    >>> est, cov, df, pair_df = shared_inference(phi)
    >>> bool(np.isclose(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1], martingale_variance(phi[:, 0] - phi[:, 1])))
    True
    """
    phi = np.asarray(increments, dtype=float).T  # (K, T): one row per model
    K = phi.shape[0]
    est, var, df, _ = pai_inference(phi, interval=interval, n_questions=n_questions, census=census)
    cov, pair_df = np.diag(var), np.diag(np.asarray(df, dtype=float))
    pairs = list(combinations(range(K), 2))
    if pairs:
        a, b = np.array(pairs).T
        _, var_d, df_d, _ = pai_inference(phi[a] - phi[b], interval=interval, n_questions=n_questions)
        cov[a, b] = cov[b, a] = (var[a] + var[b] - var_d) / 2
        pair_df[a, b] = pair_df[b, a] = df_d
    return np.asarray(est, dtype=float), _psd(cov), np.asarray(df, dtype=float), pair_df


def sample_mean_inference(outcomes, n_questions, interval="robust-t"):
    """Sample means of K models' answers to the same uniform draws without replacement, their finite-population
    covariance ``(1 - T / N) S / T`` (``S``: the sample covariance), each model's ``df`` and each pair's."""
    z = np.asarray(outcomes, dtype=float).T  # (K, T)
    K, T = z.shape
    est, var = fpc_mean(z, n_questions)
    cov = np.zeros((K, K)) if T == n_questions else (1.0 - T / n_questions) * np.cov(z, ddof=1) / T
    np.fill_diagonal(cov, var)  # pai's own (identical up to rounding): the same numbers as fpc_mean gives
    df = np.asarray(interval_df(interval, z - est[:, None]), dtype=float)
    pair_df = np.diag(df)
    for a, b in combinations(range(K), 2):
        d = z[a] - z[b]
        pair_df[a, b] = pair_df[b, a] = interval_df(interval, d[None] - d.mean())[0]
    return np.asarray(est, dtype=float), _psd(cov), df, pair_df


def new_shared_loop(board, n_questions, n_models):
    """A fresh :class:`~faqstats._engine.QueryLoop` over a :class:`SharedRun` of ``n_models`` for ``board``'s
    configuration (``budget // n_models`` draws)."""
    sampler = board.sampler
    if sampler is None:
        sampler = UniformSampler() if board.predictor is None else HybridSampler()
    if not isinstance(sampler, Sampler):
        raise TypeError(f"the shared design needs a sequential faqstats Sampler, got {type(sampler).__name__}.")
    draws = int(board.budget) // n_models
    sampler = check_design(sampler, board.predictor, n_questions, draws, board.batch_size, board.interval)
    predictors = [predictor_for(board.predictor, n_questions) for _ in range(n_models)]
    return QueryLoop(SharedRun(sampler, predictors, n_questions, draws), batch_size=board.batch_size)


def fit_shared(board, models, names):
    """Run the shared design for ``board`` on ``models`` (what ``LeaderboardEstimator.fit`` does for it).

    Sets ``board.queries_`` (the draws: :func:`shared_query_dtype`), ``board.n_queries_`` (per model) and
    ``board.estimators_`` (None).

    Parameters
    ----------
    board : LeaderboardEstimator
    models : sequence of K arrays of shape (N,) or callables
    names : sequence of K str

    Returns
    -------
    JointResults
    """
    K = len(models)
    n_questions = outcomes_bank_size(board.predictor, models)
    loop = new_shared_loop(board, n_questions, K)
    run = loop.run
    oracles = [Oracle(z, n_questions) for z in models]
    rng = check_generator(board.random_state)
    with progress_bar(run.budget, "draws", board.verbose) as bar:
        while not loop.done:
            questions = [d.question for d in loop.draw_round(rng)]
            answers = np.array([oracle.ask(questions) for oracle in oracles]).T  # (round, K)
            for z in answers:
                loop.record(z)
            bar.update(run.progress - bar.n)
    board.estimators_ = None  # (one run for all models)
    board.queries_ = run.table()
    board.n_queries_ = np.full(K, np.unique(board.queries_["question"]).size)
    return shared_results(board, run, names)


def shared_results(board, run, names):
    """The :class:`~faqstats.joint.JointResults` of a shared run's draws for ``board``'s configuration."""
    table = run.table()
    n_questions, T = run.n_questions, len(table)
    if sample_mean_design(board.predictor, run.sampler):
        est, cov, df, pair_df = sample_mean_inference(table["outcome"], n_questions, board.interval)
    else:
        census = None
        if not run.replace and T == n_questions:  # a census: each model's exact mean
            census = census_mean(table["outcome"].T, n_questions)
        est, cov, df, pair_df = shared_inference(table["increment"], interval=board.interval,
                                                 n_questions=None if run.replace else n_questions, census=census)
    n_queries = np.full(run.n_models, np.unique(table["question"]).size)
    means = SampleMeans(n_questions, shared=True) if sample_mean_design(board.predictor, run.sampler) else None
    return JointResults(est, cov, tuple(names), n_queries, board.simultaneous, df, pair_df=pair_df, sample_means=means)
