"""[UNK] replacement by attention (Jean et al. 2015; Luong et al. 2015), in TensorFlow ops.

A word shortlist maps rare words to ``[UNK]``, and the model writes ``[UNK]`` where it would
need one. `replacement_tokens` gives, for every generated token, the source token that the
attention weighted most at that step (among the sentence's real tokens, ``[END]`` left out),
or that token's entry in an optional bilingual `UnknownWordDictionary`; the target tokenizer's
``detokenize(ids, unknown_tokens=...)`` writes it where the id is ``[UNK]``. The search's own
attention is used, so both `bahdanau_tf.translator.Translator.translate` (``replace_unk=True``)
and the exported signatures (`bahdanau_tf.signatures`) run this one graph: argmax, gather, a
hash-table lookup, no Python and no trip to the host.

Source tokens are the source tokenizer's ``tokens``: the words as written, so an unknown
source word (``[UNK]`` to the model) is replaced by its own surface form, never by
``"[UNK]"``. With subword (WordPiece) tokenizers the replacement is the aligned source piece
as ``tokens`` spells it: a source word the vocabulary cannot spell (a character it never saw,
the usual cause of a target ``[UNK]``) is one piece, the whole word as written; a
continuation piece (``"##vá"``) is joined to the target piece before it, as any continuation
piece is when detokenizing.

The dictionary file (``bahdanau-translate/evaluate/export --unk_dictionary=FILE``) is UTF-8
text, one ``source<TAB>target`` entry a line; more tab-separated columns are ignored, so the
package's ``lexicon.tsv`` (``source<TAB>target<TAB>score``, best first,
`bahdanau_tf.lexicon`) is a dictionary too. The first entry of a source token wins; a source
token without an entry is copied. Its keys are source tokens as ``tokens`` gives them (words
for word tokenizers). It is a SavedModel asset: an export carries it and looks it up in the
graph (a ``StaticHashTable`` read from the file at load).
"""

from __future__ import annotations

import itertools
import os
import weakref

import tensorflow as tf

from bahdanau_tf import text

DICTIONARY_FILENAME = "unk_dictionary.tsv"
_memory_directories = itertools.count()


def read_dictionary(path: str) -> dict:
    """The entries of a dictionary file: ``{source: target}``, the first entry of each source.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not UTF-8, a non-empty line without ``source<TAB>target``, an empty
            field, or no entry at all; the message names the file and the line.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"UNK dictionary not found: {path!r}")
    with open(path, "rb") as handle:
        content = handle.read()
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"UNK dictionary {path!r} is not UTF-8 (byte {error.start}).") from None
    entries: dict = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2 or not fields[0].strip() or not fields[1].strip():
            raise ValueError(f"UNK dictionary {path!r}, line {number} is not "
                             f"source<TAB>target: {line[:80]!r}")
        entries.setdefault(fields[0].strip(), fields[1].strip())
    if not entries:
        raise ValueError(f"UNK dictionary {path!r} has no entry (source<TAB>target lines).")
    return entries


def _remove_quietly(path):
    try:
        tf.io.gfile.remove(path)
    except Exception:  # noqa: BLE001 - at interpreter exit TensorFlow may be gone already
        pass


class UnknownWordDictionary(tf.Module):
    """A bilingual dictionary for [UNK] replacement: a hash table from a SavedModel asset.

    The file is read and checked in Python (`read_dictionary`), and its entries are written
    again, one ``source<TAB>target`` a line, to TensorFlow's in-memory file system: the table
    reads that file, and a SavedModel export copies it into ``assets/``.

    Args:
        path: str, the dictionary file (see the module docstring).

    Raises:
        FileNotFoundError, ValueError: see `read_dictionary`.
    """

    def __init__(self, path, name=None):
        super().__init__(name=name)
        entries = read_dictionary(path)
        self.source_path = os.path.abspath(os.fspath(path))
        directory = f"ram://bahdanau_unk_dictionary/{os.getpid()}-{next(_memory_directories)}"
        tf.io.gfile.makedirs(directory)
        memory_path = f"{directory}/{DICTIONARY_FILENAME}"
        with tf.io.gfile.GFile(memory_path, "w") as handle:
            handle.write("".join(f"{source}\t{target}\n" for source, target in entries.items()))
        weakref.finalize(self, _remove_quietly, memory_path)
        self.size = len(entries)
        self._asset = text.PathAsset(memory_path)
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(self._asset, key_dtype=tf.string, key_index=0,
                                          value_dtype=tf.string, value_index=1,
                                          vocab_size=len(entries), delimiter="\t"),
            default_value="")

    def lookup(self, tokens):
        """tf.string tokens (any shape) -> their entries, ``""`` where there is none."""
        return self._table.lookup(tokens)


def replacement_tokens(attention, source_tokens, source_lengths, dictionary=None):
    """The replacement of every target position: its argmax-attention source token.

    Args:
        attention: float ``[batch, ..., time, width]``, the attention row of each token.
        source_tokens: tf.string ``[batch, columns]``, the source tokens as written.
        source_lengths: int32 ``[batch]``, the real tokens of each row (``[END]`` excluded):
            only these are candidates.
        dictionary: an `UnknownWordDictionary`, or None.

    Returns:
        tf.string ``[batch, ..., time]``: the source token (or its dictionary entry) with the
        highest weight, the first on ties; ``""`` for a row without source tokens.
    """
    attention = tf.convert_to_tensor(attention)
    width = tf.shape(attention)[-1]
    rank = attention.shape.rank
    lengths = tf.reshape(source_lengths, tf.concat([[-1], tf.ones([rank - 1], tf.int32)], 0))
    valid = tf.range(width) < lengths
    weights = tf.where(valid, tf.cast(attention, tf.float32), float("-inf"))
    positions = tf.argmax(weights, axis=-1, output_type=tf.int32)
    # a row without source tokens is all -inf (argmax 0): point it at a padding column ""
    columns = tf.maximum(width, tf.shape(source_tokens)[1]) + 1
    tokens = tf.pad(source_tokens, [[0, 0], [0, columns - tf.shape(source_tokens)[1]]])
    positions = tf.where(tf.reduce_any(valid, axis=-1), positions, columns - 1)
    words = tf.gather(tokens, positions, batch_dims=1)
    if dictionary is None:
        return words
    entries = dictionary.lookup(words)
    return tf.where(tf.equal(entries, ""), words, entries)


__all__ = ["UnknownWordDictionary", "read_dictionary", "replacement_tokens", "DICTIONARY_FILENAME"]
