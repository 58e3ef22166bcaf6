"""The settings of a translator's search beyond `BeamSearch`: how much is read and how long a
translation may grow (`LengthLimits`), and how a batch of sentences is searched (`Batching`).

`bahdanau_tf.translator.Translator` takes them whole (``limits=``, ``batching=``), beside its
default `BeamSearch`; each is a frozen value, validated here where it is built.
"""

import dataclasses
from typing import Optional

import numpy as np

MAX_BEAM_SIZE = 64  # the widest beam a translator searches (translate_nbest clamps to it)
# padded source widths ([END] included) of the XLA search: few shapes, little padding
DEFAULT_LENGTH_BUCKETS = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def check_int(name, value, low, high=None):
    """Refuses (ValueError, quoting it) a ``value`` that is not an int in ``[low, high]``."""
    if (not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low
            or (high is not None and value > high)):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an int {bound}, got {value!r}.")


@dataclasses.dataclass(frozen=True)
class LengthLimits:
    """How much of a source is read and how long its translation may grow.

    Attributes:
        max_source_length: int >= 1, inputs are cut to this many tokens (100).
        max_length_ratio: float >= 0, a translation has at most ``ceil(max_length_ratio * n) +
            max_length_offset`` tokens, ``[END]`` included, n the (cut) source length (2.0).
        max_length_offset: int >= 0 (10).

    Raises:
        ValueError: a value out of range, quoted.

    Example:

        Translator(model, source, target, limits=LengthLimits(max_source_length=50))
    """

    max_source_length: int = 100
    max_length_ratio: float = 2.0
    max_length_offset: int = 10

    def __post_init__(self):
        check_int("max_source_length", self.max_source_length, 1)
        check_int("max_length_offset", self.max_length_offset, 0)
        ratio = self.max_length_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float, np.number)) or not ratio >= 0:
            raise ValueError(f"max_length_ratio must be a float >= 0, got {ratio!r}.")
        # Python values: hashable, and equal to any other spelling of the same limits
        object.__setattr__(self, "max_source_length", int(self.max_source_length))
        object.__setattr__(self, "max_length_ratio", float(ratio))
        object.__setattr__(self, "max_length_offset", int(self.max_length_offset))


@dataclasses.dataclass(frozen=True)
class Batching:
    """How the search runs: in chunks, slots and compiled shapes. None of it changes a
    translation (up to float rounding), only what it costs; see the module docstring.

    Attributes:
        jit_compile: bool, compile `Translator.translate`'s search with XLA, over bucketed
            shapes; None (default): `bahdanau_tf.devices.decoding_jit` (yes).
        serving_jit_compile: bool, compile the search of the exported signatures with XLA
            (False: TF Serving runs XLA:CPU only with ``--xla_cpu_compilation_enabled``).
        chunk_size: int >= 1, sentences handed to one search (64); a batch is sorted by length
            and searched chunk after chunk.
        slots: int >= 1, sentences the search keeps in flight, each finished one's slot
            refilled with the next of its chunk; None: `bahdanau_tf.devices.decoding_slots` for
            the beam (on a CPU 64 for greedy search, 32 for beam 5).
        length_buckets: increasing ints >= 2, the padded source widths (tokens + ``[END]``) the
            XLA search is compiled for; wider sources use ``max_source_length + 1``.

    Raises:
        ValueError: a value out of range, quoted.

    Example:

        Translator.from_directory("runs/rnnsearch", batching=Batching(jit_compile=False))
    """

    jit_compile: Optional[bool] = None
    serving_jit_compile: bool = False
    chunk_size: int = 64
    slots: Optional[int] = None
    length_buckets: tuple = DEFAULT_LENGTH_BUCKETS

    def __post_init__(self):
        check_int("chunk_size", self.chunk_size, 1)
        if self.slots is not None:
            check_int("slots", self.slots, 1)
        buckets = tuple(self.length_buckets)
        for bucket in buckets:
            check_int("length_buckets", bucket, 2)
        if list(buckets) != sorted(set(buckets)):
            raise ValueError(f"length_buckets must be increasing, got {buckets!r}.")
        for name in ("jit_compile", "serving_jit_compile"):
            value = getattr(self, name)
            if not (isinstance(value, (bool, np.bool_)) or (value is None and name == "jit_compile")):
                raise ValueError(f"{name} must be a bool, got {value!r}.")
            object.__setattr__(self, name, None if value is None else bool(value))
        object.__setattr__(self, "chunk_size", int(self.chunk_size))
        object.__setattr__(self, "slots", None if self.slots is None else int(self.slots))
        object.__setattr__(self, "length_buckets", tuple(int(b) for b in buckets))


__all__ = ["Batching", "LengthLimits", "DEFAULT_LENGTH_BUCKETS", "MAX_BEAM_SIZE"]
