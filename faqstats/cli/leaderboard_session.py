"""``faqstats session new --models ...`` and ``session status|report`` of a leaderboard: several models, a session
each (``next`` and ``record`` take ``--model NAME``), and the leaderboard with simultaneous and rank intervals."""

from pathlib import Path

from ..integrations import read_question_ids
from ..io import load_factor_model, load_model_file
from ..sampling import HybridSampler
from ..session import LeaderboardSession
from .common import emit, history_for

__all__ = ["leaderboard_status_text", "run_leaderboard_report", "run_leaderboard_status", "run_new_leaderboard"]

# ``session new`` options a leaderboard's sessions do not take, with the value each has when not given
_ONE_MODEL_ONLY = (("--step-weights", "step_weights", None), ("--stop-when-width", "stop_when_width", None),
                   ("--groups-from", "groups_from", None), ("--estimand", "estimand", "micro"),
                   ("--min-group-share", "min_group_share", 0.0), ("--stratify", "stratify", False),
                   ("--costs-from", "costs_from", None), ("--budget-cost", "budget_cost", None),
                   ("--clusters-from", "clusters_from", None))


def run_new_leaderboard(args):
    """``session new DIR --model FILE --models NAME ... --budget B``: one session per model, and the manifest."""
    chosen = [option for option, name, unset in _ONE_MODEL_ONLY if getattr(args, name) != unset]
    if chosen:
        raise ValueError(f"--models (a leaderboard) does not take {', '.join(chosen)}: each model's session draws "
                         "with the policy alone, as LeaderboardEstimator's runs do.")
    if args.budget is None:
        raise ValueError("--models needs --budget: the number of questions asked over all the models.")
    _, meta, _ = load_model_file(args.model, allow_unchecked=args.allow_unchecked)
    if meta.get("configuration") is not None:
        raise ValueError(f"{args.model} holds a configuration (fit-history --budget) chosen for one model; a "
                         "leaderboard takes a factor model saved without --budget.")
    model = load_factor_model(args.model, allow_unchecked=True) if args.allow_unchecked else args.model
    ids = read_question_ids(args.question_ids) if args.question_ids is not None else None
    sampler = HybridSampler(tau=0.5 if args.tau is None else args.tau, replace=args.replace)
    board = LeaderboardSession.create(args.directory, model, args.models, args.budget, ids, sampler=sampler,
                                      batch_size=args.batch_size, alpha=args.alpha, random_state=args.seed)
    st = board.status()
    first = board.session(board.names[0])
    shares = ", ".join(f"{name} {b}" for name, b in zip(board.names, board.budgets))
    emit(args, st, f"Created a leaderboard session in {board.directory} ({len(board.names)} models, "
         f"{first.n_questions} questions, budget {board.budget}: {shares}; batch size {first.batch_size}, "
         f"seed {board.random_state}).\nNext: faqstats session next {board.directory} --model {board.names[0]}")


def _aligned(head, body, left=1):
    """Rows of cells as lines, the first ``left`` columns left-aligned, the others right-aligned."""
    widths = [max(len(row[k]) for row in [head, *body]) for k in range(len(head))]
    return ["  ".join(c.ljust(w) if k < left else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths))).rstrip()
            for row in [head, *body]]


def leaderboard_status_text(st):
    """The human-readable ``session status`` of a leaderboard: every model's progress, then the leaderboard."""
    running = len(st["unfinished"])
    lines = [f"Leaderboard {st['directory']}: {len(st['names'])} models, {st['n_draws']} of {st['budget']} draws, "
             + ("done." if st["done"] else f"{running} model{'s' if running > 1 else ''} running.")]
    body = [[m["model"], str(m["n_draws"]), str(m["budget"]), str(len(m["pending"])),
             f"done ({m['stop_reason']})" if m["done"] else "running"] for m in st["models"]]
    lines += _aligned(["model", "draws", "budget", "pending", "state"], body)
    board = st["leaderboard"]
    if board is None:
        lines.append("The leaderboard needs two answers of every model.")
        return "\n".join(lines)
    level = f"{100 * (1 - st['alpha']):g}%"
    if st["partial"]:
        lines.append(f"Leaderboard so far ({', '.join(st['unfinished'])} running; the intervals are not valid to "
                     "stop on):")
    else:
        lines.append(f"Leaderboard, {level} intervals and ranks for all models at once ({st['simultaneous']}):")
    body = [[r["model"], f"{r['estimate']:.4f}", f"{r['std_error']:.4f}", f"{r['lower']:.4f}", f"{r['upper']:.4f}",
             str(r["best"]) if r["best"] == r["worst"] else f"{r['best']}-{r['worst']}"] for r in board["rows"]]
    lines += _aligned(["model", "estimate", "std_err", "lower", "upper", "rank"], body)
    lines.append(f"May be best: {', '.join(board['may_be_best'])}.")
    return "\n".join(lines)


def run_leaderboard_status(args):
    st = LeaderboardSession.load(args.directory, allow_unchecked=args.allow_unchecked).status()
    emit(args, st, leaderboard_status_text(st))


def run_leaderboard_report(args):
    board = LeaderboardSession.load(args.directory, allow_unchecked=args.allow_unchecked)
    payload = board.status()
    text = [leaderboard_status_text(payload)]
    if payload["leaderboard"] is not None:
        joint = board.result(partial=True)
        diffs = joint.differences(board.alpha)
        payload["differences"] = [{"model": i, "other": j, **{k: float(v) for k, v in row.items()}}
                                  for (i, j), row in diffs.iterrows()]
        text.append(f"Differences, {100 * (1 - board.alpha):g}% intervals for all pairs at once:")
        body = [[i, j, f"{row['estimate']:+.4f}", f"{row['std_error']:.4f}", f"{row['lower']:+.4f}",
                 f"{row['upper']:+.4f}"]
                for (i, j), row in diffs.iterrows()]
        text += _aligned(["model", "other", "difference", "std_err", "lower", "upper"], body, left=2)
        if args.png is not None:
            png = Path(args.png)
            if not args.png.strip() or png.is_dir():
                raise ValueError(f"--png takes a file to write the plot to; {args.png!r} is a directory.")
            png = png if png.suffix else png.with_name(png.name + ".png")
            board.plot(png, partial=True)
            payload["png"] = str(png)
            text.append(f"Plot written to {png}")
    elif args.png is not None:
        raise ValueError("--png: nothing to plot yet; the leaderboard needs two answers of every model.")
    if args.model_based is not None:
        table = board.model_based(history_for(args.model_based, board.session(board.names[0]).question_ids),
                                  random_state=board.random_state, verbose=not (args.quiet or args.json))
        payload["model_based"] = [{"model": name, **{k: (bool(v) if k == "flagged" else float(v))
                                                     for k, v in row.items()}} for name, row in table.iterrows()]
        text.append(f"Model-based estimates, {100 * (1 - board.alpha):g}% intervals for all models at once "
                    "(valid if every model is like the history's; a flagged model: use its design-based interval):")
        body = [[name, f"{row['estimate']:.4f}", f"{row['lower']:.4f}", f"{row['upper']:.4f}",
                 f"{row['design_based']:.4f}", "yes" if row["flagged"] else "no"] for name, row in table.iterrows()]
        text += _aligned(["model", "model-based", "lower", "upper", "design-based", "flagged"], body)
    emit(args, payload, "\n".join(text))
