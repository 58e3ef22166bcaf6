"""bahdanau-train end to end, in subprocesses: defaults, resume, refusal, SIGKILL and resume."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

import bahdanau_tf
from bahdanau_tf import checkpoint_averaging, corpora, devices, lexicon, model_directory
from helpers import env_without_tensorflow_logging, foreign_lines, run_commands

# every test here starts a Python process (or uses a module fixture that does)
pytestmark = pytest.mark.subprocess

COMMAND = [sys.executable, "-m", "bahdanau_tf.cli.train"]
# a small, fast setup for the tests that are not about the defaults
# (no XLA, no dev BLEU: they cost more than the updates; tests/test_training.py covers both)
SMALL_RUN = ["--preset=tiny", "--tokenizer=word", "--vocabulary_size=300", "--max_train_pairs=2000",
             "--max_length=20", "--jit=false", "--dev_sentences=64", "--dev_bleu_every=0",
             "--max_minutes=0"]


def train(*flags, timeout=600, env=None):
    env = env or dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(COMMAND + list(flags), capture_output=True, text=True, timeout=timeout, env=env)


def train_rows(cwd, *runs, env=None):
    """Runs of bahdanau-train (each a list of flags), one after the other as rows of one process
    (`helpers.run_commands`): for runs where no fresh process is what is tested. Returns what
    `train` returns, one per run."""
    env = env or dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    rows = run_commands([("train", list(flags), "") for flags in runs], cwd=str(cwd), env=env)
    return [subprocess.CompletedProcess(COMMAND + list(flags), row["code"], row["stdout"], row["stderr"])
            for flags, row in zip(runs, rows)]


def report_of(directory):
    return json.loads((directory / "report.json").read_text())


@pytest.mark.slow
def test_defaults_run_end_to_end(tmp_path):
    out = tmp_path / "run"
    # the defaults (the small presets' training settings, subword vocabularies), shrunk in size only
    # (two updates of one batch shape: one XLA compilation of the step; dev NLL on 16 pairs, and
    # so dev BLEU on those 16, not on the default 100)
    result = train("--preset=tiny", "--max_steps=2", "--max_train_pairs=1500", "--dev_sentences=16",
                   f"--output_dir={out}", env=env_without_tensorflow_logging())
    assert result.returncode == 0, result.stderr[-3000:]
    # quiet by default: no TensorFlow/absl line (C++ at import, cuInit, XLA, oneDNN, retracing)
    assert foreign_lines(result.stderr) == [], result.stderr
    assert result.stderr.startswith("Built subword vocabularies"), result.stderr[:500]
    for name in ("model.json", "source_vocabulary", "target_vocabulary", "checkpoints", "best", "report.json"):
        assert (out / name).exists(), name
    report = report_of(out)
    assert report["updates"] == 2 and report["train_nll"] > 0 and report["dev_nll"] > 0
    assert report["training"]["optimizer"] == "adam" and report["training"]["learning_rate"] == 5e-3
    choice = devices.training_choice()  # precision and XLA are the device's: in the header and model.json
    assert (report["training"]["precision"], report["training"]["jit_compile"]) == (choice.precision, choice.jit_compile)
    assert f"(device choice: {choice.reason})" in result.stderr
    saved = model_directory.read_model_config(str(out))
    # the directory's format and the versions that wrote it (the run was a fresh process)
    assert saved["format"] == model_directory.FORMAT_VERSION
    assert saved["written_by"] == {"bahdanau_tf": bahdanau_tf.__version__,
                                   "tensorflow": tf.__version__, "keras": keras.__version__}
    assert saved["device"]["precision"] == choice.precision and saved["device"]["reason"] == choice.reason
    assert saved["device"]["machine"]["name"] == devices.detect().name
    assert saved["settings"]["tokenizer"] == "subword" and saved["settings"]["direction"] == "en-es"
    loaded = model_directory.load_model_directory(str(out))
    assert loaded.source_tokenizer.kind == "subword"
    assert "Updates" in result.stderr and "Dev NLL" in result.stderr
    assert "step       2  dev BLEU " in result.stderr and "(greedy, 16 sentences, " in result.stderr
    # the candidate lists' lexicon: the Dice top 10 of the 1,500 training pairs, with the run's
    # vocabularies, after the report
    assert f"Wrote {out / 'lexicon.tsv'} (the top 10 translations" in result.stderr
    expected = lexicon.Lexicon.build(corpora.load_corpus(split="train").select(slice(0, 1500)).pairs(),
                                     loaded.source_tokenizer, loaded.target_tokenizer, top_k=10)
    np.testing.assert_array_equal(model_directory.read_lexicon(str(out)).translations,
                                  expected.translations)
    # (resuming is tested where a run was killed (SIGKILL) or stopped (SIGTERM) below; another
    # model class in the directory is refused: a row of tests/test_hostile.py)


def test_tensorflow_lines_are_shown_on_request_only():
    # a bad preset: the command exits after TensorFlow loaded, with its own one line
    for flags, shown in (((), False), (("--verbosity=0",), True)):
        result = train("--preset=nonexistent", *flags, env=env_without_tensorflow_logging())
        assert result.returncode == 2
        assert result.stderr.splitlines()[-1].startswith("bahdanau-train: error: ")
        assert bool(foreign_lines(result.stderr)) == shown, result.stderr
    result = train("--preset=nonexistent", env=env_without_tensorflow_logging(TF_CPP_MIN_LOG_LEVEL="0"))
    assert foreign_lines(result.stderr), result.stderr


def _latest_step(directory):
    latest = tf.train.latest_checkpoint(str(directory / "checkpoints"))
    return None if latest is None else int(latest.rsplit("-", 1)[1])


@pytest.mark.slow
def test_sigkill_mid_run_then_resume(tmp_path):
    out = tmp_path / "run"
    # a SIGKILLed process removes nothing: the package must not have written to the temp dir
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=str(temp))
    process = subprocess.Popen(
        COMMAND + SMALL_RUN + ["--max_steps=100000", "--checkpoint_every=5", "--log_every=5",
                               "--eval_every=100000", f"--output_dir={out}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and (_latest_step(out) or 0) < 15:
            time.sleep(0.2)
        assert (_latest_step(out) or 0) >= 15, "no checkpoint appeared"
        time.sleep(0.7)  # kill at an arbitrary point, possibly during a save
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL
    assert os.listdir(temp) == []  # e.g. no vocabulary learned into the temp dir

    # every checkpoint the run keeps is whole: tf.train.CheckpointManager records the new
    # checkpoint, deletes the oldest one's .index, then its data, then records again, so a kill
    # in between leaves a listed checkpoint with no .index (and maybe its data), never the
    # latest, which run_checkpoints (what averaging reads) leaves out
    state = tf.train.get_checkpoint_state(str(out / "checkpoints"))
    assert state.model_checkpoint_path in state.all_model_checkpoint_paths
    kept = checkpoint_averaging.run_checkpoints(str(out))
    assert kept[-1] == state.model_checkpoint_path
    for path in state.all_model_checkpoint_paths:
        if path not in kept:
            assert not tf.io.gfile.exists(path + ".index")
            continue
        reader = tf.train.load_checkpoint(path)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    saved_step = _latest_step(out)
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(out / "checkpoints")))
    assert int(reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")) == saved_step
    # (a variable is named by its shortest path, e.g. optimizer/_trainable_variables/4 for the
    # source embedding, so match values rather than names)
    saved = [reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
             if name.endswith("VARIABLE_VALUE")]

    # the checkpoint holds trained weights, which a restore reproduces exactly
    restored = model_directory.load_model_directory(str(out), which="latest").model
    for variable in restored.trainable_variables:
        value = np.array(variable)
        assert any(array.shape == value.shape and np.array_equal(array, value) for array in saved)

    result = subprocess.run(COMMAND + SMALL_RUN + [f"--max_steps={saved_step + 5}", "--checkpoint_every=5",
                                                   f"--output_dir={out}"],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Resuming from {out / 'checkpoints' / f'ckpt-{saved_step}'}: step {saved_step}" in result.stderr
    assert f"Skipping the {saved_step} batches" in result.stderr
    assert report_of(out)["updates"] == saved_step + 5
    assert _latest_step(out) == saved_step + 5
    # the resumed run finished any deletion the kill interrupted: every checkpoint file on disk
    # (.index, .data-*) is a kept checkpoint's
    kept = {os.path.basename(path) for path in checkpoint_averaging.run_checkpoints(str(out))}
    files = [name for name in os.listdir(out / "checkpoints") if re.fullmatch(r"ckpt-\d+\.(index|data-.*)", name)]
    assert {name.split(".", 1)[0] for name in files} == kept


def _endless_run(out, log, checkpoint_every):
    """A small training run into ``out`` that only a signal ends, its stderr going to ``log``."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    with open(log, "w") as stderr:
        return subprocess.Popen(
            COMMAND + SMALL_RUN + ["--max_steps=100000", f"--checkpoint_every={checkpoint_every}",
                                   "--log_every=1", "--eval_every=1000", f"--output_dir={out}"],
            stdout=subprocess.DEVNULL, stderr=stderr, env=env)


