"""Training (DESIGN §2): the paper's procedure in one `tf.function` step, under `tf.distribute`.

The `Trainer` minimises the mean negative log-likelihood per real target token (teacher forcing,
padding masked) and leaves a model directory (`bahdanau_tf.model_directory`) behind::

    trainer = Trainer("/tmp/run", source_tokenizer, target_tokenizer, preset="small")
    report = trainer.fit(train_corpus, dev_corpus)   # table 2 of the paper, also in report.json

What one update does (``Trainer._replica_step``), per replica:

1. count the real target tokens of the *global* batch (an all-reduce of one scalar), so the loss
   is the mean over the global batch whatever the number of replicas;
2. loss and gradients, in a nested ``tf.function(jit_compile=...)`` (XLA; collectives stay
   outside it, so the same code runs under every strategy);
3. sum the gradients over replicas, rescale their *global* L2 norm to at most ``clipnorm``
   (appendix B.2: 1) and apply them. Keras 3 optimizers sum gradients over replicas once more
   inside ``apply`` (after their own per-replica clipping, which is why we clip ourselves), so the
   already-summed gradients are divided by the number of replicas first.

The step returns nothing to Python: losses, token counts and the gradient norm accumulate in
variables that the host reads every ``log_every`` steps (the progress line), every
``eval_every`` steps (dev NLL) and before every checkpoint. Under XLA, which compiles one program
per input shape, batch lengths are padded up to a multiple of 8 so that it meets only a handful
of shapes (`bahdanau_tf.data.pad_batch`); without XLA batches keep their own lengths (one trace serves all).

Training defaults per preset live next to the architecture, in `bahdanau_tf.models.PRESETS`:
the paper presets use Adadelta (lr 1.0, rho 0.95, eps 1e-6), clipnorm 1, batch 80 and the
paper's bucketing; ``seq2seq`` uses Sutskever et al.'s SGD 0.7, halved every half epoch after
epoch 5, clipnorm 5, batch 128; the reduced CPU presets use Adam.
"""

import dataclasses
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Any, Callable

import keras
import tensorflow as tf

from bahdanau_tf import data
from bahdanau_tf import devices
from bahdanau_tf import evaluation
from bahdanau_tf import losses
from bahdanau_tf import model_directory as model_directory_lib
from bahdanau_tf import models as models_lib
from bahdanau_tf.translator import Translator
from bahdanau_tf.special_tokens import END_ID, PAD_ID, START_ID

OPTIMIZERS = ("adadelta", "adam", "sgd")
SCHEDULES = ("constant", "halving", "warmup_rsqrt")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("default", "mirrored", "multi_worker")


