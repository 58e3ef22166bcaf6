"""Parallel corpora: the embedded Bible with its split, and loaders of the user's own data.

* :func:`load_corpus` -- the embedded English-Spanish Bible (DESIGN.md section 4), with its
  train/dev/test splits (:func:`bible_split`) and, for dev and test, gold word alignments from
  Strong's numbers. Its file lives in this package's directory (``bible-en-es.tsv.gz``).
* :func:`read_lines` (:func:`line_chunks` as a stream), :func:`load_parallel_files`,
  :func:`load_tsv`, :func:`load_tfds` -- the user's own data; :func:`select_corpus` cuts one by split or size.
* :class:`CorpusFiles` -- the user's files as a stream, read as needed (training's source:
  memory and start-up do not grow with the corpus); a bad line is a :class:`CorpusError`
  naming the file and the line, also when tf.data meets it (:func:`corpus_error`).
* :class:`TfdsCorpus` (:func:`tfds_corpus`) -- a ``tensorflow_datasets`` translation set as
  the same stream (WMT'14 En-Fr without a file of one's own), when tfds is installed.

Every loader returns a :class:`ParallelCorpus`; `bahdanau_tf.data` turns one, a
:class:`CorpusFiles` stream or any dataset of string pairs into batches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gzip
import itertools
import os
import re
import sys
import zlib
from typing import Iterator

from bahdanau_tf.corpora.waiting_lines import WaitingLines

__all__ = [
    "ParallelCorpus",
    "CorpusFiles",
    "TfdsCorpus",
    "CorpusError",
    "corpus_error",
    "CORPORA",
    "SPLITS",
    "DIRECTIONS",
    "BIBLE_SPLIT_RULE",
    "bible_split",
    "load_corpus",
    "load_parallel_files",
    "load_tsv",
    "load_tfds",
    "tfds_corpus",
    "read_lines",
    "line_chunks",
    "select_corpus",
]

CORPORA_DIRECTORY = os.path.dirname(os.path.abspath(__file__))
_CORPUS_FILES = {"bible-en-es": "bible-en-es.tsv.gz"}
CORPORA = tuple(_CORPUS_FILES)
SPLITS = ("train", "dev", "test", "all")
DIRECTIONS = ("en-es", "es-en")

BIBLE_SPLIT_RULE = (
    "By chapter: the 1,189 chapters of the 66 books are numbered 0..1188 in canonical order "
    "(Genesis 1 = 0, Revelation 22 = 1188); chapter c is 'test' if c % 16 == 8, 'dev' if "
    "c % 32 == 4, 'train' otherwise. Every verse of a chapter goes to the chapter's split."
)


def bible_split(chapter_index: int) -> str:
    """The split of a Bible chapter (see :data:`BIBLE_SPLIT_RULE`).

    Whole chapters, never single verses, go to dev/test: neighbouring verses repeat each
    other's names and phrases and would leak. Every 16th chapter (test) and every 32nd
    (dev) spreads both over all books and genres.

    Args:
        chapter_index: int, 0 for Genesis 1 ... 1188 for Revelation 22.

    Returns:
        str: "train", "dev" or "test".
    """
    if chapter_index % 16 == 8:
        return "test"
    if chapter_index % 32 == 4:
        return "dev"
    return "train"


@dataclasses.dataclass(frozen=True, eq=False)
class ParallelCorpus:
    """Sentence pairs, optionally with verse ids and gold word alignments.

    Attributes:
        sources: list of str, source sentences.
        targets: list of str, target sentences (same length).
        alignments: None, or one entry per pair: a list of ``(source_word, target_word)``
            index pairs over :func:`bahdanau_tf.text.split_words` of the source and target
            sentence, or None where that pair has no gold alignment. These are all links
            (the "possible" set P of the alignment error rate).
        ids: None, or one id per pair (verse references such as ``"Gen 1:1"``).
        sure_alignments: None, or per pair the subset of ``alignments`` that is sure (the
            set S of the alignment error rate): links whose Strong's number tags exactly one
            phrase on each side.
        name: str, where the pairs come from.
        direction: str or None, e.g. ``"en-es"``.

    Example:

        >>> corpus = load_corpus("bible-en-es", split="test")
        >>> len(corpus), corpus.ids[0], corpus.sources[0][:20]
        (2051, 'Gen 9:1', 'God blessed Noah and')
    """

    sources: list
    targets: list
    alignments: list | None = None
    ids: list | None = None
    sure_alignments: list | None = None
    name: str = ""
    direction: str | None = None

    def __post_init__(self):
        if len(self.sources) != len(self.targets):
            raise ValueError(
                f"sources and targets differ in length: {len(self.sources)} != {len(self.targets)}"
            )
        for field in ("alignments", "sure_alignments", "ids"):
            value = getattr(self, field)
            if value is not None and len(value) != len(self.sources):
                raise ValueError(
                    f"{field} has {len(value)} entries for {len(self.sources)} sentence pairs"
                )

    def __len__(self) -> int:
        return len(self.sources)

    @property
    def references(self) -> list | None:
        """Alias of ``ids`` (verse references for the Bible)."""
        return self.ids

    def pairs(self) -> list[tuple[str, str]]:
        """list of (source, target) tuples."""
        return list(zip(self.sources, self.targets))

    def select(self, indices) -> "ParallelCorpus":
        """A sub-corpus: ``indices`` is a slice or a sequence of ints."""
        if isinstance(indices, slice):
            pick = lambda values: None if values is None else list(values[indices])  # noqa: E731
        else:
            indices = list(indices)
            pick = lambda values: None if values is None else [values[i] for i in indices]  # noqa: E731
        return dataclasses.replace(
            self,
            sources=pick(self.sources),
            targets=pick(self.targets),
            alignments=pick(self.alignments),
            sure_alignments=pick(self.sure_alignments),
            ids=pick(self.ids),
        )

    def chunks(self, size: int) -> Iterator[ParallelCorpus]:
        """Consecutive sub-corpora of ``size`` pairs (the last one shorter), in order: the
        interface `CorpusFiles.chunks` shares, for consumers that stream either."""
        if size < 1:
            raise ValueError(f"`size` must be a positive integer, got {size!r}.")
        for start in range(0, len(self), size):
            yield self.select(slice(start, start + size))


# === The embedded corpus ===


_COLUMNS = ("id", "es_id", "split", "en", "es", "alignment")


@functools.lru_cache(maxsize=None)
def _read_embedded(name: str) -> tuple:
    path = os.path.join(CORPORA_DIRECTORY, _CORPUS_FILES[name])
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"The embedded corpus file {path!r} is missing; rebuild it with "
            "scripts/build_bible_corpus.py (see bahdanau_tf/corpora/README.md)."
        )
    rows = []
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as handle:
        header = handle.readline().rstrip("\n").split("\t")
        if header != list(_COLUMNS):
            raise ValueError(f"Unexpected header {header!r} in {path!r}")
        for line in handle:
            verse_id, _, split, english, spanish, alignment = line.rstrip("\n").split("\t")
            links = sure = None
            if alignment and alignment != "-":
                links, sure = [], []
                for link in alignment.split():
                    separator = "-" if "-" in link else "?"
                    source, target = link.split(separator)
                    links.append((int(source), int(target)))
                    if separator == "-":
                        sure.append(links[-1])
                links, sure = tuple(links), tuple(sure)
            rows.append((verse_id, split, english, spanish, links, sure))
    return tuple(rows)


def load_corpus(name: str = "bible-en-es", split: str = "train", direction: str = "en-es"):
    """Loads an embedded corpus (offline).

    The Bible (World English Bible / Reina-Valera 1909, both public domain) has 31,047
    verse pairs: 27,989 train, 1,007 dev, 2,051 test, split by chapter
    (:data:`BIBLE_SPLIT_RULE`). Dev and test carry gold word alignments from Strong's
    numbers (936 dev and 2,009 test verses; the others have ``None``, see below).

    Args:
        name: str, one of :data:`CORPORA`.
        split: str, "train", "dev", "test" or "all".
        direction: str, "en-es" (English source) or "es-en".

    Returns:
        ParallelCorpus, with ``ids`` such as ``"Gen 1:1"`` (the English verse number) and,
        for dev and test, ``alignments``: per verse a sorted list of ``(source_word,
        target_word)`` pairs oriented by ``direction`` (all links; the sure ones are also in
        ``sure_alignments``), or None where the verse has no reliable gold (the WEB's
        Strong's tags sit under Hebrew verse numbers there; skip those verses when
        scoring). ``alignments`` is None for train and "all".

    Raises:
        ValueError: unknown name, split or direction.
    """
    if name not in _CORPUS_FILES:
        raise ValueError(f"Unknown corpus {name!r}; valid names: {list(CORPORA)}.")
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; valid splits: {list(SPLITS)}.")
    if direction not in DIRECTIONS:
        raise ValueError(f"Unknown direction {direction!r}; valid directions: {list(DIRECTIONS)}.")
    rows = [row for row in _read_embedded(name) if split == "all" or row[1] == split]
    english = [row[2] for row in rows]
    spanish = [row[3] for row in rows]
    alignments = sure_alignments = None
    if split in ("dev", "test"):

        def orient(links):
            if links is None:
                return None
            if direction == "en-es":
                return list(links)
            return sorted((target, source) for source, target in links)

        alignments = [orient(row[4]) for row in rows]
        sure_alignments = [orient(row[5]) for row in rows]
    sources, targets = (english, spanish) if direction == "en-es" else (spanish, english)
    return ParallelCorpus(
        sources=sources,
        targets=targets,
        alignments=alignments,
        sure_alignments=sure_alignments,
        ids=[row[0] for row in rows],
        name=f"{name}/{split}",
        direction=direction,
    )


# === The user's own data ===

#: pairs per batch handed from the file reader to tf.data (`CorpusFiles.pair_batches`)
PAIR_BATCH = 1024
_BOM = b"\xef\xbb\xbf"


class CorpusError(ValueError):
    """A bad line of the user's data: the message names the file and the line.

    Raised by the loaders, and by a `CorpusFiles` stream when it meets the line (while
    training, inside tf.data: `corpus_error` finds it in TensorFlow's error).
    """


def corpus_error(error: BaseException) -> CorpusError | None:
    """The `CorpusError` that a streamed corpus raised inside tf.data, or None.

    tf.data reports an exception of the file reader as a ``tf.errors.InvalidArgumentError``
    whose text holds ``CorpusError: <message>``; this gives the message back its type, so a
    command line prints the one line (``'train.tsv' line 5 has 3 tab-separated column(s)...``).

    >>> corpus_error(RuntimeError("...\\nCorpusError: 'a.tsv' line 2 has 1 column\\nTraceback"))
    CorpusError("'a.tsv' line 2 has 1 column")
    >>> corpus_error(RuntimeError("something else")) is None
    True
    """
    if isinstance(error, CorpusError):
        return error
    match = re.search(r"\bCorpusError: (.*)$", str(error), flags=re.MULTILINE)
    return CorpusError(match.group(1)) if match else None


def _checked_path(path) -> str:
    """``path`` as a str, refused (FileNotFoundError, IsADirectoryError) unless a file."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path!r} is a directory, not a text file.")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such file: {path!r}")
    return path


