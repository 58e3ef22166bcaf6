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
of shapes (`_pad_batch`); without XLA batches keep their own lengths (one trace serves all).

Training defaults per preset live in `TRAINING_DEFAULTS` (one table): the paper presets use
Adadelta (lr 1.0, rho 0.95, eps 1e-6), clipnorm 1, batch 80 and the paper's bucketing;
``seq2seq`` uses Sutskever et al.'s SGD 0.7, halved every half epoch after epoch 5, clipnorm 5,
batch 128; the reduced CPU presets use Adam.
"""

import dataclasses
import json
import math
import os
import shutil
import sys
import tempfile
import time

import keras
import tensorflow as tf

from bahdanau_tf import devices
from bahdanau_tf import losses
from bahdanau_tf import model_directory as model_directory_lib
from bahdanau_tf import models as models_lib
from bahdanau_tf.special_tokens import END_ID, PAD_ID, START_ID

# === Training defaults, one row per preset (DESIGN §2) ===
_PAPER = dict(
    optimizer="adadelta", learning_rate=1.0, clipnorm=1.0, batch_size=80, bucketing="paper", schedule="constant"
)
_SUTSKEVER = dict(
    optimizer="sgd", learning_rate=0.7, clipnorm=5.0, batch_size=128, bucketing="paper", schedule="halving",
    max_length=50,
)
# What most users want on small data and a CPU: Adam 5e-3; precision and XLA are the device's
# (`bahdanau_tf.devices`), see the measurements in `bahdanau_tf.cli.train` and
# benchmarks/train_throughput.py.
_REDUCED = dict(
    optimizer="adam", learning_rate=5e-3, clipnorm=1.0, batch_size=64, bucketing="paper", schedule="constant",
    max_length=50, eval_every=200, checkpoint_every=200,
)
TRAINING_DEFAULTS = {
    "rnnsearch-50": dict(_PAPER, max_length=50),
    "rnnsearch-30": dict(_PAPER, max_length=30),
    "rnnencdec-50": dict(_PAPER, max_length=50),
    "rnnencdec-30": dict(_PAPER, max_length=30),
    "seq2seq": dict(_SUTSKEVER),
    "small": dict(_REDUCED),
    "tiny": dict(_REDUCED, batch_size=32),
    "rnnsearch-small": dict(_REDUCED),
    "rnnsearch-tiny": dict(_REDUCED, batch_size=32),
    "rnnencdec-small": dict(_REDUCED),
    "rnnencdec-tiny": dict(_REDUCED, batch_size=32),
    "seq2seq-small": dict(_REDUCED),
    "seq2seq-tiny": dict(_REDUCED, batch_size=32),
}

OPTIMIZERS = ("adadelta", "adam", "sgd")
SCHEDULES = ("constant", "halving", "warmup_rsqrt")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("default", "mirrored", "multi_worker")


@dataclasses.dataclass
class TrainingConfig:
    """How to train: optimizer, batching, budgets, checkpoints and speed options.

    Start from `TrainingConfig.for_preset(name, **changes)`, which fills the preset's row of
    `TRAINING_DEFAULTS`.

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
            `bahdanau_tf.devices.training_choice` (bf16 on CPUs with bf16 units and on GPUs
            from compute capability 8.0, float16 on 7.x, float32 elsewhere).
        jit_compile: bool, compile the forward and backward pass with XLA. None (default): the
            device's choice (off on CPUs with bf16 units, on elsewhere).
        pad_to_multiple: int or None, pad batch lengths up to a multiple of this: bounds the
            number of XLA compilations, costs padding. None (default): 8 with ``jit_compile``,
            else 1 (a ``tf.function`` without XLA runs every shape with one trace).
            `padding_multiple` is the value in effect.
        seed: int, data order and initialisation.
        summaries: bool, write TensorBoard summaries to ``OUT/logs``.
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

    def speed_summary(self):
        """``"float32 + XLA (device choice: CPU without bfloat16 units)"``, for the header line."""
        words = f"{self.precision}{' + XLA' if self.jit_compile else ', no XLA'}"
        if not self.device_chose:
            return f"{words} (as set)"
        which = "" if len(self.device_chose) == 2 else f" of {self.device_chose[0]}"
        return f"{words} (device choice{which}: {self.device_choice.reason})"

    @property
    def padding_multiple(self):
        """The `pad_to_multiple` in effect: 8 under XLA, 1 without, unless set."""
        if self.pad_to_multiple is not None:
            return self.pad_to_multiple
        return 8 if self.jit_compile else 1

    @classmethod
    def for_preset(cls, preset, **changes):
        """The preset's row of `TRAINING_DEFAULTS`, with ``changes``."""
        return cls(**{**training_defaults(preset), **changes})


