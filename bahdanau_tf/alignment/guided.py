"""Guided alignment training: word links of the training pairs as targets for the attention.

Chen et al. (2016) and OpenNMT-tf (``guided_alignment_type: ce``) add to the NLL a
cross-entropy between the attention and given alignments
(`bahdanau_tf.losses.guided_alignment_nll`); Garg et al. (2019) show attention trained on a
statistical aligner's links aligning as well as the aligner. Here:

- :class:`AlignmentGuide` holds the links of a corpus's pairs (Pharaoh word links, e.g. from
  ``bahdanau-data align``), mapped onto the model's tokens: target token t of word w gets the
  distribution q_t, uniform over the source tokens of the words linked to w (all their
  pieces); ``[END]`` and padding get none and cost nothing. A target word without a link
  gets none either (``unaligned="free"``), or all its weight on the source ``[END]``
  (``unaligned="end"``), the position the extraction rules read as "no word" (Och & Ney's
  NULL): the attention then learns to leave such words unaligned, where a statistical aligner
  leaves about a fifth of the words;
  `AlignmentGuide.stage` is a ``dataset.apply`` stage that adds q to the batches of
  `bahdanau_tf.data.make_dataset`: ``((source, target_in, q), target_out)``. A batch row is
  matched to its pair by its token ids (a hash table of the pairs' ids), so the batching,
  sorting and filling of the input pipeline need not know about links;
- the trainer (`bahdanau_tf.training.Trainer`, ``guided_alignment=``; ``bahdanau-train
  --guided_alignment=FILE``) adds ``weight * decay ** (step / 1000)`` times the mean
  cross-entropy per target token to its loss; Keras ``fit`` users wrap the model in
  :class:`GuidedAlignmentModel`, which does the same with ``add_loss``.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from bahdanau_tf import losses
from bahdanau_tf.alignment.extraction import token_word_ids
from bahdanau_tf.special_tokens import END_ID, PAD_ID, START_ID
from bahdanau_tf.text import split_words

#: sentences tokenized at a time while building a guide
_BUILD_BATCH = 1024

# TF ops only: tf.data need not run AutoGraph's conversion (as in `bahdanau_tf.data`)
_graph_only = tf.autograph.experimental.do_not_convert


def _key_strings(source_rows: Sequence[Sequence[int]], target_rows: Sequence[Sequence[int]]) -> list:
    """The Python twin of `_batch_keys`: ``"ids of source + [END]|[START] + ids of target"``."""
    return [" ".join(map(str, list(s) + [END_ID])) + "|" + " ".join(map(str, [START_ID] + list(t)))
            for s, t in zip(source_rows, target_rows)]


def _batch_keys(source: tf.Tensor, target_in: tf.Tensor) -> tf.Tensor:
    """Each row's key (tf.string [batch]) from a padded batch's ids (padding stripped)."""
    def joined(ids):
        ragged = tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int32), padding=PAD_ID)
        return tf.strings.reduce_join(tf.strings.as_string(ragged), axis=1, separator=" ")

    return tf.strings.join([joined(source), joined(target_in)], separator="|")


#: what a target word without links is trained towards (`AlignmentGuide.build`)
UNALIGNED = ("free", "end")


def check_word_links(pairs, word_links) -> None:
    """Refuses word links that do not match their pairs, before anything is built from them:
    a file of other pairs, shifted by a line or 1-based would otherwise lose the links that
    name words a pair does not have, without a word (and train unguided if it lost them all).

    Args:
        pairs: iterable of (source, target) str pairs.
        word_links: per pair, ``(source_word, target_word)`` links of
            :func:`bahdanau_tf.text.split_words` words, 0-based; may be longer than ``pairs``.

    Raises:
        ValueError: fewer link lines than pairs; a link to a word its pair does not have (the
            line, the link and the pair's word counts named); no link at all.
    """
    pairs = list(pairs)
    if len(word_links) < len(pairs):
        raise ValueError(f"{len(word_links):,} lines of alignments for {len(pairs):,} training "
                         "pairs: one line per pair is needed.")
    for number, ((source, target), links) in enumerate(zip(pairs, word_links), start=1):
        sizes = len(split_words(source)), len(split_words(target))
        for link in sorted(links):
            if link[0] >= sizes[0] or link[1] >= sizes[1]:
                raise ValueError(
                    f"line {number} links {link[0]}-{link[1]}, but training pair {number} has "
                    f"{sizes[0]} source and {sizes[1]} target words (0-based indices): the file "
                    "does not match the training pairs (one line per pair, in their order).")
    if pairs and not any(word_links[:len(pairs)]):
        raise ValueError(f"no word links for the {len(pairs):,} training pairs: every line is empty.")


def _token_links(word_links, source_tokens, target_tokens, unaligned="free"):
    """(target token, source token, weight) triples of one pair: q rows summing to 1. The
    source ``[END]`` is at ``len(source_tokens)``: the batches' source rows end with it."""
    source_words, target_words = token_word_ids(source_tokens), token_word_ids(target_tokens)
    pieces: dict[int, list[int]] = {}
    for position, word in enumerate(source_words):
        if word is not None:
            pieces.setdefault(word, []).append(position)
    linked: dict[int, set[int]] = {}
    for source_word, target_word in word_links:
        linked.setdefault(target_word, set()).update(pieces.get(source_word, ()))
    triples = []
    for position, word in enumerate(target_words):
        sources = sorted(linked.get(word, ())) if word is not None else []
        if word is not None and not sources and unaligned == "end":
            sources = [len(source_tokens)]
        triples.extend((position, s, 1.0 / len(sources)) for s in sources)
    return triples


class AlignmentGuide:
    """The attention targets q of a corpus's pairs, found by a batch row's token ids.

    Build it with :meth:`build`; `stage` adds q to `bahdanau_tf.data.make_dataset`'s batches.
    Its memory grows with the links (12 bytes a token link: tens of MB for the Bible).

    Example:

        guide = AlignmentGuide.build(train.pairs(), read_pharaoh("train.links"), source, target)
        dataset = make_dataset(train, source, target).apply(guide.stage())
        model = GuidedAlignmentModel(RNNSearch.from_preset("small", ...), weight=1.0)
        model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy())
        model.fit(dataset)
    """

    def __init__(self, keys: list, links: list):
        self.pairs = len(keys)
        rows = {}
        for row, key in enumerate(keys):
            rows.setdefault(key, row)  # a pair repeated in the corpus keeps its first links
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(list(rows), tf.string),
                                                tf.constant(list(rows.values()), tf.int64)),
            default_value=-1)
        links = list(links) + [[]]  # the last row: a batch row of no pair (filling, another text)
        lengths = [len(triples) for triples in links]
        flat = np.asarray([t for triples in links for t in triples], np.float64).reshape([-1, 3])
        self._positions = tf.RaggedTensor.from_row_lengths(
            tf.constant(flat[:, :2].astype(np.int64)), tf.constant(lengths, tf.int64))
        self._weights = tf.RaggedTensor.from_row_lengths(
            tf.constant(flat[:, 2].astype(np.float32)), tf.constant(lengths, tf.int64))
        self.links = int(flat.shape[0])

    @classmethod
    def build(cls, pairs, word_links, source_tokenizer, target_tokenizer,
              unaligned: str = "free") -> "AlignmentGuide":
        """A guide from (source, target) str pairs and their word links, one set per pair.

        Args:
            pairs: iterable of (source, target) str pairs (a `ParallelCorpus`'s ``pairs()``).
            word_links: per pair, ``(source_word, target_word)`` links of
                :func:`bahdanau_tf.text.split_words` words (e.g. `bahdanau_tf.alignment.
                read_pharaoh`); may be longer than ``pairs`` (its first entries are used).
            source_tokenizer, target_tokenizer: the model's tokenizers.
            unaligned: ``"free"`` (a target word without links costs nothing) or ``"end"``
                (it is trained to attend to the source ``[END]``: unaligned).

        Raises:
            ValueError: links that do not match the pairs (`check_word_links`), or an unknown
                ``unaligned``.
        """
        if unaligned not in UNALIGNED:
            raise ValueError(f"`unaligned` must be one of {UNALIGNED}, got {unaligned!r}.")
        pairs, word_links = list(pairs), list(word_links)
        check_word_links(pairs, word_links)
        keys, links = [], []
        for start in range(0, len(pairs), _BUILD_BATCH):
            chunk = pairs[start:start + _BUILD_BATCH]
            sources, targets = [p[0] for p in chunk], [p[1] for p in chunk]
            sides = [(t.tokenize(x).to_list(), [[w.decode("utf-8") for w in row] for row in
                                                 t.tokens(x).to_list()])
                     for t, x in ((source_tokenizer, sources), (target_tokenizer, targets))]
            (source_ids, source_tokens), (target_ids, target_tokens) = sides
            keys.extend(_key_strings(source_ids, target_ids))
            for k, pair_links in enumerate(word_links[start:start + len(chunk)]):
                same = (len(source_ids[k]) == len(source_tokens[k])
                        and len(target_ids[k]) == len(target_tokens[k]))
                links.append(_token_links(pair_links, source_tokens[k], target_tokens[k],
                                          unaligned) if same else [])
        return cls(keys, links)

    def targets(self, source: tf.Tensor, target_in: tf.Tensor) -> tf.Tensor:
        """q (batch, target_len, source_len) float32 of a batch's rows (zeros for a row of no
        pair of the guide); string ops: outside a ``jit_compile`` function."""
        rows = self._table.lookup(_batch_keys(source, target_in))
        rows = tf.where(rows < 0, tf.cast(self.pairs, tf.int64), rows)
        positions, weights = tf.gather(self._positions, rows), tf.gather(self._weights, rows)
        indices = tf.concat([positions.value_rowids()[:, None], positions.flat_values], axis=1)
        shape = tf.cast(tf.stack([tf.shape(source)[0], tf.shape(target_in)[1], tf.shape(source)[1]]),
                        tf.int64)
        return tf.scatter_nd(indices, weights.flat_values, shape)

    def attach(self, inputs, target_out):
        """One batch: ``((source, target_in), target_out)`` -> ``((source, target_in, q),
        target_out)``."""
        source, target_in = inputs
        return (source, target_in, self.targets(source, target_in)), target_out

    def stage(self):
        """The ``dataset.apply`` stage that `attach`es q to every batch of `make_dataset`."""
        return lambda dataset: (dataset.map(_graph_only(self.attach), num_parallel_calls=tf.data.AUTOTUNE)
                                .prefetch(tf.data.AUTOTUNE))


