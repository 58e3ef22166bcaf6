r"""Lines of a file as they arrive, and whether the next one is already waiting: what
`bahdanau_tf.corpora.line_chunks` needs to answer interactive input line by line."""

import collections
import re
import select


#: seconds without input after which a writer has paused: long enough that a fast writer
#: (``cat``, a program writing a file out) refills the pipe and its lines still come 10,000 at a
#: time, short enough not to be noticed by a person (benchmarks/translate_input.py)
PAUSE = 0.1
#: the package's line ends (`bahdanau_tf.corpora.read_lines`)
_LINE_END = re.compile(rb"\r\n|\r|\n")


class WaitingLines:
    r"""The lines of a binary file, each with its line end (``\n``, ``\r\n`` or a lone ``\r``,
    the package's rule), read a block at a time, and whether the next one is already waiting.

    A line is handed out as soon as its end is read: a line ended by ``\r`` too, although a
    ``\n`` may follow in the next block (that ``\n`` is then dropped: ``\r\n`` ends one line).
    A long line's blocks are kept apart and joined once, at its end: time is linear in its
    length (benchmarks/translate_input.py).

    ``waiting()`` is True when a whole line is read but not handed out yet, at the end of the
    input, or when the file descriptor has input to read within `PAUSE` seconds (`select`:
    at once for a regular file, for a pipe whose writer keeps up; not for a terminal or a pipe
    whose writer pauses).
    """

    def __init__(self, handle, block=1 << 16):
        self._handle, self._block = handle, block
        self._lines = collections.deque()
        self._partial = []  # the blocks of the line read so far
        self._ended, self._after_cr = False, False
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
                    self._lines.append(b"".join(self._partial))
                continue
            self._split(data)
        return self._lines.popleft()

    def _split(self, data):
        """Hands out the lines that ``data`` ends; keeps its unended rest."""
        if self._after_cr and data.startswith(b"\n"):  # the \n of a \r\n cut between reads
            data = data[1:]
        self._after_cr = data.endswith(b"\r")
        start = 0
        for end in _LINE_END.finditer(data):
            self._partial.append(data[start:end.end()])
            self._lines.append(b"".join(self._partial))
            self._partial, start = [], end.end()
        if start < len(data):
            self._partial.append(data[start:])

    def waiting(self, pause: float = PAUSE) -> bool:
        if self._lines or self._ended or self._fd is None:
            return True
        try:
            readable, _, _ = select.select([self._fd], [], [], pause)
        except (OSError, ValueError):  # a descriptor select cannot watch: read on as before
            return True
        return bool(readable)
