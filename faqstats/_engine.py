"""The query loop: one engine under :class:`~faqstats.PAIEstimator`, the session and the paired estimator.

A *run* holds one evaluation's state and arithmetic; a :class:`QueryLoop` drives it (docs/architecture.md,
"One loop"; the increments: docs/statistics.md, "Increments")."""

import math
from typing import NamedTuple

import numpy as np

from ._validation import check_outcome_values
from .posterior import read_only
from .sampling import PolicyState, Sampler, check_law, inverse_cdf, within_round

__all__ = ["CLUSTER_QUERY_DTYPE", "QUERY_DTYPE", "ClusterRun", "Draw", "Oracle", "QueryLoop", "RoundDrawing", "Run",
           "SequentialRun", "StreamRun", "aipw_terms", "cluster_law", "encode_clusters", "des_raj_base", "draw_at",
           "increment_range", "pai_increment", "policy_law", "width_reached"]

_sum = np.add.reduce  # ndarray.sum without its Python wrapper (the live step calls it several times)

_DRAW_FIELDS = [(name, np.float64) for name in ("probability", "outcome", "increment", "prediction",
                                                 "prediction_total")]
QUERY_DTYPE = np.dtype([("question", np.int64)] + _DRAW_FIELDS)
#: One row per cluster draw: the cluster (index into the sorted labels), its size, q_t(c), Y_c, phi_t, P_c, the base.
CLUSTER_QUERY_DTYPE = np.dtype([("cluster", np.int64), ("size", np.int64)] + _DRAW_FIELDS)


def des_raj_base(prediction_sum, asked_prediction_sum, asked_outcome_sum):
    """Without replacement, N times an increment's prediction part: asked answers plus unasked predictions."""
    return asked_outcome_sum + (prediction_sum - asked_prediction_sum)


def pai_increment(base, outcome, prediction, probability, n_questions):
    """``phi_t = [base + (z_I - p_I) / q_t(I)] / N`` (numpy or torch)."""
    return (base + (outcome - prediction) / probability) / n_questions


def increment_range(base, predictions, law, n_questions, top=1.0):
    """``(L, U)`` containing ``phi_t = [base + (z_I - p_I) / q_t(I)] / N`` whatever ``q_t`` draws, with
    ``z`` in [0, ``top``] (a cluster's size): known before the draw. numpy, or torch with a run axis.

    >>> [float(x) for x in increment_range(1.0, np.array([0.5, 0.2, 0.9]), np.array([0.5, 0.5, 0.0]), 2)]
    [0.0, 1.3]
    """
    if isinstance(law, np.ndarray):
        support = law > 0
        p, q = predictions[support], law[support]
        top = top[support] if isinstance(top, np.ndarray) else top
        return (base + np.min(-p / q)) / n_questions, (base + np.max((top - p) / q)) / n_questions
    inf = law.new_full((), float("inf"))  # a tensor: its support by masking, one row per run
    low = (-predictions / law).where(law > 0, inf).amin(-1)
    high = ((top - predictions) / law).where(law > 0, -inf).amax(-1)
    return (base + low) / n_questions, (base + high) / n_questions


def aipw_terms(prediction, outcome, probability):
    """A labelled item's AIPW term ``p + (z - p) / pi`` and its variance term ``(z - p)^2 (1 - pi) / pi^2``."""
    residual = outcome - prediction
    return prediction + residual / probability, residual**2 * (1.0 - probability) / probability**2


def draw_at(q, u, keep_law):
    """``(question, probability, law)`` drawn from ``q`` at the uniform ``u``; with ``keep_law`` (a confidence
    sequence) the law is normalised and the probability read from it, else the law is None.
    """
    if not keep_law:
        return (*inverse_cdf(q, u), None)
    q = q / q.sum()
    question = inverse_cdf(q, u)[0]
    return question, float(q[question]), q


def policy_law(sampler, state):
    """The policy's law ``q_t`` in ``state`` (checked where :class:`~faqstats.Sampler` says so)."""
    q = sampler.probabilities(state)
    name = f"{type(sampler).__name__}.probabilities"
    return check_law(q, state.available.shape, state.asked, name) if sampler.checks_law else q


