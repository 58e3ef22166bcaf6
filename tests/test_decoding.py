"""Tests for bahdanau_tf.decoding: beam search, greedy search and ensembles over step functions.

Three kinds of step functions:
- scripted: fixed probabilities looked up by (step, previous id), so the expected ids and scores
  are worked out by hand in each test;
- a tiny random GRU "model" (embedding + GRU cell + dense, fixed random weights, 5-word
  vocabulary) whose distribution depends on the whole history through its state, checked
  against brute-force enumeration, teacher forcing and a plain Python greedy loop;
- a "history" model whose attention row spells out the hypothesis's prefix, so a wrong
  reordering of the attention rows is visible.

The search is written in ``keras.ops``; here it runs on the TensorFlow backend (eagerly, in a
``tf.function`` and under XLA); tests/test_backends.py runs it on JAX.
"""

# The scripted and brute-force references rank by log p: their searches say length_penalty=0.0
# (every search's default is decoding.DEFAULT_LENGTH_PENALTY).
import itertools
import math
import os
import re

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf import decoding
from bahdanau_tf.decoding import (BeamSearch, BeamSearchOutput, Execution, Ranking, beam_search,
                                  ensemble_step_fn, greedy_search, tile_beams, top_k)
from bahdanau_tf.decoding import search as search_lib
from bahdanau_tf.decoding import selection
from bahdanau_tf.special_tokens import END_ID, PAD_ID, START_ID, UNK_ID

A, B = 4, 5  # the two ordinary words of the scripted vocabulary [PAD, START, END, UNK, A, B]
SCRIPT_VOCAB = 6


# === Scripted step functions ===

def scripted_step_fn(rules, default, floor=1e-6):
    """A step function whose probabilities depend only on (step, previous id).

    Args:
        rules: dict (step, previous_id) -> {token: probability}.
        default: {token: probability} for every (step, previous id) without a rule.
        floor: the weight of every token a rule leaves out (1e-6 keeps all log-probabilities
            finite; 0 makes them -inf, so that probabilities like 1.0 and .5 are exact).

    Returns:
        (step_fn, max_step): step_fn looks the logits up in a [steps, vocab, vocab] table.
    """
    steps = max([s for s, _ in rules] + [0]) + 2
    table = np.zeros([steps, SCRIPT_VOCAB, SCRIPT_VOCAB], np.float64)
    for step in range(steps):
        for previous in range(SCRIPT_VOCAB):
            probabilities = rules.get((step, previous), default)
            row = np.full(SCRIPT_VOCAB, floor)
            for token, p in probabilities.items():
                row[token] = p
            with np.errstate(divide="ignore"):
                table[step, previous] = np.log(row)  # logits; log_softmax renormalises the 1e-6s
    table = tf.constant(table, tf.float32)

    def step_fn(ids, step, state):
        step = tf.minimum(step, steps - 1)  # the last table row repeats
        return tf.gather(table[step], ids), state, None

    return step_fn, table


def log_softmax_of(table, step, previous, token):
    """The log-probability the scripted table gives ``token``, as beam_search computes it."""
    row = table[min(step, table.shape[0] - 1), previous]
    return float(tf.nn.log_softmax(row)[token])


def sequence_log_prob(table, tokens):
    total, previous = 0.0, START_ID
    for step, token in enumerate(tokens):
        total += log_softmax_of(table, step, previous, token)
        previous = token
    return total


def dummy_state(batch):
    return tf.zeros([batch, 1])


def run_scripted(step_fn, batch=1, max_length=100, attention_length=None, buffer_length=None,
                 **settings):
    return beam_search(step_fn, dummy_state(batch), batch, BeamSearch(**{"length_penalty": 0.0, **settings}), max_length,
                       attention_length=attention_length,
                       execution=Execution(buffer_length=buffer_length))


def row(ids, length):
    return ids[:length].tolist()


# --- script 1: PAD is the most likely first token (forbidden); an early END; beams reorder ---
SCRIPT_1 = {
    (0, START_ID): {PAD_ID: 0.4, END_ID: 0.05, UNK_ID: 0.05, A: 0.3, B: 0.2},
    (1, A): {END_ID: 0.5, A: 0.3, B: 0.2},
    (1, B): {END_ID: 0.1, A: 0.9},
    (2, A): {END_ID: 0.5, A: 0.25, B: 0.25},
}
DEFAULT_1 = {END_ID: 0.9, A: 0.05, B: 0.05}


def test_scripted_early_finish_and_nbest_order():
    step_fn, table = scripted_step_fn(SCRIPT_1, DEFAULT_1)
    calls = []

    def counting_step_fn(ids, step, state):
        calls.append(int(step))  # eager: the loop body runs in Python once per step
        return step_fn(ids, step, state)

    out = run_scripted(counting_step_fn, beam_size=2, max_length=10, nbest=2)
    assert isinstance(out, BeamSearchOutput) and out.attention is None
    # step 0 keeps A (.3) and B (.2), never PAD (.4); step 1 keeps BA (.18) over A-END (.15);
    # step 2: A-END (.15) and BA-END (.09) are both finished, so the search stops there.
    assert calls == [0, 1, 2]
    assert out.ids.shape == (1, 2, 10)
    assert out.ids.numpy()[0].tolist() == [[A, END_ID] + [PAD_ID] * 8,
                                           [B, A, END_ID] + [PAD_ID] * 7]
    assert out.lengths.numpy().tolist() == [[2, 3]]
    expected = [sequence_log_prob(table, [A, END_ID]), sequence_log_prob(table, [B, A, END_ID])]
    np.testing.assert_allclose(out.scores.numpy()[0], expected, rtol=1e-6)
    np.testing.assert_allclose(expected, np.log([0.15, 0.09]), atol=1e-4)  # the script's numbers


def test_scripted_length_penalty_reranks_finished():
    step_fn, table = scripted_step_fn(SCRIPT_1, DEFAULT_1)
    out = run_scripted(step_fn, beam_size=2, max_length=10, nbest=2, length_penalty=3.0)
    # log(.15) / (7/6)^3 = -1.19 < log(.09) / (8/6)^3 = -1.02: the longer one now wins.
    assert out.ids.numpy()[0, :, :3].tolist() == [[B, A, END_ID], [A, END_ID, PAD_ID]]
    assert out.lengths.numpy().tolist() == [[3, 2]]
    expected = [sequence_log_prob(table, [B, A, END_ID]) / (8 / 6) ** 3,
                sequence_log_prob(table, [A, END_ID]) / (7 / 6) ** 3]
    np.testing.assert_allclose(out.scores.numpy()[0], expected, rtol=1e-6)


def test_scripted_greedy_takes_the_locally_best_path():
    step_fn, table = scripted_step_fn(SCRIPT_1, DEFAULT_1)
    out = greedy_search(step_fn, dummy_state(1), 1, max_length=10)
    assert out.ids.shape == (1, 1, 10)
    assert row(out.ids.numpy()[0, 0], 3) == [A, END_ID, PAD_ID]
    np.testing.assert_allclose(out.scores.numpy(), [[sequence_log_prob(table, [A, END_ID])]],
                               rtol=1e-6)


# --- script 2: ties everywhere ---
SCRIPT_2 = {(0, START_ID): {END_ID: 0.1, UNK_ID: 0.1, A: 0.4, B: 0.4}}
DEFAULT_2 = {END_ID: 0.98, A: 0.01, B: 0.01}


