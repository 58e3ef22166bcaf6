"""Layers against NumPy references of the paper's equations; masking; config round trips."""

import helpers
import keras
import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf import presets
from bahdanau_tf.models import cgru, initializers, layers
import bahdanau_tf.models.alignment_head as alignment_head
from bahdanau_tf.models.alignment_head import AlignmentHead


def _randomize(layer, seed=0, scale=0.3):
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.normal(0, scale, weight.shape).astype("float32"))


@pytest.mark.parametrize("score", ["additive", "general"])
def test_attention_matches_numpy_and_zeroes_padding(score):
    rng = np.random.default_rng(1)
    query_dim = 5
    attention = layers.BahdanauAttention(7, score=score)
    query = rng.normal(size=(3, query_dim)).astype("float32")
    memory = rng.normal(size=(3, 4, 6)).astype("float32")
    lengths = [4, 2, 1]
    mask = np.arange(4)[None, :] < np.array(lengths)[:, None]
    attention(query, memory, memory_mask=mask)
    _randomize(attention)
    context, weights = attention(query, memory, memory_mask=mask)
    for row, length in enumerate(lengths):
        real = memory[row, :length]
        if score == "additive":
            expected_context, expected_weights = helpers.attention_reference(
                query[row], real, attention.query_kernel.numpy(), attention.key_kernel.numpy(),
                attention.key_bias.numpy(), attention.score_vector.numpy(),
            )
        else:
            projected = query[row] @ attention.query_kernel.numpy()
            expected_weights = helpers.softmax(real @ projected)
            expected_context = (expected_weights[:, None] * real).sum(0)
        np.testing.assert_allclose(weights[row, :length], expected_weights, atol=1e-5)
        np.testing.assert_allclose(context[row], expected_context, atol=1e-5)
        # padding gets exactly zero weight, not merely a small one
        assert np.all(weights.numpy()[row, length:] == 0.0)


def test_attention_keys_are_step_independent():
    attention = layers.BahdanauAttention(4)
    memory = tf.random.normal([2, 3, 6])
    attention(tf.zeros([2, 5]), memory)
    _randomize(attention)
    keys = attention.compute_keys(memory)
    for _ in range(2):  # any query: the keys given explicitly give the same result as computed ones
        query = tf.random.normal([2, 5])
        given = attention(query, memory, keys=keys)
        computed = attention(query, memory)
        np.testing.assert_allclose(given[0], computed[0], atol=1e-6)


def test_additive_attention_gradients_equal_plain_autodiff():
    # the scores' gradient recomputes tanh instead of storing it: same numbers as autodiff of
    # the equations written out
    rng = np.random.default_rng(3)
    attention = layers.BahdanauAttention(7)
    query = tf.constant(rng.normal(size=(3, 5)), tf.float32)
    memory = tf.constant(rng.normal(size=(3, 4, 6)), tf.float32)
    mask = tf.constant(np.arange(4)[None, :] < np.array([4, 2, 1])[:, None])
    attention(query, memory, memory_mask=mask)
    _randomize(attention)
    probe_context, probe_weights = (tf.constant(rng.normal(size=shape), tf.float32) for shape in ((3, 6), (3, 4)))

    def loss(context, weights):
        return tf.reduce_sum(context * probe_context) + tf.reduce_sum(weights * probe_weights)

    sources = [query, memory] + attention.trainable_variables
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([query, memory])
        ours = loss(*attention(query, memory, memory_mask=mask))
        keys = memory @ attention.key_kernel + attention.key_bias
        energies = tf.reduce_sum(tf.tanh(keys + (query @ attention.query_kernel)[:, None, :])
                                 * attention.score_vector, axis=-1)
        weights = layers.masked_softmax(energies, mask)
        reference = loss(tf.einsum("bs,bsd->bd", weights, memory), weights)
    np.testing.assert_allclose(ours, reference, rtol=1e-6)
    for got, expected in zip(tape.gradient(ours, sources), tape.gradient(reference, sources)):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_attention_rejects_bad_arguments():
    with pytest.raises(ValueError, match="'cosine'"):
        layers.BahdanauAttention(4, score="cosine")
    with pytest.raises(ValueError, match="'dot'"):  # needs equal sizes, which RNNsearch never has
        layers.BahdanauAttention(4, score="dot")


