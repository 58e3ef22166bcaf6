"""The Translator: strings in, strings out — tokenizers + model(s) + beam search in one graph.

`Translator` (a ``tf.Module``) is what the command lines, the notebooks and the SavedModel
export use (DESIGN §3, §5, §6). Everything between the input strings and the output strings
runs inside one TensorFlow graph, batched, with no Python loop over sentences and no trip to
the host:

    tokenize -> cut to max_source_length -> + [END] -> pad -> encode -> beam search
             -> detokenize

The string side (tokenize before the search, detokenize after it) is a
`bahdanau_tf.text_graph.TextGraph`; the SavedModel's signatures (``serving_default``,
``translate_nbest``, ``align``) are `bahdanau_tf.signatures.Signatures`, a module that holds
the translator, and `bahdanau_tf.serving.export_saved_model` writes them: the translator imports
neither. This module holds the models, the settings (`bahdanau_tf.decoding`'s `BeamSearch`,
`LengthLimits` and `Batching`), the search over int tensors, the constructors and `translate`.

Decisions (all documented here once):

- **Source length bound**: inputs are cut to ``max_source_length`` tokens (default 100,
  `bahdanau_tf.decoding.LengthLimits`) before ``[END]`` is appended; the rest of a longer
  sentence is *not translated*.
- **Output length bound**: a translation has at most ``ceil(max_length_ratio * n) +
  max_length_offset`` tokens, ``[END]`` included, n the (cut) source length in tokens:
  ``2 n + 10`` by default. A hypothesis that hits it is finished without ``[END]``.
- **Empty input** (``""``, whitespace only, nothing but format characters: no token at all)
  translates to ``""`` with score 0.0 (every n-best entry), without consulting the model;
  ``align`` gives it one source token (``[END]``), no target token.
- **Bad bytes**: invalid UTF-8 becomes U+FFFD, i.e. ``[UNK]``; unknown words are ``[UNK]``.
  No row's content makes a graph raise (what the exported signatures clamp and refuse:
  `bahdanau_tf.signatures`).
- **Export**: the Keras models are not part of the SavedModel's object graph; their
  underlying ``tf.Variable`` s are (see ``Translator.__init__``), which is what TF Serving's
  loader restores.
- **Batch independence**: rows are decoded independently (padding is masked, each row has
  its own length limit), so a sentence gets the same translation alone and inside any batch.
- **Scores** are log p(y | x) summed over the tokens (``[END]`` included), divided by the
  GNMT length penalty ``((5 + length) / 6) ** alpha`` when ``length_penalty = alpha > 0``.
  Ranking by log p alone (alpha 0, the paper's objective) prefers short outputs; the default
  alpha, 1.0 (`DEFAULT_LENGTH_PENALTY`), was chosen on the dev split (the sweep in
  benchmarks/README.md, "The length penalty"). The authors' GroundHog sampler normalised by length too.
- **[UNK] replacement** (``replace_unk``; Jean et al. 2015): each generated ``[UNK]`` becomes
  the source token with the highest attention weight at that step (among the real source
  tokens, ``[END]`` left out; the word as written), or its entry in ``unk_dictionary``
  (`bahdanau_tf.unknown_words`). Attention models only. It changes the text, not the search.
- **Candidate lists** (``candidates``, `bahdanau_tf.lexicon.CandidateLists`; Jean et al.
  2015): each chunk's search runs over the frequent target tokens plus the lexicon's
  translations of its source tokens (padded to a size bucket under XLA); scores are
  log-probabilities under that restricted softmax. The exported signatures carry the lexicon.
- **Defaults**: beam 5 (the paper does not give its beam size; Sutskever et al. used 12, a
  wider beam costing time for a small gain); ``[UNK]`` allowed (the paper's "No UNK" column
  forbids it: ``forbid_unknown=True``).
- **Ensembles** (Sutskever et al. 2014): several models over the same vocabularies; their
  probabilities are averaged at every step (`bahdanau_tf.decoding.ensemble_step_fn`).
- **Chunks, slots and compiled shapes**: `bahdanau_tf.decoding.chunks`, the plan of the
  chunked search (`search_chunks` runs it in the graph, `translate` over compiled buckets).
- **Other Keras backends** (JAX, PyTorch): `translate` runs the same ``keras.ops`` search
  (`bahdanau_tf.decoding.search`) over the same chunks, compiled as the backend compiles a
  whole loop (`bahdanau_tf.decoding.portable`). Tokenizing stays TensorFlow; candidate lists
  and the export need the TensorFlow backend.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Sequence

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bahdanau_tf import decoding, devices, lexicon, model_directory, pretrained, unknown_words
from bahdanau_tf.presets import is_model_path
from bahdanau_tf.decoding import chunks, portable
from bahdanau_tf.decoding.batching import check_int
from bahdanau_tf.special_tokens import END_TOKEN, PAD_ID, START_ID, UNK_ID
from bahdanau_tf.text_graph import (SENTENCES, Alignment, TextGraph, TranslationOutput, alignments_of,
                                    decode_strings)

DEFAULT_BEAM_SIZE = 5
DEFAULT_LENGTH_PENALTY = decoding.DEFAULT_LENGTH_PENALTY  # GNMT alpha, see the module docstring
# the default search: serving_default's, and translate's unless told otherwise
DEFAULT_SEARCH = decoding.BeamSearch(beam_size=DEFAULT_BEAM_SIZE)  # DEFAULT_LENGTH_PENALTY
# a batch's search without XLA: source ids, their lengths and limits, forbid_unknown
_SEARCH_INPUTS = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32),
                  tf.TensorSpec([None], tf.int32), tf.TensorSpec([], tf.bool)]


def _default_search(search) -> decoding.BeamSearch:
    """The translator's default search: any `bahdanau_tf.decoding.BeamSearch` (validated where
    it is built), of Python values, since it is every call's default and keys the compiled
    searches."""
    if not isinstance(search, decoding.BeamSearch):
        raise ValueError(f"search must be a bahdanau_tf.decoding.BeamSearch, got {search!r}.")
    tensors = [field.name for field in dataclasses.fields(search)
               if ops.is_tensor(getattr(search, field.name)) or tf.is_tensor(getattr(search, field.name))]
    if tensors:
        raise ValueError(f"A Translator's search holds Python values (it is the default of every "
                         f"call), got a tensor for {', '.join(tensors)}.")
    return search


class Translator(tf.Module):
    """Tokenizers + one model or an ensemble + beam search: strings in, strings out.

    Args:
        models: a model (`RNNSearch`, `RNNEncDec`, `Seq2Seq`, anything that is a
            `bahdanau_tf.decoding.StepModel`) or a non-empty list of models over the same
            vocabularies (an ensemble).
        source_tokenizer: a `bahdanau_tf.text` tokenizer of the source language.
        target_tokenizer: the target language's tokenizer.
        search: a `bahdanau_tf.decoding.BeamSearch` of the default ``beam_size`` (5; 1 is
            greedy search) and ``length_penalty`` (the GNMT alpha >= 0, `DEFAULT_LENGTH_PENALTY`; 0 ranks by
            log p(y | x)): `translate`'s default and the exported signatures'.
        limits: a `bahdanau_tf.decoding.LengthLimits`, the source cut and the output limit.
        batching: a `bahdanau_tf.decoding.Batching`, how the search runs (XLA, chunks, slots,
            buckets).
        replace_unk: bool, replace each generated [UNK] by attention (see the module
            docstring): `translate`'s default and what the exported ``serving_default``,
            ``translate_nbest`` and ``align`` do (``translate_replace_unk`` always does).
        unk_dictionary: None, a dictionary file's path or a
            `bahdanau_tf.unknown_words.UnknownWordDictionary`: the entries replacement looks
            up (exported as an asset).
        candidates: None, or a `bahdanau_tf.lexicon.CandidateLists`: every search (translate
            and the exported signatures) decodes over a per-chunk candidate list (see the
            module docstring).
        name: optional module name.

    Example:

        translator = Translator.from_directory("runs/rnnsearch-small",
                                               search=BeamSearch(beam_size=12))
        output = translator.translate(["But seek God's Kingdom, and all these things will be added to you."])
        output.translations[0], output.scores[0]
        bahdanau_tf.export_saved_model(translator, "/models/bahdanau")  # TF Serving, see bahdanau_tf.serving
    """

    def __init__(self, models, source_tokenizer, target_tokenizer, search=DEFAULT_SEARCH,
                 limits=decoding.LengthLimits(), batching=decoding.Batching(), replace_unk=False,
                 unk_dictionary=None, candidates=None, name=None):
        super().__init__(name=name)
        models = _checked_models(models)
        # === Models ===
        # The Keras models are held out of the SavedModel's object graph; their underlying
        # tf.Variables are tracked instead (see `_model_variables`).
        self._keras = types.SimpleNamespace(models=models)  # a plain object: not tracked
        # A Keras 3 variable wraps a tf.Variable (``.value``), which is what the traced
        # functions capture. Exported as a Keras variable, it is restored by the object-graph
        # loader (tf.saved_model.load) only: its SavedModel export is a *copy* of the
        # tf.Variable, so the saver's restore op that TF Serving runs (the session bundle)
        # fills the copy and leaves the captured variable uninitialised ("Could not find
        # variable ..."). Tracking the tf.Variables themselves, and not the Keras objects, gives
        # one restore op per captured variable and one copy of the weights on disk and in the
        # server (keras.export.ExportArchive tracks both: twice the weights).
        self._model_variables = [[variable.value for variable in model.variables]
                                 for model in models]
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        # === Settings ===
        self.search = _default_search(search)
        if self.search.return_attention and not all(m.has_attention for m in models):
            raise ValueError("A search with return_attention=True needs models with attention (RNNsearch).")
        if not isinstance(limits, decoding.LengthLimits) or not isinstance(batching, decoding.Batching):
            raise ValueError(f"limits must be a LengthLimits and batching a Batching, got "
                             f"{limits!r} and {batching!r}.")
        self.limits = limits
        if batching.jit_compile is None:
            batching = dataclasses.replace(batching, jit_compile=devices.decoding_jit())
        self.batching = batching
        # the one plan of the chunked search, for the signatures' graph and the XLA path
        self.chunking = chunks.Chunking.of(batching, limits)
        # the traced functions, in a plain object that SavedModel does not see (nor save)
        self._cache = types.SimpleNamespace(functions={}, text_graph=None)
        # === [UNK] replacement ===
        if (replace_unk or unk_dictionary is not None) and not self.has_attention:
            raise ValueError("replace_unk and unk_dictionary need models with attention "
                             "(RNNsearch): the replacement follows the attention.")
        self.replace_unk = bool(replace_unk)
        if unk_dictionary is not None and not isinstance(unk_dictionary,
                                                         unknown_words.UnknownWordDictionary):
            unk_dictionary = unknown_words.UnknownWordDictionary(unk_dictionary)
        self.unk_dictionary = unk_dictionary
        # === Candidate lists ===
        self.candidates = candidates
        if candidates is not None and keras.backend.backend() != "tensorflow":
            raise ValueError("Candidate lists need the TensorFlow backend (KERAS_BACKEND=tensorflow).")
        if candidates is not None:
            if not isinstance(candidates, lexicon.CandidateLists):
                raise ValueError(f"candidates must be a bahdanau_tf.lexicon.CandidateLists, got "
                                 f"{type(candidates).__name__}.")
            self._candidate_table = candidates.variable(source_tokenizer.vocabulary_size,
                                                        target_tokenizer.vocabulary_size)

    @property
    def beam_size(self) -> int:
        """int: the default beam (``search.beam_size``)."""
        return self.search.beam_size

    @property
    def length_penalty(self) -> float:
        """float: the GNMT length penalty's alpha (``search.length_penalty``)."""
        return self.search.length_penalty

    @property
    def models(self) -> list:
        """list: the Keras model(s), one per ensemble member."""
        return list(self._keras.models)

    @property
    def has_attention(self) -> bool:
        """True when every model returns attention (RNNsearch), so alignments exist."""
        return all(m.has_attention for m in self.models)

    @property
    def text_graph(self) -> TextGraph:
        """The `bahdanau_tf.text_graph.TextGraph` of this translator (made once): the string
        graphs that `translate` and the exported signatures run around the search."""
        if self._cache.text_graph is None:
            heads = all(getattr(model, "head", None) is not None for model in self.models)
            self._cache.text_graph = TextGraph(self.source_tokenizer, self.target_tokenizer, self.limits,
                                               self.unk_dictionary, heads=self.models if heads else ())
        return self._cache.text_graph

    # === Constructors ===

    @classmethod
    def from_directory(cls, model_dirs, which="best", dtype="auto", **kwargs) -> "Translator":
        """Loads one training output directory, or several for an ensemble.

        A shipped model's name (`bahdanau_tf.pretrained`) is a directory too; `from_preset`
        loads one by name only.

        Args:
            model_dirs: str, or a list of str (an ensemble; the vocabularies must be equal).
            which: ``"best"`` (best dev NLL, else latest), ``"latest"`` or ``"averaged"``
                (`bahdanau-average`'s checkpoint; never a fallback) checkpoint.
            dtype: the dtype policy to build the models in; ``"auto"``:
                `bahdanau_tf.devices.decoding_precision` (float32 on a CPU, whatever the model
                was trained in); None: the trained policy.
            **kwargs: `Translator` arguments (search, limits, batching, replace_unk, ...).

        Raises:
            FileNotFoundError: not a model directory, or no checkpoint.
            ValueError: ensemble members with different vocabularies.
        """
        if isinstance(model_dirs, (str, bytes)) or not isinstance(model_dirs, Sequence):
            model_dirs = [model_dirs]
        if dtype == "auto":
            dtype = devices.decoding_precision()
        loaded = [model_directory.load_model_directory(d, which=which, dtype=dtype) for d in model_dirs]
        first = loaded[0]
        for directory, other in zip(model_dirs[1:], loaded[1:]):
            if (other.source_tokenizer.vocabulary != first.source_tokenizer.vocabulary
                    or other.target_tokenizer.vocabulary != first.target_tokenizer.vocabulary):
                raise ValueError(f"{directory!r} has other vocabularies than {model_dirs[0]!r}: "
                                 "an ensemble needs models over the same vocabularies.")
        return cls([d.model for d in loaded], first.source_tokenizer, first.target_tokenizer,
                   **kwargs)

    @classmethod
    def from_preset(cls, name, dtype="auto", **kwargs) -> "Translator":
        """The Translator of a model that ships with the package (`bahdanau_tf.pretrained`),
        or of a trained model's path, by the rule of every ``from_preset``
        (`bahdanau_tf.presets.is_model_path`).

        Args:
            name: str, a shipped model's name, e.g. ``"bible-en-es-small"``
                (`bahdanau_tf.pretrained.names`), which wins over a directory of that name
                (write ``./bible-en-es-small``); or a model directory or ``.keras`` file.
            dtype: as in `from_directory` (its weights are stored in float16, loaded in float32
                on a CPU).
            **kwargs: `Translator` arguments (search, limits, batching, replace_unk, ...).

        Raises:
            ValueError: neither a shipped model's name nor a path (an architecture preset has
                no trained weights to translate with).
            FileNotFoundError: a path that does not exist.

        Example:

            translator = Translator.from_preset("bible-en-es-small")
            translator.translate("But seek God's Kingdom, and all these things will be added to you.")
        """
        if not is_model_path(name):
            raise ValueError(f"{name!r} is neither a shipped model ({', '.join(pretrained.names())}) "
                             "nor a model directory or .keras file.")
        return cls.from_directory(pretrained.resolve(name), dtype=dtype, **kwargs)

    @classmethod
    def from_model(cls, models, **kwargs) -> "Translator":
        """A Translator of a model (or an ensemble) that carries its tokenizers.

        Args:
            models: a model with attached tokenizers (``model.attach_tokenizers``, or loaded
                from a ``.keras`` file or preset directory), or a list of them over the same
                vocabularies.
            **kwargs: `Translator` arguments (search, limits, batching, replace_unk, ...).

        Raises:
            ValueError: a model without tokenizers, or members with other vocabularies.
        """
        models = list(models) if isinstance(models, (list, tuple)) else [models]
        for model in models:
            if getattr(model, "source_tokenizer", None) is None:
                raise ValueError(f"{type(model).__name__} has no tokenizers: call "
                                 "model.attach_tokenizers(source_tokenizer, target_tokenizer).")
        first = models[0]
        for other in models[1:]:
            if (other.source_tokenizer.vocabulary != first.source_tokenizer.vocabulary
                    or other.target_tokenizer.vocabulary != first.target_tokenizer.vocabulary):
                raise ValueError("An ensemble needs models over the same vocabularies.")
        return cls(models, first.source_tokenizer, first.target_tokenizer, **kwargs)

    def save(self, directory) -> str:
        """Writes the model and both tokenizers as a model directory; returns ``directory``.

        `bahdanau_tf.model_directory.save_model_directory` writes it (what ``bahdanau-train``
        leaves behind, the weights in ``model.weights.h5``), so `from_directory` reads it back. An ensemble is several directories.

        Raises:
            ValueError: an ensemble.
            FileExistsError: ``directory`` is not empty.
        """
        if len(self.models) != 1:
            raise ValueError(f"An ensemble of {len(self.models)} models is saved one model "
                             "directory per member: call save on Translator(model, ...) of each.")
        return model_directory.save_model_directory(directory, self.models[0],
                                                    self.source_tokenizer, self.target_tokenizer)

    # === The search over int tensors (what the signatures' graph and translate run) ===

    def _candidate_ids(self, source_ids, size=None):
        """The chunk's candidate list (`bahdanau_tf.lexicon.candidate_ids`), or None."""
        if self.candidates is None:
            return None
        return lexicon.candidate_ids(self._candidate_table, source_ids, self.candidates.frequent,
                                     self.target_tokenizer.vocabulary_size, size)

    def _candidate_size(self, source_ids):
        """The padded size of the chunk's candidate list under XLA (a Python int from NumPy
        ids, else an int32 tensor), or None without candidate lists."""
        if self.candidates is None:
            return None
        vocabulary = self.target_tokenizer.vocabulary_size
        count = lexicon.candidate_count(self._candidate_table, source_ids, self.candidates.frequent,
                                        vocabulary)
        if isinstance(source_ids, np.ndarray) or tf.executing_eagerly():
            count = int(count)
        return lexicon.candidate_bucket(count, vocabulary)

    def _search_ids(self, source_ids, limits, forbid_unknown, search, buffer_length=None,
                    jit_compile=False, candidate_size=None):
        """Encoder + beam search over int tensors: the part XLA can compile (``jit_compile``:
        it is compiled, see `bahdanau_tf.decoding.Execution`). With candidate lists,
        ``candidate_size`` is the list's padded size (under XLA a constant) or None.

        ``search`` is a `bahdanau_tf.decoding.BeamSearch` whose ``beam_size`` is an int, an
        int32 scalar, or int32 ``[batch]`` per-row beams (the search then runs the largest and
        empties each row's slots beyond its own beam, see `bahdanau_tf.decoding.beam_search`'s
        ``search``); ``forbid_unknown`` (bool scalar) adds [UNK] to its forbidden tokens.
        Returns the `bahdanau_tf.decoding.BeamSearchOutput`.
        """
        batch = ops.shape(source_ids)[0]  # static under XLA (buckets)
        step_fn, state, memory, candidates = self._step(source_ids, jit_compile, candidate_size)
        # PAD is never generated anyway: forbidding it keeps the shape static either way.
        forbid = ops.reshape(ops.cast(ops.where(forbid_unknown, UNK_ID, PAD_ID), "int32"), [1])
        if len(search.forbid_ids):  # the search's own forbidden tokens, a tuple
            forbid = ops.concatenate([ops.convert_to_tensor(search.forbid_ids, "int32"), forbid], axis=0)
        search = dataclasses.replace(search, forbid_ids=forbid)
        execution = decoding.Execution(jit_compile=jit_compile, buffer_length=buffer_length,
                                       vocabulary_size=self.models[0].target_vocabulary_size)
        return decoding.beam_search(
            step_fn, state, batch, search, max_length=limits, memory=memory,
            slots=self._slots(search.beam_size), candidates=candidates,
            attention_length=ops.shape(source_ids)[1] if search.return_attention else None,
            execution=execution)

    def _step(self, source_ids, jit_compile, candidate_size):
        """The encoded sources and the step function of the model (or the ensemble) for
        `bahdanau_tf.decoding.beam_search`: ``(step_fn, state, memory, candidates)``."""
        memories = [model.encode(source_ids, training=False) for model in self.models]
        states = [model.initial_state(memory) for model, memory in zip(self.models, memories)]
        # what the search carries (`bahdanau_tf.models`: decoding_memory, decoding_state)
        memories = [model.decoding_memory(memory) for model, memory in zip(self.models, memories)]
        # the carried state under XLA only: without XLA (the exported signatures' default)
        # served batches were slower with it (benchmarks/serving_latency.py)
        states = [model.decoding_state(state) if jit_compile else state
                  for model, state in zip(self.models, states)]
        candidates = self._candidate_ids(source_ids, candidate_size)
        step_fns = [_model_step_fn(model, candidates) for model in self.models]
        if len(self.models) == 1:
            return step_fns[0], states[0], memories[0], candidates
        return decoding.ensemble_step_fn(step_fns), tuple(states), tuple(memories), candidates

    def _slots(self, beam_size):
        """The search's slots: ``batching.slots``, else `bahdanau_tf.devices.decoding_slots`
        for the beam (a Python int; a beam that is not static gets the default for an unknown
        beam)."""
        if self.batching.slots is not None:
            return self.batching.slots
        return devices.decoding_slots(beam_size=decoding.static_int(beam_size))

    def _search_function(self, search, jit_compile):
        """The search of a `bahdanau_tf.decoding.BeamSearch` of Python values, a tf.function
        (XLA when asked), cached by the settings: ``(ids, limits, forbid_unknown,
        buffer_length=None, candidate_size=None) -> (ids, lengths, scores[, attention])``.

        Its last arguments, ``buffer_length`` and ``candidate_size`` (candidate lists), are
        Python ints: under XLA each value (and each input shape) is one trace, one compilation
        (`compilations` counts them).
        """
        key = ("search", search, jit_compile)
        if key not in self._cache.functions:
            def run(source_ids, limits, forbid_unknown, buffer_length=None, candidate_size=None):
                return tuple(x for x in self._search_ids(source_ids, limits, forbid_unknown, search,
                                                         buffer_length, jit_compile, candidate_size)
                             if x is not None)
            self._cache.functions[key] = tf.function(
                run, jit_compile=jit_compile, reduce_retracing=not jit_compile, autograph=False)
        return self._cache.functions[key]

    @property
    def compilations(self) -> int:
        """XLA programs compiled so far by `translate` (one per bucketed shape and variant).

        At most ``len(chunking.row_buckets) * len(chunking.length_buckets)`` per (beam_size,
        nbest, return_alignments) used, see `compilation_bound`; forbid_unknown is data.
        """
        return sum(function.experimental_get_tracing_count()
                   for key, function in self._cache.functions.items() if key[0] == "search" and key[-1])

    def compilation_bound(self, variants=1) -> int:
        """The most XLA compilations `translate` can make for ``variants`` (beam_size, nbest,
        return_alignments) combinations: one per row bucket and length bucket."""
        return variants * len(self.chunking.row_buckets) * len(self.chunking.length_buckets)

    def _bucket_search(self, search, shape, buffer_length, candidate_size):
        """The compiled search of one bucketed chunk shape, cached by its key.

        On TensorFlow the XLA search's concrete function, traced once from its own fixed
        signature: calling the tf.function with each bucket's shapes in turn would count as
        retracing (and TensorFlow warns about that). Looked up in a dict, not by
        ``get_concrete_function``, whose argument binding costs about as much as a batch-1
        search step. On the other backends `_search_ids` compiled by
        `bahdanau_tf.decoding.portable.compiled` (``jax.jit`` compiles once per shape).
        """
        key = ("bucket", search, tuple(shape), buffer_length, candidate_size)
        if key not in self._cache.functions and keras.backend.backend() != "tensorflow":
            variables = [variable for model in self.models for variable in model.variables]
            self._cache.functions[key] = portable.compiled(
                lambda ids, limits, forbid: tuple(
                    x for x in self._search_ids(ids, limits, forbid, search, buffer_length, True)
                    if x is not None), variables)
        if key not in self._cache.functions:
            concrete = self._search_function(search, True).get_concrete_function(
                tf.TensorSpec(shape, tf.int32), tf.TensorSpec(shape[:1], tf.int32),
                tf.TensorSpec([], tf.bool), buffer_length, candidate_size)
            self._cache.functions[key] = lambda *arrays: concrete(*map(tf.constant, arrays))
        return self._cache.functions[key]

    def search_chunks(self, search, source_ids, lengths, limits, forbid_unknown, jit_compile=False):
        """The search of a batch in the graph, chunk by chunk (`bahdanau_tf.decoding.chunks`'s
        `search_in_chunks`), in the input order: ``(ids, lengths, scores[, attention])``; what
        the exported signatures (`bahdanau_tf.signatures`) and `translate` without
        ``batching.jit_compile`` run.

        ``search`` is a `bahdanau_tf.decoding.BeamSearch` whose ``beam_size`` and ``nbest`` are
        Python ints (one traced search, compiled over bucketed shapes when ``jit_compile``) or int32
        scalars (a dynamic beam: no XLA); its ``beam_size`` may also be int32 ``[batch]``, one
        beam per row.
        """
        row_inputs = ()
        if isinstance(search.beam_size, int) and isinstance(search.nbest, int):
            run = self._search_function(search, jit_compile)
            if jit_compile and self.candidates is not None:  # XLA: the list's padded size
                traced = run

                def run(chunk_ids, chunk_limits, forbid, buffer_length=None):
                    return traced(chunk_ids, chunk_limits, forbid, buffer_length,
                                  self._candidate_size(chunk_ids))
        else:
            jit_compile = False
            if isinstance(search.beam_size, tf.Tensor) and search.beam_size.shape.rank == 1:
                row_inputs = (search.beam_size,)

            def run(chunk_ids, chunk_limits, forbid, buffer_length=None, *chunk_rows):
                chunk_search = dataclasses.replace(search, beam_size=chunk_rows[0]) if chunk_rows else search
                return tuple(x for x in self._search_ids(chunk_ids, chunk_limits, forbid, chunk_search)
                             if x is not None)
        return chunks.search_in_chunks(run, source_ids, lengths, limits, forbid_unknown, self.chunking,
                                       search.return_attention, jit_compile, row_inputs)

    def _search_batch(self, source_ids, lengths, limits, search, forbid_unknown):
        """One batch's search, chunk by chunk (`bahdanau_tf.decoding.chunks`'s plan): with
        ``batching.jit_compile`` a Python loop over the XLA search of each bucketed chunk
        shape, else the signatures' graph loop. Tensors in, tensors out."""
        if not self.batching.jit_compile and keras.backend.backend() == "tensorflow":
            key = ("graph search", search)
            if key not in self._cache.functions:
                self._cache.functions[key] = tf.function(
                    lambda *inputs: self.search_chunks(search, *inputs),
                    input_signature=_SEARCH_INPUTS, autograph=False)
            return self._cache.functions[key](source_ids, lengths, limits, forbid_unknown)

        def run(chunk, chunk_limits, buffer_length):
            bucket = self._bucket_search(search, chunk.shape, buffer_length, self._candidate_size(chunk))
            return bucket(chunk, chunk_limits, np.bool_(forbid_unknown))

        searched = chunks.search_bucketed_chunks(run, source_ids.numpy(), lengths.numpy(), limits.numpy(),
                                                 self.chunking, search.nbest, search.return_attention)
        return tuple(tf.constant(x) for x in searched if x is not None)

    # === Python API ===

    def translate(self, sentences, beam_size=None, nbest=None, return_alignments=None,
                  forbid_unknown=False, batch_size=64, replace_unk=None,
                  verbose=False) -> TranslationOutput:
        """Translates sentences, in batches of ``batch_size`` (sorted by length inside).

        Each batch is tokenized, searched and detokenized; the search runs chunk by chunk,
        under XLA over bucketed shapes with ``batching.jit_compile`` (the default: at most
        `compilation_bound` compilations per beam_size, nbest and return_alignments;
        `compilations` counts them), else in the exported signatures' graph loop.

        Args:
            sentences: list of str (or bytes; invalid UTF-8 is tolerated), or one str.
            beam_size: int in [1, `bahdanau_tf.decoding.MAX_BEAM_SIZE`]; None: the translator's
                ``search.beam_size``.
            nbest: int in [1, beam_size]; > 1 gives lists of ``nbest`` translations; None:
                ``search.nbest``.
            return_alignments: bool, also return the attention of the best translations
                (models with attention only; an alignment head's rows where models have one);
                None: ``search.return_attention``.
            forbid_unknown: bool, never generate [UNK] (the paper's "No UNK" decoding), besides
                the search's own ``forbid_ids``.
            batch_size: int, sentences per graph call.
            replace_unk: bool, replace each [UNK] of the translations by attention (the
                alignments keep the model's tokens); None: the translator's ``replace_unk``.
            verbose: bool, show a Keras progress bar (`keras.utils.Progbar`) over the
                sentences on stdout, as ``model.fit`` does in a notebook; or an object with
                ``add(count)`` (a Progbar of one's own, the command lines' progress line), told
                the sentences of each batch as it is done.

        Returns:
            `TranslationOutput`, in the input order.

        Raises:
            ValueError: bad beam_size, nbest or batch_size, or alignments or [UNK]
                replacement from a model without attention.
        """
        if isinstance(sentences, (str, bytes)):
            sentences = [sentences]
        sentences = list(sentences)
        check_int("batch_size", batch_size, 1)
        replace_unk = self.replace_unk if replace_unk is None else bool(replace_unk)
        return_alignments = bool(self.search.return_attention if return_alignments is None
                                 else return_alignments)
        if (return_alignments or replace_unk) and not self.has_attention:
            raise ValueError("return_alignments=True and replace_unk=True need models with "
                             "attention (RNNsearch).")
        asked = {name: value for name, value in (("beam_size", beam_size), ("nbest", nbest))
                 if value is not None}  # validated by BeamSearch
        search = dataclasses.replace(self.search, **asked,
                                     return_attention=return_alignments or replace_unk)
        nbest = search.nbest
        prepare, finish = self.text_graph.pieces(return_alignments, replace_unk)
        forbid = tf.constant(bool(forbid_unknown))
        progress = verbose if hasattr(verbose, "add") else (
            keras.utils.Progbar(len(sentences), unit_name="sentence") if verbose else None)
        # longest first: similar lengths share a batch (less padding), and the first graph
        # call sees the largest shapes
        order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
        translations = [None] * len(sentences)
        scores = np.zeros([len(sentences), nbest], np.float32)
        alignments = [None] * len(sentences) if return_alignments else None
        for start in range(0, len(sentences), batch_size):
            chunk = order[start:start + batch_size]
            batch = tf.constant([sentences[i] for i in chunk], tf.string)
            source_ids, lengths, limits = prepare(batch)
            out = finish(batch, lengths, *self._search_batch(source_ids, lengths, limits, search, forbid))
            if return_alignments and self.text_graph.heads_run_eagerly:
                out = self.text_graph.with_head_rows(batch, out)
            texts = np.asarray(out["translations"].numpy())
            chunk_scores = out["scores"].numpy()
            for k, index in enumerate(chunk):
                row = decode_strings(texts[k])
                translations[index] = row if nbest > 1 else row[0]
                scores[index] = chunk_scores[k]
            if return_alignments:
                for index, alignment in zip(chunk, alignments_of(out)):
                    alignments[index] = alignment
            if progress is not None:
                progress.add(len(chunk))
        return TranslationOutput(translations=translations,
                                 scores=scores if nbest > 1 else scores[:, 0],
                                 alignments=alignments)

    def reference_attention(self, sources, targets, batch_size=64) -> list:
        """Teacher-forced attention of given translations (e.g. the references), for AER.

        The decoder reads ``targets`` instead of its own output; a model with an alignment head
        (`bahdanau_tf.models.RNNSearchAligner`) gives the head's P(source j | token i); for an
        ensemble the members' rows are averaged. Sources are cut like `translate` cuts them.

        Args:
            sources: list of str.
            targets: list of str, one per source.
            batch_size: int, pairs per graph call.

        Returns:
            list of `Alignment`: target tokens are the reference's tokens then ``[END]``
            (row i attends while predicting target token i).

        Raises:
            ValueError: a model without attention, or lists of different lengths.
        """
        if not self.has_attention:
            raise ValueError("reference_attention needs models with attention (RNNsearch).")
        sources, targets = list(sources), list(targets)
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets.")
        check_int("batch_size", batch_size, 1)
        key = ("reference_attention",)
        if key not in self._cache.functions:
            # on another Keras backend the model's ops cannot run in a TensorFlow graph: eager
            portable_backend = keras.backend.backend() != "tensorflow"
            self._cache.functions[key] = self._reference_attention_graph if portable_backend else (
                tf.function(self._reference_attention_graph,
                            input_signature=[SENTENCES] * 2, autograph=False))
        function = self._cache.functions[key]
        results = []
        for start in range(0, len(sources), batch_size):
            out = function(tf.constant(sources[start:start + batch_size], tf.string),
                           tf.constant(targets[start:start + batch_size], tf.string))
            results += alignments_of(out)
        return results

    def _reference_attention_graph(self, sources, targets):
        source_ids, lengths = self.text_graph.source_ids(sources)
        target_ids = tf.cast(self.target_tokenizer.tokenize(targets), tf.int32)
        start = tf.RaggedTensor.from_tensor(tf.fill([target_ids.nrows(), 1], START_ID))
        target_input = tf.concat([start, target_ids], axis=1).to_tensor(default_value=PAD_ID)
        if keras.backend.backend() == "tensorflow":
            attention = tf.add_n([tf.cast(m.alignment_weights((source_ids, target_input)), tf.float32)
                                  for m in self.models]) / len(self.models)
        else:  # eager (`reference_attention`): the backend's arrays in and out
            inputs = (source_ids.numpy(), target_input.numpy())
            attention = tf.constant(np.mean([keras.ops.convert_to_numpy(m.alignment_weights(inputs))
                                             .astype(np.float32) for m in self.models], axis=0))
        target_tokens = self.target_tokenizer.tokens(targets)
        target_end = tf.RaggedTensor.from_tensor(tf.fill([target_tokens.nrows(), 1], END_TOKEN))
        return {
            "source_tokens": self.text_graph.source_tokens(sources),
            "source_lengths": lengths + 1,
            "target_tokens": tf.concat([target_tokens, target_end], 1).to_tensor(default_value=""),
            "target_lengths": tf.cast(target_ids.row_lengths(), tf.int32) + 1,
            "attention": attention,
        }


