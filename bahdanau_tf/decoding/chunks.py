"""The chunk plan: how a batch of sentences is cut, padded and searched, chunk by chunk.

Planning and running chunks is the search's job, for `bahdanau_tf.translator.Translator`'s
``translate`` and for the exported signatures alike (`bahdanau_tf.signatures` builds its graphs
around `search_in_chunks`).

**Chunks and slots**: a batch is sorted by source length (longest first) and handed to the search
``chunk_size`` (64, `bahdanau_tf.decoding.Batching`) sentences at a time, then put back in order.
The search keeps ``slots`` sentences in flight (`bahdanau_tf.devices.decoding_slots`): the step a
sentence is done its n-best is read out and its slot takes the next sentence of the chunk
(continuous batching, `bahdanau_tf.decoding.beam_search`'s ``slots``), so no row keeps stepping
for a finished sentence while a slower one ends. Longest first, the last sentences in flight are
the shortest; once nothing is left to load and the live sentences fit in half the slots, the
search goes on over half (a second loop, where the batch is static: when compiled), and when every
sentence had a slot from the start (greedy: 64 in 64 slots) over halves down to an eighth (4
loops). benchmarks/decode_step.py counts the hypothesis-steps this computes against decoding each
sentence alone.

**Compiled shapes**: `Translator.translate` compiles the search (encoder + beam search over int
tensors; XLA on TensorFlow by default, ``Batching.jit_compile``; ``jax.jit`` on JAX). A compiler
makes one program per input shape, so each chunk is padded to a *row bucket* (powers of two up to
``chunk_size``; filler rows are empty sources that end at once) and a *length bucket*
(``length_buckets``, capped at ``max_source_length + 1``), and the search gets a static output
buffer, the largest limit of that width, separate from the per-sentence length limits (runtime
data). A stream of requests therefore compiles at most ``len(row_buckets) * len(length_buckets)``
programs per (beam size, n-best, alignments) combination (`Translator.compilation_bound`).
Padding is masked, so the outputs are those of the uncompiled path up to float rounding.

**One plan, two spellings**: `plan_chunk` and `chunk_input` (with `length_order` and
`length_limits`) decide each chunk's rows, filler rows, width and buffer. The graph loop
(`search_in_chunks`, a ``tf.while_loop``) calls them on tensors, and `Translator.translate`'s
compiled path (`search_bucketed_chunks`, a Python loop, so each chunk's bucketed shape is a
Python value) on NumPy arrays,
which each of them computes with NumPy: a batch-1 call then runs no eager TF op besides the
tokenizer's and the search's graphs (benchmarks/decode_throughput.py times batch 1). Each rule is
written once, its two spellings side by side, and tests/test_chunks.py checks that they decide
filler rows, sorting, padding and buckets alike.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import numpy as np
import tensorflow as tf

from bahdanau_tf.special_tokens import END_ID, PAD_ID


@dataclasses.dataclass(frozen=True)
class Chunking:
    """How a batch is cut for the search.

    Attributes:
        size: int, sentences per chunk (``Batching.chunk_size``).
        row_buckets: increasing ints ending with ``size``, the padded row counts under XLA.
        length_buckets: increasing ints, the padded source widths (tokens + ``[END]``) under
            XLA; the last one is the widest source there can be.
        max_length_ratio, max_length_offset: the output limit ``ceil(ratio * n) + offset``.
    """

    size: int
    row_buckets: tuple
    length_buckets: tuple
    max_length_ratio: float
    max_length_offset: int

    @classmethod
    def of(cls, batching, limits) -> "Chunking":
        """The chunking of a translator's `bahdanau_tf.decoding.Batching` and `LengthLimits`:
        rows bucketed by powers of two up to the chunk size, the length buckets capped by the
        widest source (``max_source_length + 1``)."""
        size, cap = batching.chunk_size, limits.max_source_length + 1
        row_buckets = tuple(sorted({min(2 ** k, size) for k in range(size.bit_length() + 1)}))
        length_buckets = tuple(b for b in batching.length_buckets if b < cap) + (cap,)
        return cls(size, row_buckets, length_buckets, limits.max_length_ratio,
                   limits.max_length_offset)


class ChunkPlan(NamedTuple):
    """One chunk of a length-sorted batch: int32 scalars (tensors), ``buffer_length`` None
    unless bucketed."""

    start: tf.Tensor  # first sorted row
    rows: tf.Tensor  # real rows (sentences) of the chunk
    padded_rows: tf.Tensor  # rows searched: real rows, then filler rows
    width: tf.Tensor  # the padded source width, [END] included
    buffer_length: Optional[tf.Tensor]  # the static output buffer: the largest limit of width


def _numpy(value):
    return isinstance(value, (np.ndarray, np.integer, int))


def length_limits(lengths, max_length_ratio, max_length_offset):
    """Per-sentence output limits ``ceil(ratio * n) + offset``; 1 for an empty source (its
    output is dropped). ``lengths``: int32, any shape (a tensor, or NumPy: NumPy out)."""
    if _numpy(lengths):  # float32 products, as the TF spelling computes them
        products = np.float32(max_length_ratio) * np.asarray(lengths, np.float32)
        limits = np.ceil(products).astype(np.int32) + max_length_offset
        return np.where(np.asarray(lengths) > 0, np.maximum(limits, 1), 1).astype(np.int32)
    limits = tf.cast(tf.math.ceil(max_length_ratio * tf.cast(lengths, tf.float32)),
                     tf.int32) + max_length_offset
    return tf.where(lengths > 0, tf.maximum(limits, 1), 1)


def length_order(lengths):
    """The search's row order: longest source first, ties in input order (NumPy for NumPy)."""
    if _numpy(lengths):
        return np.argsort(-np.asarray(lengths, np.int64), kind="stable")
    return tf.argsort(lengths, direction="DESCENDING", stable=True)


