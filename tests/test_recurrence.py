"""The recurrences' written-out backward pass (bahdanau_tf.models.backprop, the cells' step_backward)
against automatic differentiation: one step of each decoder cell, then every weight's gradient
of a loss, for each model, with padding, recurrent dropout, attention weights in the loss,
eagerly and under XLA, in float32 and mixed precision."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf.models import backprop, cgru, layers, recurrence
from bahdanau_tf.models import RNNEncDec, RNNSearch, Seq2Seq
from tests import helpers

DROPOUTS = dict(recurrent_dropout=0.3, embedding_dropout=0.2, readout_dropout=0.1)


# === One step ===

CELLS = {"paper": layers.AttentionGRUCell, "cgru": cgru.CGRUAttentionCell}


def _step_inputs(cell_class, masked, seed=7, batch=3, units=5, lengths=(4, 2, 3)):
    """A built cell with random weights, and one step's inputs: projected inputs, s_{i-1}, the
    memory over padded annotations, the recurrent mask or None, the loop's weights as tensors."""
    rng = np.random.default_rng(seed)
    cell = cell_class(units, attention_units=4)
    cell.build(input_dim=3, memory_dim=6)
    for weight in cell.weights:
        weight.assign(rng.normal(size=weight.shape) * 0.5)
    source_len = max(lengths)
    annotations = tf.constant(rng.normal(size=(batch, source_len, 6)), "float32")
    mask = tf.constant(np.arange(source_len)[None, :] < np.array(lengths)[:, None])
    loop_weights = cell.weights_as(annotations)
    weights = loop_weights.step._make(None if w is None else tf.identity(w) for w in loop_weights.step)
    memory = cell.prepare(annotations, mask, weights=loop_weights.memory)
    inputs = tf.constant(rng.normal(size=(batch, 3 * units)), "float32")
    state = tf.constant(rng.normal(size=(batch, units)), "float32")
    recurrent_mask = tf.constant(rng.integers(0, 2, (batch, units)) * 2.0, "float32") if masked else None
    upstream = (tf.constant(rng.normal(size=(batch, units)), "float32"),
                tf.constant(rng.normal(size=(batch, source_len)), "float32"))
    return cell, inputs, state, memory, recurrent_mask, weights, upstream


@pytest.mark.parametrize("masked", [False, True], ids=["no_dropout", "dropout"])
@pytest.mark.parametrize("name", CELLS)
def test_one_step_backward_equals_automatic_differentiation(name, masked):
    """Each cell's `step_backward` against tf.GradientTape on the same `step`, piece by piece:
    d s_{i-1}, d of the projected inputs, of the keys, of what the step read off the products
    (alpha_ij times it is d C h_j), of v_a, and `loop_gradients`' weights (one step), for a
    loss of s_i and alpha_i with random weights. A wrong term names its piece."""
    cell, inputs, state, memory, recurrent_mask, weights, (d_state, d_alpha) = _step_inputs(CELLS[name], masked)
    named_weights = {name: w for name, w in weights._asdict().items() if w is not None}
    sources = {"state": state, "inputs": inputs, "products": memory.products, "keys": memory.keys, **named_weights}
    with tf.GradientTape() as tape:
        tape.watch(list(sources.values()))
        step_weights = cell.fuse(weights)
        step = cell.step(inputs, state, memory, step_weights, recurrent_mask)
        loss = tf.reduce_sum(step.state * d_state) + tf.reduce_sum(step.alpha * d_alpha)
    automatic = dict(zip(sources, tape.gradient(loss, list(sources.values()))))

    backward = cell.step_backward(d_state, d_alpha, state, step.alpha, step.record, memory,
                                  recurrence.transposed_matrices(step_weights), recurrent_mask)
    steps, d_read = backward.gradients, backward.gradients.products_read
    reads = state if recurrent_mask is None else state * recurrent_mask
    stacked = {key: value[None] for key, value in steps._asdict().items()}
    loop_gradients = cell.loop_gradients(reads[None], step.record._make(r[None] for r in step.record),
                                         steps._make(stacked.values()), backward.d_score_vector, recurrent_mask)
    ours = {"state": backward.d_state, "inputs": steps.inputs, "keys": backward.d_keys,
            "products": tf.cast(step.alpha, d_read.dtype)[:, :, None] * d_read[:, None, :],
            **{name: w for name, w in loop_gradients._asdict().items() if w is not None}}
    assert set(ours) - {"state", "inputs", "products", "keys"} == set(named_weights)  # the memory's: the loop's
    wrong = [piece for piece, gradient in ours.items()
             if not np.allclose(gradient, automatic[piece], rtol=1e-5, atol=1e-5)]
    assert not wrong, wrong  # every piece that differs, not only the first


