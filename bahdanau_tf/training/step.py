"""The trainer's update and dev NLL as `tf.function`s, and their input (DESIGN §2).

`TrainingStep` is the part of `bahdanau_tf.training.Trainer` that runs on the device: one
update (loss and gradients under XLA where asked, the all-reduce over replicas, clipping of the
global norm, the optimizer's step, the counters the host reads), the dev NLL, and the seeded,
bucketed training and dev datasets they read. What one update does is told in
`bahdanau_tf.training`; the loop, the checkpoints and the report are `trainer`'s.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from bahdanau_tf import data
from bahdanau_tf import losses
from bahdanau_tf.special_tokens import PAD_ID
from bahdanau_tf.alignment.guided import guided_loss_sums

#: the batch shapes the step remembers to tell an XLA compilation (`TrainingStep._count_compilation`)
SHAPE_CAPACITY = 1024


class TrainingStep:
    """The step functions and the datasets of a `Trainer`, which is one (a base class, as
    Keras's ``Model`` is a ``Trainer``).

    They read what the trainer builds: ``model``, ``optimizer``, ``config`` (a
    `TrainingConfig`), ``strategy``, ``guide``, the tokenizers, and the counters of
    ``Trainer._make_state_variables``; `_make_step_functions` wraps them in `tf.function`s.
    """

    def _make_step_functions(self):
        """The train step, the dev step and their compiled parts."""
        config = self.config
        self._gradients = tf.function(self._loss_and_gradients, jit_compile=bool(config.jit_compile),
                                      autograph=False)
        self._forward_nll = tf.function(self._nll_sum, jit_compile=bool(config.jit_compile),
                                        autograph=False)
        # the update compiles with the step on one device; with several replicas (or a loss
        # scale) the optimizer's merge_call runs in the step's own graph: it cannot run under
        # XLA, nor inside a nested tf.function
        single = self.strategy.num_replicas_in_sync == 1 and not isinstance(
            self.optimizer, keras.optimizers.LossScaleOptimizer)
        self._update = (tf.function(self._clip_and_apply, jit_compile=True, autograph=False)
                        if config.jit_compile and single else self._clip_and_apply)
        self.train_step = tf.function(self._train_step, autograph=False)
        # one trace for all dev shapes
        self.eval_step = tf.function(self._eval_step, reduce_retracing=True, autograph=False)

    def _current_learning_rate(self) -> float:
        """The optimizer's learning rate now (its schedule's value at the current step, if any)."""
        value = self.optimizer.learning_rate
        if isinstance(value, keras.Variable):
            value = value.value
        return float(tf.convert_to_tensor(value))

    @tf.function(autograph=False)
    def _weights_finite(self):
        return tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in self.model.trainable_variables])

    def _label_smoothing(self):
        """The loss's epsilon: the budget rule's variable (0 while its plan gives no dropout) where
        the rule holds the run's label smoothing, else the config's float."""
        rule, smoothing = self.budget_rule, self.config.label_smoothing
        return rule.label_smoothing if rule is not None and smoothing else smoothing

    # === The step functions ===
    def _nll_sum(self, source, target_in, target_out):
        logits = self.model((source, target_in), training=False)
        return tf.reduce_sum(losses.token_nll(target_out, logits))

    def _loss_and_gradients(self, source, target_in, target_out, global_tokens, sampled_values=None,
                            alignment_targets=None):
        """(NLL sum, gradients of the objective: the NLL, label-smoothed if asked, + guided term)."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            guided = 0.0
            if alignment_targets is not None:  # guided alignment (`AlignmentGuide.stage`)
                nll_sum, objective, guided = guided_loss_sums(self.model, self.config, self.step, source,
                                                              target_in, target_out, alignment_targets,
                                                              self._label_smoothing())
            elif sampled_values is None:
                logits = self.model((source, target_in), training=True)
                nll, smoothed = losses.smoothed_token_nll(target_out, logits, self._label_smoothing())
                nll_sum, objective = tf.reduce_sum(nll), tf.reduce_sum(smoothed)
            else:  # the sampled softmax: the same W_o and bias, K + 1 of their columns
                features = self.model.output_features((source, target_in), training=True)
                kernel, bias = self.model.output_projection()
                nll_sum = objective = tf.reduce_sum(losses.sampled_token_nll(
                    target_out, features, kernel, bias, sampled_values))
            loss = (objective + guided) / global_tokens  # this replica's share of the global mean
            if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
                loss = self.optimizer.scale_loss(loss)
        return nll_sum, tape.gradient(loss, variables)

    def _replica_step(self, batch):
        inputs, target_out = batch
        source, target_in = inputs[:2]  # and q with guided alignment
        context = tf.distribute.get_replica_context()
        local_tokens = tf.reduce_sum(tf.cast(tf.not_equal(target_out, PAD_ID), "float32"))
        global_tokens = tf.maximum(context.all_reduce("sum", local_tokens), 1.0)
        sampled_values = None
        if self.config.sampled_softmax:  # drawn here: the log-uniform sampler has no XLA kernel
            choose = (losses.batch_candidates if self.config.sampled_proposal == "batch"
                      else losses.sample_candidates)
            sampled_values = choose(target_out, self.config.sampled_softmax,
                                    self.target_tokenizer.vocabulary_size)
        nll_sum, gradients = self._gradients(source, target_in, target_out, global_tokens, sampled_values,
                                             inputs[2] if len(inputs) > 2 else None)
        # embedding gradients come as IndexedSlices; dense ones all-reduce and scale uniformly
        gradients = [tf.convert_to_tensor(g) for g in gradients]
        gradients = context.all_reduce("sum", gradients)  # gradient of the global mean NLL
        scaled = isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)
        if scaled:
            scale = tf.cast(self.optimizer.dynamic_scale, "float32")
            gradients = [g / scale for g in gradients]
        norm = self._update(gradients, scale if scaled else None)
        sentences = tf.reduce_sum(tf.cast(tf.reduce_any(tf.not_equal(target_out, PAD_ID), axis=1), "int64"))
        shape = tf.cast(tf.concat([tf.shape(source), tf.shape(target_in)], 0), "int64")
        shape_key = (shape[0] * 65536 + shape[1]) * 65536 + shape[3]  # (batch, source, target) lengths
        return nll_sum, local_tokens, norm, sentences, shape_key

    def _clip_and_apply(self, gradients, scale=None):
        """The update from the gradient of the global mean NLL: its global norm (returned),
        clipping to ``clipnorm``, the optimizer's step. Compiled with XLA when the step is: as
        TensorFlow ops, a step of Adam is a few small ops per variable, each a kernel launch
        (benchmarks/train_step_profile.py)."""
        context = tf.distribute.get_replica_context()
        norm = tf.linalg.global_norm(gradients)
        if self.config.clipnorm is not None:
            gradients, _ = tf.clip_by_global_norm(gradients, self.config.clipnorm, use_norm=norm)
        # the optimizer sums over replicas again (and a loss scale optimizer unscales)
        factor = 1.0 / context.num_replicas_in_sync
        if scale is not None:
            factor = factor * scale
        if context.num_replicas_in_sync > 1 or scale is not None:
            gradients = [g * factor for g in gradients]
        self.optimizer.apply(gradients, self.model.trainable_variables)
        return norm

    def _train_step(self, iterator):
        batch = next(iterator)
        nll_sum, tokens, norm, sentences, shape_key = self.strategy.run(self._replica_step, (batch,))
        reduce = lambda value: self.strategy.reduce("sum", value, axis=None)  # noqa: E731
        nll_sum, tokens, sentences = reduce(nll_sum), reduce(tokens), reduce(sentences)
        norm = self.strategy.experimental_local_results(norm)[0]  # the same on every replica
        self._count_compilation(self.strategy.experimental_local_results(shape_key)[0], tokens)
        finite = tf.math.is_finite(nll_sum) & tf.math.is_finite(norm)
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
            finite = tf.math.is_finite(nll_sum)  # overflowing gradients are skipped and rescaled
        self.step.assign_add(1)
        self._first_nonfinite_step.assign(
            tf.where((self._first_nonfinite_step < 0) & ~finite, self.step, self._first_nonfinite_step)
        )
        self._loss_sum.assign_add(tf.cast(nll_sum, "float64"))
        self._token_count.assign_add(tf.cast(tokens, "float64"))
        self.sentences_seen.assign_add(sentences)
        self._grad_norm.assign(norm)

    def _count_compilation(self, shape_key, tokens):
        """Counts this update among the compiled ones when it traced the step (the first of
        this trainer) or, under XLA, met a batch shape not seen before."""
        compiled = tf.equal(self._updates_run, 0)
        if self.config.jit_compile:
            new_shape = tf.logical_not(tf.reduce_any(tf.equal(self._shapes_seen, shape_key)))
            slot = tf.range(SHAPE_CAPACITY, dtype="int64") == self._shapes_count
            self._shapes_seen.assign(tf.where(slot & new_shape, shape_key, self._shapes_seen))
            self._shapes_count.assign_add(tf.cast(new_shape & (self._shapes_count < SHAPE_CAPACITY), "int64"))
            compiled = compiled | new_shape
        self._updates_run.assign_add(1)
        self._compiled_updates.assign_add(tf.cast(compiled, "float64"))
        self._compiled_tokens.assign_add(tf.where(compiled, tf.cast(tokens, "float64"), 0.0))

    def _eval_step(self, batch):
        def replica(batch):
            (source, target_in), target_out = batch
            tokens = tf.reduce_sum(tf.cast(tf.not_equal(target_out, PAD_ID), "float32"))
            return self._forward_nll(source, target_in, target_out), tokens

        nll_sum, tokens = self.strategy.run(replica, (batch,))
        return self.strategy.reduce("sum", nll_sum, axis=None), self.strategy.reduce("sum", tokens, axis=None)

    # === Data ===
    def train_dataset(self, corpus: Any, skip_batches: int = 0, distribute: bool = True) -> tf.data.Dataset:
        """The training input: shuffled, repeated, bucketed, padded batches of ``batch_size`` rows.

        Args:
            corpus: a `ParallelCorpus` (or sequence of pairs), or a `CorpusFiles` stream.
            skip_batches: int, batches to skip (the data position of a resumed run).
            distribute: bool, return ``strategy.experimental_distribute_dataset(...)``.
        """
        config = self.config
        dataset = data.make_dataset(
            corpus,
            self.source_tokenizer,
            self.target_tokenizer,
            batch_size=config.batch_size,
            max_length=config.max_length,
            bucketing=config.bucketing,
            shuffle=True,
            seed=config.seed,
            repeat=True,
            shuffle_buffer_size=config.shuffle_buffer_size,
            pad_to_multiple=config.padding_multiple,
            fill_to_batch_size=True,
        )
        if self.guide is not None:
            dataset = dataset.apply(self.guide.stage())
        if skip_batches:
            dataset = dataset.skip(skip_batches)
        return self.strategy.experimental_distribute_dataset(dataset) if distribute else dataset

    def dev_dataset(self, corpus: Any) -> tf.data.Dataset:
        """The dev input: the first ``config.dev_sentences`` pairs of ``corpus`` in one sorted
        window (dense batches, few shapes to compile), filled and padded like the training
        batches, cached, distributed."""
        config = self.config
        corpus = corpus.select(slice(0, config.dev_sentences))
        dataset = data.make_dataset(
            corpus,
            self.source_tokenizer,
            self.target_tokenizer,
            batch_size=config.batch_size,
            max_length=config.max_length,
            bucketing="paper",
            shuffle=False,
            batches_per_window=max(1, -(-len(corpus) // config.batch_size)),
            pad_to_multiple=config.padding_multiple,
            fill_to_batch_size=True,
        )
        return self.strategy.experimental_distribute_dataset(dataset.cache())

    def evaluate(self, dev_dataset: Any) -> float:
        """Mean NLL per real target token of a (distributed) dev dataset."""
        total, tokens = 0.0, 0.0
        for batch in dev_dataset:
            nll_sum, count = self.eval_step(batch)
            total += float(nll_sum)
            tokens += float(count)
        return total / max(tokens, 1.0)
