"""Tests for bahdanau_tf.unknown_words: [UNK] replacement by attention, in the Translator.

The model is a random-weight ``tiny`` RNNsearch whose output bias favours [UNK], so that its
translations hold many; the right replacement of each is known from the attention the search
returns (``return_alignments``), computed here independently with NumPy.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf.decoding import Batching
from bahdanau_tf.models import RNNEncDec
from bahdanau_tf.translator import Translator
from bahdanau_tf.unknown_words import UnknownWordDictionary, read_dictionary

from helpers import beam, random_model, replaced_reference, signatures_of, toy_tokenizers  # noqa: E402

# unknown source words ("zebra", "quokka") must come back as written
SENTENCES = ["the cat sat on zebra mat", "a quokka ran to the house", "", "dog",
             "the dog and the cat ran to a house on the mat"]
# lexicon.tsv's form (a third column), a repeated source (the first entry wins), a blank line
DICTIONARY = "zebra\tcebra\t0.9\nthe\tEL\nthe\tla\n\ncat\tGATO\n"


def test_each_unk_becomes_its_argmax_attention_source_word_or_its_dictionary_entry(tmp_path):
    source, target = toy_tokenizers()
    path = tmp_path / "dictionary.tsv"
    path.write_text(DICTIONARY, encoding="utf-8")
    dictionary = read_dictionary(str(path))
    assert dictionary == {"zebra": "cebra", "the": "EL", "cat": "GATO"}
    # translate's default path: the search under XLA, the strings around it in graphs
    translator = Translator(random_model(seed=3, unk_bias=4.0), source, target, search=beam(3),
                            unk_dictionary=str(path))
    replaced = translator.translate(SENTENCES, return_alignments=True, replace_unk=True)
    # the alignments keep the model's own tokens: [UNK], many of them
    assert sum(a.target_tokens.count("[UNK]") for a in replaced.alignments) >= 10
    expected = [replaced_reference(a.source_tokens, a.target_tokens, a.attention, dictionary)
                for a in replaced.alignments]
    assert replaced.translations == expected
    assert not any("[UNK]" in t for t in replaced.translations)
    # both kinds of replacement happened: a dictionary entry, and a word without one copied
    # as written ("quokka", unknown to the model, never "[UNK]")
    assert any(w in t.split() for t in replaced.translations for w in ("cebra", "EL", "GATO"))
    assert any("quokka" in t.split() for t in replaced.translations)


@pytest.mark.slow
def test_replace_unk_in_the_serving_signatures(tmp_path):
    source, target = toy_tokenizers()
    model = random_model(seed=3, unk_bias=4.0)
    plain = Translator(model, source, target, search=beam(3), batching=Batching(jit_compile=False))
    replacing = Translator(model, source, target, search=beam(3), batching=Batching(jit_compile=False),
                           replace_unk=True)
    batch = tf.constant(SENTENCES)
    expected = signatures_of(plain).translate_replace_unk(batch)["translations"].numpy()
    assert not any(b"[UNK]" in t for t in expected)
    assert any(b"[UNK]" in t for t in signatures_of(plain).serving_default(batch)["translations"].numpy())
    # an export with --replace_unk: serving_default is translate_replace_unk; n-best lists too
    assert (signatures_of(replacing).serving_default(batch)["translations"].numpy() == expected).all()
    rows = signatures_of(replacing).translate_nbest(batch, [3] * len(SENTENCES), [3] * len(SENTENCES))
    assert not any(b"[UNK]" in t for row in rows["translations"].numpy() for t in row)
    # and translate's default is the translator's replace_unk
    assert replacing.translate(SENTENCES).translations == [t.decode() for t in expected]


def test_refusals_are_clear(tmp_path):
    source, target = toy_tokenizers()
    encdec = random_model(RNNEncDec, seed=1)
    with pytest.raises(ValueError, match="need models with attention"):
        Translator(encdec, source, target, replace_unk=True)
    with pytest.raises(ValueError, match="need models with attention"):
        Translator(encdec, source, target).translate(["the cat"], replace_unk=True)
    with pytest.raises(AttributeError, match="needs models with attention"):  # not exported
        signatures_of(Translator(encdec, source, target)).translate_replace_unk  # noqa: B018
    for content, message in ((b"the\n", "line 1 is not source<TAB>target"),
                             (b"a\tb\n\tx\n", "line 2 is not source<TAB>target"),
                             (b"\n\n", "has no entry"), (b"a\t\xff\n", "is not UTF-8")):
        path = tmp_path / "bad.tsv"
        path.write_bytes(content)
        with pytest.raises(ValueError, match=message):
            UnknownWordDictionary(str(path))
    with pytest.raises(FileNotFoundError, match="not found"):
        read_dictionary(str(tmp_path / "missing.tsv"))
