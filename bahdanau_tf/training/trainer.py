"""The trainer loop (DESIGN §2): the paper's procedure in one `tf.function` step.

See `bahdanau_tf.training` for what one update does; the run directory, the summaries and
the report are the sibling modules'.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

import keras
import tensorflow as tf

from bahdanau_tf import checkpoint_averaging
from bahdanau_tf import data
from bahdanau_tf import devices
from bahdanau_tf import files
from bahdanau_tf import model_directory as model_directory_lib
from bahdanau_tf import models as models_lib
from bahdanau_tf import presets
from bahdanau_tf import pretrained
from bahdanau_tf.models import regularization
from bahdanau_tf.training.budget import Budget, BudgetRule, WorkerVote
from bahdanau_tf.training.config import (
    TrainingConfig,
    check_kept_recipe,
    is_chief,
    make_optimizer,
    make_strategy,
)
from bahdanau_tf.training.dev_schedule import DevSchedule
from bahdanau_tf.training.step import SHAPE_CAPACITY, TrainingStep
from bahdanau_tf.training.progress import (
    DEFAULT_LOG_EVERY,
    DevSet,
    RunState,
    Throughput,
    log_cadence,
)
from bahdanau_tf.training.run_directory import (
    LOGS,
    RunDirectory,
    StopSignals,
    TrainingInterrupted,
    training_report,
)
from bahdanau_tf.training.summaries import DevTranslations, Summaries


#: the checkpoint's parts that a checkpoint written before them lacks (restored without them)
_ADDED_PARTS = ("dev_schedule", "dropout_seeds", "window_nll_sum", "window_tokens", "train_nll",
                "dev_nll", "dev_step", "budget_regularization", "budget_label_smoothing")


class NonFiniteLossError(RuntimeError):
    """Training stopped because the loss or the gradient became NaN or infinite."""


class Trainer(TrainingStep):
    """Trains a model of a preset on a parallel corpus and writes its model directory.

    The model is built inside the strategy's scope, with the vocabulary sizes of the tokenizers
    and the dtype policy of ``config.precision``. When ``output_dir`` already holds a model, its
    config must match (`model_directory.check_same_model`) and training resumes from the latest
    checkpoint (step, weights, optimizer state, elapsed wall time, and the data position: the
    seeded input pipeline skips the batches already used).

    TensorBoard (``tensorboard --logdir OUT/logs``; the package is the ``[tensorboard]`` extra):
    ``train/nll``, ``train/gradient_norm``, ``train/learning_rate``, ``train/tokens_per_second``
    at each progress line (`bahdanau_tf.training.progress.log_cadence`: every ``log_every``
    steps, or about 50 points over the run; the throughput leaves out the updates that
    compiled, `bahdanau_tf.training.progress.Throughput`); ``dev/nll`` at every dev evaluation,
    the last step's included; and, at the first evaluation, every ``dev_bleu_every``-th and the last, from a greedy
    translation of the first ``dev_bleu_sentences`` dev pairs (of the ``dev_sentences``): ``dev/bleu`` (sacrebleu, as
    `bahdanau_tf.evaluation.corpus_bleu`), ``dev/translations`` (text: source, reference and
    translation of the first 4) and ``dev/attention_0``, ``dev/attention_1`` (images of the
    attention on two fixed dev sentences, figure 3; models with attention only).

    Args:
        output_dir: str, the model directory (created if needed).
        source_tokenizer, target_tokenizer: tokenizers of `bahdanau_tf.text`.
        preset: str, a name of `bahdanau_tf.presets.preset_names()` (default `presets.DEFAULT`).
        config: `TrainingConfig`; defaults to ``TrainingConfig.for_preset(preset)``.
        model_overrides: dict of constructor arguments overriding the preset's.
        strategy: a `tf.distribute.Strategy` or a name of `STRATEGIES` (default: the default one).
        settings: dict saved in ``model.json`` (e.g. direction, tokenizer kind, corpus).
        log: callable taking a str, for progress lines (default: print to stderr).
        guide: an `AlignmentGuide` of the training pairs: guided alignment training.

    Example:

        corpus = corpora.load_corpus("bible-en-es", split="train")
        source = text.SubwordTokenizer.build(corpus.sources, vocabulary_size=5000)
        target = text.SubwordTokenizer.build(corpus.targets, vocabulary_size=5000)
        trainer = Trainer("/tmp/run", source, target, preset="small",
                          config=TrainingConfig.for_preset("small", max_minutes=10))
        report = trainer.fit(corpus, corpora.load_corpus("bible-en-es", split="dev"))
    """

    def __init__(
        self,
        output_dir: str,
        source_tokenizer: Any,
        target_tokenizer: Any,
        preset: str = presets.DEFAULT,
        config: TrainingConfig | None = None,
        model_overrides: dict | None = None,
        strategy: tf.distribute.Strategy | str | None = None,
        settings: dict | None = None,
        log: Callable[[str], None] | None = None,
        guide: Any = None,
    ) -> None:
        output_dir = pretrained.as_path(output_dir)  # a path, even when named like a shipped model
        self.output_dir = output_dir
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.preset = preset
        self.config = config or TrainingConfig.for_preset(preset)
        self.model_overrides = dict(model_overrides or {})
        if strategy is None or isinstance(strategy, str):
            strategy = make_strategy(strategy or "default")
        self.strategy = strategy
        self.settings = dict(settings or {})
        self.guide = guide
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.is_chief = is_chief(strategy)
        # non-chief workers of a multi-worker run write their (identical) checkpoints elsewhere
        self._write_dir = output_dir if self.is_chief else tempfile.mkdtemp(prefix="bahdanau_worker_")
        self._restored = None
        self.directory = RunDirectory(output_dir, self.is_chief)
        self._signals = StopSignals(self._log)
        self._vote = WorkerVote(strategy, self.config.log_every or DEFAULT_LOG_EVERY)
        self._summaries = Summaries(None)
        self._build()
        self._dev_translations = DevTranslations(self.model, source_tokenizer, target_tokenizer, self.config)

    # === Construction ===
    def _build(self):
        config = self.config
        vocabulary = self.target_tokenizer.vocabulary_size
        if config.sampled_softmax is not None and config.sampled_softmax >= vocabulary:
            raise ValueError(f"--sampled_softmax={config.sampled_softmax} must be below the target "
                             f"vocabulary size ({vocabulary:,}): the full softmax is cheaper then.")
        keras.utils.set_random_seed(config.seed)  # the same initialisation on every worker and rerun
        with self.strategy.scope():
            self.model = models_lib.model_from_preset(
                self.preset,
                **{
                    "source_vocabulary_size": self.source_tokenizer.vocabulary_size,
                    "target_vocabulary_size": self.target_tokenizer.vocabulary_size,
                    "dtype": config.precision,
                    **self.model_overrides,
                },
            )
            self.model.build_variables()
            if self.guide is not None and (config.sampled_softmax or not self.model.has_attention):
                raise ValueError("guided alignment needs a model with attention and the full softmax.")
            self._steps_per_epoch = tf.Variable(1, dtype="int64", trainable=False, name="steps_per_epoch")
            # the spent fraction of the wall-time budget, read by the "budget" schedule
            self._time_progress = tf.Variable(0.0, dtype="float32", trainable=False, name="time_progress")
            self.optimizer = make_optimizer(config, steps_per_epoch=self._steps_per_epoch,
                                            time_progress=self._time_progress)
            self.optimizer.build(self.model.trainable_variables)
            # the budget rule's dropout, unless the model has rates of its own (given, 0 included)
            own = [name for name in regularization.DROPOUT_ARGUMENTS
                   if name in self.model_overrides or getattr(self.model, name)]
            self.budget_rule = (BudgetRule(self.model, config.label_smoothing)
                                if config.regularization == "budget" and not own else None)
            if self.budget_rule is not None:
                self.budget_rule.attach()
            if config.regularization == "budget" and own:
                self._log(f"Dropout as given ({', '.join(f'{name}={getattr(self.model, name):g}' for name in own)}): "
                          "the budget rule (--regularization=budget) is off.")
            self._make_state_variables()
            self.dev_schedule = DevSchedule(config)
        self._make_checkpoints()
        self._make_step_functions()

    def _make_checkpoints(self):
        """The training state's checkpoint, the best checkpoint's manager, the copies around
        the best (``average_at="best"``)."""
        config = self.config
        # dropout's seed states (no tf.train dependency of the model's): so a resumed run draws
        # the masks the uninterrupted one would
        seeds = [variable.value for variable in self.model.variables if variable.path.endswith("seed_generator_state")]
        self._checkpoint_parts = dict(
            model=self.model, optimizer=self.optimizer, step=self.step, sentences_seen=self.sentences_seen,
            elapsed_seconds=self.elapsed_seconds, best_dev_nll=self.best_dev_nll, best_step=self.best_step,
            dev_schedule=self.dev_schedule, dropout_seeds=seeds,
            window_nll_sum=self._loss_sum, window_tokens=self._token_count, train_nll=self._last_train_nll,
            dev_nll=self._last_dev_nll, dev_step=self._last_dev_step)
        if self.budget_rule is not None:
            self._checkpoint_parts.update(self.budget_rule.checkpoint_parts())
        self.checkpoint = tf.train.Checkpoint(**self._checkpoint_parts)
        self._checkpoints_dir = os.path.join(self._write_dir, model_directory_lib.CHECKPOINTS)
        self._around_best = None
        if config.average_at == "best" and config.average_last >= 2:
            self._around_best = checkpoint_averaging.AroundBest(
                os.path.join(self._write_dir, checkpoint_averaging.AROUND_BEST), config.average_last)
        self.best_manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(model=self.model, step=self.step),
            os.path.join(self._write_dir, model_directory_lib.BEST),
            max_to_keep=1,
            step_counter=self.step,
        )

    def _make_state_variables(self):
        """The training state (the checkpoint's counters) and the host's counters, in the
        strategy's scope."""
        # training state (all in the checkpoint)
        self.step = tf.Variable(0, dtype="int64", trainable=False, name="step")
        self.sentences_seen = tf.Variable(0, dtype="int64", trainable=False, name="sentences_seen")
        self.elapsed_seconds = tf.Variable(0.0, dtype="float64", trainable=False, name="elapsed_seconds")
        self.best_dev_nll = tf.Variable(math.inf, dtype="float64", trainable=False, name="best_dev_nll")
        self.best_step = tf.Variable(-1, dtype="int64", trainable=False, name="best_step")
        # read by the host at each progress line (`log_cadence`), then reset; in the checkpoint
        # with the last train and dev NLL, so that a resumed run reports what the uninterrupted
        # one would (its window of updates goes on, a finished run is not evaluated again)
        self._loss_sum = tf.Variable(0.0, dtype="float64", trainable=False, name="loss_sum")
        self._token_count = tf.Variable(0.0, dtype="float64", trainable=False, name="token_count")
        self._last_train_nll = tf.Variable(math.nan, dtype="float64", trainable=False, name="train_nll")
        self._last_dev_nll = tf.Variable(math.nan, dtype="float64", trainable=False, name="dev_nll")
        self._last_dev_step = tf.Variable(-1, dtype="int64", trainable=False, name="dev_step")
        # the updates that compiled (the first, which traces; under XLA each new batch
        # shape) and their tokens, left out of the throughput (`progress.Throughput`)
        self._compiled_updates = tf.Variable(0.0, dtype="float64", trainable=False, name="compiled_updates")
        self._compiled_tokens = tf.Variable(0.0, dtype="float64", trainable=False, name="compiled_tokens")
        self._updates_run = tf.Variable(0, dtype="int64", trainable=False, name="updates_run")
        self._shapes_seen = tf.Variable(tf.fill([SHAPE_CAPACITY], tf.constant(-1, "int64")),
                                        trainable=False, name="shapes_seen")
        self._shapes_count = tf.Variable(0, dtype="int64", trainable=False, name="shapes_count")
        self._grad_norm = tf.Variable(0.0, dtype="float32", trainable=False, name="gradient_norm")
        self._first_nonfinite_step = tf.Variable(-1, dtype="int64", trainable=False, name="first_nonfinite")

    def restore(self) -> str | None:
        """Takes the output directory (a lock) and restores its latest checkpoint, if any.

        An existing model directory must be complete (`model_directory.check_model_directory`)
        and hold the same model (`model_directory.check_same_model`), else ValueError. Nothing
        is written yet: ``model.json`` and the vocabularies are written with the first
        checkpoint, so a run that fails before it leaves no model directory behind.

        Returns:
            str, the restored checkpoint's path, or None for a fresh start.

        Raises:
            DirectoryInUseError: another process holds the directory.
            ValueError: a half-written directory, or one that holds another model.
        """
        if self._restored is not None:
            return self._restored[0]
        self.directory.take()
        try:
            latest = self._check_and_restore()
        except BaseException:
            self.directory.refuse()  # a refused directory is left as it was found
            raise
        self._restored = (latest,)
        return latest

    def _check_and_restore(self):
        """`restore` once the directory is ours: checks, then the latest checkpoint, if any."""
        self.directory.check(self.model)
        self._check_recipe()
        latest = model_directory_lib.latest_checkpoint(self.output_dir, which="latest")
        names = {name.split("/", 1)[0] for name, _ in tf.train.list_variables(latest)} if latest else set()
        weights = os.path.join(self.output_dir, model_directory_lib.WEIGHTS)
        if tf.io.gfile.exists(weights) or (latest and not {"optimizer", "step"} <= names):  # save_to_preset's
            raise ValueError(
                f"{self.output_dir!r} holds a saved model without training state ({latest or weights} "
                "has no optimizer or step): it cannot be resumed; pass another --output_dir")
        if latest:
            # a checkpoint written before some of its parts were: without them
            parts = {key: value for key, value in self._checkpoint_parts.items()
                     if key in names or key not in _ADDED_PARTS}
            tf.train.Checkpoint(**parts).restore(latest).assert_existing_objects_matched()
            if self.config.schedule == "plateau":
                self.optimizer.learning_rate = self.dev_schedule.learning_rate
            self._adopt_averaged_best()
            if self._around_best is not None:
                self._around_best.write_restored(self.model, int(self.step.numpy()), int(self.best_step.numpy()),
                                                 self.config.checkpoint_every, self.config.max_steps)
            self._log(
                f"Resuming from {latest}: step {int(self.step.numpy())}, "
                f"{self.elapsed_seconds.numpy() / 60:.1f} min trained so far."
            )
        return latest

    def _check_recipe(self):
        """A resumed run keeps its training recipe (``model.json``'s,
        `check_kept_recipe`): another one is refused (ValueError) before anything is restored."""
        if not self.directory.has_model_config():
            return
        saved = model_directory_lib.read_model_config(self.output_dir).get("settings", {}).get("training")
        saved = saved if isinstance(saved, dict) else {}
        if "regularization" not in saved and self.budget_rule is not None:
            self._keep_older_recipe()
        if self.is_chief:
            check_kept_recipe(self.output_dir, saved, dataclasses.asdict(self.config))

    def _keep_older_recipe(self):
        """A run trained by a release before the budget rule resumes without it (its recipe)."""
        self.budget_rule.detach()
        for part in self.budget_rule.checkpoint_parts():
            self._checkpoint_parts.pop(part)
        self.budget_rule = None
        self.config.regularization = "none"
        self.checkpoint = tf.train.Checkpoint(**self._checkpoint_parts)
        self._log(f"{self.output_dir!r} was trained without the budget rule: it resumes without it "
                  "(--regularization=none).")

    def _adopt_averaged_best(self):
        """After a restore: when ``best/`` holds the average the run's end made
        (`checkpoint_averaging.averaged_best`), its dev NLL is the one to beat."""
        adopted = checkpoint_averaging.averaged_best(self.output_dir)
        if adopted is not None and adopted[0] < float(self.best_dev_nll.numpy()):
            self.best_dev_nll.assign(adopted[0])
            self.best_step.assign(adopted[1])

    def _write_model_config(self):
        """``model.json`` and the vocabularies, with the first checkpoint (see `restore`)."""
        settings = {"preset": self.preset, "training": dataclasses.asdict(self.config), **self.settings}
        self.directory.write_model_config(self.model, self.source_tokenizer, self.target_tokenizer,
                                          settings, device=self.config.device_record())

    def close(self):
        """Releases the output directory (`fit` does it when it returns or raises)."""
        self.directory.release()
        self._restored = None

    # === The loop ===
    def fit(self, train_corpus: Any, dev_corpus: Any = None, start_time: float | None = None) -> dict:
        """Trains until a budget is spent or early stopping; returns the report (table 2).

        Args:
            train_corpus: `bahdanau_tf.corpora.ParallelCorpus` (or sequence of (source, target) pairs),
                or a `bahdanau_tf.corpora.CorpusFiles` stream (read as training goes; its size
                is estimated, `data.count_pairs`, and the progress line marks the epoch ``~``).
            dev_corpus: optional, its first ``config.dev_sentences`` pairs give the dev NLL.
            start_time: ``time.time()`` at which the wall-time budget started (default: now), so
                a command line can count its own setup time.

        Returns:
            dict, also written to ``OUT/report.json``: updates, epochs, wall time, device, train
            NLL, dev NLL, best dev NLL and its step, why training stopped, tokens/s, ...

        Raises:
            NonFiniteLossError: the loss became NaN or infinite (the last good checkpoint is kept).
            TrainingInterrupted: SIGINT or SIGTERM; the current update finished, then a
                checkpoint and ``report.json`` were written (``error.report``).
            DirectoryInUseError: another process trains into ``output_dir``.
            ValueError: an empty corpus, or a directory that is half-written or holds another
                model. A run that fails before its first checkpoint leaves ``output_dir`` as it
                found it.
        """
        start_time = time.time() if start_time is None else start_time
        self.restore()
        self.directory.note_new_entries()
        try:
            with self._signals:
                run = self._fit(train_corpus, dev_corpus, start_time)
        except BaseException:
            self._summaries.close()
            self.directory.abandon_fresh_start()
            raise
        finally:
            self.close()
        if self._signals.received is not None:
            raise TrainingInterrupted(self._signals.received, run.report)
        return run.report

    def _fit(self, train_corpus, dev_corpus, start_time):
        config = self.config
        run = self._start_run(train_corpus, dev_corpus, start_time)
        if run.resumed_step:
            self._log(f"Skipping the {run.resumed_step} batches already trained on (same seeded data order).")
        iterator = iter(self.train_dataset(train_corpus, skip_batches=run.resumed_step))
        dev = (DevSet(dev_corpus, self.dev_dataset(dev_corpus)) if dev_corpus is not None and len(dev_corpus)
               else None)
        self._summaries = Summaries(os.path.join(self.output_dir, LOGS)
                                    if config.summaries and self.is_chief else None)
        run.cadence = log_cadence(config.max_steps, config.max_minutes, config.log_every)
        run.throughput = Throughput()
        run.start = run.window_start = time.time()
        run.step = run.window_step = run.resumed_step
        while run.stopped is None:
            run.stopped = self._budget_spent(run)
            if run.stopped:
                break
            started = time.time()
            self._follow_budget(run, started)
            self.train_step(iterator)
            ended = time.time()
            run.throughput.add_update(ended - started)
            run.budget.add_update(ended - started, ended)
            run.step += 1
            if run.cadence.due(run.step, time.time() - run.window_start):
                self._log_progress(run)
            if dev is not None and run.step % config.eval_every == 0:
                evaluated = time.time()
                self._evaluate_dev(run, dev)
                now = time.time()
                run.budget.add_evaluation(now - evaluated, now)
            if run.step % config.checkpoint_every == 0:
                with run.budget.timed("checkpoints"):
                    self._save(run)
        self._finish(run, dev, train_corpus)
        return run

    def _start_run(self, train_corpus, dev_corpus, start_time):
        """The run's state (`RunState`): the corpus counted and checked, the header line, and
        what the checkpoint holds of the figures so far (the last train and dev NLL)."""
        config = self.config
        run = RunState(resumed_step=int(self.step.numpy()), elapsed_before=float(self.elapsed_seconds.numpy()))
        counts = data.count_pairs(train_corpus, self.source_tokenizer, self.target_tokenizer,
                                  config.max_length)
        run.train_pairs, run.train_pairs_estimated = counts["kept"], counts["estimated"]
        about = "~" if run.train_pairs_estimated else ""  # a stream's counts are estimates
        dropped = (f"; dropped {about}{counts['too_long']:,} longer than {config.max_length} tokens and "
                   f"{about}{counts['empty']:,} with an empty side" if counts["kept"] < counts["total"] else "")
        config.check_schedule(has_dev_set=dev_corpus is not None)  # (the command line checks first)
        if run.train_pairs == 0:
            raise ValueError(
                "The training corpus is empty." if not counts["total"] else
                f"No training pair is left of {counts['total']:,}{dropped}.")
        steps_per_epoch = max(1, run.train_pairs // config.batch_size)
        self._steps_per_epoch.assign(steps_per_epoch)  # read by the halving schedule
        run.steps_per_epoch = steps_per_epoch
        run.budget = Budget(config.max_steps, config.max_minutes, start_time, run.train_pairs / config.batch_size,
                            config.eval_every if dev_corpus is not None and len(dev_corpus) else None)
        if self.budget_rule is not None and not (config.max_steps or config.max_minutes):
            self._log("No budget (--max_steps, --max_minutes) to plan from: the budget rule keeps its rates "
                      f"({self.budget_rule.rates['dropout']:g} dropout).")
        self._log(
            f"Training {type(self.model).__name__} ({self.preset}, {self.model.count_params():,} parameters) on "
            f"{about}{run.train_pairs:,} of {about}{counts['total']:,} pairs{dropped} ({about}{steps_per_epoch:,} "
            f"updates/epoch{', estimated from the first pairs' if about else ''}), "
            f"batch {config.batch_size}, "
            f"{config.optimizer} lr {config.learning_rate:g}, clipnorm {config.clipnorm}, {config.speed_summary()}, "
            f"{self.strategy.num_replicas_in_sync} replica(s), device {devices.device_description()}."
        )
        # a resumed run's figures so far: its window of updates goes on (`_take_window`), and
        # an evaluation already made (a finished run rerun) is neither made nor counted again
        train_nll, dev_nll = float(self._last_train_nll.numpy()), float(self._last_dev_nll.numpy())
        run.train_nll = None if math.isnan(train_nll) else train_nll
        run.dev_nll = None if math.isnan(dev_nll) else dev_nll
        run.dev_step = int(self._last_dev_step.numpy()) if int(self._last_dev_step.numpy()) >= 0 else None
        run.restored_window_tokens = float(self._token_count.numpy())
        return run

    def _follow_budget(self, run, now):
        """Before each update: the budget's share spent (the ``"budget"`` schedule reads it) and
        the budget rule's plan (`BudgetRule.update`; on several workers, at the updates where
        they vote on the deadline, from their mean plan)."""
        run.budget.record(run.step, now)
        if self.config.schedule == "budget":
            self._time_progress.assign(run.budget.time_share(now))
        if self.budget_rule is not None:
            line = self.budget_rule.update(run.budget, run.step, now, self._vote, run.step - run.resumed_step)
            if line is not None:
                self._log(line)

    # === The loop's parts ===
    def _budget_spent(self, run):
        """Why training stops now (a budget or early stopping), or None to go on."""
        config = self.config
        if self._signals.received is not None:
            return f"{self._signals.name} at update {run.step}"
        if config.max_steps is not None and run.step >= config.max_steps:
            return f"max_steps={config.max_steps}"
        if self._vote.out_of_time(run.budget, run.step - run.resumed_step, time.time()):
            return f"max_minutes={config.max_minutes:g}"
        return self.dev_schedule.stop_reason()

    def _take_window(self, run, read_started, close=True):
        """Reads and resets the counters of the updates since the last read: the train NLL
        (``run.train_nll``) and their throughput without compilation (None: all compiled).
        ``read_started``: ``time.time()`` before the first read of the device's variables,
        which waits for the device (asynchronous on GPUs): that wait is training time.
        ``close=False`` (a signal's stop) reads the train NLL but leaves its window open: the
        checkpoint keeps it, and the resumed run closes it where the uninterrupted one would."""
        loss_sum, tokens = float(self._loss_sum.numpy()), float(self._token_count.numpy())
        waited = time.time() - read_started
        compiled, compiled_tokens = float(self._compiled_updates.numpy()), float(self._compiled_tokens.numpy())
        for variable in (self._compiled_updates, self._compiled_tokens):
            variable.assign(0.0)
        if tokens:
            run.train_nll = loss_sum / tokens
        if close:
            self._loss_sum.assign(0.0)
            self._token_count.assign(0.0)
            if tokens:
                self._last_train_nll.assign(run.train_nll)
        run.window_start, run.window_step = time.time(), run.step
        # the tokens of a window a resumed run goes on with were timed by the earlier run
        tokens, run.restored_window_tokens = tokens - run.restored_window_tokens, 0.0
        return run.throughput.take(tokens, int(compiled), compiled_tokens, waited)

    def _log_progress(self, run):
        """The progress line and the train summaries, at each point of ``run.cadence``."""
        read_started = time.time()
        self._check_finite(run)
        tokens_per_second = self._take_window(run, read_started)
        learning_rate = float(self._current_learning_rate())
        scalars = {"train/nll": run.train_nll, "train/gradient_norm": self._grad_norm,
                   "train/learning_rate": learning_rate}
        if tokens_per_second is not None:
            scalars["train/tokens_per_second"] = tokens_per_second
        self._log(
            f"step {run.step:>7,}  epoch {self._epoch_text(run):>6}  "
            f"train NLL {run.train_nll:.3f}  |grad| {float(self._grad_norm.numpy()):.2f}  "
            f"lr {learning_rate:.3g}  "
            + ("compiling" if tokens_per_second is None else f"{tokens_per_second:,.0f} tok/s")
            + "  " + run.budget.progress(run.step, time.time())
        )
        self._summaries.write(run.step, scalars)

    def _epoch_text(self, run):
        """``0.37``, or ``~0.37`` when the corpus's size is a stream's estimate."""
        epoch = float(self.sentences_seen.numpy()) / run.train_pairs
        return f"{'~' if run.train_pairs_estimated else ''}{epoch:.2f}"

    def _evaluate_dev(self, run, dev):
        """The one dev evaluation path: dev NLL, its summary, the best checkpoint, the dev
        schedule (plateau decay, early stopping)."""
        self._check_finite(run)
        with run.budget.timed("dev_nll"):
            run.dev_nll = self.evaluate(dev.dataset)
        run.dev_step = run.step
        self._last_dev_nll.assign(run.dev_nll)
        self._last_dev_step.assign(run.step)
        improved = run.dev_nll < float(self.best_dev_nll.numpy())
        self._log(f"step {run.step:>7,}  dev NLL {run.dev_nll:.3f}" + ("  (best)" if improved else ""))
        self._summaries.write(run.step, {"dev/nll": run.dev_nll})
        run.evaluations += 1
        every, max_steps = self.config.dev_bleu_every, self.config.max_steps
        last = run.stopped is not None or (max_steps is not None and run.step >= max_steps)
        if every and (run.evaluations % every == 1 % every or last):
            with run.budget.timed("dev_bleu"):
                if self._summaries:
                    run.dev_bleu = self._dev_translations(self._summaries, dev.corpus, run.step, self._log)
        if improved:
            self.best_dev_nll.assign(run.dev_nll)
            self.best_step.assign(run.step)
            with run.budget.timed("checkpoints"):
                self._save_checkpoint(self.best_manager)
                self._write_model_config()
        decayed = self.dev_schedule.record(improved)
        if decayed is not None:
            self.optimizer.learning_rate = decayed
            self._log(f"step {run.step:>7,}  learning rate decayed to {decayed:.3g} (a dev NLL "
                      f"plateau of {self.config.plateau_patience} evaluation(s))")

    def _check_finite(self, run):
        """Raises NonFiniteLossError (after writing the report) once a step was non-finite."""
        bad = int(self._first_nonfinite_step.numpy())
        if bad < 0:
            return
        latest = model_directory_lib.listed_checkpoint(self._checkpoints_dir)
        run.stopped = f"non-finite loss at step {bad}"
        self.directory.write_report(self._report(run))
        raise NonFiniteLossError(
            f"Training stopped: the loss became non-finite (NaN or inf) at step {bad}. "
            f"The last good checkpoint is kept: {latest or 'none was written yet'}. "
            "Lower the learning rate, keep gradient clipping on, or use float32."
        )

    def _save(self, run, stop=False):
        """A checkpoint of the current step, refused when anything became non-finite; then the
        run keeps its checkpoints (`checkpoint_averaging.keep_run_checkpoints`) and, at a
        checkpoint of its own (not at a signal's ``stop``), a copy around the best dev point."""
        self._check_finite(run)
        if not bool(self._weights_finite()):  # an update can overflow even from a finite loss
            self._first_nonfinite_step.assign(self.step)
            self._check_finite(run)
        self.elapsed_seconds.assign(run.elapsed_before + time.time() - run.start)
        # which checkpoints to keep is the run's (`keep_run_checkpoints`), not the manager's
        manager = tf.train.CheckpointManager(self.checkpoint, self._checkpoints_dir, max_to_keep=None,
                                             step_counter=self.step)
        self._save_checkpoint(manager)
        checkpoint_averaging.keep_run_checkpoints(self._write_dir, self.config.keep_checkpoints,
                                                  self.config.checkpoint_every)
        self._write_model_config()
        if self._around_best is not None and not stop:
            self._around_best.write(self.model, int(self.step.numpy()), int(self.best_step.numpy()))

    def _save_checkpoint(self, manager, number=None):
        """``manager.save`` (at the step, or ``number``); one that fails half-way (a full disk, a
        second Ctrl-C) leaves no ``ckpt-N_temp/`` behind (the previous checkpoints stay whole)."""
        try:
            manager.save(checkpoint_number=self.step if number is None else number)
        except BaseException:
            files.remove_partial_checkpoints(manager.directory)
            raise

    def _saved_at_step(self, run):
        """Whether the latest checkpoint is of the current step."""
        latest = model_directory_lib.listed_checkpoint(self._checkpoints_dir)
        return latest is not None and checkpoint_averaging.checkpoint_number(latest) == run.step

    def _finish(self, run, dev, train_corpus):
        """The end of a run: last train NLL, a dev point at the last step, checkpoint, average,
        report. After a signal: the checkpoint only, as the run stands (no dev evaluation of
        its own, the train NLL's window left open), so that the resumed run goes on exactly as
        the uninterrupted one; the evaluation the run's end makes is saved with it, so that a
        finished run rerun neither makes nor counts it again."""
        read_started = time.time()
        self._check_finite(run)
        if self._signals.received is not None:
            if not self._saved_at_step(run):
                self._save(run, stop=True)
            if float(self._token_count.numpy()):
                self._take_window(run, read_started, close=False)
        else:
            if float(self._token_count.numpy()):  # the last window (also one a resumed run goes on with)
                self._take_window(run, read_started)
            evaluated = dev is not None and run.dev_step != run.step
            if evaluated:
                self._evaluate_dev(run, dev)
            if evaluated or not self._saved_at_step(run):
                with run.budget.timed("checkpoints"):
                    self._save(run)
            with run.budget.timed("averaging"):
                self._average_checkpoints(run, None if dev is None else dev.dataset)
        self._summaries.flush()
        run.report = self._report(run)
        if run.step == run.resumed_step:  # nothing trained (a finished run rerun): keep its speed
            previous = self.directory.read_report().get("target_tokens_per_second")
            if run.report["target_tokens_per_second"] is None and previous is not None:
                run.report["target_tokens_per_second"] = previous
        self.directory.write_report(run.report)
        self._write_lexicon(train_corpus)
        self._cleanup()

    def _average_checkpoints(self, run, dev_dataset):
        """Checkpoint averaging at the end of a run (`TrainingConfig.average_last`,
        `bahdanau_tf.checkpoint_averaging`): the mean of the last checkpoints' model weights (or
        of those around the best, ``average_at="best"``) becomes ``averaged/`` (tagged in
        ``model.json`` with its dev NLL), and ``best/`` when its dev NLL is lower than the best
        checkpoint's; the trained weights are put back. Not without a dev set (nothing would
        say whether the average is better), not twice over the same checkpoints (a finished run
        rerun). Every worker evaluates; the chief writes."""
        chosen = checkpoint_averaging.checkpoints_to_average(
            self._write_dir, self.config.average_last, self._around_best, int(self.best_step.numpy()),
            int(self.step.numpy()))
        if len(chosen) < 2 or dev_dataset is None:
            return
        names = [os.path.basename(path) for path in chosen]
        existing = model_directory_lib.averaged_tag(self.output_dir)
        if existing is not None and existing.get("checkpoints") == names:
            run.averaged = existing
            return
        started = time.time()
        with checkpoint_averaging.averaged_weights(self.model, chosen) as tag:
            dev_nll = self.evaluate(dev_dataset)
            better = dev_nll < float(self.best_dev_nll.numpy())
            tag.update(dev_nll=round(dev_nll, 4), best=better)
            if better:
                self.best_dev_nll.assign(dev_nll)
                self.best_step.assign(tag["steps"][-1])
                self._save_checkpoint(self.best_manager, tag["steps"][-1])  # best/ckpt-<last averaged step>
                self._write_model_config()
            if self.is_chief:
                checkpoint_averaging.write_averaged(self.output_dir, self.model, tag)
        run.averaged = tag
        self._summaries.write(run.step, {"dev/averaged_nll": dev_nll})
        which = "the last " if self._around_best is None else ""
        self._log(f"Averaged {which}{len(chosen)} checkpoints ({names[0]} .. {names[-1]}) into "
                  f"{model_directory_lib.AVERAGED}/ in {time.time() - started:.0f} s: dev NLL "
                  f"{dev_nll:.3f}, " + ("lower than the best checkpoint's: best/ is the average."
                                         if better else "not lower than the best checkpoint's: best/ is kept."))

    def _write_lexicon(self, train_corpus):
        """``OUT/lexicon.tsv`` (`TrainingConfig.lexicon_top_k`), by the chief, not after a
        signal (the run must stop promptly): `RunDirectory.write_lexicon`."""
        if self.config.lexicon_top_k and self._signals.received is None:
            self.directory.write_lexicon(train_corpus, self.source_tokenizer, self.target_tokenizer,
                                         self.config.lexicon_top_k, self._log)

    def _report(self, run):
        if self.budget_rule is not None:
            run.regularization = self.budget_rule.record()
        return training_report(
            run, sentences_seen=int(self.sentences_seen.numpy()),
            best_dev_nll=float(self.best_dev_nll.numpy()), best_step=int(self.best_step.numpy()),
            replicas=self.strategy.num_replicas_in_sync, preset=self.preset,
            parameters=self.model.count_params(), config=self.config)

    def _cleanup(self):
        if not self.is_chief:
            shutil.rmtree(self._write_dir, ignore_errors=True)
