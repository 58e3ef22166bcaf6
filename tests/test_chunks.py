"""Tests for bahdanau_tf.decoding.chunks: the chunk plan's NumPy spelling (Translator.translate's
compiled path) decides exactly what its TF spelling (the exported signatures' graph loop) decides."""

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf.decoding import chunks
from bahdanau_tf.special_tokens import END_ID, PAD_ID


@pytest.mark.parametrize("ratio, offset", [(2.0, 10), (1.5, 0), (1.1, 3), (0.7, 1)])
def test_length_limits_and_order_agree(ratio, offset):
    rng = np.random.default_rng(0)
    lengths = np.concatenate([[0, 0, 1, 50], rng.integers(0, 120, size=200)]).astype(np.int32)
    expected = chunks.length_limits(tf.constant(lengths), ratio, offset).numpy()
    limits = chunks.length_limits(lengths, ratio, offset)
    assert isinstance(limits, np.ndarray) and limits.dtype == np.int32
    np.testing.assert_array_equal(limits, expected)
    assert limits[0] == 1  # an empty source: limit 1
    # longest first, ties in input order (many ties here)
    np.testing.assert_array_equal(chunks.length_order(lengths),
                                  chunks.length_order(tf.constant(lengths)).numpy())


@pytest.mark.parametrize("bucketed", [True, False])
@pytest.mark.parametrize("batch", [1, 5, 16, 37])
def test_numpy_chunk_plan_and_inputs_equal_the_graphs(bucketed, batch):
    chunking = chunks.Chunking(size=16, row_buckets=(1, 2, 4, 8, 16), length_buckets=(8, 16, 32, 64),
                                   max_length_ratio=1.5, max_length_offset=4)
    rng = np.random.default_rng(batch)
    lengths = rng.integers(0, 60, size=batch).astype(np.int32)
    lengths[0] = 0  # an empty source
    width = int(lengths.max()) + 1
    ids = np.zeros([batch, width], np.int32)
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.integers(4, 100, size=n)
        ids[row, n] = END_ID
    limits = chunks.length_limits(lengths, chunking.max_length_ratio, chunking.max_length_offset)
    beams = rng.integers(1, 6, size=batch).astype(np.int32)
    order = chunks.length_order(lengths)
    sorted_np = [x[order] for x in (lengths, ids, limits, beams)]
    sorted_tf = [tf.constant(x) for x in sorted_np]
    for start in range(0, batch, chunking.size):
        plan = chunks.plan_chunk(sorted_np[0], start, chunking, bucketed)
        graph_plan = chunks.plan_chunk(sorted_tf[0], start, chunking, bucketed)
        assert all(isinstance(v, int) for v in plan if v is not None)
        assert plan == tuple(None if v is None else int(v) for v in graph_plan), (plan, graph_plan)
        chunk = chunks.chunk_input(plan, *sorted_np[1:])
        graph_chunk = chunks.chunk_input(graph_plan, *sorted_tf[1:])
        for mine, theirs in zip(chunk, graph_chunk):
            assert isinstance(mine, np.ndarray) and mine.dtype == np.int32
            np.testing.assert_array_equal(mine, theirs.numpy())
        source = chunk[0]
        assert source.shape == (plan.padded_rows, plan.width)
        # filler rows: an [END]-only source, limit 1, beam 1
        assert np.all(source[plan.rows:, 0] == END_ID) and np.all(source[plan.rows:, 1:] == PAD_ID)
        assert np.all(chunk[1][plan.rows:] == 1) and np.all(chunk[2][plan.rows:] == 1)


def test_a_width_on_a_bucket_stays_in_that_bucket():
    chunking = chunks.Chunking(size=16, row_buckets=(1, 2, 4, 8, 16), length_buckets=(8, 16, 32, 64),
                                   max_length_ratio=1.5, max_length_offset=4)
    for lengths in (np.array([31, 5], np.int32), tf.constant([31, 5])):
        plan = chunks.plan_chunk(lengths, 0, chunking, bucketed=True)
        # 31 tokens + [END] = 32, a bucket; limit of a 31-token source: ceil(1.5 * 31) + 4
        assert tuple(int(v) for v in plan) == (0, 2, 2, 32, 51)
