"""Tokenizers: text <-> integer ids, in Python and inside a TensorFlow graph.

Two tokenizers share one word split and one id convention
(:mod:`bahdanau_tf.special_tokens`: ``[PAD]=0, [START]=1, [END]=2, [UNK]=3``):

* :class:`WordTokenizer` -- the paper's setup (section 4): a shortlist of the K most
  frequent words per language (30,000 in the paper presets); every other word becomes
  ``[UNK]``. Case is kept; punctuation is split off.
* :class:`SubwordTokenizer` -- a WordPiece vocabulary learned with tensorflow-text's
  vocabulary builder, so no word is unknown (the open problem the paper's conclusion names).

Both are ``tf.Module`` s whose vocabulary file is a ``tf.saved_model.Asset``. Their graph
ops are core TensorFlow (``StaticHashTable`` lookups) or tf-text ops the stock TF Serving
model server links (DESIGN.md section 5): ``NormalizeUTF8``, ``RegexSplitWithOffsets``,
``WordpieceTokenizeWithOffsets``; no ``FastBertNormalize``, ``FastWordpiece*`` or newer op.

The word split (:func:`split_words` in Python, the same rule in the graph):

1. invalid UTF-8 bytes become U+FFFD (graph only; Python strings are already text);
2. Unicode NFC normalisation;
3. format characters (category ``Cf``: zero-width spaces, soft hyphens, BOM) are removed;
4. separators (categories ``Z*`` and control characters ``Cc``, which include tab and
   newline) separate words;
5. a word is a maximal run of letters, digits and combining marks (categories ``L*``,
   ``N*``, ``M*``); every other character (punctuation, symbols, U+FFFD) is a token of its
   own. So ``"God's"`` is ``["God", "'", "s"]`` and ``"Beth-el"`` is ``["Beth", "-", "el"]``.

Detokenisation joins tokens with single spaces, then removes the space before closing
punctuation (``. , ; : ! ? ) ] }``), after opening punctuation (``( [ { ¿ ¡``) and around an
apostrophe or hyphen between two letters/digits. Because every punctuation character is a
token of its own, the spacing around it never changes the tokens, so
``split_words(detokenize(tokenize(s))) == split_words(s)`` for in-vocabulary text.

Very long inputs are tokenized in full; cutting is the caller's job (`make_dataset` drops
long pairs, the Translator truncates). WordPiece maps a word longer than
``max_bytes_per_word`` bytes to ``[UNK]``.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import unicodedata
import weakref
from typing import Iterable, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from bahdanau_tf.special_tokens import (
    END_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    START_ID,
    UNK_ID,
    UNK_TOKEN,
)
from bahdanau_tf.wordpiece import SUFFIX as _WORDPIECE_SUFFIX
from bahdanau_tf.wordpiece import learn_wordpiece

__all__ = [
    "WordTokenizer",
    "PathAsset",
    "SubwordTokenizer",
    "load_tokenizer",
    "build_tokenizers",
    "TOKENIZER_KINDS",
    "DEFAULT_VOCABULARY_SIZE",
    "count_words",
    "split_words",
    "VOCABULARY_FILENAME",
    "CONFIG_FILENAME",
]

VOCABULARY_FILENAME = "vocabulary.txt"
CONFIG_FILENAME = "tokenizer.json"

# === The word split, in RE2 syntax (graph) and as Unicode categories (Python) ===
# "Separator" = Unicode separators and control characters; "word" = letters, digits, marks.
_SEPARATOR_CLASS = r"\p{Z}\p{Cc}"
_WORD_CLASS = r"\p{L}\p{N}\p{M}"
_FORMAT_CHARACTERS = r"\p{Cf}+"
_DELIMITER_PATTERN = rf"[{_SEPARATOR_CLASS}]+|[^{_WORD_CLASS}{_SEPARATOR_CLASS}]"
_KEEP_DELIMITER_PATTERN = rf"[^{_WORD_CLASS}{_SEPARATOR_CLASS}]"

# Detokenisation: spacing around punctuation (RE2 patterns and their rewrites).
_DETOKENIZE_REWRITES = (
    (r" ([.,;:!?)\]}])", r"\1"),
    (r"([(\[{¿¡]) ", r"\1"),
    (r"([\p{L}\p{N}]) (['’-]) ([\p{L}\p{N}])", r"\1\2\3"),
    # a second pass joins chains such as "a - b - c" whose matches overlap
    (r"([\p{L}\p{N}]) (['’-]) ([\p{L}\p{N}])", r"\1\2\3"),
)


def _character_kind(character: str) -> str:
    category = unicodedata.category(character)
    if category[0] in "LNM":
        return "word"
    if category[0] == "Z" or category == "Cc":
        return "separator"
    if category == "Cf":
        return "format"
    return "punctuation"


def split_words(text: str) -> list[str]:
    """Splits a sentence into words exactly as the tokenizers do inside the graph.

    This is the package's definition of a "word": gold alignment indices, sentence
    lengths in words and BLEU-by-length all count with it.

    Args:
        text: str, one sentence.

    Returns:
        list of str: the words and punctuation tokens, in order.

    Example:

        >>> split_words("In the beginning, God's Spirit…")
        ['In', 'the', 'beginning', ',', 'God', "'", 's', 'Spirit', '…']
    """
    if not isinstance(text, str):
        raise TypeError(f"split_words expects a str, got {type(text).__name__}: {text!r:.80}")
    words: list[str] = []
    current: list[str] = []
    for character in unicodedata.normalize("NFC", text):
        kind = _character_kind(character)
        if kind == "word":
            current.append(character)
            continue
        if kind == "format":
            continue
        if current:
            words.append("".join(current))
            current = []
        if kind == "punctuation":
            words.append(character)
    if current:
        words.append("".join(current))
    return words


# One traced graph per process, called by every tokenizer, dataset stage and signature that
# splits words: each caller's graph holds a call of it, rather than its ~360 ops traced again
# (0.15 s a trace; a training run's datasets traced it a dozen times, an export six times).
@tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
def _split_words_in_graph(strings: tf.Tensor) -> tf.RaggedTensor:
    """tf.string [batch] -> ragged tf.string [batch, (words)]; same rule as split_words."""
    strings = tf.strings.unicode_transcode(
        strings,
        input_encoding="UTF-8",
        output_encoding="UTF-8",
        errors="replace",
        replacement_char=0xFFFD,
    )
    # NUL is a separator like any control character; NormalizeUTF8 would end the string there
    strings = tf.strings.regex_replace(strings, r"\x00", " ")
    strings = tf_text.normalize_utf8(strings, "NFC")
    strings = tf.strings.regex_replace(strings, _FORMAT_CHARACTERS, "")
    words, _, _ = tf_text.regex_split_with_offsets(
        strings, _DELIMITER_PATTERN, _KEEP_DELIMITER_PATTERN
    )
    return words


def _prettify_spacing(strings: tf.Tensor) -> tf.Tensor:
    for pattern, rewrite in _DETOKENIZE_REWRITES:
        strings = tf.strings.regex_replace(strings, pattern, rewrite)
    return strings


def _read_vocabulary(path: str) -> list[str]:
    with open(path, encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def _validate_vocabulary(vocabulary: Sequence[str], source: str) -> None:
    head = tuple(vocabulary[: len(SPECIAL_TOKENS)])
    if head != SPECIAL_TOKENS:
        raise ValueError(
            f"The vocabulary {source} must start with the special tokens {list(SPECIAL_TOKENS)} "
            f"(ids 0..{len(SPECIAL_TOKENS) - 1}), got {list(head)}."
        )
    seen: set[str] = set()
    for index, token in enumerate(vocabulary):
        if not token or any(_character_kind(c) == "separator" for c in token):
            raise ValueError(
                f"Vocabulary {source} line {index + 1}: token {token!r} is empty or "
                "contains whitespace."
            )
        if token in seen:
            raise ValueError(f"Vocabulary {source} line {index + 1}: duplicate token {token!r}.")
        seen.add(token)


def _write_vocabulary(vocabulary: Sequence[str], directory: str) -> str:
    path = os.path.join(directory, VOCABULARY_FILENAME)
    with tf.io.gfile.GFile(path, "w") as handle:  # also ram:// (`_memory_directory`)
        handle.write("".join(token + "\n" for token in vocabulary))
    return path


_memory_directories = itertools.count()


def _memory_directory() -> str:
    """A new directory of TensorFlow's in-memory file system, private to this process."""
    directory = f"ram://bahdanau_vocabulary/{os.getpid()}-{next(_memory_directories)}"
    tf.io.gfile.makedirs(directory)
    return directory


