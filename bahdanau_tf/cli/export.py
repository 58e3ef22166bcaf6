"""bahdanau-export: a trained model directory as a TF Serving SavedModel.

Writes ``--export_dir/N/`` (saved_model.pb, variables/, assets/ with the vocabularies,
assets.extra/tf_serving_warmup_requests), N = ``--version`` or one more than the highest
existing version, and prints that path. The signatures (``serving_default``,
``translate_nbest``, ``align``) are described in `bahdanau_tf.serving`; the export is refused
when its graph uses an op the stock model server may not have. export/README.md shows how to
serve the result.

Example:

    bahdanau-export --model_dir=runs/rnnsearch-small --export_dir=/models/bahdanau
    bahdanau-export --model_dir=runs/a --model_dir=runs/b --export_dir=/models/bahdanau \\
        --version=7 --beam_size=12  # an ensemble, served as version 7
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags

FLAGS = flags.FLAGS

flags.DEFINE_multi_string("model_dir", None, "Training output directory; repeat for an ensemble.")
flags.DEFINE_string("export_dir", None, "Model base path: the version is written below it.")
flags.DEFINE_integer("version", None, "Version number (default: highest existing + 1).")
flags.DEFINE_bool("overwrite", False, "Replace an existing version directory.")
flags.DEFINE_enum("checkpoint", "best", ["best", "latest"], "Which checkpoint to load.")
flags.DEFINE_integer("beam_size", 5, "Beam of serving_default and align (translate_nbest takes "
                     "it per request).")
flags.DEFINE_float("length_penalty", 0.0, "GNMT length penalty alpha; 0 ranks by log p(y|x).")
flags.DEFINE_integer("max_source_length", 100, "Longer inputs are cut to this many tokens.")
flags.DEFINE_string("model_name", "bahdanau", "Model name in the warm-up requests (models.config).")
flags.DEFINE_bool("warmup", True, "Write assets.extra/tf_serving_warmup_requests.")
flags.DEFINE_bool("jit", False, "Compile the signatures' search with XLA (bucketed shapes); the stock model server "
                  "then needs --xla_cpu_compilation_enabled.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if not FLAGS.model_dir:
        raise app.UsageError("--model_dir is required (a bahdanau-train output directory).")
    if not FLAGS.export_dir:
        raise app.UsageError("--export_dir is required (the model base path).")
    for directory in FLAGS.model_dir:
        if not os.path.isdir(directory):
            raise app.UsageError(f"--model_dir={directory!r} does not exist.")
    if FLAGS.version is not None and FLAGS.version < 1:
        raise app.UsageError(f"--version must be >= 1, got {FLAGS.version}.")

    from bahdanau_tf.serving import export_saved_model
    from bahdanau_tf.translator import Translator

    try:
        translator = Translator.from_directory(
            FLAGS.model_dir, which=FLAGS.checkpoint, beam_size=FLAGS.beam_size,
            length_penalty=FLAGS.length_penalty, max_source_length=FLAGS.max_source_length,
            serving_jit_compile=FLAGS.jit)
        path = export_saved_model(translator, FLAGS.export_dir, version=FLAGS.version,
                                  warmup=FLAGS.warmup, model_name=FLAGS.model_name,
                                  overwrite=FLAGS.overwrite)
    except (FileNotFoundError, FileExistsError, ValueError) as error:
        raise app.UsageError(str(error))
    print(path)


def run():
    app.run(main)


if __name__ == "__main__":
    run()
