"""The base of the three models: presets, config, tokenizers, saving, the step interface.

`TranslationModel` is what `bahdanau_tf.models`' `RNNSearch`, `RNNEncDec` and `Seq2Seq` share:
the registry's presets (`from_preset`), ``get_config``, the tokenizers a model keeps
(`attach_tokenizers`, saved inside its ``.keras`` file through Keras's ``save_assets`` /
``load_assets`` hooks), `save_to_preset`, and the decoding half of the step contract that
`bahdanau_tf.decoding.StepModel` spells out (``decoding_memory``, ``decoding_state``).

Who may import whom: this module imports only Keras at import time, so the network runs where
TensorFlow is not installed. Reading and writing a trained model is the loader's job, as in
keras-hub: `from_preset` (for a trained model), `save_to_preset` and Keras's asset hooks hand a
path and the class to `bahdanau_tf.model_directory` (TensorFlow, tensorflow-text), imported when
one of them is called; it never imports the network. Translating is the task's:
``Translator.from_model(model).translate(...)`` (`bahdanau_tf.translator`), which is handed the
model. A registry name gives an untrained architecture::

    model = RNNSearch.from_preset("small", source_vocabulary_size=s.vocabulary_size, ...)
    model.compile(...); model.fit(make_dataset(corpus, s, t), epochs=2)
    model.attach_tokenizers(s, t)
    Translator.from_model(model).translate(["But seek God's Kingdom, and all these things will be added to you."])
    model.save("rnnsearch.keras")       # keras.saving.load_model(...) has its tokenizers
    model.save_to_preset("rnnsearch")   # bahdanau-translate --model_dir=rnnsearch
"""

import logging
import sys
import types
import warnings
from typing import Any, Optional, Sequence

import keras
from keras import ops

import bahdanau_tf.models.regularization as regularization
from bahdanau_tf.models.tensor_ops import Tensor
from bahdanau_tf.presets import PRESETS, get_preset, is_model_path

#: the sizes every model checks to be positive ints
SIZES = ("source_vocabulary_size", "target_vocabulary_size", "embedding_dim", "hidden_dim")


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
    #: config keys the constructor no longer takes, each with the value that meant the model
    #: without it (``from_config`` drops them; a saved config that holds them is the same model)
    retired_arguments: dict = {}

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
        """Validates and keeps the dropout rates (`bahdanau_tf.models.regularization`) as attributes
        returned by `get_config`; ``self.dropouts`` draws the training pass's masks, from a
        seed generator the model owns only when a rate is above 0."""
        rates = regularization.check_rates(**rates)
        for name, value in rates.items():
            setattr(self, name, value)
        self._config_names += list(rates)
        if any(rates.values()):
            self.seed_generator = keras.random.SeedGenerator(name="dropout_seed")
        self.dropouts = regularization.Dropouts(getattr(self, "seed_generator", None), **rates)

    def output_features(self, inputs: tuple, training: bool = False) -> Tensor:
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
    def from_preset(cls, name: str, load_weights: bool = True, **overrides) -> "TranslationModel":
        """A registry preset's architecture, or a trained model from a preset directory or file.

        Args:
            name: str, a preset of this class: its full name (``"rnnsearch-small"``) or the
                name without the class prefix (``"small"``): an untrained model; or the path
                of a model directory (``save_to_preset``, ``bahdanau-train --output_dir``) or
                of a ``.keras`` file: the trained model with its tokenizers attached
                (`bahdanau_tf.model_directory.load_model_directory`, handed this class); or a
                shipped model's name (``"bible-en-es-small"``). A name wins over a directory
                of the same name (write ``./small``): `bahdanau_tf.presets.is_model_path`'s rule.
            load_weights: bool, as keras-hub's: False gives a trained model's architecture
                with fresh, untrained weights (and its tokenizers); an architecture preset is
                untrained either way.
            **overrides: constructor arguments, e.g. ``source_vocabulary_size=8000``; for a
                path only ``dtype`` (e.g. ``"float32"`` for a model trained in mixed precision).

        Raises:
            ValueError: an unknown name, a path holding another class, or overrides of a
                trained architecture.
            FileNotFoundError: a path that does not exist ("No such model directory").
        """
        if f"{cls.preset_prefix}-{name}" not in PRESETS and is_model_path(name):
            from bahdanau_tf import model_directory  # noqa: PLC0415 — the loader, TensorFlow's: only for a trained model

            return model_directory.load_trained(name, overrides, model_class=cls, load_weights=load_weights)
        preset = PRESETS.get(name)
        if preset is None or preset.model_class is not cls:
            preset = PRESETS.get(f"{cls.preset_prefix}-{name}")
        if preset is None or preset.model_class is not cls:
            other = PRESETS.get(name)
            hint = f" It is a preset of {other.model_class.__name__}." if other is not None else ""
            raise ValueError(f"Unknown preset {name!r} for {cls.__name__}; choose one of "
                             f"{cls.preset_names()}.{hint}")
        return _untrained(preset, overrides)

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
        tf = sys.modules.get("tensorflow")  # a dataset exists only where TensorFlow was imported
        if tf is not None and isinstance(x, tf.data.Dataset) and "shuffle" not in kwargs and len(args) < 8:
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

        0.2's way to translate from Keras, kept one release with a `FutureWarning` (the category
        Python shows a user's code); it goes in 0.4. Translating is the task's job, not the
        network's: a `bahdanau_tf.translator.Translator` is handed the model. This alias
        imports the translator when called (the one import of the task by the network, which
        the translator never imports back); its Translator is cached on the model until
        `attach_tokenizers` is called again.

        Returns:
            str for a str, list of str for a list (lists of ``nbest`` str when ``nbest > 1``).
        """
        warnings.warn("model.translate(...) is deprecated and goes in bahdanau_tf 0.4: use "
                      "Translator.from_model(model).translate(...).translations",
                      FutureWarning, stacklevel=2)
        if self._attached.translator is None:
            from bahdanau_tf.translator import Translator  # noqa: PLC0415 — the deprecated alias only

            self._attached.translator = Translator.from_model(self)
        single = isinstance(sentences, (str, bytes))
        output = self._attached.translator.translate(
            [sentences] if single else list(sentences), beam_size=beam_size, nbest=nbest,
            forbid_unknown=forbid_unknown, batch_size=batch_size)
        return output.translations[0] if single else output.translations

    def save_assets(self, dir_path: str) -> None:
        """Keras's hook (``model.save("m.keras")``): writes the attached tokenizers."""
        if self.source_tokenizer is not None:
            from bahdanau_tf import model_directory  # noqa: PLC0415 — the loader, TensorFlow's

            model_directory.save_vocabularies(dir_path, self.source_tokenizer, self.target_tokenizer)

    def load_assets(self, dir_path: str) -> None:
        """Keras's hook (``keras.saving.load_model``): attaches the saved tokenizers, if any."""
        from bahdanau_tf import model_directory  # noqa: PLC0415 — the loader, TensorFlow's

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
        from bahdanau_tf import model_directory  # noqa: PLC0415 — the loader, TensorFlow's

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

    def attention_weights(self, inputs: tuple) -> Tensor:
        """Teacher-forced attention (batch, target_len, source_len); models with attention only."""
        raise NotImplementedError(f"{type(self).__name__} has no attention.")


