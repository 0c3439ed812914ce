"""A resumable leaderboard: several models evaluated on one bank, each by its own :class:`EvaluationSession`,
with :class:`~faqstats.LeaderboardEstimator`'s budgets and seeds, so that the finished sessions give its
:class:`~faqstats.joint.JointResults`. The directory holds ``leaderboard.json`` and a session per model."""

import numbers
import os
import re
from pathlib import Path

import numpy as np
from sklearn.base import clone

from .._validation import check_generator
from ..io.checks import header, read_json, utc_now, write_json
from ..design import sample_mean_design
from ..joint import JointResults, SampleMeans
from ..leaderboard import model_budgets
from ._session import EvaluationSession
from ._store import MODEL_FILE
from .model_based import model_based_leaderboard

__all__ = ["LeaderboardSession"]

MANIFEST_FILE = "leaderboard.json"
MANIFEST_FORMAT = "faqstats.leaderboard_session"
MANIFEST_FORMAT_VERSION = 1


def _check_names(names):
    """``names`` as a list of at least two distinct, non-blank strings."""
    if isinstance(names, (str, bytes)) or not hasattr(names, "__iter__"):
        raise TypeError(f"names must be a sequence of model names, got {names!r}.")
    names = list(names)
    bad = [n for n in names if not isinstance(n, str) or not n.strip() or n != n.strip()]
    if bad:
        raise ValueError(f"model names must be non-blank strings without leading or trailing blanks, got {bad[0]!r}.")
    if len(names) < 2:
        raise ValueError(f"a leaderboard needs at least 2 models, got {len(names)}: {names!r}.")
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"model names must be distinct; {name!r} is given twice.")
        seen.add(name)
    return names


def _check_budget(budget, K):
    """The total budget: an int of at least 2 queries per model."""
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral):
        raise TypeError(f"budget must be an int (the queries over all models), got {budget!r}.")
    if budget < 2 * K:
        raise ValueError(f"budget={budget} is too small for {K} models: each model needs at least 2 queries "
                         f"(a budget of at least {2 * K}).")
    return int(budget)


def is_leaderboard(directory):
    """Whether ``directory`` holds a leaderboard session (its manifest)."""
    return (Path(os.fspath(directory)) / MANIFEST_FILE).exists()


