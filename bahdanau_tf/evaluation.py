"""The paper's evaluation (Bahdanau et al. 2015, sections 4.2 and 5; DESIGN §3).

Pure library functions over Python strings and NumPy arrays; the Translator produces the
inputs, the ``bahdanau-evaluate`` command line writes the outputs.

- :func:`corpus_bleu`, :func:`corpus_chrf`: sacrebleu on *detokenized* text. The project
  reports BLEU as "sacrebleu 13a, lowercased", so ``lowercase=True, tokenize="13a"`` are the
  defaults; the sacrebleu signature is kept with every score.
- :func:`no_unk_subset`, :func:`no_unk_bleu`: table 1's "No UNK" column, BLEU on the sentences
  with no unknown word in the source or the reference.
- :func:`length_buckets`, :func:`bleu_by_length`, :func:`plot_bleu_by_length`: figure 2, BLEU
  as a function of the source sentence length, several models on one plot.
- :func:`plot_attention`: figure 3, an alignment matrix α_ij as a grayscale heatmap (0 black,
  1 white), source words on the x axis (top), target words on the y axis.
- :func:`attention_to_alignment`, :func:`token_word_ids`, :func:`alignment_scores`,
  :func:`alignment_error_rate`: the paper's alignment claim measured instead of looked at,
  the alignment error rate (Och & Ney 2003) of the attention against gold word alignments
  (the corpus's Strong's numbers).
- :class:`EvaluationReport` and :func:`evaluation_report`: all of the above in one JSON
  document.

Conventions used throughout:

- Sentences are lists of strings, one sentence per item, aligned by index: ``hypotheses[i]``
  translates ``sources[i]`` and is scored against ``references[i]`` (one reference each, as in
  the paper).
- Word counts (the source length of figure 2, the words checked for No-UNK) come from a
  ``split`` callable, by default :func:`bahdanau_tf.text.split_words` (the package's one
  definition of a word: punctuation split off, the same split as the tokenizers and the gold
  alignment indices). Pass ``split=str.split`` for plain whitespace words.
- Alignment links are ``(source_index, target_index)`` pairs of 0-based *word* indices.
- matplotlib is imported inside the plotting functions only, and figures are made with
  ``matplotlib.figure.Figure`` on an Agg canvas, never through ``pyplot``: no global backend
  switch, no figure registry to leak, and the notebook's own backend is left alone.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import sacrebleu

from bahdanau_tf.special_tokens import SPECIAL_TOKENS, UNK_TOKEN

DEFAULT_LENGTH_BUCKETS = (10, 20, 30, 40, 50, 60)

Link = tuple[int, int]
Split = Callable[[str], Sequence[str]]


def _default_split(text: str) -> list[str]:
    """``bahdanau_tf.text.split_words``, imported on first use (text.py imports TensorFlow)."""
    from bahdanau_tf.text import split_words

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


def _check_parallel(**named: Sequence[str]) -> dict[str, list[str]]:
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
    lists = _check_parallel(hypotheses=hypotheses, references=references)
    metric = sacrebleu.metrics.BLEU(lowercase=lowercase, tokenize=tokenize)
    result = metric.corpus_score(lists["hypotheses"], [lists["references"]])
    return BleuResult(
        score=float(result.score),
        precisions=tuple(float(p) for p in result.precisions),
        brevity_penalty=float(result.bp),
        length_ratio=float(result.ratio),
        hypothesis_length=int(result.sys_len),
        reference_length=int(result.ref_len),
        num_sentences=len(lists["hypotheses"]),
        signature=str(metric.get_signature()),
    )


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
    lists = _check_parallel(hypotheses=hypotheses, references=references)
    metric = sacrebleu.metrics.CHRF(lowercase=lowercase, word_order=word_order)
    result = metric.corpus_score(lists["hypotheses"], [lists["references"]])
    return ChrfResult(
        score=float(result.score),
        num_sentences=len(lists["hypotheses"]),
        signature=str(metric.get_signature()),
    )


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
    lists = _check_parallel(sources=sources, references=references)
    return [
        i
        for i, (source, reference) in enumerate(zip(lists["sources"], lists["references"]))
        if not has_unknown(source, reference)
    ]


def _unknown_word_test(
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
    lists = _check_parallel(hypotheses=hypotheses, references=references, sources=sources)
    split = split or _default_split
    indices = no_unk_subset(
        lists["sources"], lists["references"], _unknown_word_test(is_unknown_word, split)
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


def _check_buckets(buckets: Sequence[int]) -> tuple[int, ...]:
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
    bounds = _check_buckets(buckets)
    split = split or _default_split
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
    lists = _check_parallel(hypotheses=hypotheses, references=references, sources=sources)
    bounds = _check_buckets(buckets)
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


def _bucket_from(value: LengthBucketScore | Mapping[str, Any]) -> LengthBucketScore:
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


def _new_figure(width: float, height: float, dpi: int):
    """A pyplot-free figure on an Agg canvas (matplotlib imported here, lazily)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(figure)
    return figure


