"""Target tokens/s of one teacher-forced forward + backward pass: eager vs tf.function vs XLA.

Measures the model alone (no optimizer, no input pipeline) on random ids, for the `small` preset
(5k vocabularies, the peers' setting) and the paper's `rnnsearch-50` (30k vocabularies), at
batch 80 and source/target length 30. Every variant is timed in rounds, interleaved, and the best
round is kept, so a noisy shared machine affects all columns alike. Prints a table and writes JSON.

    python benchmarks/forward_backward.py [--presets=small,rnnsearch-50] [--rounds=5]

The JSON records the CPU model and its flags (`bahdanau_tf.devices.benchmark_record`); for an
AVX2-only CPU emulated on a newer one, run it under ``ONEDNN_MAX_CPU_ISA=AVX2
XLA_FLAGS=--xla_cpu_max_isa=AVX2`` (see benchmarks/_machines.py).
"""

import json
import os
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from absl import app, flags

from bahdanau_tf import devices, losses
from bahdanau_tf.models import model_from_preset

FLAGS = flags.FLAGS
flags.DEFINE_list("presets", ["small", "rnnsearch-50"], "Presets to measure.")
flags.DEFINE_integer("batch_size", 80, "Sentence pairs per batch.")
flags.DEFINE_integer("length", 30, "Source and target length in tokens.")
flags.DEFINE_integer("rounds", 5, "Timed rounds per variant (best kept).")
flags.DEFINE_list("variants", ["eager", "function", "xla"], "Execution modes.")
flags.DEFINE_string("output", "benchmarks/results/forward_backward.json", "JSON output path.")

VOCABULARY = {"small": 5000, "tiny": 64}


def _gradient_fn(model):
    def gradients(source, target_in, target_out):
        with tf.GradientTape() as tape:
            loss = losses.masked_nll(target_out, model((source, target_in), training=True))
        return loss, tape.gradient(loss, model.trainable_variables)

    return gradients


def measure(preset, batch_size, length, rounds, variants):
    vocabulary = VOCABULARY.get(preset, 30000)
    model = model_from_preset(preset, source_vocabulary_size=vocabulary, target_vocabulary_size=vocabulary)
    rng = np.random.default_rng(0)
    source = tf.constant(rng.integers(4, vocabulary, (batch_size, length)), "int32")
    target = tf.constant(rng.integers(4, vocabulary, (batch_size, length)), "int32")
    model((source, target))
    base = _gradient_fn(model)
    functions = {
        "eager": base,
        "function": tf.function(base),
        "xla": tf.function(base, jit_compile=True),
    }
    functions = {name: functions[name] for name in variants}
    for fn in functions.values():  # trace and compile outside the timing
        float(fn(source, target, target)[0])
    best = {name: float("inf") for name in functions}
    for _ in range(rounds):
        for name, fn in functions.items():
            start = time.perf_counter()
            float(fn(source, target, target)[0])  # the float() waits for the result
            best[name] = min(best[name], time.perf_counter() - start)
    tokens = batch_size * length
    return {
        name: {"seconds_per_step": seconds, "target_tokens_per_second": tokens / seconds}
        for name, seconds in best.items()
    } | {"_vocabulary": vocabulary, "_parameters": int(sum(np.prod(w.shape) for w in model.weights))}


def main(argv):
    del argv
    results = {}
    for preset in FLAGS.presets:
        results[preset] = measure(preset, FLAGS.batch_size, FLAGS.length, FLAGS.rounds, FLAGS.variants)
    header = f"{'preset':<14}{'vocab':>7}{'params':>12}" + "".join(f"{v + ' tok/s':>16}" for v in FLAGS.variants)
    print(f"forward+backward, batch {FLAGS.batch_size}, length {FLAGS.length}, best of {FLAGS.rounds} rounds")
    print(header)
    for preset, row in results.items():
        cells = "".join(f"{row[v]['target_tokens_per_second']:>16,.0f}" for v in FLAGS.variants)
        print(f"{preset:<14}{row['_vocabulary']:>7}{row['_parameters']:>12,}{cells}")
    record = {
        "benchmark": "forward_backward",
        "batch_size": FLAGS.batch_size,
        "length": FLAGS.length,
        "rounds": FLAGS.rounds,
        "machine": {**devices.benchmark_record(), "platform": platform.platform(),
                    "devices": [d.name for d in tf.config.list_physical_devices()]},
        "results": results,
    }
    os.makedirs(os.path.dirname(FLAGS.output) or ".", exist_ok=True)
    with open(FLAGS.output, "w") as f:
        json.dump(record, f, indent=2)
    print(f"wrote {FLAGS.output}")


if __name__ == "__main__":
    app.run(main)
