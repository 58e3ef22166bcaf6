"""Alignment error rate against gold word alignments (Och & Ney 2003).

The paper's alignment claim (figure 3) measured instead of looked at:

- :func:`gold_links`: a corpus's gold links, the sure set S and the possible set P kept apart;
- :func:`alignment_scores`, :func:`alignment_error_rate`:
  ``AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|)``, with precision and recall;
  :func:`alignment_counts` and :func:`scores_from_counts`, the same in sums that add up chunk
  by chunk.

Links are ``(source_index, target_index)`` pairs of 0-based *word* indices.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from bahdanau_tf.alignment.extraction import Link


def gold_links(
    alignments: Sequence[Iterable | None], sure_alignments: Sequence[Iterable | None] | None = None
) -> tuple[list[int], list[set[Link]], list[set[Link]]]:
    """The sentences with gold links, and their sure (S) and possible (P) sets kept apart.

    The embedded Bible's gold comes from Strong's numbers (``scripts/build_bible_corpus.py``):
    a link is *sure* when its number tags one phrase on each side, *possible* when the number
    recurs in the verse. `bahdanau_tf.corpora.ParallelCorpus` holds all links in
    ``alignments`` (P) and the sure ones in ``sure_alignments`` (S ⊆ P). Merging them (S = P)
    counts every possible link as a miss when it is not predicted, and overstates the AER.

    Args:
        alignments: per sentence, all gold links (P), or None / empty for a sentence without
            gold (left out).
        sure_alignments: per sentence, the sure links (S); None when the corpus does not tell
            them apart, then every link is sure (S = P).

    Returns:
        ``(indices, sure, possible)``: the indices of the sentences with at least one gold
        link, and their S and P link sets.

    Raises:
        ValueError: if the two lists differ in length.

    Example:

        >>> indices, sure, possible = gold_links([[(0, 0), (1, 1)], None, [(0, 1)]],
        ...                                      [[(0, 0)], None, []])
        >>> indices, sure, [sorted(p) for p in possible]
        ([0, 2], [{(0, 0)}, set()], [[(0, 0), (1, 1)], [(0, 1)]])
    """
    alignments = list(alignments)
    sure_alignments = alignments if sure_alignments is None else list(sure_alignments)
    if len(sure_alignments) != len(alignments):
        raise ValueError(
            f"{len(alignments)} sentences of gold links but {len(sure_alignments)} of sure links."
        )
    indices = [i for i, links in enumerate(alignments) if links]
    sure = [{tuple(link) for link in sure_alignments[i] or ()} for i in indices]
    possible = [{tuple(link) for link in alignments[i]} | s for i, s in zip(indices, sure)]
    return indices, sure, possible


@dataclasses.dataclass(frozen=True)
class AlignmentScores:
    """Corpus-level alignment quality (Och & Ney 2003), counts summed over sentences.

    Attributes:
        aer: alignment error rate, 1 - (|A∩S| + |A∩P|) / (|A| + |S|); 0 is perfect.
        precision: |A∩P| / |A| (None when nothing was predicted).
        recall: |A∩S| / |S| (None when there is no sure link).
        num_predicted: |A|, the predicted links.
        num_sure: |S|, the sure gold links.
        num_possible: |P|, the possible gold links, sure ones included.
        num_sentences: the number of sentences.
    """

    aer: float
    precision: float | None
    recall: float | None
    num_predicted: int
    num_sure: int
    num_possible: int
    num_sentences: int


@dataclasses.dataclass(frozen=True)
class AlignmentCounts:
    """The integer counts behind :class:`AlignmentScores`, summed over sentences (``+`` adds
    two): |A|, |S|, |P| (sure links included), |A∩S|, |A∩P| and the sentence count."""

    num_sentences: int = 0
    predicted: int = 0
    sure: int = 0
    possible: int = 0
    predicted_and_sure: int = 0
    predicted_and_possible: int = 0

    def __add__(self, other: AlignmentCounts) -> AlignmentCounts:
        return AlignmentCounts(*(a + b for a, b in zip(dataclasses.astuple(self),
                                                        dataclasses.astuple(other))))


def _is_link(value: Any) -> bool:
    if type(value) is tuple and len(value) == 2 and type(value[0]) is int and type(value[1]) is int:
        return True  # the common case, checked first: a corpus has many links
    return (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
    )


def _as_link_corpus(name: str, alignments) -> list[set[Link]]:
    """Accepts one sentence's links or a list of per-sentence links; returns a list of sets."""
    if isinstance(alignments, (set, frozenset)):
        alignments = [alignments]
    else:
        alignments = list(alignments)
        if alignments and _is_link(alignments[0]):
            alignments = [alignments]
    corpus = []
    for i, sentence in enumerate(alignments):
        links = set()
        for link in sentence:
            if not _is_link(link):
                raise TypeError(
                    f"`{name}` sentence {i}: a link must be a (source_index, target_index) pair "
                    f"of ints, got {link!r}"
                )
            links.add((int(link[0]), int(link[1])))
        corpus.append(links)
    return corpus


