"""Tests for bahdanau_tf.evaluation: BLEU/chrF, No-UNK BLEU, BLEU by length, plots, AER."""

import json
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest

from bahdanau_tf import evaluation

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

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_size(path):
    """(width, height) from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


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


# === BLEU and chrF ===


def test_bleu_of_references_against_themselves_is_100():
    result = evaluation.corpus_bleu(REFERENCES, REFERENCES)
    assert result.score == pytest.approx(100.0)
    assert result.brevity_penalty == pytest.approx(1.0)
    assert result.num_sentences == len(REFERENCES)
    assert "tok:13a" in result.signature and "case:lc" in result.signature


def test_bleu_equals_sacrebleu_command_line(tmp_path):
    lowercased = evaluation.corpus_bleu(HYPOTHESES, REFERENCES)
    cased = evaluation.corpus_bleu(HYPOTHESES, REFERENCES, lowercase=False)
    assert round(lowercased.score, 4) == _sacrebleu_cli(
        tmp_path, HYPOTHESES, REFERENCES, "-tok", "13a", "-lc"
    )
    assert round(cased.score, 4) == _sacrebleu_cli(tmp_path, HYPOTHESES, REFERENCES, "-tok", "13a")
    # sanity: a real, partial score, so the comparison above means something
    assert 20 < lowercased.score < 80


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


# === Plots ===


def test_plot_bleu_by_length_writes_png(tmp_path):
    long_source = " ".join(["palabra"] * 15)
    sources = ["uno dos tres", long_source] * 2
    references = ["the cat sat on the mat", "in the beginning god created the heaven"] * 2
    good = evaluation.bleu_by_length(references, references, sources)
    bad = evaluation.bleu_by_length(
        ["the cat sat on a mat", "in the beginning"] * 2, references, sources
    )
    path = tmp_path / "plots" / "bleu_by_length.png"

    figure = evaluation.plot_bleu_by_length(
        {"RNNsearch-50": good, "RNNencdec-50": [dataclass_dict(b) for b in bad]},
        path,
        title="BLEU by length",
    )

    assert path.stat().st_size > 1000
    width, height = _png_size(path)
    assert (width, height) == (640, 480)
    axes = figure.axes[0]
    assert len(axes.lines) == 2
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["RNNsearch-50", "RNNencdec-50"]
    # empty buckets are skipped: two points per model, at x = 10 and x = 20
    np.testing.assert_allclose(axes.lines[0].get_xdata(), [10, 20])
    np.testing.assert_allclose(axes.lines[0].get_ydata(), [100.0, 100.0])


def dataclass_dict(bucket):
    return {
        "min_length": bucket.min_length,
        "max_length": bucket.max_length,
        "count": bucket.count,
        "bleu": bucket.bleu,
    }


def test_plot_bleu_by_length_rejects_different_buckets(tmp_path):
    sources, references = ["a b"], ["x y z w"]
    first = evaluation.bleu_by_length(references, references, sources, buckets=(10,))
    second = evaluation.bleu_by_length(references, references, sources, buckets=(20,))
    with pytest.raises(ValueError, match="different length buckets"):
        evaluation.plot_bleu_by_length({"a": first, "b": second}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="empty"):
        evaluation.plot_bleu_by_length({}, tmp_path / "x.png")


def test_plot_attention_is_grayscale_with_black_zero_and_white_one(tmp_path):
    import matplotlib.image

    attention = np.array(
        [
            [1.0, 0.0, 0.0],
            [0.0, 0.5, 0.5],
            [0.0, 0.0, 1.0],
            [0.25, 0.75, 0.0],
        ]
    )
    source_tokens = ["la", "tierra", "[END]"]
    target_tokens = ["the", "earth", "[END]", "x"]
    path = tmp_path / "attention.png"

    figure = evaluation.plot_attention(attention, source_tokens, target_tokens, path, title="t")

    width, height = _png_size(path)
    dpi = figure.dpi
    assert (width, height) == (
        round(figure.get_figwidth() * dpi),
        round(figure.get_figheight() * dpi),
    )
    image = matplotlib.image.imread(path)  # (height, width, RGBA) floats in [0, 1]
    assert image.shape[:2] == (height, width)
    axes = figure.axes[0]
    for i in range(attention.shape[0]):
        for j in range(attention.shape[1]):
            # cell centre (column j, row i) in display pixels, origin bottom-left
            x, y = axes.transData.transform((j, i))
            pixel = image[int(height - y), int(x), :3]
            # gray: R = G = B = the weight (to 8-bit precision)
            np.testing.assert_allclose(pixel, [attention[i, j]] * 3, atol=1 / 255 + 1e-6)
    assert [t.get_text() for t in axes.get_xticklabels()] == source_tokens
    assert [t.get_text() for t in axes.get_yticklabels()] == target_tokens
    assert axes.xaxis.get_ticks_position() == "top"


def test_plot_attention_rejects_mismatched_shape(tmp_path):
    with pytest.raises(ValueError, match=r"\[3, 2\].*got \[2, 3\]"):
        evaluation.plot_attention(np.zeros((2, 3)), ["a", "b"], ["x", "y", "z"], tmp_path / "a.png")
    with pytest.raises(ValueError, match="shape"):
        evaluation.plot_attention(np.zeros(3), ["a", "b", "c"], ["x"], tmp_path / "a.png")
    assert not (tmp_path / "a.png").exists()


# === Alignment error rate ===


def test_aer_of_gold_is_0_and_of_disjoint_is_1():
    sure = [{(0, 0), (1, 2), (2, 1)}, {(0, 1), (1, 0)}]
    assert evaluation.alignment_error_rate(sure, sure) == 0.0
    disjoint = [{(0, 1), (1, 1)}, {(0, 0)}]
    assert evaluation.alignment_error_rate(disjoint, sure) == 1.0
    # a possible link predicted is not an error, a link outside P is
    possible = [{(2, 2)}, set()]
    assert evaluation.alignment_error_rate(
        [sure[0] | {(2, 2)}, sure[1]], sure, possible
    ) == pytest.approx(0.0)


def test_aer_by_hand_with_sure_and_possible_links():
    # sentence 1: S = {(0,0), (1,1), (2,2)}, P adds (1,2); A = {(0,0), (1,2), (2,1)}
    # sentence 2: S = {(0,0)}, P = S;                      A = {(0,0), (1,1)}
    predicted = [{(0, 0), (1, 2), (2, 1)}, [(0, 0), (1, 1)]]
    sure = [{(0, 0), (1, 1), (2, 2)}, {(0, 0)}]
    possible = [{(1, 2)}, set()]
    # |A| = 5, |S| = 4, |A∩S| = 1 + 1 = 2, |A∩P| = 2 + 1 = 3  (counts summed, corpus-level)
    # AER = 1 - (2 + 3) / (5 + 4) = 4/9
    scores = evaluation.alignment_scores(predicted, sure, possible)
    assert scores.aer == pytest.approx(4 / 9)
    assert scores.precision == pytest.approx(3 / 5)
    assert scores.recall == pytest.approx(2 / 4)
    assert (scores.num_predicted, scores.num_sure, scores.num_possible) == (5, 4, 5)
    # P given with the sure links included gives the same result
    possible_with_sure = [possible[0] | sure[0], sure[1]]
    assert evaluation.alignment_error_rate(predicted, sure, possible_with_sure) == pytest.approx(
        4 / 9
    )
    # not the mean of the sentence AERs (1 - 3/6 = 0.5 and 1 - 2/3)
    assert scores.aer != pytest.approx(np.mean([0.5, 1 / 3]))
    # a single sentence's set of pairs is one sentence
    assert evaluation.alignment_error_rate(predicted[0], sure[0], possible[0]) == pytest.approx(
        1 - (1 + 2) / (3 + 3)
    )


def test_aer_rejects_bad_input():
    with pytest.raises(ValueError, match="2 predicted, 1 sure"):
        evaluation.alignment_error_rate([{(0, 0)}, set()], [{(0, 0)}])
    with pytest.raises(ValueError, match="undefined"):
        evaluation.alignment_error_rate([set()], [set()])
    with pytest.raises(TypeError, match="pair"):
        evaluation.alignment_error_rate([{(0, 0, 1)}], [{(0, 0)}])


def test_token_word_ids_groups_wordpieces():
    tokens = ["in", "the", "begin", "##ning", "[UNK]", "##s", "[END]", "[PAD]"]
    assert evaluation.token_word_ids(tokens) == [0, 1, 2, 2, 3, 3, None, None]
    assert evaluation.token_word_ids(["##x", "y"]) == [0, 1]


def test_attention_to_alignment_with_subword_pieces():
    # source tokens: "en" "el" "prin" "##cipio" [END] [PAD]  -> words 0 1 2 2 - -
    # target tokens: "in" "the" "begin" "##ning" "." [END] [PAD] -> words 0 1 2 2 3 - -
    source_word_ids = evaluation.token_word_ids(["en", "el", "prin", "##cipio", "[END]", "[PAD]"])
    target_word_ids = [0, 1, 2, 2, 3]  # shorter than the axis: END and padding dropped
    attention = np.array(
        [
            # en   el  prin  ##c  END  PAD
            [0.7, 0.1, 0.1, 0.1, 0.0, 0.0],  # in      -> en
            [0.1, 0.6, 0.2, 0.1, 0.0, 0.0],  # the     -> el
            [0.0, 0.1, 0.3, 0.6, 0.0, 0.0],  # begin   -> ##cipio (word 2)
            [0.0, 0.1, 0.8, 0.1, 0.0, 0.0],  # ##ning  -> prin (word 2): same link once
            [0.1, 0.1, 0.1, 0.1, 0.6, 0.0],  # .       -> [END]: unaligned
            [0.5, 0.0, 0.0, 0.0, 0.5, 0.0],  # [END]   -> dropped (no target word)
            [0.9, 0.1, 0.0, 0.0, 0.0, 0.0],  # [PAD]   -> dropped
        ]
    )
    links = evaluation.attention_to_alignment(attention, source_word_ids, target_word_ids)
    assert links == {(0, 0), (1, 1), (2, 2)}
    # without maps, token j is word j
    assert evaluation.attention_to_alignment(attention[:2, :2]) == {(0, 0), (1, 1)}
    # ties go to the first source token
    assert evaluation.attention_to_alignment([[0.5, 0.5]]) == {(0, 0)}
    # a target piece of a word attending elsewhere adds a second link for that word
    attention[3] = [0.0, 0.9, 0.1, 0.0, 0.0, 0.0]
    assert evaluation.attention_to_alignment(attention, source_word_ids, target_word_ids) == {
        (0, 0),
        (1, 1),
        (2, 2),
        (1, 2),
    }
    with pytest.raises(ValueError, match="7 entries"):
        evaluation.attention_to_alignment(attention, list(range(7)))


# === Report ===


def test_evaluation_report_round_trips_through_json():
    sources = ["el gato se sentó", "el loro se sentó", " ".join(["palabra"] * 12)]
    references = ["the cat sat down", "the parrot sat down", "in the beginning god created"]
    hypotheses = ["the cat sat down", "the [UNK] sat down", "in the beginning god made"]
    report = evaluation.evaluation_report(
        hypotheses,
        references,
        sources,
        model="rnnsearch-tiny",
        no_unk_hypotheses=["the cat sat down", "the bird sat down", "in the beginning"],
        is_unknown_word=_oov,
        predicted_alignments=[{(0, 0), (1, 1)}],
        sure_alignments=[{(0, 0), (1, 2)}],
        settings={"beam_size": 12},
    )
    data = json.loads(report.to_json())

    assert data["model"] == "rnnsearch-tiny"
    assert data["num_sentences"] == 3
    assert data["bleu"]["score"] == pytest.approx(evaluation.corpus_bleu(hypotheses, references).score)
    assert data["chrf"]["score"] == pytest.approx(evaluation.corpus_chrf(hypotheses, references).score)
    assert data["no_unk"]["num_sentences"] == 1
    assert data["no_unk"]["bleu"]["score"] == pytest.approx(100.0)
    assert [b["label"] for b in data["bleu_by_length"]] == [
        "0-10", "11-20", "21-30", "31-40", "41-50", "51-60", ">60"
    ]
    assert [b["count"] for b in data["bleu_by_length"]] == [2, 1, 0, 0, 0, 0, 0]
    assert data["bleu_by_length"][1]["bleu"] == pytest.approx(
        evaluation.corpus_bleu(hypotheses[2:], references[2:]).score
    )
    assert data["bleu_by_length"][2]["bleu"] is None
    assert data["alignment"]["aer"] == pytest.approx(0.5)
    assert data["settings"]["beam_size"] == 12
    assert data["settings"]["evaluation"]["lowercase"] is True
    assert data["settings"]["evaluation"]["tokenize"] == "13a"

    back = evaluation.EvaluationReport.from_json(report.to_json())
    assert back.bleu == report.bleu
    assert back.bleu_by_length == report.bleu_by_length
    assert back.alignment == report.alignment
    assert back.no_unk.score == report.no_unk.score
    assert back.to_json() == report.to_json()


def test_evaluation_report_optional_parts():
    report = evaluation.evaluation_report(["a b c d"], ["a b c d"], ["w x y z"])
    data = json.loads(report.to_json())
    assert data["no_unk"] is None and data["alignment"] is None
    with pytest.raises(ValueError, match="is_unknown_word"):
        evaluation.evaluation_report(["a"], ["a"], ["a"], no_unk_hypotheses=["a"])
