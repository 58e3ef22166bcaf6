"""bahdanau-evaluate: the paper's evaluation of one or more trained models, side by side.

For every ``--model_dir`` (or one ensemble of them with ``--ensemble``), on the embedded
corpus's test split (default) or on ``--source_file``/``--reference_file``:

- BLEU and chrF of the beam-search translations (sacrebleu, 13a, lowercased; table 1 "All");
- No-UNK BLEU: the sentences with no unknown word in source or reference, with [UNK] forbidden
  (table 1 "No UNK"). ``--no_unk=auto`` (default) reuses the ordinary translations without
  [UNK] where that is exact (greedy search) or where no translation has an [UNK] (typical of
  subword vocabularies: then nothing is decoded twice), and otherwise decodes the subset again
  as ``--no_unk=decode`` does; see `bahdanau_tf.evaluation.corpus` for the exact rule;
- BLEU by source length (figure 2): one ``bleu_by_length.png`` with every model on it;
- attention heatmaps of a few sentences (figure 3): ``attention_<model>_<i>.png``;
- alignment error rate (Och & Ney; sure and possible gold links apart) against the corpus's
  gold Strong's alignments, of the attention the model puts on the *reference* when it reads
  it with teacher forcing (``alignment``), and of the attention of its own *decoded*
  translation (``decoded_alignment``), on the hypothesis words that match exactly one
  reference word (the gold links are carried over; other words have no gold and are not
  scored). Sentences without any gold link are
  left out of both. Omitted for models without attention (RNNencdec, Seq2Seq) and for files
  without gold alignments.

``--replace_unk`` (``--unk_dictionary=FILE``) scores the translations with each generated [UNK]
replaced by attention (`bahdanau_tf.unknown_words`); the heatmaps still show the model's own
tokens. The No-UNK translations are replaced too, and with ``--no_unk=auto`` a beam search then
sees no [UNK] and reuses the ordinary translations (its inexact case above).

The scoring is `bahdanau_tf.evaluation.evaluate_translator`; this command reads the flags and
writes its results to ``--output_dir`` (default: ``MODEL_DIR/evaluation`` for one model
directory, ``./evaluation`` otherwise): ``report.json`` (one `EvaluationReport` per model, with
the decoded-output AER and timings, and the names of its heatmaps), ``translations_<model>.txt``
and the PNGs. They are written under temporary names beside their targets and renamed together
at the end: after a failure (a full disk: exit code 5; a bad line of the input: exit code 2) no
file of this run is there.

The test set streams: ``--read_lines`` pairs (10,000) are read, translated, scored and written
at a time, and the scores are kept as sufficient statistics (sacrebleu's corpus statistics for
BLEU and chrF, the same per length bucket and for the No-UNK subset, alignment counts), never
as lists of every sentence: memory is bounded whatever the test set's length, and the scores
are those of the whole test set at once. Only ``--attention_plots`` heatmaps are kept (the
first sentences that fit). With beam search and ``--no_unk=auto``, a translation with [UNK]
makes the command read the pairs before it a second time, to decode their No-UNK subset.
Progress (sentences done / total, sentences/s, ETA) goes to stderr when it is a terminal, or
with ``--progress``; in a pipe only the results are printed.

Example:

    bahdanau-evaluate --model_dir=runs/rnnsearch --model_dir=runs/rnnencdec \\
        --output_dir=evaluation
"""

import contextlib
import json
import os
import re
import sys

from absl import flags  # noqa: E402

from bahdanau_tf import files  # noqa: E402
from bahdanau_tf.cli import common, progress  # noqa: E402

FLAGS = flags.FLAGS

common.define_model_dir_flags("Training output directory; repeat to compare models.")
common.define_corpus_flags()
common.define_search_flags()
common.define_unk_flags()
common.define_candidate_flags()
flags.DEFINE_alias("reference_file", "target_file")
flags.DEFINE_multi_string("name", None, "A display name per --model_dir (default: its basename).")
flags.DEFINE_bool("ensemble", False, "Evaluate all --model_dir as one ensemble.")
flags.DEFINE_string("output_dir", None, "Where to write report.json and the plots (default: "
                    "MODEL_DIR/evaluation for one model directory, so that evaluating models in "
                    "turn keeps each report; ./evaluation for several, a .keras file or a "
                    "shipped model).")
