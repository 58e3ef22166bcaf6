"""Trained models that ship with the package, loaded by name.

Each is a model directory in this package (``model.json``, ``source_vocabulary/``,
``target_vocabulary/``) whose weights are one ``weights.npz`` of float16 arrays instead of a
checkpoint: half the size, loaded into the float32 model (`load_weights`). Wherever a model
directory is accepted, its name is too::

    echo "In the beginning God created the heavens and the earth." | \\
        bahdanau-translate --model_dir=bible-en-es-small

    model = RNNSearch.from_preset("bible-en-es-small")   # its tokenizers attached
    Translator.from_model(model).translate(["Jesus wept."]).translations

A path that exists wins over a name (``./bible-en-es-small``). ``scripts/build_pretrained_model.py``
rebuilds a model from the embedded corpus; its ``model.json`` records how (``settings.pretrained``:
the command, the seed, the number of updates, the package version) and benchmarks/README.md its
test BLEU.
"""

import os

import numpy as np

DIRECTORY = os.path.dirname(os.path.abspath(__file__))
WEIGHTS = "weights.npz"
#: name -> what it is
MODELS = {
    "bible-en-es-small": "the small RNNsearch (3.7M parameters) trained on the embedded Bible "
                         "corpus, English -> Spanish, 2,000 updates",
}


def names() -> list:
    """The names of the shipped models."""
    return sorted(MODELS)


def path(name: str) -> str:
    """The package directory of a shipped model's name (whether or not it is built)."""
    return os.path.join(DIRECTORY, name)


def resolve(name_or_path):
    """The directory of a shipped model's name; anything else (a path) as it is."""
    text = os.fspath(name_or_path) if isinstance(name_or_path, (str, os.PathLike)) else None
    if text in MODELS and not os.path.exists(text):
        return path(text)
    return name_or_path


def is_compact(directory) -> bool:
    """Whether ``directory`` keeps its weights in a `WEIGHTS` file (a shipped model)."""
    return os.path.isfile(os.path.join(os.fspath(directory), WEIGHTS))


def write_weights(file: str, model) -> None:
    """Writes ``model``'s weights to ``file`` (.npz) as float16, keyed ``NNN:variable path``."""
    arrays = {f"{i:03d}:{variable.path}": np.asarray(variable.numpy(), np.float16)
              for i, variable in enumerate(model.weights)}
    np.savez_compressed(file, **arrays)


def load_weights(model, file: str) -> None:
    """Assigns the float16 weights of ``file`` (`write_weights`) to a built ``model``, cast to
    each variable's dtype.

    Raises:
        ValueError: the file's variables (count, paths, shapes) are not the model's.
    """
    with np.load(file) as stored:
        keys = sorted(stored.files)
        if len(keys) != len(model.weights):
            raise ValueError(f"{file!r} holds {len(keys)} arrays, the model has "
                             f"{len(model.weights)} variables: it is another model's.")
        for key, variable in zip(keys, model.weights):
            value = stored[key]
            if key.split(":", 1)[1] != variable.path or tuple(value.shape) != tuple(variable.shape):
                raise ValueError(f"{file!r} holds {key} {tuple(value.shape)} where the model has "
                                 f"{variable.path} {tuple(variable.shape)}.")
            variable.assign(value.astype(variable.dtype))


__all__ = ["MODELS", "names", "path", "resolve", "is_compact", "write_weights", "load_weights"]