def _numbered_lines(path, lines_of=None):
    """``(line number, text)`` of every line of a UTF-8 file, read as needed (`read_lines`'s rule).

    ``lines_of``: optional, a function of the opened binary file that gives its lines (default:
    the file itself).
    """
    with contextlib.ExitStack() as opened:
        if path is None or path == "-":
            name, handle = "standard input", sys.stdin.buffer  # left open
        else:
            path = _checked_path(path)
            name, handle = repr(path), opened.enter_context(open(path, "rb"))
            if path.endswith(".gz"):
                handle = opened.enter_context(gzip.GzipFile(fileobj=handle, mode="rb"))
        number = 0
        for line in (handle if lines_of is None else lines_of(handle)):  # cut at \n only:
            # \r\n and a lone \r are handled here
            line = line[:-1] if line.endswith(b"\n") else line
            line = line[:-1] if line.endswith(b"\r") else line
            for piece in line.split(b"\r") if b"\r" in line else (line,):
                number += 1
                if number == 1 and piece.startswith(_BOM):
                    piece = piece[len(_BOM):]
                try:
                    yield number, piece.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise CorpusError(
                        f"{name} line {number} is not valid UTF-8 ({error.reason} at byte "
                        f"{error.start}); convert it, e.g. with iconv.") from None


