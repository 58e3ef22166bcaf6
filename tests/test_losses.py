"""Tests for bahdanau_tf.losses: the sampled softmax against NumPy and against tf's own op."""

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf import losses


def _case(seed=0, vocabulary=40, dim=6, batch=3, length=4, sampled=(5, 9, 17, 2, 30)):
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(batch, length, dim)).astype(np.float32)
    kernel = rng.normal(size=(dim, vocabulary)).astype(np.float32)
    bias = rng.normal(size=(vocabulary,)).astype(np.float32)
    targets = rng.integers(4, vocabulary, size=(batch, length)).astype(np.int32)
    targets[0, 1] = sampled[1]  # an accidental hit: a sampled class is this row's target
    targets[2, 3] = 0  # padding
    sampled = np.array(sampled, np.int64)
    true_expected = rng.uniform(0.05, 0.9, size=(batch * length, 1)).astype(np.float32)
    sampled_expected = rng.uniform(0.05, 0.9, size=(len(sampled),)).astype(np.float32)
    return features, kernel, bias, targets, (sampled, true_expected, sampled_expected)


def _numpy_sampled_nll(features, kernel, bias, targets, sampled_values):
    sampled, true_expected, sampled_expected = sampled_values
    rows = features.reshape(-1, features.shape[-1]).astype(np.float64)
    labels = targets.reshape(-1)
    out = []
    for row, label, q_true in zip(rows, labels, true_expected[:, 0]):
        logits = [row @ kernel[:, label] + bias[label] - np.log(q_true)]
        logits += [row @ kernel[:, c] + bias[c] - np.log(q) for c, q in zip(sampled, sampled_expected)
                   if c != label]  # {true} U (sampled minus the accidental hit), log Q corrected
        logits = np.array(logits)
        out.append(np.log(np.exp(logits - logits.max()).sum()) + logits.max() - logits[0])
    return (np.array(out).reshape(targets.shape) * (targets != 0))


def test_sampled_nll_is_the_numpy_softmax_over_true_and_sampled_logits_and_tfs_op():
    features, kernel, bias, targets, sampled_values = _case()
    nll = losses.sampled_token_nll(targets, features, kernel, bias, sampled_values).numpy()
    np.testing.assert_allclose(nll, _numpy_sampled_nll(features, kernel, bias, targets, sampled_values),
                               rtol=1e-5, atol=1e-5)
    assert nll[2, 3] == 0.0
    # tf.nn.sampled_softmax_loss (remove_accidental_hits=True) on the same sampled set
    flat = targets.reshape(-1, 1).astype(np.int64)
    reference = tf.nn.sampled_softmax_loss(
        weights=tf.transpose(kernel), biases=bias, labels=np.maximum(flat, 0),
        inputs=features.reshape(-1, features.shape[-1]), num_sampled=5, num_classes=kernel.shape[1],
        sampled_values=sampled_values, remove_accidental_hits=True).numpy().reshape(targets.shape)
    np.testing.assert_allclose(nll, reference * (targets != 0), rtol=1e-5, atol=1e-5)


def test_with_every_class_sampled_and_no_correction_it_is_the_full_softmax():
    # Q = 1 for every class and all of them sampled: exactly the full softmax cross-entropy
    features, kernel, bias, targets, _ = _case(seed=1)
    vocabulary = kernel.shape[1]
    rows = targets.size
    every = (np.arange(vocabulary, dtype=np.int64), np.ones([rows, 1], np.float32),
             np.ones([vocabulary], np.float32))
    sampled = losses.sampled_token_nll(targets, features, kernel, bias, every)
    full = losses.token_nll(targets, tf.matmul(features, kernel) + bias)
    np.testing.assert_allclose(sampled.numpy(), full.numpy(), rtol=1e-5, atol=1e-5)


def test_under_xla_and_bfloat16_features_the_loss_and_gradient_match():
    features, kernel, bias, targets, sampled_values = _case(seed=2)
    kernel_v, bias_v = tf.Variable(kernel), tf.Variable(bias)

    def loss_and_gradients(features):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(losses.sampled_token_nll(targets, features, kernel_v, bias_v, sampled_values))
        return loss, [tf.convert_to_tensor(g) for g in tape.gradient(loss, [kernel_v, bias_v])]

    eager = loss_and_gradients(tf.constant(features))
    compiled = tf.function(loss_and_gradients, jit_compile=True)(tf.constant(features))
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # only the true and sampled columns of W_o get a gradient
    used = set(targets.reshape(-1)) | set(sampled_values[0].tolist())
    untouched = [c for c in range(kernel.shape[1]) if c not in used]
    assert untouched and not np.any(eager[1][0].numpy()[:, untouched])
    low = losses.sampled_token_nll(targets, tf.cast(features, "bfloat16"), kernel_v, bias_v, sampled_values)
    assert low.dtype == tf.float32
    np.testing.assert_allclose(low, losses.sampled_token_nll(targets, features, kernel_v, bias_v,
                                                             sampled_values), rtol=0.05, atol=0.05)


