"""The base of the three models: presets, config, tokenizers, saving, the step interface.

`TranslationModel` is what `bahdanau_tf.models`' `RNNSearch`, `RNNEncDec` and `Seq2Seq` share:
the registry's presets (`from_preset`), ``get_config``, the tokenizers a model keeps
(`attach_tokenizers`, saved inside its ``.keras`` file through Keras's ``save_assets`` /
``load_assets`` hooks), `save_to_preset`, and the decoding half of the step contract that
`bahdanau_tf.decoding.StepModel` spells out (``decoding_memory``, ``decoding_state``).

Who may import whom: loading from disk is not the network's job, so `from_preset` and
`save_to_preset` hand a path and the class to `bahdanau_tf.model_directory`, below this module;
translating is the task's, above it: ``Translator.from_model(model).translate(...)``
(`bahdanau_tf.translator`), which is handed the model. A registry name gives an untrained
architecture::

    model = RNNSearch.from_preset("small", source_vocabulary_size=s.vocabulary_size, ...)
    model.compile(...); model.fit(make_dataset(corpus, s, t), epochs=2)
    model.attach_tokenizers(s, t)
    Translator.from_model(model).translate(["But seek God's Kingdom, and all these things will be added to you."])
    model.save("rnnsearch.keras")       # keras.saving.load_model(...) has its tokenizers
    model.save_to_preset("rnnsearch")   # bahdanau-translate --model_dir=rnnsearch
"""

import importlib
import os
import types
import warnings
from typing import Any, Optional, Sequence

import keras
import tensorflow as tf
from keras import ops

from bahdanau_tf import model_directory, pretrained
from bahdanau_tf import regularization
from bahdanau_tf.presets import ALIASES, PRESETS


