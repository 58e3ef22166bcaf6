"""Tensor helpers of the layers and models, in ``keras.ops``, with three TensorFlow twins.

Everything here runs on every Keras backend (TensorFlow, JAX, PyTorch). Three operations have a
TensorFlow form that is faster than their ``keras.ops`` one inside the trainer's XLA step, and
`scan_states`, `reverse_within_lengths` and `uniform` use it when the backend is TensorFlow
(the first two: the same numbers, another graph).

- `scan_states`: a recurrence over the time axis returning every state (``tf.scan`` on
  TensorFlow; ``keras.ops.scan`` elsewhere, whose TensorFlow form carries its state through a
  ``TensorArray``).
- `reverse_within_lengths`: each sequence reversed within its own length, padding left in
  place (``tf.reverse_sequence``, whose gradient is itself; elsewhere a gather).
- `uniform`: U[0, 1) draws from a ``keras.random.SeedGenerator`` (dropout's masks), with
  TensorFlow's Philox generator named (``keras.random.uniform`` leaves TensorFlow to select
  one, and the selected one is the slow path inside XLA: benchmarks/train_throughput.py's
  ``no_dropout`` and ``rule_full`` variants).
- `masked_softmax`: the attention's softmax over the real source positions only.
- `weights_read_once` and `cast_weight`: a layer's variables read once before a loop.
- `project`, `dot_vector`: products over the last axis as one 2-D matmul.
- `time_major`, `stack_time`: (batch, time, ...) <-> (time, batch, ...).
"""

import contextlib
import contextvars
from typing import Any, Callable

import keras
from keras import ops

#: a tensor of the Keras backend (``tf.Tensor``, ``jax.Array``, ``torch.Tensor``)
Tensor = Any

# A finite "minus infinity": exp() of it underflows to exactly 0 in float32, so padding gets exactly
# zero attention weight, and a row with no real position gives a uniform row instead of NaN.
_MASK_VALUE = -1e9

# Weights read once before a recurrent loop, by variable id (see `weights_read_once`).
_READ_ONCE = contextvars.ContextVar("bahdanau_weights_read_once", default={})


def tensorflow_module():
    """The ``tensorflow`` module when Keras runs on it, else None (no import on other backends)."""
    if keras.backend.backend() != "tensorflow":
        return None
    import tensorflow as tf  # noqa: PLC0415 — the backend's own module, only when it is the backend

    return tf


def uniform(shape: tuple, seed: keras.random.SeedGenerator) -> Tensor:
    """float32 U[0, 1) of ``shape``, the next draw of ``seed`` (on TensorFlow: the Philox generator)."""
    tf = tensorflow_module()
    if tf is None:
        return keras.random.uniform(shape, seed=seed)
    state = seed.next()  # int64 on TensorFlow; its stateless generators take int32 under XLA
    return tf.random.stateless_uniform(shape, seed=tf.cast(tf.math.floormod(state, tf.int32.max - 1), "int32"),
                                       alg="philox")