# === Whole models ===

def _padded_batch(model, seed=0, batch=5):
    """Sources and targets of different lengths, padded with 0 (one row full length)."""
    rng = np.random.default_rng(seed)
    vocabulary = min(model.source_vocabulary_size, model.target_vocabulary_size)
    source_lengths, target_lengths = rng.integers(2, 8, batch), rng.integers(1, 7, batch)
    source_lengths[0], target_lengths[1] = 8, 7
    source = np.zeros((batch, 8), "int32")
    target = np.zeros((batch, 8), "int32")
    for row in range(batch):
        source[row, : source_lengths[row]] = rng.integers(4, vocabulary, source_lengths[row])
        source[row, source_lengths[row] - 1] = 2  # [END]
        target[row, : target_lengths[row] + 1] = rng.integers(4, vocabulary, target_lengths[row] + 1)
    return source, target[:, :-1], target[:, 1:]


def _loss_function(model, batch, seed=1):
    """A loss of the logits (and the attention weights, for RNNSearch) with random weights on
    the real target positions: no gradient is the same for two tokens by accident."""
    source, target_in, target_out = batch
    rng = np.random.default_rng(seed)
    real = (target_out != 0)[:, :, None].astype("float32")
    logit_weights = tf.constant(rng.normal(size=target_out.shape + (model.target_vocabulary_size,)) * real,
                                "float32")
    attention_weights = tf.constant(rng.normal(size=target_out.shape + source.shape[1:]) * real, "float32")

    def loss():
        if isinstance(model, RNNSearch):
            logits, alpha = model.logits_and_attention((source, target_in), training=True)
            return tf.reduce_sum(logits * logit_weights) + tf.reduce_sum(alpha * attention_weights)
        return tf.reduce_sum(tf.cast(model((source, target_in), training=True), "float32") * logit_weights)

    return loss


def _gradients(model, loss, jit_compile, seed_state):
    """Every trainable weight's gradient as NumPy, the dropout masks drawn from ``seed_state``
    (so both backward passes see the same masks)."""

    def gradients():
        with tf.GradientTape() as tape:
            value = loss()
        return tape.gradient(value, model.trainable_variables)

    for variable, value in zip(model.non_trainable_variables, seed_state):
        variable.assign(value)
    function = tf.function(gradients, jit_compile=True) if jit_compile else gradients
    return [np.asarray(tf.convert_to_tensor(g), "float64") for g in function()]


def _assert_gradients_equal(model, jit_compile, tolerance, seed=0):
    loss = _loss_function(model, _padded_batch(model, seed))
    seed_state = [variable.numpy() for variable in model.non_trainable_variables]
    written_out = _gradients(model, loss, jit_compile, seed_state)
    with recurrence.automatic_differentiation():
        automatic = _gradients(model, loss, jit_compile, seed_state)
    for variable, ours, reference in zip(model.trainable_variables, written_out, automatic):
        scale = np.abs(reference).max()
        assert scale > 0 or "output_bias" in variable.path, variable.path  # every weight is reached
        assert np.abs(ours - reference).max() <= tolerance * scale, (variable.path, np.abs(ours - reference).max(),
                                                                     scale)


# (model class, constructor overrides): each model, and Nematus's conditional GRU decoder with
# and without recurrent dropout (without, one matmul reads s'_i for W_a and GRU_2's gates)
MODELS = {"rnnsearch": (RNNSearch, DROPOUTS), "cgru": (RNNSearch, dict(DROPOUTS, decoder="cgru")),
          "cgru_no_dropout": (RNNSearch, dict(decoder="cgru")), "rnnencdec": (RNNEncDec, DROPOUTS),
          "seq2seq": (Seq2Seq, DROPOUTS)}


