"""Shared test helpers: NumPy references of the paper's equations, random weights, tiny data.

The references are written from the paper's equations (DESIGN §1), gate by gate, one sentence and
one step at a time, with no batching tricks: they are independent of the layers' fused code.
"""

import os
import pathlib
import re
import weakref

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np


#: the seeds NumPy, TensorFlow and Keras all take
LEARNING_SEEDS = range(2**32)


def learning_seed(default):
    """The seed of a test marked ``learning``: ``default``, or ``$BAHDANAU_LEARNING_SEED`` when set.

    Such a test trains, then asserts what was learned, and must pass for any seed: docs/design.md
    ("The test tiers") runs them for several seeds in a loop. A bad value is refused once, by
    tests/conftest.py, as a usage error (`parse_learning_seed`), before any test runs.
    """
    return parse_learning_seed(os.environ.get("BAHDANAU_LEARNING_SEED") or str(default))


def parse_learning_seed(text):
    """``$BAHDANAU_LEARNING_SEED``'s seed: a decimal int in [0, 2**32).

    Raises:
        ValueError: anything else, quoted.
    """
    value = int(text) if text.strip().isdigit() else None
    if value is None or value not in LEARNING_SEEDS:  # (None in a range would scan it all)
        raise ValueError(f"BAHDANAU_LEARNING_SEED={text!r} is not a seed: give a whole number from 0 "
                         f"to {LEARNING_SEEDS[-1]}.")
    return value


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def randomize_weights(model, seed=0, scale=0.3):
    """Replaces every weight by N(0, scale^2) values so no equation hides behind a zero init."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(0.0, scale, weight.shape).astype("float32"))


def gru_step(x, h, W, U, b, C=None, c=None):
    """The paper's GRU (appendix A), per gate; ``W``, ``U``, ``C`` are dicts with keys z, r, h."""
    ctx = {g: (c @ C[g] if C is not None else 0.0) for g in "zrh"}
    z = sigmoid(x @ W["z"] + h @ U["z"] + ctx["z"] + b["z"])
    r = sigmoid(x @ W["r"] + h @ U["r"] + ctx["r"] + b["r"])
    candidate = np.tanh(x @ W["h"] + (r * h) @ U["h"] + ctx["h"] + b["h"])
    return (1.0 - z) * h + z * candidate


def split3(matrix):
    """A (…, 3n) fused kernel as the dict {z, r, h} of its three gate blocks."""
    n = matrix.shape[-1] // 3
    return {"z": matrix[..., :n], "r": matrix[..., n : 2 * n], "h": matrix[..., 2 * n :]}


def split_recurrent(gate_kernel, recurrent_kernel):
    n = recurrent_kernel.shape[-1]
    return {"z": gate_kernel[..., :n], "r": gate_kernel[..., n:], "h": recurrent_kernel}


def encoder_reference(encoder, source_ids):
    """Annotations h_j = [h->_j ; h<-_j] of one unpadded sentence (list of ids): (len, 2n)."""
    E = encoder.embedding.embeddings.numpy()
    kernel, gate, recurrent = encoder.kernel.numpy(), encoder.gate_kernel.numpy(), encoder.recurrent_kernel.numpy()
    bias = encoder.bias.numpy()[:, 0]
    n = recurrent.shape[-1]
    x = E[np.asarray(source_ids)]
    outputs = []
    for direction, order in ((0, range(len(x))), (1, reversed(range(len(x))))):
        W, U, b = split3(kernel[direction]), split_recurrent(gate[direction], recurrent[direction]), split3(bias[direction])
        h = np.zeros(n, "float64")
        states = [None] * len(x)
        for j in order:
            h = gru_step(x[j], h, W, U, b)
            states[j] = h
        outputs.append(np.stack(states))
    return np.concatenate(outputs, axis=-1)


def attention_reference(query, annotations, Wa, Ua, ba, va):
    """Equations (5)-(6) for one step of one sentence: context (2n,), weights (len,)."""
    energies = np.array([va @ np.tanh(Wa.T @ query + Ua.T @ h_j + ba) for h_j in annotations])
    alpha = softmax(energies)
    return (alpha[:, None] * annotations).sum(0), alpha


