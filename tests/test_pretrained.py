"""Tests for the shipped pretrained model (bahdanau_tf/pretrained/, scripts/build_pretrained_model.py)."""

import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from bahdanau_tf import model_directory, pretrained
from bahdanau_tf.models import RNNSearch
from bahdanau_tf.translator import Translator

NAME = "bible-en-es-small"
VERSE = "In the beginning God created the heavens and the earth."
# the shipped model's translations (beam 5, the Translator's default)
EXPECTED = {
    VERSE: "En el principio crió Dios los cielos y la tierra.",
    "Jesus wept.": "Y lloró Jesús.",
}


@pytest.fixture(scope="module")
def model():
    return RNNSearch.from_preset(NAME)


def test_the_shipped_weights_are_float16_and_small():
    directory = pretrained.path(NAME)
    weights = os.path.join(directory, pretrained.WEIGHTS)
    assert os.path.getsize(weights) <= 10 * 2**20
    with np.load(weights) as stored:
        assert {stored[key].dtype for key in stored.files} == {np.dtype(np.float16)}
    saved = model_directory.read_model_config(NAME)  # a name reads the package's directory
    assert saved["class_name"] == "RNNSearch" and saved["settings"]["direction"] == "en-es"
    recipe = saved["settings"]["pretrained"]
    assert recipe["command"].startswith("bahdanau-train --preset=small ") and recipe["seed"] == 1234
    assert f"--max_steps={recipe['max_steps']}" in recipe["command"]


def test_loaded_by_name_in_float32_with_the_small_presets_variables(model):
    """The variables (paths and shapes) of the small preset, float32, the stored values."""
    fresh = RNNSearch.from_preset("small", source_vocabulary_size=model.source_tokenizer.vocabulary_size,
                                  target_vocabulary_size=model.target_tokenizer.vocabulary_size)
    fresh.build_variables()
    # paths below the model's own name, which Keras numbers by the models made in the process
    layout = lambda m: [(v.path.split("/", 1)[1], tuple(v.shape)) for v in m.weights]  # noqa: E731
    assert layout(model) == layout(fresh)
    assert {v.dtype for v in model.weights} == {"float32"}
    with np.load(os.path.join(pretrained.path(NAME), pretrained.WEIGHTS)) as stored:
        for key, variable in zip(sorted(stored.files), model.weights):
            np.testing.assert_array_equal(variable.numpy(), stored[key].astype(np.float32))


def test_translates_the_test_verse(model, tmp_path):
    assert Translator.from_model(model).translate(list(EXPECTED)).translations == list(EXPECTED.values())
    by_directory = Translator.from_directory(NAME).translate(list(EXPECTED))
    by_preset = Translator.from_preset(NAME).translate(list(EXPECTED))
    assert by_preset.translations == by_directory.translations == list(EXPECTED.values())
    np.testing.assert_array_equal(by_preset.scores, by_directory.scores)
    with pytest.raises(ValueError, match="not a shipped model.*bible-en-es-small"):
        Translator.from_preset(str(tmp_path))  # a directory is from_directory's


def test_the_command_line_prints_the_translation_and_nothing_else(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-m", "bahdanau_tf.cli.translate", f"--model_dir={NAME}"],
                            input=VERSE + "\n", capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout == Translator.from_directory(NAME).translate([VERSE]).translations[0] + "\n"
    assert result.stderr == ""


def test_a_path_wins_over_a_name(tmp_path, monkeypatch):
    assert pretrained.resolve(NAME) == pretrained.path(NAME)
    (tmp_path / NAME).mkdir()
    monkeypatch.chdir(tmp_path)
    assert pretrained.resolve(NAME) == NAME
