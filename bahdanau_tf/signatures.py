"""The SavedModel's signatures and the graph around the search: strings in, strings out.

`Signatures` is the ``tf.Module`` that holds a `bahdanau_tf.translator.Translator` and its
exported ``tf.function`` s with fixed input signatures (``module.by_name()`` returns them by
name; `bahdanau_tf.serving.export_saved_model` builds one and writes and checks the SavedModel,
DESIGN §5). Everything between the input strings and the output strings runs inside one
TensorFlow graph, batched, with no Python loop over sentences and no trip to the host:

    tokenize -> cut to max_source_length -> + [END] -> pad -> sort by length -> chunks
             -> encode -> beam search -> back in order -> detokenize

Every input has the leading batch dimension, which TF Serving's batcher (``--enable_batching``)
needs:

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
  the paper's figure 3 draws;
- ``translate_replace_unk(sentences)`` (models with attention only): ``translations``,
  ``scores`` like ``serving_default``, with every generated ``[UNK]`` replaced by the source
  word the attention weighted most at that step, or by its entry in the export's dictionary
  (``bahdanau-export --unk_dictionary``), see `bahdanau_tf.unknown_words`. A client chooses
  replacement per request by the signature it calls; an export made with ``--replace_unk``
  replaces in ``serving_default``, ``translate_nbest`` and ``align``'s ``translations`` too
  (``align``'s ``target_tokens`` stay the model's own tokens, ``[UNK]`` included).

**Chunks and slots**: inside the graph a batch is sorted by source length (longest first) and
handed to the search ``chunk_size`` (64, `Batching`) sentences at a time, then put back in order.
The search keeps ``slots`` sentences in flight (on a CPU 32 at beam 5, 64 greedy:
`bahdanau_tf.devices.decoding_slots`): the step a sentence is done its n-best is read out and its
slot takes the next sentence of the chunk (continuous batching,
`bahdanau_tf.decoding.beam_search`'s ``slots``), so no row keeps stepping for a finished sentence
while a slower one ends. Longest first, the last sentences in flight are the shortest; once nothing
is left to load and the live sentences fit in half the slots, the search goes on over half (a
second loop, where the batch is static: under XLA), and when every sentence had a slot from the
start (greedy: 64 in 64 slots) over halves down to an eighth (4 loops). On 512 test verses at batch
64 the search computed 1.09x (beam 5 and greedy) the hypothesis-steps that decoding them one at a
time needs, against 1.30x and 1.34x with the former chunks of 16 searched to their slowest sentence
(benchmarks/decode_step.py). `Translator.translate` also sorts by length in Python before cutting
batches. One plan (`bahdanau_tf.signatures.plan_chunk` and `chunk_input`) decides each chunk's
rows, filler rows, width and buffer for both the signatures' graph loop and the XLA path (there in
its NumPy spelling, and each bucket's compiled search looked up in a dict: a batch-1 call runs no
eager TF op besides the tokenizer's and the search's graphs).

**XLA**: `Translator.translate` (and so bahdanau-translate and bahdanau-evaluate) compiles the
search (encoder + beam search over int tensors) with XLA by default (``Batching.jit_compile``, see
`bahdanau_tf.devices.decoding_jit`); tokenization stays outside it (string ops). XLA compiles one
program per input shape, so each chunk is padded to a *row bucket* (powers of two up to
``chunk_size``; filler rows are empty sources that end at once) and a *length bucket*
(``length_buckets``, capped at ``max_source_length + 1``), and beam search gets a static output
buffer, the largest limit of that width, separate from the per-sentence length limits (runtime
data). A stream of requests therefore compiles at most ``len(row_buckets) * len(length_buckets)``
programs per (beam size, n-best, alignments) combination (`Translator.compilation_bound`; 7 x 8 =
56 with the defaults, ~5-10 for a test set sorted by length); `Translator.compilations` counts
them. Padding is masked, so the outputs are those of the non-XLA path up to float rounding. The
exported signatures stay without XLA unless ``Batching.serving_jit_compile`` (``bahdanau-export
--jit``): TF Serving's model server runs XLA:CPU only with ``--xla_cpu_compilation_enabled``.

**The chunked search** has one plan, `plan_chunk` and `chunk_input` (with `length_order` and
`length_limits`): the signatures' graph loop (`search_in_chunks`, a ``tf.while_loop``) calls
them on tensors, and `Translator.translate`'s XLA path (a Python loop, so each chunk's bucketed
shape is a Python value) on NumPy arrays, which each of them computes with NumPy: some twenty
eager TF ops a chunk cost more than a batch-1 search itself. Each rule is written once, its two
spellings side by side, and tests/test_signatures.py checks that they decide filler rows,
sorting, padding and buckets alike.
The other decisions (length limits, empty and bad input, scores) are documented in
`bahdanau_tf.translator`.
"""

