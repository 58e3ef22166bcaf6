"""Evaluating a `Translator` on a test corpus, the way the paper does: :func:`evaluate_translator`.

One call decodes the corpus and scores it: BLEU and chrF (table 1, "All"), No-UNK BLEU
(table 1, "No UNK"), BLEU by source length (figure 2), the alignment error rate of the
attention against the corpus's gold links with the sure and possible sets kept apart, and
attention heatmaps (figure 3). ``bahdanau-evaluate`` and the notebooks call it and write its
results; they hold no scoring logic.

No-UNK decoding (``no_unk``). The paper decodes the No-UNK sentences with [UNK] forbidden.

- ``"decode"`` does that for every sentence of the subset: exact, at the cost of a second decode.
- ``"reuse"`` keeps the ordinary translation of a sentence when it has no [UNK] and decodes only
  the others again. Exact for greedy search (beam 1): greedy search takes the best token at
  every step, so an output without [UNK] never had [UNK] as its best token, and forbidding it
  changes no step. Not exact for beam search: a hypothesis extended by [UNK] may hold one of the
  beam's slots at some step and be pruned later (the output does not show it); with [UNK]
  forbidden that slot holds another hypothesis, and the search can end elsewhere.
- ``"auto"`` (the default) is ``"reuse"`` for greedy search, or when no ordinary translation of
  the corpus has an [UNK] (then nothing is decoded again); ``"decode"`` otherwise. The second
  case is not exact in theory either (an [UNK] hypothesis can lose every beam it entered), but a
  model that writes [UNK] in none of its translations gives it little probability: what subword
  (WordPiece) vocabularies give, whose training targets almost never hold [UNK].

On the test split (beam 5, ``small`` models), forbidding [UNK] changed no translation of a
subword model, whose translations had no [UNK] (``"auto"`` skips that decode), and changed
translations of a word-shortlist model, also among those without an [UNK] (``"reuse"`` would be
wrong there; ``"auto"`` decodes them all again).

The report's ``settings["no_unk"]`` says which of ``"reuse"``, ``"decode"`` or ``"off"`` ran.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bahdanau_tf.alignment.dev_choice import ChosenRule
from bahdanau_tf.alignment.error_rate import gold_links
from bahdanau_tf.alignment.extraction import decoded_links
from bahdanau_tf.evaluation.metrics import (
    DEFAULT_LENGTH_BUCKETS,
    check_parallel,
    default_split,
    sentence_pair_test,
    no_unk_subset,
    unknown_word_test,
)
from bahdanau_tf.evaluation.plots import plot_attention
from bahdanau_tf.evaluation.report import EvaluationReport, EvaluationStatistics
from bahdanau_tf.special_tokens import UNK_TOKEN
from bahdanau_tf.text import split_words

NO_UNK_MODES = ("auto", "reuse", "decode", "off")
CHUNK_SIZE = 10000  # pairs decoded and scored at a time from a stream


@dataclasses.dataclass
class TranslatorEvaluation:
    """What :func:`evaluate_translator` returns.

    Attributes:
        report: the :class:`EvaluationReport` (to write as JSON).
        translations: list of str, the translation of every source, in corpus order; None
            when they were handed to ``on_chunk`` instead.
        no_unk_translations: list of str, the translations scored for No-UNK BLEU (those of the
            No-UNK sentences, with [UNK] forbidden; ``""`` for the other sentences), or None
            (``no_unk="off"``, or handed to ``on_chunk``).
        alignments: list of `bahdanau_tf.translator.Alignment` of the translations, or None
            for a model without attention (or handed to ``on_chunk``).
        attention_figures: dict sentence index -> matplotlib figure of its attention
            (figure 3), not saved yet: at most ``attention_plots`` of them, whatever the
            corpus's size.
    """

    report: EvaluationReport
    translations: list[str] | None
    no_unk_translations: list[str] | None = None
    alignments: list | None = None
    attention_figures: dict[int, Any] = dataclasses.field(default_factory=dict)


def evaluate_translator(
    translator,
    corpus,
    name: str = "",
    no_unk: str = "auto",
    batch_size: int = 64,
    attention_plots: int = 0,
    attention_plot_max_words: int = 30,
    buckets: Sequence[int] = DEFAULT_LENGTH_BUCKETS,
    settings: Mapping[str, Any] | None = None,
    chunk_size: int | None = None,
    on_chunk: Callable | None = None,
    alignment_rule: ChosenRule | None = None,
    reverse_translator=None,
) -> TranslatorEvaluation:
    """Translates a test corpus and scores it as the paper does, a chunk at a time.

    The corpus is read ``chunk_size`` pairs at a time; each chunk is decoded and scored into
    sufficient statistics (`bahdanau_tf.evaluation.report.EvaluationStatistics`: sacrebleu's
    corpus statistics, per length bucket and for the No-UNK subset, alignment counts), so the
    scores are those of the whole corpus at once, whatever the chunk size. With ``on_chunk``
    nothing grows with the corpus: its translations go to ``on_chunk`` and are not kept, the
    report's No-UNK ``indices`` are left empty, and only the first ``attention_plots``
    heatmaps are kept (a bounded sample). ``no_unk="auto"`` with beam search reads
    the chunks before the first translation with [UNK] a second time (to decode their No-UNK
    subset), so the corpus must be re-readable (a `ParallelCorpus` or a `CorpusFiles`).

    Args:
        translator: a `bahdanau_tf.translator.Translator` (its beam size and length penalty
            are the ones used, and recorded in the report's settings).
        corpus: a `bahdanau_tf.corpora.ParallelCorpus` (``sources``, ``targets`` and, for AER,
            ``alignments``, all gold links P, and ``sure_alignments``, the sure ones S; without
            ``sure_alignments`` every link counts as sure), or a
            `bahdanau_tf.corpora.CorpusFiles` stream of the user's files.
        name: str, the model's name in the report.
        no_unk: ``"auto"``, ``"reuse"``, ``"decode"`` or ``"off"``, how the No-UNK
            translations are made (see the module docstring).
        batch_size: int, sentences per graph call.
        attention_plots: int, how many attention heatmaps to draw (models with attention): the
            first sentences of 1 to ``attention_plot_max_words`` source words.
        attention_plot_max_words: int, the longest source sentence to draw.
        buckets: upper bounds of the BLEU-by-length buckets.
        settings: dict of JSON-able settings to record next to the translator's own.
        chunk_size: int, pairs decoded and scored at a time; None: a `ParallelCorpus` in one
            chunk, a stream :data:`CHUNK_SIZE` at a time.
        on_chunk: ``on_chunk(first_index, chunk, translations, no_unk_translations,
            alignments)``, called after each chunk with its lists (``no_unk_translations`` and
            ``alignments`` may be None); None keeps them all in the result instead.
        alignment_rule: the `bahdanau_tf.alignment.ChosenRule` that turns attention into the
            links AER scores (`bahdanau_tf.alignment.read_chosen_rule`: the rule chosen on
            dev and saved with the model); None: the default rule.
        reverse_translator: a `Translator` of the other direction, for an ``alignment_rule``
            of both directions (its ``symmetrization``).

    Returns:
        A :class:`TranslatorEvaluation`.

    Raises:
        ValueError: an unknown ``no_unk`` mode, or an empty or malformed corpus.

    Example:

        translator = Translator.from_directory("runs/rnnsearch")
        test = load_corpus("bible-en-es", split="test")
        result = evaluate_translator(translator, test, name="rnnsearch")
        print(result.report.bleu, result.report.alignment.aer)
    """
    if no_unk not in NO_UNK_MODES:
        raise ValueError(f"`no_unk` must be one of {NO_UNK_MODES}, got {no_unk!r}.")
    if chunk_size is None:
        chunk_size = max(len(corpus), 1) if hasattr(corpus, "__len__") else CHUNK_SIZE
    kept = None
    if on_chunk is None:
        kept = {"translations": [], "no_unk": [] if no_unk != "off" else None,
                "alignments": [] if translator.has_attention else None}

        def on_chunk(first, chunk, translations, no_unk_translations, alignments):
            for key, values in (("translations", translations), ("no_unk", no_unk_translations),
                                ("alignments", alignments)):
                if kept[key] is not None:
                    kept[key].extend(values)

    run = _Evaluation(translator, corpus, no_unk, batch_size, chunk_size,
                      EvaluationStatistics(buckets, no_unk_indices=kept is not None),
                      alignment_rule or ChosenRule(), reverse_translator)
    figures = run.run(on_chunk, name, attention_plots, attention_plot_max_words)
    all_settings = {
        "beam_size": translator.beam_size,
        "length_penalty": translator.length_penalty,
        "max_source_length": translator.limits.max_source_length,
        "no_unk": run.resolved_mode(),
        **({"alignment_rule": run.alignment_rule.to_dict()} if translator.has_attention else {}),
        **(settings or {}),
    }
    report = dataclasses.replace(run.statistics.report(model=name, settings=all_settings),
                                 timings=run.timings)
    kept = kept or {"translations": None, "no_unk": None, "alignments": None}
    return TranslatorEvaluation(report=report, translations=kept["translations"],
                                no_unk_translations=kept["no_unk"],
                                alignments=kept["alignments"], attention_figures=figures)


def _chunks(corpus, size):
    """The corpus's chunks (`ParallelCorpus.chunks`), or the whole of an object without them."""
    return corpus.chunks(size) if hasattr(corpus, "chunks") else iter([corpus])


class _Evaluation:
    """The state of one streamed :func:`evaluate_translator`: statistics, timings, No-UNK mode.

    ``mode`` is ``"auto"`` only while beam search has met no translation with [UNK] (their
    No-UNK translations are reused meanwhile); at the first one it becomes ``"decode"`` and the
    chunks before are read again to decode their No-UNK subsets (the module docstring's rule,
    streamed).
    """

    def __init__(self, translator, corpus, mode, batch_size, chunk_size, statistics,
                 alignment_rule, reverse_translator=None):
        self.translator, self.corpus = translator, corpus
        # the links of the AER: a rule (chosen on dev), of one direction or of both
        self.alignment_rule, self.reverse_translator = alignment_rule, reverse_translator
        self.batch_size, self.chunk_size = batch_size, chunk_size
        self.statistics = statistics
        self.mode = "reuse" if mode == "auto" and translator.beam_size == 1 else mode
        self.timings: dict[str, Any] = {"decode_seconds": 0.0}
        if self.mode != "off":
            self.timings.update(no_unk_decode_seconds=0.0, no_unk_sentences_decoded=0)

    def resolved_mode(self):
        return "reuse" if self.mode == "auto" else self.mode

    def run(self, on_chunk, name, plots, plot_max_words):
        """Decodes and scores every chunk; returns the attention figures."""
        first, figures = 0, {}
        for chunk in _chunks(self.corpus, self.chunk_size):
            lists = check_parallel(sources=chunk.sources, references=chunk.targets)
            sources, references = lists["sources"], lists["references"]
            start = time.time()
            output = self.translator.translate(
                sources, return_alignments=self.translator.has_attention,
                batch_size=self.batch_size)
            self.timings["decode_seconds"] += time.time() - start
            no_unk_translations = None
            if self.mode != "off":
                no_unk_translations = self._no_unk(sources, references, output.translations,
                                                   first)
            if self.translator.has_attention and getattr(chunk, "alignments", None) is not None:
                self._alignment(chunk, sources, references, output.alignments)
            self.statistics.add(output.translations, references, sources)
            if output.alignments is not None and len(figures) < plots:
                figures.update(_attention_figures(name, sources, output.alignments,
                                                  plots - len(figures), plot_max_words, first))
            on_chunk(first, chunk, output.translations, no_unk_translations, output.alignments)
            first += len(sources)
        if not first:
            raise ValueError("Nothing to evaluate: the corpus is empty.")
        return figures

    def _no_unk(self, sources, references, translations, first):
        start = time.time()
        if self.mode == "auto" and any(UNK_TOKEN in text for text in translations):
            self.mode = "decode"
            self._decode_no_unk_again(first)
        texts = self._add_no_unk(sources, references, translations, first)
        self.timings["no_unk_decode_seconds"] += time.time() - start
        return texts

    def _add_no_unk(self, sources, references, translations, first):
        is_unknown = (
            unknown_word_test(self.translator.source_tokenizer, sources),
            unknown_word_test(self.translator.target_tokenizer, references),
        )
        texts, decoded = _no_unk_translations(
            self.translator, sources, references, translations, is_unknown,
            self.resolved_mode(), self.batch_size)
        self.timings["no_unk_sentences_decoded"] += decoded
        self.statistics.add_no_unk(texts, references, sources, is_unknown, first_index=first)
        return texts

    def _decode_no_unk_again(self, stop):
        """The No-UNK subsets of the first ``stop`` sentences, decoded with [UNK] forbidden."""
        self.statistics.reset_no_unk()
        first = 0
        for chunk in _chunks(self.corpus, self.chunk_size):
            if first >= stop:
                break
            self._add_no_unk(list(chunk.sources), list(chunk.targets), None, first)
            first += len(chunk.sources)

    def _alignment(self, chunk, sources, references, alignments):
        start = time.time()
        indices, sure, possible = gold_links(
            chunk.alignments, getattr(chunk, "sure_alignments", None))
        if indices:
            gold_references = [references[i] for i in indices]
            gold_sources = [sources[i] for i in indices]
            forced = self.translator.reference_attention(gold_sources, gold_references,
                                                         batch_size=self.batch_size)
            reverse = self.reverse_translator and self.reverse_translator.reference_attention(
                gold_references, gold_sources, batch_size=self.batch_size)
            self.statistics.add_alignment(self.alignment_rule.links(forced, reverse), sure, possible)
            self.statistics.add_alignment(
                *decoded_links([alignments[i] for i in indices], gold_references, sure,
                               possible, rule=self.alignment_rule.rule), decoded=True)
        self.timings["alignment_seconds"] = (self.timings.get("alignment_seconds", 0.0)
                                             + time.time() - start)


def _no_unk_translations(translator, sources, references, translations, is_unknown, mode,
                         batch_size):
    """(translations of the No-UNK subset with [UNK] forbidden, "" elsewhere; sentences decoded)."""
    keep = no_unk_subset(sources, references, sentence_pair_test(is_unknown, default_split))
    result = [""] * len(sources)
    if mode == "reuse":
        # detokenize writes id 3 as "[UNK]", so a translation with [UNK] is always caught; a
        # text that only spells "[UNK]" with other tokens is decoded again, which is still exact
        for i in keep:
            result[i] = translations[i]
        keep = [i for i in keep if UNK_TOKEN in translations[i]]
    if keep:
        again = translator.translate(
            [sources[i] for i in keep], forbid_unknown=True, batch_size=batch_size
        )
        for i, text in zip(keep, again.translations):
            result[i] = text
    return result, len(keep)


def _attention_figures(name, sources, alignments, count, max_words, first=0):
    """Heatmaps of the first ``count`` sentences of 1 to ``max_words`` words, by index in the
    corpus (``first``: the index of ``sources[0]``)."""
    figures = {}
    for i, (source, alignment) in enumerate(zip(sources, alignments), start=first):
        if len(figures) >= count:
            break
        if 0 < len(split_words(source)) <= max_words and alignment.target_tokens:
            figures[i] = plot_attention(
                alignment.attention, alignment.source_tokens, alignment.target_tokens, None,
                title=f"{name}, sentence {i}" if name else f"sentence {i}",
            )
    return figures
