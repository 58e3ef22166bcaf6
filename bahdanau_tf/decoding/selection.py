"""One step's choice: each row's and each sentence's best, fast.

What `bahdanau_tf.decoding.search` calls once per step, after the network: the logits of every
hypothesis become each sentence's ``beam`` best extensions (`select`). The rules themselves (the
ranking, the never-generated tokens, the frozen finished hypotheses, the survivors, the done
sentences) are `bahdanau_tf.decoding.rules`; `select` is written in ``keras.ops``, so it runs on
every Keras backend. What TensorFlow does better is a choice made here, on TensorFlow only: the
blocked ``top_k`` over a wide vocabulary (`top_k`), and under XLA the mask folded into its pass
(`VocabularyMask`). Nothing here knows about slots or loops.
"""

from typing import NamedTuple, Optional

import numpy as np
import tensorflow as tf
from keras import ops

from bahdanau_tf.decoding.rules import (frozen_candidates, kept_log_probabilities, never_mask,
                                        on_tensorflow, step_outcome, survivors, take)

_NEG_INF = float("-inf")
_TOP_K_BLOCK = 32  # the vocabulary is cut into blocks this wide for `top_k`


def static_int(value):
    """The Python int of ``value`` (an int, or a scalar tensor) when it is known when tracing,
    else None (also for a tensor that is not a scalar, and for another backend's tensor)."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    if not tf.is_tensor(value):
        return None
    static = tf.get_static_value(value)
    if static is None or np.ndim(static) != 0:
        return None
    return int(static)


def top_k(values, k):
    """``tf.math.top_k(values, k)`` over the last axis of a [rows, vocabulary] tensor, faster
    for a small ``k`` over a wide vocabulary: the same values and ids, ties to the lower id.

    A full ``top_k`` over [rows, vocabulary] is the largest cost of the search's selection
    (benchmarks/decode_step.py). Here the vocabulary is cut into contiguous blocks of
    `_TOP_K_BLOCK`: each block's maximum (one vectorised pass), the ``k`` best blocks (a
    ``top_k`` over ``vocabulary / 32`` maxima), and a ``top_k`` over those blocks' ``32 k``
    entries, taken in id order. The k best entries lie in the k best blocks (an entry of
    another block is beaten by the k blocks' maxima, ties going to the lower block, i.e. the
    lower ids), so nothing changes but the cost.

    On the other Keras backends: ``keras.ops.top_k``.

    Args:
        values: float [rows, vocabulary], the vocabulary static (else the plain ``top_k``).
        k: int (or int32 scalar), at most the vocabulary.

    Returns:
        ``(values [rows, k], ids int32 [rows, k])``, sorted, as ``tf.math.top_k``.
    """
    static_k = static_int(k)
    if not on_tensorflow():
        return ops.top_k(values, k)
    if not _blocked(values.shape[-1], static_k):
        return tf.math.top_k(values, k=k)
    grid = _block_grid(values)
    return _top_k_of_blocks(grid, tf.reduce_max(grid, axis=-1), static_k)


def _blocked(vocab, k):
    """Whether `top_k` cuts a vocabulary of ``vocab`` into blocks for a static ``k`` (a wide
    one: the blocks' maxima then cost less than a ``top_k`` over the row)."""
    return vocab is not None and k is not None and vocab >= 8 * _TOP_K_BLOCK * k


def _block_grid(values):
    """[rows, vocabulary] -> [rows, blocks, `_TOP_K_BLOCK`], -inf past the vocabulary."""
    vocab = values.shape[-1]
    blocks = -(-vocab // _TOP_K_BLOCK)
    padded = tf.pad(values, [[0, 0], [0, blocks * _TOP_K_BLOCK - vocab]], constant_values=_NEG_INF)
    return tf.reshape(padded, [-1, blocks, _TOP_K_BLOCK])


def _top_k_of_blocks(grid, block_max, k):
    """`top_k`'s last two passes: the ``k`` best blocks by ``block_max`` [rows, blocks], then a
    ``top_k`` over their entries in id order."""
    best_blocks = tf.sort(tf.math.top_k(block_max, k=k).indices, axis=-1)
    candidates = tf.gather(grid, best_blocks, batch_dims=1)  # [rows, k, width]
    top_values, position = tf.math.top_k(tf.reshape(candidates, [-1, k * _TOP_K_BLOCK]), k=k)
    ids = tf.gather(best_blocks, position // _TOP_K_BLOCK, batch_dims=1) * _TOP_K_BLOCK
    return top_values, ids + position % _TOP_K_BLOCK


class VocabularyMask(NamedTuple):
    """`never_mask` over a whole vocabulary and the never-generated tokens; built once per search
    (`vocabulary_mask`). The per-row selection (`_row_candidates`) then makes one pass of
    `top_k`'s block maxima over the masked logits: the mask is added in the pass that pads the
    logits to whole blocks (under XLA one fusion with the output bias), and each row's maximum
    (the log-normaliser's shift) is the largest of its blocks' maxima and of the few
    never-generated tokens' logits, exactly ``max(logits)``. The same values and ids as
    ``top_k(logits + mask)`` (and as ``argmax`` for one), with two passes over the logits fewer
    than the plain path. Used under XLA (`bahdanau_tf.decoding.Execution`'s ``jit_compile``,
    on TensorFlow), where benchmarks/decode_step.py found it faster; without XLA the plain mask
    is faster (each small op is a kernel launch there)."""

    mask: tf.Tensor  # float32 [vocabulary]: -inf at the never-generated tokens, 0 elsewhere
    never: tf.Tensor  # int32 [never]: the never-generated tokens (END's too), clipped to the vocabulary


def vocabulary_mask(vocabulary_size, never, end_id):
    """The `VocabularyMask` of ``never_mask(vocabulary_size, never, end_id)``; the plain mask
    when ``never``'s length is not static."""
    mask = never_mask(vocabulary_size, never, end_id)
    if never.shape[0] is None:
        return mask
    return VocabularyMask(mask, tf.clip_by_value(tf.cast(never, tf.int32), 0, vocabulary_size - 1))


def _masked_top_k(logits, vocabulary, k):
    """``top_k(logits + vocabulary.mask, k)`` and each row's ``max(logits)`` ([rows, 1]) from one
    pass of block maxima over the masked logits (see `VocabularyMask`)."""
    grid = _block_grid(logits + vocabulary.mask)  # the mask is added where the padding is written
    block_max = tf.reduce_max(grid, axis=-1)  # [rows, blocks], masked
    # max(logits) = max(the allowed tokens' maximum, the never-generated ones' logits): exact
    never = tf.reduce_max(tf.gather(logits, vocabulary.never, axis=1), axis=-1, keepdims=True)
    top = tf.maximum(tf.reduce_max(block_max, axis=-1, keepdims=True), never)
    values, ids = _top_k_of_blocks(grid, block_max, k)
    return values, ids, top




class Vocabulary(NamedTuple):
    """What a step's logits cover and which of their tokens may be chosen (`search_vocabulary`).

    Attributes:
        mask: the additive mask of the never-generated tokens over the logits' positions (a
            tensor or a `VocabularyMask`), or None: built at every step from the logits' width.
        never: int32 ``[n]``, the tokens never generated (PAD, START and the forbidden ones).
        end_id: int32 scalar, the token that finishes a hypothesis.
        candidates: None, or int32 ``[C]``: the logits cover these ids only (candidate lists).
        end_position: int32 scalar, where ``end_id`` is among the logits (``end_id`` itself
            without candidates).
    """

    mask: object
    never: tf.Tensor
    end_id: tf.Tensor
    candidates: Optional[tf.Tensor]
    end_position: tf.Tensor


def search_vocabulary(vocabulary_size, never, end_id, candidates=None, jit_compile=False) -> Vocabulary:
    """The `Vocabulary` of one search, its mask folded once when the logits' width is known.

    Args:
        vocabulary_size: int or None, the width of the step function's logits.
        never: int32 ``[n]``, the never-generated tokens; end_id: int32 scalar.
        candidates: None, or int32 ``[C]`` ascending ids (a per-batch candidate list).
        jit_compile: bool: on TensorFlow, a `VocabularyMask` (one fused pass of block maxima) under
            XLA, where it is faster; TensorFlow's runtime runs each of its small ops as a
            kernel of its own, which costs more than the two passes it saves
            (benchmarks/decode_step.py). The other backends take the plain mask.
    """
    if candidates is not None:  # logits over a candidate list: the mask is by the listed ids
        candidates = ops.cast(candidates, "int32")
        end_position = ops.cast(ops.argmax(ops.cast(candidates == end_id, "int32")), "int32")
        return Vocabulary(never_mask(None, never, end_id, token_ids=candidates), never, end_id,
                          candidates, end_position)
    mask = None
    if vocabulary_size is not None:
        folded = jit_compile and on_tensorflow()
        mask = (vocabulary_mask if folded else never_mask)(vocabulary_size, never, end_id)
    return Vocabulary(mask, never, end_id, None, end_id)


def _argmax(values):
    """int32 [rows]: each row's first maximum; ``tf.argmax`` on TensorFlow (``keras.ops.argmax``
    adds ops there that tell -0.0 from 0.0, which a search's logits never need)."""
    if on_tensorflow():
        return tf.argmax(values, axis=-1, output_type=tf.int32)
    return ops.cast(ops.argmax(values, axis=-1), "int32")


class Selection(NamedTuple):
    """The survivors of one step (`select`): [batch, beam] each, ``parent_rows`` [batch * beam]."""

    parent_rows: tf.Tensor  # the row of the previous step each survivor extends
    token: tf.Tensor  # the token it adds
    scores: tf.Tensor
    finished: tf.Tensor
    lengths: tf.Tensor
    written: tf.Tensor  # the token stored in the buffer (PAD after the end)


def _row_candidates(logits, mask, finished, per_row, end_id):
    """Each row's best ``per_row`` extensions: log-probabilities and tokens, [rows, per_row].

    The search stays off the vocabulary axis: the forbidden tokens are one additive ``mask``
    (with a `VocabularyMask`, added in the pass that cuts the logits into blocks), the per-row ``top_k``
    (``argmax`` for one) ranks the logits themselves, and each row's
    log-normaliser is subtracted from the ``per_row`` values it keeps only (the same order, the
    same values as a full log-softmax: ``(x - max) - log(sum(exp(x - max)))``). A finished row
    has one candidate, itself extended by ``end_id`` at log-prob 0, so its score stays frozen;
    its other slots are ``-inf`` over the lowest other ids, as a ``top_k`` over such a row gives.
    """
    logits = ops.cast(logits, "float32")
    if isinstance(mask, VocabularyMask) and _blocked(logits.shape[-1], static_int(per_row)):
        values, tokens, top = _masked_top_k(logits, mask, static_int(per_row))
    else:
        masked = logits + (mask.mask if isinstance(mask, VocabularyMask) else mask)  # [rows, vocab]
        if isinstance(per_row, int) and per_row == 1:
            values = ops.max(masked, axis=-1, keepdims=True)
            tokens = _argmax(masked)[:, None]
        else:
            values, tokens = top_k(masked, per_row)  # sorted, ties to the lower id
        top = ops.max(logits, axis=-1, keepdims=True)
    return frozen_candidates(kept_log_probabilities(values, logits, top), tokens, finished, end_id)


def select(logits, vocabulary: Vocabulary, scores, finished, lengths, step, limits, ranking, beam,
           own_beams=None) -> Selection:
    """The best ``beam`` candidates of each sentence, by rank (ties to the lower beam, then the
    lower token id); with ``own_beams`` the slots beyond a sentence's own beam are emptied, so
    they never extend anything.

    Args:
        logits: float ``[batch * beam, positions]``, over the whole vocabulary or over
            ``vocabulary.candidates`` (a position is mapped to its id here).
        vocabulary: the search's `Vocabulary`.
        scores, finished, lengths: ``[batch, beam]``, the hypotheses so far.
        step: int32 ``[]`` or ``[batch]``, each sentence's steps so far.
        limits: int32 ``[batch]``, each sentence's maximum length.
        ranking: `Ranking`; beam: int (or int32 scalar); own_beams: None or int32 ``[batch]``.
    """
    mask = vocabulary.mask
    if mask is None:
        mask = never_mask(ops.shape(logits)[-1], vocabulary.never, vocabulary.end_id)
    end_id = vocabulary.end_id
    batch = ops.shape(scores)[0]  # static when known
    # All candidates of one row have the same length, so the same penalty: a row's best `beam`
    # by log p are its best by rank, and only they need ranking against the sentence's other
    # rows (top_k over [rows, vocab] and a division over [rows, beam], not over the vocabulary).
    vocab = logits.shape[-1]
    if isinstance(beam, int) and vocab is not None:
        per_row = min(beam, vocab)  # static: XLA needs it
    else:
        per_row = ops.minimum(beam, ops.shape(logits)[-1])
    log_probs, row_tokens = _row_candidates(logits, mask, finished, per_row, vocabulary.end_position)
    row_totals = ops.reshape(scores, [-1, 1]) + log_probs  # [rows, per_row], sorted
    step = ops.reshape(step, [-1, 1])  # [1, 1], or [batch, 1]: each sentence's own step
    candidate_lengths = ops.reshape(ops.where(finished, lengths, step + 1), [-1])
    parent, picked = survivors(ranking.rank(row_totals, candidate_lengths[:, None]), batch, beam, per_row)
    token = ops.reshape(take(ops.reshape(row_tokens, [-1]), picked), [batch, beam])
    if vocabulary.candidates is not None:  # positions in the candidate list -> vocabulary ids
        token = take(vocabulary.candidates, token)
    parent_rows = ops.reshape(parent, [-1])
    outcome = step_outcome(ops.reshape(take(ops.reshape(row_totals, [-1]), picked), [batch, beam]),
                           token, take(ops.reshape(finished, [-1]), parent),
                           take(ops.reshape(lengths, [-1]), parent), step, limits, end_id, own_beams)
    return Selection(parent_rows=parent_rows, token=token, scores=outcome.scores,
                     finished=outcome.finished, lengths=outcome.lengths, written=outcome.written)


__all__ = ["Selection", "Vocabulary", "VocabularyMask", "search_vocabulary", "select", "static_int",
           "top_k", "vocabulary_mask"]
