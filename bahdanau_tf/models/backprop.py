"""A training pass's loops on TensorFlow, their backward pass written out (``tf.custom_gradient``).

Loaded on the TensorFlow backend only, by whoever runs a training pass (`layers.gru_states`,
`decoder_cell.DecoderCell.sequence`); every other backend differentiates the scanned steps
automatically. Two loops, each one ``tf.custom_gradient``, the way cuDNN and the fast RNN
toolkits compute a recurrence's gradient:

- `gru_states`: the paper's GRU over precomputed input projections (the encoder's two
  directions, RNNencdec's decoder), its step and backward step `bahdanau_tf.models.recurrence`'s;
- `decoder_states`: any decoder cell over all steps of teacher forcing, driven through the
  interface `bahdanau_tf.models.decoder_cell` writes down, the cell's own ``prepare``,
  ``fuse``, ``step``, ``step_backward`` and ``loop_gradients`` (the paper's cell,
  `layers.AttentionGRUCell`; Nematus's conditional GRU, `cgru.CGRUAttentionCell`): this loop
  knows no cell's equations or weights, only the memory every cell reads (`Memory`, from the
  weights `MemoryWeights`).

The forward loop keeps the cell's ``Record`` (the gates z, r, the candidate s~, the attention
query, ...) and the attention weights; the backward loop runs, in
reverse, only the work that depends on the step after it: the gradient with respect to the
state, a few (batch, n) matmuls by transposed weights per step (the weights transposed once,
before the loop). The recurrent matrices', the query matrix W_a's and the context matrix C's
gradients are computed after that loop, each as one matmul over the saved activations of all
steps and sentences (the cell's ``loop_gradients``), instead of a small product per step summed
in a buffer. Only the attention keys' and v_a's gradients, which a step's (batch, source_len,
n') tanh feeds, are summed in the loop.

A decoder step multiplies c_i by fixed matrices only (the paper's cell: C; the conditional GRU:
GRU_2's input kernel W'), and C c_i = sum_j alpha_ij (C h_j): the products C h_j are formed
once per batch (the cell's ``prepare``, as the search's memory is), the step reads C c_i off
them with its alpha_i, and the contexts c_i (which the readout reads) are one batched matmul
after the loop (`recurrence.contexts`). Backwards, alpha_i's gradient reads the same products,
and C's, U_a's and the annotations' gradients are matmuls after the loop, through [C | U_a] in
one. The step's largest matmul, (batch, 2n) x (2n, 3n), thus leaves the loop both ways.
"""

import tensorflow as tf

import bahdanau_tf.models.recurrence as recurrence
from bahdanau_tf.models.recurrence import (gru_gates, gru_step_gradient, mix, read_gradient, through_mask, transposed,
                                           transposed_matrices)
from bahdanau_tf.models.tensor_ops import Tensor


def _loop(step, elements, carry, output_dtypes, reverse=False):
    """``(last carry, stacked outputs)`` of ``step(carry, elements_t) -> (carry, outputs)`` over
    the leading axis of every tensor of the tuple ``elements``.

    ``tf.scan`` also stacks the carry of every step; here only the outputs are, so a backward
    loop can sum gradients in its carry without a buffer of all steps.
    """
    length = tf.shape(elements[0])[0]
    inputs = [tf.TensorArray(e.dtype, size=length, infer_shape=True).unstack(e) for e in elements]
    outputs = [tf.TensorArray(dtype, size=length, infer_shape=True) for dtype in output_dtypes]

    def body(index, carry, outputs):
        t = length - 1 - index if reverse else index
        carry, values = step(carry, tuple(array.read(t) for array in inputs))
        return index + 1, carry, [array.write(t, value) for array, value in zip(outputs, values)]

    _, carry, outputs = tf.while_loop(lambda index, *_: index < length, body, (0, carry, outputs),
                                      maximum_iterations=length)
    return carry, [array.stack() for array in outputs]


def _named_like_autodiff(gradient):
    """``gradient`` whose ops are named as automatic differentiation names its own:
    ``gradient_tape/`` and the forward pass's name scope (``rnn_search/encoder``, ...), so that
    benchmarks/train_step_profile.py tells the backward loops from the forward ones, and the
    encoder's from the decoder's. Call it in the forward function."""
    scope = tf.get_current_name_scope()

    def named(*upstream):
        with tf.name_scope(f"gradient_tape/{scope}/" if scope else "gradient_tape/"):
            return gradient(*upstream)

    return named


def _previous_reads(states, initial_state, recurrent_mask):
    """(s_{t-1} of every step, what its matmuls read: s_{t-1} times the recurrent mask)."""
    previous = tf.concat([initial_state[None], states[:-1]], 0)
    return previous, (previous if recurrent_mask is None else previous * recurrent_mask)


# === The GRU ===

