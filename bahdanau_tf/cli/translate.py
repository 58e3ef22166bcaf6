r"""bahdanau-translate: translate text with a trained model directory.

One line out per line in, empty lines included (an empty line translates to an empty line).
Reads stdin and writes stdout unless --input_file / --output_file are given. With --nbest=K > 1
each output line holds the K best translations and their scores, tab-separated:
``translation_1<TAB>score_1<TAB>translation_2<TAB>score_2...``. Inputs longer than the
Translator's bound (--max_source_length tokens, 100 by default) are cut: only their beginning is
translated.

``--alignments`` appends `` ||| `` and the word alignment of each translation (of each n-best
entry too), Pharaoh ``i-j`` links, source word i - output word j (0-based words of
`bahdanau_tf.text.split_words`), as Marian writes them: ``la casa ||| 0-0 1-1``; from the
attention of the model reading its output, by the extraction rule chosen on the dev gold and
saved with the model (``model.json``'s ``"alignment"``, `bahdanau_tf.alignment.read_chosen_rule`;
the default rule ``pieces`` for a model without one or an ensemble), as ``bahdanau-evaluate``
reads it (`bahdanau_tf.alignment.translation_links`); models with attention only.

``--replace_unk`` replaces each generated [UNK] by the source word the attention weighted most at
that step, or by its entry in ``--unk_dictionary=FILE`` (source<TAB>target lines;
`bahdanau_tf.unknown_words`); models with attention only.

Input streams: --read_lines lines (10,000) are read, translated and written at a time, so memory
does not grow with the input, and the first translations reach stdout before the input ends.
Input typed at a terminal, or from a pipe whose writer pauses, is answered line by line: the
lines read are translated as soon as no more input is waiting (input that is all there, a file
or a fast pipe, is still translated --read_lines at a time, as fast). On a terminal a short
prompt goes to stderr. Progress (sentences, sentences/s, the time left when --input_file is a
file) goes to stderr when it is a terminal, or with --progress.
Lines are read with the package's one line reader (`bahdanau_tf.corpora.line_chunks`): ``\n``,
``\r\n`` and ``\r`` end lines, and a line that is not UTF-8 is an error naming the line (exit
code 2), raised when its chunk is read: in the first chunk, before the model is loaded and
before anything is written; later, after the chunks before it were written to stdout.
``--output_file`` is written beside itself under a temporary name and renamed at the end: after
any failure (a bad line, a full disk: exit code 5) it is left as it was.

Example:

    echo "But seek God's Kingdom, and all these things will be added to you." | \
        bahdanau-translate --model_dir=runs/rnnsearch-small --beam_size=12
    bahdanau-translate --model_dir=runs/a --model_dir=runs/b --input_file=test.en  # ensemble
"""

import itertools
import sys

from absl import flags  # noqa: E402

from bahdanau_tf import files  # noqa: E402
from bahdanau_tf.cli import common, progress  # noqa: E402

FLAGS = flags.FLAGS

common.define_model_dir_flags()
common.define_search_flags()
common.define_unk_flags()
common.define_candidate_flags()
flags.DEFINE_string("input_file", None, "Sentences, one a line (default: stdin).")
flags.DEFINE_string("output_file", None, "Where to write the translations (default: stdout).")
flags.DEFINE_integer("batch_size", 64, "Sentences per graph call.", lower_bound=1)
flags.DEFINE_integer("nbest", 1, "Translations per line; > 1 writes tab-separated n-best lists "
                     "with scores.", lower_bound=1)
flags.DEFINE_bool("forbid_unknown", False, "Never generate [UNK] (the paper's No-UNK decoding).")
flags.DEFINE_integer("read_lines", 10000, "Lines read, translated and written at a time: the "
                     "memory bound, whatever the input's length.", lower_bound=1)
flags.DEFINE_bool("alignments", False, "Append ' ||| ' and Pharaoh i-j word links (source word - "
                  "output word) to each translation; models with attention only.")
flags.DEFINE_bool("scores", False, "With --nbest=1, append a tab and the score to each line.")
progress.define_progress_flag()
flags.DEFINE_bool("jit_compile", None, "Compile the search with XLA over bucketed shapes (default: yes, "
                  "bahdanau_tf.devices.decoding_jit).")


def format_line(translations, scores, nbest, with_scores):
    """One output line: a translation, or tab-separated (translation, score) pairs."""
    clean = lambda text: text.replace("\t", " ").replace("\n", " ")  # noqa: E731
    if nbest == 1:
        return clean(translations) + (f"\t{float(scores):.4f}" if with_scores else "")
    return "\t".join(f"{clean(t)}\t{float(s):.4f}" for t, s in zip(translations, scores))