def maxout_reference(readout, s, ey, c):
    """t~ = U_o s + V_o E y + C_o c; t_k = max(t~_{2k-1}, t~_{2k}); logits = W_o t."""
    t_tilde = (
        s @ readout.state_kernel.numpy()
        + ey @ readout.embedding_kernel.numpy()
        + c @ readout.context_kernel.numpy()
        + readout.bias.numpy()
    )
    t = np.array([max(t_tilde[2 * k], t_tilde[2 * k + 1]) for k in range(len(t_tilde) // 2)])
    kernel, bias = readout.output_projection()  # W_o, or E^T where the readout is tied
    return t @ np.asarray(kernel) + np.asarray(bias)


def _attention_weights(attention):
    return (attention.query_kernel.numpy(), attention.key_kernel.numpy(), attention.key_bias.numpy(),
            attention.score_vector.numpy())


def paper_step_reference(cell, ey, s, annotations):
    """The paper's decoder step (`AttentionGRUCell`): attention queried with s_{i-1}, then one
    GRU whose gates read E y_{i-1} and c_i. Returns (s_i, c_i, alpha_i)."""
    c, alpha = attention_reference(s, annotations, *_attention_weights(cell.attention))  # uses s_{i-1}
    gru = cell.gru
    W, C, b = split3(gru.kernel.numpy()), split3(gru.context_kernel.numpy()), split3(gru.bias.numpy())
    U = split_recurrent(gru.gate_kernel.numpy(), gru.recurrent_kernel.numpy())
    return gru_step(ey, s, W, U, b, C, c), c, alpha


def cgru_step_reference(cell, ey, s, annotations):
    """Nematus's conditional GRU step (Sennrich et al. 2017, section 2; `CGRUAttentionCell`):
    s'_i = GRU_1(E y_{i-1}, s_{i-1}); the attention queried with s'_i; s_i = GRU_2(c_i, s'_i).
    Returns (s_i, c_i, alpha_i)."""
    gru = cell.gru  # GRU_1's weights, and GRU_2's input kernel (its context_kernel)
    W, b = split3(gru.kernel.numpy()), split3(gru.bias.numpy())
    U = split_recurrent(gru.gate_kernel.numpy(), gru.recurrent_kernel.numpy())
    intermediate = gru_step(ey, s, W, U, b)  # no context
    c, alpha = attention_reference(intermediate, annotations, *_attention_weights(cell.attention))
    W2, b2 = split3(gru.context_kernel.numpy()), split3(cell.context_bias.numpy())
    U2 = split_recurrent(cell.context_gate_kernel.numpy(), cell.context_recurrent_kernel.numpy())
    return gru_step(c, intermediate, W2, U2, b2), c, alpha  # no word


def rnnsearch_reference(model, source_ids, target_input_ids):
    """Logits (target_len, V) and attention (target_len, source_len) of one unpadded sentence
    pair, with the model's decoder cell (``decoder="paper"`` or ``"cgru"``)."""
    n = model.hidden_dim
    annotations = encoder_reference(model.encoder, source_ids)
    s = np.tanh(annotations[0, n:] @ model.initial_state_dense.kernel.numpy() + model.initial_state_dense.bias.numpy())
    step = cgru_step_reference if model.decoder == "cgru" else paper_step_reference
    E = model.target_embedding.embeddings.numpy()
    logits, alphas = [], []
    for y_prev in target_input_ids:
        s, c, alpha = step(model.decoder_cell, E[y_prev], s, annotations)
        logits.append(maxout_reference(model.readout, s, E[y_prev], c))  # uses s_i (eq. 4)
        alphas.append(alpha)
    return np.stack(logits), np.stack(alphas)


def rnnencdec_reference(model, source_ids, target_input_ids):
    """Logits of RNNencdec for one unpadded pair: one context c, the same at every step."""
    n = model.hidden_dim
    gru_layer = model.encoder_gru
    kernel = gru_layer.cell.kernel.numpy()
    recurrent = gru_layer.cell.recurrent_kernel.numpy()
    bias = gru_layer.cell.bias.numpy()
    E_src = model.source_embedding.embeddings.numpy()
    h = np.zeros(n)
    for x_id in source_ids:
        x = E_src[x_id]
        # Keras's GRU keeps h = z * h + (1 - z) * candidate: the same family, z relabelled
        z = sigmoid(x @ kernel[:, :n] + h @ recurrent[:, :n] + bias[:n])
        r = sigmoid(x @ kernel[:, n : 2 * n] + h @ recurrent[:, n : 2 * n] + bias[n : 2 * n])
        candidate = np.tanh(x @ kernel[:, 2 * n :] + (r * h) @ recurrent[:, 2 * n :] + bias[2 * n :])
        h = z * h + (1 - z) * candidate
    c = np.tanh(h @ model.context_dense.kernel.numpy() + model.context_dense.bias.numpy())
    s = np.tanh(c @ model.initial_state_dense.kernel.numpy() + model.initial_state_dense.bias.numpy())
    cell = model.decoder_cell
    W, C, b = split3(cell.kernel.numpy()), split3(cell.context_kernel.numpy()), split3(cell.bias.numpy())
    U = split_recurrent(cell.gate_kernel.numpy(), cell.recurrent_kernel.numpy())
    E = model.target_embedding.embeddings.numpy()
    logits = []
    for y_prev in target_input_ids:
        s = gru_step(E[y_prev], s, W, U, b, C, c)
        logits.append(maxout_reference(model.readout, s, E[y_prev], c))
    return np.stack(logits)


def step_through(model, source_ids, target_input_ids, decoding_memory=False):
    """Logits (batch, target_len, V) from calling ``decode_step`` once per target position,
    on `encode`'s memory and state or (``decoding_memory``) on what a search hands it
    (``decoding_memory`` and ``decoding_state``)."""
    import tensorflow as tf

    memory = model.encode(tf.constant(source_ids))
    state = model.initial_state(memory)
    if decoding_memory:
        memory, state = model.decoding_memory(memory), model.decoding_state(state)
    logits = []
    for t in range(target_input_ids.shape[1]):
        step_logits, state, _ = model.decode_step(tf.constant(target_input_ids[:, t]), state, memory)
        logits.append(step_logits.numpy())
    return np.stack(logits, axis=1)


def reversal_batch(rng, batch_size, min_length, max_length, symbols):
    """A batch of the reversal task: source = random symbols + END, target = reversed symbols.

    Symbols are ids 4 .. 4 + symbols - 1. Returns ((source, target_in), target_out), int32, padded.
    """
    lengths = rng.integers(min_length, max_length + 1, batch_size)
    width = lengths.max() + 1
    source = np.zeros((batch_size, width), "int32")
    target_in = np.zeros((batch_size, width), "int32")
    target_out = np.zeros((batch_size, width), "int32")
    for row, length in enumerate(lengths):
        sequence = rng.integers(4, 4 + symbols, length)
        source[row, :length], source[row, length] = sequence, 2
        reversed_sequence = sequence[::-1]
        target_in[row, 0], target_in[row, 1 : length + 1] = 1, reversed_sequence
        target_out[row, :length], target_out[row, length] = reversed_sequence, 2
    return (source, target_in), target_out


# === Shared builders: toy vocabularies, a random-weight model, a model directory ===

TOY_SOURCE_WORDS = "the cat sat on a mat and dog ran to house".split()
TOY_TARGET_WORDS = "el gato se sentó en una alfombra y perro corrió a casa".split()


def toy_tokenizers():
    """Word tokenizers over two 11-/12-word toy vocabularies (special tokens first)."""
    from bahdanau_tf.special_tokens import SPECIAL_TOKENS
    from bahdanau_tf.text import WordTokenizer

    return (WordTokenizer(list(SPECIAL_TOKENS) + TOY_SOURCE_WORDS),
            WordTokenizer(list(SPECIAL_TOKENS) + TOY_TARGET_WORDS))


def random_model(model_class=None, seed=0, scale=0.6, unk_bias=0.0, preset="tiny",
                 source_vocabulary_size=None, target_vocabulary_size=None, **overrides):
    """The one random-weight test model: a ``tiny`` preset with weights ~ N(0, scale^2).

    The paper's N(0, 0.01^2) makes every distribution almost uniform (beam search would meet
    near-ties everywhere); redrawn weights give peaked, history-dependent distributions and
    non-uniform attention. Vocabulary sizes default to `toy_tokenizers`'.
    """
    from bahdanau_tf.models import RNNSearch
    from bahdanau_tf.special_tokens import UNK_ID

    model_class = model_class or RNNSearch
    model = model_class.from_preset(
        preset,
        source_vocabulary_size=source_vocabulary_size or len(TOY_SOURCE_WORDS) + 4,
        target_vocabulary_size=target_vocabulary_size or len(TOY_TARGET_WORDS) + 4, **overrides)
    model.build_variables()
    randomize_weights(model, seed=seed, scale=scale)
    if unk_bias:
        bias = model.readout.output_bias
        bias.assign(bias.numpy() + unk_bias * np.eye(bias.shape[0], dtype=np.float32)[UNK_ID])
    return model


def save_model_dir(directory, model, source_tokenizer, target_tokenizer, settings=None):
    """A model directory as the trainer leaves it: model.json, vocabularies, a checkpoint."""
    import tensorflow as tf

    from bahdanau_tf import model_directory

    model_directory.write_model_config(str(directory), model, source_tokenizer, target_tokenizer,
                                       settings)
    tf.train.Checkpoint(model=model).save(os.path.join(str(directory), "checkpoints", "ckpt"))
    return str(directory)


def training_run(directory, steps=(100, 200, 300, 400), model=None, seed=10):
    """A run directory as the trainer leaves it: model.json, vocabularies, and checkpoints of
    model + optimizer (slots moved off zero) + step at ``steps``, each with other weights."""
    import keras
    import tensorflow as tf

    from bahdanau_tf import model_directory

    source, target = toy_tokenizers()
    model = model or random_model(seed=seed)
    model_directory.write_model_config(str(directory), model, source, target, {"preset": "tiny"})
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype="int64")
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, optimizer=optimizer, step=step),
        os.path.join(str(directory), model_directory.CHECKPOINTS), max_to_keep=5, step_counter=step)
    for number in steps:
        randomize_weights(model, seed=seed + number)
        optimizer.apply([tf.ones_like(v) for v in model.trainable_variables], model.trainable_variables)
        step.assign(number)
        manager.save(checkpoint_number=number)
    return str(directory)


