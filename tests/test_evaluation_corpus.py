"""Tests for bahdanau_tf.evaluation.corpus: evaluate_translator on real verses with tiny models.

The models have random weights (no training): the numbers mean nothing as translations, but
every step is checked against an independent computation — the alignment error rate against
NumPy attention (tests/helpers.py) scored with the sure and possible gold links apart, and
No-UNK decoding against decoding the whole subset again.
"""

import dataclasses
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

import helpers
from bahdanau_tf import evaluation
from bahdanau_tf.corpora import load_corpus
from bahdanau_tf.decoding import Batching
from bahdanau_tf.models import RNNEncDec, RNNSearch
from bahdanau_tf.special_tokens import END_ID, START_ID, UNK_ID, UNK_TOKEN
from bahdanau_tf.text import WordTokenizer, split_words
from bahdanau_tf.translator import Translator


@pytest.fixture(scope="module")
def corpus():
    """Ten short test verses: eight with gold links, some of them possible-only, two without."""
    test = load_corpus("bible-en-es", split="test")
    short = [i for i, source in enumerate(test.sources) if len(split_words(source)) <= 12]
    gold = [i for i in short if test.alignments[i]
            and len(test.sure_alignments[i]) < len(test.alignments[i])][:8]
    others = [i for i in short if not test.alignments[i]][:2]
    assert len(gold) == 8 and len(others) == 2
    return test.select(gold + others)


def tiny_model(model_class, source_tokenizer, target_tokenizer, seed, unk_bias=0.0):
    """A tiny model with N(0, 0.6²) weights: peaked attention and output distributions."""
    model = model_class.from_preset(
        "tiny", source_vocabulary_size=source_tokenizer.vocabulary_size,
        target_vocabulary_size=target_tokenizer.vocabulary_size).build_variables()
    helpers.randomize_weights(model, seed=seed, scale=0.6)
    bias = model.readout.output_bias
    bias.assign(bias.numpy() + unk_bias * np.eye(bias.shape[0], dtype=np.float32)[UNK_ID])
    return model


def translator_of(model, tokenizers, beam_size):
    """Its `Translator`, searching without XLA (XLA is not what these tests are about)."""
    return Translator(model, *tokenizers, search=helpers.beam(beam_size), batching=Batching(jit_compile=False))


@pytest.fixture(scope="module")
def tokenizers(corpus):
    # shortlists of the first six verses: the No-UNK subset leaves out verses with other words
    return (WordTokenizer.build(corpus.sources[:6]), WordTokenizer.build(corpus.targets[:6]))


@pytest.fixture(scope="module")
def evaluated(corpus, tokenizers):
    """One greedy RNNsearch that emits [UNK] often, evaluated with No-UNK 'reuse' and 'decode'."""
    model = tiny_model(RNNSearch, *tokenizers, seed=5, unk_bias=1.5)
    translator = translator_of(model, tokenizers, 1)
    reuse = evaluation.evaluate_translator(translator, corpus, name="tiny", attention_plots=2,
                                           attention_plot_max_words=10)  # auto: greedy -> reuse
    decode = evaluation.evaluate_translator(translator, corpus, no_unk="decode")
    return model, reuse, decode


