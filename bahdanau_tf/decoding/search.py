"""The search loop: settings, the loop's named state, and its parts, one job each.

Written once, in ``keras.ops``, for every Keras backend (keras-hub's samplers are too): on
TensorFlow it builds the ``tf.while_loop`` that translate runs and the SavedModel exports, on
JAX the ``jax.lax.while_loop`` that `bahdanau_tf.decoding.portable` compiles, on PyTorch a
Python loop. What one backend does better is a choice the settings make inside this loop
(`Execution`): the write policy (``jit_compile``: a scatter at every step, or under ``cond``
at the steps that write), the folded mask and the blocked ``top_k`` (TensorFlow only,
`bahdanau_tf.decoding.selection`), candidate lists.

`beam_search` is the driver. Its loop body is four parts, each a function of the search's fixed
inputs (`SearchInputs`) and the loop's state (`SearchState`, a NamedTuple that ``tf.while_loop``
carries):

    advance -> finished_sentences -> read_out -> refill (or free_slots)

- `advance`: the step: the network's logits, each sentence's best ``beam`` extensions
  (`bahdanau_tf.decoding.selection.select`), the state and the histories reordered to follow them;
- `finished_sentences` and `read_out`: the slots whose n-best is final, written to the outputs;
- `refill`: each free slot takes the next sentence of the batch (continuous batching);
- `compact`, between loops: the live slots gathered into fewer (the tail of the batch).
"""

import dataclasses
from typing import Any, NamedTuple, Optional

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bahdanau_tf.decoding.batching import MAX_BEAM_SIZE, check_int
from bahdanau_tf.decoding.rules import (DEFAULT_LENGTH_PENALTY, Ranking, best_hypotheses, never_generated,
                                        on_tensorflow, sentences_done, take)
from bahdanau_tf.decoding.selection import Vocabulary, search_vocabulary, select, static_int
from bahdanau_tf.decoding.step_functions import StepFn, tile_beams
from bahdanau_tf.special_tokens import END_ID, PAD_ID, START_ID

_NEG_INF = float("-inf")


def _static_value(value):
    """The NumPy value of ``value`` (a Python value, a NumPy array, a TensorFlow tensor) when
    it is known when tracing, else None (also for another backend's tensor)."""
    if isinstance(value, (int, float, tuple, list, np.ndarray, np.integer)):
        return np.asarray(value)
    return tf.get_static_value(value) if tf.is_tensor(value) else None
_LOADS_PER_STEP = 4  # slots refilled at most per step (their memory is written at every step)


def _check_count(name, value, high=None):
    """Refuses (ValueError, quoting it) a count that is neither None, an int in ``[1, high]``
    nor a tensor (checked when its value is known when tracing)."""
    if value is None:
        return
    if tf.is_tensor(value) or keras.ops.is_tensor(value):
        static = static_int(value)
        if static is None:
            return
        value = static
    check_int(name, value, 1, high)


# === Settings ===

@dataclasses.dataclass(frozen=True)
class BeamSearch:
    """What a search looks for: the beam, the n-best, the ranking, the tokens it never emits.

    A value (frozen, hashable when its fields are Python values), validated here where it is
    built; `beam_search` takes it whole, and a `bahdanau_tf.translator.Translator` takes it as
    the default of its searches, every field meaning the same there. ``BeamSearch(beam_size=1)``
    is greedy search.

    Attributes:
        beam_size: int in [1, `MAX_BEAM_SIZE`], the hypotheses kept per sentence (a scalar
            tensor also works outside XLA); or an int32 ``[batch]`` vector, each sentence's own
            beam (`beam_search`; the exported ``translate_nbest`` hands one, a beam per row).
        nbest: int in [1, beam_size], the hypotheses returned per sentence.
        length_penalty: float alpha >= 0 of the GNMT length penalty (`Ranking`); 0 ranks by
            log p; `DEFAULT_LENGTH_PENALTY` unless told.
        forbid_ids: token ids never generated (a tuple, or an int32 tensor), e.g.
            ``(UNK_ID,)`` for the paper's "No UNK" mode; must not contain ``end_id``.
            ``PAD_ID`` and ``start_id`` are never generated anyway.
        return_attention: bool, also return the attention rows of the returned hypotheses
            (`beam_search` then needs ``attention_length``).
        start_id: the first decoder input y_0. end_id: the token that finishes a hypothesis.

    Raises:
        ValueError: a value known now and out of range.

    Example:

        search = BeamSearch(beam_size=5, nbest=2, length_penalty=0.5)
        output = beam_search(step_fn, state, batch_size, search, max_length=limits)
    """

    beam_size: Any = 5
    nbest: Any = 1
    length_penalty: Any = DEFAULT_LENGTH_PENALTY
    forbid_ids: Any = ()
    return_attention: bool = False
    start_id: Any = START_ID
    end_id: Any = END_ID

    def __post_init__(self):
        if isinstance(self.forbid_ids, list):
            object.__setattr__(self, "forbid_ids", tuple(self.forbid_ids))
        _check_count("beam_size", self.beam_size, MAX_BEAM_SIZE)
        _check_count("nbest", self.nbest, static_int(self.beam_size))
        penalty = self.length_penalty
        if not keras.ops.is_tensor(penalty) and (isinstance(penalty, bool) or not isinstance(
                penalty, (int, float, np.number)) or not penalty >= 0):  # NaN too
            raise ValueError(f"length_penalty must be a float >= 0, got {penalty!r}")
        if not isinstance(self.return_attention, (bool, np.bool_)):
            raise ValueError(f"return_attention must be a bool, got {self.return_attention!r}")
        for name in ("beam_size", "nbest", "start_id", "end_id"):  # Python values: one hash
            if isinstance(getattr(self, name), np.integer):
                object.__setattr__(self, name, int(getattr(self, name)))
        if isinstance(penalty, np.number):
            object.__setattr__(self, "length_penalty", float(penalty))
        forbid = _static_value(self.forbid_ids)
        end_id = static_int(self.end_id)
        if forbid is not None and end_id is not None and np.any(np.asarray(forbid) == end_id):
            raise ValueError(f"forbid_ids must not contain end_id={self.end_id!r}, got "
                             f"{self.forbid_ids!r}")