def test_scripted_ties_go_to_the_lower_id():
    step_fn, table = scripted_step_fn(SCRIPT_2, DEFAULT_2)
    greedy = greedy_search(step_fn, dummy_state(1), 1, max_length=5)
    assert row(greedy.ids.numpy()[0, 0], 2) == [A, END_ID]
    out = run_scripted(step_fn, beam_size=4, max_length=5, nbest=4)
    # A-END = B-END (.392) > END (.1) = UNK-END (.098): equal scores keep the lower ids first.
    assert out.ids.numpy()[0, :, :2].tolist() == [[A, END_ID], [B, END_ID], [END_ID, PAD_ID],
                                                  [UNK_ID, END_ID]]
    assert out.lengths.numpy().tolist() == [[2, 2, 1, 2]]
    assert out.scores.numpy()[0, 0] == out.scores.numpy()[0, 1]


# --- script 3: END is unlikely, so the maximum length decides ---
SCRIPT_3 = {}
DEFAULT_3 = {END_ID: 0.1, A: 0.6, B: 0.3}


def test_scripted_max_length_and_per_sentence_limits():
    step_fn, table = scripted_step_fn(SCRIPT_3, DEFAULT_3)
    out = run_scripted(step_fn, batch=2, beam_size=2, max_length=tf.constant([2, 3]), nbest=2)
    assert out.ids.shape == (2, 2, 3)
    # Sentence 0 stops at 2 tokens, sentence 1 at 3, without END; AB (.18) ties BA and wins
    # as the lower beam, AAB (.108) ties ABA likewise.
    assert out.ids.numpy().tolist() == [[[A, A, PAD_ID], [A, B, PAD_ID]],
                                        [[A, A, A], [A, A, B]]]
    assert out.lengths.numpy().tolist() == [[2, 2], [3, 3]]
    np.testing.assert_allclose(out.scores.numpy(), np.log([[0.36, 0.18], [0.216, 0.108]]),
                               atol=1e-4)
    np.testing.assert_allclose(
        out.scores.numpy()[1], [sequence_log_prob(table, [A, A, A]),
                                sequence_log_prob(table, [A, A, B])], rtol=1e-6)
    # A Python int limit gives the same as sentence 1.
    alone = run_scripted(step_fn, beam_size=2, max_length=3, nbest=2)
    np.testing.assert_array_equal(alone.ids.numpy()[0], out.ids.numpy()[1])


# --- script 4: UNK is the most likely word ---
SCRIPT_4 = {(0, START_ID): {UNK_ID: 0.5, A: 0.3, END_ID: 0.2}}
DEFAULT_4 = {END_ID: 0.9, UNK_ID: 0.05, A: 0.05}


def test_scripted_forbid_ids():
    step_fn, table = scripted_step_fn(SCRIPT_4, DEFAULT_4)
    plain = run_scripted(step_fn, beam_size=2, max_length=5)
    assert row(plain.ids.numpy()[0, 0], 2) == [UNK_ID, END_ID]
    no_unk = run_scripted(step_fn, beam_size=2, max_length=5, forbid_ids=(UNK_ID,))
    assert row(no_unk.ids.numpy()[0, 0], 2) == [A, END_ID]
    # forbidding does not renormalise: the score is the model's own log-probability
    np.testing.assert_allclose(no_unk.scores.numpy(), [[sequence_log_prob(table, [A, END_ID])]],
                               rtol=1e-6)


# --- script 5: a finished hypothesis that no live one can beat ends the search early ---
SCRIPT_5 = {
    (0, START_ID): {A: 0.6, B: 0.3, END_ID: 0.1},
    (1, A): {END_ID: 0.9, A: 0.05, B: 0.05},
    (1, B): {B: 0.5, A: 0.4, END_ID: 0.1},
}
DEFAULT_5 = {B: 0.99, END_ID: 0.005, A: 0.005}


def test_scripted_early_exit_is_exact():
    step_fn, table = scripted_step_fn(SCRIPT_5, DEFAULT_5)
    for nbest, expected_calls in [(1, 2), (2, 10)]:
        calls = []

        def counting_step_fn(ids, step, state):
            calls.append(int(step))
            return step_fn(ids, step, state)

        out = run_scripted(counting_step_fn, beam_size=2, max_length=10, nbest=nbest)
        # A-END (.54) is finished after step 1 and beats the live BB (.15): with nbest=1 the
        # search stops there; with nbest=2 the runner-up is still live and runs to the limit.
        assert len(calls) == expected_calls
        assert row(out.ids.numpy()[0, 0], 2) == [A, END_ID]
        if nbest == 2:
            assert out.ids.numpy()[0, 1].tolist() == [B] * 10
            assert out.lengths.numpy().tolist() == [[2, 10]]
            np.testing.assert_allclose(out.scores.numpy()[0, 1],
                                       sequence_log_prob(table, [B] * 10), rtol=1e-6)


def test_scripted_early_exit_keeps_ties_as_a_full_run_would():
    # AA (live, beam 0) and B-END (finished, beam 1) tie at .5; AA ends with probability 1.
    # Stopping on the tie would return B-END; the full run puts A-A-END first (lower beam).
    script = {(0, START_ID): {A: 0.5, B: 0.5}, (1, A): {A: 1.0}, (1, B): {END_ID: 1.0}}
    step_fn, _ = scripted_step_fn(script, {END_ID: 1.0}, floor=0.0)
    for nbest in [1, 2]:
        out = run_scripted(step_fn, beam_size=2, max_length=6, nbest=nbest)
        assert out.ids.numpy()[0, :, :3].tolist() == [[A, A, END_ID], [B, END_ID, PAD_ID]][:nbest]
        np.testing.assert_array_equal(out.scores.numpy(),
                                      np.log([[0.5] * nbest], dtype=np.float32))


def test_scripted_early_exit_bound_accounts_for_the_length_penalty():
    # END (.55, finished at length 1) beats A (.45) now, but with alpha=2 A-END scores
    # log(.45) / (7/6)^2 = -0.587 > log(.55) = -0.598: the search must not stop at step 0.
    script = {(0, START_ID): {END_ID: 0.55, A: 0.45}, (1, A): {END_ID: 1.0}}
    step_fn, _ = scripted_step_fn(script, {END_ID: 1.0}, floor=0.0)
    out = run_scripted(step_fn, beam_size=2, max_length=10, length_penalty=2.0)
    assert row(out.ids.numpy()[0, 0], 2) == [A, END_ID]
    np.testing.assert_allclose(out.scores.numpy(), [[np.log(0.45) / (7 / 6) ** 2]], rtol=1e-6)


def test_scripted_length_penalty_ranks_during_the_search():
    # Step 1 with alpha=2: AA (.3, -0.885) and AB (.27, -0.962) push out the finished END
    # (.28, -1.273), which would survive a ranking by raw log-probability (AB: -1.309).
    script = {(0, START_ID): {A: 0.6, END_ID: 0.28, B: 0.12},
              (1, A): {A: 0.5, B: 0.45, END_ID: 0.05}}
    step_fn, table = scripted_step_fn(script, {END_ID: 1.0})
    out = run_scripted(step_fn, beam_size=2, max_length=10, nbest=2, length_penalty=2.0)
    assert out.ids.numpy()[0, :, :3].tolist() == [[A, A, END_ID], [A, B, END_ID]]
    penalty = (8 / 6) ** 2
    np.testing.assert_allclose(
        out.scores.numpy()[0], [sequence_log_prob(table, [A, A, END_ID]) / penalty,
                                sequence_log_prob(table, [A, B, END_ID]) / penalty], rtol=1e-6)