from __future__ import annotations

import dataclasses
import types
from typing import NamedTuple, Optional

import numpy as np
import tensorflow as tf

from bahdanau_tf import unknown_words
from bahdanau_tf.special_tokens import END_ID, END_TOKEN, PAD_ID

MAX_BEAM_SIZE = 64  # translate_nbest clamps its beam_size input to this

SENTENCES = tf.TensorSpec([None], tf.string, name="sentences")
# every input of every signature has the leading batch dimension (TF Serving's batching)
BEAM_SIZE = tf.TensorSpec([None], tf.int32, name="beam_size")
NBEST = tf.TensorSpec([None], tf.int32, name="nbest")


# === The chunk plan (one for the graph loop and the XLA path) ===

@dataclasses.dataclass(frozen=True)
class Chunking:
    """How a batch is cut for the search.

    Attributes:
        size: int, sentences per chunk (``Batching.chunk_size``).
        row_buckets: increasing ints ending with ``size``, the padded row counts under XLA.
        length_buckets: increasing ints, the padded source widths (tokens + ``[END]``) under
            XLA; the last one is the widest source there can be.
        max_length_ratio, max_length_offset: the output limit ``ceil(ratio * n) + offset``.
    """

    size: int
    row_buckets: tuple
    length_buckets: tuple
    max_length_ratio: float
    max_length_offset: int

    @classmethod
    def of(cls, batching, limits) -> "Chunking":
        """The chunking of a translator's `bahdanau_tf.decoding.Batching` and `LengthLimits`:
        rows bucketed by powers of two up to the chunk size, the length buckets capped by the
        widest source (``max_source_length + 1``)."""
        size, cap = batching.chunk_size, limits.max_source_length + 1
        row_buckets = tuple(sorted({min(2 ** k, size) for k in range(size.bit_length() + 1)}))
        length_buckets = tuple(b for b in batching.length_buckets if b < cap) + (cap,)
        return cls(size, row_buckets, length_buckets, limits.max_length_ratio,
                   limits.max_length_offset)


class ChunkPlan(NamedTuple):
    """One chunk of a length-sorted batch: int32 scalars (tensors), ``buffer_length`` None
    unless bucketed."""

    start: tf.Tensor  # first sorted row
    rows: tf.Tensor  # real rows (sentences) of the chunk
    padded_rows: tf.Tensor  # rows searched: real rows, then filler rows
    width: tf.Tensor  # the padded source width, [END] included
    buffer_length: Optional[tf.Tensor]  # the static output buffer: the largest limit of width


def _numpy(value):
    return isinstance(value, (np.ndarray, np.integer, int))


def length_limits(lengths, max_length_ratio, max_length_offset):
    """Per-sentence output limits ``ceil(ratio * n) + offset``; 1 for an empty source (its
    output is dropped). ``lengths``: int32, any shape (a tensor, or NumPy: NumPy out)."""
    if _numpy(lengths):  # float32 products, as the TF spelling computes them
        products = np.float32(max_length_ratio) * np.asarray(lengths, np.float32)
        limits = np.ceil(products).astype(np.int32) + max_length_offset
        return np.where(np.asarray(lengths) > 0, np.maximum(limits, 1), 1).astype(np.int32)
    limits = tf.cast(tf.math.ceil(max_length_ratio * tf.cast(lengths, tf.float32)),
                     tf.int32) + max_length_offset
    return tf.where(lengths > 0, tf.maximum(limits, 1), 1)


