"""Tests for bahdanau-average (bahdanau_tf/cli/average.py), run as a subprocess, and the
averaged checkpoint through translate's and export's loading (``--checkpoint=averaged``), and
its export through the session bundle.
Its refusals (too few checkpoints, no --last, a non-empty --output, damaged data, no average
to load) are rows of tests/test_hostile.py."""

import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bahdanau_tf import model_directory, serving  # noqa: E402
from bahdanau_tf.decoding import Batching  # noqa: E402
from bahdanau_tf.translator import Translator  # noqa: E402
from helpers import beam, training_run  # noqa: E402

pytestmark = pytest.mark.subprocess


def run_cli(module, args, stdin=""):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-m", f"bahdanau_tf.cli.{module}", *args],
                          input=stdin.encode("utf-8"), capture_output=True, env=env, timeout=300)


@pytest.mark.slow
def test_average_then_translate_and_export_load_the_averaged_checkpoint(tmp_path):
    directory = training_run(tmp_path / "run", steps=(10, 20, 30))
    result = run_cli("average", [f"--model_dir={directory}", "--last=2"])
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    path = result.stdout.decode().strip()
    assert path == os.path.join(directory, "averaged", "ckpt-30")
    assert "averaged ckpt-20, ckpt-30" in result.stderr.decode()
    assert model_directory.read_model_config(directory)["averaged"]["steps"] == [20, 30]
    lines = ["the cat sat on the mat", "a dog ran to the house"]
    averaged = Translator.from_directory(directory, which="averaged", search=beam(2), batching=Batching(jit_compile=False)).translate(lines)
    latest = Translator.from_directory(directory, which="latest", search=beam(2), batching=Batching(jit_compile=False)).translate(lines)
    assert not np.allclose(averaged.scores, latest.scores)  # another model than ckpt-30
    result = run_cli("translate", [f"--model_dir={directory}", "--checkpoint=averaged",
                                   "--beam_size=2", "--scores", "--nojit_compile"], "\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    out = [line.split("\t") for line in result.stdout.decode().splitlines()]
    assert [t for t, _ in out] == averaged.translations
    np.testing.assert_allclose([float(s) for _, s in out], averaged.scores, atol=1e-3)
    # export's loading: float32 graph from the averaged weights (what bahdanau-export builds)
    exported = Translator.from_directory(directory, which="averaged", dtype="float32", search=beam(2), batching=Batching(jit_compile=False))
    assert exported.translate(lines).translations == averaged.translations
    # and the export itself, through the model server's path (session bundle, tensor names)
    result = run_cli("export", [f"--model_dir={directory}", "--checkpoint=averaged", "--beam_size=2",
                                f"--export_dir={tmp_path / 'serving'}"])
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    with serving.SessionBundle(str(tmp_path / "serving")) as bundle:
        served = bundle.run("serving_default", sentences=lines)
    assert [t.decode() for t in served["translations"]] == averaged.translations
    np.testing.assert_allclose(served["scores"], averaged.scores, atol=1e-3)