@dataclasses.dataclass
class TrainingConfig:
    """How to train: optimizer, batching, budgets, checkpoints and speed options.

    Start from `TrainingConfig.for_preset(name, **changes)`, which fills in the training
    defaults of the preset's row of `bahdanau_tf.models.PRESETS`.

    Attributes:
        optimizer: ``"adadelta"`` (rho 0.95, epsilon 1e-6: the paper), ``"adam"`` or ``"sgd"``.
        learning_rate: float.
        clipnorm: float or None, the bound on the global L2 norm of the gradient (paper: 1).
        schedule: ``"constant"``, ``"halving"`` (Sutskever et al.: halve the learning rate every
            half epoch after epoch 5) or ``"warmup_rsqrt"`` (`WarmupRsqrtSchedule`: linear
            warm-up over ``warmup_steps``, then decay as 1 / sqrt(step)).
        warmup_steps: int, the warm-up of ``"warmup_rsqrt"``.
        batch_size: int, sentence pairs per update (global, over all replicas).
        max_length: int, longer pairs are dropped (the -50 / -30 of the presets).
        bucketing: ``"paper"`` (1,600 pairs sorted by length, cut into 20 minibatches),
            ``"token_budget"`` or None; see `bahdanau_tf.data.make_dataset`.
        max_steps: int or None, the update budget (counted over resumed runs).
        max_minutes: float or None, the wall-time budget of this run, from ``start_time``.
        patience: int or None, stop after this many dev evaluations without a better dev NLL.
        eval_every: int, steps between dev NLL evaluations.
        dev_sentences: int, the number of dev pairs used for the dev NLL (the first ones).
        checkpoint_every: int, steps between checkpoints (and one at the end).
        keep_checkpoints: int, how many recent checkpoints `tf.train.CheckpointManager` keeps.
        log_every: int, steps between progress lines and summaries (the only host reads).
        precision: ``"float32"``, ``"mixed_bfloat16"`` or ``"mixed_float16"`` (dynamic loss
            scaling); logits and loss stay float32. None (default): the device's choice,
            `bahdanau_tf.devices.training_choice` (bf16 on CPUs with AMX bf16 tiles and on
            GPUs from compute capability 8.0, float16 on 7.x, float32 elsewhere).
        jit_compile: bool, compile the forward and backward pass with XLA. None (default): the
            device's choice (off on CPUs with AMX, on elsewhere).
        pad_to_multiple: int or None, pad batch lengths up to a multiple of this: bounds the
            number of XLA compilations, costs padding. None (default): 8 with ``jit_compile``,
            else 1 (a ``tf.function`` without XLA runs every shape with one trace).
            `padding_multiple` is the value in effect.
        seed: int, data order and initialisation.
        summaries: bool, write TensorBoard summaries to ``OUT/logs`` (the series are listed in
            `Trainer`'s docstring).
        dev_bleu_every: int, translate the dev sample (greedy) at the first dev evaluation,
            then every this many evaluations, and at the last one: dev BLEU, attention images
            and sample translations go to TensorBoard; 0 never (needs ``summaries``).
        dev_bleu_sentences: int, the dev sample: the first this many dev pairs (100 sentences
            of the small preset: about 3 s on a 2-core CPU, untrained, every output at its length bound).
    """

    optimizer: str = "adam"
    learning_rate: float = 1e-3
    clipnorm: float | None = 1.0
    schedule: str = "constant"
    warmup_steps: int = 200
    batch_size: int = 64
    max_length: int = 50
    bucketing: str | None = "paper"
    max_steps: int | None = None
    max_minutes: float | None = None
    patience: int | None = None
    eval_every: int = 500
    dev_sentences: int = 500
    checkpoint_every: int = 500
    keep_checkpoints: int = 3
    log_every: int = 50
    precision: str | None = None
    jit_compile: bool | None = None
    pad_to_multiple: int | None = None
    seed: int = 1234
    summaries: bool = True
    dev_bleu_every: int = 2
    dev_bleu_sentences: int = 100

    def __post_init__(self):
        # precision and XLA left to the device (None) are resolved here, once
        self.device_choice = None
        self.device_chose = tuple(name for name in ("precision", "jit_compile") if getattr(self, name) is None)
        if self.device_chose:
            self.device_choice = devices.training_choice(precision=self.precision)
            for name in self.device_chose:
                setattr(self, name, getattr(self.device_choice, name))
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"`optimizer` must be one of {OPTIMIZERS}, got {self.optimizer!r}.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"`schedule` must be one of {SCHEDULES}, got {self.schedule!r}.")
        if self.precision not in PRECISIONS:
            raise ValueError(f"`precision` must be one of {PRECISIONS}, got {self.precision!r}.")
        positive = ["batch_size", "max_length", "eval_every", "checkpoint_every", "log_every", "dev_sentences",
                    "keep_checkpoints", "warmup_steps"] + (["pad_to_multiple"] if self.pad_to_multiple is not None else [])
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"`{name}` must be a positive int, got {value!r}.")
        if not self.learning_rate > 0:
            raise ValueError(f"`learning_rate` must be positive, got {self.learning_rate!r}.")
        if self.clipnorm is not None and not self.clipnorm > 0:
            raise ValueError(f"`clipnorm` must be positive or None, got {self.clipnorm!r}.")
        if self.max_steps is not None and self.max_steps < 0:
            raise ValueError(f"`max_steps` must be >= 0 or None, got {self.max_steps!r}.")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError(f"`max_minutes` must be positive or None, got {self.max_minutes!r}.")
        for name, low in (("dev_bleu_every", 0), ("dev_bleu_sentences", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"`{name}` must be an int >= {low}, got {value!r}.")

    def speed_summary(self):
        """``"float32 + XLA (device choice: CPU without bfloat16 units)"``, for the header line."""
        words = f"{self.precision}{' + XLA' if self.jit_compile else ', no XLA'}"
        if not self.device_chose:
            return f"{words} (as set)"
        which = "" if len(self.device_chose) == 2 else f" of {self.device_chose[0]}"
        return f"{words} (device choice{which}: {self.device_choice.reason})"

    @property
    def padding_multiple(self) -> int:
        """The `pad_to_multiple` in effect: 8 under XLA, 1 without, unless set."""
        if self.pad_to_multiple is not None:
            return self.pad_to_multiple
        return 8 if self.jit_compile else 1

    @classmethod
    def for_preset(cls, preset: str, **changes) -> "TrainingConfig":
        """The preset's training defaults (`bahdanau_tf.models.PRESETS`), with ``changes``."""
        return cls(**{**models_lib.get_preset(preset).training, **changes})


class HalvingSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Sutskever et al. (2014): constant, then halved every ``every_epochs`` after ``start_epoch``.

    Args:
        initial_learning_rate: float (0.7).
        steps_per_epoch: int or an int tf.Variable (set once the corpus is counted).
        start_epoch: float, the first halving happens here (5).
        every_epochs: float, then every this many epochs (0.5).
    """

    def __init__(self, initial_learning_rate: float, steps_per_epoch: int | tf.Variable,
                 start_epoch: float = 5.0, every_epochs: float = 0.5) -> None:
        self.initial_learning_rate = float(initial_learning_rate)
        self.steps_per_epoch = steps_per_epoch
        self.start_epoch = float(start_epoch)
        self.every_epochs = float(every_epochs)

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        epoch = tf.cast(step, "float32") / tf.maximum(tf.cast(self.steps_per_epoch, "float32"), 1.0)
        halvings = tf.where(
            epoch >= self.start_epoch, tf.floor((epoch - self.start_epoch) / self.every_epochs) + 1.0, 0.0
        )
        return self.initial_learning_rate * tf.pow(0.5, halvings)

    def get_config(self) -> dict:
        return dict(
            initial_learning_rate=self.initial_learning_rate,
            steps_per_epoch=int(self.steps_per_epoch),
            start_epoch=self.start_epoch,
            every_epochs=self.every_epochs,
        )


class WarmupRsqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to the peak, then decay as 1 / sqrt(step) (Vaswani et al. 2017, eq. 3).

    ``lr(step) = peak * min((step + 1) / warmup_steps, sqrt(warmup_steps / (step + 1)))``: the
    first updates, taken on a random model with Adam's still unreliable second-moment estimates,
    are small; after the peak at ``warmup_steps`` the rate falls slowly (a quarter of the peak
    at 16 x ``warmup_steps``) and needs no total step count, so it suits wall-time budgets.

    Args:
        peak_learning_rate: float.
        warmup_steps: int >= 1.
    """

    def __init__(self, peak_learning_rate, warmup_steps):
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        step = tf.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        return self.peak_learning_rate * tf.minimum(step / warmup, tf.sqrt(warmup / step))

    def get_config(self):
        return dict(peak_learning_rate=self.peak_learning_rate, warmup_steps=self.warmup_steps)


def make_optimizer(config: TrainingConfig,
                   steps_per_epoch: int | tf.Variable | None = None) -> keras.optimizers.Optimizer:
    """The Keras optimizer of a `TrainingConfig` (clipping is done by the trainer, not here)."""
    learning_rate = config.learning_rate
    if config.schedule == "halving":
        learning_rate = HalvingSchedule(learning_rate, 1 if steps_per_epoch is None else steps_per_epoch)
    elif config.schedule == "warmup_rsqrt":
        learning_rate = WarmupRsqrtSchedule(learning_rate, config.warmup_steps)
    if config.optimizer == "adadelta":
        optimizer = keras.optimizers.Adadelta(learning_rate, rho=0.95, epsilon=1e-6)
    elif config.optimizer == "adam":
        optimizer = keras.optimizers.Adam(learning_rate)
    else:
        optimizer = keras.optimizers.SGD(learning_rate)
    if config.precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def make_strategy(name: str = "default", devices: list | None = None) -> tf.distribute.Strategy:
    """A `tf.distribute` strategy by name.

    Args:
        name: ``"default"`` (one device), ``"mirrored"`` (all local GPUs, or ``devices``) or
            ``"multi_worker"`` (MultiWorkerMirroredStrategy; the cluster comes from TF_CONFIG).
        devices: optional list of device names for ``"mirrored"``.
    """
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"`strategy` must be one of {STRATEGIES}, got {name!r}.")


