"""Alignment error rate of attention against gold word alignments (Och & Ney 2003).

The paper's alignment claim (figure 3) measured instead of looked at:

- :func:`token_word_ids`, :func:`attention_to_alignment`: an attention matrix over model tokens
  becomes word links by an :class:`ExtractionRule` (how a word's pieces pool their weights, and
  when a target word whose attention is diffuse is left unaligned);
- :func:`attention_links`, :func:`decoded_links`: the same for the `Alignment` objects of a
  `Translator` (teacher-forced attention on the references, or the attention of its own
  translations carried over to the reference's words);
- :func:`gold_links`: a corpus's gold links, the sure set S and the possible set P kept apart;
- :func:`alignment_scores`, :func:`alignment_error_rate`:
  ``AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|)``, with precision and recall.

Links are ``(source_index, target_index)`` pairs of 0-based *word* indices
(:func:`bahdanau_tf.text.split_words` words).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from bahdanau_tf.special_tokens import SPECIAL_TOKENS, UNK_TOKEN
from bahdanau_tf.text import split_words

Link = tuple[int, int]


def token_word_ids(
    tokens: Sequence[str], continuation_prefix: str = "##"
) -> list[int | None]:
    """Maps subword tokens to the index of the word they belong to.

    A token starting with ``continuation_prefix`` (WordPiece's ``"##"``) continues the previous
    word; any other token starts a new word; the special tokens (``[PAD]``, ``[START]``,
    ``[END]``, ``[UNK]`` is a word) map to None. For SentencePiece-style tokenizers that mark
    word *starts*, build the map yourself.

    Args:
        tokens: list of str, a sentence's model tokens.
        continuation_prefix: str, the marker of a word-internal piece.

    Returns:
        list of int or None, one per token, for :func:`attention_to_alignment`.

    Example:

        >>> token_word_ids(["the", "go", "##sp", "##el", "[END]"])
        [0, 1, 1, 1, None]
    """
    word_ids: list[int | None] = []
    word = -1
    for token in tokens:
        if token in SPECIAL_TOKENS and token != UNK_TOKEN:
            word_ids.append(None)
            continue
        if not (continuation_prefix and token.startswith(continuation_prefix) and word >= 0):
            word += 1
        word_ids.append(word)
    return word_ids


def _check_word_ids(name: str, word_ids: Sequence[int | None] | None, length: int) -> list:
    if word_ids is None:
        return list(range(length))
    word_ids = list(word_ids)
    if len(word_ids) > length:
        raise ValueError(
            f"`{name}` has {len(word_ids)} entries but the attention has only {length} "
            "positions on that axis."
        )
    return word_ids


POOLINGS = ("pieces", "max", "sum", "first")


@dataclasses.dataclass(frozen=True)
class ExtractionRule:
    """How attention over subword tokens becomes word links.

    ``pooling``:

    - ``"pieces"``: every target token links to the word of the source token it attends to most
      (its row's argmax), so a target word of several pieces may get several links;
    - ``"max"``, ``"sum"``, ``"first"``: first a word-by-word matrix: a source word's weight is
      the max, the sum or the first of its pieces' weights; a target word's row is the mean of
      its pieces' rows (``"first"``: its first piece's row). Each target word then links to the
      source word of the largest weight.

    ``shift``: target token i reads attention row i + ``shift`` (Chen et al. 2020's Shift-Att);
    a token left without a row stays unaligned. In the paper's cell row i is queried with
    s_{i-1}, before y_{i-1} entered the decoder: row i + 1's query has read y_{i-1}, row i + 2's
    is the first that has read y_i.

    ``mutual``: a link is kept only if it is also the largest weight of its source column
    (mutual best): a source word attended by several target words keeps only its best one.

    A target word is left unaligned (Och & Ney's NULL) when the largest weight goes to a
    position of no word (the source ``[END]``), or is below ``threshold``: diffuse attention
    links nothing (statistical aligners leave about a fifth of the words unaligned).
    `DEFAULT_RULE` is the one ``bahdanau-evaluate`` and ``bahdanau-translate --alignments`` use;
    ``benchmarks/alignment.py`` chooses among the rules on the dev verses' gold.

    Example:

        >>> ExtractionRule.parse("sum+shift1+mutual>0.3")
        ExtractionRule(pooling='sum', threshold=0.3, shift=1, mutual=True)
        >>> str(ExtractionRule("max", 0.25, shift=1))
        'max+shift1>0.25'
    """

    pooling: str = "pieces"
    threshold: float = 0.0
    shift: int = 0
    mutual: bool = False

    def __post_init__(self):
        if self.pooling not in POOLINGS:
            raise ValueError(f"`pooling` must be one of {POOLINGS}, got {self.pooling!r}.")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"`threshold` must be in [0, 1], got {self.threshold!r}.")
        if isinstance(self.shift, bool) or not isinstance(self.shift, int) or self.shift < 0:
            raise ValueError(f"`shift` must be an int >= 0, got {self.shift!r}.")

    def __str__(self) -> str:
        return (self.pooling + (f"+shift{self.shift}" if self.shift else "")
                + ("+mutual" if self.mutual else "")
                + (f">{self.threshold:g}" if self.threshold else ""))

    @classmethod
    def parse(cls, text: str) -> "ExtractionRule":
        """A rule from its `str`: ``"sum"``, ``"max>0.4"``, ``"sum+shift1+mutual>0.2"``."""
        name, _, threshold = str(text).partition(">")
        pooling, *options = name.split("+")
        shift, mutual = 0, False
        for option in options:
            if option == "mutual":
                mutual = True
            elif option.startswith("shift") and option[5:].isdigit():
                shift = int(option[5:])
            else:
                raise ValueError(f"unknown extraction option {option!r} in {text!r} (shiftN, "
                                 "mutual).")
        try:
            value = float(threshold) if threshold else 0.0
        except ValueError:
            raise ValueError(f"not a threshold: {threshold!r} in {text!r}.") from None
        return cls(pooling, value, shift, mutual)


#: the extraction rule of ``bahdanau-evaluate`` and ``bahdanau-translate --alignments``
DEFAULT_RULE = ExtractionRule("pieces")


def _pool(matrix, word_ids, count, how, axis):
    """Pools the positions of each word along ``axis`` (``how``: max, sum, mean or first)."""
    moved = np.moveaxis(matrix, axis, 0)
    pooled = np.zeros((count,) + moved.shape[1:], moved.dtype)
    for word in range(count):
        positions = [k for k, w in enumerate(word_ids) if w == word]
        if not positions:
            continue
        pieces = moved[positions]
        pooled[word] = {"max": pieces.max(0), "sum": pieces.sum(0), "mean": pieces.mean(0),
                        "first": pieces[0]}[how]
    return np.moveaxis(pooled, 0, axis)


def word_attention(attention, source_word_ids, target_word_ids, pooling: str = "sum",
                   shift: int = 0):
    """The attention pooled to words (see `ExtractionRule`): ``(words, null)``.

    Args:
        attention: array-like ``[target_len, source_len]`` over model tokens.
        source_word_ids, target_word_ids: the word of each token (None: no word).
        pooling: ``"max"``, ``"sum"`` or ``"first"``.
        shift: int, target token i reads row i + ``shift`` (see `ExtractionRule`).

    Returns:
        ``words`` float ``[target_words, source_words]`` and ``null`` float ``[target_words]``,
        the pooled weight of the source positions of no word (``[END]``).
    """
    matrix = np.asarray(attention, np.float64)[shift:]
    source_ids = [w if w is not None and w >= 0 else None for w in source_word_ids]
    target_ids = [w if w is not None and w >= 0 else None for w in target_word_ids]
    source_ids += [None] * (matrix.shape[1] - len(source_ids))
    n_source = max([w + 1 for w in source_ids if w is not None], default=0)
    n_target = max([w + 1 for w in target_ids if w is not None], default=0)
    rows = _pool(matrix[: len(target_ids)], target_ids[: len(matrix)], n_target,
                 "first" if pooling == "first" else "mean", axis=0)
    words = _pool(rows, source_ids, n_source, pooling, axis=1)
    no_word = [k for k, w in enumerate(source_ids) if w is None]
    null = (rows[:, no_word].max(1) if pooling == "max" else rows[:, no_word].sum(1)
            ) if no_word else np.zeros(n_target)
    return words, null


def best_links(matrix, null=None, threshold: float = 0.0, mutual: bool = False
               ) -> list[tuple[int, int]]:
    """``(row, column)`` of each row's largest weight, where that weight is a link.

    A row links nothing when its largest weight is not above zero, is below ``threshold`` or
    below its ``null`` weight; with ``mutual`` a link is kept only if its row is also the
    largest of its column (the first on ties, as ``argmax``). Rows are target words (or
    tokens), columns source words: the last step of every `ExtractionRule`.

    Args:
        matrix: float ``[rows, columns]``.
        null: float ``[rows]`` or None (zeros), the weight that goes to no column.
        threshold: float, the smallest weight that links.
        mutual: bool, keep only mutual best links.

    Example:

        >>> best_links([[0.6, 0.4], [0.7, 0.3]])
        [(0, 0), (1, 0)]
        >>> best_links([[0.6, 0.4], [0.7, 0.3]], mutual=True)
        [(1, 0)]
    """
    matrix = np.asarray(matrix, np.float64)
    if matrix.size == 0:
        return []
    rows = np.arange(matrix.shape[0])
    best = matrix.argmax(1)
    weight = matrix[rows, best]
    keep = (weight > 0) & (weight >= threshold)
    if null is not None:
        keep &= weight >= np.asarray(null, np.float64)
    if mutual:
        keep &= matrix.argmax(0)[best] == rows
    return [(int(r), int(best[r])) for r in np.flatnonzero(keep)]


def attention_to_alignment(
    attention,
    source_word_ids: Sequence[int | None] | None = None,
    target_word_ids: Sequence[int | None] | None = None,
    rule: ExtractionRule | str | None = None,
) -> set[Link]:
    """Turns an attention matrix over model tokens into word alignment links.

    Convention (the ``"pieces"`` rule): every target token links to the source token it
    attends to most (its row's argmax; the first one on ties). The two tokens are then mapped
    to word indices with the given maps, so subword pieces count for the word they came from
    and several pieces give one link. A position whose map entry is None or negative, or that
    lies beyond the end of the map (the [END] token, padding), has no word: links from or to it
    are dropped — a target token that attends most to the source [END] is left unaligned (Och &
    Ney's NULL alignment). Other rules pool to words first, shift the rows, keep mutual best
    links only (`ExtractionRule`).

    Args:
        attention: array-like ``[target_len, source_len]``, α_ij over model tokens (one
            sentence; padding allowed).
        source_word_ids: list of int or None, the word index of each source token (e.g. from
            :func:`token_word_ids`); None means token j is word j.
        target_word_ids: list of int or None, the same for the target tokens.
        rule: an `ExtractionRule` (or its `str`); None: the ``"pieces"`` rule described above.

    Returns:
        set of ``(source_word_index, target_word_index)`` pairs, for
        :func:`alignment_error_rate`.

    Raises:
        ValueError: if ``attention`` is not 2-D or a map is longer than its axis.

    Example:

        >>> sorted(attention_to_alignment(
        ...     [[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8]],
        ...     source_word_ids=[0, 0, None], target_word_ids=[0, 1, None]))
        [(0, 0), (0, 1)]
    """
    matrix = np.asarray(attention)
    if matrix.ndim != 2:
        raise ValueError(
            f"`attention` must be 2-D [target_len, source_len], got shape {list(matrix.shape)}."
        )
    target_len, source_len = matrix.shape
    source_words = _check_word_ids("source_word_ids", source_word_ids, source_len)
    target_words = _check_word_ids("target_word_ids", target_word_ids, target_len)
    rule = ExtractionRule.parse(rule) if isinstance(rule, str) else rule or ExtractionRule()
    if source_len == 0:
        return set()
    if rule.pooling != "pieces":
        words, null = word_attention(matrix, source_words, target_words, rule.pooling, rule.shift)
        return {(s, t) for t, s in best_links(words, null, rule.threshold, rule.mutual)}
    # token level: rows of target tokens of no word never link nor win a column
    shifted = np.asarray(matrix, np.float64)[rule.shift:]
    target_words = target_words[: len(shifted)]
    rows = [t for t, w in enumerate(target_words) if w is not None and w >= 0]
    source_words = source_words + [None] * (source_len - len(source_words))
    null = [k for k, w in enumerate(source_words) if w is None or w < 0]
    tokens = shifted[rows]
    no_word = tokens[:, null].max(1) if null else None
    tokens[:, null] = 0.0  # a row whose best is the [END] column links nothing
    if no_word is not None:
        no_word = np.where(tokens.max(1, initial=0.0) >= no_word, 0.0, np.inf)
    links = best_links(tokens, no_word, rule.threshold, rule.mutual)
    return {(int(source_words[s]), int(target_words[rows[r]])) for r, s in links}


def attention_links(alignments: Sequence, rule: ExtractionRule | str | None = None
                    ) -> list[set[Link]]:
    """Word links of each `bahdanau_tf.translator.Alignment`, e.g. of reference attention.

    :func:`attention_to_alignment` by ``rule`` (None: `DEFAULT_RULE`), with WordPiece pieces
    grouped into words by :func:`token_word_ids`.

    Args:
        alignments: list of objects with ``source_tokens``, ``target_tokens`` and
            ``attention`` ``[len(target_tokens), len(source_tokens)]``.
        rule: an `ExtractionRule` or its `str`.

    Returns:
        list of sets of ``(source_word, target_word)`` links, one per alignment.
    """
    return [
        attention_to_alignment(
            a.attention, token_word_ids(a.source_tokens), token_word_ids(a.target_tokens),
            rule or DEFAULT_RULE)
        for a in alignments
    ]


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
    transpose the reverse ones and `bahdanau_tf.word_alignment.symmetrize` them;
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
    from bahdanau_tf.word_alignment import symmetrize

    return [symmetrize(f, {(s, t) for t, s in r}, method)
            for f, r in zip(attention_links(forward, rule), attention_links(reverse, reverse_rule))]


def translation_links(translator, sources: Sequence[str], translations: Sequence[str],
                      rule: ExtractionRule | str | None = None, batch_size: int = 64
                      ) -> list[set[Link]]:
    """Word links between sources and given translations (e.g. a model's own output).

    The attention of the translator's model reading each translation (teacher forcing,
    `bahdanau_tf.translator.Translator.reference_attention`): for a translation the model
    produced, the attention of its search, whenever the output text tokenizes back into the
    pieces it generated. Links by :func:`attention_links` with ``rule`` (None:
    `DEFAULT_RULE`), in :func:`bahdanau_tf.text.split_words` words of both sides, as
    ``bahdanau-translate --alignments`` writes them.
    """
    attention = translator.reference_attention(list(sources), list(translations), batch_size=batch_size)
    return attention_links(attention, rule)


def _token_words(tokens: Sequence[str]) -> list[str]:
    """The words a token sequence spells (pieces joined, special tokens dropped)."""
    words: dict[int, str] = {}
    for token, word in zip(tokens, token_word_ids(tokens)):
        if word is not None:
            words[word] = words.get(word, "") + (token[2:] if token.startswith("##") else token)
    return [words[w] for w in sorted(words)]


def decoded_links(
    alignments: Sequence,
    references: Sequence[str],
    sure: Sequence[Iterable],
    possible: Sequence[Iterable] | None = None,
    rule: ExtractionRule | str | None = None,
) -> tuple[list[set[Link]], list[set[Link]], list[set[Link]]]:
    """Links of decoded translations, scored on the words they share with the reference.

    A translation has no gold alignment of its own. A hypothesis word that occurs exactly once
    in the hypothesis and exactly once in the reference inherits that reference word's gold
    links (sure and possible apart); only those hypothesis words are scored, the others have no
    gold and their predicted links are dropped.

    Args:
        alignments: list of `bahdanau_tf.translator.Alignment` of the translations.
        references: list of str, the reference of each translation.
        sure: per sentence, the sure gold links ``(source_word, reference_word)``.
        possible: per sentence, the possible gold links (sure ones may be included), or None
            for P = S.
        rule: the `ExtractionRule` (None: `DEFAULT_RULE`).

    Returns:
        ``(predicted, sure, possible)`` per sentence, in hypothesis word indices, for
        :func:`alignment_scores`.
    """
    possible = sure if possible is None else possible
    counts = {len(alignments), len(references), len(sure), len(possible)}
    if len(counts) > 1:
        raise ValueError(
            f"Sentence counts differ: {len(alignments)} alignments, {len(references)} "
            f"references, {len(sure)} sure, {len(possible)} possible."
        )
    found = attention_links(alignments, rule)
    predicted_out, sure_out, possible_out = [], [], []
    for alignment, links, reference, s, p in zip(alignments, found, references, sure, possible):
        hyp_words, ref_words = _token_words(alignment.target_tokens), split_words(reference)
        ref_index = {w: i for i, w in enumerate(ref_words) if ref_words.count(w) == 1}
        to_hyp = {
            ref_index[w]: i
            for i, w in enumerate(hyp_words)
            if hyp_words.count(w) == 1 and w in ref_index
        }
        scored = set(to_hyp.values())
        predicted_out.append({(a, t) for a, t in links if t in scored})
        sure_out.append({(a, to_hyp[t]) for a, t in s if t in to_hyp})
        possible_out.append({(a, to_hyp[t]) for a, t in p if t in to_hyp})
    return predicted_out, sure_out, possible_out


def diagonal_links(sources: Sequence[str], targets: Sequence[str]) -> list[set[Link]]:
    """A baseline aligner: target word t links to the source word at the same relative position.

    Target word ``t`` of ``n_t`` links to source word ``min(n_s - 1, round(t * n_s / n_t))``
    (:func:`bahdanau_tf.text.split_words` words): what attention scores against when it has
    learned nothing but word order.

    Args:
        sources: list of str, the source sentences.
        targets: list of str, their translations.

    Returns:
        list of sets of ``(source_word, target_word)`` links; empty for an empty sentence.

    Example:

        >>> [sorted(links) for links in diagonal_links(["a b c d"], ["w x"])]
        [[(0, 0), (2, 1)]]
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets.")
    links = []
    for source, target in zip(sources, targets):
        n_source, n_target = len(split_words(source)), len(split_words(target))
        links.append(
            {(min(n_source - 1, round(t * n_source / n_target)), t) for t in range(n_target)}
            if n_source
            else set()
        )
    return links


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