def _checked_models(models) -> list:
    """The model, or the ensemble's models, as a non-empty list of built models that follow the
    step contract (`bahdanau_tf.decoding.StepModel`, checked once: the search then calls it)
    over one target vocabulary."""
    models = list(models) if isinstance(models, (list, tuple)) else [models]
    if not models:
        raise ValueError("Translator needs at least one model, got an empty list.")
    for model in models:
        if not isinstance(model, decoding.StepModel):
            raise ValueError(f"{type(model).__name__} is not a model a search can step: "
                             "bahdanau_tf.decoding.StepModel lists what it needs.")
    vocabularies = {m.target_vocabulary_size for m in models}
    if len(vocabularies) > 1:
        raise ValueError(f"The models of an ensemble must share the target vocabulary; "
                         f"got target_vocabulary_size {sorted(vocabularies)}.")
    for model in models:
        if not getattr(model, "built", True):
            model.build_variables()  # its variables must exist to be tracked by the Translator
    return models


def _model_step_fn(model, candidates=None):
    """Adapts ``model.decode_step`` to beam search's ``step_fn(ids, step, state, memory)`` (the
    memory one row per slot, shared by its beams). With a candidate list (int32 ``[C]``) the
    step projects onto those columns of the output projection, gathered here, once."""
    if candidates is None:
        return lambda ids, step, state, memory: model.decode_step(ids, state, memory)
    projection = lexicon.candidate_projection(*model.output_projection(), candidates)
    return lambda ids, step, state, memory: model.decode_step(ids, state, memory, projection=projection)


__all__ = ["Translator", "TranslationOutput", "Alignment", "DEFAULT_SEARCH", "DEFAULT_BEAM_SIZE",
           "DEFAULT_LENGTH_PENALTY"]
