"""Word alignment, the paper's figure 3 measured: one wing, from the head layer to the rule
chosen on dev.

Its modules, from the bottom up (each imports only the ones above it in this list, and none
imports the translator or the command lines: a `Translator` is handed in):

- :mod:`~bahdanau_tf.models.alignment_head`: `AlignmentHead`, an attention whose query has read the
  target word it aligns (a layer, the sibling of `bahdanau_tf.models.layers`), and
  :mod:`~bahdanau_tf.models.aligner`: `RNNSearchAligner`, the task that puts it on a trained
  `RNNSearch` (both part of the network);
- :mod:`~bahdanau_tf.alignment.pharaoh`: Pharaoh ``i-j`` files and the eflomal aligner;
- :mod:`~bahdanau_tf.alignment.extraction`: attention -> word links, one direction, by an
  `ExtractionRule`;
- :mod:`~bahdanau_tf.alignment.symmetrization`: both directions made one (link sets
  symmetrized, or two models' word attention averaged);
- :mod:`~bahdanau_tf.alignment.error_rate`: gold links (sure and possible apart) and the
  alignment error rate (Och & Ney 2003);
- :mod:`~bahdanau_tf.alignment.views`: the same links and gold scored without punctuation, or
  on content words only;
- :mod:`~bahdanau_tf.alignment.dev_choice`: the extraction rule (and symmetrization) chosen on
  a dev split's gold, saved with a model directory (``model.json``'s ``"alignment"``) and read
  back by ``bahdanau-evaluate`` and ``bahdanau-translate --alignments``;
- :mod:`~bahdanau_tf.alignment.guided`: word links as training targets of the attention
  (guided alignment, `AlignmentGuide`);
- :mod:`~bahdanau_tf.alignment.head_training`: a head added to a trained model and trained
  alone, its translation weights frozen (``bahdanau-alignment-head``).

Every public name is importable from ``bahdanau_tf.alignment``.

Example:

    from bahdanau_tf import alignment
    from bahdanau_tf.corpora import load_corpus
    from bahdanau_tf.translator import Translator

    translator = Translator.from_directory("runs/rnnsearch")
    choice = alignment.choose_on_dev(translator, load_corpus("bible-en-es", split="dev"))
    print(choice.rule, choice.dev_aer)
"""

from bahdanau_tf.alignment.pharaoh import (
    EFLOMAL_MISSING,
    eflomal_align,
    format_pharaoh,
    parse_pharaoh,
    read_pharaoh,
)
from bahdanau_tf.alignment.extraction import (
    DEFAULT_RULE,
    POOLINGS,
    ExtractionRule,
    Link,
    attention_links,
    attention_to_alignment,
    best_links,
    decoded_links,
    diagonal_links,
    token_word_ids,
    translation_links,
    word_attention,
)
from bahdanau_tf.alignment.symmetrization import (
    LINK_SYMMETRIZATIONS,
    SYMMETRIZATIONS,
    average_word_attention,
    bidirectional_links,
    symmetrize,
)
from bahdanau_tf.alignment.error_rate import (
    AlignmentCounts,
    AlignmentScores,
    alignment_counts,
    alignment_error_rate,
    alignment_scores,
    gold_links,
    scores_from_counts,
)
from bahdanau_tf.alignment.views import CLOSED_CLASS, VIEWS, corpus_view, is_punctuation, view_links
from bahdanau_tf.alignment.dev_choice import (
    ChosenRule,
    RuleGrid,
    both_direction_links,
    choose_on_dev,
    choose_rule,
    choose_symmetrization,
    dev_aers,
    dev_gold,
    links_of_rules,
    read_chosen_rule,
    save_chosen_rule,
)
from bahdanau_tf.alignment.guided import AlignmentGuide, GuidedAlignmentModel, check_word_links
from bahdanau_tf.models.alignment_head import AlignmentHead  # the layer, part of the network
from bahdanau_tf.models.aligner import RNNSearchAligner  # the task, part of the network
from bahdanau_tf.alignment.head_training import train_alignment_head, with_alignment_head

__all__ = [
    "CLOSED_CLASS",
    "DEFAULT_RULE",
    "EFLOMAL_MISSING",
    "LINK_SYMMETRIZATIONS",
    "POOLINGS",
    "SYMMETRIZATIONS",
    "VIEWS",
    "AlignmentCounts",
    "AlignmentGuide",
    "AlignmentHead",
    "AlignmentScores",
    "ChosenRule",
    "ExtractionRule",
    "GuidedAlignmentModel",
    "Link",
    "RNNSearchAligner",
    "RuleGrid",
    "alignment_counts",
    "alignment_error_rate",
    "alignment_scores",
    "attention_links",
    "attention_to_alignment",
    "average_word_attention",
    "best_links",
    "bidirectional_links",
    "both_direction_links",
    "check_word_links",
    "choose_on_dev",
    "choose_rule",
    "choose_symmetrization",
    "corpus_view",
    "decoded_links",
    "dev_aers",
    "dev_gold",
    "diagonal_links",
    "eflomal_align",
    "format_pharaoh",
    "gold_links",
    "is_punctuation",
    "links_of_rules",
    "parse_pharaoh",
    "read_chosen_rule",
    "read_pharaoh",
    "save_chosen_rule",
    "scores_from_counts",
    "symmetrize",
    "token_word_ids",
    "train_alignment_head",
    "translation_links",
    "view_links",
    "with_alignment_head",
    "word_attention",
]
