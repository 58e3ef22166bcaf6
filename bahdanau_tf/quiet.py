"""Quiet TensorFlow: import it without its start-up lines, for Python and notebook users.

Imported, TensorFlow prints a dozen lines to stderr before anything runs (CPU features, oneDNN,
CUDA drivers, a ``cuInit`` error on a machine without a GPU), through its C++ log, some of them
before that log is initialised (no level silences those). `quiet_tensorflow` imports
TensorFlow and tensorflow-text with those lines dropped (printed if the import fails), sets the
C++ log to errors that stop the program only (``TF_CPP_MIN_LOG_LEVEL=3``, unless the environment
sets it), and routes TensorFlow's Python warnings through absl's handler (each printed once).
Call it before anything imports TensorFlow::

    import bahdanau_tf
    bahdanau_tf.quiet_tensorflow()
    from bahdanau_tf import RNNSearch  # TensorFlow is already loaded, quietly

The command lines do the same (unless given ``--verbosity``). ``TF_CPP_MIN_LOG_LEVEL=0`` in the
environment, or ``verbose=True``, shows every line.
"""

import os
import sys
import tempfile


def quiet_tensorflow(verbose: bool = False) -> bool:
    """Imports tensorflow and tensorflow_text without their start-up lines (see the module).

    Args:
        verbose: bool, import them as they are, every line shown.

    Returns:
        bool, True when this call imported TensorFlow quietly; False when it was imported
        already (too late to drop its start-up lines: call this first), or ``verbose``.
    """
    from absl import logging as absl_logging

    # TensorFlow's Python logger adds its own stderr handler unless the root logger has one:
    # with absl's installed first, each warning prints once, in absl's format
    absl_logging.use_absl_handler()
    if "tensorflow" in sys.modules or verbose or os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
        import tensorflow  # noqa: F401
        import tensorflow_text  # noqa: F401
        return False
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
    return True


__all__ = ["quiet_tensorflow"]
