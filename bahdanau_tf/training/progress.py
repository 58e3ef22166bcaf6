"""The state of one run (`RunState`) and what its progress line and train summaries measure:
when they are written (`log_cadence`) and the throughput without compilation (`Throughput`).

The budget, its spent time and the progress line's ETA are `bahdanau_tf.training.budget`'s; the
run's report (``OUT/report.json``, table 2 of the paper) is `bahdanau_tf.training.run_directory`'s.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple


@dataclasses.dataclass
class RunState:
    """The state of one `Trainer.fit` call (what is not in the checkpoint)."""

    resumed_step: int
    elapsed_before: float
    step: int = 0
    train_pairs: int = 0
    steps_per_epoch: int = 1
    train_pairs_estimated: bool = False  # a streamed corpus: estimated, not counted
    start: float = 0.0
    window_start: float = 0.0
    window_step: int = 0
    train_nll: float | None = None
    dev_nll: float | None = None
    dev_step: int | None = None
    evaluations: int = 0
    budget: Any = None  # the run's `bahdanau_tf.training.budget.Budget`
    dev_bleu: float | None = None
    throughput: Any = None  # the run's `Throughput`
    cadence: Any = None  # the run's `LogCadence`
    stopped: str | None = None
    report: dict | None = None
    averaged: dict | None = None  # the end's checkpoint average (`Trainer._average_checkpoints`)
    restored_window_tokens: float = 0.0  # the tokens of the window a resumed run goes on with
    regularization: dict | None = None  # the budget rule's rates and the epochs they are for


class DevSet(NamedTuple):
    """A run's dev pairs (dev BLEU's sample) and their batches (the dev NLL)."""

    corpus: Any
    dataset: Any  # a tf.data.Dataset


# === When to log ===
#: the points per train scalar that the automatic cadence aims at over a whole run
TARGET_POINTS = 50
#: the step cadence of a run without any budget (and the multi-worker time-budget vote's)
DEFAULT_LOG_EVERY = 50


@dataclasses.dataclass(frozen=True)
class LogCadence:
    """When the trainer reads its counters (progress line + train summaries): at every update
    that is a multiple of ``steps``, and once ``seconds`` of wall time passed since the last
    read (None: that clock does not count)."""

    steps: int | None
    seconds: float | None

    def due(self, step: int, seconds_since: float) -> bool:
        """Whether to read after update ``step``, ``seconds_since`` s after the last read."""
        return ((self.steps is not None and step % self.steps == 0)
                or (self.seconds is not None and seconds_since >= self.seconds))


def _round_down_125(value: float) -> int:
    """The largest of 1, 2, 5, 10, 20, 50, ... not above ``value`` (at least 1)."""
    best = 1
    scale = 1
    while scale <= value:
        for mantissa in (1, 2, 5):
            if mantissa * scale <= value:
                best = mantissa * scale
        scale *= 10
    return best


def log_cadence(max_steps: int | None, max_minutes: float | None,
                log_every: int | None = None) -> LogCadence:
    """The cadence of the progress line and the train summaries, scaled to the run's length.

    ``log_every`` set: every ``log_every`` updates, exactly. Unset (the default): about
    `TARGET_POINTS` points per train scalar over the run, whichever budget ends it: every
    ``max_steps / 50`` updates rounded down to 1, 2 or 5 x 10^k (at least 1), and every
    ``max_minutes * 60 / 50`` seconds, whichever comes first; with neither budget, every
    `DEFAULT_LOG_EVERY` updates. So a 5-minute run gets a point every 6 s however fast the
    device, a 50-update run one per update, and a 370,000-update run one every 5,000.

    Args:
        max_steps: int or None, the update budget.
        max_minutes: float or None, the wall-time budget.
        log_every: int or None, an explicit step cadence (``--log_every``).

    Returns:
        `LogCadence`.

    Example:

        log_cadence(max_steps=None, max_minutes=5.0)   # LogCadence(steps=None, seconds=6.0)
        log_cadence(max_steps=20_000, max_minutes=None)  # LogCadence(steps=200, seconds=None)
    """
    if log_every is not None:
        return LogCadence(steps=int(log_every), seconds=None)
    steps = None if max_steps is None else _round_down_125(max_steps / TARGET_POINTS)
    seconds = None if max_minutes is None else 60.0 * max_minutes / TARGET_POINTS
    if steps is None and seconds is None:
        steps = DEFAULT_LOG_EVERY
    return LogCadence(steps=steps, seconds=seconds)


# === Throughput without compilation ===
class Throughput:
    """Target tokens per second of the updates that did not compile.

    XLA compiles one program per new batch shape, and the first update traces the step: such an
    update takes seconds where the others take milliseconds, so a rate over a window holding
    one swings by orders of magnitude. The step counts its compiling updates and their tokens
    on the device (no host read); the host times every update's call. At each read, the
    window's ``compiled`` slowest updates (those that compiled: compiling costs far more than
    any update) and their tokens are left out, and the rate is the other updates' tokens over
    their time (plus the wait for the device at the read: with an asynchronous device the calls
    return before the work is done). Dev evaluations, checkpoints and summaries are outside
    the calls, so outside the rate. A window of compiling updates only has no rate (None).

    Example:

        meter = Throughput()
        for seconds in (9.0, 0.2, 0.2, 0.2):
            meter.add_update(seconds)
        meter.take(tokens=4000.0, compiled=1, compiled_tokens=1000.0)  # 3000 / 0.6 s = 5000.0
    """

    def __init__(self):
        self._window = []  # seconds of each update's call since the last read
        self.kept_tokens = 0.0
        self.kept_seconds = 0.0
        self.kept_updates = 0
        self.compile_seconds = 0.0

    def add_update(self, seconds: float) -> None:
        """One update's call took ``seconds``."""
        self._window.append(float(seconds))

    def take(self, tokens: float, compiled: int, compiled_tokens: float,
             wait_seconds: float = 0.0) -> float | None:
        """The window's rate, and a new window.

        Args:
            tokens: float, the target tokens of all updates since the last read.
            compiled: int, how many of them compiled (counted by the step).
            compiled_tokens: float, their tokens.
            wait_seconds: float, the time the read waited for the device.

        Returns:
            float tokens per second, or None when every update of the window compiled.
        """
        window, self._window = sorted(self._window), []
        compiled = min(int(compiled), len(window))
        kept = window[:len(window) - compiled]
        self.compile_seconds += sum(window[len(window) - compiled:])
        if not kept:
            return None
        seconds = sum(kept) + wait_seconds
        rate_tokens = max(tokens - compiled_tokens, 0.0)
        self.kept_tokens += rate_tokens
        self.kept_seconds += seconds
        self.kept_updates += len(kept)
        return rate_tokens / max(seconds, 1e-9)

    def overall(self) -> float | None:
        """The rate over every window taken so far (the report's ``target_tokens_per_second``)."""
        return self.kept_tokens / self.kept_seconds if self.kept_seconds > 0 else None
