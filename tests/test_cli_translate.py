"""Tests for bahdanau-translate (bahdanau_tf/cli/translate.py), run in a fresh process.

(Its refusals, e.g. invalid UTF-8 or a missing model directory, are rows of tests/test_hostile.py.)"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

import numpy as np

from bahdanau_tf import lexicon, model_directory
from bahdanau_tf.decoding import Batching
from bahdanau_tf.translator import Translator
from helpers import beam, random_model, run_commands, save_model_dir  # noqa: E402
from helpers import toy_tokenizers as tokenizers  # noqa: E402

# every test here starts a Python process (or uses a module fixture that does)
pytestmark = pytest.mark.subprocess
# the in-process Translators search without XLA, as the command lines here do (--nojit_compile):
# XLA is not what these tests are about (the two searches agree: tests/test_translator.py)
GRAPH = Batching(jit_compile=False)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    source, target = tokenizers()
    return save_model_dir(tmp_path_factory.mktemp("model"), random_model(seed=5), source, target)


LINES = ["the cat sat on the mat", "", "a dog ran", "the mat", "dog cat", "the the cat", "a"]
# candidate lists: each toy source word's (i + 5)-th target word, and the 6 most frequent ids
CANDIDATE_LEXICON = lexicon.Lexicon(
    np.array([[-1]] * 4 + [[4 + (i + 5) % 12] for i in range(11)], np.int32), np.ones((15, 1), np.float32))
UNK_LINES = ["the cat sat on zebra mat", "a quokka ran to the house"]


@pytest.fixture(scope="module")
def runs(model_dir, tmp_path_factory):
    """The command lines of this file, run in one process (helpers.run_commands: TensorFlow is
    imported once): name -> (result, the files it was given). The first and the [UNK]
    replacement (compared with the graph path) run with the defaults (XLA); the others without
    XLA, which none of them is about."""
    tmp = tmp_path_factory.mktemp("translate")
    bad = tmp / "bad.txt"  # a bad line in the third chunk of two lines
    bad.write_bytes("\n".join(LINES[:4]).encode() + b"\n\xff bad\n" + LINES[5].encode())
    (tmp / "kept").mkdir()
    kept = tmp / "kept" / "out.txt"
    kept.write_text("old\n")
    cr = tmp / "cr.txt"
    cr.write_bytes(b"the cat\rthe mat sat\r\n\nthe dog ran to the house")  # no final \n
    empty_lines = ["the cat sat on the mat", "", "   ", "a dog ran", "", "zebra unknown words", ""]
    source, target = tokenizers()  # a model that generates [UNK] often, and a dictionary
    unk_model = save_model_dir(tmp / "unk_model", random_model(seed=3, unk_bias=4.0), source, target)
    dictionary = tmp / "dictionary.tsv"
    dictionary.write_text("zebra\tcebra\nthe\tEL\t0.5\n", encoding="utf-8")
    lexicon_model = save_model_dir(tmp / "lexicon_model", random_model(seed=5), source, target)
    model_directory.write_lexicon(lexicon_model, CANDIDATE_LEXICON)
    many = tmp / "many.txt"
    many.write_text("\n".join(LINES * 30) + "\n", encoding="utf-8")
    progress = [f"--model_dir={model_dir}", "--beam_size=2", "--batch_size=16", f"--input_file={many}",
                "--nojit_compile"]
    rows = {
        "empty lines": ([f"--model_dir={model_dir}", "--beam_size=3", "--batch_size=2"],
                        "\n".join(empty_lines) + "\n"),
        "chunks": ([f"--model_dir={model_dir}", "--beam_size=3", "--read_lines=2", "--nojit_compile"],
                   "\n".join(LINES) + "\n"),
        "bad chunk to stdout": ([f"--model_dir={model_dir}", "--beam_size=3", "--read_lines=2",
                                 f"--input_file={bad}", "--nojit_compile"], ""),
        "bad chunk to a file": ([f"--model_dir={model_dir}", "--beam_size=3", "--read_lines=2",
                                 f"--input_file={bad}", f"--output_file={kept}", "--nojit_compile"], ""),
        "nbest": ([f"--model_dir={model_dir}", "--beam_size=3", "--nbest=2", f"--input_file={cr}",
                   f"--output_file={tmp / 'nbest.txt'}", "--nojit_compile"], ""),
        "help": (["--help"], ""),
        "replace unk": ([f"--model_dir={unk_model}", "--beam_size=3", "--nbest=2", "--replace_unk",
                         f"--unk_dictionary={dictionary}"], "\n".join(UNK_LINES) + "\n"),
        "candidate lists": ([f"--model_dir={lexicon_model}", "--beam_size=3", "--candidate_lists",
                             "--candidate_frequent=6", "--candidate_per_word=1", "--nojit_compile"],
                            "\n".join(LINES) + "\n"),
        "no progress": (progress, ""),
        "progress": (progress + ["--progress"], ""),
    }
    results = run_commands([("translate", arguments, stdin) for arguments, stdin in rows.values()], cwd=tmp)
    return {name: (result, {"kept": kept, "nbest": tmp / "nbest.txt", "unk_model": unk_model,
                            "dictionary": str(dictionary), "lexicon_model": lexicon_model})
            for name, result in zip(rows, results)}


def test_one_line_out_per_line_in_with_empty_lines(model_dir, runs):
    result, _ = runs["empty lines"]
    assert result["code"] == 0, result["stderr"][-2000:]
    out = result["stdout"].split("\n")
    assert out[-1] == "" and len(out) - 1 == 7
    assert out[1] == out[2] == out[4] == out[6] == ""
    assert out[0] and out[3] and out[5]
    expected = Translator.from_directory(model_dir, search=beam(3), batching=GRAPH).translate(
        ["the cat sat on the mat", "a dog ran"]).translations
    assert [out[0], out[3]] == expected


def test_input_streams_in_chunks_and_a_later_bad_line_leaves_the_output_file_as_it_was(model_dir, runs):
    expected = Translator.from_directory(model_dir, search=beam(3), batching=GRAPH).translate(LINES).translations
    result, files = runs["chunks"]
    assert result["code"] == 0, result["stderr"][-2000:]
    assert result["stdout"].split("\n")[:-1] == expected  # 4 chunks, 1 line each out

    # a bad line in the third chunk: the two chunks before it are on stdout, then one error line
    result, _ = runs["bad chunk to stdout"]
    assert result["code"] == 2 and "Traceback" not in result["stderr"]
    assert result["stderr"].strip().splitlines()[-1].endswith(
        "line 5 is not valid UTF-8 (invalid start byte at byte 0); convert it, e.g. with iconv.")
    assert result["stdout"].split("\n")[:-1] == expected[:4]
    # to a file: the file is left as it was, and nothing is left beside it
    result, _ = runs["bad chunk to a file"]
    assert result["code"] == 2 and files["kept"].read_text() == "old\n"
    assert os.listdir(files["kept"].parent) == ["out.txt"]


def test_nbest_files_and_cr_line_ends(runs):
    result, files = runs["nbest"]
    assert result["code"] == 0, result["stderr"][-2000:]
    rows = files["nbest"].read_text(encoding="utf-8").split("\n")[:-1]
    assert len(rows) == 4
    for row in (rows[0], rows[1], rows[3]):
        fields = row.split("\t")
        assert len(fields) == 4  # translation, score, translation, score
        assert float(fields[1]) >= float(fields[3])
    assert rows[2].split("\t") == ["", "0.0000", "", "0.0000"]


def test_replace_unk_flags_give_the_translators_replacements(runs):
    result, files = runs["replace unk"]
    assert result["code"] == 0, result["stderr"][-2000:]
    rows = [row.split("\t")[::2] for row in result["stdout"].split("\n")[:-1]]
    translator = Translator.from_directory(files["unk_model"], search=beam(3), batching=Batching(jit_compile=False))
    plain = translator.translate(UNK_LINES, nbest=2).translations
    assert any("[UNK]" in t for row in plain for t in row)  # the test can fail
    # the command's XLA path gives what the graph path gives with the same dictionary
    translator = Translator.from_directory(files["unk_model"], unk_dictionary=files["dictionary"], search=beam(3), batching=Batching(jit_compile=False))
    assert rows == translator.translate(UNK_LINES, nbest=2, replace_unk=True).translations
    assert not any("[UNK]" in t for row in rows for t in row)


def test_help_prints_the_commands_own_flags(runs):
    result, _ = runs["help"]
    out = result["stdout"]
    assert result["code"] == 0
    assert "bahdanau-translate: translate text" in out and "--beam_size" in out
    assert "--nbest" in out and "--tpu" not in out  # not absl's or TensorFlow's flags
    # every flag the command reads is listed, and --model_dir names the shipped models
    assert "--[no]progress" in out and "bible-en-es-small" in out


def test_candidate_lists_translate_as_the_python_translator_with_the_saved_lexicon(runs):
    result, files = runs["candidate lists"]
    assert result["code"] == 0, result["stderr"][-2000:]
    candidates = lexicon.CandidateLists(model_directory.read_lexicon(files["lexicon_model"]),
                                        frequent=6, per_word=1)
    expected = Translator.from_directory(files["lexicon_model"], candidates=candidates, search=beam(3),
                                         batching=GRAPH)
    plain = Translator.from_directory(files["lexicon_model"], search=beam(3), batching=GRAPH)
    assert result["stdout"].split("\n")[:-1] == expected.translate(LINES).translations
    assert expected.translate(LINES).translations != plain.translate(LINES).translations


def _translate_process(model_dir, *flags_, stderr=None):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.Popen(
        [sys.executable, "-m", "bahdanau_tf.cli.translate", f"--model_dir={model_dir}",
         "--beam_size=2", *flags_], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=stderr or subprocess.PIPE, env=env)


def test_a_pipe_that_pauses_is_answered_line_by_line(model_dir, tmp_path):
    """One line in, its translation out, while the pipe stays open; then the next."""
    import select
    import time

    expected = Translator.from_directory(model_dir, search=beam(2), batching=GRAPH).translate(LINES[:3]).translations
    process = _translate_process(model_dir, stderr=open(tmp_path / "stderr", "wb"))
    try:
        for line, translation in zip(LINES[:3], expected):
            process.stdin.write(line.encode() + b"\n")
            process.stdin.flush()
            ready, _, _ = select.select([process.stdout], [], [], 300)
            assert ready, f"no translation of {line!r} while the input stays open"
            assert process.stdout.readline().decode() == translation + "\n"
            time.sleep(0.2)  # the writer pauses: nothing more is waiting
        process.stdin.close()
        assert process.stdout.read() == b""
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
    stderr = (tmp_path / "stderr").read_text()  # no prompt, no progress: not a terminal
    assert "Type a sentence" not in stderr and "sentences/s" not in stderr, stderr


def test_progress_goes_to_stderr_with_the_flag_and_nowhere_without(runs):
    (quiet, _), (shown, _) = runs["no progress"], runs["progress"]
    assert quiet["code"] == shown["code"] == 0, shown["stderr"]
    assert "sentences" not in quiet["stderr"] and quiet["stdout"] == shown["stdout"]
    assert len(shown["stdout"].splitlines()) == len(LINES) * 30
    lines = shown["stderr"].splitlines()
    assert lines and lines[-1].startswith(f"bahdanau-translate: {len(LINES) * 30:,} / "
                                          f"{len(LINES) * 30:,} sentences  "), shown["stderr"]
    assert " sentences/s  ETA 0:00  (" in lines[-1], shown["stderr"]


# === The progress line (bahdanau_tf.cli.progress: no flags defined at import) ===


@pytest.mark.parametrize("content", [b"a\rb\rc\r", b"a\r\nb\nc", b"", b"a\r", b"\n\n", b"\r\r\n\r",
                                     b"x" * (2**20 - 1) + b"\r\nlast\r", b"x" * (2**20 - 1) + b"\r\r"])
def test_the_progress_total_counts_the_lines_the_reader_reads(tmp_path, content):
    """The total of ``3 / 3 sentences``: a carriage return ends a line there as in the reader,
    also a CR LF cut between the counter's 1 MiB blocks."""
    from bahdanau_tf import corpora
    from bahdanau_tf.cli import progress

    path = tmp_path / "input.txt"
    path.write_bytes(content)
    assert progress.line_count(str(path)) == len(corpora.read_lines(str(path)))


def test_the_last_progress_line_is_printed_once():
    import io

    from bahdanau_tf.cli import progress

    stream = io.StringIO()
    line = progress.Progress("bahdanau-translate", total=3, enabled=True, stream=stream)
    line.add(3)  # the first batch shows its line at once; it is also the last
    line.close()
    shown = stream.getvalue().splitlines()
    assert len(shown) == 1 and shown[0].startswith("bahdanau-translate: 3 / 3 sentences"), shown
    stream = io.StringIO()
    line = progress.Progress("bahdanau-translate", total=3, enabled=True, stream=stream)
    line.add(1)
    line.add(2)  # within 10 s of the first line: not shown until the end
    line.close()
    shown = stream.getvalue().splitlines()
    assert [text.split(" sentences")[0] for text in shown] == ["bahdanau-translate: 1 / 3",
                                                               "bahdanau-translate: 3 / 3"]
