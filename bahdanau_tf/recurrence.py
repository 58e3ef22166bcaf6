"""The recurrences over all time steps, and their backward pass written out for TensorFlow.

The paper's GRU (appendix A.1) runs in the loops of a training pass: the encoder's two
directions (one loop, `layers.BidirectionalEncoder`), the RNNsearch decoder's attention + GRU
(`layers.AttentionGRUCell`), Nematus's conditional GRU decoder's GRU + attention + GRU
(`cgru.CGRUAttentionCell`) and the RNNencdec decoder's GRU (`layers.ConditionalGRUCell`).
This module owns the step, `gru_step`, and those loops over a whole sequence:

- `gru_states`: every state of a GRU over precomputed input projections;
- `attention_gru_states`: every state, context and attention weight of the RNNsearch decoder
  (additive attention, then the GRU whose gates read c_i);
- `conditional_gru_states`: the same of the conditional GRU decoder (s'_i = GRU_1(E y_{i-1},
  s_{i-1}), the attention queried with s'_i, s_i = GRU_2(c_i, s'_i)).

In a training pass on TensorFlow each loop is a ``tf.custom_gradient``, the way cuDNN and the
fast RNN toolkits compute a recurrence's gradient. The forward loop keeps the activations the
backward pass needs (the gates z, r, the candidate s~, the attention query and weights); the
backward loop runs, in reverse, only the work that depends on the step after it: the gradient
with respect to the state, two or three (batch, n) matmuls by transposed weights per step (the
weights transposed once, before the loop). The gradients of the recurrent matrices U_z, U_r, U,
the context matrix C, the key matrix U_a and the query matrix W_a are computed after that loop,
each as one matmul over the saved activations of all steps and sentences, instead of a small
product per step summed in a buffer. Only the attention keys' and v_a's gradients, which a
step's (batch, source_len, n') tanh feeds, are summed in the loop.

The decoders' loops keep only what depends on the previous step. A step multiplies c_i by C only
(the conditional GRU: by GRU_2's input kernel W'), and C c_i = sum_j alpha_ij (C h_j): the
products C h_j are one matmul per batch before the loop (as the beam search's
`models.RNNSearch.decoding_memory`), the step reads C c_i off them with its alpha_i, and the
contexts c_i (which the readout reads) are one batched matmul after it. Backwards, alpha_i's
gradient reads the same products, and C's and the annotations' gradients are matmuls after the
loop. The step's largest matmul, (batch, 2n) x (2n, 3n), thus leaves the loop both ways. What
reads the same tensor is one matmul: C and U_a read h_j (the keys U_a h_j are formed with the
products, and their gradient goes back through [C | U_a] with the products'); W_a and
[U_z | U_r] read s_{i-1} in the paper's cell; in the conditional GRU, W_a and GRU_2's [U'_z |
U'_r] read s'_i (two matmuls under recurrent dropout, whose mask GRU_2 reads s'_i through and the
query does not).

Everywhere else (JAX, PyTorch, a pass that is not training, Luong's score) the loop is
`tensor_ops.scan_states` over the same step and the backend's automatic differentiation
computes the gradient; `automatic_differentiation` asks for that on TensorFlow too (the tests
compare the two). The gradients are the same up to float order.
"""

import contextlib
import contextvars

from keras import ops

from bahdanau_tf.tensor_ops import Tensor, dot_vector, masked_softmax, scan_states, tensorflow_module

# True inside `automatic_differentiation`
_AUTODIFF = contextvars.ContextVar("bahdanau_recurrence_autodiff", default=False)


@contextlib.contextmanager
def automatic_differentiation():
    """Within the block, training passes differentiate the loops automatically on TensorFlow too
    (the backward pass before this module; the tests compare the two)."""
    token = _AUTODIFF.set(True)
    try:
        yield
    finally:
        _AUTODIFF.reset(token)


def automatic_differentiation_asked() -> bool:
    """Whether a training pass differentiates the loops automatically: inside
    `automatic_differentiation`, or on a backend other than TensorFlow."""
    return _AUTODIFF.get() or tensorflow_module() is None


def _written_out(training: bool):
    """``tensorflow`` when a loop's gradient is written out here, else None."""
    if not training or automatic_differentiation_asked():
        return None
    return tensorflow_module()


