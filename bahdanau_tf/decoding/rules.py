"""The selection rules, once: how hypotheses rank, what is never generated, which candidates
survive a step, when a sentence is done. Written in ``keras.ops``.

The search (`bahdanau_tf.decoding.search`, with `bahdanau_tf.decoding.selection` around them)
calls these functions on every Keras backend. On the TensorFlow backend ``keras.ops`` is
TensorFlow: each call here builds the same ops a ``tf.`` spelling would (casts to the dtype a
tensor already has build nothing), so writing the rules once costs the TensorFlow search
nothing. The one exception is the gather: ``keras.ops.take`` also maps negative indices, an op
per gather that a search's indices never need, so `take` is ``tf.gather`` on TensorFlow.

The rules:

- **Ranking**: ``log p / ((5 + length) / 6) ** alpha`` (`Ranking`, `length_penalty_factor`);
  ties go to the lower beam, then the lower token id (`survivors`).
- **Never generated**: ``PAD``, the start token and the forbidden ids (e.g. ``[UNK]`` in the
  paper's "No UNK" mode); the end token always stays allowed (`never_generated`,
  `never_mask`).
- **Finished** hypotheses (the end token, or the sentence's length limit) keep their score:
  their only candidate is themselves extended by the end token at log-probability 0
  (`frozen_candidates`); a candidate at ``-inf`` (a forbidden token, an empty beam) is dead
  and finished too (`step_outcome`).
- **Done** sentences: all finished, or the n-th best finished one ranks strictly above the best
  any live one can reach (`sentences_done`); the n-best list is the top of the ranks
  (`best_hypotheses`).
"""

from typing import NamedTuple

import keras
from keras import ops

from bahdanau_tf.special_tokens import PAD_ID

NEG_INF = float("-inf")


def on_tensorflow() -> bool:
    """Whether Keras runs on TensorFlow (the backend whose graph tactics the search may use)."""
    return keras.backend.backend() == "tensorflow"


def take(x, indices, axis=0):
    """``x``'s entries at ``indices`` (never negative) along ``axis``: ``tf.gather`` on
    TensorFlow, ``keras.ops.take`` elsewhere."""
    if on_tensorflow():
        import tensorflow as tf

        return tf.gather(x, indices, axis=axis)
    return ops.take(x, indices, axis=axis)


#: the GNMT length penalty's alpha of every search unless told (`BeamSearch`, the Translator,
#: ``--length_penalty``): chosen on the dev split (benchmarks/README.md, "The length penalty")
DEFAULT_LENGTH_PENALTY = 1.0


def length_penalty_factor(lengths, alpha):
    """GNMT length penalty ``((5 + length) / 6) ** alpha`` (Wu et al. 2016, eq. 14).

    Args:
        lengths: int or float tensor of hypothesis lengths.
        alpha: float, 0 disables the penalty (the factor is exactly 1).

    Returns:
        float32 tensor, the same shape as ``lengths``.
    """
    return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, ops.cast(alpha, "float32"))


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

    alpha: object

    def rank(self, scores, lengths):
        """The ranks of hypotheses with log-probabilities ``scores`` and ``lengths`` tokens."""
        return scores / length_penalty_factor(lengths, self.alpha)

    def best_continuation(self, live_scores, limits):
        """The best rank any continuation of a live hypothesis with ``live_scores`` can reach."""
        return live_scores / length_penalty_factor(limits, self.alpha)


def never_generated(start_id, forbid_ids):
    """int32 ``[n]``: the tokens a search never emits: ``PAD``, ``start_id`` and ``forbid_ids``
    (a tuple or an int tensor; the end token must not be among them)."""
    return ops.concatenate([ops.convert_to_tensor([PAD_ID], "int32"),
                            ops.reshape(ops.cast(start_id, "int32"), [1]),
                            ops.reshape(ops.cast(forbid_ids, "int32"), [-1])], axis=0)


def never_mask(vocabulary_size, never, end_id, token_ids=None):
    """[vocabulary] float32: ``-inf`` at the tokens ``never`` generated, 0 elsewhere.

    Built once per search and added to every step's logits; ``end_id`` stays allowed (e.g.
    ``start_id == end_id``). ``token_ids``: the id at each position of the logits (a candidate
    list, see `bahdanau_tf.decoding.beam_search`'s ``candidates``); default ``range(vocabulary_size)``.
    """
    if token_ids is None:
        token_ids = ops.arange(vocabulary_size, dtype="int32")
    forbidden = ops.any(token_ids[:, None] == never[None, :], axis=1)
    forbidden = ops.logical_and(forbidden, ops.not_equal(token_ids, end_id))
    return ops.where(forbidden, NEG_INF, 0.0)


def kept_log_probabilities(values, logits, top):
    """The log-softmax of ``logits`` [rows, vocab] at the ``values`` [rows, k] a row keeps,
    ``top`` [rows, 1] each row's maximum: ``(x - max) - log(sum(exp(logits - max)))``, the
    same numbers as a full log-softmax without writing one over the vocabulary."""
    log_sum = ops.log(ops.sum(ops.exp(logits - top), axis=-1, keepdims=True))
    return (values - top) - log_sum


