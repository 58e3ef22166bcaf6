"""Tests for bahdanau_tf.lexicon: co-occurrence Dice top-k against brute force, its file round
trip through the model directory, and a known translation on the Bible."""

import collections
import itertools

import numpy as np
import tensorflow as tf
import pytest

from bahdanau_tf import corpora, lexicon, model_directory, text
from helpers import random_model, save_model_dir, toy_tokenizers

PAIRS = [
    ("the cat sat", "el gato se sentó"),
    ("the dog ran", "el perro corrió"),
    ("a cat and a dog", "una gato y una perro"),
    ("the mat", "una alfombra"),
    ("cat cat cat", "gato"),
    ("zebra", "cebra"),  # unknown on both sides: counted nowhere
    ("", ""),
]


def _brute_force(pairs, source, target, top_k):
    together, source_count, target_count = collections.Counter(), collections.Counter(), collections.Counter()
    for s, t in pairs:
        s_ids = {i for i in source.tokenize([s]).to_list()[0] if i >= 4}
        t_ids = {i for i in target.tokenize([t]).to_list()[0] if i >= 4}
        source_count.update(s_ids)
        target_count.update(t_ids)
        together.update(itertools.product(s_ids, t_ids))
    expected = {}
    for s_id in range(source.vocabulary_size):
        ranked = sorted(((-2 * n / (source_count[a] + target_count[b]), b) for (a, b), n in together.items()
                         if a == s_id))
        expected[s_id] = [(b, -d) for d, b in ranked[:top_k]]
    return expected


def test_top_k_is_the_brute_force_dice_ranking():
    source, target = toy_tokenizers()
    built = lexicon.Lexicon.build(PAIRS, source, target, top_k=3)
    assert built.translations.shape == (source.vocabulary_size, 3)
    expected = _brute_force(PAIRS, source, target, 3)
    for s_id in range(source.vocabulary_size):
        got = [(int(t), float(d)) for t, d in zip(built.translations[s_id], built.scores[s_id]) if t >= 0]
        assert [t for t, _ in got] == [t for t, _ in expected[s_id]], s_id
        np.testing.assert_allclose([d for _, d in got], [d for _, d in expected[s_id]], rtol=1e-6)
    cat = source.vocabulary.index("cat")
    assert target.vocabulary[built.translations[cat, 0]] == "gato"  # 3 of 3 sentences: Dice 1
    assert not (built.translations[:4] >= 0).any()  # no special token has entries...
    assert not ((built.translations >= 0) & (built.translations < 4)).any()  # ...or is one
    # chunked counting gives the same lexicon
    original = lexicon._CHUNK_PAIRS
    try:
        lexicon._CHUNK_PAIRS = 2
        chunked = lexicon.Lexicon.build(PAIRS, source, target, top_k=3)
    finally:
        lexicon._CHUNK_PAIRS = original
    np.testing.assert_array_equal(chunked.translations, built.translations)
    with pytest.raises(ValueError, match="`top_k` must be a positive int"):
        lexicon.Lexicon.build(PAIRS, source, target, top_k=0)
    with pytest.raises(ValueError, match="The corpus is empty"):
        lexicon.Lexicon.build([], source, target)


def test_the_lexicon_round_trips_through_the_model_directory(tmp_path):
    source, target = toy_tokenizers()
    directory = save_model_dir(tmp_path / "model", random_model(seed=2), source, target)
    built = lexicon.Lexicon.build(PAIRS, source, target, top_k=2)
    assert model_directory.read_lexicon(directory) is None
    model_directory.write_lexicon(directory, built)
    read = model_directory.read_lexicon(directory)
    np.testing.assert_array_equal(read.translations, built.translations)
    np.testing.assert_allclose(read.scores, built.scores, rtol=1e-5)
    with open(f"{directory}/{model_directory.LEXICON}", "a", encoding="utf-8") as handle:
        handle.write("cat\tnot-a-word\t0.5\n")
    with pytest.raises(ValueError, match=r"lexicon.tsv.*line \d+ is not source<TAB>target<TAB>score"):
        model_directory.read_lexicon(directory)


def test_on_the_bible_god_translates_to_dios_king_to_rey():
    corpus = corpora.load_corpus("bible-en-es", split="train").select(slice(0, 4000))
    source = text.WordTokenizer.build(corpus.sources, max_vocabulary_size=2000)
    target = text.WordTokenizer.build(corpus.targets, max_vocabulary_size=2000)
    built = lexicon.Lexicon.build(zip(corpus.sources, corpus.targets), source, target, top_k=5)
    for english, spanish in (("God", "Dios"), ("king", "rey"), ("house", "casa")):
        best = [target.vocabulary[i] for i in built.translations[source.vocabulary.index(english)] if i >= 0]
        assert spanish in best[:3], (english, best)