# XLA where a written-out loop is compiled: the paper's cell (with the encoder's two-direction
# GRU), the conditional GRU, and RNNencdec's one-direction GRU; each costs an XLA compilation of
# both gradients. The eager cases carry each model's claim: Seq2Seq's LSTM has no written-out
# loop (under XLA it would compare automatic differentiation with itself), and the conditional
# GRU without recurrent dropout differs from ``cgru`` by one matmul, not by what XLA compiles.
XLA_MODELS = ("rnnsearch", "cgru", "rnnencdec")


@pytest.mark.parametrize("name, jit_compile", [(name, False) for name in MODELS] + [
    pytest.param(name, True, marks=pytest.mark.slow) for name in XLA_MODELS],
    ids=[f"{name}-eager" for name in MODELS] + [f"{name}-xla" for name in XLA_MODELS])
def test_model_gradients_equal_automatic_differentiation(name, jit_compile):
    model_class, overrides = MODELS[name]
    model = helpers.random_model(model_class, scale=0.4, **overrides)
    _assert_gradients_equal(model, jit_compile, tolerance=1e-5)


def test_general_score_keeps_automatic_differentiation():
    model = helpers.random_model(RNNSearch, scale=0.4, score="general", **DROPOUTS)
    _assert_gradients_equal(model, jit_compile=False, tolerance=1e-5)


def test_training_passes_of_both_decoders_take_their_written_out_loop(monkeypatch):
    """The paper's decoder and the conditional GRU run their written-out loop in a training pass
    (the comparisons above would also pass if neither did); Luong's score, a pass that is not
    training and `automatic_differentiation` scan the cell."""
    calls = []
    monkeypatch.setattr(backprop, "decoder_states",
                        lambda cell, *args, _original=backprop.decoder_states:
                        calls.append(type(cell).__name__) or _original(cell, *args))
    for overrides, expected in ((dict(), ["AttentionGRUCell"]), (dict(decoder="cgru"), ["CGRUAttentionCell"]),
                                (dict(decoder="cgru", score="general"), [])):
        model = helpers.random_model(RNNSearch, scale=0.4, **overrides)
        inputs = _padded_batch(model)[:2]
        calls.clear()
        model(inputs, training=True)
        assert calls == expected, overrides
        model(inputs, training=False)
        with recurrence.automatic_differentiation():
            model(inputs, training=True)
        assert calls == expected, overrides


def test_written_out_backward_loops_are_named_as_automatic_differentiations():
    """Each written-out backward loop sits under ``gradient_tape/`` and its forward loop's name
    scope, as TensorFlow names its own gradient ops: benchmarks/train_step_profile.py parts the
    step by these names (forward or backward, encoder or decoder)."""
    model = helpers.random_model(RNNSearch, scale=0.4)
    source, target_in, _ = _padded_batch(model)

    @tf.function
    def gradients():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model((source, target_in), training=True))
        return tape.gradient(loss, model.trainable_variables)

    loops = sorted(op.name for op in gradients.get_concrete_function().graph.get_operations()
                   if op.type in ("While", "StatelessWhile"))
    forward = [name for name in loops if not name.startswith("gradient_tape/")]
    assert len(forward) == 2 and any("encoder" in name for name in forward), loops
    assert sorted("gradient_tape/" + name for name in forward) == [name for name in loops if name not in forward]


@pytest.mark.slow
@pytest.mark.parametrize("precision, floor", [pytest.param("mixed_bfloat16", 0.05, marks=pytest.mark.bfloat16),
                                              ("mixed_float16", 5e-3)])
