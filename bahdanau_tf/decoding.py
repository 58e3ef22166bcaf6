"""Beam search, greedy search and ensembles over a step function, in core TF ops only.

Decoding is a pure function of a *step function* (DESIGN.md §3, §6), the way OpenNMT-tf's
``utils/decoding.py`` is:

    step_fn(ids, step, state) -> (logits, state, attention)

- ``ids``: int32 ``[batch * beam]``, the previous token of every hypothesis (``start_id`` at step 0);
- ``step``: int32 scalar, 0 for the first step;
- ``state``: any nest of tensors whose leading dimension is ``batch * beam``;
- ``logits``: ``[batch * beam, vocabulary]``, any float dtype (cast to float32 and
  log-softmaxed here, so mixed-precision models need no care);
- ``attention``: ``[batch * beam, source_len]`` float, or None.

Anything constant over the decode (the encoder memory, the attention keys) is closed over by the
step function; the caller tiles it once with `tile_beams` before calling `beam_search`, so
reordering the beams never copies it. Greedy search is beam search with one beam, and an ensemble
(Sutskever et al. 2014) is just another step function, `ensemble_step_fn`.

`slot_search` is the loop under `beam_search`: it decodes a queue of sentences a few *slots*
at a time and refills a slot as soon as its sentence is done (continuous batching), so a
finished sentence stops costing; `beam_search` is the case of one slot per sentence. Per step
the search stays off the vocabulary axis except for one ``top_k`` and the row's
log-normaliser: the never-generated tokens are dropped from a slightly wider ``top_k`` of the
logits, finished rows are handled on the ``[rows, beam]`` candidates, and greedy search takes
the best token of each row with no cross-row ranking.

Everything is a ``tf.while_loop`` over static-shape buffers, so the same code runs eagerly, inside
``tf.function`` with a dynamic batch (e.g. a serving signature), and under ``jit_compile=True``;
no tensorflow-addons op (``GatherTree``) and no tf-text op is used: the backtracking through the
beam parents is a second small ``tf.while_loop``.
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


def _static_int(value):
    """The Python int of ``value`` when it is known when tracing, else None."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    static = tf.get_static_value(value)
    if static is None or np.ndim(static) != 0:
        return None
    return int(static)


def _check_arguments(beam_size, nbest, max_length, buffer_length, length_penalty, forbid_ids,
                     end_id, return_attention, attention_length):
    """ValueError for every argument whose value is known when tracing and wrong."""
    static_beam, static_nbest = _static_int(beam_size), _static_int(nbest)
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
    if static_forbid is not None and _static_int(end_id) is not None and np.any(
            np.asarray(static_forbid) == _static_int(end_id)):
        raise ValueError(f"forbid_ids must not contain end_id={end_id!r}, got {forbid_ids!r}")
    if return_attention and attention_length is None:
        raise ValueError("return_attention=True needs attention_length (the source length)")
    static_max = tf.get_static_value(max_length) if not isinstance(
        max_length, (int, np.integer)) else max_length
    if static_max is not None and np.any(np.asarray(static_max) < 1):
        raise ValueError(f"max_length must be >= 1, got {max_length!r}")
    static_buffer = None if buffer_length is None else _static_int(buffer_length)
    if static_buffer is not None and static_buffer < 1:
        raise ValueError(f"buffer_length must be >= 1, got {buffer_length!r}")


def _buffer_steps(limits, max_length, buffer_length):
    """The number of steps the buffers hold: ``buffer_length``, else the largest limit (a
    Python int when it is known when tracing, so that shapes stay static)."""
    if buffer_length is not None:
        static = _static_int(buffer_length)
        return static if static is not None else tf.maximum(tf.cast(buffer_length, tf.int32), 1)
    static_max = tf.get_static_value(max_length) if not isinstance(
        max_length, (int, np.integer)) else max_length
    if static_max is not None:
        return max(int(np.max(static_max)), 1)
    return tf.maximum(tf.reduce_max(limits), 1)  # an empty batch still needs one step


