"""The run directory: one training process at a time, signals, what a failed start leaves.

- `DirectoryLock`: an exclusive lock on ``OUT/.lock`` (a second trainer gets
  `DirectoryInUseError`);
- `StopSignals`: SIGINT / SIGTERM end the run after the current update (a checkpoint and the
  report are written, then `TrainingInterrupted`);
- `RunDirectory`: takes the directory (lock), checks an existing one against the model
  (`bahdanau_tf.model_directory`), writes ``model.json`` with the first checkpoint and
  ``report.json`` and ``lexicon.tsv`` at the end, and removes what a run that failed before its
  first checkpoint created;
- the report (``report.json``, table 2 of the paper): `training_report` builds it from the run's
  state, `format_report` writes it as the text the command prints.

The layout itself is `bahdanau_tf.model_directory`'s.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import time
import shutil
import signal
import threading
from typing import Any, Callable

import tensorflow as tf

from bahdanau_tf import devices, files, presets
from bahdanau_tf import lexicon as lexicon_lib
from bahdanau_tf import model_directory
from bahdanau_tf.checkpoint_averaging import AROUND_BEST
from bahdanau_tf.training.budget import TIMED_PARTS

#: the training pairs the end-of-run lexicon counts at most (the whole embedded corpus)
LEXICON_PAIRS = 100_000


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


class DirectoryLock:
    """An exclusive, non-blocking lock on ``directory/.lock`` (fcntl.flock), held by one process.

    The kernel releases it when the process dies (even by SIGKILL), so a stale lock file never
    blocks a later run. Where fcntl does not exist (Windows) the directory is not locked.
    """

    NAME = model_directory.LOCK  # also taken by `model_directory.average_checkpoints`
    # the lock file is removed when the run ends: a finished run directory holds no .lock

    def __init__(self, directory):
        self.path = os.path.join(directory, self.NAME)
        self._handle = None

    def acquire(self):
        handle = files.take_lock(self.path)
        if handle is None:
            owner = files.lock_holder(self.path)
            raise DirectoryInUseError(
                f"{os.path.dirname(self.path)!r} is in use by another training process "
                f"(pid {owner}); wait for it to finish or use another --output_dir.")
        try:
            files.write_holder(handle, self.path)
        except BaseException:
            handle.close()
            raise
        self._handle = handle

    def release(self, remove=True):
        """Drops the lock; ``remove``: the lock file too (removed first, while still held; a
        process that opened it meanwhile sees it is gone and takes a new one)."""
        if self._handle is not None:
            if remove:
                files.drop_lock(self._handle, self.path)
            else:
                self._handle.close()  # closing the file releases the lock
            self._handle = None


class StopSignals:
    """Catches SIGINT and SIGTERM while a run is going (a context manager).

    The first signal is noted (`received`) and logged: the loop finishes the current update,
    then writes a checkpoint and the report. A second one stops at once (KeyboardInterrupt).
    Outside the main thread (where Python cannot install handlers) nothing is caught.
    """

    def __init__(self, log: Callable[[str], None]):
        self.received = None
        self._log = log
        self._previous = {}

    def _handler(self, signal_number, frame):
        if self.received is not None:  # a second signal: stop now
            raise KeyboardInterrupt
        self.received = signal_number
        self._log(f"{signal.Signals(signal_number).name}: finishing the current update, then "
                  "a checkpoint and the report (again to stop at once).")

    def __enter__(self) -> "StopSignals":
        self.received = None
        if threading.current_thread() is threading.main_thread():
            self._previous = {number: signal.signal(number, self._handler)
                              for number in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *unused) -> None:
        for number, previous in self._previous.items():
            signal.signal(number, previous)
        self._previous = {}

    @property
    def name(self) -> str | None:
        """``"SIGINT"`` / ``"SIGTERM"`` once one was received, else None."""
        return None if self.received is None else signal.Signals(self.received).name


#: the TensorBoard event files of the runs (``tensorboard --logdir OUT/logs``)
LOGS = "logs"
#: the entries of a model directory a run creates (removed again by a failed fresh start)
RUN_ENTRIES = (model_directory.CHECKPOINTS, model_directory.BEST, LOGS)


#: the files a run writes into its model directory (``flags.txt`` is the command line's)
RUN_FILES = (model_directory.MODEL_CONFIG, model_directory.REPORT, model_directory.LEXICON)


def check_folders(path: str, more_files: tuple = ()) -> None:
    """Refuses a model directory with a file where a run keeps one of its folders, a folder
    where it writes one of its files (`RUN_FILES`, ``more_files``), or a dangling symbolic
    link in either place: before any work, not when the run writes there.

    Raises:
        ValueError: e.g. ``OUT/checkpoints`` is a file, ``OUT/report.json`` a folder.
    """
    folders = RUN_ENTRIES + (model_directory.AVERAGED, AROUND_BEST)
    for name in folders + RUN_FILES + tuple(more_files):
        entry = os.path.join(path, name)
        if os.path.islink(entry) and not os.path.exists(entry):
            raise ValueError(f"{entry!r} is a symbolic link to nothing ({os.readlink(entry)!r}), where "
                             f"a run keeps its {name}: remove it or use another --output_dir.")
        if name in folders and tf.io.gfile.exists(entry) and not tf.io.gfile.isdir(entry):
            raise ValueError(f"{entry!r} is a file where a run keeps its {name}/ folder: move it "
                             "away or use another --output_dir.")
        if name not in folders and tf.io.gfile.isdir(entry):
            raise ValueError(f"{entry!r} is a folder where a run writes its {name} file: move it "
                             "away or use another --output_dir.")


class RunDirectory:
    """A trainer's hold on its output directory.

    Args:
        path: str, the model directory.
        is_chief: bool, whether this process writes it (the other workers of a multi-worker run
            only read; they take no lock).
    """

    def __init__(self, path: str, is_chief: bool = True):
        self.path = path
        self.is_chief = is_chief
        self.lock = DirectoryLock(path)
        self._created = False
        self._lock_created = False
        self._created_entries = set()

    def take(self) -> None:
        """Creates the directory if needed and locks it (chief only).

        Raises:
            ValueError: the path is a file.
            DirectoryInUseError: another process holds it.
        """
        if not self.is_chief:
            return
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ValueError(f"--output_dir {self.path!r} is a file, not a directory.")
        self._created = not os.path.exists(self.path)
        self._lock_created = not os.path.exists(self.lock.path)
        tf.io.gfile.makedirs(self.path)
        self.lock.acquire()

    def release(self) -> None:
        self.lock.release()

    def refuse(self) -> None:
        """Releases a directory that `take` took and the trainer then refused (another model, no
        training state): it is left as it was found, without a lock file or a directory of ours."""
        if not self.is_chief:
            return
        self.lock.release(remove=self._lock_created)
        if self._created:
            shutil.rmtree(self.path, ignore_errors=True)

    def note_new_entries(self) -> None:
        """Remembers which of `RUN_ENTRIES` do not exist yet (what `abandon_fresh_start` removes)."""
        if self.is_chief:
            self._created_entries = {name for name in RUN_ENTRIES
                                     if not os.path.exists(os.path.join(self.path, name))}

    def has_model_config(self) -> bool:
        return tf.io.gfile.exists(os.path.join(self.path, model_directory.MODEL_CONFIG))

    def check(self, model) -> None:
        """An existing model directory must be complete and hold ``model``'s architecture.

        Raises:
            ValueError: a half-written directory, one that holds another model, or a file where
                the run keeps one of its folders.
        """
        check_folders(self.path)
        if self.has_model_config():
            if self.is_chief:
                model_directory.check_model_directory(self.path)
                model_directory.check_same_model(self.path, model)
        elif model_directory.listed_checkpoint(os.path.join(self.path, model_directory.CHECKPOINTS)):
            raise ValueError(
                f"{self.path!r} is a half-written model directory: it has checkpoints but "
                f"no {model_directory.MODEL_CONFIG}; remove it or use another --output_dir.")

    def write_model_config(self, model, source_tokenizer, target_tokenizer, settings: dict,
                           device: dict) -> None:
        """``model.json`` and the vocabularies, once, with the first checkpoint (chief only); a
        resumed run records its training settings there (``settings["training"]``: the recipe
        it kept, a changed ``max_steps``, its own budget, device settings and logging), as its
        ``report.json`` does."""
        if not self.is_chief:
            return
        if not self.has_model_config():
            model_directory.write_model_config(self.path, model, source_tokenizer,
                                               target_tokenizer, settings, device=device)
        elif model_directory.read_model_config(self.path).get("settings", {}).get("training") != settings["training"]:
            model_directory.update_settings(self.path, training=settings["training"])

    def abandon_fresh_start(self) -> None:
        """A run that failed before its first checkpoint leaves the directory as it found it."""
        if not self.is_chief or self.has_model_config():
            return
        if self._created:
            self.lock.release()
            shutil.rmtree(self.path, ignore_errors=True)
            return
        for name in RUN_ENTRIES:
            if name in self._created_entries:
                shutil.rmtree(os.path.join(self.path, name), ignore_errors=True)

    def read_report(self) -> dict:
        """``report.json`` of an earlier run, or {}."""
        path = os.path.join(self.path, model_directory.REPORT)
        if not tf.io.gfile.exists(path):
            return {}
        with tf.io.gfile.GFile(path) as f:
            try:
                return json.loads(f.read())
            except ValueError:
                return {}

    def write_report(self, report: dict) -> None:
        if self.is_chief:
            with tf.io.gfile.GFile(os.path.join(self.path, model_directory.REPORT), "w") as f:
                f.write(json.dumps(report, indent=2, sort_keys=True) + "\n")

    def write_lexicon(self, corpus, source_tokenizer, target_tokenizer, top_k: int, log) -> None:
        """``OUT/lexicon.tsv`` from the training corpus (chief only, once per directory): the
        top-k target tokens of each source token (`bahdanau_tf.lexicon`). At most its first
        `LEXICON_PAIRS` pairs: the sparse counts grow with the distinct co-occurring pairs, and
        a 12M-pair corpus must not cost a pass and gigabytes at the end of a run."""
        path = os.path.join(self.path, model_directory.LEXICON)
        if not self.is_chief or os.path.exists(path):
            return
        started = time.time()
        pairs = itertools.islice(corpus.pairs() if hasattr(corpus, "pairs") else corpus, LEXICON_PAIRS)
        built = lexicon_lib.Lexicon.build(pairs, source_tokenizer, target_tokenizer, top_k=top_k)
        model_directory.write_lexicon(self.path, built)
        log(f"Wrote {path} (the top {top_k} translations of each source token, for "
            f"candidate-list decoding; from the first {LEXICON_PAIRS:,} training pairs at "
            f"most) in {time.time() - started:.0f} s.")


# === report.json ===
def time_shares(run) -> dict:
    """Where this call's wall time went, in seconds: ``updates`` (the update calls that did not
    compile), ``compiling`` (those that did: tracing, XLA; both `progress.Throughput`'s), the
    `TIMED_PARTS` (`Budget.timed`'s), and ``other`` (setup, the data pipeline's start, progress
    lines, summaries).

    Args:
        run: the run's `progress.RunState`.
    """
    throughput = run.throughput
    timed = run.budget.part_seconds if run.budget is not None else {}
    parts = {"updates": throughput.kept_seconds if throughput else 0.0,
             "compiling": throughput.compile_seconds if throughput else 0.0,
             **{name: timed.get(name, 0.0) for name in TIMED_PARTS}}
    parts["other"] = max(time.time() - run.start - sum(parts.values()), 0.0) if run.start else 0.0
    return {name: round(seconds, 1) for name, seconds in parts.items()}


def training_report(run, *, sentences_seen: int, best_dev_nll: float, best_step: int,
                    replicas: int, preset: str, parameters: int, config: Any) -> dict:
    """The report of a run: updates, epochs, wall time, device, NLLs, why it stopped, speed.

    Args:
        run: the run's `progress.RunState`.
        sentences_seen, best_dev_nll, best_step: the trainer's checkpointed counters.
        replicas: int, the strategy's replicas.
        preset: str; parameters: int; config: the `TrainingConfig` (a dataclass).
    """
    wall = run.elapsed_before + time.time() - run.start
    return {
        "updates": int(run.step),
        "epochs": round(float(sentences_seen) / max(run.train_pairs, 1), 3),
        "wall_time_seconds": round(wall, 1),
        "wall_time": time.strftime("%H:%M:%S", time.gmtime(wall)),
        "device": devices.device_description(),
        "replicas": int(replicas),
        "train_nll": None if run.train_nll is None else round(run.train_nll, 4),
        "dev_nll": None if run.dev_nll is None else round(run.dev_nll, 4),
        "best_dev_nll": None if math.isinf(best_dev_nll) else round(best_dev_nll, 4),
        "best_step": int(best_step) if not math.isinf(best_dev_nll) else None,
        "stopped_because": run.stopped,
        "averaged": run.averaged,
        "target_tokens_per_second": None if run.throughput is None or run.throughput.overall() is None
                                    else round(run.throughput.overall(), 1),
        "train_pairs": int(run.train_pairs),
        "train_pairs_estimated": run.train_pairs_estimated,
        "preset": preset,
        "parameters": int(parameters),
        "training": dataclasses.asdict(config),
        "seconds": time_shares(run),
        "regularization": run.regularization,
    }


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
    averaged = report.get("averaged")
    if averaged:
        rows.append(("Averaged", f"{averaged['checkpoints'][0]} .. {averaged['checkpoints'][-1]}: dev NLL "
                                 f"{averaged['dev_nll']:.3f}" + (", now best/" if averaged["best"] else "")))
    rule = report.get("regularization")
    if rule:
        planned = rule.get("planned_epochs")
        smoothing = f", label smoothing {rule['label_smoothing']:g}" if rule.get("label_smoothing") else ""
        rows.append(("Regularisation", f"dropout {rule['dropout']:g}, word dropout {rule['word_dropout']:g}"
                                       f"{smoothing} (the budget rule"
                                       f"{'' if planned is None else f', ~{planned:.1f} epochs'})"))
    seconds = report.get("seconds")
    if seconds and sum(seconds.values()) > 0:
        total = sum(seconds.values())
        names = {"updates": "updates", "compiling": "compiling", **TIMED_PARTS, "other": "other"}
        rows.append(("Time spent", ", ".join(f"{names.get(part, part)} {100 * value / total:.0f}%"
                                             for part, value in seconds.items() if value >= 0.005 * total)))
    width = max(len(name) for name, _ in rows)
    warning = floor_warning(report)
    return "\n".join([f"{name:<{width}}  {value}" for name, value in rows] + ([warning] if warning else []))


def floor_warning(report: dict) -> str | None:
    """The report's last line when the run made fewer updates than its preset needs before it
    translates usefully (`bahdanau_tf.presets.UPDATES_FLOOR`), naming what gives it more; None
    when it made enough, or where the preset's floor is not measured."""
    floor = presets.updates_floor(report.get("preset") or "")
    if floor is None or report["updates"] >= floor:
        return None
    return (f"Warning: {report['updates']:,} updates, fewer than the ~{floor:,} that {report['preset']} needs "
            "before it translates usefully (docs/training.md, \"The budget's floor\"): give it more minutes "
            "(--max_minutes), a faster machine or a GPU, or a smaller preset.")
