"""Decode throughput of `Translator.translate`: the old and new defaults side by side, per machine.

What is timed is `Translator.translate` on English verses of the Bible test split (tokenization,
encoder, beam search, detokenization; Python included, as bahdanau-translate and
bahdanau-evaluate run it), for greedy search (beam 1) and beam 5:

* ``old_default``: ``Translator(batching=Batching(jit_compile=False))``, one ``tf.function`` per batch without
  XLA (what the exported signatures run), the model in the policy it was trained in;
* ``new_default``: ``Translator()``, XLA over bucketed shapes (`bahdanau_tf.translator`), the
  model loaded as `Translator.from_directory` loads it (float32 on a CPU).

At batch sizes >= 16 ``--sentences`` verses are translated per round (sentences/s); at batch 1
``--latency_sentences`` verses one call each, and the median and 90th percentile latency are
reported. Each variant first translates the same workload once untimed (``warmup_s``: tracing
and, for XLA, one compilation per bucketed shape — ``compilations``), then ``--rounds`` timed
rounds; the best is kept (the machine is shared). The variants alternate round by round.

With ``--old_checkout=DIR`` (a checkout of an earlier commit, e.g. ``git worktree add DIR
HEAD~3``) the same measurements run in child processes that import DIR's package, alternating
with this checkout's children round by round (one timed round per child, after its untimed
warmup), and the table adds new / old ratios. Each (batch size, beam) row also gives the
hypothesis-steps per sentence: every row of every step the search computed (finished sentences,
beams and filler rows included), counted once per checkout by a model whose ``decode_step``
counts its rows (``_machines.CountingModel``).

Machines: ``native`` and ``avx2``, an AVX2/FMA-only CPU emulated on this one
(benchmarks/_machines.py); each runs in its own process and its JSON records the CPU model and
flags. The model is ``--model_dir`` (a trained one: outputs stop near the source length) or an
untrained ``small`` preset over 5k word vocabularies (outputs run to the length limit: the
worst case), so compare runs by tokens/s too.

    python benchmarks/decode_throughput.py [--model_dir=RUN] [--machines=native,avx2]
        [--batch_sizes=64,1] [--beam_sizes=1,5] [--old_checkout=DIR] [--length_penalty=ALPHA]
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machines  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A trained model directory (default: an untrained preset).")
flags.DEFINE_string("preset", "small", "Preset to measure without --model_dir.")
flags.DEFINE_list("machines", ["native", "avx2"], "Machines: native and/or avx2 (emulated).")
flags.DEFINE_list("batch_sizes", ["64", "1"], "Batch sizes.")
flags.DEFINE_list("beam_sizes", ["1", "5"], "Beam sizes (1 = greedy).")
flags.DEFINE_list("variants", ["old_default", "new_default"], "Variants.")
flags.DEFINE_integer("sentences", 256, "Verses per round at batch sizes > 1.")
flags.DEFINE_integer("latency_sentences", 32, "Verses (one call each) at batch size 1.")
flags.DEFINE_integer("rounds", 3, "Timed rounds per measurement (best kept).")
flags.DEFINE_integer("vocabulary_size", 5000, "Word vocabulary per language for an untrained preset.")
flags.DEFINE_string("old_checkout", None, "An earlier checkout: its package is measured beside this one, "
                    "child processes alternating round by round.")
flags.DEFINE_float("length_penalty", None, "The translators' length penalty (None: each checkout's default; "
                   "give one to compare checkouts whose defaults differ).")
flags.DEFINE_bool("child", False, "Internal: measure in this process.")
flags.DEFINE_bool("count_steps", True, "Internal: also count the hypothesis-steps (once per child).")
flags.DEFINE_string("output", os.path.join(os.path.dirname(__file__), "results", "decode_throughput.json"),
                    "JSON output path.")

# old: tf.function without XLA, the model in the policy it was trained in; new: the defaults
VARIANTS = {"old_default": dict(jit_compile=False, dtype=None), "new_default": dict(jit_compile=None, dtype="auto")}


def _trained_policy():
    """The dtype policy --model_dir was trained in (float32 for an untrained preset)."""
    if not FLAGS.model_dir:
        return "float32"
    with open(os.path.join(FLAGS.model_dir, "model.json")) as handle:
        dtype = json.load(handle)["config"].get("dtype")
    return dtype.get("config", {}).get("name", "float32") if isinstance(dtype, dict) else (dtype or "float32")


def _parts(dtype):
    """(model, source tokenizer, target tokenizer, label) with the models in ``dtype``."""
    import tensorflow as tf

    from bahdanau_tf.corpora import load_corpus
    from bahdanau_tf.model_directory import load_model_directory
    from bahdanau_tf.models import model_from_preset
    from bahdanau_tf.text import WordTokenizer

    if FLAGS.model_dir:
        from bahdanau_tf import devices

        dtype = devices.decoding_precision() if dtype == "auto" else dtype
        loaded = load_model_directory(FLAGS.model_dir, dtype=dtype)
        name = os.path.basename(os.path.normpath(FLAGS.model_dir))
        return loaded.model, loaded.source_tokenizer, loaded.target_tokenizer, f"{name} (trained, {_trained_policy()})"
    train = load_corpus("bible-en-es", split="train")
    source = WordTokenizer.build(train.sources, max_vocabulary_size=FLAGS.vocabulary_size)
    target = WordTokenizer.build(train.targets, max_vocabulary_size=FLAGS.vocabulary_size)
    tf.keras.utils.set_random_seed(0)
    model = model_from_preset(FLAGS.preset, source_vocabulary_size=source.vocabulary_size,
                              target_vocabulary_size=target.vocabulary_size).build_variables()
    return model, source, target, f"{FLAGS.preset} (untrained, {FLAGS.vocabulary_size} words)"


def _throughput(translator, sentences, batch_size, beam_size):
    """Seconds of one round, the generated tokens (counted by re-tokenizing the outputs) and the
    process's CPU seconds (all its threads: less sensitive than the wall time to other jobs on a
    shared machine, which take cores away but do not add to this process's CPU time)."""
    start, cpu_start = time.perf_counter(), time.process_time()
    out = translator.translate(sentences, beam_size=beam_size, batch_size=batch_size)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    tokens = int(translator.target_tokenizer.tokenize(out.translations).row_lengths().numpy().sum())
    return seconds, tokens + len(sentences), cpu_seconds  # + [END]


