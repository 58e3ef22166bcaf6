"""Decode throughput of the Translator: sentences/s and target tokens/s, eager vs tf.function vs XLA.

What is timed is one call of the Translator's graph per batch — tokenization, encoder, beam
search and detokenization, exactly what ``serving_default`` runs — on English verses of the
Bible test split, for greedy search (beam 1) and beams 5 and 12, at batch 1, 16 and 64. A batch
size of b decodes ``max(b, 16)`` sentences (16 calls of one sentence at batch 1). A second table
shows how the cost grows with the source length (inputs of 10, 20, 40 and 80 words made by
joining verses).

The model is a `small` preset (5k word vocabularies built from the train split) with its
initial weights, unless ``--model_dir`` names a trained one. An untrained model hardly ever
emits [END], so every hypothesis runs to the length limit (2 n + 10 tokens): the worst case.
A trained model stops near the source length, which is why the tokens/s columns and the mean
output length are printed too: compare runs by tokens/s.

Every variant is compiled/traced in an untimed warm-up round, then timed ``--rounds`` times; the
best round is kept (the machine is shared and noisy). XLA compiles one program per input shape,
so its warm-up is the price of each new shape (see the ``compile_s`` column).

    python benchmarks/decode_throughput.py [--model_dir=RUN] [--presets=small,rnnsearch-50]
        [--batch_sizes=1,16,64] [--beam_sizes=1,5,12] [--variants=eager,function,xla]
"""

import json
import os
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from absl import app, flags

from bahdanau_tf.data import load_corpus
from bahdanau_tf.model_directory import build_model, load_model_directory
from bahdanau_tf.models import model_from_preset
from bahdanau_tf.text import WordTokenizer
from bahdanau_tf.translator import Translator

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A trained model directory (default: untrained presets).")
flags.DEFINE_list("presets", ["small"], "Presets to measure without --model_dir.")
flags.DEFINE_list("batch_sizes", ["1", "16", "64"], "Batch sizes.")
flags.DEFINE_list("beam_sizes", ["1", "5", "12"], "Beam sizes (1 = greedy).")
flags.DEFINE_list("variants", ["eager", "function", "xla"], "Execution modes.")
flags.DEFINE_list("eager_beam_sizes", ["1", "5"], "Eager is slow: only these beams, at the "
                  "largest batch size.")
flags.DEFINE_list("source_lengths", ["10", "20", "40", "80"], "Source lengths (words) of the "
                  "length sweep; empty to skip it.")
flags.DEFINE_integer("sweep_batch_size", 16, "Batch size of the length sweep.")
flags.DEFINE_integer("sweep_beam_size", 5, "Beam size of the length sweep.")
flags.DEFINE_integer("rounds", 3, "Timed rounds per measurement (best kept).")
flags.DEFINE_integer("vocabulary_size", 5000, "Word vocabulary per language for untrained presets.")
flags.DEFINE_string("output", "benchmarks/results/decode_throughput.json", "JSON output path.")


def _translator_parts(preset):
    """(model, source tokenizer, target tokenizer, label) for a preset or --model_dir."""
    if FLAGS.model_dir:
        loaded = load_model_directory(FLAGS.model_dir)
        name = os.path.basename(os.path.normpath(FLAGS.model_dir))
        return loaded.model, loaded.source_tokenizer, loaded.target_tokenizer, f"{name} (trained)"
    train = load_corpus("bible-en-es", split="train")
    source = WordTokenizer.build(train.sources, max_vocabulary_size=FLAGS.vocabulary_size)
    target = WordTokenizer.build(train.targets, max_vocabulary_size=FLAGS.vocabulary_size)
    tf.keras.utils.set_random_seed(0)
    model = build_model(model_from_preset(preset, source_vocabulary_size=source.vocabulary_size,
                                          target_vocabulary_size=target.vocabulary_size))
    return model, source, target, f"{preset} (untrained, {FLAGS.vocabulary_size} words)"


def _time_workload(function, batches, rounds):
    """(compile/warm-up seconds, best round seconds, generated tokens of one round)."""
    start = time.perf_counter()
    tokens = 0
    for batch in batches:
        out = function(batch)
        tokens += int(out["lengths"][:, 0].numpy().sum())
    warmup = time.perf_counter() - start
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for batch in batches:
            function(batch)["translations"].numpy()
        best = min(best, time.perf_counter() - start)
    return warmup, best, tokens


def _decode_function(translator, beam_size, eager):
    function = translator._batch_function(beam_size, 1, False, False)
    if not eager:
        return function

    def run_eagerly(batch):
        tf.config.run_functions_eagerly(True)
        try:
            return function(batch)
        finally:
            tf.config.run_functions_eagerly(False)

    return run_eagerly