def test_conditional_gru_cell_matches_paper_equations():
    rng = np.random.default_rng(2)
    cell = layers.ConditionalGRUCell(5)
    cell.build(input_dim=3, context_dim=4)
    _randomize(cell)
    x, h, c = (rng.normal(size=(2, d)).astype("float32") for d in (3, 5, 4))
    got = cell(cell.project_inputs(x), h, cell.project_context(c)).numpy()
    W, C, b = helpers.split3(cell.kernel.numpy()), helpers.split3(cell.context_kernel.numpy()), helpers.split3(cell.bias.numpy())
    U = helpers.split_recurrent(cell.gate_kernel.numpy(), cell.recurrent_kernel.numpy())
    for row in range(2):
        np.testing.assert_allclose(got[row], helpers.gru_step(x[row], h[row], W, U, b, C, c[row]), atol=1e-5)


def test_cgru_cell_step_matches_nematus_equations_and_reads_products_alike():
    """One step of the conditional GRU (Sennrich et al. 2017) against NumPy, on padded memory;
    its `step` on the search's memory gives the same state, attention and products."""
    rng = np.random.default_rng(4)
    cell = cgru.CGRUAttentionCell(5, attention_units=7)
    cell.build(input_dim=3, memory_dim=6)
    _randomize(cell)
    ey, h = (rng.normal(size=(3, d)).astype("float32") for d in (3, 5))
    annotations = rng.normal(size=(3, 4, 6)).astype("float32")
    lengths = [4, 2, 1]
    mask = np.arange(4)[None, :] < np.array(lengths)[:, None]
    memory = cell.prepare(annotations, mask)
    state, context, weights = (t.numpy() for t in cell(cell.project_inputs(ey), h, memory))
    for row, length in enumerate(lengths):
        expected = helpers.cgru_step_reference(cell, ey[row], h[row], annotations[row, :length])
        np.testing.assert_allclose(state[row], expected[0], atol=1e-5)
        np.testing.assert_allclose(context[row], expected[1], atol=1e-5)
        np.testing.assert_allclose(weights[row, :length], expected[2], atol=1e-5)
        assert np.all(weights[row, length:] == 0.0)
    # the paper's cell queries with s_{i-1}, this one with s'_i: not the same attention
    paper_query_weights = helpers.attention_reference(h[0], annotations[0], cell.attention.query_kernel.numpy(),
                                                      cell.attention.key_kernel.numpy(),
                                                      cell.attention.key_bias.numpy(),
                                                      cell.attention.score_vector.numpy())[1]
    assert not np.allclose(weights[0], paper_query_weights, atol=1e-3)
    # the search's form: the products with another map's beside C h_j, one row per group of beams
    readout_map = rng.normal(size=(6, 2)).astype("float32")
    search_memory = cell.prepare(annotations, mask, readout_kernel=readout_map)
    step = cell.step(cell.project_inputs(ey), h, search_memory, cell.step_weights_as(h), grouped=True)
    np.testing.assert_allclose(step.state, state, atol=1e-5)
    np.testing.assert_allclose(step.alpha, weights, atol=1e-6)
    np.testing.assert_allclose(step.readout_context, context @ readout_map, atol=1e-5)


def test_maxout_readout_matches_numpy():
    rng = np.random.default_rng(3)
    readout = layers.MaxoutReadout(maxout_dim=4, vocabulary_size=9)
    readout.build(state_dim=5, embedding_dim=3, context_dim=6)
    _randomize(readout)
    s, ey, c = (rng.normal(size=(2, 7, d)).astype("float32") for d in (5, 3, 6))
    logits = readout(s, ey, c).numpy()
    assert logits.shape == (2, 7, 9) and logits.dtype == np.float32
    for i in range(2):
        for t in range(7):
            np.testing.assert_allclose(logits[i, t], helpers.maxout_reference(readout, s[i, t], ey[i, t], c[i, t]), atol=1e-5)


