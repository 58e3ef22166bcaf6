"""Both directions made one: a source-to-target and a target-to-source alignment.

- :func:`symmetrize`: two directional link sets made one (intersection, union,
  grow-diag-final-and, as Moses' and fast_align's ``atools`` do it), for any aligner's links;
- :func:`average_word_attention`, :func:`bidirectional_links`: two models' attention (one per
  translation direction) made one, by symmetrizing their extracted links or by averaging their
  word-level attention matrices (`SYMMETRIZATIONS`).

Links are ``(source_word, target_word)`` pairs (`bahdanau_tf.alignment.extraction`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from bahdanau_tf.alignment.extraction import (DEFAULT_RULE, ExtractionRule, Link, attention_links,
                                              best_links, token_word_ids, word_attention)

#: what `symmetrize` does with two link sets
LINK_SYMMETRIZATIONS = ("intersection", "union", "grow-diag-final-and")


def symmetrize(forward: Iterable[Link], reverse: Iterable[Link], method: str = "grow-diag-final-and"
               ) -> set[Link]:
    """One sentence's alignment from a source-to-target and a target-to-source one.

    Both are given as ``(source_word, target_word)`` links. ``"intersection"`` keeps the links
    both directions found (high precision), ``"union"`` all of them; ``"grow-diag-final-and"``
    (Koehn et al. 2003, Moses' default) starts from the intersection, adds union links that
    neighbour (diagonals included) an alignment point while one of their words is unaligned,
    then ("final-and") union links whose two words are both still unaligned.

    Example:

        >>> sorted(symmetrize({(0, 0), (1, 1)}, {(0, 0), (1, 2)}, "intersection"))
        [(0, 0)]
        >>> sorted(symmetrize({(0, 0), (1, 1), (3, 3)}, {(0, 0), (1, 2), (3, 3)}))
        [(0, 0), (1, 1), (1, 2), (3, 3)]
    """
    forward, reverse = set(forward), set(reverse)
    if method == "intersection":
        return forward & reverse
    if method == "union":
        return forward | reverse
    if method != "grow-diag-final-and":
        raise ValueError(f"`method` must be one of {LINK_SYMMETRIZATIONS}, got {method!r}")
    union, alignment = forward | reverse, forward & reverse
    aligned_source = {s for s, _ in alignment}
    aligned_target = {t for _, t in alignment}
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    grown = True
    while grown:
        grown = False
        for s, t in sorted(alignment):
            for ds, dt in neighbours:
                link = (s + ds, t + dt)
                if link in union and link not in alignment and (
                        link[0] not in aligned_source or link[1] not in aligned_target):
                    alignment.add(link)
                    aligned_source.add(link[0])
                    aligned_target.add(link[1])
                    grown = True
    for direction in (forward, reverse):  # final-and
        for s, t in sorted(direction):
            if s not in aligned_source and t not in aligned_target:
                alignment.add((s, t))
                aligned_source.add(s)
                aligned_target.add(t)
    return alignment


SYMMETRIZATIONS = ("intersection", "union", "grow-diag-final-and", "average")


def _word_matrix(alignment, rule: ExtractionRule):
    """A translation's attention pooled to words by ``rule`` (`word_attention`'s ``words``)."""
    return word_attention(alignment.attention, token_word_ids(alignment.source_tokens),
                          token_word_ids(alignment.target_tokens), rule.pooling, rule.shift)[0]


def average_word_attention(forward, reverse):
    """The mean of a source-to-target and a transposed target-to-source word matrix.

    Args:
        forward: float ``[target_words, source_words]``, the forward model's word attention.
        reverse: float ``[source_words, target_words]``, the reverse model's (it reads the
            target and attends over it, so its rows are the source words).

    Returns:
        float ``[target_words, source_words]``; a word one side lacks (a sentence cut at the
        length bound) gets the other side's half weight only.

    Example:

        >>> average_word_attention([[1.0, 0.0]], [[0.5], [0.5]]).tolist()
        [[0.75, 0.25]]
    """
    forward, reverse = np.asarray(forward, np.float64), np.asarray(reverse, np.float64).T
    shape = tuple(max(a, b) for a, b in zip(forward.shape, reverse.shape))
    total = np.zeros(shape)
    total[: forward.shape[0], : forward.shape[1]] += forward
    total[: reverse.shape[0], : reverse.shape[1]] += reverse
    return total / 2.0


def bidirectional_links(forward: Sequence, reverse: Sequence, method: str = "grow-diag-final-and",
                        rule: ExtractionRule | str | None = None,
                        reverse_rule: ExtractionRule | str | None = None) -> list[set[Link]]:
    """Word links from both translation directions, made one (Koehn et al. 2003; Garg et al.).

    ``forward`` is the attention of a source-to-target model reading the pairs, ``reverse``
    that of a target-to-source model reading the same pairs the other way round (e.g. the two
    models' `Translator.reference_attention`). ``"intersection"``, ``"union"`` and
    ``"grow-diag-final-and"`` extract each direction's links (``rule``, ``reverse_rule``),
    transpose the reverse ones and `symmetrize` them;
    ``"average"`` averages the two word-level attention matrices
    (:func:`average_word_attention`, pooled by ``rule``) and extracts from the mean by ``rule``
    (its threshold alone leaves a word unaligned: the mean has no ``[END]`` column).

    Args:
        forward, reverse: lists of `bahdanau_tf.translator.Alignment`, one per sentence pair.
        method: one of `SYMMETRIZATIONS`.
        rule: the forward `ExtractionRule` (None: `DEFAULT_RULE`); ``"average"`` needs a word
            pooling (not ``"pieces"``).
        reverse_rule: the reverse direction's rule (None: ``rule``).

    Returns:
        list of sets of ``(source_word, target_word)`` links.

    Raises:
        ValueError: lists of different lengths, an unknown method, ``"average"`` with
            ``"pieces"``.
    """
    if len(forward) != len(reverse):
        raise ValueError(f"{len(forward)} forward but {len(reverse)} reverse alignments.")
    if method not in SYMMETRIZATIONS:
        raise ValueError(f"`method` must be one of {SYMMETRIZATIONS}, got {method!r}.")
    rule = ExtractionRule.parse(rule) if isinstance(rule, str) else rule or DEFAULT_RULE
    reverse_rule = (ExtractionRule.parse(reverse_rule) if isinstance(reverse_rule, str)
                    else reverse_rule or rule)
    if method == "average":
        if rule.pooling == "pieces":
            raise ValueError("`method='average'` needs a word pooling (max, sum, first), "
                             "got the 'pieces' rule.")
        return [{(s, t) for t, s in best_links(
                    average_word_attention(_word_matrix(f, rule), _word_matrix(r, rule)),
                    None, rule.threshold, rule.mutual)}
                for f, r in zip(forward, reverse)]
    return [symmetrize(f, {(s, t) for t, s in r}, method)
            for f, r in zip(attention_links(forward, rule), attention_links(reverse, reverse_rule))]