def _latencies(translator, sentences, beam_size):
    times = []
    for sentence in sentences:
        start = time.perf_counter()
        translator.translate([sentence], beam_size=beam_size)
        times.append(time.perf_counter() - start)
    return times


def _translator(translator_class, model, source, target, jit_compile):
    """A Translator with or without XLA, whichever constructor the measured checkout has (an
    --old_checkout may take ``jit_compile`` itself instead of a `bahdanau_tf.decoding.Batching`),
    with ``--length_penalty`` when given."""
    import inspect

    parameters = inspect.signature(translator_class.__init__).parameters
    options = {}
    if FLAGS.length_penalty is not None:
        import dataclasses

        from bahdanau_tf import translator as translator_module

        options["search"] = dataclasses.replace(translator_module.DEFAULT_SEARCH, length_penalty=FLAGS.length_penalty)
    if "batching" in parameters:
        from bahdanau_tf.decoding import Batching

        return translator_class(model, source, target, batching=Batching(jit_compile=jit_compile), **options)
    return translator_class(model, source, target, jit_compile=jit_compile, **options)


def _measure():
    import numpy as np

    from bahdanau_tf.corpora import load_corpus
    from bahdanau_tf.translator import Translator

    test = load_corpus("bible-en-es", split="test").sources
    translators = {}
    for name in FLAGS.variants:
        options = dict(VARIANTS[name])
        model, source, target, label = _parts(options.pop("dtype"))
        translators[name] = _translator(Translator, model, source, target, **options)
    counting = None
    if FLAGS.count_steps:  # the search's work does not depend on the variant: counted with the last one's options
        counting = _machines.CountingModel(model)
        counting_translator = _translator(Translator, counting, source, target, **options)
    rows = []
    for batch_size in (int(b) for b in FLAGS.batch_sizes):
        for beam_size in (int(b) for b in FLAGS.beam_sizes):
            results, steps = {}, {}
            if counting is not None:
                counting.counter.assign(0)
                if batch_size == 1:
                    _latencies(counting_translator, test[:FLAGS.latency_sentences], beam_size)
                    count = FLAGS.latency_sentences
                else:
                    _throughput(counting_translator, test[:FLAGS.sentences], batch_size, beam_size)
                    count = FLAGS.sentences
                steps = dict(hyp_steps_per_sentence=round(int(counting.counter.numpy()) / count, 1))
            for name, translator in translators.items():  # untimed: traces and compilations
                before = translator.compilations
                start = time.perf_counter()
                if batch_size == 1:
                    _latencies(translator, test[:FLAGS.latency_sentences], beam_size)
                else:
                    _throughput(translator, test[:FLAGS.sentences], batch_size, beam_size)
                results[name] = dict(warmup_s=round(time.perf_counter() - start, 1),
                                     compilations=translator.compilations - before, best=float("inf"))
            for _ in range(FLAGS.rounds):
                for name, translator in translators.items():  # alternating: the same noise for both
                    result = results[name]
                    if batch_size == 1:
                        times = sorted(_latencies(translator, test[:FLAGS.latency_sentences], beam_size))
                        if np.median(times) < result["best"]:
                            result.update(best=float(np.median(times)), median_ms=round(1000 * np.median(times), 1),
                                          p90_ms=round(1000 * times[int(0.9 * (len(times) - 1))], 1),
                                          sentences_per_s=round(len(times) / sum(times), 1))
                    else:
                        seconds, tokens, cpu_seconds = _throughput(translator, test[:FLAGS.sentences],
                                                                   batch_size, beam_size)
                        result["cpu_sentences_per_s"] = max(result.get("cpu_sentences_per_s", 0.0),
                                                            round(FLAGS.sentences / cpu_seconds, 1))
                        if seconds < result["best"]:
                            result.update(best=seconds, sentences_per_s=round(FLAGS.sentences / seconds, 1),
                                          tokens_per_s=round(tokens / seconds, 1),
                                          mean_output_tokens=round(tokens / FLAGS.sentences, 1))
            for name, result in results.items():
                result.pop("best")
                rows.append(dict(model=label, variant=name, batch_size=batch_size, beam_size=beam_size, **result,
                                 **steps))
    return rows


