"""The model directory: what training leaves behind and what translation and export read.

One directory holds everything needed to use a trained model, nothing else required::

    OUT/
      model.json              model class + get_config() + run settings (preset, direction, ...)
      source_vocabulary/      the source tokenizer (`bahdanau_tf.text.load_tokenizer`)
      target_vocabulary/      the target tokenizer
      checkpoints/            tf.train.CheckpointManager: model, optimizer, step (for resuming)
      best/                   the checkpoint with the best dev NLL (what translation uses), if any
      report.json             the training report (table 2 of the paper), written by the trainer

This module owns the layout: the trainer writes through `write_model_config`, everybody reads
through `load_model_directory`.
"""

import dataclasses
import json
import os

import tensorflow as tf

from bahdanau_tf import models as models_lib

MODEL_CONFIG = "model.json"
SOURCE_VOCABULARY = "source_vocabulary"
TARGET_VOCABULARY = "target_vocabulary"
CHECKPOINTS = "checkpoints"
BEST = "best"
REPORT = "report.json"


def model_config(model, settings=None, device=None):
    """The JSON-able description of a model: class name, config, run settings and, for a trained
    model, the ``device`` it was trained on with the precision and XLA setting used (and whether
    they were the device's choice, `bahdanau_tf.devices`)."""
    config = {
        "class_name": type(model).__name__,
        "config": model.get_config(),
        "settings": dict(settings or {}),
    }
    if device is not None:
        config["device"] = dict(device)
    return config


def write_model_config(directory, model, source_tokenizer, target_tokenizer, settings=None, device=None):
    """Writes ``model.json`` and both vocabularies into ``directory`` (created if needed)."""
    tf.io.gfile.makedirs(directory)
    with tf.io.gfile.GFile(os.path.join(directory, MODEL_CONFIG), "w") as f:
        f.write(json.dumps(model_config(model, settings, device), indent=2, sort_keys=True))
    source_tokenizer.save(os.path.join(directory, SOURCE_VOCABULARY))
    target_tokenizer.save(os.path.join(directory, TARGET_VOCABULARY))


def read_model_config(directory):
    """``model.json`` of a model directory, as a dict; a clear error when it is missing."""
    path = os.path.join(directory, MODEL_CONFIG)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"{directory!r} is not a bahdanau_tf model directory: {MODEL_CONFIG} is missing "
            "(it is written by bahdanau-train)."
        )
    with tf.io.gfile.GFile(path) as f:
        return json.loads(f.read())


def check_same_model(directory, model):
    """Raises ValueError when ``directory`` holds a model of another class or config than ``model``.

    Resuming training or restoring a checkpoint into a model of another shape would otherwise fail
    deep inside TensorFlow (or, worse, partially succeed).
    """
    saved = read_model_config(directory)
    wanted = model_config(model)
    differences = []
    if saved["class_name"] != wanted["class_name"]:
        differences.append(f"class {saved['class_name']} != {wanted['class_name']}")
    # the compute precision and the initial weights' distribution do not change the variables:
    # a checkpoint restores into either (e.g. a run started before the `small` preset's default
    # initialization changed resumes)
    ignored = {"name", "trainable", "dtype", "initialization"}
    for key in sorted((set(saved["config"]) | set(wanted["config"])) - ignored):
        old, new = saved["config"].get(key), wanted["config"].get(key)
        if old != new:
            differences.append(f"{key}: saved {old!r}, requested {new!r}")
    if differences:
        raise ValueError(
            f"The model directory {directory!r} holds a different model ("
            + "; ".join(differences)
            + "). Use a new --output_dir, or the same settings as the saved model."
        )


def build_model(model):
    """Creates all variables of ``model`` by calling it once on a one-token batch."""
    dummy = tf.ones([1, 1], "int32")
    model((dummy, dummy))
    return model


def latest_checkpoint(directory, which="best"):
    """Path of the checkpoint to use: the best one if ``which="best"`` and it exists, else latest."""
    candidates = [BEST, CHECKPOINTS] if which == "best" else [CHECKPOINTS]
    if which not in ("best", "latest"):
        raise ValueError(f'`which` must be "best" or "latest", got {which!r}.')
    for sub in candidates:
        path = tf.train.latest_checkpoint(os.path.join(directory, sub))
        if path:
            return path
    return None


@dataclasses.dataclass
class ModelDirectory:
    """A loaded model directory: the model (weights restored), both tokenizers and the settings."""

    model: object
    source_tokenizer: object
    target_tokenizer: object
    settings: dict
    checkpoint: str


def load_model_directory(directory, which="best", dtype=None):
    """Loads a trained model directory.

    Args:
        directory: str, a directory written by the trainer (``bahdanau-train --output_dir``).
        which: ``"best"`` (best dev NLL, falling back to the latest) or ``"latest"``.
        dtype: optional dtype policy for the rebuilt model (e.g. ``"float32"`` to serve a model
            trained under mixed precision).

    Returns:
        `ModelDirectory`.

    Raises:
        FileNotFoundError: not a model directory, or no checkpoint in it.
    """
    from bahdanau_tf.text import load_tokenizer  # text imports tensorflow_text: only when needed

    saved = read_model_config(directory)
    config = dict(saved["config"])
    if dtype is not None:
        config["dtype"] = dtype
    model = build_model(models_lib.model_from_config(saved["class_name"], config))
    checkpoint = latest_checkpoint(directory, which)
    if checkpoint is None:
        raise FileNotFoundError(f"No checkpoint in {directory!r} (looked in {BEST}/ and {CHECKPOINTS}/).")
    tf.train.Checkpoint(model=model).restore(checkpoint).expect_partial().assert_existing_objects_matched()
    return ModelDirectory(
        model=model,
        source_tokenizer=load_tokenizer(os.path.join(directory, SOURCE_VOCABULARY)),
        target_tokenizer=load_tokenizer(os.path.join(directory, TARGET_VOCABULARY)),
        settings=saved.get("settings", {}),
        checkpoint=checkpoint,
    )
