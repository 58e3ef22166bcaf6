"""The alignment head: P(source position j | target token i), queried by what has read y_i.

A sibling of `bahdanau_tf.models.layers`: `AlignmentHead` is a second `layers.BahdanauAttention` over
the annotations, put on a trained `bahdanau_tf.models.RNNSearch` by the task
`bahdanau_tf.models.aligner.RNNSearchAligner` and trained after it, the translation weights
frozen (`bahdanau_tf.alignment.train_alignment_head`, ``bahdanau-alignment-head``).
"""

import keras
from keras import ops

from bahdanau_tf.models.initializers import BlockOrthogonal, own_draw
from bahdanau_tf.models.layers import BahdanauAttention, bidirectional_gru
from bahdanau_tf.models.tensor_ops import Tensor


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class AlignmentHead(keras.layers.Layer):
    """An alignment head: P(source position j | target token i), queried by what has read y_i.

    In the paper's cell the attention row that predicts y_i is queried with s_{i-1}, before
    y_i is known, so it cannot point at the source of a word it has not seen. The head is a
    second `BahdanauAttention` over the annotations whose query holds the word it aligns
    (Garg et al. 2019; Chen et al. 2020's Shift-AET):
    q_i = [E y_i ; s_i ; s_{i+1}], the target embedding of y_i, the decoder state that
    predicted it (equation 4) and the one that has read it (zeros after the last token). With
    ``context`` > 0 the query also holds the whole target sentence, as Garg et al.'s head
    does: q_i = [E y_i ; s_i ; s_{i+1} ; g->_i ; g<-_i], the states of a bidirectional GRU of
    ``context`` units (the paper's GRU, `layers.bidirectional_gru`) over [E y_k ; s_k] of the
    target tokens, the backward one starting at each sentence's last real token. Its inputs are
    stop-gradient: trained after the translation model (`bahdanau_tf.alignment.
    train_alignment_head`), it leaves translation untouched. Weight on the source ``[END]``
    means "no word" (Och & Ney's NULL), as the extraction rules read it.

    Args:
        units: int, the size of its alignment model's hidden layer.
        score: ``"additive"`` or ``"general"`` (`BahdanauAttention`).
        context: int, the units of each direction of the target-side GRU (0: none).

    Call arguments:
        annotations: (batch, source_len, 2n), the encoder's h_j.
        source_mask: bool (batch, source_len), True at real source positions.
        states: (batch, target_len, n), s_i of each target token i (teacher-forced).
        embeddings: (batch, target_len, m), E y_i.
        target_mask: optional bool (batch, target_len), True at real target tokens (default:
            all); only the target-side GRU reads it.

    Returns:
        float32 (batch, target_len, source_len), each row a distribution over the source.

    Example:

    >>> head = AlignmentHead(8, context=4)
    >>> weights = head(np.ones([2, 5, 6], "float32"), np.ones([2, 5], bool),
    ...                np.ones([2, 3, 4], "float32"), np.ones([2, 3, 7], "float32"))
    >>> tuple(weights.shape)
    (2, 3, 5)
    """

    def __init__(self, units: int, score: str = "additive", context: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.units, self.score, self.context = int(units), score, int(context)
        if self.context < 0:
            raise ValueError(f"`context` must be >= 0, got {context!r}.")
        # === Layers === (Glorot weights: the paper's N(0, 0.001^2) learn slowly)
        self.attention = BahdanauAttention(units, score, kernel_initializer="glorot_uniform",
                                           dtype=self.dtype_policy, name="attention")

    def build(self, annotations_shape, source_mask_shape=None, states_shape=None, embeddings_shape=None,
              target_mask_shape=None):
        if states_shape is None:  # Keras may pass the shapes as one list
            annotations_shape, source_mask_shape, states_shape, embeddings_shape = annotations_shape[:4]
        n, m, c = int(states_shape[-1]), int(embeddings_shape[-1]), self.context
        if c:  # the target-side GRU's weights, stacked over its two directions
            for name, shape, initializer in (("kernel", (2, m + n, 3 * c), "glorot_uniform"),
                                             ("gate_kernel", (2, c, 2 * c), BlockOrthogonal()),
                                             ("recurrent_kernel", (2, c, c), BlockOrthogonal()),
                                             ("bias", (2, 1, 3 * c), "zeros")):
                setattr(self, name, self.add_weight(name=name, shape=shape, initializer=own_draw(
                    keras.initializers.get(initializer), self, name)))
        self.attention.build((None, 2 * n + m + 2 * c), tuple(annotations_shape))
        self.built = True

    def call(self, annotations: Tensor, source_mask: Tensor, states: Tensor, embeddings: Tensor,
             target_mask: Tensor | None = None) -> Tensor:
        annotations, states, embeddings = (ops.stop_gradient(x) for x in (annotations, states, embeddings))
        following = ops.concatenate([states[:, 1:], ops.zeros_like(states[:, :1])], axis=1)
        parts = [embeddings, states, following]
        if self.context:
            batch, target_len = ops.shape(states)[0], ops.shape(states)[1]
            lengths = (ops.sum(ops.cast(target_mask, "int32"), axis=1) if target_mask is not None
                       else ops.full((batch,), target_len, "int32"))
            parts += bidirectional_gru(self, ops.concatenate([embeddings, states], axis=-1), lengths)
        query = ops.concatenate(parts, axis=-1)  # (batch, target_len, m + 2n [+ 2 context])
        batch, target_len = ops.shape(query)[0], ops.shape(query)[1]
        projected = self.attention.project_query(ops.reshape(query, (-1, query.shape[-1])))
        # one group of target_len queries per sentence: the keys are read once per sentence
        weights = self.attention.align(projected, self.attention.compute_keys(annotations),
                                       source_mask, grouped=True)
        return ops.reshape(weights, (batch, target_len, -1))

    def get_config(self) -> dict:
        return {**super().get_config(), "units": self.units, "score": self.score, "context": self.context}


__all__ = ["AlignmentHead"]
