"""The training objective and its metric, with padding masked (DESIGN §2).

The paper maximises the mean log-likelihood of the reference translations; per batch we minimise
the mean negative log-likelihood per real target token (padding, id 0, excluded). Both are
computed in float32 whatever the model's compute dtype.

`token_nll`, `masked_nll`, `MaskedSparseCategoricalCrossentropy` and `MaskedAccuracy` are
``keras.ops``: ``model.compile(loss=..., metrics=...)`` + ``model.fit`` train on every Keras
backend. The sampled softmax (`sampled_token_nll` and its candidates) and the guided alignment
terms serve the package's own trainer (`bahdanau_tf.training`), which is TensorFlow's, and are
TensorFlow.
"""

import keras
import tensorflow as tf
from keras import ops

from bahdanau_tf.special_tokens import PAD_ID


def token_nll(target_ids, logits):
    """Per-token negative log-likelihood, 0 at padding: float32 (batch, target_len)."""
    target_ids = ops.cast(target_ids, "int32")
    logits = ops.cast(logits, "float32")
    # on rank-2 inputs TensorFlow's op needs no runtime shape assertion (which XLA drops with a
    # warning)
    nll = ops.sparse_categorical_crossentropy(
        ops.reshape(ops.maximum(target_ids, 0), (-1,)), ops.reshape(logits, (-1, ops.shape(logits)[-1])),
        from_logits=True,
    )
    nll = ops.reshape(nll, ops.shape(target_ids))
    return nll * ops.cast(ops.not_equal(target_ids, PAD_ID), "float32")


def smoothed_token_nll(target_ids, logits, label_smoothing) -> tuple:
    """Per-token NLL and label-smoothed cross-entropy, 0 at padding: two float32 (batch, target_len).

    Label smoothing (Szegedy et al. 2016; Nematus and OpenNMT-tf use 0.1): the target
    distribution is ``(1 - eps) * one_hot(y) + eps / |V|``, so the loss is
    ``(1 - eps) * NLL + eps * mean_k(-log p_k)``, Keras's ``label_smoothing`` of its
    categorical cross-entropy. The plain NLL is returned beside it: the trainer minimises the
    smoothed loss and reports the NLL (train and dev NLL stay comparable across settings).
    Both share one log-sum-exp. ``label_smoothing`` is a float, or a scalar tensor or variable
    read as the step runs (the budget rule's, which may be 0). Without smoothing (a float 0, the
    default) the mean over the vocabulary is not computed: the smoothed loss is the NLL itself,
    `token_nll`'s.
    """
    if isinstance(label_smoothing, (int, float)) and not label_smoothing:
        # the fused softmax cross-entropy: its gradient is one pass over (tokens, |V|), not a
        # log-sum-exp's and a gather's scattered back and summed (benchmarks/train_step_profile.py);
        # nor is a mean over the vocabulary computed that 0 would multiply
        nll = token_nll(target_ids, logits)
        return nll, nll
    target_ids = ops.cast(target_ids, "int32")
    logits = ops.cast(logits, "float32")
    log_normalizer = ops.logsumexp(logits, axis=-1)
    target_logits = ops.squeeze(ops.take_along_axis(logits, ops.maximum(target_ids, 0)[..., None], axis=-1), -1)
    mask = ops.cast(ops.not_equal(target_ids, PAD_ID), "float32")
    nll = (log_normalizer - target_logits) * mask
    uniform = (log_normalizer - ops.mean(logits, axis=-1)) * mask  # mean over the vocabulary of -log p
    epsilon = ops.cast(label_smoothing, "float32")
    return nll, (1.0 - epsilon) * nll + epsilon * uniform


def sample_candidates(target_ids: tf.Tensor, num_sampled: int, vocabulary_size: int) -> tuple:
    """K distinct negative classes for a batch, drawn from the log-uniform (Zipfian) distribution
    ``Q(c) = log((c + 2) / (c + 1)) / log(V + 1)``, and their expected counts: the
    ``sampled_values`` of `sampled_token_nll` (`tf.random.log_uniform_candidate_sampler`).

    The log-uniform proposal assumes ids sorted by decreasing frequency: the word shortlists
    are (`bahdanau_tf.text.WordTokenizer`), a WordPiece vocabulary nearly (characters, then
    pieces by frequency); the log Q correction keeps the estimate consistent whatever the order.
    The sampler has no XLA kernel: call it outside a ``jit_compile`` function.

    Returns:
        (sampled (K,) int64, true_expected_count (rows, 1), sampled_expected_count (K,)),
        rows = every position of ``target_ids`` (padding included; its loss is masked).
    """
    labels = tf.reshape(tf.maximum(tf.cast(target_ids, "int64"), 0), [-1, 1])
    return tf.random.log_uniform_candidate_sampler(
        true_classes=labels, num_true=1, num_sampled=num_sampled, unique=True, range_max=vocabulary_size)


