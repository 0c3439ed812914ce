"""What a session reports while it runs: the running estimate, the groups' table, the status and the plot."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..run_results import result_of

__all__ = ["group_table", "plot", "status", "trajectory"]


def trajectory(estimator, loop, alpha):
    """``(draws, estimate, low, high)`` after each recorded draw of ``loop`` from the second on (ndarray)."""
    rows = []
    for t in range(2, loop.n_recorded + 1):
        res = result_of(estimator, loop, t)
        rows.append((t, res.estimate, *res.conf_int(alpha=alpha)))
    return np.array(rows, dtype=float).reshape(-1, 4)


def plot(session, path=None, ax=None):
    """Draw ``session.trajectory()`` and its confidence sequence on ``ax`` (a new ``Figure``'s by default)."""
    from matplotlib.figure import Figure

    traj = session.trajectory()
    if not len(traj):
        raise ValueError(
            f"Nothing to plot yet: a plot needs at least two recorded answers ({session.n_draws} so far)."
        )
    if ax is None:
        ax = Figure(figsize=(6.4, 4.0), layout="constrained").add_subplot()
    level = f"{100 * (1 - session.alpha):g}%"
    ax.fill_between(traj[:, 0], traj[:, 2], traj[:, 3], alpha=0.25, color="C0", label=f"{level} interval")
    ax.plot(traj[:, 0], traj[:, 1], color="C0", label="estimate")
    cs = session.confidence_sequence()
    if cs is not None and len(cs):
        ax.step(cs[:, 0], cs[:, 1], where="post", color="C1", lw=1, label=f"{level} anytime-valid")
        ax.step(cs[:, 0], cs[:, 2], where="post", color="C1", lw=1)
    ax.set(xlabel="draws (queries)", ylabel="accuracy", ylim=(0, 1), xlim=(1, max(session.budget, 2)))
    state = session.stop_reason or "running"
    ax.set_title(f"{session.n_queries} of {session.n_questions} questions asked ({state})", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    if path is not None:
        ax.figure.savefig(Path(os.fspath(path)), dpi=120)
    return ax


def group_table(session, simultaneous=False):
    """Every group's estimate so far as a list of dicts (sorted by label), or None (see the session's method)."""
    if session.groups is None or session.n_draws < 2:
        return None
    results = session.group_results()
    frame = results.to_frame(alpha=session.alpha)
    if simultaneous:
        both = results.conf_int(alpha=session.alpha, simultaneous=True)
        frame["simultaneous_lower"], frame["simultaneous_upper"] = both["lower"], both["upper"]
    rows = []
    for label, row in frame.iterrows():
        label = label.item() if isinstance(label, np.generic) else label
        rows.append({"group": label, **{k: (int(v) if k.startswith("n_") else float(v)) for k, v in row.items()}})
    return rows


def status(session, sampler_spec, run, simultaneous=False):
    """The session's JSON-serialisable summary; ``sampler_spec`` as stored, ``run`` its loop's run (costs)."""
    res = session.result() if session.n_draws >= 2 else None
    cs = session.confidence_sequence()
    config = ("n_questions", "budget", "batch_size", "stop_when_width", "alpha", "random_state")
    spent = None
    if run.costs is not None:
        unit = "question" if session.n_clusters is None else "cluster"  # the run's costs are per unit drawn
        spent = float(run.costs[np.unique(run.table()[unit])].sum()) if session.n_draws else 0.0
    estimand = session.estimand
    return {
        "directory": None if session.directory is None else str(session.directory),
        **{name: getattr(session, name) for name in config},
        "sampler": sampler_spec,
        **{name: getattr(session, name) for name in ("n_draws", "n_queries", "n_answers")},
        "pending": session.pending.ids,
        "done": session.done,
        "stop_reason": session.stop_reason,
        "estimate": None if res is None else res.estimate,
        "std_error": None if res is None else res.std_error,
        "conf_int": None if res is None else list(res.conf_int(alpha=session.alpha)),
        "anytime_interval": [float(cs[-1, 1]), float(cs[-1, 2])] if cs is not None and len(cs) else None,
        "estimand": estimand if isinstance(estimand, str) else "weighted",
        "costs": run.costs is not None,
        "budget_cost": session.budget_cost,
        "cost_spent": spent,
        "cost_per_draw": run.cost_per_draw,
        "groups": session.group_table(simultaneous),
        "n_clusters": session.n_clusters,
        "n_clusters_asked": session.n_clusters_asked,
    }
