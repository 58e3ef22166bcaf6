"""A bilingual lexicon from co-occurrence counts: the top-k translations of each source token.

What candidate-list decoding (Jean et al. 2015) draws its per-batch target
vocabulary from: for every source id, the ``top_k`` target ids that co-occur with it most
strongly in the training corpus. Strength is the Dice coefficient of sentence co-occurrence,

    dice(s, t) = 2 * pairs(s, t) / (sentences(s) + sentences(t)),

counted once per sentence pair (presence, not multiplicity), so a frequent target word ("de",
"y") does not top every list as a raw count would; ties go to the lower (more frequent) target
id. Special tokens ([PAD], [START], [END], [UNK]) are neither entries nor translations. The
counts are sparse (`numpy.unique` over int64 keys, chunk by chunk): memory grows with the
distinct co-occurring pairs, not with |Vs| x |Vt|.

`bahdanau_tf.model_directory.write_lexicon` saves it with the model (``lexicon.tsv``;
``bahdanau-train`` writes it at the end of a run).

**Candidate lists** (`CandidateLists`, Jean et al. 2015): a search restricted to a per-batch
target vocabulary, the ``frequent`` most frequent target tokens plus the ``per_word`` best
translations of every source token of the batch. The vocabularies are sorted by frequency
(special tokens first; a WordPiece vocabulary nearly), so the frequent ones are the ids below
``frequent``. `candidate_ids` builds the list in graph ops (gather, scatter, argsort: core TF,
XLA-compatible), once per search; the model then projects onto those columns of W_o only, and
the log-softmax and ``top_k`` run over them (`bahdanau_tf.decoding.beam_search`'s
``candidates``). A word outside the list cannot be generated: that is the approximation.

Example:

    lexicon = Lexicon.build(corpus.pairs(), source_tokenizer, target_tokenizer, top_k=10)
    lexicon.translations[source_id]        # (top_k,) target ids, -1 where fewer co-occur
    translator = Translator(model, source_tokenizer, target_tokenizer,
                            candidates=CandidateLists(lexicon, frequent=2000, per_word=10))
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

import numpy as np
import tensorflow as tf

from bahdanau_tf.special_tokens import PAD_ID, SPECIAL_TOKENS

#: ids below this are the special tokens
_FIRST_REGULAR_ID = len(SPECIAL_TOKENS)
_CHUNK_PAIRS = 2048


@dataclasses.dataclass
class Lexicon:
    """The top-k translations of every source id.

    Attributes:
        translations: int32 (source_vocabulary_size, top_k) target ids, best first, -1 padded.
        scores: float32 (source_vocabulary_size, top_k) their Dice coefficients (0 where -1).
    """

    translations: np.ndarray
    scores: np.ndarray

    @property
    def top_k(self) -> int:
        return int(self.translations.shape[1])

    @classmethod
    def build(cls, pairs: Iterable[tuple], source_tokenizer: Any, target_tokenizer: Any,
              top_k: int = 10) -> "Lexicon":
        """Counts sentence co-occurrences over ``pairs`` ((source, target) strings) and keeps
        each source id's ``top_k`` targets by Dice coefficient.

        Raises:
            ValueError: ``top_k`` < 1, or no pair.
        """
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"`top_k` must be a positive int, got {top_k!r}.")
        source_size, target_size = source_tokenizer.vocabulary_size, target_tokenizer.vocabulary_size
        counts = _Counts(source_size, target_size)
        chunk = []
        for pair in pairs:
            chunk.append(pair)
            if len(chunk) == _CHUNK_PAIRS:
                counts.add(chunk, source_tokenizer, target_tokenizer)
                chunk = []
        if chunk:
            counts.add(chunk, source_tokenizer, target_tokenizer)
        if not counts.pairs:
            raise ValueError("The corpus is empty: no sentence pair to count.")
        return counts.lexicon(top_k)

    def pair_scores(self, source_ids, target_ids) -> np.ndarray:
        """The Dice score of every (target, source) pair of ids: the lexicon read as an attention
        matrix (``benchmarks/alignment.py --lexicon_baseline`` scores it as an aligner).

        Args:
            source_ids, target_ids: int sequences, a sentence pair's token ids (negative: no id).

        Returns:
            float32 ``[len(target_ids), len(source_ids)]``, 0 where the target id is not among
            the source id's ``top_k``.

        Example:

            >>> table = Lexicon(np.array([[-1, -1], [2, 3]], np.int32),
            ...                 np.array([[0, 0], [0.5, 0.25]], np.float32))
            >>> table.pair_scores([1, 0], [3, 2, -1]).tolist()
            [[0.25, 0.0], [0.5, 0.0], [0.0, 0.0]]
        """
        target_ids = np.asarray(target_ids, np.int64).reshape(-1)
        scores = np.zeros((len(target_ids), len(source_ids)), np.float32)
        for column, source in enumerate(source_ids):
            if not 0 <= source < len(self.translations):
                continue
            for target, score in zip(self.translations[source], self.scores[source]):
                if target >= 0:
                    scores[target_ids == target, column] = score
        return scores

    def to_tsv(self, source_vocabulary: list, target_vocabulary: list) -> str:
        """``source<TAB>target<TAB>score`` lines, each source token's best first (tokens, not ids:
        readable, and checked against the vocabularies when read back)."""
        lines = []
        for source_id, (targets, scores) in enumerate(zip(self.translations, self.scores)):
            for target_id, score in zip(targets, scores):
                if target_id >= 0:
                    lines.append(f"{source_vocabulary[source_id]}\t{target_vocabulary[target_id]}\t{score:.6g}\n")
        return "".join(lines)

    @classmethod
    def from_tsv(cls, content: str, source_vocabulary: list, target_vocabulary: list,
                 top_k: int | None = None) -> "Lexicon":
        """The lexicon `to_tsv` wrote. Raises ValueError naming a bad line (a token not in the
        vocabularies, a score that is not a number, not 3 columns)."""
        source_ids = {token: i for i, token in enumerate(source_vocabulary)}
        target_ids = {token: i for i, token in enumerate(target_vocabulary)}
        rows: dict = {}
        for number, line in enumerate(content.splitlines(), start=1):
            fields = line.split("\t")
            if len(fields) != 3 or fields[0] not in source_ids or fields[1] not in target_ids:
                raise ValueError(f"line {number} is not source<TAB>target<TAB>score of this model's "
                                 f"vocabularies: {line[:80]!r}")
            try:
                score = float(fields[2])
            except ValueError:
                raise ValueError(f"line {number}: the score {fields[2]!r} is not a number") from None
            rows.setdefault(source_ids[fields[0]], []).append((target_ids[fields[1]], score))
        width = top_k or max((len(row) for row in rows.values()), default=1)
        translations = np.full((len(source_vocabulary), width), -1, np.int32)
        scores = np.zeros((len(source_vocabulary), width), np.float32)
        for source_id, row in rows.items():
            for column, (target_id, score) in enumerate(row[:width]):
                translations[source_id, column], scores[source_id, column] = target_id, score
        return cls(translations=translations, scores=scores)


@dataclasses.dataclass(frozen=True)
class CandidateLists:
    """Candidate-list decoding's settings: the per-batch target vocabulary is the ``frequent``
    most frequent target tokens plus the ``per_word`` best translations in ``lexicon`` of each
    source token of the batch (Jean et al. 2015).

    Attributes:
        lexicon: `Lexicon`, over the model's vocabularies (its ``lexicon.tsv``).
        frequent: int >= the special tokens (4), the ids below it are always candidates.
        per_word: int >= 1, at most the lexicon's ``top_k`` translations per source token.

    Raises:
        ValueError: a bad ``frequent`` or ``per_word``.
    """

    lexicon: Lexicon
    frequent: int = 2000
    per_word: int = 10

    def __post_init__(self):
        for name, low in (("frequent", len(SPECIAL_TOKENS)), ("per_word", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"`{name}` must be an int >= {low}, got {value!r}.")

    @property
    def table(self) -> np.ndarray:
        """int32 (source_vocabulary_size, per_word): the translations used, -1 padded."""
        return self.lexicon.translations[:, : self.per_word]

    def variable(self, source_vocabulary_size: int, target_vocabulary_size: int) -> tf.Variable:
        """`table` as a variable (a SavedModel's saver restores it with the weights), once
        checked against the model's vocabularies.

        Raises:
            ValueError: the lexicon is another vocabulary's.
        """
        table = self.table
        if table.shape[0] != source_vocabulary_size or table.max(initial=-1) >= target_vocabulary_size:
            raise ValueError(f"The candidate lexicon covers {table.shape[0]:,} source tokens "
                             f"and target ids up to {table.max(initial=-1)}, not these "
                             f"vocabularies of {source_vocabulary_size:,} / "
                             f"{target_vocabulary_size:,} tokens: another model's lexicon.")
        return tf.Variable(table, trainable=False, name="candidate_translations")


def candidate_ids(table, source_ids, frequent, vocabulary_size, size=None):
    """The candidate list of a batch, in graph ops: int32 ``[C]`` target ids, ascending.

    Args:
        table: int32 ``[source_vocabulary, per_word]`` translations (`CandidateLists.table`,
            -1 where none), a tensor or variable.
        source_ids: int ``[rows, width]``, the batch's source ids (padding is id 0, whose
            row has no translation).
        frequent: int, the ids below it are always in the list (special tokens included).
        vocabulary_size: int, the target vocabulary.
        size: None: ``C`` is the list's own length (dynamic shape); an int (or int32 scalar)
            >= that length: the list padded with ``PAD_ID`` to ``size`` entries (a static
            shape for XLA; a search never generates PAD).

    Returns:
        int32 ``[C]``: the ids below ``frequent`` and every translation of a source id, each
        once, ascending (then the padding).
    """
    member = _listed(table, source_ids, frequent, vocabulary_size)
    count = tf.reduce_sum(tf.cast(member, tf.int32))
    listed = tf.argsort(tf.cast(~member, tf.int32), stable=True)  # members first, in id order
    if size is None:
        return listed[:count]
    return tf.where(tf.range(size) < count, listed[:size], PAD_ID)


def _listed(table, source_ids, frequent, vocabulary_size):
    """bool [vocabulary_size]: the ids of the batch's candidate list."""
    words = tf.reshape(tf.gather(table, tf.cast(source_ids, tf.int32)), [-1, 1])
    words = tf.maximum(tf.cast(words, tf.int32), PAD_ID)  # no translation (-1): PAD, listed anyway
    hits = tf.scatter_nd(words, tf.ones_like(words[:, 0]), [vocabulary_size]) > 0
    return hits | (tf.range(vocabulary_size) < frequent)