def alignment_scores(
    predicted: Iterable,
    sure: Iterable,
    possible: Iterable | None = None,
) -> AlignmentScores:
    """Alignment error rate, precision and recall of predicted word links (Och & Ney 2003).

    ``AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|)`` with A the predicted links, S the sure and P
    the possible gold links (P ⊇ S: P is taken as S ∪ ``possible``, so ``possible`` may list
    the possible-only links or all of them). Corpus-level: the four counts are summed over the
    sentences before dividing, not averaged per sentence.

    Args:
        predicted: the links of each sentence — a list (one entry per sentence) of sets of
            ``(source_index, target_index)`` 0-based word-index pairs; a single sentence's set
            of pairs is accepted too.
        sure: the sure gold links, same layout and sentence count.
        possible: the possible gold links, same layout, or None for P = S.

    Returns:
        An :class:`AlignmentScores`.

    Raises:
        ValueError: if the sentence counts differ, or there are no predicted and no sure links
            at all (AER undefined).

    Example:

        >>> alignment_scores([{(0, 0), (1, 2)}], [{(0, 0), (1, 1)}]).aer
        0.5
    """
    return scores_from_counts(alignment_counts(predicted, sure, possible))


def alignment_counts(
    predicted: Iterable,
    sure: Iterable,
    possible: Iterable | None = None,
) -> AlignmentCounts:
    """The counts :func:`alignment_scores` sums over sentences (same arguments and checks),
    before any division: add the counts of chunks and `scores_from_counts` of the sum is the
    score of all their sentences."""
    predicted_links = _as_link_corpus("predicted", predicted)
    sure_links = _as_link_corpus("sure", sure)
    possible_links = (
        [set(s) for s in sure_links] if possible is None else _as_link_corpus("possible", possible)
    )
    counts = {
        "predicted": len(predicted_links),
        "sure": len(sure_links),
        "possible": len(possible_links),
    }
    if len(set(counts.values())) > 1:
        described = ", ".join(f"{count} {name}" for name, count in counts.items())
        raise ValueError(f"Sentence counts differ: {described}.")
    sums = np.zeros(5, np.int64)  # |A|, |S|, |P|, |A∩S|, |A∩P|, summed in one pass
    for a, s, p in zip(predicted_links, sure_links, possible_links):
        p = p | s
        sums += (len(a), len(s), len(p), len(a & s), len(a & p))
    return AlignmentCounts(len(predicted_links), *map(int, sums))


def scores_from_counts(counts: AlignmentCounts) -> AlignmentScores:
    """AER, precision and recall of summed :func:`alignment_counts`.

    Raises:
        ValueError: no predicted and no sure link at all (AER undefined).
    """
    num_a, num_s = counts.predicted, counts.sure
    if num_a + num_s == 0:
        raise ValueError(
            "Alignment error rate undefined: no predicted and no sure links in "
            f"{counts.num_sentences} sentences."
        )
    return AlignmentScores(
        aer=1.0 - (counts.predicted_and_sure + counts.predicted_and_possible) / (num_a + num_s),
        precision=counts.predicted_and_possible / num_a if num_a else None,
        recall=counts.predicted_and_sure / num_s if num_s else None,
        num_predicted=num_a,
        num_sure=num_s,
        num_possible=counts.possible,
        num_sentences=counts.num_sentences,
    )


def alignment_error_rate(
    predicted: Iterable,
    sure: Iterable,
    possible: Iterable | None = None,
) -> float:
    """Corpus-level alignment error rate (Och & Ney 2003); see :func:`alignment_scores`.

    Args:
        predicted: per-sentence sets of ``(source_index, target_index)`` links (or one set).
        sure: the sure gold links, same layout.
        possible: the possible gold links, or None for P = S.

    Returns:
        float in [0, 1]; 0 when the prediction is the gold, 1 when it shares no link with it.

    Example:

        >>> alignment_error_rate([{(0, 0), (1, 1)}], [{(0, 0), (1, 1)}])
        0.0
    """
    return alignment_scores(predicted, sure, possible).aer