def test_tied_readout_projects_with_the_embedding_matrix_it_shares():
    """tie_embeddings: W_o is E^T, read from the embedding's variable (no output kernel of its
    own), so the logits follow E, and E's gradient sums what it gets as input and as output."""
    rng = np.random.default_rng(4)
    embedding = keras.layers.Embedding(9, 4)
    embedding.build((None, None))
    readout = layers.MaxoutReadout(maxout_dim=4, vocabulary_size=9, tie_embeddings=True)
    readout.tie(embedding)
    readout.build(state_dim=5, embedding_dim=4, context_dim=6)
    _randomize(readout)
    embedding.embeddings.assign(rng.normal(size=(9, 4)).astype("float32"))
    assert not hasattr(readout, "output_kernel") and len(readout.weights) == 5
    s, ey, c = (rng.normal(size=(3, d)).astype("float32") for d in (5, 4, 6))
    for row in range(3):
        expected = helpers.maxout_reference(readout, s[row], ey[row], c[row])
        t = readout.features(s[row : row + 1], ey[row : row + 1], c[row : row + 1]).numpy()[0]
        np.testing.assert_allclose(expected, t @ embedding.embeddings.numpy().T + readout.output_bias.numpy(), atol=1e-5)
        np.testing.assert_allclose(readout(s, ey, c).numpy()[row], expected, atol=1e-5)
    with tf.GradientTape() as tape:
        total = tf.reduce_sum(readout(s, ey, c)[:, 3])  # one vocabulary column: one row of E
    gradient = tape.gradient(total, embedding.embeddings)
    gradient = tf.convert_to_tensor(gradient).numpy()
    np.testing.assert_allclose(gradient[3], readout.features(s, ey, c).numpy().sum(axis=0), atol=1e-4)
    assert not np.any(np.delete(gradient, 3, axis=0))
    with pytest.raises(ValueError, match="Tied embeddings need"):
        other = layers.MaxoutReadout(3, 9, tie_embeddings=True)
        other.tie(embedding)
        other.build(5, 4, 6)
    with pytest.raises(ValueError, match="tied"):
        layers.MaxoutReadout(4, 9, tie_embeddings=True).build(5, 4, 6)


def test_bidirectional_encoder_matches_numpy_and_ignores_padding():
    encoder = layers.BidirectionalEncoder(vocabulary_size=20, embedding_dim=4, units=5)
    sentences = [[5, 6, 7, 8, 2], [9, 10, 2], [11, 2]]
    width = 7  # extra padding beyond the longest sentence
    padded = np.array([s + [0] * (width - len(s)) for s in sentences], "int32")
    encoder(padded)
    _randomize(encoder)
    annotations, mask = encoder(padded)
    annotations = annotations.numpy()
    for row, sentence in enumerate(sentences):
        expected = helpers.encoder_reference(encoder, sentence)
        np.testing.assert_allclose(annotations[row, : len(sentence)], expected, atol=1e-5)
        # the backward GRU starts at the sentence's own last token: its first-word state equals
        # the state of the same sentence encoded alone, without any padding
        alone = encoder(np.array([sentence], "int32"))[0].numpy()[0]
        np.testing.assert_allclose(annotations[row, : len(sentence)], alone, atol=1e-5)
        assert np.all(annotations[row, len(sentence) :] == 0.0)
    np.testing.assert_array_equal(mask.numpy(), padded != 0)


def test_block_orthogonal_gives_orthogonal_blocks():
    matrix = initializers.BlockOrthogonal(seed=1)((2, 6, 18)).numpy()
    for direction in range(2):
        for block in range(3):
            q = matrix[direction, :, 6 * block : 6 * (block + 1)]
            np.testing.assert_allclose(q @ q.T, np.eye(6), atol=1e-5)
    assert not np.allclose(matrix[0, :, :6], matrix[0, :, 6:12])
    with pytest.raises(ValueError, match="k \\* n"):
        initializers.BlockOrthogonal()((4, 7))


_RNG = np.random.default_rng(7)
_QUERY, _H, _X, _C = (_RNG.normal(size=(3, d)).astype("float32") for d in (5, 4, 3, 6))
_MEMORY = _RNG.normal(size=(3, 4, 6)).astype("float32")
_MASK = np.arange(4)[None, :] < np.array([4, 2, 1])[:, None]
_SEQUENCE = [_RNG.normal(size=(3, 5, d)).astype("float32") for d in (4, 2, 6)]
_SOURCE = np.array([[5, 6, 7, 2], [9, 2, 0, 0], [11, 2, 0, 0]], "int32")
_TARGET_MASK = np.arange(5)[None, :] < np.array([5, 3, 1])[:, None]