KEY = ("machine", "variant", "batch_size", "beam_size")
_REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this checkout


def _better(row, other):
    """Whether ``row`` is the better round of one measurement (more sentences/s, or lower median latency)."""
    if "median_ms" in row:
        return row["median_ms"] < other["median_ms"]
    return row["sentences_per_s"] > other["sentences_per_s"]


def _ratios(rows):
    """new / old per measurement: sentences/s and hypothesis-steps; old / new for the latency."""
    by_key = {}
    for row in rows:
        by_key.setdefault(tuple(row[k] for k in KEY), {})[row["checkout"]] = row
    ratios = []
    for key, pair in by_key.items():
        if {"old", "new"} <= set(pair):
            old, new = pair["old"], pair["new"]
            ratio = dict(zip(KEY, key), speedup=round(new["sentences_per_s"] / old["sentences_per_s"], 2))
            if new.get("cpu_sentences_per_s") and old.get("cpu_sentences_per_s"):
                ratio["cpu_speedup"] = round(new["cpu_sentences_per_s"] / old["cpu_sentences_per_s"], 3)
            if "median_ms" in new:
                ratio["median_latency_speedup"] = round(old["median_ms"] / new["median_ms"], 2)
            if "hyp_steps_per_sentence" in new and "hyp_steps_per_sentence" in old:
                ratio["hyp_steps_new_over_old"] = round(new["hyp_steps_per_sentence"] / old["hyp_steps_per_sentence"], 3)
            ratios.append(ratio)
    return ratios