def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last axis of float scores where ``mask`` is True; exactly 0 elsewhere."""
    scores = ops.cast(scores, "float32")
    scores = ops.where(mask, scores, _MASK_VALUE)
    return ops.softmax(scores, axis=-1)


def cast_weight(variable: Any, like: Tensor) -> Tensor:
    """The variable as a tensor of the same dtype as ``like`` (no-op when they already agree);
    inside `weights_read_once`, the value read there."""
    read = _READ_ONCE.get().get(id(variable))
    return ops.cast(variable if read is None else read, like.dtype)


@contextlib.contextmanager
def weights_read_once(layer: keras.layers.Layer):
    """Within the block, ``layer``'s weights are tensors read here, once, not variables.

    A variable read inside a ``tf.while_loop``/``tf.scan`` body is, for TensorFlow's gradient, a
    new value at every iteration: the backward pass keeps one copy per step (for the decoder, a
    (steps, 512, 768) stack of C alone), written in the forward loop and read back in the
    backward one. A tensor read before the loop is loop-invariant and kept once. Teacher forcing
    builds its loop inside this block (a faster train step; benchmarks/train_throughput.py). On
    other backends a read is a value already; the block changes nothing there.
    """
    tf = tensorflow_module()  # keras.ops.convert_to_tensor hands a TensorFlow variable back unread
    read = ops.convert_to_tensor if tf is None else tf.convert_to_tensor
    token = _READ_ONCE.set({**_READ_ONCE.get(), **{id(w): read(w) for w in layer.weights}})
    try:
        yield
    finally:
        _READ_ONCE.reset(token)


def project(tensor: Tensor, kernel: Tensor) -> Tensor:
    """``tensor @ kernel`` over the last axis, for any leading dimensions, as one 2-D matmul.

    A matmul of a rank-3 tensor by a matrix may be a broadcasting batched matmul, whose
    gradient for the matrix is one product per leading row, then their sum: for the
    vocabulary projection a (batch, l, |V|) tensor, summed. Over the flattened rows the
    gradient is one plain matmul (benchmarks/train_step_profile.py shows the difference).
    """
    tensor = ops.convert_to_tensor(tensor)
    if len(tensor.shape) == 2:
        return ops.matmul(tensor, kernel)
    shape = ops.shape(tensor)
    flat = ops.matmul(ops.reshape(tensor, (-1, shape[-1])), kernel)
    return ops.reshape(flat, tuple(shape[:-1]) + (ops.shape(kernel)[-1],))


def dot_vector(tensor: Tensor, vector: Tensor) -> Tensor:
    """``tensor @ vector`` over the last axis: (..., units) x (units,) -> (...).

    One 2-D matmul, not a matrix-vector product broadcast over the leading axes: a batched
    matmul that broadcasts the vector over a rank-4 tensor crashes TensorFlow 2.21's oneDNN
    kernels on AMX CPUs (Sapphire Rapids: a segmentation fault or heap corruption at the first
    decoder step of a grouped beam search).
    """
    shape = ops.shape(tensor)
    flat = ops.matmul(ops.reshape(tensor, (-1, shape[-1])), ops.reshape(vector, (-1, 1)))
    return ops.reshape(flat, tuple(shape[:-1]))


def scan_states(step: Callable, inputs: Tensor, initializer: Any) -> Any:
    """Every state of ``state = step(state, inputs[t])`` over the leading (time) axis.

    Args:
        step: ``(state, input_t) -> state``; the state is a tensor or a tuple of tensors whose
            shapes and dtypes stay those of ``initializer``.
        inputs: (time, ...), time major.
        initializer: the state before the first step.

    Returns:
        the states after each step, stacked time major: the structure of ``initializer``, each
        tensor with a leading (time,) axis.
    """
    tf = tensorflow_module()
    if tf is not None:
        return tf.scan(step, inputs, initializer=initializer)

    def carry_and_output(state, input_t):
        state = step(state, input_t)
        return state, state

    return ops.scan(carry_and_output, initializer, inputs)[1]


def reverse_within_lengths(tensor: Tensor, lengths: Tensor) -> Tensor:
    """Each row of ``tensor`` (batch, time, ...) reversed within its first ``lengths[b]``
    positions; the positions after them stay where they are."""
    tf = tensorflow_module()
    if tf is not None:
        return tf.reverse_sequence(tensor, lengths, seq_axis=1, batch_axis=0)
    positions = ops.arange(ops.shape(tensor)[1], dtype="int32")[None, :]  # (1, time)
    lengths = ops.cast(lengths, "int32")[:, None]
    source = ops.where(positions < lengths, lengths - 1 - positions, positions)  # (batch, time)
    source = ops.reshape(source, tuple(ops.shape(source)) + (1,) * (len(tensor.shape) - 2))
    return ops.take_along_axis(tensor, source, axis=1)


def time_major(tensor: Tensor) -> Tensor:
    """(batch, time, ...) -> (time, batch, ...)."""
    rank = len(tensor.shape)
    return ops.transpose(tensor, [1, 0] + list(range(2, rank)))


def stack_time(tensor: Tensor) -> Tensor:
    """(time, batch, ...) -> (batch, time, ...)."""
    return time_major(tensor)


def repeat_groups(tensor, previous_ids):
    """A memory tensor with one row per group of consecutive decoder rows, one row per decoder row."""
    groups, rows = ops.shape(tensor)[0], ops.shape(previous_ids)[0]
    if isinstance(groups, int) and isinstance(rows, int):  # static shapes (always on JAX)
        return ops.repeat(tensor, rows // max(groups, 1), axis=0)
    return ops.repeat(tensor, rows // ops.maximum(groups, 1), axis=0)



__all__ = ["Tensor", "tensorflow_module", "masked_softmax", "cast_weight", "weights_read_once", "project", "dot_vector", "scan_states",
           "reverse_within_lengths", "time_major", "stack_time", "repeat_groups"]
