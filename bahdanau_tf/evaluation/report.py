"""One model's evaluation on one test set as one JSON document: :class:`EvaluationReport`.

:func:`evaluation_report` computes it from translations, references and sources (and, when
given, No-UNK translations and predicted and gold alignment links) with the functions of
:mod:`bahdanau_tf.evaluation.metrics` and :mod:`bahdanau_tf.alignment`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from bahdanau_tf.alignment.error_rate import (
    AlignmentCounts,
    AlignmentScores,
    alignment_counts,
    scores_from_counts,
)
from bahdanau_tf.evaluation.metrics import (
    DEFAULT_LENGTH_BUCKETS,
    BleuResult,
    ChrfResult,
    CorpusStatistics,
    LengthBucketScore,
    NoUnkBleuResult,
    Split,
    bucket_from,
    check_buckets,
    check_parallel,
    default_split,
    length_buckets,
    no_unk_subset,
    sentence_pair_test,
)
from bahdanau_tf.special_tokens import UNK_TOKEN


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
            (:func:`bahdanau_tf.alignment.decoded_links`), or None.
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
    statistics = EvaluationStatistics(buckets, split=split, lowercase=lowercase,
                                      tokenize=tokenize, no_unk_indices=True)
    statistics.add(hypotheses, references, sources, no_unk_hypotheses=no_unk_hypotheses,
                   is_unknown_word=is_unknown_word, predicted_alignments=predicted_alignments,
                   sure_alignments=sure_alignments, possible_alignments=possible_alignments)
    return statistics.report(model=model, settings=settings)


class EvaluationStatistics:
    """What an :class:`EvaluationReport` is computed from, accumulated chunk by chunk.

    Sufficient statistics only, never the sentences: sacrebleu's summed corpus statistics for
    BLEU and chrF (`bahdanau_tf.evaluation.metrics.CorpusStatistics`), the same per length
    bucket and for the No-UNK subset, and the alignment counts
    (`bahdanau_tf.alignment.AlignmentCounts`). :meth:`report` after any number of
    :meth:`add` calls gives the numbers of :func:`evaluation_report` on all their sentences at
    once (which is this class with one :meth:`add`). Memory is bounded by one chunk, except the
    No-UNK indices when ``no_unk_indices`` is True (one int per kept sentence).

    Args:
        buckets, split, lowercase, tokenize: as in :func:`evaluation_report`.
        no_unk_indices: bool, record the No-UNK subset's indices in the report (else ``()``).

    Example:

        statistics = EvaluationStatistics()
        for hypotheses, references, sources in chunks:
            statistics.add(hypotheses, references, sources)
        report = statistics.report(model="rnnsearch-50")
    """

    def __init__(self, buckets: Sequence[int] = DEFAULT_LENGTH_BUCKETS, split: Split | None = None,
                 lowercase: bool = True, tokenize: str = "13a", no_unk_indices: bool = False):
        self.bounds = check_buckets(buckets)
        self.split, self.lowercase, self.tokenize = split, lowercase, tokenize
        self.num_sentences = 0
        self.bleu = CorpusStatistics.bleu(lowercase=lowercase, tokenize=tokenize)
        self.chrf = CorpusStatistics.chrf(lowercase=lowercase)
        self.buckets = [CorpusStatistics.bleu(lowercase=lowercase, tokenize=tokenize)
                        for _ in range(len(self.bounds) + 1)]
        self.alignment: AlignmentCounts | None = None
        self.decoded_alignment: AlignmentCounts | None = None
        self.keep_no_unk_indices = no_unk_indices
        self.reset_no_unk()

    def reset_no_unk(self) -> None:
        """Forgets every No-UNK sentence added so far (to add them again, decoded otherwise)."""
        self.no_unk: CorpusStatistics | None = None
        self.no_unk_total = self.no_unk_with_unk = 0
        self.no_unk_indices: list[int] = []

    def add(self, hypotheses: Sequence[str], references: Sequence[str], sources: Sequence[str],
            no_unk_hypotheses: Sequence[str] | None = None, is_unknown_word=None,
            predicted_alignments: Iterable | None = None, sure_alignments: Iterable | None = None,
            possible_alignments: Iterable | None = None) -> None:
        """Adds a chunk of sentences (the arguments of :func:`evaluation_report`, for the chunk)."""
        lists = check_parallel(hypotheses=hypotheses, references=references, sources=sources)
        hypotheses, references, sources = lists["hypotheses"], lists["references"], lists["sources"]
        if no_unk_hypotheses is not None:
            if is_unknown_word is None:
                raise ValueError("`no_unk_hypotheses` needs `is_unknown_word` to pick the sentences.")
            self.add_no_unk(no_unk_hypotheses, references, sources, is_unknown_word)
        if predicted_alignments is not None:
            if sure_alignments is None:
                raise ValueError("`predicted_alignments` needs `sure_alignments` (the gold links).")
            self.add_alignment(predicted_alignments, sure_alignments, possible_alignments)
        self.bleu.add(hypotheses, references)
        self.chrf.add(hypotheses, references)
        groups = length_buckets(sources, self.bounds, self.split)
        for group, bucket in zip(groups, self.buckets):
            bucket.add([hypotheses[i] for i in group], [references[i] for i in group])
        self.num_sentences += len(hypotheses)

    def add_no_unk(self, hypotheses: Sequence[str], references: Sequence[str],
                   sources: Sequence[str], is_unknown_word, first_index: int | None = None
                   ) -> list[int]:
        """Adds a chunk's No-UNK translations (one per sentence, as in :func:`no_unk_bleu`);
        returns the kept indices within the chunk. ``first_index``: the chunk's first
        sentence in the corpus (default: the sentences added so far)."""
        lists = check_parallel(hypotheses=hypotheses, references=references, sources=sources)
        test = sentence_pair_test(is_unknown_word, self.split or default_split)
        keep = no_unk_subset(lists["sources"], lists["references"], test)
        if self.no_unk is None:
            self.no_unk = CorpusStatistics.bleu(lowercase=self.lowercase, tokenize=self.tokenize)
        kept = [lists["hypotheses"][i] for i in keep]
        self.no_unk.add(kept, [lists["references"][i] for i in keep])
        self.no_unk_total += len(lists["hypotheses"])
        self.no_unk_with_unk += sum(UNK_TOKEN in h for h in kept)
        if self.keep_no_unk_indices:
            offset = self.num_sentences if first_index is None else first_index
            self.no_unk_indices.extend(offset + i for i in keep)
        return keep

    def add_alignment(self, predicted: Iterable, sure: Iterable, possible: Iterable | None = None,
                      decoded: bool = False) -> None:
        """Adds a chunk's links (`bahdanau_tf.alignment.alignment_counts`'s
        arguments); ``decoded``: those of the decoded translations (``decoded_alignment``)."""
        counts = alignment_counts(predicted, sure, possible)
        name = "decoded_alignment" if decoded else "alignment"
        total = getattr(self, name)
        setattr(self, name, counts if total is None else total + counts)

    def report(self, model: str = "", settings: Mapping[str, Any] | None = None
               ) -> EvaluationReport:
        """The :class:`EvaluationReport` of everything added.

        Raises:
            ValueError: nothing was added, or links were added but none predicted nor sure.
        """
        if not self.num_sentences:
            raise ValueError("Nothing to evaluate: no sentence was added.")
        no_unk = None
        if self.no_unk is not None:
            no_unk = NoUnkBleuResult(
                bleu=self.no_unk.result(), num_sentences=self.no_unk.num_sentences,
                num_total=self.no_unk_total, num_hypotheses_with_unk=self.no_unk_with_unk,
                indices=tuple(self.no_unk_indices))
        lower_bounds = (0,) + tuple(b + 1 for b in self.bounds)
        by_length = [
            LengthBucketScore(min_length=low, max_length=high, count=bucket.num_sentences,
                              bleu=None if bucket.result() is None else bucket.result().score)
            for bucket, low, high in zip(self.buckets, lower_bounds, self.bounds + (None,))
        ]
        decoded = self.decoded_alignment
        return EvaluationReport(
            model=model,
            num_sentences=self.num_sentences,
            bleu=self.bleu.result(),
            chrf=self.chrf.result(),
            no_unk=no_unk,
            bleu_by_length=by_length,
            alignment=None if self.alignment is None else scores_from_counts(self.alignment),
            decoded_alignment=(scores_from_counts(decoded) if decoded is not None
                               and decoded.predicted + decoded.sure else None),
            settings=self._settings(settings),
        )

    def _settings(self, settings):
        split = self.split
        if split is None:
            split_name = "bahdanau_tf.text.split_words"
        else:
            split_name = f"{getattr(split, '__module__', '')}.{getattr(split, '__qualname__', repr(split))}"
        all_settings = dict(settings or {})
        all_settings["evaluation"] = {
            "lowercase": self.lowercase,
            "tokenize": self.tokenize,
            "length_buckets": list(self.bounds),
            "split": split_name,
        }
        return all_settings