device_description = devices.device_description  # moved to bahdanau_tf.devices


def _summary_metadata(plugin_name, data_class):
    from tensorflow.core.framework import summary_pb2

    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin_name),
        data_class=data_class,
    )


# TensorBoard's own summary ops come with the tensorboard package, which TensorFlow no longer
# brings; these write the same records (plugin name + tensor layout) with core TensorFlow only.
def _scalar_summary(name, value):
    """A TensorBoard scalar (the ``scalars`` plugin's float32 scalar)."""
    tf.summary.write(name, tf.cast(value, "float32"), metadata=_summary_metadata("scalars", 1))


def _image_summary(name, png, width, height):
    """A TensorBoard image: the ``images`` plugin's [width, height, PNG bytes] string tensor."""
    tf.summary.write(name, tf.constant([str(width), str(height), png], tf.string),
                     metadata=_summary_metadata("images", 3))


def _text_summary(name, markdown):
    """A TensorBoard text (the ``text`` plugin renders a string tensor as Markdown)."""
    tf.summary.write(name, tf.constant(markdown, tf.string), metadata=_summary_metadata("text", 2))


def _attention_png(alignment, title):
    """An alignment drawn like the paper's figure 3, as PNG bytes and its pixel size."""
    import io

    from bahdanau_tf import evaluation

    figure = evaluation.plot_attention(alignment.attention, alignment.source_tokens,
                                       alignment.target_tokens, None, title=title)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi)
    width, height = figure.canvas.get_width_height()
    return buffer.getvalue(), width, height


def _markdown_cell(text):
    return text.replace("|", "\\|").replace("\n", " ") or " "


