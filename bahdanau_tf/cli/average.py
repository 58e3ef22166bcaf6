"""bahdanau-average: average the model weights of a run's last checkpoints.

Each model variable becomes its mean over the ``--last`` N checkpoints of ``--model_dir``'s
``checkpoints/`` (the highest steps; `bahdanau_tf.checkpoint_averaging.average_checkpoints`); the
optimizer's slots and the step are left out. The average is written as ``MODEL_DIR/averaged/``
(beside ``best/``, replacing an earlier average), which translate, evaluate and export load
with ``--checkpoint=averaged``; or, with ``--output=DIR``, as a new model directory whose
``model.weights.h5`` is the average (loaded by every ``--checkpoint``). ``model.json`` records
which checkpoints were averaged. The path of the averaged checkpoint (or weights file) is
printed (stdout).

A training run keeps ``--keep_checkpoints`` checkpoints (3 by default), one every
``--checkpoint_every`` updates: train with ``--keep_checkpoints=5`` or more to average 5.

Exit codes: 0 written; 2 a usage error or bad input (one line on stderr): N larger than the
checkpoints kept, a damaged checkpoint, checkpoints of another model than ``model.json``, a
run directory a trainer is writing into, a non-empty ``--output``; 5 an I/O failure.

Example:

    bahdanau-average --model_dir=runs/rnnsearch-small --last=5
    bahdanau-translate --model_dir=runs/rnnsearch-small --checkpoint=averaged < test.en
"""

import os
import sys

from absl import flags  # noqa: E402

from bahdanau_tf.cli import common  # noqa: E402

FLAGS = flags.FLAGS

common.define_model_dir_flag("The bahdanau-train output directory whose checkpoints to average.")
flags.DEFINE_integer("last", None, "How many of the latest checkpoints to average.", lower_bound=1)
flags.DEFINE_string("output", None, "Write a new model directory holding the average here "
                    "(a new or empty one, not the current directory) instead of MODEL_DIR/averaged/.")

PROGRAM = "bahdanau-average"


def main(argv):
    del argv
    common.require_model_dirs()
    if len(FLAGS.model_dir) != 1:
        raise common.UserError(f"--model_dir is given {len(FLAGS.model_dir)} times: average one "
                               "run at a time.")
    from bahdanau_tf import pretrained

    # a run's checkpoints: an existing path is that path (the shipped models have none)
    FLAGS.model_dir = [pretrained.resolve(FLAGS.model_dir[0], written=True)]
    if FLAGS.last is None:
        raise common.UserError("--last is required (how many of the latest checkpoints to average).")
    common.require_tensorflow("it reads and writes the trainer's TensorFlow checkpoints "
                              "(tf.train.Checkpoint of the Keras model), which only that backend tracks")
    if FLAGS.output is not None:
        common.check_writable_dir(FLAGS.output, "output")
    elif os.path.isdir(FLAGS.model_dir[0]) and not os.access(FLAGS.model_dir[0], os.W_OK):
        raise common.UserError(f"--model_dir={FLAGS.model_dir[0]!r} is not writable: the average "
                               "is written into it (averaged/); pass --output=DIR to write it "
                               "elsewhere.")

    from bahdanau_tf import checkpoint_averaging, model_directory

    path = checkpoint_averaging.average_checkpoints(FLAGS.model_dir[0], FLAGS.last, output=FLAGS.output)
    tag = model_directory.read_model_config(FLAGS.output or FLAGS.model_dir[0])[model_directory.AVERAGED_TAG]
    print(f"{PROGRAM}: averaged {', '.join(tag['checkpoints'])}", file=sys.stderr)
    print(path)


run = common.runner(main, __doc__)

if __name__ == "__main__":
    run()