def _interactive_input():
    """Whether the input is a terminal (the prompt, and the model loaded before reading)."""
    if FLAGS.input_file and FLAGS.input_file != "-":
        return False
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def aligned(translator, lines, translations, nbest):
    """The translations (or n-best lists) with `` ||| i-j ...`` links appended to each."""
    from bahdanau_tf import alignment

    rows = [[t] for t in translations] if nbest == 1 else translations
    flat = [(line, t) for line, row in zip(lines, rows) for t in row]
    # the rule chosen on the dev gold and saved with the model (one model; an ensemble's mean
    # attention, or a model without one: the default rule)
    rule = alignment.read_chosen_rule(FLAGS.model_dir[0]).rule if len(FLAGS.model_dir) == 1 else None
    links = iter(alignment.translation_links(translator, [s for s, _ in flat], [t for _, t in flat],
                                              rule=rule, batch_size=FLAGS.batch_size))
    rows = [[f"{t} ||| {alignment.format_pharaoh(next(links))}" for t in row] for row in rows]
    return [row[0] for row in rows] if nbest == 1 else rows


def _check_saved_rule():
    """The rule --alignments reads from one model's model.json (`aligned`): one of both
    directions needs a reverse model, which translate has not: refused, as a damaged record."""
    from bahdanau_tf import alignment

    if len(FLAGS.model_dir) != 1:
        return
    choice = alignment.read_chosen_rule(FLAGS.model_dir[0])  # ValueError: a damaged record, named
    if choice.symmetrization is not None:
        raise common.UserError(
            f"--alignments: {FLAGS.model_dir[0]!r} saves a rule of both directions ({choice.rule}, "
            f"{choice.symmetrization}), which needs a reverse model: bahdanau-evaluate "
            "--reverse_model_dir scores it; save a rule of one direction (bahdanau-evaluate "
            "--choose_alignment_rule) to translate with links.")


def main(argv):
    del argv
    common.require_model_dirs()
    if FLAGS.nbest > FLAGS.beam_size:
        raise common.UserError(f"--nbest={FLAGS.nbest} exceeds --beam_size={FLAGS.beam_size}.")
    if FLAGS.output_file is not None:
        common.check_writable_file(FLAGS.output_file, "output_file")
    from bahdanau_tf.corpora import line_chunks
    from bahdanau_tf.translator import Translator

    if FLAGS.alignments:
        common.require_attention(FLAGS.model_dir, "--alignments needs")
        _check_saved_rule()
    unk = common.unk_options()
    candidates = common.candidate_options(FLAGS.model_dir)
    chunks = line_chunks(FLAGS.input_file, FLAGS.read_lines, interactive=True)

    def load():
        return Translator.from_directory(
            FLAGS.model_dir, which=FLAGS.checkpoint,
            **common.search_options(jit_compile=FLAGS.jit_compile), **unk, **candidates)

    if _interactive_input():  # a person types: the model first, then the prompt
        translator = load()
        print("Type a sentence and press Enter for its translation; Ctrl-D ends.",
              file=sys.stderr, flush=True)
        first = next(chunks, [])
    else:
        first = next(chunks, [])  # a bad first chunk is refused before the model is loaded
        translator = load()
    if FLAGS.alignments and not translator.has_attention:
        raise common.UserError("--alignments needs models with attention (RNNsearch).")
    progress_line = progress.Progress(common.program_name(), progress.line_count(FLAGS.input_file),
                                      enabled=FLAGS.progress)
    counted = progress.ProgressTranslator(translator, progress_line)

    def translated():
        for lines in itertools.chain([first], chunks):
            output = counted.translate(lines, nbest=FLAGS.nbest, batch_size=FLAGS.batch_size,
                                       forbid_unknown=FLAGS.forbid_unknown)
            translations = output.translations
            if FLAGS.alignments:
                translations = aligned(translator, lines, translations, FLAGS.nbest)
            yield "".join(format_line(t, s, FLAGS.nbest, FLAGS.scores) + "\n"
                          for t, s in zip(translations, output.scores))

    try:
        if FLAGS.output_file:
            with files.OutputFiles() as outputs:  # the whole output, or nothing (a bad line, a full disk)
                with open(outputs.path(FLAGS.output_file), "w", encoding="utf-8") as handle:
                    for text in translated():
                        handle.write(text)
        else:
            for text in translated():
                sys.stdout.write(text)
                sys.stdout.flush()
    finally:
        progress_line.close()


run = common.runner(main, __doc__)

if __name__ == "__main__":
    run()