def _untrained(preset, overrides):
    """A registry preset's model: an architecture, its weights fresh; the log says so."""
    logging.getLogger("bahdanau_tf").info(
        "%s: an untrained architecture (fresh weights); a trained model is loaded from a path or "
        "a shipped model's name, e.g. from_preset(%r)", preset.name, "bible-en-es-small")
    return preset.model_class(**{**preset.model, **overrides})


def model_from_preset(name: str, load_weights: bool = True, **overrides) -> TranslationModel:
    """The model of a preset name, whichever class owns it; or a trained model from a path.

    ``name`` may also be a preset directory, a ``.keras`` file or a shipped model's name (see
    `RNNSearch.from_preset`): the trained model, its tokenizers attached (its architecture
    alone with ``load_weights=False``); ``overrides`` may then only set ``dtype``.

    Example:

    >>> model = model_from_preset("rnnencdec-30", source_vocabulary_size=100,
    ...                           target_vocabulary_size=100)
    >>> type(model).__name__
    'RNNEncDec'
    """
    if is_model_path(name):
        from bahdanau_tf import model_directory  # noqa: PLC0415 — the loader, TensorFlow's: only for a trained model

        return model_directory.load_trained(name, overrides, load_weights=load_weights)
    return _untrained(get_preset(name), overrides)


def model_from_config(class_name: str, config: dict) -> TranslationModel:
    """Rebuilds a model from ``type(model).__name__`` and ``model.get_config()``."""
    cls = keras.saving.get_registered_object(f"bahdanau_tf>{class_name}")
    if not (isinstance(cls, type) and issubclass(cls, TranslationModel)):
        raise ValueError(f"Unknown model class {class_name!r}; expected one of "
                         f"{sorted(c.__name__ for c in TranslationModel.__subclasses__())}.")
    return cls.from_config(config)


def check_tying(tie_embeddings, maxout_dim, embedding_dim):
    """``tie_embeddings`` validated: W_o (l, |V|) can be E^T (|V|, m)^T only where l = m."""
    if not isinstance(tie_embeddings, bool):
        raise ValueError(f"`tie_embeddings` must be True or False, got {tie_embeddings!r}.")
    if tie_embeddings and int(maxout_dim) != int(embedding_dim):
        raise ValueError(f"`tie_embeddings` needs `maxout_dim` == `embedding_dim`, got {maxout_dim!r} "
                         f"and {embedding_dim!r}.")
    return tie_embeddings


def _check_positive(**sizes):
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}.")


__all__ = ["SIZES", "TranslationModel", "check_tying", "model_from_config", "model_from_preset"]