def test_nbest_larger_than_the_hypothesis_count_reports_empty_slots():
    # vocabulary [PAD, START, END, UNK]: only END and UNK can be generated, max 1 token
    step_fn = lambda ids, step, state: (tf.zeros([tf.shape(ids)[0], 4]), state, None)
    out = beam_search(step_fn, dummy_state(1), 1, BeamSearch(length_penalty=0.0, beam_size=4, nbest=4), max_length=1)
    assert out.ids.numpy()[0, :, 0].tolist() == [END_ID, UNK_ID, PAD_ID, PAD_ID]
    assert out.lengths.numpy().tolist() == [[1, 1, 0, 0]]
    assert np.isneginf(out.scores.numpy()[0, 2:]).all()


def test_bad_arguments_raise_value_errors():
    step_fn, _ = scripted_step_fn(SCRIPT_1, DEFAULT_1)
    bad = [dict(beam_size=0), dict(beam_size=2, nbest=3), dict(nbest=0),
           dict(max_length=0), dict(length_penalty=-1.0), dict(length_penalty=float("nan")),
           dict(buffer_length=0), dict(forbid_ids=(UNK_ID, END_ID)),
           dict(return_attention=True)]
    for kwargs in bad:
        with pytest.raises(ValueError):
            run_scripted(step_fn, **kwargs)
    with pytest.raises(ValueError, match="attention"):
        run_scripted(step_fn, return_attention=True, attention_length=3)  # step gives None
    with pytest.raises(ValueError):
        ensemble_step_fn([])


def test_the_settings_are_checked_where_they_are_built():
    """One message per bad value, from the settings type itself, whoever is handed it
    (`beam_search` or a Translator)."""
    widest = decoding.MAX_BEAM_SIZE
    refusals = ((lambda: BeamSearch(length_penalty=0.0, beam_size=widest + 1), f"beam_size must be an int in [1, {widest}], got {widest + 1}"),
                (lambda: BeamSearch(length_penalty=0.0, beam_size=2.5), "beam_size must be an int in [1, 64], got 2.5"),
                (lambda: BeamSearch(length_penalty=0.0, beam_size=True), "beam_size must be an int in [1, 64], got True"),
                (lambda: BeamSearch(length_penalty=0.0, beam_size=2, nbest=3), "nbest must be an int in [1, 2], got 3"),
                (lambda: BeamSearch(length_penalty="0.5"), "length_penalty must be a float >= 0, got '0.5'"),
                (lambda: BeamSearch(length_penalty=float("nan")), "length_penalty must be a float >= 0, got nan"),
                (lambda: BeamSearch(length_penalty=0.0, return_attention=1), "return_attention must be a bool, got 1"),
                (lambda: BeamSearch(length_penalty=0.0, forbid_ids=(END_ID,)), "forbid_ids must not contain end_id"),
                (lambda: BeamSearch(length_penalty=0.0, beam_size=tf.constant(0)), "beam_size must be an int in [1, 64], got 0"),
                (lambda: Execution(jit_compile="yes"), "jit_compile must be a bool, got 'yes'"),
                (lambda: Execution(buffer_length=0), "buffer_length must be an int >= 1, got 0"))
    for build, message in refusals:
        with pytest.raises(ValueError, match=re.escape(message)):
            build()
    # NumPy values become Python values: one key for the compiled searches
    assert BeamSearch(beam_size=np.int64(3), length_penalty=np.float32(0.5)) == BeamSearch(beam_size=3, length_penalty=0.5)
    assert isinstance(BeamSearch(length_penalty=0.0, beam_size=tf.constant([2, 3])).beam_size, tf.Tensor)  # per-row beams


@pytest.mark.parametrize("jit", [False, True])
def test_blocked_top_k_equals_top_k_with_ties_and_forbidden_tokens(jit):
    rng = np.random.default_rng(0)
    function = tf.function(top_k, jit_compile=True, autograph=False) if jit else top_k
    for vocab in (1300, 5003):
        values = rng.normal(size=(40, vocab)).astype(np.float32)
        values[:10] = np.round(values[:10] * 2) / 2  # many ties, across blocks
        values[10:20, rng.integers(0, vocab, 200)] = -np.inf  # forbidden tokens
        values[20, :] = -np.inf  # nothing allowed: ties to the lowest ids
        values[21, :-3] = -np.inf  # the best in the last, partial block
        for k in (1, 3, 5):
            expected = tf.math.top_k(values, k)
            found = function(tf.constant(values), k)
            np.testing.assert_array_equal(found[0], expected.values)
            np.testing.assert_array_equal(found[1], expected.indices)


@pytest.mark.parametrize("jit", [False, True])
def test_row_candidates_with_a_vocabulary_mask_equal_log_softmax_and_top_k_of_the_masked_logits(jit):
    """The search's per-row selection over a `selection.VocabularyMask` (block maxima of the
    masked logits, the row maximum from them and the forbidden tokens' logits) against NumPy:
    log-softmax of the logits, then the top k of it with the forbidden tokens at -inf, ties to
    the lower id."""
    rng = np.random.default_rng(1)
    for vocab, never in ((1300, [0, 1, 37]), (5003, [0, 1, 4999, 5002]), (2048, [0, 1, 2, 3])):
        end_id = 2
        logits = rng.normal(scale=3.0, size=(48, vocab)).astype(np.float32)
        logits[:8] = np.round(logits[:8])  # many ties, across blocks
        logits[8:16, never] = 50.0  # a forbidden token is the row's maximum
        logits[16, 32:64] = 40.0  # a whole block of equal best values
        logits[17, :] = 0.0  # every token ties
        mask = selection.vocabulary_mask(vocab, tf.constant(never, tf.int32), end_id)
        assert isinstance(mask, selection.VocabularyMask)
        finished = tf.constant(np.arange(48) % 7 == 3)
        for k in (1, 5):
            assert selection._blocked(vocab, k)  # the path under test
            function = tf.function(
                lambda x: selection._row_candidates(x, mask, finished, k, end_id),
                jit_compile=jit, autograph=False)
            log_probs, tokens = (t.numpy() for t in function(tf.constant(logits)))
            shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
            reference = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
            reference[:, [i for i in never if i != end_id]] = -np.inf
            order = np.argsort(-reference, axis=1, kind="stable")[:, :k]  # ties to the lower id
            live = ~finished.numpy()
            np.testing.assert_array_equal(tokens[live], order[live])
            np.testing.assert_allclose(log_probs[live], np.take_along_axis(reference, order, 1)[live],
                                       rtol=1e-5, atol=1e-5)
            assert (tokens[~live, 0] == end_id).all() and (log_probs[~live, 0] == 0).all()
            # and exactly what the plain mask gives (the search's path without a VocabularyMask)
            plain = tf.function(
                lambda x: selection._row_candidates(x, mask.mask, finished, k, end_id),
                jit_compile=jit, autograph=False)(tf.constant(logits))
            np.testing.assert_array_equal(log_probs, plain[0].numpy())
            np.testing.assert_array_equal(tokens, plain[1].numpy())


def test_slots_need_the_memory_as_an_argument():
    step_fn, _ = scripted_step_fn({}, {A: 0.5, END_ID: 0.5})
    with pytest.raises(ValueError, match="slots needs memory"):
        beam_search(step_fn, dummy_state(3), 3, slots=2)
    with pytest.raises(ValueError, match="slots must be an int >= 1, got 0"):
        beam_search(lambda ids, step, state, memory: step_fn(ids, step, state), dummy_state(3), 3,
                    memory=tf.zeros([3, 1]), slots=0)


def test_tile_beams_repeats_rows_consecutively():
    nest = {"h": tf.constant([[1.0], [2.0]]), "pair": (tf.constant([7, 8]),)}
    tiled = tile_beams(nest, 3)
    assert tiled["h"].numpy()[:, 0].tolist() == [1, 1, 1, 2, 2, 2]
    assert tiled["pair"][0].numpy().tolist() == [7, 7, 7, 8, 8, 8]