# (layer, call, build): every layer of bahdanau_tf.models.layers through helpers.check_layer
LAYER_CONTRACTS = {
    "BahdanauAttention-additive": (
        lambda: layers.BahdanauAttention(7, score="additive", name="att"),
        lambda layer: layer(_QUERY, _MEMORY, memory_mask=_MASK), None),
    "BahdanauAttention-general": (
        lambda: layers.BahdanauAttention(6, score="general", name="att"),
        lambda layer: layer(_QUERY, _MEMORY, memory_mask=_MASK), None),
    "AlignmentHead": (
        lambda: AlignmentHead(5, name="head"),
        lambda head: head(_MEMORY, _MASK, _SEQUENCE[0], _SEQUENCE[1]), None),
    "AlignmentHead-context": (
        lambda: AlignmentHead(5, context=3, name="head"),
        lambda head: head(_MEMORY, _MASK, _SEQUENCE[0], _SEQUENCE[1], _TARGET_MASK), None),
    "AttentionGRUCell": (
        lambda: layers.AttentionGRUCell(4, 7, score="additive", name="cell"),
        lambda cell: cell(cell.project_inputs(_X), _H, cell.prepare(_MEMORY, _MASK)),
        lambda cell: cell.build(input_dim=3, memory_dim=6)),
    "CGRUAttentionCell": (
        lambda: cgru.CGRUAttentionCell(4, 7, score="additive", name="cell"),
        lambda cell: cell(cell.project_inputs(_X), _H, cell.prepare(_MEMORY, _MASK)),
        lambda cell: cell.build(input_dim=3, memory_dim=6)),
    "ConditionalGRUCell": (
        lambda: layers.ConditionalGRUCell(4, name="gru"),
        lambda cell: cell(cell.project_inputs(_X), _H, cell.project_context(_C)),
        lambda cell: cell.build(input_dim=3, context_dim=6)),
    "MaxoutReadout": (
        lambda: layers.MaxoutReadout(3, 11, name="readout"),
        lambda readout: readout(*_SEQUENCE),
        lambda readout: readout.build(state_dim=4, embedding_dim=2, context_dim=6)),
    "BidirectionalEncoder": (
        lambda: layers.BidirectionalEncoder(30, 8, 6, name="encoder"),
        lambda encoder: encoder(_SOURCE), None),
}


@pytest.mark.parametrize("name", sorted(LAYER_CONTRACTS))
def test_every_layer_keeps_the_layer_contract(name):
    make, call, build = LAYER_CONTRACTS[name]
    helpers.check_layer(make(), call, build)


def test_every_public_layer_has_a_contract():
    public = {name for module in (layers, cgru, alignment_head) for name, value in vars(module).items()
              if isinstance(value, type) and issubclass(value, keras.layers.Layer)
              and value.__module__ == module.__name__ and not name.startswith("_")}
    assert public <= {name.split("-")[0] for name in LAYER_CONTRACTS}, public


@pytest.mark.bfloat16
def test_attention_cell_under_mixed_precision_keeps_float32_weights():
    policy = keras.mixed_precision.Policy("mixed_bfloat16")
    cell = layers.AttentionGRUCell(4, 3, dtype=policy)
    cell.build(input_dim=2, memory_dim=6)
    annotations = tf.cast(tf.random.normal([2, 5, 6]), "bfloat16")
    memory = cell.prepare(annotations, tf.ones([2, 5], "bool"))
    s, c, alpha = cell(cell.project_inputs(tf.ones([2, 2], "bfloat16")), tf.zeros([2, 4], "bfloat16"), memory)
    assert s.dtype == tf.bfloat16 and alpha.dtype == tf.float32
    assert all(w.dtype == "float32" for w in cell.weights)
    np.testing.assert_allclose(tf.reduce_sum(alpha, -1), [1.0, 1.0], atol=1e-6)


def _shared_values(a, b):
    """How many nonzero values two weights have in common (random draws almost never share)."""
    a, b = a[a != 0], b[b != 0]
    return len(np.intersect1d(a, b)) if a.size and b.size else 0


# every preset's own initialisation; the paper presets at tiny sizes (same initializers)
_SHRUNK = dict(source_vocabulary_size=40, target_vocabulary_size=50, embedding_dim=8, hidden_dim=8)