def _remove_quietly(path: str) -> None:
    try:
        tf.io.gfile.remove(path)
    except Exception:  # noqa: BLE001 - at interpreter exit TensorFlow may be gone already
        pass


def _to_ragged_ids(ids) -> tf.RaggedTensor:
    """Dense [batch, len] (0-padded) or ragged ids -> ragged int64 [batch, (len)]."""
    if isinstance(ids, tf.RaggedTensor):
        return tf.cast(ids, tf.int64)
    ids = tf.convert_to_tensor(ids)
    return tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int64))


def _visible_mask(dense: tf.Tensor) -> tf.Tensor:
    """bool [batch, len]: not PAD, not START, and before the first END."""
    ended = tf.math.cumsum(tf.cast(tf.equal(dense, END_ID), tf.int32), axis=1) > 0
    return ~ended & tf.not_equal(dense, PAD_ID) & tf.not_equal(dense, START_ID)


def _visible_ids(ids) -> tf.RaggedTensor:
    """Drops PAD and START and everything from the first END on."""
    dense = _to_ragged_ids(ids).to_tensor(default_value=PAD_ID)
    # positions past a row's own length are padding, so the mask already drops them
    return tf.ragged.boolean_mask(dense, _visible_mask(dense))


class PathAsset(tf.saved_model.Asset):
    """A SavedModel asset whose ``str`` is its file's path: a lookup table built from it is
    named after the file, not after an object address that a later asset could reuse (the
    vocabularies here, `bahdanau_tf.unknown_words`' dictionary)."""

    def __init__(self, path):
        super().__init__(path)
        self._name_path = path

    def __str__(self):
        return self._name_path