flags.DEFINE_enum("split", "test", ["train", "dev", "test"], "Split of the embedded corpus.")
flags.DEFINE_integer("max_sentences", None, "Evaluate only the first N sentences.", lower_bound=1)
flags.DEFINE_integer("batch_size", 64, "Sentences per graph call.", lower_bound=1)
flags.DEFINE_bool("jit_compile", None, "Compile the search with XLA over bucketed shapes (default: "
                  "yes, bahdanau_tf.devices.decoding_jit).")
progress.define_progress_flag()
flags.DEFINE_integer("read_lines", 10000, "Sentence pairs read, translated, scored and written at "
                     "a time: memory is bounded by this, whatever the test set's length.",
                     lower_bound=1)
flags.DEFINE_enum("no_unk", "auto", ["auto", "reuse", "decode", "off"],
                  "No-UNK BLEU: 'decode' decodes the no-UNK subset again with [UNK] forbidden; "
                  "'reuse' only its translations with [UNK] (exact for beam 1); 'auto' is "
                  "'reuse' for beam 1 or when no translation has [UNK], else 'decode'; 'off'.")
flags.DEFINE_integer("attention_plots", 3, "Heatmaps per model (the first sentences of at most "
                     "--attention_plot_max_words source words).", lower_bound=0)
flags.DEFINE_integer("attention_plot_max_words", 30, "Longest source sentence to plot.",
                     lower_bound=1)
flags.DEFINE_string("alignment_rule", None, "The extraction rule of the AER (bahdanau_tf.alignment."
                    "ExtractionRule, e.g. 'sum>0.3'; default: the rule chosen on the dev gold and "
                    "saved with the model, else 'pieces').")
flags.DEFINE_bool("choose_alignment_rule", False, "Choose the extraction rule on the embedded "
                  "corpus's dev gold now and save it with each --model_dir (model.json), then "
                  "evaluate with it (bahdanau_tf.alignment.choose_on_dev).")
flags.DEFINE_string("reverse_model_dir", None, "A model of the other direction: the AER of both "
                    "directions made one, the symmetrization and rule chosen on the dev gold now "
                    "(benchmarks/alignment.py's best system).")


def _model_names(directories, names):
    if names and len(names) != len(directories):
        raise common.UserError(f"{len(names)} --name for {len(directories)} --model_dir.")
    names = list(names or [os.path.basename(os.path.normpath(d)) or d for d in directories])
    seen = {}
    for i, name in enumerate(names):  # unique names: they become file names and plot labels
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            names[i] = f"{name}-{seen[name]}"
    return names


def _file_label(name):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def load_test_set(direction):
    """The test set from the flags: the embedded corpus's split as a `ParallelCorpus` (with
    its gold alignments), the user's files as a `bahdanau_tf.corpora.CorpusFiles` stream."""
    corpus = common.corpus_from_flags(FLAGS.split, direction, stream=True)
    if FLAGS.max_sentences is not None:
        corpus = corpus.select(slice(0, FLAGS.max_sentences))
    return corpus


def write_heatmaps(name, figures, outputs):
    """Writes one model's heatmaps (through `files.OutputFiles` ``outputs``); returns their
    file names."""
    label = _file_label(name)
    plots = []
    for i, figure in figures.items():
        plots.append(f"attention_{label}_{i}.png")
        figure.savefig(outputs.path(os.path.join(FLAGS.output_dir, plots[-1])), format="png",
                       dpi=figure.dpi)
    return plots


def default_output_dir(model_dirs):
    """``MODEL_DIR/evaluation`` for one model directory of the user's, else ``evaluation``."""
    from bahdanau_tf import pretrained

    (first, *others) = model_dirs
    if not others and os.path.isdir(first) and pretrained.resolve(first) == first:
        return os.path.join(first, "evaluation")
    return "evaluation"


