"""Command lines: thin absl wrappers over the library. Only these modules define flags."""
