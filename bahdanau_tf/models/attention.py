"""The paper's alignment model (additive attention) as a Keras 3 layer, in ``keras.ops``.

Bahdanau, Cho & Bengio (2015), section 3.1 and appendix A.1.2, equations (5)-(6):
e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j), alpha_ij = softmax_j(e_ij), c_i = sum_j alpha_ij h_j.

- `additive_scores` and its gradient, `additive_scores_gradient`, written once: automatic
  differentiation reads the gradient through ``keras.ops.custom_gradient``, and the decoder
  cells' written-out backward steps (`BahdanauAttention.align_gradient`) call it directly;
- `BahdanauAttention`: the layer (plus Luong's "general" score as an option), with the pieces
  a decoder step reads one by one: `compute_keys` (once per sentence), `project_query`,
  `align`, `read`.
"""

import keras
from keras import ops

from bahdanau_tf.models.initializers import add_own_weight
from bahdanau_tf.models.tensor_ops import Tensor, cast_weight, dot_vector, masked_softmax, project

_SCORES = ("additive", "general")


def _additive_hidden(projected_query, keys):
    return ops.tanh(keys + projected_query[:, None, :])  # (batch, source_len, units)


def additive_scores_gradient(d_scores: Tensor, projected_query: Tensor, keys: Tensor,
                             score_vector: Tensor) -> tuple:
    """`additive_scores` backwards from d e_ij (batch, source_len): ``(d projected query,
    d keys, d v_a)``. The tanh is computed again instead of kept: per decoder step it is a
    (batch, source_len, units) tensor, the model's largest activation, and storing it for the
    backward pass (written once, read once, in a buffer of all steps) cost more than computing
    it again (a faster train step on CPU under XLA; benchmarks/train_throughput.py)."""
    hidden = _additive_hidden(projected_query, keys)
    d_hidden = d_scores[:, :, None] * score_vector * (1.0 - hidden * hidden)
    return ops.sum(d_hidden, axis=1), d_hidden, ops.einsum("bs,bsu->u", d_scores, hidden)