def _folder(k, name):
    """The folder of model ``k``'s session: its index and its name made safe for any file system."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:40]
    return f"{k:02d}-{slug}" if slug else f"{k:02d}"


class LeaderboardSession:
    """Several models evaluated on one bank at once, each by a resumable session; the leaderboard when done.

    A leaderboard session is a directory: ``leaderboard.json`` (the models' names, the total
    budget, the design and the seed; written once, atomically) and one
    :class:`~faqstats.session.EvaluationSession` per model in a folder of its own, each with the
    share of the budget and the random generator that :class:`~faqstats.LeaderboardEstimator`
    (independent design) gives that model. Every model is driven on its own (:meth:`session`),
    in any order and across processes and crashes, as a one-model session is. Once every
    model's session is done, :meth:`result` is the estimator's ``result_``: with
    ``batch_size=1`` the same draws, estimates and intervals, to the last digit.

    Open an existing one with ``LeaderboardSession(directory)`` or :meth:`load`; start one
    with :meth:`create`.

    Parameters
    ----------
    directory : str or os.PathLike
        A directory written by :meth:`create`.
    sampler : Sampler, optional
        Needed only for a sampler class outside :mod:`faqstats.sampling` (as
        :meth:`EvaluationSession.load <faqstats.session.EvaluationSession.load>`).
    allow_unchecked : bool, default=False
        As :meth:`EvaluationSession.load <faqstats.session.EvaluationSession.load>`.

    See Also
    --------
    faqstats.LeaderboardEstimator : The same evaluation in one call, outcomes at hand.
    faqstats.session.EvaluationSession : One model's resumable evaluation.

    Examples
    --------
    >>> import tempfile
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=40, n_questions=60, n_new=3, n_components=3, random_state=0)
    >>> fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    >>> folder = tempfile.mkdtemp()
    >>> board = LeaderboardSession.create(folder + "/board", fm, ["a", "b", "c"], budget=30, random_state=0)
    >>> for name, z in zip(board.names, bank.new_outcomes):
    ...     s = board.session(name)
    ...     while not s.done:
    ...         ids, _ = s.next_questions()
    ...         s.record(ids, [z[i] for i in ids])
    >>> est = fq.LeaderboardEstimator(fm, budget=30, random_state=0).fit(bank.new_outcomes, names=["a", "b", "c"])
    >>> bool(np.array_equal(LeaderboardSession.load(folder + "/board").result().estimate, est.result_.estimate))
    True
    """

    def __init__(self, directory, *, sampler=None, allow_unchecked=False):
        self._directory = Path(os.fspath(directory))
        path = self._directory / MANIFEST_FILE
        if not (path.exists() or path.is_symlink()):
            if (self._directory / "session.json").exists():
                raise FileNotFoundError(f"{self._directory} holds a one-model session, not a leaderboard "
                                        f"({MANIFEST_FILE} is missing): open it with EvaluationSession.load.")
            raise FileNotFoundError(f"No faqstats leaderboard session in {self._directory} ({MANIFEST_FILE} is "
                                    "missing).")
        doc = read_json(path, "leaderboard session", MANIFEST_FORMAT, MANIFEST_FORMAT_VERSION)
        try:
            names = _check_names(doc["names"])
            folders, budgets = list(doc["folders"]), [int(b) for b in doc["budgets"]]
            if len(folders) != len(names) or len(budgets) != len(names) or sum(budgets) != doc["budget"]:
                raise ValueError("names, folders and budgets do not match")
            if doc["design"] != "independent":
                raise ValueError(f"unknown design {doc['design']!r}")
            if any(not isinstance(f, str) or Path(f).name != f or f in ("", ".", "..") for f in folders):
                raise ValueError("a model's folder is not a plain folder name")
            self._manifest = doc
        except (KeyError, TypeError, ValueError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise ValueError(f"{path}: not a valid leaderboard manifest ({message}).") from exc
        self._sessions = {}
        predictor = None  # the first model's, as stored (its arrays' hashes and parameters)
        for name, folder, budget in zip(names, folders, budgets):
            where = self._directory / folder
            session = EvaluationSession.load(where, sampler=sampler, allow_unchecked=allow_unchecked)
            if session.budget != budget or session.random_state != doc["random_state"]:
                raise ValueError(f"{where}: the session of model {name!r} is not the one {MANIFEST_FILE} describes "
                                 f"(budget {session.budget}, seed {session.random_state}; expected {budget} and "
                                 f"{doc['random_state']}).")
            model = {k: v for k, v in (session.model_metadata or {}).items() if k != "created_utc"}
            if predictor is not None and model != predictor:
                raise ValueError(f"{where}: model {name!r} was evaluated with another predictor than "
                                 f"{names[0]!r} (its {MODEL_FILE} differs): a leaderboard shares one.")
            predictor = model
            self._sessions[name] = session

    @classmethod
    def load(cls, directory, *, sampler=None, allow_unchecked=False):
        """Resume the leaderboard session saved in ``directory``: ``LeaderboardSession(directory)``.

        Parameters
        ----------
        directory : str or os.PathLike
            A directory written by :meth:`create`.
        sampler : Sampler, optional
            Needed only for a sampler class outside :mod:`faqstats.sampling`.
        allow_unchecked : bool, default=False
            As :meth:`EvaluationSession.load <faqstats.session.EvaluationSession.load>`.

        Returns
        -------
        LeaderboardSession
        """
        return cls(directory, sampler=sampler, allow_unchecked=allow_unchecked)

    @classmethod
    def create(cls, directory, predictor, names, budget, question_ids=None, *, sampler=None, batch_size=1,
               alpha=0.05, interval="robust-t", simultaneous="max-t", step_weights=None, predict_every=1,
               random_state=None):
        """Start a leaderboard session in ``directory``: one session per model, written before the manifest.

        Model ``k`` gets :class:`~faqstats.LeaderboardEstimator`'s share of ``budget`` (``budget // K``,
        the first ``budget % K`` models one more) and its generator, the ``k``-th of
        ``numpy.random.default_rng(random_state).spawn(K)``.

        Parameters
        ----------
        directory : str or os.PathLike
            Where the leaderboard is written (``FileExistsError`` if it holds one, or a session).
        predictor : fitted predictor, path or None
            As :class:`~faqstats.session.EvaluationSession` takes it; shared by every model.
        names : sequence of str
            The models' names: at least two, distinct.
        budget : int
            Questions asked in all, over all models (at least 2 per model).
        question_ids : sequence of str or of int, optional
            As :class:`~faqstats.session.EvaluationSession` takes them.
        sampler : Sampler, optional
            Every model's policy (cloned for each; default ``HybridSampler()``, as the estimator's).
        batch_size : int, default=1
            Draws per round of each model. With 1 the draws are the estimator's; with more, each
            model's are those of ``PAIEstimator(..., batch_size=batch_size)`` with the same seed.
        alpha : float in (0, 1), default=0.05
            Level of the intervals :meth:`status` reports.
        interval : str or IntervalRule, default="robust-t"
            Each model's interval rule (its variance estimate enters the joint intervals).
        simultaneous : {"max-t", "bonferroni"}, default="max-t"
            How the joint intervals are made.
        step_weights : array-like or None, default=None
            Every model's increment weights, as :class:`~faqstats.LeaderboardEstimator` takes them.
        predict_every : int, default=1
            As :class:`~faqstats.LeaderboardEstimator` takes it.
        random_state : int or None, default=None
            Seed of every model's draws (``None``: a fresh one, stored).

        Returns
        -------
        LeaderboardSession
        """
        names = _check_names(names)
        K = len(names)
        budget = _check_budget(budget, K)
        if simultaneous not in ("max-t", "bonferroni"):
            raise ValueError(f"simultaneous must be 'max-t' or 'bonferroni', got {simultaneous!r}.")
        if random_state is None:
            random_state = int(np.random.SeedSequence().entropy)
        if isinstance(random_state, bool) or not isinstance(random_state, numbers.Integral) or random_state < 0:
            raise TypeError(f"random_state must be a non-negative int seed (or None for a fresh one), got "
                            f"{random_state!r}; a leaderboard session stores its seed to resume exactly.")
        if isinstance(directory, str) and not directory.strip():
            raise ValueError(f"directory must name a directory, got {directory!r}.")
        directory = Path(os.fspath(directory))
        if directory.exists() and not directory.is_dir():
            raise ValueError(f"{directory} is not a directory: a leaderboard lives in a directory of its own.")
        if is_leaderboard(directory) or (directory / "session.json").exists():
            kind = "LeaderboardSession" if is_leaderboard(directory) else "EvaluationSession"
            raise FileExistsError(f"{directory} already holds a faqstats session; resume it with {kind}.load.")
        folders = [_folder(k, name) for k, name in enumerate(names)]
        left = [f for f in folders if (directory / f).exists()]
        if left:
            raise FileExistsError(f"{directory} holds {left[0]} but no {MANIFEST_FILE}: a leaderboard whose creation "
                                  "was interrupted, or other files. Remove them (or choose another directory) and "
                                  "create it again.")
        budgets = model_budgets(budget, K)
        generators = check_generator(random_state).spawn(K)  # as LeaderboardEstimator.fit seeds its runs
        for folder, b, generator in zip(folders, budgets, generators):
            session = EvaluationSession.create(directory / folder, predictor, question_ids,
                                               sampler=None if sampler is None else clone(sampler), budget=int(b),
                                               batch_size=batch_size, alpha=alpha, interval=interval,
                                               step_weights=step_weights, predict_every=predict_every,
                                               random_state=int(random_state))
            # the model's own generator (a child of the seed, which no int seed gives), saved before any draw
            session.reseed(generator)
        doc = {**header(MANIFEST_FORMAT, MANIFEST_FORMAT_VERSION), "created_utc": utc_now(),
               "design": "independent", "names": names, "folders": folders, "budget": budget,
               "budgets": budgets.tolist(), "random_state": int(random_state), "simultaneous": simultaneous,
               "seeding": "model k draws with numpy.random.default_rng(random_state).spawn(K)[k]"}
        write_json(directory / MANIFEST_FILE, doc, indent=1)  # last: a leaderboard exists once this is written
        return cls(directory, sampler=sampler)

    @property
    def directory(self):
        """Where the leaderboard is saved (``pathlib.Path``)."""
        return self._directory

    @property
    def names(self):
        """The models' names, in the order given (tuple of str)."""
        return tuple(self._sessions)

    @property
    def budget(self):
        """Questions asked in all, over all models (int)."""
        return int(self._manifest["budget"])

    @property
    def budgets(self):
        """Each model's share of the budget (ndarray of int, in the order of :attr:`names`)."""
        return np.array(self._manifest["budgets"], dtype=int)

    @property
    def random_state(self):
        """The seed of every model's draws (int)."""
        return int(self._manifest["random_state"])

    @property
    def simultaneous(self):
        """How the joint intervals are made: ``"max-t"`` or ``"bonferroni"``."""
        return self._manifest["simultaneous"]

    @property
    def alpha(self):
        """Level of the intervals :meth:`status` reports (the models' sessions')."""
        return self._sessions[self.names[0]].alpha

    @property
    def design(self):
        """How the questions are drawn: ``"independent"`` (each model its own draws)."""
        return self._manifest["design"]

    @property
    def done(self):
        """Whether every model's session is done."""
        return all(s.done for s in self._sessions.values())

    @property
    def unfinished(self):
        """The names of the models whose session is not done (list of str)."""
        return [name for name, s in self._sessions.items() if not s.done]

    def session(self, name):
        """Model ``name``'s :class:`~faqstats.session.EvaluationSession`: ask it, record its answers.

        Parameters
        ----------
        name : str
            One of :attr:`names`.

        Returns
        -------
        EvaluationSession
        """
        try:
            return self._sessions[name]
        except (KeyError, TypeError):
            raise ValueError(f"unknown model {name!r}: the leaderboard's models are "
                             f"{', '.join(map(repr, self.names))}.") from None

    def result(self, partial=False):
        """The leaderboard: every model's estimate, with simultaneous intervals and rank intervals.

        Once every session is done this is :class:`~faqstats.LeaderboardEstimator`'s ``result_``.
        Before, it is refused, unless ``partial``: then it is built from each model's answers so
        far (at least two each), whose running intervals are not valid to stop on when they look
        narrow.

        Parameters
        ----------
        partial : bool, default=False
            Also give the leaderboard while some models are unfinished.

        Returns
        -------
        JointResults
        """
        if not partial and not self.done:
            raise ValueError(f"the leaderboard is not finished: model(s) {', '.join(map(repr, self.unfinished))} "
                             "still have questions to ask; finish them, or pass partial=True for the leaderboard "
                             "so far.")
        short = [name for name, s in self._sessions.items() if s.n_draws < 2]
        if short:
            raise ValueError(f"a leaderboard needs at least two recorded answers of every model; "
                             f"{', '.join(map(repr, short))} ha{'s' if len(short) == 1 else 've'} fewer.")
        results = [s.result() for s in self._sessions.values()]
        sessions = list(self._sessions.values())
        means = None
        if all(sample_mean_design(s.predictor, s.sampler) for s in sessions):  # each model its own uniform draws
            means = SampleMeans(sessions[0].n_questions, shared=False)
        return JointResults(np.array([r.estimate for r in results]), np.diag([r.std_error**2 for r in results]),
                            self.names, np.array([s.n_queries for s in sessions]), self.simultaneous,
                            np.array([np.inf if r.df is None else r.df for r in results]), sample_means=means)

    def model_based(self, history, **params):
        """Every model's model-based estimate, its interval calibrated on ``history`` by the sessions' own design,
        at a level that holds for all models at once (:func:`~faqstats.session.model_based.model_based_leaderboard`).

        Parameters
        ----------
        history : array-like of shape (n_models, N)
            The history the sessions' predictor was fitted on (NaN where not observed).
        **params
            Other :class:`~faqstats.ModelBasedEstimator` parameters (``predictor``, ``check_level``, ...).

        Returns
        -------
        pandas.DataFrame
            Indexed by model: the model-based and design-based estimates and intervals, the check's flag and
            the recommended interval.
        """
        if not self.done:
            raise ValueError(f"the leaderboard is not finished: model(s) {', '.join(map(repr, self.unfinished))} "
                             "still have questions to ask; a model-based estimate needs every session finished.")
        return model_based_leaderboard(self._sessions, history, alpha=self.alpha, **params)

    def status(self):
        """A JSON-serialisable summary: every model's progress and, once each has two answers, the leaderboard.

        Returns
        -------
        dict
            The configuration, one row per model (``models``), ``done``, ``unfinished``, and ``leaderboard``
            (rows of :meth:`JointResults.to_frame <faqstats.joint.JointResults.to_frame>`, most accurate first,
            with ``may_be_best``), None before every model has two answers; ``partial`` says whether some
            model is unfinished.
        """
        rows = []
        for name, s in self._sessions.items():
            res = s.result() if s.n_draws >= 2 else None
            rows.append({"model": name, "directory": str(s.directory), "budget": s.budget, "n_draws": s.n_draws,
                         "n_queries": s.n_queries, "n_answers": s.n_answers, "pending": s.pending.ids,
                         "done": s.done, "stop_reason": s.stop_reason,
                         "estimate": None if res is None else res.estimate,
                         "std_error": None if res is None else res.std_error})
        board = None
        if all(s.n_draws >= 2 for s in self._sessions.values()):
            joint = self.result(partial=True)
            frame = joint.to_frame(self.alpha)
            board = {"rows": [{"model": name, **{k: (int(v) if k in ("n_queries", "best", "worst") else float(v))
                                                 for k, v in row.items()}} for name, row in frame.iterrows()],
                     "may_be_best": joint.may_be_best(self.alpha)}
        return {"directory": str(self.directory), "design": self.design, "names": list(self.names),
                "budget": self.budget, "budgets": self.budgets.tolist(), "random_state": self.random_state,
                "alpha": self.alpha, "simultaneous": self.simultaneous,
                "n_draws": int(sum(r["n_draws"] for r in rows)), "done": self.done, "unfinished": self.unfinished,
                "models": rows, "leaderboard": board, "partial": not self.done}

    def plot(self, path=None, ax=None, partial=False):
        """Plot the leaderboard: every model's estimate with its simultaneous interval, most accurate on top,
        labelled with its rank interval.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Also write the figure to this PNG file.
        ax : matplotlib.axes.Axes, optional
            Where to draw (default: a new matplotlib ``Figure``, no pyplot).
        partial : bool, default=False
            As in :meth:`result`.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from matplotlib.figure import Figure

        result = self.result(partial)
        if ax is None:
            ax = Figure(figsize=(6.4, 0.9 + 0.45 * len(result.names)), layout="constrained").add_subplot()
        result.plot(self.alpha, ax=ax)
        ax.set_xlim(-0.02, 1.02)
        done = sum(s.n_draws for s in self._sessions.values())
        ax.set_title(f"{len(result.names)} models, {done} of {self.budget} queries" + ("" if self.done else " (running)"),
                     fontsize=10)
        if path is not None:
            ax.figure.savefig(Path(os.fspath(path)), dpi=120)
        return ax

    def __repr__(self):
        state = "done" if self.done else f"{len(self.unfinished)} of {len(self.names)} models running"
        return (f"LeaderboardSession({self.directory}: {len(self.names)} models, "
                f"{sum(s.n_draws for s in self._sessions.values())}/{self.budget} draws, {state})")
