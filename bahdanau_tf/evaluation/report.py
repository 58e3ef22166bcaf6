"""One model's evaluation on one test set as one JSON document: :class:`EvaluationReport`.

:func:`evaluation_report` computes it from translations, references and sources (and, when
given, No-UNK translations and predicted and gold alignment links) with the functions of
:mod:`bahdanau_tf.evaluation.metrics` and :mod:`bahdanau_tf.evaluation.alignment`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from bahdanau_tf.evaluation.alignment import AlignmentScores, alignment_scores
from bahdanau_tf.evaluation.metrics import (
    DEFAULT_LENGTH_BUCKETS,
    BleuResult,
    ChrfResult,
    LengthBucketScore,
    NoUnkBleuResult,
    Split,
    bucket_from,
    check_buckets,
    check_parallel,
    bleu_by_length,
    corpus_bleu,
    corpus_chrf,
    no_unk_bleu,
)


@dataclasses.dataclass
class EvaluationReport:
    """Everything the paper reports about one model on one test set, as one JSON document.

    Attributes:
        model: str, a name for the model (its directory, preset, ...).
        num_sentences: int, the size of the test set.
        bleu: :class:`BleuResult` on every sentence (table 1, "All").
        chrf: :class:`ChrfResult` or None.
        no_unk: :class:`NoUnkBleuResult` or None (table 1, "No UNK"; its ``indices`` are left
            out of the JSON).
        bleu_by_length: list of :class:`LengthBucketScore` (figure 2).
        alignment: :class:`AlignmentScores` of the attention against gold links, or None.
        decoded_alignment: :class:`AlignmentScores` of the attention of the model's own
            translations, on the words they share with the reference
            (:func:`bahdanau_tf.evaluation.alignment.decoded_links`), or None.
        timings: dict of seconds and counts spent on the evaluation's steps.
        settings: dict of JSON-able settings: beam size, length penalty, checkpoint, test split,
            sacrebleu options, ...

    Example:

        report = evaluation_report(hyps, refs, srcs, model="rnnsearch-50",
                                   settings={"beam_size": 12})
        pathlib.Path("report.json").write_text(report.to_json())
    """

    model: str
    num_sentences: int
    bleu: BleuResult
    chrf: ChrfResult | None = None
    no_unk: NoUnkBleuResult | None = None
    bleu_by_length: list[LengthBucketScore] = dataclasses.field(default_factory=list)
    alignment: AlignmentScores | None = None
    decoded_alignment: AlignmentScores | None = None
    timings: dict[str, Any] = dataclasses.field(default_factory=dict)
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (bucket labels added, No-UNK indices left out)."""
        no_unk = None
        if self.no_unk is not None:
            no_unk = dataclasses.asdict(self.no_unk)
            no_unk.pop("indices")
        return {
            "model": self.model,
            "num_sentences": self.num_sentences,
            "bleu": dataclasses.asdict(self.bleu),
            "chrf": None if self.chrf is None else dataclasses.asdict(self.chrf),
            "no_unk": no_unk,
            "bleu_by_length": [
                {**dataclasses.asdict(b), "label": b.label} for b in self.bleu_by_length
            ],
            "alignment": _scores_dict(self.alignment),
            "decoded_alignment": _scores_dict(self.decoded_alignment),
            "timings": dict(self.timings),
            "settings": dict(self.settings),
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The report as a JSON string (NaN/inf refused, keys in a fixed order)."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> EvaluationReport:
        """Reads back :meth:`to_json` output (No-UNK indices come back empty)."""
        data = json.loads(text)

        def bleu_from(d):
            return None if d is None else BleuResult(**{**d, "precisions": tuple(d["precisions"])})

        no_unk = data.get("no_unk")
        if no_unk is not None:
            no_unk = NoUnkBleuResult(**{**no_unk, "bleu": bleu_from(no_unk["bleu"]), "indices": ()})
        return cls(
            model=data["model"],
            num_sentences=data["num_sentences"],
            bleu=bleu_from(data["bleu"]),
            chrf=None if data.get("chrf") is None else ChrfResult(**data["chrf"]),
            no_unk=no_unk,
            bleu_by_length=[bucket_from(b) for b in data.get("bleu_by_length", [])],
            alignment=_scores_from(data.get("alignment")),
            decoded_alignment=_scores_from(data.get("decoded_alignment")),
            timings=data.get("timings", {}),
            settings=data.get("settings", {}),
        )


def _scores_dict(scores: AlignmentScores | None) -> dict[str, Any] | None:
    return None if scores is None else dataclasses.asdict(scores)


def _scores_from(data: Mapping[str, Any] | None) -> AlignmentScores | None:
    return None if data is None else AlignmentScores(**data)


def evaluation_report(
    hypotheses: Sequence[str],
    references: Sequence[str],
    sources: Sequence[str],
    model: str = "",
    no_unk_hypotheses: Sequence[str] | None = None,
    is_unknown_word: Callable[[str], bool]
    | tuple[Callable[[str], bool], Callable[[str], bool]]
    | None = None,
    predicted_alignments: Iterable | None = None,
    sure_alignments: Iterable | None = None,
    possible_alignments: Iterable | None = None,
    buckets: Sequence[int] = DEFAULT_LENGTH_BUCKETS,
    split: Split | None = None,
    lowercase: bool = True,
    tokenize: str = "13a",
    settings: Mapping[str, Any] | None = None,
) -> EvaluationReport:
    """Computes an :class:`EvaluationReport`: BLEU, chrF, No-UNK BLEU, BLEU by length, AER.

    Args:
        hypotheses: list of str, the translations of every source (ordinary decoding).
        references: list of str, the references.
        sources: list of str, the source sentences.
        model: str, the model's name in the report.
        no_unk_hypotheses: list of str, translations of every source decoded with [UNK]
            forbidden; None skips No-UNK BLEU. Needs ``is_unknown_word``.
        is_unknown_word: as in :func:`no_unk_bleu`.
        predicted_alignments: per-sentence link sets (e.g. :func:`attention_to_alignment` of
            each sentence's attention), for the sentences that have gold links; None skips AER.
        sure_alignments: the gold sure links, same sentences.
        possible_alignments: the gold possible links, or None for P = S.
        buckets: upper bounds of the length buckets, as in :func:`bleu_by_length`.
        split: ``split(text) -> list[str]`` for word counts;
            ``bahdanau_tf.text.split_words`` by default.
        lowercase: bool, as in :func:`corpus_bleu`.
        tokenize: str, as in :func:`corpus_bleu`.
        settings: dict of JSON-able settings to record (beam size, checkpoint, ...); the
            evaluation's own options are added under ``"evaluation"``.

    Returns:
        An :class:`EvaluationReport`.

    Raises:
        ValueError: on mismatched or empty inputs, or when ``no_unk_hypotheses`` is given
            without ``is_unknown_word`` or gold alignments are missing for predicted ones.
    """
    lists = check_parallel(hypotheses=hypotheses, references=references, sources=sources)
    hypotheses, references, sources = lists["hypotheses"], lists["references"], lists["sources"]
    no_unk = None
    if no_unk_hypotheses is not None:
        if is_unknown_word is None:
            raise ValueError("`no_unk_hypotheses` needs `is_unknown_word` to pick the sentences.")
        no_unk = no_unk_bleu(
            no_unk_hypotheses, references, sources, is_unknown_word, split=split,
            lowercase=lowercase, tokenize=tokenize,
        )
    alignment = None
    if predicted_alignments is not None:
        if sure_alignments is None:
            raise ValueError("`predicted_alignments` needs `sure_alignments` (the gold links).")
        alignment = alignment_scores(predicted_alignments, sure_alignments, possible_alignments)
    if split is None:
        split_name = "bahdanau_tf.text.split_words"
    else:
        split_name = f"{getattr(split, '__module__', '')}.{getattr(split, '__qualname__', repr(split))}"
    all_settings = dict(settings or {})
    all_settings["evaluation"] = {
        "lowercase": lowercase,
        "tokenize": tokenize,
        "length_buckets": list(check_buckets(buckets)),
        "split": split_name,
    }
    return EvaluationReport(
        model=model,
        num_sentences=len(hypotheses),
        bleu=corpus_bleu(hypotheses, references, lowercase=lowercase, tokenize=tokenize),
        chrf=corpus_chrf(hypotheses, references, lowercase=lowercase),
        no_unk=no_unk,
        bleu_by_length=bleu_by_length(
            hypotheses, references, sources, buckets=buckets, split=split,
            lowercase=lowercase, tokenize=tokenize,
        ),
        alignment=alignment,
        settings=all_settings,
    )
