"""`RNNSearchAligner`: an alignment head on a trained `RNNSearch`, as a keras-hub task wraps its
backbone.

The translation model (the backbone) stays what it was; the task adds an
`alignment_head.AlignmentHead`, trained after it with the backbone's weights frozen
(`bahdanau_tf.alignment.train_alignment_head`, ``bahdanau-alignment-head``). The task
translates as its backbone does: it forwards the step contract and teacher forcing
(`bahdanau_tf.models`' docstring) to the backbone, so a `Translator`, the export and a model
directory take it as they take any model; `alignment_weights` is the head's.
"""

from typing import Any

import keras

from bahdanau_tf.models.alignment_head import AlignmentHead
from bahdanau_tf.models.base import TranslationModel
from bahdanau_tf.models.tensor_ops import Tensor


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class RNNSearchAligner(TranslationModel):
    """A trained `RNNSearch` (the backbone) with an alignment head: P(source j | target token i).

    `alignment_weights` is the head's (`alignment_head.AlignmentHead`: an attention over the
    annotations whose query has read the target word it aligns); everything else, translation
    included, is the backbone's, which the head never changes (its inputs are stop-gradient).
    ``get_config`` holds the backbone as a nested Keras object, as keras-hub's ``Task`` does.

    Args:
        backbone: an `RNNSearch` (or anything with its ``alignment_head_inputs``, ``score``,
            ``hidden_dim`` and ``embedding_dim``), or its serialized config.
        units: int, the head's alignment model's hidden size.
        context: int, the units of each direction of the head's GRU over the target sentence
            (0: none).

    Example:

    >>> backbone = RNNSearch.from_preset("tiny", source_vocabulary_size=50, target_vocabulary_size=60)
    >>> aligner = RNNSearchAligner(backbone, units=8)
    >>> tuple(aligner.alignment_weights((np.array([[5, 6, 7, 2]]), np.array([[1, 8, 9]]))).shape)
    (1, 3, 4)
    """

    has_attention = True

    def __init__(self, backbone: Any, units: int = 128, context: int = 0, **kwargs) -> None:
        if isinstance(backbone, dict):
            backbone = keras.saving.deserialize_keras_object(backbone)
        if not hasattr(backbone, "alignment_head_inputs"):
            raise ValueError(f"an alignment head needs an RNNSearch backbone, got {type(backbone).__name__}.")
        for name, value, least in (("units", units, 1), ("context", context, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"`{name}` must be an int >= {least}, got {value!r}.")
        kwargs.pop("dtype", None)  # the backbone's (`from_config` hands a new one to the backbone)
        super().__init__(dtype=backbone.dtype_policy, **kwargs)
        # === Config ===
        self.units, self.context = units, context
        # === Layers ===
        self.backbone = backbone
        self.head = AlignmentHead(units, backbone.score, context, dtype=self.dtype_policy, name="alignment_head")

    def build(self, input_shape: tuple | None = None) -> None:
        if not self.backbone.built:
            self.backbone.build(input_shape)
        backbone = self.backbone
        self.head.build((None, None, 2 * backbone.hidden_dim), (None, None), (None, None, backbone.hidden_dim),
                        (None, None, backbone.embedding_dim))
        self.built = True

    def alignment_weights(self, inputs: tuple, target_out: Tensor | None = None) -> Tensor:
        """The head's P(source j | target token i): float32 (batch, target_len, source_len).

        Args:
            inputs: ``(source_ids, target_input_ids)``, as the backbone's call takes them.
            target_out: optional int (batch, target_len), the target tokens the rows align
                (None: those of ``target_input_ids`` after ``[START]``, then ``[END]``;
                `RNNSearch.alignment_head_inputs`).
        """
        if not self.built:  # the head's weights are made by `build`, not by a call of the task
            self.build()
        return self.head(*self.backbone.alignment_head_inputs(inputs, target_out))

    # === The backbone's translation, forwarded ===

    @property
    def source_vocabulary_size(self) -> int:
        return self.backbone.source_vocabulary_size

    @property
    def target_vocabulary_size(self) -> int:
        return self.backbone.target_vocabulary_size

    def call(self, inputs: tuple, training: bool = False) -> Tensor:
        return self.backbone(inputs, training=training)

    def encode(self, source_ids: Tensor, training: bool = False) -> dict:
        return self.backbone.encode(source_ids, training=training)

    def initial_state(self, memory: dict) -> Any:
        return self.backbone.initial_state(memory)

    def decoding_memory(self, memory: dict) -> dict:
        return self.backbone.decoding_memory(memory)

    def decoding_state(self, state: Any) -> Any:
        return self.backbone.decoding_state(state)

    def decode_step(self, previous_ids: Tensor, state: Any, memory: dict, projection: tuple | None = None) -> tuple:
        return self.backbone.decode_step(previous_ids, state, memory, projection=projection)

    def output_features(self, inputs: tuple, training: bool = False) -> Tensor:
        return self.backbone.output_features(inputs, training=training)

    def output_projection(self) -> tuple:
        return self.backbone.output_projection()

    def attention_weights(self, inputs: tuple) -> Tensor:
        return self.backbone.attention_weights(inputs)

    def logits_and_attention(self, inputs: tuple, training: bool = False) -> tuple:
        return self.backbone.logits_and_attention(inputs, training=training)

    def alignment_head_inputs(self, inputs: tuple, target_out: Tensor | None = None) -> tuple:
        return self.backbone.alignment_head_inputs(inputs, target_out)

    # === The tokenizers are the backbone's (saved with it: Keras's asset hooks run on it) ===

    def attach_tokenizers(self, source_tokenizer: Any, target_tokenizer: Any) -> "RNNSearchAligner":
        self.backbone.attach_tokenizers(source_tokenizer, target_tokenizer)
        self._attached.translator = None
        return self

    @property
    def source_tokenizer(self) -> Any:
        return self.backbone.source_tokenizer

    @property
    def target_tokenizer(self) -> Any:
        return self.backbone.target_tokenizer

    def save_assets(self, dir_path: str) -> None:
        """Nothing of its own: the backbone saves the tokenizers."""

    def load_assets(self, dir_path: str) -> None:
        """Nothing of its own: the backbone loads the tokenizers."""

    # === Config ===

    def get_config(self) -> dict:
        config = keras.Model.get_config(self)
        return {**config, "backbone": keras.saving.serialize_keras_object(self.backbone),
                "units": self.units, "context": self.context}

    @classmethod
    def from_config(cls, config: dict) -> "RNNSearchAligner":
        """The task of `get_config`; a ``dtype`` in ``config`` is the backbone's (a model
        directory loaded in another precision)."""
        config = dict(config)
        backbone, dtype = config.pop("backbone"), config.pop("dtype", None)
        if isinstance(backbone, dict) and dtype is not None:
            backbone = {**backbone, "config": {**backbone["config"], "dtype": dtype}}
        return cls(keras.saving.deserialize_keras_object(backbone), **config)


__all__ = ["RNNSearchAligner"]
