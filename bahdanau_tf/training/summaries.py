"""TensorBoard summaries of a training run, written with core TensorFlow only.

TensorBoard's own summary ops come with the tensorboard package, which TensorFlow no longer
brings; `Summaries` writes the same records (plugin name + tensor layout). The series are
listed in `bahdanau_tf.training.Trainer`'s docstring.
"""

from __future__ import annotations

import dataclasses
import io
import math
import time

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from bahdanau_tf import decoding
from bahdanau_tf import evaluation
from bahdanau_tf.translator import DEFAULT_SEARCH, Translator
from bahdanau_tf.special_tokens import END_TOKEN

#: the attention images' sentences: the shortest of the dev sample with at least this many words
ATTENTION_MIN_WORDS = 5
#: an output without ``[END]`` is drawn up to this many times the source tokens (then cut)
ATTENTION_MAX_ROWS_RATIO = 1.5

def _metadata(plugin_name, data_class):
    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin_name),
        data_class=data_class,
    )


def scalar_summary(name: str, value) -> None:
    """A TensorBoard scalar (the ``scalars`` plugin's float32 scalar)."""
    tf.summary.write(name, tf.cast(value, "float32"), metadata=_metadata("scalars", 1))


def image_summary(name: str, png: bytes, width: int, height: int) -> None:
    """A TensorBoard image: the ``images`` plugin's [width, height, PNG bytes] string tensor."""
    tf.summary.write(name, tf.constant([str(width), str(height), png], tf.string),
                     metadata=_metadata("images", 3))


def text_summary(name: str, markdown: str) -> None:
    """A TensorBoard text (the ``text`` plugin renders a string tensor as Markdown)."""
    tf.summary.write(name, tf.constant(markdown, tf.string), metadata=_metadata("text", 2))


def attention_rows(source_tokens: list, target_tokens: list) -> int:
    """The output rows an attention image shows: up to ``[END]`` when the translation has one;
    else (an early model repeating itself up to the length limit) at most
    ``ceil(1.5 x source tokens)``, which keeps the image about square and its labels readable."""
    if END_TOKEN in target_tokens:
        return target_tokens.index(END_TOKEN) + 1
    return min(len(target_tokens), math.ceil(ATTENTION_MAX_ROWS_RATIO * len(source_tokens)))


def attention_png(alignment, title: str) -> tuple:
    """An alignment drawn like the paper's figure 3 for TensorBoard: (PNG bytes, width, height).

    Unlike the evaluation's figures, the gray scale is the image's own (`plot_attention`'s
    ``contrast="image"``: its smallest weight black, its largest white), so the structure of an
    early model's near-uniform attention shows; rows are cut by `attention_rows` (a second
    caption line says so).
    """
    rows = attention_rows(alignment.source_tokens, alignment.target_tokens)
    if rows < len(alignment.target_tokens):
        title = f"{title}\n(the first {rows} of {len(alignment.target_tokens)} output tokens: no [END])"
    figure = evaluation.plot_attention(alignment.attention[:rows], alignment.source_tokens,
                                       alignment.target_tokens[:rows], None, title=title,
                                       contrast="image")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi)
    width, height = figure.canvas.get_width_height()
    return buffer.getvalue(), width, height


def markdown_cell(text: str) -> str:
    """``text`` as one cell of a Markdown table (pipes escaped, one line, never empty)."""
    return text.replace("|", "\\|").replace("\n", " ") or " "


class Summaries:
    """The event-file writer of one run, or nothing (``logdir`` None: no summaries).

    Args:
        logdir: str or None, the event files' directory (``OUT/logs``).
    """

    def __init__(self, logdir: str | None):
        self._writer = None if logdir is None else tf.summary.create_file_writer(logdir)

    def __bool__(self) -> bool:
        return self._writer is not None

    def write(self, step: int, scalars: dict, images: dict | None = None,
              texts: dict | None = None) -> None:
        """Scalars, ``{name: (png, width, height)}`` images and ``{name: markdown}`` texts."""
        if self._writer is None:
            return
        with self._writer.as_default(step=step):
            for name, value in scalars.items():
                scalar_summary(name, value)
            for name, (png, width, height) in (images or {}).items():
                image_summary(name, png, width, height)
            for name, markdown in (texts or {}).items():
                text_summary(name, markdown)

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def dev_translation_summaries(summaries: Summaries, translator, sample, step: int, log) -> float:
    """Dev BLEU (greedy) of ``sample``, 4 sample translations and attention images at ``step``.

    Args:
        summaries: the run's `Summaries`.
        translator: a greedy `bahdanau_tf.translator.Translator` of the model being trained.
        sample: a `bahdanau_tf.corpora.ParallelCorpus`, the first dev pairs.
        step: int, the update.
        log: callable taking a str, the progress line.

    Returns:
        float, the dev BLEU.
    """
    start = time.time()
    translations = translator.translate(sample.sources, beam_size=1).translations
    bleu = evaluation.corpus_bleu(translations, sample.targets).score
    log(f"step {step:>7,}  dev BLEU {bleu:.2f} (greedy, {len(sample)} sentences, "
        f"{time.time() - start:.0f} s)")
    rows = ["| source | reference | translation |", "| --- | --- | --- |"] + [
        f"| {markdown_cell(s)} | {markdown_cell(r)} | {markdown_cell(t)} |"
        for s, r, t in list(zip(sample.sources, sample.targets, translations))[:4]]
    images = {}
    if translator.has_attention:
        # the two shortest sentences of at least 5 words: readable images, the same every time
        fixed = sorted((s for s in sample.sources if s.split()),
                       key=lambda s: (len(s.split()) < ATTENTION_MIN_WORDS, len(s.split())))[:2]
        alignments = translator.translate(fixed, beam_size=1, return_alignments=True).alignments
        for index, (sentence, alignment) in enumerate(zip(fixed, alignments)):
            if alignment.target_tokens:
                images[f"dev/attention_{index}"] = attention_png(
                    alignment, f"step {step}: {sentence[:60]}")
    summaries.write(step, {"dev/bleu": bleu}, images=images,
                    texts={"dev/translations": "\n".join(rows)})
    return bleu


class DevTranslations:
    """What the trainer shows of its model's translations at a dev evaluation
    (`dev_translation_summaries`): a greedy translator of the model being trained, built at its
    first use, XLA or not as the training step (a run without XLA compiles nothing for it), over
    the first ``dev_bleu_sentences`` of the dev pairs the dev NLL is taken on.

    Args:
        model, source_tokenizer, target_tokenizer: the trainer's.
        config: the `TrainingConfig`.
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, config) -> None:
        self.parts = (model, source_tokenizer, target_tokenizer)
        self.jit_compile = bool(config.jit_compile)
        self.sentences = min(config.dev_bleu_sentences, config.dev_sentences)
        self.translator = None

    def __call__(self, summaries: Summaries, dev_corpus, step: int, log) -> float:
        """The dev BLEU at ``step``, its summaries written."""
        if self.translator is None:
            self.translator = Translator(*self.parts, search=dataclasses.replace(DEFAULT_SEARCH, beam_size=1),
                                         batching=decoding.Batching(jit_compile=self.jit_compile))
        sample = dev_corpus.select(slice(0, self.sentences))
        return dev_translation_summaries(summaries, self.translator, sample, step, log)