def plan_chunk(sorted_lengths, start, chunking: Chunking, bucketed: bool) -> ChunkPlan:
    """The plan of the chunk that starts at sorted row ``start``.

    Its width is its longest source plus ``[END]``. ``bucketed`` (XLA): rows and width are
    rounded up to ``chunking``'s buckets, so a stream of batches meets few shapes, and the
    output buffer is the largest limit of that width. NumPy ``sorted_lengths``: a plan of
    Python ints (`Translator.translate`'s XLA path), else of int32 scalar tensors.
    """
    if _numpy(sorted_lengths):
        rows = min(len(sorted_lengths) - start, chunking.size)
        width = int(max(np.max(sorted_lengths[start:start + rows] + 1, initial=1), 1))
        if not bucketed:
            return ChunkPlan(start, rows, rows, width, None)
        padded_rows = chunking.row_buckets[int(np.searchsorted(chunking.row_buckets, max(rows, 1)))]
        width = chunking.length_buckets[int(np.searchsorted(chunking.length_buckets, width))]
        buffer_length = int(length_limits(np.int32(width - 1), chunking.max_length_ratio,
                                          chunking.max_length_offset))
        return ChunkPlan(start, rows, padded_rows, width, buffer_length)
    batch = tf.shape(sorted_lengths)[0]
    rows = tf.minimum(batch - start, chunking.size)
    width = tf.reduce_max(tf.concat([sorted_lengths[start:start + rows] + 1, [1]], 0))
    if not bucketed:
        return ChunkPlan(start, rows, rows, width, None)
    row_buckets = tf.constant(chunking.row_buckets)
    length_buckets = tf.constant(chunking.length_buckets)
    padded_rows = row_buckets[tf.searchsorted(row_buckets, [tf.maximum(rows, 1)])[0]]
    width = length_buckets[tf.searchsorted(length_buckets, [width])[0]]
    buffer_length = length_limits(width - 1, chunking.max_length_ratio, chunking.max_length_offset)
    return ChunkPlan(start, rows, padded_rows, width, buffer_length)


