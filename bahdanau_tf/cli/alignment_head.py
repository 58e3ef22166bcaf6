r"""bahdanau-alignment-head: trains an alignment head on a trained model, its weights frozen.

Reads ``--model_dir`` (an RNNsearch), adds a `bahdanau_tf.alignment.AlignmentHead` (an attention
whose query has read the target word it aligns), trains the head alone on teacher-forced
training pairs towards word links, and writes the model with its head to ``--output_dir`` (a
new model directory holding the task `bahdanau_tf.models.RNNSearchAligner`: the model and the
head, config and weights; ``--model_dir`` is only read).
Translations are the model's without the head, by construction; ``bahdanau-translate
--alignments``, ``bahdanau-evaluate``'s AER and the exported ``align`` signature then read the
head (docs/evaluation.md, "The alignment head").

The links (Pharaoh ``i-j``, one line per training pair) are:

- ``--reverse_model_dir=DIR``: the model's own, from both directions: the teacher-forced
  attention of ``--model_dir`` and of DIR (a model of the other direction) on the training
  pairs, made one by ``--symmetrization`` and ``--extraction_rule``
  (`bahdanau_tf.alignment.bidirectional_links`): no external aligner;
- ``--links=FILE``: any aligner's, e.g. eflomal's from ``bahdanau-data align``;
- neither: eflomal's, computed here (the optional extra ``align``: ``pip install eflomal``).

Examples:

    bahdanau-alignment-head --model_dir=run_en_es --reverse_model_dir=run_es_en \
        --output_dir=run_en_es_head
    bahdanau-data align --alignment_file=train.links
    bahdanau-alignment-head --model_dir=run_en_es --links=train.links --output_dir=head_eflomal

Exit codes: 0 written; 2 a usage error or bad input (one line on stderr; nothing written);
5 an I/O failure.
"""

import os
import sys
import time

from absl import flags

from bahdanau_tf.cli import common  # noqa: E402  (first: TensorFlow loads quietly)

FLAGS = flags.FLAGS

common.define_model_dir_flags("The trained model (a bahdanau-train output directory).")
flags.DEFINE_string("output_dir", None, "Where to write the model with its head (a new directory).")
common.define_corpus_flags()
flags.DEFINE_string("links", None, "Word links of the training pairs (Pharaoh i-j, one line per pair).")
flags.DEFINE_string("reverse_model_dir", None, "A model of the other direction (read as --model_dir "
                    "is): the links are both models' attention made one (--symmetrization, --extraction_rule).")
flags.DEFINE_enum("symmetrization", "average", ["intersection", "grow-diag-final-and", "average"],
                  "With --reverse_model_dir: how the two directions are made one.")
flags.DEFINE_string("extraction_rule", "sum>0.25", "With --reverse_model_dir: the rule that "
                    "turns attention into links (bahdanau_tf.alignment.ExtractionRule).")
flags.DEFINE_string("write_links", None, "Also write the links the head is trained on here.")
flags.DEFINE_integer("max_train_pairs", None, "Use only the first N training pairs.", lower_bound=1)
flags.DEFINE_integer("units", 128, "The head's attention units.", lower_bound=1)
flags.DEFINE_integer("context_units", 0, "Units of each direction of the head's GRU over the "
                     "target sentence (0: none; bahdanau_tf.alignment.AlignmentHead).", lower_bound=0)
flags.DEFINE_integer("steps", 2000, "Updates of the head (the default chosen on the dev gold: "
                     "benchmarks/README.md, \"Alignment\").", lower_bound=1)
flags.DEFINE_integer("batch_size", 64, "Pairs per update.", lower_bound=1)
common.define_finite_float("learning_rate", 5e-3, "Adam's learning rate (positive).")
flags.DEFINE_enum("unaligned", "end", ["free", "end"], "A target word without links: trained "
                  "towards the source [END] (end: left unaligned), or costs nothing (free).")
flags.DEFINE_integer("seed", 1234, "Shuffling seed.")

PROGRAM = "bahdanau-alignment-head"
#: sentence pairs read by both models at a time (their attention is kept for one chunk only)
_CHUNK = 2000


def _log(line):
    print(f"{PROGRAM}: {line}", file=sys.stderr, flush=True)


def _own_links(translator, pairs):
    """Links of both directions made one, chunk by chunk."""
    from bahdanau_tf import alignment
    from bahdanau_tf.translator import Translator

    reverse = Translator.from_directory(common.reverse_model_dir("reverse_model_dir", FLAGS.model_dir[0]),
                                        which=FLAGS.checkpoint)
    links = []
    for start in range(0, len(pairs), _CHUNK):
        sources, targets = zip(*pairs[start:start + _CHUNK])
        links += alignment.bidirectional_links(
            translator.reference_attention(sources, targets),
            reverse.reference_attention(targets, sources), FLAGS.symmetrization,
            FLAGS.extraction_rule)
    return links


def _links(translator, pairs):
    """The word links of the training pairs, from the flag that names them."""
    from bahdanau_tf import alignment

    if FLAGS.links:
        try:
            return alignment.read_pharaoh(FLAGS.links)
        except ValueError as error:
            raise common.UserError(f"--links={FLAGS.links!r}: {error}") from None
    if FLAGS.reverse_model_dir:
        return _own_links(translator, pairs)
    try:
        forward, reverse = alignment.eflomal_align([p[0] for p in pairs], [p[1] for p in pairs])
    except ImportError:
        raise common.UserError(alignment.EFLOMAL_MISSING + " Or give --links or "
                               "--reverse_model_dir.") from None
    return [alignment.symmetrize(f, r, "intersection") for f, r in zip(forward, reverse)]


