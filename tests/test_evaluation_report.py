"""Tests for bahdanau_tf.evaluation.report: EvaluationReport and its JSON."""

import json

import pytest

from bahdanau_tf import evaluation

VOCABULARY = {"el", "gato", "se", "sentó", "perro", "the", "cat", "sat", "down", "on", "mat"}


def _oov(word):
    return word not in VOCABULARY


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