def read_lines(path: str | None = None) -> list[str]:
    """The lines of a UTF-8 text file (or of standard input), without their line ends.

    The one line rule of the package (corpora, streamed or not, ``bahdanau-translate``,
    ``bahdanau-evaluate``), for every file:

    - ``\n``, ``\r\n`` and a lone ``\r`` (old Mac files) each end a line; Unicode separators
      such as U+2028 do not (they are text). A final line end does not start an empty line.
    - A byte that is not UTF-8 is an error naming the file and the line, never replaced
      silently (a replaced byte would train or translate as [UNK] without a word).
    - A byte-order mark at the start of the file is dropped.
    - A file whose name ends in ``.gz`` is read through gzip.

    Args:
        path: str, a file; None or ``"-"`` reads standard input.

    Returns:
        list of str.

    Raises:
        FileNotFoundError: the file does not exist (IsADirectoryError: it is a directory).
        CorpusError (a ValueError): a line that is not valid UTF-8.
    """
    return [line for _, line in _numbered_lines(path)]


def line_chunks(path: str | None = None, size: int = 10000,
                interactive: bool = False) -> Iterator[list[str]]:
    """The lines of `read_lines`, read as needed and handed out ``size`` at a time.

    A bad line (`CorpusError`) is raised when its chunk is read: the chunks before it have
    already been handed out. Memory is bounded by ``size`` lines, whatever the file's length.

    Args:
        path: str, a file; None or ``"-"`` reads standard input.
        size: int, lines per chunk (the last one may be shorter; an empty file gives none).
        interactive: bool, also hand out a shorter chunk as soon as no more input is waiting
            (a terminal, or a pipe whose writer pauses): each line typed is answered before
            the next is read. Input that is all there (a file) or comes faster than it is
            consumed (a fast pipe) still comes ``size`` lines at a time.

    Yields:
        list of str.
    """
    if size < 1:
        raise ValueError(f"`size` must be a positive integer, got {size!r}.")
    reader = None

    def waiting_lines(handle):
        nonlocal reader
        reader = WaitingLines(handle)
        return reader

    chunk = []
    for _, line in _numbered_lines(path, waiting_lines if interactive else None):
        chunk.append(line)
        if len(chunk) == size or (interactive and not reader.waiting()):
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _tsv_pairs(path, source_column, target_column, columns, skip_header):
    """The (source, target) pairs of a TSV file, read as needed (`load_tsv`'s checks)."""
    needed = max(source_column, target_column) + 1
    for number, line in _numbered_lines(path):
        if (skip_header and number == 1) or not line.strip():
            continue
        count = line.count("\t") + 1
        if count < needed or (columns is not None and count != columns):
            expected = f"{columns}" if columns is not None else f"at least {needed}"
            raise CorpusError(
                f"{os.fspath(path)!r} line {number} has {count} tab-separated column(s), "
                f"{expected} expected: {line[:80]!r}")
        fields = line.split("\t")
        yield fields[source_column], fields[target_column]