def width_reached(low, high, width, n_draws):
    """The stopping rule: after more than one draw, a confidence sequence at most ``width`` wide."""
    return (high - low <= width) & (n_draws > 1)


class Draw(NamedTuple):
    """One draw: the question (a pair for a paired run), its probability, its round and its law (or None)."""

    question: object
    probability: object
    round: int
    law: np.ndarray | None = None


class Oracle:
    """Answers questions from an array or a callable; validates and caches answers."""

    def __init__(self, outcomes, n_questions):
        self.n_questions, self.cache = n_questions, {}
        self.fn = outcomes if callable(outcomes) else None
        self.array = None
        if self.fn is None:
            arr = self.array = check_outcome_values(outcomes, "outcomes", allow_nan=True)  # in [0, 1] or NaN
            if arr.ndim != 1 or arr.size != n_questions:
                raise ValueError(f"outcomes must be a 1-D array with one entry per question ({n_questions}), "
                                 f"got shape {arr.shape}.")

    def ask(self, questions):
        """Outcomes of ``questions``; the callable is called once with the not-yet-answered ones."""
        questions = [int(q) for q in questions]
        if self.array is not None:  # one at a time: a round is a few questions, mostly one
            return [self._read(q) for q in questions]
        new = list(dict.fromkeys(q for q in questions if q not in self.cache))
        if new:
            got = np.atleast_1d(check_outcome_values(self.fn(np.array(new)), f"outcomes returned for questions {new}"))
            if got.shape != (len(new),):
                raise ValueError("the outcomes callable must return one outcome per requested question; "
                                 f"asked for {len(new)} question(s), got shape {got.shape}.")
            # the bank is fixed: a repeated question has the same answer, asked once
            self.cache.update(zip(new, map(float, got)))
        return [self.cache[q] for q in questions]

    def _read(self, question):
        z = self.cache.get(question)
        if z is None:
            z = float(self.array[question])
            if math.isnan(z):
                raise ValueError(f"outcomes[{question}] is NaN but question {question} was asked.")
            self.cache[question] = z
        return z


class Run:
    """What both designs' runs hold: the policy, the predictor, the bank, the budget, the records."""

    def __init__(self, sampler, predictor, n_questions, budget):
        self.sampler, self.predictor = sampler, predictor
        self.n_questions, self.budget = int(n_questions), int(budget)
        self.available = np.ones(self.n_questions, dtype=bool)  # askable, or (stream) not yet visited
        self.records = []
        # with costs: the cost per question and the expected cost per draw that fixed the budget
        self.costs = self.cost_per_draw = None

    @property
    def predictions(self):
        return self.predictor.predictions

    def end_round(self, questions, outcomes):
        """The predictor learns the round's answers, in draw order."""
        for question, outcome in zip(questions, outcomes):
            self.predictor.update(question, outcome)

    def table(self):
        return np.array(self.records, dtype=QUERY_DTYPE)


class RoundDrawing:
    """A round of draws from one law over the bank, shared by the one-model run and the K-model shared run.

    The host provides ``law()`` (``q_t`` at the round's start), ``available``, ``replace``, ``step``, ``tracker``
    (or None) and ``unit``; later draws of a round are renormalised over the questions not yet drawn, and a
    stored round is checked against the law before it is replayed.
    """

    def draw_round(self, rng, size, keep_laws=False):
        """``size`` draws ``(question, probability, law)`` from the current policy."""
        return self.round_of(size, lambda q, i: draw_at(q, rng.random(), keep_laws))

    def replay_round(self, draws, keep_laws=False, where="session"):
        """A stored round's draws ``(question, probability)``, each checked against the policy now."""

        def check(q, i):
            question, probability = draws[i]
            q = q / q.sum()
            expected = float(q[question])
            if not math.isclose(expected, probability, rel_tol=1e-9):
                raise ValueError(f"{where}: {self.unit} {question} was drawn with probability {probability!r}, but "
                                 f"the policy now gives {expected!r}: the state does not match the factor model or "
                                 "sampler.")
            return (question, expected, q) if keep_laws else (question, probability, None)

        return self.round_of(len(draws), check)

    def round_of(self, size, pick):
        """``size`` draws, the i-th ``pick(q, i)`` of its law ``q`` (the round's, less the questions drawn)."""
        q_round = self.law()
        available = self.available.copy() if size > 1 and not self.replace else self.available
        draws = []
        for i in range(size):
            q = q_round if i == 0 or self.replace else within_round(q_round, available, False)
            if self.tracker is not None:  # a stratified design: the draw's group, fixed in advance
                q = self.tracker.restrict(q, available, self.step - 1 + i)
            draws.append(pick(q, i))
            if size > 1 and not self.replace:
                available[draws[-1][0]] = False
        return draws


