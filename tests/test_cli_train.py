"""bahdanau-train end to end, in subprocesses: defaults, resume, refusal, SIGKILL and resume."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf import devices, model_directory

COMMAND = [sys.executable, "-m", "bahdanau_tf.cli.train"]
# a small, fast setup for the tests that are not about the defaults
SMALL_RUN = ["--preset=tiny", "--tokenizer=word", "--vocabulary_size=300", "--max_train_pairs=2000",
             "--max_length=20", "--jit=false", "--dev_sentences=64", "--max_minutes=0"]


def train(*flags, timeout=600):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(COMMAND + list(flags), capture_output=True, text=True, timeout=timeout, env=env)


def report_of(directory):
    return json.loads((directory / "report.json").read_text())


@pytest.mark.slow
def test_defaults_run_end_to_end_resume_and_refuse_another_model(tmp_path):
    out = tmp_path / "run"
    # the defaults (the small presets' training settings, subword vocabularies), shrunk in size only
    result = train("--preset=tiny", "--max_steps=3", "--max_train_pairs=1500", "--dev_sentences=64",
                   f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("model.json", "source_vocabulary", "target_vocabulary", "checkpoints", "best", "report.json"):
        assert (out / name).exists(), name
    report = report_of(out)
    assert report["updates"] == 3 and report["train_nll"] > 0 and report["dev_nll"] > 0
    assert report["training"]["optimizer"] == "adam" and report["training"]["learning_rate"] == 5e-3
    choice = devices.training_choice()  # precision and XLA are the device's: in the header and model.json
    assert (report["training"]["precision"], report["training"]["jit_compile"]) == (choice.precision, choice.jit_compile)
    assert f"(device choice: {choice.reason})" in result.stderr
    saved = model_directory.read_model_config(str(out))
    assert saved["device"]["precision"] == choice.precision and saved["device"]["reason"] == choice.reason
    assert saved["device"]["machine"]["name"] == devices.detect().name
    assert saved["settings"]["tokenizer"] == "subword" and saved["settings"]["direction"] == "en-es"
    loaded = model_directory.load_model_directory(str(out))
    assert loaded.source_tokenizer.kind == "subword"
    assert "Updates" in result.stderr and "Dev NLL" in result.stderr

    result = train("--preset=tiny", "--max_steps=5", "--max_train_pairs=1500", "--dev_sentences=64",
                   f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Resuming from" in result.stderr and "step 3" in result.stderr
    assert report_of(out)["updates"] == 5

    result = train("--preset=rnnencdec-tiny", "--max_steps=6", f"--output_dir={out}")
    assert result.returncode == 2
    assert "holds a different model (class RNNSearch != RNNEncDec" in result.stderr
    assert report_of(out)["updates"] == 5


def _latest_step(directory):
    latest = tf.train.latest_checkpoint(str(directory / "checkpoints"))
    return None if latest is None else int(latest.rsplit("-", 1)[1])


@pytest.mark.slow
def test_sigkill_mid_run_then_resume(tmp_path):
    out = tmp_path / "run"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
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

    # every checkpoint the manager lists is whole
    state = tf.train.get_checkpoint_state(str(out / "checkpoints"))
    for path in state.all_model_checkpoint_paths:
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
