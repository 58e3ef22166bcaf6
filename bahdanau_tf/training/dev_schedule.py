"""What the dev set decides during a run: learning-rate decay on a plateau, early stopping, and
which checkpoints the end-of-run average takes.

- `DevSchedule` counts the dev evaluations without a better dev NLL. With ``schedule="plateau"``
  it multiplies the learning rate by ``plateau_factor`` after ``plateau_patience`` of them
  (counted again from each decay: Keras's ``ReduceLROnPlateau`` and OpenNMT-tf's decay on
  plateau do the same, measured in evaluations); with ``early_stopping=N`` it stops the run
  after N in a row. Its counters are variables of the trainer's checkpoint, and the learning
  rate is the optimizer's (checkpointed with it): a resumed run decays and stops where the
  uninterrupted one would.
- `AroundBest` keeps model-only copies of the checkpoints nearest the best dev point
  (``OUT/around_best/ckpt-STEP``), so that ``average_at="best"`` can average the checkpoints
  around it, before and after, rather than the run's last ones.
"""

from __future__ import annotations

import os
import re

import tensorflow as tf

#: the directory of `AroundBest`'s copies inside a run's output directory
AROUND_BEST = "around_best"


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


def _snapshot_steps(directory: str) -> list:
    """The steps of the whole copies in ``directory`` (their ``.index`` written last), sorted."""
    if not tf.io.gfile.isdir(directory):
        return []
    steps = (re.fullmatch(r"ckpt-(\d+)\.index", name) for name in tf.io.gfile.listdir(directory))
    return sorted(int(match.group(1)) for match in steps if match)


def nearest_steps(steps: list, best_step: int, count: int) -> list:
    """The ``count`` steps nearest ``best_step`` (an earlier one first on a tie), sorted.

    >>> nearest_steps([100, 200, 300, 400, 500, 600], 300, 4)
    [100, 200, 300, 400]
    """
    return sorted(sorted(steps, key=lambda step: (abs(step - best_step), step))[:count])


class AroundBest:
    """Model-only copies of the checkpoints around the best dev point, for averaging.

    `write` is called at each checkpoint step; it keeps the ``size`` copies nearest the best
    step and the last ``size`` (one of which may be near a later best), and deletes the others.

    Args:
        directory: str, ``OUT/around_best``.
        size: int, how many checkpoints the average takes (``average_last``).
    """

    def __init__(self, directory: str, size: int) -> None:
        self.directory = directory
        self.size = size

    def path(self, step: int) -> str:
        return os.path.join(self.directory, f"ckpt-{step}")

    def write(self, model, step: int, best_step: int) -> None:
        """Copies ``model``'s weights as of ``step``, then prunes."""
        tf.io.gfile.makedirs(self.directory)
        checkpoint = tf.train.Checkpoint(model=model)
        checkpoint.save_counter  # noqa: B018 - created when read: what a manager's checkpoint holds too
        checkpoint.write(self.path(step))
        steps = _snapshot_steps(self.directory)
        keep = set(nearest_steps(steps, best_step, self.size)) | set(steps[-self.size:])
        for old in set(steps) - keep:
            for name in tf.io.gfile.glob(self.path(old) + ".*"):
                tf.io.gfile.remove(name)

    def chosen(self, best_step: int, last_step: int) -> list:
        """Paths of the copies to average: the ``size`` nearest ``best_step``, none past
        ``last_step`` (a resumed run's copies of steps it has not reached again)."""
        steps = [step for step in _snapshot_steps(self.directory) if step <= last_step]
        return [self.path(step) for step in nearest_steps(steps, best_step, self.size)]


__all__ = ["AROUND_BEST", "AroundBest", "DevSchedule", "nearest_steps"]
