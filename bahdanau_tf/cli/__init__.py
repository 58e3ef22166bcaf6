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
A ``KERAS_BACKEND`` that Keras cannot load (not a backend's name, or its package not installed)
is one line and exit code 2, before anything is imported (`keras_backend_error`).
"""

import importlib.util
import os
import sys

from bahdanau_tf.quiet import quiet_tensorflow

#: Keras's backends (``KERAS_BACKEND``) and the packages each one imports (Keras's numpy and
#: openvino backends import scipy too)
KERAS_BACKENDS = {"tensorflow": ("tensorflow",), "jax": ("jax",), "torch": ("torch",),
                  "numpy": ("numpy", "scipy"), "openvino": ("openvino", "scipy")}


def program_name() -> str:
    """The command's name: ``bahdanau-train`` also when run as ``python -m bahdanau_tf.cli.train``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "bahdanau"
    if name == "-m" and "-m" in sys.orig_argv[:-1]:  # while ``python -m`` imports the package
        name = sys.orig_argv[sys.orig_argv.index("-m") + 1].rsplit(".", 1)[-1] + ".py"
    return f"bahdanau-{name[:-3]}" if name.endswith(".py") else name


def keras_backend_error(environ=os.environ):
    """Why ``KERAS_BACKEND`` cannot be loaded (not a Keras backend, or its package is not
    installed), or None: Keras raises it at import, from whatever imports Keras first."""
    name = environ.get("KERAS_BACKEND")
    if not name:  # Keras reads an empty one as unset
        return None
    if name not in KERAS_BACKENDS:
        return (f"KERAS_BACKEND={name!r} is not a Keras backend; use one of "
                f"{', '.join(KERAS_BACKENDS)}, or unset it (TensorFlow).")
    for package in KERAS_BACKENDS[name]:
        if importlib.util.find_spec(package) is None:
            return (f"KERAS_BACKEND={name!r}, but {package} is not installed: install it, or "
                    "unset KERAS_BACKEND (TensorFlow).")
    return None


def _verbosity_requested(argv) -> bool:
    """Whether the command line or the environment asks for TensorFlow's own lines."""
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
        return True
    names = ("-v", "--v", "--verbosity")
    return any(arg in names or arg.startswith(tuple(n + "=" for n in names)) for arg in argv[1:])


if keras_backend_error() is not None:  # a usage error (README, "Command lines"), before any import
    print(f"{program_name()}: error: {keras_backend_error()}", file=sys.stderr)
    sys.exit(2)
quiet_tensorflow(verbose=_verbosity_requested(sys.argv))
