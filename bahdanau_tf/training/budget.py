"""The run's budget: what it allows, what is spent, the pace, the plan of epochs, the ETA, and
the regularisation the plan calls for (the budget rule).

A run has an update budget (``max_steps``, counted over resumed runs), a wall-time budget (this
invocation's ``max_minutes``, from its start), both, or neither. `Budget` is the one place that
knows them: the spent share (the learning rate's `BudgetSchedule` reads it), where the wall time
went besides the updates (`timed`: dev evaluations, checkpoints, averaging), whether the time
is up, the pace (wall seconds per update over the last minutes, a fifth of a time budget's, from
the first update on, everything that recurs in it: checkpoints, progress lines, and the dev
evaluations charged by their schedule at what they cost once their graphs are built; not the
one-off compilation of a new batch shape or of the first evaluation), the plan (the updates, and so the epochs, the run
will have made when its budget ends) and the progress line's ETA.

`BudgetRule` gives a model's training pass the dropout the plan calls for
(`budget_regularization`): none for a run too short to overfit, rising with the epochs planned;
the run's label smoothing, if it has one, is withheld where the plan gives no dropout.
It decides from the start of the run: at update 0 under ``max_steps`` (the plan is exact), and
under a time budget once the first compilations are behind it (`FIRST_PLAN_SECONDS`) and a dev
evaluation's cost is known (the second evaluation), then again every `REPLAN_SECONDS` as the
pace is better known. The rates are variables read by the traced
step, so a new rate costs no new trace; on several workers the plan is averaged over them, so
every replica draws at the same rates.
"""

from __future__ import annotations

import collections
import contextlib
import math
import time
import keras
import numpy as np
import tensorflow as tf

from bahdanau_tf.models import regularization

#: the budget rule: the share of `FULL_RATES` given to a run planned to make so many epochs,
#: linear between these points: none up to `ONSET_EPOCHS` (the run ends before the recipe
#: overfits, and dropout only slows its learning), half from 8 to 16 epochs (where half beat the
#: full rates), the full rates from `FULL_EPOCHS` (docs/training.md, "Dropout over the budget")
ONSET_EPOCHS, FULL_EPOCHS = 4.0, 24.0
RULE_POINTS = ((ONSET_EPOCHS, 0.0), (8.0, 0.5), (16.0, 0.5), (FULL_EPOCHS, 1.0))
FULL_RATES = {"dropout": 0.2, "word_dropout": 0.1}
#: a share of the full rates below this is too small to matter: none
SMALLEST_SHARE = 0.25
#: a time budget's first plan: this long into the invocation (its first compilations behind it),
#: or `FIRST_PLAN_SHARE` of its minutes when that comes first; with dev evaluations, not before
#: one's cost is known (`Budget.knows_evaluations`) unless `LATEST_FIRST_PLAN_SHARE` of the
#: minutes is spent (a plan so late would regularise too little of the run to matter)
FIRST_PLAN_SECONDS, FIRST_PLAN_SHARE, LATEST_FIRST_PLAN_SHARE = 60.0, 0.1, 0.4
#: how often a time budget's plan is made again (`REPLAN_SHARE` of its minutes when that is
#: sooner)
REPLAN_SECONDS, REPLAN_SHARE = 30.0, 0.05
#: the window the pace is taken over: `PACE_WINDOW_SHARE` of a time budget's minutes, at least
#: `PACE_WINDOW_SECONDS` (a long run's plan rides out a slow minute or two of a shared machine;
#: benchmarks/budget_curve.py measures the plans against the epochs made)
PACE_WINDOW_SECONDS, PACE_WINDOW_SHARE = 120.0, 0.2
#: the parts of an invocation's wall time besides its updates that `Budget.timed` measures, as
#: the report names them (``report.json``'s ``seconds``)
TIMED_PARTS = {"dev_nll": "dev NLL", "dev_bleu": "dev BLEU", "checkpoints": "checkpoints",
               "averaging": "averaging"}
#: an update this many times slower than the window's median one compiled (a new batch shape, a
#: first trace): a cost paid once, whose time beyond the median the pace leaves out
ONE_OFF_FACTOR = 10.0


