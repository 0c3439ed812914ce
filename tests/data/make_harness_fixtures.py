"""Regenerate the harness fixtures under ``tests/data/lm_eval/`` and ``tests/data/inspect/``.

The files are written by the real libraries, so that the readers in
``faqstats.integrations`` are tested against what users actually have on disk:

* lm-evaluation-harness ``lm_eval`` 0.4.13: its CLI (``cli_evaluate``) run in-process
  with ``--log_samples`` on two tiny local tasks (a local jsonl dataset, no download)
  and a mock model registered as ``faq_mock``;
* inspect-ai 0.3.285: ``inspect_ai.eval`` with ``mockllm/<name>`` models whose outputs
  come from a callable, and small in-code tasks.

The mock models answer arithmetic and letter-counting questions correctly with
probability ``sigmoid(1.7 (ability - difficulty))``, drawn from a hash of the model
name and the question (deterministic, so the history has factor structure and the
files are reproducible up to timestamps and run ids).

Run it from the repository root in an environment with the harness libraries (they are
not test dependencies of faqstats; ``pip install -e ".[harness]"`` or a separate venv)::

    python -m venv /tmp/harness-venv
    /tmp/harness-venv/bin/pip install "lm_eval==0.4.13" "inspect-ai==0.3.285"
    /tmp/harness-venv/bin/python tests/data/make_harness_fixtures.py

What it writes
--------------
``lm_eval/history/<model>/{results,samples_<task>}_<timestamp>.json[l]``
    Five models; ``mock-c`` ran only 7 chosen docs of ``faq_arith`` (``--samples``),
    ``mock-e`` did not run ``faq_count``.
``lm_eval/new_model/mock-new/...``
    The new model on every question (stands in for the harness in the tutorial test).
``lm_eval/asked.json``, ``lm_eval/asked/mock-new/...``
    A ``--samples`` file for a few questions and the run of the new model on them.
``inspect/history/*.eval|*.json``
    Five ``mockllm/*`` models on tasks ``arith`` (8 samples, ids 1-8, scorers ``match``
    and ``partial``: C/P/I) and ``words`` (6 samples, string ids ``w-<word>``, scorer
    ``match``). ``.eval`` logs here are written with deflate compression, as inspect-ai
    wrote them before it moved to zstd (the zstd default is patched out for these
    only), so that the built-in reader is tested without the ``zstandard`` package.
    ``mockllm/epochs`` ran ``arith`` only, with 2 epochs (answers may differ between
    epochs); ``mockllm/d`` ran ``words`` only, logged as ``.json``.
``inspect/new_model/*.eval``
    The new model on every sample of both tasks (deflate ``.eval``).
``inspect/asked/*.eval``
    The new model run with ``sample_id=[...]`` in the default format (zstd ``.eval``).
``inspect/odd/history/*.eval``, ``inspect/odd/new_model/*.eval``
    Task ``odd`` (sample ids ``a/b``, ``x*y``, ``two words``, ``007``, ``7``, ``[1]``, ``q?``,
    ``50%``) run by ``mockllm/a`` to ``mockllm/d`` and by the new model (deflate ``.eval``):
    with ``inspect/history`` a three-task bank for the shell loop of docs/tutorials/inspect_ai.md.
    ``python tests/data/make_harness_fixtures.py inspect_odd`` writes only these.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LM_DIR = HERE / "lm_eval"
INSPECT_DIR = HERE / "inspect"

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("INSPECT_LOG_LEVEL", "warning")


# -- the questions and the mock ability model --------------------------------------------
ARITH = [(3 + 7 * i % 41, 2 + 11 * i % 37) for i in range(12)]
WORDS = ["cat", "apple", "banana", "kiwi", "strawberry", "fig", "watermelon", "plum"]


def _uniform(*parts):
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def answers_correctly(model, question, ability, difficulty, salt=""):
    p = 1.0 / (1.0 + math.exp(-1.7 * (ability - difficulty)))
    return _uniform(model, question, salt) < p


def arith_difficulty(a, b):
    return (a + b) / 25.0 - 1.5


def word_difficulty(word):
    return len(word) / 3.0 - 1.5


def parse_question(text):
    """(kind, key, answer, difficulty) of the last question in a prompt."""
    found = re.findall(r"What is (\d+) \+ (\d+)\?", text)
    if found:
        a, b = map(int, found[-1])
        return "arith", f"{a}+{b}", a + b, arith_difficulty(a, b)
    found = re.findall(r"How many letters are in the word '(\w+)'\?", text)
    if found:
        word = found[-1]
        return "words", word, len(word), word_difficulty(word)
    raise ValueError(f"mock model cannot parse the prompt {text!r}")


# -- lm-evaluation-harness ---------------------------------------------------------------
LM_MODELS = {  # name: (ability, answer style of generate_until)
    "mock-a": (-1.0, "plain"),
    "mock-b": (-0.3, "sentence"),
    "mock-c": (0.2, "plain"),
    "mock-d": (0.8, "sentence"),
    "mock-e": (1.8, "plain"),
}
LM_NEW = ("mock-new", 0.6, "plain")
LM_ASKED = {"faq_arith": [2, 5, 11], "faq_count": [0, 7]}
LM_PARTIAL = {"faq_arith": [0, 1, 2, 4, 8, 9, 10]}


def _write_lm_tasks(root):
    data = root / "data"
    data.mkdir()
    with open(data / "arith.jsonl", "w") as f:
        for a, b in ARITH:
            s = a + b
            choices = [str(s + d) for d in (-2, 0, 3, 10)]
            f.write(json.dumps({"question": f"What is {a} + {b}?", "choices": choices, "answer": 1}) + "\n")
    with open(data / "words.jsonl", "w") as f:
        for w in WORDS:
            f.write(json.dumps({"question": f"How many letters are in the word '{w}'?", "answer": str(len(w))}) + "\n")
    (root / "faq_arith.yaml").write_text(
        f"""task: faq_arith
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data / 'arith.jsonl'}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""
    )
    (root / "faq_count.yaml").write_text(
        f"""task: faq_count
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data / 'words.jsonl'}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 16
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "^(\\\\d+)$"
      - function: take_first
  - name: flexible-extract
    filter:
      - function: regex
        regex_pattern: "(\\\\d+)"
        group_select: -1
      - function: take_first
metadata:
  version: 1.0
"""
    )