def length_order(lengths):
    """The search's row order: longest source first, ties in input order (NumPy for NumPy)."""
    if _numpy(lengths):
        return np.argsort(-np.asarray(lengths, np.int64), kind="stable")
    return tf.argsort(lengths, direction="DESCENDING", stable=True)


def plan_chunk(sorted_lengths, start, chunking: Chunking, bucketed: bool) -> ChunkPlan:
    """The plan of the chunk that starts at sorted row ``start``.

    Its width is its longest source plus ``[END]``. ``bucketed`` (XLA): rows and width are
    rounded up to ``chunking``'s buckets, so a stream of batches meets few shapes, and the
    output buffer is the largest limit of that width. NumPy ``sorted_lengths``: a plan of
    Python ints (`Translator.translate`'s XLA path), else of int32 scalar tensors.
    """
    if _numpy(sorted_lengths):
        rows = min(len(sorted_lengths) - start, chunking.size)
        width = int(max(np.max(sorted_lengths[start:start + rows] + 1, initial=1), 1))
        if not bucketed:
            return ChunkPlan(start, rows, rows, width, None)
        padded_rows = chunking.row_buckets[int(np.searchsorted(chunking.row_buckets, max(rows, 1)))]
        width = chunking.length_buckets[int(np.searchsorted(chunking.length_buckets, width))]
        buffer_length = int(length_limits(np.int32(width - 1), chunking.max_length_ratio,
                                          chunking.max_length_offset))
        return ChunkPlan(start, rows, padded_rows, width, buffer_length)
    batch = tf.shape(sorted_lengths)[0]
    rows = tf.minimum(batch - start, chunking.size)
    width = tf.reduce_max(tf.concat([sorted_lengths[start:start + rows] + 1, [1]], 0))
    if not bucketed:
        return ChunkPlan(start, rows, rows, width, None)
    row_buckets = tf.constant(chunking.row_buckets)
    length_buckets = tf.constant(chunking.length_buckets)
    padded_rows = row_buckets[tf.searchsorted(row_buckets, [tf.maximum(rows, 1)])[0]]
    width = length_buckets[tf.searchsorted(length_buckets, [width])[0]]
    buffer_length = length_limits(width - 1, chunking.max_length_ratio, chunking.max_length_offset)
    return ChunkPlan(start, rows, padded_rows, width, buffer_length)


def chunk_input(plan: ChunkPlan, sorted_ids, sorted_limits, *sorted_rows):
    """The searched inputs of a chunk: ids ``[padded_rows, width]``, limits, and more per-row
    int32 inputs (per-row beams). Filler rows are an ``[END]``-only source with limit 1 (they
    end at once), and 1 in the other per-row inputs. NumPy inputs give NumPy arrays."""
    end = plan.start + plan.rows
    fill = plan.padded_rows - plan.rows
    if _numpy(sorted_ids):
        ids = np.full([plan.padded_rows, plan.width], PAD_ID, np.int32)
        real = sorted_ids[plan.start:end, :plan.width]
        ids[:plan.rows, :real.shape[1]] = real
        ids[:, 0] = np.where(ids[:, 0] == PAD_ID, END_ID, ids[:, 0])  # only filler rows start with PAD
        per_row = []
        for t in (sorted_limits,) + sorted_rows:
            column = np.ones([plan.padded_rows], np.int32)
            column[:plan.rows] = t[plan.start:end]
            per_row.append(column)
        return (ids,) + tuple(per_row)
    ids = sorted_ids[plan.start:end, :plan.width]
    ids = tf.pad(ids, [[0, fill], [0, plan.width - tf.shape(ids)[1]]], constant_values=PAD_ID)
    first = tf.where(ids[:, :1] == PAD_ID, END_ID, ids[:, :1])  # only filler rows start with PAD
    ids = tf.concat([first, ids[:, 1:]], axis=1)
    per_row = tuple(tf.pad(t[plan.start:end], [[0, fill]], constant_values=1)
                    for t in (sorted_limits,) + sorted_rows)
    return (ids,) + per_row


