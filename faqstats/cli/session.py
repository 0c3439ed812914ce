"""``faqstats session new|next|record|status|report``: a resumable evaluation driven from the shell."""

import dataclasses
import json
import shlex
import sys
from pathlib import Path

from ..integrations import read_outcome_pairs, read_question_ids, task_groups
from ..integrations._harness import read_round, round_arguments
from ..io import load_factor_model, load_model_file, load_step_weights
from ..sampling import HybridSampler
from ..session import EvaluationSession, LeaderboardSession
from ..session.leaderboard import is_leaderboard
from .common import (add_reader_options, all_reader_options, check_option_tasks, count, emit, finish, harness_of,
                     history_for, note, option_words, question_files, reader_kwargs, reading_harness)
from .leaderboard_session import run_leaderboard_report, run_leaderboard_status, run_new_leaderboard


def _load(args):
    """The session in DIR, or with ``--model NAME`` that model's session of the leaderboard in DIR."""
    name = getattr(args, "model_name", None)
    if is_leaderboard(args.directory):
        board = LeaderboardSession.load(args.directory, allow_unchecked=args.allow_unchecked)
        if name is None:
            raise ValueError(f"{args.directory} is a leaderboard of {len(board.names)} models "
                             f"({', '.join(board.names)}): name one with --model NAME.")
        return board.session(name)
    if name is not None:
        raise ValueError(f"--model {name}: {args.directory} is a one-model session, not a leaderboard (made with "
                         "'session new --models'); drop --model.")
    return EvaluationSession.load(args.directory, allow_unchecked=args.allow_unchecked)


def _addressed(args):
    """DIR as the commands take it, with ``--model NAME`` for a model of a leaderboard."""
    name = getattr(args, "model_name", None)
    return str(args.directory) if name is None else f"{args.directory} --model {shlex.quote(name)}"


def _check_group_options(args):
    if args.groups_from is None and (args.estimand != "micro" or args.min_group_share or args.stratify):
        raise ValueError("--estimand macro, --min-group-share and --stratify need --groups-from (tasks or a FILE).")


def _new_configured(args, stored_ids):
    """``session new --model`` of a ``fit-history --budget`` file: exactly the configured estimator."""
    chosen = [option for option, value in (("--tau", args.tau), ("--step-weights", args.step_weights),
                                           ("--replace", args.replace or None), ("--budget-cost", args.budget_cost))
              if value is not None]
    if chosen:
        raise ValueError(f"{args.model} holds a configuration (fit-history --budget): its policy and weights are "
                         f"used; drop {', '.join(chosen)}.")
    _check_group_options(args)
    ids = read_question_ids(args.question_ids) if args.question_ids is not None else None
    bank_ids = ids or stored_ids
    if (args.groups_from is not None or args.costs_from is not None) and bank_ids is None:
        raise ValueError("--groups-from and --costs-from read the bank's question ids: give --question-ids.")
    groups, costs, _ = question_files(args, lambda: bank_ids, clusters=False)
    session = EvaluationSession.from_configuration(
        args.model, ids, budget=args.budget, directory=args.directory, batch_size=args.batch_size,
        stop_when_width=args.stop_when_width, alpha=args.alpha, random_state=args.seed, groups=groups,
        estimand=args.estimand, min_group_share=args.min_group_share, stratify=args.stratify, costs=costs)
    st = session.status()
    sampler = st["sampler"]
    policy = f"{sampler['class']}({', '.join(f'{k}={v!r}' for k, v in sampler['params'].items())})"
    emit(args, st, f"Created a session in {session.directory} ({st['n_questions']} questions, budget {st['budget']}, "
         f"batch size {st['batch_size']}, seed {st['random_state']}) from the configuration in {args.model}: "
         f"predictor {type(session.factor_model).__name__ if session.factor_model is not None else 'none'}, "
         f"policy {policy}.\nNext: faqstats session next {session.directory}")


