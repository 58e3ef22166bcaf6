"""Train step time at large target vocabularies: the full softmax vs a sampled softmax.

One update of the trainer itself (`bahdanau_tf.training.Trainer.train_step`: forward, loss,
backward, clipping, Adam) of the `small` RNNsearch on a fixed random batch (64 pairs, 30
tokens a side), at 30k, 60k and 100k target words, with the full softmax and with
``--sampled_softmax=K`` (K = 1,024 by default; `bahdanau_tf.losses.sampled_token_nll`; the
``--proposal`` of the K classes, `batch` by default as in the trainer).
The precision and XLA setting are the trainer's defaults on this machine. For each vocabulary
both trainers are built, compiled, then timed in alternating rounds (full, sampled, full, ...)
and each keeps its best round, so the machine's load affects both alike: quote the ratio, not
the times (the machine may be shared; its load is recorded beside every round). Prints a table
and writes JSON.

    python benchmarks/sampled_softmax.py [--vocabularies=30000,60000,100000] [--num_sampled=1024]
        [--proposal=batch|log_uniform] [--output=benchmarks/results/sampled_softmax.json]
"""

import json
import os
import platform
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from bahdanau_tf import devices, training  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("vocabularies", ["30000", "60000", "100000"], "Target vocabulary sizes.")
flags.DEFINE_integer("num_sampled", 1024, "K, the sampled classes per batch.")
flags.DEFINE_enum("proposal", "batch", ["batch", "log_uniform"], "Which K classes (--sampled_proposal).")
flags.DEFINE_integer("batch_size", 64, "Sentence pairs per batch.")
flags.DEFINE_integer("length", 30, "Source and target length in tokens.")
flags.DEFINE_integer("rounds", 3, "Timed rounds per variant (best kept).")
flags.DEFINE_integer("steps", 3, "Updates per round.")
flags.DEFINE_string("output", "benchmarks/results/sampled_softmax.json", "JSON output path.")


class _Sized:
    """What the trainer reads of a tokenizer here: its vocabulary size."""

    def __init__(self, vocabulary_size):
        self.vocabulary_size = vocabulary_size


def _trainer(vocabulary, sampled, directory):
    config = training.TrainingConfig.for_preset(
        "small", batch_size=FLAGS.batch_size, max_length=FLAGS.length, summaries=False,
        sampled_softmax=sampled, sampled_proposal=FLAGS.proposal)
    return training.Trainer(directory, _Sized(5000), _Sized(vocabulary), preset="small",
                            config=config, log=lambda line: None)


def _batches(trainer, vocabulary):
    rng = np.random.default_rng(0)
    shape = (FLAGS.batch_size, FLAGS.length)
    source = tf.constant(rng.integers(4, 5000, shape), "int32")
    target = rng.integers(4, vocabulary, shape)
    batch = ((source, tf.constant(target, "int32")), tf.constant(np.roll(target, -1, axis=1), "int32"))
    dataset = tf.data.Dataset.from_tensors(batch).repeat()
    return iter(trainer.strategy.experimental_distribute_dataset(dataset))


def _time(trainer, iterator, steps):
    started = time.perf_counter()
    for _ in range(steps):
        trainer.train_step(iterator)
    float(trainer.step.numpy())  # waits for the device
    return (time.perf_counter() - started) / steps


def measure(vocabulary, directory):
    variants = {"full": None, "sampled": FLAGS.num_sampled}
    trainers = {name: _trainer(vocabulary, sampled, os.path.join(directory, f"{vocabulary}-{name}"))
                for name, sampled in variants.items()}
    iterators = {name: _batches(trainer, vocabulary) for name, trainer in trainers.items()}
    for name in variants:  # compile (and warm up) outside the timed rounds
        _time(trainers[name], iterators[name], 2)
    rounds = {name: [] for name in variants}
    for _ in range(FLAGS.rounds):
        for name in variants:
            seconds = _time(trainers[name], iterators[name], FLAGS.steps)
            rounds[name].append({"seconds_per_step": seconds, "load_average": os.getloadavg()})
    best = {name: min(r["seconds_per_step"] for r in rounds[name]) for name in variants}
    return {"vocabulary": vocabulary, "rounds": rounds, "best_seconds_per_step": best,
            "speedup": best["full"] / best["sampled"],
            "speed": trainers["full"].config.speed_summary()}


def main(argv):
    del argv
    results = []
    with tempfile.TemporaryDirectory() as directory:
        for vocabulary in map(int, FLAGS.vocabularies):
            results.append(measure(vocabulary, directory))
            best = results[-1]["best_seconds_per_step"]
            print(f"{vocabulary:,} target words: full {best['full']:.3f} s/step, sampled "
                  f"{best['sampled']:.3f} s/step ({results[-1]['speedup']:.2f}x)", flush=True)
            tf.keras.backend.clear_session()
    print(f"\nTrain step, small RNNsearch, batch {FLAGS.batch_size} x {FLAGS.length}, "
          f"{results[0]['speed']}; sampled K={FLAGS.num_sampled} ({FLAGS.proposal}); best of {FLAGS.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.1f} (shared machine: compare the ratio)\n")
    print("| target words | full softmax s/step | sampled s/step | full / sampled |")
    print("| --- | --- | --- | --- |")
    for result in results:
        best = result["best_seconds_per_step"]
        print(f"| {result['vocabulary']:,} | {best['full']:.3f} | {best['sampled']:.3f} | "
              f"**{result['speedup']:.2f}x** |")
    record = {
        "benchmark": "sampled_softmax",
        "machine": {**devices.benchmark_record(), "platform": platform.platform()},
        "settings": {"preset": "small", "batch_size": FLAGS.batch_size, "length": FLAGS.length,
                     "num_sampled": FLAGS.num_sampled, "proposal": FLAGS.proposal, "rounds": FLAGS.rounds, "steps": FLAGS.steps},
        "results": results,
    }
    os.makedirs(os.path.dirname(FLAGS.output) or ".", exist_ok=True)
    with open(FLAGS.output, "w") as f:
        json.dump(record, f, indent=2)
    print(f"\nwrote {FLAGS.output}")


if __name__ == "__main__":
    app.run(main)
