"""Beam search in ``keras.ops``: translating on every Keras backend (JAX, PyTorch, TensorFlow).

The TensorFlow search (`bahdanau_tf.decoding.search`) is what TensorFlow runs and exports: slots
refilled as sentences finish, compaction, XLA-specific shortcuts. This one is the plain search
the keras-hub samplers show (``keras_hub/src/samplers/beam_sampler.py``): fixed-shape buffers of
``batch * beam`` rows updated inside one ``keras.ops.while_loop``, so it compiles as a whole (on
JAX the loop is ``jax.lax.while_loop`` inside `compiled`'s ``jax.jit``). Every sentence starts at
step 0 and the loop runs until each sentence is done; a done sentence's hypotheses are all
marked finished, so they only keep their scores from then on (the n-best list they hold is final
by `bahdanau_tf.decoding.rules.sentences_done`), and the n-best lists are read at the end.

What it finds is defined by `bahdanau_tf.decoding.rules`, the functions the TensorFlow search
calls too: the ranking and length penalty, the never-generated tokens, the frozen finished
hypotheses, the stable choice of survivors, the done sentences, the n-best order. Over the same
logits both searches return the same hypotheses and scores.

The step function is `bahdanau_tf.decoding`'s, with the memory as an argument (one row per
sentence, shared by its beams); `model_search` makes it of a `bahdanau_tf.decoding.StepModel`'s
``decode_step`` (or an ensemble's) and compiles the whole search for the backend.
"""

from typing import Any, NamedTuple

import keras
from keras import ops

from bahdanau_tf.decoding.rules import (NEG_INF, Ranking, best_hypotheses, frozen_candidates,
                                        kept_log_probabilities, never_generated, never_mask,
                                        sentences_done, step_outcome, survivors)
from bahdanau_tf.decoding.step_functions import ensemble_step_fn
from bahdanau_tf.special_tokens import END_ID, PAD_ID, START_ID, UNK_ID


class PortableSearch(NamedTuple):
    """What `portable_beam_search` looks for, as Python values (they shape the compiled loop).

    Attributes:
        beam_size: int >= 1 (1 is greedy search); nbest: int in [1, beam_size].
        length_penalty: float alpha >= 0 of the GNMT length penalty (`rules.Ranking`).
        return_attention: bool, also return the attention rows of the returned hypotheses.
        time: int >= 1, the steps the output buffers hold (limits above it are cut to it).
    """

    beam_size: int = 5
    nbest: int = 1
    length_penalty: float = 0.0
    return_attention: bool = False
    time: int = 100


class LoopState(NamedTuple):
    """The loop's variables: per sentence ``[batch, beam]`` or ``[batch]``, per row ``[rows, ...]``
    (``rows = batch * beam``, a sentence's beams consecutive). An unused field is ``()``."""

    step: Any  # int32 []: the steps made
    ids: Any  # int32 [rows]: each hypothesis's last token, the next step's input
    state: Any  # the model's decoding state, [rows, ...]
    scores: Any  # float32 [batch, beam]: log p of each hypothesis (-inf: none)
    finished: Any  # bool [batch, beam]
    lengths: Any  # int32 [batch, beam]: tokens so far, end included
    done: Any  # bool [batch]: the sentence's n-best list is final
    history: Any  # int32 [rows, time]: each hypothesis's tokens so far
    attention_history: Any  # float32 [rows, time, source_len], or ()


class _Inputs(NamedTuple):
    """What the loop reads and never changes."""

    step_fn: Any
    memory: Any
    mask: Any  # float32 [vocabulary]: -inf at the never-generated tokens
    limits: Any  # int32 [batch]
    ranking: Ranking
    batch: int
    search: PortableSearch


def _repeat_rows(nest, beam):
    """Every tensor of a nest repeated ``beam`` times along its first axis (consecutive copies)."""
    return keras.tree.map_structure(lambda t: ops.repeat(t, beam, axis=0), nest)


def _initial_state(inputs, initial_state, attention_length) -> LoopState:
    batch, beam, time = inputs.batch, inputs.search.beam_size, inputs.search.time
    rows = batch * beam
    # beam 0 starts at log p = 0, the others empty (-inf): the first step fills them with beam
    # 0's continuations instead of copies of it
    scores = ops.tile(ops.where(ops.arange(beam) == 0, 0.0, NEG_INF)[None, :], [batch, 1])
    attention_history = ()
    if inputs.search.return_attention:
        attention_history = ops.zeros([rows, time, attention_length], "float32")
    return LoopState(
        step=ops.convert_to_tensor(0, "int32"), ids=ops.full([rows], START_ID, "int32"),
        state=_repeat_rows(initial_state, beam), scores=scores, finished=ops.isinf(scores),
        lengths=ops.zeros([batch, beam], "int32"), done=ops.zeros([batch], "bool"),
        history=ops.full([rows, time], PAD_ID, "int32"), attention_history=attention_history)


