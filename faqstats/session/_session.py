"""A resumable evaluation: :class:`~faqstats.PAIEstimator`'s loop driven from outside, a few questions at a
time, across processes and crashes (its draws and answers in :class:`Rounds`, its files in a
:class:`~faqstats.session.SessionStore`)."""

import contextlib
import numbers
import os
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

import numpy as np
from sklearn.base import clone

from ..estimator import PAIEstimator
from ..io import configuration_from, load_model_file, question_ids_sha256, sampler_from_spec, utc_now
from ..loop_setup import new_loop
from ..posterior import read_only
from ..predictor import resolve_predictor_keyword
from ..run_results import group_results_of, result_of
from ..sampling import HybridSampler, Sampler
from ._store import SessionStore
from .model_based import model_based_estimator
from .config import bank_ids, n_questions_of, session_config, session_estimator, session_predictor
from .rounds import Rounds

__all__ = ["EvaluationSession", "NextQuestions"]

_UNSET = object()  # no predictor given (None is the sample mean)


def _stored(name, doc, convert=None, default=None):
    """A read-only property: the session's stored ``config[name]`` (``default`` where absent), through ``convert``."""
    def get(self):
        value = self._config.get(name, default)
        return value if convert is None or value is None else convert(value)
    return property(get, doc=doc)


class NextQuestions(NamedTuple):
    """The questions to ask now: lists of the ``ids`` and of the probability ``q_t`` each was drawn with."""

    ids: list
    probabilities: list


