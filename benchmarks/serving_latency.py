"""What TF Serving would see: exported size, load time, signature latency, memory (DESIGN §5).

Exports a model with `bahdanau_tf.serving.export_saved_model`, then, in a fresh process that
imports only tensorflow and tensorflow_text (the model server links only TF and tf-text),
loads it twice, side by side:

- through the **session bundle**, the model server's own loading path: import the MetaGraph,
  run the restore and init ops, ``Session::Run`` by the signature's tensor names
  (``tf.compat.v1.saved_model.loader.load``);
- through ``tf.saved_model.load`` (the object graph, the Python convenience);

and calls ``serving_default`` — what the server runs for a Predict request — on English verses
of the Bible test split at batch 1 and batch 32 (beam 5 by default), the two paths alternating
call by call so that both see the same machine load. Latency is per call (per request); the
median, 90th percentile and the sentences/s of the median are printed and written to JSON,
with the CPU (model name and the avx2 / avx512f / avx512_bf16 / amx flags). Then the process's
resident memory is read before and after ``--rss_calls`` more calls through the session bundle
(batches of 1-8 sentences mixing bad input: empty, whitespace, invalid UTF-8, over-long): it must
stay flat.

The model: ``--model_dir`` if it holds a checkpoint, else an untrained ``--preset`` RNNsearch
(``small`` by default) with 5k-word vocabularies. An untrained model hardly ever emits [END],
so every hypothesis runs to the length limit (2 n + 10 tokens): the worst case; a trained model
stops near the source length. The mean output length is printed so runs can be compared.

    python benchmarks/serving_latency.py [--model_dir=runs/x] [--preset=small] [--beam_size=5]
        [--batch_sizes=1,32] [--calls=20] [--rss_calls=500] [--output=...]
"""

import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A trained model directory; used if it holds a "
                    "checkpoint, else an untrained --preset model is measured.")
flags.DEFINE_string("preset", "small", "Preset of the untrained model.")
flags.DEFINE_integer("beam_size", 5, "Beam of serving_default.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Sentences per request.")
flags.DEFINE_integer("calls", 20, "Timed calls per batch size and path (after one untimed call).")
flags.DEFINE_integer("rss_calls", 500, "Calls through the session bundle between the two "
                     "memory readings.")
flags.DEFINE_integer("vocabulary_size", 5000, "Word vocabulary per language (untrained model).")
flags.DEFINE_string("output", "benchmarks/results/serving_latency.json", "JSON output path.")