class _Tokenizer(tf.Module):
    """Shared machinery: the vocabulary asset, the two lookup tables, id <-> token."""

    kind = ""

    def __init__(self, vocabulary: str | Sequence[str], name: str | None = None):
        super().__init__(name=name)
        if isinstance(vocabulary, (str, os.PathLike)):
            path = os.fspath(vocabulary)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"Vocabulary file not found: {path!r}")
            tokens = _read_vocabulary(path)
            source = repr(path)
        else:
            tokens = list(vocabulary)
            source = "(list)"
            _validate_vocabulary(tokens, source)
            # The asset needs a file; a list's file is kept in memory (TensorFlow's ram://
            # file system: the tables read it, a SavedModel export copies it into assets/), so
            # a process killed at any point leaves nothing on disk. It goes with the tokenizer.
            path = _write_vocabulary(tokens, _memory_directory())
            weakref.finalize(self, _remove_quietly, path)
        _validate_vocabulary(tokens, source)
        self._vocabulary = tokens

        # === Assets and tables ===
        # One SavedModel asset for both tables. TextFileInitializer names the table resource
        # after str(filename): a plain Asset's str holds its memory address, so a tokenizer
        # allocated where a collected one had been silently shared the old, still-living table.
        # `PathAsset` prints its absolute path instead (with the size: a unique name).
        self._vocabulary_asset = PathAsset(path if "://" in path else os.path.abspath(path))
        self._token_to_id = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                self._vocabulary_asset,
                vocab_size=len(tokens),
                key_dtype=tf.string,
                key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
                value_dtype=tf.int64,
                value_index=tf.lookup.TextFileIndex.LINE_NUMBER,
            ),
            default_value=UNK_ID,
        )
        self._id_to_token = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                self._vocabulary_asset,
                vocab_size=len(tokens),
                key_dtype=tf.int64,
                key_index=tf.lookup.TextFileIndex.LINE_NUMBER,
                value_dtype=tf.string,
                value_index=tf.lookup.TextFileIndex.WHOLE_LINE,
            ),
            default_value=UNK_TOKEN,
        )

    # === Python-side properties ===
    @property
    def vocabulary_size(self) -> int:
        """int: number of ids, special tokens included."""
        return len(self._vocabulary)

    @property
    def vocabulary(self) -> list[str]:
        """list of str: the token of every id, in id order."""
        return list(self._vocabulary)

    def get_config(self) -> dict:
        """Returns the JSON-serialisable configuration written next to the vocabulary."""
        return {"type": self.kind, "vocabulary_file": VOCABULARY_FILENAME}

    def save(self, directory: str) -> str:
        """Writes ``vocabulary.txt`` and ``tokenizer.json`` into ``directory``.

        Args:
            directory: str, created if missing.

        Returns:
            str: ``directory``.
        """
        os.makedirs(directory, exist_ok=True)
        _write_vocabulary(self._vocabulary, directory)
        with open(os.path.join(directory, CONFIG_FILENAME), "w", encoding="utf-8") as handle:
            json.dump(self.get_config(), handle, indent=2, sort_keys=True)
            handle.write("\n")
        return directory

    # === Graph-side methods ===
    def id_to_token(self, ids):
        """Maps ids to token strings; unknown ids give ``[UNK]``.

        Args:
            ids: int tensor (any shape) or RaggedTensor.

        Returns:
            tf.string tensor or RaggedTensor of the same shape.
        """
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(self._id_to_token.lookup, tf.cast(ids, tf.int64))
        return self._id_to_token.lookup(tf.cast(tf.convert_to_tensor(ids), tf.int64))

    def _join(self, tokens: tf.RaggedTensor) -> tf.Tensor:
        raise NotImplementedError

    def detokenize(self, ids, unknown_tokens=None) -> tf.Tensor:
        """Ids back to text.

        Drops ``[PAD]`` and ``[START]``, stops at the first ``[END]``, joins the tokens (see
        the module docstring for the spacing rule).

        Args:
            ids: int tensor [batch, length] padded with 0, or ragged [batch, (length)].
            unknown_tokens: optional tf.string [batch, length] (dense ``ids`` only): the token
                written instead of ``[UNK]`` at each position (`bahdanau_tf.unknown_words`).

        Returns:
            tf.string [batch].
        """
        if unknown_tokens is None:
            tokens = self.id_to_token(_visible_ids(ids))
        else:
            dense = tf.cast(tf.convert_to_tensor(ids), tf.int64)
            tokens = tf.where(tf.equal(dense, UNK_ID), unknown_tokens, self.id_to_token(dense))
            tokens = tf.ragged.boolean_mask(tokens, _visible_mask(dense))
        return _prettify_spacing(self._join(tokens))

    @staticmethod
    def _as_batch(strings):
        strings = tf.convert_to_tensor(strings, dtype=tf.string)
        scalar = strings.shape.rank == 0
        if scalar:
            strings = tf.expand_dims(strings, 0)
        return strings, scalar