def diagonal_aer_reference(sources, targets, sure, possible):
    """Och & Ney's AER (counts summed over sentences, S and P apart) of the diagonal baseline.

    Target word t of n_t links to source word min(n_s - 1, round(t * n_s / n_t)); ``sure`` and
    ``possible`` are per-sentence link lists (P includes S).
    """
    from bahdanau_tf.text import split_words

    counts = np.zeros(4)  # |A|, |S|, |A∩S|, |A∩P|
    for source, target, s, p in zip(sources, targets, sure, possible):
        n_source, n_target = len(split_words(source)), len(split_words(target))
        a = {(min(n_source - 1, round(t * n_source / n_target)), t) for t in range(n_target)}
        s, p = set(map(tuple, s)), set(map(tuple, p))
        counts += [len(a), len(s), len(a & s), len(a & p)]
    return 1.0 - (counts[2] + counts[3]) / (counts[0] + counts[1])


# === The contract harness (keras-hub's run_layer_test / run_backbone_test / run_task_test) ===
#
# One call buys a layer, a model preset or a translator the whole contract; a new layer or preset
# costs one parametrized line.

#: a padded batch of three sentences (ids < 30) and their target inputs (ids < 40)
CONTRACT_SOURCES = [[5, 6, 7, 8, 9, 2], [10, 11, 2, 0, 0, 0], [12, 2, 0, 0, 0, 0]]
CONTRACT_TARGET_INPUTS = [[1, 13, 14, 15], [1, 16, 17, 0], [1, 18, 0, 0]]
#: sizes that make any preset's architecture cheap (its class and structural options stay)
SMALL_SIZES = dict(source_vocabulary_size=30, target_vocabulary_size=40, embedding_dim=8,
                   hidden_dim=6)