@pytest.mark.slow
def test_a_second_signal_stops_at_once_with_one_line_and_no_partial_checkpoint(tmp_path):
    """A second signal while the first one's stop is under way stops at once. (Sent right after
    the first, it lands before that stop can finish; two of one kind sent together could merge
    into one, so the second is a SIGTERM.)"""
    out, log = tmp_path / "run", tmp_path / "stderr.txt"
    process = _endless_run(out, log, checkpoint_every=2)
    try:
        _wait_for(log, r"step +5 ", process)
        process.send_signal(signal.SIGINT)  # finish the update, then checkpoint and report...
        process.send_signal(signal.SIGTERM)  # ...but stop at once
        process.wait(timeout=300)
    finally:
        process.kill()
    text = log.read_text()
    errors = [line for line in text.splitlines() if line.startswith("bahdanau-train: error: ")]
    assert process.returncode == 130 and "Traceback" not in text, text[-3000:]
    assert len(errors) == 1 and "stopped at once by a second Ctrl-C" in errors[0], text[-3000:]
    for name in ("checkpoints", "best"):
        left = os.listdir(out / name) if (out / name).exists() else []
        assert not [entry for entry in left if entry.endswith("_temp")], left
    assert model_directory.load_model_directory(str(out), which="latest").model is not None


