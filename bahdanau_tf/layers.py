"""The paper's building blocks as Keras 3 layers, in ``keras.ops`` (every Keras backend).

Bahdanau, Cho & Bengio (2015), section 3 and appendix A:

- `BahdanauAttention`: the alignment model, equations (5)-(6) (plus Luong's scores as options).
- `ConditionalGRUCell`: a GRU whose gates also read a context vector c (Cho et al. 2014a).
- `AttentionGRUCell`: the RNNsearch decoder cell, attention + conditional GRU, one step.
- `MaxoutReadout`: the deep output with one maxout layer and the vocabulary projection.
- `BidirectionalEncoder`: embedding + bidirectional GRU giving the annotations h_j.

The recurrent matrices start as the paper's (appendix B.1): `bahdanau_tf.initializers`'
`BlockOrthogonal`. The GRU step (`gru_step`) and the loops over all time steps, with the
backward pass of a training pass on TensorFlow, are `bahdanau_tf.recurrence`'s.

Every layer casts its float32 variables to the dtype of its inputs, so the same code runs in
float32 and under the ``mixed_bfloat16`` / ``mixed_float16`` policies and also when a method other
than ``call`` (e.g. ``project_inputs``) is used from inside a decoding loop. Attention softmaxes
are computed in float32. The same weights give the same numbers on TensorFlow, JAX and PyTorch;
`bahdanau_tf.tensor_ops` holds the two operations that take a TensorFlow-specific form there.
"""

import keras
from keras import ops

from bahdanau_tf import recurrence
from bahdanau_tf.initializers import BlockOrthogonal, own_draw
from bahdanau_tf.recurrence import gru_states, gru_step
from bahdanau_tf.regularization import check_rates, sequence_dropout
from bahdanau_tf.special_tokens import PAD_ID
from bahdanau_tf.tensor_ops import (Tensor, cast_weight, dot_vector, masked_softmax, project,
                                    reverse_within_lengths, scan_states, stack_time, time_major, weights_read_once)

_SCORES = ("additive", "general")


def _add_weight(layer, name, shape, initializer):
    """``layer.add_weight`` with values drawn for this weight alone (`own_draw`)."""
    return layer.add_weight(name=name, shape=shape, initializer=own_draw(initializer, layer, name))