def _parallel_pairs(source_path, target_path):
    """The pairs of two parallel text files, read as needed; unequal line counts are an error."""
    sources, targets = _numbered_lines(source_path), _numbered_lines(target_path)
    count = 0
    for source, target in itertools.zip_longest(sources, targets):
        if source is None or target is None:  # one file ended: count the rest of the other
            longer = count + 1 + sum(1 for _ in (sources if target is None else targets))
            source_count, target_count = (longer, count) if target is None else (count, longer)
            raise CorpusError(f"Line counts differ: {os.fspath(source_path)!r} has {source_count} "
                              f"lines, {os.fspath(target_path)!r} has {target_count}.")
        count += 1
        yield source[1], target[1]


@dataclasses.dataclass(frozen=True)
class CorpusFiles:
    """Sentence pairs in the user's files, read as they are needed: never held in memory.

    The training source of ``bahdanau-train --tsv`` / ``--source_file --target_file``: memory
    and start-up do not grow with the file. `bahdanau_tf.data.make_dataset` reads one as a
    tf.data source (`pair_batches`, re-read every epoch); `pairs` gives the same pairs in
    Python. Both check every line as they meet it, with the loaders' messages (`CorpusError`:
    the file and the line number); the loaders (`load_tsv`, `load_parallel_files`) are these
    streams, collected.

    The files are read by Python's buffered reader, not ``tf.data.TextLineDataset``: that one
    drops every ``\r``, which would join the lines of an old Mac file (and of a stray ``\r``)
    instead of following `read_lines`'s rule. Files ending in ``.gz`` are read through gzip.

    Attributes:
        paths: ``(tsv,)``, or ``(source, target)`` for parallel text files.
        source_column, target_column, columns, skip_header: a TSV's layout (`load_tsv`).
        limit: int or None, stop after this many pairs (`select`).
        name: str, where the pairs come from. direction: None (unknown).

    Example:

        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "pairs.tsv")
        >>> _ = open(path, "w").write("Hello.\\tHola.\\nYes\\tSí\\nNo\\tNo\\n")
        >>> stream = CorpusFiles.tsv(path)
        >>> stream.head(2).pairs(), stream.estimated_length(10)
        ([('Hello.', 'Hola.'), ('Yes', 'Sí')], (3, True))
    """

    paths: tuple
    source_column: int = 0
    target_column: int = 1
    columns: int | None = 2
    skip_header: bool = False
    limit: int | None = None
    name: str = ""
    direction: str | None = None

    @classmethod
    def tsv(cls, path: str, source_column: int = 0, target_column: int = 1,
            columns: int | None = 2, skip_header: bool = False, name: str | None = None):
        """A TSV file of pairs (`load_tsv`'s arguments); the file must exist."""
        needed = max(source_column, target_column) + 1
        if columns is not None and columns < needed:
            raise ValueError(f"columns={columns} cannot hold columns {source_column} and "
                             f"{target_column}.")
        _checked_path(path)  # a missing file is refused now, before any work
        return cls((os.fspath(path),), source_column, target_column, columns, skip_header,
                   name=name or os.fspath(path))

    @classmethod
    def parallel(cls, source_path: str, target_path: str, name: str | None = None):
        """Two parallel text files, line i of the target translating line i of the source."""
        for path in (source_path, target_path):
            _checked_path(path)
        return cls((os.fspath(source_path), os.fspath(target_path)),
                   name=name or f"{source_path}+{target_path}")

    def pairs(self) -> Iterator[tuple[str, str]]:
        """The (source, target) str pairs, read from the files as they are consumed.

        Raises:
            CorpusError: at the first bad line (not UTF-8, wrong column count, unequal files).
        """
        if len(self.paths) == 1:
            pairs = _tsv_pairs(self.paths[0], self.source_column, self.target_column,
                               self.columns, self.skip_header)
        else:
            pairs = _parallel_pairs(*self.paths)
        return itertools.islice(pairs, self.limit)

    def pair_batches(self, size: int = PAIR_BATCH) -> Iterator[tuple[list, list]]:
        """``(sources, targets)`` lists of up to ``size`` UTF-8 byte strings: what tf.data reads."""
        pairs = self.pairs()
        while batch := list(itertools.islice(pairs, size)):
            yield [s.encode("utf-8") for s, _ in batch], [t.encode("utf-8") for _, t in batch]

    def chunks(self, size: int) -> Iterator[ParallelCorpus]:
        """The pairs as consecutive `ParallelCorpus` of ``size`` pairs (the last one shorter),
        read as they are consumed: memory bounded by one chunk. A bad line raises
        `CorpusError` when its chunk is read; the chunks before it have been handed out."""
        if size < 1:
            raise ValueError(f"`size` must be a positive integer, got {size!r}.")
        pairs = self.pairs()
        while batch := list(itertools.islice(pairs, size)):
            yield ParallelCorpus(sources=[s for s, _ in batch], targets=[t for _, t in batch],
                                 name=self.name, direction=self.direction)

    def head(self, count: int | None) -> ParallelCorpus:
        """The first ``count`` pairs (None: all of them) in memory."""
        pairs = list(itertools.islice(self.pairs(), count))
        return ParallelCorpus(sources=[s for s, _ in pairs], targets=[t for _, t in pairs],
                              name=self.name, direction=self.direction)

    def select(self, indices: slice) -> "CorpusFiles":
        """The first pairs only (``slice(0, n)``): a stream is cut at its start, nowhere else."""
        if not (isinstance(indices, slice) and indices.start in (None, 0) and indices.step is None):
            raise ValueError(f"A streamed corpus selects its first pairs only, not {indices!r}.")
        limit = indices.stop if self.limit is None else min(indices.stop, self.limit)
        return dataclasses.replace(self, limit=limit)

    def estimated_length(self, sample: int = 10000) -> tuple[int, bool]:
        """``(pairs, exact)``: counted when the corpus has at most ``sample`` pairs, else
        estimated from the bytes per line of its first ``sample`` lines (compressed bytes for
        ``.gz``) and the first file's size, without reading the rest."""
        head = sum(1 for _ in itertools.islice(self.pairs(), sample + 1))
        if head <= sample:
            return head, True
        path = self.paths[0]
        with open(path, "rb") as raw:
            if path.endswith(".gz"):  # inflated in small steps: the compressed bytes read are known
                inflate, lines, consumed = zlib.decompressobj(wbits=31), 0, 0
                while lines < sample and (chunk := raw.read(4096)):
                    consumed, lines = consumed + len(chunk), lines + inflate.decompress(chunk).count(b"\n")
            else:
                lines = sum(1 for _ in itertools.islice(raw, sample))
                consumed = raw.tell()
        estimate = max(sample + 1, round(lines * os.path.getsize(path) / max(consumed, 1)))
        return (estimate if self.limit is None else min(estimate, self.limit)), False