# Runs in the fresh process: only tensorflow and tensorflow_text.
_FRESH = r"""
import json, statistics, sys, time
start = time.perf_counter()
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401
import_seconds = time.perf_counter() - start
path, sentences_path, batch_sizes, calls, rss_calls = sys.argv[1:6]
calls, rss_calls = int(calls), int(rss_calls)
sentences = json.load(open(sentences_path))


def rss_mib():
    with open("/proc/self/status") as status:
        return int(next(l for l in status if l.startswith("VmRSS:")).split()[1]) / 1024


# the session bundle: what tensorflow_model_server does
start = time.perf_counter()
graph = tf.Graph()
session = tf.compat.v1.Session(graph=graph)
with graph.as_default():
    meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
signature = meta_graph.signature_def["serving_default"]
session_load_seconds = time.perf_counter() - start
feed = signature.inputs["sentences"].name
fetch = signature.outputs["translations"].name


def session_call(batch):
    return session.run(fetch, {feed: np.array(batch, dtype=object)})


start = time.perf_counter()
session_call(sentences[:1])
session_first_call_seconds = time.perf_counter() - start

# the object graph
start = time.perf_counter()
model = tf.saved_model.load(path)
object_load_seconds = time.perf_counter() - start
function = model.signatures["serving_default"]


def object_call(batch):
    return function(sentences=tf.constant(batch))["translations"].numpy()


start = time.perf_counter()
object_call(sentences[:1])
object_first_call_seconds = time.perf_counter() - start

result = {"import_seconds": import_seconds,
          "session_bundle": {"load_seconds": session_load_seconds,
                             "first_call_seconds": session_first_call_seconds, "batches": {}},
          "saved_model_load": {"load_seconds": object_load_seconds,
                               "first_call_seconds": object_first_call_seconds, "batches": {}}}
for batch_size in map(int, batch_sizes.split(",")):
    batches = [sentences[(i * batch_size) % len(sentences):][:batch_size] for i in range(calls + 1)]
    batches = [b if len(b) == batch_size else (b + sentences)[:batch_size] for b in batches]
    paths = {"session_bundle": session_call, "saved_model_load": object_call}
    times = {name: [] for name in paths}
    words = {name: 0 for name in paths}
    for call in paths.values():
        call(batches[0])  # untimed
    for batch in batches[1:]:
        for name, call in paths.items():  # alternating: both paths see the same machine load
            start = time.perf_counter()
            out = call(batch)
            times[name].append(time.perf_counter() - start)
            words[name] += sum(len(t.split()) for t in out)
    for name, seconds in times.items():
        seconds.sort()
        result[name]["batches"][str(batch_size)] = {
            "calls": calls, "median_ms": 1000 * statistics.median(seconds),
            "p90_ms": 1000 * seconds[int(0.9 * (len(seconds) - 1))],
            "min_ms": 1000 * seconds[0],
            "sentences_per_second": batch_size / statistics.median(seconds),
            "mean_output_words": words[name] / (calls * batch_size)}

# memory over many calls through the session bundle, bad input included
bad = ["", "   ", "\xff\xfe not utf-8".encode("latin-1"), " ".join(sentences[:40])]
pool = [s.encode() for s in sentences[:32]] + [b if isinstance(b, bytes) else b.encode() for b in bad]
rss = {"start_mib": rss_mib(), "half_mib": rss_mib()}
for i in range(rss_calls):
    session_call([pool[(i * 7 + k) % len(pool)] for k in range(1 + i % 8)])
    if i + 1 == max(rss_calls // 2, 1):
        rss["half_mib"] = rss_mib()
rss["end_mib"] = rss_mib()
rss["calls"] = rss_calls
result["rss"] = rss
result["package_imported"] = "bahdanau_tf" in sys.modules
json.dump(result, sys.stdout)
"""


def cpu_description():
    """The CPU's model name (lscpu) and the vector / matrix flags that matter to TF on CPU."""
    model = platform.processor() or "unknown"
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                      if line.startswith("Model name")), model)
    except OSError:
        pass
    flags_present = set()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            line = next((line for line in cpuinfo if line.startswith("flags")), "")
        flags_present = set(line.split(":", 1)[-1].split())
    except OSError:
        pass
    wanted = ["avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"]
    return {"model_name": model, "flags": {flag: flag in flags_present for flag in wanted}}


def _translator():
    from bahdanau_tf.model_directory import latest_checkpoint
    from bahdanau_tf.models import model_from_preset
    from bahdanau_tf.serving import SERVING_DTYPE
    from bahdanau_tf.text import WordTokenizer
    from bahdanau_tf.translator import DEFAULT_SEARCH, Translator
    from bahdanau_tf.corpora import load_corpus

    search = dataclasses.replace(DEFAULT_SEARCH, beam_size=FLAGS.beam_size)
    if FLAGS.model_dir and os.path.isdir(FLAGS.model_dir) and latest_checkpoint(FLAGS.model_dir):
        translator = Translator.from_directory(FLAGS.model_dir, dtype=SERVING_DTYPE, search=search)
        with open(os.path.join(FLAGS.model_dir, "model.json")) as f:
            settings = json.load(f).get("settings", {})
        label = f"{FLAGS.model_dir} ({settings.get('preset', '?')}, trained)"
        return translator, label
    train = load_corpus("bible-en-es", split="train")
    source = WordTokenizer.build(train.sources, max_vocabulary_size=FLAGS.vocabulary_size)
    target = WordTokenizer.build(train.targets, max_vocabulary_size=FLAGS.vocabulary_size)
    tf.keras.utils.set_random_seed(0)
    model = model_from_preset(FLAGS.preset, source_vocabulary_size=source.vocabulary_size,
                              target_vocabulary_size=target.vocabulary_size).build_variables()
    translator = Translator(model, source, target, search=search)
    return translator, f"{FLAGS.preset} (untrained, {FLAGS.vocabulary_size}-word vocabularies)"


