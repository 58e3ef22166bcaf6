"""Target tokens/s of the Trainer's train step: default vs XLA vs mixed precision.

What is timed is `bahdanau_tf.training.Trainer.train_step` itself — one ``tf.function`` with the
forward and backward pass, the all-reduce, global-norm clipping and the optimizer update, fed by
a prefetching ``tf.data`` iterator — for the ``small`` preset (5k vocabularies, batch 64, Adam)
and the paper's ``rnnsearch-50`` shapes (30k vocabularies, batch 80, Adadelta). Only real
(non-padding) target tokens count.

Two inputs:

* ``fixed``: one batch of length 30 on both sides, every token real (the upper bound, and the
  shape the peers' forward+backward numbers use);
* ``corpus``: the first ``--corpus_batches`` batches of the Bible training pipeline (paper
  bucketing, lengths padded as the variant's trainer pads them: to a multiple of 8 under XLA
  unless the variant says otherwise, not at all without), cached and cycled. This is what training
  sees: padding included, and one XLA compilation per distinct shape (``shapes`` column; their
  cost is in ``first_pass_s``).

Every variant runs an untimed first pass (tracing, XLA compilation), then ``--rounds`` timed
passes; the best is kept, since the machine is shared. Prints a table and writes JSON to
``benchmarks/results/train_throughput.json``.

    python benchmarks/train_throughput.py [--presets=small,rnnsearch-50] [--inputs=fixed,corpus]
        [--variants=default,jit,jit_pad16,bf16,bf16_jit,fp16] [--rounds=3]

``default`` is float32 without XLA (batches keep their own lengths); ``bf16`` is mixed bfloat16
without XLA, the ``small`` training default; ``jit`` is float32 + XLA with lengths padded to a
multiple of 8 (XLA's default padding); ``jit_pad16`` pads to 16 (fewer compilations, more
padding).

Word vocabularies of the given size stand in for subword ones (the compute depends on the size
only; building a WordPiece vocabulary takes minutes).
"""

import json
import os
import platform
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from absl import app, flags

from bahdanau_tf import data, text, training

FLAGS = flags.FLAGS
flags.DEFINE_list("presets", ["small", "rnnsearch-50"], "Presets to measure.")
flags.DEFINE_list("inputs", ["fixed", "corpus"], "Inputs: fixed and/or corpus.")
flags.DEFINE_list("variants", ["default", "jit", "jit_pad16", "bf16", "bf16_jit", "fp16"], "Variants to measure.")
flags.DEFINE_integer("rounds", 3, "Timed passes per variant (the best is kept).")
flags.DEFINE_integer("steps", 10, "Steps per timed pass with the fixed input (small).")
flags.DEFINE_integer("corpus_batches", 24, "Batches cycled with the corpus input (small).")
flags.DEFINE_integer("large_steps", 2, "Steps per pass for rnnsearch-50 (slow on a CPU).")
flags.DEFINE_string("output", os.path.join(os.path.dirname(__file__), "results", "train_throughput.json"),
                    "Where to write the JSON results.")

VARIANTS = {
    "default": dict(precision="float32", jit_compile=False),
    "jit": dict(precision="float32", jit_compile=True),
    "jit_pad16": dict(precision="float32", jit_compile=True, pad_to_multiple=16),
    "bf16": dict(precision="mixed_bfloat16", jit_compile=False),
    "bf16_jit": dict(precision="mixed_bfloat16", jit_compile=True),
    "fp16": dict(precision="mixed_float16", jit_compile=False),
}
VOCABULARY = {"small": 5000, "rnnsearch-50": 30000}


def _tokenizers(corpus, size):
    return (text.WordTokenizer.build(corpus.sources, max_vocabulary_size=size),
            text.WordTokenizer.build(corpus.targets, max_vocabulary_size=size))


def _fixed_batch(batch_size, length, vocabulary_size):
    ids = tf.random.stateless_uniform([batch_size, length], [1, 2], 4, vocabulary_size, "int32")
    return (ids, ids), ids


def _measure(trainer, dataset, steps, rounds):
    """(first pass seconds, best seconds per step, real target tokens per step)."""
    iterator = iter(trainer.strategy.experimental_distribute_dataset(dataset))
    start = time.time()
    for _ in range(steps):
        trainer.train_step(iterator)
    trainer.step.numpy()
    first = time.time() - start
    trainer._token_count.assign(0.0)
    best = float("inf")
    for _ in range(rounds):
        start = time.time()
        for _ in range(steps):
            trainer.train_step(iterator)
        trainer.step.numpy()  # waits for the last step
        best = min(best, (time.time() - start) / steps)
    tokens = float(trainer._token_count.numpy()) / (rounds * steps)
    return first, best, tokens


def main(argv):
    del argv
    train = data.load_corpus("bible-en-es", split="train")
    rows = []
    for preset in FLAGS.presets:
        tokenizers = _tokenizers(train, VOCABULARY.get(preset, 5000))
        defaults = training.TrainingConfig.for_preset(preset)
        large = preset not in ("small", "tiny")
        for input_kind in FLAGS.inputs:
            if input_kind == "corpus" and large:
                continue  # a few steps of rnnsearch-50 on a CPU say nothing about its shapes
            for variant in FLAGS.variants:
                config = training.TrainingConfig.for_preset(preset, summaries=False, **VARIANTS[variant])
                if input_kind == "fixed":
                    batch = _fixed_batch(defaults.batch_size, 30, tokenizers[1].vocabulary_size)
                    dataset = tf.data.Dataset.from_tensors(batch).repeat()
                    steps = FLAGS.large_steps if large else FLAGS.steps
                    shapes = 1
                else:  # the variant's own padding (16 under XLA, none without)
                    probe = training.Trainer(tempfile.mkdtemp(), *tokenizers, preset=preset,
                                             config=config, log=lambda line: None)
                    dataset = probe.train_dataset(train, distribute=False).take(FLAGS.corpus_batches).cache()
                    shapes = len({tuple(b[0][0].shape) + tuple(b[1].shape) for b in dataset})
                    dataset = dataset.repeat()
                    steps = FLAGS.corpus_batches
                trainer = training.Trainer(tempfile.mkdtemp(), *tokenizers, preset=preset, config=config,
                                           log=lambda line: None)
                first, seconds, tokens = _measure(trainer, dataset, steps, FLAGS.rounds)
                row = dict(preset=preset, input=input_kind, variant=variant, batch_size=config.batch_size,
                           vocabulary_size=tokenizers[1].vocabulary_size, shapes=shapes,
                           first_pass_s=round(first, 1), step_ms=round(1000 * seconds, 1),
                           real_target_tokens_per_step=round(tokens, 1),
                           target_tokens_per_s=round(tokens / seconds, 1))
                rows.append(row)
                print(json.dumps(row), flush=True)
    header = ("preset", "input", "variant", "shapes", "first_pass_s", "step_ms", "target_tokens_per_s")
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in header]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(str(r[h]).ljust(w) for h, w in zip(header, widths)) for r in rows]
    print("\n".join(lines))
    os.makedirs(os.path.dirname(FLAGS.output), exist_ok=True)
    with open(FLAGS.output, "w") as f:
        json.dump({
            "machine": {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                        "load_average_at_end": os.getloadavg(), "tensorflow": tf.__version__},
            "rounds": FLAGS.rounds,
            "rows": rows,
        }, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    app.run(main)