def _register_lm_mock():
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model

    @register_model("faq_mock")
    class FaqMockLM(LM):
        """Answers like a model of the given ability (see answers_correctly)."""

        def __init__(self, pretrained, ability, style="plain", **kwargs):
            super().__init__()
            self.name, self.ability, self.style = pretrained, float(ability), style

        def _right(self, context):
            kind, key, answer, difficulty = parse_question(context)
            return answers_correctly(self.name, f"{kind}:{key}", self.ability, difficulty), answer

        def loglikelihood(self, requests, disable_tqdm=False):
            out = []
            for req in requests:
                context, continuation = req.arguments
                right, answer = self._right(context)
                is_answer = continuation.strip() == str(answer)
                if is_answer:
                    ll = -0.1 if right else -9.0
                else:  # a fixed preference among the wrong choices
                    ll = -1.0 - _uniform(self.name, context, continuation)
                out.append((ll, bool(is_answer and right)))
            return out

        def loglikelihood_rolling(self, requests, disable_tqdm=False):
            return [-1.0 for _ in requests]

        def generate_until(self, requests, disable_tqdm=False):
            out = []
            for req in requests:
                right, answer = self._right(req.arguments[0])
                value = answer if right else answer + 1
                out.append(str(value) if self.style == "plain" else f"It has {value} letters.")
            return out

    return FaqMockLM


def _run_lm_eval(args):
    from lm_eval.__main__ import cli_evaluate

    argv = sys.argv
    sys.argv = ["lm_eval", *args]
    try:
        cli_evaluate()
    finally:
        sys.argv = argv


def _strip_machine_paths(out_dir, task_dir):
    """Replace the temporary task directory in the written files by a placeholder."""
    for path in Path(out_dir).rglob("*.json*"):
        text = path.read_text()
        if str(task_dir) in text:
            path.write_text(text.replace(str(task_dir), "<tasks>"))


def make_lm_eval():
    shutil.rmtree(LM_DIR, ignore_errors=True)
    LM_DIR.mkdir(parents=True)
    _register_lm_mock()
    with tempfile.TemporaryDirectory() as tmp:
        tasks = Path(tmp)
        _write_lm_tasks(tasks)

        def run(name, ability, style, out, task_list, samples=None):
            args = [
                "run",
                "--model", "faq_mock",
                "--model_args", f"pretrained={name},ability={ability},style={style}",
                "--tasks", ",".join(task_list),
                "--include_path", str(tasks),
                "--output_path", str(out),
                "--log_samples",
            ]  # fmt: skip
            if samples is not None:
                args += ["--samples", samples]
            _run_lm_eval(args)

        for name, (ability, style) in LM_MODELS.items():
            if name == "mock-c":
                run(name, ability, style, LM_DIR / "history", ["faq_arith"], json.dumps(LM_PARTIAL))
                run(name, ability, style, LM_DIR / "history", ["faq_count"])
            elif name == "mock-e":
                run(name, ability, style, LM_DIR / "history", ["faq_arith"])
            else:
                run(name, ability, style, LM_DIR / "history", ["faq_arith", "faq_count"])
        name, ability, style = LM_NEW
        run(name, ability, style, LM_DIR / "new_model", ["faq_arith", "faq_count"])
        asked = LM_DIR / "asked.json"
        asked.write_text(json.dumps(LM_ASKED))
        # the --samples argument given as a path to a JSON file, as the tutorial does
        run(name, ability, style, LM_DIR / "asked", ["faq_arith", "faq_count"], str(asked))
        _strip_machine_paths(LM_DIR, tasks)


# -- inspect-ai --------------------------------------------------------------------------
INSPECT_MODELS = {"a": -0.8, "b": 0.0, "c": 0.7, "d": 1.4, "epochs": 0.4}
INSPECT_NEW = ("new", 0.5)
INSPECT_ASKED = ["arith/3", "arith/7", "words/w-kiwi", "words/w-fig"]