def run_new(args):
    if not args.directory.strip():  # an empty DIR would write into the current directory
        raise ValueError(f"the session directory must be a path, got {args.directory!r}.")
    if args.models is not None:
        return run_new_leaderboard(args)
    _, meta, stored_ids = load_model_file(args.model, allow_unchecked=args.allow_unchecked)
    if meta.get("configuration") is not None:  # from 'fit-history --budget'
        return _new_configured(args, stored_ids)
    # a model file written before faqstats stored checksums is read here, with --allow-unchecked
    model = load_factor_model(args.model, allow_unchecked=True) if args.allow_unchecked else args.model
    if (args.budget is None) == (args.budget_cost is None):
        raise ValueError("give --budget (questions) or --budget-cost (cost units, with --costs-from), one of them.")
    if args.budget_cost is not None and args.costs_from is None:
        raise ValueError("--budget-cost needs --costs-from FILE (a positive cost per question id).")
    _check_group_options(args)
    ids = read_question_ids(args.question_ids) if args.question_ids is not None else None

    def bank_ids():  # the ids to read the files by
        fm = load_factor_model(args.model, allow_unchecked=args.allow_unchecked)
        return ids if ids is not None else (fm.question_ids_ or [str(j) for j in range(fm.n_features_in_)])

    groups, costs, clusters = question_files(args, bank_ids)
    weights = None if args.step_weights is None else load_step_weights(args.step_weights,
                                                                       allow_unchecked=args.allow_unchecked).weights
    sampler = HybridSampler(tau=0.5 if args.tau is None else args.tau, replace=args.replace)
    session = EvaluationSession.create(
        args.directory, model, ids, sampler=sampler, budget=100 if args.budget is None else args.budget,
        batch_size=args.batch_size, step_weights=weights, stop_when_width=args.stop_when_width, alpha=args.alpha,
        random_state=args.seed, groups=groups, estimand=args.estimand, min_group_share=args.min_group_share,
        stratify=args.stratify, costs=costs, budget_cost=args.budget_cost, clusters=clusters)
    st = session.status()
    extra = "" if groups is None else f", {len(set(groups))} groups, estimand {args.estimand}"
    if clusters is not None:
        extra += f", {st['n_clusters']} clusters (a draw asks a whole cluster)"
    if costs is not None:
        extra += ", costs per question" + ("" if args.budget_cost is None else
                                           f", cost budget {args.budget_cost:g} = {st['budget']} draws")
    emit(args, st, f"Created a session in {session.directory} ({st['n_questions']} questions, budget {st['budget']}, "
         f"batch size {st['batch_size']}, seed {st['random_state']}{extra}).\n"
         f"Next: faqstats session next {session.directory}")


def status_text(st):
    """The human-readable ``session status``: progress, estimate, costs, groups, clusters, pending ids."""
    lines = [f"Session {st['directory']}: {st['n_answers']} of {st['n_questions']} questions answered, "
             f"{st['n_draws']} of {st['budget']} draws in the estimate, "
             + (f"done ({st['stop_reason']})." if st["done"] else f"{len(st['pending'])} pending.")]
    if st.get("estimand", "micro") != "micro":
        what = "the mean of the groups' accuracies" if st["estimand"] == "macro" else "a weighted accuracy"
        lines.append(f"Estimand: {st['estimand']} ({what}).")
    if st["estimate"] is not None:
        low, high = st["conf_int"]
        lines.append(f"Estimate {st['estimate']:.4f}, {100 * (1 - st['alpha']):g}% CI [{low:.4f}, {high:.4f}].")
    if st.get("costs"):
        budget = "" if st["budget_cost"] is None else (
            f" of a cost budget of {st['budget_cost']:.6g} ({st['budget']} draws at an expected "
            f"{st['cost_per_draw']:.4g} per draw)")
        lines.append(f"Cost spent {st['cost_spent']:.6g}{budget}.")
    if st.get("groups"):
        lines += _group_lines(st["groups"], st["alpha"])
    if st.get("n_clusters"):
        lines.append(f"Clusters: {st['n_clusters_asked']} of {st['n_clusters']} asked ({st['n_queries']} questions); "
                     "a draw asks a whole cluster and counts once all its answers are in.")
    if st["pending"]:
        lines.append("Pending: " + " ".join(map(str, st["pending"])))
    return "\n".join(lines)


