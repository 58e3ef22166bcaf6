"""The alignment head trained after the translation model, whose weights stay frozen.

`bahdanau_tf.alignment.AlignmentHead` is an attention whose query has read the target word it
aligns (Garg et al. 2019; Chen et al. 2020's Shift-AET: an alignment module trained on the
model's own symmetrised links while the translation model stays fixed). Here:

- :func:`with_alignment_head`: the task `bahdanau_tf.models.RNNSearchAligner`, the trained model
  (its backbone, the same object) with a new (untrained) head;
- :func:`train_alignment_head`: trains the head alone on teacher-forced batches of
  `bahdanau_tf.data.make_dataset` carrying the attention targets q of word links
  (`AlignmentGuide.stage`), the cross-entropy of `bahdanau_tf.losses.guided_alignment_nll`
  averaged over the target tokens that have a target. Only the head's variables are updated
  and its inputs are stop-gradient: translations are those of the model without it. The
  frozen model runs once per batch; the head trains on its kept outputs, pass after pass.

The links may be any aligner's (eflomal's, ``bahdanau-data align``) or the model's own, both
directions made one (`bahdanau_tf.alignment.bidirectional_links`); the command line is
``bahdanau-alignment-head`` (`bahdanau_tf.cli.alignment_head`). A head learns P(source j |
target token i) with weight on the source ``[END]`` for an unaligned word when the guide is
built with ``unaligned="end"``.

Example:

    model = with_alignment_head(loaded.model, units=128)  # an RNNSearchAligner
    guide = AlignmentGuide.build(pairs, links, source, target, unaligned="end")
    batches = make_dataset(pairs, source, target, batch_size=64).apply(guide.stage())  # one pass
    train_alignment_head(model, batches, steps=2000)
    model.save_to_preset("model-with-head")
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bahdanau_tf import losses
from bahdanau_tf.models.aligner import RNNSearchAligner

#: the head's default size and training settings (`train_alignment_head`)
DEFAULT_UNITS = 128
DEFAULT_CONTEXT = 0
DEFAULT_LEARNING_RATE = 5e-3


def with_alignment_head(model, units: int = DEFAULT_UNITS, context: int = DEFAULT_CONTEXT) -> RNNSearchAligner:
    """The task `bahdanau_tf.models.RNNSearchAligner` of ``model`` (an `RNNSearch`) with a new
    alignment head of ``units`` units (and a target-side GRU of ``context`` units,
    `bahdanau_tf.alignment.AlignmentHead`), built.

    ``model`` itself is the task's backbone, not copied: the task translates exactly as it does,
    with its tokenizers. A task's head is replaced (its backbone gets the new one).

    Raises:
        ValueError: a model without attention, ``units`` < 1 or ``context`` < 0.
    """
    backbone = model.backbone if isinstance(model, RNNSearchAligner) else model
    if not getattr(backbone, "has_attention", False) or not hasattr(backbone, "alignment_head_inputs"):
        raise ValueError(f"an alignment head needs an RNNSearch model, got {type(model).__name__}.")
    if not backbone.built:
        backbone.build_variables()
    task = RNNSearchAligner(backbone, units, context)
    task.build()
    return task


def _frozen_features(model, element_spec):
    """The frozen model's teacher-forced forward pass, compiled: the head's float16 inputs."""
    (source, target_in, _), target_out = element_spec
    signature = [tf.TensorSpec([None] * len(spec.shape), spec.dtype)  # one trace for every shape
                 for spec in (source, target_in, target_out)]

    @tf.function(autograph=False, input_signature=signature)
    def features(source, target_in, target_out):
        annotations, mask, states, embeddings, target_mask = model.backbone.alignment_head_inputs(
            (source, target_in), target_out)
        return (tf.cast(annotations, tf.float16), mask, tf.cast(states, tf.float16),
                tf.cast(embeddings, tf.float16), target_mask)

    return features


def _head_step(model, optimizer):
    """One update of the head's weights on one batch of cached features; returns the loss."""
    variables = model.head.trainable_variables
    n, m = model.backbone.hidden_dim, model.backbone.embedding_dim  # the sizes of the head's query's parts
    signature = [tf.TensorSpec(shape, dtype) for shape, dtype in
                 (((None, None, 2 * n), tf.float16), ((None, None), tf.bool), ((None, None, n), tf.float16),
                  ((None, None, m), tf.float16), ((None, None), tf.bool), ((None, None, None), tf.float32))]

    @tf.function(autograph=False, input_signature=signature)
    def step(annotations, mask, states, embeddings, target_mask, targets):
        inputs = [tf.cast(x, model.head.compute_dtype) for x in (annotations, states, embeddings)]
        with tf.GradientTape() as tape:
            weights = model.head(inputs[0], mask, inputs[1], inputs[2], target_mask)
            rows = tf.reduce_sum(tf.cast(tf.reduce_sum(targets, -1) > 0, tf.float32))
            loss = tf.reduce_sum(losses.guided_alignment_nll(weights, targets)) / tf.maximum(rows, 1.0)
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    return step


