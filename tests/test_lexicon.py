"""Tests for bahdanau_tf.lexicon: co-occurrence Dice top-k against brute force, its file round
trip through the model directory, and a known translation on the Bible."""

import collections
import itertools

import numpy as np
import pytest

from bahdanau_tf import data, lexicon, model_directory, text
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
    corpus = data.load_corpus("bible-en-es", split="train").select(slice(0, 4000))
    source = text.WordTokenizer.build(corpus.sources, max_vocabulary_size=2000)
    target = text.WordTokenizer.build(corpus.targets, max_vocabulary_size=2000)
    built = lexicon.Lexicon.build(zip(corpus.sources, corpus.targets), source, target, top_k=5)
    for english, spanish in (("God", "Dios"), ("king", "rey"), ("house", "casa")):
        best = [target.vocabulary[i] for i in built.translations[source.vocabulary.index(english)] if i >= 0]
        assert spanish in best[:3], (english, best)
