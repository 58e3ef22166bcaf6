"""The tf.data input pipeline: (source, target) strings in, padded batches for the model out.

`make_dataset` is the short composition of *stages*, each a function returning a
``dataset.apply`` transformation (OpenNMT-tf's ``opennmt/data/dataset.py`` style)::

    (source, target) tf.string scalars                      a ParallelCorpus, pairs, a CorpusFiles
                                                            stream (the user's files) or a Dataset
      -> shuffle (a bounded buffer), repeat                  seeded, reshuffled every epoch
      -> tokenize(source_tokenizer, target_tokenizer)        int32 id vectors
      -> filter_by_length(max_length)                        the paper's RNNsearch-30 / -50 limits
      -> add_special_ids()                                   [END] / [START] added
      -> batch_by_length(batch_size, bucketing, ...)         padded batches (3 bucketings)
      -> to_model_inputs()                                   ((source, target_in), target_out)
      -> pad_lengths(pad_to_multiple, max_length)            a bounded set of shapes (XLA)
      -> fill_batches(batch_size)                            every batch batch_size rows

This module is the one owner of batch shapes (the trainer asks `make_dataset` for filled,
padded batches). Every stage streams: none holds a Python list or needs the dataset's length,
so a stage works on a file read line by line (`CorpusFiles`: memory and start-up independent
of the corpus's length) as well as on the embedded corpus. Corpora (the embedded Bible, the
user's files) live in `bahdanau_tf.corpora`, their one import path.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bahdanau_tf import corpora
from bahdanau_tf.special_tokens import END_ID, PAD_ID, START_ID

__all__ = [
    "make_dataset",
    "count_pairs",
    "string_pairs",
    "tokenize",
    "filter_by_length",
    "add_special_ids",
    "batch_by_length",
    "padded_batches",
    "token_budget_batches",
    "paper_batches",
    "to_model_inputs",
    "pad_lengths",
    "fill_batches",
    "fill_batch",
    "pad_batch",
    "BUCKETING_MODES",
    "DEFAULT_SHUFFLE_BUFFER",
    "ESTIMATE_SAMPLE",
]

BUCKETING_MODES = ("paper", "token_budget", None)
#: sentences tokenized per call of the tokenizers' graph ops
TOKENIZE_BATCH = 512
#: pairs in the shuffle buffer by default: the whole embedded corpus (27,989 train pairs), and
#: for a stream of any length the memory of 100,000 string pairs (OpenNMT-tf's
#: ``sample_buffer_size``; Marian's maxi-batches)
DEFAULT_SHUFFLE_BUFFER = 100_000
#: the first pairs of a streamed corpus that `count_pairs` reads to estimate the rest
ESTIMATE_SAMPLE = 10_000

_IDS = tf.TensorSpec([None], tf.int32)

# The stages' functions are TF ops only, with no Python control flow over tensors: tf.data
# would run each through AutoGraph's source conversion, which costs seconds per pipeline and
# writes generated files to the temp dir.
_graph_only = tf.autograph.experimental.do_not_convert


def _id_pairs(pairs):
    """A dataset of (source, target) int32 id vectors (for the doctests)."""
    return tf.data.Dataset.from_generator(lambda: iter(pairs), output_signature=(_IDS, _IDS))


def _id_triples(triples):
    """A dataset of (source, target_in, target_out) int32 id vectors (for the doctests)."""
    return tf.data.Dataset.from_generator(lambda: iter(triples), output_signature=(_IDS,) * 3)


# === The stages ===

def string_pairs(corpus_or_pairs) -> tuple[tf.data.Dataset, int | None]:
    """The pipeline's source: a dataset of (source, target) tf.string scalars, and its size.

    Args:
        corpus_or_pairs: a `ParallelCorpus` or a sequence of (source, target) str pairs (held
            in memory: ``from_tensor_slices``); a `CorpusFiles` stream (the user's files, read
            as tf.data asks for them, re-read every epoch; size None); or a
            ``tf.data.Dataset`` of (source, target) tf.string scalars (passed through: a
            stream of unknown length, size None).

    Raises:
        ValueError: an item that is not a pair.

    >>> dataset, size = string_pairs([("a b", "x"), ("c", "y z")])
    >>> size, [s.decode() for s, _ in dataset.as_numpy_iterator()]
    (2, ['a b', 'c'])
    """
    if isinstance(corpus_or_pairs, tf.data.Dataset):
        return corpus_or_pairs, None
    if isinstance(corpus_or_pairs, corpora.CorpusFiles):
        batch = tf.TensorSpec([None], tf.string)
        # the file reader hands over batches (one Python call per PAIR_BATCH pairs); a bad
        # line raises CorpusError there, which stops the iterator (`corpora.corpus_error`)
        dataset = tf.data.Dataset.from_generator(corpus_or_pairs.pair_batches,
                                                 output_signature=(batch, batch))
        # under a multi-worker strategy every worker reads the files and keeps its own share
        # of the batches (tf.data's DATA auto-sharding: there is no file op to shard by)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        return dataset.unbatch().with_options(options), None
    if isinstance(corpus_or_pairs, corpora.ParallelCorpus):
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


def tokenize(source_tokenizer, target_tokenizer, batch_size: int = TOKENIZE_BATCH):
    """Stage: (source, target) strings -> (source, target) int32 id vectors, no special ids.

    The tokenizers' graph ops run on ``batch_size`` sentences at a time inside tf.data.

    >>> from bahdanau_tf.text import WordTokenizer
    >>> words = WordTokenizer.build(["a b c"])
    >>> dataset = tf.data.Dataset.from_tensor_slices((["a b", "c a"], ["b", "c c"]))
    >>> [(s.tolist(), t.tolist()) for s, t in dataset.apply(tokenize(words, words)).as_numpy_iterator()]
    [([4, 5], [5]), ([6, 4], [6, 6])]
    """

    def tokenize_batch(sources, targets):
        return (tf.cast(source_tokenizer.tokenize(sources), tf.int32),
                tf.cast(target_tokenizer.tokenize(targets), tf.int32))

    def transform(dataset):
        return (dataset.batch(batch_size)
                .map(_graph_only(tokenize_batch), num_parallel_calls=tf.data.AUTOTUNE)
                .unbatch())

    return transform


def _keep(source_length, target_length, max_length):
    """The length filter (tensors or NumPy arrays of token counts)."""
    ok = (source_length > 0) & (target_length > 0)
    if max_length is not None:
        ok &= (source_length <= max_length) & (target_length <= max_length)
    return ok


def filter_by_length(max_length: int | None):
    """Stage: drops pairs with an empty side or a side of more than ``max_length`` tokens.

    The paper's RNNsearch-30 / -50 limits, counted before ``[END]``; None keeps every non-empty
    pair. This is the only length cut in training; tokenizers never cut.

    >>> pairs = _id_pairs([([5, 6], [7]), ([], [7]), ([5, 5, 5, 5], [7])])
    >>> [s.tolist() for s, _ in pairs.apply(filter_by_length(3)).as_numpy_iterator()]
    [[5, 6]]
    """
    return lambda dataset: dataset.filter(_graph_only(
        lambda source, target: _keep(tf.size(source), tf.size(target), max_length)))


def add_special_ids():
    """Stage: (source, target) -> (source + [END], [START] + target, target + [END]).

    >>> triples = _id_pairs([([5, 6], [7])]).apply(add_special_ids())
    >>> [ids.tolist() for ids in next(triples.as_numpy_iterator())]
    [[5, 6, 2], [1, 7], [7, 2]]
    """

    def add(source, target):
        end, start = tf.constant([END_ID], tf.int32), tf.constant([START_ID], tf.int32)
        return tf.concat([source, end], 0), tf.concat([start, target], 0), tf.concat([target, end], 0)

    return lambda dataset: dataset.map(_graph_only(add), num_parallel_calls=tf.data.AUTOTUNE)


_PADDED_SHAPES = ([None], [None], [None])


def padded_batches(batch_size: int, drop_remainder: bool = False):
    """Stage (no bucketing): batches of ``batch_size`` triples in their order, each padded to its
    longest sentence.

    >>> triples = _id_triples([([5, 2], [1], [2]), ([5, 6, 2], [1, 7], [7, 2])])
    >>> source, _, _ = next(triples.apply(padded_batches(2)).as_numpy_iterator())
    >>> source.tolist()
    [[5, 2, 0], [5, 6, 2]]
    """
    return lambda dataset: dataset.padded_batch(
        batch_size, padded_shapes=_PADDED_SHAPES, drop_remainder=drop_remainder)


def _token_budget_buckets(batch_size, max_length, tokens_per_batch):
    """Boundaries and per-bucket batch sizes of the ``"token_budget"`` bucketing."""
    longest = (max_length or 100) + 1
    boundaries = list(range(5, longest + 1, 5))
    budget = tokens_per_batch or batch_size * ((max_length or 50) // 2)
    upper_bounds = [b - 1 for b in boundaries] + [longest if max_length else 2 * longest]
    return boundaries, [max(1, budget // bound) for bound in upper_bounds]


def token_budget_batches(batch_size: int, max_length: int | None,
                         tokens_per_batch: int | None = None, drop_remainder: bool = False):
    """Stage: ``bucket_by_sequence_length`` with buckets every 5 tokens and
    ``tokens_per_batch // bucket_length`` triples per batch (default budget
    ``batch_size * max_length // 2``).

    >>> triples = _id_triples([([5] * n + [2], [1] + [7] * n, [7] * n + [2]) for n in (1, 9, 2)])
    >>> batches = triples.apply(token_budget_batches(2, max_length=10, tokens_per_batch=8))
    >>> [source.shape for source, _, _ in batches.as_numpy_iterator()]
    [(1, 10), (2, 3)]
    """
    boundaries, bucket_batch_sizes = _token_budget_buckets(batch_size, max_length, tokens_per_batch)
    return lambda dataset: dataset.bucket_by_sequence_length(
        element_length_func=_graph_only(lambda s, ti, to: tf.maximum(tf.size(s), tf.size(to))),
        bucket_boundaries=boundaries,
        bucket_batch_sizes=bucket_batch_sizes,
        padded_shapes=_PADDED_SHAPES,
        drop_remainder=drop_remainder,
    )


def _lengths(ids: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(tf.cast(tf.not_equal(ids, PAD_ID), tf.int32), axis=-1)


def _trim(ids: tf.Tensor) -> tf.Tensor:
    """Cuts the padding columns a sub-batch of a wider window does not need."""
    return ids[:, : tf.reduce_max(_lengths(ids))]


def _sort_by_length(source, target_in, target_out):
    """The rows of a window, sorted by the longer side's length, ties by the target's."""
    # the longer side first, then the target: both sides of a minibatch stay dense
    # (on the Bible at batch 64, 90% / 93% of source / target cells are real tokens,
    # against 96% / 73% when sorting by the source alone)
    source_lengths, target_lengths = _lengths(source), _lengths(target_out)
    bound = tf.maximum(tf.shape(source)[1], tf.shape(target_out)[1]) + 1
    order = tf.argsort(tf.maximum(source_lengths, target_lengths) * bound + target_lengths,
                       stable=True)
    return tf.gather(source, order), tf.gather(target_in, order), tf.gather(target_out, order)


def paper_batches(batch_size: int, batches_per_window: int = 20, shuffle: bool = False,
                  seed: int = 1234):
    """Stage (appendix B.2): windows of ``batches_per_window * batch_size`` triples (1,600 for
    20 x 80), sorted by length, cut into minibatches, each padded to its own longest sentence;
    with ``shuffle`` the minibatches of a window come in a seeded random order.

    >>> triples = _id_triples([([5] * n + [2], [1] + [7] * n, [7] * n + [2]) for n in (3, 1, 2, 1)])
    >>> batches = triples.apply(paper_batches(2, batches_per_window=2))
    >>> [source.tolist() for source, _, _ in batches.as_numpy_iterator()]
    [[[5, 2], [5, 2]], [[5, 5, 2, 0], [5, 5, 5, 2]]]
    """
    window_size = batch_size * batches_per_window

    def window_to_batches(window_index, window):
        source, target_in, target_out = _sort_by_length(*window)
        num_batches = (tf.shape(source)[0] + batch_size - 1) // batch_size
        batch_order = tf.range(num_batches)
        if shuffle:
            noise = tf.random.stateless_uniform(
                [num_batches], seed=tf.stack([tf.cast(seed, tf.int64), window_index]))
            batch_order = tf.argsort(noise)

        def cut(batch_index):
            first = batch_index * batch_size
            return tuple(_trim(ids[first: first + batch_size])
                         for ids in (source, target_in, target_out))

        return tf.data.Dataset.from_tensor_slices(batch_order).map(_graph_only(cut))

    return lambda dataset: (dataset.padded_batch(window_size, padded_shapes=_PADDED_SHAPES)
                            .enumerate().flat_map(_graph_only(window_to_batches)))


def batch_by_length(batch_size: int, bucketing: str | None = "paper", max_length: int | None = 50,
                    shuffle: bool = False, seed: int = 1234, batches_per_window: int = 20,
                    tokens_per_batch: int | None = None, drop_remainder: bool = False):
    """Stage: triples -> padded batches, by ``bucketing``: `paper_batches` (``"paper"``),
    `token_budget_batches` (``"token_budget"``) or `padded_batches` (None).

    >>> triples = _id_triples([([5, 2], [1], [2])] * 3)
    >>> [s.shape[0] for s, _, _ in triples.apply(batch_by_length(2, None)).as_numpy_iterator()]
    [2, 1]
    """
    if bucketing is None:
        return padded_batches(batch_size, drop_remainder)
    if bucketing == "token_budget":
        return token_budget_batches(batch_size, max_length, tokens_per_batch, drop_remainder)
    return paper_batches(batch_size, batches_per_window, shuffle, seed)


def to_model_inputs():
    """Stage: (source, target_in, target_out) -> ``((source, target_in), target_out)``, what
    ``model.fit`` and the trainer take.

    >>> batch = tf.data.Dataset.from_tensors(([[5, 2]], [[1]], [[2]])).apply(to_model_inputs())
    >>> (source, target_in), target_out = next(batch.as_numpy_iterator())
    >>> source.tolist(), target_out.tolist()
    ([[5, 2]], [[2]])
    """
    return lambda dataset: dataset.map(_graph_only(lambda s, ti, to: ((s, ti), to)))


def _round_up(length, multiple):
    return (length + multiple - 1) // multiple * multiple


def pad_batch(batch, multiple: int, max_length: int | None = None):
    """Pads both lengths of a ``((source, target_in), target_out)`` batch up to a multiple.

    XLA compiles one program per input shape; rounded-up lengths leave a few shapes an epoch
    instead of hundreds, for more padding columns (masked everywhere;
    benchmarks/dataset_shapes.py counts them, benchmarks/README.md has the numbers). Lengths
    never exceed ``max_length + 1``, the longest a batch can be. Where the two rounded lengths
    are at most one multiple apart, both take the longer: a translation's sides are mostly of
    one length, so the rare batch whose sides round apart reuses that program.
    """
    (source, target_in), target_out = batch
    cap = None if max_length is None else max_length + 1  # the longest pair plus [END]/[START]

    def padded(ids):
        length = tf.shape(ids)[1]
        rounded = tf.minimum(_round_up(length, multiple), cap) if cap else _round_up(length, multiple)
        return tf.maximum(rounded, length)

    source_length, target_length = padded(source), padded(target_in)
    common = tf.maximum(source_length, target_length)
    if multiple > 1:  # (1: the lengths as they are)
        near = tf.abs(source_length - target_length) <= multiple
        source_length = tf.where(near, common, source_length)
        target_length = tf.where(near, common, target_length)

    def pad(ids, length):
        return tf.pad(ids, [[0, 0], [0, length - tf.shape(ids)[1]]])

    return (pad(source, source_length), pad(target_in, target_length)), pad(target_out, target_length)


def pad_lengths(multiple: int | None, max_length: int | None = None):
    """Stage: `pad_batch` on every batch; None or 1 leaves the batches as they are.

    >>> batch = tf.data.Dataset.from_tensors((([[5, 6, 2]], [[1, 7]]), [[7, 2]]))
    >>> (source, target_in), _ = next(batch.apply(pad_lengths(4, 50)).as_numpy_iterator())
    >>> source.tolist(), target_in.tolist()
    ([[5, 6, 2, 0]], [[1, 7, 0, 0]])
    """
    if multiple is None or multiple <= 1:
        return lambda dataset: dataset
    return lambda dataset: dataset.map(_graph_only(
        lambda inputs, target: pad_batch((inputs, target), multiple, max_length)))


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


def fill_batches(batch_size: int | None):
    """Stage: `fill_batch` on every batch, so all have ``batch_size`` rows (one shape for a
    compiled train step, equal shards under a distribution strategy); None leaves them.

    >>> batch = tf.data.Dataset.from_tensors((([[5, 2]], [[1, 7]]), [[7, 2]]))
    >>> (source, target_in), target_out = next(batch.apply(fill_batches(2)).as_numpy_iterator())
    >>> source.tolist(), target_in.tolist(), target_out.tolist()
    ([[5, 2], [2, 0]], [[1, 7], [1, 0]], [[7, 2], [0, 0]])
    """
    if batch_size is None:
        return lambda dataset: dataset
    return lambda dataset: dataset.map(_graph_only(
        lambda inputs, target: fill_batch((inputs, target), batch_size)))


# === Counting (cardinality and the trainer's header) ===

def _pair_lengths(dataset, source_tokenizer, target_tokenizer):
    """Token counts (source, target), NumPy int arrays, of every pair of a string dataset."""

    def lengths(sources, targets):
        return (source_tokenizer.tokenize(sources).row_lengths(),
                target_tokenizer.tokenize(targets).row_lengths())

    source_lengths, target_lengths = [np.zeros([0], np.int64)], [np.zeros([0], np.int64)]
    batches = dataset.batch(1024).map(_graph_only(lengths), num_parallel_calls=tf.data.AUTOTUNE)
    for source, target in batches:
        source_lengths.append(source.numpy())
        target_lengths.append(target.numpy())
    return np.concatenate(source_lengths), np.concatenate(target_lengths)


def _kept_lengths(dataset, source_tokenizer, target_tokenizer, max_length):
    """Token counts (source, target), NumPy int arrays, of the pairs `make_dataset` keeps."""
    source_lengths, target_lengths = _pair_lengths(dataset, source_tokenizer, target_tokenizer)
    keep = _keep(source_lengths, target_lengths, max_length)
    return source_lengths[keep], target_lengths[keep]


def count_pairs(corpus_or_pairs, source_tokenizer, target_tokenizer,
                max_length: int | None = 50, sample: int = ESTIMATE_SAMPLE) -> dict:
    """What `make_dataset`'s filter keeps and drops, counted in one tokenisation pass.

    One pass over an in-memory corpus (about as long as one pass of the input pipeline). A
    `CorpusFiles` stream is not read through: its first ``sample`` pairs are counted and the
    rest estimated from the file's size (`CorpusFiles.estimated_length`), so start-up does not
    grow with the corpus; a stream of at most ``sample`` pairs is counted exactly.

    Args:
        corpus_or_pairs, source_tokenizer, target_tokenizer, max_length: as in `make_dataset`.
        sample: int, the pairs of a stream that are read.

    Returns:
        dict: ``total``; ``kept``; ``empty`` (a side without any token); ``too_long`` (a
        non-empty pair with a side of more than ``max_length`` tokens), ints; ``estimated``,
        bool (True: the counts are a stream's estimate).
    """
    estimated, scale = False, 1.0
    if isinstance(corpus_or_pairs, corpora.CorpusFiles):
        total, exact = corpus_or_pairs.estimated_length(sample)
        corpus_or_pairs = corpus_or_pairs.head(sample)
        estimated, scale = not exact, total / max(len(corpus_or_pairs), 1)
    dataset, _ = string_pairs(corpus_or_pairs)
    source_lengths, target_lengths = _pair_lengths(dataset, source_tokenizer, target_tokenizer)
    kept = int(_keep(source_lengths, target_lengths, max_length).sum())
    empty = int(((source_lengths == 0) | (target_lengths == 0)).sum())
    counts = {"total": len(source_lengths), "kept": kept, "empty": empty}
    counts = {key: round(value * scale) for key, value in counts.items()}
    return {**counts, "too_long": counts["total"] - counts["kept"] - counts["empty"],
            "estimated": estimated}


def _number_of_batches(source_lengths, target_lengths, batch_size, bucketing, drop_remainder,
                       max_length, tokens_per_batch):
    """How many batches one epoch of `make_dataset` yields, from the kept pairs' lengths."""

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


def _check_arguments(bucketing, batch_size, max_length, batches_per_window, tokens_per_batch,
                     pad_to_multiple_of, shuffle_buffer_size=None):
    if bucketing not in BUCKETING_MODES:
        raise ValueError(f"Unknown bucketing {bucketing!r}; valid values: {list(BUCKETING_MODES)}.")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
        raise ValueError(f"max_length must be a positive int or None, got {max_length!r}.")
    if batches_per_window < 1:
        raise ValueError(f"batches_per_window must be >= 1, got {batches_per_window!r}.")
    if shuffle_buffer_size is not None and (not isinstance(shuffle_buffer_size, int)
                                            or shuffle_buffer_size < 1):
        raise ValueError(f"shuffle_buffer_size must be a positive int, got {shuffle_buffer_size!r}.")
    if tokens_per_batch is not None and tokens_per_batch < 1:
        raise ValueError(f"tokens_per_batch must be >= 1, got {tokens_per_batch!r}.")
    if pad_to_multiple_of is not None and (not isinstance(pad_to_multiple_of, int)
                                           or isinstance(pad_to_multiple_of, bool)
                                           or pad_to_multiple_of < 1):
        raise ValueError(f"pad_to_multiple must be a positive int or None, got {pad_to_multiple_of!r}.")


# === The pipeline ===

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
    shuffle_buffer_size: int | None = DEFAULT_SHUFFLE_BUFFER,
    drop_remainder: bool = False,
    pad_to_multiple: int | None = None,
    fill_to_batch_size: bool = False,
) -> tf.data.Dataset:
    """Builds the training/evaluation input pipeline: the stages of this module, composed.

    Each pair becomes::

        source_ids        = tokens(source) + [END]
        target_input_ids  = [START] + tokens(target)
        target_output_ids = tokens(target) + [END]

    padded with ``PAD_ID = 0``. Pairs with an empty side, or more than ``max_length`` tokens
    on either side (before ``[END]``), are dropped (`filter_by_length`).

    Bucketing (`batch_by_length`):

    * ``"paper"`` (appendix B.2, `paper_batches`): sorted windows of ``batches_per_window *
      batch_size`` pairs cut into minibatches, each padded only to its own longest sentence;
      with ``shuffle`` the order of the minibatches inside the window is shuffled too.
    * ``"token_budget"`` (`token_budget_batches`): buckets every 5 tokens and a batch size of
      ``tokens_per_batch // bucket_length`` per bucket.
    * ``None`` (`padded_batches`): plain padded batches in corpus (or shuffled) order.

    Cardinality: for a corpus or a list of pairs the dataset knows its length
    (``dataset.cardinality()``, `len(dataset)`), so Keras's ``fit`` shows steps and an ETA and
    does not warn at the end of an epoch. The pairs that survive the length filter are counted
    with one extra tokenisation pass when the dataset is built (`count_pairs`); a repeated
    dataset is infinite; a `CorpusFiles` stream or a ``tf.data.Dataset`` input keeps an unknown
    length (no pass over the corpus before the first batch).

    Shuffling: a buffer of ``shuffle_buffer_size`` string pairs, before tokenisation, seeded;
    with ``repeat`` every epoch is reshuffled, in the same orders for the same seed (the paper
    bucketing then also shuffles the minibatches of each sorted window).

    Shapes: every batch is padded to its own longest sentence, so an epoch meets many shapes.
    Compiled ``fit`` (XLA; Keras's default on a GPU) compiles once per shape; with
    ``pad_to_multiple`` lengths are padded up to a multiple (`pad_batch`), which bounds the
    count (benchmarks/dataset_shapes.py measures it). Padding is masked everywhere.

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
        shuffle_buffer_size: int, the pairs the shuffle draws from (`DEFAULT_SHUFFLE_BUFFER`,
            100,000; None is the default too): the memory of the shuffle, whatever the
            corpus's length. An in-memory corpus no longer than that is shuffled whole.
        drop_remainder: bool, drop a final batch smaller than ``batch_size`` (plain and
            token-budget batching).
        pad_to_multiple: int or None, pad both lengths of every batch up to a multiple of this
            (never beyond ``max_length + 1``): a bounded number of shapes for XLA.
        fill_to_batch_size: bool, add empty pairs to short batches so that every batch has
            ``batch_size`` rows (`fill_batches`; what the trainer asks for).

    Returns:
        tf.data.Dataset of ``((source_ids, target_input_ids), target_output_ids)``, each
        tf.int32 [batch, length].

    Example:

    >>> from bahdanau_tf.text import WordTokenizer
    >>> corpus = corpora.load_corpus("bible-en-es", split="dev")
    >>> en = WordTokenizer.build(corpus.sources); es = WordTokenizer.build(corpus.targets)
    >>> batches = make_dataset(corpus, en, es, batch_size=4, shuffle=False)
    >>> (source, target_in), target_out = next(iter(batches))
    >>> source.shape[0], target_in.shape == target_out.shape, len(batches)
    (4, True, 232)
    """
    _check_arguments(bucketing, batch_size, max_length, batches_per_window, tokens_per_batch,
                     pad_to_multiple, shuffle_buffer_size)
    dataset, size = string_pairs(corpus_or_pairs)
    cardinality = None
    if repeat:
        cardinality = tf.data.INFINITE_CARDINALITY
    elif size is not None:
        cardinality = _number_of_batches(
            *_kept_lengths(dataset, source_tokenizer, target_tokenizer, max_length),
            batch_size, bucketing, drop_remainder, max_length, tokens_per_batch)
    if shuffle:
        buffer = shuffle_buffer_size or DEFAULT_SHUFFLE_BUFFER
        dataset = dataset.shuffle(min(buffer, size) if size else buffer, seed=seed,
                                  reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = (dataset
               .apply(tokenize(source_tokenizer, target_tokenizer))
               .apply(filter_by_length(max_length))
               .apply(add_special_ids())
               .apply(batch_by_length(batch_size, bucketing, max_length, shuffle, seed,
                                      batches_per_window, tokens_per_batch, drop_remainder))
               .apply(to_model_inputs())
               .apply(pad_lengths(pad_to_multiple, max_length))
               .apply(fill_batches(batch_size if fill_to_batch_size else None)))
    if cardinality is not None:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(cardinality))
    return dataset.prefetch(tf.data.AUTOTUNE)