def _is_chief(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    return resolver.task_type in ("chief", None) or (
        resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()
    )


@dataclasses.dataclass
class _Run:
    """The state of one `Trainer.fit` call (what is not in the checkpoint)."""

    resumed_step: int
    elapsed_before: float
    step: int = 0
    train_pairs: int = 0
    start: float = 0.0
    window_start: float = 0.0
    train_nll: float | None = None
    dev_nll: float | None = None
    dev_step: int | None = None
    evaluations_without_improvement: int = 0
    evaluations: int = 0
    deadline: float | None = None
    dev_bleu: float | None = None
    tokens_total: float = 0.0
    tokens_time: float = 0.0
    stopped: str | None = None
    report: dict | None = None
    dev_corpus: Any = None  # the dev pairs: dev BLEU and the TensorBoard samples


class NonFiniteLossError(RuntimeError):
    """Training stopped because the loss or the gradient became NaN or infinite."""


class DirectoryInUseError(RuntimeError):
    """Another process is training into the same output directory."""


class TrainingInterrupted(RuntimeError):
    """SIGINT or SIGTERM stopped training, after a checkpoint and the report were written.

    Attributes:
        signal_number: int, the signal (2 for SIGINT, 15 for SIGTERM).
        report: dict, the report written to ``report.json``.
    """

    def __init__(self, signal_number, report):
        name = signal.Signals(signal_number).name
        super().__init__(f"Training stopped by {name} at update {report['updates']:,}: the "
                         "checkpoint of that update and report.json are written; rerun the same "
                         "command to resume.")
        self.signal_number = signal_number
        self.report = report


class _DirectoryLock:
    """An exclusive, non-blocking lock on ``directory/.lock`` (fcntl.flock), held by one process.

    The kernel releases it when the process dies (even by SIGKILL), so a stale lock file never
    blocks a later run. Where fcntl does not exist (Windows) the directory is not locked.
    """

    NAME = ".lock"

    def __init__(self, directory):
        self.path = os.path.join(directory, self.NAME)
        self._handle = None

    def acquire(self):
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not on POSIX
            return
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            owner = handle.read().strip() or "unknown"
            handle.close()
            raise DirectoryInUseError(
                f"{os.path.dirname(self.path)!r} is in use by another training process "
                f"(pid {owner}); wait for it to finish or use another --output_dir.") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle

    def release(self, remove=False):
        if self._handle is not None:
            if remove and os.path.exists(self.path):
                os.remove(self.path)
            self._handle.close()  # closing the file releases the lock
            self._handle = None


class Trainer:
    """Trains a model of a preset on a parallel corpus and writes its model directory.

    The model is built inside the strategy's scope, with the vocabulary sizes of the tokenizers
    and the dtype policy of ``config.precision``. When ``output_dir`` already holds a model, its
    config must match (`model_directory.check_same_model`) and training resumes from the latest
    checkpoint (step, weights, optimizer state, elapsed wall time, and the data position: the
    seeded input pipeline skips the batches already used).

    TensorBoard (``tensorboard --logdir OUT/logs``; the package is the ``[tensorboard]`` extra):
    ``train/nll``, ``train/gradient_norm``, ``train/learning_rate``, ``train/tokens_per_second``
    every ``log_every`` steps; ``dev/nll`` at every dev evaluation, the last step's included;
    and, at the first evaluation, every ``dev_bleu_every``-th and the last, from a greedy
    translation of the first ``dev_bleu_sentences`` dev pairs: ``dev/bleu`` (sacrebleu, as
    `bahdanau_tf.evaluation.corpus_bleu`), ``dev/translations`` (text: source, reference and
    translation of the first 4) and ``dev/attention_0``, ``dev/attention_1`` (images of the
    attention on two fixed dev sentences, figure 3; models with attention only).

    Args:
        output_dir: str, the model directory (created if needed).
        source_tokenizer, target_tokenizer: tokenizers of `bahdanau_tf.text`.
        preset: str, a name of `bahdanau_tf.models.preset_names()`.
        config: `TrainingConfig`; defaults to ``TrainingConfig.for_preset(preset)``.
        model_overrides: dict of constructor arguments overriding the preset's.
        strategy: a `tf.distribute.Strategy` or a name of `STRATEGIES` (default: the default one).
        settings: dict saved in ``model.json`` (e.g. direction, tokenizer kind, corpus).
        log: callable taking a str, for progress lines (default: print to stderr).

    Example:

        corpus = data.load_corpus("bible-en-es", split="train")
        source = text.SubwordTokenizer.build(corpus.sources, vocabulary_size=5000)
        target = text.SubwordTokenizer.build(corpus.targets, vocabulary_size=5000)
        trainer = Trainer("/tmp/run", source, target, preset="small",
                          config=TrainingConfig.for_preset("small", max_minutes=10))
        report = trainer.fit(corpus, data.load_corpus("bible-en-es", split="dev"))
    """

    def __init__(
        self,
        output_dir: str,
        source_tokenizer: Any,
        target_tokenizer: Any,
        preset: str = "small",
        config: TrainingConfig | None = None,
        model_overrides: dict | None = None,
        strategy: tf.distribute.Strategy | str | None = None,
        settings: dict | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
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
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.is_chief = _is_chief(strategy)
        # non-chief workers of a multi-worker run write their (identical) checkpoints elsewhere
        self._write_dir = output_dir if self.is_chief else tempfile.mkdtemp(prefix="bahdanau_worker_")
        self._restored = None
        self._lock = _DirectoryLock(output_dir)
        self._created_dir = False
        self._created_entries = set()
        self._signal = None
        self._dev_translator = None
        self._build()

    # === Construction ===
    def _build(self):
        config = self.config
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
            self._steps_per_epoch = tf.Variable(1, dtype="int64", trainable=False, name="steps_per_epoch")
            self.optimizer = make_optimizer(config, steps_per_epoch=self._steps_per_epoch)
            self.optimizer.build(self.model.trainable_variables)
            # training state (all in the checkpoint)
            self.step = tf.Variable(0, dtype="int64", trainable=False, name="step")
            self.sentences_seen = tf.Variable(0, dtype="int64", trainable=False, name="sentences_seen")
            self.elapsed_seconds = tf.Variable(0.0, dtype="float64", trainable=False, name="elapsed_seconds")
            self.best_dev_nll = tf.Variable(math.inf, dtype="float64", trainable=False, name="best_dev_nll")
            self.best_step = tf.Variable(-1, dtype="int64", trainable=False, name="best_step")
            # read by the host every log_every steps, then reset
            self._loss_sum = tf.Variable(0.0, dtype="float64", trainable=False, name="loss_sum")
            self._token_count = tf.Variable(0.0, dtype="float64", trainable=False, name="token_count")
            self._grad_norm = tf.Variable(0.0, dtype="float32", trainable=False, name="gradient_norm")
            self._first_nonfinite_step = tf.Variable(-1, dtype="int64", trainable=False, name="first_nonfinite")
        self.checkpoint = tf.train.Checkpoint(
            model=self.model,
            optimizer=self.optimizer,
            step=self.step,
            sentences_seen=self.sentences_seen,
            elapsed_seconds=self.elapsed_seconds,
            best_dev_nll=self.best_dev_nll,
            best_step=self.best_step,
        )
        self.manager = tf.train.CheckpointManager(
            self.checkpoint,
            os.path.join(self._write_dir, model_directory_lib.CHECKPOINTS),
            max_to_keep=config.keep_checkpoints,
            step_counter=self.step,
        )
        self.best_manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(model=self.model, step=self.step),
            os.path.join(self._write_dir, model_directory_lib.BEST),
            max_to_keep=1,
            step_counter=self.step,
        )
        self._gradients = tf.function(self._loss_and_gradients, jit_compile=bool(config.jit_compile))
        self._forward_nll = tf.function(self._nll_sum, jit_compile=bool(config.jit_compile))
        self.train_step = tf.function(self._train_step)
        self.eval_step = tf.function(self._eval_step, reduce_retracing=True)  # one trace for all dev shapes

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
        if self.is_chief:
            if os.path.exists(self.output_dir) and not os.path.isdir(self.output_dir):
                raise ValueError(f"--output_dir {self.output_dir!r} is a file, not a directory.")
            self._created_dir = not os.path.exists(self.output_dir)
            tf.io.gfile.makedirs(self.output_dir)
            self._lock.acquire()
        try:
            latest = self._check_and_restore()
        except BaseException:
            self._lock.release()  # a refused directory is not kept locked
            raise
        self._restored = (latest,)
        return latest

    def _check_and_restore(self):
        """`restore` once the directory is ours: checks, then the latest checkpoint, if any."""
        config_path = os.path.join(self.output_dir, model_directory_lib.MODEL_CONFIG)
        checkpoints = os.path.join(self.output_dir, model_directory_lib.CHECKPOINTS)
        if tf.io.gfile.exists(config_path):
            if self.is_chief:
                model_directory_lib.check_model_directory(self.output_dir)
                model_directory_lib.check_same_model(self.output_dir, self.model)
        elif model_directory_lib.listed_checkpoint(checkpoints):
            raise ValueError(
                f"{self.output_dir!r} is a half-written model directory: it has checkpoints but "
                f"no {model_directory_lib.MODEL_CONFIG}; remove it or use another --output_dir.")
        latest = model_directory_lib.latest_checkpoint(self.output_dir, which="latest")
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            self._log(
                f"Resuming from {latest}: step {int(self.step.numpy())}, "
                f"{self.elapsed_seconds.numpy() / 60:.1f} min trained so far."
            )
        return latest

    def _write_model_config(self):
        """``model.json`` and the vocabularies, with the first checkpoint (see `restore`)."""
        if not self.is_chief or tf.io.gfile.exists(
                os.path.join(self.output_dir, model_directory_lib.MODEL_CONFIG)):
            return
        settings = {"preset": self.preset, "training": dataclasses.asdict(self.config), **self.settings}
        model_directory_lib.write_model_config(
            self.output_dir, self.model, self.source_tokenizer, self.target_tokenizer, settings,
            device=self._device_record())

    def _abandon_fresh_start(self):
        """A run that failed before its first checkpoint leaves the directory as it found it."""
        if not self.is_chief or tf.io.gfile.exists(
                os.path.join(self.output_dir, model_directory_lib.MODEL_CONFIG)):
            return
        if getattr(self, "_writer", None) is not None:
            self._writer.close()
            self._writer = None
        if self._created_dir:
            self._lock.release()
            shutil.rmtree(self.output_dir, ignore_errors=True)
            return
        for name in ("logs", model_directory_lib.CHECKPOINTS, model_directory_lib.BEST):
            if name in self._created_entries:
                shutil.rmtree(os.path.join(self.output_dir, name), ignore_errors=True)

    def close(self):
        """Releases the output directory (`fit` does it when it returns or raises)."""
        self._lock.release()
        self._restored = None

    def _device_record(self):
        """What ``model.json`` records about the device and the speed settings used on it."""
        config = self.config
        return {
            "machine": devices.detect().to_json(),
            "precision": config.precision,
            "jit_compile": bool(config.jit_compile),
            "chosen_by_device": list(config.device_chose),  # the others were set explicitly
            "reason": config.device_choice.reason if config.device_choice is not None else None,
        }

    @tf.function
    def _weights_finite(self):
        return tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in self.model.trainable_variables])

    # === The step functions ===
    def _nll_sum(self, source, target_in, target_out):
        logits = self.model((source, target_in), training=False)
        return tf.reduce_sum(losses.token_nll(target_out, logits))

    def _loss_and_gradients(self, source, target_in, target_out, global_tokens):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            logits = self.model((source, target_in), training=True)
            nll_sum = tf.reduce_sum(losses.token_nll(target_out, logits))
            loss = nll_sum / global_tokens  # this replica's share of the global mean
            if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
                loss = self.optimizer.scale_loss(loss)
        return nll_sum, tape.gradient(loss, variables)

    def _replica_step(self, batch):
        (source, target_in), target_out = batch
        context = tf.distribute.get_replica_context()
        local_tokens = tf.reduce_sum(tf.cast(tf.not_equal(target_out, PAD_ID), "float32"))
        global_tokens = tf.maximum(context.all_reduce("sum", local_tokens), 1.0)
        nll_sum, gradients = self._gradients(source, target_in, target_out, global_tokens)
        # embedding gradients come as IndexedSlices; dense ones all-reduce and scale uniformly
        gradients = [tf.convert_to_tensor(g) for g in gradients]
        gradients = context.all_reduce("sum", gradients)  # gradient of the global mean NLL
        scaled = isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)
        if scaled:
            scale = tf.cast(self.optimizer.dynamic_scale, "float32")
            gradients = [g / scale for g in gradients]
        norm = tf.linalg.global_norm(gradients)
        if self.config.clipnorm is not None:
            gradients, _ = tf.clip_by_global_norm(gradients, self.config.clipnorm, use_norm=norm)
        # the optimizer sums over replicas again (and a loss scale optimizer unscales)
        factor = 1.0 / context.num_replicas_in_sync
        if scaled:
            factor = factor * scale
        if context.num_replicas_in_sync > 1 or scaled:
            gradients = [g * factor for g in gradients]
        self.optimizer.apply(gradients, self.model.trainable_variables)
        sentences = tf.reduce_sum(tf.cast(tf.reduce_any(tf.not_equal(target_out, PAD_ID), axis=1), "int64"))
        return nll_sum, local_tokens, norm, sentences

    def _train_step(self, iterator):
        batch = next(iterator)
        nll_sum, tokens, norm, sentences = self.strategy.run(self._replica_step, (batch,))
        reduce = lambda value: self.strategy.reduce("sum", value, axis=None)  # noqa: E731
        nll_sum, tokens, sentences = reduce(nll_sum), reduce(tokens), reduce(sentences)
        norm = self.strategy.experimental_local_results(norm)[0]  # the same on every replica
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
            corpus: a `ParallelCorpus` (or sequence of pairs).
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
            pad_to_multiple=config.padding_multiple,
            fill_to_batch_size=True,
        )
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

    # === The loop ===
    def fit(self, train_corpus: Any, dev_corpus: Any = None, start_time: float | None = None) -> dict:
        """Trains until a budget is spent or early stopping; returns the report (table 2).

        Args:
            train_corpus: `bahdanau_tf.data.ParallelCorpus` (or sequence of (source, target) pairs).
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
        if self.is_chief:
            self._created_entries = {name for name in ("logs", model_directory_lib.CHECKPOINTS,
                                                       model_directory_lib.BEST)
                                     if not os.path.exists(os.path.join(self.output_dir, name))}
        handlers = self._catch_signals()
        try:
            run = self._fit(train_corpus, dev_corpus, start_time)
        except BaseException:
            self._abandon_fresh_start()
            raise
        finally:
            self._restore_signals(handlers)
            self.close()
        if self._signal is not None:
            raise TrainingInterrupted(self._signal, run.report)
        return run.report

    def _fit(self, train_corpus, dev_corpus, start_time):
        config = self.config
        deadline = None if config.max_minutes is None else start_time + 60 * config.max_minutes
        run = _Run(resumed_step=int(self.step.numpy()), elapsed_before=float(self.elapsed_seconds.numpy()),
                   dev_corpus=dev_corpus)
        counts = data.count_pairs(train_corpus, self.source_tokenizer, self.target_tokenizer,
                                  config.max_length)
        run.train_pairs = counts["kept"]
        dropped = (f"; dropped {counts['too_long']:,} longer than {config.max_length} tokens and "
                   f"{counts['empty']:,} with an empty side" if counts["kept"] < counts["total"] else "")
        run.deadline = deadline  # the progress line shows the budget
        if run.train_pairs == 0:
            raise ValueError(
                "The training corpus is empty." if not counts["total"] else
                f"No training pair is left of {counts['total']:,}{dropped}.")
        steps_per_epoch = max(1, run.train_pairs // config.batch_size)
        self._steps_per_epoch.assign(steps_per_epoch)  # read by the halving schedule
        if run.resumed_step:
            self._log(f"Skipping the {run.resumed_step} batches already trained on (same seeded data order).")
        iterator = iter(self.train_dataset(train_corpus, skip_batches=run.resumed_step))
        dev_dataset = self.dev_dataset(dev_corpus) if dev_corpus is not None and len(dev_corpus) else None
        self._writer = None
        if config.summaries and self.is_chief:
            self._writer = tf.summary.create_file_writer(os.path.join(self.output_dir, "logs"))
        self._log(
            f"Training {type(self.model).__name__} ({self.preset}, {self.model.count_params():,} parameters) on "
            f"{run.train_pairs:,} of {counts['total']:,} pairs{dropped} ({steps_per_epoch:,} updates/epoch), "
            f"batch {config.batch_size}, "
            f"{config.optimizer} lr {config.learning_rate:g}, clipnorm {config.clipnorm}, {config.speed_summary()}, "
            f"{self.strategy.num_replicas_in_sync} replica(s), device {device_description()}."
        )
        run.start = run.window_start = time.time()
        run.step = run.resumed_step
        while run.stopped is None:
            run.stopped = self._budget_spent(run, deadline)
            if run.stopped:
                break
            self.train_step(iterator)
            run.step += 1
            if run.step % config.log_every == 0:
                self._log_progress(run)
            if dev_dataset is not None and run.step % config.eval_every == 0:
                self._evaluate_dev(run, dev_dataset)
            if run.step % config.checkpoint_every == 0:
                self._save(run)
        self._finish(run, dev_dataset)
        return run

    def _catch_signals(self):
        """SIGINT and SIGTERM end the run after the current step (checkpoint + report)."""
        self._signal = None
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signal_number, frame):
            if self._signal is not None:  # a second signal: stop now
                raise KeyboardInterrupt
            self._signal = signal_number
            self._log(f"{signal.Signals(signal_number).name}: finishing the current update, then "
                      "a checkpoint and the report (again to stop at once).")

        return {number: signal.signal(number, handler) for number in (signal.SIGINT, signal.SIGTERM)}

    @staticmethod
    def _restore_signals(handlers):
        for number, previous in handlers.items():
            signal.signal(number, previous)

    # === The loop's parts ===
    def _budget_spent(self, run, deadline):
        """Why training stops now (a budget or early stopping), or None to go on."""
        config = self.config
        if self._signal is not None:
            return f"{signal.Signals(self._signal).name} at update {run.step}"
        if config.max_steps is not None and run.step >= config.max_steps:
            return f"max_steps={config.max_steps}"
        if deadline is not None and self._out_of_time(deadline, run.step, run.resumed_step):
            return f"max_minutes={config.max_minutes:g}"
        if config.patience is not None and run.evaluations_without_improvement >= config.patience:
            return f"early stopping (patience {config.patience})"
        return None

    def _take_train_nll(self, run):
        """Reads and resets the accumulated loss: the train NLL of the steps since the last read."""
        loss_sum, tokens = float(self._loss_sum.numpy()), float(self._token_count.numpy())
        self._loss_sum.assign(0.0)
        self._token_count.assign(0.0)
        if tokens:
            run.train_nll = loss_sum / tokens
        return tokens

    def _log_progress(self, run):
        """The progress line and the train summaries, every ``log_every`` steps."""
        self._check_finite(run)
        tokens = self._take_train_nll(run)
        now = time.time()
        seconds, run.window_start = now - run.window_start, now
        if run.step - run.resumed_step > self.config.log_every:  # the first window includes compilation
            run.tokens_total += tokens
            run.tokens_time += seconds
        tokens_per_second = tokens / max(seconds, 1e-9)
        learning_rate = float(self._current_learning_rate())
        self._log(
            f"step {run.step:>7,}  epoch {float(self.sentences_seen.numpy()) / run.train_pairs:6.2f}  "
            f"train NLL {run.train_nll:.3f}  |grad| {float(self._grad_norm.numpy()):.2f}  "
            f"lr {learning_rate:.3g}  {tokens_per_second:,.0f} tok/s  "
            + self._budget_progress(run, now, seconds / self.config.log_every)
        )
        self._summaries(run.step, {"train/nll": run.train_nll, "train/gradient_norm": self._grad_norm,
                                   "train/learning_rate": learning_rate,
                                   "train/tokens_per_second": tokens_per_second})

    def _evaluate_dev(self, run, dev_dataset):
        """The one dev evaluation path: dev NLL, its summary, the best checkpoint, patience."""
        self._check_finite(run)
        run.dev_nll = self.evaluate(dev_dataset)
        run.dev_step = run.step
        improved = run.dev_nll < float(self.best_dev_nll.numpy())
        self._log(f"step {run.step:>7,}  dev NLL {run.dev_nll:.3f}" + ("  (best)" if improved else ""))
        self._summaries(run.step, {"dev/nll": run.dev_nll})
        run.evaluations += 1
        every, max_steps = self.config.dev_bleu_every, self.config.max_steps
        last = run.stopped is not None or (max_steps is not None and run.step >= max_steps)
        if every and (run.evaluations % every == 1 % every or last):
            self._dev_translation_summaries(run)
        if improved:
            self.best_dev_nll.assign(run.dev_nll)
            self.best_step.assign(run.step)
            self.best_manager.save(checkpoint_number=self.step)
            self._write_model_config()
            run.evaluations_without_improvement = 0
        else:
            run.evaluations_without_improvement += 1

    def _check_finite(self, run):
        """Raises NonFiniteLossError (after writing the report) once a step was non-finite."""
        bad = int(self._first_nonfinite_step.numpy())
        if bad < 0:
            return
        latest = self.manager.latest_checkpoint
        run.stopped = f"non-finite loss at step {bad}"
        self._write_report(self._report(run))
        raise NonFiniteLossError(
            f"Training stopped: the loss became non-finite (NaN or inf) at step {bad}. "
            f"The last good checkpoint is kept: {latest or 'none was written yet'}. "
            "Lower the learning rate, keep gradient clipping on, or use float32."
        )

    def _save(self, run):
        """A checkpoint of the current step, refused when anything became non-finite."""
        self._check_finite(run)
        if not bool(self._weights_finite()):  # an update can overflow even from a finite loss
            self._first_nonfinite_step.assign(self.step)
            self._check_finite(run)
        self.elapsed_seconds.assign(run.elapsed_before + time.time() - run.start)
        self.manager.save(checkpoint_number=self.step)
        self._write_model_config()

    def _finish(self, run, dev_dataset):
        """The end of a run: last train NLL, a dev point at the last step, checkpoint, report."""
        self._check_finite(run)
        if run.step % self.config.log_every:  # the last partial window
            self._take_train_nll(run)
        if dev_dataset is not None and run.dev_step != run.step:
            self._evaluate_dev(run, dev_dataset)
        latest = self.manager.latest_checkpoint
        if latest is None or not latest.endswith(f"-{run.step}"):
            self._save(run)
        if self._writer:
            self._writer.flush()
        run.report = self._report(run)
        if run.step == run.resumed_step:  # nothing trained (a finished run rerun): keep its figures
            previous = self._read_report()
            for key in ("train_nll", "target_tokens_per_second"):
                if run.report[key] is None and previous.get(key) is not None:
                    run.report[key] = previous[key]
        self._write_report(run.report)
        self._cleanup()

    def _summaries(self, step, scalars, images=None, texts=None):
        """Writes TensorBoard summaries (chief only): scalars, ``{name: (png, width, height)}``
        images and ``{name: markdown}`` texts."""
        if self._writer:
            with self._writer.as_default(step=step):
                for name, value in scalars.items():
                    _scalar_summary(name, value)
                for name, (png, width, height) in (images or {}).items():
                    _image_summary(name, png, width, height)
                for name, markdown in (texts or {}).items():
                    _text_summary(name, markdown)

    def _budget_progress(self, run, now, seconds_per_step):
        """``7.3 / 12.0 min`` under a time budget (else the minutes trained), and the time left
        when ``max_steps`` ends the run first."""
        config = self.config
        if run.deadline is not None:
            started = run.deadline - 60 * config.max_minutes
            text = f"{(now - started) / 60:.1f} / {config.max_minutes:.1f} min"
        else:
            text = f"{(run.elapsed_before + now - run.start) / 60:.1f} min"
        if config.max_steps is not None:
            left = max(config.max_steps - run.step, 0) * seconds_per_step
            if run.deadline is None or now + left < run.deadline:
                text += f"  ETA {left / 60:.1f} min"
        return text

    def _dev_translation_summaries(self, run):
        """Dev BLEU (greedy, on the dev sample), sample translations and attention images."""
        if not self._writer or run.dev_corpus is None or not len(run.dev_corpus):
            return
        if self._dev_translator is None:
            self._dev_translator = Translator(self.model, self.source_tokenizer, self.target_tokenizer,
                                              beam_size=1)
        sample = run.dev_corpus.select(slice(0, self.config.dev_bleu_sentences))
        start = time.time()
        translations = self._dev_translator.translate(sample.sources, beam_size=1).translations
        run.dev_bleu = evaluation.corpus_bleu(translations, sample.targets).score
        self._log(f"step {run.step:>7,}  dev BLEU {run.dev_bleu:.2f} (greedy, {len(sample)} sentences, "
                  f"{time.time() - start:.0f} s)")
        rows = ["| source | reference | translation |", "| --- | --- | --- |"] + [
            f"| {_markdown_cell(s)} | {_markdown_cell(r)} | {_markdown_cell(t)} |"
            for s, r, t in list(zip(sample.sources, sample.targets, translations))[:4]]
        images = {}
        if self.model.has_attention:
            # two fixed sentences of readable length, the same at every evaluation
            fixed = [s for s in sample.sources if 0 < len(s.split()) <= 25][:2]
            alignments = self._dev_translator.translate(fixed, beam_size=1, return_alignments=True).alignments
            for index, (sentence, alignment) in enumerate(zip(fixed, alignments)):
                if alignment.target_tokens:
                    images[f"dev/attention_{index}"] = _attention_png(
                        alignment, f"step {run.step}: {sentence[:60]}")
        self._summaries(run.step, {"dev/bleu": run.dev_bleu}, images=images,
                        texts={"dev/translations": "\n".join(rows)})

    def _out_of_time(self, deadline, step, resumed_step):
        """Whether the wall-time budget is spent; agreed on by all workers of a multi-worker run."""
        if getattr(self.strategy.extended, "_num_workers", 1) <= 1:
            return time.time() >= deadline
        # every worker must stop at the same step (collectives would hang otherwise): decide at
        # log steps only, by an all-reduce of each worker's verdict
        if (step - resumed_step) % self.config.log_every:
            return False
        late = tf.constant(1.0 if time.time() >= deadline else 0.0)
        votes = self.strategy.run(lambda: tf.identity(late))
        return float(self.strategy.reduce("sum", votes, axis=None)) > 0

    def _current_learning_rate(self):
        value = self.optimizer.learning_rate  # the schedule's value at the current step, if any
        if isinstance(value, keras.Variable):
            value = value.value
        return float(tf.convert_to_tensor(value))

    def _report(self, run):
        wall = run.elapsed_before + time.time() - run.start
        best = float(self.best_dev_nll.numpy())
        return {
            "updates": int(run.step),
            "epochs": round(float(self.sentences_seen.numpy()) / max(run.train_pairs, 1), 3),
            "wall_time_seconds": round(wall, 1),
            "wall_time": time.strftime("%H:%M:%S", time.gmtime(wall)),
            "device": device_description(),
            "replicas": int(self.strategy.num_replicas_in_sync),
            "train_nll": None if run.train_nll is None else round(run.train_nll, 4),
            "dev_nll": None if run.dev_nll is None else round(run.dev_nll, 4),
            "best_dev_nll": None if math.isinf(best) else round(best, 4),
            "best_step": int(self.best_step.numpy()) if not math.isinf(best) else None,
            "stopped_because": run.stopped,
            "target_tokens_per_second": round(run.tokens_total / run.tokens_time, 1) if run.tokens_time else None,
            "train_pairs": int(run.train_pairs),
            "preset": self.preset,
            "parameters": int(self.model.count_params()),
            "training": dataclasses.asdict(self.config),
        }

    def _read_report(self):
        path = os.path.join(self.output_dir, model_directory_lib.REPORT)
        if not tf.io.gfile.exists(path):
            return {}
        with tf.io.gfile.GFile(path) as f:
            try:
                return json.loads(f.read())
            except ValueError:
                return {}

    def _write_report(self, report):
        if self.is_chief:
            with tf.io.gfile.GFile(os.path.join(self.output_dir, model_directory_lib.REPORT), "w") as f:
                f.write(json.dumps(report, indent=2, sort_keys=True) + "\n")

    def _cleanup(self):
        if not self.is_chief:
            shutil.rmtree(self._write_dir, ignore_errors=True)


def format_report(report: dict) -> str:
    """The report as a table-2 style text block."""
    rows = [
        ("Updates", f"{report['updates']:,}"),
        ("Epochs", f"{report['epochs']:.2f}"),
        ("Wall time", report["wall_time"]),
        ("Device", report["device"]),
        ("Train NLL", "-" if report["train_nll"] is None else f"{report['train_nll']:.3f}"),
        ("Dev NLL", "-" if report["dev_nll"] is None else f"{report['dev_nll']:.3f}"),
        ("Best dev NLL", "-" if report["best_dev_nll"] is None else f"{report['best_dev_nll']:.3f} "
                                                                  f"(update {report['best_step']:,})"),
        ("Stopped", str(report["stopped_because"])),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


__all__ = [
    "Trainer",
    "TrainingConfig",
    "HalvingSchedule",
    "WarmupRsqrtSchedule",
    "NonFiniteLossError",
    "DirectoryInUseError",
    "TrainingInterrupted",
    "make_optimizer",
    "make_strategy",
    "format_report",
]