def load_parallel_files(source_path: str, target_path: str, name: str | None = None):
    """Loads two parallel text files, one sentence a line (UTF-8, or gzip'd UTF-8 as ``.gz``).

    Args:
        source_path: str, source sentences.
        target_path: str, target sentences, line i translating line i of the source.
        name: optional str naming the corpus.

    Returns:
        ParallelCorpus (empty lines are kept; :func:`make_dataset` drops empty pairs).
        `CorpusFiles.parallel` streams the same pairs without holding them.

    Raises:
        FileNotFoundError: a file is missing.
        CorpusError (a ValueError): the line counts differ, or a line is not valid UTF-8.
    """
    return CorpusFiles.parallel(source_path, target_path, name).head(None)


def load_tsv(
    path: str,
    source_column: int = 0,
    target_column: int = 1,
    columns: int | None = 2,
    skip_header: bool = False,
    name: str | None = None,
):
    """Loads a tab-separated file of sentence pairs (UTF-8, one pair a line; ``.gz`` too).

    Every non-blank line must have exactly ``columns`` tab-separated columns: a line with a
    stray tab (3 columns) or none (1 column) is an error with its line number, never cut or
    skipped in silence. Blank lines are skipped.

    Args:
        path: str.
        source_column: int, column of the source sentence.
        target_column: int, column of the target sentence.
        columns: int, the column count of every line (2); None accepts any count that holds
            both columns.
        skip_header: bool, ignore the first line.
        name: optional str naming the corpus.

    Returns:
        ParallelCorpus. `CorpusFiles.tsv` streams the same pairs without holding them.

    Raises:
        FileNotFoundError: the file is missing.
        CorpusError (a ValueError): a line with another column count, or not valid UTF-8.
    """
    return CorpusFiles.tsv(path, source_column, target_column, columns, skip_header,
                           name).head(None)


