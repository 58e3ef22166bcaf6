"""Tests of bahdanau_tf.models.regularization: the masks, and dropout in the training pass only, for
every model (inference, translations and the served graph unchanged)."""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

import helpers
from bahdanau_tf import models, serving
from bahdanau_tf.models import layers, regularization
from bahdanau_tf.decoding import Batching
from bahdanau_tf.presets import get_preset
from bahdanau_tf.special_tokens import END_ID, PAD_ID, UNK_ID
from bahdanau_tf.translator import Translator

RATES = dict(embedding_dropout=0.3, annotation_dropout=0.3, recurrent_dropout=0.3,
             readout_dropout=0.3, word_dropout=0.3)
SOURCE = np.array([[5, 6, 7, 8, 2, 0], [9, 10, 11, 12, 13, 2]], "int32")
TARGET_IN = np.array([[1, 5, 6, 7], [1, 8, 9, 0]], "int32")


def _twins(preset, seed=0, **rates):
    """(a random model of ``preset``, the same weights with ``rates`` of dropout)."""
    plain = helpers.random_model(get_preset(preset).model_class, preset=preset, seed=seed, scale=0.5)
    dropped = type(plain).from_config({**plain.get_config(), **(rates or RATES)})
    dropped.build_variables()
    weights = [v for v in plain.variables if not v.path.endswith("seed_generator_state")]
    targets = [v for v in dropped.variables if not v.path.endswith("seed_generator_state")]
    assert len(weights) == len(targets)
    for source, target in zip(weights, targets):
        target.assign(source.numpy())
    return plain, dropped


def test_rates_outside_zero_one_are_refused_by_name():
    for bad in (-0.1, 1.0, True, "0.1"):
        with pytest.raises(ValueError, match="`word_dropout` must be a float in"):
            regularization.check_rates(word_dropout=bad)
    with pytest.raises(ValueError, match="`recurrent_dropout`"):
        models.RNNSearch(10, 10, recurrent_dropout=1.5)
    # no rate, no seed generator: the paper presets keep exactly their variables
    paper = models.model_from_preset("tiny", source_vocabulary_size=10, target_vocabulary_size=10)
    assert not hasattr(paper, "seed_generator")
    assert paper.get_config()["word_dropout"] == 0.0


def test_sequence_dropout_draws_one_mask_per_sentence_with_the_expected_value():
    seed = keras.random.SeedGenerator(3)
    inputs = np.ones((256, 7, 32), "float32")
    dropped = np.asarray(regularization.sequence_dropout(inputs, 0.25, seed))
    # the same features dropped at every position of a sentence
    np.testing.assert_array_equal(dropped, np.broadcast_to(dropped[:, :1, :], dropped.shape))
    assert set(np.unique(dropped)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((dropped[:, 0] == 0).mean() - 0.25) < 0.03
    again = np.asarray(regularization.sequence_dropout(inputs, 0.25, seed))
    assert (again != dropped).any()  # a new mask per call
    np.testing.assert_array_equal(regularization.sequence_dropout(inputs, 0.0, seed), inputs)


def test_word_dropout_replaces_whole_tokens_by_unk_never_end_or_padding():
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 100, size=(300, 12)).astype("int32")
    ids[:, 8], ids[:, 9:] = END_ID, PAD_ID
    out = np.asarray(regularization.drop_words(ids, 0.3, keras.random.SeedGenerator(1)))
    changed = out != ids
    assert (out[changed] == UNK_ID).all()
    assert not changed[:, 8:].any()  # [END] and padding kept
    assert abs(changed[:, :8].mean() - 0.3) < 0.03  # one decision per token