@dataclasses.dataclass(frozen=True)
class Execution:
    """How a search runs: none of it changes what it finds, only what it costs.

    Attributes:
        jit_compile: bool, whether the whole search is compiled (XLA: ``tf.function(
            jit_compile=True)`` on TensorFlow, ``jax.jit`` on JAX). A done sentence's read-out
            and a refilled slot's memory are scatters into buffers carried by the loop: compiled,
            a scatter at every step (into a sentinel row when there is nothing to write)
            updates them in place, where a ``cond`` would copy them into its output;
            TensorFlow's runtime without XLA copies a buffer at every scatter, so there they
            run under ``cond``, at the steps that have something to write. On TensorFlow it
            also selects the folded mask (`bahdanau_tf.decoding.VocabularyMask`).
        buffer_length: int (or int32 scalar), the steps the output buffers hold, separate from
            the per-sentence limits: under XLA a compile-time constant (one compilation per
            value). None: ``max(max_length)`` (a constant when ``max_length`` is a Python
            value; else computed from the data, which under XLA makes the limits themselves
            compile-time constants). Limits above it are cut to it.
        vocabulary_size: optional int, the width of the step function's logits: the mask of
            the never-generated tokens is then built once per search, not at every step.
    """

    jit_compile: bool = False
    buffer_length: Any = None
    vocabulary_size: Optional[int] = None

    def __post_init__(self):
        if not isinstance(self.jit_compile, (bool, np.bool_)):
            raise ValueError(f"jit_compile must be a bool, got {self.jit_compile!r}")
        object.__setattr__(self, "jit_compile", bool(self.jit_compile))
        _check_count("buffer_length", self.buffer_length)
        if self.vocabulary_size is not None:
            _check_count("vocabulary_size", self.vocabulary_size)


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
            produced each token (zeros after the end), or None unless ``return_attention``
            (``()`` inside the loop, where the same structure holds the output buffers).
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor
    attention: Optional[tf.Tensor]


# === The loop's fixed inputs and its state ===

class SearchInputs(NamedTuple):
    """What one search's loops read and never change (`beam_search` builds it once).

    ``batch``, ``beam``, ``nbest`` and ``buffer_length`` are Python ints where they are known when
    tracing (static shapes, as XLA needs), else int32 scalars.
    """

    step_fn: StepFn
    initial_state: Any  # nest [batch, ...], not tiled
    memory: Any  # nest [batch, ...] handed to step_fn one row per slot, or None
    batch: Any
    beam: Any
    nbest: Any
    buffer_length: Any  # the steps the buffers hold (``time`` in the shapes)
    attention_length: Any  # int or int32 scalar when attention is returned, else None
    start_id: tf.Tensor
    vocabulary: Vocabulary
    ranking: Ranking
    limits: tf.Tensor  # int32 [batch + 1]: each sentence's limit, 1 for the empty slot's sentinel
    own_beams: Optional[tf.Tensor]  # int32 [batch + 1], or None: every sentence has the full beam
    jit_compile: bool


