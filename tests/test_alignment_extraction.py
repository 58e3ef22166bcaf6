"""Tests for bahdanau_tf.alignment: word links from attention, gold S and P, AER."""

import doctest

import numpy as np
import pytest

import helpers
from bahdanau_tf import alignment
from bahdanau_tf.alignment import dev_choice, error_rate, extraction, symmetrization


def test_doctests():
    for module in (extraction, error_rate, symmetrization, dev_choice):
        assert doctest.testmod(module).failed == 0


# === Alignment error rate ===


def test_aer_of_gold_is_0_and_of_disjoint_is_1():
    sure = [{(0, 0), (1, 2), (2, 1)}, {(0, 1), (1, 0)}]
    assert alignment.alignment_error_rate(sure, sure) == 0.0
    disjoint = [{(0, 1), (1, 1)}, {(0, 0)}]
    assert alignment.alignment_error_rate(disjoint, sure) == 1.0
    # a possible link predicted is not an error, a link outside P is
    possible = [{(2, 2)}, set()]
    assert alignment.alignment_error_rate(
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
    scores = alignment.alignment_scores(predicted, sure, possible)
    assert scores.aer == pytest.approx(4 / 9)
    assert scores.precision == pytest.approx(3 / 5)
    assert scores.recall == pytest.approx(2 / 4)
    assert (scores.num_predicted, scores.num_sure, scores.num_possible) == (5, 4, 5)
    # P given with the sure links included gives the same result
    possible_with_sure = [possible[0] | sure[0], sure[1]]
    assert alignment.alignment_error_rate(predicted, sure, possible_with_sure) == pytest.approx(
        4 / 9
    )
    # not the mean of the sentence AERs (1 - 3/6 = 0.5 and 1 - 2/3)
    assert scores.aer != pytest.approx(np.mean([0.5, 1 / 3]))
    # a single sentence's set of pairs is one sentence
    assert alignment.alignment_error_rate(predicted[0], sure[0], possible[0]) == pytest.approx(
        1 - (1 + 2) / (3 + 3)
    )


def test_aer_rejects_bad_input():
    with pytest.raises(ValueError, match="2 predicted, 1 sure"):
        alignment.alignment_error_rate([{(0, 0)}, set()], [{(0, 0)}])
    with pytest.raises(ValueError, match="undefined"):
        alignment.alignment_error_rate([set()], [set()])
    with pytest.raises(TypeError, match="pair"):
        alignment.alignment_error_rate([{(0, 0, 1)}], [{(0, 0)}])


def test_token_word_ids_groups_wordpieces():
    tokens = ["in", "the", "begin", "##ning", "[UNK]", "##s", "[END]", "[PAD]"]
    assert alignment.token_word_ids(tokens) == [0, 1, 2, 2, 3, 3, None, None]
    assert alignment.token_word_ids(["##x", "y"]) == [0, 1]


def test_attention_to_alignment_with_subword_pieces():
    # source tokens: "en" "el" "prin" "##cipio" [END] [PAD]  -> words 0 1 2 2 - -
    # target tokens: "in" "the" "begin" "##ning" "." [END] [PAD] -> words 0 1 2 2 3 - -
    source_word_ids = alignment.token_word_ids(["en", "el", "prin", "##cipio", "[END]", "[PAD]"])
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
    links = alignment.attention_to_alignment(attention, source_word_ids, target_word_ids)
    assert links == {(0, 0), (1, 1), (2, 2)}
    # without maps, token j is word j
    assert alignment.attention_to_alignment(attention[:2, :2]) == {(0, 0), (1, 1)}
    # ties go to the first source token
    assert alignment.attention_to_alignment([[0.5, 0.5]]) == {(0, 0)}
    # a target piece of a word attending elsewhere adds a second link for that word
    attention[3] = [0.0, 0.9, 0.1, 0.0, 0.0, 0.0]
    assert alignment.attention_to_alignment(attention, source_word_ids, target_word_ids) == {
        (0, 0),
        (1, 1),
        (2, 2),
        (1, 2),
    }
    with pytest.raises(ValueError, match="7 entries"):
        alignment.attention_to_alignment(attention, list(range(7)))


def _rule_reference(attention, source_words, target_words, pooling, threshold, shift=0,
                    mutual=False):
    """Each extraction rule spelled out word by word (the `ExtractionRule` docstring)."""
    attention = attention[shift:]
    target_words = target_words[: len(attention)]
    n_source, n_target = max(w for w in source_words if w is not None) + 1, max(target_words) + 1
    table, nulls = [], []
    for t in range(n_target):
        rows = [attention[i] for i, w in enumerate(target_words) if w == t]
        row = rows[0] if pooling == "first" else np.mean(rows, axis=0)
        weights = []
        for s in range(n_source):
            pieces = [row[j] for j, w in enumerate(source_words) if w == s]
            weights.append({"max": max(pieces), "sum": sum(pieces), "first": pieces[0]}[pooling])
        others = [row[j] for j, w in enumerate(source_words) if w is None]
        table.append(weights)
        nulls.append(max(others) if pooling == "max" else sum(others))
    links = set()
    for t, weights in enumerate(table):
        best = int(np.argmax(weights))
        column = [table[u][best] for u in range(n_target)]
        if mutual and int(np.argmax(column)) != t:
            continue
        if weights[best] >= max(nulls[t], threshold) and weights[best] > 0:
            links.add((best, t))
    return links


def test_extraction_rules_against_their_definition():
    rng = np.random.default_rng(0)
    source_words = [0, 0, 1, 2, 2, 2, 3, None]  # pieces of 4 words, then [END]
    target_words = [0, 1, 1, 2, 3, 3]
    for _ in range(50):
        logits = rng.normal(scale=2.0, size=(len(target_words) + 1, len(source_words)))
        attention = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        for pooling in ("max", "sum", "first"):
            for threshold in (0.0, 0.3, 0.6):
                rule = alignment.ExtractionRule(pooling, threshold)
                assert alignment.attention_to_alignment(
                    attention, source_words, target_words, rule) == _rule_reference(
                    attention, source_words, target_words, pooling, threshold), (rule, attention)
                assert alignment.ExtractionRule.parse(str(rule)) == rule
    for shift in (0, 1):
        for mutual in (False, True):
            rule = alignment.ExtractionRule("sum", 0.2, shift, mutual)
            assert alignment.attention_to_alignment(
                attention, source_words, target_words, rule) == _rule_reference(
                attention, source_words, target_words, "sum", 0.2, shift, mutual), rule
            assert alignment.ExtractionRule.parse(str(rule)) == rule
    diffuse = np.full((1, 4), 0.25)
    assert alignment.attention_to_alignment(diffuse, [0, 1, 2, 3], [0], "sum>0.3") == set()
    assert alignment.attention_to_alignment(diffuse, [0, 1, 2, 3], [0], "pieces>0.3") == set()
    assert alignment.attention_to_alignment(diffuse, [0, 1, 2, 3], [0], "pieces") == {(0, 0)}
    with pytest.raises(ValueError, match="pooling"):
        alignment.ExtractionRule("mean")


def test_mutual_best_and_shift_by_hand():
    # rows: target words, columns: source words 0, 1 and [END]; the last row is [END]'s
    attention = np.array([[0.6, 0.3, 0.1],
                          [0.7, 0.2, 0.1],
                          [0.1, 0.8, 0.1],
                          [0.1, 0.1, 0.8]])
    words = ([0, 1, None], [0, 1, 2, None])
    assert alignment.attention_to_alignment(attention, *words, "sum") == {(0, 0), (0, 1), (1, 2)}
    # source word 0 is best for target 1 (0.7), so target 0 stays unaligned
    assert alignment.attention_to_alignment(attention, *words, "sum+mutual") == {(0, 1), (1, 2)}
    assert alignment.attention_to_alignment(attention, *words, "pieces+mutual") == {(0, 1), (1, 2)}
    # shifted, target word i reads row i + 1; target 2 reads the [END] row: its best is no word
    assert alignment.attention_to_alignment(attention, *words, "sum+shift1") == {(0, 0), (1, 1)}
    assert alignment.attention_to_alignment(attention, *words, "pieces+shift1") == {(0, 0), (1, 1)}
    assert alignment.attention_to_alignment(attention, *words, "sum+shift1>0.75") == {(1, 1)}
    for bad in ("sum+left", "sum>x", "sum+shift"):
        with pytest.raises(ValueError):
            alignment.ExtractionRule.parse(bad)
    with pytest.raises(ValueError, match="shift"):
        alignment.ExtractionRule("sum", shift=-1)


def test_best_links_leave_a_row_unaligned_below_threshold_or_null():
    matrix = [[0.5, 0.2], [0.3, 0.3], [0.1, 0.9]]
    assert alignment.best_links(matrix) == [(0, 0), (1, 0), (2, 1)]
    assert alignment.best_links(matrix, threshold=0.4) == [(0, 0), (2, 1)]
    assert alignment.best_links(matrix, null=[0.6, 0.0, 0.0]) == [(1, 0), (2, 1)]
    assert alignment.best_links(matrix, mutual=True) == [(0, 0), (2, 1)]
    assert alignment.best_links(np.zeros((0, 3))) == []


# === Both directions ===


class _Attention:
    """A stand-in for `bahdanau_tf.translator.Alignment` (whole words, ``[END]`` last)."""

    def __init__(self, source_words, target_words, rows):
        self.source_tokens = list(source_words) + ["[END]"]
        self.target_tokens = list(target_words) + ["[END]"]
        self.attention = np.asarray(rows, np.float32)


def _two_directions():
    english, spanish = ["the", "house", "white"], ["la", "casa", "blanca"]
    forward = _Attention(english, spanish, [[0.8, 0.1, 0.0, 0.1],    # la -> the
                                            [0.1, 0.3, 0.5, 0.1],    # casa -> white (wrong)
                                            [0.0, 0.2, 0.7, 0.1],    # blanca -> white
                                            [0.0, 0.0, 0.0, 1.0]])
    reverse = _Attention(spanish, english, [[0.9, 0.0, 0.0, 0.1],    # the -> la
                                            [0.0, 0.8, 0.1, 0.1],    # house -> casa
                                            [0.0, 0.4, 0.5, 0.1],    # white -> blanca
                                            [0.0, 0.0, 0.0, 1.0]])
    return [forward], [reverse]


def test_bidirectional_links_by_hand():
    forward, reverse = _two_directions()
    assert alignment.attention_links(forward, "sum") == [{(0, 0), (2, 1), (2, 2)}]
    links = {method: alignment.bidirectional_links(forward, reverse, method, "sum")[0]
             for method in alignment.SYMMETRIZATIONS}
    assert links["intersection"] == {(0, 0), (2, 2)}
    assert links["union"] == {(0, 0), (1, 1), (2, 1), (2, 2)}
    # grow-diag: (1, 1) neighbours (0, 0) and house is unaligned; (2, 1) then has both aligned
    assert links["grow-diag-final-and"] == {(0, 0), (1, 1), (2, 2)}
    # mean of casa's row: house (0.3 + 0.8) / 2 = 0.55 beats white (0.5 + 0.4) / 2 = 0.45
    assert links["average"] == {(0, 0), (1, 1), (2, 2)}
    assert alignment.bidirectional_links(forward, reverse, "average", "sum>0.6") == [{(0, 0)}]
    with pytest.raises(ValueError, match="pooling"):
        alignment.bidirectional_links(forward, reverse, "average", "pieces")
    with pytest.raises(ValueError, match="method"):
        alignment.bidirectional_links(forward, reverse, "both", "sum")
    with pytest.raises(ValueError, match="reverse"):
        alignment.bidirectional_links(forward, [], "intersection")


def test_average_word_attention_against_numpy():
    rng = np.random.default_rng(1)
    forward, reverse = rng.random((4, 3)), rng.random((3, 4))
    np.testing.assert_allclose(alignment.average_word_attention(forward, reverse),
                               (forward + reverse.T) / 2)
    # a side cut shorter: the missing word keeps the other side's half weight
    np.testing.assert_allclose(alignment.average_word_attention(forward, reverse[:2]),
                               (forward + np.pad(reverse[:2], ((0, 1), (0, 0))).T) / 2)


# === Gold links: sure (S) and possible (P) apart ===


def test_gold_links_keep_sure_and_possible_apart_by_hand():
    # a corpus as bahdanau_tf.data holds it: all links (P) and the sure ones (S ⊆ P); verse 1
    # has no gold; verse 2's only link is possible ("the" sharing a Strong's number with "all")
    alignments = [[(0, 0), (1, 1), (1, 2), (2, 2)], None, [(0, 1)]]
    sure_alignments = [[(0, 0), (2, 2)], None, []]
    predicted = [{(0, 0), (1, 2)}, {(0, 1)}]

    indices, sure, possible = alignment.gold_links(alignments, sure_alignments)

    assert indices == [0, 2]
    assert sure == [{(0, 0), (2, 2)}, set()]
    assert possible == [{(0, 0), (1, 1), (1, 2), (2, 2)}, {(0, 1)}]
    # |A| = 3, |S| = 2, |A∩S| = 1, |A∩P| = 2 + 1 = 3: AER = 1 - (1 + 3) / (3 + 2) = 0.2
    scores = alignment.alignment_scores(predicted, sure, possible)
    assert scores.aer == pytest.approx(0.2)
    assert (scores.num_predicted, scores.num_sure, scores.num_possible) == (3, 2, 5)
    # merged (every link sure, as bahdanau-evaluate scored it before): |S| = 5, |A∩S| = 3,
    # AER = 1 - (3 + 3) / (3 + 5) = 0.25
    assert alignment.alignment_error_rate(predicted, possible) == pytest.approx(0.25)
    # a corpus without sure links marked: every link is sure
    assert alignment.gold_links(alignments) == (indices, possible, possible)
    with pytest.raises(ValueError, match="3 sentences of gold links but 2"):
        alignment.gold_links(alignments, sure_alignments[:2])


def test_diagonal_baseline_on_the_test_split_scores_sure_and_possible_apart():
    """The issue's numbers: 0.7995 with S and P apart, 0.8588 with every link sure."""
    from bahdanau_tf.corpora import load_corpus

    test = load_corpus("bible-en-es", split="test")
    indices, sure, possible = alignment.gold_links(test.alignments, test.sure_alignments)
    predicted = alignment.diagonal_links([test.sources[i] for i in indices],
                                          [test.targets[i] for i in indices])
    scores = alignment.alignment_scores(predicted, sure, possible)

    gold = [i for i, links in enumerate(test.alignments) if links]
    expected = helpers.diagonal_aer_reference(
        [test.sources[i] for i in gold], [test.targets[i] for i in gold],
        [test.sure_alignments[i] for i in gold], [test.alignments[i] for i in gold])
    assert indices == gold
    assert scores.aer == pytest.approx(expected, abs=1e-12)
    assert (len(indices), scores.num_sure, scores.num_possible) == (2009, 22969, 92937)
    assert round(scores.aer, 4) == 0.7995
    assert round(alignment.alignment_error_rate(predicted, possible), 4) == 0.8588


def test_decoded_links_carry_gold_over_to_uniquely_matched_words():
    from types import SimpleNamespace

    # source "God saw the light"; reference "Dios vio la luz"; hypothesis "la luz la vio ."
    hypothesis = SimpleNamespace(
        source_tokens=["God", "saw", "the", "light", "[END]"],
        target_tokens=["la", "l", "##uz", "la", "vio", ".", "[END]"],
        attention=np.array([
            [0.1, 0.1, 0.7, 0.1, 0.0],  # la   -> the   (hyp word 0, not unique: dropped)
            [0.1, 0.1, 0.1, 0.7, 0.0],  # l    -> light (hyp word 1 "luz")
            [0.7, 0.1, 0.1, 0.1, 0.0],  # ##uz -> God   (hyp word 1 again: a second link)
            [0.1, 0.1, 0.7, 0.1, 0.0],  # la   -> the   (hyp word 2, not unique: dropped)
            [0.1, 0.1, 0.1, 0.7, 0.0],  # vio  -> light (hyp word 3)
            [0.1, 0.1, 0.1, 0.1, 0.6],  # .    -> [END] (unaligned; not in the reference)
            [0.5, 0.1, 0.1, 0.1, 0.2],  # [END] dropped
        ]),
    )
    sure = [{(0, 0), (1, 1)}]             # God-Dios, saw-vio
    possible = [{(2, 2), (3, 3), (1, 1)}]  # the-la, light-luz possible only
    predicted, hyp_sure, hyp_possible = alignment.decoded_links(
        [hypothesis], ["Dios vio la luz"], sure, possible)
    # reference word -> hypothesis word: vio 1 -> 3, luz 3 -> 1 (la occurs twice: not scored)
    assert predicted == [{(3, 1), (0, 1), (3, 3)}]
    assert hyp_sure == [{(1, 3)}]
    assert hyp_possible == [{(1, 3), (3, 1)}]
    scores = alignment.alignment_scores(predicted, hyp_sure, hyp_possible)
    # |A| = 3, |S| = 1, |A∩S| = 0, |A∩P| = 1: AER = 1 - 1/4
    assert scores.aer == pytest.approx(0.75)


@pytest.mark.subprocess
def test_importing_the_alignment_wing_first_still_registers_the_models():
    """`bahdanau_tf.alignment` imported before anything else imports Keras, whose import
    registers the models (with the alignment head's layer): the registry is whole."""
    import subprocess
    import sys

    code = ("from bahdanau_tf import alignment\nimport keras\n"
            "print(keras.saving.get_registered_object('bahdanau_tf>RNNSearch').__name__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=helpers.env_without_tensorflow_logging(), timeout=600)
    assert result.stdout.split()[-1:] == ["RNNSearch"], result.stderr[-2000:]
