"""Tests for bahdanau_tf.model_directory: a damaged or mismatched directory is named, not used."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf import model_directory
from helpers import random_model, save_model_dir, toy_tokenizers


@pytest.fixture()
def saved(tmp_path):
    source, target = toy_tokenizers()
    model = random_model(seed=3)
    directory = save_model_dir(tmp_path / "model", model, source, target)
    return directory, model


def test_a_whole_directory_loads_with_its_weights(saved):
    directory, model = saved
    loaded = model_directory.load_model_directory(directory, which="latest")
    for a, b in zip(loaded.model.weights, model.weights):
        np.testing.assert_array_equal(np.array(a), np.array(b))


def test_a_truncated_vocabulary_is_refused_naming_the_file(saved):
    directory, _ = saved
    path = os.path.join(directory, model_directory.TARGET_VOCABULARY, "vocabulary.txt")
    lines = open(path, encoding="utf-8").read().splitlines()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines[:8]) + "\n")
    with pytest.raises(ValueError, match=r"target_vocabulary/vocabulary.txt has 8 tokens but the "
                                         r"model was trained with 16"):
        model_directory.load_model_directory(directory)
    os.remove(path)
    with pytest.raises(ValueError, match="half-written model directory"):
        model_directory.load_model_directory(directory)


def test_best_falls_back_to_latest_only_with_a_warning(saved, tmp_path):
    directory, model = saved
    warnings = []
    latest = tf.train.latest_checkpoint(os.path.join(directory, model_directory.CHECKPOINTS))
    # no best/ at all (no dev set): the latest, said out loud
    assert model_directory.latest_checkpoint(directory, "best", warn=warnings.append) == latest
    assert "no best/ checkpoint" in warnings[-1]
    # a best/ whose .index is gone is damaged: said, and not used
    best = tf.train.Checkpoint(model=model).save(os.path.join(directory, model_directory.BEST, "ckpt"))
    assert model_directory.latest_checkpoint(directory, "best", warn=warnings.append) == best
    os.remove(best + ".index")
    assert model_directory.latest_checkpoint(directory, "best", warn=warnings.append) == latest
    assert "best/ is damaged (ckpt-1.index missing)" in warnings[-1]
    # the latest damaged too: an error that names it, not a silent fallback
    os.remove(latest + ".index")
    with pytest.raises(ValueError, match=r"ckpt-1' is damaged: ckpt-1.index missing"):
        model_directory.latest_checkpoint(directory, "best", warn=warnings.append)


def test_a_relative_model_directory_loads(tmp_path, monkeypatch):
    source, target = toy_tokenizers()
    monkeypatch.chdir(tmp_path)
    save_model_dir("runs/model", random_model(seed=4), source, target)
    assert model_directory.latest_checkpoint("runs/model", "latest") == "runs/model/checkpoints/ckpt-1"
    assert model_directory.load_model_directory("runs/model", which="latest").checkpoint.endswith("ckpt-1")


def test_save_to_preset_replaces_only_its_own_directory(tmp_path):
    source, target = toy_tokenizers()
    first, second = random_model(seed=5), random_model(seed=6)
    for model in (first, second):
        model.attach_tokenizers(source, target)
    directory = str(tmp_path / "preset")
    first.save_to_preset(directory)
    second.save_to_preset(directory)  # a re-run replaces it, as keras.Model.save does
    warnings = []
    checkpoint = model_directory.latest_checkpoint(directory, "best", warn=warnings.append)
    assert checkpoint.endswith("checkpoints/ckpt-1") and warnings == []  # no best/ by design
    loaded = model_directory.load_model_directory(directory)
    for a, b in zip(loaded.model.weights, second.weights):
        np.testing.assert_array_equal(np.array(a), np.array(b))
    with pytest.raises(FileExistsError, match="already holds a saved model: pass overwrite=True"):
        first.save_to_preset(directory, overwrite=False)
    # a directory holding anything else (here: a training run's report) is never touched
    (tmp_path / "preset" / "report.json").write_text("{}")
    with pytest.raises(FileExistsError, match=r"holds report\.json, not only a saved model"):
        first.save_to_preset(directory)
    assert sorted(os.listdir(directory)) == ["checkpoints", "model.json", "report.json",
                                             "source_vocabulary", "target_vocabulary"]
