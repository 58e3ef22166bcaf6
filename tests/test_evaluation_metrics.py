"""Tests for bahdanau_tf.evaluation.metrics: BLEU/chrF, No-UNK BLEU, BLEU by length."""

import doctest
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest

from bahdanau_tf import alignment, evaluation
from bahdanau_tf.evaluation import metrics

# A small fixed sample, cased and punctuated, with partial matches of every n-gram order.
HYPOTHESES = [
    "The cat sat on the mat.",
    "In the beginning God created the heavens and the earth.",
    "And the earth was without form, and empty.",
    "Hello World!",
    "He said: it is good.",
]
REFERENCES = [
    "the cat sat on a red mat.",
    "In the beginning, God created the heavens and the earth.",
    "The earth was formless and empty.",
    "hello world!",
    "And God saw that it was good.",
]


def _sacrebleu_cli(tmp_path, hypotheses, references, *flags):
    """The score printed by sacrebleu's own command line."""
    reference_file = tmp_path / "ref.txt"
    hypothesis_file = tmp_path / "hyp.txt"
    reference_file.write_text("\n".join(references) + "\n", encoding="utf-8")
    hypothesis_file.write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    executable = shutil.which("sacrebleu")
    command = [executable] if executable else [sys.executable, "-m", "sacrebleu"]
    output = subprocess.run(
        command + [str(reference_file), "-i", str(hypothesis_file), "-b", "-w", "4", *flags],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(output.strip())


def test_doctests():
    assert doctest.testmod(metrics).failed == 0


# === BLEU and chrF ===


def test_bleu_of_references_against_themselves_is_100():
    result = evaluation.corpus_bleu(REFERENCES, REFERENCES)
    assert result.score == pytest.approx(100.0)
    assert result.brevity_penalty == pytest.approx(1.0)
    assert result.num_sentences == len(REFERENCES)
    assert "tok:13a" in result.signature and "case:lc" in result.signature


@pytest.mark.subprocess
def test_bleu_equals_sacrebleu_command_line(tmp_path):
    lowercased = evaluation.corpus_bleu(HYPOTHESES, REFERENCES)
    cased = evaluation.corpus_bleu(HYPOTHESES, REFERENCES, lowercase=False)
    assert round(lowercased.score, 4) == _sacrebleu_cli(
        tmp_path, HYPOTHESES, REFERENCES, "-tok", "13a", "-lc"
    )
    assert round(cased.score, 4) == _sacrebleu_cli(tmp_path, HYPOTHESES, REFERENCES, "-tok", "13a")
    # sanity: a real, partial score, so the comparison above means something
    assert 20 < lowercased.score < 80


@pytest.mark.subprocess
def test_chrf_equals_sacrebleu_command_line(tmp_path):
    result = evaluation.corpus_chrf(HYPOTHESES, REFERENCES)
    expected = _sacrebleu_cli(tmp_path, HYPOTHESES, REFERENCES, "-m", "chrf", "--chrf-lowercase")
    assert round(result.score, 4) == expected
    assert "case:lc" in result.signature


def test_lowercase_changes_a_cased_sample():
    hypotheses = ["the quick brown fox jumps over the lazy dog"]
    references = ["The Quick Brown Fox jumps over the lazy dog"]
    assert evaluation.corpus_bleu(hypotheses, references).score == pytest.approx(100.0)
    cased = evaluation.corpus_bleu(hypotheses, references, lowercase=False)
    assert cased.score < 60.0
    assert "case:mixed" in cased.signature
    assert evaluation.corpus_chrf(hypotheses, references).score == pytest.approx(100.0)
    assert evaluation.corpus_chrf(hypotheses, references, lowercase=False).score < 100.0


def test_bleu_by_hand():
    # No punctuation, so 13a tokenization is a whitespace split.
    hypotheses = ["the cat sat on the mat", "good morning"]
    references = ["the cat sat on a red mat", "good morning"]
    # Clipped n-gram matches / hypothesis n-grams, summed over both sentences:
    #   1-grams: the(1 of 2, clipped) cat sat on mat -> 5/6, + good morning 2/2 -> 7/8
    #   2-grams: "the cat" "cat sat" "sat on" of 5 -> 3/5, + "good morning" 1/1 -> 4/6
    #   3-grams: "the cat sat" "cat sat on" of 4 -> 2/4; the short sentence has none -> 2/4
    #   4-grams: "the cat sat on" of 3 -> 1/3
    precisions = [7 / 8, 4 / 6, 2 / 4, 1 / 3]
    hypothesis_length, reference_length = 6 + 2, 7 + 2
    brevity_penalty = math.exp(1 - reference_length / hypothesis_length)
    expected = 100 * brevity_penalty * math.exp(sum(math.log(p) for p in precisions) / 4)

    result = evaluation.corpus_bleu(hypotheses, references)

    assert result.score == pytest.approx(expected, abs=1e-9)
    assert result.score == pytest.approx(49.2782, abs=1e-4)
    np.testing.assert_allclose(result.precisions, [100 * p for p in precisions])
    assert result.brevity_penalty == pytest.approx(brevity_penalty)
    assert (result.hypothesis_length, result.reference_length) == (8, 9)
    # corpus-level, not the mean of sentence scores
    sentence_mean = np.mean(
        [evaluation.corpus_bleu([h], [r]).score for h, r in zip(hypotheses, references)]
    )
    assert abs(result.score - sentence_mean) > 1.0


def test_bleu_rejects_mismatched_and_empty_inputs():
    with pytest.raises(ValueError, match=r"3 hypotheses, 2 references"):
        evaluation.corpus_bleu(["a", "b", "c"], ["a", "b"])
    with pytest.raises(ValueError, match="empty"):
        evaluation.corpus_bleu([], [])
    with pytest.raises(ValueError, match=r"1 hypotheses, 2 references"):
        evaluation.corpus_chrf(["a"], ["a", "b"])
    with pytest.raises(TypeError, match="single string"):
        evaluation.corpus_bleu("a sentence", "a sentence")


# === No-UNK BLEU ===

VOCABULARY = {"el", "gato", "se", "sentó", "perro", "the", "cat", "sat", "down", "on", "mat"}


def _oov(word):
    return word not in VOCABULARY


def test_no_unk_subset_by_hand():
    sources = ["el gato se sentó", "el loro se sentó", "el perro se sentó", "el gato"]
    references = ["the cat sat down", "the parrot sat down", "the dog sat down", "the cat"]

    def has_unknown(source, reference):
        return any(_oov(w) for w in source.split() + reference.split())

    # 1: "loro"/"parrot" unknown on both sides; 2: only "dog" unknown, in the reference
    assert evaluation.no_unk_subset(sources, references, has_unknown) == [0, 3]
    with pytest.raises(ValueError, match="4 sources, 3 references"):
        evaluation.no_unk_subset(sources, references[:3], has_unknown)


def test_no_unk_bleu_selects_sentences_and_scores_them():
    sources = ["el gato se sentó", "el loro se sentó", "el gato se sentó"]
    references = ["the cat sat down", "the parrot sat down", "the dog sat down"]
    hypotheses = ["the cat sat down", "[UNK] sat down", "the cat sat down"]

    result = evaluation.no_unk_bleu(hypotheses, references, sources, _oov)

    assert result.indices == (0,)
    assert (result.num_sentences, result.num_total) == (1, 3)
    assert result.score == pytest.approx(100.0)
    assert result.num_hypotheses_with_unk == 0

    # separate predicates per side: "dog" known to the target vocabulary only
    target_vocabulary = VOCABULARY | {"dog"}
    result = evaluation.no_unk_bleu(
        hypotheses, references, sources, (_oov, lambda w: w not in target_vocabulary)
    )
    assert result.indices == (0, 2)
    assert result.score < 100.0


def test_no_unk_bleu_with_nothing_kept_and_unk_in_hypotheses():
    result = evaluation.no_unk_bleu(["[UNK] cat"], ["the parrot"], ["el loro"], _oov)
    assert (result.num_sentences, result.bleu, result.score) == (0, None, None)
    result = evaluation.no_unk_bleu(["the [UNK]"], ["the cat"], ["el gato"], _oov)
    assert result.num_hypotheses_with_unk == 1


def test_no_unk_bleu_uses_split():
    # the default word split (text.split_words) cuts "gato," into "gato" ","; str.split does not
    known = VOCABULARY | {","}
    args = (["the cat"], ["the cat"], ["el gato,"], lambda w: w not in known)
    assert evaluation.no_unk_bleu(*args).num_sentences == 1
    assert evaluation.no_unk_bleu(*args, split=str.split).num_sentences == 0


def test_default_word_split_is_text_split_words():
    from bahdanau_tf import text

    sources = ["God's word, here", "a b c d e"]
    assert len(text.split_words(sources[0])) == 6
    # 6 words with split_words (3 with str.split): second bucket
    assert evaluation.length_buckets(sources, buckets=(3, 6)) == [[], [0, 1], []]
    assert evaluation.length_buckets(sources, buckets=(3, 6), split=str.split) == [[0], [1], []]
    report = evaluation.evaluation_report(sources, sources, sources)
    assert report.settings["evaluation"]["split"] == "bahdanau_tf.text.split_words"


# === BLEU by length ===


def test_length_buckets_membership_by_hand():
    sources = [
        "",  # 0 words
        " ".join(["w"] * 10),  # 10: upper bound of the first bucket, inclusive
        " ".join(["w"] * 11),  # 11: second bucket
        " ".join(["w"] * 25),
        " ".join(["w"] * 60),  # last bounded bucket
        " ".join(["w"] * 61),  # open bucket
        "one two three",
    ]
    groups = evaluation.length_buckets(sources)
    assert groups == [[0, 1, 6], [2], [3], [], [], [4], [5]]
    assert evaluation.length_buckets(sources, buckets=(3, 30)) == [[0, 6], [1, 2, 3], [4, 5]]
    assert evaluation.length_buckets(["a,b c", "a , b c"], buckets=(2,), split=str.split) == [
        [0],
        [1],
    ]
    with pytest.raises(ValueError, match="strictly increasing"):
        evaluation.length_buckets(sources, buckets=(20, 10))
    with pytest.raises(ValueError, match="non-empty"):
        evaluation.length_buckets(sources, buckets=())


def test_bleu_by_length_scores_each_bucket():
    long_source = " ".join(["palabra"] * 12)
    sources = ["uno dos tres", long_source, "uno dos", long_source]
    references = [
        "the cat sat on the mat",
        "in the beginning god created the heaven",
        "hello there my friend",
        "and the earth was without form",
    ]
    hypotheses = [
        "the cat sat on the mat",  # short bucket: both perfect
        "in the beginning god made the sky",
        "hello there my friend",
        "and the earth was void",
    ]
    scores = evaluation.bleu_by_length(hypotheses, references, sources, buckets=(10, 20))

    assert [(s.label, s.count) for s in scores] == [("0-10", 2), ("11-20", 2), (">20", 0)]
    assert [(s.min_length, s.max_length) for s in scores] == [(0, 10), (11, 20), (21, None)]
    assert scores[0].bleu == pytest.approx(100.0)
    assert scores[1].bleu == pytest.approx(
        evaluation.corpus_bleu([hypotheses[1], hypotheses[3]], [references[1], references[3]]).score
    )
    assert scores[1].bleu < 100.0
    assert scores[2].bleu is None


def test_unknown_word_test_asks_the_tokenizer():
    from bahdanau_tf.text import WordTokenizer

    tokenizer = WordTokenizer.build(["the cat sat on the mat ."], max_vocabulary_size=8)
    # the shortlist: the 4 most frequent words ("the", then ".", "cat", "mat" alphabetically)
    is_unknown = evaluation.unknown_word_test(tokenizer, ["the cat sat, on the dog."])
    assert [w for w in ["the", "cat", ".", ",", "sat", "on", "dog"] if is_unknown(w)] == [
        ",", "sat", "on", "dog"]
    assert not is_unknown("zebra")  # not in the sentences: not asked
    assert not evaluation.unknown_word_test(tokenizer, [])("dog")
    with pytest.raises(TypeError, match="single string"):
        evaluation.unknown_word_test(tokenizer, "the cat")


# ----------------------------------------------------------------------------------------------
# Streamed scores: sacrebleu's corpus statistics summed over chunks
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_text():
    """700 test verses (Spanish references) and imperfect 'translations' of them: every third
    word dropped, and every fifth verse replaced by its neighbour's reference."""
    from bahdanau_tf.corpora import load_corpus

    test = load_corpus("bible-en-es", split="test").select(slice(0, 700))
    hypotheses = []
    for i, reference in enumerate(test.targets):
        words = test.targets[i + 1 if i % 5 == 4 and i + 1 < len(test) else i].split()
        hypotheses.append(" ".join(w for j, w in enumerate(words) if j % 3 != 2))
    return hypotheses, test.targets, test.sources


def _chunked(size, *lists):
    for start in range(0, len(lists[0]), size):
        yield [values[start:start + size] for values in lists]


@pytest.mark.parametrize("size", [9, 64, 333])
def test_streamed_bleu_and_chrf_equal_sacrebleu_on_the_whole_lists(real_text, size):
    import sacrebleu

    hypotheses, references, _ = real_text
    assert len(hypotheses) % size  # the last chunk is shorter
    bleu, chrf = metrics.CorpusStatistics.bleu(), metrics.CorpusStatistics.chrf()
    for hyps, refs in _chunked(size, hypotheses, references):
        bleu.add(hyps, refs)
        chrf.add(hyps, refs)
    expected = sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True, tokenize="13a")
    result = bleu.result()
    assert 5.0 < expected.score < 95.0  # neither trivial nor empty
    assert (result.score, result.precisions, result.brevity_penalty, result.length_ratio) == (
        expected.score, tuple(expected.precisions), expected.bp, expected.ratio)
    assert (result.hypothesis_length, result.reference_length, result.num_sentences) == (
        expected.sys_len, expected.ref_len, len(hypotheses))
    expected_chrf = sacrebleu.metrics.CHRF(lowercase=True).corpus_score(hypotheses, [references])
    assert chrf.result().score == expected_chrf.score
    assert bleu.result() == evaluation.corpus_bleu(hypotheses, references)
    assert chrf.result() == evaluation.corpus_chrf(hypotheses, references)