def guided_loss_sums(model, config, step, source, target_in, target_out, alignment_targets,
                     label_smoothing):
    """(NLL sum, its label-smoothed sum (epsilon ``label_smoothing``: a float, or the budget
    rule's variable), the weighted attention cross-entropy sum) of one teacher-forced training
    pass, the weight ``config.guided_alignment_weight`` decayed to ``step``: the trainer's hook."""
    logits, attention = model.logits_and_attention((source, target_in), training=True)
    weight = losses.guided_alignment_weight(config.guided_alignment_weight,
                                            config.guided_alignment_decay, step)
    nll, smoothed = losses.smoothed_token_nll(target_out, logits, label_smoothing)
    return (tf.reduce_sum(nll), tf.reduce_sum(smoothed),
            weight * tf.reduce_sum(losses.guided_alignment_nll(attention, alignment_targets)))


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class GuidedAlignmentModel(keras.Model):
    """A model with attention trained by Keras ``fit`` with guided alignment.

    It takes the batches of ``make_dataset(...).apply(guide.stage())`` (`AlignmentGuide`) and
    adds ``weight`` times the attention's cross-entropy against q, averaged over the real
    target tokens, to the compiled loss (``add_loss``). Its ``model`` is the trained one:
    translate, save and export that.

    Args:
        model: a `bahdanau_tf.models.RNNSearch` (a model with ``logits_and_attention``).
        weight: float, the guided term's weight.
    """

    def __init__(self, model, weight: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        if not getattr(model, "has_attention", False):
            raise ValueError(f"guided alignment needs a model with attention, got {type(model).__name__}.")
        self.model, self.weight = model, float(weight)

    def fit(self, x=None, *args, **kwargs):
        """Keras's ``fit``; a dataset is taken as batched and shuffled (``make_dataset``)."""
        if isinstance(x, tf.data.Dataset) and "shuffle" not in kwargs and len(args) < 8:
            kwargs["shuffle"] = False
        return super().fit(x, *args, **kwargs)

    def call(self, inputs, training=False):
        source, target_in, alignment_targets = inputs
        logits, attention = self.model.logits_and_attention((source, target_in), training=training)
        cross_entropy = tf.reduce_sum(losses.guided_alignment_nll(attention, alignment_targets))
        tokens = tf.reduce_sum(tf.cast(tf.not_equal(target_in, PAD_ID), "float32"))
        self.add_loss(self.weight * cross_entropy / tf.maximum(tokens, 1.0))
        return logits


__all__ = ["AlignmentGuide", "GuidedAlignmentModel", "check_word_links", "guided_loss_sums"]
