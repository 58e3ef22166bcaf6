"""Target tokens/s of the Trainer's train step: old and new defaults and the variants, per machine.

What is timed is `bahdanau_tf.training.Trainer.train_step` itself — one ``tf.function`` with the
forward and backward pass, the all-reduce, global-norm clipping and the optimizer update, fed by
a prefetching ``tf.data`` iterator — for the ``small`` preset (5k vocabularies, batch 64, Adam)
and the paper's ``rnnsearch-50`` shapes (30k vocabularies, batch 80, Adadelta). Only real
(non-padding) target tokens count.

Variants (precision / XLA):

* ``old_default``: mixed bfloat16 without XLA, the ``small`` default before the device rule;
* ``new_default``: what `TrainingConfig` picks on the machine (`bahdanau_tf.devices`);
* ``float32``, ``bf16`` (mixed bfloat16), ``jit`` (float32 + XLA, lengths padded to a multiple
  of 8), ``jit_pad16`` (padded to 16), ``bf16_jit``, ``fp16`` (mixed float16);
* ``batch96``, ``batch128``: ``new_default`` at another batch size (compare sentence pairs per
  second, ``pairs_per_s``: a larger batch holds more tokens per step);
* ``no_dropout``, ``rule_zero``, ``rule_full``: dropout's cost (the budget rule off, at 0, at its
  full rates); ``label_smoothing``: ``new_default`` with label smoothing 0.1 (its loss is not
  the fused softmax cross-entropy);
* ``jit_autodiff``: ``jit`` with the recurrences differentiated automatically by TensorFlow
  (`bahdanau_tf.models.recurrence.automatic_differentiation`), the train step before their written-out
  backward pass, so ``--variants=jit,jit_autodiff`` compares the two in one process.

Machines: ``native`` and ``avx2``, an AVX2/FMA-only CPU emulated on this one (see
benchmarks/_machines.py for what is capped and how that was checked). Every (machine, preset,
input) runs in a fresh process whose variants' timed passes are interleaved (the emulated
machine's bf16/fp16 variants in a second one, without oneDNN), and each machine also measures
the float32 GFLOP/s of a 2048 x 2048 matmul: the ``ceiling`` column is the train step's
achieved FLOP/s over it. The
train step's FLOPs are counted from the model's matmuls at the padded batch shapes (forward,
times 3 for forward + backward; element-wise work left out), see `train_step_flops`.

Two inputs:

* ``corpus``: the first ``--corpus_batches`` batches of the Bible training pipeline (paper
  bucketing, lengths padded as the variant's trainer pads them), cached and cycled. This is
  what training sees: padding included, and one XLA compilation per distinct shape (``shapes``
  column; their cost is in ``first_pass_s``);
* ``fixed``: one batch of length 30 on both sides, every token real (the upper bound).

Every variant runs an untimed first pass (tracing, XLA compilation), then ``--rounds`` timed
passes, interleaved with the other variants'; the best is kept, since the machine is shared. Each
pass is timed in wall seconds (``step_ms``) and in the CPU seconds of its process, all threads
(``step_cpu_ms``, ``target_tokens_per_cpu_s``): on a machine whose cores others' processes also
use, the CPU figures move less with their load. Prints a table and writes JSON to
``benchmarks/results/train_throughput.json``.

    python benchmarks/train_throughput.py [--machines=native,avx2] [--presets=small]
        [--inputs=corpus,fixed] [--variants=old_default,new_default,float32,bf16,jit] [--rounds=3]
        [--checkouts=before=DIR --max_length=80]

With ``--checkouts`` every checkout's own preset decides which pairs are kept unless
``--max_length`` says it for all: each row records its batch shapes, and the JSON's
``unequal_batch_shapes`` lists the comparisons whose rows timed different ones.

Word vocabularies of the given size stand in for subword ones (the compute depends on the size
only).
"""