def _row_candidates(logits, never, per_row):
    """The best ``per_row`` allowed extensions of every row and their log-probabilities.

    The ranking is taken on the logits: within a row, log p = logit - log-normaliser keeps
    their order, so the normaliser is added to the ``per_row`` survivors only. Tokens in
    ``never`` are dropped from a ``top_k`` a little wider than ``per_row`` (``never`` has a
    few static entries), so no step builds a vocabulary-sized mask. A per-batch vocabulary
    (candidate lists) would feed its own logits and token ids here.

    Args:
        logits: ``[rows, vocab]`` float.
        never: int32 ``[m]``, static ``m``: tokens never generated (-1 for none).
        per_row: int (or int32 scalar) <= vocab.

    Returns:
        ``(log_probs, tokens)``: float32 and int32 ``[rows, per_row]``, best first (ties to
        the lower token id); ``-inf`` where fewer than ``per_row`` tokens are allowed.
    """
    logits = tf.cast(logits, tf.float32)
    extra = never.shape[0]
    vocab = logits.shape[-1]
    if isinstance(per_row, int) and vocab is not None:
        wide = min(per_row + extra, vocab)
        per_row = min(per_row, wide)  # static: XLA needs it
    else:
        wide = tf.minimum(per_row + extra, tf.shape(logits)[-1])
        per_row = tf.minimum(per_row, wide)
    top_logits, tokens = tf.math.top_k(logits, k=wide)  # sorted, ties to the lower id
    row_max = top_logits[:, :1]
    forbidden = tf.reduce_any(tokens[:, :, None] == never[None, None, :], axis=-1)
    top_logits, kept = tf.math.top_k(tf.where(forbidden, _NEG_INF, top_logits), k=per_row)
    tokens = tf.gather(tokens, kept, batch_dims=1)
    # the row's log-normaliser, in tf.nn.log_softmax's order: (x - max) - log(sum(exp(x - max)))
    log_sum = tf.math.log(tf.reduce_sum(tf.exp(logits - row_max), axis=-1, keepdims=True))
    return (top_logits - row_max) - log_sum, tokens


class _Step(NamedTuple):
    """The survivors of one step: [slots, beam] each, ``parent_rows`` [slots * beam]."""

    parent_rows: tf.Tensor  # the row of the previous step each survivor extends
    token: tf.Tensor  # the token it adds
    scores: tf.Tensor
    finished: tf.Tensor
    lengths: tf.Tensor
    written: tf.Tensor  # the token stored in the buffer (PAD after the end)


def _select(log_probs, tokens, scores, finished, lengths, steps, limits, ranking, beam, end_id,
            own_beams=None):
    """The best ``beam`` candidates of each sentence, by rank (ties to the lower beam, then the
    lower token id); with ``own_beams`` the slots beyond a sentence's own beam are emptied, so
    they never extend anything.

    Args:
        log_probs, tokens: ``[rows, per_row]``, each row's best extensions (`_row_candidates`).
        scores, finished, lengths: ``[batch, beam]``, the hypotheses being extended.
        steps: int32 ``[batch]``, each sentence's own step (0 at its first token).
        limits: int32 ``[batch]``, each sentence's length limit.
    """
    batch = scores.shape[0] if scores.shape[0] is not None else tf.shape(scores)[0]
    per_row = log_probs.shape[-1] if log_probs.shape[-1] is not None else tf.shape(log_probs)[-1]
    flat_finished, flat_lengths = tf.reshape(finished, [-1]), tf.reshape(lengths, [-1])
    # a finished row has one candidate, itself extended by end_id at log-prob 0: its score stays
    first = tf.range(per_row)[None, :] == 0
    log_probs = tf.where(flat_finished[:, None], tf.where(first, 0.0, _NEG_INF), log_probs)
    tokens = tf.where(flat_finished[:, None] & first, end_id, tokens)
    row_totals = tf.reshape(scores, [-1, 1]) + log_probs  # [rows, per_row], sorted
    # All candidates of one row have the same length, so the same penalty: a row's best `beam`
    # by log p are its best by rank, and only they need ranking against the sentence's other
    # rows (a division over [rows, beam], not over the vocabulary).
    row_steps = tf.repeat(steps, beam)
    candidate_lengths = tf.where(flat_finished, flat_lengths, row_steps + 1)
    if isinstance(beam, int) and beam == 1:  # greedy: each sentence's one row is its best
        parent = tf.range(batch)[:, None]
        token, new_scores = tokens[:, :1], row_totals[:, :1]
    else:
        ranks = ranking.rank(row_totals, candidate_lengths[:, None])
        # top_k is stable: ties go to the lower beam, then (within a row, sorted) the lower id
        _, top = tf.math.top_k(tf.reshape(ranks, [batch, beam * per_row]), k=beam)  # [batch, beam]
        parent = top // per_row + tf.range(batch)[:, None] * beam
        picked = tf.reshape(parent * per_row + top % per_row, [-1])
        token = tf.reshape(tf.gather(tf.reshape(tokens, [-1]), picked), [batch, beam])
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
        finished=(was_finished | dead | tf.equal(token, end_id)
                  | (steps[:, None] + 1 >= limits[:, None])),
        lengths=tf.where(was_finished, tf.gather(flat_lengths, parent), steps[:, None] + 1),
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