class TranslationModel(keras.Model):
    """The base of the three models: presets, config, tokenizers, the step interface.

    A subclass implements ``build``, ``encode``, ``initial_state``, ``decode_step`` and
    ``call`` (`bahdanau_tf.models`' docstring); everything here is shared. Loading from disk is
    not the network's job: `from_preset` hands a path and the class to
    `bahdanau_tf.model_directory`.
    """

    #: the prefix of this class's preset names (``"rnnsearch"`` -> ``rnnsearch-small``)
    preset_prefix = ""
    #: whether ``decode_step`` returns attention weights (alignments, the ``align`` signature)
    has_attention = False

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # what the model holds besides its weights, in a plain namespace on purpose: neither
        # Keras nor tf.train tracks it, so checkpoints, weights and SavedModels stay what they
        # were (the tokenizers travel as Keras assets)
        self._attached = types.SimpleNamespace(source_tokenizer=None, target_tokenizer=None,
                                               translator=None)

    def _store_config(self, sizes, **values):
        """Validates the positive ``sizes`` and keeps every constructor argument as an attribute;
        `get_config` returns exactly these."""
        _check_positive(**{name: values[name] for name in sizes})
        for name, value in values.items():
            setattr(self, name, value)
        self._config_names = list(values)

    def _store_dropouts(self, **rates):
        """Validates and keeps the dropout rates (`bahdanau_tf.regularization`) as attributes
        returned by `get_config`; ``self.dropouts`` draws the training pass's masks, from a
        seed generator the model owns only when a rate is above 0."""
        rates = regularization.check_rates(**rates)
        for name, value in rates.items():
            setattr(self, name, value)
        self._config_names += list(rates)
        if any(rates.values()):
            self.seed_generator = keras.random.SeedGenerator(name="dropout_seed")
        self.dropouts = regularization.Dropouts(getattr(self, "seed_generator", None), **rates)

    def output_features(self, inputs: tuple, training: bool = False) -> tf.Tensor:
        """What the vocabulary projection reads, teacher-forced: ``model(inputs)`` equals
        ``features @ kernel + bias`` with ``(kernel, bias) = model.output_projection()``.

        Returns:
            (batch, target_len, features) in the compute dtype. A sampled softmax
            (`bahdanau_tf.losses.sampled_token_nll`) projects them on a few vocabulary rows only.
        """
        raise NotImplementedError

    def output_projection(self) -> tuple:
        """``(kernel, bias)`` of the vocabulary projection: (features, |V|) and (|V|,) variables."""
        raise NotImplementedError

    def build_variables(self) -> "TranslationModel":
        """Creates every variable by calling the model once on a two-token batch; returns self.

        What a checkpoint restore or a `Translator` (which tracks the variables) needs first.
        """
        dummy = ops.ones((1, 2), "int32")
        self((dummy, dummy))
        return self

    @classmethod
    def preset_names(cls) -> list:
        """The registry's preset names of this class (full names, e.g. ``rnnsearch-small``)."""
        return sorted(name for name, preset in PRESETS.items() if preset.class_name == cls.__name__)

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "TranslationModel":
        """A registry preset's architecture, or a trained model from a preset directory or file.

        Args:
            name: str, a preset of this class: its full name (``"rnnsearch-small"``) or the
                name without the class prefix (``"small"``): an untrained model; or the path
                of a model directory (``save_to_preset``, ``bahdanau-train --output_dir``) or
                of a ``.keras`` file: the trained model with its tokenizers attached
                (`bahdanau_tf.model_directory.load_model_directory`, handed this class); or a
                shipped model's name (``"bible-en-es-small"``). A name wins over a directory
                of the same name (write ``./small``): `is_model_path`'s rule.
            **overrides: constructor arguments, e.g. ``source_vocabulary_size=8000``; for a
                path only ``dtype`` (e.g. ``"float32"`` for a model trained in mixed precision).

        Raises:
            ValueError: an unknown name, a path holding another class, or overrides of a
                trained architecture.
            FileNotFoundError: a path that does not exist ("No such model directory").
        """
        if f"{cls.preset_prefix}-{name}" not in PRESETS and is_model_path(name):
            return load_trained(name, overrides, model_class=cls)
        preset = PRESETS.get(name)
        if preset is None or preset.model_class is not cls:
            preset = PRESETS.get(f"{cls.preset_prefix}-{name}")
        if preset is None or preset.model_class is not cls:
            other = PRESETS.get(name)
            hint = f" It is a preset of {other.model_class.__name__}." if other is not None else ""
            raise ValueError(f"Unknown preset {name!r} for {cls.__name__}; choose one of "
                             f"{cls.preset_names()}.{hint}")
        return cls(**{**preset.model, **overrides})

    def get_config(self) -> dict:
        return {**super().get_config(), **{name: getattr(self, name) for name in self._config_names}}

    @classmethod
    def from_config(cls, config: dict) -> "TranslationModel":
        return cls(**config)

    # === Strings in, strings out ===

    def fit(self, x=None, *args, **kwargs):
        """Keras's ``fit``; a ``tf.data.Dataset`` is taken as batched (``make_dataset``
        shuffles), so Keras's default ``shuffle=True``, which it ignores for a dataset with a
        warning, is not passed for one."""
        if isinstance(x, tf.data.Dataset) and "shuffle" not in kwargs and len(args) < 8:
            kwargs["shuffle"] = False  # the 9th positional argument of Keras's fit
        return super().fit(x, *args, **kwargs)

    def attach_tokenizers(self, source_tokenizer: Any, target_tokenizer: Any) -> "TranslationModel":
        """Keeps the tokenizers the model was trained with: for a `Translator`, saving and presets.

        Args:
            source_tokenizer: a `bahdanau_tf.text` tokenizer of ``source_vocabulary_size`` ids.
            target_tokenizer: one of ``target_vocabulary_size`` ids.

        Returns:
            the model itself.

        Raises:
            ValueError: a vocabulary size that is not the model's.
        """
        for side, tokenizer in (("source", source_tokenizer), ("target", target_tokenizer)):
            expected = getattr(self, f"{side}_vocabulary_size")
            size = getattr(tokenizer, "vocabulary_size", None)
            if size != expected:
                raise ValueError(f"The {side} tokenizer has {size} ids but the model's "
                                 f"{side}_vocabulary_size is {expected}.")
        self._attached.source_tokenizer = source_tokenizer
        self._attached.target_tokenizer = target_tokenizer
        self._attached.translator = None
        return self

    @property
    def source_tokenizer(self) -> Any:
        """The attached source tokenizer, or None."""
        return self._attached.source_tokenizer

    @property
    def target_tokenizer(self) -> Any:
        """The attached target tokenizer, or None."""
        return self._attached.target_tokenizer

    def translate(self, sentences: "str | Sequence[str]", beam_size: Optional[int] = None,
                  nbest: int = 1, forbid_unknown: bool = False, batch_size: int = 64) -> str | list:
        """Deprecated: ``Translator.from_model(model).translate(...).translations``.

        0.2's way to translate from Keras, kept one release with a `DeprecationWarning`; it goes
        in 0.4. Translating is the task's job, not the network's: a
        `bahdanau_tf.translator.Translator` is handed the model. This alias reaches the
        translator by name at call time, so that this module never imports it; its Translator
        is cached on the model until `attach_tokenizers` is called again.

        Returns:
            str for a str, list of str for a list (lists of ``nbest`` str when ``nbest > 1``).
        """
        warnings.warn("model.translate(...) is deprecated and goes in bahdanau_tf 0.4: use "
                      "Translator.from_model(model).translate(...).translations",
                      DeprecationWarning, stacklevel=2)
        if self._attached.translator is None:
            translator = importlib.import_module("bahdanau_tf.translator")
            self._attached.translator = translator.Translator.from_model(self)
        single = isinstance(sentences, (str, bytes))
        output = self._attached.translator.translate(
            [sentences] if single else list(sentences), beam_size=beam_size, nbest=nbest,
            forbid_unknown=forbid_unknown, batch_size=batch_size)
        return output.translations[0] if single else output.translations

    def save_assets(self, dir_path: str) -> None:
        """Keras's hook (``model.save("m.keras")``): writes the attached tokenizers."""
        if self.source_tokenizer is not None:
            model_directory.save_vocabularies(dir_path, self.source_tokenizer, self.target_tokenizer)

    def load_assets(self, dir_path: str) -> None:
        """Keras's hook (``keras.saving.load_model``): attaches the saved tokenizers, if any."""
        tokenizers = model_directory.load_asset_vocabularies(dir_path)
        if tokenizers is not None:
            self.attach_tokenizers(*tokenizers)

    def save_to_preset(self, preset_dir: str, overwrite: bool = True) -> str:
        """Writes a preset directory: ``model.json``, both vocabularies and ``model.weights.h5``.

        The layout of a ``bahdanau-train`` output directory, its weights in Keras's own weights
        file (``model.save_weights``: any backend reads it) instead of checkpoints, written by
        `bahdanau_tf.model_directory.save_model_directory`, so `from_preset`,
        `model_from_preset`, `Translator.from_directory` and every command line's
        ``--model_dir`` read it. Like Keras's ``model.save``, it replaces what an earlier
        ``save_to_preset`` wrote there (so a script re-runs); it never writes into a directory
        that holds anything else, such as a ``bahdanau-train`` run.

        Args:
            preset_dir: str, a new or empty directory, or one an earlier save_to_preset wrote.
            overwrite: bool, False refuses a directory that already holds a saved model.

        Returns:
            str, ``preset_dir``.

        Raises:
            ValueError: no tokenizers attached.
            FileExistsError: ``preset_dir`` holds more than a saved model, or a saved model
                and ``overwrite`` is False.
        """
        if self.source_tokenizer is None:
            raise ValueError("save_to_preset needs the model's tokenizers: call "
                             "model.attach_tokenizers(source_tokenizer, target_tokenizer) first.")
        return model_directory.save_model_directory(preset_dir, self, self.source_tokenizer,
                                                    self.target_tokenizer, overwrite=overwrite)

    def initial_state(self, memory: dict) -> Any:
        raise NotImplementedError

    def decoding_memory(self, memory: dict) -> dict:
        """`encode`'s memory as a search hands it to every `decode_step`: here as it is;
        a subclass computes once per sentence what no step changes (`RNNSearch`)."""
        return memory

    def decoding_state(self, state: Any) -> Any:
        """`initial_state`'s state as a search carries it from step to step: here as it is
        (`RNNSearch` carries its next attention query with it)."""
        return state

    def attention_weights(self, inputs: tuple) -> tf.Tensor:
        """Teacher-forced attention (batch, target_len, source_len); models with attention only."""
        raise NotImplementedError(f"{type(self).__name__} has no attention.")