@ops.custom_gradient
def additive_scores(projected_query: Tensor, keys: Tensor, score_vector: Tensor) -> Tensor:
    """e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j) from the projected query and the keys: (batch,
    source_len); its gradient is `additive_scores_gradient`."""

    def gradient(*args, upstream=None):  # PyTorch's backend passes ``upstream`` by name
        upstream = args[0] if upstream is None else upstream
        return additive_scores_gradient(upstream, projected_query, keys, score_vector)

    return dot_vector(_additive_hidden(projected_query, keys), score_vector), gradient


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class BahdanauAttention(keras.layers.Layer):
    """Additive attention, the paper's alignment model (equations 5-6).

    e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j),  alpha_ij = softmax_j(e_ij),  c_i = sum_j alpha_ij h_j.

    ``U_a h_j`` does not depend on the decoder step i: `compute_keys` computes it once per sentence
    and the decoder passes the keys to every step. Padding positions get exactly zero weight.

    ``score="general"`` (e_ij = s^T W h_j) is Luong et al.'s (2015) multiplicative score,
    offered for comparison (`RNNSearch(score="general")`, preset ``rnnsearch-general-small``).
    Luong's ``"dot"`` (s^T h_j) is not offered: it needs the decoder state and the annotations
    to have one size, which the paper's bidirectional encoder (2n) and n-unit decoder never have.

    Args:
        units: int, n', the size of the alignment model's hidden layer (additive score only).
        score: ``"additive"`` (the paper) or ``"general"``.
        kernel_initializer: initializer of W_a and U_a (the paper: N(0, 0.001^2)).
        score_initializer: initializer of v_a (the paper: zeros).
        bias_initializer: initializer of the bias added to the keys.

    Call arguments:
        query: (batch, query_dim), the previous decoder state s_{i-1}.
        memory: (batch, source_len, memory_dim), the annotations h_j.
        keys: optional (batch, source_len, key_dim), `compute_keys(memory)`; computed when omitted.
        memory_mask: optional bool (batch, source_len), True at real source positions.

    Returns:
        ``(context, weights)``: (batch, memory_dim) in the input dtype, (batch, source_len) float32.

    Example:

    >>> attention = BahdanauAttention(8)
    >>> context, weights = attention(np.zeros([2, 4], "float32"), np.ones([2, 5, 6], "float32"))
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 6), (2, 5))
    """

    def __init__(
        self,
        units: int,
        score: str = "additive",
        kernel_initializer: str | keras.initializers.Initializer | None = None,
        score_initializer: str | keras.initializers.Initializer | None = "zeros",
        bias_initializer: str | keras.initializers.Initializer | None = "zeros",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if score not in _SCORES:
            raise ValueError(f"`score` must be one of {_SCORES}, got {score!r}.")
        if int(units) <= 0:
            raise ValueError(f"`units` must be positive, got {units!r}.")
        self.units = int(units)
        self.score = score
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.RandomNormal(stddev=0.001)
        )
        self.score_initializer = keras.initializers.get(score_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, query_shape: tuple, memory_shape: tuple | None = None) -> None:
        if memory_shape is None:  # Keras may pass both shapes as one list
            query_shape, memory_shape = query_shape
        query_dim, memory_dim = int(query_shape[-1]), int(memory_shape[-1])
        if self.score == "additive":
            self.query_kernel = add_own_weight(self, "query_kernel", (query_dim, self.units), self.kernel_initializer)
            self.key_kernel = add_own_weight(self, "key_kernel", (memory_dim, self.units), self.kernel_initializer)
            self.key_bias = add_own_weight(self, "key_bias", (self.units,), self.bias_initializer)
            self.score_vector = add_own_weight(self, "score_vector", (self.units,), self.score_initializer)
        else:  # general
            self.query_kernel = add_own_weight(self, "query_kernel", (query_dim, memory_dim),
                                            self.kernel_initializer)
        self.built = True

    def score_weights(self) -> dict:
        """The weights of the score, by name: ``query_kernel`` W_a, and with the additive score
        ``key_kernel`` U_a, ``key_bias`` and ``score_vector`` v_a."""
        names = ("query_kernel", "key_kernel", "key_bias", "score_vector") if self.score == "additive" else (
            "query_kernel",)
        return {name: getattr(self, name) for name in names}

    def compute_keys(self, memory: Tensor, key_kernel: Tensor | None = None, key_bias: Tensor | None = None) -> Tensor:
        """U_a h_j (+ bias) for every source position: (batch, source_len, units);
        ``key_kernel`` and ``key_bias``: tensors in place of the variables.

        For the general score the keys are the annotations themselves.
        """
        if self.score != "additive":
            return memory
        key_kernel = self.key_kernel if key_kernel is None else key_kernel
        key_bias = self.key_bias if key_bias is None else key_bias
        return project(memory, cast_weight(key_kernel, memory)) + cast_weight(key_bias, memory)

    def project_query(self, query: Tensor) -> Tensor:
        """W_a s_{i-1}: the only part of the alignment model that depends on the decoder step."""
        return ops.matmul(query, cast_weight(self.query_kernel, query))

    def score_keys(self, projected_query: Tensor, keys: Tensor, score_vector: Tensor | None = None) -> Tensor:
        """e_ij for one decoder step: (batch, source_len); ``score_vector``: v_a as a tensor, in
        place of the variable (additive score)."""
        if self.score == "additive":
            return additive_scores(projected_query, keys, self._score_vector(score_vector, keys))
        return ops.squeeze(ops.matmul(keys, ops.expand_dims(projected_query, -1)), -1)  # (batch, source_len)

    def attend(self, projected_query: Tensor, memory: Tensor, keys: Tensor, mask: Tensor,
               grouped: bool = False) -> tuple:
        """Context and weights from an already projected query (the decoder cell's fast path):
        `align`, then `read` of the annotations.

        With ``grouped``, ``memory``, ``keys`` and ``mask`` hold one row per *group* of
        consecutive queries (the beams of a sentence in beam search): query row ``r`` attends
        over memory row ``r // (queries / memory rows)``. Each source position is then read
        once per group, not once per query, and the context is one ``(group, source_len) x
        (source_len, 2n)`` matmul per sentence instead of a matrix-vector product per beam.
        """
        weights = self.align(projected_query, keys, mask, grouped=grouped)
        return self.read(weights, memory, grouped=grouped), weights

    def align(self, projected_query: Tensor, keys: Tensor, mask: Tensor, grouped: bool = False,
              score_vector: Tensor | None = None) -> Tensor:
        """alpha_i from an already projected query: float32 (queries, source_len); ``grouped``
        as in `attend`; ``score_vector`` as in `score_keys`."""
        if not grouped:
            return masked_softmax(self.score_keys(projected_query, keys, score_vector), mask)
        query = ops.reshape(projected_query, (ops.shape(keys)[0], -1, projected_query.shape[-1]))  # (groups, k, units)
        if self.score == "additive":
            hidden = ops.tanh(keys[:, None, :, :] + query[:, :, None, :])  # (groups, k, source_len, units)
            scores = dot_vector(hidden, self._score_vector(score_vector, keys))
        else:
            scores = ops.einsum("gku,gsu->gks", query, keys)
        weights = masked_softmax(scores, mask[:, None, :])  # (groups, k, source_len)
        return ops.reshape(weights, (-1, ops.shape(weights)[-1]))

    def _score_vector(self, score_vector, like):
        return cast_weight(self.score_vector if score_vector is None else score_vector, like)

    @staticmethod
    def align_gradient(d_alpha: Tensor, d_read: Tensor, alpha: Tensor, projected_query: Tensor, memory: tuple,
                       score_vector: Tensor) -> tuple:
        """One step's `align` (additive score) and `read` of ``memory.products`` backwards:
        ``(d keys, d v_a, d projected query)`` from the gradients of alpha_i (float32) and of
        what the step read off the products (sum_j alpha_ij products_j)."""
        products, keys, mask = memory.products, memory.keys, memory.mask
        d_alpha = d_alpha + ops.cast(ops.squeeze(ops.matmul(products, d_read[:, :, None]), -1), "float32")
        # alpha = softmax(e) over the real positions
        d_scores = alpha * (d_alpha - ops.sum(alpha * d_alpha, axis=-1, keepdims=True))
        d_scores = ops.cast(ops.where(mask, d_scores, 0.0), d_read.dtype)
        d_query, d_keys, d_score_vector = additive_scores_gradient(d_scores, projected_query, keys, score_vector)
        return d_keys, d_score_vector, d_query

    @staticmethod
    def read(weights: Tensor, values: Tensor, grouped: bool = False) -> Tensor:
        """sum_j alpha_ij v_j: (queries, value_dim) in the dtype of ``values``.

        ``values`` (memory rows, source_len, value_dim) are the annotations (the context c_i)
        or any linear map of them: W c_i = sum_j alpha_ij (W h_j), so a decoder that only ever
        multiplies c_i by fixed matrices can read their products with the annotations instead
        (`bahdanau_tf.models.RNNSearch.decoding_memory`). ``grouped`` as in `attend`.
        """
        weights = ops.cast(weights, values.dtype)
        if not grouped:
            return ops.squeeze(ops.matmul(ops.expand_dims(weights, 1), values), 1)  # (queries, value_dim)
        weights = ops.reshape(weights, (ops.shape(values)[0], -1, ops.shape(weights)[-1]))  # (groups, k, source_len)
        return ops.reshape(ops.matmul(weights, values), (-1, values.shape[-1]))  # (groups * k, value_dim)

    def call(self, query: Tensor, memory: Tensor, keys: Tensor | None = None,
             memory_mask: Tensor | None = None) -> tuple:
        if keys is None:
            keys = self.compute_keys(memory)
        if memory_mask is None:
            memory_mask = ops.ones(ops.shape(memory)[:2], dtype="bool")
        return self.attend(self.project_query(query), memory, keys, memory_mask)

    def compute_output_spec(self, query: keras.KerasTensor, memory: keras.KerasTensor,
                            keys: keras.KerasTensor | None = None,
                            memory_mask: keras.KerasTensor | None = None) -> tuple:
        return (
            keras.KerasTensor((query.shape[0], memory.shape[-1]), dtype=self.compute_dtype),
            keras.KerasTensor(tuple(memory.shape[:2]), dtype="float32"),
        )

    def get_config(self) -> dict:
        config = {
            "units": self.units,
            "score": self.score,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "score_initializer": keras.initializers.serialize(self.score_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}


__all__ = ["BahdanauAttention", "additive_scores", "additive_scores_gradient"]