def _cached_batches(model, dataset, steps: int, seed: int):
    """Batches of the head's inputs: the frozen model runs once per batch of ``dataset`` (at
    most ``steps`` batches), its outputs kept in float16; when ``dataset`` ends first, its
    batches come again, in a new order each pass (``seed``)."""
    features = _frozen_features(model, dataset.element_spec)
    cached = []
    for (source, target_in, targets), target_out in dataset.take(int(steps)):
        cached.append(tuple(x.numpy() for x in features(source, target_in, target_out)) + (targets.numpy(),))
        yield cached[-1]
    if not cached:
        raise ValueError("the dataset has no batches.")
    rng, left = np.random.default_rng(seed), int(steps) - len(cached)
    while left > 0:
        for index in rng.permutation(len(cached))[:left]:
            yield cached[index]
        left -= len(cached)


def train_alignment_head(model, dataset, steps: int, learning_rate: float = DEFAULT_LEARNING_RATE,
                         log=None, log_every: int = 100, seed: int = 1234) -> list:
    """Trains the alignment head of ``model`` (a `bahdanau_tf.models.RNNSearchAligner`) alone
    (Adam), for ``steps`` updates on ``dataset``.

    The backbone's weights are frozen (only the head's are updated), so its annotations, states and target
    embeddings of a batch never change while the head trains: they are computed once per batch
    of ``dataset`` (one compiled forward pass), kept in memory in float16, and each update runs
    the head alone on them. A finite ``dataset`` (one epoch) is read once and its batches come
    again, shuffled, until ``steps`` updates are made.

    Args:
        model: an `RNNSearchAligner` (`with_alignment_head`).
        dataset: batches ``((source, target_in, q), target_out)`` (`AlignmentGuide.stage`).
        steps: int, the number of updates.
        learning_rate: float, Adam's.
        log: optional callable given a progress line every ``log_every`` updates.
        seed: int, the order of the batches after the first pass.

    Returns:
        list of float, the mean loss of each ``log_every`` updates (the last group may be
        shorter).

    Raises:
        ValueError: not an `RNNSearchAligner`, ``steps`` < 1 or an empty dataset.
    """
    if not isinstance(model, RNNSearchAligner):
        raise ValueError("the model has no alignment head: with_alignment_head(model) first.")
    if int(steps) < 1:
        raise ValueError(f"`steps` must be positive, got {steps!r}.")
    optimizer = keras.optimizers.Adam(learning_rate)
    optimizer.build(model.head.trainable_variables)
    step = _head_step(model, optimizer)
    history, total, count = [], 0.0, 0
    for number, batch in enumerate(_cached_batches(model, dataset, steps, seed), start=1):
        total += float(step(*batch))
        count += 1
        if count == log_every or number == int(steps):
            history.append(total / count)
            if log is not None:
                log(f"alignment head: update {number:,}/{int(steps):,}, cross-entropy {history[-1]:.3f}")
            total, count = 0.0, 0
    return history


__all__ = ["DEFAULT_CONTEXT", "DEFAULT_LEARNING_RATE", "DEFAULT_UNITS", "train_alignment_head", "with_alignment_head"]
