"""The SavedModel's signatures: the exported graphs around the search, strings in, strings out.

`Signatures` is the ``tf.Module`` that holds a `bahdanau_tf.translator.Translator` and its
exported ``tf.function`` s with fixed input signatures (``module.by_name()`` returns them by
name; `bahdanau_tf.serving.export_saved_model` builds one and writes and checks the SavedModel,
DESIGN §5). Everything between the input strings and the output strings runs inside one
TensorFlow graph, batched, with no Python loop over sentences and no trip to the host:

    tokenize -> cut to max_source_length -> + [END] -> pad -> sort by length -> chunks
             -> encode -> beam search -> back in order -> detokenize

The string side is the translator's `bahdanau_tf.text_graph.TextGraph`, the chunked search its
``search_chunks``; this module only builds the exported graphs around them.

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
  the paper's figure 3 draws; for models with an alignment head (`bahdanau_tf.models.
  RNNSearchAligner`), the head's P(source j | target token i) of the translation instead;
- ``translate_replace_unk(sentences)`` (models with attention only): ``translations``,
  ``scores`` like ``serving_default``, with every generated ``[UNK]`` replaced by the source
  word the attention weighted most at that step, or by its entry in the export's dictionary
  (``bahdanau-export --unk_dictionary``), see `bahdanau_tf.unknown_words`. A client chooses
  replacement per request by the signature it calls; an export made with ``--replace_unk``
  replaces in ``serving_default``, ``translate_nbest`` and ``align``'s ``translations`` too
  (``align``'s ``target_tokens`` stay the model's own tokens, ``[UNK]`` included).

**Chunks, slots and compiled shapes**: inside the graph a batch is sorted by source length and
searched chunk by chunk (`bahdanau_tf.decoding.chunks`, the plan `Translator.translate` follows
too; the translator's ``search_chunks`` runs it). The exported signatures stay without XLA unless
``Batching.serving_jit_compile`` (``bahdanau-export --jit``): TF Serving's model server runs
XLA:CPU only with ``--xla_cpu_compilation_enabled``.
The other decisions (length limits, empty and bad input, scores) are documented in
`bahdanau_tf.translator`.
"""

from __future__ import annotations

import dataclasses
import types

import tensorflow as tf

from bahdanau_tf.decoding.batching import MAX_BEAM_SIZE
from bahdanau_tf.text_graph import SENTENCES

# every input of every signature has the leading batch dimension (TF Serving's batching)
BEAM_SIZE = tf.TensorSpec([None], tf.int32, name="beam_size")
NBEST = tf.TensorSpec([None], tf.int32, name="nbest")


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
    """The exported signatures of a `bahdanau_tf.translator.Translator`.

    The module holds the translator (what SavedModel saves with it: the models' variables, the
    tokenizers' tables, the [UNK] dictionary and the candidate lexicon) and reads its settings:
    ``text_graph`` (the tokenizers, the `bahdanau_tf.decoding.LengthLimits`, the [UNK]
    dictionary), ``search`` (the default `bahdanau_tf.decoding.BeamSearch`),
    ``batching.serving_jit_compile``, ``has_attention`` and ``replace_unk``; the search of a
    batch over int tensors is the translator's (``search_chunks``).
    `bahdanau_tf.serving.export_saved_model` saves one.

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

    def _translate_graph(self, sentences, search, return_attention=False, replace_unk=False):
        """The whole pipeline for one batch (the signatures' graph); returns a dict of tensors.

        ``search``: see `Translator.search_chunks`; XLA when ``batching.serving_jit_compile``
        and its beam is static. ``replace_unk``: the translations' [UNK] replaced by attention (the search
        then returns attention too).
        """
        text = self.translator.text_graph
        search = dataclasses.replace(search, return_attention=return_attention or replace_unk)
        sentences = tf.reshape(tf.convert_to_tensor(sentences, tf.string), [-1])
        source_ids, lengths = text.source_ids(sentences)
        results = self.translator.search_chunks(search, source_ids, lengths,
                                                text.length_limits(lengths), tf.constant(False),
                                                self.translator.batching.serving_jit_compile)
        outputs = text.outputs(sentences, lengths, *results[:3],
                               attention=results[3] if replace_unk else None)
        if return_attention:
            outputs.update(text.alignment_outputs(sentences, lengths, outputs, results[3]))
        return outputs

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


__all__ = ["Signatures", "checked_rows", "MAX_BEAM_SIZE", "SENTENCES", "BEAM_SIZE", "NBEST"]