def _gates(projected_inputs, h_tm1, gate_kernel, recurrent_kernel, recurrent_mask, recurrent_gates=None):
    """(z, r, s~) of one GRU step (`gru_step`); ``recurrent_gates``, when given, is the
    product of what the step reads by ``gate_kernel``, computed by the caller."""
    # split, not sliced: the gradient of a split is one concatenation, of three slices three
    # padded copies summed (benchmarks/train_step_profile.py)
    inputs_z, inputs_r, inputs_candidate = ops.split(projected_inputs, 3, axis=-1)
    read = h_tm1 if recurrent_mask is None else h_tm1 * recurrent_mask
    if recurrent_gates is None:
        recurrent_gates = ops.matmul(read, gate_kernel)
    recurrent_z, recurrent_r = ops.split(recurrent_gates, 2, axis=-1)
    z = ops.sigmoid(inputs_z + recurrent_z)
    r = ops.sigmoid(inputs_r + recurrent_r)
    # reset gate applied before the recurrent matmul, as in the paper (Keras: reset_after=False)
    candidate = ops.tanh(inputs_candidate + ops.matmul(r * read, recurrent_kernel))
    return z, r, candidate


def _mix(h_tm1, z, candidate):
    # previous and candidate state mixed by the update gate
    return (1.0 - z) * h_tm1 + z * candidate


def gru_step(projected_inputs: Tensor, h_tm1: Tensor, gate_kernel: Tensor,
             recurrent_kernel: Tensor, recurrent_mask: Tensor | None = None) -> Tensor:
    """One step of the paper's GRU (appendix A.1), any leading batch dimensions.

    Args:
        projected_inputs: (..., 3n), everything that does not depend on h_tm1 (W x + C c + b),
            gates in the order z, r, candidate.
        h_tm1: (..., n).
        gate_kernel: (n, 2n) [U_z | U_r], or batched (..., n, 2n).
        recurrent_kernel: (n, n) U, or batched (..., n, n).
        recurrent_mask: optional (..., n), a dropout mask on h_tm1 where the recurrent matmuls
            read it (not in the update gate's interpolation), the same at every step of a
            sequence (`bahdanau_tf.regularization`).
    """
    z, _, candidate = _gates(projected_inputs, h_tm1, gate_kernel, recurrent_kernel, recurrent_mask)
    return _mix(h_tm1, z, candidate)


def gru_states(projected: Tensor, initial_state: Tensor, gate_kernel: Tensor, recurrent_kernel: Tensor,
               recurrent_mask: Tensor | None = None, training: bool = False) -> Tensor:
    """Every state of the GRU over ``projected`` (time, ..., 3n): (time, ..., n).

    Args: as `gru_step`'s, with a leading time axis on ``projected``; ``initial_state``
    (..., n). With ``training`` on TensorFlow the backward pass is the one written out here
    (the module's docstring); the states are the same either way.
    """
    tf = _written_out(training)
    if tf is None:
        return scan_states(lambda h, x: gru_step(x, h, gate_kernel, recurrent_kernel, recurrent_mask),
                           projected, initial_state)
    return _gru_states(tf, recurrent_mask)(projected, initial_state, gate_kernel, recurrent_kernel)


def attention_gru_states(projected: Tensor, initial_state: Tensor, memory: dict, weights: dict,
                         recurrent_mask: Tensor | None = None) -> tuple:
    """The RNNsearch decoder over all steps, its backward pass written out (TensorFlow only).

    Args:
        projected: (time, batch, 3n), the GRU's input projections [W_z; W_r; W] E y_{i-1} + b.
        initial_state: (batch, n), s_0.
        memory: ``annotations`` (batch, source_len, 2n) and ``mask`` bool (batch, source_len)
            (`layers.AttentionGRUCell.prepare_memory`); its ``keys`` are not read: U_a h_j is
            computed here, in one matmul with C h_j (`_memory_products`).
        weights: ``key_kernel`` U_a (2n, n') and ``key_bias`` (n'), ``query_kernel`` W_a (n,
            n'), ``score_vector`` v_a (n',), ``context_kernel`` C (2n, 3n), ``gate_kernel`` (n,
            2n), ``recurrent_kernel`` (n, n), in the compute dtype.
        recurrent_mask: optional (batch, n), recurrent dropout (`gru_step`).

    Returns:
        ``(s_i, c_i, alpha_i)`` for all steps: (time, batch, n), (time, batch, 2n) and float32
        (time, batch, source_len); the numbers of stepping `layers.AttentionGRUCell`, up to
        float order (C c_i is read as sum_j alpha_ij C h_j).
    """
    tf = tensorflow_module()
    names = ("key_kernel", "key_bias", "query_kernel", "score_vector", "context_kernel", "gate_kernel",
             "recurrent_kernel")
    function = _attention_gru_states(tf, memory["mask"], recurrent_mask)
    return function(projected, initial_state, memory["annotations"], *(weights[name] for name in names))


