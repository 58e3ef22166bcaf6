"""bahdanau-translate: translate text with a trained model directory.

One line out per line in, empty lines included (an empty line translates to an empty line).
Reads stdin and writes stdout unless --input_file / --output_file are given. With --nbest=K > 1
each output line holds the K best translations and their scores, tab-separated:
``translation_1<TAB>score_1<TAB>translation_2<TAB>score_2...``. Inputs longer than the
Translator's bound (--max_source_length tokens, 100 by default) are cut: only their beginning is
translated.

Example:

    echo "In the beginning God created the heavens and the earth." | \\
        bahdanau-translate --model_dir=runs/rnnsearch-small --beam_size=12
    bahdanau-translate --model_dir=runs/a --model_dir=runs/b --input_file=test.en  # ensemble
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags

from bahdanau_tf.cli import require_model_dirs

FLAGS = flags.FLAGS

flags.DEFINE_multi_string("model_dir", None, "Training output directory; repeat for an ensemble.")
flags.DEFINE_enum("checkpoint", "best", ["best", "latest"], "Which checkpoint to load.")
flags.DEFINE_string("input_file", None, "Sentences, one a line (default: stdin).")
flags.DEFINE_string("output_file", None, "Where to write the translations (default: stdout).")
flags.DEFINE_integer("batch_size", 64, "Sentences per graph call.")
flags.DEFINE_integer("beam_size", 5, "Beam size; 1 is greedy search.")
flags.DEFINE_integer("nbest", 1, "Translations per line; > 1 writes tab-separated n-best lists "
                     "with scores.")
flags.DEFINE_float("length_penalty", None, "GNMT length penalty alpha (default: the Translator's, 1.0); 0 ranks "
                   "by log p(y|x).")
flags.DEFINE_integer("max_source_length", 100, "Longer inputs are cut to this many tokens.")
flags.DEFINE_bool("forbid_unknown", False, "Never generate [UNK] (the paper's No-UNK decoding).")
flags.DEFINE_bool("scores", False, "With --nbest=1, append a tab and the score to each line.")
flags.DEFINE_bool("jit_compile", None, "Compile the search with XLA over bucketed shapes (default: yes, "
                  "bahdanau_tf.devices.decoding_jit).")


def read_lines(path=None):
    """The lines of a file (or stdin) without their line ends; invalid UTF-8 is replaced."""
    if path is None:
        data = sys.stdin.buffer.read()
    else:
        with open(path, "rb") as handle:
            data = handle.read()
    text = data.decode("utf-8", errors="replace")
    # str.splitlines would also split on U+2028 etc.; only real line ends count here
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start a new one
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def format_line(translations, scores, nbest, with_scores):
    """One output line: a translation, or tab-separated (translation, score) pairs."""
    clean = lambda text: text.replace("\t", " ").replace("\n", " ")  # noqa: E731
    if nbest == 1:
        return clean(translations) + (f"\t{float(scores):.4f}" if with_scores else "")
    return "\t".join(f"{clean(t)}\t{float(s):.4f}" for t, s in zip(translations, scores))


def main(argv):
    require_model_dirs(argv, FLAGS.model_dir)
    if FLAGS.nbest > FLAGS.beam_size:
        raise app.UsageError(f"--nbest={FLAGS.nbest} exceeds --beam_size={FLAGS.beam_size}.")

    from bahdanau_tf.translator import Translator

    try:
        translator = Translator.from_directory(
            FLAGS.model_dir, which=FLAGS.checkpoint, beam_size=FLAGS.beam_size,
            max_source_length=FLAGS.max_source_length, jit_compile=FLAGS.jit_compile,
            **({} if FLAGS.length_penalty is None else {"length_penalty": FLAGS.length_penalty}))
    except (FileNotFoundError, ValueError) as error:
        raise app.UsageError(str(error))
    lines = read_lines(FLAGS.input_file)
    output = translator.translate(lines, nbest=FLAGS.nbest, forbid_unknown=FLAGS.forbid_unknown,
                                  batch_size=FLAGS.batch_size)
    text = "".join(format_line(t, s, FLAGS.nbest, FLAGS.scores) + "\n"
                   for t, s in zip(output.translations, output.scores))
    if FLAGS.output_file:
        with open(FLAGS.output_file, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def run():
    app.run(main)


if __name__ == "__main__":
    run()