def reference_aer(model, tokenizers, corpus, merge=False):
    """AER of teacher-forced attention, from the NumPy RNNsearch (Och & Ney, counts summed).

    A word tokenizer gives one token per word ([UNK] included): token j is word j.
    """
    source_tokenizer, target_tokenizer = tokenizers
    a_total = s_total = a_and_s = a_and_p = 0
    for source, target, links, sure in zip(corpus.sources, corpus.targets, corpus.alignments,
                                           corpus.sure_alignments):
        if not links:
            continue
        source_ids = source_tokenizer.tokenize([source]).to_list()[0]
        target_ids = target_tokenizer.tokenize([target]).to_list()[0]
        _, attention = helpers.rnnsearch_reference(model, source_ids + [END_ID],
                                                   [START_ID] + target_ids)
        # row t predicts target word t (the last row predicts [END]); column n_source is [END]
        ranked = np.sort(attention[:-1], axis=1)
        assert np.min(ranked[:, -1] - ranked[:, -2]) > 1e-4  # no near tie: argmax well defined
        predicted = {(int(np.argmax(row)), t) for t, row in enumerate(attention[:-1])
                     if np.argmax(row) < len(source_ids)}
        possible = set(map(tuple, links))
        sure = possible if merge else set(map(tuple, sure))
        a_total += len(predicted)
        s_total += len(sure)
        a_and_s += len(predicted & sure)
        a_and_p += len(predicted & possible)
    return 1.0 - (a_and_s + a_and_p) / (a_total + s_total)


def test_aer_equals_numpy_reference_with_sure_and_possible_apart(corpus, tokenizers, evaluated):
    model, result, _ = evaluated
    report = result.report
    expected = reference_aer(model, tokenizers, corpus)
    merged = reference_aer(model, tokenizers, corpus, merge=True)
    assert abs(expected - merged) > 1e-6  # the verses tell S and P apart
    assert report.alignment.aer == pytest.approx(expected, abs=1e-12)
    assert report.alignment.num_sure == sum(len(s or ()) for s in corpus.sure_alignments)
    assert report.alignment.num_possible == sum(len(p or ()) for p in corpus.alignments)
    assert report.alignment.num_sentences == 8
    # the rest of the report: BLEU of the returned translations, the translator's settings
    assert report.bleu == evaluation.corpus_bleu(result.translations, corpus.targets)
    assert report.settings["beam_size"] == 1 and report.settings["no_unk"] == "reuse"
    assert len(result.alignments) == len(corpus)
    # heatmaps of the first two verses of at most 10 words
    short = [i for i, s in enumerate(corpus.sources) if len(split_words(s)) <= 10][:2]
    assert sorted(result.attention_figures) == short
    figure = result.attention_figures[short[0]]
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels == result.alignments[short[0]].source_tokens


def test_no_unk_reuse_decodes_only_translations_with_unk_and_is_exact_for_greedy(evaluated):
    _, reuse, decode = evaluated
    subset = reuse.report.no_unk.indices
    with_unk = [i for i in subset if UNK_TOKEN in reuse.translations[i]]
    assert 0 < len(with_unk) < len(subset) < len(reuse.translations)
    assert reuse.report.timings["no_unk_sentences_decoded"] == len(with_unk)
    assert decode.report.timings["no_unk_sentences_decoded"] == len(subset)
    # greedy search: forbidding [UNK] changes nothing where the first output had none
    assert reuse.no_unk_translations == decode.no_unk_translations
    assert reuse.report.no_unk == decode.report.no_unk
    assert reuse.report.no_unk.num_hypotheses_with_unk == 0
    assert all(reuse.no_unk_translations[i] == reuse.translations[i]
               for i in subset if i not in with_unk)
    assert all(reuse.no_unk_translations[i] != reuse.translations[i] for i in with_unk)