def _row_candidates(logits, mask, finished, per_row):
    """Each row's best ``per_row`` allowed extensions: log-probabilities and tokens."""
    logits = ops.cast(logits, "float32")
    masked = logits + mask
    if per_row == 1:
        values = ops.max(masked, axis=-1, keepdims=True)
        tokens = ops.cast(ops.argmax(masked, axis=-1), "int32")[:, None]
    else:
        values, tokens = ops.top_k(masked, per_row)  # sorted, ties to the lower id
    log_probs = kept_log_probabilities(values, logits, ops.max(logits, axis=-1, keepdims=True))
    return frozen_candidates(log_probs, ops.cast(tokens, "int32"), finished, END_ID)


def _advance(inputs: _Inputs, loop: LoopState) -> LoopState:
    """One step: the model's logits, each sentence's best ``beam`` extensions, the state and the
    histories reordered to follow them, and the sentences now done."""
    batch, beam, search = inputs.batch, inputs.search.beam_size, inputs.search
    logits, network_state, attention = inputs.step_fn(loop.ids, loop.step, loop.state, inputs.memory)
    per_row = min(beam, logits.shape[-1])
    log_probs, row_tokens = _row_candidates(logits, inputs.mask, loop.finished, per_row)
    row_totals = ops.reshape(loop.scores, [-1, 1]) + log_probs  # [rows, per_row], sorted
    candidate_lengths = ops.reshape(ops.where(loop.finished, loop.lengths, loop.step + 1), [-1, 1])
    parent, picked = survivors(inputs.ranking.rank(row_totals, candidate_lengths), batch, beam, per_row)
    token = ops.reshape(ops.take(ops.reshape(row_tokens, [-1]), picked), [batch, beam])
    outcome = step_outcome(
        ops.reshape(ops.take(ops.reshape(row_totals, [-1]), picked), [batch, beam]), token,
        ops.take(ops.reshape(loop.finished, [-1]), parent),
        ops.take(ops.reshape(loop.lengths, [-1]), parent),
        ops.reshape(loop.step, [1, 1]), inputs.limits, END_ID)
    parent_rows = ops.reshape(parent, [-1])
    at_step = (ops.arange(search.time, dtype="int32") == loop.step)[None, :]  # [1, time]
    history = ops.where(at_step, ops.reshape(outcome.written, [-1, 1]),
                        ops.take(loop.history, parent_rows, axis=0))
    attention_history = loop.attention_history
    if search.return_attention:
        row = ops.take(ops.cast(attention, "float32"), parent_rows, axis=0)
        attention_history = ops.where(at_step[:, :, None], row[:, None, :],
                                      ops.take(attention_history, parent_rows, axis=0))
    done = loop.done | sentences_done(outcome.scores, outcome.finished, outcome.lengths,
                                      inputs.limits, inputs.ranking, search.nbest)
    return LoopState(
        step=loop.step + 1, ids=ops.reshape(token, [-1]),
        state=keras.tree.map_structure(lambda t: ops.take(t, parent_rows, axis=0), network_state),
        scores=outcome.scores, finished=outcome.finished | done[:, None], lengths=outcome.lengths,
        done=done, history=history, attention_history=attention_history)


def _read_out(inputs: _Inputs, loop: LoopState):
    """``(ids, lengths, scores, attention or None)``: each sentence's n-best, best first."""
    batch, beam, time = inputs.batch, inputs.search.beam_size, inputs.search.time
    best_ranks, best = best_hypotheses(loop.scores, loop.lengths, inputs.ranking, inputs.search.nbest)
    best_lengths = ops.where(ops.isinf(best_ranks), 0, ops.take_along_axis(loop.lengths, best, axis=1))
    best_rows = best + ops.arange(batch, dtype="int32")[:, None] * beam  # [batch, nbest]
    valid = ops.arange(time, dtype="int32")[None, None, :] < best_lengths[:, :, None]
    ids = ops.where(valid, ops.take(loop.history, best_rows, axis=0), PAD_ID)
    attention = None
    if inputs.search.return_attention:
        attention = ops.where(valid[..., None], ops.take(loop.attention_history, best_rows, axis=0), 0.0)
    return ids, best_lengths, best_ranks, attention