_SMALL_OPTIONAL_SIZES = dict(attention_dim=5, maxout_dim=4)


def _compiled_equal(function, expected, atol):
    """``function`` traced by tf.function, and compiled by XLA, gives ``expected``."""
    import tensorflow as tf

    for jit_compile in (False, True):
        got = tf.function(function, jit_compile=jit_compile)()
        for a, b in zip(tf.nest.flatten(got), tf.nest.flatten(expected)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=atol,
                                       err_msg=f"jit_compile={jit_compile}")


def check_layer(layer, call, build=None, atol=1e-5):
    """A layer's contract: config round trip (and Keras serialization), a clone with the same
    weights gives the same outputs, every weight gets a gradient, eager == tf.function == XLA.

    Args:
        layer: an unbuilt layer of `bahdanau_tf.models.layers`.
        call: ``call(layer) -> outputs``, one call on fixed inputs.
        build: optional ``build(layer)``, for layers whose ``build`` takes sizes, not a shape.

    Returns:
        the eager outputs.
    """
    import keras
    import tensorflow as tf

    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    restored = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(restored) is type(layer) and restored.get_config() == config

    for instance in (layer, clone):
        if build is not None:
            build(instance)
    with tf.GradientTape() as tape:
        outputs = call(layer)
        total = sum(tf.reduce_sum(tf.cast(t, "float32")) for t in tf.nest.flatten(outputs)
                    if t is not None and t.dtype.is_floating)
    assert layer.trainable_weights, "the layer has no weights"
    gradients = tape.gradient(total, layer.trainable_weights)
    unused = [w.path for w, g in zip(layer.trainable_weights, gradients) if g is None]
    assert not unused, f"weights without a gradient: {unused}"

    call(clone)
    assert len(clone.weights) == len(layer.weights)
    clone.set_weights(layer.get_weights())
    for a, b in zip(tf.nest.flatten(call(clone)), tf.nest.flatten(outputs)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    _compiled_equal(lambda: call(layer), outputs, atol)
    return outputs


def contract_model(preset, seed=0, **overrides):
    """A preset's model at `SMALL_SIZES` (the preset's other options kept), weights N(0, 0.3^2)."""
    from bahdanau_tf.models import model_from_preset
    from bahdanau_tf.presets import get_preset

    sizes = dict(SMALL_SIZES)
    sizes.update({name: value for name, value in _SMALL_OPTIONAL_SIZES.items()
                  if name in get_preset(preset).model})
    if get_preset(preset).model.get("tie_embeddings"):  # a tied projection reads maxout units of E's width
        sizes["maxout_dim"] = sizes["embedding_dim"]
    model = model_from_preset(preset, **{**sizes, **overrides}).build_variables()
    randomize_weights(model, seed=seed, scale=0.3)
    return model


def check_model(preset, tmp_path, atol=1e-5, **overrides):
    """A preset's model contract (`contract_model`):

    - config round trip and ``.keras`` file round trip give the same logits;
    - ``tf.train.Checkpoint`` (training, model directories, export) holds every weight;
    - teacher forcing equals stepping ``decode_step``, on `encode`'s memory and on
      ``decoding_memory``'s;
    - eager == tf.function == XLA;
    - one ``fit`` step with the package's loss moves every trainable weight.

    ``overrides``: constructor arguments over the preset's (`contract_model`).
    """
    import keras
    import tensorflow as tf

    from bahdanau_tf import losses

    model = contract_model(preset, **overrides)
    source = np.array(CONTRACT_SOURCES, "int32")
    target_in = np.array(CONTRACT_TARGET_INPUTS, "int32")
    expected = model((source, target_in)).numpy()

    clone = type(model).from_config(model.get_config()).build_variables()
    assert clone.get_config() == model.get_config()
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(clone((source, target_in)), expected)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model)
    np.testing.assert_array_equal(loaded((source, target_in)), expected)

    checkpoint = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    saved = [name for name, _ in tf.train.list_variables(checkpoint)
             if "VARIABLE_VALUE" in name and not name.startswith("save_counter")]
    assert len(saved) == len(model.weights)
    fresh = type(model).from_config(model.get_config()).build_variables()
    tf.train.Checkpoint(model=fresh).restore(checkpoint).assert_existing_objects_matched()
    np.testing.assert_array_equal(fresh((source, target_in)), expected)

    np.testing.assert_allclose(step_through(model, source, target_in), expected, atol=atol)
    np.testing.assert_allclose(step_through(model, source, target_in, decoding_memory=True), expected,
                               atol=atol)
    xla = tf.function(lambda s, t: model((s, t)), jit_compile=True)  # traced and compiled
    np.testing.assert_allclose(xla(tf.constant(source), tf.constant(target_in)), expected, atol=1e-4)

    before = [w.numpy() for w in model.trainable_weights]
    target_out = np.concatenate([target_in[:, 1:], np.full([3, 1], 2, "int32")], axis=1)
    target_out[target_in == 0] = 0
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=losses.MaskedSparseCategoricalCrossentropy(), jit_compile=False)
    history = model.fit((source, target_in), target_out, epochs=1, batch_size=3, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    still = [w.path for w, b in zip(model.trainable_weights, before) if np.array_equal(w.numpy(), b)]
    assert not still, f"weights one fit step did not move: {still}"
    return model


def beam(size):
    """The Translator's default search (`bahdanau_tf.translator.DEFAULT_SEARCH`: its length
    penalty) with a beam of ``size``."""
    import dataclasses

    from bahdanau_tf.translator import DEFAULT_SEARCH

    return dataclasses.replace(DEFAULT_SEARCH, beam_size=size)


_SIGNATURES = weakref.WeakKeyDictionary()


def signatures_of(translator):
    """The exported signatures of ``translator`` (`bahdanau_tf.signatures.Signatures`), made
    once per translator, so that a test's calls reuse one trace."""
    from bahdanau_tf.signatures import Signatures

    if translator not in _SIGNATURES:
        _SIGNATURES[translator] = Signatures(translator)
    return _SIGNATURES[translator]


def check_translator(translator, sentences, tmp_path):
    """A translator's contract: the XLA search equals the graph search, the exported signature
    equals `translate`, and ``save`` -> ``from_directory`` restores the same translations.

    The search ``translator`` runs (its ``batching.jit_compile``) is compared with the other one;
    the restored translator runs the same as ``translator`` (a graph one compiles nothing).

    Returns:
        the `TranslationOutput` of ``sentences``.
    """
    import dataclasses

    import tensorflow as tf

    from bahdanau_tf.translator import Translator

    output = translator.translate(sentences)
    model = translator.models[0]
    source, target = translator.source_tokenizer, translator.target_tokenizer
    jit_compile = not translator.batching.jit_compile
    other = Translator(model, source, target, search=translator.search,
                       batching=dataclasses.replace(translator.batching, jit_compile=jit_compile))
    got = other.translate(sentences)
    assert got.translations == output.translations, f"jit_compile={jit_compile}"
    np.testing.assert_allclose(got.scores, output.scores, atol=1e-4)
    served = signatures_of(translator).serving_default(tf.constant(sentences))
    assert [t.decode() for t in served["translations"].numpy()] == output.translations
    np.testing.assert_allclose(served["scores"].numpy(), output.scores, atol=1e-4)

    directory = str(tmp_path / "translator")
    Translator(model, source, target).save(directory)
    loaded = Translator.from_directory(directory, search=translator.search, batching=translator.batching)
    assert loaded.translate(sentences).translations == output.translations
    assert type(loaded.models[0]) is type(model)
    return output


# Lines that TensorFlow, absl or Python's warnings print (not a command's own): absl's C++ and
# Python formats (``I0000 00:00:...``, ``W1123 09:12:32.048098 ...``), its pre-initialisation
# notice, TensorFlow's Python logger, the CPU-feature notice's second line, warnings.warn.
_FOREIGN_LINE = re.compile(
    r"^([IWEF]\d{4} \d\d:\d\d:\d+\.\d+ "
    r"|WARNING: All log messages before absl::InitializeLog"
    r"|(DEBUG|INFO|WARNING|ERROR|CRITICAL):(tensorflow|absl|root|py\.warnings):"
    r"|To enable the following instructions"
    r"|\S+:\d+: \w*Warning: )")


def foreign_lines(stderr):
    """The lines of ``stderr`` that a library printed rather than the command itself."""
    return [line for line in stderr.splitlines() if _FOREIGN_LINE.match(line)]


def env_without_tensorflow_logging(**changes):
    """os.environ with the user's defaults for TensorFlow's log level (none set) and ``changes``."""
    env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    return {**env, **changes}


COMMANDS_IN_ONE_PROCESS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "commands_in_one_process.py")


