"""Histories from long tables: ``history_from_frame``, the table files it reads (CSV, TSV, JSON Lines,
Parquet), ``faqstats fit-history --table`` and ``faqstats history from-table``; the real eval-arena
export (MBPP+, 59 models x 378 problems) end to end from the shell."""

import json

import numpy as np
import pandas as pd
import pytest

import faqstats as fq
from faqstats.cli import main
from faqstats.session import EvaluationSession
from tests.paths import SHARED_DATA

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny problems (conftest.py)

MBPP = SHARED_DATA / "mbpp_plus_long.jsonl"
MBPP_COLUMNS = ["--model-col", "model", "--question-col", "example_id", "--score-col", "pass1"]


def naive_pivot(rows, models, ids):
    """The reference: a dict of lists, averaged by hand (NaN where no row)."""
    cells = {}
    for m, q, s in rows:
        if s is not None and not (isinstance(s, float) and np.isnan(s)):
            cells.setdefault((m, q), []).append(float(s))
    return np.array([[np.mean(cells[m, q]) if (m, q) in cells else np.nan for q in ids] for m in models])


@pytest.fixture(scope="module")
def long_table():
    """A long table of a planted bank: 12 models x 30 questions, ids with '/', 20% of the cells absent,
    the rows shuffled, a few NaN scores (not observed) and two graded cells."""
    bank = fq.make_synthetic_bank(n_models=12, n_questions=30, n_new=1, n_components=2, random_state=1)
    rng = np.random.default_rng(0)
    models = [f"org/model-{i}" for i in range(12)]
    ids = [f"Mbpp/{j}" for j in range(30)]
    rows = [(models[i], ids[j], float(bank.history[i, j])) for i in range(12) for j in range(30)
            if rng.random() > 0.2]
    rows[3] = (rows[3][0], rows[3][1], 0.5)
    rows[7] = (rows[7][0], rows[7][1], float("nan"))
    order = rng.permutation(len(rows))
    return pd.DataFrame([rows[k] for k in order], columns=["model", "example_id", "pass1"])


def test_history_from_frame_pivots_as_a_naive_loop(long_table):
    outcomes, models, ids = fq.history_from_frame(long_table, "model", "example_id", "pass1")
    rows = list(long_table.itertuples(index=False, name=None))
    # the order of first appearance, ids as given
    assert models == list(dict.fromkeys(long_table["model"])) and ids == list(dict.fromkeys(long_table["example_id"]))
    np.testing.assert_array_equal(outcomes, naive_pivot(rows, models, ids))
    assert np.isnan(outcomes).sum() > 0 and 0.5 in outcomes