class WordTokenizer(_Tokenizer):
    """The paper's word shortlist: the K most frequent words, others -> ``[UNK]``.

    Words are split by :func:`split_words` (case kept, punctuation split off). Ids 0..3 are
    the special tokens of :mod:`bahdanau_tf.special_tokens`.

    Args:
        vocabulary: str path of a vocabulary file (one token a line, id = line number) or a
            list of tokens; both must start with ``[PAD] [START] [END] [UNK]``.
        name: optional module name.

    Example:

        >>> tokenizer = WordTokenizer.build(["In the beginning God created"] * 2)
        >>> ids = tokenizer.tokenize(["God created the heavens"])
        >>> tokenizer.detokenize(ids).numpy()
        array([b'God created the [UNK]'], dtype=object)
    """

    kind = "word"

    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        max_vocabulary_size: int = 30000,
        min_count: int = 1,
        name: str | None = None,
    ) -> "WordTokenizer":
        """Builds the shortlist from raw sentences.

        Args:
            texts: iterable of str sentences (e.g. ``corpus.sources``).
            max_vocabulary_size: int, the total size including the 4 special tokens; the
                ``max_vocabulary_size - 4`` most frequent words are kept (ties broken
                alphabetically, so the result is deterministic).
            min_count: int, words seen fewer times are left out.
            name: optional module name.

        Returns:
            WordTokenizer.
        """
        counts: collections.Counter = collections.Counter()
        for text in texts:
            counts.update(split_words(text))
        return cls.from_counts(counts, max_vocabulary_size, min_count, name)

    @classmethod
    def from_counts(cls, counts: dict, max_vocabulary_size: int = 30000, min_count: int = 1,
                    name: str | None = None) -> "WordTokenizer":
        """The shortlist of word counts (``{word: count}`` of `split_words` words), as `build`."""
        if max_vocabulary_size <= len(SPECIAL_TOKENS):
            raise ValueError(
                f"max_vocabulary_size must exceed {len(SPECIAL_TOKENS)} (the special tokens), "
                f"got {max_vocabulary_size!r}."
            )
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count!r}.")
        counts = dict(counts)
        for token in SPECIAL_TOKENS:
            counts.pop(token, None)
        ranked = sorted(
            (item for item in counts.items() if item[1] >= min_count),
            key=lambda item: (-item[1], item[0]),
        )
        words = [word for word, _ in ranked[: max_vocabulary_size - len(SPECIAL_TOKENS)]]
        return cls(list(SPECIAL_TOKENS) + words, name=name)

    def tokens(self, strings) -> tf.RaggedTensor:
        """The words ``tokenize`` maps to ids, as strings (unknown words keep their form).

        Args:
            strings: tf.string [batch] (or a scalar, giving a 1-D result).

        Returns:
            ragged tf.string [batch, (tokens)].
        """
        strings, scalar = self._as_batch(strings)
        words = _split_words_in_graph(strings)
        return words[0] if scalar else words

    def tokenize(self, strings) -> tf.RaggedTensor:
        """Sentences to ids; no ``[START]``/``[END]`` added.

        Args:
            strings: tf.string [batch] (or a scalar, giving a 1-D tensor). Invalid UTF-8 is
                replaced by U+FFFD, which is ``[UNK]``; an empty string gives an empty row.

        Returns:
            ragged tf.int32 [batch, (tokens)].
        """
        strings, scalar = self._as_batch(strings)
        words = _split_words_in_graph(strings)
        ids = tf.ragged.map_flat_values(
            lambda w: tf.cast(self._token_to_id.lookup(w), tf.int32), words
        )
        return ids[0] if scalar else ids

    def _join(self, tokens: tf.RaggedTensor) -> tf.Tensor:
        return tf.strings.reduce_join(tokens, axis=-1, separator=" ")