def select_corpus(
    split: str = "train",
    corpus: str = "bible-en-es",
    direction: str = "en-es",
    source_file: str | None = None,
    target_file: str | None = None,
    tsv: str | None = None,
    stream: bool = False,
):
    """The one corpus selector of the command lines: the user's files, else the embedded corpus.

    Args:
        split: the embedded corpus's split, used only when no file is given.
        corpus, direction: the embedded corpus (`load_corpus`).
        source_file, target_file: parallel text files (both or neither).
        tsv: a TSV file of pairs (instead of the two files).
        stream: bool, return the user's files as a `CorpusFiles` stream (training's source:
            never held in memory) instead of loading them. The embedded corpus is always
            loaded (31,047 pairs).

    Returns:
        ParallelCorpus, or CorpusFiles for the user's files with ``stream``.

    Raises:
        ValueError: only one of source_file/target_file, or both a TSV and text files.
        FileNotFoundError: a file is missing.
    """
    if tsv and (source_file or target_file):
        raise ValueError("Give either a TSV file or --source_file/--target_file, not both.")
    if tsv:
        return CorpusFiles.tsv(tsv) if stream else load_tsv(tsv)
    if source_file or target_file:
        if not (source_file and target_file):
            raise ValueError("--source_file and --target_file go together.")
        if stream:
            return CorpusFiles.parallel(source_file, target_file)
        return load_parallel_files(source_file, target_file)
    return load_corpus(corpus, split=split, direction=direction)