# === The loop's parts, one at a time, over a scripted step function ===

def token_state_step_fn(step_fn):
    """``step_fn`` with memory (every row at the same step here), whose state becomes each
    row's input token, so that a reordering of the state is visible."""
    def step(ids, step_index, state, memory=None):
        logits, _, attention = step_fn(ids, tf.reduce_max(step_index), state)
        return logits, tf.cast(ids[:, None], tf.float32), attention
    return step


def search_parts(step_fn, batch=1, search=BeamSearch(length_penalty=0.0, beam_size=2, nbest=2), max_length=10,
                 memory=None, xla=False, slots=None):
    """The `SearchInputs` of a search and its state before the first step."""
    state = tf.constant([[10.0 + sentence] for sentence in range(batch)])
    inputs = search_lib._search_inputs(step_fn, state, batch, search, max_length, memory, None, None,
                                       Execution(jit_compile=xla))
    return inputs, search_lib.initial_search_state(inputs, slots or batch)


def test_advance_keeps_each_sentences_best_candidates_and_reorders_what_follows_them():
    step_fn, table = scripted_step_fn(SCRIPT_1, DEFAULT_1)
    inputs, state = search_parts(token_state_step_fn(step_fn), memory=tf.zeros([1, 1]))
    state = search_lib.advance(inputs, state)
    # step 0: PAD (0.4) is never generated; A (0.3) and B (0.2) are the two best
    assert state.ids.numpy().tolist() == [A, B]
    expected = [log_softmax_of(table, 0, START_ID, token) for token in (A, B)]
    np.testing.assert_allclose(state.scores.numpy()[0], expected, rtol=1e-6)
    assert state.history.numpy()[:, 0].tolist() == [A, B]
    assert state.slot_steps.numpy().tolist() == [1]
    state = search_lib.advance(inputs, state)
    # step 1: B A (0.18) beats A END (0.15); the rows swap, and so do the history and the state
    assert state.ids.numpy().tolist() == [A, END_ID]
    assert state.history.numpy()[:, :2].tolist() == [[B, A], [A, END_ID]]
    assert state.state.numpy()[:, 0].tolist() == [B, A]  # the state the step function returned
    assert state.finished.numpy().tolist() == [[False, True]]
    assert state.lengths.numpy().tolist() == [[2, 2]]
    np.testing.assert_allclose(state.scores.numpy()[0, 1], sequence_log_prob(table, [A, END_ID]),
                               rtol=1e-6)


@pytest.mark.parametrize("xla", [False, True])
def test_finished_sentences_and_read_out_write_a_final_nbest_list_only(xla):
    step_fn, table = scripted_step_fn(SCRIPT_1, DEFAULT_1)
    inputs, state = search_parts(token_state_step_fn(step_fn), memory=tf.zeros([1, 1]), xla=xla)
    empty = state.outputs
    for _ in range(2):
        state = search_lib.advance(inputs, state)
    # A END is finished, but the live B A could still beat it: not done, nothing written
    done = search_lib.finished_sentences(inputs, state)
    assert done.numpy().tolist() == [False]
    written = search_lib.read_out(inputs, state, done).outputs
    for name in ("ids", "lengths", "scores"):
        np.testing.assert_array_equal(getattr(written, name)[:1], getattr(empty, name)[:1])
    state = search_lib.advance(inputs, state)  # B A END: both finished
    done = search_lib.finished_sentences(inputs, state)
    assert done.numpy().tolist() == [True]
    written = search_lib.read_out(inputs, state, done).outputs
    assert written.ids.numpy()[0, :, :4].tolist() == [[A, END_ID, PAD_ID, PAD_ID],
                                                     [B, A, END_ID, PAD_ID]]
    assert written.lengths.numpy()[0].tolist() == [2, 3]
    expected = [sequence_log_prob(table, tokens) for tokens in ([A, END_ID], [B, A, END_ID])]
    np.testing.assert_allclose(written.scores.numpy()[0], expected, rtol=1e-6)


@pytest.mark.parametrize("xla", [False, True])
def test_refill_loads_the_next_sentence_into_a_freed_slot(xla):
    step_fn, _ = scripted_step_fn(SCRIPT_1, DEFAULT_1)
    memory = tf.constant([[100.0], [101.0], [102.0]])
    inputs, state = search_parts(token_state_step_fn(step_fn), batch=3, memory=memory, xla=xla,
                                 slots=2)
    assert state.occupant.numpy().tolist() == [0, 1] and int(state.next_sentence) == 2
    state = search_lib.advance(inputs, state)
    kept = search_lib.refill(inputs, state, tf.constant([False, False]))  # nothing is free
    for name in ("occupant", "scores", "ids", "slot_steps"):
        np.testing.assert_array_equal(getattr(kept, name), getattr(state, name))
    # slot 1's sentence is done: it takes the next one
    state = search_lib.refill(inputs, state, tf.constant([False, True]))
    assert state.occupant.numpy().tolist() == [0, 2] and int(state.next_sentence) == 3
    assert state.slot_memory.numpy()[:, 0].tolist() == [100.0, 102.0]
    assert state.state.numpy()[:, 0].tolist() == [START_ID, START_ID, 12.0, 12.0]  # 12: sentence 2
    assert state.ids.numpy().tolist() == [A, B, START_ID, START_ID]
    assert state.slot_steps.numpy().tolist() == [1, 0]
    assert state.scores.numpy()[1].tolist() == [0.0, -np.inf]
    assert state.finished.numpy()[1].tolist() == [False, True]
    # the queue is empty: a slot that is done now stays empty
    state = search_lib.refill(inputs, state, tf.constant([True, False]))
    assert state.occupant.numpy().tolist() == [3, 2] and int(state.next_sentence) == 3
    freed = search_lib.free_slots(inputs, state, tf.constant([False, True]))
    assert freed.occupant.numpy().tolist() == [3, 3]


def test_compact_gathers_the_live_slots_first_with_their_rows():
    step_fn, _ = scripted_step_fn(SCRIPT_1, DEFAULT_1)
    inputs, state = search_parts(token_state_step_fn(step_fn), batch=5, memory=tf.zeros([5, 1]),
                                 slots=4)
    state = state._replace(occupant=tf.constant([5, 2, 5, 3]), ids=tf.range(8),
                           history=tf.reshape(tf.range(8 * 10), [8, 10]))
    compacted = search_lib.compact(state, 2, inputs.beam, inputs.batch)
    assert compacted.occupant.numpy().tolist() == [2, 3]
    assert compacted.ids.numpy().tolist() == [2, 3, 6, 7]  # each slot's two beams
    assert compacted.history.numpy()[:, 0].tolist() == [20, 30, 60, 70]
    assert compacted.state.shape[0] == 4 and compacted.scores.shape == (2, 2)
    assert int(compacted.next_sentence) == int(state.next_sentence)
    np.testing.assert_array_equal(compacted.outputs.ids, state.outputs.ids)


# === A tiny random GRU model ===

TINY_VOCAB = 5  # [PAD, START, END, UNK, w4]: END, UNK and w4 can be generated


