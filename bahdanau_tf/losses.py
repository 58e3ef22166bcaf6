"""The training objective and its metric, with padding masked (DESIGN §2).

The paper maximises the mean log-likelihood of the reference translations; per batch we minimise
the mean negative log-likelihood per real target token (padding, id 0, excluded). Both are
computed in float32 whatever the model's compute dtype.
"""

import keras
import tensorflow as tf

from bahdanau_tf.special_tokens import PAD_ID


def token_nll(target_ids: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """Per-token negative log-likelihood, 0 at padding: float32 (batch, target_len)."""
    target_ids = tf.cast(target_ids, "int32")
    logits = tf.cast(logits, "float32")
    # on rank-2 inputs the op needs no runtime shape assertion (which XLA drops with a warning)
    nll = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.reshape(tf.maximum(target_ids, 0), [-1]), logits=tf.reshape(logits, [-1, tf.shape(logits)[-1]])
    )
    nll = tf.reshape(nll, tf.shape(target_ids))
    return nll * tf.cast(tf.not_equal(target_ids, PAD_ID), "float32")


def masked_nll(target_ids: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """Mean negative log-likelihood per real target token (a float32 scalar)."""
    tokens = tf.reduce_sum(tf.cast(tf.not_equal(target_ids, PAD_ID), "float32"))
    return tf.reduce_sum(token_nll(target_ids, logits)) / tf.maximum(tokens, 1.0)


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy from logits averaged over the real (non-padding) target tokens of a batch.

    ``sample_weight`` (batch,) weights sentences: each token counts with its sentence's weight.

    Example:

    >>> loss = MaskedSparseCategoricalCrossentropy()
    >>> float(loss(tf.constant([[5, 0]]), tf.zeros([1, 2, 8])))  # log(8), padding ignored
    2.0794...
    """

    def __init__(self, name: str = "masked_sparse_categorical_crossentropy", **kwargs) -> None:
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        # per-token NLL scaled by 1 / (real tokens in the batch): the "sum" reduction gives the mean
        mask = tf.cast(tf.not_equal(tf.cast(y_true, "int32"), PAD_ID), "float32")
        return token_nll(y_true, y_pred) / tf.maximum(tf.reduce_sum(mask), 1.0)


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class MaskedAccuracy(keras.metrics.Mean):
    """Token accuracy of argmax(logits) over the real (non-padding) target tokens."""

    def __init__(self, name: str = "masked_accuracy", **kwargs) -> None:
        super().__init__(name=name, **kwargs)

    def update_state(self, y_true: tf.Tensor, y_pred: tf.Tensor, sample_weight: tf.Tensor | None = None) -> None:
        y_true = tf.cast(y_true, "int32")
        correct = tf.cast(tf.equal(tf.argmax(y_pred, axis=-1, output_type="int32"), y_true), "float32")
        weight = tf.cast(tf.not_equal(y_true, PAD_ID), "float32")
        if sample_weight is not None:
            weight *= tf.cast(tf.reshape(sample_weight, [-1, 1]), "float32")
        return super().update_state(correct, sample_weight=weight)

    def get_config(self) -> dict:
        return {"name": self.name, "dtype": self.dtype}


__all__ = ["MaskedSparseCategoricalCrossentropy", "MaskedAccuracy", "masked_nll", "token_nll"]