@pytest.mark.parametrize("preset", ["rnnsearch-50", "small", "rnnsearch-cgru-small", "rnnencdec-30", "rnnencdec-small", "seq2seq",
                                    "seq2seq-small"])
def test_no_two_weights_of_a_model_start_with_the_same_values(preset):
    from bahdanau_tf import models

    sizes = dict(_SHRUNK)
    if not preset.startswith("seq2seq"):  # a tied projection reads maxout units as wide as an embedding
        sizes["maxout_dim"] = 8 if presets.get_preset(preset).model.get("tie_embeddings") else 4
    if not preset.startswith(("seq2seq", "rnnencdec")):
        sizes["attention_dim"] = 8
    keras.utils.set_random_seed(3)
    model = models.model_from_preset(preset, **sizes)
    model.build()
    weights = [(w.path, w.numpy().ravel()) for w in model.weights]
    for index, (name, values) in enumerate(weights):
        for other_name, other in weights[index + 1:]:
            shared = _shared_values(values, other)
            # W_a and U_a used to share their first rows, the two embeddings all their values
            assert shared <= max(2, 0.01 * min(values.size, other.size)), (name, other_name, shared)
    # and the draws follow the global seed: the same model again
    keras.utils.set_random_seed(3)
    again = models.model_from_preset(preset, **sizes)
    again.build()
    for (name, values), weight in zip(weights, again.weights):
        np.testing.assert_array_equal(values, weight.numpy().ravel(), err_msg=name)


def test_a_seeded_initializer_gives_each_weight_its_own_repeatable_values():
    def cell():
        cell = layers.ConditionalGRUCell(6, kernel_initializer=keras.initializers.RandomNormal(seed=5), name="c")
        cell.build(input_dim=6, context_dim=6)
        return cell

    first, second = cell(), cell()
    assert _shared_values(first.kernel.numpy(), first.context_kernel.numpy()) == 0
    assert _shared_values(first.gate_kernel.numpy(), first.recurrent_kernel.numpy()) == 0
    np.testing.assert_array_equal(first.kernel.numpy(), second.kernel.numpy())
    np.testing.assert_array_equal(first.context_kernel.numpy(), second.context_kernel.numpy())


def _weight_copies_per_step(run):
    """How many variable reads a traced gradient keeps once per loop iteration (TensorList accumulators)."""
    graph = tf.function(run).get_concrete_function().graph.as_graph_def()
    nodes = list(graph.node) + [node for function in graph.library.function for node in function.node_def]
    return sum(1 for node in nodes if node.op == "EmptyTensorList" and "ReadVariableOp" in node.name)


def test_teacher_forcing_keeps_no_per_step_copy_of_the_weights():
    # read inside the loop, every weight of the decoder cell was stacked once per step for the gradient
    from bahdanau_tf import models

    cell = layers.AttentionGRUCell(4, attention_units=3)
    cell.build(input_dim=2, memory_dim=6)
    memory = cell.prepare(tf.ones([2, 5, 6]), tf.ones([2, 5], bool))

    def loop_gradient(read_once):
        def run():
            with tf.GradientTape() as tape:
                def step(h, x):
                    return cell(cell.project_inputs(x), h, memory)[0]
                if read_once:
                    with layers.weights_read_once(cell):
                        states = tf.scan(step, tf.ones([7, 2, 2]), initializer=tf.zeros([2, 4]))
                else:
                    states = tf.scan(step, tf.ones([7, 2, 2]), initializer=tf.zeros([2, 4]))
                loss = tf.reduce_sum(states)
            return tape.gradient(loss, cell.trainable_variables)
        return run

    assert _weight_copies_per_step(loop_gradient(False)) > 0  # what the context avoids
    assert _weight_copies_per_step(loop_gradient(True)) == 0
    for preset in ("tiny", "rnnsearch-cgru-tiny"):
        model = models.model_from_preset(preset, source_vocabulary_size=20, target_vocabulary_size=20)
        model.build()
        source, target = tf.constant([[5, 6, 2]]), tf.constant([[1, 7, 8]])

        def model_gradient():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model((source, target), training=True))
            return tape.gradient(loss, model.trainable_variables)

        assert _weight_copies_per_step(model_gradient) == 0, preset
