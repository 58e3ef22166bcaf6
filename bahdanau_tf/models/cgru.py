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

from typing import NamedTuple

import keras
from keras import ops

import bahdanau_tf.models.recurrence as recurrence
from bahdanau_tf.models.decoder_cell import BackwardStep, LoopWeights, Memory, Step
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

    The paper's cell's arguments and weights, and the decoder cell interface
    (`bahdanau_tf.models.decoder_cell.DecoderCell`), so `RNNSearch` runs either cell without
    asking which: `project_inputs` (E y_{i-1}'s projections, for all steps before the loop),
    `prepare` (the products W' h_j and the keys, once per sentence), `step` (what the call, the
    search and teacher forcing run), `step_backward` beside it (what a training pass on
    TensorFlow runs backwards, `bahdanau_tf.models.backprop.decoder_states`) and `sequence` over
    all steps. The inherited ``gru`` holds what plays the same role in both cells: the kernel
    of E y_{i-1} (with GRU_1's recurrent matrices and bias) and ``context_kernel``, the kernel
    of c_i (the memory's C), here GRU_2's input kernel; this cell adds GRU_2's recurrent
    matrices and bias, which a step reads as ``second_gate_kernel``, ``second_recurrent_kernel``
    and ``second_bias`` and which are saved as ``context_gate_kernel``,
    ``context_recurrent_kernel`` and ``context_bias`` (`SECOND_GRU`, the one mapping). The
    ``gru`` layer's own call (one GRU reading both) is not used.

    Because the query s'_i reads y_{i-1}, it cannot be computed at the end of the step
    before, as the search does for the paper's cell (`decoding_state`).

    Args: as `bahdanau_tf.models.layers.AttentionGRUCell`'s; ``recurrent_initializer`` is also
    GRU_2's, ``bias_initializer`` also GRU_2's bias's.

    Call arguments and returns: `DecoderCell`'s; ``projected_inputs`` (batch, 3 * units). With
    ``recurrent_mask``, one mask per sequence, applied where each GRU's recurrent matmuls and
    the query read its state (`recurrence.gru_step`).

    Example:

    >>> cell = CGRUAttentionCell(4, attention_units=3)
    >>> cell.build(input_dim=2, memory_dim=6)
    >>> memory = cell.prepare(ops.ones([1, 5, 6]), np.array([[True] * 3 + [False] * 2]))
    >>> s, c, alpha = cell(cell.project_inputs(ops.ones([1, 2])), ops.zeros([1, 4]), memory)
    >>> tuple(s.shape), [round(float(a), 3) for a in alpha[0]]
    ((1, 4), [0.333, 0.333, 0.333, 0.0, 0.0])
    """

    #: GRU_2's own weights: the role a step reads each by (a field of ``Weights``) -> the
    #: variable it is (its name and the cell's attribute: what .keras files and checkpoints hold)
    SECOND_GRU = {"second_gate_kernel": "context_gate_kernel", "second_recurrent_kernel": "context_recurrent_kernel",
                  "second_bias": "context_bias"}

    class Weights(NamedTuple):
        """The step's weights by role: a search's, or a training loop's (`fuse`: W_a and
        [U'_z | U'_r] in ``read_kernel``, those two None). GRU_2's input kernel W' is the
        memory's C; its other weights are `SECOND_GRU`'s."""

        query_kernel: Tensor | None  # W_a (n, n'), reads s'_i
        score_vector: Tensor | None  # v_a (n',)
        gate_kernel: Tensor  # GRU_1's [U_z | U_r] (n, 2n)
        recurrent_kernel: Tensor  # GRU_1's U (n, n)
        second_gate_kernel: Tensor | None  # GRU_2's [U'_z | U'_r] (n, 2n)
        second_recurrent_kernel: Tensor  # GRU_2's U' (n, n)
        second_bias: Tensor  # GRU_2's bias (3n,)
        read_kernel: Tensor | None = None  # [W_a | U'_z | U'_r] (n, n' + 2n): both read s'_i

    class Record(NamedTuple):
        """What `step` keeps for `step_backward`: the query W_a s'_i, GRU_1's gates and
        candidate, s'_i, GRU_2's."""

        query: Tensor
        z: Tensor
        r: Tensor
        candidate: Tensor
        intermediate: Tensor
        second_z: Tensor
        second_r: Tensor
        second_candidate: Tensor

    class StepGradients(NamedTuple):
        """`step_backward`'s per-step gradients: d of GRU_1's projected inputs, of GRU_2's
        (W' c_i + bias), of the query."""

        inputs: Tensor
        context: Tensor
        query: Tensor

        @property
        def products_read(self) -> Tensor:
            """d W' c_i, what GRU_2 read off the products."""
            return self.context

    def build(self, input_dim: int, memory_dim: int) -> None:
        super().build(input_dim, memory_dim)
        n, gru = self.units, self.gru
        # GRU_2's recurrence on s'_i (its input kernel is gru.context_kernel)
        shapes = {"second_gate_kernel": ((n, 2 * n), gru.recurrent_initializer),
                  "second_recurrent_kernel": ((n, n), gru.recurrent_initializer),
                  "second_bias": ((3 * n,), gru.bias_initializer)}
        for role, variable in self.SECOND_GRU.items():
            setattr(self, variable, add_own_weight(self, variable, *shapes[role]))

    def loop_weights(self) -> LoopWeights:
        """The paper cell's (C is W', GRU_2's input kernel; GRU_1's matrices) and GRU_2's own."""
        paper = super().loop_weights()
        second = {role: getattr(self, variable) for role, variable in self.SECOND_GRU.items()}
        return paper._replace(step=self.Weights(**paper.step._asdict(), **second))

    def _second_reads(self, intermediate, weights, recurrent_mask):
        """What reads s'_i, through the recurrent mask (as Nematus's query reads the dropped-out
        state): ``(query W_a s'_i, [U'_z | U'_r] s'_i)``; one matmul by the ``read_kernel``
        [W_a | U'_z | U'_r] of `fuse`'s weights."""
        read = intermediate if recurrent_mask is None else intermediate * recurrent_mask
        if weights.read_kernel is not None:
            return ops.split(ops.matmul(read, weights.read_kernel), [self.attention.units], -1)
        return ops.matmul(read, weights.query_kernel), ops.matmul(read, weights.second_gate_kernel)

    def step(self, projected_inputs: Tensor, state: Tensor, memory: Memory, weights: Weights,
             recurrent_mask: Tensor | None = None, grouped: bool = False) -> Step:
        """One step: s'_i = GRU_1(E y_{i-1}, s_{i-1}), alpha_i from the query W_a s'_i, W' c_i
        read off the products, s_i = GRU_2(c_i, s'_i).

        Args: as the paper cell's `AttentionGRUCell.step`, but ``state`` is s_{i-1} only (the
        query reads y_{i-1}: no step before can compute it).

        Returns:
            `Step`, with this cell's ``Record``.
        """
        z, r, candidate = gru_gates(projected_inputs, state, weights.gate_kernel, weights.recurrent_kernel,
                                    recurrent_mask)
        intermediate = mix(state, z, candidate)
        query, recurrent_gates = self._second_reads(intermediate, weights, recurrent_mask)
        alpha, products_read = self.attend(query, memory, weights.score_vector, grouped)
        second = gru_gates(products_read[:, : 3 * self.units] + weights.second_bias, intermediate,
                           None, weights.second_recurrent_kernel, recurrent_mask, recurrent_gates)
        record = self.Record(query, z, r, candidate, intermediate, *second)
        return Step(mix(intermediate, second[0], second[2]), alpha, record, products_read[:, 3 * self.units :])

    def decoding_state(self, state: Tensor) -> Tensor:
        """s as it is: the query, W_a s'_i, reads y_{i-1}, which the step before does not know."""
        return state

    def fuse(self, weights: Weights) -> Weights:
        """W_a and [U'_z | U'_r] read s'_i (through the recurrent mask, if any): one
        ``read_kernel``."""
        read_kernel = ops.concatenate([weights.query_kernel, weights.second_gate_kernel], axis=-1)
        return weights._replace(read_kernel=read_kernel, query_kernel=None, second_gate_kernel=None)

    def step_backward(self, d_state: Tensor, d_alpha: Tensor, h_tm1: Tensor, alpha: Tensor, record: Record,
                      memory: Memory, transposed: Weights, recurrent_mask: Tensor | None = None) -> BackwardStep:
        """`step` backwards: GRU_2, the attention, then GRU_1; arguments and result as the paper
        cell's `AttentionGRUCell.step_backward`."""
        intermediate = record.intermediate
        d_second, d_mix, d_read = gru_step_gradient(d_state, intermediate, record.second_z, record.second_r,
                                                    record.second_candidate, transposed.second_recurrent_kernel,
                                                    recurrent_mask)
        d_keys, d_score_vector, d_query = self.attention.align_gradient(d_alpha, d_second, alpha, record.query,
                                                                        memory, transposed.score_vector)
        # [W_a | U'_z | U'_r] read s'_i through the mask: one matmul
        d_intermediate = through_mask(d_mix, read_gradient(d_second, d_read, transposed.read_kernel, more=d_query),
                                      recurrent_mask)
        d_first, d_mix, d_read = gru_step_gradient(d_intermediate, h_tm1, record.z, record.r, record.candidate,
                                                   transposed.recurrent_kernel, recurrent_mask)
        d_read = read_gradient(d_first, d_read, transposed.gate_kernel)
        return BackwardStep(through_mask(d_mix, d_read, recurrent_mask), d_keys, d_score_vector,
                            self.StepGradients(d_first, d_second, d_query))

    def loop_gradients(self, reads: Tensor, records: Record, steps: StepGradients, d_score_vector: Tensor,
                       recurrent_mask: Tensor | None = None) -> Weights:
        """The gradients of W_a, GRU_2's bias and both GRUs' recurrent matrices after a training
        loop, as the paper cell's `AttentionGRUCell.loop_gradients`."""
        intermediates = records.intermediate
        intermediate_reads = intermediates if recurrent_mask is None else intermediates * recurrent_mask
        d_context = steps.context
        d_gate, d_recurrent = recurrence.gru_weight_gradients(reads, records.r, steps.inputs)
        d_second_gate, d_second_recurrent = recurrence.gru_weight_gradients(intermediate_reads, records.second_r,
                                                                            d_context)
        return self.Weights(query_kernel=recurrence.kernel_gradient(intermediate_reads, steps.query),
                            score_vector=d_score_vector, gate_kernel=d_gate, recurrent_kernel=d_recurrent,
                            second_gate_kernel=d_second_gate, second_recurrent_kernel=d_second_recurrent,
                            second_bias=ops.cast(ops.sum(ops.cast(d_context, "float32"), axis=(0, 1)),
                                                 d_context.dtype))

__all__ = ["CGRUAttentionCell"]
