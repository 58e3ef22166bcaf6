"""The paper's building blocks as Keras 3 layers, in ``keras.ops`` (every Keras backend).

Bahdanau, Cho & Bengio (2015), section 3 and appendix A:

- `BahdanauAttention`: the alignment model, equations (5)-(6) (plus Luong's scores as options),
  `bahdanau_tf.models.attention`'s, here with the layers that use it.
- `ConditionalGRUCell`: a GRU whose gates also read a context vector c (Cho et al. 2014a).
- `AttentionGRUCell`: the RNNsearch decoder cell, attention + conditional GRU, one step.
- `MaxoutReadout`: the deep output with one maxout layer and the vocabulary projection.
- `BidirectionalEncoder`: embedding + bidirectional GRU giving the annotations h_j.

The recurrent matrices start as the paper's (appendix B.1): `bahdanau_tf.models.initializers`'
`BlockOrthogonal`. The GRU step (`gru_step`) and its backward step are
`bahdanau_tf.models.recurrence`'s; a decoder cell's step and backward step are the cell's own
(`AttentionGRUCell.step`, `AttentionGRUCell.step_backward`); a training pass on TensorFlow
runs the loops of `bahdanau_tf.models.backprop`, whose backward pass is written out, and every other
pass scans the steps.

Every layer casts its float32 variables to the dtype of its inputs, so the same code runs in
float32 and under the ``mixed_bfloat16`` / ``mixed_float16`` policies and also when a method other
than ``call`` (e.g. ``project_inputs``) is used from inside a decoding loop. Attention softmaxes
are computed in float32. The same weights give the same numbers on TensorFlow, JAX and PyTorch;
`bahdanau_tf.models.tensor_ops` holds the two operations that take a TensorFlow-specific form there.
"""

from typing import Any, NamedTuple

import keras
from keras import ops

import bahdanau_tf.models.recurrence as recurrence
from bahdanau_tf.models.attention import BahdanauAttention
from bahdanau_tf.models.decoder_cell import (BackwardStep, DecoderCell, LoopWeights, Memory, Step,
                                             written_out_loops)
from bahdanau_tf.models.initializers import BlockOrthogonal, add_own_weight, own_draw
from bahdanau_tf.models.recurrence import gru_gates, gru_step, gru_step_gradient, mix, read_gradient, through_mask
from bahdanau_tf.models.regularization import check_rates, sequence_dropout
from bahdanau_tf.special_tokens import PAD_ID
from bahdanau_tf.models.tensor_ops import (Tensor, cast_weight, masked_softmax, project,
                                    reverse_within_lengths, stack_time, time_major, weights_read_once)


