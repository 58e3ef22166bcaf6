"""The TF Serving deployment kit (the repository's ``export/``), shipped inside the package.

``export/`` holds ``models.config``, ``batching_parameters.txt``, the REST and gRPC clients and
their README. The wheel and the sdist carry it as package data (``bahdanau_tf/_serving_kit/``,
see pyproject.toml), so a pip install has it too; `write_kit` copies it out where a server or a
notebook can use it:

    python -m bahdanau_tf.serving_kit kit/     # writes kit/models.config, kit/client_rest.py, ...

No TensorFlow is imported here.
"""

import os
import shutil
import sys

# in a wheel: the kit as package data; in a checkout: export/ beside the package
_INSTALLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_serving_kit")
_CHECKOUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "export")
KIT_FILES = ("README.md", "models.config", "batching_parameters.txt", "client_rest.py",
             "client_grpc.py")


def kit_directory() -> str:
    """Where the kit's files are: the installed package data, or the checkout's ``export/``."""
    for directory in (_INSTALLED, _CHECKOUT):
        if all(os.path.isfile(os.path.join(directory, name)) for name in KIT_FILES):
            return directory
    raise FileNotFoundError(f"The serving kit is neither in {_INSTALLED} nor in {_CHECKOUT}: "
                            "reinstall bahdanau_tf.")


def write_kit(directory) -> str:
    """Copies the kit's files into ``directory`` (made if needed; existing files replaced).

    Returns:
        str, ``directory``.
    """
    source = kit_directory()
    os.makedirs(directory, exist_ok=True)
    for name in KIT_FILES:
        shutil.copyfile(os.path.join(source, name), os.path.join(directory, name))
    return directory


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m bahdanau_tf.serving_kit DIRECTORY  (writes "
              + ", ".join(KIT_FILES) + ")", file=sys.stderr)
        return 2
    try:
        write_kit(argv[0])
    except OSError as error:
        print(f"bahdanau_tf.serving_kit: error: {argv[0]!r}: {error.strerror or error}",
              file=sys.stderr)
        return 2
    print(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
