"""Trained models that ship with the package, loaded by name.

Each is a model directory in this package (``model.json``, ``source_vocabulary/``,
``target_vocabulary/``) whose weights are one ``weights.npz`` of float16 arrays instead of a
checkpoint: half the size, loaded into the float32 model (`load_weights`). Wherever a model
directory is accepted, its name is too::

    echo "In the beginning God created the heavens and the earth." | \\
        bahdanau-translate --model_dir=bible-en-es-small

    model = RNNSearch.from_preset("bible-en-es-small")   # its tokenizers attached
    Translator.from_model(model).translate(["Jesus wept."]).translations

A name wins over a directory of the same name: write ``./bible-en-es-small`` for that one
(docs/translating.md, "Model names and paths": the one rule of every ``from_preset`` and
``--model_dir``). ``scripts/build_pretrained_model.py``
rebuilds a model from the embedded corpus; its ``model.json`` records how (``settings.pretrained``:
the command, the seed, the number of updates, the package version) and benchmarks/README.md its
test BLEU.
"""

import os
import zipfile
import zlib

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
    """The directory of a shipped model's name (also where the current directory holds one of
    that name: write ``./NAME`` for it); anything else (a path) as it is."""
    text = name_or_path if isinstance(name_or_path, str) else None
    return path(text) if text in MODELS else name_or_path


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
        ValueError: the file is damaged (empty, cut short, not an .npz of arrays, a failed
            checksum), or its variables (count, paths, shapes) are not the model's.
    """
    try:
        with np.load(file, allow_pickle=False) as stored:
            values = {key: stored[key] for key in sorted(stored.files)}
    except (EOFError, ValueError, TypeError, AttributeError, zipfile.BadZipFile, zlib.error):
        # empty or cut short (EOFError, BadZipFile), bytes flipped (zlib, a failed CRC), not an
        # archive (ValueError: numpy's advice to unpickle it), one .npy array (no context manager)
        size = os.path.getsize(file)
        raise ValueError(f"{file!r} is damaged ({size:,} bytes, not the whole .npz archive of "
                         "arrays that write_weights writes): copy the model again.") from None
    if len(values) != len(model.weights):
        raise ValueError(f"{file!r} holds {len(values)} arrays, the model has "
                         f"{len(model.weights)} variables: it is another model's.")
    for (key, value), variable in zip(values.items(), model.weights):
        if key.split(":", 1)[-1] != variable.path or tuple(value.shape) != tuple(variable.shape):
            raise ValueError(f"{file!r} holds {key} {tuple(value.shape)} where the model has "
                             f"{variable.path} {tuple(variable.shape)}.")
        variable.assign(value.astype(variable.dtype))


__all__ = ["MODELS", "names", "path", "resolve", "is_compact", "write_weights", "load_weights"]