def test_sample_candidates_draws_distinct_log_uniform_classes():
    targets = tf.constant([[5, 7, 0]])
    sampled, true_expected, sampled_expected = losses.sample_candidates(targets, 20, 1000)
    assert sampled.shape == (20,) and len(set(sampled.numpy().tolist())) == 20
    assert true_expected.shape == (3, 1) and sampled_expected.shape == (20,)
    assert int(tf.reduce_max(sampled)) < 1000
    with pytest.raises(tf.errors.InvalidArgumentError):
        losses.sample_candidates(targets, 2000, 1000)  # more distinct classes than there are


def test_batch_candidates_hold_the_batch_targets_then_distinct_others():
    targets = tf.constant([[5, 7, 5, 0], [9, 2, 0, 0]])
    sampled, true_expected, sampled_expected = losses.batch_candidates(targets, 12, 1000, seed=3)
    ids = sampled.numpy().tolist()
    assert len(ids) == 12 and len(set(ids)) == 12 and max(ids) < 1000
    assert {0, 2, 5, 7, 9} <= set(ids)  # every distinct target (padding's 0 too), the rest drawn
    assert true_expected.shape == (8, 1) and sampled_expected.shape == (12,)
    assert np.all(true_expected.numpy() == 1) and np.all(sampled_expected.numpy() == 1)  # no correction
    # the extras are spread over the vocabulary, not the lowest ids (a uniform draw)
    draws = np.concatenate([losses.batch_candidates(targets, 12, 1000)[0].numpy() for _ in range(50)])
    extras = draws[~np.isin(draws, [0, 2, 5, 7, 9])]
    assert 300 < extras.mean() < 700 and len(np.unique(extras)) > 200


def test_batch_candidates_of_the_whole_vocabulary_give_the_full_softmax_also_under_xla():
    features, kernel, bias, targets, _ = _case(seed=4)
    full = losses.token_nll(targets, np.einsum("btd,dv->btv", features, kernel) + bias).numpy()

    @tf.function(jit_compile=True)
    def sampled_nll(k):
        return losses.sampled_token_nll(targets, features, kernel, bias,
                                        losses.batch_candidates(targets, k, kernel.shape[1]))

    np.testing.assert_allclose(sampled_nll(kernel.shape[1]).numpy(), full, rtol=1e-5, atol=1e-5)
    # fewer classes than the batch has targets: each row still scores its own (never above full)
    few = sampled_nll(2).numpy()
    mask = targets != 0
    assert np.all(np.isfinite(few)) and np.all(few[mask] > 0) and np.all(few[mask] <= full[mask] + 1e-5)


def _numpy_smoothed(targets, logits, epsilon):
    """Cross-entropy against (1 - eps) one-hot + eps / |V|, per token, written from its definition."""
    out = np.zeros(targets.shape)
    vocabulary = logits.shape[-1]
    for index in np.ndindex(targets.shape):
        if targets[index] == 0:
            continue
        row = logits[index].astype(np.float64)
        log_p = row - (np.log(np.exp(row - row.max()).sum()) + row.max())
        q = np.full(vocabulary, epsilon / vocabulary)
        q[targets[index]] += 1.0 - epsilon
        out[index] = -(q * log_p).sum()
    return out


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_label_smoothing_is_the_cross_entropy_against_the_smoothed_target(epsilon):
    rng = np.random.default_rng(5)
    logits = rng.normal(0, 3, size=(3, 5, 11)).astype(np.float32)
    targets = rng.integers(1, 11, size=(3, 5)).astype(np.int32)
    targets[1, 3:] = 0  # padding costs nothing
    nll, smoothed = losses.smoothed_token_nll(targets, logits, epsilon)
    np.testing.assert_allclose(smoothed, _numpy_smoothed(targets, logits, epsilon), rtol=1e-5, atol=1e-5)
    # the reported NLL is the plain one, whatever epsilon
    np.testing.assert_allclose(nll, _numpy_smoothed(targets, logits, 0.0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(nll, losses.token_nll(targets, logits), rtol=1e-6, atol=1e-6)
    # Keras's own label smoothing of its categorical cross-entropy agrees on the real tokens
    keras_loss = tf.keras.losses.categorical_crossentropy(
        tf.one_hot(targets, 11), logits, from_logits=True, label_smoothing=epsilon).numpy()
    np.testing.assert_allclose(smoothed, keras_loss * (targets != 0), rtol=1e-5, atol=1e-5)
    # the Keras loss object: the mean over real tokens, and its config round trip
    loss = losses.MaskedSparseCategoricalCrossentropy(label_smoothing=epsilon)
    expected = _numpy_smoothed(targets, logits, epsilon).sum() / (targets != 0).sum()
    np.testing.assert_allclose(float(loss(targets, logits)), expected, rtol=1e-5)
    assert losses.MaskedSparseCategoricalCrossentropy.from_config(loss.get_config()).label_smoothing == epsilon


def test_label_smoothing_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match="label_smoothing"):
        losses.MaskedSparseCategoricalCrossentropy(label_smoothing=1.0)
