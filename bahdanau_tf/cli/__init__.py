"""Command lines: thin absl wrappers over the library. Only these modules define flags."""

import os


def require_model_dirs(argv, model_dirs):
    """The usage checks every command reading trained model directories shares."""
    from absl import app

    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if not model_dirs:
        raise app.UsageError("--model_dir is required (a bahdanau-train output directory).")
    for directory in model_dirs:
        if not os.path.exists(directory):  # a model directory or a .keras file
            raise app.UsageError(f"--model_dir={directory!r} does not exist.")