def _directory_bytes(path):
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def main(argv):
    del argv
    from bahdanau_tf import devices
    from bahdanau_tf.corpora import load_corpus
    from bahdanau_tf.serving import export_saved_model

    translator, label = _translator()
    sentences = list(load_corpus("bible-en-es", split="test").sources[:256])
    with tempfile.TemporaryDirectory(prefix="serving_latency_") as workdir:
        start = time.perf_counter()
        path = export_saved_model(translator, os.path.join(workdir, "bahdanau"))
        export_seconds = time.perf_counter() - start
        sizes = {name: _directory_bytes(os.path.join(path, name))
                 for name in ("variables", "assets", "assets.extra")
                 if os.path.isdir(os.path.join(path, name))}
        sizes["saved_model.pb"] = os.path.getsize(os.path.join(path, "saved_model.pb"))
        total = _directory_bytes(path)
        sentences_path = os.path.join(workdir, "sentences.json")
        with open(sentences_path, "w") as f:
            json.dump(sentences, f)
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        env.pop("PYTHONPATH", None)
        process = subprocess.run(
            [sys.executable, "-I", "-c", _FRESH, path, sentences_path,
             ",".join(FLAGS.batch_sizes), str(FLAGS.calls), str(FLAGS.rss_calls)],
            capture_output=True, env=env, cwd=workdir, check=False)
        if process.returncode:
            raise RuntimeError(process.stderr.decode()[-3000:])
        fresh = json.loads(process.stdout)
    assert not fresh.pop("package_imported")
    cpu = cpu_description()
    result = {
        "model": label, "beam_size": FLAGS.beam_size, "export_seconds": export_seconds,
        "size_bytes": total, "size_parts_bytes": sizes, **fresh,
        "machine": {**devices.benchmark_record(), "cpu": cpu, "platform": platform.platform(),
                    "load_average": os.getloadavg()},
    }
    flag_text = " ".join(f"{k}{'+' if v else '-'}" for k, v in cpu["flags"].items())
    print(f"model: {label}, beam {FLAGS.beam_size}, serving_default in a fresh process "
          f"(tensorflow + tensorflow_text only)")
    print(f"CPU: {cpu['model_name']} ({os.cpu_count()} cpus; {flag_text}); load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"exported size: {total / 2**20:.1f} MiB "
          + ", ".join(f"{k} {v / 2**20:.2f}" for k, v in sizes.items()))
    print(f"export {export_seconds:.1f} s | import tf+tf_text {fresh['import_seconds']:.1f} s")
    print(f"{'path':<17} {'load s':>7} {'first s':>8} {'batch':>5} {'median ms':>10} {'p90 ms':>8} "
          f"{'min ms':>8} {'sent/s':>8} {'out words':>9}")
    for name in ("session_bundle", "saved_model_load"):
        part = fresh[name]
        for batch_size, row in part["batches"].items():
            print(f"{name:<17} {part['load_seconds']:>7.2f} {part['first_call_seconds']:>8.2f} "
                  f"{batch_size:>5} {row['median_ms']:>10.1f} {row['p90_ms']:>8.1f} "
                  f"{row['min_ms']:>8.1f} {row['sentences_per_second']:>8.1f} "
                  f"{row['mean_output_words']:>9.1f}")
    rss = fresh["rss"]
    print(f"RSS through the session bundle: {rss['start_mib']:.0f} MiB -> {rss['half_mib']:.0f} "
          f"after {rss['calls'] // 2} calls -> {rss['end_mib']:.0f} after {rss['calls']}")
    os.makedirs(os.path.dirname(FLAGS.output) or ".", exist_ok=True)
    with open(FLAGS.output, "w") as f:
        json.dump(result, f, indent=2)
    print(f"written: {FLAGS.output}")


if __name__ == "__main__":
    app.run(main)