class SubwordTokenizer(_Tokenizer):
    """WordPiece over the same word split: no word is unknown.

    Each word from :func:`split_words` is cut into the longest vocabulary pieces, the
    non-initial ones prefixed with ``##`` (tf-text's ``WordpieceTokenizeWithOffsets`` op).
    A word containing a character never seen in training, or longer than
    ``max_bytes_per_word`` bytes, becomes one ``[UNK]``.

    Args:
        vocabulary: str path of a vocabulary file or a list of tokens, starting with
            ``[PAD] [START] [END] [UNK]``.
        max_bytes_per_word: int, longer words map to ``[UNK]``.
        name: optional module name.

    Example:

        >>> tokenizer = SubwordTokenizer.build(corpus.sources[:2000], vocabulary_size=2000)
        >>> tokenizer.tokens(["Jehová"]).to_list()
        [[b'Jeho', b'##v\\xc3\\xa1']]
    """

    kind = "subword"

    def __init__(
        self,
        vocabulary: str | Sequence[str],
        max_bytes_per_word: int = 100,
        name: str | None = None,
    ):
        super().__init__(vocabulary, name=name)
        if max_bytes_per_word < 1:
            raise ValueError(f"max_bytes_per_word must be >= 1, got {max_bytes_per_word!r}.")
        self.max_bytes_per_word = max_bytes_per_word
        self._wordpiece = tf_text.WordpieceTokenizer(
            self._token_to_id,
            suffix_indicator=_WORDPIECE_SUFFIX,
            max_bytes_per_word=max_bytes_per_word,
            token_out_type=tf.int64,
            unknown_token=UNK_TOKEN,
        )

    def get_config(self) -> dict:
        return {**super().get_config(), "max_bytes_per_word": self.max_bytes_per_word}

    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        vocabulary_size: int = 8000,
        max_bytes_per_word: int = 100,
        learn_params: dict | None = None,
        name: str | None = None,
    ) -> "SubwordTokenizer":
        """Learns a WordPiece vocabulary of ``vocabulary_size`` tokens (case kept).

        The texts are split with :func:`split_words`, so the learned pieces match the split
        used at tokenisation time, and the pieces are learned by `learn_wordpiece`: exactly
        ``vocabulary_size`` tokens, unless the texts hold fewer distinct pieces (then all of
        them) or more distinct characters (every character is kept, so no seen word is
        unknown). tf-text's own learner (a search over count thresholds, one learning run per
        step) is slower and misses the size (by up to 11% on a sample of Bible verses).

        Args:
            texts: iterable of str sentences.
            vocabulary_size: int, the size wanted, special tokens included.
            max_bytes_per_word: int, see the class.
            learn_params: None, or a dict of arguments for tf-text's
                ``wordpiece_tokenizer_learner_lib.learn`` (e.g. ``{"lower_thresh": 2}``):
                learn with tf-text's ``bert_vocab_from_dataset`` instead, whose size is
                approximate (the vocabularies of earlier versions of this package).
            name: optional module name.

        Returns:
            SubwordTokenizer.
        """
        if vocabulary_size <= len(SPECIAL_TOKENS):
            raise ValueError(
                f"vocabulary_size must exceed {len(SPECIAL_TOKENS)} (the special tokens), "
                f"got {vocabulary_size!r}."
            )
        texts = list(texts)
        if learn_params is not None:
            vocabulary = _learn_with_tf_text(texts, vocabulary_size, learn_params)
        else:
            vocabulary = learn_wordpiece(count_words(texts), vocabulary_size)
        return cls(vocabulary, max_bytes_per_word=max_bytes_per_word, name=name)

    def _pieces(self, strings: tf.Tensor):
        words = _split_words_in_graph(strings)
        piece_ids, starts, ends = self._wordpiece.tokenize_with_offsets(words.flat_values)
        return words, piece_ids, starts, ends

    def tokenize(self, strings) -> tf.RaggedTensor:
        """Sentences to WordPiece ids; no ``[START]``/``[END]`` added.

        Args:
            strings: tf.string [batch] (or a scalar, giving a 1-D tensor).

        Returns:
            ragged tf.int32 [batch, (tokens)].
        """
        strings, scalar = self._as_batch(strings)
        words, piece_ids, _, _ = self._pieces(strings)
        ids = words.with_flat_values(tf.cast(piece_ids, tf.int32)).merge_dims(1, 2)
        return ids[0] if scalar else ids

    def tokens(self, strings) -> tf.RaggedTensor:
        """The pieces ``tokenize`` produces, as strings: ``["Jeho", "##vá"]``.

        A word that maps to ``[UNK]`` keeps its surface form here.

        Args:
            strings: tf.string [batch] (or a scalar, giving a 1-D result).

        Returns:
            ragged tf.string [batch, (tokens)].
        """
        strings, scalar = self._as_batch(strings)
        words, piece_ids, starts, ends = self._pieces(strings)
        word_of_piece = tf.repeat(words.flat_values, piece_ids.row_lengths())
        surface = tf.strings.substr(
            word_of_piece, starts.flat_values, ends.flat_values - starts.flat_values
        )
        surface = tf.where(
            starts.flat_values > 0, tf.strings.join([_WORDPIECE_SUFFIX, surface]), surface
        )
        # a whole word mapped to [UNK] (the op's offsets do not always span it) keeps its form
        whole_word_unknown = tf.equal(piece_ids.flat_values, UNK_ID) & tf.repeat(
            tf.equal(piece_ids.row_lengths(), 1), piece_ids.row_lengths()
        )
        surface = tf.where(whole_word_unknown, word_of_piece, surface)
        pieces = words.with_flat_values(piece_ids.with_flat_values(surface)).merge_dims(1, 2)
        return pieces[0] if scalar else pieces

    def _join(self, tokens: tf.RaggedTensor) -> tf.Tensor:
        joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return tf.strings.regex_replace(joined, " " + _WORDPIECE_SUFFIX, "")