def _wait_for(path, pattern, process, timeout=300):
    """Waits until the file at ``path`` matches ``pattern`` (the process's stderr)."""
    import re

    deadline = time.time() + timeout
    while time.time() < deadline:
        text = path.read_text() if path.exists() else ""
        if re.search(pattern, text):
            return text
        assert process.poll() is None, text[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} never appeared: {text[-3000:]}")


@pytest.mark.slow
def test_one_writer_per_directory_and_sigterm_saves_the_last_step(tmp_path):
    out, log = tmp_path / "run", tmp_path / "stderr.txt"
    process = _endless_run(out, log, checkpoint_every=1000)
    try:
        _wait_for(log, r"step +7 ", process)
        # a second writer is refused with its own exit code, and touches nothing
        second = train(*SMALL_RUN, "--max_steps=3", f"--output_dir={out}")
        assert second.returncode == 4, second.stderr[-2000:]
        assert "in use by another training process" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=300)
    assert process.returncode == 143, log.read_text()[-3000:]
    report = report_of(out)
    # no checkpoint was due (every 1000): the signal saved the last finished update
    assert report["updates"] >= 7 and _latest_step(out) == report["updates"]
    assert report["stopped_because"].startswith("SIGTERM") and report["train_nll"] > 0

    # the finished run, rerun, keeps its figures and resumes at the saved step
    result = train(*SMALL_RUN, f"--max_steps={report['updates']}", f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    again = report_of(out)
    assert again["updates"] == report["updates"] and again["train_nll"] == report["train_nll"]


def test_a_failed_first_run_leaves_no_directory_and_no_temp_files(tmp_path):
    out, temp = tmp_path / "run", tmp_path / "tmp"
    temp.mkdir()
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n\n", encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=str(temp))
    flags = ["--preset=tiny", "--max_minutes=0", "--dev_sentences=32", "--jit=false",
             "--dev_bleu_every=0", f"--output_dir={out}"]
    result = subprocess.run(COMMAND + flags + [f"--tsv={empty}", "--max_steps=2"],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "empty" in result.stderr.splitlines()[-1]
    assert not out.exists()  # nothing a later run could mistake for its own
    good = tmp_path / "good.tsv"
    good.write_text("".join(f"the cat {i}\tel gato {i}\n" for i in range(50)), encoding="utf-8")
    result = subprocess.run(COMMAND + flags + [f"--tsv={good}", "--max_steps=2",
                                               "--vocabulary_size=40"],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resuming" not in result.stderr.lower() and "Built subword vocabularies" in result.stderr
    assert model_directory.load_model_directory(str(out)).source_tokenizer.vocabulary_size > 10
    assert os.listdir(temp) == []  # nothing of the package's left in the temp dir


@pytest.mark.slow
def test_a_streamed_corpus_trains_and_a_bad_line_met_while_training_stops_the_run(tmp_path):
    """--tsv is read as training goes (bahdanau_tf.corpora.CorpusFiles): a bad line past the
    pairs read before the first update stops the run with the file, the line and exit code 2,
    and leaves nothing behind; the corpus's size is an estimate, and the progress says so."""
    import gzip

    from bahdanau_tf import data

    out, temp = tmp_path / "run", tmp_path / "tmp"
    temp.mkdir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=str(temp))
    count = data.ESTIMATE_SAMPLE + 500  # the bad line comes after the sample that is read up front
    good = b"".join(b"the cat %05d\tel gato %05d\n" % (i % 97, i % 89) for i in range(count))
    corpus = tmp_path / "pairs.tsv.gz"
    corpus.write_bytes(gzip.compress(good + b"the dog\tel perro\tstray\n" + good))
    clean = tmp_path / "clean.tsv.gz"
    clean.write_bytes(gzip.compress(good + good))
    flags = ["--preset=tiny", "--max_minutes=0", "--vocabulary_size=80", "--max_steps=4",
             "--log_every=2", "--batch_size=16", "--jit=false", "--dev_bleu_every=0"]
    # the stopped run, then the clean corpus in another directory: rows of one process
    stopped, result = train_rows(tmp_path, [*flags, f"--tsv={corpus}", f"--output_dir={out}"],
                                 [*flags, f"--tsv={clean}", f"--output_dir={tmp_path / 'clean_run'}"], env=env)
    assert stopped.returncode == 2, stopped.stderr[-3000:]
    assert stopped.stderr.splitlines()[-1] == (
        f"bahdanau-train: error: {str(corpus)!r} line {count + 1} has 3 tab-separated column(s), "
        "2 expected: 'the dog\\tel perro\\tstray'")
    assert not out.exists() and os.listdir(temp) == []  # (nor did the clean run leave anything there)
    out = tmp_path / "clean_run"
    assert result.returncode == 0, result.stderr[-3000:]
    header = next(line for line in result.stderr.splitlines() if line.startswith("Training "))
    assert " on ~" in header and "estimated from the first pairs" in header
    progress = [line for line in result.stderr.splitlines() if line.startswith("step ")]
    assert len(progress) == 2 and all(" epoch  ~0.00 " in line for line in progress), progress
    report = report_of(out)
    assert report["train_pairs_estimated"] is True and report["updates"] == 4
    assert abs(report["train_pairs"] - 2 * count) < 0.1 * 2 * count  # estimated, not counted


@pytest.mark.slow
def test_every_model_class_trains_one_step_at_the_papers_sizes(tmp_path):
    """bahdanau-train --preset=NAME --max_steps=1 for the paper-sized preset of each model class,
    in one process (each architecture of the registry keeps the model contract in
    tests/test_models.py, at small sizes; here the command line builds, trains and saves each
    class at its real sizes).

    The presets keep their layer sizes; only the data is tiny (word vocabularies of 60, batches
    of 2 pairs of at most 20 tokens), so one update of each is cheap. No dev translation and no
    summaries: their cost is per run, not per preset, and other tests cover them.
    """
    from bahdanau_tf.presets import PRESETS, get_preset

    script = tmp_path / "every_preset.py"
    script.write_text(
        "import json, sys\n"
        "from absl import flags\n"
        "from bahdanau_tf.cli import train\n"
        "codes = {}\n"
        "for preset in sys.argv[2:]:\n"
        "    try:\n"
        "        train.run(['bahdanau-train', f'--preset={preset}', f'--output_dir={sys.argv[1]}/{preset}',\n"
        "                   '--max_steps=1', '--max_minutes=0', '--tokenizer=word', '--vocabulary_size=60',\n"
        "                   '--max_train_pairs=400', '--max_length=20', '--batch_size=2', '--dev_sentences=4',\n"
        "                   '--jit=false', '--dev_bleu_every=0', '--nosummaries'])\n"
        "    except SystemExit as exit:\n"
        "        codes[preset] = exit.code\n"
        "    flags.FLAGS.unparse_flags()\n"
        "print(json.dumps(codes))\n")
    presets = ["rnnencdec-50", "rnnsearch-50", "seq2seq"]
    assert sorted({get_preset(p).model_class.__name__ for p in presets}) == sorted(
        {row.model_class.__name__ for row in map(get_preset, PRESETS)})
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, str(script), str(tmp_path), *presets], capture_output=True,
                            text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    codes = json.loads(result.stdout.strip().splitlines()[-1])
    assert codes == {preset: 0 for preset in presets}, result.stderr[-3000:]
    for preset in presets:
        report = report_of(tmp_path / preset)
        assert report["updates"] == 1 and report["preset"] == preset and report["train_nll"] > 0
        saved = model_directory.read_model_config(str(tmp_path / preset))
        assert saved["class_name"] == get_preset(preset).model_class.__name__


@pytest.mark.slow
def test_trains_with_the_vocabularies_bahdanau_data_built(tmp_path):
    from bahdanau_tf import text

    vocabulary_dir = tmp_path / "vocabularies"
    out = tmp_path / "run"
    # bahdanau-data, then bahdanau-train, as rows of one process (each row its own flags);
    # --tokenizer/--vocabulary_size asking for other vocabularies lose to --vocabulary_dir
    built, result = run_commands([
        ("data", ["--tokenizer=word", "--vocabulary_size=250", f"--vocabulary_dir={vocabulary_dir}"], ""),
        ("train", [*SMALL_RUN, "--max_steps=2", f"--vocabulary_dir={vocabulary_dir}", f"--output_dir={out}"], "")],
        cwd=str(tmp_path))
    assert built["code"] == 0, built["stderr"][-3000:]
    assert result["code"] == 0, result["stderr"][-3000:]
    result = subprocess.CompletedProcess(COMMAND, result["code"], result["stdout"], result["stderr"])
    assert f"Using the vocabularies of {vocabulary_dir}: 250 / 250 tokens." in result.stderr
    assert report_of(out)["updates"] == 2
    loaded = model_directory.load_model_directory(str(out))
    for side, tokenizer in (("source", loaded.source_tokenizer), ("target", loaded.target_tokenizer)):
        assert tokenizer.vocabulary == text.load_tokenizer(str(vocabulary_dir / side)).vocabulary
    assert loaded.model.source_vocabulary_size == loaded.model.target_vocabulary_size == 250


@pytest.mark.slow
def test_a_resumed_run_keeps_its_tying_when_the_preset_ties(tmp_path):
    """The default preset ties its embeddings; a run directory trained untied (also one written
    before the argument existed: untied) resumes untied; a flag wins over both."""
    script = ("import json, sys\nfrom absl import flags\nfrom bahdanau_tf.cli import train\n"
              "for saved, arguments in json.loads(sys.argv[1]):\n"
              "    flags.FLAGS(['bahdanau-train', '--output_dir=run', *arguments])\n"
              "    train._saved_run = lambda: saved\n"
              "    print(json.dumps(train._model_overrides()))\n"
              "    flags.FLAGS.unparse_flags()\n")
    cases = [(None, []), ({"config": {"tie_embeddings": False}}, []), ({"config": {}}, []),
             ({"config": {"tie_embeddings": True}}, []), (None, ["--notie_embeddings"]),
             ({"config": {"tie_embeddings": False}}, ["--tie_embeddings"]),
             ({"config": {"tie_embeddings": False}}, ["--preset=small"])]
    result = subprocess.run([sys.executable, "-c", script, json.dumps(cases)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, env=env_without_tensorflow_logging())
    assert result.returncode == 0, result.stderr[-3000:]
    untied, tied = {"tie_embeddings": False}, {"tie_embeddings": True}
    assert [json.loads(line) for line in result.stdout.splitlines()] == [{}, untied, untied, {}, untied, tied, {}]


def test_the_flags_file_holds_absolute_paths_to_be_replayed_from_anywhere(tmp_path):
    """flags.txt names the run's files as absolute paths, so that ``--flagfile=RUN/flags.txt``
    reads the same files from another directory; an unset flag is not written."""
    script = ("import sys\nfrom absl import flags\nfrom bahdanau_tf.cli import train\n"
              "flags.FLAGS(sys.argv)\ntrain.write_flags_file(flags.FLAGS.output_dir)\n")
    (tmp_path / "run").mkdir()
    arguments = ["--tsv=data/train.tsv", "--output_dir=run", "--guided_alignment=../train.links",
                 "--vocabulary_dir=vocabulary", "--preset=tiny", "--seed=7"]
    result = subprocess.run([sys.executable, "-c", script, *arguments], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, env=env_without_tensorflow_logging())
    assert result.returncode == 0, result.stderr[-3000:]
    lines = (tmp_path / "run" / "flags.txt").read_text().splitlines()
    for line in (f"--tsv={tmp_path / 'data' / 'train.tsv'}", f"--output_dir={tmp_path / 'run'}",
                 f"--guided_alignment={tmp_path.parent / 'train.links'}",
                 f"--vocabulary_dir={tmp_path / 'vocabulary'}", "--preset=tiny", "--seed=7"):
        assert line in lines, (line, lines)
    assert not [line for line in lines if line.startswith("--guided_alignment_unaligned")]


def test_the_flags_file_repeats_the_run_and_no_lock_is_left(tmp_path):
    """RUN/flags.txt is an absl flag file: --flagfile=RUN/flags.txt --output_dir=OTHER trains the
    same configuration, to the same weights (same seed, same data order, no XLA). Each run in a
    fresh process, as a user runs them: a second model in one process gets another Keras name
    (``rnn_search_1``), which model.json records."""
    first, second = tmp_path / "first", tmp_path / "second"
    result = train(*SMALL_RUN, "--max_steps=3", "--learning_rate=0.003", "--seed=7",
                   f"--output_dir={first}")
    assert result.returncode == 0, result.stderr[-3000:]
    flags_file = (first / "flags.txt").read_text()
    assert "--learning_rate=0.003\n" in flags_file and "--seed=7\n" in flags_file
    assert "--preset=tiny\n" in flags_file and "--max_steps=3\n" in flags_file
    assert not (first / ".lock").exists()  # the lock goes with the run
    result = train(f"--flagfile={first / 'flags.txt'}", f"--output_dir={second}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert not (second / ".lock").exists()
    saved = [model_directory.read_model_config(str(d)) for d in (first, second)]
    assert saved[0]["config"] == saved[1]["config"]
    assert saved[0]["settings"]["training"] == saved[1]["settings"]["training"]
    assert report_of(first)["updates"] == report_of(second)["updates"] == 3
    weights = [model_directory.load_model_directory(str(d), which="latest").model.get_weights()
               for d in (first, second)]
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_regularisation_flags_are_recorded_repeat_the_run_and_stay_on_resume(tmp_path):
    """--dropout, --word_dropout, --label_smoothing and the dev schedule's flags: in model.json
    and flags.txt; --flagfile trains the same weights (the dropout masks come from the seed); a
    resumed run keeps the directory's dropout rates, and refuses others in one line."""
    first, second = tmp_path / "first", tmp_path / "second"
    regularised = ["--dropout=0.2", "--recurrent_dropout=0.3", "--word_dropout=0.1", "--label_smoothing=0.1",
                   "--schedule=plateau", "--plateau_patience=1", "--early_stopping=4", "--average_at=best",
                   "--eval_every=2", "--checkpoint_every=2", "--seed=7"]
    # the run and its replay in one process, then the resumed runs in another
    for result in train_rows(tmp_path, [*SMALL_RUN, "--max_steps=4", *regularised, f"--output_dir={first}"],
                             [f"--flagfile={first / 'flags.txt'}", f"--output_dir={second}"]):
        assert result.returncode == 0, result.stderr[-3000:]
    saved = model_directory.read_model_config(str(first))
    assert {key: value for key, value in saved["config"].items() if key.endswith("_dropout")} == dict(
        embedding_dropout=0.2, annotation_dropout=0.2, recurrent_dropout=0.3, readout_dropout=0.2,
        word_dropout=0.1)
    training = saved["settings"]["training"]
    assert (training["label_smoothing"], training["schedule"], training["early_stopping"]) == (0.1, "plateau", 4)
    assert "--patience" not in (first / "flags.txt").read_text()
    weights = [model_directory.load_model_directory(str(d), which="latest").model.get_weights()
               for d in (first, second)]
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)
    # resumed without the dropout flags: the directory's rates; then with others: refused
    resumed, result = train_rows(
        tmp_path, [*SMALL_RUN, "--max_steps=6", "--schedule=plateau", f"--output_dir={first}"],
        [*SMALL_RUN, "--max_steps=8", "--dropout=0.5", f"--output_dir={first}"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert model_directory.read_model_config(str(first))["config"] == saved["config"]
    assert report_of(first)["updates"] == 6
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "embedding_dropout: saved 0.2, requested 0.5" in result.stderr.splitlines()[-1]


@pytest.mark.slow
def test_a_resumed_run_keeps_its_recipe_refuses_another_and_records_it_in_one_place(tmp_path):
    """Resumed with only the data flags, a run keeps its recipe (preset, label smoothing, the
    dev schedule, the average, dropout) and honours a new --max_steps; model.json, flags.txt and
    report.json then say the same. A changed --schedule (its state is in the checkpoint) is
    refused in one line, exit code 2, and nothing on disk changes."""
    out = tmp_path / "run"
    recipe = ["--dropout=0.1", "--label_smoothing=0.1", "--schedule=plateau", "--plateau_factor=0.3",
              "--early_stopping=4", "--average_at=best", "--eval_every=2", "--checkpoint_every=2"]
    data_only = ["--max_train_pairs=2000", "--jit=false", "--dev_bleu_every=0", "--max_minutes=0"]
    first, resumed = train_rows(tmp_path, [*SMALL_RUN, *recipe, "--max_steps=4", f"--output_dir={out}"],
                                [*data_only, "--max_steps=6", f"--output_dir={out}"])
    assert first.returncode == 0, first.stderr[-3000:]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    saved, report = model_directory.read_model_config(str(out)), report_of(out)
    training = saved["settings"]["training"]
    assert training == report["training"]  # model.json and report.json: the last run's settings
    assert (training["label_smoothing"], training["schedule"], training["plateau_factor"]) == (0.1, "plateau", 0.3)
    assert (training["early_stopping"], training["average_at"], training["eval_every"]) == (4, "best", 2)
    assert training["max_steps"] == 6 and report["updates"] == 6 and report["preset"] == "tiny"
    assert saved["config"]["embedding_dropout"] == 0.1
    lines = (out / "flags.txt").read_text().splitlines()  # the last invocation's, with the recipe it kept
    for line in ("--preset=tiny", "--label_smoothing=0.1", "--schedule=plateau", "--plateau_factor=0.3",
                 "--early_stopping=4", "--average_at=best", "--eval_every=2", "--max_steps=6",
                 "--embedding_dropout=0.1", "--max_length=20"):
        assert line in lines, (line, lines)

    def snapshot():
        return {path.relative_to(out): path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()}

    before = snapshot()
    (refused,) = train_rows(tmp_path, [*data_only, "--schedule=constant", "--max_steps=8", f"--output_dir={out}"])
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    errors = [line for line in refused.stderr.splitlines() if line.startswith("bahdanau-train: error: ")]
    assert len(errors) == 1 and errors[0] == refused.stderr.splitlines()[-1], refused.stderr[-3000:]
    assert "was trained with --schedule=plateau" in errors[0] and "--schedule=constant cannot apply" in errors[0]
    assert snapshot() == before



def _tree_checksums(directory):
    import hashlib

    return {os.path.relpath(os.path.join(root, name), directory):
            hashlib.sha256(open(os.path.join(root, name), "rb").read()).hexdigest()
            for root, _, names in os.walk(directory) for name in names}


@pytest.mark.slow
def test_a_run_named_like_the_shipped_model_trains_scores_and_keeps_its_own_model_json(tmp_path):
    """``--output_dir=bible-en-es-small`` (the shipped model's name) trains into
    ./bible-en-es-small, chooses the alignment rule on its own model at its end and keeps its
    own model.json; ``bahdanau-evaluate --choose_alignment_rule`` of that local directory chooses
    on it too; the run resumes; the shipped model is untouched."""
    from bahdanau_tf import pretrained

    shipped = pretrained.path("bible-en-es-small")
    before = _tree_checksums(shipped)
    run = ["--preset=tiny", "--max_train_pairs=200", "--max_minutes=0", "--jit=false",
           "--dev_bleu_every=0", "--lexicon_top_k=0", "--output_dir=bible-en-es-small"]
    trained, scored, resumed = run_commands(
        [("train", [*run, "--max_steps=2"], ""),
         ("evaluate", ["--model_dir=bible-en-es-small", "--choose_alignment_rule", "--max_sentences=2",
                       "--nojit_compile", "--output_dir=evaluation"], ""),
         ("train", [*run, "--max_steps=3"], "")],
        cwd=str(tmp_path))
    local = tmp_path / "bible-en-es-small"
    assert trained["code"] == 0, trained["stderr"][-3000:]
    saved = json.loads((local / "model.json").read_text())
    assert saved["settings"]["preset"] == "tiny" and "pretrained" not in saved["settings"]
    assert saved["alignment"]["corpus"] == "bible-en-es/dev"  # chosen on the run's own model
    assert scored["code"] == 0, scored["stderr"][-3000:]
    rescored = json.loads((local / "model.json").read_text())
    assert rescored == saved  # the same model chose the same rule: its own model.json kept
    assert resumed["code"] == 0 and "holds a model: resuming" in resumed["stderr"], resumed["stderr"][-3000:]
    assert report_of(local)["updates"] == 3
    assert _tree_checksums(shipped) == before


def test_a_guided_run_trains_to_its_end_with_its_guide_and_resumes(tmp_path):
    """The guided alignment command runs to its end: it reports its guide, its update differs
    from the unguided run's of the same seed and batch by the guided term alone (the same first
    NLL, other weights), model.json names the links, and the run resumes with them."""
    pairs = [("a dog and a cat ran to the house", "un perro y un gato corrieron a la casa"),
             ("the cat", "el gato"), ("the dog ran", "el perro corrió"), ("a house", "una casa")]
    (tmp_path / "g.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    (tmp_path / "g.links").write_text("".join(" ".join(f"{i}-{i}" for i in range(len(s.split()))) + "\n"
                                              for s, _ in pairs))
    run = ["--preset=tiny", "--tsv=g.tsv", "--tokenizer=word", "--vocabulary_size=60", "--max_minutes=0",
           "--lexicon_top_k=0", "--nojit_compile", "--dev_bleu_every=0", "--seed=3"]
    guided, unguided, resumed = train_rows(
        tmp_path, [*run, "--max_steps=1", "--guided_alignment=g.links", "--output_dir=run"],
        [*run, "--max_steps=1", "--output_dir=plain"],
        [*run, "--max_steps=2", "--guided_alignment=g.links", "--output_dir=run"])
    for result in (guided, unguided, resumed):
        assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"^Guided alignment: \d+ token links of 4 pairs from g\.links", guided.stderr, re.M)
    first_nll = [re.search(r"^step +1 .*train NLL (\S+)", result.stderr, re.M).group(1)
                 for result in (guided, unguided)]
    assert first_nll[0] == first_nll[1]  # the same model and batch: the NLL is the same...
    weights = [model_directory.load_model_directory(str(tmp_path / name), which="latest").model.get_weights()
               for name in ("run", "plain")]
    assert any(not np.array_equal(a, b) for a, b in zip(*weights))  # ...the update is not
    saved = model_directory.read_model_config(str(tmp_path / "run"))["settings"]
    assert saved["guided_alignment"] == str(tmp_path / "g.links")
    assert "holds a model: resuming" in resumed.stderr and report_of(tmp_path / "run")["updates"] == 2


@pytest.mark.slow
def test_a_run_that_prunes_its_checkpoints_prints_no_library_warning(tmp_path):
    """The default command's quiet stderr holds through the first checkpoint pruning (which
    called a deprecated TensorFlow function): no TensorFlow, absl or Python warning line."""
    out = tmp_path / "run"
    result = train("--preset=tiny", "--max_steps=3", "--checkpoint_every=1", "--keep_checkpoints=2",
                   "--average_last=2", "--max_train_pairs=200", "--dev_sentences=8", "--dev_bleu_every=0",
                   f"--output_dir={out}", env=env_without_tensorflow_logging())
    assert result.returncode == 0, result.stderr[-3000:]
    assert not (out / "checkpoints" / "ckpt-1.index").exists()  # pruned
    assert foreign_lines(result.stderr) == [], result.stderr
    assert not re.search(r"deprecat", result.stderr, re.I), result.stderr