def _check_flags():
    common.require_model_dirs()
    if len(FLAGS.model_dir) != 1:
        raise common.UserError(f"--model_dir is given {len(FLAGS.model_dir)} times: one model.")
    common.require_tensorflow("the head trains in a TensorFlow step (tf.GradientTape), as "
                              "bahdanau-train does")
    if not FLAGS.learning_rate > 0:
        raise common.UserError(f"--learning_rate must be positive, got {FLAGS.learning_rate}.")
    if not FLAGS.output_dir:
        raise common.UserError("--output_dir is required (a new directory for the model with its head).")
    if os.path.exists(FLAGS.output_dir) and os.listdir(FLAGS.output_dir):
        raise common.UserError(f"--output_dir={FLAGS.output_dir!r} is not empty.")
    common.check_writable_dir(FLAGS.output_dir, "output_dir")
    if FLAGS.links and FLAGS.reverse_model_dir:
        raise common.UserError("--links and --reverse_model_dir both name the links: give one.")
    if FLAGS.links and not os.path.exists(FLAGS.links):
        raise common.UserError(f"--links={FLAGS.links!r} does not exist.")
    direction = _saved_settings().get("direction")
    if FLAGS.direction and direction and FLAGS.direction != direction:
        raise common.UserError(f"--direction={FLAGS.direction} but --model_dir={FLAGS.model_dir[0]!r} "
                               f"translates {direction}: its head aligns {direction} pairs.")
    if FLAGS.reverse_model_dir:
        common.reverse_model_dir("reverse_model_dir", FLAGS.model_dir[0], direction)
    if FLAGS.write_links:
        common.check_writable_file(FLAGS.write_links, "write_links")
    from bahdanau_tf import alignment

    try:
        alignment.ExtractionRule.parse(FLAGS.extraction_rule)
    except ValueError as error:
        raise common.UserError(f"--extraction_rule={FLAGS.extraction_rule!r}: {error}") from None


def _saved_settings():
    """The run settings of --model_dir's model.json (corpus, direction, ...)."""
    from bahdanau_tf import model_directory

    try:
        return model_directory.read_model_config(FLAGS.model_dir[0]).get("settings", {})
    except (OSError, ValueError) as error:
        raise common.UserError(f"--model_dir={FLAGS.model_dir[0]!r}: {error}") from None


def _choose_rule(head_model, directory, direction):
    """The head's extraction rule chosen on the dev split's gold, saved in ``directory``."""
    from bahdanau_tf import alignment
    from bahdanau_tf.translator import Translator

    dev = common.dev_split(direction)
    choice = alignment.choose_on_dev(Translator.from_model(head_model), dev) if dev else alignment.ChosenRule()
    if choice.chosen:
        alignment.save_chosen_rule(directory, choice)
    _log(f"alignments: {choice.describe()}.")


def main(argv):
    del argv
    _check_flags()
    from bahdanau_tf import alignment, data, model_directory
    from bahdanau_tf.translator import Translator

    translator = Translator.from_directory(FLAGS.model_dir[0], which=FLAGS.checkpoint)
    model = translator.models[0]
    if not hasattr(model, "alignment_weights"):
        raise common.UserError(f"--model_dir={FLAGS.model_dir[0]!r} holds a {type(model).__name__}: "
                               "an alignment head needs an RNNsearch.")
    saved = _saved_settings()
    pairs = list(common.corpus_from_flags("train", saved.get("direction")).pairs())[: FLAGS.max_train_pairs]
    started = time.time()
    links = _links(translator, pairs)
    alignment.check_word_links(pairs, links)  # a ValueError: one line, exit code 2
    _log(f"{sum(map(len, links[:len(pairs)])):,} links of {len(pairs):,} pairs in "
         f"{time.time() - started:.0f} s.")
    if FLAGS.write_links:
        with open(FLAGS.write_links, "w", encoding="utf-8") as handle:
            handle.writelines(alignment.format_pharaoh(s) + "\n" for s in links[:len(pairs)])
    tokenizers = (model.source_tokenizer, model.target_tokenizer)
    guide = alignment.AlignmentGuide.build(pairs, links, *tokenizers, unaligned=FLAGS.unaligned)
    batches = data.make_dataset(pairs, *tokenizers, batch_size=FLAGS.batch_size, seed=FLAGS.seed,
                                repeat=False).apply(guide.stage())
    head_model = alignment.with_alignment_head(model, FLAGS.units, FLAGS.context_units)
    started = time.time()
    alignment.train_alignment_head(head_model, batches, FLAGS.steps, FLAGS.learning_rate, log=_log)
    _log(f"{FLAGS.steps:,} updates in {time.time() - started:.0f} s.")
    source = ("--links=" + os.path.abspath(FLAGS.links) if FLAGS.links else
              f"both directions ({FLAGS.symmetrization}, {FLAGS.extraction_rule}) with "
              + os.path.abspath(FLAGS.reverse_model_dir) if FLAGS.reverse_model_dir else "eflomal")
    settings = {key: saved[key] for key in ("corpus", "direction", "preset", "tokenizer") if key in saved}
    settings["alignment_head"] = {"model_dir": os.path.abspath(FLAGS.model_dir[0]), "links": source,
                                  "pairs": len(pairs), "steps": FLAGS.steps, "units": FLAGS.units,
                                  "context_units": FLAGS.context_units,
                                  "unaligned": FLAGS.unaligned}
    model_directory.save_model_directory(FLAGS.output_dir, head_model, *tokenizers, settings=settings)
    _choose_rule(head_model, FLAGS.output_dir, saved.get("direction"))
    print(FLAGS.output_dir)


run = common.runner(main, __doc__)

if __name__ == "__main__":
    run()