class TinyModel:
    """Embedding + GRU cell + attention over a random memory + dense, fixed random weights.

    Written with raw TF ops (XLA-compilable). The state depends on the whole history, so beam
    search must reorder it correctly to get the right scores.
    """

    def __init__(self, seed=0, vocab=TINY_VOCAB, hidden=8, source_len=6, scale=1.5):
        rng = np.random.default_rng(seed)
        f = lambda *shape: tf.constant(rng.normal(size=shape), tf.float32)
        self.vocab, self.hidden, self.source_len = vocab, hidden, source_len
        self.embedding = f(vocab, hidden)
        self.kernel = f(hidden, 3 * hidden) / math.sqrt(hidden)
        self.recurrent = f(hidden, 3 * hidden) / math.sqrt(hidden)
        self.output = f(2 * hidden, vocab) * scale
        self.rng = rng

    def encode(self, batch):
        """Random per-sentence memory [batch, source_len, hidden] and initial state."""
        memory = tf.constant(self.rng.normal(size=(batch, self.source_len, self.hidden)),
                             tf.float32)
        return memory, tf.tanh(tf.reduce_mean(memory, axis=1))

    def slot_step_fn(self, counter=None):
        """The step function that takes the memory as an argument, one row per slot (refilled
        slots); ``counter`` (a list) collects the rows computed at each step."""
        def step_fn(ids, step, h, memory):
            assert step.shape.rank == 1  # each row's own step
            if counter is not None:
                counter.append(int(tf.shape(ids)[0]))
            tiled = tf.repeat(memory, tf.shape(ids)[0] // tf.shape(memory)[0], axis=0)
            return self.step_fn(tiled)(ids, step, h)
        return step_fn

    def step_fn(self, tiled_memory):
        def step_fn(ids, step, h):
            x = tf.gather(self.embedding, ids) @ self.kernel
            r_h = h @ self.recurrent
            z = tf.sigmoid(x[:, :self.hidden] + r_h[:, :self.hidden])
            r = tf.sigmoid(x[:, self.hidden:2 * self.hidden] + r_h[:, self.hidden:2 * self.hidden])
            hh = tf.tanh(x[:, 2 * self.hidden:] + r * r_h[:, 2 * self.hidden:])
            h = z * h + (1 - z) * hh  # previous and candidate state mixed by update gate
            attention = tf.nn.softmax(tf.einsum("bh,bsh->bs", h, tiled_memory))
            context = tf.einsum("bs,bsh->bh", attention, tiled_memory)
            logits = tf.concat([h, context], axis=1) @ self.output
            return logits, h, attention
        return step_fn


def teacher_forced_log_prob(step_fn, state, tokens, lengths=None):
    """Sum of log p(y_t | y_<t) along ``tokens`` ([rows, time] ints, state has ``rows`` rows),
    counting the first ``lengths[r]`` tokens of row r (all by default)."""
    tokens = np.asarray(tokens)
    rows, time = tokens.shape
    lengths = np.full(rows, time) if lengths is None else np.asarray(lengths)
    previous = tf.fill([rows], START_ID)
    total = np.zeros(rows)
    for step in range(time):
        logits, state, _ = step_fn(previous, tf.constant(step), state)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32)).numpy()
        total += np.where(step < lengths, log_probs[np.arange(rows), tokens[:, step]], 0.0)
        previous = tf.constant(tokens[:, step], tf.int32)
    return total


def all_sequences(max_length, words):
    """Every output of at most ``max_length`` tokens: ended by END, or max_length without it."""
    others = [w for w in words if w != END_ID]
    out = []
    for length in range(1, max_length + 1):
        out += [list(p) + [END_ID] for p in itertools.product(others, repeat=length - 1)]
    return out + [list(p) for p in itertools.product(others, repeat=max_length)]


def select(nest, sentence):
    return tf.nest.map_structure(lambda t: t[sentence:sentence + 1], nest)


def check_wide_beam_is_exhaustive(make_step_fn, memory, initial_state, batch, alpha, words,
                                  max_length=4, search_fn=beam_search):
    """A beam as wide as the number of outputs finds what brute-force enumeration finds.

    Args:
        make_step_fn: tiled memory -> step function.
        memory: nest [batch, ...] the step function closes over.
        initial_state: nest [batch, ...].
        words: the token ids the model can generate (END included).
    """
    sequences = all_sequences(max_length, words)
    beam = len(sequences)  # every candidate sequence fits in the beam
    out = search_fn(make_step_fn(tile_beams(memory, beam)), initial_state, batch,
                    BeamSearch(beam_size=beam, nbest=beam, length_penalty=alpha),
                    max_length=max_length)
    padded = np.array([s + [PAD_ID] * (max_length - len(s)) for s in sequences])
    lengths = np.array([len(s) for s in sequences])
    for sentence in range(batch):
        # every sequence teacher-forced through the step function, one row each
        log_probs = teacher_forced_log_prob(
            make_step_fn(tile_beams(select(memory, sentence), beam)),
            tile_beams(select(initial_state, sentence), beam), padded, lengths)
        ranks = log_probs / ((5 + lengths) / 6) ** alpha
        best = int(np.argmax(ranks))
        ids = out.ids.numpy()[sentence]
        scores = out.scores.numpy()[sentence]
        assert ids[0].tolist() == padded[best].tolist()
        np.testing.assert_allclose(scores[0], ranks[best], rtol=1e-5)
        # the n-best list holds every sequence once, best first, each with its own score
        found = {tuple(r): (n, score)
                 for r, n, score in zip(ids.tolist(), out.lengths.numpy()[sentence], scores)}
        assert len(found) == len(sequences)
        for s, sequence in enumerate(padded):
            n, score = found[tuple(sequence)]
            assert n == lengths[s]
            np.testing.assert_allclose(score, ranks[s], rtol=1e-5, atol=1e-6)
        assert np.all(np.diff(scores) <= 0)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_wide_beam_matches_brute_force_on_tiny_model(alpha):
    model = TinyModel(seed=1)
    memory, state = model.encode(3)
    check_wide_beam_is_exhaustive(model.step_fn, memory, state, 3, alpha, (END_ID, UNK_ID, 4))


def python_greedy(step_fn, state, batch, max_length, forbid=(PAD_ID, START_ID)):
    """A plain Python/NumPy greedy loop: argmax of the allowed tokens until END or the limit."""
    previous = np.full(batch, START_ID)
    ids = np.full((batch, max_length), PAD_ID)
    lengths = np.full(batch, max_length)
    scores = np.zeros(batch)
    done = np.zeros(batch, bool)
    for step in range(max_length):
        logits, state, _ = step_fn(tf.constant(previous, tf.int32), tf.constant(step), state)
        log_probs = tf.nn.log_softmax(logits).numpy()
        allowed = log_probs.copy()
        allowed[:, list(forbid)] = -np.inf
        token = allowed.argmax(axis=1)
        for b in range(batch):
            if not done[b]:
                ids[b, step] = token[b]
                scores[b] += log_probs[b, token[b]]
                if token[b] == END_ID:
                    done[b], lengths[b] = True, step + 1
        previous = token
    return ids, lengths, scores


def test_beam_one_equals_a_python_greedy_loop():
    model = TinyModel(seed=2, vocab=12, scale=2.0)
    memory, state = model.encode(8)
    step_fn = model.step_fn(memory)  # beam 1: tiling is the identity
    expected_ids, expected_lengths, expected_scores = python_greedy(step_fn, state, 8, 9)
    assert len(set(expected_lengths)) > 1  # some stop early, some run to the limit
    for out in [greedy_search(step_fn, state, 8, max_length=9),
                beam_search(step_fn, state, 8, BeamSearch(length_penalty=0.0, beam_size=1), max_length=9)]:
        np.testing.assert_array_equal(out.ids.numpy()[:, 0], expected_ids)
        np.testing.assert_array_equal(out.lengths.numpy()[:, 0], expected_lengths)
        np.testing.assert_allclose(out.scores.numpy()[:, 0], expected_scores, rtol=1e-5)