def portable_beam_search(step_fn, initial_state, memory, search: PortableSearch, max_length,
                         vocabulary_size, forbid_ids=(), attention_length=None):
    """Beam search over a step function in ``keras.ops``: the same hypotheses and scores as
    `bahdanau_tf.decoding.beam_search` (the rules are shared), on any Keras backend.

    Args:
        step_fn: ``(ids [rows], step, state, memory) -> (logits [rows, vocabulary], state,
            attention)`` (`bahdanau_tf.decoding`'s contract with a memory; ``step`` an int32
            scalar, every sentence starting together), e.g. a model's ``decode_step``;
            ``memory`` holds one row per sentence.
        initial_state: nest ``[batch, ...]`` (this function repeats it per beam); its first
            tensor's leading dimension must be static (the batch).
        memory: nest ``[batch, ...]`` handed to every step.
        search: `PortableSearch` (Python values).
        vocabulary_size: int, the width of the logits.
        max_length: int32 ``[batch]``, each sentence's maximum output length, ``[END]``
            included (values outside ``[1, search.time]`` are clipped to it).
        forbid_ids: int tensor or tuple of token ids never generated besides ``PAD`` and
            ``[START]`` (e.g. ``[UNK]``); ``PAD`` may be listed to keep a static shape.
        attention_length: int, the length of the attention rows (with ``return_attention``).

    Returns:
        ``(ids int32 [batch, nbest, time], lengths int32 [batch, nbest], scores float32
        [batch, nbest], attention float32 [batch, nbest, time, attention_length] or None)``,
        as `bahdanau_tf.decoding.BeamSearchOutput`'s fields.
    """
    batch = keras.tree.flatten(initial_state)[0].shape[0]
    limits = ops.clip(ops.cast(max_length, "int32"), 1, search.time)
    never = never_generated(START_ID, forbid_ids)  # PAD, START, forbid_ids; END allowed
    inputs = _Inputs(step_fn=step_fn, memory=memory, mask=never_mask(vocabulary_size, never, END_ID),
                     limits=limits, ranking=Ranking(ops.convert_to_tensor(search.length_penalty, "float32")),
                     batch=batch, search=search)

    def cond(loop):
        return ops.logical_and(loop.step < search.time, ops.logical_not(ops.all(loop.done)))

    def body(loop):
        return (_advance(inputs, loop),)

    loop = ops.while_loop(cond, body, (_initial_state(inputs, initial_state, attention_length),))[0]
    return _read_out(inputs, loop)


def model_search(models, search: PortableSearch):
    """The search of a model (or an ensemble) over int arrays, compiled for the backend
    (`compiled`): ``(source_ids [batch, len], limits [batch], forbid_unknown bool) -> (ids,
    lengths, scores, attention or None)``.

    Args:
        models: a list of `bahdanau_tf.decoding.StepModel` over one target vocabulary.
        search: `PortableSearch`.
    """
    def run(source_ids, limits, forbid_unknown):
        memories = [model.encode(source_ids, training=False) for model in models]
        states = [model.decoding_state(model.initial_state(memory))
                  for model, memory in zip(models, memories)]
        memories = [model.decoding_memory(memory) for model, memory in zip(models, memories)]
        step_fns = [_step_fn(model) for model in models]
        step_fn, state, memory = step_fns[0], states[0], memories[0]
        if len(models) > 1:
            step_fn, state, memory = ensemble_step_fn(step_fns), tuple(states), tuple(memories)
        # [UNK] is data: PAD (never generated anyway) in its place keeps one compiled shape
        forbid = ops.reshape(ops.where(forbid_unknown, UNK_ID, PAD_ID), [1])
        return portable_beam_search(step_fn, state, memory, search, limits,
                                    models[0].target_vocabulary_size, forbid, ops.shape(source_ids)[1])

    return compiled(run, [variable for model in models for variable in model.variables])


def _step_fn(model):
    return lambda ids, step, state, memory: model.decode_step(ids, state, memory)


def compiled(function, variables):
    """``function`` compiled the way the running Keras backend compiles a whole loop.

    JAX: ``jax.jit``, the variables' values handed in as arguments and read through a
    ``keras.StatelessScope`` (as keras-hub's ``generate`` does), so the weights are not baked
    into the program; one compilation per input shape. TensorFlow: ``tf.function``. PyTorch:
    eagerly, without gradients (``keras.ops.while_loop`` is a Python loop there).

    Args:
        function: ``(*arrays) -> outputs``, in ``keras.ops``.
        variables: the Keras variables ``function`` reads.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        def stateless(values, *args):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return function(*args)

        jitted = jax.jit(stateless)
        return lambda *args: jitted([variable.value for variable in variables], *args)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(function, autograph=False, reduce_retracing=True)
    if backend == "torch":
        import torch

        def without_gradients(*args):
            with torch.no_grad():
                return function(*args)

        return without_gradients
    return function


__all__ = ["LoopState", "PortableSearch", "compiled", "model_search", "portable_beam_search"]