class SearchState(NamedTuple):
    """The search loop's variables: per slot, per row (``slots * beam`` rows, a slot's beams
    consecutive), and per sentence (the outputs). An unused field is ``()``."""

    next_sentence: tf.Tensor  # int32 []: the next sentence of the batch to load
    occupant: tf.Tensor  # int32 [slots]: the sentence each slot holds, ``batch`` when empty
    slot_steps: tf.Tensor  # int32 [slots]: the steps its sentence has made
    scores: tf.Tensor  # float32 [slots, beam]: log p of each hypothesis (-inf: none)
    finished: tf.Tensor  # bool [slots, beam]
    lengths: tf.Tensor  # int32 [slots, beam]: tokens so far, end included
    ids: tf.Tensor  # int32 [rows]: each hypothesis's last token, the next step's input
    state: Any  # the step function's state, [rows, ...]
    slot_memory: Any  # the memory nest, [slots, ...], or ()
    history: tf.Tensor  # int32 [rows, time]: each hypothesis's tokens so far
    attention_history: Any  # float32 [rows, time, attention_length], or ()
    outputs: BeamSearchOutput  # [batch + 1, nbest, ...]: read-out n-best lists (+ a sentinel row)


# Per slot and per row: what `compact` gathers. A loop that loads no sentence never changes the
# queue position nor the slots' memory, so it captures them instead of carrying them.
_PER_SLOT = ("occupant", "slot_steps", "scores", "finished", "lengths", "slot_memory")
_PER_ROW = ("ids", "state", "history", "attention_history")
_UNCHANGED_WITHOUT_LOADS = ("next_sentence", "slot_memory")


def _slot_count(state):
    """The slots of ``state``: a Python int when static."""
    return ops.shape(state.occupant)[0]


def _rows_of(slot_values, beam):
    """[slots, ...] -> [slots * beam, ...], consecutive copies."""
    return ops.repeat(slot_values, beam, axis=0)


def _start_scores(slots, beam):
    """Beam 0 starts at log p = 0, the others at -inf: they get filled with beam 0's
    continuations at the first step instead of duplicating it."""
    return ops.tile(ops.where(ops.arange(beam, dtype="int32") == 0, 0.0, _NEG_INF)[None, :], [slots, 1])


def _sentences(inputs, nest, sentences):
    """The rows of ``sentences`` of a per-sentence nest (an empty slot reads the last one)."""
    last = ops.maximum(inputs.batch - 1, 0)
    return keras.tree.map_structure(lambda t: take(t, ops.minimum(sentences, last)), nest)


def initial_search_state(inputs: SearchInputs, slots) -> SearchState:
    """The state before the first step: the first ``slots`` sentences loaded, in order."""
    occupant = ops.arange(slots, dtype="int32")
    rows, time, beam = slots * inputs.beam, inputs.buffer_length, inputs.beam
    with_attention = inputs.attention_length is not None
    length = inputs.attention_length if with_attention else 0
    batch_rows = inputs.batch + 1  # one extra row: where the slots that are not done write
    return SearchState(
        next_sentence=ops.convert_to_tensor(slots, "int32"), occupant=occupant,
        slot_steps=ops.zeros([slots], "int32"), scores=_start_scores(slots, beam),
        finished=ops.isinf(_start_scores(slots, beam)), lengths=ops.zeros([slots, beam], "int32"),
        ids=ops.full([rows], inputs.start_id, "int32"),
        state=tile_beams(_sentences(inputs, inputs.initial_state, occupant), beam),
        slot_memory=() if inputs.memory is None else _sentences(inputs, inputs.memory, occupant),
        history=ops.full([rows, time], PAD_ID, "int32"),
        attention_history=ops.zeros([rows, time, length], "float32") if with_attention else (),
        outputs=BeamSearchOutput(
            ids=ops.full([batch_rows, inputs.nbest, time], PAD_ID, "int32"),
            lengths=ops.zeros([batch_rows, inputs.nbest], "int32"),
            scores=ops.full([batch_rows, inputs.nbest], _NEG_INF, "float32"),
            attention=ops.zeros([batch_rows, inputs.nbest, time, length], "float32") if with_attention else ()))


# === The parts of one step ===

