"""The model directory: what training leaves behind and what translation and export read.

One directory holds everything needed to use a trained model, nothing else required::

    OUT/
      model.json              model class + get_config() + run settings (preset, direction, ...),
                              the directory's format and the versions that wrote it
      source_vocabulary/      the source tokenizer (`bahdanau_tf.text.load_tokenizer`)
      target_vocabulary/      the target tokenizer
      checkpoints/            tf.train.CheckpointManager: model, optimizer, step (for resuming)
      model.weights.h5        a saved directory's weights instead (`save_model_directory`)
      best/                   the checkpoint with the best dev NLL (what translation uses), if any:
                              a trained one, or the run end's average when that is lower
      averaged/               the mean of the last N checkpoints' model weights
                              (`bahdanau_tf.checkpoint_averaging`: ``bahdanau-average``, or
                              the trainer at a run's end: `TrainingConfig.average_last`), if made
      lexicon.tsv             source token -> top-k target tokens (`bahdanau_tf.lexicon`): the
                              candidate lists' lexicon, written at the end of a training run
      report.json             the training report (table 2 of the paper), written by the trainer

This module owns the layout, and sits below the models: it rebuilds a model through Keras's
serialization registry (the models register as ``bahdanau_tf>RNNSearch``, ...) or from the
class it is handed (``RNNSearch.from_preset(path)`` hands ``RNNSearch``). The trainer writes through `write_model_config`, everybody reads
through `load_model_directory`, which checks the directory against ``model.json`` first
(`check_model_directory`: vocabulary sizes, checkpoint files) and names the file that is wrong.
``model.json`` is written last and atomically, when the first checkpoint exists: a directory
with ``model.json`` is a complete model directory. A Keras user writes the same files through
``model.save_to_preset`` (`save_model_directory`) in Keras's own weights file, which every
backend reads and writes; a trainer's checkpoints (the exact resume needs TensorFlow's) load on
any backend too (`bahdanau_tf.keras_checkpoints`). `load_model_directory` also reads a ``.keras``
file whose model carries its tokenizers (``model.attach_tokenizers`` before ``model.save``).

``model.json`` records the layout's version (``"format"``, `FORMAT_VERSION`) and the package,
TensorFlow and Keras versions that wrote it (``"written_by"``). A directory of a higher format
than this package reads is refused with a message that names both versions; one without a
``"format"`` is format 1.
"""

import dataclasses
import glob
import inspect
import json
import os
import sys
import tempfile
import zipfile
from typing import Any

import keras
import tensorflow as tf
from google.protobuf import text_format

import bahdanau_tf
from bahdanau_tf import keras_checkpoints
from bahdanau_tf import lexicon as lexicon_lib
from bahdanau_tf import pretrained
from bahdanau_tf import text

MODEL_CONFIG = "model.json"
SOURCE_VOCABULARY = "source_vocabulary"
TARGET_VOCABULARY = "target_vocabulary"
CHECKPOINTS = "checkpoints"
WEIGHTS = pretrained.WEIGHTS  #: a saved directory's weights: Keras's ``model.save_weights`` file
BEST = "best"
AVERAGED = "averaged"
REPORT = "report.json"
LEXICON = "lexicon.tsv"
#: ``model.json``'s record of an averaged checkpoint (`bahdanau_tf.checkpoint_averaging`)
AVERAGED_TAG = "averaged"
#: what `latest_checkpoint` selects
WHICH = ("best", "latest", "averaged")
LOCK = ".lock"  # the trainer's directory lock (`bahdanau_tf.training.run_directory`)
#: the layout's version, ``model.json``'s ``"format"``: raised when a reader of the old layout
#: would misread a new directory; a directory of a higher format is refused
FORMAT_VERSION = 1
FORMAT = "format"
#: ``model.json``'s record of the versions that wrote the directory (`written_by`)
WRITTEN_BY = "written_by"


def written_by() -> dict:
    """The versions of this package, TensorFlow and Keras: what ``model.json`` records."""
    return {"bahdanau_tf": bahdanau_tf.__version__, "tensorflow": tf.__version__,
            "keras": keras.__version__}


