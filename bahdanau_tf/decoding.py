"""Beam search, greedy search and ensembles over a step function, in core TF ops only.

Decoding is a pure function of a *step function* (DESIGN.md §3, §6), the way OpenNMT-tf's
``utils/decoding.py`` is:

    step_fn(ids, step, state) -> (logits, state, attention)

- ``ids``: int32 ``[batch * beam]``, the previous token of every hypothesis (``start_id`` at step 0);
- ``step``: int32 scalar, 0 for the first step (with ``memory``: int32 ``[batch * beam]``,
  each row's own step, since refilled slots start at different times);
- ``state``: any nest of tensors whose leading dimension is ``batch * beam``;
- ``logits``: ``[batch * beam, vocabulary]``, any float dtype (cast to float32 and
  normalised here, so mixed-precision models need no care);
- ``attention``: ``[batch * beam, source_len]`` float, or None.

Anything constant over the decode (the encoder memory, the attention keys) is either closed over
by the step function, tiled once with `tile_beams` (every sentence then searches from the first
step to the last), or handed to `beam_search` as ``memory``: the step function then takes it as a
fourth argument, one row per *slot*, and the search refills the slot of every finished sentence
with the next sentence of the batch (continuous batching: no row waits for the slowest sentence).
Reordering the beams never copies the memory. Greedy search is beam search with one beam, and an
ensemble (Sutskever et al. 2014) is just another step function, `ensemble_step_fn`.

Everything is one ``tf.while_loop`` over static-shape buffers, so the same code runs eagerly,
inside ``tf.function`` with a dynamic batch (e.g. a serving signature), and under
``jit_compile=True``; no tensorflow-addons op (``GatherTree``) and no tf-text op is used: each
hypothesis carries its tokens (and attention rows) so far, and a sentence's n-best is read out
the step it is done.
"""

from typing import Callable, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from bahdanau_tf.special_tokens import END_ID, PAD_ID, START_ID

StepFn = Callable[[tf.Tensor, tf.Tensor, object], tuple]

_NEG_INF = float("-inf")


class BeamSearchOutput(NamedTuple):
    """What `beam_search` returns; hypotheses sorted best first.

    Attributes:
        ids: int32 ``[batch, nbest, time]``, the tokens of each hypothesis, ``end_id`` included,
            ``PAD_ID`` after it. ``time`` is the buffer length (``buffer_length``, else
            ``max(max_length)``).
        lengths: int32 ``[batch, nbest]``, the number of tokens including ``end_id``, or the
            sentence's ``max_length`` for a hypothesis that never emitted ``end_id``. 0 for an
            empty slot (only when fewer than ``nbest`` hypotheses exist, e.g. a tiny vocabulary).
        scores: float32 ``[batch, nbest]``, the sum of the hypothesis's token log-probabilities,
            divided by the GNMT length penalty when ``length_penalty > 0``; ``-inf`` for an
            empty slot.
        attention: float32 ``[batch, nbest, time, attention_length]``, the attention row that
            produced each token (zeros after the end), or None unless ``return_attention``.
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor
    attention: Optional[tf.Tensor]


def tile_beams(nest, beam_size):
    """Repeats every tensor of a nest ``beam_size`` times along its first axis.

    Row ``b`` of the input becomes rows ``b * beam_size .. (b + 1) * beam_size - 1`` (consecutive
    copies, `tf.repeat`), the layout `beam_search` uses for its ``batch * beam`` rows.

    Args:
        nest: a tensor or any nest (tuple, list, dict) of tensors of shape ``[batch, ...]``.
        beam_size: int or int32 scalar tensor.

    Returns:
        The same nest with tensors of shape ``[batch * beam_size, ...]``.
    """
    return tf.nest.map_structure(
        lambda t: tf.repeat(tf.convert_to_tensor(t), beam_size, axis=0), nest)


def length_penalty_factor(lengths, alpha):
    """GNMT length penalty ``((5 + length) / 6) ** alpha`` (Wu et al. 2016, eq. 14).

    Args:
        lengths: int or float tensor of hypothesis lengths.
        alpha: float, 0 disables the penalty (the factor is exactly 1).

    Returns:
        float32 tensor, the same shape as ``lengths``.
    """
    return tf.pow((5.0 + tf.cast(lengths, tf.float32)) / 6.0, tf.cast(alpha, tf.float32))


class Ranking(NamedTuple):
    """How hypotheses are ranked, together with the bound that lets the search stop early.

    ``rank = log p / ((5 + length) / 6) ** alpha`` (the GNMT length penalty); ``alpha = 0``
    ranks by log p, the paper's objective. A larger alpha favours longer outputs: beam search
    by log p prefers short ones, since every token adds a negative log-probability.

    The bound: a live hypothesis's log p can only fall as it grows (log-probabilities are
    <= 0) and the penalty only grows with its length, which cannot pass its sentence's limit,
    so no continuation ranks above ``live log p / penalty(limit)``. The two belong together:
    another ranking needs another bound, or early stopping would change results.

    Attributes:
        alpha: float32 scalar >= 0.
    """

    alpha: tf.Tensor

    def rank(self, scores, lengths):
        """The ranks of hypotheses with log-probabilities ``scores`` and ``lengths`` tokens."""
        return scores / length_penalty_factor(lengths, self.alpha)

    def best_continuation(self, live_scores, limits):
        """The best rank any continuation of a live hypothesis with ``live_scores`` can reach."""
        return live_scores / length_penalty_factor(limits, self.alpha)


def static_int(value):
    """The Python int of ``value`` (an int, or a scalar tensor) when it is known when tracing,
    else None (also for a tensor that is not a scalar)."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    static = tf.get_static_value(value)
    if static is None or np.ndim(static) != 0:
        return None
    return int(static)