def search_in_chunks(search, source_ids, lengths, limits, forbid_unknown, chunking: Chunking,
                     return_attention, bucketed=False, row_inputs=()):
    """Runs ``search`` over the chunks of a batch in a ``tf.while_loop``, in the input order.

    The batch is sorted by source length (longest first), cut into chunks (`plan_chunk`), and
    each chunk is searched on its own, with its own padding; inside a chunk the search keeps a
    few slots in flight and refills them as sentences finish (the Translator's
    ``Batching.slots``). Rows are independent, so the results are those of one big search.

    Args:
        search: ``search(ids, limits, forbid_unknown, buffer_length, *row_inputs)`` -> ids
            ``[rows, nbest, time]``, lengths and scores ``[rows, nbest]``, attention
            ``[rows, nbest, time, width]`` when ``return_attention``.
        source_ids: int32 ``[batch, width]``; lengths, limits: int32 ``[batch]``.
        forbid_unknown: bool scalar, passed to ``search``.
        chunking: `Chunking`; bucketed: bool, round shapes up to its buckets (XLA).
        row_inputs: more ``[batch]`` int32 tensors (per-row beams), sorted and cut like rows.
    """
    batch = tf.shape(source_ids)[0]
    order = length_order(lengths)
    source_ids, lengths, limits = (tf.gather(t, order) for t in (source_ids, lengths, limits))
    row_inputs = tuple(tf.gather(t, order) for t in row_inputs)
    time = tf.maximum(tf.reduce_max(limits), 1)
    # at least one (possibly empty) chunk, so an empty batch still has outputs to concat
    chunks = tf.maximum((batch + chunking.size - 1) // chunking.size, 1)
    width = tf.shape(source_ids)[1]
    count = 4 if return_attention else 3
    dtypes = (tf.int32, tf.int32, tf.float32, tf.float32)[:count]
    arrays = tuple(tf.TensorArray(dtype, size=chunks, infer_shape=False) for dtype in dtypes)

    def body(i, arrays):
        plan = plan_chunk(lengths, i * chunking.size, chunking, bucketed)
        ids, chunk_limits, *chunk_rows = chunk_input(plan, source_ids, limits, *row_inputs)
        outputs = search(ids, chunk_limits, forbid_unknown, plan.buffer_length, *chunk_rows)
        outputs = [tensor[:plan.rows] for tensor in outputs]
        ids = outputs[0][:, :, :time]
        padded = [tf.pad(ids, [[0, 0], [0, 0], [0, time - tf.shape(ids)[2]]]), *outputs[1:3]]
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


def _named(tensor, name):
    """``tensor`` passed through an op called ``name``, which Grappler keeps (an Identity
    would be folded away): EnsureShape's refusal names its input, so it names ``name``."""
    return tf.raw_ops.PlaceholderWithDefault(input=tensor, shape=tf.TensorShape(None), name=name)


def checked_rows(sentences, *per_row):
    """Refuses (InvalidArgument) inputs that are not vectors of one length, in the graph.

    The signatures' ``[None]`` shapes are not enforced by the model server's Session::Run,
    which would otherwise translate a ``[2, 2]`` request as 4 sentences. The raw ``Rank`` and
    ``Shape`` ops read the fed tensor at run time (``tf.rank`` and ``tf.size`` would be folded
    into constants from the declared shape when tracing). Through ``tf.saved_model.load`` the
    function's runtime folds even ``Rank`` from the declared ``[None]``, so each input also
    passes an ``EnsureShape`` (core op), which checks the fed tensor's own shape. Where the
    ``EnsureShape`` refuses first (the model server's graph folds the ``Rank`` check too), its
    message names its input, an op called ``<input>_must_be_a_vector``: a refused request
    names the input it got wrong, never an internal tensor.
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
        tensors = tuple(tf.ensure_shape(_named(tensor, f"{name}_must_be_a_vector"), [None])
                        for name, tensor in zip(names, tensors))
    return tensors if per_row else tensors[0]


class Signatures(tf.Module):
    """The exported signatures of a `bahdanau_tf.translator.Translator`, and the string graphs
    around its search.

    The module holds the translator (what SavedModel saves with it: the models' variables, the
    tokenizers' tables, the [UNK] dictionary and the candidate lexicon) and reads its settings:
    the tokenizers, ``search`` (the default `bahdanau_tf.decoding.BeamSearch`), ``limits``
    (`bahdanau_tf.decoding.LengthLimits`), ``batching.serving_jit_compile``, ``chunking``,
    ``has_attention``, ``replace_unk``, ``unk_dictionary`` and ``candidates``; the search over
    int tensors is the translator's (``search_function``, ``search_ids``, ``candidate_size``).
    `bahdanau_tf.serving.export_saved_model` saves one; ``translator.signatures`` is the
    translator's own, whose `graph_pieces` `Translator.translate` runs around its search.

    Args:
        translator: a `bahdanau_tf.translator.Translator`.
        name: optional module name.

    Example:

        module = Signatures(translator)
        module.serving_default(tf.constant(["In the beginning."]))["translations"]
        tf.saved_model.save(module, path, signatures=module.by_name())
    """

    def __init__(self, translator, name=None):
        super().__init__(name=name)
        self.translator = translator
        # the traced functions, in a plain object that SavedModel does not see (nor save)
        self._cache = types.SimpleNamespace(functions={})

    # === Graph pieces (traced inside the tf.functions) ===

    def source_ids(self, sentences):
        """tf.string [batch] -> (source ids [batch, len] int32 with [END], token counts [batch])."""
        ids = tf.cast(self.translator.source_tokenizer.tokenize(sentences), tf.int32)
        ids = ids[:, : self.translator.limits.max_source_length]
        lengths = tf.cast(ids.row_lengths(), tf.int32)
        end = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], tf.constant(END_ID, tf.int32)))
        ids = tf.concat([ids, end], axis=1).to_tensor(default_value=PAD_ID)
        # an empty batch still needs one column: the encoder cannot run over zero steps
        ids = tf.pad(ids, [[0, 0], [0, tf.maximum(1 - tf.shape(ids)[1], 0)]])
        return ids, lengths

    def _length_limits(self, lengths):
        limits = self.translator.limits
        return length_limits(lengths, limits.max_length_ratio, limits.max_length_offset)

    def search_chunks(self, search, source_ids, lengths, limits, forbid_unknown, xla=False):
        """The search of a batch in the graph, chunk by chunk (`search_in_chunks`), in the input
        order: ``(ids, lengths, scores[, attention])``.

        ``search`` is a `bahdanau_tf.decoding.BeamSearch` whose ``beam_size`` and ``nbest`` are
        Python ints (one traced search, compiled over bucketed shapes when ``xla``) or int32
        scalars (a dynamic beam: no XLA); its ``beam_size`` may also be int32 ``[batch]``, one
        beam per row.
        """
        translator = self.translator
        row_inputs = ()
        if isinstance(search.beam_size, int) and isinstance(search.nbest, int):
            run = translator.search_function(search, xla)
            if xla and translator.candidates is not None:  # XLA: the list's padded size
                compiled = run

                def run(chunk_ids, chunk_limits, forbid, buffer_length=None):
                    return compiled(chunk_ids, chunk_limits, forbid, buffer_length,
                                    translator.candidate_size(chunk_ids))
        else:
            xla = False
            if isinstance(search.beam_size, tf.Tensor) and search.beam_size.shape.rank == 1:
                row_inputs = (search.beam_size,)

            def run(chunk_ids, chunk_limits, forbid, buffer_length=None, *chunk_rows):
                chunk_search = dataclasses.replace(search, beam_size=chunk_rows[0]) if chunk_rows else search
                return tuple(x for x in translator.search_ids(chunk_ids, chunk_limits, forbid, chunk_search)
                             if x is not None)
        return search_in_chunks(run, source_ids, lengths, limits, forbid_unknown, translator.chunking,
                                search.return_attention, xla, row_inputs)

    def _translate_graph(self, sentences, search, return_attention=False, replace_unk=False):
        """The whole pipeline for one batch (the signatures' graph); returns a dict of tensors.

        ``search``: see `search_chunks`; XLA when ``batching.serving_jit_compile`` and its beam
        is static. ``replace_unk``: the translations' [UNK] replaced by attention (the search
        then returns attention too).
        """
        search = dataclasses.replace(search, return_attention=return_attention or replace_unk)
        sentences = tf.reshape(tf.convert_to_tensor(sentences, tf.string), [-1])
        source_ids, lengths = self.source_ids(sentences)
        results = self.search_chunks(search, source_ids, lengths, self._length_limits(lengths),
                                     tf.constant(False), self.translator.batching.serving_jit_compile)
        outputs = self._outputs(sentences, lengths, *results[:3],
                                attention=results[3] if replace_unk else None)
        if return_attention:
            outputs.update(self._alignment_outputs(sentences, lengths, outputs, results[3]))
        return outputs

    def _outputs(self, sentences, lengths, ids, out_lengths, scores, attention=None):
        """Texts, scores, ids and lengths of searched ids [batch, nbest, time]; an empty
        source gets "" and score 0. With ``attention`` [batch, nbest, time, width], each
        [UNK] of the texts is replaced (`bahdanau_tf.unknown_words`)."""
        empty = lengths == 0  # [batch]
        batch, nbest_dim = tf.shape(ids)[0], tf.shape(ids)[1]
        flat_ids = tf.reshape(ids, [batch * nbest_dim, -1])
        unknown = None
        if attention is not None:
            unknown = unknown_words.replacement_tokens(
                attention, self.source_token_matrix(sentences), lengths, self.translator.unk_dictionary)
            unknown = tf.reshape(unknown, tf.shape(flat_ids))
        texts = tf.reshape(self.translator.target_tokenizer.detokenize(flat_ids, unknown),
                           [batch, nbest_dim])
        return {"translations": tf.where(empty[:, None], "", texts),
                "scores": tf.where(empty[:, None], 0.0, scores), "ids": ids,
                "lengths": tf.where(empty[:, None], 0, out_lengths), "source_lengths": lengths}

    def source_token_matrix(self, sentences):
        """The source tokens as written, cut like the ids, ``[END]`` last, padded with ""."""
        source_tokens = self.translator.source_tokenizer.tokens(sentences)[:, : self.translator.limits.max_source_length]
        end = tf.RaggedTensor.from_tensor(tf.fill([source_tokens.nrows(), 1], END_TOKEN))
        return tf.concat([source_tokens, end], axis=1).to_tensor(default_value="")

    def _alignment_outputs(self, sentences, lengths, outputs, attention):
        """The tokens and attention of the best translations (``align``'s extra outputs)."""
        best_ids = outputs["ids"][:, 0]  # [batch, time]
        target_lengths = outputs["lengths"][:, 0]
        target_tokens = self.translator.target_tokenizer.id_to_token(best_ids)
        valid = tf.range(tf.shape(best_ids)[1])[None, :] < target_lengths[:, None]
        return dict(
            source_tokens=self.source_token_matrix(sentences),
            source_lengths=lengths + 1,
            target_tokens=tf.where(valid, target_tokens, ""),
            target_lengths=target_lengths,
            attention=tf.where(valid[:, :, None], attention[:, 0], 0.0),  # [batch, time, source_len]
        )

    def graph_pieces(self, return_alignments, replace_unk=False):
        """With XLA: the string graphs around the search (tokenize before, detokenize after);
        ``finish`` takes the search's attention when alignments or replacement need it."""
        key = ("pieces", return_alignments, replace_unk)
        if key not in self._cache.functions:
            def prepare(sentences):
                source_ids, lengths = self.source_ids(sentences)
                return source_ids, lengths, self._length_limits(lengths)

            def finish_with_attention(sentences, lengths, ids, out_lengths, scores, attention):
                outputs = self._outputs(sentences, lengths, ids, out_lengths, scores,
                                        attention=attention if replace_unk else None)
                if return_alignments:
                    outputs.update(self._alignment_outputs(sentences, lengths, outputs, attention))
                return outputs

            # no optional argument: a concrete function binds positional tensors directly
            def finish(sentences, lengths, ids, out_lengths, scores):
                return self._outputs(sentences, lengths, ids, out_lengths, scores)

            int_matrix = tf.TensorSpec([None, None, None], tf.int32)
            float_matrix = tf.TensorSpec([None, None], tf.float32)
            signature = [SENTENCES, tf.TensorSpec([None], tf.int32), int_matrix,
                         tf.TensorSpec([None, None], tf.int32), float_matrix]
            if return_alignments or replace_unk:
                signature.append(tf.TensorSpec([None, None, None, None], tf.float32))
                finish = finish_with_attention
            # concrete functions: a call skips the tf.function's argument binding (batch 1)
            self._cache.functions[key] = (
                tf.function(prepare, input_signature=[SENTENCES], autograph=False).get_concrete_function(),
                tf.function(finish, input_signature=signature, autograph=False).get_concrete_function())
        return self._cache.functions[key]

    # === The signatures (tf.functions meant for export) ===

    @tf.function(input_signature=[SENTENCES], autograph=False)
    def serving_default(self, sentences):
        """Translates a batch with the default beam: ``translations`` [batch], ``scores``."""
        sentences = checked_rows(sentences)
        out = self._translate_graph(sentences, self.translator.search, replace_unk=self.translator.replace_unk)
        return {"translations": out["translations"][:, 0], "scores": out["scores"][:, 0]}

    @tf.function(input_signature=[SENTENCES, BEAM_SIZE, NBEST], autograph=False)
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
        sentences, beam_size, nbest = checked_rows(sentences, beam_size, nbest)
        beam_size = tf.clip_by_value(beam_size, 1, MAX_BEAM_SIZE)
        nbest = tf.clip_by_value(nbest, 1, beam_size)
        width = tf.reduce_max(tf.concat([nbest, [1]], 0))
        search = dataclasses.replace(self.translator.search, beam_size=beam_size, nbest=width)
        out = self._translate_graph(sentences, search, replace_unk=self.translator.replace_unk)
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
        if not self.translator.has_attention:
            raise AttributeError("align needs models with attention (RNNsearch).")
        if "align" not in self._cache.functions:
            self._cache.functions["align"] = tf.function(self._align, input_signature=[SENTENCES],
                                                          autograph=False)
        return self._cache.functions["align"]

    def _align(self, sentences):
        sentences = checked_rows(sentences)
        out = self._translate_graph(sentences, self.translator.search, return_attention=True,
                                    replace_unk=self.translator.replace_unk)
        keys = ("source_tokens", "source_lengths", "target_tokens", "target_lengths",
                "attention")
        return {"translations": out["translations"][:, 0], "scores": out["scores"][:, 0],
                **{k: out[k] for k in keys}}

    @property
    def translate_replace_unk(self):
        """``translate_replace_unk(sentences)``: ``serving_default`` with [UNK] replaced.

        Each generated [UNK] becomes the source word with the highest attention weight at
        that step, or its entry in ``unk_dictionary`` (`bahdanau_tf.unknown_words`). Like
        `align`, a tf.function for models with attention only (an AttributeError otherwise).
        """
        if not self.translator.has_attention:
            raise AttributeError("translate_replace_unk needs models with attention (RNNsearch).")
        if "translate_replace_unk" not in self._cache.functions:
            def translate_replace_unk(sentences):
                sentences = checked_rows(sentences)
                out = self._translate_graph(sentences, self.translator.search, replace_unk=True)
                return {"translations": out["translations"][:, 0],
                        "scores": out["scores"][:, 0]}
            self._cache.functions["translate_replace_unk"] = tf.function(
                translate_replace_unk, input_signature=[SENTENCES], autograph=False)
        return self._cache.functions["translate_replace_unk"]

    def by_name(self) -> dict:
        """The signatures to pass to ``tf.saved_model.save(..., signatures=...)``, by name.

        Each is a tf.function with an input signature, not a concrete function: the save traces
        it once, in its own context (a trace made outside a save is not reused inside one, so
        passing concrete functions would trace every signature twice). ``align`` and
        ``translate_replace_unk`` are left out for models without attention (RNNencdec,
        Seq2Seq).
        """
        signatures = {"serving_default": self.serving_default,
                      "translate_nbest": self.translate_nbest}
        if self.translator.has_attention:
            signatures["align"] = self.align
            signatures["translate_replace_unk"] = self.translate_replace_unk
        return signatures


__all__ = ["Signatures", "Chunking", "ChunkPlan", "plan_chunk", "chunk_input", "search_in_chunks",
           "length_limits", "length_order", "checked_rows", "MAX_BEAM_SIZE", "SENTENCES",
           "BEAM_SIZE", "NBEST"]