def _rows_where(mask, new, old):
    """``new`` in the rows where ``mask`` [rows] holds, else ``old``, for nests of any rank."""
    def pick(n, o):
        return tf.where(tf.reshape(mask, [-1] + [1] * (o.shape.rank - 1)), n, o)
    return tf.nest.map_structure(pick, new, old)


class _Slots(NamedTuple):
    """The loop's per-slot bookkeeping (``[slots]`` or ``[slots, beam]``)."""

    sentence: tf.Tensor  # the sentence each slot decodes; `count` when idle
    active: tf.Tensor
    steps: tf.Tensor  # the slot's own step
    limits: tf.Tensor
    beams: tf.Tensor  # each slot's own beam (the full beam without per-sentence beams)
    scores: tf.Tensor
    finished: tf.Tensor
    lengths: tf.Tensor


@tf.autograph.experimental.do_not_convert  # plain TF ops; Python branches on static values only
def slot_search(step_fn, memory, initial_state, batch_size=None, slots=None, count=None, beam_size=5,
                max_length=100, start_id=START_ID, end_id=END_ID, length_penalty=0.0,
                forbid_ids=(), nbest=1, return_attention=False, attention_length=None,
                buffer_length=None, beam_sizes=None) -> BeamSearchOutput:
    """Beam search with continuous batching: ``slots`` sentences at a time, refilled in order.

    The sentences wait in a queue (their index order). ``slots`` of them are searched together,
    ``beam_size`` rows each; when a sentence is done (the early-exit test of `beam_search`,
    checked per slot), its n-best list is written out and the next sentence of the queue is
    loaded into its slot (its memory rows, its initial state, a fresh beam), so a finished
    sentence stops costing while others remain. Rows are independent: every sentence gets
    what it gets decoded alone (up to floating-point effects of the batch's shape).

    The token history of every row is kept shifted: each step reorders it by the beam parents
    and appends one column, a uniform slice update, and a sentence's tokens are the last
    ``steps`` columns of its rows.

    Args:
        step_fn: ``(ids, step, state, memory) -> (logits, state, attention)``: like a
            `beam_search` step function, but handed the memory rows of its hypotheses
            (``memory`` gathered to ``[slots * beam, ...]``) instead of closing over them.
            ``step`` counts the loop's steps, not a hypothesis's position.
        memory: nest of tensors ``[batch, ...]``, constant over a sentence's search (not
            tiled): gathered into a slot's rows when a sentence is loaded, never reordered.
        initial_state: nest of tensors ``[batch, ...]``.
        batch_size: int or int32 scalar; None takes it from the first tensor of
            ``initial_state``.
        slots: int (or int32 scalar), sentences searched at once; None: the whole batch.
            Capped at the batch.
        count: int32 scalar, the sentences to search (the first ``count``; the rest are
            filler that costs nothing but its place in the outputs); None: all.
        beam_size, max_length, start_id, end_id, length_penalty, forbid_ids, nbest,
        return_attention, attention_length, buffer_length, beam_sizes: as for `beam_search`.

    Returns:
        A `BeamSearchOutput` over the ``batch`` sentences (filler rows: no tokens, ``-inf``).
    """
    _check_arguments(beam_size, nbest, max_length, buffer_length, length_penalty, forbid_ids,
                     end_id, return_attention, attention_length)
    if batch_size is None:
        batch_size = tf.shape(tf.nest.flatten(initial_state)[0])[0]
    batch = _known(batch_size)
    beam, nbest = _known(beam_size), _known(nbest)
    if not isinstance(beam, int) or not isinstance(nbest, int):
        tf.debugging.assert_less_equal(nbest, beam, message="nbest must be <= beam_size")
    slots = batch if slots is None else _known(slots)
    slots = min(slots, batch) if isinstance(slots, int) and isinstance(batch, int) else tf.minimum(slots, batch)
    count = batch if count is None else tf.minimum(tf.cast(count, tf.int32), batch)
    rows = slots * beam
    ranking = Ranking(tf.convert_to_tensor(length_penalty, tf.float32))
    start_id, end_id = tf.cast(start_id, tf.int32), tf.cast(end_id, tf.int32)
    limits = tf.maximum(tf.cast(max_length, tf.int32), 1)  # int64 lengths welcome
    if limits.shape.rank == 0:
        limits = tf.fill([batch], limits)
    time = _buffer_steps(limits, max_length, buffer_length)
    limits = tf.minimum(limits, time)
    own_beams = (tf.fill([batch], tf.cast(beam, tf.int32)) if beam_sizes is None
                 else tf.clip_by_value(tf.cast(beam_sizes, tf.int32), 1, beam))
    # PAD and START are never outputs; END must stay allowed (start_id may equal end_id).
    never = tf.concat([tf.constant([PAD_ID], tf.int32), tf.reshape(start_id, [1]),
                       tf.reshape(tf.cast(forbid_ids, tf.int32), [-1])], axis=0)
    never = tf.where(tf.equal(never, end_id), -1, never)
    width = tf.cast(attention_length, tf.int32) if return_attention else 0

    def load(slot_state, gets, next_sentence):
        """Loads the next sentences of the queue into the free slots where ``gets`` holds."""
        (bookkeeping, ids, state, row_memory, history, attention_history) = slot_state
        order = tf.cumsum(tf.cast(gets, tf.int32), exclusive=True)
        sentence = tf.where(gets, next_sentence + order, bookkeeping.sentence)
        picked = tf.minimum(sentence, tf.maximum(batch - 1, 0))
        row_gets = tf.repeat(gets, beam)
        row_sentence = tf.repeat(picked, beam)
        fresh = tf.tile(tf.where(tf.range(beam) == 0, 0.0, _NEG_INF)[None, :], [slots, 1])
        new = _Slots(
            sentence=sentence,
            active=bookkeeping.active | gets,
            steps=tf.where(gets, 0, bookkeeping.steps),
            limits=tf.where(gets, tf.gather(limits, picked), bookkeeping.limits),
            beams=tf.where(gets, tf.gather(own_beams, picked), bookkeeping.beams),
            scores=tf.where(gets[:, None], fresh, bookkeeping.scores),
            finished=tf.where(gets[:, None], tf.math.is_inf(fresh), bookkeeping.finished),
            lengths=tf.where(gets[:, None], 0, bookkeeping.lengths))
        state = _rows_where(row_gets, tf.nest.map_structure(
            lambda t: tf.gather(t, row_sentence), initial_state), state)
        row_memory = tf.nest.map_structure(lambda t: tf.gather(t, row_sentence), memory)
        ids = tf.where(row_gets, start_id, ids)
        history = tf.where(row_gets[:, None], PAD_ID, history)
        if return_attention:
            attention_history = tf.where(row_gets[:, None, None], 0.0, attention_history)
        return (new, ids, state, row_memory, history, attention_history), \
            next_sentence + tf.reduce_sum(tf.cast(gets, tf.int32))

    def emit(bookkeeping, history, attention_history, outputs, done):
        """Writes the n-best lists of the slots where ``done`` holds into ``outputs``."""
        out_ids, out_lengths, out_scores, out_attention = outputs
        best_ranks, best = tf.math.top_k(ranking.rank(bookkeeping.scores, bookkeeping.lengths), k=nbest)
        best_lengths = tf.where(tf.math.is_inf(best_ranks), 0,
                                tf.gather(bookkeeping.lengths, best, batch_dims=1))
        best_rows = best + tf.range(slots)[:, None] * beam  # [slots, nbest]
        # the slot's tokens are the last `steps` columns of its rows' shifted history
        positions = tf.minimum(time - bookkeeping.steps[:, None, None] + tf.range(time)[None, None, :],
                               time - 1)  # [slots, 1, time]
        positions = tf.broadcast_to(positions, [slots, nbest, time])
        valid = tf.range(time)[None, None, :] < best_lengths[:, :, None]
        ids = tf.gather(tf.gather(history, best_rows), positions, batch_dims=2)
        target = tf.where(done, bookkeeping.sentence, batch)[:, None]  # idle: the spare row
        out_ids = tf.tensor_scatter_nd_update(out_ids, target, tf.where(valid, ids, PAD_ID))
        out_lengths = tf.tensor_scatter_nd_update(out_lengths, target, best_lengths)
        out_scores = tf.tensor_scatter_nd_update(out_scores, target, best_ranks)
        if return_attention:
            attention = tf.gather(tf.gather(attention_history, best_rows), positions, batch_dims=2)
            out_attention = tf.tensor_scatter_nd_update(
                out_attention, target, tf.where(valid[..., None], attention, 0.0))
        return out_ids, out_lengths, out_scores, out_attention

    # === The loop ===
    def cond(step, next_sentence, slot_state, outputs):
        return tf.reduce_any(slot_state[0].active)

    def body(step, next_sentence, slot_state, outputs):
        entry = (slot_state, outputs)
        (bookkeeping, ids, state, row_memory, history, attention_history) = slot_state
        logits, state, attention = step_fn(ids, step, state, row_memory)
        log_probs, tokens = _row_candidates(logits, never, per_row)
        chosen = _select(log_probs, tokens, bookkeeping.scores, bookkeeping.finished,
                         bookkeeping.lengths, bookkeeping.steps, bookkeeping.limits, ranking,
                         beam, end_id, None if beam_sizes is None else bookkeeping.beams)
        # the states and histories follow their hypotheses, whatever their structure
        state = tf.nest.map_structure(lambda t: tf.gather(t, chosen.parent_rows), state)
        history = tf.concat([tf.gather(history, chosen.parent_rows)[:, 1:],
                             tf.reshape(chosen.written, [-1, 1])], axis=1)
        if return_attention:
            if attention is None:
                raise ValueError("return_attention=True but step_fn returned attention=None")
            # the row that produced each kept token (rows after the end are masked at the end)
            row = tf.gather(tf.cast(attention, tf.float32), chosen.parent_rows)
            attention_history = tf.concat(
                [tf.gather(attention_history, chosen.parent_rows)[:, 1:], row[:, None]], axis=1)
        bookkeeping = bookkeeping._replace(
            steps=bookkeeping.steps + 1, scores=chosen.scores, finished=chosen.finished,
            lengths=chosen.lengths)
        done = bookkeeping.active & _sentences_done(
            chosen.scores, chosen.finished, chosen.lengths, bookkeeping.limits, ranking, nbest,
            None if beam_sizes is None else bookkeeping.beams)
        slot_state = (bookkeeping, tf.reshape(chosen.token, [-1]), state, row_memory, history,
                      attention_history)

        def finish_and_refill():
            new_outputs = emit(bookkeeping, history, attention_history, outputs, done)
            emptied = bookkeeping._replace(active=bookkeeping.active & ~done,
                                           sentence=tf.where(done, batch, bookkeeping.sentence))
            free = ~emptied.active
            gets = free & (next_sentence + tf.cumsum(tf.cast(free, tf.int32), exclusive=True) < count)
            loaded, new_next = load((emptied,) + slot_state[1:], gets, next_sentence)
            return new_next, loaded, new_outputs

        next_sentence, slot_state, outputs = tf.cond(
            tf.reduce_any(done), finish_and_refill, lambda: (next_sentence, slot_state, outputs))
        # shapes as they entered (a dynamic batch dimension inside the step must not leak out)
        tf.nest.map_structure(lambda new, old: new.set_shape(old.shape), (slot_state, outputs), entry)
        return step + 1, next_sentence, slot_state, outputs

    per_row = beam  # capped by the vocabulary in _row_candidates
    empty = _Slots(
        sentence=tf.fill([slots], batch), active=tf.zeros([slots], tf.bool),
        steps=tf.zeros([slots], tf.int32), limits=tf.ones([slots], tf.int32),
        beams=tf.ones([slots], tf.int32), scores=tf.fill([slots, beam], _NEG_INF),
        finished=tf.ones([slots, beam], tf.bool), lengths=tf.zeros([slots, beam], tf.int32))
    first = tf.range(slots) < count
    slot_state, next_sentence = load(
        (empty, tf.fill([rows], start_id),
         tf.nest.map_structure(lambda t: tf.gather(t, tf.zeros([rows], tf.int32)), initial_state),
         None, tf.fill([rows, time], tf.constant(PAD_ID, tf.int32)),
         tf.zeros([rows, time, width] if return_attention else [0], tf.float32)),
        first, tf.constant(0, tf.int32))
    outputs = (tf.fill([batch + 1, nbest, time], tf.constant(PAD_ID, tf.int32)),
               tf.zeros([batch + 1, nbest], tf.int32),
               tf.fill([batch + 1, nbest], _NEG_INF),
               tf.zeros([batch + 1, nbest, time, width] if return_attention else [batch + 1, 0],
                        tf.float32))
    _, _, _, outputs = tf.while_loop(
        cond, body, (tf.constant(0, tf.int32), next_sentence, slot_state, outputs))
    out_ids, out_lengths, out_scores, out_attention = (t[:batch] for t in outputs)
    return BeamSearchOutput(ids=out_ids, lengths=out_lengths, scores=out_scores,
                            attention=out_attention if return_attention else None)


