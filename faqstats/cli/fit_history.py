"""``faqstats fit-history``: a factor model (or, with ``--budget``, a whole configured estimator)
fitted on earlier models' outcomes and saved for ``faqstats session new``."""

import argparse
from pathlib import Path

import numpy as np

from ..configure import configure_from_history
from ..datasets import load_response_matrix
from ..factor_model import LogisticFactorModel
from ..integrations import read_question_ids, task_groups
from ..integrations._harness import read_history
from ..io import save_configuration, save_factor_model, save_step_weights
from ..step_weights import learn_step_weights
from .common import (add_reader_options, add_table_options, all_reader_options, check_option_tasks, check_table_columns,
                     count, emit, finish, given, harness_of, matrix_question_ids, option_words, read_table_history,
                     reader_kwargs, reading_harness)

# the options of a plain factor model fit, which --budget chooses itself
_FIT_OPTIONS = ("n_components", "regularization", "max_iter", "learning_rate", "prior_scale")
_NO_IDS = " (no question ids: a session will number the questions 0..N-1)"


def run_fit_history(args):
    harness, paths, options = harness_of(args)
    models = reader = None
    if harness is not None:  # earlier runs read straight from the harness output, ids "<task>/<sample id>"
        if args.question_ids is not None:
            raise ValueError(f"--question-ids goes with --data; with --{harness} the ids are the harness's.")
        check_table_columns(args)
        # the reader is stored with the model: 'session record' reads the new model's runs the same way
        reader = {"harness": harness, "options": all_reader_options(harness, options)}
        with reading_harness(harness):
            matrix, models, ids = read_history(harness, paths, **reader_kwargs(reader["options"]))
        check_option_tasks(options, set(task_groups(ids)), f"the {harness} output read")
    elif args.table is not None:  # a long table, one row per model x question: ids as the table gives them
        matrix, models, ids = read_table_history(args)
    else:
        check_table_columns(args)
        matrix, meta = load_response_matrix(args.data)
        ids = read_question_ids(args.question_ids) if args.question_ids is not None else matrix_question_ids(meta)
    if args.n_components is not None and args.n_components > matrix.shape[1]:
        raise ValueError(f"--n-components {args.n_components} is above the number of questions ({matrix.shape[1]}): "
                         "a factor model's rank is at most that.")
    if args.budget is not None:  # the configured path: PAIEstimator.from_history's choice, saved whole
        return _fit_configured(args, matrix, ids, reader, harness, models)
    fm = LogisticFactorModel(**given(args, *_FIT_OPTIONS), device=args.device, random_state=args.seed,
                             verbose=not (args.quiet or args.json))
    try:
        fm.fit(matrix)
    except FloatingPointError as exc:  # in the command line's words
        raise ValueError(str(exc).replace("learning_rate", "--learning-rate")
                         .replace("raise regularization", "raise --regularization")) from exc
    out = save_factor_model(fm, args.out, question_ids=ids, reader=reader)
    weights_file = None
    if args.step_weights_budget is not None:  # cross-fitted on the history: a second fit on 75% of it
        sw = learn_step_weights(matrix, fm, budget=args.step_weights_budget, random_state=args.seed)
        weights_file = save_step_weights(sw, Path(str(out)).with_suffix(".step_weights.json"))
    payload = {"model": str(out), "n_models": int(matrix.shape[0]), "n_questions": int(matrix.shape[1]),
               "observed_fraction": float(np.mean(~np.isnan(matrix))), "n_components": fm.n_components,
               "regularization": fm.regularization, "max_iter": fm.max_iter, "final_loss": float(fm.loss_curve_[-1]),
               "question_ids": ids is not None, "step_weights": None if weights_file is None else str(weights_file),
               "harness": harness, "models": models, "reader": reader}
    read = "" if harness is None else (
        f"Read {len(models)} model(s) from the {harness} output ({', '.join(models[:5])}"
        f"{', ...' if len(models) > 5 else ''}) with "
        + ", ".join(option_words(name, spec) for name, spec in reader["options"].items())
        + " (stored with the model for 'faqstats session record').\n")
    emit(args, payload, read + (
        f"Fitted a rank-{fm.n_components} factor model on {matrix.shape[0]} models x {matrix.shape[1]} questions "
        f"({100 * payload['observed_fraction']:.1f}% observed), final loss {payload['final_loss']:.4f}.\n"
        f"Wrote {out}{'' if ids is not None else _NO_IDS}."
        + ("" if weights_file is None else f"\nWrote increment weights for up to {args.step_weights_budget} queries "
           f"to {weights_file} (pass it to 'faqstats session new --step-weights').")))


