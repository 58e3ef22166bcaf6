"""Progress of the long commands (``bahdanau-translate``, ``bahdanau-evaluate``) on stderr.

One line: sentences done / total (when known), sentences per second and the time left, as
``bahdanau-evaluate: DONE / TOTAL sentences  RATE sentences/s  ETA M:SS``. On a terminal the
line is rewritten in place (at most 5 times a second) and ends with a newline when the work ends;
with ``--progress`` into a file or a pipe, a line is printed every 10 seconds and at the end.
Without ``--progress`` it shows only when stderr is a terminal: pipelines and tests see only
the results.

The translator is wrapped (`ProgressTranslator`): each ``translate`` call tells the line of
each of its batches as it is done (``Translator.translate``'s ``verbose``).
"""

import os
import sys
import time

from absl import flags

FLAGS = flags.FLAGS


def define_progress_flag():
    """``--progress``, listed by ``--help`` among the flags of the command that defines it."""
    if "progress" not in FLAGS:
        caller = sys._getframe(1).f_globals["__name__"]
        flags.DEFINE_bool("progress", None, "Show progress on stderr (sentences done / total, "
                          "sentences/s, ETA); default: only when stderr is a terminal. "
                          "--noprogress never shows it.", module_name=caller)


def line_count(path):
    """The number of lines of an uncompressed file (the progress total), by the line reader's
    rule (a line feed, CR LF and a lone carriage return each end a line); None for stdin or .gz."""
    if not path or path == "-" or path.endswith(".gz") or not os.path.isfile(path):
        return None
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            count += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")
            count -= last == b"\r" and block.startswith(b"\n")  # a \r\n cut between blocks
            last = block[-1:]
    return count + (last not in (b"\n", b"\r"))


def _clock(seconds):
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """Counts sentences and shows the progress line (see the module docstring).

    Args:
        program: str, the command's name, at the start of the line.
        total: int or None (unknown: no ETA).
        enabled: bool or None (None: when ``stream`` is a terminal).
        stream: where the line goes (default: sys.stderr).
    """

    def __init__(self, program, total=None, enabled=None, stream=None):
        self.stream = stream or sys.stderr
        self.terminal = _is_terminal(self.stream)
        self.enabled = self.terminal if enabled is None else bool(enabled)
        self.program, self.total, self.done = program, total, 0
        self._start = time.monotonic()
        self._shown = None  # when the last line was shown
        self._shown_done = None  # and the count it showed
        self._width = 0

    def add(self, count):
        """``count`` more sentences are done (`keras.utils.Progbar`'s name, which
        `bahdanau_tf.translator.Translator.translate` calls)."""
        self.done += count
        if not self.enabled:
            return
        now = time.monotonic()
        interval = 0.2 if self.terminal else 10.0
        if self._shown is None or now - self._shown >= interval:
            self._show(now)

    def line(self, now=None):
        """The progress line (without its end)."""
        elapsed = max((now or time.monotonic()) - self._start, 1e-9)
        rate = self.done / elapsed
        total = f" / {self.total:,}" if self.total else ""
        text = f"{self.program}: {self.done:,}{total} sentences  {rate:,.1f} sentences/s"
        if self.total and rate > 0:
            text += f"  ETA {_clock(max(self.total - self.done, 0) / rate)}"
        return text + f"  ({_clock(elapsed)})"

    def _show(self, now):
        text = self.line(now)
        if self.terminal:  # rewritten in place; the spaces clear a longer previous line
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._shown, self._shown_done = now, self.done

    def close(self):
        """The last line (when anything was shown or done, and unless the line shown last
        already counts everything), ended."""
        if not self.enabled or (self._shown is None and not self.done):
            return
        if self._shown_done != self.done:
            self._show(time.monotonic())
        if self.terminal:
            self.stream.write("\n")
            self.stream.flush()


def _is_terminal(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class ProgressTranslator:
    """A Translator whose ``translate`` counts its sentences into a `Progress`, batch by batch
    (``Translator.translate``'s ``verbose``, which tells it each batch as it is done).

    Every other attribute is the translator's own.
    """

    def __init__(self, translator, progress):
        self._translator, self._progress = translator, progress

    def __getattr__(self, name):
        return getattr(self._translator, name)

    def translate(self, sentences, *args, **kwargs):
        return self._translator.translate(sentences, *args, verbose=self._progress, **kwargs)
