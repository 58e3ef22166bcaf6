"""Shared test helpers: NumPy references of the paper's equations, random weights, tiny data.

The references are written from the paper's equations (DESIGN §1), gate by gate, one sentence and
one step at a time, with no batching tricks: they are independent of the layers' fused code.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np


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
    return t @ readout.output_kernel.numpy() + readout.output_bias.numpy()


def rnnsearch_reference(model, source_ids, target_input_ids):
    """Logits (target_len, V) and attention (target_len, source_len) of one unpadded sentence pair."""
    n = model.hidden_dim
    annotations = encoder_reference(model.encoder, source_ids)
    s = np.tanh(annotations[0, n:] @ model.initial_state_dense.kernel.numpy() + model.initial_state_dense.bias.numpy())
    attention = model.decoder_cell.attention
    Wa, Ua, ba, va = (attention.query_kernel.numpy(), attention.key_kernel.numpy(),
                      attention.key_bias.numpy(), attention.score_vector.numpy())
    gru = model.decoder_cell.gru
    W, C, b = split3(gru.kernel.numpy()), split3(gru.context_kernel.numpy()), split3(gru.bias.numpy())
    U = split_recurrent(gru.gate_kernel.numpy(), gru.recurrent_kernel.numpy())
    E = model.target_embedding.embeddings.numpy()
    logits, alphas = [], []
    for y_prev in target_input_ids:
        c, alpha = attention_reference(s, annotations, Wa, Ua, ba, va)  # uses s_{i-1}
        s = gru_step(E[y_prev], s, W, U, b, C, c)
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


def step_through(model, source_ids, target_input_ids):
    """Logits (batch, target_len, V) from calling ``decode_step`` once per target position."""
    import tensorflow as tf

    memory = model.encode(tf.constant(source_ids))
    state = model.initial_state(memory)
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