def batch_candidates(target_ids: tf.Tensor, num_sampled: int, vocabulary_size: int,
                     seed: int | None = None) -> tuple:
    """K distinct classes for a batch as Jean et al. (2015) choose them: the batch's own target
    tokens first, the rest of the K drawn uniformly from the other classes; the ``sampled_values``
    of `sampled_token_nll`, with every expected count 1 (no log Q correction: the softmax is the
    full one restricted to the K classes and each row's target, so K = |V| gives it exactly).

    Jean et al. train each partition of the corpus on the softmax over that partition's target
    words, whose proposal is uniform over them so the correction cancels. Here a partition is
    a batch; the uniform extras let the words a batch does not hold be pushed down now and then.
    A row's target that does not fit in K (a batch with more than K distinct targets) is still
    in its own softmax: `sampled_token_nll` always scores the true class. Built from
    ``scatter_nd``, ``random.uniform`` and ``top_k``, so it compiles under XLA.

    Returns:
        (sampled (K,) int32, true_expected_count (rows, 1) ones, sampled_expected_count (K,) ones).
    """
    labels = tf.reshape(tf.maximum(tf.cast(target_ids, "int32"), 0), [-1])
    in_batch = tf.scatter_nd(labels[:, None], tf.ones_like(labels, "float32"), [vocabulary_size]) > 0
    # 2 + u for the batch's targets, u for the others: top_k keeps the targets, then random ones
    priority = tf.where(in_batch, 2.0, 0.0) + tf.random.uniform([vocabulary_size], seed=seed)
    _, sampled = tf.math.top_k(priority, k=num_sampled, sorted=False)
    return sampled, tf.ones([tf.size(labels), 1], "float32"), tf.ones([num_sampled], "float32")


def sampled_token_nll(target_ids: tf.Tensor, features: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor,
                      sampled_values: tuple) -> tf.Tensor:
    """Per-token sampled softmax NLL (Jean et al. 2015), 0 at padding: float32 (batch, target_len).

    What ``tf.nn.sampled_softmax_loss(..., remove_accidental_hits=True)`` computes, with the
    full projection's own variables (``logits = features @ kernel + bias``): a softmax
    cross-entropy over the true class and the K sampled ones, each logit less log of its
    expected count under the proposal, a sampled class equal to the row's target left out.
    Written with XLA-compilable ops (tf's op calls ``ComputeAccidentalHits``, which has no
    XLA kernel), so the training step compiles whole under ``jit_compile``; computed in
    float32 whatever the compute dtype. Only the K + 1 used columns of ``kernel`` are read.

    Args:
        target_ids: int (batch, target_len), padding 0.
        features: (batch, target_len, d), `bahdanau_tf.models.base.TranslationModel.output_features`.
        kernel, bias: (d, |V|) and (|V|,), ``output_projection()``.
        sampled_values: `batch_candidates`'s or `sample_candidates`'s triple.
    """
    sampled, true_expected, sampled_expected = sampled_values
    target_ids = tf.cast(target_ids, "int32")
    labels = tf.reshape(tf.maximum(target_ids, 0), [-1])
    inputs = tf.reshape(tf.cast(features, "float32"), [-1, tf.shape(features)[-1]])  # (rows, d)
    kernel, bias = tf.cast(kernel, "float32"), tf.cast(bias, "float32")
    sampled = tf.cast(sampled, "int32")
    true_logits = (tf.reduce_sum(inputs * tf.transpose(tf.gather(kernel, labels, axis=1)), axis=1)
                   + tf.gather(bias, labels) - tf.math.log(tf.reshape(tf.cast(true_expected, "float32"), [-1])))
    sampled_logits = (tf.matmul(inputs, tf.gather(kernel, sampled, axis=1)) + tf.gather(bias, sampled)
                      - tf.math.log(tf.cast(sampled_expected, "float32")))  # (rows, K)
    # an accidental hit (a sampled class that is the row's target) is left out of the softmax
    hits = tf.equal(labels[:, None], sampled[None, :])
    sampled_logits = tf.where(hits, tf.float32.min, sampled_logits)
    logits = tf.concat([true_logits[:, None], sampled_logits], axis=1)
    nll = tf.reduce_logsumexp(logits, axis=1) - true_logits
    nll = tf.reshape(nll, tf.shape(target_ids))
    return nll * tf.cast(tf.not_equal(target_ids, PAD_ID), "float32")