def test_a_sentence_decodes_the_same_alone_and_in_a_batch():
    model = TinyModel(seed=3, vocab=12, scale=2.0)
    memory, state = model.encode(5)
    limits = np.array([4, 11, 6, 2, 9])
    batched = beam_search(model.step_fn(tile_beams(memory, 4)), state, 5,
                          BeamSearch(length_penalty=0.0, beam_size=4, nbest=3, return_attention=True),
                          max_length=tf.constant(limits), attention_length=model.source_len)
    assert batched.ids.shape == (5, 3, 11)
    for sentence, limit in enumerate(limits):
        alone = beam_search(model.step_fn(tile_beams(select(memory, sentence), 4)),
                            select(state, sentence), 1,
                            BeamSearch(length_penalty=0.0, beam_size=4, nbest=3, return_attention=True),
                            max_length=int(limit), attention_length=model.source_len)
        assert alone.ids.shape == (1, 3, limit)
        np.testing.assert_array_equal(batched.ids.numpy()[sentence, :, :limit], alone.ids[0])
        assert np.all(batched.ids.numpy()[sentence, :, limit:] == PAD_ID)
        np.testing.assert_array_equal(batched.lengths[sentence], alone.lengths[0])
        np.testing.assert_allclose(batched.scores[sentence], alone.scores[0], rtol=1e-5)
        np.testing.assert_allclose(batched.attention[sentence, :, :limit], alone.attention[0],
                                   atol=1e-6)


def search_alone(model, memory, state, sentence, beam, limit, attention_length=None, **settings):
    return beam_search(model.step_fn(tile_beams(select(memory, sentence), beam)),
                       select(state, sentence), 1, BeamSearch(**{"length_penalty": 0.0, "beam_size": beam, **settings}),
                       max_length=int(limit), attention_length=attention_length)


@pytest.mark.slow
@pytest.mark.parametrize("slots", [1, 2, 3, 7])
def test_a_sentence_in_a_refilled_slot_decodes_as_alone(slots, monkeypatch):
    # the tail's halves at these small sizes too
    monkeypatch.setattr(search_lib, "_MIN_TAIL_SLOTS", 2)
    model = TinyModel(seed=8, vocab=10, scale=2.0)
    memory, state = model.encode(7)
    limits = np.array([4, 11, 6, 2, 9, 1, 7])
    beams = np.array([4, 2, 4, 1, 3, 4, 4])
    counter = []
    out = beam_search(model.slot_step_fn(counter), state, 7,
                      BeamSearch(beam_size=tf.constant(beams), nbest=2, length_penalty=0.4, return_attention=True),
                      max_length=tf.constant(limits), attention_length=model.source_len, memory=memory, slots=slots)
    assert out.ids.shape == (7, 2, 11) and out.attention.shape == (7, 2, 11, model.source_len)
    # every step computes the rows of its loop's slots: all of them, then (the tail, nothing
    # left to load) halves, each with its beams
    widths = search_lib._stage_widths(min(slots, 7), refills=slots < 7)
    assert set(counter) <= {width * 4 for width in widths} and counter[0] == widths[0] * 4
    if len(widths) > 1:
        assert counter[-1] < widths[0] * 4  # the last steps ran over fewer slots
    alone_steps = []
    for sentence, (limit, own_beam) in enumerate(zip(limits, beams)):
        alone = search_alone(model, memory, state, sentence, int(own_beam), limit,
                             nbest=min(2, int(own_beam)), length_penalty=0.4, return_attention=True,
                             attention_length=model.source_len)
        found = min(2, int(own_beam))
        np.testing.assert_array_equal(out.ids.numpy()[sentence, :found, :limit], alone.ids[0])
        assert np.all(out.ids.numpy()[sentence, :, limit:] == PAD_ID)
        np.testing.assert_array_equal(out.lengths[sentence, :found], alone.lengths[0])
        np.testing.assert_allclose(out.scores[sentence, :found], alone.scores[0], rtol=1e-5)
        np.testing.assert_allclose(out.attention[sentence, :found, :limit], alone.attention[0],
                                   atol=1e-6)
        if found < 2:  # a sentence whose own beam is below nbest: an empty slot
            assert out.lengths[sentence, 1] == 0 and out.scores[sentence, 1] == -np.inf
    if slots == 1:
        # one slot, refilled the step its sentence is done: exactly the steps of each sentence
        # searched alone (the early exit included), one after another
        alone_total = 0
        for sentence, limit in enumerate(limits):
            count = []
            beam_search(model.slot_step_fn(count), select(state, sentence), 1,
                        BeamSearch(beam_size=tf.constant(beams[sentence:sentence + 1]), nbest=2, length_penalty=0.4),
                        max_length=int(limit), memory=select(memory, sentence))
            alone_total += len(count)
        assert len(counter) == alone_total