import datetime
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machines  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("machines", ["native", "avx2"], "Machines: native and/or avx2 (emulated).")
flags.DEFINE_list("presets", ["small"], "Presets to measure (small, rnnsearch-50).")
flags.DEFINE_list("inputs", ["corpus", "fixed"], "Inputs: corpus and/or fixed.")
flags.DEFINE_list("variants", ["old_default", "new_default", "float32", "bf16", "jit"], "Variants to measure.")
flags.DEFINE_integer("rounds", 5, "Timed passes per variant, interleaved (the best is kept).")
flags.DEFINE_integer("steps", 10, "Steps per timed pass with the fixed input (small).")
flags.DEFINE_integer("corpus_batches", 24, "Batches cycled with the corpus input (small).")
flags.DEFINE_integer("large_steps", 2, "Steps per pass for rnnsearch-50 (slow on a CPU).")
flags.DEFINE_list("checkouts", [], "label=DIR pairs: measure each checkout's package (a directory holding "
                  "bahdanau_tf/) as well, in child processes that alternate with this one's, --repeats times; rows "
                  "are labelled variant@label (this checkout: @new). Empty: this checkout only.")
flags.DEFINE_integer("max_length", None, "Pairs of at most this many tokens (default: the preset's). Give it with "
                     "--checkouts when the checkouts' presets differ, so that every checkout times the same batches.")
flags.DEFINE_integer("repeats", 2, "With --checkouts: alternations of the checkouts' child processes.")
flags.DEFINE_string("child", None, "Internal: preset:input:variant measured in this process.")
flags.DEFINE_string("output", os.path.join(os.path.dirname(__file__), "results", "train_throughput.json"),
                    "Where to write the JSON results.")

VARIANTS = {
    "old_default": dict(precision="mixed_bfloat16", jit_compile=False),
    "new_default": dict(),
    "float32": dict(precision="float32", jit_compile=False),
    "jit": dict(precision="float32", jit_compile=True),
    "jit_pad16": dict(precision="float32", jit_compile=True, pad_to_multiple=16),
    "bf16": dict(precision="mixed_bfloat16", jit_compile=False),
    "bf16_jit": dict(precision="mixed_bfloat16", jit_compile=True),
    "fp16": dict(precision="mixed_float16", jit_compile=False),
    "jit_autodiff": dict(precision="float32", jit_compile=True),
    # dropout's cost in the step: none (the rule off), the budget rule at 0 and at its full rates
    # (`bahdanau_tf.training.budget`: the rates are variables the step reads at any value)
    "no_dropout": dict(regularization="none"),
    "rule_zero": dict(regularization="budget"),
    "rule_full": dict(regularization="budget"),
    # label smoothing's cost: its loss is not the fused softmax cross-entropy (`losses.smoothed_token_nll`)
    "label_smoothing": dict(label_smoothing=0.1),
    # the device's precision and XLA at other batch sizes: compare them by ``pairs_per_s``
    "batch96": dict(batch_size=96),
    "batch128": dict(batch_size=128),
}
# variants whose recurrences TensorFlow differentiates automatically (`recurrence.automatic_differentiation`)
AUTODIFF_VARIANTS = ("jit_autodiff",)
VOCABULARY = {"small": 5000, "rnnsearch-50": 30000}


def train_step_flops(model, batch_size, source_length, target_length):
    """Matmul FLOPs of one RNNsearch train step at these (padded) shapes: 3 x the forward pass.

    Forward: the encoder's input projections and recurrences (both directions), the attention
    keys, s_0, the decoder's input projection, per target step W_a s, the scores v_a^T tanh(.),
    the context, the GRU's U_z, U_r, U and C c (the conditional GRU, ``decoder="cgru"``: its
    second GRU's recurrent matrices too), then the maxout readout and the vocabulary
    projection. Backward costs about twice the forward (two matmuls per matmul).
    """
    m, n = model.embedding_dim, model.hidden_dim
    a, l, v = model.attention_dim, model.maxout_dim, model.target_vocabulary_size
    b, s, t = batch_size, source_length, target_length
    encoder = 2 * (b * s * m * 3 * n + s * b * n * 3 * n)
    keys, initial = b * s * 2 * n * a, b * n * n
    decoder_inputs = b * t * m * 3 * n
    per_step = b * n * a + b * s * a + b * s * 2 * n + b * n * 3 * n + b * 2 * n * 3 * n
    if getattr(model, "decoder", "paper") == "cgru":
        per_step += b * n * 3 * n  # GRU_2's U'_z, U'_r, U' on s'_i
    readout = b * t * (n + m + 2 * n) * 2 * l + b * t * l * v
    forward = 2 * (encoder + keys + initial + decoder_inputs + t * per_step + readout)
    return 3 * forward


