"""Command lines: thin absl wrappers over the library. Only these modules define flags; the flags
they share, the corpus selection, ``--help`` and the exit codes live in `bahdanau_tf.cli.common`."""