def conditional_gru_states(projected: Tensor, initial_state: Tensor, memory: dict, weights: dict,
                           recurrent_mask: Tensor | None = None) -> tuple:
    """Nematus's conditional GRU decoder (`cgru.CGRUAttentionCell`) over all steps, its backward
    pass written out (TensorFlow only): s'_i = GRU_1(E y_{i-1}, s_{i-1}), the attention queried
    with s'_i, s_i = GRU_2(c_i, s'_i).

    Args:
        projected: (time, batch, 3n), GRU_1's input projections [W_z; W_r; W] E y_{i-1} + b.
        initial_state, memory, recurrent_mask: as `attention_gru_states`'; the mask is applied
            where each GRU's recurrent matmuls read its state (not to the query s'_i).
        weights: ``key_kernel`` U_a, ``key_bias``, ``query_kernel`` W_a (n, n'), ``score_vector``
            v_a (n',), ``context_kernel`` W' (2n, 3n) and ``context_bias`` (3n,), GRU_2's input
            kernel and bias,
            ``gate_kernel`` (n, 2n) and ``recurrent_kernel`` (n, n), GRU_1's,
            ``second_gate_kernel`` and ``second_recurrent_kernel``, GRU_2's; in the compute dtype.

    Returns:
        ``(s_i, c_i, alpha_i)`` as `attention_gru_states`'; the numbers of stepping the cell, up
        to float order (W' c_i is read as sum_j alpha_ij W' h_j).
    """
    names = ("key_kernel", "key_bias", "query_kernel", "score_vector", "context_kernel", "context_bias",
             "gate_kernel", "recurrent_kernel", "second_gate_kernel", "second_recurrent_kernel")
    function = _cgru_states(tensorflow_module(), memory["mask"], recurrent_mask)
    return function(projected, initial_state, memory["annotations"], *(weights[name] for name in names))


def _loop(tf, step, elements, carry, output_dtypes, reverse=False):
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


def _transposed(tf, kernel):
    """A kernel's (or a direction-stacked kernel's) matrix transpose, formed once before a
    backward loop: the loop's matmuls then read their weights in the layout they were written
    in, not transposed at every step (benchmarks/train_step_profile.py)."""
    if isinstance(kernel, tuple):
        return tuple(_transposed(tf, part) for part in kernel)
    return tf.linalg.matrix_transpose(kernel)


def _step_gradient(tf, d_h, h_tm1, z, r, candidate, recurrent_kernel_t, recurrent_mask):
    """One GRU step backwards from ``d_h``, the gradient of its new state: ``(d projected
    inputs (..., 3n), d h_tm1 through the update gate's mix, d of what the matmuls read
    through the candidate's)``; what they read through the gates' is ``d projected[..., :2n]``
    times the gate kernel transposed, left to the caller (`_read_gradient`).
    ``recurrent_kernel_t`` is U transposed (`_transposed`)."""
    read = h_tm1 if recurrent_mask is None else h_tm1 * recurrent_mask
    d_z = d_h * (candidate - h_tm1)
    d_candidate = d_h * z * (1.0 - candidate * candidate)  # at the tanh's input
    d_reset_read = tf.matmul(d_candidate, recurrent_kernel_t)  # of r * read
    d_gates = tf.concat([d_z * z * (1.0 - z), d_reset_read * read * r * (1.0 - r)], -1)
    return tf.concat([d_gates, d_candidate], -1), d_h * (1.0 - z), d_reset_read * r


