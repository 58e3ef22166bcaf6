"""Lines of a file as they arrive, and whether the next one is already waiting: what
`bahdanau_tf.corpora.line_chunks` needs to answer interactive input line by line."""

import collections
import select


#: seconds without input after which a writer has paused: long enough that a fast writer
#: (``cat``, a program writing a file out) refills the pipe and its lines still come 10,000 at a
#: time, short enough not to be noticed by a person (benchmarks/translate_input.py)
PAUSE = 0.1


class WaitingLines:
    r"""The lines of a binary file as ``for line in file`` gives them (each ending after its
    ``\n``), read a block at a time, and whether the next one is already waiting.

    ``waiting()`` is True when a whole line is read but not handed out yet, at the end of the
    input, or when the file descriptor has input to read within `PAUSE` seconds (`select`:
    at once for a regular file, for a pipe whose writer keeps up; not for a terminal or a pipe
    whose writer pauses).
    """

    def __init__(self, handle, block=1 << 16):
        self._handle, self._block = handle, block
        self._lines = collections.deque()
        self._partial, self._ended = b"", False
        try:
            self._fd = handle.fileno()
        except (AttributeError, OSError, ValueError):  # an in-memory file: everything is waiting
            self._fd = None

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        while not self._lines:
            if self._ended:
                raise StopIteration
            data = self._handle.read1(self._block)  # at most one read: what is there now
            if not data:
                self._ended = True
                if self._partial:
                    self._lines.append(self._partial)
                continue
            pieces = (self._partial + data).split(b"\n")
            self._partial = pieces.pop()
            self._lines.extend(piece + b"\n" for piece in pieces)
        return self._lines.popleft()

    def waiting(self, pause: float = PAUSE) -> bool:
        if self._lines or self._ended or self._fd is None:
            return True
        try:
            readable, _, _ = select.select([self._fd], [], [], pause)
        except (OSError, ValueError):  # a descriptor select cannot watch: read on as before
            return True
        return bool(readable)
