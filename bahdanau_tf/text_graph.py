"""The string side of a translation, in graph ops: sentences to source ids before the search,
searched ids to texts, tokens and attention after it, and the Python values `translate` returns
(`TranslationOutput`, `Alignment`).

    tokenize -> cut to max_source_length -> + [END] -> pad -> (the search) -> detokenize

`TextGraph` holds the two tokenizers, the `bahdanau_tf.decoding.LengthLimits` and the [UNK]
dictionary of a `bahdanau_tf.translator.Translator`. `Translator.translate` runs its `pieces`
around the search of each batch, and the exported signatures (`bahdanau_tf.signatures`) trace the
same methods around the search in one graph, so both read and write strings alike (the decisions
on length limits, empty input and [UNK] replacement are documented in `bahdanau_tf.translator`).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from bahdanau_tf import unknown_words
from bahdanau_tf.decoding.chunks import length_limits
from bahdanau_tf.special_tokens import END_ID, END_TOKEN, PAD_ID, START_ID

# the string input of every signature and graph piece: a batch of sentences
SENTENCES = tf.TensorSpec([None], tf.string, name="sentences")


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
        scores: float32 NumPy ``[n]`` or ``[n, nbest]``, see `bahdanau_tf.translator`.
        alignments: list of `Alignment` (best hypothesis), or None unless asked for.
    """

    translations: list
    scores: np.ndarray
    alignments: Optional[list] = None


def decode_strings(values) -> list:
    """str of each UTF-8 value of a NumPy array of bytes (invalid bytes replaced)."""
    return [v.decode("utf-8", errors="replace") for v in np.asarray(values).reshape(-1)]


def alignments_of(out) -> list:
    """The `Alignment` of each row of a batch's ``source_tokens``, ``target_tokens``, their
    lengths and ``attention`` (tensors)."""
    out = {k: out[k].numpy() for k in ("source_tokens", "target_tokens", "source_lengths",
                                        "target_lengths", "attention")}
    alignments = []
    for k in range(len(out["source_lengths"])):
        s, t = out["source_lengths"][k], out["target_lengths"][k]
        alignments.append(Alignment(source_tokens=decode_strings(out["source_tokens"][k, :s]),
                                    target_tokens=decode_strings(out["target_tokens"][k, :t]),
                                    attention=out["attention"][k, :t, :s]))
    return alignments


