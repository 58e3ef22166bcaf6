"""The state of one run and its report (table 2 of the paper, ``OUT/report.json``)."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

from bahdanau_tf import devices


@dataclasses.dataclass
class RunState:
    """The state of one `Trainer.fit` call (what is not in the checkpoint)."""

    resumed_step: int
    elapsed_before: float
    step: int = 0
    train_pairs: int = 0
    train_pairs_estimated: bool = False  # a streamed corpus: estimated, not counted
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


def training_report(run: RunState, *, sentences_seen: int, best_dev_nll: float, best_step: int,
                    replicas: int, preset: str, parameters: int, config: Any) -> dict:
    """The report of a run: updates, epochs, wall time, device, NLLs, why it stopped, speed.

    Args:
        run: the run's `RunState`.
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
        "target_tokens_per_second": round(run.tokens_total / run.tokens_time, 1) if run.tokens_time else None,
        "train_pairs": int(run.train_pairs),
        "train_pairs_estimated": run.train_pairs_estimated,
        "preset": preset,
        "parameters": int(parameters),
        "training": dataclasses.asdict(config),
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
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)