def advance(inputs: SearchInputs, state: SearchState) -> SearchState:
    """The step: every row's logits from the step function, each sentence's best ``beam``
    extensions (`select`), and the state, tokens and attention rows reordered to follow them.

    Without ``memory`` every slot started at step 0, so the step function gets one scalar
    step; with it, each row its own step and its slot's memory.
    """
    beam = inputs.beam
    row_steps = _rows_of(state.slot_steps, beam)
    if inputs.memory is None:
        logits, network_state, attention = inputs.step_fn(
            state.ids, ops.max(state.slot_steps), state.state)
    else:
        logits, network_state, attention = inputs.step_fn(state.ids, row_steps, state.state,
                                                          state.slot_memory)
    own_beams = None if inputs.own_beams is None else take(inputs.own_beams, state.occupant)
    chosen = select(logits, inputs.vocabulary, state.scores, state.finished, state.lengths,
                    state.slot_steps, take(inputs.limits, state.occupant), inputs.ranking,
                    beam, own_beams)
    # the states and histories follow their hypotheses, whatever their structure
    network_state = keras.tree.map_structure(lambda t: take(t, chosen.parent_rows), network_state)
    at_step = ops.arange(inputs.buffer_length, dtype="int32")[None, :] == row_steps[:, None]  # [rows, time]
    history = ops.where(at_step, ops.reshape(chosen.written, [-1, 1]),
                        take(state.history, chosen.parent_rows))
    attention_history = state.attention_history
    if inputs.attention_length is not None:
        if attention is None:
            raise ValueError("return_attention=True but step_fn returned attention=None")
        # the row that produced each kept token (rows after the end are masked at the read-out)
        row = take(ops.cast(attention, "float32"), chosen.parent_rows)
        attention_history = ops.where(at_step[:, :, None], row[:, None, :],
                                      take(attention_history, chosen.parent_rows))
    return state._replace(
        slot_steps=state.slot_steps + 1, scores=chosen.scores, finished=chosen.finished,
        lengths=chosen.lengths, ids=ops.reshape(chosen.token, [-1]), state=network_state,
        history=history, attention_history=attention_history)


def finished_sentences(inputs: SearchInputs, state: SearchState):
    """bool [slots]: the slots whose sentence's n-best list is final (`sentences_done`)."""
    own_beams = None if inputs.own_beams is None else take(inputs.own_beams, state.occupant)
    done = sentences_done(state.scores, state.finished, state.lengths,
                          take(inputs.limits, state.occupant), inputs.ranking, inputs.nbest,
                          own_beams)
    return (state.occupant < inputs.batch) & done


def _write_when(jit_compile, flags, write, carried):
    """``write(carried)`` in the search loop's body: compiled, at every step (its scatters
    update the loop's buffers in place, where a ``cond`` would copy them into its output);
    else only at the steps where some of ``flags`` is set (TensorFlow's runtime copies a
    loop-carried buffer at every scatter), ``carried`` unchanged at the others."""
    if jit_compile:
        return write(carried)
    return ops.cond(ops.any(flags), lambda: write(carried), lambda: carried)


def read_out(inputs: SearchInputs, state: SearchState, done) -> SearchState:
    """Writes the n-best lists of the ``done`` slots [slots] into the outputs, best first.

    Compiled, written at every step, into the sentinel row for the slots not done (a scatter
    is in place, where a ``cond`` would copy the buffers into its output); else only at the
    steps some sentence is done (each scatter copies its buffer).
    """
    def write(outputs):
        best_ranks, best = best_hypotheses(state.scores, state.lengths, inputs.ranking,
                                           inputs.nbest)  # [slots, nbest]
        best_rows = best + ops.arange(_slot_count(state), dtype="int32")[:, None] * inputs.beam
        best_lengths = ops.where(ops.isinf(best_ranks), 0, take(ops.reshape(state.lengths, [-1]), best_rows))
        valid = ops.arange(inputs.buffer_length, dtype="int32")[None, None, :] < best_lengths[:, :, None]
        target = ops.where(done, state.occupant, inputs.batch)[:, None]  # not done: the sentinel row
        attention = ()
        if inputs.attention_length is not None:
            attention = ops.scatter_update(
                outputs.attention, target,
                ops.where(valid[..., None], take(state.attention_history, best_rows), 0.0))
        return BeamSearchOutput(
            ids=ops.scatter_update(outputs.ids, target,
                                   ops.where(valid, take(state.history, best_rows), PAD_ID)),
            lengths=ops.scatter_update(outputs.lengths, target, best_lengths),
            scores=ops.scatter_update(outputs.scores, target, best_ranks),
            attention=attention)

    return state._replace(outputs=_write_when(inputs.jit_compile, done, write, state.outputs))


def _first_slots(flags, width, k):
    """int32 [k]: the slots where ``flags`` [width] is True, in slot order, then the lowest
    others (a stable ``top_k``)."""
    return ops.top_k(ops.cast(flags, "int32") * (width - ops.arange(width, dtype="int32")), k)[1]


def _backfill(tensor, rows, values):
    """``tensor`` with ``values`` written at the rows where ``rows`` is True (any rank)."""
    rows = ops.reshape(rows, [-1] + [1] * (len(tensor.shape) - 1))
    return ops.where(rows, values, tensor)


