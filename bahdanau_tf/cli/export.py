"""bahdanau-export: a trained model directory as a TF Serving SavedModel.

Writes ``--export_dir/N/`` (saved_model.pb, variables/, assets/ with the vocabularies,
assets.extra/tf_serving_warmup_requests), N = ``--version`` or one more than the highest
existing version, and prints that path (stdout), after one line per signature (stderr: its
inputs and outputs with their dtypes and shapes). The signatures (``serving_default``,
``translate_nbest``, ``align``, ``translate_replace_unk``) are described in
`bahdanau_tf.serving`; the export is refused
when its graph uses an op the stock model server may not have, or when a signature does not
answer through the server's loading path. export/README.md shows how to serve the result.

The graph is float32 whatever precision training used (what a CPU model server runs best);
``--keep_precision`` keeps the training policy (e.g. mixed bfloat16 for a GPU server).

[UNK] replacement by attention (`bahdanau_tf.unknown_words`): a client asks for it per request
by calling ``translate_replace_unk`` (models with attention). ``--replace_unk`` makes
``serving_default``, ``translate_nbest`` and ``align`` replace too; ``--unk_dictionary=FILE``
(source<TAB>target lines) is stored in the SavedModel as an asset and looked up in the graph.

Warm-up records need tensorflow-serving-api (``pip install -e ".[serving]"`` in a clone, or
``pip install tensorflow-serving-api``). Without
it the model is exported without them and one line on stderr says so; ``--warmup`` asks for
them explicitly and is refused up front when the package is missing, ``--nowarmup`` skips them.

Exit codes: 0 exported; 2 a usage error or bad input (one line on stderr), e.g. a version that
exists or that another export is writing right now; 5 an I/O failure (a full disk). A failed or
killed export leaves no version: its claim on the version (``.claim-N``, a locked file) dies
with its process and the next export takes it over.

Example:

    bahdanau-export --model_dir=runs/rnnsearch-small --export_dir=/models/bahdanau
    bahdanau-export --model_dir=runs/a --model_dir=runs/b --export_dir=/models/bahdanau \\
        --version=7 --beam_size=12  # an ensemble, served as version 7
"""

import os
import sys

from absl import flags  # noqa: E402

from bahdanau_tf.cli import common  # noqa: E402

FLAGS = flags.FLAGS

common.define_model_dir_flags()
common.define_search_flags()
common.define_unk_flags()
common.define_candidate_flags()
flags.DEFINE_string("export_dir", None, "Model base path: the version is written below it.")
flags.DEFINE_integer("version", None, "Version number (default: highest existing + 1).",
                     lower_bound=1)
flags.DEFINE_bool("overwrite", False, "Replace an existing version directory.")
flags.DEFINE_string("model_name", "bahdanau", "Model name in the warm-up requests (models.config).")
flags.DEFINE_bool("warmup", None, "Write assets.extra/tf_serving_warmup_requests (default: when "
                  "tensorflow-serving-api is installed).")
flags.DEFINE_bool("keep_precision", False, "Keep the training precision policy instead of "
                  "exporting a float32 graph.")

flags.DEFINE_bool("jit", False, "Compile the signatures' search with XLA (bucketed shapes); the "
                  "stock model server then needs --xla_cpu_compilation_enabled.")

PROGRAM = "bahdanau-export"


def main(argv):
    del argv
    common.require_model_dirs()
    if FLAGS.export_dir is None:
        raise common.UserError("--export_dir is required (the model base path).")
    common.check_writable_dir(FLAGS.export_dir, "export_dir")

    unk = common.unk_options(dictionary_alone=True)
    candidates = common.candidate_options(FLAGS.model_dir)
    from bahdanau_tf import serving
    from bahdanau_tf.translator import Translator

    warmup = FLAGS.warmup
    if warmup is None and not serving.warmup_available():
        # friendlier than a refusal: the model serves without them, only its first request
        # pays for the initialisation
        print(f"{PROGRAM}: tensorflow-serving-api is not installed: exporting without warm-up "
              "records (pip install tensorflow-serving-api to add them).", file=sys.stderr)
        warmup = False
    if warmup and not serving.warmup_available():
        raise common.UserError("--warmup needs tensorflow-serving-api: pip install "
                               "tensorflow-serving-api (or pass --nowarmup).")
    translator = Translator.from_directory(
        FLAGS.model_dir, which=FLAGS.checkpoint,
        dtype=None if FLAGS.keep_precision else serving.SERVING_DTYPE,
        **common.search_options(serving_jit_compile=FLAGS.jit), **unk, **candidates)
    path = serving.export_saved_model(translator, FLAGS.export_dir, version=FLAGS.version,
                                      warmup=warmup, model_name=FLAGS.model_name,
                                      overwrite=FLAGS.overwrite)
    for line in serving.signature_summary(path):  # what a client can call, on stderr
        print(f"{PROGRAM}: {line}", file=sys.stderr)
    print(path)


run = common.runner(main, __doc__)

if __name__ == "__main__":
    run()