class EvaluationSession:
    """A PAI query loop that is driven from outside, one round of questions at a time, and resumes exactly.

    Parameters
    ----------
    predictor : fitted predictor, path or None
        A fitted predictor that can be saved, or the path of a saved one; None: the sample mean
        (with ``sampler=UniformSampler(replace=False)``; needs ``question_ids``).
    question_ids : sequence of str or of int, optional
        The bank's unique ids in the model's question order (default: the model's, else ``0 .. N-1``).
    sampler : Sampler, default=None
        A sequential policy (``HybridSampler()`` when None); one from outside :mod:`faqstats.sampling`
        must be passed again to :meth:`load`.
    budget, batch_size, stop_when_width
        As in :class:`PAIEstimator`; a round of :meth:`next_questions` is ``batch_size`` draws.
    alpha : float in (0, 1), default=0.05
        Level of the reported intervals and of the confidence sequence.
    confidence_sequence, interval, step_weights
        As in :class:`PAIEstimator`.
    random_state : int or None, default=None
        Seed of the draws (``None``: a fresh one, stored).
    directory : str or os.PathLike or None, default=None
        Where the session is written at once; ``None`` keeps it in memory.
    dtype, predict_every, groups, estimand, min_group_share, stratify, costs, budget_cost, clusters
        As in :class:`PAIEstimator` (``groups``, ``costs`` and ``clusters`` as ``fit`` takes them, in the
        model's question order or as a mapping by question id; a draw of a cluster is recorded once all its
        questions are answered).
    **deprecated
        ``factor_model``: the old name of ``predictor`` (accepted with a ``FutureWarning``).

    Examples
    --------
    >>> import faqstats as fq
    >>> bank = fq.make_synthetic_bank(n_models=40, n_questions=60, n_components=3, random_state=0)
    >>> fm = fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)
    >>> z = bank.new_outcomes[0]
    >>> session = EvaluationSession(fm, [f"q{j}" for j in range(60)], budget=12, batch_size=3, random_state=0)
    >>> while not session.done:
    ...     ids, probabilities = session.next_questions()
    ...     session.record(ids, [z[int(i[1:])] for i in ids])
    >>> est = fq.PAIEstimator(fm, fq.HybridSampler(), budget=12, batch_size=3, random_state=0).fit(z)
    >>> session.result() == est.result_
    True
    """

    def __init__(self, predictor=_UNSET, question_ids=None, *, sampler=None, budget=100, batch_size=1,
                 stop_when_width=None, alpha=0.05, confidence_sequence=False, interval="robust-t",
                 step_weights=None, random_state=None, directory=None, dtype="float64", predict_every=1,
                 groups=None, estimand="micro", min_group_share=0.0, stratify=False, costs=None, budget_cost=None,
                 clusters=None, **deprecated):
        factor_model = resolve_predictor_keyword(predictor, deprecated, "EvaluationSession", _UNSET)
        if factor_model is _UNSET:
            raise TypeError("EvaluationSession needs a predictor (None for the sample mean).")
        if directory is not None:
            SessionStore.refuse_existing(directory)
        factor_model = session_predictor(factor_model)
        ids, id_type = bank_ids(question_ids, factor_model, n_questions_of(factor_model, question_ids))
        sampler = HybridSampler() if sampler is None else sampler
        # the estimator holds the parameters the session shares with it; the config stores them
        estimator = PAIEstimator(factor_model, sampler, budget, interval=interval, batch_size=batch_size,
                                 stop_when_width=stop_when_width, step_weights=step_weights, dtype=dtype,
                                 predict_every=predict_every, estimand=estimand, min_group_share=min_group_share,
                                 stratify=stratify, budget_cost=budget_cost)
        config = session_config(estimator, ids, alpha=alpha, confidence_sequence=confidence_sequence,
                                random_state=random_state, groups=groups, costs=costs, clusters=clusters)
        self._setup(factor_model, ids, id_type, config, sampler)  # checks every parameter first
        self._rng = np.random.default_rng(config["random_state"])
        self._created = utc_now()
        self._store = None
        if directory is not None:
            self._start_store(directory, factor_model)

    @classmethod
    def create(cls, directory, predictor=_UNSET, question_ids=None, **params):
        """Start a session in ``directory`` (``FileExistsError`` if one is there).

        Parameters
        ----------
        directory : str or os.PathLike
        predictor, question_ids, **params
            As in the class.

        Returns
        -------
        EvaluationSession
        """
        if directory is None:
            raise ValueError("directory must be a path; for a session kept in memory use EvaluationSession(...).")
        return cls(predictor, question_ids, directory=directory, **params)

    @classmethod
    def from_configuration(cls, configuration, question_ids=None, *, budget=None, directory=None, **params):
        """A session that runs exactly what :func:`~faqstats.configure_from_history` chose (with the same seed,
        the draws and estimates of ``PAIEstimator.from_history``).

        Parameters
        ----------
        configuration : Configuration, or str or os.PathLike
            What :func:`~faqstats.configure_from_history` returned, or the path of a saved one.
        question_ids : sequence of str or of int, optional
            As in the class (default: the ids saved with the configuration).
        budget : int, optional
            At most the configured budget (default: it).
        directory : str or os.PathLike or None, default=None
            As in the class.
        **params
            The class's other keyword arguments, except ``sampler``, ``step_weights`` and ``predict_every``.

        Returns
        -------
        EvaluationSession

        Examples
        --------
        >>> import faqstats as fq
        >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
        >>> cfg = fq.configure_from_history(bank.history, 12, n_runs=100, random_state=0)
        >>> session = EvaluationSession.from_configuration(cfg, random_state=0)
        >>> session.budget, type(session.sampler).__name__ == type(cfg.estimator.sampler).__name__
        (12, True)
        """
        fixed = sorted({"sampler", "step_weights", "predict_every", "factor_model", "predictor"} & set(params))
        if fixed:
            raise TypeError(f"{', '.join(fixed)} come(s) from the configuration: a session from a configuration "
                            "runs what it chose.")
        meta, stored_ids = {}, None
        if isinstance(configuration, (str, os.PathLike)):
            model, meta, stored_ids = load_model_file(configuration)
            configuration = configuration_from(model, meta, configuration)
        est = configuration.estimator
        meta = getattr(est.predictor, "metadata_", None) or meta
        if question_ids is None:
            question_ids = getattr(est.predictor, "question_ids_", None) or stored_ids
        budget = est.budget if budget is None else budget
        if isinstance(budget, numbers.Integral) and not isinstance(budget, bool) and budget > est.budget:
            raise ValueError(f"budget={budget} exceeds the configured budget {est.budget} (its step weights and "
                             "choice are for that many queries): configure again for a larger one.")
        step_weights = None if est.step_weights is None else np.asarray(est.step_weights, dtype=float)
        session = cls(est.predictor, question_ids, sampler=clone(est.sampler), budget=budget,
                      step_weights=step_weights, predict_every=est.predict_every, **params)
        if directory is not None:  # as __init__ does, the reader of a model without predictor included
            session._start_store(directory, est.predictor, meta.get("reader"))
        return session

    @classmethod
    def load(cls, directory, *, sampler=None, allow_unchecked=False):
        """Resume the session saved in ``directory``.

        Parameters
        ----------
        directory : str or os.PathLike
        sampler : Sampler, optional
            Needed only for a sampler class outside :mod:`faqstats.sampling`.
        allow_unchecked : bool, default=False
            Also resume a session written before faqstats stored checksums (nothing in it can be verified).

        Returns
        -------
        EvaluationSession
        """
        store, state, fm = SessionStore.open(directory, allow_unchecked)
        where = str(store.state_path)
        self = cls.__new__(cls)
        try:
            id_type = state["question_id_type"]
            ids = [int(q) for q in store.question_ids] if id_type == "int" else store.question_ids
            config = state["config"]
            self._setup(fm, ids, id_type, config, sampler_from_spec(config["sampler"], sampler))
        except (KeyError, TypeError, ValueError) as exc:  # a state no session of this configuration writes
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise ValueError(f"{where}: the session's configuration is not valid ({message}).") from exc
        self._rng = np.random.default_rng()
        try:
            self._rng.bit_generator.state = state["rng_state"]
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"{where}: rng_state is not a valid generator state ({exc}).") from exc
        self._created = state.get("created_utc")
        self._store = store
        self._rounds.replay(state["draws"], state["answers"], where, self.question_ids)
        return self

    def _setup(self, fm, ids, id_type, config, sampler):
        """Validate the configuration and start an empty loop."""
        if getattr(sampler, "design", None) == "stream":
            raise ValueError("A session needs a sequential sampler; BernoulliAIPW (nature's order) is not supported.")
        if not isinstance(sampler, Sampler):
            raise TypeError(f"sampler must be a faqstats Sampler, got {type(sampler).__name__}.")
        self._estimator = session_estimator(fm, sampler, config)  # checks every parameter with its loop
        self._loop = new_loop(self._estimator, len(ids), groups=config.get("groups"), costs=config.get("costs"),
                              clusters=config.get("clusters"))
        self._rounds = Rounds(self._loop)
        self._config = config
        self.predictor = fm
        self.sampler = sampler
        self.question_ids = list(ids)
        self._id_type = id_type
        self._index = {str(q): j for j, q in enumerate(ids)}
        self._ids_sha256 = question_ids_sha256(list(self._index))

    def _start_store(self, directory, factor_model, reader=None):
        """Write the new session, then compute with the model as stored, as a loaded session will."""
        self._store, stored = SessionStore.create(directory, factor_model, self.question_ids, reader=reader)
        self._setup(stored, self.question_ids, self._id_type, self._config, self.sampler)
        self._save()

    factor_model = property(attrgetter("predictor"), doc="The ``predictor`` (its old name).")
    budget = property(attrgetter("_loop.run.budget"), doc="The maximum number of draws (with ``budget_cost``: "
                      "the draws it buys, fixed at the start).")
    n_questions = property(attrgetter("_loop.run.n_questions"), doc="The bank size ``N``.")
    budget_cost = _stored("budget_cost", "The budget in cost units, or None.")

    costs = _stored("costs", "The cost of each question (read-only ndarray in the model's question order), or None.",
                    lambda costs: read_only(np.array(costs, dtype=float)))  # (with clusters the run holds theirs)

    @property
    def n_clusters(self):
        """The number of clusters (None without ``clusters``)."""
        return None if self._rounds.members is None else len(self._rounds.members)

    clusters = _stored("clusters", "The cluster id of each question (ndarray in question order), or None.", np.asarray)
    groups = _stored("groups", "The group label of each question (ndarray in question order), or None.", np.asarray)
    estimand = _stored("estimand", 'What :meth:`result` estimates: "micro", "macro" or weights.', default="micro")
    batch_size = _stored("batch_size", "Draws per round of :meth:`next_questions` by default.")
    stop_when_width = _stored("stop_when_width", "The confidence sequence's width to stop at, or None.")
    alpha = _stored("alpha", "Level of the reported intervals and of the confidence sequence.")
    random_state = _stored("random_state", "The seed of the draws (stored).")

    @property
    def directory(self):
        """Where the session is saved, or None when it is kept in memory."""
        return None if self._store is None else self._store.directory

    @property
    def model_metadata(self):
        """The metadata stored with the session's model file (dict), or None in memory."""
        return None if self._store is None else self._store.model_metadata

    stop_reason = property(attrgetter("_loop.stop_reason"), doc='Why querying stopped ("budget", "width"), or None.')
    done = property(attrgetter("_loop.done"), doc="Whether querying has stopped.")
    n_draws = property(attrgetter("_loop.n_recorded"), doc="Recorded draws (a question, or a cluster, may repeat).")
    @property
    def n_answers(self):
        """Answers recorded, including those waiting for earlier draws."""
        return len(self._rounds.answers)

    @property
    def n_queries(self):
        """Distinct questions answered in recorded draws."""
        return self._rounds.n_queries()

    @property
    def n_clusters_asked(self):
        """Distinct clusters whose draws are recorded (None without ``clusters``)."""
        return None if self._rounds.members is None else len(self._rounds.drawn_units())

    @property
    def pending(self):
        """:class:`NextQuestions` drawn and still waiting for an answer (with clusters: their questions)."""
        first = self._rounds.pending()
        return NextQuestions([self.question_ids[q] for q in first], list(first.values()))

    def queries(self):
        """One row per recorded draw, as :attr:`PAIEstimator.queries_` (structured ndarray)."""
        return self._loop.run.table()

    def next_questions(self, n=None):
        """The questions to ask now: a new round of ``n`` draws (saved), or the pending round's unanswered ones.

        Parameters
        ----------
        n : int, optional
            Size of a new round (default ``batch_size``, as PAIEstimator).

        Returns
        -------
        NextQuestions
            ``(ids, probabilities)``; both empty once the session is done.
        """
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1):
            raise ValueError(f"n must be a positive integer or None, got {n!r}.")
        if not (self.done or self._loop.pending):
            with self._changing():
                self._rounds.draw(self._rng, n)
        return self.pending

    def record(self, ids, outcomes):
        """Record answers to pending questions, in any order and any number at a time; saved on return.

        Parameters
        ----------
        ids : sequence of question ids (or one id)
        outcomes : sequence of float in [0, 1] (or one), same length
            1 correct, 0 wrong; graded scores in between. On a refusal nothing is recorded.
        """
        if isinstance(ids, (str, numbers.Integral)):
            ids, outcomes = [ids], [outcomes]
        ids = list(ids)
        outcomes = np.atleast_1d(np.asarray(outcomes, dtype=object)).tolist()
        if len(ids) != len(outcomes):
            raise ValueError(f"ids and outcomes must have the same length, got {len(ids)} and {len(outcomes)}.")
        if self.done:
            raise ValueError(f"The session is done ({self.stop_reason}); no question is pending.")
        new = self._rounds.check_answers(ids, outcomes, self._index_of)
        if new:
            with self._changing():
                self._rounds.answers.update(new)
                self._rounds.advance()

    @contextlib.contextmanager
    def _changing(self):
        """Run the block and save; on any failure go back to the state before."""
        (draws, answers), rng_state = self._rounds.state(), self._rng.bit_generator.state
        try:
            yield
            self._save()
        except BaseException:  # rebuild the loop from the snapshot
            self._setup(self.predictor, self.question_ids, self._id_type, self._config, self.sampler)
            self._rng.bit_generator.state = rng_state
            self._rounds.replay(draws, answers, "session")
            raise

    def reseed(self, generator):
        """Draw from ``generator`` from now on (a child of a seed, which no int seed gives); before any draw only.

        Parameters
        ----------
        generator : numpy.random.Generator
            Its state is copied and saved with the session.

        Examples
        --------
        >>> import numpy as np, faqstats as fq
        >>> session = fq.EvaluationSession(None, [f"q{j}" for j in range(10)], sampler=fq.UniformSampler(),
        ...                                budget=3, random_state=0)
        >>> session.reseed(np.random.default_rng(0).spawn(2)[1])
        >>> session.next_questions()
        NextQuestions(ids=['q6'], probabilities=[0.1])
        """
        if not isinstance(generator, np.random.Generator):
            raise TypeError(f"generator must be a numpy.random.Generator, got {type(generator).__name__}.")
        if self._rounds.state()[0]:
            raise RuntimeError("The session has drawn questions already: it can be reseeded before its first draw only.")
        with self._changing():
            self._rng.bit_generator.state = generator.bit_generator.state

    def estimator(self):
        """The :class:`~faqstats.PAIEstimator` that makes this session's draws: fitted on the model's outcomes, it
        gives the session's result (unfitted; it shares the session's fitted predictor and seed).

        Returns
        -------
        PAIEstimator
        """
        return PAIEstimator(**self._estimator.get_params(deep=False)).set_params(random_state=self.random_state)

    def model_based(self, history, **params):
        """The model-based estimate of the session's answers, its interval calibrated on ``history`` by running
        this session's own design (:func:`~faqstats.session.model_based.model_based_estimator`).

        Parameters
        ----------
        history : array-like of shape (n_models, N)
            The history the session's predictor was fitted on (NaN where not observed).
        **params
            Other :class:`~faqstats.ModelBasedEstimator` parameters (``predictor``, ``check_level``, ...).

        Returns
        -------
        ModelBasedEstimator
            Calibrated and fitted: its ``result_`` has both estimates and the check.
        """
        return model_based_estimator(self, history, **params)

    def result(self):
        """The estimate so far (:class:`~faqstats.AccuracyResult`); once done, :class:`PAIEstimator`'s.

        A running Wald-type interval is not valid for stopping when it looks narrow: use ``stop_when_width``.
        """
        return result_of(self._estimator, self._two_draws())

    def group_results(self):
        """Every group's estimate so far (:class:`~faqstats.GroupResults`); None without ``groups``."""
        return group_results_of(self._estimator, self._two_draws())

    def _two_draws(self):
        if self.n_draws < 2:
            raise ValueError(f"A result needs at least two recorded answers; {self.n_draws} recorded so far.")
        return self._loop

    def trajectory(self):
        """``(draws, estimate, low, high)`` of :meth:`result` after each recorded draw from the second on."""
        results = [result_of(self._estimator, self._loop, t) for t in range(2, self.n_draws + 1)]
        rows = [(t, res.estimate, *res.conf_int(alpha=self.alpha)) for t, res in enumerate(results, start=2)]
        return np.array(rows, dtype=float).reshape(-1, 4)

    def confidence_sequence(self):
        """``(draws so far, low, high)`` of the anytime-valid sequence after each round, or None."""
        return None if self._loop.cs is None else np.array(self._loop.confidence_rows, dtype=float).reshape(-1, 3)

    def plot(self, path=None, ax=None):
        """Plot :meth:`trajectory` (and the confidence sequence, if tracked).

        Parameters
        ----------
        path : str or os.PathLike, optional
            Also write the figure to this PNG file.
        ax : matplotlib.axes.Axes, optional
            Where to draw (default: a new matplotlib ``Figure``, no pyplot).

        Returns
        -------
        matplotlib.axes.Axes
        """
        from matplotlib.figure import Figure

        traj = self.trajectory()
        if not len(traj):
            raise ValueError(f"Nothing to plot yet: a plot needs at least two recorded answers ({self.n_draws} so "
                             "far).")
        if ax is None:
            ax = Figure(figsize=(6.4, 4.0), layout="constrained").add_subplot()
        level = f"{100 * (1 - self.alpha):g}%"
        ax.fill_between(traj[:, 0], traj[:, 2], traj[:, 3], alpha=0.25, color="C0", label=f"{level} interval")
        ax.plot(traj[:, 0], traj[:, 1], color="C0", label="estimate")
        cs = self.confidence_sequence()
        if cs is not None and len(cs):
            ax.step(cs[:, 0], cs[:, 1], where="post", color="C1", lw=1, label=f"{level} anytime-valid")
            ax.step(cs[:, 0], cs[:, 2], where="post", color="C1", lw=1)
        ax.set(xlabel="draws (queries)", ylabel="accuracy", ylim=(0, 1), xlim=(1, max(self.budget, 2)))
        ax.set_title(f"{self.n_queries} of {self.n_questions} questions asked ({self.stop_reason or 'running'})",
                     fontsize=10)
        ax.legend(loc="lower right", fontsize=8)
        if path is not None:
            ax.figure.savefig(Path(os.fspath(path)), dpi=120)
        return ax

    def group_table(self, simultaneous=False):
        """Every group's estimate so far as rows, for :meth:`status` and the command line.

        Parameters
        ----------
        simultaneous : bool, default=False
            Also give the intervals for all groups at once, as ``simultaneous_lower`` and ``simultaneous_upper``.

        Returns
        -------
        list of dict or None
            One dict per group (sorted by label) with ``group``, ``n_questions``, ``n_asked``, ``estimate``,
            ``std_error``, ``lower`` and ``upper``; None without ``groups`` or before two answers.
        """
        if self.groups is None or self.n_draws < 2:
            return None
        results = self.group_results()
        frame = results.to_frame(alpha=self.alpha)
        if simultaneous:
            both = results.conf_int(alpha=self.alpha, simultaneous=True)
            frame["simultaneous_lower"], frame["simultaneous_upper"] = both["lower"], both["upper"]
        return [{"group": label.item() if isinstance(label, np.generic) else label,
                 **{k: (int(v) if k.startswith("n_") else float(v)) for k, v in row.items()}}
                for label, row in frame.iterrows()]

    def status(self, simultaneous=False):
        """A JSON-serialisable summary: progress, pending ids, and the estimate so far.

        Parameters
        ----------
        simultaneous : bool, default=False
            With ``groups``: also the simultaneous intervals in ``"groups"`` (:meth:`group_table`).

        Returns
        -------
        dict
            The configuration, the progress, the estimate and its interval, the costs spent and the groups' rows.
        """
        res = self.result() if self.n_draws >= 2 else None
        cs = self.confidence_sequence()
        run, spent = self._loop.run, None
        if run.costs is not None:
            unit = "question" if self.n_clusters is None else "cluster"  # the run's costs are per unit drawn
            spent = float(run.costs[np.unique(run.table()[unit])].sum()) if self.n_draws else 0.0
        config = ("n_questions", "budget", "batch_size", "stop_when_width", "alpha", "random_state")
        return {
            "directory": None if self.directory is None else str(self.directory),
            **{name: getattr(self, name) for name in config},
            "sampler": self._config["sampler"],
            **{name: getattr(self, name) for name in ("n_draws", "n_queries", "n_answers")},
            "pending": self.pending.ids, "done": self.done, "stop_reason": self.stop_reason,
            "estimate": None if res is None else res.estimate,
            "std_error": None if res is None else res.std_error,
            "conf_int": None if res is None else list(res.conf_int(alpha=self.alpha)),
            "anytime_interval": [float(cs[-1, 1]), float(cs[-1, 2])] if cs is not None and len(cs) else None,
            "estimand": self.estimand if isinstance(self.estimand, str) else "weighted",
            "costs": run.costs is not None, "budget_cost": self.budget_cost, "cost_spent": spent,
            "cost_per_draw": run.cost_per_draw,
            "groups": self.group_table(simultaneous),
            "n_clusters": self.n_clusters, "n_clusters_asked": self.n_clusters_asked,
        }

    def __repr__(self):
        where = "in memory" if self.directory is None else str(self.directory)
        progress = f"{self.n_draws}/{self.budget} draws, {len(self.pending.ids)} pending"
        return f"EvaluationSession({where}: {progress}, {self.stop_reason or 'running'})"

    def _index_of(self, qid):
        if isinstance(qid, (bool, np.bool_)) or not isinstance(qid, (str, numbers.Integral)):
            raise ValueError(f"question id {qid!r} is not a question of the bank (ids are {self._id_type}).")
        question = self._index.get(str(qid))
        if question is None:
            raise ValueError(f"question id {qid!r} is not a question of the bank.")
        return question

    def _save(self):
        if self._store is not None:
            draws, answers = self._rounds.state()
            self._store.save({"created_utc": self._created, "question_ids_sha256": self._ids_sha256,
                              "n_questions": self.n_questions, "question_id_type": self._id_type,
                              "config": self._config, "rng_state": self._rng.bit_generator.state,
                              "draws": draws, "answers": answers})