def model_config(model: keras.Model, settings: dict | None = None, device: dict | None = None) -> dict:
    """The JSON-able description of a model: class name, config, run settings, the directory's
    format and the versions writing it, and, for a trained model, the ``device`` it was trained
    on with the precision and XLA setting used (and whether they were the device's choice,
    `bahdanau_tf.devices`)."""
    config = {
        "class_name": type(model).__name__,
        "config": model.get_config(),
        "settings": dict(settings or {}),
        FORMAT: FORMAT_VERSION,
        WRITTEN_BY: written_by(),
    }
    if device is not None:
        config["device"] = dict(device)
    return config


def save_vocabularies(directory: str, source_tokenizer: Any, target_tokenizer: Any) -> None:
    """Writes both tokenizers into ``directory`` (a model directory, or a ``.keras`` file's
    asset directory: Keras's ``save_assets`` hook)."""
    source_tokenizer.save(os.path.join(directory, SOURCE_VOCABULARY))
    target_tokenizer.save(os.path.join(directory, TARGET_VOCABULARY))


def _load_private_tokenizer(directory):
    """A tokenizer read from ``directory`` that keeps its vocabulary in memory.

    Keras deletes its asset directory after loading, but the tokenizer's vocabulary file must
    outlive it (a SavedModel export copies it): the tokenizer holds it in memory
    (`bahdanau_tf.text.load_tokenizer` with ``in_memory=True``), nothing is written to disk.
    """
    return text.load_tokenizer(directory, in_memory=True)


def load_asset_vocabularies(directory: str) -> tuple | None:
    """The (source, target) tokenizers `save_vocabularies` wrote into a Keras asset directory,
    or None when there are none (Keras's ``load_assets`` hook; the directory is temporary)."""
    paths = [os.path.join(directory, name) for name in (SOURCE_VOCABULARY, TARGET_VOCABULARY)]
    if not all(os.path.isdir(path) for path in paths):
        return None
    return tuple(_load_private_tokenizer(path) for path in paths)


def write_model_config(directory: str, model: keras.Model, source_tokenizer: Any, target_tokenizer: Any,
                       settings: dict | None = None, device: dict | None = None) -> None:
    """Writes both vocabularies, then ``model.json`` (atomically), into ``directory``.

    An existing ``model.json``'s record of the ``averaged/`` checkpoint is kept while that
    checkpoint exists (a resumed run rewrites ``model.json`` at each checkpoint).
    """
    tf.io.gfile.makedirs(directory)
    save_vocabularies(directory, source_tokenizer, target_tokenizer)
    config = model_config(model, settings, device)
    tag = averaged_tag(directory)
    if tag is not None:
        config[AVERAGED_TAG] = tag
    _write_json(os.path.join(directory, MODEL_CONFIG), config)


def _write_json(path, content):
    """``content`` as ``path``, written beside it and renamed (never half a file)."""
    with tf.io.gfile.GFile(path + ".tmp", "w") as f:
        f.write(json.dumps(content, indent=2, sort_keys=True))
    tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def record_averaged(directory: str, tag: dict) -> None:
    """Records an averaged checkpoint in ``model.json`` (`AVERAGED_TAG`,
    `bahdanau_tf.checkpoint_averaging`)."""
    tag_model_config(directory, AVERAGED_TAG, tag)


def tag_model_config(directory: str, key: str, value) -> None:
    """Records ``value`` (JSON) as ``key`` of ``model.json`` (written beside it and renamed):
    what is learned about a trained model later (`AVERAGED_TAG`, an alignment rule chosen on dev).
    ``directory`` is a path (`pretrained.as_path`): the file rewritten is the one read."""
    directory = pretrained.as_path(directory)
    _write_json(os.path.join(directory, MODEL_CONFIG), {**read_model_config(directory), key: value})


def update_settings(directory: str, **settings) -> None:
    """Rewrites ``model.json``'s run settings with ``settings`` (a resumed run's ``training``)."""
    directory = pretrained.as_path(directory)
    saved = read_model_config(directory)
    _write_json(os.path.join(directory, MODEL_CONFIG),
                {**saved, "settings": {**saved.get("settings", {}), **settings}})


def averaged_tag(directory) -> dict | None:
    """``model.json``'s record of the ``averaged/`` checkpoint (`AVERAGED_TAG`), or None when
    there is none (or no ``averaged/`` checkpoint to go with it)."""
    try:
        tag = read_model_config(directory).get(AVERAGED_TAG)
    except (OSError, ValueError):
        return None
    if isinstance(tag, dict) and listed_checkpoint(os.path.join(directory, AVERAGED)):
        return tag
    return None