@ops.custom_gradient
def _additive_scores(projected_query, keys, score_vector):
    """e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j) from the projected query and the keys: (batch, source_len).

    The gradient recomputes tanh(...) instead of keeping it: per decoder step it is a
    (batch, source_len, units) tensor, the model's largest activation, and storing it for the
    backward pass (written once, read once, in a buffer of all steps) cost more than computing it
    again (a faster train step on CPU under XLA; benchmarks/train_throughput.py).
    """

    def hidden():
        return ops.tanh(keys + projected_query[:, None, :])  # (batch, source_len, units)

    def gradient(*args, upstream=None):  # PyTorch's backend passes ``upstream`` by name
        upstream = args[0] if upstream is None else upstream
        tanh = hidden()
        d_hidden = upstream[:, :, None] * score_vector * (1.0 - tanh * tanh)
        return ops.sum(d_hidden, axis=1), d_hidden, ops.einsum("bs,bsu->u", upstream, tanh)

    return dot_vector(hidden(), score_vector), gradient


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
            self.query_kernel = _add_weight(self, "query_kernel", (query_dim, self.units), self.kernel_initializer)
            self.key_kernel = _add_weight(self, "key_kernel", (memory_dim, self.units), self.kernel_initializer)
            self.key_bias = _add_weight(self, "key_bias", (self.units,), self.bias_initializer)
            self.score_vector = _add_weight(self, "score_vector", (self.units,), self.score_initializer)
        else:  # general
            self.query_kernel = _add_weight(self, "query_kernel", (query_dim, memory_dim),
                                            self.kernel_initializer)
        self.built = True

    def compute_keys(self, memory: Tensor) -> Tensor:
        """U_a h_j (+ bias) for every source position: (batch, source_len, units).

        For the general score the keys are the annotations themselves.
        """
        if self.score != "additive":
            return memory
        return project(memory, cast_weight(self.key_kernel, memory)) + cast_weight(self.key_bias, memory)

    def project_query(self, query: Tensor) -> Tensor:
        """W_a s_{i-1}: the only part of the alignment model that depends on the decoder step."""
        return ops.matmul(query, cast_weight(self.query_kernel, query))

    def score_keys(self, projected_query: Tensor, keys: Tensor) -> Tensor:
        """e_ij for one decoder step: (batch, source_len)."""
        if self.score == "additive":
            return _additive_scores(projected_query, keys, cast_weight(self.score_vector, keys))
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

    def align(self, projected_query: Tensor, keys: Tensor, mask: Tensor,
              grouped: bool = False) -> Tensor:
        """alpha_i from an already projected query: float32 (queries, source_len); ``grouped``
        as in `attend`."""
        if not grouped:
            return masked_softmax(self.score_keys(projected_query, keys), mask)
        query = ops.reshape(projected_query, (ops.shape(keys)[0], -1, projected_query.shape[-1]))  # (groups, k, units)
        if self.score == "additive":
            hidden = ops.tanh(keys[:, None, :, :] + query[:, :, None, :])  # (groups, k, source_len, units)
            scores = dot_vector(hidden, cast_weight(self.score_vector, keys))
        else:
            scores = ops.einsum("gku,gsu->gks", query, keys)
        weights = masked_softmax(scores, mask[:, None, :])  # (groups, k, source_len)
        return ops.reshape(weights, (-1, ops.shape(weights)[-1]))

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


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class ConditionalGRUCell(keras.layers.Layer):
    """A GRU whose three gates also read a context vector c (Cho et al. 2014a; the paper's eq. A.2).

        z = sigmoid(W_z E y + U_z s + C_z c)
        r = sigmoid(W_r E y + U_r s + C_r c)
        s~ = tanh(W E y + U [r * s] + C c)        # reset gate before the recurrent matmul
        s' = (1 - z) * s + z * s~

    Keras's ``GRU(reset_after=True)`` (cuDNN's variant) computes ``r * (U s)`` instead; this cell
    is the paper's. The input and context projections are separate methods so that a decoder loop
    can compute them for all steps at once, outside the loop (DESIGN §2).

    Args:
        units: int, n, the state size.
        kernel_initializer: initializer of W (and C).
        recurrent_initializer: initializer of ``gate_kernel`` [U_z | U_r] (units, 2 * units) and
            ``recurrent_kernel`` U (units, units); default: each of U_z, U_r, U random orthogonal
            (`BlockOrthogonal`), as in appendix B.1.
        bias_initializer: initializer of the bias (zeros).

    Call arguments:
        projected_inputs: (batch, 3 * units), `project_inputs(E y_{i-1})`.
        h_tm1: (batch, units), s_{i-1}.
        projected_context: (batch, 3 * units), `project_context(c_i)`.
        recurrent_mask: optional (batch, units), recurrent dropout (`gru_step`).

    Returns:
        s_i: (batch, units).

    Example:

    >>> cell = ConditionalGRUCell(4)
    >>> cell.build(input_dim=3, context_dim=5)
    >>> x, c = cell.project_inputs(ops.ones([2, 3])), cell.project_context(ops.ones([2, 5]))
    >>> tuple(cell(x, ops.zeros([2, 4]), c).shape)
    (2, 4)
    """

    def __init__(
        self,
        units: int,
        kernel_initializer: str | keras.initializers.Initializer | None = "glorot_uniform",
        recurrent_initializer: str | keras.initializers.Initializer | None = None,
        bias_initializer: str | keras.initializers.Initializer | None = "zeros",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if int(units) <= 0:
            raise ValueError(f"`units` must be positive, got {units!r}.")
        self.units = int(units)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer or BlockOrthogonal())
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_dim: int, context_dim: int) -> None:
        units = self.units
        self.kernel = _add_weight(self, "kernel", (int(input_dim), 3 * units), self.kernel_initializer)
        self.context_kernel = _add_weight(
            self, "context_kernel", (int(context_dim), 3 * units), self.kernel_initializer
        )
        # [U_z | U_r] and U are separate weights so no step slices a variable
        self.gate_kernel = _add_weight(self, "gate_kernel", (units, 2 * units), self.recurrent_initializer)
        self.recurrent_kernel = _add_weight(self, "recurrent_kernel", (units, units), self.recurrent_initializer)
        self.bias = _add_weight(self, "bias", (3 * units,), self.bias_initializer)
        self.built = True

    def project_inputs(self, inputs: Tensor) -> Tensor:
        """[W_z; W_r; W] E y + bias, for any leading dimensions: (..., 3 * units)."""
        return project(inputs, cast_weight(self.kernel, inputs)) + cast_weight(self.bias, inputs)

    def project_context(self, context: Tensor) -> Tensor:
        """[C_z; C_r; C] c, for any leading dimensions: (..., 3 * units)."""
        return project(context, cast_weight(self.context_kernel, context))

    def call(self, projected_inputs: Tensor, h_tm1: Tensor, projected_context: Tensor,
             recurrent_mask: Tensor | None = None) -> Tensor:
        return gru_step(
            projected_inputs + projected_context,
            h_tm1,
            cast_weight(self.gate_kernel, h_tm1),
            cast_weight(self.recurrent_kernel, h_tm1),
            recurrent_mask,
        )

    def sequence(self, projected_inputs: Tensor, initial_state: Tensor, projected_context: Tensor,
                 recurrent_mask: Tensor | None = None, training: bool = False) -> Tensor:
        """Every state s_i over time-major ``projected_inputs`` (time, batch, 3 * units), with one
        ``projected_context`` (batch, 3 * units) read at every step (RNNencdec's fixed c):
        (time, batch, units). A training pass on TensorFlow runs the backward pass of
        `bahdanau_tf.recurrence.gru_states`."""
        return gru_states(projected_inputs + projected_context[None], initial_state,
                          cast_weight(self.gate_kernel, initial_state),
                          cast_weight(self.recurrent_kernel, initial_state), recurrent_mask, training)

    def get_config(self) -> dict:
        config = {
            "units": self.units,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class AttentionGRUCell(keras.layers.Layer):
    """The RNNsearch decoder cell: attention over the annotations, then the conditional GRU.

    One step (paper, section 3.1 and appendix A.2.2):

        c_i = sum_j alpha_ij h_j,  alpha_i = softmax(v_a^T tanh(W_a s_{i-1} + U_a h_j))
        s_i = GRU(E y_{i-1}, s_{i-1}, c_i)     # c_i in all three gates

    Args:
        units: int, n, the decoder state size.
        attention_units: int, n', the alignment model's hidden size.
        score: attention score, ``"additive"`` (the paper) or ``"general"`` (Luong).
        kernel_initializer, recurrent_initializer, bias_initializer: of the GRU
            (see `ConditionalGRUCell`).
        attention_initializer: of W_a and U_a; ``score_initializer``: of v_a.

    Call arguments:
        projected_inputs: (batch, 3 * units), `project_inputs(E y_{i-1})`.
        h_tm1: (batch, units), s_{i-1}.
        memory: dict from `prepare_memory`: ``annotations`` (batch, source_len, 2n), ``keys``
            (batch, source_len, n'), ``mask`` bool (batch, source_len).
        grouped: bool, the memory holds one row per group of consecutive rows of ``h_tm1``
            (beam search's beams of one sentence), see `BahdanauAttention.attend`.
        recurrent_mask: optional (batch, units), recurrent dropout: s_{i-1} times this mask is
            what the attention query and the GRU's recurrent matmuls read (`gru_step`); the
            model draws it once per sequence (`bahdanau_tf.regularization.Dropouts`).

    Returns:
        ``(s_i, c_i, alpha_i)``: (batch, units), (batch, 2n), float32 (batch, source_len).

    Example:

    >>> cell = AttentionGRUCell(4, attention_units=3)
    >>> cell.build(input_dim=2, memory_dim=6)
    >>> memory = cell.prepare_memory(ops.ones([1, 5, 6]), np.array([[True] * 3 + [False] * 2]))
    >>> s, c, alpha = cell(cell.project_inputs(ops.ones([1, 2])), ops.zeros([1, 4]), memory)
    >>> [round(float(a), 3) for a in alpha[0]]
    [0.333, 0.333, 0.333, 0.0, 0.0]
    """

    def __init__(
        self,
        units: int,
        attention_units: int,
        score: str = "additive",
        kernel_initializer: str | keras.initializers.Initializer | None = "glorot_uniform",
        recurrent_initializer: str | keras.initializers.Initializer | None = None,
        bias_initializer: str | keras.initializers.Initializer | None = "zeros",
        attention_initializer: str | keras.initializers.Initializer | None = None,
        score_initializer: str | keras.initializers.Initializer | None = "zeros",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.units = int(units)
        self.attention_units = int(attention_units)
        self.score = score
        # === Layers ===
        self.attention = BahdanauAttention(
            attention_units,
            score=score,
            kernel_initializer=attention_initializer,
            score_initializer=score_initializer,
            bias_initializer=bias_initializer,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.gru = ConditionalGRUCell(
            units,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            dtype=self.dtype_policy,
            name="gru",
        )

    def build(self, input_dim: int, memory_dim: int) -> None:
        self.attention.build((None, self.units), (None, None, int(memory_dim)))
        self.gru.build(input_dim=input_dim, context_dim=memory_dim)
        self.built = True

    def project_inputs(self, inputs: Tensor) -> Tensor:
        return self.gru.project_inputs(inputs)

    def project_context(self, context: Tensor) -> Tensor:
        """The GRU's [C_z; C_r; C] c, for c_i or the annotations h_j: (..., 3 * units)."""
        return self.gru.project_context(context)

    def prepare_memory(self, annotations: Tensor, mask: Tensor) -> dict:
        """The step-independent part of attention, computed once per sentence."""
        return {"annotations": annotations, "keys": self.attention.compute_keys(annotations), "mask": mask}

    def sequence(self, projected_inputs: Tensor, initial_state: Tensor, memory: dict,
                 recurrent_mask: Tensor | None = None, weights: bool = False, training: bool = False) -> tuple:
        """Teacher forcing: the cell over all steps of time-major ``projected_inputs`` (time,
        batch, 3 * units), from s_0 ``initial_state``.

        A training pass on TensorFlow with the additive score runs `written_out_loop`
        (`bahdanau_tf.recurrence.attention_gru_states`), whose backward pass is written out;
        otherwise the steps are scanned (`scanned_sequence`) and differentiated automatically.

        Returns:
            ``(s_i, c_i, alpha_i)`` of all steps, time major; ``alpha_i`` (float32) only with
            ``weights``, else None.
        """
        if not (training and self.score == "additive") or recurrence.automatic_differentiation_asked():
            return self.scanned_sequence(projected_inputs, initial_state, memory, recurrent_mask, weights)
        kernels = {name: cast_weight(kernel, initial_state) for name, kernel in self.loop_weights().items()}
        states, contexts, alphas = self.written_out_loop(projected_inputs, initial_state, memory, kernels,
                                                         recurrent_mask)
        return states, contexts, alphas if weights else None

    #: the loop whose backward pass is written out, `sequence`'s in a training pass
    written_out_loop = staticmethod(recurrence.attention_gru_states)

    def loop_weights(self) -> dict:
        """The weights `written_out_loop` reads, by its names."""
        return {"key_kernel": self.attention.key_kernel, "key_bias": self.attention.key_bias,
                "query_kernel": self.attention.query_kernel, "score_vector": self.attention.score_vector,
                "context_kernel": self.gru.context_kernel, "gate_kernel": self.gru.gate_kernel,
                "recurrent_kernel": self.gru.recurrent_kernel}

    def scanned_sequence(self, projected_inputs: Tensor, initial_state: Tensor, memory: dict,
                         recurrent_mask: Tensor | None = None, weights: bool = False) -> tuple:
        """`sequence` as a scan of `call`. The loop carries the state and the context only; the
        attention weights are stacked only when asked for (a training step never reads them, and
        their unread stack cost a buffer of zeros carried through the backward loop)."""
        batch = ops.shape(initial_state)[0]
        initializer = (initial_state, ops.zeros((batch, memory["annotations"].shape[-1]), initial_state.dtype))
        if weights:
            initializer += (ops.zeros(ops.shape(memory["mask"]), "float32"),)

        def step(carry, projected_t):
            return self(projected_t, carry[0], memory, recurrent_mask=recurrent_mask)[: len(initializer)]

        outputs = scan_states(step, projected_inputs, initializer)
        return outputs[0], outputs[1], outputs[2] if weights else None

    def call(self, projected_inputs: Tensor, h_tm1: Tensor, memory: dict, grouped: bool = False,
             recurrent_mask: Tensor | None = None) -> tuple:
        query = h_tm1 if recurrent_mask is None else h_tm1 * recurrent_mask
        context, weights = self.attention.attend(
            self.attention.project_query(query), memory["annotations"], memory["keys"], memory["mask"],
            grouped=grouped,
        )
        h = self.gru(projected_inputs, h_tm1, self.gru.project_context(context), recurrent_mask)
        return h, context, weights

    def get_config(self) -> dict:
        gru_config, attention_config = self.gru.get_config(), self.attention.get_config()
        config = {
            "units": self.units,
            "attention_units": self.attention_units,
            "score": self.score,
            "kernel_initializer": gru_config["kernel_initializer"],
            "recurrent_initializer": gru_config["recurrent_initializer"],
            "bias_initializer": gru_config["bias_initializer"],
            "attention_initializer": attention_config["kernel_initializer"],
            "score_initializer": attention_config["score_initializer"],
        }
        return {**super().get_config(), **config}


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class MaxoutReadout(keras.layers.Layer):
    """The deep output: one maxout layer, then the vocabulary projection (paper, appendix A.2.2).

        t~_i = U_o s_i + V_o E y_{i-1} + C_o c_i                  (size 2l)
        t_i[k] = max(t~_i[2k-1], t~_i[2k])                         (size l)
        logits_i = W_o t_i                                          (size |V|)

    Appendix A prints s_{i-1} in t~_i; equation (4), g(y_{i-1}, s_i, c_i), and the authors' code
    use s_i, as we do. The decoder applies this layer once to all steps after its loop, so the
    biggest matmul of the model is one batched matmul (DESIGN §2).

    Args:
        maxout_dim: int, l, the number of maxout units (t~ has 2l).
        vocabulary_size: int, |V| of the target language.
        kernel_initializer, bias_initializer: of all four matrices and the biases.
        tie_embeddings: bool, W_o is the transpose of the target embedding matrix E (Press &
            Wolf 2017; Nematus's ``tie_decoder_embeddings``), handed over by
            `tie`: one variable, owned by the embedding layer, so it is saved and loaded
            once. Needs l = m.

    Call arguments:
        states: (..., n) s_i; embeddings: (..., m) E y_{i-1}; contexts: (..., 2n) c_i.

    Returns:
        logits, float32 (..., vocabulary_size) (float32 also under mixed precision).

    Example:

    >>> readout = MaxoutReadout(maxout_dim=3, vocabulary_size=7)
    >>> readout.build(state_dim=4, embedding_dim=2, context_dim=8)
    >>> tuple(readout(ops.ones([5, 4]), ops.ones([5, 2]), ops.ones([5, 8])).shape)
    (5, 7)
    """

    def __init__(
        self, maxout_dim: int, vocabulary_size: int,
        kernel_initializer: str | keras.initializers.Initializer | None = "glorot_uniform",
        bias_initializer: str | keras.initializers.Initializer | None = "zeros",
        tie_embeddings: bool = False, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        if int(maxout_dim) <= 0 or int(vocabulary_size) <= 0:
            raise ValueError(
                f"`maxout_dim` and `vocabulary_size` must be positive, got {maxout_dim!r}, {vocabulary_size!r}."
            )
        if not isinstance(tie_embeddings, bool):
            raise ValueError(f"`tie_embeddings` must be True or False, got {tie_embeddings!r}.")
        self.maxout_dim = int(maxout_dim)
        self.vocabulary_size = int(vocabulary_size)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.tie_embeddings = tie_embeddings

    def tie(self, output_embedding: keras.layers.Embedding) -> None:
        """With ``tie_embeddings``: W_o is ``output_embedding``'s matrix (|V|, l) transposed.
        Called before `build`, by the model that owns both layers."""
        if not self.tie_embeddings:
            raise ValueError("`tie` is for a readout made with `tie_embeddings=True`.")
        # a function, not an attribute: the embedding layer stays its model's, tracked and
        # saved once, under its own name
        self._tied_embeddings = lambda: output_embedding.embeddings

    def build(self, state_dim: int, embedding_dim: int, context_dim: int) -> None:
        if self.tie_embeddings and not hasattr(self, "_tied_embeddings"):
            raise ValueError("A readout with `tie_embeddings` is tied (`tie`) before it is built.")
        pre = 2 * self.maxout_dim

        def kernel(name, rows, cols):
            return _add_weight(self, name, (int(rows), cols), self.kernel_initializer)

        self.state_kernel = kernel("state_kernel", state_dim, pre)  # U_o
        self.embedding_kernel = kernel("embedding_kernel", embedding_dim, pre)  # V_o
        self.context_kernel = kernel("context_kernel", context_dim, pre)  # C_o
        self.bias = _add_weight(self, "bias", (pre,), self.bias_initializer)
        if self.tie_embeddings:
            shape = tuple(self._tied_embeddings().shape)
            if shape != (self.vocabulary_size, self.maxout_dim):
                raise ValueError(f"Tied embeddings need a ({self.vocabulary_size}, {self.maxout_dim}) "
                                 f"target embedding (|V|, l), got {shape}.")
        else:
            self.output_kernel = kernel("output_kernel", self.maxout_dim, self.vocabulary_size)  # W_o
        self.output_bias = _add_weight(self, "output_bias", (self.vocabulary_size,), self.bias_initializer)
        self.built = True

    def output_projection(self) -> tuple:
        """``(W_o (l, |V|), b_o (|V|,))``: W_o the ``output_kernel`` variable, or with
        ``tie_embeddings`` the target embedding matrix transposed (read from that variable)."""
        if self.tie_embeddings:
            return ops.transpose(self._tied_embeddings()), self.output_bias
        return self.output_kernel, self.output_bias

    def call(self, states: Tensor, embeddings: Tensor, contexts: Tensor,
             projection: tuple | None = None) -> Tensor:
        return self.project(self.features(states, embeddings, contexts), projection)

    def features(self, states: Tensor, embeddings: Tensor, contexts: Tensor | None = None,
                 projected_contexts: Tensor | None = None) -> Tensor:
        """t_i, the maxout units (..., l) in the compute dtype: what W_o projects (a sampled
        softmax, `bahdanau_tf.losses.sampled_token_nll`, projects them on a few rows only).
        ``projected_contexts``, C_o c_i (`project_context`), replaces ``contexts``; without
        it, t~ is one matmul of [s_i | E y_{i-1} | c_i] by [U_o; V_o; C_o]."""
        if projected_contexts is None:  # U_o s_i + V_o E y_{i-1} + C_o c_i, one matmul
            kernel = ops.concatenate([cast_weight(k, states) for k in
                                      (self.state_kernel, self.embedding_kernel, self.context_kernel)], axis=0)
            pre_maxout = project(ops.concatenate([states, embeddings, contexts], axis=-1), kernel)
        else:
            pre_maxout = (project(states, cast_weight(self.state_kernel, states))
                          + project(embeddings, cast_weight(self.embedding_kernel, states)) + projected_contexts)
        pre_maxout = pre_maxout + cast_weight(self.bias, states)
        # max over the pairs (t~[2k-1], t~[2k])
        shape = tuple(ops.shape(pre_maxout)[:-1]) + (self.maxout_dim, 2)
        return ops.max(ops.reshape(pre_maxout, shape), axis=-1)

    def project_context(self, contexts: Tensor) -> Tensor:
        """C_o c_i, for any leading dimensions: (..., 2l)."""
        return project(contexts, cast_weight(self.context_kernel, contexts))

    def project(self, maxout: Tensor, projection: tuple | None = None) -> Tensor:
        """logits_i = W_o t_i + b_o over the whole vocabulary, float32 (..., vocabulary_size);
        with ``projection`` = ``(kernel, bias)``, columns of W_o and b_o (a candidate list,
        gathered once per search), over those columns only."""
        kernel, bias = self.output_projection() if projection is None else projection
        logits = project(maxout, cast_weight(kernel, maxout)) + cast_weight(bias, maxout)
        return ops.cast(logits, "float32")

    def get_config(self) -> dict:
        config = {
            "maxout_dim": self.maxout_dim,
            "vocabulary_size": self.vocabulary_size,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "tie_embeddings": self.tie_embeddings,
        }
        return {**super().get_config(), **config}


def bidirectional_gru(layer, inputs: Tensor, lengths: Tensor, training: bool = False) -> tuple:
    """Both directions of the paper's GRU over ``inputs`` (batch, time, d) in one loop:
    ``(forward, backward)`` states, each (batch, time, n), of ``layer``'s weights stacked over
    the direction axis (index 0 forward, 1 backward): ``kernel`` (2, d, 3n), ``gate_kernel``
    (2, n, 2n), ``recurrent_kernel`` (2, n, n), ``bias`` (2, 1, 3n). The backward direction
    reads each sequence reversed within its own ``lengths`` (`reverse_within_lengths`), so it
    starts at the sequence's last real position; states past a length are of no position."""
    backward_inputs = reverse_within_lengths(inputs, lengths)
    # both directions' input projections for all positions, before the loop
    stacked = ops.stack([time_major(inputs), time_major(backward_inputs)], axis=1)
    # one matmul per direction over all (position, sentence) rows: no broadcast over positions
    projected = (ops.einsum("tdbm,dmk->tdbk", stacked, cast_weight(layer.kernel, inputs))
                 + cast_weight(layer.bias, inputs))  # (time, 2, batch, 3n)
    units = layer.recurrent_kernel.shape[-1]
    states = gru_states(projected, ops.zeros((2, ops.shape(inputs)[0], units), inputs.dtype),
                        cast_weight(layer.gate_kernel, inputs), cast_weight(layer.recurrent_kernel, inputs),
                        training=training)  # (time, 2, batch, n)
    return stack_time(states[:, 0]), reverse_within_lengths(stack_time(states[:, 1]), lengths)


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class BidirectionalEncoder(keras.layers.Layer):
    """Embedding + bidirectional GRU: the annotations h_j = [h->_j ; h<-_j] (paper, section 3.2).

    Both directions read the same embedding E and are the paper's GRU (reset gate before the
    recurrent matmul, ``s = (1 - z) s + z s~``). Padding (id 0) is masked: the backward GRU starts
    at each sentence's own last token, and annotations at padding positions are zero.

    Why not ``keras.layers.Bidirectional(GRU(reset_after=False))``: that computes each input
    projection inside its time loop and runs the two directions as two loops. Here the input
    projections of both directions for all positions are one matmul before the loop (DESIGN §2),
    and one loop steps both directions at once (a batched matmul over the direction axis), which
    halves the sequential steps. The backward direction reads each sentence reversed within its
    own length (`bahdanau_tf.tensor_ops.reverse_within_lengths`), so no padding ever enters a
    recurrence. The weights are stacked over the direction axis: index 0 forward, 1 backward.

    Args:
        vocabulary_size: int, K_x.
        embedding_dim: int, m.
        units: int, n, the size of each direction (annotations have 2n).
        kernel_initializer, recurrent_initializer, bias_initializer, embeddings_initializer.
        embedding_dropout: float in [0, 1), dropout of the embedded source in training, one
            mask per sentence (`bahdanau_tf.regularization`); 0 (default) makes no seed
            generator.

    Call arguments:
        source_ids: int (batch, source_len), padded with 0.

    Returns:
        ``(annotations, mask)``: (batch, source_len, 2n) and bool (batch, source_len). The
        backward state at the first word, h<-_1, is ``annotations[:, 0, n:]``.

    Example:

    >>> encoder = BidirectionalEncoder(vocabulary_size=10, embedding_dim=4, units=3)
    >>> annotations, mask = encoder(np.array([[4, 5, 2, 0]]))
    >>> tuple(annotations.shape), ops.convert_to_numpy(mask).tolist()
    ((1, 4, 6), [[True, True, True, False]])
    """

    def __init__(
        self,
        vocabulary_size: int,
        embedding_dim: int,
        units: int,
        kernel_initializer: str | keras.initializers.Initializer | None = "glorot_uniform",
        recurrent_initializer: str | keras.initializers.Initializer | None = None,
        bias_initializer: str | keras.initializers.Initializer | None = "zeros",
        embeddings_initializer: str | keras.initializers.Initializer | None = "uniform",
        embedding_dropout: float = 0.0,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.embedding_dropout = check_rates(embedding_dropout=embedding_dropout)["embedding_dropout"]
        if self.embedding_dropout:
            self.seed_generator = keras.random.SeedGenerator(name="dropout_seed")
        self.vocabulary_size = int(vocabulary_size)
        self.embedding_dim = int(embedding_dim)
        self.units = int(units)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer or BlockOrthogonal())
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        # === Layers ===
        self.embedding = keras.layers.Embedding(
            self.vocabulary_size,
            self.embedding_dim,
            embeddings_initializer=own_draw(self.embeddings_initializer, self, "embedding"),
            dtype=self.dtype_policy,
            name="embedding",
        )

    def build(self, source_shape: tuple = None) -> None:
        n, m = self.units, self.embedding_dim
        self.embedding.build((None, None))
        self.kernel = _add_weight(self, "kernel", (2, m, 3 * n), self.kernel_initializer)
        self.gate_kernel = _add_weight(self, "gate_kernel", (2, n, 2 * n), self.recurrent_initializer)
        self.recurrent_kernel = _add_weight(self, "recurrent_kernel", (2, n, n), self.recurrent_initializer)
        self.bias = _add_weight(self, "bias", (2, 1, 3 * n), self.bias_initializer)
        self.built = True

    def call(self, source_ids: Tensor, training: bool = False) -> tuple:
        mask = ops.not_equal(source_ids, PAD_ID)
        lengths = ops.sum(ops.cast(mask, "int32"), axis=1)
        embedded = self.embedding(source_ids)  # (batch, source_len, m)
        if training and self.embedding_dropout:
            embedded = sequence_dropout(embedded, self.embedding_dropout, self.seed_generator)
        forward, backward = bidirectional_gru(self, embedded, lengths, training)
        annotations = ops.concatenate([forward, backward], axis=-1)
        # positions past each sentence's end hold states of no word: zero them
        return annotations * ops.cast(mask, annotations.dtype)[:, :, None], mask

    def get_config(self) -> dict:
        config = {
            "vocabulary_size": self.vocabulary_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            "embedding_dropout": self.embedding_dropout,
        }
        return {**super().get_config(), **config}


__all__ = [
    "bidirectional_gru",
    "BahdanauAttention",
    "ConditionalGRUCell",
    "AttentionGRUCell",
    "MaxoutReadout",
    "BidirectionalEncoder",
    "gru_step",
    "masked_softmax",
    "stack_time",
    "time_major",
    "weights_read_once",
]
