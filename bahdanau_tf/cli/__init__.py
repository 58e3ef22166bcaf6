"""Command lines: thin absl wrappers over the library. Only these modules define flags; the flags
they share, the corpus selection, ``--help`` and the exit codes live in `bahdanau_tf.cli.common`.

Importing this package (which every command does first) loads TensorFlow quietly, so that a
command's own lines are all its stderr holds at the default verbosity: TensorFlow's C++ log is
set to FATAL only (``TF_CPP_MIN_LOG_LEVEL=3``: no ``cuInit`` error on a CPU-only machine, no
CPU-feature or oneDNN notice), and the few lines its libraries print while they load, before
absl's C++ log is initialised (which no level silences), are captured and dropped, or printed
if the import fails. Python warnings go through absl's handler only, once each. To see all of
TensorFlow's lines, pass ``--verbosity=0`` (or any ``--verbosity``/``-v``) or set
``TF_CPP_MIN_LOG_LEVEL=0``; a ``TF_CPP_MIN_LOG_LEVEL`` set in the environment is kept.
"""

import os
import sys
import tempfile

from absl import logging as _absl_logging


def _verbosity_requested(argv) -> bool:
    """Whether the command line or the environment asks for TensorFlow's own lines."""
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
        return True
    names = ("-v", "--v", "--verbosity")
    return any(arg in names or arg.startswith(tuple(n + "=" for n in names)) for arg in argv[1:])


def _import_tensorflow(argv):
    """Imports tensorflow and tensorflow_text, quietly unless `_verbosity_requested`."""
    # TensorFlow's Python logger adds its own stderr handler unless the root logger has one:
    # with absl's installed first, each warning prints once, in absl's format
    _absl_logging.use_absl_handler()
    if "tensorflow" in sys.modules or _verbosity_requested(argv):
        import tensorflow  # noqa: F401
        import tensorflow_text  # noqa: F401
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:  # unlinked at once: nothing left in the temp dir
        os.dup2(capture.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
            import tensorflow_text  # noqa: F401
        except BaseException:
            os.dup2(saved, 2)
            capture.seek(0)
            sys.stderr.write(capture.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


_import_tensorflow(sys.argv)