def is_keras_file(path: str | os.PathLike) -> bool:
    """True for a ``.keras`` file (a zip archive written by ``model.save``)."""
    path = os.fspath(path)
    return not os.path.isdir(path) and (path.endswith(".keras") or zipfile.is_zipfile(path))


def _keras_file_config(path):
    """``config.json`` of a ``.keras`` archive, as `read_model_config` returns it."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such .keras file: {path!r}")
    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (zipfile.BadZipFile, KeyError, ValueError) as error:
        raise ValueError(f"{path!r} is not a .keras file written by model.save ({error}).") from None
    return {"class_name": config.get("class_name"), "config": config.get("config", {}),
            "settings": {}}


def read_model_config(directory: str | os.PathLike) -> dict:
    """``model.json`` of a model directory (or a ``.keras`` file's config), as a dict.

    Raises:
        FileNotFoundError: not a model directory (a clear message), or no such file.
        ValueError: ``model.json`` is damaged (not JSON, or no ``class_name``), named.
    """
    directory = pretrained.resolve(directory)
    if is_keras_file(directory):
        return _keras_file_config(os.fspath(directory))
    if not tf.io.gfile.exists(os.fspath(directory)):
        raise FileNotFoundError(f"No such model directory: {os.fspath(directory)!r}.")
    path = os.path.join(directory, MODEL_CONFIG)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"{directory!r} is not a bahdanau_tf model directory: {MODEL_CONFIG} is missing "
            "(it is written by bahdanau-train)."
        )
    with tf.io.gfile.GFile(path) as f:
        content = f.read()
    try:
        config = json.loads(content)
    except ValueError as error:  # a truncated or empty file (a full disk, a copy cut short)
        raise ValueError(f"{path!r} is damaged: not valid JSON ({error}).") from None
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(f"{path!r} is damaged: it has no class_name.")
    _check_format(path, config)
    return config


def _check_format(path, config):
    """Refuses a ``model.json`` of a higher format than `FORMAT_VERSION`, naming the versions."""
    version = config.get(FORMAT, 1)
    if isinstance(version, int) and not isinstance(version, bool) and version <= FORMAT_VERSION:
        return
    writer = config.get(WRITTEN_BY)
    writer = writer if isinstance(writer, dict) else {}
    raise ValueError(
        f"{path!r} is in model directory format {version!r}, written by bahdanau_tf "
        f"{writer.get('bahdanau_tf', '(unknown)')} with TensorFlow "
        f"{writer.get('tensorflow', '(unknown)')}; this bahdanau_tf {bahdanau_tf.__version__} "
        f"reads format {FORMAT_VERSION} at most: upgrade bahdanau_tf to use it.")


def check_same_model(directory: str, model: keras.Model) -> None:
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
    # a directory written before an argument existed (dropout, the alignment head, tied
    # embeddings) lacks it: it had the argument's default
    defaults = {name: parameter.default
                for name, parameter in inspect.signature(type(model).__init__).parameters.items()
                if parameter.default is not inspect.Parameter.empty}
    defaults.update(getattr(model, "retired_arguments", {}))  # keys a saved config may still hold
    for key in sorted((set(saved["config"]) | set(wanted["config"])) - ignored):
        missing = defaults.get(key)
        old, new = saved["config"].get(key, missing), wanted["config"].get(key, missing)
        if old != new:
            differences.append(f"{key}: saved {old!r}, requested {new!r}")
    if differences:
        raise ValueError(
            f"The model directory {directory!r} holds a different model ("
            + "; ".join(differences)
            + "). Use a new --output_dir, or the same settings as the saved model."
        )


# what save_model_directory writes (or wrote, checkpoints/): all that `overwrite` may replace
SAVED_ENTRIES = frozenset({MODEL_CONFIG, SOURCE_VOCABULARY, TARGET_VOCABULARY, WEIGHTS, CHECKPOINTS})
SAVED_BY = "save_to_preset"  # model.json settings["saved_by"] of a saved (not trained) directory


def save_model_directory(directory: str, model: keras.Model, source_tokenizer: Any, target_tokenizer: Any,
                         settings: dict | None = None, overwrite: bool = False) -> str:
    """Writes a complete model directory of a trained model: config, vocabularies, `WEIGHTS`.

    What ``model.save_to_preset`` calls; the result loads like a ``bahdanau-train`` output, on
    any backend. Its one set of weights is the model: loading never warns that there is no ``best/``.

    Args:
        overwrite: bool, replace a directory this function wrote before (one that holds
            nothing but `SAVED_ENTRIES`); a training run's directory, or one holding anything
            else, is never replaced.

    Raises:
        FileExistsError: ``directory`` is not empty (and ``overwrite`` is False, or it holds
            more than a saved model).
    """
    if not os.fspath(directory):  # "" is no directory: tf.io.gfile would write into the current one
        raise ValueError("`directory` is empty: name the directory to save the model into.")
    existing = {name.rstrip("/") for name in tf.io.gfile.listdir(directory)} \
        if tf.io.gfile.isdir(directory) else set()
    if existing:
        foreign = sorted(existing - SAVED_ENTRIES)
        if foreign:
            raise FileExistsError(f"{directory!r} holds {', '.join(foreign)}, not only a saved "
                                  "model: save into a new or empty directory.")
        if not overwrite:
            raise FileExistsError(f"{directory!r} already holds a saved model: pass "
                                  "overwrite=True to replace it, or save into a new directory.")
        for name in existing:
            path = os.path.join(directory, name)
            (tf.io.gfile.rmtree if tf.io.gfile.isdir(path) else tf.io.gfile.remove)(path)
    tf.io.gfile.makedirs(directory)
    model.save_weights(os.path.join(directory, WEIGHTS))
    write_model_config(directory, model, source_tokenizer, target_tokenizer,
                       {**(settings or {}), "saved_by": SAVED_BY})
    return directory


#: the Keras registration package of the models (``bahdanau_tf>RNNSearch``)
REGISTERED_PACKAGE = "bahdanau_tf"


def _is_translation_model(model) -> bool:
    """True for a model of a class registered by bahdanau_tf (`bahdanau_tf.models`)."""
    name = keras.saving.get_registered_name(type(model))
    return name.startswith(REGISTERED_PACKAGE + ">") and hasattr(model, "attach_tokenizers")


def model_class(class_name: str, expected: type | None = None) -> type:
    """The model class of ``model.json``'s ``class_name``: ``expected`` when it is that class,
    else the class Keras's registry holds under ``bahdanau_tf>class_name``.

    Raises:
        ValueError: ``expected`` is another class, or no such class is registered (the
            message completes "<path> ...").
    """
    if expected is not None:
        if class_name != expected.__name__:
            raise ValueError(f"holds a {class_name}, not a {expected.__name__}; use "
                             "model_from_preset to load any class.")
        return expected
    found = keras.saving.get_registered_object(f"{REGISTERED_PACKAGE}>{class_name}")
    if found is None:
        raise ValueError(f"holds an unknown model class {class_name!r}: no Keras class is "
                         f"registered as '{REGISTERED_PACKAGE}>{class_name}' (import "
                         "bahdanau_tf.models first).")
    return found


def rebuild_model(class_name: str, config: dict, expected: type | None = None) -> keras.Model:
    """A model of ``class_name`` from its ``get_config()``, its variables built (no weights)."""
    return model_class(class_name, expected).from_config(config).build_variables()


def checkpoint_problems(prefix: str) -> list:
    """What is wrong with a checkpoint prefix: its missing .index, or a missing or damaged data
    file (truncated, zeroed, bytes flipped: every tensor is read, which checks its checksum);
    [] when it is whole."""
    if not tf.io.gfile.exists(prefix + ".index"):
        return [os.path.basename(prefix) + ".index missing"]
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (tf.errors.OpError, ValueError, IndexError) as error:
        data = sorted(tf.io.gfile.glob(glob.escape(prefix) + ".data-*"))
        named = ", ".join(os.path.basename(path) for path in data) or f"{os.path.basename(prefix)}.data-*"
        cause = _first_line(error)
        return [f"{named} is missing or damaged ({cause})"]
    return []


def checkpoint_state(directory: str):
    """``directory``'s ``checkpoint`` state file (``tf.train.get_checkpoint_state``), every
    path in it a checkpoint of ``directory``; None without one.

    A checkpoint is named by its file name in its own folder: a path into another folder (an
    absolute one an earlier release wrote, then the run copied or moved) names the checkpoint
    of that name here, so that a copy never reads, nor deletes, its original's files.
    """
    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return None
    state.model_checkpoint_path = os.path.join(directory, os.path.basename(state.model_checkpoint_path))
    paths = [os.path.join(directory, os.path.basename(path)) for path in state.all_model_checkpoint_paths]
    del state.all_model_checkpoint_paths[:]
    state.all_model_checkpoint_paths.extend(paths)
    return state


def write_checkpoint_state(directory: str, state) -> None:
    """Writes ``state`` (`checkpoint_state`'s, changed) as ``directory``'s ``checkpoint`` file,
    each checkpoint by its file name (the run moves with its folder), atomically: beside it,
    then renamed over it."""
    relative = type(state)()
    relative.CopyFrom(state)
    relative.model_checkpoint_path = os.path.basename(state.model_checkpoint_path)
    del relative.all_model_checkpoint_paths[:]
    relative.all_model_checkpoint_paths.extend(os.path.basename(path) for path in state.all_model_checkpoint_paths)
    target = os.path.join(directory, "checkpoint")
    with tf.io.gfile.GFile(target + ".tmp", "w") as handle:
        handle.write(text_format.MessageToString(relative))
    tf.io.gfile.rename(target + ".tmp", target, overwrite=True)


def listed_checkpoint(directory: str) -> str | None:
    """The checkpoint the ``checkpoint`` state file names (`checkpoint_state`), whether or not
    its files exist.

    (``tf.train.latest_checkpoint`` answers None for a damaged one, which would hide it.)
    """
    state = checkpoint_state(directory)
    if state is None or not state.model_checkpoint_path:
        return None
    return state.model_checkpoint_path


def latest_checkpoint(directory: str, which: str = "best", warn=None) -> str | None:
    """Path of the checkpoint to use: the best one if ``which="best"`` and it is whole, else latest;
    the ``averaged/`` one (`bahdanau_tf.checkpoint_averaging`) if ``which="averaged"``.

    ``best/`` falls back to ``checkpoints/`` only with a warning (``warn``, default: stderr):
    because there is no best checkpoint (no dev set), or because it is damaged. ``averaged/``
    never falls back: a directory without it is an error (but a directory that
    `bahdanau_tf.checkpoint_averaging.average_checkpoints` (``output=...``) wrote is all
    average: its one checkpoint is used).

    Raises:
        FileNotFoundError: ``which="averaged"`` and no averaged checkpoint was made.
        ValueError: the checkpoint to use is damaged (a file is missing, truncated or
            corrupted), or ``which`` is bad.
    """
    if which not in WHICH:
        raise ValueError(f"`which` must be one of {', '.join(map(repr, WHICH))}, got {which!r}.")
    warn = warn or (lambda line: print(line, file=sys.stderr, flush=True))
    latest = listed_checkpoint(os.path.join(directory, CHECKPOINTS))
    if which == "averaged":
        averaged = listed_checkpoint(os.path.join(directory, AVERAGED))
        if averaged is None and _saved_by_save_to_preset(directory, averaged=True):
            averaged = latest
        if averaged is None:
            raise FileNotFoundError(
                f"{os.fspath(directory)!r} has no {AVERAGED}/ checkpoint: make one with "
                "bahdanau-average --model_dir=... --last=N, or use another --checkpoint.")
        missing = checkpoint_problems(averaged)
        if missing:
            raise ValueError(f"The checkpoint {averaged!r} is damaged: {', '.join(missing)}.")
        return averaged
    if which == "best":
        best = listed_checkpoint(os.path.join(directory, BEST))
        missing = checkpoint_problems(best) if best else None
        if best and not missing:
            return best
        if best and missing and not latest:
            raise ValueError(f"The checkpoint {best!r} is damaged: {', '.join(missing)}.")
        if latest and (best or not _saved_by_save_to_preset(directory)):
            reason = (f"{BEST}/ is damaged ({', '.join(missing)})" if best
                      else f"there is no {BEST}/ checkpoint (no dev evaluation)")
            warn(f"Warning: {reason}; using the latest checkpoint {latest}.")
    if latest:
        missing = checkpoint_problems(latest)
        if missing:
            raise ValueError(f"The checkpoint {latest!r} is damaged: {', '.join(missing)}.")
    return latest


def check_one_source(directory) -> None:
    """Refuses (ValueError) a directory that holds both a `WEIGHTS` file and training
    checkpoints: which one is the model is not chosen silently, by any reader or writer."""
    checkpoints = [name + "/" for name in (BEST, CHECKPOINTS, AVERAGED)
                   if listed_checkpoint(os.path.join(directory, name))]
    if tf.io.gfile.exists(os.path.join(directory, WEIGHTS)) and checkpoints:
        raise ValueError(f"{os.fspath(directory)!r} holds two sources of weights, {WEIGHTS} and training "
                         f"checkpoints ({', '.join(checkpoints)}): move one of them out of the directory.")


def _saved_by_save_to_preset(directory, averaged=False):
    """Whether `save_model_directory` wrote ``directory`` (no best/ by design); with
    ``averaged``, as `checkpoint_averaging.average_checkpoints` (``output=``) does."""
    try:
        saved = read_model_config(directory)
    except (OSError, ValueError):
        return False
    return saved.get("settings", {}).get("saved_by") == SAVED_BY and (
        not averaged or isinstance(saved.get(AVERAGED_TAG), dict))


def check_model_directory(directory, saved=None):
    """Checks a model directory against its ``model.json``; names the file that is wrong.

    - both vocabularies exist and have the vocabulary sizes ``model.json`` was trained with
      (a vocabulary cut short would otherwise translate into [UNK]s with exit code 0);
    - the directory is complete: ``model.json`` without vocabularies is a half-written one.

    Returns:
        the ``model.json`` dict.

    Raises:
        FileNotFoundError: not a model directory.
        ValueError: a missing or mismatched file, named.
    """
    saved = saved or read_model_config(directory)
    config = saved.get("config", {})
    for side, name in (("source", SOURCE_VOCABULARY), ("target", TARGET_VOCABULARY)):
        path = os.path.join(directory, name)
        if not tf.io.gfile.exists(os.path.join(path, text.VOCABULARY_FILENAME)):
            raise ValueError(f"{directory!r} is a half-written model directory: "
                             f"{os.path.join(path, text.VOCABULARY_FILENAME)} is missing.")
        size = text.load_tokenizer(path).vocabulary_size
        expected = config.get(f"{side}_vocabulary_size")
        if expected is not None and size != expected:
            raise ValueError(
                f"{os.path.join(path, text.VOCABULARY_FILENAME)} has {size:,} tokens but the model "
                f"was trained with {expected:,} ({MODEL_CONFIG}): the vocabulary file is damaged "
                "or from another model.")
    return saved


@dataclasses.dataclass
class ModelDirectory:
    """A loaded model directory: the model (weights restored), both tokenizers and the settings."""

    model: object
    source_tokenizer: object
    target_tokenizer: object
    settings: dict
    checkpoint: str | None  # None: fresh weights (load_weights=False)


def _load_keras_file(path, dtype=None, expected=None):
    """A `ModelDirectory` of a ``.keras`` file whose model carries its tokenizers."""
    config = _keras_file_config(path)  # a clear error for a missing or foreign file
    model = (_load_head_inside(path) if config["config"].get("alignment_head") else
             keras.saving.load_model(path, compile=False))
    if not _is_translation_model(model):
        raise ValueError(f"{path!r} holds a {type(model).__name__}, not a bahdanau_tf model.")
    if expected is not None and not isinstance(model, expected):
        raise ValueError(f"{path!r} holds a {type(model).__name__}, not a {expected.__name__}; "
                         "use model_from_preset to load any class.")
    if model.source_tokenizer is None:
        raise ValueError(f"{path!r} has no vocabularies: call model.attach_tokenizers(source, "
                         "target) before model.save, so that the file can translate.")
    if dtype is not None:
        rebuilt = type(model).from_config({**model.get_config(), "dtype": dtype}).build_variables()
        rebuilt.set_weights(model.get_weights())
        model = rebuilt.attach_tokenizers(model.source_tokenizer, model.target_tokenizer)
    return ModelDirectory(model=model, source_tokenizer=model.source_tokenizer,
                          target_tokenizer=model.target_tokenizer, settings={}, checkpoint=path)


def _load_head_inside(path):
    """The model of a ``.keras`` file whose model held its alignment head among its own layers
    (``alignment_head`` in its config): the task it now is (``RNNSearch.from_config``), its
    weights read from that file's layout (`keras_checkpoints.load_weights_file`), its tokenizers."""
    with zipfile.ZipFile(path) as archive, tempfile.TemporaryDirectory() as scratch:
        archive.extractall(scratch, [name for name in archive.namelist()
                                     if name == _KERAS_WEIGHTS or name.startswith("assets/")])
        model = keras.saving.deserialize_keras_object(json.loads(archive.read("config.json")))
        keras_checkpoints.load_weights_file(model.build_variables(), os.path.join(scratch, _KERAS_WEIGHTS))
        tokenizers = load_asset_vocabularies(os.path.join(scratch, "assets"))
    return model.attach_tokenizers(*tokenizers) if tokenizers else model


#: the weights file inside a ``.keras`` archive
_KERAS_WEIGHTS = "model.weights.h5"


def load_model_directory(directory: str | os.PathLike, which: str = "best",
                         dtype: str | None = None, model_class: type | None = None,
                         load_weights: bool = True) -> "ModelDirectory":
    """Loads a trained model directory, or a ``.keras`` file.

    Args:
        directory: str, a directory written by the trainer (``bahdanau-train --output_dir``) or
            by ``model.save_to_preset``; or a ``.keras`` file of a model that carries its
            tokenizers (``which`` does not apply to it).
        which: ``"best"`` (best dev NLL, falling back to the latest), ``"latest"`` or
            ``"averaged"`` (`bahdanau_tf.checkpoint_averaging`'s).
        dtype: optional dtype policy for the rebuilt model (e.g. ``"float32"`` to serve a model
            trained under mixed precision).
        model_class: optional, the class the directory must hold (``RNNSearch.from_preset``
            hands its own); None: the class ``model.json`` names, from Keras's registry.
        load_weights: bool, False: the saved architecture with fresh, untrained weights (its
            tokenizers attached; ``checkpoint`` is None), as keras-hub's ``from_preset``.

    Returns:
        `ModelDirectory`; its model has the tokenizers attached (``Translator.from_model`` takes it).

    Raises:
        FileNotFoundError: not a model directory, or no checkpoint in it.
        ValueError: a damaged or mismatched file (see `check_model_directory`), a ``.keras``
            file without tokenizers, not a bahdanau_tf model, or not a ``model_class``.
    """
    directory = pretrained.resolve(directory)
    if is_keras_file(directory):
        loaded = _load_keras_file(os.fspath(directory), dtype=dtype, expected=model_class)
        return loaded if load_weights else _untrained(loaded)
    saved = check_model_directory(directory)
    config = dict(saved["config"])
    if dtype is not None:
        config["dtype"] = dtype
    try:
        model = rebuild_model(saved["class_name"], config, expected=model_class)
    except ValueError as error:
        raise ValueError(f"{os.fspath(directory)!r} {error}") from None
    warnings = []  # said only once the model is loaded: a refusal is one line
    checkpoint, failure = (_load_weights(directory, model, which, saved, warnings) if load_weights
                           else (None, None))
    if failure is not None:
        raise ValueError(f"The checkpoint {checkpoint!r} does not hold the model of "
                         f"{os.path.join(os.fspath(directory), MODEL_CONFIG)!r} (edited, or from "
                         f"another model?): {failure}")
    for line in warnings:
        print(line, file=sys.stderr, flush=True)
    model.attach_tokenizers(text.load_tokenizer(os.path.join(directory, SOURCE_VOCABULARY)),
                            text.load_tokenizer(os.path.join(directory, TARGET_VOCABULARY)))
    return ModelDirectory(
        model=model,
        source_tokenizer=model.source_tokenizer,
        target_tokenizer=model.target_tokenizer,
        settings=saved.get("settings", {}),
        checkpoint=checkpoint,
    )


def _untrained(loaded):
    """A loaded `ModelDirectory` with its model's architecture rebuilt on fresh weights."""
    model = type(loaded.model).from_config(loaded.model.get_config()).build_variables()
    model.attach_tokenizers(loaded.source_tokenizer, loaded.target_tokenizer)
    return ModelDirectory(model=model, source_tokenizer=loaded.source_tokenizer,
                          target_tokenizer=loaded.target_tokenizer, settings=loaded.settings, checkpoint=None)


def load_trained(path, overrides: dict, model_class: type | None = None, load_weights: bool = True):
    """The model of a preset directory, a ``.keras`` file or a shipped model's name, its
    tokenizers attached: what ``from_preset`` of a trained model returns (handed the class)."""
    overrides = dict(overrides)
    dtype = overrides.pop("dtype", None)
    if overrides:
        raise ValueError(f"{os.fspath(path)!r} holds a trained model: its architecture cannot "
                         f"be changed (got {sorted(overrides)}); only dtype can be given.")
    return load_model_directory(os.fspath(path), dtype=dtype, model_class=model_class,
                                load_weights=load_weights).model


def _load_weights(directory, model, which, saved, warnings):
    """Sets ``model``'s weights from a shipped model's float16 `WEIGHTS`, a saved directory's
    `WEIGHTS` or the checkpoint `latest_checkpoint` selects; returns (that file or checkpoint,
    None or the first line of why it does not fit)."""
    if which not in WHICH:
        raise ValueError(f"`which` must be one of {', '.join(map(repr, WHICH))}, got {which!r}.")
    weights = os.path.join(directory, WEIGHTS)
    check_one_source(directory)
    if which == "averaged" and tf.io.gfile.exists(weights) and not isinstance(saved.get(AVERAGED_TAG), dict):
        raise FileNotFoundError(f"{os.fspath(directory)!r} holds one set of weights ({WEIGHTS}), "
                                f"with no {AVERAGED}/ checkpoint; use another --checkpoint.")
    if pretrained.is_compact(directory):  # a shipped model: float16 weights, no checkpoint
        pretrained.load_weights(model, weights, saved["settings"]["pretrained"]["weights_sha256"])
        return weights, None
    if not tf.io.gfile.exists(weights):  # a trainer's run, or saved before model.weights.h5
        checkpoint = latest_checkpoint(directory, which, warn=warnings.append)
        settings = saved.get("settings") or {}
        if checkpoint is None and (settings.get("saved_by") == SAVED_BY or "pretrained" in settings):
            raise FileNotFoundError(f"{weights!r} is missing: the weights of the saved model in "
                                    f"{os.fspath(directory)!r} (its {MODEL_CONFIG} says so); copy the directory again.")
        if checkpoint is None:
            raise FileNotFoundError(f"No checkpoint in {directory!r} (looked in {BEST}/ and {CHECKPOINTS}/).")
        return checkpoint, keras_checkpoints.restore_failure(model, checkpoint)
    try:  # checked against the model: Keras alone ignores another model's extra weights
        keras_checkpoints.load_weights_file(model, weights)
    except OSError as error:  # not an HDF5 file, or cut short
        raise ValueError(f"The weights file {weights!r} is missing or damaged ({_first_line(error)}).") from None
    except (ValueError, KeyError, TypeError) as error:
        return weights, _first_line(error)
    return weights, None


def _first_line(error):
    """The first line of ``error``'s message, or its type's name."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__




# === The lexicon (candidate lists) ===

def write_lexicon(directory: str, lexicon: "lexicon_lib.Lexicon") -> str:
    """Saves a `bahdanau_tf.lexicon.Lexicon` as ``directory/lexicon.tsv`` (tokens of the
    directory's vocabularies; written beside it and renamed); returns the path."""
    path = os.path.join(directory, LEXICON)
    source = text.load_tokenizer(os.path.join(directory, SOURCE_VOCABULARY)).vocabulary
    target = text.load_tokenizer(os.path.join(directory, TARGET_VOCABULARY)).vocabulary
    if lexicon.translations.shape[0] != len(source):
        raise ValueError(f"The lexicon has {lexicon.translations.shape[0]:,} source entries but "
                         f"{directory!r}'s source vocabulary {len(source):,} tokens: another model's.")
    with tf.io.gfile.GFile(path + ".tmp", "w") as f:
        f.write(lexicon.to_tsv(source, target))
    tf.io.gfile.rename(path + ".tmp", path, overwrite=True)
    return path


def read_lexicon(directory: str) -> "lexicon_lib.Lexicon | None":
    """The lexicon saved with a model directory, or None when it has none.

    Raises:
        ValueError: a damaged ``lexicon.tsv`` (its path and the bad line named).
    """
    path = os.path.join(directory, LEXICON)
    if not tf.io.gfile.exists(path):
        return None
    source = text.load_tokenizer(os.path.join(directory, SOURCE_VOCABULARY)).vocabulary
    target = text.load_tokenizer(os.path.join(directory, TARGET_VOCABULARY)).vocabulary
    with tf.io.gfile.GFile(path) as f:
        content = f.read()
    try:
        return lexicon_lib.Lexicon.from_tsv(content, source, target)
    except ValueError as error:
        raise ValueError(f"{path!r} is damaged: {error}") from None