def budget_regularization(epochs: float, label_smoothing: float = 0.0) -> dict:
    """The regularisation of a run planned to make ``epochs`` epochs: ``{"dropout": rate,
    "word_dropout": rate, "label_smoothing": eps}``; the dropout rates the share of `FULL_RATES`
    that `RULE_POINTS` give (0 up to `ONSET_EPOCHS`, all from `FULL_EPOCHS`), in tenths of the
    full rates (so the jitter of a time budget's plan seldom changes a rate), 0 below
    `SMALLEST_SHARE` of them; the run's ``label_smoothing`` where there is dropout, else 0 (a run
    too short to overfit learns the plain NLL: benchmarks/recipe.md, "Label smoothing").

    Example:
        budget_regularization(8.0, 0.1)  # {'dropout': 0.1, 'word_dropout': 0.05, 'label_smoothing': 0.1}
        budget_regularization(4.0, 0.1)  # {'dropout': 0.0, 'word_dropout': 0.0, 'label_smoothing': 0.0}
        budget_regularization(24.0)  # {'dropout': 0.2, 'word_dropout': 0.1, 'label_smoothing': 0.0}
    """
    share = round(float(np.interp(epochs, *zip(*RULE_POINTS))), 1)
    if share < SMALLEST_SHARE:
        share = 0.0
    rates = {name: round(rate * share, 3) for name, rate in FULL_RATES.items()}
    return dict(rates, label_smoothing=float(label_smoothing) if share else 0.0)