def test_private_sacrebleu_statistics_give_corpus_score(real_text):
    """The one wrapper of sacrebleu's private API: its sums score as corpus_score does."""
    import sacrebleu

    hypotheses, references, _ = real_text
    for metric in (sacrebleu.metrics.BLEU(lowercase=True), sacrebleu.metrics.CHRF(word_order=2)):
        halves = [metrics.corpus_statistics(metric, hypotheses[a:b], references[a:b])
                  for a, b in ((0, 301), (301, None))]
        summed = [x + y for x, y in zip(*halves)]
        assert all(isinstance(x, int) for x in summed)
        streamed = metrics.score_from_statistics(metric, summed)
        assert streamed.score == metric.corpus_score(hypotheses, [references]).score
    assert metrics.corpus_statistics(sacrebleu.metrics.BLEU(), [], []) is None
    assert metrics.CorpusStatistics.bleu().result() is None


def test_streamed_report_equals_the_scores_of_the_whole_lists(real_text):
    """No-UNK subset, BLEU by length and AER counts summed over chunks of 97 (not dividing 700)
    equal sacrebleu and alignment_scores on the whole lists."""
    import sacrebleu

    hypotheses, references, sources = real_text
    words = metrics.default_split
    known = {w for s in sources[:400] for w in words(s)} | {w for r in references[:400]
                                                           for w in words(r)}
    is_unknown = lambda word: word not in known  # noqa: E731
    predicted = alignment.diagonal_links(sources, references)
    sure = alignment.diagonal_links(sources, hypotheses)
    statistics = evaluation.EvaluationStatistics()
    for hyps, refs, srcs, links, gold in _chunked(97, hypotheses, references, sources,
                                                  predicted, sure):
        statistics.add(hyps, refs, srcs, no_unk_hypotheses=hyps, is_unknown_word=is_unknown,
                       predicted_alignments=links, sure_alignments=gold)
    report = statistics.report(model="streamed")

    def bleu(indices):
        return sacrebleu.corpus_bleu([hypotheses[i] for i in indices],
                                     [[references[i] for i in indices]], lowercase=True).score

    kept = evaluation.no_unk_subset(
        sources, references, metrics.sentence_pair_test(is_unknown, metrics.default_split))
    assert 0 < len(kept) < len(hypotheses)
    assert (report.no_unk.num_sentences, report.no_unk.num_total) == (len(kept), 700)
    assert report.no_unk.bleu.score == bleu(kept)
    assert report.no_unk.indices == ()  # not kept by default: they grow with the corpus
    groups = evaluation.length_buckets(sources)
    assert [b.count for b in report.bleu_by_length] == [len(g) for g in groups]
    assert [b.bleu for b in report.bleu_by_length] == [bleu(g) if g else None for g in groups]
    assert report.alignment == alignment.alignment_scores(predicted, sure)
    whole = evaluation.evaluation_report(hypotheses, references, sources,
                                         no_unk_hypotheses=hypotheses, is_unknown_word=is_unknown,
                                         predicted_alignments=predicted, sure_alignments=sure)
    assert whole.no_unk.indices == tuple(kept)
    assert report.to_dict() == {**whole.to_dict(), "model": "streamed"}