def _read_gradient(tf, d_x, d_read, kernel_t, more=None):
    """d of what a step's matmuls read: ``d_read`` plus the gates' gradient times the gate
    kernel transposed, ``kernel_t`` (`_transposed`); with ``more``, further rows of
    ``kernel_t`` (the attention query's) whose gradient ``more`` is, in the same matmul."""
    d_gates = d_x[..., : 2 * d_x.shape[-1] // 3]
    if more is not None:
        d_gates = tf.concat([more, d_gates], -1)
    return d_read + tf.matmul(d_gates, kernel_t)


def _through_mask(d_mix, d_read, recurrent_mask):
    """d h_tm1 from its two paths: the mix, and the matmuls that read it through the mask."""
    return d_mix + (d_read if recurrent_mask is None else d_read * recurrent_mask)


def _kernel_gradient(tf, rows, gradients):
    """sum over steps and sentences of rows^T gradients, one matmul: (time, [d,] batch, k) rows
    and (time, [d,] batch, k') gradients give (k, k'), or (d, k, k') with a direction axis d."""
    if len(rows.shape) == 4:  # the encoder's (time, direction, batch, .)
        return tf.einsum("tdbk,tdbl->dkl", rows, gradients)
    flat = [tf.reshape(tensor, [-1, tensor.shape[-1]]) for tensor in (rows, gradients)]
    return tf.matmul(flat[0], flat[1], transpose_a=True)


def _gru_weight_gradients(tf, reads, resets, d_projected):
    """(d [U_z | U_r], d U) from all steps' reads of the state, reset gates and d projections."""
    units = reads.shape[-1]
    return (_kernel_gradient(tf, reads, d_projected[..., : 2 * units]),
            _kernel_gradient(tf, resets * reads, d_projected[..., 2 * units :]))


def _previous_reads(tf, states, initial_state, recurrent_mask):
    """(s_{t-1} of every step, what its matmuls read: s_{t-1} times the recurrent mask)."""
    previous = tf.concat([initial_state[None], states[:-1]], 0)
    return previous, (previous if recurrent_mask is None else previous * recurrent_mask)


def _named_like_autodiff(tf, gradient):
    """``gradient`` whose ops are named as automatic differentiation names its own:
    ``gradient_tape/`` and the forward pass's name scope (``rnn_search/encoder``, ...), so that
    benchmarks/train_step_profile.py tells the backward loops from the forward ones, and the
    encoder's from the decoder's. Call it in the forward function."""
    scope = tf.get_current_name_scope()

    def named(*upstream):
        with tf.name_scope(f"gradient_tape/{scope}/" if scope else "gradient_tape/"):
            return gradient(*upstream)

    return named


def _gru_states(tf, recurrent_mask):
    """`gru_states` as a ``tf.custom_gradient`` of (projected, initial_state, gate_kernel,
    recurrent_kernel); the mask is a constant (a random draw) and gets no gradient."""

    @tf.custom_gradient
    def states(projected, initial_state, gate_kernel, recurrent_kernel):
        def step(h_tm1, x):
            z, r, candidate = _gates(x[0], h_tm1, gate_kernel, recurrent_kernel, recurrent_mask)
            h = _mix(h_tm1, z, candidate)
            return h, (h, z, r, candidate)

        dtype = projected.dtype
        _, (h, z, r, candidate) = _loop(tf, step, (projected,), initial_state, [dtype] * 4)

        def gradient(d_states):
            previous, reads = _previous_reads(tf, h, initial_state, recurrent_mask)
            gate_kernel_t, recurrent_kernel_t = _transposed(tf, (gate_kernel, recurrent_kernel))

            def back(d_h, saved):
                d_x, d_mix, d_read = _step_gradient(tf, d_h + saved[0], *saved[1:], recurrent_kernel_t,
                                                    recurrent_mask)
                d_read = _read_gradient(tf, d_x, d_read, gate_kernel_t)
                return _through_mask(d_mix, d_read, recurrent_mask), (d_x,)

            d_initial, (d_projected,) = _loop(tf, back, (d_states, previous, z, r, candidate),
                                              tf.zeros_like(initial_state), [dtype], reverse=True)
            d_gate, d_recurrent = _gru_weight_gradients(tf, reads, r, d_projected)
            return d_projected, d_initial, d_gate, d_recurrent

        return h, _named_like_autodiff(tf, gradient)

    return states


def _align(tf, query, memory, score_vector):
    """One step's attention from its query W_a s: ``(alpha_i float32 (batch, source_len),
    sum_j alpha_ij (C h_j))``, read off ``memory``'s products (`_memory_products`)."""
    products, keys, mask = memory
    alpha = masked_softmax(dot_vector(tf.tanh(keys + query[:, None, :]), score_vector), mask)
    return alpha, tf.squeeze(tf.matmul(tf.cast(alpha, products.dtype)[:, None, :], products), 1)


def _align_gradient(tf, d_alpha, d_read, alpha, query, memory, score_vector):
    """`_align` backwards: ``(d keys, d v_a, d query)`` of one step from the gradients of
    alpha_i (the outputs') and of what the step read off the products."""
    products, keys, mask = memory
    # C c_i = sum_j alpha_ij (C h_j); alpha = softmax(e) over the real positions
    d_alpha = d_alpha + tf.cast(tf.squeeze(tf.matmul(products, d_read[:, :, None]), -1), "float32")
    d_scores = alpha * (d_alpha - tf.reduce_sum(alpha * d_alpha, -1, keepdims=True))
    d_scores = tf.cast(tf.where(mask, d_scores, 0.0), d_read.dtype)
    # e_ij = v_a^T tanh(W_a s + U_a h_j), the tanh computed again (`layers._additive_scores`)
    hidden = tf.tanh(keys + query[:, None, :])
    d_hidden = d_scores[:, :, None] * score_vector * (1.0 - hidden * hidden)
    return d_hidden, tf.einsum("bs,bsu->u", d_scores, hidden), tf.reduce_sum(d_hidden, 1)


def _attention_forward(tf, projected, initial_state, memory, weights, recurrent_mask):
    """The decoder's forward loop: (s, alpha, query W_a s_{i-1}, z, r, s~) of all steps.

    ``memory`` holds the context's products ``C h_j`` (`_memory_products`) in place of the
    annotations: a step reads C c_i = sum_j alpha_ij C h_j off them, and the contexts c_i
    themselves are formed after the loop, for all steps at once (`_contexts`).
    """
    read_kernel, score_vector, recurrent_kernel = weights
    units = memory[1].shape[-1]

    def step(h_tm1, x):
        read = h_tm1 if recurrent_mask is None else h_tm1 * recurrent_mask
        # W_a s_{i-1} and [U_z | U_r] s_{i-1} in one matmul
        query, recurrent_gates = tf.split(tf.matmul(read, read_kernel), [units, -1], -1)
        alpha, projected_context = _align(tf, query, memory, score_vector)
        z, r, candidate = _gates(x[0] + projected_context, h_tm1, None, recurrent_kernel, recurrent_mask,
                                 recurrent_gates)
        h = _mix(h_tm1, z, candidate)
        return h, (h, alpha, query, z, r, candidate)

    dtype = projected.dtype
    return _loop(tf, step, (projected,), initial_state, [dtype, "float32"] + [dtype] * 4)[1]


def _memory_products(tf, annotations, kernel, key_bias):
    """``(C h_j, U_a h_j + b)`` for every source position, (batch, source_len, 3n) and (batch,
    source_len, n'), from one matmul by ``kernel`` [C | U_a]: both read h_j.

    A decoder step multiplies c_i by C only, and C c_i = sum_j alpha_ij C h_j (the search
    reads the same products, `models.RNNSearch.decoding_memory`): the step's largest matmul,
    (batch, 2n) x (2n, 3n), leaves the loop, forwards and backwards. The keys U_a h_j are the
    attention's (`layers.BahdanauAttention.compute_keys`)."""
    flat = tf.reshape(annotations, [-1, annotations.shape[-1]])
    both = tf.reshape(tf.matmul(flat, kernel), tf.concat([tf.shape(annotations)[:2], [-1]], 0))
    products, keys = tf.split(both, [-1, key_bias.shape[-1]], -1)
    return products, keys + key_bias


def _contexts(tf, alphas, annotations):
    """c_i = sum_j alpha_ij h_j of all steps, time major (time, batch, 2n): one batched matmul."""
    weights = tf.transpose(tf.cast(alphas, annotations.dtype), [1, 0, 2])  # (batch, time, source_len)
    return tf.transpose(tf.matmul(weights, annotations), [1, 0, 2])


def _attention_step_gradient(tf, d_h, saved, memory, weights, recurrent_mask):
    """One decoder step backwards: ``(d h_tm1, d keys (this step's), d v_a (this step's),
    (d projected inputs, d query))``. ``saved`` starts with d s_i and d alpha_i from the
    outputs (the latter with what the context's gradient gives it)."""
    d_state, d_alpha, h_tm1, alpha, query, z, r, candidate = saved
    read_kernel_t, score_vector, recurrent_kernel_t = weights
    d_x, d_mix, d_read = _step_gradient(tf, d_h + d_state, h_tm1, z, r, candidate, recurrent_kernel_t,
                                        recurrent_mask)
    d_hidden, d_score_vector, d_query = _align_gradient(tf, d_alpha, d_x, alpha, query, memory, score_vector)
    d_read = _read_gradient(tf, d_x, d_read, read_kernel_t, more=d_query)
    return _through_mask(d_mix, d_read, recurrent_mask), d_hidden, d_score_vector, (d_x, d_query)


def _attention_backward(tf, step_gradient, elements, initial_state, memory, score_vector, outputs):
    """A decoder's backward loop, from the last step, over ``elements`` (the outputs'
    gradients and what the forward loop saved, per step): ``(d s_0, d keys, d v_a, the
    stacked ``outputs`` per-step gradients)``. ``step_gradient(d s_i, step's elements)``
    gives ``(d s_{i-1}, d keys, d v_a, outputs)`` of one step; the keys' and v_a's are
    summed in the loop."""

    def back(carry, step_saved):
        d_h, d_keys, d_score_vector = carry
        d_h, d_step_keys, d_step_vector, step_outputs = step_gradient(d_h, step_saved)
        return (d_h, d_keys + d_step_keys, d_score_vector + d_step_vector), step_outputs

    carry = (tf.zeros_like(initial_state), tf.zeros_like(memory[1]), tf.zeros_like(score_vector))
    (d_initial, d_keys, d_score_vector), stacked = _loop(tf, back, elements, carry,
                                                         [initial_state.dtype] * outputs, reverse=True)
    return d_initial, d_keys, d_score_vector, stacked


def _output_gradients(tf, outputs, upstream, annotations):
    """The gradients of a decoder's outputs (s_i, c_i, alpha_i), zeros where none came:
    ``(d s_i, d c_i batch major (batch, time, 2n), d alpha_i with what c_i's gives it)``."""
    d_states, d_contexts, d_alphas = (tf.zeros_like(output) if d is None else d
                                      for output, d in zip(outputs, upstream))
    d_contexts = tf.transpose(d_contexts, [1, 0, 2])  # (batch, time, 2n)
    # c_i = sum_j alpha_ij h_j: d alpha_ij += h_j . d c_i, all steps in one batched matmul
    d_alphas = d_alphas + tf.cast(tf.transpose(tf.matmul(d_contexts, annotations, transpose_b=True),
                                               [1, 0, 2]), "float32")
    return d_states, d_contexts, d_alphas


def _annotation_gradients(tf, alphas, annotations, d_contexts, d_projected_contexts, d_keys, kernel):
    """``(d annotations, d C, d U_a, d key bias)`` after the loop, from d c_i (batch major),
    the gradients of the steps' C c_i (time major) and the keys' gradient: C h_j's gradient is
    sum_i alpha_ij d(C c_i); with the keys', through ``kernel`` [C | U_a] in one matmul, as
    `_memory_products` formed them."""
    batch_major = tf.cast(tf.transpose(alphas, [1, 0, 2]), annotations.dtype)  # (batch, time, source_len)
    d_products = tf.matmul(batch_major, tf.transpose(d_projected_contexts, [1, 0, 2]), transpose_a=True)
    d_both = tf.concat([d_products, d_keys], -1)
    d_annotations = (tf.matmul(batch_major, d_contexts, transpose_a=True)
                     + tf.matmul(d_both, kernel, transpose_b=True))
    d_context_kernel, d_key_kernel = tf.split(_kernel_gradient(tf, annotations, d_both),
                                              [d_products.shape[-1], -1], -1)
    d_key_bias = tf.cast(tf.reduce_sum(tf.cast(d_keys, "float32"), [0, 1]), d_keys.dtype)
    return d_annotations, d_context_kernel, d_key_kernel, d_key_bias


def _attention_gru_states(tf, mask, recurrent_mask):
    """`attention_gru_states` as a ``tf.custom_gradient``; the masks get no gradient."""

    @tf.custom_gradient
    def states(projected, initial_state, annotations, key_kernel, key_bias, query_kernel, score_vector,
               context_kernel, gate_kernel, recurrent_kernel):
        # what reads h_j: C and U_a, one kernel
        memory_kernel = tf.concat([context_kernel, key_kernel], -1)
        memory = _memory_products(tf, annotations, memory_kernel, key_bias) + (mask,)
        # what reads s_{i-1}: W_a and [U_z | U_r], one kernel
        weights = (tf.concat([query_kernel, gate_kernel], -1), score_vector, recurrent_kernel)
        saved = _attention_forward(tf, projected, initial_state, memory, weights, recurrent_mask)
        h, alphas = saved[:2]
        contexts = _contexts(tf, alphas, annotations)

        def gradient(*upstream):
            d_states, d_contexts, d_alphas = _output_gradients(tf, (h, contexts, alphas), upstream, annotations)
            previous, reads = _previous_reads(tf, h, initial_state, recurrent_mask)
            back_weights = (_transposed(tf, weights[0]), score_vector, _transposed(tf, recurrent_kernel))
            d_initial, d_keys, d_score_vector, (d_x, d_queries) = _attention_backward(
                tf, lambda d_h, step: _attention_step_gradient(tf, d_h, step, memory, back_weights, recurrent_mask),
                (d_states, d_alphas, previous) + tuple(saved[1:]), initial_state, memory, score_vector, 2)
            d_annotations, d_context_kernel, d_key_kernel, d_key_bias = _annotation_gradients(
                tf, alphas, annotations, d_contexts, d_x, d_keys, memory_kernel)
            units = recurrent_kernel.shape[-1]
            d_query_kernel, d_gate = tf.split(
                _kernel_gradient(tf, reads, tf.concat([d_queries, d_x[..., : 2 * units]], -1)),
                [query_kernel.shape[-1], -1], -1)
            d_recurrent = _kernel_gradient(tf, saved[4] * reads, d_x[..., 2 * units :])
            return (d_x, d_initial, d_annotations, d_key_kernel, d_key_bias, d_query_kernel, d_score_vector,
                    d_context_kernel, d_gate, d_recurrent)

        return (h, contexts, alphas), _named_like_autodiff(tf, gradient)

    return states


def _second_reads(tf, intermediate, read_kernels, recurrent_mask):
    """The conditional GRU's reads of s'_i: ``(query W_a s'_i, [U'_z | U'_r] (s'_i * mask))``,
    one matmul by [W_a | U'_z | U'_r] when no mask sets the two apart (``read_kernels`` is
    then that one kernel, else ``(W_a, [U'_z | U'_r])``)."""
    if recurrent_mask is None:
        return tf.split(tf.matmul(intermediate, read_kernels), [-1, 2 * intermediate.shape[-1]], -1)
    return (tf.matmul(intermediate, read_kernels[0]), tf.matmul(intermediate * recurrent_mask, read_kernels[1]))


def _cgru_forward(tf, projected, initial_state, memory, weights, recurrent_mask):
    """The conditional GRU's forward loop: (s, alpha, query W_a s', z, r, s~ of GRU_1, s',
    z, r, s~ of GRU_2) of all steps; C c_i read off the products as in `_attention_forward`."""
    gate_kernel, recurrent_kernel, read_kernels, score_vector, context_bias, second_recurrent = weights

    def step(h_tm1, x):
        first = _gates(x[0], h_tm1, gate_kernel, recurrent_kernel, recurrent_mask)
        intermediate = _mix(h_tm1, first[0], first[2])
        query, recurrent_gates = _second_reads(tf, intermediate, read_kernels, recurrent_mask)
        alpha, projected_context = _align(tf, query, memory, score_vector)
        second = _gates(projected_context + context_bias, intermediate, None, second_recurrent, recurrent_mask,
                        recurrent_gates)
        h = _mix(intermediate, second[0], second[2])
        return h, (h, alpha, query) + first + (intermediate,) + second

    dtype = projected.dtype
    return _loop(tf, step, (projected,), initial_state, [dtype, "float32"] + [dtype] * 8)[1]


def _cgru_step_gradient(tf, d_h, saved, memory, weights, recurrent_mask):
    """One conditional GRU step backwards, GRU_2, the attention, then GRU_1: ``(d s_{i-1},
    d keys, d v_a (this step's), (d of GRU_1's projected inputs, of GRU_2's, d query))``."""
    d_state, d_alpha, h_tm1, alpha, query, z, r, candidate, intermediate = saved[:9]
    # the kernels transposed (`_transposed`), as the backward loop reads them
    gate_kernel_t, recurrent_kernel_t, read_kernels_t, score_vector, _, second_recurrent_t = weights
    d_second, d_mix, d_read = _step_gradient(tf, d_h + d_state, intermediate, *saved[9:], second_recurrent_t,
                                             recurrent_mask)
    d_hidden, d_score_vector, d_query = _align_gradient(tf, d_alpha, d_second, alpha, query, memory, score_vector)
    if recurrent_mask is None:  # [W_a | U'_z | U'_r] read s'_i: one matmul
        d_intermediate = d_mix + _read_gradient(tf, d_second, d_read, read_kernels_t, more=d_query)
    else:
        d_intermediate = (_through_mask(d_mix, _read_gradient(tf, d_second, d_read, read_kernels_t[1]),
                                        recurrent_mask)
                          + tf.matmul(d_query, read_kernels_t[0]))
    d_first, d_mix, d_read = _step_gradient(tf, d_intermediate, h_tm1, z, r, candidate, recurrent_kernel_t,
                                            recurrent_mask)
    d_read = _read_gradient(tf, d_first, d_read, gate_kernel_t)
    return _through_mask(d_mix, d_read, recurrent_mask), d_hidden, d_score_vector, (d_first, d_second, d_query)


def _cgru_states(tf, mask, recurrent_mask):
    """`conditional_gru_states` as a ``tf.custom_gradient``; the masks get no gradient."""

    @tf.custom_gradient
    def states(projected, initial_state, annotations, key_kernel, key_bias, query_kernel, score_vector,
               context_kernel, context_bias, gate_kernel, recurrent_kernel, second_gate_kernel,
               second_recurrent_kernel):
        # what reads h_j: W' and U_a, one kernel
        memory_kernel = tf.concat([context_kernel, key_kernel], -1)
        memory = _memory_products(tf, annotations, memory_kernel, key_bias) + (mask,)
        # what reads s'_i: W_a, and [U'_z | U'_r] (through the mask), one kernel without a mask
        read_kernels = ((query_kernel, second_gate_kernel) if recurrent_mask is not None
                        else tf.concat([query_kernel, second_gate_kernel], -1))
        weights = (gate_kernel, recurrent_kernel, read_kernels, score_vector, context_bias, second_recurrent_kernel)
        saved = _cgru_forward(tf, projected, initial_state, memory, weights, recurrent_mask)
        h, alphas, intermediates = saved[0], saved[1], saved[6]
        contexts = _contexts(tf, alphas, annotations)

        def gradient(*upstream):
            d_states, d_contexts, d_alphas = _output_gradients(tf, (h, contexts, alphas), upstream, annotations)
            previous, reads = _previous_reads(tf, h, initial_state, recurrent_mask)
            back_weights = (_transposed(tf, (gate_kernel, recurrent_kernel, read_kernels))
                            + (score_vector, context_bias, _transposed(tf, second_recurrent_kernel)))
            d_initial, d_keys, d_score_vector, (d_first, d_second, d_queries) = _attention_backward(
                tf, lambda d_h, step: _cgru_step_gradient(tf, d_h, step, memory, back_weights, recurrent_mask),
                (d_states, d_alphas, previous) + tuple(saved[1:]), initial_state, memory, score_vector, 3)
            d_annotations, d_context_kernel, d_key_kernel, d_key_bias = _annotation_gradients(
                tf, alphas, annotations, d_contexts, d_second, d_keys, memory_kernel)
            intermediate_reads = intermediates if recurrent_mask is None else intermediates * recurrent_mask
            d_context_bias = tf.cast(tf.reduce_sum(tf.cast(d_second, "float32"), [0, 1]), context_bias.dtype)
            return ((d_first, d_initial, d_annotations, d_key_kernel, d_key_bias,
                     _kernel_gradient(tf, intermediates, d_queries), d_score_vector, d_context_kernel, d_context_bias)
                    + _gru_weight_gradients(tf, reads, saved[4], d_first)
                    + _gru_weight_gradients(tf, intermediate_reads, saved[8], d_second))

        return (h, contexts, alphas), _named_like_autodiff(tf, gradient)

    return states


__all__ = ["attention_gru_states", "automatic_differentiation", "automatic_differentiation_asked",
           "conditional_gru_states", "gru_states", "gru_step"]