def training_defaults(preset):
    """The training settings of a preset name (a copy of its row of `TRAINING_DEFAULTS`)."""
    if preset not in TRAINING_DEFAULTS:
        raise ValueError(f"No training defaults for preset {preset!r}; known: {sorted(TRAINING_DEFAULTS)}.")
    return dict(TRAINING_DEFAULTS[preset])


class HalvingSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Sutskever et al. (2014): constant, then halved every ``every_epochs`` after ``start_epoch``.

    Args:
        initial_learning_rate: float (0.7).
        steps_per_epoch: int or an int tf.Variable (set once the corpus is counted).
        start_epoch: float, the first halving happens here (5).
        every_epochs: float, then every this many epochs (0.5).
    """

    def __init__(self, initial_learning_rate, steps_per_epoch, start_epoch=5.0, every_epochs=0.5):
        self.initial_learning_rate = float(initial_learning_rate)
        self.steps_per_epoch = steps_per_epoch
        self.start_epoch = float(start_epoch)
        self.every_epochs = float(every_epochs)

    def __call__(self, step):
        epoch = tf.cast(step, "float32") / tf.maximum(tf.cast(self.steps_per_epoch, "float32"), 1.0)
        halvings = tf.where(
            epoch >= self.start_epoch, tf.floor((epoch - self.start_epoch) / self.every_epochs) + 1.0, 0.0
        )
        return self.initial_learning_rate * tf.pow(0.5, halvings)

    def get_config(self):
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


def make_optimizer(config, steps_per_epoch=None):
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


def make_strategy(name="default", devices=None):
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


def _round_up(length, multiple):
    return (length + multiple - 1) // multiple * multiple


def _pad_batch(batch, multiple, max_length=None):
    """Pads both lengths of a ``((source, target_in), target_out)`` batch up to a multiple.

    XLA compiles one program per input shape; on the Bible (batch 64, pairs of at most 50
    tokens, the paper's length-sorted windows) lengths rounded up to a multiple of 8 leave 10
    shapes an epoch instead of hundreds, for 15% padding columns on the target side (masked
    everywhere). Lengths never exceed ``max_length + 1``, the longest a batch can be.
    """
    (source, target_in), target_out = batch

    def pad(ids, cap):
        length = tf.shape(ids)[1]
        padded = tf.minimum(_round_up(length, multiple), cap) if cap else _round_up(length, multiple)
        padded = tf.maximum(padded, length)
        return tf.pad(ids, [[0, 0], [0, padded - length]])

    cap = None if max_length is None else max_length + 1  # the longest pair plus [END]/[START]
    return (pad(source, cap), pad(target_in, cap)), pad(target_out, cap)


def _fill_batch(batch, batch_size):
    """Adds empty pairs to a short batch so that every batch has ``batch_size`` rows.

    An added pair is source ``[END]`` and target input ``[START]`` with no target output token:
    it counts for nothing in the loss (no NaN from an all-padding source either).
    """
    (source, target_in), target_out = batch
    missing = batch_size - tf.shape(source)[0]

    def fill(ids, first_id):
        extra = tf.zeros([missing, tf.shape(ids)[1]], ids.dtype)
        if first_id is not None:
            extra = tf.concat([tf.fill([missing, 1], tf.cast(first_id, ids.dtype)), extra[:, 1:]], axis=1)
        return tf.concat([ids, extra], axis=0)

    return (fill(source, END_ID), fill(target_in, START_ID)), fill(target_out, None)


def _scalar_summary(name, value):
    """A TensorBoard scalar, written with core TensorFlow only (TensorBoard need not be installed)."""
    from tensorflow.core.framework import summary_pb2

    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    )
    tf.summary.write(name, tf.cast(value, "float32"), metadata=metadata)


def _is_chief(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    return resolver.task_type in ("chief", None) or (
        resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()
    )


class NonFiniteLossError(RuntimeError):
    """Training stopped because the loss or the gradient became NaN or infinite."""


class Trainer:
    """Trains a model of a preset on a parallel corpus and writes its model directory.

    The model is built inside the strategy's scope, with the vocabulary sizes of the tokenizers
    and the dtype policy of ``config.precision``. When ``output_dir`` already holds a model, its
    config must match (`model_directory.check_same_model`) and training resumes from the latest
    checkpoint (step, weights, optimizer state, elapsed wall time, and the data position: the
    seeded input pipeline skips the batches already used).

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
        output_dir,
        source_tokenizer,
        target_tokenizer,
        preset="small",
        config=None,
        model_overrides=None,
        strategy=None,
        settings=None,
        log=None,
    ):
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
            model_directory_lib.build_model(self.model)
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

    def restore(self):
        """Prepares the output directory and restores its latest checkpoint, if any.

        A new directory gets ``model.json`` and the vocabularies; an existing one must hold the
        same model (else ValueError, from `model_directory.check_same_model`).

        Returns:
            str, the restored checkpoint's path, or None for a fresh start.
        """
        if self._restored is not None:
            return self._restored[0]
        config_path = os.path.join(self.output_dir, model_directory_lib.MODEL_CONFIG)
        if not self.is_chief:
            pass  # the chief checks and writes the directory; workers only restore
        elif tf.io.gfile.exists(config_path):
            model_directory_lib.check_same_model(self.output_dir, self.model)
        else:
            settings = {
                "preset": self.preset,
                "training": dataclasses.asdict(self.config),
                **self.settings,
            }
            model_directory_lib.write_model_config(
                self.output_dir, self.model, self.source_tokenizer, self.target_tokenizer, settings,
                device=self._device_record(),
            )
        latest = tf.train.latest_checkpoint(os.path.join(self.output_dir, model_directory_lib.CHECKPOINTS))
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            self._log(
                f"Resuming from {latest}: step {int(self.step.numpy())}, "
                f"{self.elapsed_seconds.numpy() / 60:.1f} min trained so far."
            )
        self._restored = (latest,)
        return latest

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
    def train_dataset(self, corpus, skip_batches=0, distribute=True):
        """The training input: shuffled, repeated, bucketed, padded batches of ``batch_size`` rows.

        Args:
            corpus: a `ParallelCorpus` (or sequence of pairs).
            skip_batches: int, batches to skip (the data position of a resumed run).
            distribute: bool, return ``strategy.experimental_distribute_dataset(...)``.
        """
        from bahdanau_tf import data  # data imports the tokenizers' tf-text ops: only when needed

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
        )
        if skip_batches:
            dataset = dataset.skip(skip_batches)
        dataset = self._full_padded_batches(dataset)
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
        return self.strategy.experimental_distribute_dataset(dataset) if distribute else dataset

    def _full_padded_batches(self, dataset):
        """Every batch ``batch_size`` rows (`_fill_batch`); lengths padded as `padding_multiple` says."""
        config = self.config
        dataset = dataset.map(lambda *batch: _fill_batch(batch, config.batch_size))
        if config.padding_multiple > 1:
            dataset = dataset.map(lambda *batch: _pad_batch(batch, config.padding_multiple, config.max_length))
        return dataset

    def _dev_dataset(self, corpus):
        from bahdanau_tf import data

        config = self.config
        corpus = corpus.select(slice(0, config.dev_sentences))
        # sorted by length (one window), so batches are dense and few shapes get compiled
        dataset = data.make_dataset(
            corpus,
            self.source_tokenizer,
            self.target_tokenizer,
            batch_size=config.batch_size,
            max_length=config.max_length,
            bucketing="paper",
            shuffle=False,
            batches_per_window=max(1, -(-len(corpus) // config.batch_size)),
        )
        dataset = self._full_padded_batches(dataset)
        return self.strategy.experimental_distribute_dataset(dataset.cache())

    def _count_pairs(self, corpus):
        """Pairs of ``corpus`` that survive the length filter (one tokenisation pass)."""
        from bahdanau_tf import data

        dataset = data.make_dataset(
            corpus, self.source_tokenizer, self.target_tokenizer, batch_size=1024,
            max_length=self.config.max_length, bucketing=None, shuffle=False,
        )
        def add_rows(count, batch):
            return count + tf.shape(batch[1])[0]

        return int(dataset.reduce(0, add_rows).numpy())

    def evaluate(self, dev_dataset):
        """Mean NLL per real target token of a (distributed) dev dataset."""
        total, tokens = 0.0, 0.0
        for batch in dev_dataset:
            nll_sum, count = self.eval_step(batch)
            total += float(nll_sum)
            tokens += float(count)
        return total / max(tokens, 1.0)

    # === The loop ===
    def fit(self, train_corpus, dev_corpus=None, start_time=None):
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
        """
        config = self.config
        start_time = time.time() if start_time is None else start_time
        deadline = None if config.max_minutes is None else start_time + 60 * config.max_minutes
        self.restore()
        resumed_step = int(self.step.numpy())
        train_pairs = self._count_pairs(train_corpus)
        if train_pairs == 0:
            raise ValueError(
                f"No training pair is at most max_length={config.max_length} tokens long on both sides."
            )
        steps_per_epoch = max(1, train_pairs // config.batch_size)
        self._steps_per_epoch.assign(steps_per_epoch)  # read by the halving schedule
        if resumed_step:
            self._log(f"Skipping the {resumed_step} batches already trained on (same seeded data order).")
        iterator = iter(self.train_dataset(train_corpus, skip_batches=resumed_step))
        dev_dataset = self._dev_dataset(dev_corpus) if dev_corpus is not None and len(dev_corpus) else None
        writer = None
        if config.summaries and self.is_chief:
            writer = tf.summary.create_file_writer(os.path.join(self.output_dir, "logs"))

        self._log(
            f"Training {type(self.model).__name__} ({self.preset}, {self.model.count_params():,} parameters) on "
            f"{train_pairs:,} pairs ({steps_per_epoch:,} updates/epoch), batch {config.batch_size}, "
            f"{config.optimizer} lr {config.learning_rate:g}, clipnorm {config.clipnorm}, {config.speed_summary()}, "
            f"{self.strategy.num_replicas_in_sync} replica(s), device {device_description()}."
        )
        elapsed_before = float(self.elapsed_seconds.numpy())
        run_start = time.time()
        window_start = run_start
        train_nll = dev_nll = None
        evaluations_without_improvement = 0
        stopped = None
        step = resumed_step
        tokens_total, tokens_time = 0.0, 0.0

        def check_finite():
            bad = int(self._first_nonfinite_step.numpy())
            if bad >= 0:
                latest = self.manager.latest_checkpoint
                message = (
                    f"Training stopped: the loss became non-finite (NaN or inf) at step {bad}. "
                    f"The last good checkpoint is kept: {latest or 'none was written yet'}. "
                    "Lower the learning rate, keep gradient clipping on, or use float32."
                )
                self._write_report(self._report(step, train_nll, dev_nll, run_start, elapsed_before, train_pairs,
                                                tokens_total, tokens_time, f"non-finite loss at step {bad}"))
                raise NonFiniteLossError(message)

        def save():
            check_finite()
            if not bool(self._weights_finite()):  # an update can overflow even from a finite loss
                self._first_nonfinite_step.assign(self.step)
                check_finite()
            self.elapsed_seconds.assign(elapsed_before + time.time() - run_start)
            self.manager.save(checkpoint_number=self.step)

        while True:
            if config.max_steps is not None and step >= config.max_steps:
                stopped = f"max_steps={config.max_steps}"
                break
            if deadline is not None and self._out_of_time(deadline, step, resumed_step):
                stopped = f"max_minutes={config.max_minutes:g}"
                break
            self.train_step(iterator)
            step += 1
            if step % config.log_every == 0:
                check_finite()
                loss_sum, tokens = float(self._loss_sum.numpy()), float(self._token_count.numpy())
                self._loss_sum.assign(0.0)
                self._token_count.assign(0.0)
                now = time.time()
                seconds = now - window_start
                window_start = now
                if step - resumed_step > config.log_every:  # the first window includes compilation
                    tokens_total += tokens
                    tokens_time += seconds
                train_nll = loss_sum / max(tokens, 1.0)
                tokens_per_second = tokens / max(seconds, 1e-9)
                learning_rate = float(self._current_learning_rate())
                self._log(
                    f"step {step:>7,}  epoch {float(self.sentences_seen.numpy()) / train_pairs:6.2f}  "
                    f"train NLL {train_nll:.3f}  |grad| {float(self._grad_norm.numpy()):.2f}  "
                    f"lr {learning_rate:.3g}  {tokens_per_second:,.0f} tok/s  "
                    f"{(elapsed_before + now - run_start) / 60:.1f} min"
                )
                if writer:
                    with writer.as_default(step=step):
                        _scalar_summary("train/nll", train_nll)
                        _scalar_summary("train/gradient_norm", self._grad_norm)
                        _scalar_summary("train/learning_rate", learning_rate)
                        _scalar_summary("train/tokens_per_second", tokens_per_second)
            if dev_dataset is not None and step % config.eval_every == 0:
                check_finite()
                dev_nll = self.evaluate(dev_dataset)
                improved = dev_nll < float(self.best_dev_nll.numpy())
                self._log(f"step {step:>7,}  dev NLL {dev_nll:.3f}" + ("  (best)" if improved else ""))
                if writer:
                    with writer.as_default(step=step):
                        _scalar_summary("dev/nll", dev_nll)
                if improved:
                    self.best_dev_nll.assign(dev_nll)
                    self.best_step.assign(step)
                    self.best_manager.save(checkpoint_number=self.step)
                    evaluations_without_improvement = 0
                else:
                    evaluations_without_improvement += 1
                    if config.patience is not None and evaluations_without_improvement >= config.patience:
                        stopped = f"early stopping (patience {config.patience})"
                        break
            if step % config.checkpoint_every == 0:
                save()

        check_finite()
        if step % config.log_every:  # the last partial window
            tokens = float(self._token_count.numpy())
            if tokens:
                train_nll = float(self._loss_sum.numpy()) / tokens
            self._loss_sum.assign(0.0)
            self._token_count.assign(0.0)
        if dev_dataset is not None and (step % config.eval_every or step == resumed_step):
            dev_nll = self.evaluate(dev_dataset)
            self._log(f"step {step:>7,}  dev NLL {dev_nll:.3f}")
            if dev_nll < float(self.best_dev_nll.numpy()):
                self.best_dev_nll.assign(dev_nll)
                self.best_step.assign(step)
                self.best_manager.save(checkpoint_number=self.step)
        if self.manager.latest_checkpoint is None or step != resumed_step and step % config.checkpoint_every:
            save()
        if writer:
            writer.flush()
        report = self._report(step, train_nll, dev_nll, run_start, elapsed_before, train_pairs, tokens_total,
                              tokens_time, stopped)
        self._write_report(report)
        self._cleanup()
        return report

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

    def _report(self, step, train_nll, dev_nll, run_start, elapsed_before, train_pairs, tokens, seconds, stopped):
        wall = elapsed_before + time.time() - run_start
        best = float(self.best_dev_nll.numpy())
        return {
            "updates": int(step),
            "epochs": round(float(self.sentences_seen.numpy()) / max(train_pairs, 1), 3),
            "wall_time_seconds": round(wall, 1),
            "wall_time": time.strftime("%H:%M:%S", time.gmtime(wall)),
            "device": device_description(),
            "replicas": int(self.strategy.num_replicas_in_sync),
            "train_nll": None if train_nll is None else round(train_nll, 4),
            "dev_nll": None if dev_nll is None else round(dev_nll, 4),
            "best_dev_nll": None if math.isinf(best) else round(best, 4),
            "best_step": int(self.best_step.numpy()) if not math.isinf(best) else None,
            "stopped_because": stopped,
            "target_tokens_per_second": round(tokens / seconds, 1) if seconds else None,
            "train_pairs": int(train_pairs),
            "preset": self.preset,
            "parameters": int(self.model.count_params()),
            "training": dataclasses.asdict(self.config),
        }

    def _write_report(self, report):
        if self.is_chief:
            with tf.io.gfile.GFile(os.path.join(self.output_dir, model_directory_lib.REPORT), "w") as f:
                f.write(json.dumps(report, indent=2, sort_keys=True) + "\n")

    def _cleanup(self):
        if not self.is_chief:
            shutil.rmtree(self._write_dir, ignore_errors=True)


def format_report(report):
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
    "TRAINING_DEFAULTS",
    "training_defaults",
    "HalvingSchedule",
    "WarmupRsqrtSchedule",
    "NonFiniteLossError",
    "make_optimizer",
    "make_strategy",
    "format_report",
]