def _large(preset):
    """A paper-sized preset (few steps per pass, no corpus input), not a CPU-sized one
    (``small``, ``tiny``, ``rnnsearch-cgru-small``, ...)."""
    return not preset.endswith(("small", "tiny"))


def _tokenizers(corpus, size):
    from bahdanau_tf import text

    return (text.WordTokenizer.build(corpus.sources, max_vocabulary_size=size),
            text.WordTokenizer.build(corpus.targets, max_vocabulary_size=size))


def _fixed_batch(batch_size, length, source_vocabulary_size, target_vocabulary_size):
    """One batch of ``length`` real tokens on both sides, ids drawn from each side's vocabulary
    (the English side of the Bible has fewer words than the 30k of rnnsearch-50)."""
    import tensorflow as tf

    def ids(seed, size):
        return tf.random.stateless_uniform([batch_size, length], [1, seed], 4, size, "int32")

    source, target = ids(2, source_vocabulary_size), ids(3, target_vocabulary_size)
    return (source, target), target


def _prepare(preset, input_kind, variant, train, tokenizers, directories):
    """(trainer, iterator, steps per pass, the batches, config) of one variant."""
    import tensorflow as tf

    from bahdanau_tf import training

    lengths = {} if FLAGS.max_length is None else {"max_length": FLAGS.max_length}
    config = training.TrainingConfig.for_preset(preset, summaries=False, **VARIANTS[variant], **lengths)
    large = _large(preset)
    if input_kind == "fixed":
        batches = [_fixed_batch(config.batch_size, 30, tokenizers[0].vocabulary_size,
                                  tokenizers[1].vocabulary_size)]
        dataset = tf.data.Dataset.from_tensors(batches[0]).repeat()
        steps = FLAGS.large_steps if large else FLAGS.steps
    else:  # the variant's own padding
        probe = training.Trainer(directories.pop(), *tokenizers, preset=preset, config=config, log=lambda line: None)
        dataset = probe.train_dataset(train, distribute=False).take(FLAGS.corpus_batches).cache()
        batches = list(dataset)
        dataset = dataset.repeat()
        steps = FLAGS.corpus_batches
    trainer = training.Trainer(directories.pop(), *tokenizers, preset=preset, config=config, log=lambda line: None)
    if variant == "rule_full":
        trainer.budget_rule.set_epochs(training.budget.FULL_EPOCHS)
    return trainer, iter(trainer.strategy.experimental_distribute_dataset(dataset)), steps, batches, config


def _run_pass(trainer, iterator, steps, variant):
    """(wall seconds, CPU seconds of this process) of ``steps`` train steps."""
    import contextlib

    autodiff = contextlib.nullcontext()
    if variant in AUTODIFF_VARIANTS:  # imported only here: a checkout from before the module has none
        from bahdanau_tf.models import recurrence

        autodiff = recurrence.automatic_differentiation()
    start, cpu_start = time.time(), time.process_time()
    with autodiff:  # traced (and compiled) inside it too
        for _ in range(steps):
            trainer.train_step(iterator)
    trainer.step.numpy()  # waits for the last step
    return time.time() - start, time.process_time() - cpu_start


