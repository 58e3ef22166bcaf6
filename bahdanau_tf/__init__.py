"""bahdanau_tf: RNNsearch (Bahdanau, Cho & Bengio, ICLR 2015) in TensorFlow 2 / Keras 3.

Example:

    from bahdanau_tf import RNNSearch
    model = RNNSearch.from_preset("small", source_vocabulary_size=8000,
                                  target_vocabulary_size=8000)

The names below are imported on first use (PEP 562), so that ``import bahdanau_tf`` does not
import TensorFlow: the command lines (`bahdanau_tf.cli`) set TensorFlow's log levels before it
loads. The network (`bahdanau_tf.models`: the layers, cells and models) needs Keras alone, so
``from bahdanau_tf import RNNSearch`` works on every Keras backend, TensorFlow installed or not.
Keras's registry of the package's layers and models (what
``keras.saving.load_model("model.keras")`` needs) is filled as soon as Keras is imported, and
that of its losses once TensorFlow is too, by whoever imports them first.
"""

import importlib
import importlib.abc
import importlib.metadata
import importlib.util
import sys

try:  # the one definition is pyproject.toml's; the installed distribution carries it
    __version__ = importlib.metadata.version("bahdanau_tf")
except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"

# public name -> the module that defines it
_EXPORTS = {
    **dict.fromkeys(["AttentionGRUCell", "BahdanauAttention", "BidirectionalEncoder",
                     "ConditionalGRUCell", "MaxoutReadout"], "models.layers"),
    "CGRUAttentionCell": "models.cgru",
    **dict.fromkeys(["MaskedAccuracy", "MaskedSparseCategoricalCrossentropy"], "losses"),
    **dict.fromkeys(["RNNEncDec", "RNNSearch", "Seq2Seq", "model_from_preset"], "models"),
    **dict.fromkeys(["Trainer", "TrainingConfig"], "training"),
    "Translator": "translator",
    **dict.fromkeys(["export_saved_model", "load_exported"], "serving"),
    **dict.fromkeys(["Batching", "BeamSearch", "Execution", "LengthLimits", "beam_search",
                     "ensemble_step_fn", "greedy_search", "tile_beams"], "decoding"),
    **dict.fromkeys(["SubwordTokenizer", "WordTokenizer", "load_tokenizer", "split_words"],
                    "text"),
    **dict.fromkeys(["CorpusFiles", "ParallelCorpus", "TfdsCorpus", "load_corpus",
                     "load_parallel_files", "load_tfds", "load_tsv", "tfds_corpus"], "corpora"),
    "make_dataset": "data",
    "quiet_tensorflow": "quiet",
}
_SUBMODULES = ("alignment", "corpora", "data", "decoding", "devices", "evaluation", "losses",
               "model_directory", "models", "presets", "serving", "signatures", "special_tokens",
               "text", "training", "translator", "wordpiece")
# the modules whose classes are registered with keras.saving, and what they need imported first:
# the network Keras alone, the losses TensorFlow too
_KERAS_OBJECT_MODULES = {"models": ("keras",), "losses": ("keras", "tensorflow")}

__all__ = sorted(_EXPORTS) + list(_SUBMODULES)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


def _register_keras_objects():
    """Imports each module of `_KERAS_OBJECT_MODULES` whose prerequisites are imported; returns
    whether any is left for later."""
    left = False
    for module, needs in _KERAS_OBJECT_MODULES.items():
        if all(name in sys.modules for name in needs):
            importlib.import_module(f"{__name__}.{module}")
        else:
            left = True
    return left


class _AfterTensorFlowImport(importlib.abc.MetaPathFinder):
    """Registers the Keras objects once the outermost import of TensorFlow or Keras is done
    (either may import the other, and is usable only at the end of it): the network's after
    Keras, the losses' after TensorFlow too."""

    depth = 0

    def find_spec(self, name, path=None, target=None):
        if name not in ("tensorflow", "keras"):
            return None
        sys.meta_path.remove(self)  # find the real spec without us
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            self.depth += 1
            try:
                execute(module)
            finally:
                self.depth -= 1
            if self.depth == 0 and "keras" in sys.modules:
                try:
                    if not _register_keras_objects() and self in sys.meta_path:
                        sys.meta_path.remove(self)
                except Exception:  # noqa: BLE001 — never break someone else's import: the
                    pass  # package's own import raises the error where it is used
        spec.loader.exec_module = exec_module
        return spec


if not ("keras" in sys.modules and not _register_keras_objects()) and not any(
        isinstance(f, _AfterTensorFlowImport) for f in sys.meta_path):
    sys.meta_path.insert(0, _AfterTensorFlowImport())
