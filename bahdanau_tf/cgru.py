"""Nematus's conditional GRU decoder cell (Sennrich et al. 2017), a sibling of `bahdanau_tf.layers`.

Sennrich et al., "Nematus: a Toolkit for Neural Machine Translation" (EACL 2017), section 2: the
decoder of the RNN systems that led WMT 2016-2017. In the paper's cell (`layers.AttentionGRUCell`)
the attention for y_i is queried with s_{i-1}, which has not yet read y_{i-1}; here a first GRU
reads y_{i-1} first, and its state asks where to look:

    s'_i = GRU_1(E y_{i-1}, s_{i-1})                                 # no context
    alpha_i = softmax_j(v_a^T tanh(W_a s'_i + U_a h_j)),  c_i = sum_j alpha_ij h_j
    s_i = GRU_2(c_i, s'_i)                                           # no word

Both GRUs are the paper's (reset gate before the recurrent matmul, `layers.gru_step`). The name
"conditional" is Nematus's (``gru_cond``); it is not `layers.ConditionalGRUCell`, the paper's
single GRU whose gates read c_i (Cho et al. 2014a). The model option is
``RNNSearch(decoder="cgru")`` (presets ``rnnsearch-cgru-small``, ``rnnsearch-cgru-tiny``); the
readout is unchanged: it reads s_i, E y_{i-1} and c_i.
"""

import keras

