"""The decoder cell interface (bahdanau_tf.models.decoder_cell): both shipped cells write every
member of it, and a new cell written against the base class alone is driven by the loops, its
written-out backward pass giving automatic differentiation's gradients."""

from typing import Any, NamedTuple

import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from bahdanau_tf.models import backprop, cgru, layers, recurrence
from bahdanau_tf.models.decoder_cell import BackwardStep, DecoderCell, LoopWeights, Step

SHIPPED = (layers.AttentionGRUCell, cgru.CGRUAttentionCell)


@pytest.mark.parametrize("cell_class", SHIPPED, ids=lambda c: c.__name__)
def test_both_shipped_cells_write_every_member_of_the_interface(cell_class):
    members = DecoderCell.WRITTEN_BY_EACH_CELL + DecoderCell.WRITTEN_FOR_THE_BACKWARD_LOOP
    assert not [name for name in members if getattr(cell_class, name) is getattr(DecoderCell, name)]
    assert cell_class.StepGradients._fields[0] == "inputs"
    assert isinstance(cell_class.StepGradients.products_read, property)
    cell = cell_class(4, attention_units=3)
    cell.build(input_dim=2, memory_dim=6)
    weights = cell.loop_weights()
    assert isinstance(weights.step, cell_class.Weights) and weights.step.read_kernel is None
    fused = cell.fuse(weights.step)
    assert fused.read_kernel.shape == (4, 3 + 8)  # [W_a | a GRU's U_z | U_r]: one matmul
    assert fused.query_kernel is None
    # every variable is named once, by its role, but the input projections' (read before the loop)
    read = [id(w) for w in weights.memory + weights.step if w is not None]
    inputs = {id(cell.gru.kernel), id(cell.gru.bias)}
    assert len(set(read)) == len(read) and set(read) | inputs == {id(w) for w in cell.trainable_weights}


class _ElmanAttentionCell(DecoderCell):
    """s_i = tanh(x_i + C c_i + U s_{i-1}), the attention queried with s_{i-1}: a decoder cell
    that writes the interface's members and nothing else."""

    class Weights(NamedTuple):
        query_kernel: Any
        score_vector: Any
        recurrent_kernel: Any

    class Record(NamedTuple):
        query: Any
        state: Any

    class StepGradients(NamedTuple):
        inputs: Any
        query: Any

        @property
        def products_read(self):
            return self.inputs

    def build(self, input_dim, memory_dim):
        super().build(input_dim, memory_dim)
        self.kernel = self.add_weight(name="kernel", shape=(input_dim, self.units))
        self.context_kernel = self.add_weight(name="context_kernel", shape=(memory_dim, self.units))
        self.recurrent_kernel = self.add_weight(name="recurrent_kernel", shape=(self.units, self.units))

    def project_inputs(self, inputs):
        return ops.matmul(inputs, self.kernel)

    def loop_weights(self):
        attention = self.attention
        return LoopWeights(self.memory_weights(self.context_kernel),
                           self.Weights(attention.query_kernel, attention.score_vector, self.recurrent_kernel))

    def step(self, projected_inputs, state, memory, weights, recurrent_mask=None, grouped=False):
        read = state if recurrent_mask is None else state * recurrent_mask
        query = ops.matmul(read, weights.query_kernel)
        alpha, products_read = self.attend(query, memory, weights.score_vector, grouped)
        new_state = ops.tanh(projected_inputs + products_read[:, : self.units]
                             + ops.matmul(read, weights.recurrent_kernel))
        return Step(new_state, alpha, self.Record(query, new_state), products_read[:, self.units :])

    def step_backward(self, d_state, d_alpha, h_tm1, alpha, record, memory, transposed, recurrent_mask=None):
        d_sum = d_state * (1.0 - record.state * record.state)
        d_keys, d_score_vector, d_query = self.attention.align_gradient(d_alpha, d_sum, alpha, record.query,
                                                                        memory, transposed.score_vector)
        d_read = ops.matmul(d_sum, transposed.recurrent_kernel) + ops.matmul(d_query, transposed.query_kernel)
        d_previous = d_read if recurrent_mask is None else d_read * recurrent_mask
        return BackwardStep(d_previous, d_keys, d_score_vector, self.StepGradients(d_sum, d_query))

    def loop_gradients(self, reads, records, steps, d_score_vector, recurrent_mask=None):
        return self.Weights(recurrence.kernel_gradient(reads, steps.query), d_score_vector,
                            recurrence.kernel_gradient(reads, steps.inputs))


def _gradients(cell, inputs, written_out):
    """The states and every gradient (the cell's weights, the inputs, s_0, the annotations) of
    a loss of a training pass's s_i, c_i and alpha_i."""
    projected_inputs, initial_state, annotations, mask, recurrent_mask, upstream = inputs
    loop_weights = cell.loop_weights()
    sources = [projected_inputs, initial_state, annotations] + list(loop_weights.memory + loop_weights.step)
    with tf.GradientTape() as tape:
        tape.watch(sources[:3])
        if written_out:
            outputs = cell.sequence(projected_inputs, initial_state, annotations, mask, recurrent_mask,
                                    weights=True, training=True)
        else:
            with recurrence.automatic_differentiation():
                outputs = cell.sequence(projected_inputs, initial_state, annotations, mask, recurrent_mask,
                                        weights=True, training=True)
        loss = sum(tf.reduce_sum(output * weight) for output, weight in zip(outputs, upstream))
    return [outputs[0]] + tape.gradient(loss, sources)


def test_a_new_cell_written_against_the_base_class_is_driven_by_the_written_out_loop(monkeypatch):
    rng = np.random.default_rng(3)
    cell = _ElmanAttentionCell(4, attention_units=3)
    cell.build(input_dim=2, memory_dim=6)
    for weight in cell.weights:
        weight.assign(rng.normal(size=weight.shape) * 0.5)
    steps, batch, lengths = 5, 3, (4, 2, 3)

    def normal(*shape):
        return tf.constant(rng.normal(size=shape), "float32")

    inputs = (cell.project_inputs(normal(steps, batch, 2)), normal(batch, 4), normal(batch, 4, 6),
              tf.constant(np.arange(4)[None, :] < np.array(lengths)[:, None]),
              tf.constant(rng.integers(0, 2, (batch, 4)) * 2.0, "float32"),
              (normal(steps, batch, 4), normal(steps, batch, 6), normal(steps, batch, 4)))
    calls = []
    monkeypatch.setattr(backprop, "decoder_states", lambda cell, *args, _original=backprop.decoder_states:
                        calls.append(type(cell).__name__) or _original(cell, *args))
    written_out = _gradients(cell, inputs, written_out=True)
    assert calls == ["_ElmanAttentionCell"]
    automatic = _gradients(cell, inputs, written_out=False)
    assert calls == ["_ElmanAttentionCell"]
    for ours, reference in zip(written_out, automatic):
        np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-5)

    # without a backward step of its own, a training pass differentiates the scanned steps
    class _NoBackwardStep(_ElmanAttentionCell):
        step_backward = DecoderCell.step_backward

    plain = _NoBackwardStep(4, attention_units=3)
    plain.build(input_dim=2, memory_dim=6)
    for weight, value in zip(plain.weights, cell.weights):
        weight.assign(value)
    for ours, reference in zip(_gradients(plain, inputs, written_out=True), automatic):
        np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-5)
    assert calls == ["_ElmanAttentionCell"]
