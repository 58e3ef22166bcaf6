"""The paper's GRU step, forwards and backwards, and the pieces every recurrence shares (keras.ops).

The paper's GRU (appendix A.1) runs in every loop of a training pass: the encoder's two
directions (one loop, `layers.BidirectionalEncoder`), the RNNsearch decoder's attention + GRU
(`layers.AttentionGRUCell`), Nematus's conditional GRU decoder's GRU + attention + GRU
(`cgru.CGRUAttentionCell`) and the RNNencdec decoder's GRU (`layers.ConditionalGRUCell`).
This module owns that step and its backward step, in ``keras.ops`` (every backend):

- `gru_gates`, `mix`, `gru_step`: one step of the GRU; `scanned_gru_states`, the GRU over a
  sequence as a scan (the backend differentiates it);
- `gru_step_gradient`, `read_gradient`, `through_mask`: that step backwards, from the gradient
  of its new state; each decoder cell's backward step, written beside its step
  (`layers.AttentionGRUCell.step_backward`), is made of them;
- `kernel_gradient`, `gru_weight_gradients`, `transposed`, `transposed_matrices`: a weight's
  gradient over all steps as one matmul after a backward loop, and the transposed kernels that
  loop reads;
- `contexts`: c_i = sum_j alpha_ij h_j of all steps at once, after a decoder's loop.

In a training pass on TensorFlow the loops' backward pass is written out
(`bahdanau_tf.models.backprop`, which imports TensorFlow and is loaded on that backend only):
`layers.gru_states` and the decoder cells' ``sequence`` choose it. Everywhere else (JAX,
PyTorch, a pass that is not training, Luong's score) the loops are scans and the backend's
automatic differentiation computes the gradient; `automatic_differentiation` asks for that on
TensorFlow too (the tests compare the two). The gradients are the same up to float order.
"""

import contextlib
import contextvars

from keras import ops

from bahdanau_tf.models.tensor_ops import Tensor, scan_states, tensorflow_module

# True inside `automatic_differentiation`
_AUTODIFF = contextvars.ContextVar("bahdanau_recurrence_autodiff", default=False)


@contextlib.contextmanager
def automatic_differentiation():
    """Within the block, training passes differentiate the loops automatically on TensorFlow too
    (the backward pass before `bahdanau_tf.models.backprop`; the tests compare the two)."""
    token = _AUTODIFF.set(True)
    try:
        yield
    finally:
        _AUTODIFF.reset(token)


def automatic_differentiation_asked() -> bool:
    """Whether a training pass differentiates the loops automatically: inside
    `automatic_differentiation`, or on a backend other than TensorFlow."""
    return _AUTODIFF.get() or tensorflow_module() is None


# === One GRU step ===

def gru_gates(projected_inputs: Tensor, h_tm1: Tensor, gate_kernel: Tensor | None, recurrent_kernel: Tensor,
              recurrent_mask: Tensor | None = None, recurrent_gates: Tensor | None = None) -> tuple:
    """(z, r, s~) of one GRU step (`gru_step`); ``recurrent_gates``, when given, is the
    product of what the step reads by ``gate_kernel``, computed by the caller (in one matmul
    with another kernel that reads the same state)."""
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