def _group_lines(rows, alpha):
    """The per-group table of ``session status``/``report``: one line per group, aligned."""
    simultaneous = "simultaneous_lower" in rows[0]
    keys = ["estimate", "std_error", "lower", "upper"] + (["simultaneous_lower", "simultaneous_upper"] if simultaneous
                                                         else [])
    head = ["group", "questions", "asked", "estimate", "std_err", "lower", "upper"] + (
        ["simult_lower", "simult_upper"] if simultaneous else [])
    body = [[str(r["group"]), str(r["n_questions"]), str(r["n_asked"])] + [f"{r[k]:.4f}" for k in keys] for r in rows]
    widths = [max(len(row[k]) for row in [head, *body]) for k in range(len(head))]
    fmt = lambda row: "  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths)))
    title = f"Groups ({len(rows)}), {100 * (1 - alpha):g}% intervals" + (
        " (simult: for all groups at once):" if simultaneous else ":")
    return [title, fmt(head), *map(fmt, body)]


def run_next(args):
    if args.print is not None and (args.format == "ids" or args.json):
        raise ValueError("--print prints one bare value of --format lm-eval or --format inspect (and not --json).")
    session = _load(args)
    ids, probabilities = session.next_questions(args.n)
    payload = {"ids": ids, "probabilities": probabilities, "done": session.done, "stop_reason": session.stop_reason}
    done = f"Done ({session.stop_reason}): nothing left to ask. See: faqstats session report {session.directory}"
    if getattr(args, "model_name", None) is not None:
        done = (f"Done ({session.stop_reason}): nothing left to ask of model {args.model_name}. See: faqstats "
                f"session status {args.directory}")
    if args.format == "ids":
        return emit(args, payload, "\n".join(f"{q}\t{p:.6g}" for q, p in zip(ids, probabilities)) if ids else done)
    key = "samples" if args.format == "lm-eval" else "sample_id"
    harness = round_arguments(args.format, ids) if ids else {"tasks": [], key: None}
    payload.update(harness)
    if not ids:  # with --print: nothing on stdout, so that a shell loop ends on an empty value
        return emit(args, payload, done) if args.print is None else print(f"faqstats: {done}", file=sys.stderr)
    # the values as the harness takes them: lm-eval --tasks a,b --samples JSON; inspect --sample-id, tasks one a line
    value = json.dumps(harness["samples"]) if args.format == "lm-eval" else harness["sample_id"]
    tasks = ",".join(harness["tasks"]) if args.format == "lm-eval" else "\n".join(harness["tasks"])
    if args.print is not None:
        return print(tasks if args.print == "tasks" else value)
    line = ["--tasks", tasks, "--samples", value] if args.format == "lm-eval" else ["--sample-id", value]
    emit(args, payload, shlex.join(line))


def _outcome(text, qid=None, where=""):
    """An outcome given as text (the command line, a JSON string), as a float."""
    if not isinstance(text, (int, float, str)):
        raise ValueError(f"{where}outcome of question id {qid!r} must be a number in [0, 1], got {text!r}.")
    try:
        return float(text)
    except (TypeError, ValueError):
        of = "" if qid is None else f" of question id {qid!r}"
        raise ValueError(f"{where}outcome {text!r}{of} is not a number in [0, 1].") from None