def chunk_input(plan: ChunkPlan, sorted_ids, sorted_limits, *sorted_rows):
    """The searched inputs of a chunk: ids ``[padded_rows, width]``, limits, and more per-row
    int32 inputs (per-row beams). Filler rows are an ``[END]``-only source with limit 1 (they
    end at once), and 1 in the other per-row inputs. NumPy inputs give NumPy arrays."""
    end = plan.start + plan.rows
    fill = plan.padded_rows - plan.rows
    if _numpy(sorted_ids):
        ids = np.full([plan.padded_rows, plan.width], PAD_ID, np.int32)
        real = sorted_ids[plan.start:end, :plan.width]
        ids[:plan.rows, :real.shape[1]] = real
        ids[:, 0] = np.where(ids[:, 0] == PAD_ID, END_ID, ids[:, 0])  # only filler rows start with PAD
        per_row = []
        for t in (sorted_limits,) + sorted_rows:
            column = np.ones([plan.padded_rows], np.int32)
            column[:plan.rows] = t[plan.start:end]
            per_row.append(column)
        return (ids,) + tuple(per_row)
    ids = sorted_ids[plan.start:end, :plan.width]
    ids = tf.pad(ids, [[0, fill], [0, plan.width - tf.shape(ids)[1]]], constant_values=PAD_ID)
    first = tf.where(ids[:, :1] == PAD_ID, END_ID, ids[:, :1])  # only filler rows start with PAD
    ids = tf.concat([first, ids[:, 1:]], axis=1)
    per_row = tuple(tf.pad(t[plan.start:end], [[0, fill]], constant_values=1)
                    for t in (sorted_limits,) + sorted_rows)
    return (ids,) + per_row