def _check_alignment_flags():
    """The alignment flags' usage errors, before any work."""
    given = [f"--{name}" for name in ("alignment_rule", "choose_alignment_rule", "reverse_model_dir")
             if FLAGS[name].value]
    if len(given) > 1:
        raise common.UserError(f"{' and '.join(given)}: give one way to pick the alignment rule.")
    if (FLAGS.choose_alignment_rule or FLAGS.reverse_model_dir) and (FLAGS.ensemble or len(FLAGS.model_dir) > 1):
        raise common.UserError(f"{given[0]} chooses a rule for one model: give one --model_dir.")
    files = [f"--{name}" for name in ("tsv", "source_file", "target_file") if FLAGS[name].value]
    if given and files:
        raise common.UserError(f"{given[0]} works on the gold word alignments of the embedded corpus; "
                               f"{files[0]} has none: evaluate without it, or on the embedded corpus.")
    if given:
        common.require_attention(FLAGS.model_dir, f"{given[0]} needs")
    if FLAGS.alignment_rule:
        from bahdanau_tf import alignment

        try:
            alignment.ExtractionRule.parse(FLAGS.alignment_rule)
        except ValueError as error:
            raise common.UserError(f"--alignment_rule={FLAGS.alignment_rule!r}: {error}") from None
    if FLAGS.reverse_model_dir:
        common.reverse_model_dir("reverse_model_dir", FLAGS.model_dir[0], FLAGS.direction)
    if FLAGS.choose_alignment_rule:
        _check_written_model_dir()
    if not given:  # the saved rules, read before any model is loaded: a damaged one is one line
        from bahdanau_tf import alignment

        for directory in FLAGS.model_dir:
            try:
                alignment.read_chosen_rule(directory)
            except OSError:
                continue  # no model.json: the loader names what is missing


def _check_written_model_dir():
    """--choose_alignment_rule writes into --model_dir: an existing path is that path (not the
    shipped model of its name), a shipped model is refused (the package's files are not
    written), and so is a directory that is not writable."""
    from bahdanau_tf import pretrained

    given = FLAGS.model_dir[0]
    FLAGS.model_dir = [pretrained.resolve(given, written=True), *FLAGS.model_dir[1:]]
    if pretrained.is_shipped(pretrained.resolve(FLAGS.model_dir[0])):
        raise common.UserError(f"--choose_alignment_rule saves the rule with the model, but "
                               f"--model_dir={given!r} is a shipped model, which is not written: "
                               "choose on a copy of it (cp -r), or evaluate without the flag.")
    if not os.access(FLAGS.model_dir[0], os.W_OK):
        raise common.UserError(f"--choose_alignment_rule saves the rule in --model_dir="
                               f"{given!r}, which is not writable.")


def _alignment_choice(translator, model_dir, direction):
    """(the `ChosenRule` of a model's AER, the reverse model's Translator or None), from the
    alignment flags; the choice is printed."""
    from bahdanau_tf import alignment
    from bahdanau_tf.translator import Translator

    reverse = None
    if FLAGS.alignment_rule:
        choice = alignment.ChosenRule(alignment.ExtractionRule.parse(FLAGS.alignment_rule))
    elif FLAGS.choose_alignment_rule or FLAGS.reverse_model_dir:
        if FLAGS.reverse_model_dir:
            reverse = Translator.from_directory(common.reverse_model_dir(
                "reverse_model_dir", model_dir, direction), which=FLAGS.checkpoint)
        dev = common.dev_split(direction)
        choice = (alignment.choose_on_dev(translator, dev, reverse, batch_size=FLAGS.batch_size)
                  if dev is not None else alignment.ChosenRule())
        if FLAGS.choose_alignment_rule and choice.chosen:
            alignment.save_chosen_rule(model_dir, choice)
    else:
        choice = alignment.read_chosen_rule(model_dir)
    if not FLAGS.alignment_rule:
        hint = "" if choice.chosen or FLAGS.choose_alignment_rule else (
            ": --choose_alignment_rule chooses one on the dev gold and saves it with the model")
        print(f"{common.program_name()}: alignments: {choice.describe()}{hint}.", file=sys.stderr,
              flush=True)
    return choice, reverse if choice.symmetrization else None


def main(argv):
    del argv
    common.require_model_dirs()
    _check_alignment_flags()
    if FLAGS.output_dir is None:
        FLAGS.output_dir = default_output_dir(FLAGS.model_dir)
    common.check_writable_dir(FLAGS.output_dir, "output_dir")
    created = not os.path.exists(FLAGS.output_dir)
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    try:
        with files.OutputFiles() as outputs:  # every file renamed into place at the end
            _evaluate(outputs)
    except BaseException:
        if created:
            with contextlib.suppress(OSError):  # only if empty: a failed run leaves nothing
                os.rmdir(FLAGS.output_dir)
        raise


