"""Scores of translations against references: BLEU, chrF, No-UNK BLEU, BLEU by length.

Pure functions over Python strings (Bahdanau et al. 2015, table 1 and figure 2; DESIGN §3):

- :func:`corpus_bleu`, :func:`corpus_chrf`: sacrebleu on *detokenized* text. The project
  reports BLEU as "sacrebleu 13a, lowercased", so ``lowercase=True, tokenize="13a"`` are the
  defaults; the sacrebleu signature is kept with every score.
- :func:`no_unk_subset`, :func:`no_unk_bleu`: table 1's "No UNK" column, BLEU on the sentences
  with no unknown word in the source or the reference; :func:`unknown_word_test` asks a
  tokenizer which words those are.
- :func:`length_buckets`, :func:`bleu_by_length`: figure 2, BLEU as a function of the source
  sentence length.

Sentences are lists of strings aligned by index: ``hypotheses[i]`` translates ``sources[i]``
and is scored against ``references[i]`` (one reference each, as in the paper). Word counts
(the source length of figure 2, the words checked for No-UNK) come from a ``split`` callable,
by default :func:`bahdanau_tf.text.split_words` (the package's one definition of a word:
punctuation split off, the same split as the tokenizers and the gold alignment indices); pass
``split=str.split`` for plain whitespace words.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import sacrebleu
import tensorflow as tf

from bahdanau_tf.special_tokens import UNK_ID, UNK_TOKEN
from bahdanau_tf.text import split_words

DEFAULT_LENGTH_BUCKETS = (10, 20, 30, 40, 50, 60)

Split = Callable[[str], Sequence[str]]


def default_split(text: str) -> list[str]:
    """``bahdanau_tf.text.split_words``: the word split of the tokenizers."""
    return split_words(text)


# ----------------------------------------------------------------------------------------------
# Input checks
# ----------------------------------------------------------------------------------------------


def _as_sentences(name: str, sentences: Sequence[str]) -> list[str]:
    """Returns ``sentences`` as a list of str, refusing a bare string (a list of characters)."""
    if isinstance(sentences, (str, bytes)):
        raise TypeError(
            f"`{name}` must be a sequence of sentences, not a single string: {sentences[:40]!r}"
        )
    sentences = list(sentences)
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise TypeError(
                f"`{name}[{i}]` must be a str (detokenized text), got "
                f"{type(sentence).__name__}: {sentence!r:.60}"
            )
    return sentences


def check_parallel(**named: Sequence[str]) -> dict[str, list[str]]:
    """Converts the named corpora to lists and checks they are non-empty and equally long."""
    lists = {name: _as_sentences(name, sentences) for name, sentences in named.items()}
    counts = {name: len(sentences) for name, sentences in lists.items()}
    if len(set(counts.values())) > 1:
        described = ", ".join(f"{count} {name}" for name, count in counts.items())
        raise ValueError(f"Sentence counts differ: {described}.")
    if not any(counts.values()):
        raise ValueError(f"Nothing to evaluate: {', '.join(counts)} are empty.")
    return lists


# ----------------------------------------------------------------------------------------------
# BLEU and chrF
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BleuResult:
    """A corpus BLEU score with what is needed to report and reproduce it.

    Attributes:
        score: BLEU in [0, 100].
        precisions: modified n-gram precisions for n = 1..4, in percent.
        brevity_penalty: BP = min(1, exp(1 - r / c)).
        length_ratio: hypothesis length / reference length, c / r (in sacrebleu tokens).
        hypothesis_length: c, the number of hypothesis tokens.
        reference_length: r, the number of reference tokens.
        num_sentences: the number of sentence pairs scored.
        signature: sacrebleu's signature, e.g. ``nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|
            version:2.6.0``.
    """

    score: float
    precisions: tuple[float, ...]
    brevity_penalty: float
    length_ratio: float
    hypothesis_length: int
    reference_length: int
    num_sentences: int
    signature: str

    def __str__(self) -> str:
        precisions = "/".join(f"{p:.1f}" for p in self.precisions)
        return (
            f"BLEU = {self.score:.2f} {precisions} (BP = {self.brevity_penalty:.3f} "
            f"ratio = {self.length_ratio:.3f} hyp_len = {self.hypothesis_length} "
            f"ref_len = {self.reference_length}) {self.signature}"
        )


@dataclasses.dataclass(frozen=True)
class ChrfResult:
    """A corpus chrF score.

    Attributes:
        score: chrF in [0, 100].
        num_sentences: the number of sentence pairs scored.
        signature: sacrebleu's signature, e.g. ``nrefs:1|case:lc|eff:yes|nc:6|nw:0|space:no|
            version:2.6.0``.
    """

    score: float
    num_sentences: int
    signature: str


def corpus_bleu(
    hypotheses: Sequence[str],
    references: Sequence[str],
    lowercase: bool = True,
    tokenize: str = "13a",
) -> BleuResult:
    """Corpus BLEU (Papineni et al. 2002) of detokenized translations, with sacrebleu.

    n-gram counts are summed over the corpus before the precisions are taken (not an average of
    sentence scores); sacrebleu's defaults otherwise (4-grams, exponential smoothing of zero
    counts). The same numbers as ``sacrebleu REF -i HYP -tok 13a -lc`` on the command line.

    Args:
        hypotheses: list of str, the system's translations, detokenized.
        references: list of str, one reference per hypothesis, detokenized.
        lowercase: bool, compare case-insensitively (the project's reporting default).
        tokenize: str, a sacrebleu tokenizer name (``"13a"``, ``"intl"``, ``"none"``, ...).

    Returns:
        A :class:`BleuResult`.

    Raises:
        ValueError: if the lists are empty or differ in length.
        TypeError: if a list is a bare string or holds non-strings.

    Example:

        >>> round(corpus_bleu(["The cat sat on the mat ."], ["the cat sat on the mat ."]).score, 1)
        100.0
    """
    lists = check_parallel(hypotheses=hypotheses, references=references)
    statistics = CorpusStatistics.bleu(lowercase=lowercase, tokenize=tokenize)
    statistics.add(lists["hypotheses"], lists["references"])
    return statistics.result()


def corpus_chrf(
    hypotheses: Sequence[str],
    references: Sequence[str],
    lowercase: bool = True,
    word_order: int = 0,
) -> ChrfResult:
    """Corpus chrF (Popović 2015) of detokenized translations, with sacrebleu.

    Lowercased by default, like :func:`corpus_bleu` (sacrebleu's own chrF default is
    case-sensitive; on its command line this is ``-m chrf --chrf-lowercase``; its ``-lc`` flag
    does not reach chrF).

    Args:
        hypotheses: list of str, the system's translations, detokenized.
        references: list of str, one reference per hypothesis, detokenized.
        lowercase: bool, compare case-insensitively.
        word_order: int, word n-gram order; 2 gives chrF++.

    Returns:
        A :class:`ChrfResult`.

    Raises:
        ValueError: if the lists are empty or differ in length.

    Example:

        >>> corpus_chrf(["Hello world"], ["hello world"]).score
        100.0
    """
    lists = check_parallel(hypotheses=hypotheses, references=references)
    statistics = CorpusStatistics.chrf(lowercase=lowercase, word_order=word_order)
    statistics.add(lists["hypotheses"], lists["references"])
    return statistics.result()


def corpus_statistics(metric, hypotheses: Sequence[str], references: Sequence[str]) -> list | None:
    """sacrebleu's sufficient statistics of a corpus, summed over its sentences.

    The numbers ``metric.corpus_score`` takes its score from: for BLEU the hypothesis and
    reference lengths and the n-gram matches and totals, for chrF the character (and word)
    n-gram counts per order; all integers, so sums over chunks equal the sums over the whole
    corpus. sacrebleu 2.x has no public route to them: this function and
    `score_from_statistics` are the package's only calls of its private
    ``_extract_corpus_statistics`` and ``_compute_score_from_stats`` (the two calls
    ``corpus_score`` makes; tests/test_evaluation_metrics.py checks them against it).

    Returns:
        list of int, or None for no sentence.
    """
    if not hypotheses:  # not passed on: sacrebleu would record "nrefs:var" in its signature
        return None
    statistics = metric._extract_corpus_statistics(list(hypotheses), [list(references)])
    return [sum(column) for column in zip(*statistics)]


def score_from_statistics(metric, statistics: list):
    """The sacrebleu score object (``BLEUScore``, ``CHRFScore``) of summed `corpus_statistics`."""
    return metric._compute_score_from_stats(list(statistics))


class CorpusStatistics:
    """A corpus BLEU or chrF accumulated chunk by chunk, in memory bounded by one chunk.

    Holds sacrebleu's summed sufficient statistics (`corpus_statistics`), never the sentences:
    :meth:`result` after any number of :meth:`add` calls is the score of all their sentences
    as one corpus, the same numbers as :func:`corpus_bleu` / :func:`corpus_chrf` on the whole
    lists (which are this class with one :meth:`add`).

    Example:

        >>> bleu = CorpusStatistics.bleu()
        >>> bleu.add(["the cat sat"], ["the cat sat"])
        >>> bleu.add(["on the mat ."], ["on the mat ."])
        >>> round(bleu.result().score, 1), bleu.result().num_sentences
        (100.0, 2)
    """

    def __init__(self, metric):
        self.metric = metric
        self.statistics = None
        self.num_sentences = 0

    @classmethod
    def bleu(cls, lowercase: bool = True, tokenize: str = "13a") -> CorpusStatistics:
        """For :func:`corpus_bleu`'s score (its arguments)."""
        return cls(sacrebleu.metrics.BLEU(lowercase=lowercase, tokenize=tokenize))

    @classmethod
    def chrf(cls, lowercase: bool = True, word_order: int = 0) -> CorpusStatistics:
        """For :func:`corpus_chrf`'s score (its arguments)."""
        return cls(sacrebleu.metrics.CHRF(lowercase=lowercase, word_order=word_order))

    def add(self, hypotheses: Sequence[str], references: Sequence[str]) -> None:
        """Adds sentence pairs (lists of str of equal length; empty lists add nothing)."""
        hypotheses = _as_sentences("hypotheses", hypotheses)
        references = _as_sentences("references", references)
        if len(hypotheses) != len(references):
            raise ValueError(f"Sentence counts differ: {len(hypotheses)} hypotheses, "
                             f"{len(references)} references.")
        statistics = corpus_statistics(self.metric, hypotheses, references)
        if statistics is not None:
            self.statistics = statistics if self.statistics is None else [
                a + b for a, b in zip(self.statistics, statistics)]
            self.num_sentences += len(hypotheses)

    def result(self) -> BleuResult | ChrfResult | None:
        """A :class:`BleuResult` or :class:`ChrfResult` of everything added; None if nothing."""
        if not self.num_sentences:
            return None
        score = score_from_statistics(self.metric, self.statistics)
        signature = str(self.metric.get_signature())
        if isinstance(self.metric, sacrebleu.metrics.BLEU):
            return BleuResult(
                score=float(score.score),
                precisions=tuple(float(p) for p in score.precisions),
                brevity_penalty=float(score.bp),
                length_ratio=float(score.ratio),
                hypothesis_length=int(score.sys_len),
                reference_length=int(score.ref_len),
                num_sentences=self.num_sentences,
                signature=signature,
            )
        return ChrfResult(score=float(score.score), num_sentences=self.num_sentences,
                          signature=signature)


# ----------------------------------------------------------------------------------------------
# No-UNK BLEU (table 1, last column)
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NoUnkBleuResult:
    """BLEU on the sentences with no unknown word (table 1's "No UNK" column).

    Attributes:
        bleu: the :class:`BleuResult` on the kept sentences, or None when none was kept.
        num_sentences: the number of sentences kept.
        num_total: the number of sentences before selection.
        num_hypotheses_with_unk: kept hypotheses that still contain ``[UNK]`` — 0 when they were
            decoded with [UNK] forbidden, as the paper does.
        indices: the kept sentences' indices into the full corpus, in order.
    """

    bleu: BleuResult | None
    num_sentences: int
    num_total: int
    num_hypotheses_with_unk: int
    indices: tuple[int, ...]

    @property
    def score(self) -> float | None:
        """The BLEU score, or None when no sentence was kept."""
        return None if self.bleu is None else self.bleu.score


def no_unk_subset(
    sources: Sequence[str],
    references: Sequence[str],
    has_unknown: Callable[[str, str], bool],
) -> list[int]:
    """Indices of the sentence pairs with no unknown word in the source or the reference.

    What counts as unknown depends on the vocabularies, which only the caller knows, so the
    test is passed in.

    Args:
        sources: list of str, the source sentences.
        references: list of str, the reference translations.
        has_unknown: ``has_unknown(source, reference) -> bool``, True when either sentence has a
            word outside its vocabulary (for a word-level shortlist: a word mapped to [UNK]).

    Returns:
        list of int, the indices ``i`` (ascending) with ``has_unknown(sources[i],
        references[i])`` False.

    Raises:
        ValueError: if the lists are empty or differ in length.

    Example:

        >>> vocabulary = {"a", "b"}
        >>> oov = lambda s, r: any(w not in vocabulary for w in (s + " " + r).split())
        >>> no_unk_subset(["a b", "a c"], ["b", "b"], oov)
        [0]
    """
    lists = check_parallel(sources=sources, references=references)
    return [
        i
        for i, (source, reference) in enumerate(zip(lists["sources"], lists["references"]))
        if not has_unknown(source, reference)
    ]


def sentence_pair_test(
    is_unknown_word: Callable[[str], bool] | tuple[Callable[[str], bool], Callable[[str], bool]],
    split: Split,
) -> Callable[[str, str], bool]:
    """Turns word predicates into the sentence-pair predicate of :func:`no_unk_subset`."""
    if callable(is_unknown_word):
        source_test = target_test = is_unknown_word
    else:
        try:
            source_test, target_test = is_unknown_word
        except (TypeError, ValueError):
            raise TypeError(
                "`is_unknown_word` must be a callable or a (source, target) pair of callables, "
                f"got {is_unknown_word!r}"
            ) from None

    def has_unknown(source: str, reference: str) -> bool:
        return any(source_test(w) for w in split(source)) or any(
            target_test(w) for w in split(reference)
        )

    return has_unknown


def unknown_word_test(tokenizer, sentences: Sequence[str]) -> Callable[[str], bool]:
    """``f(word) -> bool``: True for a word of ``sentences`` that ``tokenizer`` maps to [UNK].

    A word-level shortlist maps every word outside it to [UNK]; a subword tokenizer only a word
    with a character outside its alphabet. All distinct words of ``sentences``
    (``bahdanau_tf.text.split_words``) are tokenized in one graph call, not one by one; a word
    that is not in ``sentences`` counts as known.

    Args:
        tokenizer: a `bahdanau_tf.text` tokenizer (``tokenize(list of str) -> ragged ids``).
        sentences: list of str, the sentences whose words are tested.

    Returns:
        ``is_unknown_word(word) -> bool``, for :func:`no_unk_bleu`.

    Example:

        tokenizer = WordTokenizer.build(["the cat"], max_vocabulary_size=100)
        unknown_word_test(tokenizer, ["the dog"])("dog")  # True
    """
    words = sorted({w for s in _as_sentences("sentences", sentences) for w in split_words(s)})
    unknown = set()
    if words:
        ids = tokenizer.tokenize(words)
        has_unk = tf.reduce_any(tf.equal(ids, UNK_ID), axis=1).numpy()
        unknown = {w for w, bad in zip(words, has_unk) if bad}
    return lambda word: word in unknown


def no_unk_bleu(
    hypotheses: Sequence[str],
    references: Sequence[str],
    sources: Sequence[str],
    is_unknown_word: Callable[[str], bool] | tuple[Callable[[str], bool], Callable[[str], bool]],
    split: Split | None = None,
    lowercase: bool = True,
    tokenize: str = "13a",
) -> NoUnkBleuResult:
    """The paper's No-UNK BLEU: BLEU on the sentences without unknown words.

    Table 1's last column scores only the sentences where neither the source nor the reference
    has a word outside the shortlists, with translations decoded with [UNK] *forbidden* (beam
    search's no-UNK mode). Decoding is the caller's job: pass those hypotheses here, for the full
    corpus (they are selected with the same indices as sources and references).

    Args:
        hypotheses: list of str, translations of every source, decoded with [UNK] forbidden.
        references: list of str, the references.
        sources: list of str, the source sentences.
        is_unknown_word: ``f(word) -> bool`` applied to the words of both sides (shared
            vocabulary), or a pair ``(source_f, target_f)`` for separate vocabularies.
        split: ``split(text) -> list[str]``, how sentences are cut into words;
            ``bahdanau_tf.text.split_words`` by default.
        lowercase: bool, as in :func:`corpus_bleu`.
        tokenize: str, as in :func:`corpus_bleu`.

    Returns:
        A :class:`NoUnkBleuResult`; its ``bleu`` is None if no sentence was kept.

    Raises:
        ValueError: if the lists are empty or differ in length.

    Example:

        >>> vocabulary = {"the", "cat", "sat", "down", "el", "gato", "se", "sentó", "perro"}
        >>> result = no_unk_bleu(
        ...     ["the cat sat down", "the cat sat"],
        ...     ["the cat sat down", "the dog sat"],
        ...     ["el gato se sentó", "el perro se sentó"],
        ...     lambda word: word not in vocabulary)
        >>> result.num_sentences, round(result.score, 1)
        (1, 100.0)
    """
    lists = check_parallel(hypotheses=hypotheses, references=references, sources=sources)
    split = split or default_split
    indices = no_unk_subset(
        lists["sources"], lists["references"], sentence_pair_test(is_unknown_word, split)
    )
    kept_hypotheses = [lists["hypotheses"][i] for i in indices]
    kept_references = [lists["references"][i] for i in indices]
    bleu = (
        corpus_bleu(kept_hypotheses, kept_references, lowercase=lowercase, tokenize=tokenize)
        if indices
        else None
    )
    return NoUnkBleuResult(
        bleu=bleu,
        num_sentences=len(indices),
        num_total=len(lists["hypotheses"]),
        num_hypotheses_with_unk=sum(UNK_TOKEN in h for h in kept_hypotheses),
        indices=tuple(indices),
    )


# ----------------------------------------------------------------------------------------------
# BLEU by source length (figure 2)
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LengthBucketScore:
    """BLEU on the sentences whose source length falls in one bucket.

    Attributes:
        min_length: int, the shortest source length (in words) in the bucket, inclusive.
        max_length: int or None, the longest, inclusive; None for the open last bucket.
        count: int, the number of sentences in the bucket.
        bleu: float or None, corpus BLEU of the bucket; None when it is empty.
    """

    min_length: int
    max_length: int | None
    count: int
    bleu: float | None

    @property
    def label(self) -> str:
        """``"0-10"``, ``"11-20"``, ..., ``">60"``."""
        if self.max_length is None:
            return f">{self.min_length - 1}"
        return f"{self.min_length}-{self.max_length}"


def check_buckets(buckets: Sequence[int]) -> tuple[int, ...]:
    buckets = tuple(buckets)
    if not buckets or any(
        not isinstance(b, (int, np.integer)) or isinstance(b, bool) for b in buckets
    ):
        raise ValueError(f"`buckets` must be a non-empty sequence of ints, got {buckets!r}")
    if buckets[0] < 0 or any(b <= a for a, b in zip(buckets, buckets[1:])):
        raise ValueError(
            f"`buckets` must be non-negative and strictly increasing, got {buckets!r}"
        )
    return tuple(int(b) for b in buckets)


def length_buckets(
    sources: Sequence[str],
    buckets: Sequence[int] = DEFAULT_LENGTH_BUCKETS,
    split: Split | None = None,
) -> list[list[int]]:
    """Groups sentence indices by source length in words.

    ``buckets`` are inclusive upper bounds: with the default ``(10, 20, ..., 60)`` the groups
    are lengths 0-10, 11-20, ..., 51-60 and an open last group, longer than 60 — always
    ``len(buckets) + 1`` groups, empty ones included.

    Args:
        sources: list of str, the source sentences.
        buckets: strictly increasing ints, the upper bound of each bucket.
        split: ``split(text) -> list[str]``; ``bahdanau_tf.text.split_words`` by default.

    Returns:
        list of ``len(buckets) + 1`` lists of indices into ``sources``, ascending.

    Example:

        >>> length_buckets(["a b", "a b c", "a b c d e"], buckets=(2, 4))
        [[0], [1], [2]]
    """
    sources = _as_sentences("sources", sources)
    bounds = check_buckets(buckets)
    split = split or default_split
    groups: list[list[int]] = [[] for _ in range(len(bounds) + 1)]
    for i, source in enumerate(sources):
        length = len(split(source))
        # first bucket whose upper bound is >= length; the open bucket otherwise
        groups[int(np.searchsorted(bounds, length, side="left"))].append(i)
    return groups


def bleu_by_length(
    hypotheses: Sequence[str],
    references: Sequence[str],
    sources: Sequence[str],
    buckets: Sequence[int] = DEFAULT_LENGTH_BUCKETS,
    split: Split | None = None,
    lowercase: bool = True,
    tokenize: str = "13a",
) -> list[LengthBucketScore]:
    """BLEU as a function of the source sentence length (the paper's figure 2).

    Sentences are grouped by :func:`length_buckets` and each group is scored with
    :func:`corpus_bleu` on its own.

    Args:
        hypotheses: list of str, the translations.
        references: list of str, the references.
        sources: list of str, the source sentences whose length (in words) picks the bucket.
        buckets: strictly increasing ints, inclusive upper bounds; see :func:`length_buckets`.
        split: ``split(text) -> list[str]``; ``bahdanau_tf.text.split_words`` by default.
        lowercase: bool, as in :func:`corpus_bleu`.
        tokenize: str, as in :func:`corpus_bleu`.

    Returns:
        list of ``len(buckets) + 1`` :class:`LengthBucketScore`, shortest first.

    Raises:
        ValueError: if the lists are empty or differ in length, or the buckets are malformed.

    Example:

        >>> scores = bleu_by_length(["a b c d", "x y"], ["a b c d", "x z"],
        ...                         ["uno dos tres cuatro", "uno dos tres"], buckets=(3,))
        >>> [(s.label, s.count, round(s.bleu, 1)) for s in scores]
        [('0-3', 1, 0.0), ('>3', 1, 100.0)]
    """
    lists = check_parallel(hypotheses=hypotheses, references=references, sources=sources)
    bounds = check_buckets(buckets)
    groups = length_buckets(lists["sources"], bounds, split)
    lower_bounds = (0,) + tuple(b + 1 for b in bounds)
    upper_bounds = bounds + (None,)
    scores = []
    for group, low, high in zip(groups, lower_bounds, upper_bounds):
        bleu = None
        if group:
            bleu = corpus_bleu(
                [lists["hypotheses"][i] for i in group],
                [lists["references"][i] for i in group],
                lowercase=lowercase,
                tokenize=tokenize,
            ).score
        scores.append(LengthBucketScore(min_length=low, max_length=high, count=len(group), bleu=bleu))
    return scores


def bucket_from(value: LengthBucketScore | Mapping[str, Any]) -> LengthBucketScore:
    if isinstance(value, LengthBucketScore):
        return value
    if isinstance(value, Mapping):
        return LengthBucketScore(
            min_length=value["min_length"],
            max_length=value["max_length"],
            count=value["count"],
            bleu=value["bleu"],
        )
    raise TypeError(f"Expected a LengthBucketScore or its dict, got {value!r}")