def search_in_chunks(search, source_ids, lengths, limits, forbid_unknown, chunking: Chunking,
                     return_attention, bucketed=False, row_inputs=()):
    """Runs ``search`` over the chunks of a batch in a ``tf.while_loop``, in the input order.

    The batch is sorted by source length (longest first), cut into chunks (`plan_chunk`), and
    each chunk is searched on its own, with its own padding; inside a chunk the search keeps a
    few slots in flight and refills them as sentences finish (the Translator's
    ``Batching.slots``). Rows are independent, so the results are those of one big search.

    Args:
        search: ``search(ids, limits, forbid_unknown, buffer_length, *row_inputs)`` -> ids
            ``[rows, nbest, time]``, lengths and scores ``[rows, nbest]``, attention
            ``[rows, nbest, time, width]`` when ``return_attention``.
        source_ids: int32 ``[batch, width]``; lengths, limits: int32 ``[batch]``.
        forbid_unknown: bool scalar, passed to ``search``.
        chunking: `Chunking`; bucketed: bool, round shapes up to its buckets (XLA).
        row_inputs: more ``[batch]`` int32 tensors (per-row beams), sorted and cut like rows.
    """
    batch = tf.shape(source_ids)[0]
    order = length_order(lengths)
    source_ids, lengths, limits = (tf.gather(t, order) for t in (source_ids, lengths, limits))
    row_inputs = tuple(tf.gather(t, order) for t in row_inputs)
    time = tf.maximum(tf.reduce_max(limits), 1)
    # at least one (possibly empty) chunk, so an empty batch still has outputs to concat
    chunks = tf.maximum((batch + chunking.size - 1) // chunking.size, 1)
    width = tf.shape(source_ids)[1]
    count = 4 if return_attention else 3
    dtypes = (tf.int32, tf.int32, tf.float32, tf.float32)[:count]
    arrays = tuple(tf.TensorArray(dtype, size=chunks, infer_shape=False) for dtype in dtypes)

    def body(i, arrays):
        plan = plan_chunk(lengths, i * chunking.size, chunking, bucketed)
        ids, chunk_limits, *chunk_rows = chunk_input(plan, source_ids, limits, *row_inputs)
        outputs = search(ids, chunk_limits, forbid_unknown, plan.buffer_length, *chunk_rows)
        outputs = [tensor[:plan.rows] for tensor in outputs]
        ids = outputs[0][:, :, :time]
        padded = [tf.pad(ids, [[0, 0], [0, 0], [0, time - tf.shape(ids)[2]]]), *outputs[1:3]]
        if return_attention:
            attention = outputs[3][:, :, :time, :width]
            padded.append(tf.pad(attention, [[0, 0], [0, 0], [0, time - tf.shape(attention)[2]],
                                             [0, width - tf.shape(attention)[3]]]))
        return i + 1, tuple(a.write(i, t) for a, t in zip(arrays, padded))

    _, arrays = tf.while_loop(lambda i, arrays: i < chunks, body, (0, arrays))
    inverse = tf.math.invert_permutation(order)
    results = [tf.gather(array.concat(), inverse) for array in arrays]
    nbest_dim = tf.shape(results[1])[-1]
    results[0] = tf.reshape(results[0], [batch, nbest_dim, time])
    # static ranks for the signatures: lengths and scores [batch, nbest]
    results[1] = tf.reshape(results[1], [batch, nbest_dim])
    results[2] = tf.reshape(results[2], [batch, nbest_dim])
    if return_attention:
        results[3] = tf.reshape(results[3], [batch, nbest_dim, time, width])
    return tuple(results)


def search_bucketed_chunks(search, source_ids, lengths, limits, chunking: Chunking, nbest,
                           return_attention):
    """Runs a compiled ``search`` over the bucketed chunks of a batch in a Python loop, in the
    input order (NumPy in, NumPy out).

    The chunks are `search_in_chunks`'s (`plan_chunk` and `chunk_input`, on NumPy here), but the
    loop runs in Python, so each chunk's bucketed shape and output buffer are Python values: a
    new batch only compiles when it meets a new bucket (`Translator.translate`'s compiled path).

    Args:
        search: ``search(ids, limits, buffer_length)`` -> ids ``[rows, nbest, time]``, lengths
            and scores ``[rows, nbest]``, attention ``[rows, nbest, time, width]`` when
            ``return_attention`` (arrays of any backend); ``buffer_length`` a Python int.
        source_ids: int32 ``[batch, width]``; lengths, limits: int32 ``[batch]``.
        chunking: `Chunking`; nbest: int, the hypotheses per sentence.

    Returns:
        ``(ids, lengths, scores, attention or None)``, NumPy.
    """
    batch = len(lengths)
    order = length_order(lengths)
    sorted_inputs = [np.asarray(x[order], np.int32) for x in (lengths, source_ids, limits)]
    time = int(max(limits.max(initial=1), 1))
    width = source_ids.shape[1]
    ids = np.full([batch, nbest, time], PAD_ID, np.int32)
    out_lengths = np.zeros([batch, nbest], np.int32)
    scores = np.zeros([batch, nbest], np.float32)
    attention = np.zeros([batch, nbest, time, width], np.float32) if return_attention else None
    for start in range(0, batch, chunking.size):
        plan = plan_chunk(sorted_inputs[0], start, chunking, bucketed=True)
        chunk, chunk_limits = chunk_input(plan, *sorted_inputs[1:])
        rows = order[start:start + plan.rows]
        outputs = [np.asarray(x) for x in search(chunk, chunk_limits, plan.buffer_length) if x is not None]
        steps = min(time, outputs[0].shape[2])
        ids[rows, :, :steps] = outputs[0][:len(rows), :, :steps]
        out_lengths[rows] = outputs[1][:len(rows)]
        scores[rows] = outputs[2][:len(rows)]
        if return_attention:
            columns = min(width, chunk.shape[1])
            attention[rows, :, :steps, :columns] = outputs[3][:len(rows), :, :steps, :columns]
    return ids, out_lengths, scores, attention


__all__ = ["Chunking", "ChunkPlan", "chunk_input", "length_limits", "length_order", "plan_chunk",
           "search_bucketed_chunks", "search_in_chunks"]