def measure(model, source_tokenizer, target_tokenizer, sentences, rounds):
    rows = []
    translators = {
        "eager": Translator(model, source_tokenizer, target_tokenizer),
        "function": Translator(model, source_tokenizer, target_tokenizer),
        "xla": Translator(model, source_tokenizer, target_tokenizer, jit_compile=True),
    }
    batch_sizes = [int(b) for b in FLAGS.batch_sizes]
    for batch_size in batch_sizes:
        count = max(batch_size, 16)
        batches = [tf.constant(sentences[i:i + batch_size], tf.string)
                   for i in range(0, count, batch_size)]
        for beam_size in (int(b) for b in FLAGS.beam_sizes):
            for variant in FLAGS.variants:
                if variant == "eager" and (batch_size != max(batch_sizes) or
                                           str(beam_size) not in FLAGS.eager_beam_sizes):
                    continue
                function = _decode_function(translators[variant], beam_size, variant == "eager")
                warmup, seconds, tokens = _time_workload(
                    function, batches, 1 if variant == "eager" else rounds)
                row = dict(batch_size=batch_size, beam_size=beam_size, variant=variant,
                           sentences=count, seconds=seconds, compile_seconds=warmup,
                           sentences_per_second=count / seconds, tokens_per_second=tokens / seconds,
                           mean_output_tokens=tokens / count)
                rows.append(row)
                print(_format_row(row), flush=True)
    return rows


def length_sweep(model, source_tokenizer, target_tokenizer, sentences, rounds):
    """ms per sentence for inputs of exactly L words (verses joined, then cut)."""
    words = " ".join(sentences).split()
    translator = Translator(model, source_tokenizer, target_tokenizer)
    function = _decode_function(translator, FLAGS.sweep_beam_size, eager=False)
    rows = []
    for length in (int(n) for n in FLAGS.source_lengths):
        inputs = [" ".join(words[i * length:(i + 1) * length])
                  for i in range(FLAGS.sweep_batch_size)]
        warmup, seconds, tokens = _time_workload(function, [tf.constant(inputs)], rounds)
        row = dict(source_words=length, batch_size=FLAGS.sweep_batch_size,
                   beam_size=FLAGS.sweep_beam_size, variant="function", seconds=seconds,
                   ms_per_sentence=1000 * seconds / len(inputs),
                   sentences_per_second=len(inputs) / seconds, tokens_per_second=tokens / seconds,
                   mean_output_tokens=tokens / len(inputs))
        rows.append(row)
        print(f"  {length:>3} words: {row['ms_per_sentence']:8.1f} ms/sentence  "
              f"{row['tokens_per_second']:8.0f} tokens/s  "
              f"(mean output {row['mean_output_tokens']:.1f} tokens)", flush=True)
    return rows


def _format_row(row):
    return (f"  batch {row['batch_size']:>3}  beam {row['beam_size']:>2}  {row['variant']:<8}"
            f" {row['sentences_per_second']:8.1f} sent/s {row['tokens_per_second']:9.0f} tok/s"
            f"   mean out {row['mean_output_tokens']:5.1f}   compile {row['compile_seconds']:6.1f} s")


def main(argv):
    del argv
    sentences = load_corpus("bible-en-es", split="test").sources
    results = {"machine": {"platform": platform.platform(), "processor": platform.processor(),
                           "cpus": os.cpu_count(), "tensorflow": tf.__version__},
               "rounds": FLAGS.rounds, "models": []}
    presets = [None] if FLAGS.model_dir else FLAGS.presets
    for preset in presets:
        model, source, target, label = _translator_parts(preset)
        print(f"\n{label}: Bible test sentences (mean {np.mean([len(s.split()) for s in sentences[:64]]):.1f} "
              f"words in the first 64), best of {FLAGS.rounds} rounds")
        rows = measure(model, source, target, sentences, FLAGS.rounds)
        sweep = []
        if FLAGS.source_lengths:
            print(f"  cost against source length (batch {FLAGS.sweep_batch_size}, beam "
                  f"{FLAGS.sweep_beam_size}, tf.function):")
            sweep = length_sweep(model, source, target, sentences, FLAGS.rounds)
        results["models"].append({"model": label, "throughput": rows, "length_sweep": sweep})
    os.makedirs(os.path.dirname(FLAGS.output) or ".", exist_ok=True)
    with open(FLAGS.output, "w") as handle:
        json.dump(results, handle, indent=2)
        handle.write("\n")
    print(f"\nWrote {FLAGS.output}")


if __name__ == "__main__":
    app.run(main)
