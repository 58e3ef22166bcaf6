"""Tests for bahdanau_tf.model_directory: a damaged or mismatched directory is named, not used."""

import json
import os
import re
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import bahdanau_tf
from bahdanau_tf import checkpoint_averaging, model_directory
from helpers import checkpoint_model_values, random_model, save_model_dir, toy_tokenizers, training_run


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


def test_model_json_records_the_writers_versions_and_a_newer_format_is_refused(saved):
    directory, _ = saved
    path = os.path.join(directory, model_directory.MODEL_CONFIG)
    config = json.load(open(path, encoding="utf-8"))
    assert config["format"] == model_directory.FORMAT_VERSION
    assert config["written_by"] == {"bahdanau_tf": bahdanau_tf.__version__,
                                    "tensorflow": tf.__version__, "keras": keras.__version__}
    # a directory written before the format was recorded is format 1: it loads
    del config["format"], config["written_by"]
    json.dump(config, open(path, "w", encoding="utf-8"))
    model_directory.load_model_directory(directory, which="latest")
    # a later release's layout: refused, naming the writer's versions and this one's
    newer = dict(config, format=model_directory.FORMAT_VERSION + 1,
                 written_by={"bahdanau_tf": "9.1.0", "tensorflow": "3.0.0"})
    json.dump(newer, open(path, "w", encoding="utf-8"))
    message = (rf"format {model_directory.FORMAT_VERSION + 1}, written by bahdanau_tf 9\.1\.0 "
               rf"with TensorFlow 3\.0\.0; this bahdanau_tf {re.escape(bahdanau_tf.__version__)} "
               rf"reads format {model_directory.FORMAT_VERSION} at most: upgrade bahdanau_tf")
    for load in (model_directory.read_model_config, model_directory.load_model_directory):
        with pytest.raises(ValueError, match=message):
            load(directory)


def test_a_directory_written_before_an_argument_existed_holds_the_same_model(saved):
    """A model.json without an argument added since (tied embeddings, dropout) had that
    argument's default, and one with a retired argument at the value that meant none (the
    alignment head's units and context, 0: the shipped model's model.json) holds the model
    without it: the model it holds is the same, so a run resumes; a value that differs from
    the default is still named."""
    directory, model = saved
    path = os.path.join(directory, model_directory.MODEL_CONFIG)
    config = json.load(open(path, encoding="utf-8"))
    for name in ("tie_embeddings", "embedding_dropout", "word_dropout"):
        assert name in config["config"], sorted(config["config"])
        del config["config"][name]
    config["config"].update(alignment_head=0, alignment_head_context=0)
    json.dump(config, open(path, "w", encoding="utf-8"))
    model_directory.check_same_model(directory, model)
    assert type(model_directory.load_model_directory(directory).model) is type(model)
    other = random_model(seed=3, embedding_dropout=0.1)
    with pytest.raises(ValueError, match=r"holds a different model \(embedding_dropout: saved 0\.0, requested 0\.1\)"):
        model_directory.check_same_model(directory, other)


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


def test_a_weights_file_is_checked_against_its_model_and_one_source_of_weights(tmp_path, monkeypatch):
    """Keras's load_weights gives each layer its own entries and ignores the rest: another
    preset's file (the conditional GRU's, whose extra weights tiny lacks) must be refused, and
    so must a directory holding both a weights file and training checkpoints."""
    source, target = toy_tokenizers()
    tiny = random_model(seed=1).attach_tokenizers(source, target)
    cgru = random_model(seed=1, preset="rnnsearch-cgru-tiny").attach_tokenizers(source, target)
    tiny.save_to_preset(str(tmp_path / "tiny"))
    cgru.save_to_preset(str(tmp_path / "cgru"))
    shutil.copy(tmp_path / "cgru" / "model.weights.h5", tmp_path / "tiny" / "model.weights.h5")
    with pytest.raises(ValueError, match=r"holds 26 weights where the model has 23: 3 not of this model"):
        model_directory.load_model_directory(str(tmp_path / "tiny"))
    run = training_run(tmp_path / "run", steps=(1,))
    shutil.copy(tmp_path / "cgru" / "model.weights.h5", os.path.join(run, "model.weights.h5"))
    for which in ("best", "latest", "averaged"):
        with pytest.raises(ValueError, match=r"two sources of weights, model.weights.h5 and training "
                                             r"checkpoints \(checkpoints/\)"):
            model_directory.load_model_directory(run, which=which)
    # a saved model whose weights file is gone says so, not "No checkpoint"
    os.remove(tmp_path / "cgru" / "model.weights.h5")
    with pytest.raises(FileNotFoundError, match=r"model.weights.h5' is missing: the weights of the saved model"):
        model_directory.load_model_directory(str(tmp_path / "cgru"))
    # "" is no directory: nothing is written into the current one
    monkeypatch.chdir(tmp_path / "cgru")
    with pytest.raises(ValueError, match="`directory` is empty"):
        model_directory.save_model_directory("", tiny, source, target)
    assert sorted(os.listdir(".")) == ["model.json", "source_vocabulary", "target_vocabulary"]