class Budget:
    """A run's budget, what it has spent, its pace and its plan.

    Args:
        max_steps: int or None, the update budget (counted over resumed runs).
        max_minutes: float or None, this invocation's wall-time budget.
        start_time: ``time.time()`` at which the wall-time budget started.
        steps_per_epoch: float, the updates of one epoch (the pairs over the batch size: below
            1 for a corpus smaller than a batch, whose every update is several epochs).
        eval_every: int or None, the updates between two dev evaluations (None: no dev set).

    Example:

        budget = Budget(max_steps=None, max_minutes=12, start_time=time.time(), steps_per_epoch=436)
        budget.record(step, time.time())  # before each update
        budget.add_update(seconds, time.time())  # after it
        budget.add_evaluation(seconds, time.time())  # after a dev evaluation on the schedule
        with budget.timed("checkpoints"): ...  # the report's parts of the wall time
        budget.planned_epochs(step, time.time())  # None until the pace is known
    """

    def __init__(self, max_steps: int | None, max_minutes: float | None, start_time: float,
                 steps_per_epoch: float, eval_every: int | None = None) -> None:
        self.max_steps, self.max_minutes = max_steps, max_minutes
        self.start_time, self.steps_per_epoch = start_time, float(steps_per_epoch)
        self.eval_every = eval_every
        self.deadline = None if max_minutes is None else start_time + 60.0 * max_minutes
        self.pace_window = max(PACE_WINDOW_SECONDS, PACE_WINDOW_SHARE * 60.0 * (max_minutes or 0.0))
        self._samples = collections.deque()  # (time, step), the pace's window, from the first update
        self._updates = collections.deque()  # (end time, seconds) of the updates in the window
        self._evaluations = []  # (end time, seconds) of this invocation's dev evaluations
        self.part_seconds = {}  # the `timed` parts of this invocation's wall time

    def record(self, step: int, now: float) -> None:
        """Notes that ``step`` updates were made by ``now`` (the pace's samples, one a second)."""
        if not self._samples or now - self._samples[-1][0] >= 1.0:
            self._samples.append((now, step))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.pace_window:
            self._samples.popleft()

    def add_update(self, seconds: float, now: float) -> None:
        """Notes an update of ``seconds`` that ended at ``now`` (the pace tells compilations by them)."""
        self._updates.append((now, seconds))
        while self._samples and self._updates[0][0] <= self._samples[0][0]:
            self._updates.popleft()

    def add_evaluation(self, seconds: float, now: float) -> None:
        """Notes a dev evaluation on the ``eval_every`` schedule of ``seconds`` that ended at ``now``."""
        self._evaluations.append((now, seconds))

    @contextlib.contextmanager
    def timed(self, part: str):
        """Adds the wall time of the ``with`` block (also one cut short) to
        ``part_seconds[part]`` (a `TIMED_PARTS` key)."""
        started = time.time()
        try:
            yield
        finally:
            self.part_seconds[part] = self.part_seconds.get(part, 0.0) + time.time() - started

    def knows_evaluations(self) -> bool:
        """Whether the pace can charge the dev evaluations: none are scheduled, or one after the
        first (whose time is their cost once their graphs are built) has been timed."""
        return not self.eval_every or len(self._evaluations) >= 2

    def evaluation_seconds(self) -> float:
        """What a dev evaluation costs: the mean of this invocation's after its first (which
        builds the evaluation's graphs, a cost paid once); 0 until one is known."""
        later = [seconds for _, seconds in self._evaluations[1:]]
        return sum(later) / len(later) if later else 0.0

    def _window_evaluation_seconds(self) -> float:
        """The seconds of the window spent in dev evaluations (charged by schedule instead)."""
        start = self._samples[0][0]
        return sum(min(seconds, end - start) for end, seconds in self._evaluations if end > start)

    def _one_off_seconds(self) -> float:
        """The window's compiling updates' seconds beyond its median update's (`ONE_OFF_FACTOR`)."""
        if not self._updates:
            return 0.0
        seconds = sorted(update for _, update in self._updates)
        median = seconds[len(seconds) // 2]
        return sum(update - median for update in seconds if update > ONE_OFF_FACTOR * median)

    def seconds(self, now: float) -> float:
        """The wall seconds of this invocation's budget spent by ``now``."""
        return max(now - self.start_time, 0.0)

    def time_share(self, now: float) -> float:
        """The spent share of the minutes, in [0, 1] (0 without a time budget)."""
        if self.deadline is None:
            return 0.0
        return min(self.seconds(now) / (60.0 * self.max_minutes), 1.0)

    def out_of_time(self, now: float) -> bool:
        return self.deadline is not None and now >= self.deadline

    def pace(self, step: int, now: float) -> float | None:
        """Wall seconds per update: over the last ``pace_window`` seconds (from this invocation's
        first update while it is shorter), everything that recurs in it but the dev evaluations,
        less the compiling updates' time beyond a median update's; plus the dev evaluations
        charged by their schedule (`evaluation_seconds` every ``eval_every`` updates). None before
        this invocation's first update."""
        if not self._samples or step <= self._samples[0][1]:
            return None
        then, step_then = self._samples[0]
        set_aside = self._one_off_seconds() + self._window_evaluation_seconds()
        training = max(now - then - set_aside, 0.0) / (step - step_then)
        return training + (self.evaluation_seconds() / self.eval_every if self.eval_every else 0.0) or None

    def planned_updates(self, step: int, now: float) -> float | None:
        """The updates the run will have made when its budget ends: ``max_steps``, or those the
        minutes left allow at the pace, whichever is fewer; None when neither is known."""
        ends = [self.max_steps] if self.max_steps else []
        pace = self.pace(step, now)
        if self.deadline is not None and pace:
            ends.append(step + max(self.deadline - now, 0.0) / pace)
        return min(ends) if ends else None

    def planned_epochs(self, step: int, now: float) -> float | None:
        updates = self.planned_updates(step, now)
        return None if updates is None else updates / self.steps_per_epoch

    def progress(self, step: int, now: float) -> str:
        """The progress line's budget: the limit that ends the run first at the pace, and the
        time left under it (``30 / 50 steps  ETA 0.3 min``, ``2.1 / 5.0 min  ETA 2.9 min``;
        without a budget, the minutes of this invocation)."""
        return budget_progress(step, self.max_steps, self.seconds(now) / 60.0, self.max_minutes,
                               self.pace(step, now))


def budget_progress(step: int, max_steps: int | None, minutes: float, max_minutes: float | None,
                    seconds_per_step: float | None) -> str:
    """The budget that binds, and the time left under it: ``max_steps`` when the steps left take
    no longer at ``seconds_per_step`` than the minutes left, else ``max_minutes``.

    Example:

        budget_progress(30, 50, 0.5, 12.0, 1.0)  # '30 / 50 steps  ETA 0.3 min'
    """
    time_left = None if max_minutes is None else max(max_minutes - minutes, 0.0) * 60.0
    steps_left = None
    if max_steps is not None and seconds_per_step is not None:
        steps_left = max(max_steps - step, 0) * seconds_per_step
    if max_steps is not None and (time_left is None or (steps_left is not None and steps_left <= time_left)):
        text = f"{step:,} / {max_steps:,} steps"
        return text if steps_left is None else f"{text}  ETA {steps_left / 60:.1f} min"
    if time_left is not None:
        return f"{minutes:.1f} / {max_minutes:.1f} min  ETA {time_left / 60:.1f} min"
    return f"{minutes:.1f} min"


class BudgetRule:
    """The budget rule's regularisation (`budget_regularization`) in a model's training pass.

    Holds the rates in variables that ``model.dropouts`` follows (`regularization.Dropouts.follow`):
    ``dropout`` for the embeddings, the annotations, the decoder state and the readout,
    ``word_dropout`` for the source words; and the loss's epsilon (`label_smoothing`, which the
    training step reads: the run's own from the first update, as the recipe measured over the
    budgets long enough for dropout, 0 from a plan that gives no dropout). The model's config,
    weights and inference passes are unchanged. The rates and the seed state are checkpointed
    (`checkpoint_parts`), so a resumed run draws the masks the uninterrupted one would. Build it
    in the strategy's scope.

    Args:
        model: a `TranslationModel` without dropout of its own.
        label_smoothing: float, the run's label smoothing (withheld while a plan gives no
            dropout; 0: none).
    """

    def __init__(self, model, label_smoothing: float = 0.0) -> None:
        self.model = model
        self.full_label_smoothing = float(label_smoothing)
        self.seed_generator = keras.random.SeedGenerator(name="budget_dropout_seed")
        initial = dict.fromkeys(FULL_RATES, 0.0)  # no dropout until a plan calls for it
        initial["label_smoothing"] = self.full_label_smoothing
        self._held = {name: tf.Variable(value, trainable=False, name=f"budget_{name}")
                      for name, value in initial.items()}
        self.plans = []  # the epochs of this invocation's plans, in order (the report's)
        self._next_plan = None

    def attach(self) -> None:
        """Makes the model's training pass draw at the held rates (before its first trace)."""
        dropout, words = self._held["dropout"], self._held["word_dropout"]
        rates = dict.fromkeys(regularization.DROPOUT_ARGUMENTS[:4], dropout)
        self.model.dropouts.follow(dict(rates, word_dropout=words), self.seed_generator)

    def detach(self) -> None:
        """Gives the model's training pass its own rates back (none)."""
        model = self.model
        model.dropouts.follow({name: getattr(model, name) for name in regularization.DROPOUT_ARGUMENTS},
                              getattr(model, "seed_generator", None))

    @property
    def rates(self) -> dict:
        return {name: round(float(variable.numpy()), 4) for name, variable in self._held.items()}

    @property
    def label_smoothing(self) -> tf.Variable:
        """The loss's epsilon now: a variable the traced step reads (0 while a plan gives no dropout)."""
        return self._held["label_smoothing"]

    def set_epochs(self, epochs: float) -> bool:
        """Holds the rates of a run planned to make ``epochs`` epochs; whether a rate changed."""
        rates = budget_regularization(epochs, self.full_label_smoothing)
        changed = rates != self.rates
        for name, variable in self._held.items():
            variable.assign(rates[name])
        self.plans.append(epochs)
        return changed

    @property
    def planned(self) -> float | None:
        """The epochs of the last plan (None before the first)."""
        return self.plans[-1] if self.plans else None

    def update(self, budget: Budget, step: int, now: float, vote: WorkerVote | None = None,
               updates: int = 0) -> str | None:
        """Plans when a plan is due and holds its rates; the log line of a change, else None.

        Due: under an update budget alone, once (the plan is exact); under a time budget,
        `FIRST_PLAN_SECONDS` into the invocation (or `FIRST_PLAN_SHARE` of its minutes) once a
        dev evaluation's cost is known (or `LATEST_FIRST_PLAN_SHARE` of the minutes is spent), then
        every `REPLAN_SECONDS` (or `REPLAN_SHARE` of its minutes). On several workers (``vote``,
        ``updates`` of this invocation) they plan together at the voting updates, from the mean
        of ``[due, epochs]`` over them.
        """
        agree = None
        if vote is not None and vote.workers > 1:
            if not vote.due(updates):
                return None
            agree = vote.mean
        if self._next_plan is None:  # this invocation's first call
            self._next_plan = -math.inf if budget.deadline is None else budget.start_time + min(
                FIRST_PLAN_SECONDS, FIRST_PLAN_SHARE * 60.0 * budget.max_minutes)
        exact_done = budget.deadline is None and self.planned is not None
        epochs = None if exact_done or now < self._next_plan or not self._knows_enough(budget, now) \
            else budget.planned_epochs(step, now)
        if agree is not None:
            due, mean = agree([float(epochs is not None), epochs or 0.0])
            epochs = mean / due if due > 0 else None
        if epochs is None:
            return None
        self._next_plan = now + (REPLAN_SECONDS if budget.deadline is None
                                 else min(REPLAN_SECONDS, REPLAN_SHARE * 60.0 * budget.max_minutes))
        if not self.set_epochs(epochs):
            return None
        rates = self.rates
        smoothing = f", label smoothing {rates['label_smoothing']:g}" if self.full_label_smoothing else ""
        return (f"step {step:>7,}  regularisation for ~{epochs:.1f} epochs (the budget rule): dropout "
                f"{rates['dropout']:g}, word dropout {rates['word_dropout']:g}{smoothing}")

    def _knows_enough(self, budget: Budget, now: float) -> bool:
        """Whether a plan can charge everything that recurs: a time budget's first waits until a
        dev evaluation's cost is known, or `LATEST_FIRST_PLAN_SHARE` of the minutes is spent."""
        return (budget.deadline is None or self.planned is not None or budget.knows_evaluations()
                or budget.time_share(now) >= LATEST_FIRST_PLAN_SHARE)

    def record(self) -> dict:
        """What the report says of the rule: the rates at the end, the epochs of the last plan,
        of the first, and the fewest and most of any plan (each to 0.01)."""
        plans = [round(plan, 2) for plan in self.plans]
        return dict(self.rates, planned_epochs=plans[-1] if plans else None,
                    first_planned_epochs=plans[0] if plans else None,
                    fewest_planned_epochs=min(plans, default=None), most_planned_epochs=max(plans, default=None))

    def checkpoint_parts(self) -> dict:
        """The rates and the seed state, by checkpoint part: a resumed run draws the masks and
        learns the loss the uninterrupted one would (the label smoothing a part of its own, which
        a checkpoint written before the rule held it lacks)."""
        return {"budget_regularization": [self._held["dropout"], self._held["word_dropout"],
                                          self.seed_generator.state.value],
                "budget_label_smoothing": self._held["label_smoothing"]}


class WorkerVote:
    """The workers of a multi-worker run deciding together what each would decide alone (the
    deadline, the budget rule's plan): at the same updates, every ``every``-th of the
    invocation, by an all-reduce; collectives would hang if one worker stopped before another.

    Args:
        strategy: the run's `tf.distribute.Strategy`.
        every: int, the updates between votes.
    """

    def __init__(self, strategy: tf.distribute.Strategy, every: int) -> None:
        self.strategy, self.every = strategy, every
        self.workers = getattr(strategy.extended, "_num_workers", 1)

    def due(self, updates: int) -> bool:
        """Whether the workers vote after ``updates`` updates of this invocation."""
        return updates % self.every == 0

    def mean(self, values: list) -> list:
        """The means of ``values`` (floats) over the workers."""
        local = tf.constant(values, "float32")
        votes = self.strategy.run(lambda: tf.identity(local))
        return [float(value) / self.workers for value in self.strategy.reduce("sum", votes, axis=None).numpy()]

    def out_of_time(self, budget: Budget, updates: int, now: float) -> bool:
        """Whether the wall-time budget is spent: on one worker, by the clock; on several, when
        any worker's is, at a voting update."""
        if self.workers <= 1:
            return budget.out_of_time(now)
        return budget.deadline is not None and self.due(updates) and self.mean(
            [float(budget.out_of_time(now))])[0] > 0


__all__ = ["Budget", "BudgetRule", "WorkerVote", "FULL_EPOCHS", "FULL_RATES", "ONSET_EPOCHS", "RULE_POINTS",
           "TIMED_PARTS", "budget_progress", "budget_regularization"]