def gru_states(projected: Tensor, initial_state: Tensor, gate_kernel: Tensor, recurrent_kernel: Tensor,
               recurrent_mask: Tensor | None = None) -> Tensor:
    """Every state of the GRU over ``projected`` (time, ..., 3n): (time, ..., n), its backward
    pass written out; the states of `recurrence.scanned_gru_states` (arguments as its)."""
    return _gru_states(recurrent_mask)(projected, initial_state, gate_kernel, recurrent_kernel)


def _gru_states(recurrent_mask):
    """`gru_states` as a ``tf.custom_gradient``; the mask is a constant (a random draw) and gets
    no gradient."""

    @tf.custom_gradient
    def states(projected, initial_state, gate_kernel, recurrent_kernel):
        def step(h_tm1, x):
            z, r, candidate = gru_gates(x[0], h_tm1, gate_kernel, recurrent_kernel, recurrent_mask)
            h = mix(h_tm1, z, candidate)
            return h, (h, z, r, candidate)

        dtype = projected.dtype
        _, (h, z, r, candidate) = _loop(step, (projected,), initial_state, [dtype] * 4)

        def gradient(d_states):
            previous, reads = _previous_reads(h, initial_state, recurrent_mask)
            gate_kernel_t, recurrent_kernel_t = transposed(gate_kernel), transposed(recurrent_kernel)

            def back(d_h, saved):
                d_x, d_mix, d_read = gru_step_gradient(d_h + saved[0], *saved[1:], recurrent_kernel_t,
                                                       recurrent_mask)
                d_read = read_gradient(d_x, d_read, gate_kernel_t)
                return through_mask(d_mix, d_read, recurrent_mask), (d_x,)

            d_initial, (d_projected,) = _loop(back, (d_states, previous, z, r, candidate),
                                              tf.zeros_like(initial_state), [dtype], reverse=True)
            d_gate, d_recurrent = recurrence.gru_weight_gradients(reads, r, d_projected)
            return d_projected, d_initial, d_gate, d_recurrent

        return h, _named_like_autodiff(gradient)

    return states


# === Every decoder cell ===

def decoder_states(cell, projected: Tensor, initial_state: Tensor, annotations: Tensor, mask: Tensor,
                   weights: tuple, recurrent_mask: Tensor | None = None) -> tuple:
    """A decoder cell over all steps of teacher forcing, its backward pass written out.

    Args:
        cell: a decoder cell (`bahdanau_tf.models.decoder_cell.DecoderCell`) with the additive
            score that writes its backward step: its ``prepare``, ``fuse``, ``step`` (whose
            ``Record`` the loop keeps), ``step_backward`` and ``loop_gradients``.
        projected: (time, batch, k), the cell's input projections of E y_{i-1}.
        initial_state: (batch, n), s_0.
        annotations: (batch, source_len, 2n); mask: bool (batch, source_len).
        weights: the cell's ``weights_as`` (`decoder_cell.LoopWeights`), tensors in the compute
            dtype.
        recurrent_mask: optional (batch, n), recurrent dropout (`recurrence.gru_step`).

    Returns:
        ``(s_i, c_i, alpha_i)`` for all steps: (time, batch, n), (time, batch, 2n) and float32
        (time, batch, source_len); the numbers of scanning the cell's ``step``.
    """
    # the step's weights that hold a tensor (a field may be None: the fused kernels' place)
    step_names = tuple(name for name, value in zip(weights.step._fields, weights.step) if value is not None)
    function = _decoder_states(cell, weights, step_names, mask, recurrent_mask)
    return function(projected, initial_state, annotations, *weights.memory,
                    *(getattr(weights.step, name) for name in step_names))


def _forward(cell, projected, initial_state, memory, step_weights, recurrent_mask):
    """The forward loop: ``(s, alpha, record)`` of all steps, the record the cell's ``Record``
    with each field stacked."""

    def step(h_tm1, x):
        h, alpha, record, _ = cell.step(x[0], h_tm1, memory, step_weights, recurrent_mask)
        return h, (h, alpha) + tuple(record)

    dtype = projected.dtype
    stacked = _loop(step, (projected,), initial_state, [dtype, "float32"] + [dtype] * len(cell.Record._fields))[1]
    return stacked[0], stacked[1], cell.Record._make(stacked[2:])


def _backward(cell, elements, initial_state, memory, transposed_weights, recurrent_mask):
    """The backward loop, from the last step, over ``elements`` (d s_i, d alpha_i, s_{i-1},
    alpha_i, then the fields of the stacked ``Record``): ``(d s_0, d keys, d v_a, the stacked
    ``StepGradients``)``; the keys' and v_a's are summed in it."""

    def back(carry, saved):
        d_h, d_keys, d_score_vector = carry
        d_state, d_alpha, h_tm1, alpha = saved[:4]
        step = cell.step_backward(d_h + d_state, d_alpha, h_tm1, alpha, cell.Record._make(saved[4:]), memory,
                                  transposed_weights, recurrent_mask)
        carry = (step.d_state, d_keys + step.d_keys, d_score_vector + step.d_score_vector)
        return carry, tuple(step.gradients)

    keys = memory.keys
    carry = (tf.zeros_like(initial_state), tf.zeros_like(keys), tf.zeros_like(keys[0, 0]))  # v_a: (n',)
    (d_initial, d_keys, d_score_vector), stacked = _loop(
        back, elements, carry, [initial_state.dtype] * len(cell.StepGradients._fields), reverse=True)
    return d_initial, d_keys, d_score_vector, cell.StepGradients._make(stacked)