@pytest.mark.slow
@pytest.mark.parametrize("attention", [False, True])
def test_every_sentence_slotted_from_the_start_goes_on_over_halves_under_xla(attention):
    """No slot to refill (slots = batch, greedy's default of 64): the search is all tail, so it
    goes on over 32, 16, 8 slots as sentences finish (4 loops). Under XLA that needs no
    loop-invariant constant to be carried from loop to loop (tf2xla fails at the third loop
    otherwise): with and without attention, jit-compiled, every sentence still gets what it
    gets alone."""
    model = TinyModel(seed=11, vocab=9, scale=2.0)
    batch, beam = 64, 2
    memory, state = model.encode(batch)
    limits = tf.constant(np.where(np.arange(batch) % 13 == 5, 12, np.arange(batch) % 4 + 1))
    assert search_lib._stage_widths(batch, refills=False) == [64, 32, 16, 8]
    assert search_lib._stage_widths(15, refills=False) == [15]  # small batches: one loop
    counter = []

    def decode(memory, state, limits, step_fn):
        return beam_search(step_fn, state, batch,
                           BeamSearch(beam_size=beam, nbest=1, length_penalty=0.5,
                                      return_attention=attention),
                           max_length=limits,
                           attention_length=model.source_len if attention else None, memory=memory,
                           slots=batch, execution=Execution(buffer_length=12, jit_compile=True))

    eager = decode(memory, state, limits, model.slot_step_fn(counter))
    assert counter[0] == 64 * beam and counter[-1] == 8 * beam  # the fourth loop ran
    assert set(counter) <= {64 * beam, 32 * beam, 16 * beam, 8 * beam}
    xla = tf.function(lambda *a: decode(*a, model.slot_step_fn()), jit_compile=True)(memory, state, limits)
    np.testing.assert_array_equal(xla.ids, eager.ids)
    np.testing.assert_allclose(xla.scores, eager.scores, rtol=1e-5)
    if attention:
        np.testing.assert_allclose(xla.attention, eager.attention, atol=1e-5)
    else:
        assert xla.attention is None
    for sentence, limit in enumerate(limits.numpy()):
        alone = search_alone(model, memory, state, sentence, beam, limit, length_penalty=0.5)
        np.testing.assert_array_equal(eager.ids[sentence, :, :limit], alone.ids[0])
        np.testing.assert_allclose(eager.scores[sentence], alone.scores[0], rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("vocab", [9, 1500])
def test_refilled_slots_agree_under_tf_function_and_xla(vocab):
    # 1,500 words: under XLA the selection goes through a selection.VocabularyMask (block maxima)
    model = TinyModel(seed=9, vocab=vocab, scale=2.0)
    memory, state = model.encode(6)
    limits = tf.constant([3, 7, 5, 8, 1, 6])

    def decode(memory, state, limits, beam, xla=False):
        return beam_search(model.slot_step_fn(), state, tf.shape(state)[0],
                           BeamSearch(beam_size=beam, nbest=1, length_penalty=0.5,
                                      return_attention=True, forbid_ids=(UNK_ID,)),
                           max_length=limits, attention_length=tf.shape(memory)[1], memory=memory,
                           slots=4, execution=Execution(buffer_length=8, jit_compile=xla,
                                                        vocabulary_size=vocab))

    for beam in (3, 1):
        eager = decode(memory, state, limits, beam)  # read-out and refill under tf.cond
        in_place = decode(memory, state, limits, beam, xla=True)  # written at every step
        graph = tf.function(decode, input_signature=[
            tf.TensorSpec([None, None, model.hidden], tf.float32),
            tf.TensorSpec([None, model.hidden], tf.float32), tf.TensorSpec([None], tf.int32),
            tf.TensorSpec([], tf.int32)])(memory, state, limits, tf.constant(beam))
        xla = tf.function(lambda *a: decode(*a, xla=True), jit_compile=True)(memory, state, limits, beam)
        for other in (in_place, graph, xla):
            np.testing.assert_array_equal(other.ids, eager.ids)
            np.testing.assert_array_equal(other.lengths, eager.lengths)
            np.testing.assert_allclose(other.scores, eager.scores, rtol=1e-5)
            np.testing.assert_allclose(other.attention, eager.attention, atol=1e-5)
        for sentence, limit in enumerate(limits.numpy()):
            alone = search_alone(model, memory, state, sentence, beam, limit, length_penalty=0.5,
                                 forbid_ids=(UNK_ID,))
            np.testing.assert_array_equal(eager.ids[sentence, :, :limit], alone.ids[0])


@pytest.mark.slow
def test_eager_tf_function_and_xla_agree():
    model = TinyModel(seed=4, vocab=9, scale=2.0)
    memory, state = model.encode(6)
    limits = tf.constant([3, 7, 5, 8, 1, 6])
    beam = 3

    def decode(memory, state, limits):
        return beam_search(model.step_fn(tile_beams(memory, beam)), state, tf.shape(state)[0],
                           BeamSearch(beam_size=beam, nbest=2, length_penalty=0.5,
                                      forbid_ids=(UNK_ID,), return_attention=True),
                           max_length=limits, attention_length=tf.shape(memory)[1])

    signature = [tf.TensorSpec([None, None, model.hidden], tf.float32),
                 tf.TensorSpec([None, model.hidden], tf.float32),
                 tf.TensorSpec([None], tf.int32)]
    graph = tf.function(decode, input_signature=signature)
    xla = tf.function(decode, jit_compile=True)
    eager = decode(memory, state, limits)
    assert not np.any(eager.ids.numpy() == UNK_ID)
    for other in [graph(memory, state, limits), xla(memory, state, limits)]:
        for name in ["ids", "lengths"]:
            np.testing.assert_array_equal(getattr(other, name), getattr(eager, name))
        np.testing.assert_allclose(other.scores, eager.scores, rtol=1e-5)
        np.testing.assert_allclose(other.attention, eager.attention, atol=1e-5)
    # the dynamic batch: one traced graph serves another batch size
    half = graph(memory[:2], state[:2], limits[:2])
    np.testing.assert_array_equal(half.ids, eager.ids.numpy()[:2, :, :7])


def test_a_static_buffer_keeps_one_xla_compilation_for_new_limits():
    # the limits are data, the buffer a constant: new limits of the same batch shape reuse the
    # compiled program, and every result equals the eager search with a buffer of its own size
    model = TinyModel(seed=5, vocab=9, scale=2.0)
    memory, state = model.encode(4)

    def decode(memory, state, limits):
        return beam_search(model.step_fn(tile_beams(memory, 3)), state, 4,
                           BeamSearch(beam_size=3, nbest=2, length_penalty=0.6,
                                      return_attention=True),
                           max_length=limits, attention_length=6,
                           execution=Execution(buffer_length=12))

    xla = tf.function(decode, jit_compile=True)
    for limits in ([3, 7, 5, 8], [12, 1, 2, 9], [4, 4, 4, 30]):
        out = xla(memory, state, tf.constant(limits))
        assert out.ids.shape == (4, 2, 12)
        # a limit above the buffer is the buffer
        eager = beam_search(model.step_fn(tile_beams(memory, 3)), state, 4,
                            BeamSearch(beam_size=3, nbest=2, length_penalty=0.6,
                                       return_attention=True),
                            max_length=tf.constant(np.minimum(limits, 12)), attention_length=6)
        width = eager.ids.shape[2]
        np.testing.assert_array_equal(out.ids[:, :, :width], eager.ids)
        assert np.all(out.ids.numpy()[:, :, width:] == PAD_ID)
        np.testing.assert_array_equal(out.lengths, eager.lengths)
        np.testing.assert_allclose(out.scores, eager.scores, rtol=1e-5)
        np.testing.assert_allclose(out.attention[:, :, :width], eager.attention, atol=1e-5)
    assert xla.experimental_get_tracing_count() == 1


def test_ranking_bound_is_never_beaten_by_a_continuation():
    # any continuation: a lower log p (each token adds log p <= 0), a longer length up to the limit
    rng = np.random.default_rng(0)
    for alpha in (0.0, 0.6, 2.0):
        ranking = Ranking(tf.constant(alpha))
        score = -rng.exponential(size=200).astype(np.float32)
        length = rng.integers(1, 20, size=200)
        limit = length + rng.integers(0, 20, size=200)
        later_score = score - rng.exponential(size=200).astype(np.float32) * rng.integers(0, 2, size=200)
        later_length = length + (rng.random(200) * (limit - length + 1)).astype(int).clip(0, limit - length)
        bound = ranking.best_continuation(score, limit).numpy()
        assert np.all(ranking.rank(later_score, later_length).numpy() <= bound + 1e-6), alpha


def test_scripted_ties_agree_under_tf_function_and_xla():
    step_fn, _ = scripted_step_fn(SCRIPT_3, DEFAULT_3)

    def decode(state):
        return beam_search(step_fn, state, tf.shape(state)[0], BeamSearch(length_penalty=0.0, beam_size=3, nbest=3),
                           max_length=4)

    eager = decode(dummy_state(2))
    for fn in [tf.function(decode, input_signature=[tf.TensorSpec([None, 1])]),
               tf.function(decode, jit_compile=True)]:
        other = fn(dummy_state(2))
        np.testing.assert_array_equal(other.ids, eager.ids)
        np.testing.assert_allclose(other.scores, eager.scores, rtol=1e-6)


def test_ensemble_of_one_equals_the_model():
    model = TinyModel(seed=5, vocab=10, scale=2.0)
    memory, state = model.encode(4)
    step_fn = model.step_fn(tile_beams(memory, 3))
    alone = beam_search(step_fn, state, 4, BeamSearch(length_penalty=0.0, beam_size=3, nbest=3, return_attention=True),
                        max_length=7, attention_length=model.source_len)
    ensemble = beam_search(ensemble_step_fn([step_fn]), (state,), 4,
                           BeamSearch(length_penalty=0.0, beam_size=3, nbest=3, return_attention=True), max_length=7,
                           attention_length=model.source_len)
    np.testing.assert_array_equal(ensemble.ids, alone.ids)
    np.testing.assert_array_equal(ensemble.lengths, alone.lengths)
    np.testing.assert_allclose(ensemble.scores, alone.scores, rtol=1e-5)
    np.testing.assert_allclose(ensemble.attention, alone.attention, atol=1e-6)


def test_ensemble_of_two_averages_probabilities():
    first, second = TinyModel(seed=6, vocab=10, scale=3.0), TinyModel(seed=7, vocab=10)
    memory_1, state_1 = first.encode(4)
    memory_2, state_2 = second.encode(4)
    step_1, step_2 = first.step_fn(memory_1), second.step_fn(memory_2)
    ids = tf.constant([START_ID, 4, 5, 9])
    log_probs, (new_1, new_2), attention = ensemble_step_fn([step_1, step_2])(
        ids, tf.constant(1), (state_1, state_2))
    logits_1, expected_1, attention_1 = step_1(ids, tf.constant(1), state_1)
    logits_2, expected_2, attention_2 = step_2(ids, tf.constant(1), state_2)
    softmax = lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(
        x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)
    expected = np.log((softmax(logits_1.numpy()) + softmax(logits_2.numpy())) / 2)
    np.testing.assert_allclose(log_probs, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(attention, (attention_1 + attention_2) / 2, rtol=1e-6)
    np.testing.assert_allclose(new_1, expected_1)
    np.testing.assert_allclose(new_2, expected_2)
    # the mean of probabilities, not of logits: the two differ here
    assert not np.allclose(log_probs, tf.nn.log_softmax((logits_1 + logits_2) / 2), atol=1e-3)
    # a member without attention makes the ensemble's None
    no_attention = lambda i, s, h: (step_2(i, s, h)[0], h, None)
    assert ensemble_step_fn([step_1, no_attention])(ids, 1, (state_1, state_2))[2] is None
    # and beam search drives it: two copies of one model decode like the model
    model = TinyModel(seed=8, vocab=10, scale=2.0)
    memory, state = model.encode(3)
    step_fn = model.step_fn(tile_beams(memory, 2))
    alone = beam_search(step_fn, state, 3, BeamSearch(length_penalty=0.0, beam_size=2), max_length=6)
    pair = beam_search(ensemble_step_fn([step_fn, step_fn]), (state, state), 3,
                       BeamSearch(length_penalty=0.0, beam_size=2), max_length=6)
    np.testing.assert_array_equal(pair.ids, alone.ids)
    np.testing.assert_allclose(pair.scores, alone.scores, rtol=1e-5)


def history_step_fn(vocab, source_len, seed=9):
    """A step function whose attention row spells out the hypothesis's history.

    The state is (history, bias): at step t, history slot t receives (previous id + 1), and the
    attention returned at step t is that updated history, so the attention row of output token
    t is [START + 1, y_0 + 1, ..., y_{t-1} + 1, 0, ...]. The logits are a random function of the
    history plus a per-sentence bias.
    """
    weights = tf.constant(np.random.default_rng(seed).normal(size=(source_len, vocab)) * 0.7,
                          tf.float32)

    def step_fn(ids, step, state):
        history, bias = state
        slot = tf.one_hot(step, source_len)[None, :]
        history = history + slot * tf.cast(ids[:, None] + 1, tf.float32)
        logits = tf.sin(history @ weights) * 3.0 + bias  # bounded, history-dependent
        return logits, (history, bias), history

    return step_fn


def test_attention_rows_follow_the_beam_reordering():
    vocab, max_length, beam, batch = 7, 6, 4, 3
    step_fn = history_step_fn(vocab, max_length)
    bias = tf.constant(np.random.default_rng(0).normal(size=(batch, vocab)), tf.float32)
    state = (tf.zeros([batch, max_length]), bias)
    out = beam_search(step_fn, state, batch,
                      BeamSearch(length_penalty=0.0, beam_size=beam, nbest=beam, return_attention=True),
                      max_length=max_length, attention_length=max_length)
    ids, lengths, attention = out.ids.numpy(), out.lengths.numpy(), out.attention.numpy()
    assert attention.shape == (batch, beam, max_length, max_length)
    assert len(set(map(tuple, ids.reshape(-1, max_length)))) > beam  # the hypotheses differ
    for b in range(batch):
        for k in range(beam):
            tokens = [START_ID] + ids[b, k, :lengths[b, k]].tolist()
            for t in range(max_length):
                expected = np.zeros(max_length)
                if t < lengths[b, k]:
                    expected[:t + 1] = np.array(tokens[:t + 1]) + 1
                np.testing.assert_array_equal(attention[b, k, t], expected)
    # and each score is the history model's log-probability of the returned tokens
    for b in range(batch):
        np.testing.assert_allclose(
            out.scores.numpy()[b],
            teacher_forced_log_prob(step_fn, tile_beams(select(state, b), beam), ids[b],
                                    lengths[b]),
            rtol=1e-5)


def test_dynamic_beam_size_and_nbest_in_tf_function():
    # A serving signature may take the beam size per request: int32 scalars, no XLA.
    model = TinyModel(seed=10, vocab=9, scale=2.0)
    memory, state = model.encode(3)

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int32)])
    def decode(beam, nbest):
        return beam_search(model.step_fn(tile_beams(memory, beam)), state, 3,
                           BeamSearch(length_penalty=0.0, beam_size=beam, nbest=nbest), max_length=6)

    for beam, nbest in [(1, 1), (4, 2)]:
        dynamic = decode(tf.constant(beam), tf.constant(nbest))
        static = beam_search(model.step_fn(tile_beams(memory, beam)), state, 3,
                             BeamSearch(length_penalty=0.0, beam_size=beam, nbest=nbest), max_length=6)
        np.testing.assert_array_equal(dynamic.ids, static.ids)
        np.testing.assert_allclose(dynamic.scores, static.scores, rtol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError):
        decode(tf.constant(2), tf.constant(3))  # nbest > beam_size, checked at run time