# what loading a sentence into a slot rewrites (`refill`)
_LOADED = ("slot_memory", "state", "scores", "finished", "lengths", "slot_steps", "ids")


def _load(inputs, state, load, loads_per_step):
    """The fields of `_LOADED` with the sentences of ``state.occupant`` loaded into the slots
    where ``load`` [slots] is True: their memory, their initial state, fresh hypotheses.

    The memory of ``loads_per_step`` slots is written, the loaded ones first, then others
    rewritten with their own memory (compiled, at every step, in place).
    """
    width, beam = _slot_count(state), inputs.beam
    written_slots = _first_slots(load, width, loads_per_step)
    sentences = ops.minimum(take(state.occupant, written_slots), ops.maximum(inputs.batch - 1, 0))
    slot_memory = keras.tree.map_structure(
        lambda t, full: ops.scatter_update(t, written_slots[:, None], take(full, sentences)),
        state.slot_memory, inputs.memory)
    load_rows = _rows_of(load, beam)
    fresh = tile_beams(_sentences(inputs, inputs.initial_state, state.occupant), beam)
    scores = ops.where(load[:, None], _start_scores(width, beam), state.scores)
    return dict(
        slot_memory=slot_memory,
        state=keras.tree.map_structure(lambda old, new: _backfill(old, load_rows, new), state.state, fresh),
        scores=scores, finished=ops.where(load[:, None], ops.isinf(scores), state.finished),
        lengths=ops.where(load[:, None], 0, state.lengths), slot_steps=ops.where(load, 0, state.slot_steps),
        ids=ops.where(load_rows, inputs.start_id, state.ids))


def refill(inputs: SearchInputs, state: SearchState, done) -> SearchState:
    """Frees the ``done`` slots and gives each free slot the next sentence of the batch, in
    order, up to `_LOADS_PER_STEP` slots a step (continuous batching).

    A loaded slot's memory and initial state are written in (`_load`), its hypotheses start
    afresh; not compiled, only at the steps that load a sentence.
    """
    width = _slot_count(state)
    loads_per_step = (min(_LOADS_PER_STEP, width) if isinstance(width, int)
                      else ops.minimum(_LOADS_PER_STEP, width))
    free = done | (state.occupant >= inputs.batch)
    free_count = ops.cast(free, "int32")
    order = ops.cumsum(free_count) - free_count  # the free slots before each
    load = free & (order < loads_per_step) & (state.next_sentence + order < inputs.batch)
    state = state._replace(
        occupant=ops.where(load, state.next_sentence + order, ops.where(done, inputs.batch, state.occupant)),
        next_sentence=state.next_sentence + ops.sum(ops.cast(load, "int32")))
    carried = {name: getattr(state, name) for name in _LOADED}
    loaded = _write_when(inputs.jit_compile, load,
                         lambda carried: _load(inputs, state._replace(**carried), load, loads_per_step),
                         carried)
    return state._replace(**loaded)


def free_slots(inputs: SearchInputs, state: SearchState, done) -> SearchState:
    """Empties the ``done`` slots, when there is no sentence left to load."""
    return state._replace(occupant=ops.where(done, inputs.batch, state.occupant))


def compact(state: SearchState, new_width, beam, batch) -> SearchState:
    """The state over ``new_width`` slots: the live slots (at most ``new_width``, in slot
    order), then empty ones; each slot with its beams' rows. The outputs (per sentence) and the
    queue position stay as they are."""
    slots = _first_slots(state.occupant < batch, _slot_count(state), new_width)  # the live ones first
    rows = ops.reshape(slots[:, None] * beam + ops.arange(beam, dtype="int32")[None, :], [-1])

    def by(indices, nest):
        return keras.tree.map_structure(lambda t: take(t, indices), nest)

    return state._replace(**{name: by(slots, getattr(state, name)) for name in _PER_SLOT},
                          **{name: by(rows, getattr(state, name)) for name in _PER_ROW})


# === The loops ===

def _search_step(inputs, state, refills):
    """One iteration of the loop: the step, the read-out, the refill (or the freeing)."""
    state = advance(inputs, state)
    done = finished_sentences(inputs, state)
    state = read_out(inputs, state, done)
    return refill(inputs, state, done) if refills else free_slots(inputs, state, done)