def _inspect_tasks():
    from harness_tasks import arith, words

    return arith, words


def mock_outputs(name, ability):
    """The ``custom_outputs`` callable of a ``mockllm`` model of the given ability."""
    from inspect_ai.model import ModelOutput, ModelUsage

    calls = {}

    def output(messages, tools, tool_choice, config):
        text = messages[-1].text
        kind, key, answer, difficulty = parse_question(text)
        n = calls[text] = calls.get(text, 0) + 1  # a second epoch draws afresh
        right = answers_correctly(name, f"{kind}:{key}", ability, difficulty, salt="" if n == 1 else n)
        off = 1 if _uniform(name, key, "off") < 0.5 else 3  # off by one earns partial credit
        value = answer if right else answer + off
        out = ModelOutput.from_content(model=f"mockllm/{name}", content=str(value))
        # set usage so that mockllm does not count tokens with tiktoken (a download)
        out.usage = ModelUsage(input_tokens=len(text.split()), output_tokens=1, total_tokens=len(text.split()) + 1)
        return out

    return output


def _mock_model(name, ability):
    from inspect_ai.model import get_model

    return get_model(f"mockllm/{name}", custom_outputs=mock_outputs(name, ability))


def _deflate_eval_logs():
    """Make inspect-ai write .eval logs with deflate, as it did before it moved to zstd."""
    import zipfile

    from inspect_ai._util import zipfile as inspect_zipfile

    saved = dict(inspect_zipfile.zipfile_compress_kwargs)
    inspect_zipfile.zipfile_compress_kwargs.update(compression=zipfile.ZIP_DEFLATED, compresslevel=6)
    return saved


def make_inspect():
    from inspect_ai import eval as inspect_eval
    from inspect_ai._util import zipfile as inspect_zipfile

    shutil.rmtree(INSPECT_DIR, ignore_errors=True)
    INSPECT_DIR.mkdir(parents=True)
    arith, words = _inspect_tasks()
    common = dict(display="none", score_display=False, max_connections=1)

    history = str(INSPECT_DIR / "history")
    saved = _deflate_eval_logs()
    try:
        for name, ability in INSPECT_MODELS.items():
            model = _mock_model(name, ability)
            if name == "epochs":
                inspect_eval(arith(), model=model, epochs=2, log_dir=history, **common)
            elif name == "d":  # JSON logs are large: one small one
                inspect_eval(words(), model=model, log_dir=history, log_format="json", **common)
            else:
                inspect_eval([arith(), words()], model=model, log_dir=history, **common)
        name, ability = INSPECT_NEW
        inspect_eval([arith(), words()], model=_mock_model(name, ability), log_dir=str(INSPECT_DIR / "new_model"), **common)
    finally:
        inspect_zipfile.zipfile_compress_kwargs.clear()
        inspect_zipfile.zipfile_compress_kwargs.update(saved)

    # the default format (zstd .eval) and task-scoped sample ids, as the tutorial runs them
    sample_ids = [qid.replace("/", ":", 1) for qid in INSPECT_ASKED]
    inspect_eval(
        [arith(), words()], model=_mock_model(name, ability), log_dir=str(INSPECT_DIR / "asked"),
        sample_id=sample_ids, **common,
    )  # fmt: skip
    (INSPECT_DIR / "asked_ids.txt").write_text(",".join(sample_ids) + "\n")


def make_inspect_odd():
    from inspect_ai import eval as inspect_eval
    from inspect_ai._util import zipfile as inspect_zipfile

    from harness_tasks import odd

    out = INSPECT_DIR / "odd"
    shutil.rmtree(out, ignore_errors=True)
    common = dict(display="none", score_display=False, max_connections=1)
    saved = _deflate_eval_logs()
    try:
        for name in ("a", "b", "c", "d"):
            model = _mock_model(name, INSPECT_MODELS[name])
            inspect_eval(odd(), model=model, log_dir=str(out / "history"), **common)
        inspect_eval(odd(), model=_mock_model(*INSPECT_NEW), log_dir=str(out / "new_model"), **common)
    finally:
        inspect_zipfile.zipfile_compress_kwargs.clear()
        inspect_zipfile.zipfile_compress_kwargs.update(saved)


def main(parts=("lm_eval", "inspect", "inspect_odd")):
    import inspect_ai
    import lm_eval

    print(f"lm_eval {lm_eval.__version__}, inspect_ai {inspect_ai.__version__}")
    if "lm_eval" in parts:
        make_lm_eval()
    if "inspect" in parts:
        make_inspect()
    if "inspect_odd" in parts:
        make_inspect_odd()
    total = sum(p.stat().st_size for d in (LM_DIR, INSPECT_DIR) for p in d.rglob("*") if p.is_file())
    print(f"wrote {total / 1024:.0f} KiB under {LM_DIR} and {INSPECT_DIR}")


if __name__ == "__main__":
    main(sys.argv[1:] or ("lm_eval", "inspect", "inspect_odd"))