def gru_states(projected: Tensor, initial_state: Tensor, gate_kernel: Tensor, recurrent_kernel: Tensor,
               recurrent_mask: Tensor | None = None, training: bool = False) -> Tensor:
    """Every state of the GRU over ``projected`` (time, ..., 3n): (time, ..., n).

    Args: as `recurrence.gru_step`'s, with a leading time axis on ``projected``;
    ``initial_state`` (..., n). A training pass on TensorFlow runs `bahdanau_tf.models.backprop`'s
    loop, whose backward pass is written out; otherwise the steps are scanned
    (`recurrence.scanned_gru_states`). The states are the same either way.
    """
    backprop = written_out_loops(training)
    function = recurrence.scanned_gru_states if backprop is None else backprop.gru_states
    return function(projected, initial_state, gate_kernel, recurrent_kernel, recurrent_mask)


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
        self.kernel = add_own_weight(self, "kernel", (int(input_dim), 3 * units), self.kernel_initializer)
        self.context_kernel = add_own_weight(
            self, "context_kernel", (int(context_dim), 3 * units), self.kernel_initializer
        )
        # [U_z | U_r] and U are separate weights so no step slices a variable
        self.gate_kernel = add_own_weight(self, "gate_kernel", (units, 2 * units), self.recurrent_initializer)
        self.recurrent_kernel = add_own_weight(self, "recurrent_kernel", (units, units), self.recurrent_initializer)
        self.bias = add_own_weight(self, "bias", (3 * units,), self.bias_initializer)
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
        `bahdanau_tf.models.backprop.gru_states` (`gru_states`)."""
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
class AttentionGRUCell(DecoderCell):
    """The RNNsearch decoder cell: attention over the annotations, then the conditional GRU.

    One step (paper, section 3.1 and appendix A.2.2):

        c_i = sum_j alpha_ij h_j,  alpha_i = softmax(v_a^T tanh(W_a s_{i-1} + U_a h_j))
        s_i = GRU(E y_{i-1}, s_{i-1}, c_i)     # c_i in all three gates

    A `bahdanau_tf.models.decoder_cell.DecoderCell`: the step is written once, `step`, on the
    memory `prepare` forms once per sentence (the products C h_j, the keys, the mask), and
    everything that steps the cell runs it: the Keras call, the search
    (`bahdanau_tf.models.RNNSearch.decode_step`) and teacher forcing (`sequence`: scanned, or in
    a training pass on TensorFlow the loop of `bahdanau_tf.models.backprop.decoder_states`,
    which runs `step_backward`, written beside it). C is the GRU's ``context_kernel``.

    Args:
        units: int, n, the decoder state size.
        attention_units: int, n', the alignment model's hidden size.
        score: attention score, ``"additive"`` (the paper) or ``"general"`` (Luong).
        kernel_initializer, recurrent_initializer, bias_initializer: of the GRU
            (see `ConditionalGRUCell`); ``bias_initializer`` also of the keys' bias.
        attention_initializer: of W_a and U_a; ``score_initializer``: of v_a.

    Call arguments and returns: `DecoderCell`'s; ``memory`` from `prepare`, ``projected_inputs``
    (batch, 3 * units). With ``recurrent_mask``, s_{i-1} times the mask is what the attention
    query and the GRU's recurrent matmuls read (`gru_step`).

    Example:

    >>> cell = AttentionGRUCell(4, attention_units=3)
    >>> cell.build(input_dim=2, memory_dim=6)
    >>> memory = cell.prepare(ops.ones([1, 5, 6]), np.array([[True] * 3 + [False] * 2]))
    >>> s, c, alpha = cell(cell.project_inputs(ops.ones([1, 2])), ops.zeros([1, 4]), memory)
    >>> [round(float(a), 3) for a in alpha[0]]
    [0.333, 0.333, 0.333, 0.0, 0.0]
    """

    class Weights(NamedTuple):
        """The step's weights by role: a search's (W_a and [U_z | U_r] apart) or a training
        loop's (`fuse`: both in ``read_kernel``, those two None)."""

        query_kernel: Tensor | None  # W_a (n, n')
        score_vector: Tensor | None  # v_a (n',); None with the general score
        gate_kernel: Tensor | None  # [U_z | U_r] (n, 2n)
        recurrent_kernel: Tensor  # U (n, n)
        read_kernel: Tensor | None = None  # [W_a | U_z | U_r] (n, n' + 2n): both read s_{i-1}

    class Record(NamedTuple):
        """What `step` keeps for `step_backward`: the query W_a s_{i-1}, the GRU's gates and
        candidate."""

        query: Tensor
        z: Tensor
        r: Tensor
        candidate: Tensor

    class StepGradients(NamedTuple):
        """`step_backward`'s per-step gradients: d of the projected inputs, of the query."""

        inputs: Tensor
        query: Tensor

        @property
        def products_read(self) -> Tensor:
            """d C c_i: the inputs' projections and C c_i enter one sum."""
            return self.inputs

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
        super().__init__(units, attention_units, score=score, attention_initializer=attention_initializer,
                         score_initializer=score_initializer, bias_initializer=bias_initializer, **kwargs)
        # === Layers ===
        self.gru = ConditionalGRUCell(
            units,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            dtype=self.dtype_policy,
            name="gru",
        )

    def build(self, input_dim: int, memory_dim: int) -> None:
        super().build(input_dim, memory_dim)
        self.gru.build(input_dim=input_dim, context_dim=memory_dim)
        self.built = True

    def project_inputs(self, inputs: Tensor) -> Tensor:
        return self.gru.project_inputs(inputs)

    def project_context(self, context: Tensor) -> Tensor:
        """The GRU's [C_z; C_r; C] c, for c_i or the annotations h_j: (..., 3 * units)."""
        return self.gru.project_context(context)

    def loop_weights(self) -> LoopWeights:
        """The memory's (C: the GRU's ``context_kernel``) and the step's: the attention's W_a and
        v_a, the GRU's ``gate_kernel`` and ``recurrent_kernel``."""
        score, gru = self.attention.score_weights(), self.gru
        return LoopWeights(self.memory_weights(gru.context_kernel),
                           AttentionGRUCell.Weights(score["query_kernel"], score.get("score_vector"),
                                                    gru.gate_kernel, gru.recurrent_kernel))

    # === The step ===

    def step(self, projected_inputs: Tensor, state: Any, memory: Memory, weights: Weights,
             recurrent_mask: Tensor | None = None, grouped: bool = False) -> Step:
        """One step: alpha_i from the query W_a s_{i-1}, C c_i read off the products, the GRU.

        Args:
            projected_inputs: (batch, 3n), `project_inputs(E y_{i-1})`.
            state: (batch, n) s_{i-1}, or ``(s_{i-1}, W_a s_{i-1})`` as a search carries it
                (`decoding_state`).
            memory: `prepare`'s.
            weights: ``Weights``, `step_weights_as`' or `fuse`'s.
            recurrent_mask: optional (batch, n), recurrent dropout (`gru_step`); the query
                reads s_{i-1} through it too.
            grouped: as in `BahdanauAttention.attend`.

        Returns:
            `Step`: s_i (batch, n), alpha_i float32 (batch, source_len), the ``Record``, and
            the ``readout_context``, what the step read off the products' columns past C h_j's.
        """
        h_tm1, query = state if isinstance(state, (tuple, list)) else (state, None)
        read = h_tm1 if recurrent_mask is None else h_tm1 * recurrent_mask
        recurrent_gates = None
        if query is None and weights.read_kernel is not None:  # W_a and [U_z | U_r] in one matmul
            query, recurrent_gates = ops.split(ops.matmul(read, weights.read_kernel), [self.attention.units], -1)
        elif query is None:
            query = ops.matmul(read, weights.query_kernel)
        alpha, products_read = self.attend(query, memory, weights.score_vector, grouped)
        z, r, candidate = gru_gates(projected_inputs + products_read[:, : 3 * self.units], h_tm1,
                                    weights.gate_kernel, weights.recurrent_kernel, recurrent_mask, recurrent_gates)
        return Step(mix(h_tm1, z, candidate), alpha, self.Record(query, z, r, candidate),
                    products_read[:, 3 * self.units :])

    def decoding_state(self, state: Tensor) -> tuple:
        """s as a search carries it: ``(s, W_a s)``, the next step's query computed as soon as s
        is (`bahdanau_tf.models.RNNSearch.decoding_state` says why)."""
        return (state, self.attention.project_query(state))

    # === The step backwards ===

    def fuse(self, weights: Weights) -> Weights:
        """W_a and [U_z | U_r] read s_{i-1}: one ``read_kernel`` [W_a | U_z | U_r]."""
        return weights._replace(read_kernel=ops.concatenate([weights.query_kernel, weights.gate_kernel], axis=-1),
                                query_kernel=None, gate_kernel=None)

    def step_backward(self, d_state: Tensor, d_alpha: Tensor, h_tm1: Tensor, alpha: Tensor, record: Record,
                      memory: Memory, transposed: Weights, recurrent_mask: Tensor | None = None) -> BackwardStep:
        """`step` backwards (additive score), from the gradients of s_i and alpha_i.

        Args:
            d_state: (batch, n); d_alpha: float32 (batch, source_len), with what c_i's gradient
                gives it. h_tm1, alpha, record: the step's s_{i-1}, alpha_i and ``Record``.
            memory: `prepare`'s. transposed: `fuse`'s weights, each matrix transposed
                (`decoder_cell.transposed_matrices`).
        """
        d_x, d_mix, d_read = gru_step_gradient(d_state, h_tm1, record.z, record.r, record.candidate,
                                               transposed.recurrent_kernel, recurrent_mask)
        d_keys, d_score_vector, d_query = self.attention.align_gradient(d_alpha, d_x, alpha, record.query,
                                                                        memory, transposed.score_vector)
        d_read = read_gradient(d_x, d_read, transposed.read_kernel, more=d_query)
        return BackwardStep(through_mask(d_mix, d_read, recurrent_mask), d_keys, d_score_vector,
                            self.StepGradients(d_x, d_query))

    def loop_gradients(self, reads: Tensor, records: Record, steps: StepGradients, d_score_vector: Tensor,
                       recurrent_mask: Tensor | None = None) -> Weights:
        """The gradients of the weights only the step's GRU and query read, after a training
        loop, each one matmul over all steps: from what the steps' matmuls read of s_{i-1}
        (time, batch, n), the stacked records and `step_backward`'s stacked gradients."""
        d_inputs = steps.inputs
        d_query_kernel, d_gate = ops.split(
            recurrence.kernel_gradient(reads, ops.concatenate([steps.query, d_inputs[..., : 2 * self.units]], -1)),
            [self.attention.units], -1)
        d_recurrent = recurrence.kernel_gradient(records.r * reads, d_inputs[..., 2 * self.units :])
        return self.Weights(d_query_kernel, d_score_vector, d_gate, d_recurrent)

    def get_config(self) -> dict:
        gru_config = self.gru.get_config()
        config = {
            "kernel_initializer": gru_config["kernel_initializer"],
            "recurrent_initializer": gru_config["recurrent_initializer"],
            "bias_initializer": gru_config["bias_initializer"],
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
            return add_own_weight(self, name, (int(rows), cols), self.kernel_initializer)

        self.state_kernel = kernel("state_kernel", state_dim, pre)  # U_o
        self.embedding_kernel = kernel("embedding_kernel", embedding_dim, pre)  # V_o
        self.context_kernel = kernel("context_kernel", context_dim, pre)  # C_o
        self.bias = add_own_weight(self, "bias", (pre,), self.bias_initializer)
        if self.tie_embeddings:
            shape = tuple(self._tied_embeddings().shape)
            if shape != (self.vocabulary_size, self.maxout_dim):
                raise ValueError(f"Tied embeddings need a ({self.vocabulary_size}, {self.maxout_dim}) "
                                 f"target embedding (|V|, l), got {shape}.")
        else:
            self.output_kernel = kernel("output_kernel", self.maxout_dim, self.vocabulary_size)  # W_o
        self.output_bias = add_own_weight(self, "output_bias", (self.vocabulary_size,), self.bias_initializer)
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
    own length (`bahdanau_tf.models.tensor_ops.reverse_within_lengths`), so no padding ever enters a
    recurrence. The weights are stacked over the direction axis: index 0 forward, 1 backward.

    Args:
        vocabulary_size: int, K_x.
        embedding_dim: int, m.
        units: int, n, the size of each direction (annotations have 2n).
        kernel_initializer, recurrent_initializer, bias_initializer, embeddings_initializer.
        embedding_dropout: float in [0, 1), dropout of the embedded source in training, one
            mask per sentence (`bahdanau_tf.models.regularization`); 0 (default) makes no seed
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
        self.kernel = add_own_weight(self, "kernel", (2, m, 3 * n), self.kernel_initializer)
        self.gate_kernel = add_own_weight(self, "gate_kernel", (2, n, 2 * n), self.recurrent_initializer)
        self.recurrent_kernel = add_own_weight(self, "recurrent_kernel", (2, n, n), self.recurrent_initializer)
        self.bias = add_own_weight(self, "bias", (2, 1, 3 * n), self.bias_initializer)
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
    "gru_states",
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
