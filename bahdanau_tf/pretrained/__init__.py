"""Trained models that ship with the package, loaded by name.

Each is a model directory in this package (``model.json``, ``source_vocabulary/``,
``target_vocabulary/``) whose weights are Keras's own weights file, ``model.weights.h5``
(``model.save_weights``, as in any saved model directory), in float16: half the size, loaded into
the float32 model (`load_weights`) on any Keras backend, and checked against the SHA-256 that its
``model.json`` records. Wherever a model directory is accepted, its name is too::

    echo "But seek God's Kingdom, and all these things will be added to you." | \\
        bahdanau-translate --model_dir=bible-en-es-small

    model = RNNSearch.from_preset("bible-en-es-small")   # its tokenizers attached
    Translator.from_model(model).translate(["For each man will bear his own burden."]).translations

A name wins over a directory of the same name: write ``./bible-en-es-small`` for that one
(docs/translating.md, "Model names and paths": the one rule of every ``from_preset`` and
``--model_dir``). ``scripts/build_pretrained_model.py``
rebuilds a model from the embedded corpus; its ``model.json`` records how (``settings.pretrained``:
the command, the seed, the number of updates, the package version) and benchmarks/README.md its
test BLEU.
"""

import hashlib
import json
import os

DIRECTORY = os.path.dirname(os.path.abspath(__file__))
WEIGHTS = "model.weights.h5"
OLD_WEIGHTS = "weights.npz"  # the shipped models' weights before 0.3
#: name -> what it is
MODELS = {
    "bible-en-es-small": "the default preset's RNNsearch (rnnsearch-cgru-small: the conditional GRU "
                         "decoder, tied target embeddings; 3,255,176 parameters) trained on the "
                         "embedded Bible corpus, English -> Spanish, 2,000 updates",
}


def names() -> list:
    """The names of the shipped models."""
    return sorted(MODELS)


def path(name: str) -> str:
    """The package directory of a shipped model's name (whether or not it is built)."""
    return os.path.join(DIRECTORY, name)


def resolve(name_or_path, written=False):
    """The directory of a shipped model's name (also where the current directory holds one of
    that name: write ``./NAME`` for it); anything else (a path) as it is.

    With ``written`` (a directory the caller writes into: a run's output, a model its alignment
    rule or average is saved with), an existing path is that path (`as_path`): a run or model
    of the user's is never read as the shipped model of its name."""
    if written and os.path.exists(name_or_path):
        return as_path(name_or_path)
    text = name_or_path if isinstance(name_or_path, str) else None
    return path(text) if text in MODELS else name_or_path


def as_path(directory):
    """``directory`` spelt as a path whatever it is named: ``./NAME`` for a shipped model's name
    (which `resolve` leaves as it is), anything else as it is."""
    return os.path.join(os.curdir, directory) if isinstance(directory, str) and directory in MODELS else directory


def is_shipped(directory) -> bool:
    """Whether ``directory`` (resolved, `resolve`) is a shipped model's folder in this package."""
    return any(os.path.realpath(directory) == os.path.realpath(path(name)) for name in MODELS)


def is_compact(directory) -> bool:
    """Whether ``directory`` is a shipped model: its ``model.json`` records how it was built
    (``settings.pretrained``, with its weights' SHA-256) and its float16 weights are one
    `WEIGHTS` file. (A directory ``model.save_to_preset`` wrote holds a `WEIGHTS` file too,
    without that record.)

    Raises:
        ValueError: it holds the float16 ``weights.npz`` of a shipped model before 0.3 instead.
    """
    directory = os.fspath(directory)
    if os.path.isfile(os.path.join(directory, WEIGHTS)):
        return _records_build(directory)
    if os.path.isfile(os.path.join(directory, OLD_WEIGHTS)):
        raise ValueError(f"{directory!r} keeps its weights in {OLD_WEIGHTS}, the shipped models' "
                         f"format before bahdanau_tf 0.3: use the model this version ships (by "
                         f"its name: {', '.join(names())}) or rebuild it with "
                         "scripts/build_pretrained_model.py.")
    return False


def _records_build(directory: str) -> bool:
    """Whether ``directory``'s ``model.json`` has a ``settings.pretrained`` record (a damaged or
    missing one has not: its readers name what is wrong)."""
    try:
        with open(os.path.join(directory, "model.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return False
    settings = config.get("settings") if isinstance(config, dict) else None
    return isinstance(settings, dict) and isinstance(settings.get("pretrained"), dict)


def _sha256(file: str) -> str:
    with open(file, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def write_weights(file: str, model) -> str:
    """Writes ``model``'s weights to ``file`` (a ``.weights.h5``, Keras's ``save_weights``) in
    float16; returns the file's SHA-256, which `load_weights` checks (model.json records it)."""
    config = {**model.get_config(), "dtype": "float16"}
    half = type(model).from_config(config).build_variables()
    half.set_weights([value.astype("float16") for value in model.get_weights()])
    half.save_weights(file)
    return _sha256(file)


def load_weights(model, file: str, sha256: str) -> None:
    """Loads the float16 weights of ``file`` (`write_weights`) into a built ``model``, cast to
    each variable's dtype, once the file's SHA-256 is ``sha256`` (nothing is assigned before).

    Raises:
        ValueError: the file is damaged (empty, cut short, bytes changed), or holds another
            model's weights.
    """
    if _sha256(file) != sha256:
        size = os.path.getsize(file)
        raise ValueError(f"{file!r} is damaged ({size:,} bytes, not the file whose SHA-256 its "
                         "model.json records): copy the model again.")
    from bahdanau_tf import keras_checkpoints  # TensorFlow: not before a command needs it

    try:
        keras_checkpoints.load_weights_file(model, file)
    except (OSError, ValueError, KeyError) as error:
        cause = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"{file!r} holds another model's weights: {cause}") from None


__all__ = ["MODELS", "as_path", "is_shipped", "names", "path", "resolve", "is_compact", "write_weights", "load_weights"]