def guided_alignment_nll(attention: tf.Tensor, alignment_targets: tf.Tensor) -> tf.Tensor:
    """Per-token cross-entropy of the attention against given alignments: float32 (batch, target_len).

    Guided alignment training (Chen et al. 2016; OpenNMT-tf's ``guided_alignment_type: ce``):
    ``-sum_j q_ij log alpha_ij``, with q_i target token i's links normalised to sum to 1
    (`bahdanau_tf.alignment.AlignmentGuide` makes them). A row of q that is all
    zeros (an unaligned target word, ``[END]``, padding) costs nothing.

    Args:
        attention: alpha_ij (batch, target_len, source_len), the teacher-forced attention
            (`bahdanau_tf.models.RNNSearch.logits_and_attention`).
        alignment_targets: q (batch, target_len, source_len), rows summing to 1 or 0.
    """
    attention = tf.cast(attention, "float32")
    targets = tf.cast(alignment_targets, "float32")
    # the floor keeps log finite where the attention underflows (a masked source position)
    return -tf.reduce_sum(targets * tf.math.log(tf.maximum(attention, 1e-9)), axis=-1)


def guided_alignment_weight(weight: float, decay: float, step) -> tf.Tensor:
    """The guided alignment loss's weight at an update: ``weight * decay ** (step / 1000)``
    (``decay`` 1: constant), float32."""
    return tf.constant(weight, "float32") * tf.pow(tf.constant(decay, "float32"),
                                                   tf.cast(step, "float32") / 1000.0)


def masked_nll(target_ids, logits):
    """Mean negative log-likelihood per real target token (a float32 scalar)."""
    tokens = ops.sum(ops.cast(ops.not_equal(target_ids, PAD_ID), "float32"))
    return ops.sum(token_nll(target_ids, logits)) / ops.maximum(tokens, 1.0)


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy from logits averaged over the real (non-padding) target tokens of a batch.

    ``sample_weight`` (batch,) weights sentences: each token counts with its sentence's weight.

    Args:
        label_smoothing: float in [0, 1), `smoothed_token_nll`'s epsilon (0: the plain NLL).

    Example:

    >>> loss = MaskedSparseCategoricalCrossentropy()
    >>> float(loss(np.array([[5, 0]]), np.zeros([1, 2, 8])))  # log(8), padding ignored
    2.0794...
    """

    def __init__(self, name: str = "masked_sparse_categorical_crossentropy", label_smoothing: float = 0.0,
                 **kwargs) -> None:
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)
        if isinstance(label_smoothing, bool) or not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"`label_smoothing` must be in [0, 1), got {label_smoothing!r}.")
        self.label_smoothing = float(label_smoothing)

    def call(self, y_true, y_pred):
        # per-token loss scaled by 1 / (real tokens in the batch): the "sum" reduction gives the mean
        mask = ops.cast(ops.not_equal(ops.cast(y_true, "int32"), PAD_ID), "float32")
        if self.label_smoothing:
            per_token = smoothed_token_nll(y_true, y_pred, self.label_smoothing)[1]
        else:
            per_token = token_nll(y_true, y_pred)
        return per_token / ops.maximum(ops.sum(mask), 1.0)

    def get_config(self) -> dict:
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class MaskedAccuracy(keras.metrics.Mean):
    """Token accuracy of argmax(logits) over the real (non-padding) target tokens."""

    def __init__(self, name: str = "masked_accuracy", **kwargs) -> None:
        super().__init__(name=name, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None) -> None:
        y_true = ops.cast(y_true, "int32")
        correct = ops.cast(ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), y_true), "float32")
        weight = ops.cast(ops.not_equal(y_true, PAD_ID), "float32")
        if sample_weight is not None:
            weight = weight * ops.cast(ops.reshape(sample_weight, (-1, 1)), "float32")
        return super().update_state(correct, sample_weight=weight)

    def get_config(self) -> dict:
        return {"name": self.name, "dtype": self.dtype}


__all__ = ["MaskedSparseCategoricalCrossentropy", "MaskedAccuracy", "batch_candidates",
           "guided_alignment_nll", "guided_alignment_weight", "masked_nll",
           "sample_candidates", "smoothed_token_nll",
           "sampled_token_nll", "token_nll"]