class SequentialRun(RoundDrawing, Run):
    """State of one sequential PAI run: a round's draws come from the policy's :meth:`law` at its
    start, :meth:`record` takes the answers in draw order, :meth:`end_round` lets the predictor learn them."""

    design = "sequential"
    unit = "question"  # what a draw picks (in messages)

    def __init__(self, sampler, predictor, n_questions, budget):
        super().__init__(sampler, predictor, n_questions, budget)
        self.replace = bool(sampler.replace)
        self._available_view = read_only(self.available.view())
        self.asked_total = 0.0  # sum of outcomes of distinct asked questions (without replacement)
        self._asked = np.empty(max(self.budget, 1), dtype=np.intp)  # those questions, in order
        self._n_asked, self._asked_view, self.step = 0, self._asked[:0], 1
        self.tracker = None  # an estimands.EstimandTracker when groups or a weighted estimand are asked for

    @property
    def asked(self):
        """Indices of the questions no longer askable (empty with replacement), in draw order (read-only)."""
        return self._asked_view

    @property
    def done(self):
        return self.step > self.budget

    @property
    def progress(self):
        """Draws recorded (for progress bars)."""
        return self.step - 1

    def round_size(self, requested):
        return min(int(requested), self.budget - self.step + 1)

    def state(self):
        """The read-only :class:`~faqstats.sampling.PolicyState` the policy sees now (for this round)."""
        view = self.predictor.view()
        return PolicyState(self.predictions, self._available_view, self.step, self.budget, view.question_factors,
                           view.mean, view.cov, posterior=view, asked=self.asked)

    def law(self):
        """``q_t`` of the round's first draw (:func:`policy_law`, restricted by a tracker)."""
        q = policy_law(self.sampler, self.state())
        return q if self.tracker is None else self.tracker.law(q, self.available)

    def base(self):
        """The prediction part of the next increment times N: sum p, or asked z + unasked p."""
        p = self.predictions  # without replacement: all predictions less the few asked (a gather, not a mask)
        return _sum(p) if self.replace else des_raj_base(_sum(p), _sum(p[self.asked]), self.asked_total)

    def increment_range(self, q):
        """``[L, U]`` containing ``phi_t`` whatever ``q`` draws (:func:`increment_range`)."""
        return increment_range(self.base(), self.predictions, q, self.n_questions)

    def record(self, question, probability, outcome):
        """Record the answer to ``question``; return ``phi_t`` (the predictor moves at :meth:`end_round`)."""
        base = self.base()
        prediction = self.predictions[question]
        phi = pai_increment(base, outcome, prediction, probability, self.n_questions)
        self.records.append((question, probability, outcome, phi, prediction, base))
        if self.tracker is not None:
            self.tracker.record(question, probability, outcome, self.predictions)
        if not self.replace:
            self.available[question] = False
            self.asked_total += outcome
            if self._n_asked == self._asked.size:
                self._asked = np.concatenate([self._asked, np.empty_like(self._asked)])
            self._asked[self._n_asked] = question
            self._n_asked += 1
            self._asked_view = read_only(self._asked[: self._n_asked])
        self.step += 1
        return phi