def test_no_unk_auto_rule_and_a_model_without_attention(corpus, tokenizers):
    model = tiny_model(RNNEncDec, *tokenizers, seed=4, unk_bias=1.5)
    translator = translator_of(model, tokenizers, 2)

    # beam search and [UNK] in some translation: the whole subset is decoded again
    result = evaluation.evaluate_translator(translator, corpus, attention_plots=2)
    report = result.report
    assert any(UNK_TOKEN in t for t in result.translations)
    assert report.settings["no_unk"] == "decode"
    assert report.timings["no_unk_sentences_decoded"] == report.no_unk.num_sentences > 0
    assert report.alignment is None and report.decoded_alignment is None
    assert result.alignments is None and result.attention_figures == {}

    # a model that never emits [UNK]: nothing is decoded again
    bias = model.readout.output_bias
    bias.assign(bias.numpy() - 100.0 * np.eye(bias.shape[0], dtype=np.float32)[UNK_ID])
    result = evaluation.evaluate_translator(translator, corpus)
    assert not any(UNK_TOKEN in t for t in result.translations)
    assert result.report.settings["no_unk"] == "reuse"
    assert result.report.timings["no_unk_sentences_decoded"] == 0
    assert all(result.no_unk_translations[i] == result.translations[i]
               for i in result.report.no_unk.indices)

    result = evaluation.evaluate_translator(translator, corpus, no_unk="off")
    assert result.report.no_unk is None and result.report.settings["no_unk"] == "off"
    assert "no_unk_decode_seconds" not in result.report.timings
    with pytest.raises(ValueError, match="no_unk"):
        evaluation.evaluate_translator(translator, corpus, no_unk="sometimes")
    with pytest.raises(ValueError, match="empty"):
        evaluation.evaluate_translator(translator, corpus.select([]))


def _without_timings(report):
    return {k: v for k, v in report.to_dict().items() if k != "timings"}


@pytest.mark.slow
def test_chunks_give_the_scores_of_the_whole_corpus(corpus, tokenizers, evaluated):
    """Chunks of 3 of the 10 verses: the same report, translations handed out in order."""
    model, whole, _ = evaluated
    translator = translator_of(model, tokenizers, 1)
    handed = []
    result = evaluation.evaluate_translator(
        translator, corpus, name="tiny", attention_plots=2, attention_plot_max_words=10,
        chunk_size=3, on_chunk=lambda first, chunk, *lists: handed.append((first, *lists)))
    assert [h[0] for h in handed] == [0, 3, 6, 9]
    assert [t for h in handed for t in h[1]] == whole.translations
    assert [t for h in handed for t in h[2]] == whole.no_unk_translations
    assert result.translations is None and result.alignments is None
    assert result.report.no_unk.indices == ()  # streamed: not kept
    expected = _without_timings(whole.report)
    assert _without_timings(result.report) == expected
    assert result.report.alignment.num_sentences == 8 and result.report.decoded_alignment
    assert sorted(result.attention_figures) == sorted(whole.attention_figures)
    assert (result.report.timings["no_unk_sentences_decoded"]
            == whole.report.timings["no_unk_sentences_decoded"])


@pytest.mark.slow
def test_auto_with_beam_search_decodes_again_the_chunks_before_the_first_unk(corpus, tokenizers):
    """--no_unk=auto at beam 2: the first chunk has no [UNK], a later one has. The report is
    that of 'decode' over the whole corpus: the first chunk was read and decoded again."""
    model = tiny_model(RNNEncDec, *tokenizers, seed=4, unk_bias=1.5)
    translator = translator_of(model, tokenizers, 2)
    first = evaluation.evaluate_translator(translator, corpus, no_unk="off").translations
    clean = [i for i, t in enumerate(first) if UNK_TOKEN not in t]
    with_unk = [i for i, t in enumerate(first) if UNK_TOKEN in t]
    assert len(clean) >= 2 and with_unk
    ordered = corpus.select(clean[:2] + with_unk + clean[2:])
    whole = evaluation.evaluate_translator(translator, ordered, no_unk="decode")
    assert {0, 1} & set(whole.report.no_unk.indices)  # the first chunk has No-UNK sentences
    streamed = evaluation.evaluate_translator(translator, ordered, chunk_size=2,
                                              on_chunk=lambda *args: None)
    assert streamed.report.settings["no_unk"] == "decode"
    assert _without_timings(streamed.report) == {**_without_timings(whole.report),
                                                 "no_unk": streamed.report.to_dict()["no_unk"]}
    assert streamed.report.no_unk == dataclasses.replace(whole.report.no_unk, indices=())
    assert (streamed.report.timings["no_unk_sentences_decoded"]
            == whole.report.timings["no_unk_sentences_decoded"] == whole.report.no_unk.num_sentences)