def _budget_value(text):
    """``--budget``: a number of queries (an integer >= 1) or a fraction of the bank in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of queries or a fraction in (0, 1), got {text!r}") \
            from None
    if not (0 < value < 1 or (1 <= value < 2**53 and value == int(value))):
        raise argparse.ArgumentTypeError(f"expected a number of queries (an integer) or a fraction in (0, 1), "
                                         f"got {text!r}")
    return value


def _fit_configured(args, matrix, ids, reader, harness, models):
    """``fit-history --budget B``: :func:`~faqstats.configure_from_history` on the history, saved in ``--out``
    (:func:`~faqstats.save_configuration`), the validation table beside it."""
    fit_options = [f"--{name.replace('_', '-')}" for name in (*_FIT_OPTIONS, "step_weights_budget")
                   if getattr(args, name) is not None]
    if fit_options:
        raise ValueError(f"{', '.join(fit_options)} set(s) up a factor model fit; --budget configures the predictor, "
                         "the policy and the increment weights itself (drop one of them).")
    N = matrix.shape[1]
    budget = int(round(args.budget * N)) if args.budget < 1 else int(args.budget)
    if not 3 <= budget <= N:
        raise ValueError(f"--budget {args.budget:g} is {budget} queries; the bank of {N} questions takes 3 to {N}.")
    cfg = configure_from_history(matrix, budget, n_runs=args.runs, random_state=args.seed,
                                 verbose=not (args.quiet or args.json))
    out = save_configuration(cfg, args.out, question_ids=ids, reader=reader)
    table_file = out.with_name(out.name.removesuffix(".npz") + ".validation.csv")
    cfg.table.to_csv(table_file, index=False)
    est = cfg.estimator
    predictor = "none (the FPC sample mean)" if est.factor_model is None else type(est.factor_model).__name__
    payload = {"model": str(out), "validation_table": str(table_file), "n_models": int(matrix.shape[0]),
               "n_questions": int(N), "budget": budget, "choice": cfg.choice, "predictor": predictor,
               "policy": repr(est.sampler), "predicted_ess": cfg.predicted_ess, "predict_every": cfg.predict_every,
               "step_weights": est.step_weights is not None, "question_ids": ids is not None, "harness": harness,
               "models": models, "reader": reader}
    emit(args, payload, f"{cfg.summary()}\n"
         f"Chose {cfg.choice}: predictor {predictor}, policy {est.sampler!r}, for {budget} queries.\n"
         f"Wrote {out}{'' if ids is not None else _NO_IDS} and {table_file}.\n"
         f"Next: faqstats session new DIR --model {out}")


def add_fit_history_parser(sub):
    fit = sub.add_parser("fit-history", help="fit a factor model on earlier models' outcomes (.npz, a table, lm-eval "
                                             "or inspect output) and save it; with --budget, configure the whole "
                                             "estimator from them (PAIEstimator.from_history) and save that")
    source = fit.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help=".npz file with an 'outcomes' models x questions matrix (-1 missing)")
    source.add_argument("--lm-eval", nargs="+", action="extend", metavar="DIR",
                        help="lm-eval --output_path directories (runs with --log_samples; or samples files): "
                             "question ids '<task>/<doc_id>', a model per directory")
    source.add_argument("--inspect", nargs="+", action="extend", metavar="LOGDIR",
                        help="inspect-ai log directories or log files: question ids '<task>/<sample id>', "
                             "a model per eval.model")
    source.add_argument("--table", metavar="FILE",
                        help="a long table, one row per model x question (CSV, TSV, Parquet, JSON Lines: "
                             "eval-arena, HELM-style per-instance exports, pandas' to_csv/to_parquet); "
                             "question ids as the table gives them; see --model-col, --question-col, --score-col")
    fit.add_argument("--out", required=True, help="where to write the fitted model (.npz)")
    fit.add_argument("--budget", type=_budget_value, default=None, metavar="B",
                     help="configure for sessions of B queries (or a fraction of the bank in (0, 1), e.g. 0.1) as "
                          "PAIEstimator.from_history does: cross-fitted validation on the history chooses the "
                          "predictor (factor model, surrogates, stack) or the sample mean, the policy and the "
                          "increment weights; all saved in --out, the validation table beside it (.validation.csv)")
    fit.add_argument("--runs", type=count, default=None, metavar="R",
                     help="with --budget: validation runs per candidate, every candidate in full (default: sized "
                          "to the bank and the budget, at most 1000, in two rounds: clearly worse candidates stop "
                          "at a quarter)")
    fit.add_argument("--n-components", type=count, default=None, help="rank k (default 16)")
    fit.add_argument("--regularization", type=float, default=None,
                     help="regularization: AdamW's weight decay (default 0.1)")
    fit.add_argument("--max-iter", type=count, default=None, help="optimiser steps (default 2000)")
    fit.add_argument("--learning-rate", type=float, default=None, help="AdamW learning rate (default 0.01)")
    fit.add_argument("--question-ids", default=None,
                     help="file of question ids (one per line, or a .json list); default: the .npz's "
                          "'question_ids' or 'items' array when present")
    fit.add_argument("--step-weights-budget", type=count, default=None, metavar="B",
                     help="also learn increment weights for sessions of up to B queries by cross-fitting on the "
                          "history (written next to --out as .step_weights.json)")
    fit.add_argument("--prior-scale", type=float, default=None,
                     help="new model's prior covariance = this x the historical factors' covariance (default 1)")
    fit.add_argument("--device", default="auto", help="torch device (default auto)")
    fit.add_argument("--seed", type=int, default=0, help="seed of the initialisation (default 0)")
    fit.add_argument("--quiet", action="store_true", help="no progress bar")
    add_table_options(fit)
    add_reader_options(fit)
    finish(fit, run_fit_history)