def measure_variants(preset, input_kind, variants):
    """One row per variant, measured in this process, the variants' timed passes interleaved
    (round 1 of every variant, then round 2, ...) so that a shared machine's load falls on all."""
    import shutil

    from bahdanau_tf import corpora

    train = corpora.load_corpus("bible-en-es", split="train")
    tokenizers = _tokenizers(train, VOCABULARY.get(preset, 5000))
    directories = [tempfile.mkdtemp(prefix="train_throughput_") for _ in range(2 * len(variants))]
    cleanup = list(directories)
    try:
        runs = {variant: _prepare(preset, input_kind, variant, train, tokenizers, directories) for variant in variants}
        first = {variant: _run_pass(trainer, iterator, steps, variant)[0]
                 for variant, (trainer, iterator, steps, _, _) in runs.items()}
        best = {variant: float("inf") for variant in variants}
        best_cpu = dict(best)
        for trainer, *_ in runs.values():
            trainer._token_count.assign(0.0)
        for _ in range(FLAGS.rounds):
            for variant, (trainer, iterator, steps, _, _) in runs.items():
                wall, cpu = _run_pass(trainer, iterator, steps, variant)
                best[variant] = min(best[variant], wall / steps)
                best_cpu[variant] = min(best_cpu[variant], cpu / steps)
        rows = []
        for variant, (trainer, _, steps, batches, config) in runs.items():
            seconds = best[variant]
            tokens = float(trainer._token_count.numpy()) / (FLAGS.rounds * steps)
            flops = sum(train_step_flops(trainer.model, int(b[1].shape[0]), int(b[0][0].shape[1]), int(b[1].shape[1]))
                        for b in batches) / len(batches)
            rows.append(dict(preset=preset, input=input_kind, variant=variant, precision=config.precision,
                             jit_compile=bool(config.jit_compile), batch_size=config.batch_size,
                             vocabulary_size=tokenizers[1].vocabulary_size, max_length=config.max_length,
                             shapes=len({tuple(b[0][0].shape) + tuple(b[1].shape) for b in batches}),
                             batch_shapes=[[int(b[1].shape[0]), int(b[0][0].shape[1]), int(b[1].shape[1])]
                                           for b in batches],
                             first_pass_s=round(first[variant], 1), step_ms=round(1000 * seconds, 1),
                             step_cpu_ms=round(1000 * best_cpu[variant], 1),
                             real_target_tokens_per_step=round(tokens, 1),
                             target_tokens_per_s=round(tokens / seconds, 1),
                             pairs_per_s=round(sum(int(b[1].shape[0]) for b in batches) / len(batches) / seconds, 1),
                             target_tokens_per_cpu_s=round(tokens / best_cpu[variant], 1),
                             gflops_per_s=round(flops / seconds / 1e9, 2)))
        return rows
    finally:
        for directory in cleanup:
            shutil.rmtree(directory, ignore_errors=True)


def _child(spec):
    from bahdanau_tf import devices

    if spec == "ceiling":
        result = {"matmul_gflops": round(_machines.matmul_gflops(), 1)}
    else:
        preset, input_kind, variants = spec.split(":")
        result = {"rows": measure_variants(preset, input_kind, variants.split("+"))}
    result["machine"] = devices.benchmark_record()
    print(json.dumps(result), flush=True)


def _table(rows):
    header = ("machine", "preset", "input", "variant", "precision", "jit_compile", "shapes", "first_pass_s",
              "step_ms", "step_cpu_ms", "pairs_per_s", "target_tokens_per_s", "target_tokens_per_cpu_s", "gflops_per_s", "ceiling")
    cells = [[str(row.get(h, "")) for h in header] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cell, widths)) for cell in cells]
    return "\n".join(lines)