def frozen_candidates(log_probs, tokens, finished, end_id):
    """Each row's candidates ``(log_probs, tokens)`` [rows, k], a finished row's replaced by
    its one candidate: itself extended by ``end_id`` at log-prob 0, so its score stays frozen;
    its other slots ``-inf`` over the lowest other ids, as a ``top_k`` over such a row gives.
    ``finished``: bool, ``rows`` values in any shape."""
    slots = ops.arange(ops.shape(log_probs)[-1], dtype="int32")
    others = slots - 1 + ops.cast(slots - 1 >= end_id, "int32")  # the lowest ids but end_id
    frozen_tokens = ops.where(slots == 0, end_id, others)
    frozen = ops.reshape(finished, [-1, 1])
    log_probs = ops.where(frozen, ops.where(slots == 0, 0.0, NEG_INF)[None, :], log_probs)
    return log_probs, ops.where(frozen, frozen_tokens[None, :], tokens)


def survivors(ranks, batch, beam, per_row):
    """Each sentence's best ``beam`` candidates among its rows' ``per_row`` each, by rank.

    Args:
        ranks: float32 ``[batch * beam, per_row]``, every row's candidates sorted best first.
        batch, beam, per_row: ints (or int32 scalars; a Python ``beam == 1`` is greedy).

    Returns:
        ``(parent [batch, beam], picked [batch * beam])``: the row each survivor extends and
        its index in the flattened ``[batch * beam * per_row]`` candidates. ``top_k`` is
        stable: ties go to the lower beam, then (a row's candidates sorted) the lower id.
    """
    if isinstance(beam, int) and beam == 1:  # greedy: one candidate per sentence
        top = ops.zeros([batch, 1], "int32")
    else:
        _, top = ops.top_k(ops.reshape(ranks, [batch, beam * per_row]), k=beam)
    parent = top // per_row + ops.arange(batch, dtype="int32")[:, None] * beam
    return parent, ops.reshape(parent * per_row + top % per_row, [-1])


class Outcome(NamedTuple):
    """What a step leaves of its survivors (`step_outcome`), [batch, beam] each."""

    scores: object
    finished: object
    lengths: object
    written: object  # the token stored in the history (PAD after the end)


def step_outcome(scores, token, was_finished, parent_lengths, step, limits, end_id,
                 own_beams=None) -> Outcome:
    """The survivors' scores, finished flags, lengths and written tokens.

    Args:
        scores: float32 [batch, beam], the survivors' log-probabilities; token: int32 the same
            shape, the token each adds; was_finished, parent_lengths: what its parent row was.
        step: int32 ``[1, 1]`` or ``[batch, 1]``, the steps made before this one.
        limits: int32 [batch], each sentence's maximum length; end_id: int32 scalar.
        own_beams: None, or int32 [batch]: the slots beyond a sentence's own beam are emptied.
    """
    if own_beams is not None:
        beam = ops.shape(scores)[1]
        scores = ops.where(ops.arange(beam, dtype="int32")[None, :] < own_beams[:, None], scores, NEG_INF)
    # -inf: a candidate of a forbidden token or of an empty beam (fewer candidates than beams,
    # e.g. at step 0); frozen like a finished one and reported as an empty slot.
    dead = ops.isinf(scores)
    return Outcome(
        scores=scores,
        finished=was_finished | dead | (token == end_id) | (step + 1 >= limits[:, None]),
        lengths=ops.where(was_finished, parent_lengths, step + 1),
        written=ops.where(was_finished | dead, PAD_ID, token))


def sentences_done(scores, finished, lengths, limits, ranking, nbest, own_beams=None):
    """[batch] bool: no live hypothesis can still enter the sentence's n-best (all finished, or
    the ``nbest``-th finished one ranks strictly above `Ranking.best_continuation`)."""
    best_finished = ops.top_k(ops.where(finished, ranking.rank(scores, lengths), NEG_INF), k=nbest)[0]
    if own_beams is None:
        nth_finished = best_finished[:, -1]
    else:  # a sentence with a smaller beam has fewer hypotheses
        wanted = ops.minimum(nbest, own_beams) - 1
        at = ops.arange(ops.shape(best_finished)[1], dtype="int32")[None, :] == wanted[:, None]
        nth_finished = ops.max(ops.where(at, best_finished, NEG_INF), axis=1)
    best_live = ops.max(ops.where(finished, NEG_INF, scores), axis=1)
    return ops.all(finished, axis=1) | (nth_finished > ranking.best_continuation(best_live, limits))


def best_hypotheses(scores, lengths, ranking, nbest):
    """``(ranks, beams)`` [batch, nbest]: each sentence's n-best by rank, best first (ties to
    the lower beam); a rank of ``-inf`` is an empty slot, reported with length 0."""
    return ops.top_k(ranking.rank(scores, lengths), k=nbest)


__all__ = ["NEG_INF", "Outcome", "on_tensorflow", "take", "Ranking", "best_hypotheses", "frozen_candidates",
           "kept_log_probabilities", "length_penalty_factor", "never_generated", "never_mask",
           "sentences_done", "step_outcome", "survivors"]
