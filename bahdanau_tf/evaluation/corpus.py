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

Measured at beam 5 on the 2,051 test verses, with two ``small`` models trained for 3 minutes:
with a subword vocabulary no translation had an [UNK], and decoding all 2,051 again with [UNK]
forbidden changed none of them (``"auto"`` skips that decode, 59 s there); with word shortlists,
164 of the 325 No-UNK translations had an [UNK], and of the 161 others 27 changed when decoded
again (``"reuse"`` would be wrong there; ``"auto"`` decodes all 325).

The report's ``settings["no_unk"]`` says which of ``"reuse"``, ``"decode"`` or ``"off"`` ran.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

from bahdanau_tf.evaluation.alignment import (
    alignment_scores,
    attention_links,
    decoded_links,
    gold_links,
)
from bahdanau_tf.evaluation.metrics import (
    DEFAULT_LENGTH_BUCKETS,
    check_parallel,
    default_split,
    sentence_pair_test,
    no_unk_subset,
    unknown_word_test,
)
from bahdanau_tf.evaluation.plots import plot_attention
from bahdanau_tf.evaluation.report import EvaluationReport, evaluation_report
from bahdanau_tf.special_tokens import UNK_TOKEN
from bahdanau_tf.text import split_words

NO_UNK_MODES = ("auto", "reuse", "decode", "off")


@dataclasses.dataclass
class TranslatorEvaluation:
    """What :func:`evaluate_translator` returns.

    Attributes:
        report: the :class:`EvaluationReport` (to write as JSON).
        translations: list of str, the translation of every source, in corpus order.
        no_unk_translations: list of str, the translations scored for No-UNK BLEU (those of the
            No-UNK sentences, with [UNK] forbidden; ``""`` for the other sentences), or None.
        alignments: list of `bahdanau_tf.translator.Alignment` of the translations, or None
            for a model without attention.
        attention_figures: dict sentence index -> matplotlib figure of its attention
            (figure 3), not saved yet.
    """

    report: EvaluationReport
    translations: list[str]
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
) -> TranslatorEvaluation:
    """Translates a test corpus and scores it as the paper does.

    Args:
        translator: a `bahdanau_tf.translator.Translator` (its beam size and length penalty
            are the ones used, and recorded in the report's settings).
        corpus: a `bahdanau_tf.data.ParallelCorpus` (``sources``, ``targets`` and, for AER,
            ``alignments``, all gold links P, and ``sure_alignments``, the sure ones S; without
            ``sure_alignments`` every link counts as sure).
        name: str, the model's name in the report.
        no_unk: ``"auto"``, ``"reuse"``, ``"decode"`` or ``"off"``, how the No-UNK
            translations are made (see the module docstring).
        batch_size: int, sentences per graph call.
        attention_plots: int, how many attention heatmaps to draw (models with attention): the
            first sentences of 1 to ``attention_plot_max_words`` source words.
        attention_plot_max_words: int, the longest source sentence to draw.
        buckets: upper bounds of the BLEU-by-length buckets.
        settings: dict of JSON-able settings to record next to the translator's own.

    Returns:
        A :class:`TranslatorEvaluation`.

    Raises:
        ValueError: an unknown ``no_unk`` mode, or an empty or malformed corpus.

    Example:

        translator = Translator.from_directory("runs/rnnsearch", beam_size=5)
        test = load_corpus("bible-en-es", split="test")
        result = evaluate_translator(translator, test, name="rnnsearch")
        print(result.report.bleu, result.report.alignment.aer)
    """
    if no_unk not in NO_UNK_MODES:
        raise ValueError(f"`no_unk` must be one of {NO_UNK_MODES}, got {no_unk!r}.")
    lists = check_parallel(sources=corpus.sources, references=corpus.targets)
    sources, references = lists["sources"], lists["references"]
    timings: dict[str, Any] = {}

    start = time.time()
    output = translator.translate(
        sources, return_alignments=translator.has_attention, batch_size=batch_size
    )
    timings["decode_seconds"] = time.time() - start

    no_unk_translations = is_unknown = None
    if no_unk != "off":
        start = time.time()
        is_unknown = (
            unknown_word_test(translator.source_tokenizer, sources),
            unknown_word_test(translator.target_tokenizer, references),
        )
        no_unk = _no_unk_mode(no_unk, translator.beam_size, output.translations)
        no_unk_translations, decoded = _no_unk_translations(
            translator, sources, references, output.translations, is_unknown, no_unk, batch_size
        )
        timings["no_unk_decode_seconds"] = time.time() - start
        timings["no_unk_sentences_decoded"] = decoded

    links: dict[str, Any] = {}
    alignment = decoded_alignment = None
    if translator.has_attention and getattr(corpus, "alignments", None) is not None:
        start = time.time()
        indices, sure, possible = gold_links(
            corpus.alignments, getattr(corpus, "sure_alignments", None)
        )
        if indices:
            gold_sources = [sources[i] for i in indices]
            gold_references = [references[i] for i in indices]
            forced = translator.reference_attention(
                gold_sources, gold_references, batch_size=batch_size
            )
            links = {
                "predicted_alignments": attention_links(forced),
                "sure_alignments": sure,
                "possible_alignments": possible,
            }
            on_words = decoded_links(
                [output.alignments[i] for i in indices], gold_references, sure, possible
            )
            if any(on_words[0]) or any(on_words[1]):
                decoded_alignment = alignment_scores(*on_words)
        timings["alignment_seconds"] = time.time() - start

    all_settings = {
        "beam_size": translator.beam_size,
        "length_penalty": translator.length_penalty,
        "max_source_length": translator.max_source_length,
        "no_unk": no_unk,
        **(settings or {}),
    }
    report = evaluation_report(
        output.translations, references, sources, model=name,
        no_unk_hypotheses=no_unk_translations, is_unknown_word=is_unknown, buckets=buckets,
        settings=all_settings, **links,
    )
    report = dataclasses.replace(report, decoded_alignment=decoded_alignment, timings=timings)
    figures = {}
    if output.alignments is not None:
        figures = _attention_figures(
            name, sources, output.alignments, attention_plots, attention_plot_max_words
        )
    return TranslatorEvaluation(
        report=report,
        translations=output.translations,
        no_unk_translations=no_unk_translations,
        alignments=output.alignments,
        attention_figures=figures,
    )


def _no_unk_mode(mode, beam_size, translations):
    """``"auto"`` resolved as the module docstring says; other modes unchanged."""
    if mode != "auto":
        return mode
    if beam_size == 1 or not any(UNK_TOKEN in text for text in translations):
        return "reuse"
    return "decode"


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


def _attention_figures(name, sources, alignments, count, max_words):
    """Heatmaps of the first ``count`` sentences of 1 to ``max_words`` words, by index."""
    figures = {}
    for i, (source, alignment) in enumerate(zip(sources, alignments)):
        if len(figures) >= count:
            break
        if 0 < len(split_words(source)) <= max_words and alignment.target_tokens:
            figures[i] = plot_attention(
                alignment.attention, alignment.source_tokens, alignment.target_tokens, None,
                title=f"{name}, sentence {i}" if name else f"sentence {i}",
            )
    return figures
