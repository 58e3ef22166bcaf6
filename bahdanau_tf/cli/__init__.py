"""Command lines: thin absl wrappers over the library. Only these modules define flags; the flags
they share, the corpus selection, ``--help`` and the exit codes live in `bahdanau_tf.cli.common`.

Importing this package (which every command does first) loads TensorFlow quietly
(`bahdanau_tf.quiet_tensorflow`), so that a
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

from bahdanau_tf.quiet import quiet_tensorflow


def _verbosity_requested(argv) -> bool:
    """Whether the command line or the environment asks for TensorFlow's own lines."""
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
        return True
    names = ("-v", "--v", "--verbosity")
    return any(arg in names or arg.startswith(tuple(n + "=" for n in names)) for arg in argv[1:])


quiet_tensorflow(verbose=_verbosity_requested(sys.argv))