def run_commands(rows, cwd, env=None, timeout=900):
    """Runs command lines as the rows of one fresh Python process (tests/commands_in_one_process.py):
    TensorFlow is imported once, not once per line; each row's command has its own flags only.

    Args:
        rows: list of ``(command, arguments, stdin)``: a module of `bahdanau_tf.cli`, its
            arguments, the text on its standard input.
        cwd: the working directory (it gets no file of the harness's).
        env: the process's environment (default: os.environ with TensorFlow's C++ log quiet).

    Returns:
        one ``{"code": int, "stdout": str, "stderr": str}`` per row, in the order of ``rows``.
    """
    import json
    import subprocess
    import sys
    import tempfile

    env = env or dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    with tempfile.TemporaryDirectory() as scratch:
        rows_path, results_path = (os.path.join(scratch, name) for name in ("rows.json", "results.json"))
        with open(rows_path, "w", encoding="utf-8") as handle:
            json.dump([list(row) for row in rows], handle)
        result = subprocess.run([sys.executable, COMMANDS_IN_ONE_PROCESS, rows_path, results_path],
                                capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
        assert result.returncode == 0, result.stderr[-3000:]
        with open(results_path, encoding="utf-8") as handle:
            return json.load(handle)


def replaced_reference(source_tokens, target_tokens, attention, dictionary=None, subword=False):
    """[UNK] replacement by attention in NumPy (the reference of `bahdanau_tf.unknown_words`).

    ``source_tokens`` end with [END] (not a candidate); ``target_tokens`` are the model's own
    ([END] dropped); row i of ``attention`` is target token i's weights. Each [UNK] becomes the
    source token of highest weight (the first on ties), or its ``dictionary`` entry; the
    tokens are joined with spaces (subword: " ##" joins). Inputs without punctuation only:
    the detokenizer's spacing rules for punctuation are not reproduced.
    """
    dictionary = dictionary or {}
    sources = list(source_tokens)[:-1]
    tokens = [t for t in target_tokens if t != "[END]"]
    for i, token in enumerate(tokens):
        if token == "[UNK]":
            word = sources[int(np.argmax(np.asarray(attention)[i, :len(sources)]))]
            tokens[i] = dictionary.get(word, word)
    text = " ".join(tokens)
    return text.replace(" ##", "") if subword else text


def checkpoint_model_values(prefix):
    """``{path below model/: value}``, read with tf.train.load_checkpoint and the object graph
    (a trainer's checkpoint files some model variables under optimizer/)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = tf.train.load_checkpoint(prefix)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    model = [child.node_id for child in graph.nodes[0].children if child.local_name == "model"][0]
    values, frontier, seen = {}, [(model, "")], set()
    while frontier:  # breadth first: each variable under its shortest path
        next_frontier = []
        for node_id, path in frontier:
            if node_id in seen:
                continue
            seen.add(node_id)
            for attribute in graph.nodes[node_id].attributes:
                if attribute.name == "VARIABLE_VALUE":
                    values[path] = reader.get_tensor(attribute.checkpoint_key)
            next_frontier += [(c.node_id, f"{path}/{c.local_name}") for c in graph.nodes[node_id].children]
        frontier = next_frontier
    return values


def wheel_of_this_checkout(tmp_path_factory):
    """The wheel of this checkout (``pip wheel --no-deps``), built once per test run and shared
    by the tests that need one (the notebooks install it, tests/test_repository.py reads its
    metadata and pip's output, kept beside it as ``pip-wheel.log``), also across xdist
    workers: the first to ask builds it under a lock in the run's temp dir, the others wait
    and reuse it. Built from a copy of the sources, so the checkout
    gets no build/ or egg-info. Built with build isolation, as a package index's builder does:
    pip installs the setuptools that pyproject.toml's build-system asks for (the licence is an
    SPDX expression, which older setuptools refuse).
    """
    import fcntl
    import shutil
    import subprocess
    import sys

    root = pathlib.Path(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's directory, above each worker's own
    work = shared / "wheel_of_this_checkout"
    work.mkdir(exist_ok=True)
    with open(work / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        wheels = sorted((work / "dist").glob("bahdanau_tf-*.whl"))
        if not wheels:
            source = work / "source"
            shutil.rmtree(source, ignore_errors=True)
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            for name in ("bahdanau_tf", "export"):
                shutil.copytree(root / name, source / name, ignore=ignore)
            for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
                shutil.copy(root / name, source / name)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v",
                                    "-w", str(work / "dist"), str(source)], check=True, env=env,
                                   capture_output=True, text=True)
            (work / "dist" / "pip-wheel.log").write_text(built.stdout + built.stderr)
            wheels = sorted((work / "dist").glob("bahdanau_tf-*.whl"))
    (wheel,) = wheels
    return wheel