def test_save_to_preset_replaces_only_its_own_directory(tmp_path, capsys):
    source, target = toy_tokenizers()
    first, second = random_model(seed=5), random_model(seed=6)
    for model in (first, second):
        model.attach_tokenizers(source, target)
    directory = str(tmp_path / "preset")
    first.save_to_preset(directory)
    second.save_to_preset(directory)  # a re-run replaces it, as keras.Model.save does
    assert sorted(os.listdir(directory)) == ["model.json", "model.weights.h5", "source_vocabulary",
                                             "target_vocabulary"]
    capsys.readouterr()
    for which in ("best", "latest"):
        loaded = model_directory.load_model_directory(directory, which=which)
        assert loaded.checkpoint == os.path.join(directory, "model.weights.h5")
        for a, b in zip(loaded.model.weights, second.weights, strict=True):
            np.testing.assert_array_equal(np.array(a), np.array(b))
    assert capsys.readouterr().err == ""  # no best/ by design: nothing to warn about
    # Keras's own weights file: a fresh model of the config reads it with load_weights
    fresh = type(second).from_config(second.get_config()).build_variables()
    fresh.load_weights(os.path.join(directory, "model.weights.h5"))
    for a, b in zip(fresh.weights, second.weights, strict=True):
        np.testing.assert_array_equal(np.array(a), np.array(b))
    assert not bahdanau_tf.pretrained.is_compact(directory)  # not a shipped model: no SHA-256 asked
    with pytest.raises(FileNotFoundError, match=r"holds one set of weights \(model.weights.h5\), with no averaged/"):
        model_directory.load_model_directory(directory, which="averaged")
    with pytest.raises(ValueError, match="`which` must be one of"):
        model_directory.load_model_directory(directory, which="newest")
    with pytest.raises(FileExistsError, match="already holds a saved model: pass overwrite=True"):
        first.save_to_preset(directory, overwrite=False)
    # a directory holding anything else (here: a training run's report) is never touched
    (tmp_path / "preset" / "report.json").write_text("{}")
    with pytest.raises(FileExistsError, match=r"holds report\.json, not only a saved model"):
        first.save_to_preset(directory)
    assert sorted(os.listdir(directory)) == ["model.json", "model.weights.h5", "report.json",
                                             "source_vocabulary", "target_vocabulary"]


def test_a_directory_saved_before_the_weights_file_loads_and_is_replaced(tmp_path, capsys):
    # what save_to_preset wrote before model.weights.h5: a TensorFlow checkpoint in checkpoints/
    source, target = toy_tokenizers()
    old, new = random_model(seed=7), random_model(seed=8)
    directory = save_model_dir(tmp_path / "old", old, source, target, settings={"saved_by": "save_to_preset"})
    capsys.readouterr()
    loaded = model_directory.load_model_directory(directory)
    assert loaded.checkpoint.endswith(os.path.join("checkpoints", "ckpt-1"))
    assert capsys.readouterr().err == ""
    for a, b in zip(loaded.model.weights, old.weights, strict=True):
        np.testing.assert_array_equal(np.array(a), np.array(b))
    new.attach_tokenizers(source, target).save_to_preset(directory)  # overwrites its own entries
    assert sorted(os.listdir(directory)) == ["model.json", "model.weights.h5", "source_vocabulary",
                                             "target_vocabulary"]
    for a, b in zip(model_directory.load_model_directory(directory).model.weights, new.weights, strict=True):
        np.testing.assert_array_equal(np.array(a), np.array(b))


