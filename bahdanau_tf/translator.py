"""The Translator: strings in, strings out — tokenizers + model(s) + beam search in one graph.

`Translator` (a ``tf.Module``) is what the command lines, the notebooks and the SavedModel
export use (DESIGN §3, §5, §6). Everything between the input strings and the output strings
runs inside one TensorFlow graph, batched, with no Python loop over sentences and no trip to
the host:

    tokenize -> cut to max_source_length -> + [END] -> pad -> encode -> beam search
             -> detokenize

Three ``tf.function`` s with fixed input signatures are meant to become the SavedModel's
signatures as they are (``translator.signatures()`` returns them by name). Every input has the
leading batch dimension, which TF Serving's batcher (``--enable_batching``) needs:

- ``serving_default(sentences)``: tf.string ``[batch]`` -> ``translations`` tf.string
  ``[batch]``, ``scores`` tf.float32 ``[batch]`` (the default beam size);
- ``translate_nbest(sentences, beam_size, nbest)``: per-row int32 ``[batch]`` beams and
  n-best sizes -> ``translations`` and ``scores`` ``[batch, max(nbest)]``, best first (a
  row's entries beyond its own ``nbest``: ``""``, ``-inf``), and the ``beam_size`` and
  ``nbest`` used; each row gets exactly what it gets alone with its own beam;
- ``align(sentences)`` (models with attention only): ``translations``, ``scores``,
  ``source_tokens`` tf.string ``[batch, source_len]`` (``[END]`` last, padded with ``""``),
  ``source_lengths`` int32 ``[batch]``, ``target_tokens`` ``[batch, target_len]`` (``[END]``
  included when emitted), ``target_lengths`` int32 ``[batch]`` and ``attention`` float32
  ``[batch, target_len, source_len]`` (row i: α_ij of target token i; zero padding) — what
  the paper's figure 3 draws.

Decisions (all documented here once):

- **Source length bound**: inputs are cut to ``max_source_length`` tokens (default 100)
  before ``[END]`` is appended; the rest of a longer sentence is *not translated*.
- **Output length bound**: a translation has at most ``ceil(max_length_ratio * n) +
  max_length_offset`` tokens, ``[END]`` included, n the (cut) source length in tokens:
  ``2 n + 10`` by default. A hypothesis that hits it is finished without ``[END]``.
- **Empty input** (``""``, whitespace only, nothing but format characters: no token at all)
  translates to ``""`` with score 0.0 (every n-best entry), without consulting the model;
  ``align`` gives it one source token (``[END]``), no target token.
- **Bad bytes**: invalid UTF-8 becomes U+FFFD, i.e. ``[UNK]``; unknown words are ``[UNK]``.
  No row's content makes the graph raise: ``translate_nbest`` clamps each row's ``beam_size``
  to ``[1, MAX_BEAM_SIZE]`` and ``nbest`` to ``[1, beam_size]`` (an error would fail every
  request TF Serving batched with it). A request of the wrong *shape* is refused with
  InvalidArgument: inputs that are not vectors (the server does not check shapes against
  the signature, and a ``[2, 2]`` request would be read as 4 sentences), or per-row inputs of
  another length than ``sentences``.
- **Export**: the Keras models are not part of the SavedModel's object graph; their
  underlying ``tf.Variable`` s are (see ``Translator.__init__``), which is what TF Serving's
  loader restores.
- **Batch independence**: rows are decoded independently (padding is masked, each row has
  its own length limit), so a sentence gets the same translation alone and inside any batch.
- **Chunks**: inside the graph a batch is sorted by source length and searched
  ``decode_chunk_size`` (16) sentences at a time, each chunk with its own padding and its own
  early exit, then put back in order. One search over a whole batch of 64 or 128 keeps every
  row stepping until the slowest sentence is done and works on larger ``[rows, vocabulary]``
  tensors; chunks of 16 were faster on CPU (benchmarks/decode_throughput.py).
  `Translator.translate` also sorts by length in Python before cutting batches.
- **Scores** are log p(y | x) summed over the tokens (``[END]`` included), divided by the
  GNMT length penalty ``((5 + length) / 6) ** alpha`` when ``length_penalty = alpha > 0``.
  The default alpha is 0.5 (`DEFAULT_LENGTH_PENALTY`), chosen on the dev split: ranking by
  log p alone (alpha 0, the paper's objective) prefers short outputs, every token adding a
  negative log-probability, and a larger alpha keeps the search going longer (its early-exit
  bound divides by the penalty at the length limit). Dev BLEU (all 1,007 dev verses, beam 5)
  of the two default 12-minute `small` models of benchmarks/results/twelve_minute_runs.json
  at alpha 0 / 0.5 / 1.0: 23.20 / 23.43 / 23.56 and 24.06 / 24.18 / 23.81 (length ratios
  0.96-0.99 / 0.97-1.00 / 1.01-1.03); a larger alpha decodes longer, so more slowly. An
  undertrained model gains more from it (497 updates: 11.4 at alpha 0, 12.4 at 1.0, BLEU on
  400 dev verses). The authors' GroundHog sampler offered length normalisation too.
- **Defaults**: beam 5 (the paper does not give its beam size; Sutskever et al. used 12,
  which costs ~2.4x the time for a small gain); ``[UNK]`` allowed (the paper's "No UNK"
  column forbids it: ``forbid_unknown=True``).
- **Ensembles** (Sutskever et al. 2014): several models over the same vocabularies; their
  probabilities are averaged at every step (`bahdanau_tf.decoding.ensemble_step_fn`).
- **XLA**: `translate` (and so bahdanau-translate and bahdanau-evaluate) compiles the search
  (encoder + beam search over int tensors) with XLA by default (``jit_compile``, see
  `bahdanau_tf.devices.decoding_jit`); tokenization stays outside it (string ops). XLA
  compiles one program per input shape, so each chunk is padded to a *row bucket* (powers of
  two up to ``decode_chunk_size``; filler rows are empty sources that end at once) and a
  *length bucket* (``length_buckets``, capped at ``max_source_length + 1``), and beam search
  gets a static output buffer, the largest limit of that width, separate from the
  per-sentence length limits (runtime data). A stream of requests therefore compiles at most
  ``len(row_buckets) * len(length_buckets)`` programs per (beam size, n-best,
  alignments) combination (`compilation_bound`; 5 x 8 = 40 with the defaults, ~5-10 for a
  test set sorted by length); `compilations` counts them. Padding is masked, so the outputs
  are those of the non-XLA path up to float rounding. The exported signatures stay without
  XLA unless ``serving_jit_compile`` (``bahdanau-export --jit``): TF Serving's model server
  runs XLA:CPU only with ``--xla_cpu_compilation_enabled``.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from bahdanau_tf import decoding, devices, model_directory, serving
from bahdanau_tf.special_tokens import END_ID, END_TOKEN, PAD_ID, START_ID, UNK_ID

DEFAULT_BEAM_SIZE = 5
DEFAULT_LENGTH_PENALTY = 0.5  # GNMT alpha, see the module docstring
DEFAULT_MAX_SOURCE_LENGTH = 100
# padded source widths ([END] included) of the XLA search: few shapes, little padding
DEFAULT_LENGTH_BUCKETS = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256)
MAX_BEAM_SIZE = 64  # translate_nbest clamps its beam_size input to this

_SENTENCES = tf.TensorSpec([None], tf.string, name="sentences")
# every input of every signature has the leading batch dimension (TF Serving's batching)
_BEAM_SIZE = tf.TensorSpec([None], tf.int32, name="beam_size")
_NBEST = tf.TensorSpec([None], tf.int32, name="nbest")


@dataclasses.dataclass
class Alignment:
    """The attention of one translation, ready for `bahdanau_tf.evaluation.plot_attention`.

    Attributes:
        source_tokens: list of str, the source tokens as the model read them (``[END]`` last;
            unknown words keep their surface form).
        target_tokens: list of str, the target tokens (``[END]`` last when emitted).
        attention: float32 NumPy ``[len(target_tokens), len(source_tokens)]``, row i the
            weights α_ij of target token i.
    """

    source_tokens: list
    target_tokens: list
    attention: np.ndarray


@dataclasses.dataclass
class TranslationOutput:
    """What `Translator.translate` returns, in the order of the input sentences.

    Attributes:
        translations: list of str (``nbest == 1``) or list of lists of ``nbest`` str.
        scores: float32 NumPy ``[n]`` or ``[n, nbest]``, see the module docstring.
        alignments: list of `Alignment` (best hypothesis), or None unless asked for.
    """

    translations: list
    scores: np.ndarray
    alignments: Optional[list] = None


class _FunctionCache:
    """A plain (untracked) holder of traced functions, so SavedModel does not save them."""

    def __init__(self):
        self.functions = {}


class _Untracked:
    """A plain holder whose contents SavedModel and checkpoints do not see."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def _decode_strings(values) -> list:
    return [v.decode("utf-8", errors="replace") for v in np.asarray(values).reshape(-1)]


