"""Hostile but realistic command lines, table-driven: each must end with one clear line and its
documented exit code (README, "Command lines"), never a traceback, and write nothing.

Add a row when a new way to misuse a command is found. The serving signatures' hostile inputs
are in tests/test_export.py (`HOSTILE_REQUESTS`), the data loaders' in tests/test_data.py.
"""

import concurrent.futures
import os
import subprocess
import sys

import pytest

from helpers import random_model, save_model_dir, toy_tokenizers

# every test here starts a Python process (or uses a module fixture that does)
pytestmark = pytest.mark.subprocess

# (name, command, arguments, stdin, exit code, a phrase the one-line error must hold)
# {model}, {damaged}, {tmp}, {three_columns}, {bad_utf8} are filled in per run.
CASES = [
    ("train: zero batch", "train", ["--batch_size=0"], "", 2, "not a positive integer"),
    ("train: NaN learning rate", "train", ["--learning_rate=nan"], "", 2, "finite"),
    ("train: infinite budget", "train", ["--max_minutes=inf"], "", 2, "finite"),
    ("train: unknown preset", "train", ["--preset=huge", "--output_dir={tmp}/a"], "", 2, "Unknown preset 'huge'"),
    ("train: missing TSV", "train", ["--tsv={tmp}/missing.tsv", "--output_dir={tmp}/b"], "", 2, "No such file"),
    ("train: 3-column TSV", "train", ["--tsv={three_columns}", "--output_dir={tmp}/c", "--preset=tiny"], "", 2,
     "line 2 has 3 tab-separated column"),
    ("train: half a file pair", "train", ["--source_file={three_columns}", "--output_dir={tmp}/d"], "", 2,
     "go together"),
    ("train: output dir is a file", "train", ["--output_dir={three_columns}"], "", 2, "is a file"),
    ("train: stray argument", "train", ["oops"], "", 2, "Unexpected arguments"),
    ("translate: no model", "translate", ["--model_dir={tmp}/nowhere"], "hello\n", 2, "does not exist"),
    ("translate: zero beam", "translate", ["--model_dir={model}", "--beam_size=0"], "a\n", 2, "range [1, 64]"),
    ("translate: nbest above beam", "translate", ["--model_dir={model}", "--beam_size=2", "--nbest=3"], "a\n",
     2, "exceeds --beam_size"),
    ("translate: NaN length penalty", "translate", ["--model_dir={model}", "--length_penalty=nan"], "a\n", 2,
     "finite"),
    ("translate: output is a directory", "translate", ["--model_dir={model}", "--output_file={tmp}"], "a\n", 2,
     "is a directory"),
    ("translate: invalid UTF-8", "translate", ["--model_dir={model}", "--input_file={bad_utf8}"], "", 2,
     "line 2 is not valid UTF-8"),
    ("translate: truncated vocabulary", "translate", ["--model_dir={damaged}"], "the cat\n", 2,
     "has 8 tokens but the model was trained with 16"),
    ("evaluate: no model", "evaluate", ["--model_dir={tmp}/nowhere"], "", 2, "does not exist"),
    ("export: no export dir", "export", ["--model_dir={model}"], "", 2, "--export_dir is required"),
    ("data: CR-only TSV is read, stray tab refused", "data", ["--tsv={three_columns}"], "", 2,
     "line 2 has 3 tab-separated column"),
]


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    source, target = toy_tokenizers()
    model = save_model_dir(tmp / "model", random_model(seed=1), source, target)
    damaged = save_model_dir(tmp / "damaged", random_model(seed=1), source, target)
    vocabulary = os.path.join(damaged, "target_vocabulary", "vocabulary.txt")
    lines = open(vocabulary, encoding="utf-8").read().splitlines()
    with open(vocabulary, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines[:8]) + "\n")
    three_columns = tmp / "three.tsv"
    three_columns.write_bytes(b"the cat\tel gato\rthe dog\tel perro\tstray\r")  # CR-only line ends
    bad_utf8 = tmp / "bad.txt"
    bad_utf8.write_bytes(b"the cat\n\xff bad\n")
    return {"tmp": str(tmp), "model": model, "damaged": damaged,
            "three_columns": str(three_columns), "bad_utf8": str(bad_utf8)}


def _run(case, paths):
    name, command, arguments, stdin, _, _ = case
    arguments = [argument.format(**paths) for argument in arguments]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-m", f"bahdanau_tf.cli.{command}", *arguments],
                          input=stdin.encode(), capture_output=True, timeout=300, env=env,
                          cwd=paths["tmp"])


def test_hostile_command_lines_get_one_clear_line_and_their_exit_code(paths):
    before = set(os.listdir(paths["tmp"]))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda case: _run(case, paths), CASES))
    failures = []
    for (name, _, _, _, code, phrase), result in zip(CASES, results):
        stderr = result.stderr.decode("utf-8", "replace")
        errors = [line for line in stderr.splitlines() if ": error: " in line]
        if (result.returncode != code or "Traceback" in stderr or len(errors) != 1
                or phrase not in errors[0] or result.stdout):
            failures.append(f"{name}: exit {result.returncode}, stderr tail {stderr[-400:]!r}")
    assert not failures, "\n".join(failures)
    assert set(os.listdir(paths["tmp"])) == before  # no output directory, file or lock was left