# === Learning a WordPiece vocabulary ===
def count_words(texts: Iterable[str], batch_size: int = 4096) -> collections.Counter:
    """How often each word of :func:`split_words` occurs in ``texts`` (split in the graph)."""
    counts: collections.Counter = collections.Counter()
    texts = list(texts)
    for start in range(0, len(texts), batch_size):
        words = _split_words_in_graph(tf.constant(texts[start:start + batch_size], tf.string))
        counts.update(word.decode("utf-8") for word in words.flat_values.numpy())
    return counts


def _learn_with_tf_text(texts: list, vocabulary_size: int, learn_params: dict) -> list[str]:
    """tf-text's ``bert_vocab_from_dataset`` (threshold bisection), the reserved tokens first."""
    from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset as bvfd

    joined = [" ".join(split_words(text)) for text in texts]
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(joined, dtype=tf.string))
    vocabulary = bvfd.bert_vocab_from_dataset(
        dataset.batch(1000).prefetch(2),
        vocab_size=vocabulary_size,
        reserved_tokens=list(SPECIAL_TOKENS),
        bert_tokenizer_params={"lower_case": False},
        learn_params=learn_params,
    )
    # the learner puts the reserved tokens first; keep them at ids 0..3 regardless
    return list(SPECIAL_TOKENS) + [t for t in vocabulary if t not in SPECIAL_TOKENS]