def encode_clusters(clusters, n_questions):
    """``(codes, labels)``: each question's cluster as an integer code into ``labels`` (sorted)."""
    c = np.asarray(clusters)
    if c.ndim != 1 or c.size != n_questions:
        raise ValueError(f"clusters must hold one cluster id per question ({n_questions}), got shape {c.shape}.")
    if c.dtype.kind == "f" and np.isnan(c).any():
        raise ValueError(f"clusters must not contain NaN: clusters[{int(np.flatnonzero(np.isnan(c))[0])}] is NaN; "
                         "give every question a cluster id (its own id for a question alone).")
    if c.dtype.kind == "O" and any(x is None or (isinstance(x, float) and math.isnan(x)) for x in c):
        raise ValueError("clusters must not contain None or NaN: give every question a cluster id.")
    try:
        labels, codes = np.unique(c, return_inverse=True)
    except TypeError as exc:
        raise ValueError(f"clusters must be ids of one sortable kind (all ints or all strings): {exc}") from None
    if labels.size < 2:
        raise ValueError(f"clusters must define at least 2 clusters, got {labels.size}: with one cluster every draw "
                         "asks the whole bank (leave clusters out, or give each question its own id).")
    return codes.reshape(-1).astype(np.intp), labels


#: How a cluster's score is made from its questions' scores (docs/statistics.md, "Clusters").
CLUSTER_SCORES = ("root-sum-square", "sum")


def cluster_law(sampler, state, codes, sizes, cluster_available, root_costs=None, score="root-sum-square"):
    """The law over clusters of a policy over questions (docs/statistics.md, "Clusters"): ``q(c) = tau m_c / |R|
    + (1 - tau) S_c / sum S``, or a policy's own law summed per cluster."""
    n_clusters = sizes.size
    name = type(sampler).__name__
    if type(sampler).probabilities is Sampler.probabilities:  # defined by its scores
        s = np.asarray(sampler.scores(state), dtype=float)
        if s.shape != state.available.shape:
            raise RuntimeError(f"{name}.scores returned shape {s.shape}, expected {state.available.shape}.")
        s = np.where(state.available, s, 0.0)
        if not np.all(np.isfinite(s)) or float(s.min()) < 0.0:
            raise FloatingPointError(f"{name}.scores returned negative or non-finite values.")
        top = float(s.max())
        if top > 0:
            s = s / top  # scale-free: the law normalises; no overflow in the squares
        S = np.bincount(codes, s, n_clusters) if score == "sum" else np.sqrt(np.bincount(codes, s * s, n_clusters))
        if root_costs is not None:
            S = S / root_costs
        S = np.where(cluster_available, S, 0.0)
        m = np.where(cluster_available, sizes, 0).astype(float)
        total, tau = float(S.sum()), float(sampler.tau)
        q = m / m.sum()
        if total > 0 and tau < 1.0:
            q = tau * q + (1.0 - tau) * (S / total)
    else:
        if root_costs is not None:
            raise ValueError(f"{name} overrides probabilities: costs weigh a policy's scores.")
        q = check_law(sampler.probabilities(state), state.available.shape, state.asked_indices(),
                      f"{name}.probabilities")
        q = np.where(cluster_available, np.bincount(codes, q, n_clusters), 0.0)
    mass = float(q.sum())
    if not (math.isfinite(mass) and mass > 0):
        raise FloatingPointError(f"{name}: the law over clusters has total mass {mass!r}.")
    return q / mass


