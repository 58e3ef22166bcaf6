"""Nematus's conditional GRU decoder cell (Sennrich et al. 2017), a sibling of `bahdanau_tf.models.layers`.

Sennrich et al., "Nematus: a Toolkit for Neural Machine Translation" (EACL 2017), section 2: the
decoder of the RNN systems that led WMT 2016-2017. In the paper's cell (`layers.AttentionGRUCell`)
the attention for y_i is queried with s_{i-1}, which has not yet read y_{i-1}; here a first GRU
reads y_{i-1} first, and its state asks where to look:

    s'_i = GRU_1(E y_{i-1}, s_{i-1})                                 # no context
    alpha_i = softmax_j(v_a^T tanh(W_a s'_i + U_a h_j)),  c_i = sum_j alpha_ij h_j
    s_i = GRU_2(c_i, s'_i)                                           # no word

Both GRUs are the paper's (reset gate before the recurrent matmul, `recurrence.gru_step`). The name
"conditional" is Nematus's (``gru_cond``); it is not `layers.ConditionalGRUCell`, the paper's
single GRU whose gates read c_i (Cho et al. 2014a). The model option is
``RNNSearch(decoder="cgru")`` (presets ``rnnsearch-cgru-small``, ``rnnsearch-cgru-tiny``); the
readout is unchanged: it reads s_i, E y_{i-1} and c_i.
"""

import keras

from keras import ops

