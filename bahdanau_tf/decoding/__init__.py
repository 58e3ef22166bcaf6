"""Beam search, greedy search and ensembles over a step function, written once in ``keras.ops``:
on TensorFlow it is core TF ops (what TensorFlow runs and exports), and it runs on the other
Keras backends (JAX, PyTorch) as it is.

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

What a search looks for is one value, `BeamSearch` (beam, n-best, length penalty, forbidden
tokens, attention); how it runs is another, `Execution` (compiled or not, the buffer, the logits'
width), and the sentences it keeps in flight are ``slots``, beside the ``memory`` it refills;
none of them changes inside a search. The package, read in this order:

- `bahdanau_tf.decoding.search`: the settings, the loop's named state and the loop's parts
  (the step, the read-out of finished sentences, the refill of slots, the compaction);
- `bahdanau_tf.decoding.rules`: the selection rules: the ranking and length penalty, the
  never-generated tokens, the survivors of a step, the done sentences, the n-best order;
- `bahdanau_tf.decoding.selection`: one step's choice (the rules, with TensorFlow's blocked
  ``top_k`` and, under XLA, its mask folded into that pass);
- `bahdanau_tf.decoding.step_functions`: the model contract `StepModel`, `tile_beams` and
  `ensemble_step_fn`;
- `bahdanau_tf.decoding.batching`: a translator's settings beyond the search's own:
  `LengthLimits` (the source cut, the output limit) and `Batching` (chunks, slots, XLA);
- `bahdanau_tf.decoding.chunks`: the chunk plan, how a batch is cut, padded and searched;
- `bahdanau_tf.decoding.portable`: what is backend-specific, compiling a search as a whole
  (``jax.jit`` on JAX).

Everything is one ``keras.ops.while_loop`` over static-shape buffers, so the same code runs
eagerly, inside ``tf.function`` with a dynamic batch (e.g. a serving signature), under XLA and
under ``jax.jit``; no tensorflow-addons op (``GatherTree``) and no tf-text op is used: each
hypothesis carries its tokens (and attention rows) so far, and a sentence's n-best is read out
the step it is done.
"""

from bahdanau_tf.decoding.batching import MAX_BEAM_SIZE, Batching, LengthLimits
from bahdanau_tf.decoding.search import (BeamSearch, BeamSearchOutput, Execution, beam_search,
                                         greedy_search)
from bahdanau_tf.decoding.rules import DEFAULT_LENGTH_PENALTY, Ranking, length_penalty_factor, never_mask
from bahdanau_tf.decoding.selection import VocabularyMask, static_int, top_k, vocabulary_mask
from bahdanau_tf.decoding.step_functions import StepFn, StepModel, ensemble_step_fn, tile_beams

__all__ = ["DEFAULT_LENGTH_PENALTY", "MAX_BEAM_SIZE", "Batching", "BeamSearch", "BeamSearchOutput", "Execution", "LengthLimits",
           "Ranking", "StepFn", "StepModel", "VocabularyMask", "beam_search",
           "ensemble_step_fn", "greedy_search", "length_penalty_factor", "never_mask",
           "static_int", "tile_beams", "top_k", "vocabulary_mask"]