def is_model_path(name) -> bool:
    """True for a trained model to load, False for an architecture preset's name: the one rule
    of every ``from_preset`` (docs/translating.md, "Model names and paths").

    A name is looked up first: an architecture preset's (or its alias) is False, a shipped
    model's (`bahdanau_tf.pretrained`) True, whatever the current directory holds. Anything
    else is a path (True) when it exists, is written as one (a ``/``, a leading ``.`` or
    ``~``) or names a ``.keras`` file; a bare word that is none of these is False (an unknown
    preset, named as such).
    """
    name = os.fspath(name)
    if name in PRESETS or name in ALIASES:
        return False
    written_as_path = (os.sep in name or (os.altsep and os.altsep in name)
                       or name.startswith((".", "~")) or name.endswith(".keras"))
    return name in pretrained.MODELS or written_as_path or os.path.exists(name)


def load_trained(path, overrides, model_class=None):
    """The model of a preset directory or ``.keras`` file, its tokenizers attached."""
    overrides = dict(overrides)
    dtype = overrides.pop("dtype", None)
    if overrides:
        raise ValueError(f"{os.fspath(path)!r} holds a trained model: its architecture cannot "
                         f"be changed (got {sorted(overrides)}); only dtype can be given.")
    return model_directory.load_model_directory(os.fspath(path), dtype=dtype,
                                                model_class=model_class).model


def _check_positive(**sizes):
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}.")


__all__ = ["TranslationModel", "is_model_path", "load_trained"]