# === Candidate lists ===

def _reference_candidates(table, source_ids, frequent):
    """NumPy: the ids below ``frequent`` and every translation of a source id, ascending."""
    listed = set(range(frequent)) | {int(t) for s in np.asarray(source_ids).ravel() for t in table[s] if t >= 0}
    return sorted(listed)


def test_candidate_ids_are_the_frequent_ids_and_the_source_words_translations():
    rng = np.random.default_rng(3)
    vocabulary, per_word = 300, 4
    table = rng.integers(-1, vocabulary, size=(50, per_word)).astype(np.int32)
    table[0] = -1  # PAD has no translation, as in a built lexicon
    source_ids = rng.integers(0, 50, size=(6, 9)).astype(np.int32)
    source_ids[:, -3:] = 0  # padding
    expected = _reference_candidates(table, source_ids, frequent=20)
    assert len(expected) > 20  # the lexicon adds ids
    dynamic = lexicon.candidate_ids(tf.constant(table), tf.constant(source_ids), 20, vocabulary)
    assert dynamic.numpy().tolist() == expected
    assert int(lexicon.candidate_count(table, source_ids, 20, vocabulary)) == len(expected)
    # a static size under XLA: the same list, then PAD
    size = lexicon.candidate_bucket(len(expected), vocabulary)
    compiled = tf.function(lambda ids: lexicon.candidate_ids(tf.constant(table), ids, 20, vocabulary, size),
                           jit_compile=True)
    padded = compiled(tf.constant(source_ids)).numpy().tolist()
    assert padded == expected + [0] * (size - len(expected))


def test_candidate_buckets_cover_the_count_with_little_padding_and_few_sizes():
    vocabulary = 30000
    counts = list(range(1, vocabulary + 1, 7)) + [vocabulary, 64, 65, 1024, 1025]
    buckets = [lexicon.candidate_bucket(c, vocabulary) for c in counts]
    for count, bucket in zip(counts, buckets):
        assert count <= bucket <= vocabulary
        assert bucket - count < max(64, count / 4 + 1), (count, bucket)
    assert len(set(buckets)) <= 80  # a handful per octave: compilations stay bounded
    as_tensor = [int(lexicon.candidate_bucket(tf.constant(c), vocabulary)) for c in counts[::50]]
    assert all(c <= b <= vocabulary for c, b in zip(counts[::50], as_tensor))


def test_candidate_projection_pads_with_minus_infinity():
    kernel = np.arange(12, dtype=np.float32).reshape(2, 6)
    bias = np.arange(6, dtype=np.float32)
    got_kernel, got_bias = lexicon.candidate_projection(kernel, bias, tf.constant([0, 2, 5, 0, 0]))
    np.testing.assert_array_equal(got_kernel.numpy(), kernel[:, [0, 2, 5, 0, 0]])
    np.testing.assert_array_equal(got_bias.numpy(), [0, 2, 5, -np.inf, -np.inf])


def test_candidate_lists_refuse_bad_settings():
    table = lexicon.Lexicon(np.zeros((5, 2), np.int32), np.zeros((5, 2), np.float32))
    with pytest.raises(ValueError, match="frequent"):
        lexicon.CandidateLists(table, frequent=3)
    with pytest.raises(ValueError, match="per_word"):
        lexicon.CandidateLists(table, per_word=0)
    assert lexicon.CandidateLists(table, frequent=4, per_word=1).table.shape == (5, 1)


def test_pair_scores_read_the_top_k_as_a_matrix():
    source, target = toy_tokenizers()
    table = lexicon.Lexicon.build(PAIRS, source, target, top_k=2)
    s_ids = source.tokenize(["the cat sat zebra"]).to_list()[0] + [-1]
    t_ids = target.tokenize(["el gato se sentó"]).to_list()[0] + [-1]
    scores = table.pair_scores(s_ids, t_ids)
    assert scores.shape == (len(t_ids), len(s_ids))
    expected = np.zeros_like(scores)
    for column, s_id in enumerate(s_ids):
        for t_id, score in _brute_force(PAIRS, source, target, 2).get(s_id, []):
            expected[[i for i, t in enumerate(t_ids) if t == t_id], column] = score
    np.testing.assert_allclose(scores, expected, rtol=1e-6)
    assert scores.any() and not scores[:, -1].any() and not scores[-1].any()