class Translator(tf.Module):
    """Tokenizers + one model or an ensemble + beam search: strings in, strings out.

    Args:
        models: a model (`RNNSearch`, `RNNEncDec`, `Seq2Seq`, anything with ``encode``,
            ``initial_state`` and ``decode_step``) or a non-empty list of models over the same
            vocabularies (an ensemble).
        source_tokenizer: a `bahdanau_tf.text` tokenizer of the source language.
        target_tokenizer: the target language's tokenizer.
        beam_size: int, the default beam (5); 1 is greedy search.
        length_penalty: float alpha >= 0 of the GNMT length penalty (0.5); 0 ranks by
            log p(y | x).
        max_source_length: int, inputs are cut to this many tokens (100).
        max_length_ratio: float, output limit = ceil(ratio * source tokens) + offset (2.0).
        max_length_offset: int (10).
        jit_compile: bool, compile `translate`'s search with XLA, over bucketed shapes (see the
            module docstring); None (default): `bahdanau_tf.devices.decoding_jit` (yes).
        decode_chunk_size: int, sentences searched together (16); a batch is sorted by length
            and searched chunk after chunk (see the module docstring).
        serving_jit_compile: bool, compile the search of the exported signatures with XLA
            (False: TF Serving runs XLA:CPU only with ``--xla_cpu_compilation_enabled``).
        length_buckets: increasing ints, the padded source widths (tokens + ``[END]``) the XLA
            search is compiled for; wider sources use ``max_source_length + 1``.
        name: optional module name.

    Example:

        translator = Translator.from_directory("runs/rnnsearch-small")
        output = translator.translate(["In the beginning God created the heavens."])
        output.translations[0], output.scores[0]
        translator.export("/models/bahdanau")  # TF Serving SavedModel, see bahdanau_tf.serving
    """

    def __init__(self, models, source_tokenizer, target_tokenizer,
                 beam_size=DEFAULT_BEAM_SIZE, length_penalty=DEFAULT_LENGTH_PENALTY,
                 max_source_length=DEFAULT_MAX_SOURCE_LENGTH, max_length_ratio=2.0,
                 max_length_offset=10, jit_compile=None, decode_chunk_size=16,
                 serving_jit_compile=False, length_buckets=DEFAULT_LENGTH_BUCKETS, name=None):
        super().__init__(name=name)
        models = list(models) if isinstance(models, (list, tuple)) else [models]
        if not models:
            raise ValueError("Translator needs at least one model, got an empty list.")
        _check_int("beam_size", beam_size, 1, MAX_BEAM_SIZE)
        _check_int("max_source_length", max_source_length, 1)
        _check_int("max_length_offset", max_length_offset, 0)
        _check_int("decode_chunk_size", decode_chunk_size, 1)
        length_buckets = tuple(length_buckets)
        for bucket in length_buckets:
            _check_int("length_buckets", bucket, 2)
        if list(length_buckets) != sorted(set(length_buckets)):
            raise ValueError(f"length_buckets must be increasing, got {length_buckets!r}.")
        if not isinstance(length_penalty, (int, float)) or not length_penalty >= 0:
            raise ValueError(f"length_penalty must be a float >= 0, got {length_penalty!r}.")
        if not isinstance(max_length_ratio, (int, float)) or max_length_ratio < 0:
            raise ValueError(f"max_length_ratio must be a float >= 0, got {max_length_ratio!r}.")
        vocabularies = {getattr(m, "target_vocabulary_size", None) for m in models}
        if len(vocabularies) > 1:
            raise ValueError(f"The models of an ensemble must share the target vocabulary; "
                             f"got target_vocabulary_size {sorted(vocabularies)}.")
        for model in models:
            if not getattr(model, "built", True):
                model.build_variables()  # its variables must exist to be tracked below
        # === Modules ===
        # The Keras models are held out of the SavedModel's object graph; their underlying
        # tf.Variables are tracked instead (see `_model_variables`).
        self._keras = _Untracked(models=models)
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
        # === Config ===
        self.beam_size = int(beam_size)
        self.length_penalty = float(length_penalty)
        self.max_source_length = int(max_source_length)
        self.max_length_ratio = float(max_length_ratio)
        self.max_length_offset = int(max_length_offset)
        self.jit_compile = devices.decoding_jit() if jit_compile is None else bool(jit_compile)
        self.serving_jit_compile = bool(serving_jit_compile)
        self.decode_chunk_size = int(decode_chunk_size)
        # the padded source widths of the XLA path ([END] included), capped by the longest input
        cap = self.max_source_length + 1
        self.length_buckets = tuple(b for b in length_buckets if b < cap) + (cap,)
        self.row_buckets = tuple(sorted({min(2 ** k, self.decode_chunk_size)
                                         for k in range(self.decode_chunk_size.bit_length() + 1)}))
        self._cache = _FunctionCache()

    @property
    def models(self) -> list:
        """list: the Keras model(s), one per ensemble member."""
        return list(self._keras.models)

    @property
    def has_attention(self) -> bool:
        """True when every model returns attention (RNNsearch), so alignments exist."""
        return all(getattr(m, "has_attention", False) for m in self.models)

    @classmethod
    def from_directory(cls, model_dirs, which="best", dtype="auto", **kwargs) -> "Translator":
        """Loads one training output directory, or several for an ensemble.

        Args:
            model_dirs: str, or a list of str (an ensemble; the vocabularies must be equal).
            which: ``"best"`` (best dev NLL, else latest) or ``"latest"`` checkpoint.
            dtype: the dtype policy to build the models in; ``"auto"``:
                `bahdanau_tf.devices.decoding_precision` (float32 on a CPU, whatever the model
                was trained in); None: the trained policy.
            **kwargs: `Translator` arguments (beam_size, jit_compile, ...).

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
    def from_model(cls, models, **kwargs) -> "Translator":
        """A Translator of a model (or an ensemble) that carries its tokenizers.

        Args:
            models: a model with attached tokenizers (``model.attach_tokenizers``, or loaded
                from a ``.keras`` file or preset directory), or a list of them over the same
                vocabularies.
            **kwargs: `Translator` arguments (beam_size, jit_compile, ...).

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
        leaves behind), so `from_directory` reads it back. An ensemble is several directories.

        Raises:
            ValueError: an ensemble.
            FileExistsError: ``directory`` is not empty.
        """
        if len(self.models) != 1:
            raise ValueError(f"An ensemble of {len(self.models)} models is saved one model "
                             "directory per member: call save on Translator(model, ...) of each.")
        return model_directory.save_model_directory(directory, self.models[0],
                                                    self.source_tokenizer, self.target_tokenizer)

    # === Graph pieces (traced inside the tf.functions) ===

    def _source_ids(self, sentences):
        """tf.string [batch] -> (source ids [batch, len] int32 with [END], token counts [batch])."""
        ids = tf.cast(self.source_tokenizer.tokenize(sentences), tf.int32)
        ids = ids[:, : self.max_source_length]
        lengths = tf.cast(ids.row_lengths(), tf.int32)
        end = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], tf.constant(END_ID, tf.int32)))
        ids = tf.concat([ids, end], axis=1).to_tensor(default_value=PAD_ID)
        # an empty batch still needs one column: the encoder cannot run over zero steps
        ids = tf.pad(ids, [[0, 0], [0, tf.maximum(1 - tf.shape(ids)[1], 0)]])
        return ids, lengths

    def _length_limits(self, lengths):
        """Per-sentence output limits; 1 for an empty source (its output is dropped)."""
        limits = tf.cast(tf.math.ceil(self.max_length_ratio * tf.cast(lengths, tf.float32)),
                         tf.int32) + self.max_length_offset
        return tf.where(lengths > 0, tf.maximum(limits, 1), 1)

    def _search(self, source_ids, limits, forbid_unknown, beam_size, nbest, return_attention,
                buffer_length=None):
        """Encoder + beam search over int tensors: the part XLA can compile.

        ``beam_size`` is an int, an int32 scalar, or int32 ``[batch]`` per-row beams (the
        search then runs the largest and empties each row's slots beyond its own beam, see
        `bahdanau_tf.decoding.beam_search`'s ``beam_sizes``).
        """
        batch = tf.shape(source_ids)[0]
        beam_sizes = None
        if isinstance(beam_size, tf.Tensor) and beam_size.shape.rank == 1:
            beam_sizes = beam_size
            beam_size = tf.maximum(tf.reduce_max(tf.concat([beam_sizes, [1]], 0)), nbest)
        states, step_fns = [], []
        for model in self.models:
            memory = model.encode(source_ids, training=False)
            states.append(model.initial_state(memory))
            step_fns.append(_model_step_fn(model, decoding.tile_beams(memory, beam_size)))
        if len(self.models) == 1:
            step_fn, state = step_fns[0], states[0]
        else:
            step_fn, state = decoding.ensemble_step_fn(step_fns), tuple(states)
        # PAD is never generated anyway: forbidding it keeps the shape static either way.
        forbid = tf.reshape(tf.where(forbid_unknown, UNK_ID, PAD_ID), [1])
        output = decoding.beam_search(
            step_fn, state, batch_size=batch, beam_size=beam_size, max_length=limits,
            length_penalty=self.length_penalty, forbid_ids=forbid, nbest=nbest,
            return_attention=return_attention,
            attention_length=tf.shape(source_ids)[1] if return_attention else None,
            buffer_length=buffer_length, beam_sizes=beam_sizes)
        return output

    def _static_search(self, beam_size, nbest, return_attention, jit_compile):
        """The search with Python beam/nbest, a tf.function (XLA when asked), cached.

        Its last argument, ``buffer_length``, is a Python int: under XLA each value (and each
        input shape) is one trace, one compilation (`compilations` counts them).
        """
        key = ("search", beam_size, nbest, return_attention, jit_compile)
        if key not in self._cache.functions:
            def search(source_ids, limits, forbid_unknown, buffer_length=None):
                return tuple(x for x in self._search(source_ids, limits, forbid_unknown,
                                                     beam_size, nbest, return_attention,
                                                     buffer_length)
                             if x is not None)
            self._cache.functions[key] = tf.function(
                search, jit_compile=jit_compile, reduce_retracing=not jit_compile)
        return self._cache.functions[key]

    @property
    def compilations(self) -> int:
        """XLA programs compiled so far by `translate` (one per bucketed shape and variant).

        At most ``len(row_buckets) * len(length_buckets)`` per (beam_size, nbest,
        return_alignments) used, see `compilation_bound`; forbid_unknown is data.
        """
        return sum(function.experimental_get_tracing_count()
                   for key, function in self._cache.functions.items() if key[0] == "search" and key[-1])

    def compilation_bound(self, variants=1) -> int:
        """The most XLA compilations `translate` can make for ``variants`` (beam_size, nbest,
        return_alignments) combinations: one per row bucket and length bucket."""
        return variants * len(self.row_buckets) * len(self.length_buckets)

    def _buffer_length(self, width):
        """The output buffer of a source width (tokens + [END]): the largest possible limit."""
        return max(int(math.ceil(self.max_length_ratio * (width - 1))) + self.max_length_offset, 1)

    def _search_in_chunks(self, search, source_ids, lengths, limits, forbid_unknown, nbest,
                          return_attention, jit_compile=False, row_inputs=()):
        """Runs ``search`` over chunks of ``decode_chunk_size`` sentences of similar length.

        The batch is sorted by source length (longest first), cut into chunks, and each chunk
        is searched on its own, with its own padding and its own early exit: a long sentence
        no longer keeps a whole large batch stepping, and smaller ``[rows, vocabulary]``
        tensors stay in cache. Rows are independent, so the results are those of one big
        search, put back in the input order. Under XLA each chunk is padded to a row bucket
        and a length bucket, and its output buffer is that bucket's, so that a stream of
        batches meets a bounded number of shapes. ``row_inputs``: more ``[batch]`` int32
        tensors (e.g. per-row beams), sorted and cut like the rows and passed to ``search``
        after its four arguments.
        """
        batch = tf.shape(source_ids)[0]
        order = tf.argsort(lengths, direction="DESCENDING", stable=True)
        source_ids, lengths, limits = (tf.gather(t, order) for t in (source_ids, lengths, limits))
        row_inputs = tuple(tf.gather(t, order) for t in row_inputs)
        time = tf.maximum(tf.reduce_max(limits), 1)
        chunk = self.decode_chunk_size
        # at least one (possibly empty) chunk, so an empty batch still has outputs to concat
        chunks = tf.maximum((batch + chunk - 1) // chunk, 1)
        source_ids = tf.pad(source_ids, [[0, chunks * chunk - batch], [0, 0]], constant_values=PAD_ID)
        lengths = tf.pad(lengths, [[0, chunks * chunk - batch]])
        limits = tf.pad(limits, [[0, chunks * chunk - batch]], constant_values=1)
        row_inputs = tuple(tf.pad(t, [[0, chunks * chunk - batch]], constant_values=1)
                           for t in row_inputs)
        width = tf.shape(source_ids)[1]
        count = 4 if return_attention else 3
        dtypes = (tf.int32, tf.int32, tf.float32, tf.float32)[:count]
        arrays = tuple(tf.TensorArray(dtype, size=chunks, infer_shape=False) for dtype in dtypes)
        row_buckets = tf.constant(self.row_buckets)
        length_buckets = tf.constant(self.length_buckets)

        def body(i, arrays):
            start = i * chunk
            rows = tf.minimum(batch - start, chunk)
            # the chunk's own padding: its longest source plus [END]
            chunk_width = tf.reduce_max(tf.concat([lengths[start:start + rows] + 1, [1]], 0))
            buffer_length = None
            if jit_compile:
                rows = row_buckets[tf.searchsorted(row_buckets, [tf.maximum(rows, 1)])[0]]
                chunk_width = length_buckets[tf.searchsorted(length_buckets, [chunk_width])[0]]
                buffer_length = tf.cast(tf.math.ceil(self.max_length_ratio * tf.cast(chunk_width - 1, tf.float32)),
                                        tf.int32) + self.max_length_offset
            ids = tf.pad(source_ids[start:start + rows, :chunk_width],
                         [[0, 0], [0, chunk_width - tf.minimum(chunk_width, width)]])
            chunk_limits = limits[start:start + rows]
            # filler rows (an [END]-only source, limit 1) end at once
            ids = tf.where(tf.range(chunk_width)[None, :] == 0, tf.where(ids[:, :1] == PAD_ID, END_ID, ids), ids)
            outputs = search(ids, chunk_limits, forbid_unknown, buffer_length,
                             *(t[start:start + rows] for t in row_inputs))
            outputs = [tensor[:tf.minimum(rows, batch - start)] for tensor in outputs]
            ids, out_lengths, scores = outputs[:3]
            ids = ids[:, :, :time]
            padded = [tf.pad(ids, [[0, 0], [0, 0], [0, time - tf.shape(ids)[2]]]), out_lengths, scores]
            if return_attention:
                attention = outputs[3][:, :, :time, :width]
                padded.append(tf.pad(attention, [[0, 0], [0, 0], [0, time - tf.shape(attention)[2]],
                                                 [0, width - tf.shape(attention)[3]]]))
            return i + 1, tuple(a.write(i, t) for a, t in zip(arrays, padded))

        _, arrays = tf.while_loop(lambda i, arrays: i < chunks, body, (0, arrays))
        inverse = tf.math.invert_permutation(order)
        results = [tf.gather(array.concat(), inverse) for array in arrays]
        nbest_dim = tf.shape(results[1])[-1]
        results[0] = tf.reshape(results[0], [batch, nbest_dim, time])
        # static ranks for the signatures: lengths and scores [batch, nbest]
        results[1] = tf.reshape(results[1], [batch, nbest_dim])
        results[2] = tf.reshape(results[2], [batch, nbest_dim])
        if return_attention:
            results[3] = tf.reshape(results[3], [batch, nbest_dim, time, width])
        return tuple(results)

    def _translate_graph(self, sentences, beam_size, nbest, forbid_unknown=False,
                         return_attention=False):
        """The whole pipeline for one batch (the signatures' graph); returns a dict of tensors.

        ``beam_size`` and ``nbest`` are Python ints (static shapes, XLA possible) or int32
        scalars (a dynamic beam: no XLA); ``beam_size`` may also be int32 ``[batch]``, one
        beam per row. XLA when ``serving_jit_compile``.
        """
        sentences = tf.reshape(tf.convert_to_tensor(sentences, tf.string), [-1])
        source_ids, lengths = self._source_ids(sentences)
        limits = self._length_limits(lengths)
        forbid_unknown = tf.convert_to_tensor(forbid_unknown, tf.bool)
        jit_compile = self.serving_jit_compile and isinstance(beam_size, int) and isinstance(nbest, int)
        row_inputs = ()
        if isinstance(beam_size, int) and isinstance(nbest, int):
            search = self._static_search(beam_size, nbest, return_attention, jit_compile)
        else:
            if isinstance(beam_size, tf.Tensor) and beam_size.shape.rank == 1:
                row_inputs = (beam_size,)

            def search(chunk_ids, chunk_limits, forbid, buffer_length=None, *chunk_rows):
                chunk_beam = chunk_rows[0] if chunk_rows else beam_size
                return tuple(x for x in self._search(chunk_ids, chunk_limits, forbid, chunk_beam,
                                                     nbest, return_attention) if x is not None)
        results = self._search_in_chunks(search, source_ids, lengths, limits, forbid_unknown,
                                         nbest, return_attention, jit_compile, row_inputs)
        outputs = self._outputs(sentences, lengths, *results[:3])
        if return_attention:
            outputs.update(self._alignment_outputs(sentences, lengths, outputs, results[3]))
        return outputs

    def _outputs(self, sentences, lengths, ids, out_lengths, scores):
        """Texts, scores, ids and lengths of searched ids [batch, nbest, time]; an empty
        source gets "" and score 0."""
        empty = lengths == 0  # [batch]
        batch, nbest_dim = tf.shape(ids)[0], tf.shape(ids)[1]
        flat_ids = tf.reshape(ids, [batch * nbest_dim, -1])
        texts = tf.reshape(self.target_tokenizer.detokenize(flat_ids), [batch, nbest_dim])
        return {"translations": tf.where(empty[:, None], "", texts),
                "scores": tf.where(empty[:, None], 0.0, scores), "ids": ids,
                "lengths": tf.where(empty[:, None], 0, out_lengths), "source_lengths": lengths}

    def _alignment_outputs(self, sentences, lengths, outputs, attention):
        """The tokens and attention of the best translations (``align``'s extra outputs)."""
        best_ids = outputs["ids"][:, 0]  # [batch, time]
        target_lengths = outputs["lengths"][:, 0]
        target_tokens = self.target_tokenizer.id_to_token(best_ids)
        valid = tf.range(tf.shape(best_ids)[1])[None, :] < target_lengths[:, None]
        source_tokens = self.source_tokenizer.tokens(sentences)[:, : self.max_source_length]
        end = tf.RaggedTensor.from_tensor(tf.fill([source_tokens.nrows(), 1], END_TOKEN))
        source_tokens = tf.concat([source_tokens, end], axis=1).to_tensor(default_value="")
        return dict(
            source_tokens=source_tokens,
            source_lengths=lengths + 1,
            target_tokens=tf.where(valid, target_tokens, ""),
            target_lengths=target_lengths,
            attention=tf.where(valid[:, :, None], attention[:, 0], 0.0),  # [batch, time, source_len]
        )

    # === The signatures (tf.functions meant for export) ===

    @tf.function(input_signature=[_SENTENCES])
    def serving_default(self, sentences):
        """Translates a batch with the default beam: ``translations`` [batch], ``scores``."""
        sentences = _checked_rows(sentences)
        out = self._translate_graph(sentences, self.beam_size, 1)
        return {"translations": out["translations"][:, 0], "scores": out["scores"][:, 0]}

    @tf.function(input_signature=[_SENTENCES, _BEAM_SIZE, _NBEST])
    def translate_nbest(self, sentences, beam_size, nbest):
        """n-best lists, each row with its own beam: ``translations``, ``scores`` [batch, n].

        Every input has the batch dimension (TF Serving's batcher merges requests along it):
        row i is searched with beam ``beam_size[i]`` and returns its ``nbest[i]`` best
        translations, exactly what it gets alone. ``n`` is the batch's largest ``nbest``; a
        row's entries beyond its own ``nbest`` are ``""`` with score ``-inf``. Out-of-range
        values are clamped per row, ``beam_size`` to [1, MAX_BEAM_SIZE] and ``nbest`` to
        [1, beam_size], and the values used come back as the outputs ``beam_size`` and
        ``nbest``: a refusal would fail every request the server batched with this one.
        """
        sentences, beam_size, nbest = _checked_rows(sentences, beam_size, nbest)
        beam_size = tf.clip_by_value(beam_size, 1, MAX_BEAM_SIZE)
        nbest = tf.clip_by_value(nbest, 1, beam_size)
        width = tf.reduce_max(tf.concat([nbest, [1]], 0))
        out = self._translate_graph(sentences, beam_size, width)
        kept = tf.range(width)[None, :] < nbest[:, None]
        return {"translations": tf.where(kept, out["translations"], ""),
                "scores": tf.where(kept, out["scores"], float("-inf")),
                "beam_size": beam_size, "nbest": nbest}

    @property
    def align(self):
        """``align(sentences)``: the best translations with tokens and attention (figure 3).

        A tf.function (default beam) for models with attention; an AttributeError for the
        others, so that SavedModel, which saves every function attribute, leaves it out.
        """
        if not self.has_attention:
            raise AttributeError("align needs models with attention (RNNsearch).")
        if "align" not in self._cache.functions:
            self._cache.functions["align"] = tf.function(self._align,
                                                         input_signature=[_SENTENCES])
        return self._cache.functions["align"]

    def _align(self, sentences):
        sentences = _checked_rows(sentences)
        out = self._translate_graph(sentences, self.beam_size, 1, return_attention=True)
        keys = ("source_tokens", "source_lengths", "target_tokens", "target_lengths",
                "attention")
        return {"translations": out["translations"][:, 0], "scores": out["scores"][:, 0],
                **{k: out[k] for k in keys}}

    def signatures(self) -> dict:
        """The concrete functions to pass to ``tf.saved_model.save(..., signatures=...)``.

        ``align`` is left out for models without attention (RNNencdec, Seq2Seq).
        """
        signatures = {
            "serving_default": self.serving_default.get_concrete_function(),
            "translate_nbest": self.translate_nbest.get_concrete_function(),
        }
        if self.has_attention:
            signatures["align"] = self.align.get_concrete_function()
        return signatures

    def export(self, export_dir, version=None, **kwargs) -> str:
        """Writes a TF Serving SavedModel ``export_dir/version``; returns that path.

        See `bahdanau_tf.serving.export_saved_model` for the arguments and the layout.
        """
        return serving.export_saved_model(self, export_dir, version=version, **kwargs)

    # === Python API ===

    def _batch_function(self, beam_size, nbest, forbid_unknown, return_alignments):
        """Without XLA: the signatures' whole pipeline as one graph per batch."""
        key = ("batch", beam_size, nbest, forbid_unknown, return_alignments)
        if key not in self._cache.functions:
            def translate_batch(sentences):
                return self._translate_graph(sentences, beam_size, nbest, forbid_unknown,
                                             return_alignments)
            self._cache.functions[key] = tf.function(translate_batch,
                                                     input_signature=[_SENTENCES])
        return self._cache.functions[key]

    def _graph_pieces(self, return_alignments):
        """With XLA: the string graphs around the search (tokenize before, detokenize after)."""
        key = ("pieces", return_alignments)
        if key not in self._cache.functions:
            def prepare(sentences):
                source_ids, lengths = self._source_ids(sentences)
                return source_ids, lengths, self._length_limits(lengths)

            def finish(sentences, lengths, ids, out_lengths, scores, attention=None):
                outputs = self._outputs(sentences, lengths, ids, out_lengths, scores)
                if return_alignments:
                    outputs.update(self._alignment_outputs(sentences, lengths, outputs, attention))
                return outputs

            int_matrix = tf.TensorSpec([None, None, None], tf.int32)
            float_matrix = tf.TensorSpec([None, None], tf.float32)
            signature = [_SENTENCES, tf.TensorSpec([None], tf.int32), int_matrix,
                         tf.TensorSpec([None, None], tf.int32), float_matrix]
            if return_alignments:
                signature.append(tf.TensorSpec([None, None, None, None], tf.float32))
            self._cache.functions[key] = (tf.function(prepare, input_signature=[_SENTENCES]),
                                          tf.function(finish, input_signature=signature))
        return self._cache.functions[key]

    def _xla_search(self, source_ids, lengths, limits, beam_size, nbest, forbid_unknown,
                    return_alignments):
        """The XLA search of one batch, chunk by chunk, over bucketed shapes (NumPy in, out).

        Like `_search_in_chunks`, but the loop over chunks runs in Python, so each chunk's
        shape (rows and width rounded up to `row_buckets` and `length_buckets`) and output
        buffer (the largest limit of its width) are Python values: a new batch only compiles
        when it meets a new bucket, and `compilations` counts exactly what was compiled.
        """
        search = self._static_search(beam_size, nbest, return_alignments, True)
        forbid = tf.constant(bool(forbid_unknown))
        batch = len(lengths)
        order = np.argsort(-lengths, kind="stable")
        time = int(max(limits.max(initial=1), 1))
        width = source_ids.shape[1]
        ids = np.full([batch, nbest, time], PAD_ID, np.int32)
        out_lengths = np.zeros([batch, nbest], np.int32)
        scores = np.zeros([batch, nbest], np.float32)
        attention = np.zeros([batch, nbest, time, width], np.float32) if return_alignments else None
        for start in range(0, batch, self.decode_chunk_size):
            rows = order[start:start + self.decode_chunk_size]
            padded_rows = self.row_buckets[bisect.bisect_left(self.row_buckets, len(rows))]
            chunk_width = int(lengths[rows].max()) + 1
            padded_width = self.length_buckets[bisect.bisect_left(self.length_buckets, chunk_width)]
            chunk = np.full([padded_rows, padded_width], PAD_ID, np.int32)
            chunk[:, 0] = END_ID  # filler rows: an empty source, limit 1
            chunk[:len(rows), :chunk_width] = source_ids[rows, :chunk_width]
            chunk_limits = np.ones([padded_rows], np.int32)
            chunk_limits[:len(rows)] = limits[rows]
            # one concrete function per bucket, traced once from its own fixed signature:
            # calling the tf.function with each bucket's shapes in turn would count as
            # retracing (and TensorFlow warns about that)
            bucket = search.get_concrete_function(
                tf.TensorSpec(chunk.shape, tf.int32), tf.TensorSpec(chunk_limits.shape, tf.int32),
                tf.TensorSpec([], tf.bool), self._buffer_length(padded_width))
            outputs = bucket(tf.constant(chunk), tf.constant(chunk_limits), forbid)
            steps = min(time, outputs[0].shape[2])
            ids[rows, :, :steps] = outputs[0].numpy()[:len(rows), :, :steps]
            out_lengths[rows] = outputs[1].numpy()[:len(rows)]
            scores[rows] = outputs[2].numpy()[:len(rows)]
            if return_alignments:
                columns = min(width, padded_width)
                attention[rows, :, :steps, :columns] = outputs[3].numpy()[:len(rows), :, :steps, :columns]
        return ids, out_lengths, scores, attention

    def translate(self, sentences, beam_size=None, nbest=1, return_alignments=False,
                  forbid_unknown=False, batch_size=64) -> TranslationOutput:
        """Translates sentences, in batches of ``batch_size`` (sorted by length inside).

        With ``jit_compile`` (the default) the search runs under XLA over bucketed shapes
        (at most `compilation_bound` compilations per beam_size, nbest and return_alignments;
        `compilations` counts them); without, as the exported signatures run it.

        Args:
            sentences: list of str (or bytes; invalid UTF-8 is tolerated), or one str.
            beam_size: int in [1, MAX_BEAM_SIZE]; None uses the translator's default.
            nbest: int in [1, beam_size]; > 1 gives lists of ``nbest`` translations.
            return_alignments: bool, also return the attention of the best translations
                (models with attention only).
            forbid_unknown: bool, never generate [UNK] (the paper's "No UNK" decoding).
            batch_size: int, sentences per graph call.

        Returns:
            `TranslationOutput`, in the input order.

        Raises:
            ValueError: bad beam_size, nbest or batch_size, or alignments from a model
                without attention.
        """
        if isinstance(sentences, (str, bytes)):
            sentences = [sentences]
        sentences = list(sentences)
        beam_size = self.beam_size if beam_size is None else beam_size
        _check_int("beam_size", beam_size, 1, MAX_BEAM_SIZE)
        _check_int("nbest", nbest, 1, beam_size)
        _check_int("batch_size", batch_size, 1)
        if return_alignments and not self.has_attention:
            raise ValueError("return_alignments=True needs models with attention (RNNsearch).")
        beam_size, nbest = int(beam_size), int(nbest)
        forbid_unknown, return_alignments = bool(forbid_unknown), bool(return_alignments)
        if self.jit_compile:
            prepare, finish = self._graph_pieces(return_alignments)

            def function(batch):
                source_ids, lengths, limits = (t.numpy() for t in prepare(batch))
                searched = self._xla_search(source_ids, lengths, limits, beam_size, nbest,
                                            forbid_unknown, return_alignments)
                return finish(batch, lengths, *(x for x in searched if x is not None))
        else:
            function = self._batch_function(beam_size, nbest, forbid_unknown, return_alignments)
        # longest first: similar lengths share a batch (less padding), and the first graph
        # call sees the largest shapes
        order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
        translations = [None] * len(sentences)
        scores = np.zeros([len(sentences), nbest], np.float32)
        alignments = [None] * len(sentences) if return_alignments else None
        for start in range(0, len(sentences), batch_size):
            chunk = order[start:start + batch_size]
            out = function(tf.constant([sentences[i] for i in chunk], tf.string))
            texts = np.asarray(out["translations"].numpy())
            chunk_scores = out["scores"].numpy()
            for k, index in enumerate(chunk):
                row = _decode_strings(texts[k])
                translations[index] = row if nbest > 1 else row[0]
                scores[index] = chunk_scores[k]
            if return_alignments:
                source_tokens = out["source_tokens"].numpy()
                target_tokens = out["target_tokens"].numpy()
                source_lengths = out["source_lengths"].numpy()
                target_lengths = out["target_lengths"].numpy()
                attention = out["attention"].numpy()
                for k, index in enumerate(chunk):
                    s, t = source_lengths[k], target_lengths[k]
                    alignments[index] = Alignment(
                        source_tokens=_decode_strings(source_tokens[k, :s]),
                        target_tokens=_decode_strings(target_tokens[k, :t]),
                        attention=attention[k, :t, :s])
        return TranslationOutput(translations=translations,
                                 scores=scores if nbest > 1 else scores[:, 0],
                                 alignments=alignments)

    def reference_attention(self, sources, targets, batch_size=64) -> list:
        """Teacher-forced attention of given translations (e.g. the references), for AER.

        The decoder reads ``targets`` instead of its own output; for an ensemble the members'
        attentions are averaged. Sources are cut like `translate` cuts them.

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
        _check_int("batch_size", batch_size, 1)
        key = ("reference_attention",)
        if key not in self._cache.functions:
            self._cache.functions[key] = tf.function(
                self._reference_attention_graph, input_signature=[_SENTENCES, _SENTENCES])
        function = self._cache.functions[key]
        results = []
        for start in range(0, len(sources), batch_size):
            out = function(tf.constant(sources[start:start + batch_size], tf.string),
                           tf.constant(targets[start:start + batch_size], tf.string))
            out = {k: v.numpy() for k, v in out.items()}
            for k in range(len(out["source_lengths"])):
                s, t = out["source_lengths"][k], out["target_lengths"][k]
                results.append(Alignment(
                    source_tokens=_decode_strings(out["source_tokens"][k, :s]),
                    target_tokens=_decode_strings(out["target_tokens"][k, :t]),
                    attention=out["attention"][k, :t, :s]))
        return results

    def _reference_attention_graph(self, sources, targets):
        source_ids, lengths = self._source_ids(sources)
        target_ids = tf.cast(self.target_tokenizer.tokenize(targets), tf.int32)
        start = tf.RaggedTensor.from_tensor(tf.fill([target_ids.nrows(), 1], START_ID))
        target_input = tf.concat([start, target_ids], axis=1).to_tensor(default_value=PAD_ID)
        attention = tf.add_n([tf.cast(m.attention_weights((source_ids, target_input)), tf.float32)
                              for m in self.models]) / len(self.models)
        source_tokens = self.source_tokenizer.tokens(sources)[:, : self.max_source_length]
        end = tf.RaggedTensor.from_tensor(tf.fill([source_tokens.nrows(), 1], END_TOKEN))
        target_tokens = self.target_tokenizer.tokens(targets)
        target_end = tf.RaggedTensor.from_tensor(tf.fill([target_tokens.nrows(), 1], END_TOKEN))
        return {
            "source_tokens": tf.concat([source_tokens, end], axis=1).to_tensor(default_value=""),
            "source_lengths": lengths + 1,
            "target_tokens": tf.concat([target_tokens, target_end], 1).to_tensor(default_value=""),
            "target_lengths": tf.cast(target_ids.row_lengths(), tf.int32) + 1,
            "attention": attention,
        }


def _model_step_fn(model, memory):
    """Adapts ``model.decode_step`` to beam search's ``step_fn(ids, step, state)``."""

    def step_fn(ids, step, state):
        return model.decode_step(ids, state, memory)

    return step_fn


def _checked_rows(sentences, *per_row):
    """Refuses (InvalidArgument) inputs that are not vectors of one length, in the graph.

    The signatures' ``[None]`` shapes are not enforced by the model server's Session::Run,
    which would otherwise translate a ``[2, 2]`` request as 4 sentences. The raw ``Rank`` and
    ``Shape`` ops read the fed tensor at run time (``tf.rank`` and ``tf.size`` would be folded
    into constants from the declared shape when tracing). Through ``tf.saved_model.load`` the
    function's runtime folds even ``Rank`` from the declared ``[None]``, so each input also
    passes an ``EnsureShape`` (core op), which checks the fed tensor's own shape.
    """
    tensors = (sentences,) + per_row
    names = ("sentences", "beam_size", "nbest")[: len(tensors)]
    checks = []
    for name, tensor in zip(names, tensors):
        rank = tf.raw_ops.Rank(input=tensor)
        checks.append(tf.debugging.assert_equal(
            rank, 1, message=f"{name} must be a vector [batch] (one row per sentence)"))
    rows = tf.raw_ops.Shape(input=sentences)[:1]
    for name, tensor in zip(names[1:], per_row):
        checks.append(tf.debugging.assert_equal(
            tf.raw_ops.Shape(input=tensor)[:1], rows,
            message=f"{name} must have one value per sentence"))
    with tf.control_dependencies(checks):
        tensors = tuple(tf.ensure_shape(tf.identity(t), [None]) for t in tensors)
    return tensors if per_row else tensors[0]


def _check_int(name, value, low, high=None):
    if (not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low
            or (high is not None and value > high)):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an int {bound}, got {value!r}.")


__all__ = ["Translator", "TranslationOutput", "Alignment", "DEFAULT_BEAM_SIZE", "DEFAULT_LENGTH_PENALTY",
           "DEFAULT_MAX_SOURCE_LENGTH", "MAX_BEAM_SIZE"]