import bahdanau_tf.models.recurrence as recurrence
from bahdanau_tf.models.initializers import add_own_weight
from bahdanau_tf.models.layers import AttentionGRUCell
from bahdanau_tf.models.recurrence import gru_gates, gru_step_gradient, mix, read_gradient, through_mask
from bahdanau_tf.models.tensor_ops import Tensor


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class CGRUAttentionCell(AttentionGRUCell):
    """The conditional GRU decoder cell: GRU on the previous word, attention, GRU on the context.

    One step (Sennrich et al. 2017, section 2):

        s'_i = GRU_1(E y_{i-1}, s_{i-1})
        c_i, alpha_i = attention(query s'_i, annotations h_j)
        s_i = GRU_2(c_i, s'_i)

    The paper's cell's arguments, weights and interface, so `RNNSearch` runs either cell
    without asking which: `project_inputs` (E y_{i-1}'s projections, for all steps before the
    loop), `prepare` (the products W' h_j and the keys, once per sentence), `step` (what the
    call, the search and teacher forcing run), `step_backward` beside it (what a training pass
    on TensorFlow runs backwards, `bahdanau_tf.models.backprop.decoder_states`) and `sequence` over all
    steps. The inherited ``gru`` holds what plays the same role in both cells: the kernel of
    E y_{i-1} (with GRU_1's recurrent matrices and bias) and ``context_kernel``, the kernel of
    c_i, here GRU_2's input kernel; this cell adds GRU_2's recurrent matrices and bias
    (``context_gate_kernel``, ``context_recurrent_kernel``, ``context_bias``). The ``gru``
    layer's own call (one GRU reading both) is not used.

    Because the query s'_i reads y_{i-1}, it cannot be computed at the end of the step
    before, as the search does for the paper's cell (`decoding_state`).

    Args: as `bahdanau_tf.models.layers.AttentionGRUCell`'s; ``recurrent_initializer`` is also
    GRU_2's, ``bias_initializer`` also GRU_2's bias's.

    Call arguments:
        projected_inputs: (batch, 3 * units), `project_inputs(E y_{i-1})`.
        h_tm1: (batch, units), s_{i-1}.
        memory: dict from `prepare` (``annotations``, ``products``, ``keys``, ``mask``).
        grouped: bool, the memory holds one row per group of consecutive rows of ``h_tm1``
            (`BahdanauAttention.attend`).
        recurrent_mask: optional (batch, units), recurrent dropout: one mask per sequence,
            applied where each GRU's recurrent matmuls read its state (`recurrence.gru_step`).

    Returns:
        ``(s_i, c_i, alpha_i)``: (batch, units), (batch, 2n), float32 (batch, source_len).

    Example:

    >>> cell = CGRUAttentionCell(4, attention_units=3)
    >>> cell.build(input_dim=2, memory_dim=6)
    >>> memory = cell.prepare(ops.ones([1, 5, 6]), np.array([[True] * 3 + [False] * 2]))
    >>> s, c, alpha = cell(cell.project_inputs(ops.ones([1, 2])), ops.zeros([1, 4]), memory)
    >>> tuple(s.shape), [round(float(a), 3) for a in alpha[0]]
    ((1, 4), [0.333, 0.333, 0.333, 0.0, 0.0])
    """

    def build(self, input_dim: int, memory_dim: int) -> None:
        super().build(input_dim, memory_dim)
        n, gru = self.units, self.gru
        # GRU_2's recurrence on s'_i (its input kernel is gru.context_kernel)
        self.context_gate_kernel = add_own_weight(self, "context_gate_kernel", (n, 2 * n), gru.recurrent_initializer)
        self.context_recurrent_kernel = add_own_weight(self, "context_recurrent_kernel", (n, n),
                                                       gru.recurrent_initializer)
        self.context_bias = add_own_weight(self, "context_bias", (3 * n,), gru.bias_initializer)

    #: the names of `step`'s record that `step_backward` reads: the query W_a s'_i, GRU_1's
    #: gates and candidate, s'_i, GRU_2's
    RECORDED = ("query", "z", "r", "candidate", "intermediate", "second_z", "second_r", "second_candidate")
    #: `step_backward`'s per-step gradients: d of GRU_1's projected inputs, of GRU_2's (W' c_i
    #: + bias), of the query
    STEP_GRADIENTS = ("inputs", "context", "query")

    def loop_weights(self) -> dict:
        """The weights a step reads, by name: the paper cell's (U_a, W_a, v_a, GRU_1's, and W',
        GRU_2's input kernel, as ``context_kernel``) and GRU_2's own."""
        return {**super().loop_weights(), "context_bias": self.context_bias,
                "second_gate_kernel": self.context_gate_kernel,
                "second_recurrent_kernel": self.context_recurrent_kernel}

    def _second_reads(self, intermediate, weights, recurrent_mask):
        """What reads s'_i, through the recurrent mask (as Nematus's query reads the dropped-out
        state): ``(query W_a s'_i, [U'_z | U'_r] s'_i)``; one matmul by a ``read_kernel``
        [W_a | U'_z | U'_r] when the weights hold one (a training loop's)."""
        read = intermediate if recurrent_mask is None else intermediate * recurrent_mask
        if "read_kernel" in weights:
            return ops.split(ops.matmul(read, weights["read_kernel"]), [self.attention.units], -1)
        return ops.matmul(read, weights["query_kernel"]), ops.matmul(read, weights["second_gate_kernel"])

    def step(self, projected_inputs: Tensor, state: Tensor, memory: dict, weights: dict,
             recurrent_mask: Tensor | None = None, grouped: bool = False) -> tuple:
        """One step: s'_i = GRU_1(E y_{i-1}, s_{i-1}), alpha_i from the query W_a s'_i, W' c_i
        read off the products, s_i = GRU_2(c_i, s'_i).

        Args: as the paper cell's `AttentionGRUCell.step`, but ``state`` is s_{i-1} only (the
        query reads y_{i-1}: no step before can compute it); a ``read_kernel`` [W_a | U'_z |
        U'_r] replaces ``query_kernel`` and ``second_gate_kernel`` (both read s'_i through the
        recurrent mask: one matmul).

        Returns:
            ``(s_i, alpha_i, record)``; the record holds ``RECORDED`` and ``readout_context``.
        """
        z, r, candidate = gru_gates(projected_inputs, state, weights["gate_kernel"], weights["recurrent_kernel"],
                                    recurrent_mask)
        intermediate = mix(state, z, candidate)
        query, recurrent_gates = self._second_reads(intermediate, weights, recurrent_mask)
        alpha, products_read = self._attend(query, memory, weights, grouped)
        second = gru_gates(products_read[:, : 3 * self.units] + weights["context_bias"], intermediate,
                           None, weights["second_recurrent_kernel"], recurrent_mask,
                           recurrent_gates)
        record = {"query": query, "z": z, "r": r, "candidate": candidate, "intermediate": intermediate,
                  "second_z": second[0], "second_r": second[1], "second_candidate": second[2],
                  "readout_context": products_read[:, 3 * self.units :]}
        return mix(intermediate, second[0], second[2]), alpha, record

    def decoding_state(self, state: Tensor) -> Tensor:
        """s as it is: the query, W_a s'_i, reads y_{i-1}, which the step before does not know."""
        return state

    def loop_step_weights(self, weights: dict, recurrent_mask: Tensor | None = None) -> dict:
        """The weights `step` reads in a training loop: W_a and [U'_z | U'_r] read s'_i (through
        the recurrent mask, if any), one ``read_kernel``."""
        names = ("gate_kernel", "recurrent_kernel", "score_vector", "context_bias", "second_recurrent_kernel")
        return {**{name: weights[name] for name in names},
                "read_kernel": ops.concatenate([weights["query_kernel"], weights["second_gate_kernel"]], axis=-1)}

    def step_backward(self, d_state: Tensor, d_alpha: Tensor, h_tm1: Tensor, alpha: Tensor, record: dict,
                      memory: dict, weights: dict, recurrent_mask: Tensor | None = None) -> tuple:
        """`step` backwards: GRU_2, the attention, then GRU_1; arguments and result as the paper
        cell's `AttentionGRUCell.step_backward`."""
        intermediate = record["intermediate"]
        d_second, d_mix, d_read = gru_step_gradient(d_state, intermediate, record["second_z"], record["second_r"],
                                                    record["second_candidate"], weights["second_recurrent_kernel"],
                                                    recurrent_mask)
        d_keys, d_score_vector, d_query = self.attention.align_gradient(d_alpha, d_second, alpha, record["query"],
                                                                        memory, weights["score_vector"])
        # [W_a | U'_z | U'_r] read s'_i through the mask: one matmul
        d_intermediate = through_mask(d_mix, read_gradient(d_second, d_read, weights["read_kernel"], more=d_query),
                                      recurrent_mask)
        d_first, d_mix, d_read = gru_step_gradient(d_intermediate, h_tm1, record["z"], record["r"],
                                                   record["candidate"], weights["recurrent_kernel"], recurrent_mask)
        d_read = read_gradient(d_first, d_read, weights["gate_kernel"])
        step_gradients = {"inputs": d_first, "context": d_second, "query": d_query}
        return through_mask(d_mix, d_read, recurrent_mask), d_keys, d_score_vector, step_gradients

    def loop_gradients(self, weights: dict, reads: Tensor, records: dict, steps: dict,
                       recurrent_mask: Tensor | None = None) -> dict:
        """The gradients of W_a, GRU_2's bias and both GRUs' recurrent matrices after a training
        loop, as the paper cell's `AttentionGRUCell.loop_gradients`."""
        intermediates = records["intermediate"]
        intermediate_reads = intermediates if recurrent_mask is None else intermediates * recurrent_mask
        d_context = steps["context"]
        d_gate, d_recurrent = recurrence.gru_weight_gradients(reads, records["r"], steps["inputs"])
        d_second_gate, d_second_recurrent = recurrence.gru_weight_gradients(intermediate_reads, records["second_r"],
                                                                            d_context)
        return {"query_kernel": recurrence.kernel_gradient(intermediate_reads, steps["query"]),
                "context_bias": ops.cast(ops.sum(ops.cast(d_context, "float32"), axis=(0, 1)), d_context.dtype),
                "gate_kernel": d_gate, "recurrent_kernel": d_recurrent,
                "second_gate_kernel": d_second_gate, "second_recurrent_kernel": d_second_recurrent}


__all__ = ["CGRUAttentionCell"]
