"""bahdanau-export: a trained model directory as a TF Serving SavedModel.

Writes ``--export_dir/N/`` (saved_model.pb, variables/, assets/ with the vocabularies,
assets.extra/tf_serving_warmup_requests), N = ``--version`` or one more than the highest
existing version, and prints that path. The signatures (``serving_default``,
``translate_nbest``, ``align``) are described in `bahdanau_tf.serving`; the export is refused
when its graph uses an op the stock model server may not have, or when a signature does not
answer through the server's loading path. export/README.md shows how to serve the result.

The graph is float32 whatever precision training used (what a CPU model server runs best);
``--keep_precision`` keeps the training policy (e.g. mixed bfloat16 for a GPU server).

Warm-up records need tensorflow-serving-api (``pip install "bahdanau_tf[serving]"``). Without
it the model is exported without them and one line on stderr says so; ``--warmup`` asks for
them explicitly and is refused up front when the package is missing, ``--nowarmup`` skips them.

Exit codes: 0 exported; 2 a usage error or bad input (one line on stderr), e.g. a version that
exists or that another export is writing right now.

Example:

    bahdanau-export --model_dir=runs/rnnsearch-small --export_dir=/models/bahdanau
    bahdanau-export --model_dir=runs/a --model_dir=runs/b --export_dir=/models/bahdanau \\
        --version=7 --beam_size=12  # an ensemble, served as version 7
"""

import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags

FLAGS = flags.FLAGS

flags.DEFINE_multi_string("model_dir", None, "Training output directory; repeat for an ensemble.")
flags.DEFINE_string("export_dir", None, "Model base path: the version is written below it.")
flags.DEFINE_integer("version", None, "Version number (default: highest existing + 1).")
flags.DEFINE_bool("overwrite", False, "Replace an existing version directory.")
flags.DEFINE_enum("checkpoint", "best", ["best", "latest"], "Which checkpoint to load.")
flags.DEFINE_integer("beam_size", 5, "Beam of serving_default and align, in [1, 64] "
                     "(translate_nbest takes it per row).")
flags.DEFINE_float("length_penalty", 0.0, "GNMT length penalty alpha >= 0; 0 ranks by log p(y|x).")
flags.DEFINE_integer("max_source_length", 100, "Longer inputs are cut to this many tokens.")
flags.DEFINE_string("model_name", "bahdanau", "Model name in the warm-up requests (models.config).")
flags.DEFINE_bool("warmup", None, "Write assets.extra/tf_serving_warmup_requests (default: when "
                  "tensorflow-serving-api is installed).")
flags.DEFINE_bool("keep_precision", False, "Keep the training precision policy instead of "
                  "exporting a float32 graph.")

PROGRAM = "bahdanau-export"


def fail(message):
    """A user error: one line on stderr, exit code 2."""
    lines = str(message).strip().splitlines() or [repr(message)]
    print(f"{PROGRAM}: error: {lines[0]}", file=sys.stderr)
    sys.exit(2)


def parse_flags(argv):
    try:
        return FLAGS(argv)
    except flags.Error as error:
        fail(error)


def main(argv):
    from bahdanau_tf.translator import MAX_BEAM_SIZE

    if len(argv) > 1:
        fail(f"unexpected arguments: {argv[1:]}")
    if not FLAGS.model_dir:
        fail("--model_dir is required (a bahdanau-train output directory).")
    if not FLAGS.export_dir:
        fail("--export_dir is required (the model base path).")
    for directory in FLAGS.model_dir:
        if not os.path.isdir(directory):
            fail(f"--model_dir={directory!r} does not exist.")
    if FLAGS.version is not None and FLAGS.version < 1:
        fail(f"--version must be >= 1, got {FLAGS.version}.")
    if not 1 <= FLAGS.beam_size <= MAX_BEAM_SIZE:
        fail(f"--beam_size must be in [1, {MAX_BEAM_SIZE}], got {FLAGS.beam_size}.")
    if not (math.isfinite(FLAGS.length_penalty) and FLAGS.length_penalty >= 0):
        fail(f"--length_penalty must be a finite number >= 0, got {FLAGS.length_penalty}.")
    if FLAGS.max_source_length < 1:
        fail(f"--max_source_length must be >= 1, got {FLAGS.max_source_length}.")
    if os.path.exists(FLAGS.export_dir) and not os.path.isdir(FLAGS.export_dir):
        fail(f"--export_dir={FLAGS.export_dir!r} is a file, not a directory.")

    from bahdanau_tf import serving
    from bahdanau_tf.translator import Translator

    warmup = FLAGS.warmup
    if warmup is None and not serving.warmup_available():
        # friendlier than a refusal: the model serves without them, only its first request
        # pays for the initialisation
        print(f"{PROGRAM}: tensorflow-serving-api is not installed: exporting without warm-up "
              "records (pip install \"bahdanau_tf[serving]\" to add them).", file=sys.stderr)
        warmup = False
    if warmup and not serving.warmup_available():
        fail("--warmup needs tensorflow-serving-api: pip install \"bahdanau_tf[serving]\" "
             "(or pass --nowarmup).")
    try:
        translator = Translator.from_directory(
            FLAGS.model_dir, which=FLAGS.checkpoint,
            dtype=None if FLAGS.keep_precision else serving.SERVING_DTYPE,
            beam_size=FLAGS.beam_size, length_penalty=FLAGS.length_penalty,
            max_source_length=FLAGS.max_source_length)
        path = serving.export_saved_model(translator, FLAGS.export_dir, version=FLAGS.version,
                                          warmup=warmup, model_name=FLAGS.model_name,
                                          overwrite=FLAGS.overwrite)
    except (FileNotFoundError, FileExistsError, ValueError, PermissionError) as error:
        fail(error)
    print(path)


def run():
    app.run(main, flags_parser=parse_flags)


if __name__ == "__main__":
    run()