def _table(rows, header):
    cells = [[str(row.get(h, "")) for h in header] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cell, widths)) for cell in cells]
    return "\n".join(lines)


def _run(script, passed, machine, checkout, rounds, count_steps):
    """The rows of one child process per dtype group of the variants, labelled with ``checkout``."""
    groups, rows, record = {}, [], None
    for variant in FLAGS.variants:
        # an emulated machine runs a model in bf16/fp16 without oneDNN (benchmarks/_machines.py)
        low_precision = machine != "native" and VARIANTS[variant]["dtype"] is None and _trained_policy() != "float32"
        groups.setdefault(low_precision, []).append(variant)
    for low_precision, variants in groups.items():
        arguments = ["--child", f"--variants={','.join(variants)}", f"--rounds={rounds}",
                     f"--count_steps={count_steps}"] + passed
        result = _machines.run_child(script, arguments, machine, low_precision=low_precision,
                                     checkout=FLAGS.old_checkout if checkout == "old" else _REPOSITORY)
        record = result["machine"]
        for row in result["rows"]:
            rows.append(dict(machine=machine, checkout=checkout, **row))
    return rows, record


def main(argv):
    del argv
    if FLAGS.child:
        import bahdanau_tf
        from bahdanau_tf import devices

        record = dict(devices.benchmark_record(), package=os.path.dirname(bahdanau_tf.__file__))
        print(json.dumps({"rows": _measure(), "machine": record}), flush=True)
        return
    script = os.path.abspath(__file__)
    passed = [f"--{name}={getattr(FLAGS, name)}" for name in ("preset", "sentences", "latency_sentences",
                                                              "vocabulary_size")]
    passed += [f"--{name}={','.join(getattr(FLAGS, name))}" for name in ("batch_sizes", "beam_sizes")]
    if FLAGS.model_dir:
        passed.append(f"--model_dir={FLAGS.model_dir}")
    if FLAGS.length_penalty is not None:
        passed.append(f"--length_penalty={FLAGS.length_penalty}")
    machines, best, counted, cpu_best = {}, {}, {}, {}
    for machine in FLAGS.machines:
        if FLAGS.old_checkout:  # one timed round per child, the checkouts alternating
            runs = [(checkout, 1, round_ == 0) for round_ in range(FLAGS.rounds) for checkout in ("old", "new")]
        else:
            runs = [("new", FLAGS.rounds, True)]
        for checkout, rounds, count_steps in runs:
            rows, record = _run(script, passed, machine, checkout, rounds, count_steps)
            machines[f"{machine} ({checkout})"] = record
            print(f"{machine}, {checkout} ({record['package']}): {record['description']}", flush=True)
            for row in rows:
                print(json.dumps(row), flush=True)
                key = (checkout,) + tuple(row[k] for k in KEY)
                if "hyp_steps_per_sentence" in row:
                    counted[key] = row["hyp_steps_per_sentence"]
                if key not in best or _better(row, best[key]):
                    best[key] = row
                if "cpu_sentences_per_s" in row:  # the best round by CPU time, whichever child
                    cpu_best[key] = max(cpu_best.get(key, 0.0), row["cpu_sentences_per_s"])
    rows = [dict(row, hyp_steps_per_sentence=counted.get(key, ""), cpu_sentences_per_s=cpu_best.get(key, ""))
            for key, row in best.items()]
    header = ("machine", "checkout", "variant", "batch_size", "beam_size", "sentences_per_s", "cpu_sentences_per_s", "tokens_per_s",
              "median_ms", "p90_ms", "hyp_steps_per_sentence", "warmup_s", "compilations")
    print(_table(rows, header))
    ratios = _ratios(rows)
    if ratios:
        print(_table(ratios, KEY + ("speedup", "cpu_speedup", "median_latency_speedup", "hyp_steps_new_over_old")))
    _machines.write_json(FLAGS.output, {"machines": machines, "rounds": FLAGS.rounds,
                                        "old_checkout": FLAGS.old_checkout, "length_penalty": FLAGS.length_penalty,
                                        "rows": rows, "ratios": ratios})


if __name__ == "__main__":
    app.run(main)