def _json_pairs(path):
    """``--from-json FILE``: its (id, outcome) pairs; every error names the file (and the id)."""
    where = "standard input" if path == "-" else path
    try:
        pairs = read_outcome_pairs(path)
    except RecursionError:
        raise ValueError(f"--from-json {where}: nested too deeply to be answers.") from None
    except (ValueError, TypeError, KeyError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        raise ValueError(message if str(where) in str(message) else f"--from-json {where}: {message}") from exc
    return [(q, _outcome(v, q, f"--from-json {where}: ")) for q, v in pairs]


def run_record(args):
    harness, paths, options = harness_of(args)
    if sum((bool(args.pairs), args.from_json is not None, harness is not None)) > 1:
        raise ValueError("give answers one way: ID VALUE pairs, --from-json, --lm-eval or --inspect.")
    if harness is not None:
        return _record_harness(args, harness, paths, options)
    if args.from_json is not None:
        pairs = _json_pairs(args.from_json)
    else:
        if not args.pairs or len(args.pairs) % 2:
            raise ValueError(f"expected ID VALUE pairs (or --from-json, --lm-eval, --inspect), "
                             f"got {len(args.pairs)} argument(s).")
        pairs = [(q, _outcome(v, q)) for q, v in zip(args.pairs[::2], args.pairs[1::2])]
    session = _load(args)
    try:
        session.record([str(q) for q, _ in pairs], [v for _, v in pairs])
    except (ValueError, TypeError) as exc:  # answers read from a file: say which
        if args.from_json is None:
            raise
        where = "standard input" if args.from_json == "-" else args.from_json
        raise ValueError(f"--from-json {where}: {exc} Nothing was recorded.") from exc
    st = session.status()
    emit(args, st, f"Recorded {len(pairs)} answer(s).\n" + status_text(st))


def _record_harness(args, harness, paths, chosen):
    """Record the pending questions' outcomes, read from a harness run's output (all or nothing)."""
    session = _load(args)
    if session.done:
        raise ValueError(f"The session is done ({session.stop_reason}); no question is pending.")
    pending = session.pending.ids
    if not pending:
        raise ValueError(f"no question is pending: run 'faqstats session next {_addressed(args)} --format {harness}', "
                         "then the harness on what it prints.")
    try:
        tasks = set(task_groups([str(q) for q in session.question_ids]))
    except (ValueError, TypeError):  # ids that are no harness ids are refused below, by name
        tasks = None
    else:
        check_option_tasks(chosen, tasks, "the session's bank")
    options = _recording_options(session, harness, chosen, tasks)
    with reading_harness(harness, after=" Nothing was recorded."):
        values, ignored = read_round(harness, paths, pending, **reader_kwargs(options))
    session.record(pending, values.tolist())
    st = session.status()
    where = paths if isinstance(paths, str) else ", ".join(paths)
    ignored_note = "" if not ignored else (
        f" ({len(ignored)} other scored sample(s) there were not pending and are ignored: "
        + ", ".join(map(repr, ignored[:5])) + (" ..." if len(ignored) > 5 else "") + ")")
    emit(args, {**st, "recorded": pending, "ignored": ignored, "reader": {"harness": harness, "options": options}},
         f"Recorded {len(pending)} answer(s) from {where}{ignored_note}.\n" + status_text(st))


def _recording_options(session, harness, chosen, tasks):
    """``session record``'s reader options: those stored with the factor model (same harness), overridden by the
    command line's (with a note on the bank's tasks they read differently), else the reader's defaults."""
    stored = (getattr(session.factor_model, "metadata_", None) or session.model_metadata or {}).get("reader")
    if stored is not None and stored["harness"] != harness:
        note(f"the factor model was fitted on {stored['harness']} output; its reader options do not apply to "
             f"--{harness}.")
        stored = None
    base = {} if stored is None else stored["options"]

    def reads(opt, task):
        return opt["tasks"].get(task, opt["default"])

    for name, spec in chosen.items():
        if name not in base:
            continue
        old = base[name]
        differ = old != spec if tasks is None else sorted(t for t in tasks if reads(old, t) != reads(spec, t))
        if differ:
            which = "" if differ is True else f" for task(s) {', '.join(differ)}"
            note(f"reading with {option_words(name, spec)}, not the {option_words(name, old)} that 'faqstats "
                 f"fit-history' stored with the factor model{which}; read every round of a session the same way.")
    return all_reader_options(harness, {**base, **chosen})


def _leaderboard_view(args):
    """Whether ``status``/``report`` show the leaderboard in DIR (no ``--model``)."""
    if args.model_name is not None or not is_leaderboard(args.directory):
        return False
    if args.simultaneous:
        raise ValueError("--simultaneous goes with --groups-from sessions; a leaderboard's intervals hold for all "
                         "models at once already.")
    return True


def run_status(args):
    if _leaderboard_view(args):
        return run_leaderboard_status(args)
    st = _load(args).status(simultaneous=args.simultaneous)
    emit(args, st, status_text(st))


def run_report(args):
    if _leaderboard_view(args):
        return run_leaderboard_report(args)
    session = _load(args)
    payload = session.status(simultaneous=args.simultaneous)
    text = [status_text(payload)]
    if session.n_draws >= 2:
        result = session.result()
        if result.stop_reason is None:  # the table needs a string
            result = dataclasses.replace(result, stop_reason="(still running)")
        text.append(str(result.summary(alpha=session.alpha)))
    payload["trajectory"] = session.trajectory().tolist()
    cs = session.confidence_sequence()
    payload["confidence_sequence"] = None if cs is None else cs.tolist()
    if args.png is not None:  # a FILE without an extension gets .png, as matplotlib would add it
        png = Path(args.png)
        if not args.png.strip() or png.is_dir():
            raise ValueError(f"--png takes a file to write the plot to; {args.png!r} is a directory.")
        png = png if png.suffix else png.with_name(png.name + ".png")
        session.plot(png)
        payload["png"] = str(png)
        text.append(f"Plot written to {payload['png']}")
    if args.model_based is not None:
        payload["model_based"], summary = _model_based_report(args, session)
        text.append(summary)
    emit(args, payload, "\n".join(text))


def _model_based_report(args, session):
    """``(payload, text)`` of the session's model-based estimate calibrated on the ``--model-based`` history."""
    est = session.model_based(history_for(args.model_based, session.question_ids), random_state=session.random_state,
                              verbose=not (args.quiet or args.json))
    result = est.result_
    low, high = result.conf_int(session.alpha)
    d_low, d_high = result.design_based.conf_int(session.alpha)
    payload = {"estimate": result.estimate, "interval": [low, high], "design_based_estimate":
               result.design_based.estimate, "design_based_interval": [d_low, d_high], "flagged": result.flagged,
               "recommended_interval": list(result.recommended_interval(session.alpha)),
               "calibration_runs": int(result.calibration_scores.size)}
    return payload, str(result.summary(session.alpha))


def add_session_parser(sub):
    session = sub.add_parser("session", help="a resumable evaluation: new, next, record, status, report")
    ssub = session.add_subparsers(dest="session_command", required=True)

    def command(name, help, directory_help=None):
        parser = ssub.add_parser(name, help=help)
        parser.add_argument("directory", help=directory_help)
        return parser

    new = command("new", "start a session in DIR from a saved factor model", "session directory (created)")
    new.add_argument("--model", required=True, help="factor model saved by 'faqstats fit-history' (.npz); one "
                     "saved with --budget brings its predictor, policy, weights and budget")
    new.add_argument("--models", nargs="+", default=None, metavar="NAME",
                     help="a leaderboard: a session per model NAME (two or more, distinct) in DIR, sharing the "
                          "factor model and --budget (questions over all models, split evenly); next and record "
                          "then take --model NAME, status and report show the leaderboard")
    new.add_argument("--budget", type=count, default=None, help="maximum number of queries (or --budget-cost; default "
                     "a configured model's)")
    new.add_argument("--batch-size", type=count, default=1, help="questions handed out per round (default 1)")
    new.add_argument("--stop-when-width", type=float, default=None,
                     help="stop once the anytime-valid interval is at most this wide")
    new.add_argument("--alpha", type=float, default=0.05, help="significance level of the intervals (default 0.05)")
    new.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    new.add_argument("--tau", type=float, default=None, help="uniform floor of the hybrid policy (default 0.5; "
                     "a configured model's own)")
    new.add_argument("--step-weights", default=None, metavar="FILE",
                     help="increment weights from 'faqstats fit-history --step-weights-budget' (.json)")
    new.add_argument("--replace", action="store_true", help="sample with replacement (default: without)")
    new.add_argument("--question-ids", default=None,
                     help="file of the bank's question ids (default: those stored with the model)")
    grouped = new.add_argument_group(
        "groups, costs and clusters", "FILE: a .csv (.tsv) of 'question_id,VALUE' rows (a header may name a 'group', "
        "'cost' or 'cluster' column) or a .json object {question id: VALUE}, covering every question of the bank "
        "(other ids are ignored, with a note)")
    grouped.add_argument("--groups-from", default=None, metavar="FILE|tasks",
                         help="a group label per question: from FILE, or 'tasks' for the task of each harness id "
                              "'<task>/<id>' (a file named tasks: ./tasks); status and report then show every "
                              "group's estimate")
    grouped.add_argument("--estimand", choices=["micro", "macro"], default="micro",
                         help="micro: the bank's accuracy (default); macro: the mean of the groups' accuracies")
    grouped.add_argument("--min-group-share", type=float, default=0.0, metavar="F",
                         help="mix this share of a law giving every group the same mass into the policy (default 0)")
    grouped.add_argument("--stratify", action="store_true",
                         help="a fixed number of draws per group (not with --costs-from)")
    grouped.add_argument("--costs-from", default=None, metavar="FILE",
                         help="a positive cost per question (tokens, dollars): the policy weighs its scores by "
                              "1/sqrt(cost) and status reports the cost spent")
    grouped.add_argument("--budget-cost", type=float, default=None, metavar="C",
                         help="a budget in cost units instead of --budget: the draws it buys in expectation, fixed "
                              "at the start")
    grouped.add_argument("--clusters-from", default=None, metavar="FILE",
                         help="a cluster id per question (questions on one passage, image, prompt): every draw asks "
                              "a whole cluster, --budget counts cluster draws (with --groups-from: every cluster in "
                              "one group, --estimand micro)")
    finish(new, run_new, allow_unchecked=True)

    one = "the model of a leaderboard (made with 'session new --models') to address"
    nxt = command("next", "print the questions to ask now (the pending ones again until answered)")
    nxt.add_argument("--model", dest="model_name", default=None, metavar="NAME", help=one)
    nxt.add_argument("--n", type=count, default=None, help="size of a new round (default: the batch size)")
    nxt.add_argument("--format", choices=["ids", "lm-eval", "inspect"], default="ids",
                     help="ids: one 'ID<TAB>probability' a line (default); lm-eval: the --tasks and --samples "
                          "options to run them; inspect: the --sample-id option")
    nxt.add_argument("--print", choices=["tasks", "samples"], default=None,
                     help="print only this value (for \"$(...)\"; nothing once done): the --tasks value "
                          "(lm-eval; inspect: one task a line), or the --samples JSON (lm-eval) / --sample-id "
                          "value (inspect)")
    finish(nxt, run_next, allow_unchecked=True)

    rec = command("record", "record answers: ID VALUE [ID VALUE ...] (VALUE in [0, 1]), or those of the pending "
                            "questions from a harness run")
    rec.add_argument("pairs", nargs="*", metavar="ID VALUE", help="question id and its outcome")
    rec.add_argument("--model", dest="model_name", default=None, metavar="NAME", help=one)
    rec.add_argument("--from-json", default=None, metavar="FILE",
                     help="JSON {id: outcome} or [[id, outcome], ...] ('-' reads stdin)")
    pending = "on the pending questions: every one must be there; other samples are ignored (repeat for several)"
    rec.add_argument("--lm-eval", action="append", metavar="OUTDIR",
                     help=f"the --output_path of an lm-eval run (--log_samples) {pending}")
    rec.add_argument("--inspect", action="append", metavar="LOGDIR",
                     help=f"the --log-dir (or a log file) of an inspect eval run {pending}")
    add_reader_options(rec, recording=True)
    finish(rec, run_record, allow_unchecked=True)

    simultaneous = "with --groups-from: also the intervals that hold for all groups at once"
    stat = command("status", "progress, pending questions and the estimate so far (and every group's); of a "
                             "leaderboard, every model's progress and the leaderboard")
    view = "of a leaderboard: this model's session alone (default: the leaderboard)"
    stat.add_argument("--model", dest="model_name", default=None, metavar="NAME", help=view)
    stat.add_argument("--simultaneous", action="store_true", help=simultaneous)
    finish(stat, run_status, allow_unchecked=True)

    rep = command("report", "the estimate with its interval; --png plots it as queries accumulate; of a "
                            "leaderboard, the leaderboard with simultaneous intervals, rank intervals and the models "
                            "that may be best")
    rep.add_argument("--model", dest="model_name", default=None, metavar="NAME", help=view)
    rep.add_argument("--png", default=None, metavar="FILE", help="write a plot of the running estimate and interval")
    rep.add_argument("--simultaneous", action="store_true", help=simultaneous)
    rep.add_argument("--model-based", default=None, metavar="HISTORY",
                     help="also the model-based estimate of a finished session, its interval calibrated by running "
                          "the session's design on held-out models of HISTORY (.npz with an 'outcomes' matrix, the "
                          "history the session's model was fitted on), with the design-based check; of a "
                          "leaderboard, every model's, its intervals holding for all models at once")
    rep.add_argument("--quiet", action="store_true", help="no progress bar over the calibration runs")
    finish(rep, run_report, allow_unchecked=True)
