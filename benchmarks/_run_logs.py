"""What the benchmarks read back from a finished run's directory."""

import glob
import os


def dev_curve(run_dir):
    """``[[update, dev NLL], ...]`` of every dev evaluation, from the run's TensorBoard logs
    (``RUN/logs``; empty without them)."""
    import tensorflow as tf  # noqa: PLC0415 — in the summarizing process only

    points = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "logs", "**", "events.out.tfevents.*"), recursive=True)):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == "dev/nll":
                    points[int(event.step)] = round(float(tf.make_ndarray(value.tensor)), 4)
    return [[step, points[step]] for step in sorted(points)]