from bahdanau_tf import recurrence
from bahdanau_tf.initializers import own_draw
from bahdanau_tf.layers import AttentionGRUCell, gru_step
from bahdanau_tf.tensor_ops import Tensor, cast_weight


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class CGRUAttentionCell(AttentionGRUCell):
    """The conditional GRU decoder cell: GRU on the previous word, attention, GRU on the context.

    One step (Sennrich et al. 2017, section 2):

        s'_i = GRU_1(E y_{i-1}, s_{i-1})
        c_i, alpha_i = attention(query s'_i, annotations h_j)
        s_i = GRU_2(c_i, s'_i)

    The paper's cell's arguments, weights and interface, so `RNNSearch` runs either cell:
    `project_inputs` (E y_{i-1}'s projections, for all steps before the loop),
    `project_context` (what multiplies c_i, read off the annotations by the search), a call
    giving ``(s_i, c_i, alpha_i)``, and `sequence` over all steps (a training pass on
    TensorFlow runs `bahdanau_tf.recurrence.conditional_gru_states`, whose backward pass is
    written out). The inherited ``gru`` holds what plays the same role
    in both cells: the kernel of E y_{i-1} (with GRU_1's recurrent matrices and bias) and
    ``context_kernel``, the kernel of c_i, here GRU_2's input kernel; this cell adds GRU_2's
    recurrent matrices and bias (``context_gate_kernel``, ``context_recurrent_kernel``,
    ``context_bias``). The ``gru`` layer's own call (one GRU reading both) is not used.

    Because the query s'_i reads y_{i-1}, it cannot be computed at the end of the step
    before, as the search does for the paper's cell (`RNNSearch.decoding_state`).

    Args: as `bahdanau_tf.layers.AttentionGRUCell`'s; ``recurrent_initializer`` is also
    GRU_2's, ``bias_initializer`` also GRU_2's bias's.

    Call arguments:
        projected_inputs: (batch, 3 * units), `project_inputs(E y_{i-1})`.
        h_tm1: (batch, units), s_{i-1}.
        memory: dict from `prepare_memory` (``annotations``, ``keys``, ``mask``).
        grouped: bool, the memory holds one row per group of consecutive rows of ``h_tm1``
            (`BahdanauAttention.attend`).
        recurrent_mask: optional (batch, units), recurrent dropout: one mask per sequence,
            applied where each GRU's recurrent matmuls read its state (`layers.gru_step`).

    Returns:
        ``(s_i, c_i, alpha_i)``: (batch, units), (batch, 2n), float32 (batch, source_len).

    Example:

    >>> cell = CGRUAttentionCell(4, attention_units=3)
    >>> cell.build(input_dim=2, memory_dim=6)
    >>> memory = cell.prepare_memory(ops.ones([1, 5, 6]), np.array([[True] * 3 + [False] * 2]))
    >>> s, c, alpha = cell(cell.project_inputs(ops.ones([1, 2])), ops.zeros([1, 4]), memory)
    >>> tuple(s.shape), [round(float(a), 3) for a in alpha[0]]
    ((1, 4), [0.333, 0.333, 0.333, 0.0, 0.0])
    """

    def build(self, input_dim: int, memory_dim: int) -> None:
        super().build(input_dim, memory_dim)
        n, gru = self.units, self.gru

        def weight(name, shape, initializer):
            return self.add_weight(name=name, shape=shape, initializer=own_draw(initializer, self, name))

        # GRU_2's recurrence on s'_i (its input kernel is gru.context_kernel)
        self.context_gate_kernel = weight("context_gate_kernel", (n, 2 * n), gru.recurrent_initializer)
        self.context_recurrent_kernel = weight("context_recurrent_kernel", (n, n), gru.recurrent_initializer)
        self.context_bias = weight("context_bias", (3 * n,), gru.bias_initializer)

    def first_transition(self, projected_inputs: Tensor, h_tm1: Tensor,
                         recurrent_mask: Tensor | None = None) -> Tensor:
        """s'_i = GRU_1(E y_{i-1}, s_{i-1}), from `project_inputs`: (batch, units)."""
        return gru_step(projected_inputs, h_tm1, cast_weight(self.gru.gate_kernel, h_tm1),
                        cast_weight(self.gru.recurrent_kernel, h_tm1), recurrent_mask)

    def second_transition(self, projected_context: Tensor, intermediate: Tensor,
                          recurrent_mask: Tensor | None = None) -> Tensor:
        """s_i = GRU_2(c_i, s'_i), from `project_context(c_i)`: (batch, units)."""
        return gru_step(projected_context + cast_weight(self.context_bias, intermediate), intermediate,
                        cast_weight(self.context_gate_kernel, intermediate),
                        cast_weight(self.context_recurrent_kernel, intermediate), recurrent_mask)

    def call(self, projected_inputs: Tensor, h_tm1: Tensor, memory: dict, grouped: bool = False,
             recurrent_mask: Tensor | None = None) -> tuple:
        intermediate = self.first_transition(projected_inputs, h_tm1, recurrent_mask)
        context, weights = self.attention.attend(
            self.attention.project_query(intermediate), memory["annotations"], memory["keys"], memory["mask"],
            grouped=grouped,
        )
        state = self.second_transition(self.project_context(context), intermediate, recurrent_mask)
        return state, context, weights

    #: `sequence`'s loop in a training pass on TensorFlow, its backward pass written out
    written_out_loop = staticmethod(recurrence.conditional_gru_states)

    def loop_weights(self) -> dict:
        """The weights `written_out_loop` reads, by its names: the paper cell's (U_a, W_a, v_a,
        GRU_1's, and W', GRU_2's input kernel, as ``context_kernel``) and GRU_2's own."""
        return {**super().loop_weights(), "context_bias": self.context_bias,
                "second_gate_kernel": self.context_gate_kernel,
                "second_recurrent_kernel": self.context_recurrent_kernel}

    def step_on_products(self, projected_inputs: Tensor, h_tm1: Tensor, keys: Tensor, mask: Tensor,
                         products: Tensor) -> tuple:
        """One step that reads ``products``, linear maps of the annotations whose first 3n
        columns are `project_context`'s (W' c_i = sum_j alpha_ij W' h_j), instead of the
        annotations; ``keys`` and ``mask`` hold one row per group of consecutive rows of
        ``h_tm1`` (`BahdanauAttention.attend`).

        Returns:
            ``(s_i, alpha_i, rest)``: ``rest`` is sum_j alpha_ij of the columns past the first
            3n (the readout's C_o c_i in `RNNSearch.decode_step`).
        """
        intermediate = self.first_transition(projected_inputs, h_tm1)
        weights = self.attention.align(self.attention.project_query(intermediate), keys, mask, grouped=True)
        read = self.attention.read(weights, products, grouped=True)
        state = self.second_transition(read[:, : 3 * self.units], intermediate)
        return state, weights, read[:, 3 * self.units :]


__all__ = ["CGRUAttentionCell"]
