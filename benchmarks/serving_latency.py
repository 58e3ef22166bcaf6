"""What TF Serving would see: exported size, load time, and signature latency (DESIGN §5).

Exports a model with `bahdanau_tf.serving.export_saved_model`, then, in a fresh process that
imports only tensorflow and tensorflow_text (as the model server only links TF and tf-text),
times ``tf.saved_model.load`` and the first call, then calls ``serving_default`` — the
signature the server runs for a Predict request — on English verses of the Bible test split
at batch 1 and batch 32 (beam 5 by default). Latency is per call (per request); the median,
90th percentile and the sentences/s of the median are printed and written to JSON.

The model: ``--model_dir`` if it holds a checkpoint (the default, /tmp/default_run, is where
the default training run is left), else a ``small`` RNNsearch with its initial (random)
weights and 5k-word vocabularies. An untrained model hardly ever emits [END], so every
hypothesis runs to the length limit (2 n + 10 tokens): the worst case; a trained model stops
near the source length. The mean output length is printed so runs can be compared.

    python benchmarks/serving_latency.py [--model_dir=/tmp/default_run] [--beam_size=5]
        [--batch_sizes=1,32] [--calls=20]
"""

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
flags.DEFINE_string("model_dir", "/tmp/default_run", "A trained model directory; used if it "
                    "holds a checkpoint, else an untrained `small` model is measured.")
flags.DEFINE_integer("beam_size", 5, "Beam of serving_default.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Sentences per request.")
flags.DEFINE_integer("calls", 20, "Timed calls per batch size (after one untimed call).")
flags.DEFINE_integer("vocabulary_size", 5000, "Word vocabulary per language (untrained model).")
flags.DEFINE_string("output", "benchmarks/results/serving_latency.json", "JSON output path.")

# Runs in the fresh process: only tensorflow and tensorflow_text.
_FRESH = r"""
import json, statistics, sys, time
start = time.perf_counter()
import tensorflow as tf
import tensorflow_text  # noqa: F401
import_seconds = time.perf_counter() - start
path, sentences_path, batch_sizes, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sentences = json.load(open(sentences_path))
start = time.perf_counter()
model = tf.saved_model.load(path)
load_seconds = time.perf_counter() - start
function = model.signatures["serving_default"]
start = time.perf_counter()
function(sentences=tf.constant(sentences[:1]))["translations"].numpy()
first_call_seconds = time.perf_counter() - start
result = {"import_seconds": import_seconds, "load_seconds": load_seconds,
          "first_call_seconds": first_call_seconds, "batches": {},
          "package_imported": "bahdanau_tf" in sys.modules}
for batch_size in map(int, batch_sizes.split(",")):
    batches = [sentences[(i * batch_size) % len(sentences):][:batch_size] for i in range(calls + 1)]
    batches = [b if len(b) == batch_size else (b + sentences)[:batch_size] for b in batches]
    function(sentences=tf.constant(batches[0]))["translations"].numpy()  # untimed
    seconds, words = [], 0
    for batch in batches[1:]:
        start = time.perf_counter()
        out = function(sentences=tf.constant(batch))["translations"].numpy()
        seconds.append(time.perf_counter() - start)
        words += sum(len(t.split()) for t in out)
    seconds.sort()
    result["batches"][str(batch_size)] = {
        "calls": calls, "median_ms": 1000 * statistics.median(seconds),
        "p90_ms": 1000 * seconds[int(0.9 * (len(seconds) - 1))],
        "min_ms": 1000 * seconds[0],
        "sentences_per_second": batch_size / statistics.median(seconds),
        "mean_output_words": words / (calls * batch_size)}
json.dump(result, sys.stdout)
"""


