"""What the dev set decides during a run: learning-rate decay on a plateau and early stopping.

`DevSchedule` counts the dev evaluations without a better dev NLL. With ``schedule="plateau"``
it multiplies the learning rate by ``plateau_factor`` after ``plateau_patience`` of them
(counted again from each decay: Keras's ``ReduceLROnPlateau`` and OpenNMT-tf's decay on plateau
do the same, measured in evaluations); with ``early_stopping=N`` it stops the run after N in a
row. Its counters are variables of the trainer's checkpoint, and the learning rate is the
optimizer's (checkpointed with it): a resumed run decays and stops where the uninterrupted one
would. Only the evaluations on the run's cadence count (every ``eval_every`` updates and at the
run's end), never one at a signal's stop, which would not happen in an uninterrupted run.

The checkpoints around the best dev point that ``average_at="best"`` averages are
`bahdanau_tf.checkpoint_averaging.AroundBest`'s.
"""

from __future__ import annotations

import tensorflow as tf

class DevSchedule(tf.Module):
    """The dev-driven part of a `TrainingConfig`: plateau decay and early stopping.

    Args:
        config: a `bahdanau_tf.training.TrainingConfig` (``schedule``, ``learning_rate``,
            ``plateau_factor``, ``plateau_patience``, ``early_stopping``).

    Example:

    >>> schedule = DevSchedule(TrainingConfig(schedule="plateau", plateau_patience=2,
    ...                                       early_stopping=3, precision="float32",
    ...                                       jit_compile=False))
    >>> [schedule.record(improved) for improved in (True, False, False)][-1]
    0.0005
    >>> schedule.record(False), schedule.stop_reason()
    (None, 'early stopping (3 dev evaluations without a better dev NLL)')
    """

    def __init__(self, config) -> None:
        super().__init__(name="dev_schedule")
        self._config = config
        self.without_improvement = tf.Variable(0, dtype="int64", trainable=False, name="without_improvement")
        self.since_decay = tf.Variable(0, dtype="int64", trainable=False, name="since_decay")
        self.decays = tf.Variable(0, dtype="int64", trainable=False, name="decays")

    @property
    def learning_rate(self) -> float:
        """The plateau schedule's learning rate now: ``learning_rate * plateau_factor ** decays``."""
        return self._config.learning_rate * self._config.plateau_factor ** int(self.decays.numpy())

    def record(self, improved: bool) -> float | None:
        """Counts one dev evaluation; returns the new learning rate when it decays, else None."""
        if improved:
            self.without_improvement.assign(0)
            self.since_decay.assign(0)
            return None
        self.without_improvement.assign_add(1)
        self.since_decay.assign_add(1)
        config = self._config
        if config.schedule != "plateau" or int(self.since_decay.numpy()) < config.plateau_patience:
            return None
        self.since_decay.assign(0)
        self.decays.assign_add(1)
        return self.learning_rate

    def stop_reason(self) -> str | None:
        """Why early stopping ends the run now, or None."""
        patience = self._config.early_stopping
        if patience and int(self.without_improvement.numpy()) >= patience:
            return f"early stopping ({patience} dev evaluations without a better dev NLL)"
        return None


__all__ = ["DevSchedule"]