def test_recurrent_mask_is_read_by_the_recurrent_matmuls_not_by_the_interpolation():
    rng = np.random.default_rng(4)
    cell = layers.ConditionalGRUCell(5)
    cell.build(input_dim=3, context_dim=4)
    helpers.randomize_weights(cell, seed=4)
    x, h, c = (rng.normal(size=(2, d)).astype("float32") for d in (3, 5, 4))
    mask = (rng.uniform(size=(2, 5)) > 0.4).astype("float32") / 0.6
    got = np.asarray(cell(cell.project_inputs(x), h, cell.project_context(c), recurrent_mask=mask))
    W, C, b = (helpers.split3(v.numpy()) for v in (cell.kernel, cell.context_kernel, cell.bias))
    U = helpers.split_recurrent(cell.gate_kernel.numpy(), cell.recurrent_kernel.numpy())
    read = h * mask
    z = helpers.sigmoid(x @ W["z"] + read @ U["z"] + c @ C["z"] + b["z"])
    r = helpers.sigmoid(x @ W["r"] + read @ U["r"] + c @ C["r"] + b["r"])
    candidate = np.tanh(x @ W["h"] + (r * read) @ U["h"] + c @ C["h"] + b["h"])
    np.testing.assert_allclose(got, (1 - z) * h + z * candidate, atol=1e-5)


@pytest.mark.parametrize("preset", ["tiny", "rnnencdec-tiny", "seq2seq-tiny"])
def test_dropout_acts_in_the_training_pass_only(preset):
    plain, dropped = _twins(preset)
    inference = np.asarray(plain((SOURCE, TARGET_IN)))
    # inference: the model without dropout, teacher-forced and step by step (exactly, but for
    # Keras's LSTM, which with a recurrent_dropout computes each gate by its own matmul)
    same = (functools.partial(np.testing.assert_allclose, atol=1e-5) if preset == "seq2seq-tiny"
            else np.testing.assert_array_equal)
    same(np.asarray(dropped((SOURCE, TARGET_IN))), inference)
    steps = [np.asarray(helpers.step_through(model, SOURCE, TARGET_IN)) for model in (plain, dropped)]
    same(steps[0], steps[1])
    # training: a new draw at every call
    first, second = (np.asarray(dropped((SOURCE, TARGET_IN), training=True)) for _ in range(2))
    assert np.abs(first - inference).max() > 1e-3 and np.abs(first - second).max() > 1e-3
    # each rate alone acts (the readout's even on the sampled softmax's features)
    for name in RATES:
        if preset == "seq2seq-tiny" and name == "annotation_dropout":
            continue  # between stacked layers: the tiny Seq2Seq has 2, checked with the others
        _, alone = _twins(preset, **{name: 0.5})
        assert np.abs(np.asarray(alone((SOURCE, TARGET_IN), training=True)) - inference).max() > 1e-4, name
    restored = type(dropped).from_config(dropped.get_config())
    assert {name: getattr(restored, name) for name in RATES} == RATES


@pytest.mark.slow
def test_translations_and_the_served_export_are_the_same_with_and_without_dropout(tmp_path):
    source_tokenizer, target_tokenizer = helpers.toy_tokenizers()
    plain, dropped = _twins("tiny", seed=3)
    sentences = ["the cat sat on a mat", "a dog ran to the house and the cat sat"]
    # the graph search: XLA is not what is tested (the two searches agree: tests/test_translator.py)
    translators = [Translator(model, source_tokenizer, target_tokenizer, search=helpers.beam(3),
                              batching=Batching(jit_compile=False)) for model in (plain, dropped)]
    outputs = [translator.translate(sentences) for translator in translators + translators[1:]]
    assert outputs[0].translations == outputs[1].translations == outputs[2].translations
    np.testing.assert_array_equal(outputs[0].scores, outputs[1].scores)
    # the dropout model's export, run by the model server's loading path, answers as the plain
    # model's own signatures do (dropout in the served graph would move every score)
    path = serving.export_saved_model(translators[1], str(tmp_path / "dropout"), warmup=False)
    batch = tf.constant(sentences)
    plain_signatures = helpers.signatures_of(translators[0])
    with serving.SessionBundle(path) as bundle:
        assert sorted(bundle.signature_defs) == ["align", "serving_default", "translate_nbest",
                                                 "translate_replace_unk"]
        for name in ("serving_default", "align"):
            expected = getattr(plain_signatures, name)(batch)
            for key, value in bundle.run(name, sentences=sentences).items():
                if value.dtype == object:
                    assert list(value.ravel()) == list(expected[key].numpy().ravel()), (name, key)
                else:
                    np.testing.assert_allclose(value, expected[key].numpy(), rtol=1e-5, atol=1e-6,
                                               err_msg=f"{name} {key}")