def mix(h_tm1: Tensor, z: Tensor, candidate: Tensor) -> Tensor:
    """s_i from s_{i-1}, the update gate and the candidate."""
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
            sequence (`bahdanau_tf.models.regularization`).
    """
    z, _, candidate = gru_gates(projected_inputs, h_tm1, gate_kernel, recurrent_kernel, recurrent_mask)
    return mix(h_tm1, z, candidate)


def scanned_gru_states(projected: Tensor, initial_state: Tensor, gate_kernel: Tensor, recurrent_kernel: Tensor,
                       recurrent_mask: Tensor | None = None) -> Tensor:
    """Every state of the GRU over ``projected`` (time, ..., 3n): (time, ..., n), a scan of
    `gru_step` (arguments as its, ``initial_state`` (..., n))."""
    return scan_states(lambda h, x: gru_step(x, h, gate_kernel, recurrent_kernel, recurrent_mask),
                       projected, initial_state)


# === The step backwards ===

def gru_step_gradient(d_h: Tensor, h_tm1: Tensor, z: Tensor, r: Tensor, candidate: Tensor,
                      recurrent_kernel_t: Tensor, recurrent_mask: Tensor | None = None) -> tuple:
    """One GRU step backwards from ``d_h``, the gradient of its new state: ``(d projected
    inputs (..., 3n), d h_tm1 through the update gate's mix, d of what the matmuls read
    through the candidate's)``; what they read through the gates' is ``d projected[..., :2n]``
    times the gate kernel transposed, left to the caller (`read_gradient`).
    ``recurrent_kernel_t`` is U transposed (`transposed`)."""
    read = h_tm1 if recurrent_mask is None else h_tm1 * recurrent_mask
    d_z = d_h * (candidate - h_tm1)
    d_candidate = d_h * z * (1.0 - candidate * candidate)  # at the tanh's input
    d_reset_read = ops.matmul(d_candidate, recurrent_kernel_t)  # of r * read
    d_gates = ops.concatenate([d_z * z * (1.0 - z), d_reset_read * read * r * (1.0 - r)], axis=-1)
    return ops.concatenate([d_gates, d_candidate], axis=-1), d_h * (1.0 - z), d_reset_read * r


def read_gradient(d_x: Tensor, d_read: Tensor, kernel_t: Tensor, more: Tensor | None = None) -> Tensor:
    """d of what a step's matmuls read: ``d_read`` plus the gates' gradient times the gate
    kernel transposed, ``kernel_t`` (`transposed`); with ``more``, further rows of
    ``kernel_t`` (the attention query's) whose gradient ``more`` is, in the same matmul."""
    d_gates = d_x[..., : 2 * d_x.shape[-1] // 3]
    if more is not None:
        d_gates = ops.concatenate([more, d_gates], axis=-1)
    return d_read + ops.matmul(d_gates, kernel_t)


def through_mask(d_mix: Tensor, d_read: Tensor, recurrent_mask: Tensor | None) -> Tensor:
    """d h_tm1 from its two paths: the mix, and the matmuls that read it through the mask."""
    return d_mix + (d_read if recurrent_mask is None else d_read * recurrent_mask)


def transposed(kernel: Tensor) -> Tensor:
    """A kernel's (or a direction-stacked kernel's) matrix transpose, formed once before a
    backward loop: the loop's matmuls then read their weights in the layout they were written
    in, not transposed at every step (benchmarks/train_step_profile.py)."""
    return ops.swapaxes(kernel, -1, -2)


def transposed_matrices(weights: tuple) -> tuple:
    """A NamedTuple of a decoder cell's weights (its ``Weights``) with each matrix `transposed`
    (W^T in W's field; vectors and None as they are): what its backward step reads."""
    return weights._make(transposed(w) if w is not None and len(w.shape) == 2 else w for w in weights)


# === After a backward loop ===

def kernel_gradient(rows: Tensor, gradients: Tensor) -> Tensor:
    """sum over steps and sentences of rows^T gradients, one matmul: (time, [d,] batch, k) rows
    and (time, [d,] batch, k') gradients give (k, k'), or (d, k, k') with a direction axis d."""
    if len(rows.shape) == 4:  # the encoder's (time, direction, batch, .)
        return ops.einsum("tdbk,tdbl->dkl", rows, gradients)
    flat = [ops.reshape(tensor, (-1, tensor.shape[-1])) for tensor in (rows, gradients)]
    return ops.matmul(ops.transpose(flat[0]), flat[1])


def gru_weight_gradients(reads: Tensor, resets: Tensor, d_projected: Tensor) -> tuple:
    """(d [U_z | U_r], d U) from all steps' reads of the state, reset gates and d projections."""
    units = reads.shape[-1]
    return (kernel_gradient(reads, d_projected[..., : 2 * units]),
            kernel_gradient(resets * reads, d_projected[..., 2 * units :]))


def contexts(alphas: Tensor, annotations: Tensor) -> Tensor:
    """c_i = sum_j alpha_ij h_j of all steps, time major (time, batch, 2n), from float32
    ``alphas`` (time, batch, source_len): one batched matmul after a decoder's loop."""
    weights = ops.transpose(ops.cast(alphas, annotations.dtype), [1, 0, 2])  # (batch, time, source_len)
    return ops.transpose(ops.matmul(weights, annotations), [1, 0, 2])


__all__ = ["automatic_differentiation", "automatic_differentiation_asked", "contexts", "gru_gates",
           "gru_step", "gru_step_gradient", "gru_weight_gradients", "kernel_gradient", "mix", "read_gradient",
           "scanned_gru_states", "through_mask", "transposed", "transposed_matrices"]