def candidate_projection(kernel, bias, candidates):
    """The output projection onto a candidate list's columns, gathered once per search:
    ``(kernel [features, C], bias [C])``. A padding entry (``PAD_ID`` after position 0) gets
    a ``-inf`` bias, so that its logit adds nothing to the softmax's normaliser (the restricted
    softmax is over the listed ids, each once)."""
    kernel, bias = tf.convert_to_tensor(kernel), tf.convert_to_tensor(bias)
    padding = tf.equal(candidates, PAD_ID) & (tf.range(tf.shape(candidates)[0]) > 0)
    bias = tf.where(padding, tf.constant(float("-inf"), bias.dtype), tf.gather(bias, candidates))
    return tf.gather(kernel, candidates, axis=1), bias


def candidate_count(table, source_ids, frequent, vocabulary_size):
    """int32 scalar: the length of `candidate_ids`'s list (before padding)."""
    return tf.reduce_sum(tf.cast(_listed(table, source_ids, frequent, vocabulary_size), tf.int32))


def candidate_bucket(count, vocabulary_size):
    """The padded size of a candidate list of ``count`` ids under XLA (one compilation per size):
    rounded up to a multiple of an eighth to a quarter of its power of two (at least 64), at
    most the vocabulary; works on Python ints and on int32 tensors."""
    if isinstance(count, (int, np.integer)):
        step = max(2 ** max(int(count).bit_length() - 3, 0), 64)
        return min(-(-int(count) // step) * step, int(vocabulary_size))
    count = tf.maximum(tf.cast(count, tf.int32), 1)
    bits = tf.cast(tf.math.floor(tf.math.log(tf.cast(count, tf.float32)) / np.log(2.0)), tf.int32) + 1
    step = tf.maximum(tf.bitwise.left_shift(1, tf.maximum(bits - 3, 0)), 64)
    return tf.minimum((count + step - 1) // step * step, vocabulary_size)


class _Counts:
    """Sparse sentence co-occurrence counts, merged chunk by chunk."""

    def __init__(self, source_size, target_size):
        self.source_size, self.target_size = source_size, target_size
        self.source_sentences = np.zeros(source_size, np.int64)
        self.target_sentences = np.zeros(target_size, np.int64)
        self.keys = np.zeros(0, np.int64)
        self.values = np.zeros(0, np.int64)
        self.pairs = 0

    def add(self, chunk, source_tokenizer, target_tokenizer):
        sources = source_tokenizer.tokenize([source for source, _ in chunk]).to_list()
        targets = target_tokenizer.tokenize([target for _, target in chunk]).to_list()
        keys = []
        for source_ids, target_ids in zip(sources, targets):
            source_set = np.unique(np.asarray(source_ids, np.int64))
            target_set = np.unique(np.asarray(target_ids, np.int64))
            source_set = source_set[source_set >= _FIRST_REGULAR_ID]
            target_set = target_set[target_set >= _FIRST_REGULAR_ID]
            self.source_sentences[source_set] += 1
            self.target_sentences[target_set] += 1
            keys.append((source_set[:, None] * self.target_size + target_set[None, :]).ravel())
        self.pairs += len(chunk)
        keys = np.concatenate(keys) if keys else np.zeros(0, np.int64)
        merged, inverse = np.unique(np.concatenate([self.keys, keys]), return_inverse=True)
        self.values = np.bincount(inverse, weights=np.concatenate([self.values, np.ones(len(keys), np.int64)]),
                                  minlength=len(merged)).astype(np.int64)
        self.keys = merged

    def lexicon(self, top_k):
        source_ids, target_ids = np.divmod(self.keys, self.target_size)
        dice = 2.0 * self.values / (self.source_sentences[source_ids] + self.target_sentences[target_ids])
        # per source id: best Dice first, then the lower target id
        order = np.lexsort((target_ids, -dice, source_ids))
        source_ids, target_ids, dice = source_ids[order], target_ids[order], dice[order]
        starts = np.searchsorted(source_ids, np.arange(self.source_size))
        rank = np.arange(len(source_ids)) - starts[source_ids]
        keep = rank < top_k
        translations = np.full((self.source_size, top_k), -1, np.int32)
        scores = np.zeros((self.source_size, top_k), np.float32)
        translations[source_ids[keep], rank[keep]] = target_ids[keep]
        scores[source_ids[keep], rank[keep]] = dice[keep]
        return Lexicon(translations=translations, scores=scores)