@pytest.mark.parametrize("damage", ["truncated", "another model"])
def test_a_damaged_weights_file_is_named(tmp_path, damage):
    source, target = toy_tokenizers()
    directory = str(tmp_path / "preset")
    random_model(seed=5).attach_tokenizers(source, target).save_to_preset(directory)
    weights = os.path.join(directory, "model.weights.h5")
    if damage == "truncated":
        os.truncate(weights, os.path.getsize(weights) // 2)
        message = r"The weights file .*model\.weights\.h5' is missing or damaged"
    else:  # a model of another size's weights
        random_model(preset="small").save_weights(weights)
        message = r"model\.weights\.h5' does not hold the model of .*model\.json"
    with pytest.raises(ValueError, match=message):
        model_directory.load_model_directory(directory)


# === Checkpoint averaging ===

def test_averaged_weights_are_the_numpy_mean_of_the_last_checkpoints(tmp_path):
    directory = training_run(tmp_path / "run")
    path = checkpoint_averaging.average_checkpoints(directory, last=3)
    assert path == os.path.join(directory, "averaged", "ckpt-400")
    chosen = [checkpoint_model_values(os.path.join(directory, "checkpoints", f"ckpt-{n}")) for n in (200, 300, 400)]
    averaged = checkpoint_model_values(path)
    assert set(averaged) == set(chosen[0]) and len(averaged) > 10
    for name, value in averaged.items():
        np.testing.assert_allclose(value, np.mean([values[name] for values in chosen], axis=0),
                                   rtol=1e-6, atol=1e-7)
    assert not np.allclose(averaged[name], chosen[-1][name])  # not just the last one
    # optimizer slots and the step are left out
    names = [name for name, _ in tf.train.list_variables(path)]
    assert not [name for name in names if name.startswith(("optimizer", "step"))]
    assert any(name.startswith("optimizer/") for name, _ in
               tf.train.list_variables(os.path.join(directory, "checkpoints", "ckpt-400")))
    # the tag round-trips, and survives a rewrite of model.json (a resumed trainer's)
    tag = {"last": 3, "checkpoints": ["ckpt-200", "ckpt-300", "ckpt-400"], "steps": [200, 300, 400]}
    assert model_directory.read_model_config(directory)["averaged"] == tag
    source, target = toy_tokenizers()
    model_directory.write_model_config(directory, random_model(seed=10), source, target, {"preset": "tiny"})
    assert model_directory.read_model_config(directory)["averaged"] == tag
    # which="averaged" loads it; "best" / "latest" still load ckpt-400
    loaded = model_directory.load_model_directory(directory, which="averaged")
    assert loaded.checkpoint == path
    for variable in loaded.model.variables:
        key = [k for k in averaged if averaged[k].shape == tuple(variable.shape)]
        assert any(np.allclose(variable.numpy(), averaged[k]) for k in key)
    assert model_directory.load_model_directory(directory, which="latest").checkpoint.endswith("checkpoints/ckpt-400")


def test_a_standalone_averaged_directory_loads_with_any_which(tmp_path, capsys):
    directory = training_run(tmp_path / "run", steps=(1, 2))
    path = checkpoint_averaging.average_checkpoints(directory, last=2, output=str(tmp_path / "avg"))
    assert path == str(tmp_path / "avg" / "model.weights.h5")
    assert not os.path.exists(os.path.join(directory, "averaged"))
    saved = model_directory.read_model_config(str(tmp_path / "avg"))
    assert saved["averaged"]["checkpoints"] == ["ckpt-1", "ckpt-2"] and saved["settings"]["preset"] == "tiny"
    chosen = []
    for n in (1, 2):  # each checkpoint's model weights, restored by TensorFlow itself
        model = random_model(seed=n)
        tf.train.Checkpoint(model=model).restore(os.path.join(directory, "checkpoints", f"ckpt-{n}")).expect_partial()
        chosen.append(model.get_weights())
    capsys.readouterr()
    for which in ("best", "latest", "averaged"):
        loaded = model_directory.load_model_directory(str(tmp_path / "avg"), which=which)
        assert loaded.checkpoint == path
        for value, first, second in zip(loaded.model.get_weights(), *chosen, strict=True):
            np.testing.assert_allclose(value, (first + second) / 2, rtol=1e-6, atol=1e-7)
    assert capsys.readouterr().err == ""


def test_a_checkpoint_whose_deletion_a_kill_interrupted_is_not_averaged(tmp_path):
    # tf.train.CheckpointManager removes the oldest checkpoint's .index, then its data, then
    # rewrites the state file: a SIGKILL in between leaves ckpt-1 listed, its data on disk
    directory = training_run(tmp_path / "run", steps=(1, 2, 3))
    os.remove(os.path.join(directory, "checkpoints", "ckpt-1.index"))
    assert len(tf.train.get_checkpoint_state(os.path.join(directory, "checkpoints")).all_model_checkpoint_paths) == 3
    assert [os.path.basename(p) for p in checkpoint_averaging.run_checkpoints(directory)] == ["ckpt-2", "ckpt-3"]
    with pytest.raises(ValueError, match=r"last 3 checkpoints: .* keeps 2 in checkpoints/ \(ckpt-2, ckpt-3\)"):
        checkpoint_averaging.average_checkpoints(directory, last=3)
    path = checkpoint_averaging.average_checkpoints(directory, last=2)
    chosen = [checkpoint_model_values(os.path.join(directory, "checkpoints", f"ckpt-{n}")) for n in (2, 3)]
    for name, value in checkpoint_model_values(path).items():
        np.testing.assert_allclose(value, (chosen[0][name] + chosen[1][name]) / 2, rtol=1e-6, atol=1e-7)
    # the latest's .index gone is damage, not a deletion: named, never skipped
    os.remove(os.path.join(directory, "checkpoints", "ckpt-3.index"))
    assert [os.path.basename(p) for p in checkpoint_averaging.run_checkpoints(directory)] == ["ckpt-2", "ckpt-3"]
    with pytest.raises(ValueError, match=r"ckpt-3' is damaged: ckpt-3.index missing"):
        checkpoint_averaging.average_checkpoints(directory, last=1)


def test_averaging_refuses_too_many_a_damaged_or_a_foreign_checkpoint(tmp_path):
    directory = training_run(tmp_path / "run", steps=(1, 2, 3))
    with pytest.raises(ValueError, match=r"last 4 checkpoints: .* keeps 3 in checkpoints/ \(ckpt-1, ckpt-2, ckpt-3\)"):
        checkpoint_averaging.average_checkpoints(directory, last=4)
    with pytest.raises(FileNotFoundError, match="no averaged/ checkpoint: make one with bahdanau-average"):
        model_directory.load_model_directory(directory, which="averaged")
    # a checkpoint of a wider model among them (copied in from another config)
    other = training_run(tmp_path / "other", steps=(2,), model=random_model(seed=1, hidden_dim=20))
    for name in os.listdir(os.path.join(other, "checkpoints")):
        if name.startswith("ckpt-2."):
            shutil.copy(os.path.join(other, "checkpoints", name), os.path.join(directory, "checkpoints", name))
    with pytest.raises(ValueError, match=r"ckpt-1' and .*ckpt-2' hold different models"):
        checkpoint_averaging.average_checkpoints(directory, last=3)
    # all of another config than model.json
    source, target = toy_tokenizers()
    model_directory.write_model_config(other, random_model(seed=1), source, target)
    with pytest.raises(ValueError, match=r"ckpt-2' does not hold the model of model.json"):
        checkpoint_averaging.average_checkpoints(other, last=1)
    # a damaged data file: named
    data = [name for name in os.listdir(os.path.join(other, "checkpoints")) if ".data-" in name]
    with open(os.path.join(other, "checkpoints", data[0]), "r+b") as handle:
        handle.truncate(100)
    with pytest.raises(ValueError, match=r"ckpt-2' is damaged: ckpt-2.data-00000-of-00001 is missing or damaged"):
        checkpoint_averaging.average_checkpoints(other, last=1)
    assert not os.path.exists(os.path.join(directory, "averaged"))
    with pytest.raises(ValueError, match="`last` must be a positive int"):
        checkpoint_averaging.average_checkpoints(directory, last=0)