def _known(value):
    """A Python int where ``value`` is known when tracing (static shapes survive the loop and
    XLA), else an int32 tensor."""
    static = _static_int(value)
    return static if static is not None else tf.cast(value, tf.int32)


def beam_search(step_fn: StepFn, initial_state, batch_size, beam_size=5, max_length=100,
                start_id=START_ID, end_id=END_ID, length_penalty=0.0, forbid_ids=(), nbest=1,
                return_attention=False, attention_length=None,
                buffer_length=None, beam_sizes=None) -> BeamSearchOutput:
    """Beam search that maximises log p(y | x) over a step function, batched over sentences.

    Each sentence keeps ``beam_size`` hypotheses. At every step each live hypothesis is extended
    by every allowed token, and the best ``beam_size`` candidates of the sentence (over
    ``beam_size * vocabulary``) survive; the recurrent state follows its hypothesis with
    ``tf.gather``. A hypothesis that emits ``end_id``, or reaches its sentence's
    ``max_length``, is finished: it stays in the beam with a frozen score (its only candidate is
    itself) until better ones push it out. The first step extends beam 0 only, so the beams do
    not start as copies. ``PAD_ID`` and ``start_id`` are never generated, nor ``forbid_ids``.

    Candidates are ranked by `Ranking` (log p, divided by the GNMT length penalty when
    ``length_penalty > 0``). The loop stops after the buffer's length, or earlier when every
    sentence is done: all its hypotheses finished, or its ``nbest``-th best finished hypothesis
    ranks strictly above the best any live one could reach (`Ranking.best_continuation`).
    Stopping early never changes the result.

    Args:
        step_fn: ``(ids, step, state) -> (logits, state, attention)``, see the module docstring.
            Its state must keep its structure and shapes from step to step.
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
        buffer_length: int (or int32 scalar), the number of steps the output buffers hold and
            the most the loop runs, separate from the per-sentence limits: under XLA a
            compile-time constant (a Python int, or an argument of the compiled function:
            one compilation per value). None: ``max(max_length)`` (a constant when
            ``max_length`` is a Python value; else computed from the data, which under XLA
            makes the limits themselves compile-time constants).
        beam_sizes: optional int32 ``[batch]``, each sentence's own beam in
            ``[1, beam_size]`` (values outside are clipped to it): the search runs
            ``beam_size`` slots per sentence and, after every step's ``top_k``, empties the
            slots beyond the sentence's own beam. Since ``top_k`` is stable and the emptied
            slots hold ``-inf``, a sentence gets exactly what a search with its own beam
            gives (up to floating-point effects of the batch's shape). A sentence whose beam
            is below ``nbest`` gets empty slots (``-inf``) after its own beam's hypotheses.

    Returns:
        A `BeamSearchOutput` (ids, lengths, scores, attention) with ``nbest`` hypotheses per
        sentence, best first.

    Raises:
        ValueError: beam_size < 1, nbest < 1 or nbest > beam_size, max_length < 1, a bad
            buffer_length, length_penalty < 0, end_id in forbid_ids, return_attention without
            attention_length, or a step function that returns no attention when asked for it.

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
    if batch_size is None:
        batch_size = tf.shape(tf.nest.flatten(initial_state)[0])[0]
    return slot_search(lambda ids, step, state, unused_memory: step_fn(ids, step, state), (),
                       initial_state, batch_size=batch_size, beam_size=beam_size,
                       max_length=max_length, start_id=start_id, end_id=end_id,
                       length_penalty=length_penalty, forbid_ids=forbid_ids, nbest=nbest,
                       return_attention=return_attention, attention_length=attention_length,
                       buffer_length=buffer_length, beam_sizes=beam_sizes)


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
        step_fns: a non-empty sequence of step functions over the same target vocabulary (each
            closing over its own, already tiled, encoder memory).

    Returns:
        A step function ``(ids, step, states) -> (log_probs, states, attention)``.

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

    def step(ids, step_index, states):
        states = tuple(states)
        if len(states) != count:
            raise ValueError(f"the ensemble state must hold {count} member states, "
                             f"got {len(states)}")
        log_probs, new_states, attentions = [], [], []
        for member_step, member_state in zip(step_fns, states):
            logits, member_state, attention = member_step(ids, step_index, member_state)
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