def _check_arguments(beam_size, nbest, max_length, buffer_length, length_penalty, forbid_ids,
                     end_id, return_attention, attention_length):
    """ValueError for every argument whose value is known when tracing and wrong."""
    static_beam, static_nbest = static_int(beam_size), static_int(nbest)
    if static_beam is not None and static_beam < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size!r}")
    if static_nbest is not None and static_nbest < 1:
        raise ValueError(f"nbest must be >= 1, got {nbest!r}")
    if static_beam is not None and static_nbest is not None and static_nbest > static_beam:
        raise ValueError(f"nbest must be <= beam_size, got nbest={nbest!r} > "
                         f"beam_size={beam_size!r}")
    if isinstance(length_penalty, (int, float)) and not length_penalty >= 0:  # NaN too
        raise ValueError(f"length_penalty must be >= 0, got {length_penalty!r}")
    static_forbid = tf.get_static_value(forbid_ids) if not isinstance(
        forbid_ids, (list, tuple)) else np.asarray(forbid_ids, dtype=np.int64)
    if static_forbid is not None and static_int(end_id) is not None and np.any(
            np.asarray(static_forbid) == static_int(end_id)):
        raise ValueError(f"forbid_ids must not contain end_id={end_id!r}, got {forbid_ids!r}")
    if return_attention and attention_length is None:
        raise ValueError("return_attention=True needs attention_length (the source length)")
    static_max = tf.get_static_value(max_length) if not isinstance(
        max_length, (int, np.integer)) else max_length
    if static_max is not None and np.any(np.asarray(static_max) < 1):
        raise ValueError(f"max_length must be >= 1, got {max_length!r}")
    static_buffer = None if buffer_length is None else static_int(buffer_length)
    if static_buffer is not None and static_buffer < 1:
        raise ValueError(f"buffer_length must be >= 1, got {buffer_length!r}")


def _buffer_steps(limits, max_length, buffer_length):
    """The number of steps the buffers hold: ``buffer_length``, else the largest limit (a
    Python int when it is known when tracing, so that shapes stay static)."""
    if buffer_length is not None:
        static = static_int(buffer_length)
        return static if static is not None else tf.maximum(tf.cast(buffer_length, tf.int32), 1)
    static_max = tf.get_static_value(max_length) if not isinstance(
        max_length, (int, np.integer)) else max_length
    if static_max is not None:
        return max(int(np.max(static_max)), 1)
    return tf.maximum(tf.reduce_max(limits), 1)  # an empty batch still needs one step


def never_mask(vocabulary_size, never, end_id, token_ids=None):
    """[vocabulary] float32: ``-inf`` at the tokens ``never`` generated, 0 elsewhere.

    Built once per search and added to every step's logits; ``end_id`` stays allowed (e.g.
    ``start_id == end_id``). ``token_ids``: the id at each position of the logits (a candidate
    list, see `beam_search`'s ``candidates``); default ``range(vocabulary_size)``.
    """
    if token_ids is None:
        token_ids = tf.range(vocabulary_size, dtype=tf.int32)
    forbidden = tf.reduce_any(token_ids[:, None] == never[None, :], axis=1)
    forbidden &= tf.not_equal(token_ids, end_id)
    return tf.where(forbidden, _NEG_INF, 0.0)


_LOADS_PER_STEP = 4  # slots refilled at most per step (their memory is written at every step)
_TOP_K_BLOCK = 32  # the vocabulary is cut into blocks this wide for `top_k`