@dataclasses.dataclass(frozen=True)
class TfdsCorpus(CorpusFiles):
    """A ``tensorflow_datasets`` translation set as a stream, e.g. ``"wmt14_translate/fr-en"``.

    The same stream as `CorpusFiles` (the training source of the user's files), so it feeds the
    same pipeline stages: `bahdanau_tf.data.make_dataset` reads it through `pair_batches`
    (re-read every epoch), vocabularies learn from `pairs` / `head`, evaluation reads `chunks`.
    Only `pairs` and `estimated_length` differ: the pairs come from ``tfds.load`` (read as
    they are consumed, never held), and the size from the dataset's metadata (exact, without a
    pass). ``tensorflow_datasets`` is imported only here, when the stream is made; nothing is
    downloaded unless ``download=True``: the prepared data must already be in ``data_dir``
    (tfds' default otherwise). Make one with `tfds_corpus`.

    Attributes:
        dataset: str, the tfds name with its config. split: str, a tfds split (``"train"``,
        ``"validation"``, ``"test[:1000]"``, ...). source_language, target_language: str,
        feature keys. data_dir: str or None. download: bool. The `CorpusFiles` attributes
        ``limit`` (`select`), ``name`` and ``direction``; ``paths`` is empty.
    """

    dataset: str = ""
    split: str = "train"
    source_language: str = ""
    target_language: str = ""
    data_dir: str | None = None
    download: bool = False

    def pairs(self) -> Iterator[tuple[str, str]]:
        """The (source, target) str pairs, read from the prepared dataset as they are consumed.

        Raises:
            CorpusError: a sentence that is not valid UTF-8 (its example's index is named).
        """
        tfds = _import_tfds()
        dataset = tfds.load(self.dataset, split=self.split, data_dir=self.data_dir,
                            download=self.download)
        if self.limit is not None:
            dataset = dataset.take(self.limit)
        for index, example in enumerate(tfds.as_numpy(dataset)):
            try:
                yield tuple(example[key].decode("utf-8")
                            for key in (self.source_language, self.target_language))
            except UnicodeDecodeError as error:
                raise CorpusError(
                    f"{self.name} example {index} is not valid UTF-8 ({error.reason} at byte "
                    f"{error.start}).") from None

    def estimated_length(self, sample: int = 10000) -> tuple[int, bool]:
        """``(pairs, True)``: the split's size from the dataset's metadata, without a pass."""
        del sample
        total = _import_tfds().builder(self.dataset, data_dir=self.data_dir).info.splits[
            self.split].num_examples
        return (total if self.limit is None else min(total, self.limit)), True


