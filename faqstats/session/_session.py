"""A resumable evaluation: ask a new model a few questions at a time, across processes and crashes.

:class:`EvaluationSession` is :class:`~faqstats.PAIEstimator`'s loop (:class:`faqstats._engine.QueryLoop`)
driven from outside: it hands out questions, takes answers whenever they come and keeps its state in a
:class:`~faqstats.session.SessionStore`; :meth:`EvaluationSession.load` replays the stored rounds,
checking every draw against the policy (docs/tutorials/python_callable.md).
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import numpy as np
from sklearn.base import clone

from .. import sampling
from ..estimator import PAIEstimator
from ..factor_model import LogisticFactorModel, LogisticFactorModelCV
from ..irt import ItemResponseModel
from ..stacking import HistoryMixture, StackedPredictor
from ..surrogate import GaussianProcessSurrogate
from ..io import (check_question_ids, json_safe, load_factor_model, question_ids_sha256, sampler_from_spec,
                  sampler_spec, utc_now)
from .._engine import ClusterRun
from ..sampling import HybridSampler, Sampler, check_costs
from ._store import SessionStore

__all__ = ["EvaluationSession", "NextQuestions"]


class NextQuestions(NamedTuple):
    """The questions to ask now: lists of the ``ids`` and of the probability ``q_t`` each was drawn with."""

    ids: list
    probabilities: list


class EvaluationSession:
    """A PAI query loop that is driven from outside, one round of questions at a time, and resumes exactly.

    Parameters
    ----------
    factor_model : fitted predictor, path or None
        A fitted LogisticFactorModel, LogisticFactorModelCV, GaussianProcessSurrogate, ItemResponseModel,
        HistoryMixture or StackedPredictor, or the path of one saved with :func:`~faqstats.save_factor_model`;
        None: no predictor (the sample mean, with ``sampler=UniformSampler(replace=False)``; needs
        ``question_ids``). :meth:`from_configuration` takes a saved configuration.
    question_ids : sequence of str or of int, optional
        The bank's unique ids (all str or all int) in the model's question order, by which questions
        are handed out and answered; the model's ids when it carries some (the default), else ``0 .. N-1``.
    sampler : Sampler, default=None
        A sequential policy (``HybridSampler()`` when None; not ``BernoulliAIPW``), stored by class and
        parameters: one from outside :mod:`faqstats.sampling` must be passed again to :meth:`load`.
    budget, batch_size, stop_when_width
        As in :class:`PAIEstimator`; a round of :meth:`next_questions` is ``batch_size`` draws.
    alpha : float in (0, 1), default=0.05
        Level of the reported intervals (:meth:`status`) and of the confidence sequence.
    confidence_sequence, interval, step_weights
        As in :class:`PAIEstimator`.
    random_state : int or None, default=None
        Seed of the draws (``None``: a fresh one, stored); the generator's state is saved after
        every round, so a loaded session draws exactly as the uninterrupted one would have.
    directory : str or os.PathLike or None, default=None
        Where the session is written at once (refused if one is there: use :meth:`load`);
        ``None`` keeps it in memory only.
    dtype : {"float64", "float32"}, default="float64"
        As in :class:`PAIEstimator`.
    predict_every : int, default=1
        As in :class:`PAIEstimator` (the predictions' refresh schedule; stored).
    groups : sequence of str or int, or mapping, optional
        A label per question, in the model's question order (as ``PAIEstimator.fit(groups=)``),
        or a mapping ``{question id: label}`` covering the bank (other ids are ignored):
        :meth:`group_results` then gives every group's estimate and interval.
    estimand, min_group_share, stratify
        As in :class:`PAIEstimator` (user guide, "Groups and weighted estimands").
    costs : sequence of float or mapping, optional
        A finite, positive cost per question (tokens, dollars), in the model's question order, or
        a mapping ``{question id: cost}`` covering the bank (other ids are ignored), e.g. from
        :func:`~faqstats.integrations.read_inspect_costs`: as ``PAIEstimator.fit(costs=)``, the
        policy weighs its scores by ``1 / sqrt(cost)`` and :meth:`result` reports the cost spent.
        Stored with the session (and covered by its checksums).
    budget_cost : float > 0, optional
        A budget in cost units instead of questions, as in :class:`PAIEstimator` (needs ``costs``):
        the draws it buys are fixed before the first draw, and :attr:`budget` is that number.
    clusters : sequence of str or int, or mapping, optional
        A cluster id per question (questions sharing a passage, an image, a prompt), in the
        model's question order, or a mapping ``{question id: cluster id}`` covering the bank
        (other ids are ignored), as ``PAIEstimator.fit(clusters=)``: every draw asks a whole
        cluster, ``budget`` counts cluster draws, and :meth:`next_questions` hands out all the
        questions of the round's clusters. A draw is recorded once every question of its cluster
        is answered (the estimator needs the cluster's total); answers to part of a cluster are
        kept (and saved) until then. With ``groups`` every cluster must lie in one group (and the
        estimand be "micro"). Stored with the session (and covered by its checksums).

    Attributes
    ----------
    question_ids, factor_model, sampler, directory
        As given (the model as loaded from ``directory``, when there is one).
    budget, batch_size, stop_when_width, alpha, random_state
        The configuration (read-only).
    n_draws, n_queries, n_answers, pending, done, stop_reason
        The progress (see each property).

    See Also
    --------
    PAIEstimator : the same loop against an array or a callable, in one call.
    faqstats.evaluate.evaluate : drives a session with a thread pool, with retries.

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

    def __init__(
        self,
        factor_model,
        question_ids=None,
        *,
        sampler=None,
        budget=100,
        batch_size=1,
        stop_when_width=None,
        alpha=0.05,
        confidence_sequence=False,
        interval="robust-t",
        step_weights=None,
        random_state=None,
        directory=None,
        dtype="float64",
        predict_every=1,
        groups=None,
        estimand="micro",
        min_group_share=0.0,
        stratify=False,
        costs=None,
        budget_cost=None,
        clusters=None,
    ):
        if directory is not None:
            SessionStore.refuse_existing(directory)
        if isinstance(factor_model, (str, os.PathLike)):
            factor_model = load_factor_model(factor_model)
        if isinstance(factor_model, LogisticFactorModelCV):  # its best estimator; unfitted, refused below
            factor_model = getattr(factor_model, "best_estimator_", factor_model)
        if isinstance(factor_model, ItemResponseModel) and hasattr(factor_model, "question_factors_"):
            factor_model = factor_model.as_factor_model()  # what the session saves: same predictions and posterior
        n_questions = _n_questions(factor_model, question_ids)
        ids, id_type = _check_question_ids(question_ids, factor_model, n_questions)
        if random_state is None:
            random_state = int(np.random.SeedSequence().entropy)
        if isinstance(random_state, bool) or not isinstance(random_state, numbers.Integral):
            raise TypeError(
                f"random_state must be an int seed (or None for a fresh one), got {type(random_state).__name__}; "
                "a session stores its seed to resume exactly."
            )
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int seed, got {random_state}.")
        sampler = HybridSampler() if sampler is None else sampler
        config = {
            "sampler": sampler_spec(sampler),
            "budget": budget,
            "batch_size": batch_size,
            "stop_when_width": stop_when_width,
            "alpha": alpha,
            "confidence_sequence": confidence_sequence,
            "interval": interval,
            "random_state": int(random_state),
        }
        if step_weights is not None:  # stored only when used: older readers see the same format
            config["step_weights"] = [float(x) for x in np.asarray(step_weights, dtype=float).ravel()]
        if dtype != "float64":
            config["dtype"] = dtype
        if not (isinstance(predict_every, numbers.Integral) and predict_every == 1):
            config["predict_every"] = predict_every
        # stored only when used, like step_weights
        if groups is not None:
            config["groups"] = np.asarray(_per_question(groups, ids, "groups")).tolist()
        if not (isinstance(estimand, str) and estimand == "micro"):
            config["estimand"] = estimand if isinstance(estimand, str) else np.asarray(estimand, dtype=float).tolist()
        if min_group_share:
            config["min_group_share"] = min_group_share
        if stratify:
            config["stratify"] = bool(stratify)
        if costs is not None:
            config["costs"] = _check_costs(_per_question(costs, ids, "costs"), ids)
        if budget_cost is not None:
            config["budget_cost"] = budget_cost
        if clusters is not None:
            config["clusters"] = _check_clusters(_per_question(clusters, ids, "clusters"), ids)
        notes = []
        config = json_safe(config, "config", notes)  # numpy scalars -> plain JSON types
        if notes:
            raise ValueError(f"session parameters must be storable as JSON: {notes[0]}")
        self._setup(factor_model, ids, id_type, config, sampler)  # checks every parameter first
        self._rng = np.random.default_rng(config["random_state"])
        self._created = utc_now()
        self._store = None
        if directory is not None:
            self._store, stored_model = SessionStore.create(directory, factor_model, ids)
            # compute with the model as stored, as a loaded session will
            self._setup(stored_model, ids, id_type, config, sampler)
            self._save()

    # -- construction ------------------------------------------------------------
    @classmethod
    def create(cls, directory, factor_model, question_ids=None, **params):
        """Start a session in ``directory`` (``FileExistsError`` if one is there).

        Parameters
        ----------
        directory : str or os.PathLike
            Where the session is written.
        factor_model, question_ids
            As in the class.
        **params
            The class's other keyword arguments.

        Returns
        -------
        EvaluationSession
            The new session, already saved.
        """
        if directory is None:
            raise ValueError("directory must be a path; for a session kept in memory use EvaluationSession(...).")
        return cls(factor_model, question_ids, directory=directory, **params)

    @classmethod
    def from_configuration(cls, configuration, question_ids=None, *, budget=None, directory=None, **params):
        """A session that runs exactly what :func:`~faqstats.configure_from_history` chose.

        With the same seed it makes the draws and the estimate of
        ``PAIEstimator.from_history(history, budget, random_state=seed)``: the chosen predictor
        (whatever its kind; none for the sample mean), policy, step weights and refresh schedule.

        Parameters
        ----------
        configuration : Configuration, or str or os.PathLike
            What :func:`~faqstats.configure_from_history` returned, or the path of one saved with
            :func:`~faqstats.save_configuration` (``faqstats fit-history --budget``).
        question_ids : sequence of str or of int, optional
            As in the class (default: the ids saved with the configuration; needed for an
            in-memory sample-mean configuration).
        budget : int, optional
            At most the configured budget (the step weights cover that many draws); default: it.
        directory : str or os.PathLike or None, default=None
            As in the class.
        **params
            The class's other keyword arguments, except ``sampler``, ``step_weights`` and
            ``predict_every`` (the configuration's).

        Returns
        -------
        EvaluationSession

        Examples
        --------
        >>> import faqstats as fq
        >>> bank = fq.make_synthetic_bank(n_models=120, n_questions=80, n_components=2, random_state=0)
        >>> cfg = fq.configure_from_history(bank.history, 12, n_runs=100, random_state=0)
        >>> session = EvaluationSession.from_configuration(cfg, [f"q{j}" for j in range(80)], random_state=0)
        >>> z = bank.new_outcomes[0]
        >>> while not session.done:
        ...     ids, _ = session.next_questions()
        ...     session.record(ids, [z[int(q[1:])] for q in ids])
        >>> session.result() == cfg.estimator.set_params(random_state=0).fit(z).result_
        True
        """
        from ..io import configuration_from, load_model_file

        fixed = sorted({"sampler", "step_weights", "predict_every", "factor_model"} & set(params))
        if fixed:
            raise TypeError(f"{', '.join(fixed)} come(s) from the configuration: a session from a configuration "
                            "runs what it chose.")
        meta, stored_ids = {}, None
        if isinstance(configuration, (str, os.PathLike)):
            model, meta, stored_ids = load_model_file(configuration)
            configuration = configuration_from(model, meta, configuration)
        est = configuration.estimator
        meta = getattr(est.factor_model, "metadata_", None) or meta
        if question_ids is None:
            question_ids = getattr(est.factor_model, "question_ids_", None) or stored_ids
        budget = est.budget if budget is None else budget
        if isinstance(budget, numbers.Integral) and not isinstance(budget, bool) and budget > est.budget:
            raise ValueError(f"budget={budget} exceeds the configured budget {est.budget} (its step weights and "
                             "choice are for that many queries): configure again for a larger one.")
        step_weights = None if est.step_weights is None else np.asarray(est.step_weights, dtype=float)
        session = cls(est.factor_model, question_ids, sampler=clone(est.sampler), budget=budget,
                      step_weights=step_weights, predict_every=est.predict_every, **params)
        if directory is not None:  # as __init__ does, the reader of a model without predictor included
            SessionStore.refuse_existing(directory)
            session._store, stored = SessionStore.create(directory, est.factor_model, session.question_ids,
                                                         reader=meta.get("reader"))
            session._setup(stored, session.question_ids, session._id_type, session._config, session.sampler)
            session._save()
        return session

    @classmethod
    def load(cls, directory, *, sampler=None):
        """Resume the session saved in ``directory``.

        Parameters
        ----------
        directory : str or os.PathLike
        sampler : Sampler, optional
            Needed only for a sampler class outside :mod:`faqstats.sampling` (with the stored parameters).

        Raises
        ------
        ValueError
            If the state file is not a faqstats session (or a newer format), or does not match its model file.
        FileNotFoundError
            If ``directory`` holds no session.
        """
        store, state, fm = SessionStore.open(directory)
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
        self._replay(state["draws"], state["answers"], where)
        return self

    def _setup(self, fm, ids, id_type, config, sampler):
        """Validate the configuration and start an empty loop (shared by __init__ and load)."""
        if getattr(sampler, "design", None) == "stream":
            raise ValueError("A session needs a sequential sampler; BernoulliAIPW (nature's order) is not supported.")
        if not isinstance(sampler, Sampler):
            raise TypeError(f"sampler must be a faqstats Sampler, got {type(sampler).__name__}.")
        alpha = config["alpha"]
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
            raise ValueError(f"alpha must be a float in (0, 1), got {alpha!r}.")
        if not isinstance(config["confidence_sequence"], (bool, np.bool_)):
            raise TypeError(f"confidence_sequence must be True or False, got {config['confidence_sequence']!r}.")
        track_cs = bool(config["confidence_sequence"]) or config["stop_when_width"] is not None
        # the estimator checks every parameter, starts the loop and makes the result
        self._estimator = PAIEstimator(
            factor_model=fm,
            sampler=sampler,
            budget=config["budget"],
            batch_size=config["batch_size"],
            stop_when_width=config["stop_when_width"],
            confidence_sequence=float(alpha) if track_cs else False,
            interval=config["interval"],
            step_weights=config.get("step_weights"),
            dtype=config.get("dtype", "float64"),
            predict_every=config.get("predict_every", 1),
            estimand=config.get("estimand", "micro"),
            min_group_share=config.get("min_group_share", 0.0),
            stratify=config.get("stratify", False),
            budget_cost=config.get("budget_cost"),
        )
        self._loop = self._estimator.new_loop(len(ids), groups=config.get("groups"),
                                              costs=config.get("costs"), clusters=config.get("clusters"))
        run = self._loop.run
        # the questions each draw asks: its own, or (with clusters) all of its cluster's, in question order
        self._members = run.members if isinstance(run, ClusterRun) else None
        self._config = config
        self.factor_model = fm
        self.sampler = sampler
        self.question_ids = list(ids)
        self._id_type = id_type
        self._index = {str(q): j for j, q in enumerate(ids)}
        self._ids_sha256 = question_ids_sha256(list(self._index))
        self._answers = {}  # question -> outcome, in arrival order

    # -- parameters ----------------------------------------------------------------
    @property
    def budget(self):
        """The maximum number of draws (with ``budget_cost``: the draws it buys, fixed at the start)."""
        return self._loop.run.budget

    @property
    def budget_cost(self):
        """The budget in cost units, or None."""
        return self._config.get("budget_cost")

    @property
    def costs(self):
        """The cost of each question (read-only ndarray in the model's question order), or None."""
        if self._members is not None:  # the run holds the clusters' costs
            costs = self._config.get("costs")
            if costs is None:
                return None
            costs = np.array(costs, dtype=float)
            costs.setflags(write=False)
            return costs
        return self._loop.run.costs

    @property
    def clusters(self):
        """The cluster id of each question (ndarray in the model's question order), or None."""
        clusters = self._config.get("clusters")
        return None if clusters is None else np.asarray(clusters)

    @property
    def n_clusters(self):
        """The number of clusters (None without ``clusters``)."""
        return None if self._members is None else len(self._members)

    @property
    def groups(self):
        """The group label of each question (ndarray in the model's question order), or None."""
        groups = self._config.get("groups")
        return None if groups is None else np.asarray(groups)

    @property
    def estimand(self):
        """What :meth:`result` estimates: "micro", "macro" or question weights."""
        return self._config.get("estimand", "micro")

    @property
    def batch_size(self):
        """Draws per round of :meth:`next_questions` by default."""
        return self._config["batch_size"]

    @property
    def stop_when_width(self):
        """The confidence sequence's width to stop at, or None."""
        return self._config["stop_when_width"]

    @property
    def alpha(self):
        """Level of the reported intervals and of the confidence sequence."""
        return self._config["alpha"]

    @property
    def random_state(self):
        """The seed of the draws (stored)."""
        return self._config["random_state"]

    @property
    def n_questions(self):
        """The bank size ``N``."""
        return self._loop.run.n_questions

    @property
    def directory(self):
        """Where the session is saved, or None when it is kept in memory."""
        return None if self._store is None else self._store.directory

    # -- state ---------------------------------------------------------------------
    @property
    def stop_reason(self):
        """Why querying stopped ("budget", "width"), or None."""
        return self._loop.stop_reason

    @property
    def done(self):
        """Whether querying has stopped."""
        return self._loop.done

    @property
    def n_draws(self):
        """Recorded draws (a question, or with ``clusters`` a cluster, may repeat)."""
        return self._loop.n_recorded

    @property
    def n_answers(self):
        """Including answers still waiting for earlier draws."""
        return len(self._answers)

    @property
    def n_queries(self):
        """Distinct questions whose answers are recorded (in recorded draws)."""
        drawn = {d.question for d in self._loop.draws[: self._loop.n_recorded]}
        if self._members is None:
            return len(drawn)
        return int(sum(self._members[c].size for c in drawn))

    @property
    def n_clusters_asked(self):
        """Distinct clusters whose draws are recorded (None without ``clusters``)."""
        if self._members is None:
            return None
        return len({d.question for d in self._loop.draws[: self._loop.n_recorded]})

    def _questions_of(self, draw):
        """The questions a draw asks (with clusters: its cluster's, in question order)."""
        return (draw.question,) if self._members is None else self._members[draw.question].tolist()

    @property
    def pending(self):
        """:class:`NextQuestions` drawn and still waiting for an answer (empty when none).

        With ``clusters``: the unanswered questions of the pending clusters, in draw order (each
        cluster's in question order), each with its cluster's draw probability.
        """
        first = {}  # question -> probability of its first unanswered pending draw
        for draw in self._loop.pending:
            for question in self._questions_of(draw):
                if question not in self._answers:
                    first.setdefault(question, draw.probability)
        return NextQuestions([self.question_ids[q] for q in first], list(first.values()))

    def queries(self):
        """One row per recorded draw, as :attr:`PAIEstimator.queries_` (structured ndarray)."""
        return self._loop.run.table()

    # -- the loop ------------------------------------------------------------------
    def next_questions(self, n=None):
        """The questions to ask now, with the probability each was drawn with.

        With no round pending, draws (and saves) a new round of ``n`` as :class:`PAIEstimator`
        would; else returns the pending round's unanswered questions again (``n`` ignored). With
        replacement, a question drawn again takes its earlier answer and is not handed out.

        Parameters
        ----------
        n : int, optional
            Size of a new round (any keeps the estimate unbiased; ``batch_size`` reproduces PAIEstimator).

        Returns
        -------
        NextQuestions
            ``(ids, probabilities)``; both empty once the session is done.
        """
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1):
            raise ValueError(f"n must be a positive integer or None, got {n!r}.")
        if not (self.done or self._loop.pending):
            with self._changing():
                while not self.done and not self._loop.pending:
                    self._loop.draw_round(self._rng, n)
                    self._advance()  # with replacement, repeats of answered questions fill in at once
        return self.pending

    def record(self, ids, outcomes):
        """Record answers to pending questions, in any order and any number at a time; saved on return.

        Increments enter the estimate in draw order, so the order answers arrive in does not
        matter; a complete round updates the factor posterior and checks the stopping rules.

        Parameters
        ----------
        ids : sequence of question ids (or one id)
        outcomes : sequence of float in [0, 1] (or one), same length
            1 correct, 0 wrong; graded scores in between.

        Raises
        ------
        ValueError
            For an id not pending or given twice, or an outcome outside [0, 1] or NaN;
            nothing is recorded then, and the files are left untouched.
        """
        if isinstance(ids, (str, numbers.Integral)):
            ids, outcomes = [ids], [outcomes]
        ids = list(ids)
        outcomes = np.atleast_1d(np.asarray(outcomes, dtype=object)).tolist()
        if len(ids) != len(outcomes):
            raise ValueError(f"ids and outcomes must have the same length, got {len(ids)} and {len(outcomes)}.")
        if self.done:
            raise ValueError(f"The session is done ({self.stop_reason}); no question is pending.")
        waiting = {q for d in self._loop.pending for q in self._questions_of(d)} - set(self._answers)
        new = {}
        for qid, value in zip(ids, outcomes):
            question = self._index_of(qid)
            if question in new:
                raise ValueError(f"question id {qid!r} is given twice in one call to record.")
            if question in self._answers:
                raise ValueError(
                    f"question id {qid!r} is already recorded (outcome {self._answers[question]!r}); "
                    "an answer cannot be changed."
                )
            if question not in waiting:
                raise ValueError(f"question id {qid!r} is not pending: it was not handed out by next_questions.")
            new[question] = _check_outcome(value, qid)
        if new:
            with self._changing():
                self._answers.update(new)
                self._advance()

    def _advance(self):
        """Record, in draw order, every pending draw whose answer is in (with clusters: every
        answer of its cluster)."""
        loop, answers = self._loop, self._answers
        while not loop.done and loop.pending:
            questions = self._questions_of(loop.pending[0])
            if any(q not in answers for q in questions):
                return
            if self._members is None:
                loop.record(answers[questions[0]])
            else:
                loop.record(np.array([answers[q] for q in questions], dtype=float))

    @contextlib.contextmanager
    def _changing(self):
        """Run the block and save; on any failure go back to the state before."""
        draws = [(d.question, d.probability, d.round) for d in self._loop.draws]
        answers, rng_state = dict(self._answers), self._rng.bit_generator.state
        try:
            yield
            self._save()
        except BaseException:
            # rebuild the loop from the snapshot by replaying it
            self._setup(self.factor_model, self.question_ids, self._id_type, self._config, self.sampler)
            self._rng.bit_generator.state = rng_state
            self._replay(draws, list(answers.items()), "session")
            raise

    def _replay(self, draws, answers, where):
        """Rebuild the loop from stored draws and answers, round by round, as it was computed live."""
        n = self.n_questions
        units = n if self._members is None else len(self._members)  # what a draw picks
        for answer in answers:
            if not (isinstance(answer, (list, tuple)) and len(answer) == 2):
                raise ValueError(f"{where}: invalid answer {answer!r}.")
            question, value = answer
            if not (isinstance(question, int) and 0 <= question < n) or question in self._answers:
                raise ValueError(f"{where}: answers hold an invalid or repeated question index {question!r}.")
            self._answers[question] = _check_outcome(value, question)
        rounds = {}
        for draw in draws:
            if not (isinstance(draw, (list, tuple)) and len(draw) == 3 and isinstance(draw[0], int)
                    and 0 <= draw[0] < units and isinstance(draw[1], (int, float)) and 0 < draw[1] <= 1
                    and isinstance(draw[2], int)):
                raise ValueError(f"{where}: invalid draw {draw!r}.")
            rounds.setdefault(draw[2], []).append((draw[0], float(draw[1])))
        if list(rounds) != list(range(len(rounds))):
            raise ValueError(f"{where}: draws are not in consecutive rounds.")
        for r, round_draws in rounds.items():
            if self.done or self._loop.pending:
                raise ValueError(f"{where}: round {r} was drawn before the previous rounds were complete.")
            self._loop.replay_round(round_draws, where=f"{where}, round {r}")
            self._advance()
        drawn = {q for d in self._loop.draws for q in self._questions_of(d)}
        if any(q not in drawn for q in self._answers):
            raise ValueError(f"{where}: answers hold a question that was never drawn.")

    # -- results -------------------------------------------------------------------
    def result(self):
        """The estimate so far (:class:`~faqstats.AccuracyResult`); ``stop_reason`` is None while running.

        Needs two recorded draws; once done it equals :class:`PAIEstimator`'s. A running Wald-type
        interval is not valid for stopping when it looks narrow: use ``stop_when_width`` for that.
        """
        if self.n_draws < 2:
            raise ValueError(f"A result needs at least two recorded answers; {self.n_draws} recorded so far.")
        return self._estimator.result_of(self._loop)

    def group_results(self):
        """Every group's estimate so far (:class:`~faqstats.GroupResults`); None without ``groups``.

        Returns
        -------
        GroupResults or None
        """
        if self.n_draws < 2:
            raise ValueError(f"A result needs at least two recorded answers; {self.n_draws} recorded so far.")
        return self._estimator.group_results_of(self._loop)

    def trajectory(self):
        """The running estimate and interval after each recorded draw (from the second on).

        Returns
        -------
        ndarray of shape (n_draws - 1, 4)
            Draws so far, estimate, and the ``1 - alpha`` Wald-type interval :meth:`result` gave then.
        """
        rows = []
        for t in range(2, self.n_draws + 1):
            res = self._estimator.result_of(self._loop, t)
            rows.append((t, res.estimate, *res.conf_int(alpha=self.alpha)))
        return np.array(rows, dtype=float).reshape(-1, 4)

    def confidence_sequence(self):
        """``(draws so far, low, high)`` of the anytime-valid sequence after each round, or None."""
        loop = self._loop
        return None if loop.cs is None else np.array(loop.confidence_rows, dtype=float).reshape(-1, 3)

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
            The axes drawn on.
        """
        from matplotlib.figure import Figure

        traj = self.trajectory()
        if not len(traj):
            raise ValueError(
                f"Nothing to plot yet: a plot needs at least two recorded answers ({self.n_draws} so far)."
            )
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
        state = self.stop_reason or "running"
        ax.set_title(f"{self.n_queries} of {self.n_questions} questions asked ({state})", fontsize=10)
        ax.legend(loc="lower right", fontsize=8)
        if path is not None:
            ax.figure.savefig(Path(os.fspath(path)), dpi=120)
        return ax

    def group_table(self, simultaneous=False):
        """Every group's estimate so far as rows, for :meth:`status` and the command line.

        Parameters
        ----------
        simultaneous : bool, default=False
            Also give the intervals meant to hold for all groups at once
            (:meth:`~faqstats.GroupResults.conf_int` with ``simultaneous=True``), as
            ``simultaneous_lower`` and ``simultaneous_upper``.

        Returns
        -------
        list of dict or None
            One dict per group (sorted by label) with ``group``, ``n_questions``, ``n_asked``,
            ``estimate``, ``std_error``, ``lower`` and ``upper`` (the ``1 - alpha`` interval);
            None without ``groups`` or before two answers are recorded.
        """
        if self._config.get("groups") is None or self.n_draws < 2:
            return None
        results = self.group_results()
        frame = results.to_frame(alpha=self.alpha)
        if simultaneous:
            both = results.conf_int(alpha=self.alpha, simultaneous=True)
            frame["simultaneous_lower"], frame["simultaneous_upper"] = both["lower"], both["upper"]
        rows = []
        for label, row in frame.iterrows():
            label = label.item() if isinstance(label, np.generic) else label
            rows.append({"group": label, **{k: (int(v) if k.startswith("n_") else float(v)) for k, v in row.items()}})
        return rows

    def status(self, simultaneous=False):
        """A JSON-serialisable summary: progress, pending ids, and the estimate so far.

        Parameters
        ----------
        simultaneous : bool, default=False
            With ``groups``: also the simultaneous intervals in ``"groups"`` (:meth:`group_table`).

        Returns
        -------
        dict
            The configuration, the progress, the estimate and its interval; with costs, ``costs``
            (whether given), ``budget_cost``, ``cost_spent`` and ``cost_per_draw``; ``groups``,
            the rows of :meth:`group_table` (None without groups).
        """
        res = self.result() if self.n_draws >= 2 else None
        rows = self._loop.confidence_rows
        config = ("n_questions", "budget", "batch_size", "stop_when_width", "alpha", "random_state")
        run = self._loop.run
        spent = None
        if run.costs is not None:
            unit = "question" if self._members is None else "cluster"  # the run's costs are per unit drawn
            spent = float(run.costs[np.unique(run.table()[unit])].sum()) if self.n_draws else 0.0
        estimand = self.estimand
        return {
            "directory": None if self.directory is None else str(self.directory),
            **{name: getattr(self, name) for name in config},
            "sampler": self._config["sampler"],
            **{name: getattr(self, name) for name in ("n_draws", "n_queries", "n_answers")},
            "pending": self.pending.ids,
            "done": self.done,
            "stop_reason": self.stop_reason,
            "estimate": None if res is None else res.estimate,
            "std_error": None if res is None else res.std_error,
            "conf_int": None if res is None else list(res.conf_int(alpha=self.alpha)),
            "anytime_interval": [float(rows[-1][1]), float(rows[-1][2])] if rows else None,
            "estimand": estimand if isinstance(estimand, str) else "weighted",
            "costs": run.costs is not None,
            "budget_cost": self.budget_cost,
            "cost_spent": spent,
            "cost_per_draw": run.cost_per_draw,
            "groups": self.group_table(simultaneous),
            "n_clusters": self.n_clusters,
            "n_clusters_asked": self.n_clusters_asked,
        }

    def __repr__(self):
        where = "in memory" if self.directory is None else str(self.directory)
        progress = f"{self.n_draws}/{self.budget} draws, {len(self.pending.ids)} pending"
        return f"EvaluationSession({where}: {progress}, {self.stop_reason or 'running'})"

    # -- persistence ---------------------------------------------------------------
    def _index_of(self, qid):
        if isinstance(qid, (bool, np.bool_)) or not isinstance(qid, (str, numbers.Integral)):
            raise ValueError(f"question id {qid!r} is not a question of the bank (ids are {self._id_type}).")
        question = self._index.get(str(qid))
        if question is None:
            raise ValueError(f"question id {qid!r} is not a question of the bank.")
        return question

    def _save(self):
        if self._store is None:
            return
        self._store.save({
            "created_utc": self._created,
            "question_ids_sha256": self._ids_sha256,
            "n_questions": self.n_questions,
            "question_id_type": self._id_type,
            "config": self._config,
            "rng_state": self._rng.bit_generator.state,
            "draws": [[d.question, d.probability, d.round] for d in self._loop.draws],
            "answers": [[q, v] for q, v in self._answers.items()],
        })


# -- helpers -------------------------------------------------------------------------
_PREDICTORS = (LogisticFactorModel, LogisticFactorModelCV, GaussianProcessSurrogate, HistoryMixture, StackedPredictor)
_FITTED = {HistoryMixture: "profiles_", StackedPredictor: "weights_"}


def _n_questions(fm, question_ids):
    """The bank size of a predictor (checked: one a session can save), or of ``question_ids`` without one."""
    if fm is None:
        if question_ids is None:
            raise ValueError("a session without a predictor (the sample mean) needs question_ids.")
        return len(question_ids)
    if not isinstance(fm, _PREDICTORS):
        raise TypeError(
            "factor_model must be a fitted LogisticFactorModel (or LogisticFactorModelCV), GaussianProcessSurrogate, "
            f"ItemResponseModel, HistoryMixture or StackedPredictor, or the path of a saved one, or None, got "
            f"{type(fm).__name__}."
        )
    if not hasattr(fm, _FITTED.get(type(fm), "question_factors_")):
        raise ValueError("factor_model is not fitted: fit it (or load a saved one) first.")
    return fm.question_factors_.shape[0] if hasattr(fm, "question_factors_") else fm.n_features_in_


def _check_outcome(value, qid):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"outcome for question id {qid!r} must be a number in [0, 1], got {value!r}.") from None
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"outcome for question id {qid!r} must be in [0, 1] (1 correct, 0 wrong), got {value!r}.")
    return value


def _per_question(values, ids, name):
    """``values`` in the bank's question order: a mapping ``{question id: value}`` must cover
    every question (keys matched as strings; other keys are ignored); a sequence is returned as it is."""
    if not isinstance(values, Mapping):
        if isinstance(values, (str, bytes)):
            raise TypeError(f"{name} must be a sequence with one entry per question or a mapping "
                            "{question id: value}, not a string.")
        return values
    given = {}
    for key, value in values.items():
        text = str(key)
        if text in given:
            raise ValueError(f"{name}: question id {text!r} appears more than once.")
        given[text] = value
    text_ids = [str(q) for q in ids]
    missing = [q for q in text_ids if q not in given]
    if missing:
        shown = ", ".join(map(repr, missing[:5])) + (" ..." if len(missing) > 5 else "")
        raise ValueError(f"{name} has no entry for {len(missing)} of the bank's {len(ids)} question ids: {shown}.")
    return [given[q] for q in text_ids]  # (ids of other questions are ignored: a table of a larger bank)


def _check_costs(costs, ids):
    """``costs`` (in the bank's order) as a list of floats, a bad one named by its question id."""
    try:
        c = np.array(costs, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"costs must be positive numbers, one per question: {exc}") from None
    if c.ndim == 1 and c.size == len(ids):
        bad = np.flatnonzero(~(np.isfinite(c) & (c > 0)))
        if bad.size:
            raise ValueError(f"costs must be finite and positive; question id {ids[bad[0]]!r} has cost "
                             f"{float(c[bad[0]])!r} ({bad.size} such entries).")
    return check_costs(c, len(ids)).tolist()


def _check_clusters(clusters, ids):
    """``clusters`` (in the bank's order) as a list of ids, all str or all int; a missing one named
    by its question id (the estimator checks the rest when the loop starts)."""
    values = list(clusters.tolist() if isinstance(clusters, np.ndarray) else clusters)
    if len(values) != len(ids):
        raise ValueError(f"clusters must hold one cluster id per question ({len(ids)}), got {len(values)}.")
    out = []
    for qid, value in zip(ids, values):
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (str, numbers.Integral)):
            raise ValueError(f"clusters: question id {qid!r} has cluster {value!r}; cluster ids must be "
                             "strings or integers (every question needs one).")
        out.append(value if isinstance(value, str) else int(value))
    if len({type(v) for v in out}) > 1:
        raise ValueError("clusters must be all strings or all integers (not a mix).")
    return out


def _check_question_ids(question_ids, fm, n_questions):
    """The bank's ids as a list (str or int) and their type name; checked against the model's ids."""
    stored = getattr(fm, "question_ids_", None)
    if stored is None and getattr(fm, "feature_names_in_", None) is not None:
        stored = [str(q) for q in fm.feature_names_in_]
    if question_ids is None:
        question_ids = list(stored) if stored is not None else list(range(n_questions))
    if isinstance(question_ids, (str, bytes)):
        raise TypeError("question_ids must be a sequence of ids, not a single string.")
    ids = list(question_ids.tolist() if isinstance(question_ids, np.ndarray) else question_ids)
    if all(isinstance(q, str) for q in ids):
        id_type = "str"
    elif all(isinstance(q, numbers.Integral) and not isinstance(q, (bool, np.bool_)) for q in ids):
        id_type, ids = "int", [int(q) for q in ids]
    else:
        odd = [q for q in ids if not isinstance(q, (str, numbers.Integral)) or isinstance(q, (bool, np.bool_))]
        bad = odd[0] if odd else next(q for q in ids if not isinstance(q, type(ids[0])))
        raise TypeError(f"question_ids must be all strings or all integers; got {bad!r} ({type(bad).__name__}).")
    if len(ids) != n_questions:
        raise ValueError(f"question_ids has {len(ids)} entries, the factor model has {n_questions} questions.")
    text = [str(q) for q in ids]
    if len(set(text)) != len(text):
        dup = next(q for q in text if text.count(q) > 1)
        raise ValueError(f"question_ids must be unique; {dup!r} appears more than once.")
    if stored is not None:
        check_question_ids(fm, text)
    return ids, id_type