def _translator():
    from bahdanau_tf.model_directory import build_model, latest_checkpoint
    from bahdanau_tf.models import model_from_preset
    from bahdanau_tf.text import WordTokenizer
    from bahdanau_tf.translator import Translator
    from bahdanau_tf.data import load_corpus

    if FLAGS.model_dir and os.path.isdir(FLAGS.model_dir) and latest_checkpoint(FLAGS.model_dir):
        translator = Translator.from_directory(FLAGS.model_dir, beam_size=FLAGS.beam_size)
        with open(os.path.join(FLAGS.model_dir, "model.json")) as f:
            settings = json.load(f).get("settings", {})
        label = f"{FLAGS.model_dir} ({settings.get('preset', '?')}, trained)"
        return translator, label
    train = load_corpus("bible-en-es", split="train")
    source = WordTokenizer.build(train.sources, max_vocabulary_size=FLAGS.vocabulary_size)
    target = WordTokenizer.build(train.targets, max_vocabulary_size=FLAGS.vocabulary_size)
    tf.keras.utils.set_random_seed(0)
    model = build_model(model_from_preset("small", source_vocabulary_size=source.vocabulary_size,
                                          target_vocabulary_size=target.vocabulary_size))
    translator = Translator(model, source, target, beam_size=FLAGS.beam_size)
    return translator, f"small (untrained, {FLAGS.vocabulary_size}-word vocabularies)"


def _directory_bytes(path):
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def main(argv):
    del argv
    from bahdanau_tf import devices
    from bahdanau_tf.data import load_corpus
    from bahdanau_tf.serving import export_saved_model

    translator, label = _translator()
    sentences = list(load_corpus("bible-en-es", split="test").sources[:256])
    with tempfile.TemporaryDirectory() as workdir:
        start = time.perf_counter()
        path = export_saved_model(translator, os.path.join(workdir, "bahdanau"))
        export_seconds = time.perf_counter() - start
        sizes = {name: _directory_bytes(os.path.join(path, name))
                 for name in ("variables", "assets", "assets.extra")}
        sizes["saved_model.pb"] = os.path.getsize(os.path.join(path, "saved_model.pb"))
        total = _directory_bytes(path)
        sentences_path = os.path.join(workdir, "sentences.json")
        with open(sentences_path, "w") as f:
            json.dump(sentences, f)
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        env.pop("PYTHONPATH", None)
        process = subprocess.run(
            [sys.executable, "-I", "-c", _FRESH, path, sentences_path,
             ",".join(FLAGS.batch_sizes), str(FLAGS.calls)],
            capture_output=True, env=env, cwd=workdir, check=False)
        if process.returncode:
            raise RuntimeError(process.stderr.decode()[-3000:])
        fresh = json.loads(process.stdout)
    assert not fresh.pop("package_imported")
    result = {
        "model": label, "beam_size": FLAGS.beam_size, "export_seconds": export_seconds,
        "size_bytes": total, "size_parts_bytes": sizes, **fresh,
        "machine": {**devices.benchmark_record(), "platform": platform.platform()},
    }
    print(f"model: {label}, beam {FLAGS.beam_size}, serving_default in a fresh process "
          f"(tensorflow + tensorflow_text only)")
    print(f"exported size: {total / 2**20:.1f} MiB "
          + ", ".join(f"{k} {v / 2**20:.2f}" for k, v in sizes.items()))
    print(f"export {export_seconds:.1f} s | import tf+tf_text {fresh['import_seconds']:.1f} s | "
          f"load {fresh['load_seconds']:.2f} s | first call {fresh['first_call_seconds']:.2f} s")
    print(f"{'batch':>5} {'median ms':>10} {'p90 ms':>8} {'min ms':>8} {'sent/s':>8} "
          f"{'out words':>9}")
    for batch_size, row in fresh["batches"].items():
        print(f"{batch_size:>5} {row['median_ms']:>10.1f} {row['p90_ms']:>8.1f} "
              f"{row['min_ms']:>8.1f} {row['sentences_per_second']:>8.1f} "
              f"{row['mean_output_words']:>9.1f}")
    os.makedirs(os.path.dirname(FLAGS.output) or ".", exist_ok=True)
    with open(FLAGS.output, "w") as f:
        json.dump(result, f, indent=2)
    print(f"written: {FLAGS.output}")


if __name__ == "__main__":
    app.run(main)