class TextGraph:
    """Sentences to source ids and searched ids to strings, for one pair of tokenizers.

    Args:
        source_tokenizer, target_tokenizer: `bahdanau_tf.text` tokenizers.
        limits: `bahdanau_tf.decoding.LengthLimits`, the source cut and the output limit.
        unk_dictionary: None or a `bahdanau_tf.unknown_words.UnknownWordDictionary`, what
            [UNK] replacement looks up.
        heads: the models whose alignment heads (`bahdanau_tf.models.RNNSearchAligner`) give
            the alignments' rows (their mean), instead of the search's attention; () for none.

    Example:

        text = TextGraph(source_tokenizer, target_tokenizer, LengthLimits())
        source_ids, lengths = text.source_ids(tf.constant(["In the beginning."]))
    """

    def __init__(self, source_tokenizer, target_tokenizer, limits, unk_dictionary=None, heads=()):
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.limits = limits
        self.unk_dictionary = unk_dictionary
        self.heads = tuple(heads)
        self._pieces = {}  # (return_alignments, replace_unk) -> (prepare, finish)

    def source_ids(self, sentences):
        """tf.string [batch] -> (source ids [batch, len] int32 with [END], token counts [batch])."""
        ids = tf.cast(self.source_tokenizer.tokenize(sentences), tf.int32)
        ids = ids[:, : self.limits.max_source_length]
        lengths = tf.cast(ids.row_lengths(), tf.int32)
        end = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], tf.constant(END_ID, tf.int32)))
        ids = tf.concat([ids, end], axis=1).to_tensor(default_value=PAD_ID)
        # an empty batch still needs one column: the encoder cannot run over zero steps
        ids = tf.pad(ids, [[0, 0], [0, tf.maximum(1 - tf.shape(ids)[1], 0)]])
        return ids, lengths

    def length_limits(self, lengths):
        """int32 [batch] source lengths -> each sentence's output limit (`LengthLimits`)."""
        return length_limits(lengths, self.limits.max_length_ratio, self.limits.max_length_offset)

    def source_tokens(self, sentences):
        """The source tokens as written, cut like the ids, ``[END]`` last, padded with ""."""
        tokens = self.source_tokenizer.tokens(sentences)[:, : self.limits.max_source_length]
        end = tf.RaggedTensor.from_tensor(tf.fill([tokens.nrows(), 1], END_TOKEN))
        return tf.concat([tokens, end], axis=1).to_tensor(default_value="")

    def outputs(self, sentences, lengths, ids, out_lengths, scores, attention=None):
        """Texts, scores, ids and lengths of searched ids [batch, nbest, time]; an empty
        source gets "" and score 0. With ``attention`` [batch, nbest, time, width], each
        [UNK] of the texts is replaced (`bahdanau_tf.unknown_words`)."""
        empty = lengths == 0  # [batch]
        batch, nbest_dim = tf.shape(ids)[0], tf.shape(ids)[1]
        flat_ids = tf.reshape(ids, [batch * nbest_dim, -1])
        unknown = None
        if attention is not None:
            unknown = unknown_words.replacement_tokens(
                attention, self.source_tokens(sentences), lengths, self.unk_dictionary)
            unknown = tf.reshape(unknown, tf.shape(flat_ids))
        texts = tf.reshape(self.target_tokenizer.detokenize(flat_ids, unknown), [batch, nbest_dim])
        return {"translations": tf.where(empty[:, None], "", texts),
                "scores": tf.where(empty[:, None], 0.0, scores), "ids": ids,
                "lengths": tf.where(empty[:, None], 0, out_lengths), "source_lengths": lengths}

    def alignment_outputs(self, sentences, lengths, outputs, attention):
        """The tokens and attention of the best translations (``align``'s extra outputs)."""
        best_ids = outputs["ids"][:, 0]  # [batch, time]
        target_lengths = outputs["lengths"][:, 0]
        target_tokens = self.target_tokenizer.id_to_token(best_ids)
        valid = tf.range(tf.shape(best_ids)[1])[None, :] < target_lengths[:, None]
        if self.heads and not self.heads_run_eagerly:
            attention = self.head_rows(sentences, tf.where(valid, best_ids, PAD_ID), valid)[:, None]
        return dict(
            source_tokens=self.source_tokens(sentences),
            source_lengths=lengths + 1,
            target_tokens=tf.where(valid, target_tokens, ""),
            target_lengths=target_lengths,
            attention=tf.where(valid[:, :, None], attention[:, 0], 0.0),  # [batch, time, source_len]
        )

    @property
    def heads_run_eagerly(self) -> bool:
        """On another Keras backend than TensorFlow the heads' ops cannot run inside a
        TensorFlow graph: `alignment_outputs` keeps the search's attention, and
        `with_head_rows` replaces it outside the graph."""
        return bool(self.heads) and keras.backend.backend() != "tensorflow"

    def head_rows(self, sentences, ids, valid):
        """The alignment heads' rows (mean over an ensemble) of translations ``ids`` [batch,
        time] (``valid`` where not padding), teacher-forced: float32 [batch, time, source_len]."""
        source_ids, _ = self.source_ids(sentences)
        target_in = tf.concat([tf.fill([tf.shape(ids)[0], 1], START_ID), ids[:, :-1]], axis=1)
        target_in = tf.where(valid, target_in, PAD_ID)  # the decoder never reads the final [END]
        if self.heads_run_eagerly:  # the backend's arrays in and out
            inputs, ids = (source_ids.numpy(), target_in.numpy()), ids.numpy()
            return tf.constant(np.mean([keras.ops.convert_to_numpy(m.alignment_weights(inputs, ids))
                                        .astype(np.float32) for m in self.heads], axis=0))
        rows = [tf.cast(model.alignment_weights((source_ids, target_in), ids), tf.float32)
                for model in self.heads]
        return tf.add_n(rows) / len(rows)

    def with_head_rows(self, sentences, outputs):
        """``outputs`` of a ``finish`` with alignments, their attention the heads' rows: what
        `alignment_outputs` does in the graph where the heads cannot run in it (eager)."""
        valid = tf.range(tf.shape(outputs["ids"])[2])[None, :] < outputs["target_lengths"][:, None]
        rows = self.head_rows(sentences, tf.where(valid, outputs["ids"][:, 0], PAD_ID), valid)
        return {**outputs, "attention": tf.where(valid[:, :, None], rows, 0.0)}

    def pieces(self, return_alignments, replace_unk=False):
        """The graphs around a search run outside them (`Translator.translate`): ``prepare``
        (sentences -> source ids, lengths, limits) and ``finish`` (`outputs`, which takes the
        search's attention when alignments or replacement need it), concrete functions made
        once per combination."""
        key = (bool(return_alignments), bool(replace_unk))
        if key not in self._pieces:
            self._pieces[key] = self._traced_pieces(*key)
        return self._pieces[key]

    def _traced_pieces(self, return_alignments, replace_unk):
        def prepare(sentences):
            source_ids, lengths = self.source_ids(sentences)
            return source_ids, lengths, self.length_limits(lengths)

        def finish_with_attention(sentences, lengths, ids, out_lengths, scores, attention):
            outputs = self.outputs(sentences, lengths, ids, out_lengths, scores,
                                   attention=attention if replace_unk else None)
            if return_alignments:
                outputs.update(self.alignment_outputs(sentences, lengths, outputs, attention))
            return outputs

        # no optional argument: a concrete function binds positional tensors directly
        def finish(sentences, lengths, ids, out_lengths, scores):
            return self.outputs(sentences, lengths, ids, out_lengths, scores)

        signature = [SENTENCES, tf.TensorSpec([None], tf.int32), tf.TensorSpec([None, None, None], tf.int32),
                     tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.float32)]
        if return_alignments or replace_unk:
            signature.append(tf.TensorSpec([None, None, None, None], tf.float32))
            finish = finish_with_attention
        # concrete functions: a call skips the tf.function's argument binding (batch 1)
        return (tf.function(prepare, input_signature=[SENTENCES], autograph=False).get_concrete_function(),
                tf.function(finish, input_signature=signature, autograph=False).get_concrete_function())


__all__ = ["TextGraph", "SENTENCES", "Alignment", "TranslationOutput", "alignments_of", "decode_strings"]