def _output_gradients(outputs, upstream, annotations):
    """The gradients of a decoder's outputs (s_i, c_i, alpha_i), zeros where none came:
    ``(d s_i, d c_i batch major (batch, time, 2n), d alpha_i with what c_i's gives it)``."""
    d_states, d_contexts, d_alphas = (tf.zeros_like(output) if d is None else d
                                      for output, d in zip(outputs, upstream))
    d_contexts = tf.transpose(d_contexts, [1, 0, 2])  # (batch, time, 2n)
    # c_i = sum_j alpha_ij h_j: d alpha_ij += h_j . d c_i, all steps in one batched matmul
    d_alphas = d_alphas + tf.cast(tf.transpose(tf.matmul(d_contexts, annotations, transpose_b=True),
                                               [1, 0, 2]), "float32")
    return d_states, d_contexts, d_alphas


def _memory_gradients(alphas, annotations, d_contexts, d_products_read, d_keys, weights):
    """``(d annotations, the gradients of the memory's weights)`` after the loop, from d c_i
    (batch major), the gradients of the steps' reads of the products (time major) and the
    keys' gradient: C h_j's gradient is sum_i alpha_ij d(C c_i); with the keys', through
    [C | U_a] in one matmul (both read h_j). ``weights``: `decoder_cell.MemoryWeights`, as is
    every cell's memory."""
    kernel = tf.concat([weights.context_kernel, weights.key_kernel], -1)
    batch_major = tf.cast(tf.transpose(alphas, [1, 0, 2]), annotations.dtype)  # (batch, time, source_len)
    d_products = tf.matmul(batch_major, tf.transpose(d_products_read, [1, 0, 2]), transpose_a=True)
    d_both = tf.concat([d_products, d_keys], -1)
    d_annotations = (tf.matmul(batch_major, d_contexts, transpose_a=True)
                     + tf.matmul(d_both, kernel, transpose_b=True))
    d_context_kernel, d_key_kernel = tf.split(recurrence.kernel_gradient(annotations, d_both),
                                              [d_products.shape[-1], -1], -1)
    d_key_bias = tf.cast(tf.reduce_sum(tf.cast(d_keys, "float32"), [0, 1]), d_keys.dtype)
    return d_annotations, weights._make((d_context_kernel, d_key_kernel, d_key_bias))


def _decoder_states(cell, structure, step_names, mask, recurrent_mask):
    """`decoder_states` as a ``tf.custom_gradient`` of (projected, s_0, annotations, the
    memory's weights, the step's weights named ``step_names``), ``structure`` the
    `decoder_cell.LoopWeights` they fill; the masks get no gradient."""
    memory_count = len(structure.memory)

    @tf.custom_gradient
    def states(projected, initial_state, annotations, *tensors):
        weights = structure._replace(memory=structure.memory._make(tensors[:memory_count]),
                                     step=structure.step._replace(**dict(zip(step_names, tensors[memory_count:]))))
        memory = cell.prepare(annotations, mask, weights=weights.memory)  # C h_j and U_a h_j, once
        step_weights = cell.fuse(weights.step)
        h, alphas, records = _forward(cell, projected, initial_state, memory, step_weights, recurrent_mask)
        contexts = recurrence.contexts(alphas, annotations)

        def gradient(*upstream):
            d_states, d_contexts, d_alphas = _output_gradients((h, contexts, alphas), upstream, annotations)
            previous, reads = _previous_reads(h, initial_state, recurrent_mask)
            d_initial, d_keys, d_score_vector, steps = _backward(
                cell, (d_states, d_alphas, previous, alphas) + tuple(records), initial_state, memory,
                transposed_matrices(step_weights), recurrent_mask)  # the kernels transposed once, before the loop
            d_annotations, d_memory = _memory_gradients(alphas, annotations, d_contexts, steps.products_read, d_keys,
                                                        weights.memory)
            d_step = cell.loop_gradients(reads, records, steps, d_score_vector, recurrent_mask)
            return ((steps.inputs, d_initial, d_annotations) + tuple(d_memory)
                    + tuple(getattr(d_step, name) for name in step_names))

        return (h, contexts, alphas), _named_like_autodiff(gradient)

    return states

__all__ = ["decoder_states", "gru_states"]