class ClusterRun(SequentialRun):
    """A sequential PAI run whose unit of sampling is a cluster of questions: ``phi_t`` over cluster totals,
    the law over clusters from :func:`cluster_law`; ``budget`` and ``available`` count clusters."""

    def __init__(self, sampler, predictor, n_questions, budget, codes, root_costs=None,
                 score="root-sum-square"):
        super().__init__(sampler, predictor, n_questions, budget)
        self.codes, self.sizes = codes, np.bincount(codes)
        self.n_clusters = int(self.sizes.size)
        order = np.argsort(codes, kind="stable")
        self.members = np.split(order, np.cumsum(self.sizes)[:-1])  # each cluster's questions, in order
        self.available = np.ones(self.n_clusters, dtype=bool)  # askable clusters
        self.question_available = np.ones(self.n_questions, dtype=bool)
        self._available_view = read_only(self.question_available.view())
        self._asked = np.empty(0, dtype=np.intp)  # asked questions, cluster by cluster in draw order
        self._asked_view = read_only(self._asked.view())
        self.root_costs, self.score = root_costs, score
        self.values = np.zeros(self.n_questions)  # the asked questions' outcomes (without replacement)
        self.group_codes = None  # with groups (every cluster in one group): each question's group code
        self.group_rows = []  # every draw's group increments (set_groups)

    def set_groups(self, codes):
        """Track every group's increment too (``codes``: a group per question, one per cluster)."""
        self.group_codes = codes
        self.group_sizes = np.bincount(codes)
        self.cluster_group = codes[[m[0] for m in self.members]]  # each cluster's group
        self.group_clusters = np.bincount(self.cluster_group, minlength=self.group_sizes.size)

    unit = "cluster"

    def law(self):
        """``q_t`` over clusters for the round's first draw (:func:`cluster_law`)."""
        return cluster_law(self.sampler, self.state(), self.codes, self.sizes, self.available, self.root_costs,
                           self.score)

    def cluster_predictions(self):
        """``P_c``: every cluster's summed predictions."""
        return np.bincount(self.codes, self.predictions, self.n_clusters)

    def increment_range(self, q):
        """``[L, U]`` containing ``phi_t`` whatever cluster ``q`` draws and whatever its outcomes."""
        return increment_range(self.base(), self.cluster_predictions(), q, self.n_questions, self.sizes)

    def record(self, question, probability, outcome):
        """Record cluster ``question``'s answers (in question order); return ``phi_t``."""
        cluster = int(question)
        members = self.members[cluster]
        z = np.asarray(outcome, dtype=float)
        if z.shape != members.shape:
            raise ValueError(f"cluster {cluster} has {members.size} questions, got {z.size} outcomes.")
        base = self.base()
        total, prediction = float(z.sum()), float(self.predictions[members].sum())
        phi = pai_increment(base, total, prediction, probability, self.n_questions)
        self.records.append((cluster, members.size, probability, total, phi, prediction, base))
        if self.group_codes is not None:  # v: asked outcomes and unasked predictions (all predictions with replacement)
            p = np.asarray(self.predictions, dtype=float)
            v = p if self.replace else np.where(self.question_available, p, self.values)
            rows = np.bincount(self.group_codes, v, self.group_sizes.size)
            rows[self.cluster_group[cluster]] += (total - prediction) / probability
            self.group_rows.append(rows / self.group_sizes)
        if not self.replace:
            self.available[cluster] = False
            self.question_available[members] = False
            self.values[members] = z
            self.asked_total += total
            self._asked = np.concatenate([self._asked, members])
            self._asked_view = read_only(self._asked.view())
        self.step += 1
        return phi

    def end_round(self, questions, outcomes):
        """The predictor learns the round's clusters' answers, in draw order, each in question order."""
        members = np.concatenate([self.members[int(c)] for c in questions])
        super().end_round(map(int, members), map(float, np.concatenate([np.asarray(z, float) for z in outcomes])))

    def table(self):
        return np.array(self.records, dtype=CLUSTER_QUERY_DTYPE)


