"""Tests for bahdanau-average (bahdanau_tf/cli/average.py), run in a fresh process, and the
averaged checkpoint through translate's and export's loading (``--checkpoint=averaged``), and
its export through the session bundle.
Its refusals (too few checkpoints, no --last, a non-empty --output, damaged data, no average
to load) are rows of tests/test_hostile.py."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bahdanau_tf import model_directory, serving  # noqa: E402
from bahdanau_tf.decoding import Batching  # noqa: E402
from bahdanau_tf.translator import Translator  # noqa: E402
from helpers import beam, run_commands, training_run  # noqa: E402

pytestmark = pytest.mark.subprocess


@pytest.mark.slow
def test_average_then_translate_and_export_load_the_averaged_checkpoint(tmp_path):
    directory = training_run(tmp_path / "run", steps=(10, 20, 30))
    lines = ["the cat sat on the mat", "a dog ran to the house"]
    # the three command lines, as rows of one process (each row its own flags): average, then
    # translate and export, which load what it wrote
    averaging, translating, exporting = run_commands([
        ("average", [f"--model_dir={directory}", "--last=2"], ""),
        ("translate", [f"--model_dir={directory}", "--checkpoint=averaged", "--beam_size=2", "--scores",
                       "--nojit_compile"], "\n".join(lines) + "\n"),
        ("export", [f"--model_dir={directory}", "--checkpoint=averaged", "--beam_size=2",
                    f"--export_dir={tmp_path / 'serving'}"], "")], cwd=str(tmp_path))
    assert averaging["code"] == 0, averaging["stderr"][-2000:]
    path = averaging["stdout"].strip()
    assert path == os.path.join(directory, "averaged", "ckpt-30")
    assert "averaged ckpt-20, ckpt-30" in averaging["stderr"]
    assert model_directory.read_model_config(directory)["averaged"]["steps"] == [20, 30]
    averaged = Translator.from_directory(directory, which="averaged", search=beam(2), batching=Batching(jit_compile=False)).translate(lines)
    latest = Translator.from_directory(directory, which="latest", search=beam(2), batching=Batching(jit_compile=False)).translate(lines)
    assert not np.allclose(averaged.scores, latest.scores)  # another model than ckpt-30
    assert translating["code"] == 0, translating["stderr"][-2000:]
    out = [line.split("\t") for line in translating["stdout"].splitlines()]
    assert [t for t, _ in out] == averaged.translations
    np.testing.assert_allclose([float(s) for _, s in out], averaged.scores, atol=1e-3)
    # export's loading: float32 graph from the averaged weights (what bahdanau-export builds)
    exported = Translator.from_directory(directory, which="averaged", dtype="float32", search=beam(2), batching=Batching(jit_compile=False))
    assert exported.translate(lines).translations == averaged.translations
    # and the export itself, through the model server's path (session bundle, tensor names)
    assert exporting["code"] == 0, exporting["stderr"][-2000:]
    with serving.SessionBundle(str(tmp_path / "serving")) as bundle:
        served = bundle.run("serving_default", sentences=lines)
    assert [t.decode() for t in served["translations"]] == averaged.translations
    np.testing.assert_allclose(served["scores"], averaged.scores, atol=1e-3)
