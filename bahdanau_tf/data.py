"""Parallel corpora and the tf.data input pipeline.

* :func:`load_corpus` -- the embedded English-Spanish Bible (DESIGN.md section 4), with its
  train/dev/test splits and, for dev and test, gold word alignments from Strong's numbers.
* :func:`load_parallel_files`, :func:`load_tsv`, :func:`load_tfds` -- the user's own data.
* :func:`make_dataset` -- tokenisation inside tf.data, the paper's length limits and
  bucketing (section 4 / appendix B.2), padded batches ready for ``model.fit``.

Every loader returns a :class:`ParallelCorpus`.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import os
from typing import Iterable, Sequence

import tensorflow as tf

from bahdanau_tf.special_tokens import END_ID, PAD_ID, START_ID

__all__ = [
    "ParallelCorpus",
    "CORPORA",
    "SPLITS",
    "DIRECTIONS",
    "BIBLE_SPLIT_RULE",
    "bible_split",
    "load_corpus",
    "load_parallel_files",
    "load_tsv",
    "load_tfds",
    "make_dataset",
    "count_pairs",
    "read_lines",
    "select_corpus",
    "fill_batch",
    "pad_batch",
    "BUCKETING_MODES",
]

CORPORA_DIRECTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpora")
_CORPUS_FILES = {"bible-en-es": "bible-en-es.tsv.gz"}
CORPORA = tuple(_CORPUS_FILES)
SPLITS = ("train", "dev", "test", "all")
DIRECTIONS = ("en-es", "es-en")
BUCKETING_MODES = ("paper", "token_budget", None)

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


def read_lines(path: str | None = None) -> list[str]:
    """The lines of a UTF-8 text file (or of standard input), without their line ends.

    The one line reader of the package (corpora, ``bahdanau-translate``, ``bahdanau-evaluate``),
    with one rule for every file:

    - ``\n``, ``\r\n`` and a lone ``\r`` (old Mac files) each end a line; Unicode separators
      such as U+2028 do not (they are text). A final line end does not start an empty line.
    - A byte that is not UTF-8 is an error naming the file and the line, never replaced
      silently (a replaced byte would train or translate as [UNK] without a word).
    - A byte-order mark at the start of the file is dropped.

    Args:
        path: str, a file; None or ``"-"`` reads standard input.

    Returns:
        list of str.

    Raises:
        FileNotFoundError: the file does not exist (IsADirectoryError: it is a directory).
        ValueError: a line that is not valid UTF-8.
    """
    if path is None or path == "-":
        import sys

        name, raw = "standard input", sys.stdin.buffer.read()
    else:
        path = os.fspath(path)
        if os.path.isdir(path):
            raise IsADirectoryError(f"{path!r} is a directory, not a text file.")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"No such file: {path!r}")
        with open(path, "rb") as handle:
            name, raw = repr(path), handle.read()
    raw_lines = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # the final line end ends the last line, it does not start a new one
    lines = []
    for number, raw_line in enumerate(raw_lines, start=1):
        try:
            lines.append(raw_line.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ValueError(f"{name} line {number} is not valid UTF-8 ({error.reason} at byte "
                             f"{error.start}); convert it, e.g. with iconv.") from None
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return lines


def load_parallel_files(source_path: str, target_path: str, name: str | None = None):
    """Loads two parallel text files, one sentence a line (UTF-8).

    Args:
        source_path: str, source sentences.
        target_path: str, target sentences, line i translating line i of the source.
        name: optional str naming the corpus.

    Returns:
        ParallelCorpus (empty lines are kept; :func:`make_dataset` drops empty pairs).

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: the line counts differ, or a line is not valid UTF-8.
    """
    sources = read_lines(source_path)
    targets = read_lines(target_path)
    if len(sources) != len(targets):
        raise ValueError(
            f"Line counts differ: {source_path!r} has {len(sources)} lines, "
            f"{target_path!r} has {len(targets)}."
        )
    return ParallelCorpus(
        sources=sources, targets=targets, name=name or f"{source_path}+{target_path}"
    )


def load_tsv(
    path: str,
    source_column: int = 0,
    target_column: int = 1,
    columns: int | None = 2,
    skip_header: bool = False,
    name: str | None = None,
):
    """Loads a tab-separated file of sentence pairs (UTF-8, one pair a line).

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
        ParallelCorpus.

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: a line with another column count, or not valid UTF-8.
    """
    lines = read_lines(path)
    first = 1
    if skip_header:
        lines, first = lines[1:], 2
    needed = max(source_column, target_column) + 1
    if columns is not None and columns < needed:
        raise ValueError(f"columns={columns} cannot hold columns {source_column} and {target_column}.")
    sources, targets = [], []
    for number, line in enumerate(lines, start=first):
        if not line.strip():
            continue
        count = line.count("\t") + 1
        if count < needed or (columns is not None and count != columns):
            expected = f"{columns}" if columns is not None else f"at least {needed}"
            raise ValueError(
                f"{os.fspath(path)!r} line {number} has {count} tab-separated column(s), "
                f"{expected} expected: {line[:80]!r}"
            )
        fields = line.split("\t")
        sources.append(fields[source_column])
        targets.append(fields[target_column])
    return ParallelCorpus(sources=sources, targets=targets, name=name or os.fspath(path))


def select_corpus(
    split: str = "train",
    corpus: str = "bible-en-es",
    direction: str = "en-es",
    source_file: str | None = None,
    target_file: str | None = None,
    tsv: str | None = None,
):
    """The one corpus selector of the command lines: the user's files, else the embedded corpus.

    Args:
        split: the embedded corpus's split, used only when no file is given.
        corpus, direction: the embedded corpus (`load_corpus`).
        source_file, target_file: parallel text files (both or neither).
        tsv: a TSV file of pairs (instead of the two files).

    Returns:
        ParallelCorpus.

    Raises:
        ValueError: only one of source_file/target_file, or both a TSV and text files.
        FileNotFoundError: a file is missing.
    """
    if tsv and (source_file or target_file):
        raise ValueError("Give either a TSV file or --source_file/--target_file, not both.")
    if tsv:
        return load_tsv(tsv)
    if source_file or target_file:
        if not (source_file and target_file):
            raise ValueError("--source_file and --target_file go together.")
        return load_parallel_files(source_file, target_file)
    return load_corpus(corpus, split=split, direction=direction)


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

    ``tensorflow_datasets`` is imported only here. Nothing is downloaded unless
    ``download=True``: the data must already be in ``data_dir`` (tfds' default otherwise).

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
    """
    try:
        import tensorflow_datasets as tfds
    except ImportError as error:
        raise ImportError(
            "load_tfds needs the optional package tensorflow_datasets: "
            "pip install tensorflow-datasets"
        ) from error
    dataset, info = tfds.load(
        name, split=split, data_dir=data_dir, download=download, with_info=True
    )
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
    if max_examples is not None:
        dataset = dataset.take(max_examples)
    sources, targets = [], []
    for example in tfds.as_numpy(dataset):
        sources.append(example[source_language].decode("utf-8", errors="replace"))
        targets.append(example[target_language].decode("utf-8", errors="replace"))
    return ParallelCorpus(
        sources=sources,
        targets=targets,
        name=f"{name}/{split}",
        direction=f"{source_language}-{target_language}",
    )


