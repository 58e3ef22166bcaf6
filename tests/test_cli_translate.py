"""Tests for bahdanau-translate (bahdanau_tf/cli/translate.py), run as a subprocess."""

import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest
import tensorflow as tf

from bahdanau_tf import model_directory
from bahdanau_tf.translator import Translator
from test_translator import random_model, tokenizers  # noqa: E402


def save_model_dir(directory, model, source_tokenizer, target_tokenizer):
    """A model directory as the trainer leaves it: model.json, vocabularies, a checkpoint."""
    model_directory.write_model_config(str(directory), model, source_tokenizer, target_tokenizer)
    tf.train.Checkpoint(model=model).save(os.path.join(str(directory), "checkpoints", "ckpt"))
    return str(directory)


def run_cli(args, stdin=""):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-m", "bahdanau_tf.cli.translate", *args],
                          input=stdin.encode("utf-8"), capture_output=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    source, target = tokenizers()
    return save_model_dir(tmp_path_factory.mktemp("model"), random_model(seed=5), source, target)


def test_one_line_out_per_line_in_with_empty_lines(model_dir):
    lines = ["the cat sat on the mat", "", "   ", "a dog ran", "", "zebra unknown words", ""]
    stdin = "\n".join(lines) + "\n"
    result = run_cli([f"--model_dir={model_dir}", "--beam_size=3", "--batch_size=2"], stdin)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    out = result.stdout.decode("utf-8").split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    assert out[1] == out[2] == out[4] == out[6] == ""
    assert out[0] and out[3] and out[5]
    expected = Translator.from_directory(model_dir, beam_size=3).translate(
        ["the cat sat on the mat", "a dog ran"]).translations
    assert [out[0], out[3]] == expected


def test_nbest_files_and_invalid_utf8(model_dir, tmp_path):
    input_file = tmp_path / "in.txt"
    input_file.write_bytes(b"the cat\n\xff\xfe bad bytes\n\nthe dog ran to the house")  # no final \n
    output_file = tmp_path / "out.txt"
    result = run_cli([f"--model_dir={model_dir}", "--beam_size=3", "--nbest=2",
                      f"--input_file={input_file}", f"--output_file={output_file}"])
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    rows = output_file.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(rows) == 4
    for row in (rows[0], rows[1], rows[3]):
        fields = row.split("\t")
        assert len(fields) == 4  # translation, score, translation, score
        assert float(fields[1]) >= float(fields[3])
    assert rows[2].split("\t") == ["", "0.0000", "", "0.0000"]


def test_a_missing_model_dir_is_a_clear_error(tmp_path):
    result = run_cli([f"--model_dir={tmp_path / 'nowhere'}"], "hello\n")
    assert result.returncode != 0
    assert "does not exist" in result.stderr.decode()