def top_k(values, k):
    """``tf.math.top_k(values, k)`` over the last axis of a [rows, vocabulary] tensor, faster
    for a small ``k`` over a wide vocabulary: the same values and ids, ties to the lower id.

    A full ``top_k`` over [rows, vocabulary] was the search's largest cost (0.87 ms a step at 80
    rows x 5,000 words on a 2-core CPU, XLA or not, beside a 2.3 ms network step). Here the
    vocabulary is cut into contiguous blocks of `_TOP_K_BLOCK`: each block's maximum (one
    vectorised pass), the ``k`` best blocks (a ``top_k`` over ``vocabulary / 32`` maxima), and a
    ``top_k`` over those blocks' ``32 k`` entries, taken in id order. The k best entries lie in
    the k best blocks (an entry of another block is beaten by the k blocks' maxima, ties going to
    the lower block, i.e. the lower ids), so nothing changes but the cost (0.33 ms).

    Args:
        values: float [rows, vocabulary], the vocabulary static (else the plain ``top_k``).
        k: int (or int32 scalar), at most the vocabulary.

    Returns:
        ``(values [rows, k], ids int32 [rows, k])``, sorted, as ``tf.math.top_k``.
    """
    static_k = static_int(k)
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
    than the plain path. Used under XLA (`beam_search`'s ``xla``): on a 2-core Sapphire Rapids,
    5,000 words, a search step at 64 greedy rows takes 2.06 -> 1.75 ms, at 80 and 320 beam rows
    5% and 2% less; without XLA the plain mask was 1-10% faster. (Recomputing the
    never-generated tokens' blocks instead, over [rows, blocks, never], was no faster.)"""

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


class _Step(NamedTuple):
    """The survivors of one step: [batch, beam] each, ``parent_rows`` [batch * beam]."""

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
    logits = tf.cast(logits, tf.float32)
    if isinstance(mask, VocabularyMask) and _blocked(logits.shape[-1], static_int(per_row)):
        values, tokens, top = _masked_top_k(logits, mask, static_int(per_row))
    else:
        masked = logits + (mask.mask if isinstance(mask, VocabularyMask) else mask)  # [rows, vocab]
        if isinstance(per_row, int) and per_row == 1:
            values = tf.reduce_max(masked, axis=-1, keepdims=True)
            tokens = tf.argmax(masked, axis=-1, output_type=tf.int32)[:, None]
        else:
            values, tokens = top_k(masked, per_row)  # sorted, ties to the lower id
        top = tf.reduce_max(logits, axis=-1, keepdims=True)
    log_sum = tf.math.log(tf.reduce_sum(tf.exp(logits - top), axis=-1, keepdims=True))
    log_probs = (values - top) - log_sum  # [rows, per_row]
    slots = tf.range(tf.shape(values)[-1])
    others = slots - 1 + tf.cast(slots - 1 >= end_id, tf.int32)  # the lowest ids but end_id
    frozen_tokens = tf.where(slots == 0, end_id, others)
    frozen = tf.reshape(finished, [-1, 1])
    log_probs = tf.where(frozen, tf.where(slots == 0, 0.0, _NEG_INF)[None, :], log_probs)
    return log_probs, tf.where(frozen, frozen_tokens[None, :], tokens)


def _select(logits, mask, scores, finished, lengths, step, limits, ranking, beam, end_id,
            own_beams=None, candidates=None, end_position=None):
    """The best ``beam`` candidates of each sentence, by rank (ties to the lower beam, then the
    lower token id); with ``own_beams`` the slots beyond a sentence's own beam are emptied, so
    they never extend anything.

    The one selection function of the search: ``logits`` [batch * beam, vocabulary] (any
    vocabulary with its additive ``mask``). With ``candidates`` (a per-batch candidate list,
    ascending ids) the logits cover those ids only: a position is mapped to its id here, and
    ``end_position`` is where ``end_id`` is.
    """
    batch = scores.shape[0] if scores.shape[0] is not None else tf.shape(scores)[0]  # static when known
    # All candidates of one row have the same length, so the same penalty: a row's best `beam`
    # by log p are its best by rank, and only they need ranking against the sentence's other
    # rows (top_k over [rows, vocab] and a division over [rows, beam], not over the vocabulary).
    vocab = logits.shape[-1]
    if isinstance(beam, int) and vocab is not None:
        per_row = min(beam, vocab)  # static: XLA needs it
    else:
        per_row = tf.minimum(beam, tf.shape(logits)[-1])
    log_probs, row_tokens = _row_candidates(logits, mask, finished, per_row,
                                            end_id if candidates is None else end_position)
    row_totals = tf.reshape(scores, [-1, 1]) + log_probs  # [rows, per_row], sorted
    flat_finished, flat_lengths = tf.reshape(finished, [-1]), tf.reshape(lengths, [-1])
    step = tf.reshape(step, [-1, 1])  # [1, 1], or [batch, 1]: each sentence's own step
    candidate_lengths = tf.reshape(tf.where(finished, lengths, step + 1), [-1])
    ranks = ranking.rank(row_totals, candidate_lengths[:, None])
    if isinstance(beam, int) and beam == 1:  # greedy: one candidate per sentence
        top = tf.zeros([batch, 1], tf.int32)
    else:
        # top_k is stable: ties go to the lower beam, then (within a row, sorted) the lower id
        _, top = tf.math.top_k(tf.reshape(ranks, [batch, beam * per_row]), k=beam)  # [batch, beam]
    parent = top // per_row + tf.range(batch)[:, None] * beam
    picked = tf.reshape(parent * per_row + top % per_row, [-1])
    token = tf.reshape(tf.gather(tf.reshape(row_tokens, [-1]), picked), [batch, beam])
    if candidates is not None:  # positions in the candidate list -> vocabulary ids
        token = tf.gather(candidates, token)
    new_scores = tf.reshape(tf.gather(tf.reshape(row_totals, [-1]), picked), [batch, beam])
    if own_beams is not None:
        new_scores = tf.where(tf.range(beam)[None, :] < own_beams[:, None], new_scores, _NEG_INF)
    was_finished = tf.gather(flat_finished, parent)
    # -inf: a candidate of a forbidden token or of an empty beam (fewer candidates than beams,
    # e.g. at step 0); frozen like a finished one and reported as an empty slot.
    dead = tf.math.is_inf(new_scores)
    return _Step(
        parent_rows=tf.reshape(parent, [-1]),
        token=token,
        scores=new_scores,
        finished=was_finished | dead | tf.equal(token, end_id) | (step + 1 >= limits[:, None]),
        lengths=tf.where(was_finished, tf.gather(flat_lengths, parent), step + 1),
        written=tf.where(was_finished | dead, PAD_ID, token),
    )


def _sentences_done(scores, finished, lengths, limits, ranking, nbest, own_beams=None):
    """[batch] bool: no live hypothesis can still enter the sentence's n-best."""
    best_finished = tf.math.top_k(tf.where(finished, ranking.rank(scores, lengths), _NEG_INF), k=nbest).values
    if own_beams is None:
        nth_finished = best_finished[:, -1]
    else:  # a sentence with a smaller beam has fewer hypotheses
        nth_finished = tf.gather(best_finished, tf.minimum(nbest, own_beams) - 1, batch_dims=1)
    best_live = tf.reduce_max(tf.where(finished, _NEG_INF, scores), axis=1)
    return tf.reduce_all(finished, axis=1) | (nth_finished > ranking.best_continuation(best_live, limits))


def _write_when(xla, flags, write, carried):
    """``write(carried)`` in the search loop's body: under XLA at every step (its scatters
    update the loop's buffers in place, where a ``tf.cond`` would copy them into its output);
    without XLA only at the steps where some of ``flags`` is set (TensorFlow's runtime copies a
    loop-carried buffer at every scatter), ``carried`` unchanged at the others."""
    if xla:
        return write(carried)
    return tf.cond(tf.reduce_any(flags), lambda: write(carried), lambda: carried)


# The search's loops: all the slots, then halves (`_stage_widths`). No loop variable is a
# constant that a loop passes on unchanged to the next: tf2xla propagates such a constant
# around the loop into the next one, and at the third loop fails ("Propagate: Cannot find body
# function while_2_body_..._const_0", TF 2.21). So the search carries no empty placeholders,
# and a loop that loads nothing captures what it does not change.
_TAIL_STAGES = 2  # loops when the first one refills slots: the tail is the end of the batch
_START_STAGES = 4  # loops when every sentence has a slot from the start: it is all tail
_MIN_TAIL_SLOTS = 8  # no loop over fewer slots: its compilation costs more than it saves


def _stage_widths(width, refills):
    """The slot counts of the search's successive loops: ``width``, then halves (at least
    `_MIN_TAIL_SLOTS`), `_TAIL_STAGES` loops at most when the first loop ``refills`` slots, else
    `_START_STAGES`; one loop when ``width`` is not a Python int (a batch that is not static:
    the exported signatures). Every loop is compiled (under XLA), so each costs compile time,
    and a few rows cost a step about as much as fewer: a batch of under 16 sentences (the
    Translator's small row buckets) searches in one loop.

    Measured on a 2-core Sapphire Rapids, 512 test verses at batch 64, XLA: greedy with 64
    slots (no refill: every verse starts at once) and 2 / 3 / 4 loops 1.22 / 1.13 / 1.09x the
    hypothesis-steps of one verse at a time, 492 / 505 sentences/s with 3 / 4 (445 with 32
    slots, 2 loops); beam 5 with 32 slots (refilled) and 2 / 3 / 4 loops 1.085 / 1.052 /
    1.041x, 195.9 / 200.0 / 200.8 sentences/s, but its first call 12.4 / 16.0 / 19.6 s.
    Halving a dynamic width (the exported signatures) was tried: the served batch of 64 took
    520 / 484 ms against 468 / 487 (no gain: without XLA a step's cost is mostly its ops'
    launches, not its rows), and the bigger graph loaded 0.3 s slower."""
    stages = _TAIL_STAGES if refills else _START_STAGES
    widths = [width]
    while isinstance(width, int) and len(widths) < stages and widths[-1] // 2 >= _MIN_TAIL_SLOTS:
        widths.append(widths[-1] // 2)
    return widths


def _first_slots(flags, width, k):
    """int32 [k]: the slots where ``flags`` [width] is True, in slot order, then the lowest
    others (a stable ``top_k``)."""
    return tf.math.top_k(tf.cast(flags, tf.int32) * (width - tf.range(width)), k=k).indices


# Positions in the search loop's variables (their order: `_compact`) of what a loop that loads
# no sentence never changes: the queue position and the slots' memory.
_UNCHANGED_WITHOUT_LOADS = (0, 8)


def _compact(loop_vars, width, new_width, beam, batch):
    """The search loop's variables over ``width`` slots -> over ``new_width``: the live slots
    (at most ``new_width``, in slot order), then empty ones; each slot with its beams' rows.
    The output buffers (per sentence) and the queue position stay as they are."""
    (next_sentence, occupant, slot_steps, scores, finished, lengths, ids, state, slot_memory,
     history, attention_history, *outputs) = loop_vars
    slots = _first_slots(occupant < batch, width, new_width)  # the live ones first
    rows = tf.reshape(slots[:, None] * beam + tf.range(beam)[None, :], [-1])

    def by(indices, nest):
        return tf.nest.map_structure(lambda t: tf.gather(t, indices), nest)

    attention_history = by(rows, attention_history)  # () without attention
    return (next_sentence, by(slots, occupant), by(slots, slot_steps), by(slots, scores),
            by(slots, finished), by(slots, lengths), by(rows, ids), by(rows, state),
            by(slots, slot_memory), by(rows, history), attention_history, *outputs)


def _backfill(tensor, rows, values):
    """``tensor`` with ``values`` written at the rows where ``rows`` is True (any rank)."""
    rows = tf.reshape(rows, [-1] + [1] * (tensor.shape.rank - 1))
    return tf.where(rows, values, tensor)


def beam_search(step_fn: StepFn, initial_state, batch_size, beam_size=5, max_length=100,
                start_id=START_ID, end_id=END_ID, length_penalty=0.0, forbid_ids=(), nbest=1,
                return_attention=False, attention_length=None,
                buffer_length=None, beam_sizes=None, vocabulary_size=None, memory=None,
                slots=None, xla=False, candidates=None) -> BeamSearchOutput:
    """Beam search that maximises log p(y | x) over a step function, batched over sentences.

    Each sentence keeps ``beam_size`` hypotheses. At every step each live hypothesis is extended
    by every allowed token, and the best ``beam_size`` candidates of the sentence (over
    ``beam_size * vocabulary``) survive; the recurrent state follows its hypothesis with
    ``tf.gather``. A hypothesis that emits ``end_id``, or reaches its sentence's
    ``max_length``, is finished: it stays in the beam with a frozen score (its only candidate is
    itself) until better ones push it out. The first step extends beam 0 only, so the beams do
    not start as copies. ``PAD_ID`` and ``start_id`` are never generated, nor ``forbid_ids``.

    Candidates are ranked by `Ranking` (log p, divided by the GNMT length penalty when
    ``length_penalty > 0``). A sentence is done when all its hypotheses are finished, or when
    its ``nbest``-th best finished hypothesis ranks strictly above the best any live one could
    reach (`Ranking.best_continuation`): its n-best list is final then, so it is read out at
    once and the sentence stops costing anything.

    **Slots** (continuous batching). The search keeps ``slots`` sentences in flight,
    ``slots * beam_size`` rows. When a sentence is done its slot is refilled with the next
    sentence of the batch, in order (its encoder ``memory`` and initial state loaded into the
    slot; at most four slots a step, so that the memory is written in place), so no row waits
    for the slowest sentence of a group. This needs the memory as an
    argument: with ``memory`` the step function is ``step_fn(ids, step, state, memory)``, the
    memory nest holding one row per slot (its sentence's, *not* repeated per beam: row ``r`` of
    ``ids`` and ``state`` belongs to memory row ``r // beam_size``) and ``step`` an int32
    ``[slots * beam_size]`` vector, each row's own step. Without ``memory`` the step function
    closes over its memory, already tiled (`tile_beams`), every sentence has its slot from the
    start (``slots`` = the batch), and ``step`` is a scalar. A sentence gets the same result in
    a refilled slot as alone (up to floating-point effects of the batch's shape). The tail:
    once no sentence is left to load and the live ones fit in half the slots, they are
    gathered into half as many (`_compact`) and another loop goes on over those, so the
    emptied slots stop costing (2 loops after refills; up to 4, halving down to 8 slots, when
    every sentence had a slot from the start: `_stage_widths`); this needs the batch and the
    slots as Python ints (static, as under XLA), else one loop runs to the end.

    Args:
        step_fn: ``(ids, step, state) -> (logits, state, attention)``, or with ``memory``
            ``(ids, step, state, memory)``; see the module docstring. Its state must keep its
            structure and shapes from step to step.
        initial_state: nest of tensors ``[batch, ...]`` (not tiled; this function tiles it).
        batch_size: int or int32 scalar tensor (dynamic in a serving signature); None takes it
            from the first tensor of ``initial_state``.
        beam_size: int >= 1 (a scalar tensor also works outside XLA).
        max_length: the maximum number of tokens of an output, ``end_id`` included: an int, an
            int32 scalar, or an int32 ``[batch]`` tensor of per-sentence limits (e.g.
            ``2 * source_length + 10``). Values below 1 are treated as 1, values above
            ``buffer_length`` as ``buffer_length``. Runtime data: under ``jit_compile=True``
            with a ``buffer_length``, new limits do not recompile.
        start_id: the first decoder input y_0.
        end_id: the token that finishes a hypothesis.
        length_penalty: float alpha >= 0 of the GNMT length penalty; 0 ranks by log p.
        forbid_ids: token ids that are never generated, e.g. ``(UNK_ID,)`` for the paper's
            "No UNK" mode; must not contain ``end_id``.
        nbest: how many hypotheses to return per sentence, 1 <= nbest <= beam_size.
        return_attention: also return the attention rows of the returned hypotheses.
        attention_length: int or int32 scalar, the length of the attention rows (the padded
            source length); required with ``return_attention``.
        buffer_length: int (or int32 scalar), the number of steps the output buffers hold,
            separate from the per-sentence limits: under XLA a compile-time constant (a Python
            int, or an argument of the compiled function: one compilation per value). None:
            ``max(max_length)`` (a constant when ``max_length`` is a Python value; else
            computed from the data, which under XLA makes the limits themselves compile-time
            constants).
        beam_sizes: optional int32 ``[batch]``, each sentence's own beam in
            ``[1, beam_size]`` (values outside are clipped to it): the search runs
            ``beam_size`` slots per sentence and, after every step's ``top_k``, empties the
            slots beyond the sentence's own beam. Since ``top_k`` is stable and the emptied
            slots hold ``-inf``, a sentence gets exactly what a search with its own beam
            gives (up to floating-point effects of the batch's shape). A sentence whose beam
            is below ``nbest`` gets empty slots (``-inf``) after its own beam's hypotheses.
        vocabulary_size: optional int, the width of ``step_fn``'s logits: the additive mask of
            the never-generated tokens is then built once per search, not at every step.
        memory: optional nest of tensors ``[batch, ...]``, the encoder's output per sentence,
            handed to ``step_fn`` one row per slot (see **Slots**).
        slots: with ``memory``, the number of sentences in flight: an int (static under
            XLA) or an int32 scalar; None: the whole batch (no refill). Clipped to the batch.
        xla: bool, whether the search is compiled by XLA (``jit_compile=True``); the results
            are the same either way. A done sentence's read-out and a refilled slot's memory
            are scatters into buffers carried by the loop: under XLA a scatter at every step
            (into a sentinel row when there is nothing to write) updates them in place, where a
            ``tf.cond`` would copy them into its output; TensorFlow's runtime without XLA
            copies a buffer at every scatter, so there they run under ``tf.cond``, at the
            steps that have something to write.
        candidates: optional int32 ``[C]``, a per-batch target vocabulary (candidate-list
            decoding, Jean et al. 2015; `bahdanau_tf.lexicon.CandidateLists`): ``step_fn``'s
            logits are ``[rows, C]``, position ``p`` scoring token ``candidates[p]``. The ids
            are ascending (so ties still go to the lower id) and include ``end_id``; the list
            may end with ``PAD_ID`` padding (a static size under XLA), whose logits the step
            function makes ``-inf`` (`bahdanau_tf.lexicon.candidate_projection`). The
            search maps positions back to ids: ``ids`` given to ``step_fn`` and the outputs
            are vocabulary ids. ``vocabulary_size`` is then unused.

    Returns:
        A `BeamSearchOutput` (ids, lengths, scores, attention) with ``nbest`` hypotheses per
        sentence, best first.

    Raises:
        ValueError: beam_size < 1, nbest < 1 or nbest > beam_size, max_length < 1, a bad
            buffer_length, length_penalty < 0, end_id in forbid_ids, return_attention without
            attention_length, slots without memory or below 1, or a step function that returns
            no attention when asked for it.

    Example:

    >>> import tensorflow as tf
    >>> # A scripted "model" that prefers token 4, then token 5, then [END] (id 2).
    >>> def step_fn(ids, step, state):
    ...     favourite = tf.gather([4, 5, 2], tf.minimum(step, 2))
    ...     logits = 5.0 * tf.one_hot(tf.fill(tf.shape(ids), favourite), 6)
    ...     return logits, state, None
    >>> out = beam_search(step_fn, initial_state=tf.zeros([2, 1]), batch_size=2,
    ...                   beam_size=3, max_length=10)
    >>> out.ids[:, 0, :4].numpy().tolist()
    [[4, 5, 2, 0], [4, 5, 2, 0]]
    >>> out.lengths.numpy().tolist()
    [[3], [3]]
    """
    _check_arguments(beam_size, nbest, max_length, buffer_length, length_penalty, forbid_ids,
                     end_id, return_attention, attention_length)
    if slots is not None and memory is None:
        raise ValueError("slots needs memory: a step function that closes over its memory "
                         "cannot have its slots refilled")
    if slots is not None and static_int(slots) is not None and static_int(slots) < 1:
        raise ValueError(f"slots must be >= 1, got {slots!r}")
    if batch_size is None:
        batch_size = tf.shape(tf.nest.flatten(initial_state)[0])[0]
    # Python ints where they are known, so that static shapes survive the loop (and XLA).
    def known(value):
        static = static_int(value)
        return static if static is not None else tf.cast(value, tf.int32)

    batch, beam, nbest = known(batch_size), known(beam_size), known(nbest)
    if not isinstance(beam, int) or not isinstance(nbest, int):
        tf.debugging.assert_less_equal(nbest, beam, message="nbest must be <= beam_size")
    width = batch if slots is None else known(slots)
    if isinstance(width, int) and isinstance(batch, int):
        width = min(width, batch)
    elif slots is not None:
        width = tf.minimum(width, batch)
    rows = width * beam  # the slots * beam rows seen by step_fn
    # no refill when every sentence has a slot from the start (known when tracing)
    refills = memory is not None and not (isinstance(width, int) and isinstance(batch, int) and width >= batch)
    ranking = Ranking(tf.convert_to_tensor(length_penalty, tf.float32))
    start_id, end_id = tf.cast(start_id, tf.int32), tf.cast(end_id, tf.int32)
    limits = tf.maximum(tf.cast(max_length, tf.int32), 1)  # int64 lengths welcome
    if limits.shape.rank == 0:
        limits = tf.fill([batch], limits)
    time = _buffer_steps(limits, max_length, buffer_length)
    limits = tf.minimum(limits, time)
    own_beams = None if beam_sizes is None else tf.clip_by_value(tf.cast(beam_sizes, tf.int32), 1, beam)
    # PAD and START are never outputs; END must stay allowed.
    never = tf.concat([tf.constant([PAD_ID], tf.int32), tf.reshape(start_id, [1]),
                       tf.reshape(tf.cast(forbid_ids, tf.int32), [-1])], axis=0)
    # folded once per search when the vocabulary is known, else at every step
    outer_mask, end_position = None, None
    if candidates is not None:  # logits over a candidate list: the mask is by the listed ids
        candidates = tf.cast(candidates, tf.int32)
        outer_mask = never_mask(None, never, end_id, token_ids=candidates)
        end_position = tf.argmax(tf.cast(tf.equal(candidates, end_id), tf.int32), output_type=tf.int32)
    elif vocabulary_size is not None and xla:
        # XLA fuses the block pass; TensorFlow's runtime runs each of its small ops as a kernel
        # of its own, which costs more than the two passes it saves (benchmarks/decode_step.py)
        outer_mask = vocabulary_mask(vocabulary_size, never, end_id)
    elif vocabulary_size is not None:
        outer_mask = never_mask(vocabulary_size, never, end_id)
    length = tf.cast(attention_length, tf.int32) if return_attention else 0
    # One extra entry past the batch: what an empty slot reads, and where it writes nothing.
    sentinel = lambda t, fill: tf.concat([t, tf.fill([1], tf.constant(fill, t.dtype))], 0)
    limits_of, own_beams_of = sentinel(limits, 1), None if own_beams is None else sentinel(own_beams, 1)
    last = tf.maximum(batch - 1, 0)  # memory and states are read at a clipped index

    def start_scores(count):
        # Beam 0 starts at log p = 0, the others at -inf: they get filled with beam 0's
        # continuations at the first step instead of duplicating it.
        return tf.tile(tf.where(tf.range(beam) == 0, 0.0, _NEG_INF)[None, :], [count, 1])

    def rows_of(slot_values):  # [slots] -> [slots * beam], consecutive copies
        return tf.repeat(slot_values, beam, axis=0)

    def gather_sentences(nest, sentences):
        return tf.nest.map_structure(lambda t: tf.gather(t, tf.minimum(sentences, last)), nest)

    # === The loop ===
    # Per slot: the sentence it holds (``batch`` when empty) and that sentence's steps so far;
    # per row: the tokens of its hypothesis so far (``history``) and their attention rows.
    def stage_loop(width, refills, next_width, loop_vars):
        """The search loop over ``width`` slots; with ``next_width`` it stops once no sentence
        is left to load and the live slots fit in ``next_width`` (`_compact` then)."""
        loads_per_step = min(_LOADS_PER_STEP, width) if isinstance(width, int) else tf.minimum(_LOADS_PER_STEP, width)

        def cond(next_sentence, occupant, *unused):
            live = tf.reduce_sum(tf.cast(occupant < batch, tf.int32))
            if next_width is None:
                return live > 0
            return (live > 0) & ((next_sentence < batch) | (live > next_width))

        def body(next_sentence, occupant, slot_steps, scores, finished, lengths, ids, state, slot_memory,
                 history, attention_history, out_ids, out_lengths, out_scores, out_attention):
            slot_limits = tf.gather(limits_of, occupant)
            slot_beams = None if own_beams_of is None else tf.gather(own_beams_of, occupant)
            if memory is None:  # every slot started at step 0: one step for all
                logits, state, attention = step_fn(ids, tf.reduce_max(slot_steps), state)
            else:
                logits, state, attention = step_fn(ids, rows_of(slot_steps), state, slot_memory)
            mask = outer_mask if outer_mask is not None else never_mask(tf.shape(logits)[-1], never, end_id)
            chosen = _select(logits, mask, scores, finished, lengths, slot_steps, slot_limits, ranking, beam,
                             end_id, slot_beams, candidates, end_position)
            # the states and histories follow their hypotheses, whatever their structure
            state = tf.nest.map_structure(lambda t: tf.gather(t, chosen.parent_rows), state)
            at_step = tf.range(time)[None, :] == rows_of(slot_steps)[:, None]  # [rows, time]
            history = tf.where(at_step, tf.reshape(chosen.written, [-1, 1]),
                               tf.gather(history, chosen.parent_rows))
            if return_attention:
                if attention is None:
                    raise ValueError("return_attention=True but step_fn returned attention=None")
                # the row that produced each kept token (rows after the end are masked at the end)
                row = tf.gather(tf.cast(attention, tf.float32), chosen.parent_rows)
                attention_history = tf.where(at_step[:, :, None], row[:, None, :],
                                             tf.gather(attention_history, chosen.parent_rows))
            scores, finished, lengths, slot_steps = chosen.scores, chosen.finished, chosen.lengths, slot_steps + 1
            ids = tf.reshape(chosen.token, [-1])

            # === Sentences done: their n-best is final, read it out ===
            done = (occupant < batch) & _sentences_done(scores, finished, lengths, slot_limits, ranking,
                                                        nbest, slot_beams)

            def read_out():
                best_ranks, best = tf.math.top_k(ranking.rank(scores, lengths), k=nbest)  # [slots, nbest]
                best_lengths = tf.where(tf.math.is_inf(best_ranks), 0, tf.gather(lengths, best, batch_dims=1))
                best_rows = best + tf.range(width)[:, None] * beam
                valid = tf.range(time)[None, None, :] < best_lengths[:, :, None]
                target = tf.where(done, occupant, batch)[:, None]  # not done: the sentinel row
                written = [tf.tensor_scatter_nd_update(out_ids, target, tf.where(valid, tf.gather(history, best_rows), PAD_ID)),
                           tf.tensor_scatter_nd_update(out_lengths, target, best_lengths),
                           tf.tensor_scatter_nd_update(out_scores, target, best_ranks)]
                if return_attention:
                    written.append(tf.tensor_scatter_nd_update(
                        out_attention, target,
                        tf.where(valid[..., None], tf.gather(attention_history, best_rows), 0.0)))
                else:
                    written.append(())
                return tuple(written)

            # Under XLA written at every step, into the sentinel row for the slots not done (a
            # scatter is in place, where a tf.cond would copy the buffers into its output); without
            # XLA only at the steps some sentence is done (each scatter copies its buffer).
            out_ids, out_lengths, out_scores, out_attention = _write_when(
                xla, done, lambda _: read_out(), (out_ids, out_lengths, out_scores, out_attention))

            # === Refill: a free slot takes the next sentence, up to four slots a step ===
            if refills:
                free = done | (occupant >= batch)
                order = tf.cumsum(tf.cast(free, tf.int32), exclusive=True)
                load = free & (order < loads_per_step) & (next_sentence + order < batch)
                occupant = tf.where(load, next_sentence + order, tf.where(done, batch, occupant))
                next_sentence += tf.reduce_sum(tf.cast(load, tf.int32))

                def refill(slot_memory, state, scores, finished, lengths, slot_steps, ids):
                    # The memory of a few slots is written, the loaded ones first, then others
                    # rewritten with their own memory (under XLA at every step, in place).
                    written_slots = _first_slots(load, width, loads_per_step)
                    slot_memory = tf.nest.map_structure(
                        lambda t, full: tf.tensor_scatter_nd_update(t, written_slots[:, None], tf.gather(
                            full, tf.minimum(tf.gather(occupant, written_slots), last))), slot_memory, memory)
                    load_rows = rows_of(load)
                    fresh = tile_beams(gather_sentences(initial_state, occupant), beam)
                    state = tf.nest.map_structure(lambda old, new: _backfill(old, load_rows, new), state, fresh)
                    scores = tf.where(load[:, None], start_scores(width), scores)
                    finished = tf.where(load[:, None], tf.math.is_inf(scores), finished)
                    return (slot_memory, state, scores, finished, tf.where(load[:, None], 0, lengths),
                            tf.where(load, 0, slot_steps), tf.where(load_rows, start_id, ids))

                slot_memory, state, scores, finished, lengths, slot_steps, ids = _write_when(
                    xla, load, lambda carried: refill(*carried),
                    (slot_memory, state, scores, finished, lengths, slot_steps, ids))
            else:
                occupant = tf.where(done, batch, occupant)
            return (next_sentence, occupant, slot_steps, scores, finished, lengths, ids, state, slot_memory,
                    history, attention_history, out_ids, out_lengths, out_scores, out_attention)

        def shaped_body(*loop_vars):
            # what the body computes has the loop variables' static shapes (some ops lose them)
            new = body(*loop_vars)
            for tensor, old in zip(tf.nest.flatten(new), tf.nest.flatten(loop_vars)):
                tensor.set_shape(old.shape)
            return new

        if refills:
            return tf.while_loop(cond, shaped_body, loop_vars)
        # Nothing to load: what the loop never changes (the queue position, the slots' memory)
        # is captured, not carried (see `_TAIL_STAGES`).
        fixed = {i: loop_vars[i] for i in _UNCHANGED_WITHOUT_LOADS}

        def full(changing):
            changing = iter(changing)
            return tuple(fixed[i] if i in fixed else next(changing) for i in range(len(loop_vars)))

        def part(values):
            return tuple(v for i, v in enumerate(values) if i not in fixed)

        changing = tf.while_loop(lambda *v: cond(*full(v)), lambda *v: part(shaped_body(*full(v))),
                                 part(loop_vars))
        return full(changing)

    occupant = tf.range(width)
    initial_memory = () if memory is None else gather_sentences(memory, occupant)
    loop_vars = (
        (tf.convert_to_tensor(width, tf.int32), occupant, tf.zeros([width], tf.int32),
         start_scores(width), tf.math.is_inf(start_scores(width)), tf.zeros([width, beam], tf.int32),
         tf.fill([rows], start_id), tile_beams(gather_sentences(initial_state, occupant), beam),
         initial_memory,
         tf.fill([rows, time], tf.constant(PAD_ID, tf.int32)),
         tf.zeros([rows, time, length], tf.float32) if return_attention else (),
         tf.fill([batch + 1, nbest, time], tf.constant(PAD_ID, tf.int32)),
         tf.zeros([batch + 1, nbest], tf.int32), tf.fill([batch + 1, nbest], _NEG_INF),
         tf.zeros([batch + 1, nbest, time, length], tf.float32) if return_attention else ()))
    # The tail: once no sentence is left to load, the slots empty one by one; the search goes
    # on over half the slots (the live ones gathered first) as soon as they fit there.
    widths = _stage_widths(width, refills) if memory is not None else [width]
    for stage, stage_width in enumerate(widths):
        next_width = widths[stage + 1] if stage + 1 < len(widths) else None
        loop_vars = stage_loop(stage_width, refills and stage == 0, next_width, loop_vars)
        if next_width is not None:
            loop_vars = _compact(loop_vars, stage_width, next_width, beam, batch)
    outputs = loop_vars
    out_ids, out_lengths, out_scores = (t[:batch] for t in outputs[-4:-1])
    return BeamSearchOutput(ids=out_ids, lengths=out_lengths, scores=out_scores,
                            attention=outputs[-1][:batch] if return_attention else None)


def greedy_search(step_fn: StepFn, initial_state, batch_size, max_length=100, start_id=START_ID,
                  end_id=END_ID, forbid_ids=(), return_attention=False,
                  attention_length=None) -> BeamSearchOutput:
    """Greedy decoding: the most probable token at each step, i.e. `beam_search` with one beam.

    Args:
        step_fn, initial_state, batch_size, max_length, start_id, end_id, forbid_ids,
        return_attention, attention_length: as for `beam_search`.

    Returns:
        A `BeamSearchOutput` with ``nbest = 1``; scores are unnormalised log-probabilities.
    """
    return beam_search(step_fn, initial_state, batch_size, beam_size=1, max_length=max_length,
                       start_id=start_id, end_id=end_id, length_penalty=0.0,
                       forbid_ids=forbid_ids, nbest=1, return_attention=return_attention,
                       attention_length=attention_length)


def ensemble_step_fn(step_fns) -> StepFn:
    """Combines the step functions of several models into one (Sutskever et al. 2014).

    The ensemble's distribution is the mean of the members' probabilities, returned as its log
    (``log(mean_k softmax(logits_k))``), so `beam_search` can drive it like a single model. Its
    state is a tuple with one member state per model, in order; its attention is the mean of the
    members' attentions, or None if any member returns None.

    Args:
        step_fns: a non-empty sequence of step functions over the same target vocabulary, each
            closing over its own, already tiled, encoder memory, or each taking it as a fourth
            argument (for `beam_search`'s ``memory``: a tuple with one member memory per model).

    Returns:
        A step function ``(ids, step, states[, memories]) -> (log_probs, states, attention)``.

    Raises:
        ValueError: no step functions, or (when called) a state tuple of the wrong length.

    Example:

        state = (model_a_state, model_b_state)
        output = beam_search(ensemble_step_fn([step_a, step_b]), state, batch_size)
    """
    step_fns = tuple(step_fns)
    if not step_fns:
        raise ValueError("ensemble_step_fn needs at least one step function, got none")
    count = len(step_fns)

    def step(ids, step_index, states, memories=None):
        states = tuple(states)
        if len(states) != count:
            raise ValueError(f"the ensemble state must hold {count} member states, "
                             f"got {len(states)}")
        log_probs, new_states, attentions = [], [], []
        for index, (member_step, member_state) in enumerate(zip(step_fns, states)):
            memory = () if memories is None else (memories[index],)
            logits, member_state, attention = member_step(ids, step_index, member_state, *memory)
            log_probs.append(tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1))
            new_states.append(member_state)
            attentions.append(attention)
        # log of the mean probability, computed in log space for stability
        mean_log_probs = tf.reduce_logsumexp(tf.stack(log_probs), axis=0) - np.log(count)
        attention = None
        if all(a is not None for a in attentions):
            attention = tf.add_n([tf.cast(a, tf.float32) for a in attentions]) / count
        return mean_log_probs, tuple(new_states), attention

    return step