def test_mixed_precision_gradients_are_as_close_to_float32_as_automatic_differentiations(precision, floor):
    """In 16 bits the written-out loop rounds other products than the scanned cell (C h_j where
    the cell rounds c_i and C c_i), so the two 16-bit gradients differ by rounding alone; what
    must hold is that ours is as near the float32 gradient (the same weights, masks and loss,
    automatic differentiation) as automatic differentiation's is (float32 itself: 1e-5 above).
    Errors are taken over each whole gradient (Frobenius norms): one element's rounding is chance,
    and a CPU whose bf16 matmuls accumulate differently moves single elements, not the whole.
    Eager: the 16-bit rounding is the loop's own; that XLA compiles the loop to the same
    gradients is the float32 test's ``xla`` case (nine XLA compilations cost this test ten
    times its time)."""
    for model_class, overrides in (MODELS["rnnsearch"], MODELS["cgru"], MODELS["rnnencdec"]):
        model = helpers.random_model(model_class, scale=0.4, dtype=precision, **overrides)
        exact = helpers.random_model(model_class, scale=0.4, **overrides)
        exact.set_weights(model.get_weights())
        batch = _padded_batch(model)
        seed_state = [variable.numpy() for variable in model.non_trainable_variables]
        ours = _gradients(model, _loss_function(model, batch), False, seed_state)
        with recurrence.automatic_differentiation():
            automatic = _gradients(model, _loss_function(model, batch), False, seed_state)
            reference = _gradients(exact, _loss_function(exact, batch), False, seed_state)
        for variable, mine, theirs, truth in zip(model.trainable_variables, ours, automatic, reference):
            scale = np.linalg.norm(truth)
            error, autodiff_error = np.linalg.norm(mine - truth), np.linalg.norm(theirs - truth)
            assert error <= 2 * autodiff_error + floor * scale, (variable.path, error, autodiff_error, scale)


def _gru_inputs(seed, directions, time=6, batch=3, units=5):
    rng = np.random.default_rng(seed)
    lead = (directions,) if directions else ()
    return dict(
        projected=tf.constant(rng.normal(size=(time,) + lead + (batch, 3 * units)), "float32"),
        initial_state=tf.constant(rng.normal(size=lead + (batch, units)), "float32"),
        gate_kernel=tf.constant(rng.normal(size=lead + (units, 2 * units)) * 0.5, "float32"),
        recurrent_kernel=tf.constant(rng.normal(size=lead + (units, units)) * 0.5, "float32"),
    )


@pytest.mark.parametrize("directions, masked", [(0, False), (0, True), (2, False)],
                         ids=["one", "dropout", "two_directions"])
def test_gru_states_gradients_equal_a_scan_differentiated(directions, masked):
    """The bare recurrence, the written-out path forced (training=True): every input's gradient
    against `scan_states` over `gru_step` differentiated by TensorFlow, for a random upstream."""
    inputs = _gru_inputs(3, directions)
    shape = inputs["initial_state"].shape
    mask = tf.constant(np.random.default_rng(4).integers(0, 2, shape) * 2.0, "float32") if masked else None
    upstream = tf.constant(np.random.default_rng(5).normal(size=inputs["projected"].shape[:-1] + (shape[-1],)),
                           "float32")

    def scanned(**arguments):
        return recurrence.scanned_gru_states(**arguments, recurrent_mask=mask)

    def ours(**arguments):
        return backprop.gru_states(**arguments, recurrent_mask=mask)

    results = []
    for function in (ours, scanned):
        with tf.GradientTape() as tape:
            tape.watch(list(inputs.values()))
            states = function(**inputs)
            loss = tf.reduce_sum(states * upstream)
        results.append((states, tape.gradient(loss, list(inputs.values()))))
    np.testing.assert_array_equal(results[0][0], results[1][0])  # the same forward ops
    for name, ours_gradient, reference in zip(inputs, results[0][1], results[1][1]):
        np.testing.assert_allclose(ours_gradient, reference, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("decoder", ["paper", "cgru"])
def test_training_forward_pass_is_unchanged(decoder):
    """The written-out path's forward loop gives the logits of the scanned cell, up to float
    order (its steps read C c_i as sum_j alpha_ij C h_j)."""
    model = helpers.random_model(RNNSearch, scale=0.4, decoder=decoder)
    source, target_in, _ = _padded_batch(model, 2)
    ours = model((source, target_in), training=True)
    with recurrence.automatic_differentiation():
        reference = model((source, target_in), training=True)
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-5)
    assert keras.backend.backend() == "tensorflow"