class QueryLoop:
    """Drives a run: rounds of ``batch_size`` draws (the predictor learns between rounds), answers recorded in draw
    order, and the stopping rules (``confidence_sequence``, ``stop_when_width``).
    """

    def __init__(self, run, *, batch_size=1, confidence_sequence=None, stop_when_width=None):
        self.run, self.batch_size, self.cs, self.stop_when_width = run, batch_size, confidence_sequence, stop_when_width
        self.draws, self.outcomes, self.confidence_rows = [], [], []
        self.n_recorded = self._round_start = self._rounds = 0
        self.stop_reason = "budget" if run.done else None

    @property
    def done(self):
        return self.stop_reason is not None

    @property
    def pending(self):
        """The draws waiting for their answers (the current round's unrecorded ones)."""
        return self.draws[self.n_recorded :]

    def draw_round(self, rng, size=None):
        """Draw a round (``batch_size`` draws unless ``size`` says otherwise) and return it."""
        return self._add_round(self.run.draw_round(rng, self._size(size), self.cs is not None))

    def replay_round(self, draws, where="session"):
        """Take a stored round's ``(question, probability)`` draws, checked against the policy."""
        return self._add_round(self.run.replay_round(list(draws), self.cs is not None, where))

    def _size(self, size):
        if self.stop_reason is not None:
            raise RuntimeError(f"The loop is done ({self.stop_reason}): nothing left to draw.")
        if self.n_recorded < len(self.draws):
            raise RuntimeError("The previous round is still waiting for answers.")
        return self.run.round_size(self.batch_size if size is None else size)

    def _add_round(self, draws):
        index, self._rounds = self._rounds, self._rounds + 1
        new = [Draw(q, p, index, law) for q, p, law in draws]
        self.draws.extend(new)
        if not new:  # a stream that ended without another label
            self.stop_reason = "budget"
        return new

    def record(self, outcome):
        """Record the answer to the first pending draw; a round ends when all its draws are answered."""
        draw = self.draws[self.n_recorded]
        run, cs = self.run, self.cs
        bounds = run.increment_range(draw.law) if cs is not None else None
        phi = run.record(draw.question, draw.probability, outcome)
        if cs is not None:
            cs.update(phi, *bounds)
        self.outcomes.append(outcome)
        self.n_recorded += 1
        if self.n_recorded == len(self.draws):  # rounds are drawn whole: this one is complete
            self._end_round()
        return phi

    def _end_round(self):
        run = self.run
        start, self._round_start = self._round_start, self.n_recorded
        run.end_round([d.question for d in self.draws[start:]], self.outcomes[start:])
        if self.cs is not None:
            low, high = self.cs.interval()
            self.confidence_rows.append((run.progress, low, high))
            if self.stop_when_width is not None and width_reached(low, high, self.stop_when_width, run.progress):
                self.stop_reason = "width"
        if run.done and self.stop_reason is None:
            self.stop_reason = "budget"


class StreamRun(Run):
    """State of one nature's-order run: a skipped item contributes its prediction, a labelled one
    ``p + (z - p) / pi``."""

    design = "stream"

    def __init__(self, sampler, predictor, n_questions, budget, order):
        super().__init__(sampler, predictor, n_questions, budget)
        self.order = np.asarray(order)
        self.position = self.labels_used = 0
        self.terms = []  # psi_t = p_t + (z_t - p_t) xi_t / pi_t, one per visited item
        self.variance_terms = []  # xi_t (z_t - p_t)^2 (1 - pi_t) / pi_t^2
        self._rescore()

    def _rescore(self):  # the scores of the items not yet visited and their sum
        self.scores = np.asarray(self.sampler.item_scores(self.predictions), dtype=float)
        self.score_sum = float(np.where(self.available, self.scores, 0.0).sum())

    @property
    def item(self):
        return int(self.order[self.position])

    @property
    def done(self):
        return self.position >= self.n_questions

    @property
    def progress(self):
        """Items visited (for progress bars)."""
        return self.position

    def round_size(self, requested):
        return 1

    def inclusion_probability(self):
        """``pi_t`` of the current item."""
        remaining = self.n_questions - self.position
        return float(self.sampler.inclusion_probability(self.scores[self.item], self.score_sum / remaining,
                                                        self.labels_used, remaining, self.budget, self.n_questions))

    def _advance(self, item):
        self.available[item] = False
        self.score_sum -= self.scores[item]
        self.position += 1

    def skip(self):
        """The coin said skip: the item contributes its prediction."""
        item = self.item
        self.terms.append(self.predictions[item])
        self._advance(item)

    def draw_round(self, rng, size=1, keep_laws=False):
        """Coins along the stream until one says label: ``[(item, pi, None)]``, or ``[]`` at its end."""
        while not self.done:
            pi = self.inclusion_probability()
            if rng.random() < pi:
                return [(self.item, pi, None)]
            self.skip()
        return []

    def record(self, question, probability, outcome):
        """The labelled current item's answer; returns its term."""
        p = self.predictions[question]
        term, variance_term = aipw_terms(p, outcome, probability)
        self.terms.append(term)
        self.variance_terms.append(variance_term)
        self.records.append((question, probability, outcome, term, p, np.nan))
        self.labels_used += 1
        self._advance(question)
        return term

    def end_round(self, questions, outcomes):
        super().end_round(questions, outcomes)
        self._rescore()
