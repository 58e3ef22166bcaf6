"""How to train: `TrainingConfig`, the optimizer and learning-rate schedules, the strategy."""

import dataclasses

import keras
import tensorflow as tf

from bahdanau_tf import data
from bahdanau_tf import devices
from bahdanau_tf import presets


def _field(default, help_text: str):
    """A dataclass field whose help (``bahdanau-train --help``) is kept as data."""
    return dataclasses.field(default=default, metadata={"help": help_text})


OPTIMIZERS = ("adadelta", "adam", "sgd")
SCHEDULES = ("constant", "halving", "warmup_rsqrt", "plateau", "budget")
AVERAGE_AT = ("last", "best")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("default", "mirrored", "multi_worker")
SAMPLED_PROPOSALS = ("batch", "log_uniform")
REGULARIZATIONS = ("none", "budget")
#: the fields of one invocation, not of the run's recipe: a resumed run takes them from its own
#: command line (its wall-time budget, the machine's precision and XLA, what it logs and writes)
INVOCATION_FIELDS = ("max_minutes", "precision", "jit_compile", "pad_to_multiple", "log_every",
                     "summaries", "dev_bleu_every", "dev_bleu_sentences", "lexicon_top_k")
#: the recipe's fields a resumed run may change: honoured from the update it resumes at
CHANGEABLE_ON_RESUME = ("max_steps",)


def check_kept_recipe(output_dir: str, saved: dict, values: dict) -> None:
    """A resumed run keeps its training recipe: refuses ``values`` (``{field: value}``, the
    resumed run's) where a field, not one of `INVOCATION_FIELDS` or `CHANGEABLE_ON_RESUME`,
    differs from ``saved`` (the run's ``model.json`` ``settings["training"]``). Their state is in
    the checkpoint (the optimizer, the schedules, the dev counters) or their effect in the
    updates made. A field ``saved`` lacks (a run older than it) is not compared.

    Raises:
        ValueError: naming what the run was trained with and what cannot apply.
    """
    changes = [(name, saved[name], value) for name, value in values.items()
               if name in saved and name not in INVOCATION_FIELDS + CHANGEABLE_ON_RESUME
               and saved[name] != value]
    if changes:
        kept = ", ".join(f"--{name}={old}" for name, old, _ in changes)
        asked = ", ".join(f"--{name}={new}" for name, _, new in changes)
        raise ValueError(f"{output_dir!r} was trained with {kept}: a resumed run keeps its training "
                         f"recipe, so {asked} cannot apply; drop it, or train into a new --output_dir.")