def randomised_rnnsearch(target_vocabulary_size, seed):
    """RNNSearch "tiny" with large random weights, so that its distributions are far from
    uniform (the paper's N(0, 0.01^2) initialisation makes every sequence nearly tie)."""
    from bahdanau_tf.models import RNNSearch

    model = RNNSearch.from_preset("tiny", source_vocabulary_size=11,
                                  target_vocabulary_size=target_vocabulary_size)
    model.build()
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(size=weight.shape).astype(np.float32) * 0.5)
    return model


def test_wide_beam_matches_brute_force_on_rnnsearch():
    model = randomised_rnnsearch(TINY_VOCAB, seed=11)
    source = tf.constant([[5, 6, 7, END_ID, PAD_ID], [8, 4, 9, 10, END_ID]])
    memory = model.encode(source)
    state = model.initial_state(memory)

    def make_step_fn(tiled_memory):
        return lambda ids, step, s: model.decode_step(ids, s, tiled_memory)

    check_wide_beam_is_exhaustive(make_step_fn, memory, state, 2, 0.0, (END_ID, UNK_ID, 4))
    # The returned scores are the model's teacher-forced log-probabilities (its training path).
    out = beam_search(make_step_fn(tile_beams(memory, 5)), state, 2,
                      BeamSearch(length_penalty=0.0, beam_size=5, nbest=5), max_length=4)
    ids, lengths = out.ids.numpy(), out.lengths.numpy()
    for sentence in range(2):
        targets = ids[sentence]  # [5, 4]
        inputs = np.concatenate([np.full((5, 1), START_ID), targets[:, :-1]], axis=1)
        logits = model((tf.repeat(source[sentence:sentence + 1], 5, axis=0),
                        tf.constant(inputs, tf.int32)))
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32)).numpy()
        picked = np.take_along_axis(log_probs, targets[..., None], axis=2)[..., 0]
        expected = np.where(np.arange(4) < lengths[sentence][:, None], picked, 0).sum(1)
        np.testing.assert_allclose(out.scores.numpy()[sentence], expected, rtol=1e-5)