# === tf.data ===


def _as_string_dataset(corpus_or_pairs) -> tuple[tf.data.Dataset, int | None]:
    if isinstance(corpus_or_pairs, tf.data.Dataset):
        return corpus_or_pairs, None
    if isinstance(corpus_or_pairs, ParallelCorpus):
        sources, targets = corpus_or_pairs.sources, corpus_or_pairs.targets
    else:
        pairs = list(corpus_or_pairs)
        for index, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(
                    f"make_dataset expects a ParallelCorpus, a tf.data.Dataset of (source, "
                    f"target) strings or a sequence of (source, target) pairs; item {index} "
                    f"is {pair!r:.80}"
                )
        sources = [pair[0] for pair in pairs]
        targets = [pair[1] for pair in pairs]
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.constant(sources, dtype=tf.string, shape=[len(sources)]),
         tf.constant(targets, dtype=tf.string, shape=[len(targets)]))
    )
    return dataset, len(sources)


def _lengths(ids: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(tf.cast(tf.not_equal(ids, PAD_ID), tf.int32), axis=-1)


def _trim(ids: tf.Tensor) -> tf.Tensor:
    """Cuts the padding columns a sub-batch of a wider window does not need."""
    return ids[:, : tf.reduce_max(_lengths(ids))]


def _keep(source_length, target_length, max_length):
    """The length filter of `make_dataset` (tensors or NumPy arrays of token counts)."""
    ok = (source_length > 0) & (target_length > 0)
    if max_length is not None:
        ok &= (source_length <= max_length) & (target_length <= max_length)
    return ok


def _pair_lengths(dataset, source_tokenizer, target_tokenizer):
    """Token counts (source, target), NumPy int arrays, of every pair of a string dataset."""
    import numpy as np

    def lengths(sources, targets):
        return (source_tokenizer.tokenize(sources).row_lengths(),
                target_tokenizer.tokenize(targets).row_lengths())

    source_lengths, target_lengths = [np.zeros([0], np.int64)], [np.zeros([0], np.int64)]
    for source, target in dataset.batch(1024).map(lengths, num_parallel_calls=tf.data.AUTOTUNE):
        source_lengths.append(source.numpy())
        target_lengths.append(target.numpy())
    return np.concatenate(source_lengths), np.concatenate(target_lengths)


def _kept_lengths(dataset, source_tokenizer, target_tokenizer, max_length):
    """Token counts (source, target), NumPy int arrays, of the pairs `make_dataset` keeps."""
    source_lengths, target_lengths = _pair_lengths(dataset, source_tokenizer, target_tokenizer)
    keep = _keep(source_lengths, target_lengths, max_length)
    return source_lengths[keep], target_lengths[keep]


def count_pairs(corpus_or_pairs, source_tokenizer, target_tokenizer,
                max_length: int | None = 50) -> dict:
    """What `make_dataset`'s filter keeps and drops, counted in one tokenisation pass.

    One pass over the corpus (about as long as one pass of the input pipeline).

    Args:
        corpus_or_pairs, source_tokenizer, target_tokenizer, max_length: as in `make_dataset`.

    Returns:
        dict of ints: ``total``; ``kept``; ``empty`` (a side without any token); ``too_long``
        (a non-empty pair with a side of more than ``max_length`` tokens).
    """
    dataset, _ = _as_string_dataset(corpus_or_pairs)
    source_lengths, target_lengths = _pair_lengths(dataset, source_tokenizer, target_tokenizer)
    kept = int(_keep(source_lengths, target_lengths, max_length).sum())
    empty = int(((source_lengths == 0) | (target_lengths == 0)).sum())
    total = len(source_lengths)
    return {"total": total, "kept": kept, "empty": empty, "too_long": total - kept - empty}


def _token_budget_buckets(batch_size, max_length, tokens_per_batch):
    """Boundaries and per-bucket batch sizes of the ``"token_budget"`` bucketing."""
    longest = (max_length or 100) + 1
    boundaries = list(range(5, longest + 1, 5))
    budget = tokens_per_batch or batch_size * ((max_length or 50) // 2)
    upper_bounds = [b - 1 for b in boundaries] + [longest if max_length else 2 * longest]
    return boundaries, [max(1, budget // bound) for bound in upper_bounds]


def _number_of_batches(source_lengths, target_lengths, batch_size, bucketing, drop_remainder,
                       max_length, tokens_per_batch):
    """How many batches one epoch of `make_dataset` yields, from the kept pairs' lengths."""
    import numpy as np

    def batches(count, size, drop):
        return count // size if drop else -(-count // size)

    if bucketing == "token_budget":
        boundaries, sizes = _token_budget_buckets(batch_size, max_length, tokens_per_batch)
        # bucket_by_sequence_length: bucket i holds boundaries[i-1] <= length < boundaries[i]
        lengths = np.maximum(source_lengths, target_lengths) + 1  # [END] included
        counts = np.bincount(np.searchsorted(boundaries, lengths, side="right"),
                             minlength=len(sizes))
        return int(sum(batches(int(c), size, drop_remainder) for c, size in zip(counts, sizes)))
    # the paper's windows hold a multiple of batch_size pairs: only the last batch is short
    return batches(len(source_lengths), batch_size, drop_remainder and bucketing is None)


def make_dataset(
    corpus_or_pairs,
    source_tokenizer,
    target_tokenizer,
    batch_size: int = 80,
    max_length: int | None = 50,
    bucketing: str | None = "paper",
    shuffle: bool = True,
    seed: int = 1234,
    repeat: bool = False,
    batches_per_window: int = 20,
    tokens_per_batch: int | None = None,
    shuffle_buffer_size: int | None = None,
    drop_remainder: bool = False,
    pad_to_multiple: int | None = None,
) -> tf.data.Dataset:
    """Builds the training/evaluation input pipeline.

    Tokenisation runs inside tf.data (batched ``map`` with the tokenizers' graph ops). Each
    pair becomes::

        source_ids        = tokens(source) + [END]
        target_input_ids  = [START] + tokens(target)
        target_output_ids = tokens(target) + [END]

    padded with ``PAD_ID = 0``. Pairs with an empty side, or more than ``max_length`` tokens
    on either side (before ``[END]``), are dropped: the paper's RNNsearch-30 / -50 length
    limits. This is the only length cut in training; tokenizers never cut.

    Bucketing:

    * ``"paper"`` (appendix B.2): take ``batches_per_window * batch_size`` pairs (1,600 for
      20 x 80), sort them by length (the longer side's, ties by target length), cut them into
      ``batches_per_window`` minibatches, each padded only to its own longest sentence;
      with ``shuffle`` the order of the minibatches inside the window is shuffled too.
    * ``"token_budget"``: ``tf.data.Dataset.bucket_by_sequence_length`` with buckets every 5
      tokens and a batch size of ``tokens_per_batch // bucket_length`` per bucket.
    * ``None``: plain padded batches in corpus (or shuffled) order.

    Cardinality: for a corpus or a list of pairs the dataset knows its length
    (``dataset.cardinality()``, `len(dataset)`), so Keras's ``fit`` shows steps and an ETA and
    does not warn at the end of an epoch. The pairs that survive the length filter are counted
    with one extra tokenisation pass when the dataset is built (`count_pairs`: 3.5 s for the
    Bible's 27,989 training pairs with word vocabularies on a 2-core CPU, against 5.5 s for one
    epoch of the pipeline); a repeated dataset is infinite; a ``tf.data.Dataset`` input keeps an
    unknown length.

    Shapes: every batch is padded to its own longest sentence, so an epoch meets many shapes.
    Compiled ``fit`` (XLA; Keras's default on a GPU) compiles once per shape; with
    ``pad_to_multiple`` lengths are padded up to a multiple (`pad_batch`), which bounds the
    count. One epoch of the Bible's train split (24,844 pairs of at most 50 subword tokens,
    batch 64, paper bucketing; ``benchmarks/dataset_shapes.py``): 389 batches in 65 distinct
    ``(rows, source length, target length)`` shapes with 6.5% target padding; 12 shapes and
    14.8% with ``pad_to_multiple=8``; 8 shapes and 23.3% with 16 (one shape of each is the
    epoch's short last batch). Padding is masked everywhere.

    Args:
        corpus_or_pairs: ParallelCorpus, sequence of (source, target) str pairs, or a
            tf.data.Dataset of (source, target) tf.string scalars.
        source_tokenizer: a tokenizer of :mod:`bahdanau_tf.text` (any ``tf.Module`` with
            ``tokenize(strings) -> ragged int ids``).
        target_tokenizer: likewise, for the target language.
        batch_size: int, pairs per minibatch (80 in the paper).
        max_length: int or None, the length limit in tokens (50 or 30); None keeps all.
        bucketing: "paper", "token_budget" or None.
        shuffle: bool, shuffle the pairs (seeded; reshuffled every epoch when repeating).
        seed: int, the shuffle seed; the same seed gives the same batches.
        repeat: bool, repeat forever (for step-based training).
        batches_per_window: int, minibatches per sorted window (20 in the paper).
        tokens_per_batch: int, the token budget of ``"token_budget"`` bucketing; defaults
            to ``batch_size * max_length // 2`` (``batch_size * 25`` without a limit).
        shuffle_buffer_size: int, defaults to the corpus size (10,000 for a Dataset input).
        drop_remainder: bool, drop a final batch smaller than ``batch_size`` (plain and
            token-budget batching).
        pad_to_multiple: int or None, pad both lengths of every batch up to a multiple of this
            (never beyond ``max_length + 1``): a bounded number of shapes for XLA.

    Returns:
        tf.data.Dataset of ``((source_ids, target_input_ids), target_output_ids)``, each
        tf.int32 [batch, length].

    Example:

        >>> corpus = load_corpus("bible-en-es", split="dev")
        >>> en = WordTokenizer.build(corpus.sources); es = WordTokenizer.build(corpus.targets)
        >>> (source, target_in), target_out = next(iter(make_dataset(corpus, en, es)))
    """
    if bucketing not in BUCKETING_MODES:
        raise ValueError(f"Unknown bucketing {bucketing!r}; valid values: {list(BUCKETING_MODES)}.")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
        raise ValueError(f"max_length must be a positive int or None, got {max_length!r}.")
    if batches_per_window < 1:
        raise ValueError(f"batches_per_window must be >= 1, got {batches_per_window!r}.")
    if tokens_per_batch is not None and tokens_per_batch < 1:
        raise ValueError(f"tokens_per_batch must be >= 1, got {tokens_per_batch!r}.")
    if pad_to_multiple is not None and (not isinstance(pad_to_multiple, int)
                                        or isinstance(pad_to_multiple, bool) or pad_to_multiple < 1):
        raise ValueError(f"pad_to_multiple must be a positive int or None, got {pad_to_multiple!r}.")

    dataset, size = _as_string_dataset(corpus_or_pairs)
    cardinality = None
    if repeat:
        cardinality = tf.data.INFINITE_CARDINALITY
    elif size is not None:
        cardinality = _number_of_batches(
            *_kept_lengths(dataset, source_tokenizer, target_tokenizer, max_length),
            batch_size, bucketing, drop_remainder, max_length, tokens_per_batch)
    if shuffle:
        buffer = shuffle_buffer_size or size or 10000
        dataset = dataset.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()

    def tokenize(sources, targets):
        return (
            tf.cast(source_tokenizer.tokenize(sources), tf.int32),
            tf.cast(target_tokenizer.tokenize(targets), tf.int32),
        )

    dataset = dataset.batch(512).map(tokenize, num_parallel_calls=tf.data.AUTOTUNE).unbatch()

    def keep(source, target):
        return _keep(tf.size(source), tf.size(target), max_length)

    def add_special_ids(source, target):
        end, start = tf.constant([END_ID], tf.int32), tf.constant([START_ID], tf.int32)
        return (
            tf.concat([source, end], 0),
            tf.concat([start, target], 0),
            tf.concat([target, end], 0),
        )

    dataset = dataset.filter(keep).map(add_special_ids, num_parallel_calls=tf.data.AUTOTUNE)
    padded_shapes = ([None], [None], [None])

    if bucketing is None:
        dataset = dataset.padded_batch(
            batch_size, padded_shapes=padded_shapes, drop_remainder=drop_remainder
        )
    elif bucketing == "token_budget":
        boundaries, bucket_batch_sizes = _token_budget_buckets(batch_size, max_length, tokens_per_batch)
        dataset = dataset.bucket_by_sequence_length(
            element_length_func=lambda s, ti, to: tf.maximum(tf.size(s), tf.size(to)),
            bucket_boundaries=boundaries,
            bucket_batch_sizes=bucket_batch_sizes,
            padded_shapes=padded_shapes,
            drop_remainder=drop_remainder,
        )
    else:
        window_size = batch_size * batches_per_window
        dataset = dataset.padded_batch(window_size, padded_shapes=padded_shapes).enumerate()

        def window_to_batches(window_index, window):
            source, target_in, target_out = window
            # the longer side first, then the target: both sides of a minibatch stay dense
            # (on the Bible at batch 64, 90% / 93% of source / target cells are real tokens,
            # against 96% / 73% when sorting by the source alone)
            source_lengths, target_lengths = _lengths(source), _lengths(target_out)
            bound = tf.maximum(tf.shape(source)[1], tf.shape(target_out)[1]) + 1
            key = tf.maximum(source_lengths, target_lengths) * bound + target_lengths
            order = tf.argsort(key, stable=True)
            source, target_in, target_out = (
                tf.gather(source, order), tf.gather(target_in, order), tf.gather(target_out, order)
            )
            count = tf.shape(source)[0]
            num_batches = (count + batch_size - 1) // batch_size
            batch_order = tf.range(num_batches)
            if shuffle:
                noise = tf.random.stateless_uniform(
                    [num_batches], seed=tf.stack([tf.cast(seed, tf.int64), window_index])
                )
                batch_order = tf.argsort(noise)

            def cut(batch_index):
                first = batch_index * batch_size
                return tuple(
                    _trim(ids[first: first + batch_size])
                    for ids in (source, target_in, target_out)
                )

            return tf.data.Dataset.from_tensor_slices(batch_order).map(cut)

        dataset = dataset.flat_map(window_to_batches)

    dataset = dataset.map(lambda s, ti, to: ((s, ti), to))
    if pad_to_multiple is not None and pad_to_multiple > 1:
        dataset = dataset.map(lambda inputs, target: pad_batch((inputs, target), pad_to_multiple, max_length))
    if cardinality is not None:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(cardinality))
    return dataset.prefetch(tf.data.AUTOTUNE)


# === Batch shapes: fill and pad (the trainer, and compiled `fit`) ===

def _round_up(length, multiple):
    return (length + multiple - 1) // multiple * multiple


def pad_batch(batch, multiple: int, max_length: int | None = None):
    """Pads both lengths of a ``((source, target_in), target_out)`` batch up to a multiple.

    XLA compiles one program per input shape; on the Bible (batch 64, pairs of at most 50
    tokens, the paper's length-sorted windows) lengths rounded up to a multiple of 8 leave 10
    shapes an epoch instead of hundreds, for 15% padding columns on the target side (masked
    everywhere). Lengths never exceed ``max_length + 1``, the longest a batch can be.
    """
    (source, target_in), target_out = batch

    def pad(ids, cap):
        length = tf.shape(ids)[1]
        padded = tf.minimum(_round_up(length, multiple), cap) if cap else _round_up(length, multiple)
        padded = tf.maximum(padded, length)
        return tf.pad(ids, [[0, 0], [0, padded - length]])

    cap = None if max_length is None else max_length + 1  # the longest pair plus [END]/[START]
    return (pad(source, cap), pad(target_in, cap)), pad(target_out, cap)


def fill_batch(batch, batch_size: int):
    """Adds empty pairs to a short batch so that every batch has ``batch_size`` rows.

    An added pair is source ``[END]`` and target input ``[START]`` with no target output token:
    it counts for nothing in the loss (no NaN from an all-padding source either).
    """
    (source, target_in), target_out = batch
    missing = batch_size - tf.shape(source)[0]

    def fill(ids, first_id):
        extra = tf.zeros([missing, tf.shape(ids)[1]], ids.dtype)
        if first_id is not None:
            extra = tf.concat([tf.fill([missing, 1], tf.cast(first_id, ids.dtype)), extra[:, 1:]], axis=1)
        return tf.concat([ids, extra], axis=0)

    return (fill(source, END_ID), fill(target_in, START_ID)), fill(target_out, None)
