"""Training (DESIGN §2): the paper's procedure in one `tf.function` step, under `tf.distribute`.

The package, by job: `config` (`TrainingConfig`, optimizer, schedules, strategy), `budget` (the
budget and what is spent of it, the pace, the plan of epochs, the ETA and the budget rule's
dropout), `trainer` (the `Trainer` loop), `progress` (the run's state, when the progress line is
written, the throughput without compilation), `dev_schedule` (decay on a dev plateau, early
stopping), `run_directory` (lock, signals, ``model.json``, ``report.json`` and its table-2 text,
a failed start cleaned up), `summaries` (TensorBoard). Guided alignment (the trainer's
``guided_alignment=`` term) and the alignment head are `bahdanau_tf.alignment`'s. Every public name is
importable from ``bahdanau_tf.training``; the end-of-run average is `bahdanau_tf.checkpoint_averaging`'s.

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
variables that the host reads at each progress line (`progress.log_cadence`), every
``eval_every`` steps (dev NLL) and before every checkpoint. Under XLA, which compiles one program
per input shape, batch lengths are padded up to a multiple of 8 so that it meets only a handful
of shapes (`bahdanau_tf.data.make_dataset` pads and fills the batches); without XLA batches keep their own lengths (one trace serves all).

Training defaults per preset live next to the architecture, in `bahdanau_tf.presets.PRESETS`:
the paper presets use Adadelta (lr 1.0, rho 0.95, eps 1e-6), clipnorm 1, batch 80 and the
paper's bucketing; ``seq2seq`` uses Sutskever et al.'s SGD 0.7, halved every half epoch after
epoch 5, clipnorm 5, batch 128; the reduced CPU presets use Adam.
"""

from bahdanau_tf.training.config import (
    AVERAGE_AT,
    CHANGEABLE_ON_RESUME,
    INVOCATION_FIELDS,
    OPTIMIZERS,
    PRECISIONS,
    REGULARIZATIONS,
    SAMPLED_PROPOSALS,
    SCHEDULES,
    STRATEGIES,
    HalvingSchedule,
    TrainingConfig,
    BudgetSchedule,
    WarmupRsqrtSchedule,
    check_kept_recipe,
    is_chief,
    make_optimizer,
    make_strategy,
)
from bahdanau_tf.training.budget import Budget, BudgetRule, budget_regularization
from bahdanau_tf.checkpoint_averaging import AroundBest  # the checkpoints around the best dev point
from bahdanau_tf.training.dev_schedule import DevSchedule
from bahdanau_tf.training.progress import RunState
from bahdanau_tf.training.run_directory import (
    DirectoryInUseError,
    DirectoryLock,
    RunDirectory,
    StopSignals,
    TrainingInterrupted,
    format_report,
    training_report,
)
from bahdanau_tf.training.summaries import Summaries
from bahdanau_tf.training.trainer import NonFiniteLossError, Trainer

__all__ = [
    "AroundBest",
    "Budget",
    "BudgetRule",
    "DevSchedule",
    "Trainer",
    "TrainingConfig",
    "HalvingSchedule",
    "BudgetSchedule",
    "WarmupRsqrtSchedule",
    "NonFiniteLossError",
    "DirectoryInUseError",
    "TrainingInterrupted",
    "make_optimizer",
    "make_strategy",
    "format_report",
    "AVERAGE_AT",
    "CHANGEABLE_ON_RESUME",
    "INVOCATION_FIELDS",
    "budget_regularization",
    "check_kept_recipe",
    "OPTIMIZERS",
    "PRECISIONS",
    "REGULARIZATIONS",
    "SAMPLED_PROPOSALS",
    "SCHEDULES",
    "STRATEGIES",
]
