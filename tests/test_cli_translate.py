"""Tests for bahdanau-translate (bahdanau_tf/cli/translate.py), run as a subprocess."""

import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest
import tensorflow as tf

from bahdanau_tf.translator import Translator
from helpers import random_model, save_model_dir  # noqa: E402
from helpers import toy_tokenizers as tokenizers  # noqa: E402

# every test here starts a Python process (or uses a module fixture that does)
pytestmark = pytest.mark.subprocess


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


def test_invalid_utf8_is_refused_with_its_line_before_any_work(model_dir, tmp_path):
    input_file = tmp_path / "in.txt"
    input_file.write_bytes(b"the cat\n\xff\xfe bad bytes\n")
    output_file = tmp_path / "out.txt"
    result = run_cli([f"--model_dir={model_dir}", f"--input_file={input_file}",
                      f"--output_file={output_file}"])
    assert result.returncode == 2
    assert "line 2 is not valid UTF-8" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode() and not output_file.exists()


def test_input_streams_in_chunks_and_a_later_bad_line_leaves_the_output_file_as_it_was(model_dir,
                                                                                     tmp_path):
    lines = ["the cat sat on the mat", "", "a dog ran", "the mat", "dog cat", "the the cat", "a"]
    expected = Translator.from_directory(model_dir, beam_size=3).translate(lines).translations
    result = run_cli([f"--model_dir={model_dir}", "--beam_size=3", "--read_lines=2"],
                     "\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert result.stdout.decode("utf-8").split("\n")[:-1] == expected  # 4 chunks, 1 line each out

    # a bad line in the third chunk: the two chunks before it are on stdout, then one error line
    input_file = tmp_path / "in.txt"
    input_file.write_bytes("\n".join(lines[:4]).encode() + b"\n\xff bad\n" + lines[5].encode())
    result = run_cli([f"--model_dir={model_dir}", "--beam_size=3", "--read_lines=2",
                      f"--input_file={input_file}"])
    stderr = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].endswith(
        "line 5 is not valid UTF-8 (invalid start byte at byte 0); convert it, e.g. with iconv.")
    assert result.stdout.decode("utf-8").split("\n")[:-1] == expected[:4]
    # to a file: the file is left as it was
    output_file = tmp_path / "out.txt"
    output_file.write_text("old\n")
    result = run_cli([f"--model_dir={model_dir}", "--beam_size=3", "--read_lines=2",
                      f"--input_file={input_file}", f"--output_file={output_file}"])
    assert result.returncode == 2 and output_file.read_text() == "old\n"
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "out.txt"]


def test_nbest_files_and_cr_line_ends(model_dir, tmp_path):
    input_file = tmp_path / "in.txt"
    input_file.write_bytes(b"the cat\rthe mat sat\r\n\nthe dog ran to the house")  # no final \n
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


def test_replace_unk_flags_give_the_translators_replacements(tmp_path):
    source, target = tokenizers()
    model_dir = save_model_dir(tmp_path / "model", random_model(seed=3, unk_bias=4.0), source,
                               target)
    dictionary = tmp_path / "dictionary.tsv"
    dictionary.write_text("zebra\tcebra\nthe\tEL\t0.5\n", encoding="utf-8")
    lines = ["the cat sat on zebra mat", "a quokka ran to the house"]
    result = run_cli([f"--model_dir={model_dir}", "--beam_size=3", "--nbest=2", "--replace_unk",
                      f"--unk_dictionary={dictionary}"], "\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    rows = [row.split("\t")[::2] for row in result.stdout.decode("utf-8").split("\n")[:-1]]
    translator = Translator.from_directory(model_dir, beam_size=3, jit_compile=False)
    plain = translator.translate(lines, nbest=2).translations
    assert any("[UNK]" in t for row in plain for t in row)  # the test can fail
    # the command's XLA path gives what the graph path gives with the same dictionary
    translator = Translator.from_directory(model_dir, beam_size=3, jit_compile=False,
                                           unk_dictionary=str(dictionary))
    assert rows == translator.translate(lines, nbest=2, replace_unk=True).translations
    assert not any("[UNK]" in t for row in rows for t in row)


def test_a_missing_model_dir_is_a_clear_error(tmp_path):
    result = run_cli([f"--model_dir={tmp_path / 'nowhere'}"], "hello\n")
    assert result.returncode == 2
    assert "does not exist" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()


def test_help_prints_the_commands_own_flags():
    result = subprocess.run([sys.executable, "-m", "bahdanau_tf.cli.translate", "--help"],
                            capture_output=True, timeout=120)
    out = result.stdout.decode()
    assert result.returncode == 0
    assert "bahdanau-translate: translate text" in out and "--beam_size" in out
    assert "--nbest" in out and "--tpu" not in out  # not absl's or TensorFlow's flags