def _loop(inputs, state, refills, next_width):
    """The search loop over ``state``'s slots; with ``next_width`` it stops once no sentence is
    left to load and the live slots fit in ``next_width`` (`compact` then)."""
    def cond(state):
        live = ops.sum(ops.cast(state.occupant < inputs.batch, "int32"))
        if next_width is None:
            return live > 0
        return (live > 0) & ((state.next_sentence < inputs.batch) | (live > next_width))

    def body(state):
        new = _search_step(inputs, state, refills)
        if on_tensorflow():  # the loop variables' static shapes (some TensorFlow ops lose them)
            for tensor, old in zip(tf.nest.flatten(new), tf.nest.flatten(state)):
                tensor.set_shape(old.shape)
        return new

    if refills:
        return ops.while_loop(cond, lambda state: (body(state),), (state,))[0]
    # Nothing to load: what the loop never changes is captured, not carried (see `_TAIL_STAGES`).
    fixed = {name: getattr(state, name) for name in _UNCHANGED_WITHOUT_LOADS}

    def changing(state):
        return {name: value for name, value in state._asdict().items() if name not in fixed}

    final = ops.while_loop(lambda values: cond(SearchState(**fixed, **values)),
                          lambda values: (changing(body(SearchState(**fixed, **values))),),
                          (changing(state),))[0]
    return SearchState(**fixed, **final)


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

    The counts are the ones benchmarks/decode_step.py chose (hypothesis-steps against the
    compile time of each loop, benchmarks/README.md); a dynamic width is not halved, since
    without XLA a step's cost is mostly its ops' launches, not its rows."""
    stages = _TAIL_STAGES if refills else _START_STAGES
    widths = [width]
    while isinstance(width, int) and len(widths) < stages and widths[-1] // 2 >= _MIN_TAIL_SLOTS:
        widths.append(widths[-1] // 2)
    return widths


def _known(value):
    """A Python int where ``value`` is known when tracing (static shapes survive the loop and
    XLA), else an int32 tensor."""
    static = static_int(value)
    return static if static is not None else ops.cast(value, "int32")


def _buffer_steps(limits, max_length, buffer_length):
    """The number of steps the buffers hold: ``buffer_length``, else the largest limit (a
    Python int when it is known when tracing, so that shapes stay static)."""
    if buffer_length is not None:
        static = static_int(buffer_length)
        return static if static is not None else ops.maximum(ops.cast(buffer_length, "int32"), 1)
    static_max = _static_value(max_length)
    if static_max is not None:
        return max(int(np.max(static_max, initial=1)), 1)
    return ops.maximum(ops.max(limits), 1)  # an empty batch still needs one step


def _check_inputs(search, max_length, memory, attention_length, slots):
    """ValueError for the inputs whose values are known when tracing and wrong."""
    if search.return_attention and attention_length is None:
        raise ValueError("return_attention=True needs attention_length (the source length)")
    static_max = _static_value(max_length)
    if static_max is not None and np.any(np.asarray(static_max) < 1):
        raise ValueError(f"max_length must be >= 1, got {max_length!r}")
    if slots is not None and memory is None:
        raise ValueError("slots needs memory: a step function that closes over its memory "
                         "cannot have its slots refilled")
    _check_count("slots", slots)


def _own_beams(search):
    """``(search, each sentence's beam or None)``: a ``beam_size`` vector holds one beam per
    sentence, and the search runs the widest of them (at least ``nbest``)."""
    beam_size = search.beam_size
    if not ops.is_tensor(beam_size) or len(beam_size.shape) != 1:
        return search, None
    beams = ops.cast(beam_size, "int32")
    widest = ops.maximum(ops.max(ops.concatenate([beams, ops.ones([1], "int32")], axis=0)), search.nbest)
    return dataclasses.replace(search, beam_size=widest), beams


def _search_inputs(step_fn, initial_state, batch, search, max_length, memory, candidates, attention_length,
                   execution):
    """The `SearchInputs` of `beam_search`'s arguments (``batch``: see `_known`)."""
    search, beam_sizes = _own_beams(search)
    beam, nbest = _known(search.beam_size), _known(search.nbest)
    if not isinstance(beam, int) or not isinstance(nbest, int):  # a dynamic beam: TensorFlow only
        tf.debugging.assert_less_equal(nbest, beam, message="nbest must be <= beam_size")
    start_id, end_id = ops.cast(search.start_id, "int32"), ops.cast(search.end_id, "int32")
    limits = ops.maximum(ops.cast(max_length, "int32"), 1)  # int64 lengths welcome
    if len(limits.shape) == 0:
        limits = ops.full([batch], limits, "int32")
    buffer_length = _buffer_steps(limits, max_length, execution.buffer_length)
    limits = ops.minimum(limits, buffer_length)
    never = never_generated(start_id, search.forbid_ids)  # PAD, START, forbid_ids; END allowed
    # one extra entry past the batch: what an empty slot reads
    sentinel = lambda t: ops.concatenate([t, ops.ones([1], "int32")], axis=0)
    own_beams = None
    if beam_sizes is not None:
        own_beams = sentinel(ops.clip(ops.cast(beam_sizes, "int32"), 1, beam))
    return SearchInputs(
        step_fn=step_fn, initial_state=initial_state, memory=memory, batch=batch, beam=beam,
        nbest=nbest, buffer_length=buffer_length,
        attention_length=attention_length if search.return_attention else None, start_id=start_id,
        vocabulary=search_vocabulary(execution.vocabulary_size, never, end_id, candidates,
                                     execution.jit_compile),
        ranking=Ranking(ops.cast(search.length_penalty, "float32")),
        limits=sentinel(limits), own_beams=own_beams, jit_compile=execution.jit_compile)


# === The driver ===

def beam_search(step_fn: StepFn, initial_state, batch_size=None, search: BeamSearch = BeamSearch(),
                max_length=100, memory=None, slots=None, candidates=None, attention_length=None,
                execution: Execution = Execution()) -> BeamSearchOutput:
    """Beam search that maximises log p(y | x) over a step function, batched over sentences.

    Each sentence keeps ``search.beam_size`` hypotheses. At every step each live hypothesis is
    extended by every allowed token, and the best ``beam_size`` candidates of the sentence
    survive; the recurrent state follows its hypothesis with ``tf.gather``. A hypothesis that
    emits ``end_id``, or reaches its sentence's ``max_length``, is finished: it stays in the
    beam with a frozen score (its only candidate is itself) until better ones push it out. The
    first step extends beam 0 only, so the beams do not start as copies.

    Candidates are ranked by `Ranking` (log p, divided by the GNMT length penalty when
    ``length_penalty > 0``). A sentence is done when all its hypotheses are finished, or when
    its ``nbest``-th best finished hypothesis ranks strictly above the best any live one could
    reach (`Ranking.best_continuation`): its n-best list is final then, so it is read out at
    once and the sentence stops costing anything.

    **Slots** (continuous batching). The search keeps ``slots`` sentences in flight,
    ``slots * beam_size`` rows. When a sentence is done its slot is refilled with the next
    sentence of the batch, in order (its ``memory`` and initial state loaded into the slot; at
    most four slots a step, so that the memory is written in place), so no row waits for the
    slowest sentence. This needs the memory as an argument: with ``memory`` the step function
    is ``step_fn(ids, step, state, memory)``, the memory nest holding one row per slot (row
    ``r`` of ``ids`` and ``state`` belongs to memory row ``r // beam_size``) and ``step`` an
    int32 ``[slots * beam_size]`` vector, each row's own step. Without ``memory`` the step
    function closes over its memory, already tiled (`tile_beams`), every sentence has its slot
    from the start, and ``step`` is a scalar. A sentence gets the same result in a refilled
    slot as alone (up to floating-point effects of the batch's shape). The tail: once no
    sentence is left to load and the live ones fit in half the slots, they are gathered into
    half as many (`compact`) and another loop goes on over those (2 loops after refills; up to
    4, halving down to 8 slots, when every sentence had a slot from the start:
    `_stage_widths`); this needs the batch and the slots as Python ints (static, as under XLA),
    else one loop runs to the end.

    Args:
        step_fn: ``(ids, step, state) -> (logits, state, attention)``, or with ``memory``
            ``(ids, step, state, memory)``; see `bahdanau_tf.decoding`. Its state must keep
            its structure and shapes from step to step.
        initial_state: nest of tensors ``[batch, ...]`` (not tiled; this function tiles it).
        batch_size: int or int32 scalar tensor (dynamic in a serving signature); None takes it
            from the first tensor of ``initial_state``.
        search: `BeamSearch`, the settings (beam, n-best, length penalty, forbidden tokens,
            attention). Its ``beam_size`` may be an int32 ``[batch]`` vector, each sentence's
            own beam (values below 1 count as 1): the search runs the widest (at least
            ``nbest``) and, after every step's ``top_k``, empties the slots beyond the
            sentence's own beam. Since ``top_k`` is stable and the emptied slots hold
            ``-inf``, a sentence gets exactly what a search with its own beam gives. A
            sentence whose beam is below ``nbest`` gets empty slots (``-inf``).
        max_length: the maximum number of tokens of an output, ``end_id`` included: an int, an
            int32 scalar, or an int32 ``[batch]`` tensor of per-sentence limits (e.g.
            ``2 * source_length + 10``). Values below 1 are treated as 1, values above the
            buffer (``execution.buffer_length``) as the buffer. Runtime data: under XLA with a
            ``buffer_length``, new limits do not recompile.
        memory: optional nest of tensors ``[batch, ...]``, the encoder's output per sentence,
            handed to ``step_fn`` one row per slot (see **Slots**).
        slots: with ``memory``, the number of sentences in flight (see **Slots**): an int
            (static under XLA) or an int32 scalar; None: the whole batch (no refill).
        candidates: optional int32 ``[C]``, a per-batch target vocabulary (candidate-list
            decoding, Jean et al. 2015; `bahdanau_tf.lexicon.CandidateLists`): ``step_fn``'s
            logits are ``[rows, C]``, position ``p`` scoring token ``candidates[p]``. The ids
            are ascending (so ties still go to the lower id) and include ``end_id``; the list
            may end with ``PAD_ID`` padding (a static size under XLA), whose logits the step
            function makes ``-inf`` (`bahdanau_tf.lexicon.candidate_projection`). ``ids``
            given to ``step_fn`` and the outputs are vocabulary ids.
        attention_length: int or int32 scalar, the length of the attention rows (the padded
            source length); required with ``search.return_attention``.
        execution: `Execution`: XLA or not, the buffer, the logits' width.

    Returns:
        A `BeamSearchOutput` (ids, lengths, scores, attention) with ``nbest`` hypotheses per
        sentence, best first.

    Raises:
        ValueError: max_length < 1, return_attention without attention_length, slots without
            memory, or a step function that returns no attention when asked for it (bad
            settings raise when `BeamSearch` and `Execution` are built).

    Example:

    >>> import tensorflow as tf
    >>> # A scripted "model" that prefers token 4, then token 5, then [END] (id 2).
    >>> def step_fn(ids, step, state):
    ...     favourite = tf.gather([4, 5, 2], tf.minimum(step, 2))
    ...     logits = 5.0 * tf.one_hot(tf.fill(tf.shape(ids), favourite), 6)
    ...     return logits, state, None
    >>> out = beam_search(step_fn, initial_state=tf.zeros([2, 1]), batch_size=2,
    ...                   search=BeamSearch(beam_size=3), max_length=10)
    >>> out.ids[:, 0, :4].numpy().tolist()
    [[4, 5, 2, 0], [4, 5, 2, 0]]
    >>> out.lengths.numpy().tolist()
    [[3], [3]]
    """
    _check_inputs(search, max_length, memory, attention_length, slots)
    if batch_size is None:
        batch_size = ops.shape(keras.tree.flatten(initial_state)[0])[0]
    batch = _known(batch_size)
    inputs = _search_inputs(step_fn, initial_state, batch, search, max_length, memory, candidates,
                            attention_length, execution)
    width = batch if slots is None else _known(slots)
    if isinstance(width, int) and isinstance(batch, int):
        width = min(width, batch)
    elif slots is not None:
        width = ops.minimum(width, batch)
    # no refill when every sentence has a slot from the start (known when tracing)
    refills = memory is not None and not (isinstance(width, int) and isinstance(batch, int)
                                          and width >= batch)
    state = initial_search_state(inputs, width)
    # The tail: once no sentence is left to load, the slots empty one by one; the search goes
    # on over half the slots (the live ones gathered first) as soon as they fit there.
    widths = _stage_widths(width, refills) if memory is not None else [width]
    for stage, stage_width in enumerate(widths):
        next_width = widths[stage + 1] if stage + 1 < len(widths) else None
        state = _loop(inputs, state, refills and stage == 0, next_width)
        if next_width is not None:
            state = compact(state, next_width, inputs.beam, batch)
    outputs = state.outputs
    return BeamSearchOutput(ids=outputs.ids[:batch], lengths=outputs.lengths[:batch],
                            scores=outputs.scores[:batch],
                            attention=outputs.attention[:batch] if search.return_attention else None)


def greedy_search(step_fn: StepFn, initial_state, batch_size=None, max_length=100,
                  search: BeamSearch = BeamSearch(beam_size=1), **inputs) -> BeamSearchOutput:
    """Greedy decoding: the most probable token at each step, i.e. `beam_search` with one beam.

    Args:
        step_fn, initial_state, batch_size, max_length: as for `beam_search`.
        search: a `BeamSearch` whose forbidden tokens, attention and ids are kept; its beam
            and n-best become 1 and its length penalty 0.
        **inputs: `beam_search`'s other arguments (memory, attention_length, execution, ...).

    Returns:
        A `BeamSearchOutput` with ``nbest = 1``; scores are unnormalised log-probabilities.
    """
    search = dataclasses.replace(search, beam_size=1, nbest=1, length_penalty=0.0)
    return beam_search(step_fn, initial_state, batch_size, search, max_length, **inputs)
