"""The paper's evaluation (Bahdanau et al. 2015, sections 4.2 and 5; DESIGN §3).

This package owns "evaluate a Translator on a corpus"; ``bahdanau-evaluate`` and the notebooks
call :func:`evaluate_translator` and write what it returns. Its modules, each one job:

- :mod:`~bahdanau_tf.evaluation.metrics`: BLEU and chrF (sacrebleu, 13a, lowercased), No-UNK
  BLEU (table 1), BLEU by source length (figure 2), over strings;
- :mod:`~bahdanau_tf.evaluation.plots`: figures 2 and 3 with matplotlib;
- :mod:`~bahdanau_tf.evaluation.report`: :class:`EvaluationReport`, all of it as one JSON
  document, and :class:`EvaluationStatistics`, the sufficient statistics it is computed from,
  accumulated chunk by chunk (sacrebleu's corpus statistics, alignment counts);
- :mod:`~bahdanau_tf.evaluation.corpus`: :func:`evaluate_translator`, which decodes a corpus
  (or a stream of the user's files) chunk by chunk with a `Translator` and puts the above
  together, in memory bounded by a chunk.

Every public name is importable from ``bahdanau_tf.evaluation``. The alignment error rate it
reports, and the extraction rule it reads it with (the one chosen on dev and saved with the
model), are `bahdanau_tf.alignment`'s.

Example:

    from bahdanau_tf import evaluation
    from bahdanau_tf.corpora import load_corpus
    from bahdanau_tf.translator import Translator

    result = evaluation.evaluate_translator(Translator.from_directory("runs/rnnsearch"),
                                            load_corpus("bible-en-es", split="test"))
    print(result.report.bleu)
"""

from bahdanau_tf.evaluation.corpus import (
    CHUNK_SIZE,
    NO_UNK_MODES,
    TranslatorEvaluation,
    evaluate_translator,
)
from bahdanau_tf.evaluation.metrics import (
    DEFAULT_LENGTH_BUCKETS,
    BleuResult,
    ChrfResult,
    CorpusStatistics,
    LengthBucketScore,
    NoUnkBleuResult,
    Split,
    bleu_by_length,
    corpus_bleu,
    corpus_chrf,
    corpus_statistics,
    length_buckets,
    no_unk_bleu,
    no_unk_subset,
    score_from_statistics,
    unknown_word_test,
)
from bahdanau_tf.evaluation.plots import plot_attention, plot_bleu_by_length
from bahdanau_tf.evaluation.report import (
    EvaluationReport,
    EvaluationStatistics,
    evaluation_report,
)

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_LENGTH_BUCKETS",
    "NO_UNK_MODES",
    "BleuResult",
    "ChrfResult",
    "CorpusStatistics",
    "EvaluationReport",
    "EvaluationStatistics",
    "LengthBucketScore",
    "NoUnkBleuResult",
    "Split",
    "TranslatorEvaluation",
    "bleu_by_length",
    "corpus_bleu",
    "corpus_chrf",
    "corpus_statistics",
    "evaluate_translator",
    "evaluation_report",
    "length_buckets",
    "no_unk_bleu",
    "no_unk_subset",
    "plot_attention",
    "plot_bleu_by_length",
    "score_from_statistics",
    "unknown_word_test",
]