def _import_tfds():
    try:
        import tensorflow_datasets as tfds
    except ImportError as error:
        raise ImportError(
            "load_tfds needs the optional package tensorflow_datasets: "
            "pip install tensorflow-datasets"
        ) from error
    return tfds


def tfds_corpus(
    name: str,
    split: str = "train",
    source_language: str | None = None,
    target_language: str | None = None,
    data_dir: str | None = None,
    download: bool = False,
) -> TfdsCorpus:
    """A ``tensorflow_datasets`` translation set as a `TfdsCorpus` stream (`load_tfds`'s
    arguments); the languages are checked now, from the dataset's metadata (nothing is read)."""
    tfds = _import_tfds()
    info = tfds.builder(name, data_dir=data_dir).info
    if source_language is None or target_language is None:
        keys = info.supervised_keys or ()
        if len(keys) < 2:
            raise ValueError(f"{name!r} has no supervised keys; pass source/target_language.")
        source_language = source_language or keys[0]
        target_language = target_language or keys[1]
    features = list(info.features.keys())
    for language in (source_language, target_language):
        if language not in features:
            raise ValueError(f"{language!r} is not a feature of {name!r}; features: {features}")
    return TfdsCorpus(paths=(), name=f"{name}/{split}",
                      direction=f"{source_language}-{target_language}", dataset=name,
                      split=split, source_language=source_language,
                      target_language=target_language, data_dir=data_dir, download=download)


def load_tfds(
    name: str,
    split: str = "train",
    source_language: str | None = None,
    target_language: str | None = None,
    data_dir: str | None = None,
    download: bool = False,
    max_examples: int | None = None,
):
    """Loads a ``tensorflow_datasets`` translation set, e.g. ``"wmt14_translate/fr-en"``.

    The first ``max_examples`` pairs of `tfds_corpus` collected in memory; for a whole
    training set, pass `tfds_corpus` itself (a stream) to training. ``tensorflow_datasets``
    is imported only here. Nothing is downloaded unless ``download=True``: the data must
    already be in ``data_dir`` (tfds' default otherwise).

    Args:
        name: str, the tfds name (with config).
        split: str, a tfds split ("train", "validation", "test[:1000]", ...).
        source_language: str feature key of the source, e.g. "fr"; defaults to the dataset's
            first supervised key.
        target_language: str feature key of the target; defaults to the second.
        data_dir: optional str, where the prepared data lives.
        download: bool, allow tfds to download and prepare the data.
        max_examples: optional int, stop after this many pairs.

    Returns:
        ParallelCorpus.

    Raises:
        ImportError: tensorflow_datasets is not installed.
        ValueError: a language key is not a feature of the dataset.
        CorpusError (a ValueError): a sentence that is not valid UTF-8.
    """
    return tfds_corpus(name, split, source_language, target_language, data_dir,
                       download).head(max_examples)