def test_repeated_rows_are_refused_or_averaged():
    frame = pd.DataFrame({"model": ["a", "a", "a", "b"], "q": ["x", "x", "y", "x"], "s": [1, 0, True, 0.25]})
    with pytest.raises(ValueError, match=r"model 'a', question 'x' has 2 rows \(0, 1\); pass duplicates='mean'"):
        fq.history_from_frame(frame, "model", "q", "s")
    outcomes, models, ids = fq.history_from_frame(frame, "model", "q", "s", duplicates="mean")
    np.testing.assert_array_equal(outcomes, [[0.5, 1.0], [0.25, np.nan]])
    assert (models, ids) == (["a", "b"], ["x", "y"])


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".json", ".parquet", ".csv.gz"])
def test_every_table_format_reads_the_same_history(tmp_path, long_table, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    path = tmp_path / f"results{suffix}"
    if suffix in (".csv", ".csv.gz"):
        long_table.to_csv(path, index=False)
    elif suffix == ".tsv":
        long_table.to_csv(path, sep="\t", index=False)
    elif suffix == ".parquet":
        long_table.to_parquet(path)
    else:
        long_table.to_json(path, orient="records", lines=suffix == ".jsonl")
    expected = fq.history_from_frame(long_table, "model", "example_id", "pass1")
    outcomes, models, ids = fq.read_history_table(path, "model", "example_id", "pass1")
    np.testing.assert_array_equal(outcomes, expected[0])
    assert (models, ids) == (expected[1], expected[2])


def test_ids_are_kept_as_written_not_read_as_numbers(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("model,question,score\n007,01,1\n007,1.10,0\n8,1.1,1\nNA,null,\nNA,01,NA\n")
    outcomes, models, ids = fq.read_history_table(path)
    assert models == ["007", "8", "NA"] and ids == ["01", "1.10", "1.1", "null"]  # "NA" is a name, "" no score
    np.testing.assert_array_equal(outcomes, [[1, 0, np.nan, np.nan], [np.nan, np.nan, 1, np.nan], [np.nan] * 4])


def test_the_shell_leaves_out_models_without_any_score(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("model,question,score\na,q/1,1\na,q/2,0\nb,q/1,\nb,q/2,NA\nc,q/2,0.5\n")
    assert main(["history", "from-table", str(path), "--out", str(tmp_path / "h.npz")]) == 0
    assert "1 model(s) without any score are left out: 'b'" in capsys.readouterr().err
    outcomes, models, ids, _ = fq.load_history(tmp_path / "h.npz")
    assert models == ["a", "c"] and ids == ["q/1", "q/2"]
    np.testing.assert_array_equal(outcomes, [[1, 0], [np.nan, 0.5]])


def test_fit_history_table_and_history_from_table_from_the_shell(tmp_path, long_table, capsys):
    path = tmp_path / "results.tsv"
    long_table.to_csv(path, sep="\t", index=False)
    columns = ["--model-col", "model", "--question-col", "example_id", "--score-col", "pass1"]
    assert main(["fit-history", "--table", str(path), *columns, "--n-components", "2", "--max-iter", "30",
                 "--device", "cpu", "--out", str(tmp_path / "m.npz"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    expected, models, ids = fq.history_from_frame(long_table, "model", "example_id", "pass1")
    assert (payload["n_models"], payload["n_questions"]) == expected.shape
    assert payload["observed_fraction"] == pytest.approx(np.mean(~np.isnan(expected)))
    assert fq.load_factor_model(tmp_path / "m.npz").question_ids_ == ids  # a session asks by the table's ids
    # the same table as a history file, which fit-history --data reads to the same matrix and ids
    assert main(["history", "from-table", str(path), *columns, "--out", str(tmp_path / "h.npz")]) == 0
    assert "Read 12 models x 30 questions" in capsys.readouterr().out
    outcomes, stored_models, stored_ids, _ = fq.load_history(tmp_path / "h.npz")
    np.testing.assert_array_equal(outcomes, expected)
    assert (stored_models, stored_ids) == (models, ids)
    matrix, meta = fq.load_response_matrix(tmp_path / "h.npz")
    np.testing.assert_array_equal(matrix, expected)
    assert meta["question_ids"].tolist() == ids
    # the table's options without a table, and a column that is not there, in one line each
    for argv, message in [
        (["fit-history", "--data", str(tmp_path / "h.npz"), "--model-col", "model", "--out", str(tmp_path / "x")],
         "--model-col read(s) a table: it goes with --table FILE"),
        (["fit-history", "--table", str(path), "--out", str(tmp_path / "x")],
         "results.tsv: the table has no column question='question', score='score' (its columns: 'model', "
         "'example_id', 'pass1')"),
        (["fit-history", "--table", str(path), *columns, "--question-ids", str(path), "--out", str(tmp_path / "x")],
         "--question-ids goes with --data"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


# -- the real eval-arena export ---------------------------------------------------------------
@pytest.fixture(scope="module")
def mbpp():
    if not MBPP.exists():
        pytest.skip(f"{MBPP} is not here (the real data beside the repository)")
    return MBPP


def test_mbpp_table_is_read_as_pandas_pivots_it(mbpp):
    outcomes, models, ids = fq.read_history_table(mbpp, "model", "example_id", "pass1")
    assert outcomes.shape == (59, 378) and not np.isnan(outcomes).any()
    assert all("/" in q for q in ids) and ids[0] == "Mbpp/2"
    # an independent pivot: pandas' own, on the file read by the json module
    frame = pd.DataFrame([json.loads(line) for line in mbpp.read_text().splitlines()])
    pivot = frame.pivot(index="model", columns="example_id", values="pass1").loc[models, ids]
    np.testing.assert_array_equal(outcomes, pivot.to_numpy(dtype=float))


@pytest.mark.slow
def test_mbpp_from_table_to_report_and_back_into_the_history(mbpp, tmp_path, capsys):
    """The shell flow on the real table: fit-history --table --budget 0.1, a session of 38 answers (a model of
    the table answering), the report; then the session's answers added to the history and a refit on it."""
    model = tmp_path / "mbpp.npz"
    assert main(["fit-history", "--table", str(mbpp), *MBPP_COLUMNS, "--budget", "0.1", "--out", str(model),
                 "--quiet", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["budget"] == 38 and payload["question_ids"]
    truth = {json.loads(line)["example_id"]: json.loads(line)["pass1"] for line in mbpp.read_text().splitlines()
             if json.loads(line)["model"] == "deepseek-coder-33b-instruct"}
    d = tmp_path / "deepseek-new"
    assert main(["session", "new", str(d), "--model", str(model), "--seed", "0"]) == 0
    capsys.readouterr()
    while True:
        assert main(["session", "next", str(d), "--json"]) == 0
        step = json.loads(capsys.readouterr().out)
        if step["done"]:
            break
        assert main(["session", "record", str(d), *[x for q in step["ids"] for x in (q, str(truth[q]))]]) == 0
        capsys.readouterr()
    assert main(["session", "report", str(d), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n_draws"] == 38 and report["done"] and report["conf_int"][0] < report["estimate"]
    # the history grows by the session's 38 answers, and fit-history refits on it
    history = tmp_path / "mbpp_history.npz"
    assert main(["history", "from-table", str(mbpp), *MBPP_COLUMNS, "--out", str(history)]) == 0
    assert main(["history", "add", str(history), str(d)]) == 0
    outcomes, models, ids, metadata = fq.load_history(history)
    session = EvaluationSession.load(d)
    asked = {session.question_ids[int(q)] for q in session.queries()["question"]}
    assert models[-1] == "deepseek-new" and int((~np.isnan(outcomes[-1])).sum()) == 38
    assert all(outcomes[-1, ids.index(q)] == truth[q] for q in asked)
    assert metadata["sources"][-1]["n_answers"] == 38 and metadata["sources"][-1]["complete"]
    capsys.readouterr()
    assert main(["fit-history", "--data", str(history), "--n-components", "2", "--max-iter", "50", "--device", "cpu",
                 "--out", str(tmp_path / "refit.npz"), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["n_models"] == 60


# -- history add with harness runs: their full rows --------------------------------------------
def test_history_add_takes_the_full_rows_of_harness_runs(tmp_path, capsys):
    from faqstats.integrations import read_lm_eval_samples
    from tests.paths import DATA

    runs = DATA / "lm_eval" / "history"
    per_task = dict(metric={"faq_arith": "acc", "faq_count": "exact_match"},
                    filter={"faq_arith": "none", "faq_count": "flexible-extract"})
    old, old_models, ids = read_lm_eval_samples([runs / "mock-a", runs / "mock-b"], **per_task)
    history = fq.save_history(tmp_path / "h.npz", old, old_models, ids)
    options = ["--metric", "faq_count=exact_match", "--filter", "faq_count=flexible-extract"]
    assert main(["history", "add", str(history), "--lm-eval", str(runs / "mock-d"), str(runs / "mock-e"), *options,
                 "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [s["model"] for s in payload["added"]] == ["mock-d", "mock-e"]
    assert payload["added"][0]["reader"]["options"]["metric"]["tasks"] == {"faq_count": "exact_match"}
    new, new_models, new_ids = read_lm_eval_samples([runs / "mock-d", runs / "mock-e"], **per_task)
    outcomes, models, stored_ids, _ = fq.load_history(history)
    assert models == [*old_models, *new_models] and stored_ids == ids
    # matched by id: mock-e ran part of the bank, NaN elsewhere
    expected = np.full((2, len(ids)), np.nan)
    expected[:, [ids.index(q) for q in new_ids]] = new
    np.testing.assert_array_equal(outcomes[2:], expected)
    assert np.isnan(outcomes[3]).any() and not np.isnan(outcomes[2]).any()
    # one kind per command; a harness run's model already there
    for argv, message in [
        ([str(tmp_path), "--lm-eval", str(runs / "mock-c"), *options], "one kind per command"),
        (["--lm-eval", str(runs / "mock-d"), *options], "h.npz already has a row for model 'mock-d'"),
        (["--lm-eval", str(runs / "mock-c"), *options, "--name", "x"], "--name and --partial go with session"),
    ]:
        before = history.read_bytes()
        assert main(["history", "add", str(history), *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and history.read_bytes() == before, err
    with pytest.raises(ValueError, match=r"1 question id\(s\) of the rows are not questions of .*h\.npz: 'other/1'"):
        fq.add_rows_to_history(history, [[1.0]], ["m"], ["other/1"])