def _save_png(figure, path: str | os.PathLike | None) -> None:
    if path is None:
        return
    path = pathlib.Path(path)
    if path.parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=figure.dpi)


def plot_bleu_by_length(
    results_by_model: Mapping[str, Sequence[LengthBucketScore | Mapping[str, Any]]],
    path: str | os.PathLike | None,
    title: str | None = None,
    dpi: int = 100,
):
    """Draws BLEU against source sentence length for several models (the paper's figure 2).

    One line per model; each bucket is drawn at its upper bound (the open last bucket one
    bucket width further), tick-labelled with the bucket's range; empty buckets are skipped.
    All models must use the same buckets.

    Args:
        results_by_model: dict model name -> :func:`bleu_by_length` output (or its JSON dicts,
            e.g. ``EvaluationReport.from_json(...).bleu_by_length``), e.g.
            ``{"RNNsearch-50": ..., "RNNencdec-50": ...}``.
        path: where to write the PNG (parent directories are made), or None to only return the
            figure.
        title: optional str, the plot title.
        dpi: int, resolution of the PNG.

    Returns:
        The ``matplotlib.figure.Figure`` (not registered with pyplot; shows in notebooks).

    Raises:
        ValueError: if there is no model, or models used different buckets.

    Example:

        plot_bleu_by_length({"RNNsearch": bleu_by_length(hyps_1, refs, srcs),
                             "RNNencdec": bleu_by_length(hyps_2, refs, srcs)}, "fig2.png")
    """
    if not results_by_model:
        raise ValueError("`results_by_model` is empty: nothing to plot.")
    models = {name: [_bucket_from(b) for b in scores] for name, scores in results_by_model.items()}
    ranges = {name: [(b.min_length, b.max_length) for b in scores] for name, scores in models.items()}
    reference_name, reference_ranges = next(iter(ranges.items()))
    for name, model_ranges in ranges.items():
        if model_ranges != reference_ranges:
            raise ValueError(
                f"Models use different length buckets: {reference_name!r} has "
                f"{reference_ranges}, {name!r} has {model_ranges}."
            )
    if not reference_ranges:
        raise ValueError(f"{reference_name!r} has no length buckets.")

    buckets = models[reference_name]
    # a bucket is drawn at its upper bound; the open last one a bucket width further
    positions = [b.max_length for b in buckets if b.max_length is not None]
    if buckets[-1].max_length is None:
        width = positions[-1] - positions[-2] if len(positions) > 1 else 10
        positions.append((positions[-1] if positions else buckets[-1].min_length) + width)

    figure = _new_figure(6.4, 4.8, dpi)
    axes = figure.add_subplot()
    markers = "o^sDvx*+"
    for k, (name, scores) in enumerate(models.items()):
        points = [(x, b.bleu) for x, b in zip(positions, scores) if b.bleu is not None and b.count]
        if points:
            xs, ys = zip(*points)
            axes.plot(xs, ys, marker=markers[k % len(markers)], label=name)
    axes.set_xticks(positions)
    axes.set_xticklabels([b.label for b in buckets])
    axes.set_xlabel("Sentence length (source words)")
    axes.set_ylabel("BLEU score")
    axes.grid(True, alpha=0.3)
    axes.legend()
    if title:
        axes.set_title(title)
    figure.tight_layout()
    _save_png(figure, path)
    return figure


# ----------------------------------------------------------------------------------------------
# Attention heatmaps (figure 3)
# ----------------------------------------------------------------------------------------------