@dataclasses.dataclass
class TrainingConfig:
    """How to train: optimizer, batching, budgets, checkpoints and speed options.

    Start from `TrainingConfig.for_preset(name, **changes)`, which fills in the training
    defaults of the preset's row of `bahdanau_tf.presets.PRESETS`. Each field's help is data
    (``dataclasses.field(metadata={"help": ...})``, `field_help`): ``bahdanau-train --help``
    shows it, one flag per field.
    """

    optimizer: str = _field("adam",
        '``"adadelta"`` (rho 0.95, epsilon 1e-6: the paper), ``"adam"`` or ``"sgd"``.')
    learning_rate: float = _field(1e-3,
        'The learning rate (the peak of ``"warmup_rsqrt"``).')
    clipnorm: float | None = _field(1.0,
        'The bound on the global L2 norm of the gradient (paper: 1).')
    schedule: str = _field("constant",
        '``"constant"``, ``"halving"`` (Sutskever et al.: halve the learning rate every half '
        'epoch after epoch 5) or ``"warmup_rsqrt"`` (`WarmupRsqrtSchedule`: linear warm-up '
        'over ``warmup_steps``, then decay as 1 / sqrt(step)) or ``"plateau"`` (multiply the '
        'learning rate by ``plateau_factor`` after ``plateau_patience`` dev evaluations without '
        'a better dev NLL; needs a dev set; `bahdanau_tf.training.dev_schedule`) or ``"budget"`` '
        '(`BudgetSchedule`: linear decay to zero over the run\'s budget, ``max_steps`` or '
        '``max_minutes``, whichever is spent first).')
    plateau_factor: float = _field(0.5,
        'With ``--schedule=plateau``: what each decay multiplies the learning rate by, in (0, 1).')
    plateau_patience: int = _field(2,
        'With ``--schedule=plateau``: dev evaluations without a better dev NLL (counted from '
        'the last better one or the last decay) before the learning rate decays.')
    warmup_steps: int = _field(200,
        'The warm-up of ``"warmup_rsqrt"``.')
    batch_size: int = _field(64,
        'Sentence pairs per update (global, over all replicas).')
    max_length: int = _field(50,
        'Longer pairs are dropped (the -50 / -30 of the presets).')
    bucketing: str | None = _field("paper",
        '``"paper"`` (1,600 pairs sorted by length, cut into 20 minibatches), '
        '``"token_budget"`` or None; see `bahdanau_tf.data.make_dataset`.')
    shuffle_buffer_size: int = _field(data.DEFAULT_SHUFFLE_BUFFER,
        'Sentence pairs the training shuffle draws from: its memory, whatever the corpus '
        "size (the embedded corpus's 27,989 training pairs are shuffled whole); every epoch is "
        'reshuffled, the same way for the same ``seed``.')
    max_steps: int | None = _field(None,
        'The update budget (counted over resumed runs).')
    max_minutes: float | None = _field(None,
        'The wall-time budget of this run, from ``start_time``.')
    early_stopping: int = _field(0,
        'Stop after this many dev evaluations in a row without a better dev NLL (0: never; '
        "``--patience`` is this flag's old name). The count is checkpointed: a resumed run stops "
        'where the uninterrupted one would.')
    regularization: str = _field("none",
        '``"none"`` or ``"budget"``: dropout and word dropout chosen from the epochs the run will '
        "make (`bahdanau_tf.training.budget.budget_regularization`: none up to 4 epochs, 0.1 / 0.05 "
        "from 8 to 16, 0.2 / 0.1 from 24), planned from the start of the run (at once under ``max_steps``; under "
        "``max_minutes`` after a minute and the second dev evaluation, then again as the pace is "
        "better known); the run's ``label_smoothing`` is withheld where the plan gives no dropout; "
        "dropout rates given "
        'to the model (0 included) switch it off. The CPU presets use ``"budget"``.')
    label_smoothing: float = _field(0.0,
        'Train on the label-smoothed cross-entropy (`bahdanau_tf.losses.smoothed_token_nll`: '
        'the target is (1 - eps) one-hot + eps uniform over the vocabulary), in [0, 1); the '
        'train and dev NLL shown and reported stay the plain NLL. Not with ``sampled_softmax``. '
        'Under ``regularization="budget"`` withheld from a run the rule plans no dropout for (a '
        'run planned to make up to 4 epochs learns the plain NLL). The default preset uses 0.1.')
    eval_every: int = _field(500,
        'Steps between dev NLL evaluations.')
    dev_sentences: int = _field(500,
        'The number of dev pairs used for the dev NLL (the first ones).')
    checkpoint_every: int = _field(500,
        'Steps between checkpoints (and one at the end).')
    keep_checkpoints: int = _field(3,
        'How many recent checkpoints `tf.train.CheckpointManager` keeps.')
    average_last: int = _field(0,
        'At the end of a run with a dev set (not one stopped by a signal), average the model '
        "weights of the last this many checkpoints (of the ``keep_checkpoints`` kept; 2 or "
        "more), write the average as ``OUT/averaged/`` (``--checkpoint=averaged``, as "
        '``bahdanau-average`` would) and make it ``best/`` when its dev NLL is lower than the '
        "best checkpoint's (``model.json`` records it). 0 (default, the paper's procedure): no "
        'averaging; the CPU presets (``small``, ``tiny``, ...) average the last 5 checkpoints, '
        '100 updates apart.')
    average_at: str = _field("last",
        'Which checkpoints ``average_last`` averages: ``"last"`` (the last ones of the run) or '
        '``"best"`` (the ``average_last`` checkpoints nearest the best dev NLL\'s step, before '
        'and after it: the run keeps model-only copies of them in ``OUT/around_best/``, so '
        'they outlive ``keep_checkpoints``).')
    log_every: int | None = _field(None,
        'Steps between progress lines and train summaries (the only host reads). None '
        '(default): scaled to the run, about 50 points over it (`bahdanau_tf.training.progress.'
        'log_cadence`: every max_steps / 50 steps or max_minutes * 60 / 50 seconds, whichever '
        'comes first; every 50 steps without a budget).')
    precision: str | None = _field(None,
        '``"float32"``, ``"mixed_bfloat16"`` or ``"mixed_float16"`` (dynamic loss scaling); '
        "logits and loss stay float32. None (default): the device's choice, "
        '`bahdanau_tf.devices.training_choice` (bf16 on GPUs from compute capability 8.0, '
        'float16 on 7.x, float32 on older GPUs and on every CPU).')
    jit_compile: bool | None = _field(None,
        "Compile the forward and backward pass (and the dev BLEU's greedy search) with XLA. "
        "None (default): the device's "
        'choice (on, for every device with its default precision).')
    pad_to_multiple: int | None = _field(None,
        'Pad batch lengths up to a multiple of this: bounds the number of XLA '
        'compilations, costs padding. None (default): 8 with ``jit_compile``, else 1 (a '
        '``tf.function`` without XLA runs every shape with one trace). `padding_multiple` is '
        'the value in effect.')
    sampled_softmax: int | None = _field(None,
        'Train with a sampled softmax over this many classes per batch (Jean et al. 2015: '
        '`bahdanau_tf.losses.sampled_token_nll`; `sampled_proposal` says which) instead of '
        'the full softmax, whose cost grows with '
        'the target vocabulary; the same output weights, so the dev NLL, translation and export '
        'use the full softmax unchanged. The train NLL shown is then the sampled loss. None '
        '(default): the full softmax. Must be below the target vocabulary size.')
    sampled_proposal: str = _field("batch",
        'Which K classes the sampled softmax scores. "batch" (default; Jean et al. 2015, '
        '`bahdanau_tf.losses.batch_candidates`): the batch\'s own target tokens, then uniform '
        'others, no correction. "log_uniform" (`tf.nn.sampled_softmax_loss`\'s, '
        '`sample_candidates`): Zipfian draws, each logit less log of its expected count.')
    lexicon_top_k: int = _field(10,
        'At the end of a run (not one stopped by a signal), write ``OUT/lexicon.tsv``: the '
        'top-k target tokens of each source token by sentence co-occurrence (Dice) in the '
        'training corpus (its first 100,000 pairs at most; `bahdanau_tf.lexicon`), what '
        'candidate-list decoding reads '
        '(``--candidate_lists``); one pass over the corpus (seconds for the embedded one). '
        '0: no lexicon. A directory that has one keeps it.')
    guided_alignment_weight: float = _field(1.0,
        'With guided alignment (``--guided_alignment=FILE``, `bahdanau_tf.alignment.'
        'guided`): the weight of the attention\'s cross-entropy against the given '
        'links, added to the NLL (both per target token).')
    guided_alignment_decay: float = _field(1.0,
        'The guided alignment weight is multiplied by this every 1,000 updates (smoothly: '
        '``weight * decay ** (step / 1000)``); 1 keeps it constant.')
    seed: int = _field(1234,
        'Data order and initialisation.')
    summaries: bool = _field(True,
        'Write TensorBoard summaries to ``OUT/logs`` (the series are listed in '
        "`Trainer`'s docstring).")
    dev_bleu_every: int = _field(2,
        'Translate the dev sample (greedy) at the first dev evaluation, then every this '
        'many evaluations, and at the last one: dev BLEU, attention images and sample '
        'translations go to TensorBoard; 0 never (needs ``summaries``).')
    dev_bleu_sentences: int = _field(100,
        'The dev sample: the first this many dev pairs (at most ``dev_sentences``, the '
        'pairs of the dev NLL).')

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
        if self.average_at not in AVERAGE_AT:
            raise ValueError(f"`average_at` must be one of {AVERAGE_AT}, got {self.average_at!r}.")
        self._check_dev_schedule()
        if self.precision not in PRECISIONS:
            raise ValueError(f"`precision` must be one of {PRECISIONS}, got {self.precision!r}.")
        positive = ["batch_size", "max_length", "shuffle_buffer_size", "eval_every",
                    "checkpoint_every", "dev_sentences", "keep_checkpoints", "warmup_steps", "plateau_patience"] + [
            name for name in ("pad_to_multiple", "log_every") if getattr(self, name) is not None]
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"`{name}` must be a positive int, got {value!r}.")
        if not self.learning_rate > 0:
            raise ValueError(f"`learning_rate` must be positive, got {self.learning_rate!r}.")
        if self.clipnorm is not None and not self.clipnorm > 0:
            raise ValueError(f"`clipnorm` must be positive or None, got {self.clipnorm!r}.")
        for name in ("lexicon_top_k", "average_last", "early_stopping"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"`{name}` must be an int >= 0, got {value!r}.")
        if self.max_steps is not None and self.max_steps < 0:
            raise ValueError(f"`max_steps` must be >= 0 or None, got {self.max_steps!r}.")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError(f"`max_minutes` must be positive or None, got {self.max_minutes!r}.")
        if self.sampled_softmax is not None and (
                isinstance(self.sampled_softmax, bool) or not isinstance(self.sampled_softmax, int)
                or self.sampled_softmax < 1):
            raise ValueError(f"`sampled_softmax` must be a positive int or None, got {self.sampled_softmax!r}.")
        if self.regularization not in REGULARIZATIONS:
            raise ValueError(f"`regularization` must be one of {REGULARIZATIONS}, got {self.regularization!r}.")
        if self.sampled_proposal not in SAMPLED_PROPOSALS:
            raise ValueError(f"`sampled_proposal` must be one of {SAMPLED_PROPOSALS}, got {self.sampled_proposal!r}.")
        if not self.guided_alignment_weight >= 0:
            raise ValueError(f"`guided_alignment_weight` must be >= 0, got {self.guided_alignment_weight!r}.")
        if not 0 < self.guided_alignment_decay <= 1:
            raise ValueError(f"`guided_alignment_decay` must be in (0, 1], got {self.guided_alignment_decay!r}.")
        for name, low in (("dev_bleu_every", 0), ("dev_bleu_sentences", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"`{name}` must be an int >= {low}, got {value!r}.")
        self.check_unused({field.name for field in dataclasses.fields(self)
                           if getattr(self, field.name) != field.default})

    def _check_dev_schedule(self):
        """The plateau factor and label smoothing in range."""
        if not 0.0 < self.plateau_factor < 1.0:
            raise ValueError(f"`plateau_factor` must be in (0, 1), got {self.plateau_factor!r}.")
        if isinstance(self.label_smoothing, bool) or not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"`label_smoothing` must be in [0, 1), got {self.label_smoothing!r}.")
        if self.label_smoothing and self.sampled_softmax:
            raise ValueError("`label_smoothing` needs the full softmax: it cannot be combined with "
                             "`sampled_softmax`.")

    def check_unused(self, given) -> None:
        """Refuses a field among ``given`` (the names of the fields set) that does nothing with
        the others: the plateau's settings without ``schedule="plateau"``, ``average_at``
        without ``average_last`` of 2 or more.

        Raises:
            ValueError: naming the setting (by its flag) and what it needs.
        """
        needs = {"plateau_factor": (self.schedule == "plateau", "--schedule=plateau"),
                 "plateau_patience": (self.schedule == "plateau", "--schedule=plateau"),
                 "average_at": (self.average_last >= 2, f"--average_last of 2 or more (it is {self.average_last})")}
        for name, (met, need) in needs.items():
            if name in given and not met:
                raise ValueError(f"--{name}={getattr(self, name)} does nothing without {need}.")

    def check_schedule(self, has_dev_set: bool) -> None:
        """What a run's settings need: a dev set (``plateau``, ``early_stopping``,
        ``average_at="best"``), a budget (``budget``)."""
        dev_set = "(--dev_tsv, or --dev_source_file and --dev_target_file)"
        if self.schedule == "plateau" and not has_dev_set:
            raise ValueError(f"--schedule=plateau decays on the dev NLL: it needs a dev set {dev_set}.")
        for name, value, what in (("early_stopping", self.early_stopping, "stops on the dev NLL"),
                                  ("average_at", self.average_at == "best", "averages around the best dev NLL")):
            if value and not has_dev_set:
                raise ValueError(f"--{name}={getattr(self, name)} {what}: it does nothing without a dev "
                                 f"set {dev_set}.")
        if self.schedule == "budget" and not (self.max_steps or self.max_minutes):
            raise ValueError("--schedule=budget decays over the run's budget: set --max_steps or --max_minutes "
                             "(or another --schedule).")

    def speed_summary(self):
        """``"float32 + XLA (device choice: CPU without bfloat16 units)"``, for the header line."""
        words = f"{self.precision}{' + XLA' if self.jit_compile else ', no XLA'}"
        if not self.device_chose:
            return f"{words} (as set)"
        which = "" if len(self.device_chose) == 2 else f" of {self.device_chose[0]}"
        return f"{words} (device choice{which}: {self.device_choice.reason})"

    def device_record(self) -> dict:
        """What ``model.json`` records about the device and the speed settings used on it."""
        return {
            "machine": devices.detect().to_json(),
            "precision": self.precision,
            "jit_compile": bool(self.jit_compile),
            "chosen_by_device": list(self.device_chose),  # the others were set explicitly
            "reason": self.device_choice.reason if self.device_choice is not None else None,
        }

    @property
    def padding_multiple(self) -> int:
        """The `pad_to_multiple` in effect: 8 under XLA, 1 without, unless set."""
        if self.pad_to_multiple is not None:
            return self.pad_to_multiple
        return 8 if self.jit_compile else 1

    @classmethod
    def field_help(cls) -> dict:
        """``{field name: help text}`` of every field (the command line's flag help)."""
        return {field.name: field.metadata["help"] for field in dataclasses.fields(cls)}

    @classmethod
    def for_preset(cls, preset: str, **changes) -> "TrainingConfig":
        """The preset's training defaults (`bahdanau_tf.presets.PRESETS`), with ``changes``
        (each checked to do something: `check_unused`)."""
        config = cls(**{**presets.get_preset(preset).training, **changes})
        config.check_unused(changes)
        return config


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


class BudgetSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear decay from the peak to zero over the run's budget (Li et al. 2020, *Budgeted
    Training*: under a fixed budget, a rate that reaches zero as the budget ends).

    ``lr = peak * (1 - progress)``, where progress is the larger of ``step / max_steps`` and the
    spent fraction of the wall-time budget, which the trainer writes into ``time_progress``
    before each update. A run with a time budget therefore anneals on any machine: a faster one
    makes more updates, at the same shape of rate. Under a step budget alone the rate is a
    function of the step (a resumed run continues it exactly); the time budget, like
    ``max_minutes`` itself, is the running invocation's.

    Args:
        peak_learning_rate: float.
        max_steps: int or None (no step budget).
        time_progress: float tf.Variable in [0, 1] (0 without a time budget).
    """

    def __init__(self, peak_learning_rate, max_steps, time_progress):
        self.peak_learning_rate = float(peak_learning_rate)
        self.max_steps = None if not max_steps else int(max_steps)
        self.time_progress = time_progress

    def __call__(self, step):
        progress = tf.cast(self.time_progress, "float32")
        if self.max_steps:
            progress = tf.maximum(progress, tf.cast(step, "float32") / float(self.max_steps))
        return self.peak_learning_rate * tf.maximum(1.0 - progress, 0.0)

    def get_config(self):
        return dict(peak_learning_rate=self.peak_learning_rate, max_steps=self.max_steps,
                    time_progress=float(self.time_progress))


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


def make_optimizer(config: TrainingConfig, steps_per_epoch: int | tf.Variable | None = None,
                   time_progress: tf.Variable | None = None) -> keras.optimizers.Optimizer:
    """The Keras optimizer of a `TrainingConfig` (clipping is done by the trainer, not here);
    ``time_progress``: the spent fraction of the wall-time budget (`BudgetSchedule`)."""
    learning_rate = config.learning_rate
    if config.schedule == "budget":
        learning_rate = BudgetSchedule(learning_rate, config.max_steps,
                                       tf.Variable(0.0, trainable=False) if time_progress is None else time_progress)
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


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes the model directory (the chief, or worker 0 without one)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    return resolver.task_type in ("chief", None) or (
        resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()
    )