def _measure_checkouts(script, child, passed, machine, low_precision):
    """[(child result, checkout label or None)]: this checkout alone, or with --checkouts every
    checkout's child in turn, --repeats times (the load of a shared machine falls on all)."""
    if not FLAGS.checkouts:
        return [(_machines.run_child(script, [child] + passed, machine, low_precision=low_precision), None)]
    checkouts = [("new", None)] + [tuple(pair.split("=", 1)) for pair in FLAGS.checkouts]
    return [(_machines.run_child(script, [child] + passed, machine, low_precision=low_precision, checkout=directory),
             label) for _ in range(FLAGS.repeats) for label, directory in checkouts]


def _unequal_batches(rows):
    """The (machine, preset, input) whose variants or checkouts timed different batch shapes
    (e.g. checkouts whose presets keep pairs of different lengths: give --max_length)."""
    shapes = {}
    for row in rows:
        shapes.setdefault((row["machine"], row["preset"], row["input"]), set()).add(json.dumps(row["batch_shapes"]))
    return [list(key) for key, seen in shapes.items() if len(seen) > 1]


def _best_of_repeats(rows):
    """One row per (machine, preset, input, variant): the fastest of its repeats."""
    best = {}
    for row in rows:
        key = (row["machine"], row["preset"], row["input"], row["variant"])
        if key not in best or row["step_ms"] < best[key]["step_ms"]:
            best[key] = row
    return list(best.values())


def main(argv):
    del argv
    if FLAGS.child:
        return _child(FLAGS.child)
    script = os.path.abspath(__file__)
    passed = ["--rounds", str(FLAGS.rounds), "--steps", str(FLAGS.steps), "--corpus_batches",
              str(FLAGS.corpus_batches), "--large_steps", str(FLAGS.large_steps)]
    if FLAGS.max_length is not None:
        passed.append(f"--max_length={FLAGS.max_length}")
    machines, rows = {}, []
    for machine in FLAGS.machines:
        ceiling = _machines.run_child(script, ["--child=ceiling"], machine)
        machines[machine] = dict(ceiling.pop("machine"), matmul_gflops=ceiling["matmul_gflops"])
        print(f"{machine}: {machines[machine]['description']}, float32 matmul {ceiling['matmul_gflops']} GFLOP/s",
              flush=True)
        # one process per group of variants that share an environment (bf16/fp16 on an emulated
        # machine run without oneDNN), their rounds interleaved
        groups = {}
        for variant in FLAGS.variants:
            low_precision = machine != "native" and VARIANTS[variant].get("precision", "float32") != "float32"
            groups.setdefault(low_precision, []).append(variant)
        for preset in FLAGS.presets:
            for input_kind in FLAGS.inputs:
                if input_kind == "corpus" and _large(preset):
                    continue  # a few steps of rnnsearch-50 on a CPU say nothing about its shapes
                for low_precision, variants in groups.items():
                    for result, label in _measure_checkouts(script, f"--child={preset}:{input_kind}:{'+'.join(variants)}",
                                                            passed, machine, low_precision):
                        for row in result["rows"]:
                            row.update(machine=machine, machine_record=result["machine"],
                                       ceiling=f"{100 * row['gflops_per_s'] / ceiling['matmul_gflops']:.1f}%")
                            if label:
                                row["variant"] = f"{row['variant']}@{label}"
                            rows.append(row)
                            shown = {k: v for k, v in row.items() if k not in ("machine_record", "batch_shapes")}
                            print(json.dumps(shown), flush=True)
    unequal = _unequal_batches(rows)
    for key in unequal:
        print(f"warning: {' '.join(key)}: the rows timed different batch shapes; give --max_length", flush=True)
    rows = _best_of_repeats(rows)
    print(_table(rows))
    os.makedirs(os.path.dirname(FLAGS.output), exist_ok=True)
    with open(FLAGS.output, "w") as f:
        json.dump({"benchmark": "train_throughput", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                   "command": " ".join(sys.argv), "machines": machines, "rounds": FLAGS.rounds,
                   "unequal_batch_shapes": unequal, "rows": rows}, f, indent=2)
        f.write("\n")
    print(f"wrote {FLAGS.output}")


if __name__ == "__main__":
    app.run(main)
