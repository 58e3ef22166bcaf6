"""Attention becomes word links: the extraction rules (one direction).

- :func:`token_word_ids`, :func:`attention_to_alignment`: an attention matrix over model tokens
  becomes word links by an :class:`ExtractionRule` (how a word's pieces pool their weights, and
  when a target word whose attention is diffuse is left unaligned);
- :func:`attention_links`, :func:`translation_links`, :func:`decoded_links`: the same for the
  `Alignment` objects of a `Translator` (teacher-forced attention on the references or on given
  translations, or the attention of its own translations carried over to the reference's words);
- :func:`diagonal_links`: the baseline that knows only word order.

Links are ``(source_index, target_index)`` pairs of 0-based *word* indices
(:func:`bahdanau_tf.text.split_words` words). Which rule suits a model is chosen on a dev gold
(`bahdanau_tf.alignment.dev_choice`); AER is `bahdanau_tf.alignment.error_rate`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

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