def _evaluate(outputs):
    from bahdanau_tf import evaluation
    from bahdanau_tf.model_directory import read_model_config
    from bahdanau_tf.translator import Translator

    unk = common.unk_options()  # a bad dictionary is refused before any model is loaded
    groups = [list(FLAGS.model_dir)] if FLAGS.ensemble else [[d] for d in FLAGS.model_dir]
    names = _model_names(FLAGS.model_dir, FLAGS.name)
    if FLAGS.ensemble:
        names = ["ensemble(" + ", ".join(names) + ")"]
    saved_settings = read_model_config(FLAGS.model_dir[0]).get("settings", {})
    direction = FLAGS.direction or saved_settings.get("direction") or "en-es"
    corpus = load_test_set(direction)
    if next(corpus.chunks(1), None) is None:  # reads one pair (a stream is read again later)
        raise common.UserError("No sentence to evaluate.")
    test_set = f"{corpus.name} ({direction})"

    reports, models = [], []
    for group, name in zip(groups, names):
        translator = Translator.from_directory(
            group if len(group) > 1 else group[0], which=FLAGS.checkpoint,
            **common.search_options(jit_compile=FLAGS.jit_compile), **unk,
            **common.candidate_options(group))
        shown = progress.Progress(common.program_name(), _size(corpus), enabled=FLAGS.progress)
        choice, reverse = (_alignment_choice(translator, group[0], direction) if translator.has_attention
                           else (None, None))
        translator = progress.ProgressTranslator(translator, shown)
        path = os.path.join(FLAGS.output_dir, f"translations_{_file_label(name)}.txt")
        with open(outputs.path(path), "w", encoding="utf-8") as handle:

            def write(first, chunk, translations, *unused):  # as each chunk is scored
                handle.writelines(h.replace("\n", " ") + "\n" for h in translations)

            result = evaluation.evaluate_translator(
                translator, corpus, name=name, no_unk=FLAGS.no_unk, batch_size=FLAGS.batch_size,
                attention_plots=FLAGS.attention_plots,
                attention_plot_max_words=FLAGS.attention_plot_max_words,
                settings={"model_dirs": group, "test_set": test_set,
                          "checkpoint": FLAGS.checkpoint, "replace_unk": FLAGS.replace_unk,
                          "unk_dictionary": FLAGS.unk_dictionary,
                          "candidate_lists": ({"frequent": FLAGS.candidate_frequent,
                                               "per_word": FLAGS.candidate_per_word}
                                              if FLAGS.candidate_lists else None)},
                chunk_size=FLAGS.read_lines, on_chunk=write, alignment_rule=choice,
                reverse_translator=reverse)
        shown.close()
        report = result.report
        reports.append(report)
        models.append({**report.to_dict(),
                       "attention_plots": write_heatmaps(name, result.attention_figures, outputs)})
        _print_scores(name, report)

    evaluation.plot_bleu_by_length({r.model: r.bleu_by_length for r in reports},
                                   outputs.path(os.path.join(FLAGS.output_dir, "bleu_by_length.png")),
                                   title=f"BLEU by source length, {test_set}")
    path = os.path.join(FLAGS.output_dir, "report.json")
    with open(outputs.path(path), "w", encoding="utf-8") as handle:
        json.dump({"test_set": test_set, "num_sentences": reports[0].num_sentences,
                   "models": models},
                  handle, indent=2, ensure_ascii=False, allow_nan=False)
        handle.write("\n")
    print(f"Wrote {path}")


def _size(corpus):
    """The number of pairs of the test set, None for a stream of the user's files."""
    try:
        return len(corpus)
    except TypeError:
        return None


def _print_scores(name, report):
    print(f"{name}: {report.bleu}")
    if report.no_unk is not None and report.no_unk.bleu is not None:
        print(f"{name}: No-UNK ({report.no_unk.num_sentences} sentences) "
              f"BLEU = {report.no_unk.bleu.score:.2f}")
    if report.alignment is not None:
        rule = report.settings.get("alignment_rule", {})
        both = f", both directions {rule['symmetrization']}" if rule.get("symmetrization") else ""
        how = "chosen on dev" if rule.get("dev_aer") is not None else "not chosen on dev"
        print(f"{name}: AER (teacher-forced attention on the references, rule {rule.get('rule')}"
              f"{both}, {how}) = {report.alignment.aer:.3f}")


run = common.runner(main, __doc__)


if __name__ == "__main__":
    run()