_KINDS = {WordTokenizer.kind: WordTokenizer, SubwordTokenizer.kind: SubwordTokenizer}


TOKENIZER_KINDS = ("subword", "word")
DEFAULT_VOCABULARY_SIZE = 5000
DEFAULT_VOCABULARY_SENTENCES = 8000


def build_tokenizers(
    corpus,
    kind: str = "subword",
    vocabulary_size: int = DEFAULT_VOCABULARY_SIZE,
    vocabulary_sentences: int | None = DEFAULT_VOCABULARY_SENTENCES,
) -> tuple:
    """The vocabulary recipe: a source and a target tokenizer learned from a training corpus.

    What ``bahdanau-train``, ``bahdanau-data`` and the notebooks use, so that the same flags
    give the same vocabularies everywhere.

    - ``"subword"`` (default): WordPiece of exactly ``vocabulary_size`` pieces per language (no
      [UNK] in the output; `learn_wordpiece`), learned from a sample of ``vocabulary_sentences``
      pairs: of an in-memory corpus, a spread sample (every k-th pair, not the first books
      only); of a stream (`bahdanau_tf.corpora.CorpusFiles`), its first pairs, so that
      neither memory nor start-up grows with the corpus (shuffle a file whose order has a
      bias, or learn from a spread sample once with ``bahdanau-data --vocabulary_dir``).
      ``vocabulary_sentences`` None or 0 learns from every pair (a stream then is held).
    - ``"word"``: the paper's shortlist of the ``vocabulary_size - 4`` most frequent words,
      counted over every pair in one pass (a stream is read through, never held).

    Args:
        corpus: a `bahdanau_tf.corpora.ParallelCorpus` (``sources``, ``targets``) or a stream
            of pairs with ``pairs()`` and ``head(count)`` (`bahdanau_tf.corpora.CorpusFiles`).
        kind: ``"subword"`` or ``"word"``.
        vocabulary_size: int, per language, special tokens included.
        vocabulary_sentences: int or None, the subword learner's sample.

    Returns:
        ``(source_tokenizer, target_tokenizer)``.
    """
    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"kind must be one of {TOKENIZER_KINDS}, got {kind!r}.")
    if kind == "word":
        sides, seen = (collections.Counter(), collections.Counter()), 0
        for seen, pair in enumerate(corpus.pairs(), start=1):  # one pass: a stream is read once
            for counts, sentence in zip(sides, pair):
                counts.update(split_words(sentence))
        if not seen:
            raise ValueError("Cannot learn vocabularies from an empty corpus.")
        return tuple(WordTokenizer.from_counts(counts, vocabulary_size) for counts in sides)
    if not hasattr(corpus, "sources"):  # a stream: its first pairs, in memory
        corpus = corpus.head(vocabulary_sentences or None)
    if not len(corpus):
        raise ValueError("Cannot learn vocabularies from an empty corpus.")
    step = max(1, len(corpus) // vocabulary_sentences) if vocabulary_sentences else 1
    return tuple(SubwordTokenizer.build(texts[::step], vocabulary_size=vocabulary_size)
                 for texts in (corpus.sources, corpus.targets))


def load_tokenizer(directory: str, in_memory: bool = False) -> WordTokenizer | SubwordTokenizer:
    """Restores a tokenizer written by ``save``.

    Args:
        directory: str, holding ``tokenizer.json`` and ``vocabulary.txt``.
        in_memory: bool, keep the vocabulary in memory (as a tokenizer built from a list does),
            so that ``directory`` may be deleted afterwards.

    Returns:
        WordTokenizer or SubwordTokenizer.

    Example:

        >>> tokenizer.save("/tmp/vocab_en")
        >>> load_tokenizer("/tmp/vocab_en").vocabulary_size == tokenizer.vocabulary_size
        True
    """
    config_path = os.path.join(directory, CONFIG_FILENAME)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"No tokenizer config {CONFIG_FILENAME!r} in {directory!r}.")
    with open(config_path, encoding="utf-8") as handle:
        try:
            config = json.load(handle)
        except ValueError as error:  # a truncated or empty file
            raise ValueError(f"{config_path!r} is damaged: not valid JSON ({error}).") from None
    kind = config.pop("type", None)
    if kind not in _KINDS:
        raise ValueError(
            f"Unknown tokenizer type {kind!r} in {config_path!r}; expected one of {sorted(_KINDS)}."
        )
    vocabulary_file = os.path.join(directory, config.pop("vocabulary_file", VOCABULARY_FILENAME))
    if in_memory:
        if not os.path.isfile(vocabulary_file):
            raise FileNotFoundError(f"Vocabulary file not found: {vocabulary_file!r}")
        return _KINDS[kind](_read_vocabulary(vocabulary_file), **config)
    return _KINDS[kind](vocabulary_file, **config)