def plot_attention(
    attention,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    path: str | os.PathLike | None,
    title: str | None = None,
    cell_size: float = 0.4,
    dpi: int = 100,
):
    """Draws an alignment matrix α_ij like the paper's figure 3.

    Source tokens label the columns (x axis, at the top), target tokens the rows (y axis);
    each cell is gray level α_ij with 0 black and 1 white (``cmap="gray", vmin=0, vmax=1``),
    drawn with ``interpolation="nearest"`` so a cell is one flat square of ``cell_size``
    inches.

    Args:
        attention: array-like ``[target_len, source_len]`` (NumPy or a tensor), row i the
            attention weights of target token i over the source tokens.
        source_tokens: list of str, ``source_len`` labels for the columns.
        target_tokens: list of str, ``target_len`` labels for the rows.
        path: where to write the PNG (parent directories are made), or None to only return the
            figure.
        title: optional str, drawn under the plot.
        cell_size: float, side of one cell in inches.
        dpi: int, resolution of the PNG.

    Returns:
        The ``matplotlib.figure.Figure`` (not registered with pyplot; shows in notebooks).

    Raises:
        ValueError: if ``attention`` is not 2-D or its shape does not match the token counts.

    Example:

        figure = plot_attention([[0.9, 0.1], [0.2, 0.8]], ["the", "cat"], ["el", "gato"],
                                "attention.png")
    """
    matrix = np.asarray(attention, dtype=np.float64)
    source_tokens = [str(t) for t in source_tokens]
    target_tokens = [str(t) for t in target_tokens]
    expected = (len(target_tokens), len(source_tokens))
    if matrix.ndim != 2 or matrix.shape != expected:
        raise ValueError(
            f"`attention` must have shape [target_len, source_len] = {list(expected)} "
            f"({len(target_tokens)} target tokens, {len(source_tokens)} source tokens), "
            f"got {list(matrix.shape)}."
        )
    if 0 in expected:
        raise ValueError(f"Nothing to plot: attention shape {list(matrix.shape)}.")

    # room for the labels: about 0.09 inch per character at the default font size
    longest_source = max(len(t) for t in source_tokens)
    longest_target = max(len(t) for t in target_tokens)
    left = 0.3 + 0.09 * longest_target
    top = 0.3 + 0.09 * longest_source
    bottom = 0.2 + (0.4 if title else 0.0)
    right = 0.2
    width = left + cell_size * len(source_tokens) + right
    height = top + cell_size * len(target_tokens) + bottom

    figure = _new_figure(width, height, dpi)
    # axes placed by hand (no tight layout) so a cell is exactly cell_size inches
    axes = figure.add_axes(
        (left / width, bottom / height, cell_size * len(source_tokens) / width,
         cell_size * len(target_tokens) / height)
    )
    axes.imshow(matrix, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
    axes.xaxis.tick_top()
    axes.set_xticks(range(len(source_tokens)))
    axes.set_xticklabels(source_tokens, rotation=90)
    axes.set_yticks(range(len(target_tokens)))
    axes.set_yticklabels(target_tokens)
    axes.tick_params(length=0)
    if title:
        axes.set_xlabel(title)
    _save_png(figure, path)
    return figure


# ----------------------------------------------------------------------------------------------
# Alignment error rate
# ----------------------------------------------------------------------------------------------


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


def attention_to_alignment(
    attention,
    source_word_ids: Sequence[int | None] | None = None,
    target_word_ids: Sequence[int | None] | None = None,
) -> set[Link]:
    """Turns an attention matrix over model tokens into word alignment links.

    Convention: every target token links to the source token it attends to most (its row's
    argmax; the first one on ties). The two tokens are then mapped to word indices with the
    given maps, so subword pieces count for the word they came from and several pieces give one
    link. A position whose map entry is None or negative, or that lies beyond the end of the map
    (the [END] token, padding), has no word: links from or to it are dropped — a target token
    that attends most to the source [END] is left unaligned (Och & Ney's NULL alignment).

    Args:
        attention: array-like ``[target_len, source_len]``, α_ij over model tokens (one
            sentence; padding allowed).
        source_word_ids: list of int or None, the word index of each source token (e.g. from
            :func:`token_word_ids`); None means token j is word j.
        target_word_ids: list of int or None, the same for the target tokens.

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
    links = set()
    if source_len == 0:
        return links
    best_source = np.argmax(matrix, axis=1)  # (target_len,)
    for t, target_word in enumerate(target_words):
        if target_word is None or target_word < 0:
            continue
        s = int(best_source[t])
        source_word = source_words[s] if s < len(source_words) else None
        if source_word is None or source_word < 0:
            continue
        links.add((int(source_word), int(target_word)))
    return links


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


def _is_link(value: Any) -> bool:
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

    num_a = num_s = num_p = a_and_s = a_and_p = 0
    for a, s, p in zip(predicted_links, sure_links, possible_links):
        p = p | s
        num_a += len(a)
        num_s += len(s)
        num_p += len(p)
        a_and_s += len(a & s)
        a_and_p += len(a & p)
    if num_a + num_s == 0:
        raise ValueError(
            "Alignment error rate undefined: no predicted and no sure links in "
            f"{len(predicted_links)} sentences."
        )
    return AlignmentScores(
        aer=1.0 - (a_and_s + a_and_p) / (num_a + num_s),
        precision=a_and_p / num_a if num_a else None,
        recall=a_and_s / num_s if num_s else None,
        num_predicted=num_a,
        num_sure=num_s,
        num_possible=num_p,
        num_sentences=len(predicted_links),
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


# ----------------------------------------------------------------------------------------------
# The report written by bahdanau-evaluate
# ----------------------------------------------------------------------------------------------


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
            "alignment": None if self.alignment is None else dataclasses.asdict(self.alignment),
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
            bleu_by_length=[_bucket_from(b) for b in data.get("bleu_by_length", [])],
            alignment=(
                None if data.get("alignment") is None else AlignmentScores(**data["alignment"])
            ),
            settings=data.get("settings", {}),
        )


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
    lists = _check_parallel(hypotheses=hypotheses, references=references, sources=sources)
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
        "length_buckets": list(_check_buckets(buckets)),
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
