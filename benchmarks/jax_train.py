"""The default preset trained on Keras's JAX backend from pre-tokenized arrays: updates/s,
target tokens/s and dev NLL after N updates, with only keras, jax and numpy imported.

Two steps, so that the second runs where TensorFlow is not installed (a GPU machine with JAX):

    # where the package and TensorFlow are installed: the corpus as arrays (WordPiece, 8,000)
    python benchmarks/jax_train.py write --arrays=bible.npz
    # anywhere with keras, jax and numpy (and this checkout on PYTHONPATH)
    KERAS_BACKEND=jax python benchmarks/jax_train.py train --arrays=bible.npz --updates=1000

``train`` builds `bahdanau_tf.models.RNNSearch` at the default preset (`presets.DEFAULT`),
trains it with the preset's optimiser (Adam 5e-3, gradient norm <= 1, batches of 64 pairs,
the paper's bucketing: 20 batches' pairs sorted by length, lengths padded to multiples of 16
so that few shapes compile), times the updates after ``--warmup`` (compilation left out),
computes the dev NLL per target token after the last update, and writes JSON (date, device,
command) to benchmarks/results/. TensorFlow and PyTorch are made unimportable first, so the run
is what it is on a machine without them.
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
PAD_TO = 16  # lengths padded to a multiple of this: one compiled shape per bucket of lengths


def write_arrays(path, vocabulary_size, max_length, train_pairs, vocabulary_sentences):
    """The embedded corpus's train and dev splits as padded int32 arrays (TensorFlow's tokenizers)."""
    from bahdanau_tf import text  # noqa: PLC0415 — TensorFlow: only in this step
    from bahdanau_tf.corpora import load_corpus  # noqa: PLC0415
    from bahdanau_tf.special_tokens import END_ID, START_ID  # noqa: PLC0415

    train = load_corpus("bible-en-es", split="train")
    source_tokenizer, target_tokenizer = text.build_tokenizers(
        train, vocabulary_size=vocabulary_size,
        vocabulary_sentences=text.DEFAULT_VOCABULARY_SENTENCES if vocabulary_sentences is None else vocabulary_sentences)
    arrays = {}
    for split, corpus in (("train", train), ("dev", load_corpus("bible-en-es", split="dev"))):
        sources = [list(ids) + [END_ID] for ids in source_tokenizer.tokenize(list(corpus.sources)).to_list()]
        targets = [list(ids) for ids in target_tokenizer.tokenize(list(corpus.targets)).to_list()]
        kept = [(s, t) for s, t in zip(sources, targets) if len(s) <= max_length and len(t) + 1 <= max_length]
        if split == "train" and train_pairs:
            kept = kept[:train_pairs]
        arrays[f"{split}_source"] = _padded([s for s, _ in kept])
        arrays[f"{split}_target_in"] = _padded([[START_ID] + t for _, t in kept])
        arrays[f"{split}_target_out"] = _padded([t + [END_ID] for _, t in kept])
    np.savez_compressed(path, vocabulary_size=np.int32(vocabulary_size), **arrays)
    print(f"wrote {path}: {len(arrays['train_source'])} train and {len(arrays['dev_source'])} dev pairs")


def _padded(rows):
    out = np.zeros((len(rows), max(map(len, rows))), "int32")
    for index, row in enumerate(rows):
        out[index, :len(row)] = row
    return out


def _lengths(array):
    return (array != 0).sum(axis=1)


def batches(arrays, batch_size, rng, split="train", bucket=20):
    """Endless batches: the paper's bucketing (``bucket`` batches' pairs sorted by target length)."""
    source, target_in, target_out = (arrays[f"{split}_{name}"] for name in ("source", "target_in", "target_out"))
    lengths = _lengths(target_in)
    batch_size = min(batch_size, len(source))
    bucket = max(1, min(bucket, len(source) // batch_size))  # a small corpus: fewer batches a bucket
    while True:
        order = rng.permutation(len(source))
        for start in range(0, len(order) - batch_size * bucket + 1, batch_size * bucket):
            chunk = order[start:start + batch_size * bucket]
            chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
            for index in rng.permutation(bucket):
                rows = chunk[index * batch_size:(index + 1) * batch_size]
                yield _trimmed(source[rows], target_in[rows], target_out[rows])


def _trimmed(source, target_in, target_out):
    """A batch cut to its longest row, rounded up to a multiple of `PAD_TO`."""
    def cut(array):
        length = -(-int(_lengths(array).max()) // PAD_TO) * PAD_TO
        return array[:, :min(length, array.shape[1])] if length <= array.shape[1] else \
            np.pad(array, [(0, 0), (0, length - array.shape[1])])
    return cut(source), cut(target_in), cut(target_out)


def dev_nll(model, arrays, sentences, batch_size=64):
    """Mean negative log-likelihood per target token over the first ``sentences`` dev pairs."""
    import keras  # noqa: PLC0415

    total, tokens = 0.0, 0
    for start in range(0, min(sentences, len(arrays["dev_source"])), batch_size):
        rows = slice(start, min(start + batch_size, sentences))
        source, target_in, target_out = _trimmed(arrays["dev_source"][rows], arrays["dev_target_in"][rows],
                                                 arrays["dev_target_out"][rows])
        logits = model((source, target_in), training=False)
        log_p = keras.ops.convert_to_numpy(keras.ops.log_softmax(logits, axis=-1))
        picked = np.take_along_axis(log_p, target_out[..., None], axis=-1)[..., 0]
        mask = target_out != 0
        total, tokens = total - float((picked * mask).sum()), tokens + int(mask.sum())
    return total / tokens


def _device():
    import jax  # noqa: PLC0415

    device = jax.devices()[0]
    cpu = platform.processor() or platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    return {"cpu": cpu, "cores": os.cpu_count(), "jax_backend": jax.default_backend(),
            "device": getattr(device, "device_kind", str(device)), "jax": jax.__version__}


class _Unimportable:
    """A finder that refuses TensorFlow and PyTorch, as on a machine without them (Keras would
    otherwise load TensorFlow for its data adapters where it is installed)."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text", "torch"):
            raise ImportError(f"{name}: this run uses keras, jax and numpy only")


def train(arguments):
    sys.meta_path.insert(0, _Unimportable())
    import keras  # noqa: PLC0415

    from bahdanau_tf import presets  # noqa: PLC0415 — Keras alone
    from bahdanau_tf.models import RNNSearch  # noqa: PLC0415 — Keras alone

    if keras.backend.backend() != "jax":
        raise SystemExit("set KERAS_BACKEND=jax")
    arrays = dict(np.load(arguments.arrays))
    vocabulary_size = int(arrays["vocabulary_size"])
    keras.utils.set_random_seed(arguments.seed)
    model = RNNSearch.from_preset(presets.DEFAULT, source_vocabulary_size=vocabulary_size,
                                  target_vocabulary_size=vocabulary_size)
    training = presets.get_preset(presets.DEFAULT).training
    model.compile(optimizer=keras.optimizers.Adam(training["learning_rate"], clipnorm=training["clipnorm"]),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    stream = batches(arrays, training["batch_size"], np.random.default_rng(arguments.seed))
    tokens, started, loss = 0, None, float("nan")
    for update in range(arguments.warmup + arguments.updates):
        if update == arguments.warmup:
            started = time.perf_counter()
        source, target_in, target_out = next(stream)
        loss = float(model.train_on_batch((source, target_in), target_out,
                                          sample_weight=(target_out != 0).astype("float32")))
        if update >= arguments.warmup:
            tokens += int((target_out != 0).sum())
    seconds = time.perf_counter() - started
    imported = sorted({name.split(".")[0] for name in sys.modules} & {"tensorflow", "tensorflow_text", "torch"})
    if imported:
        raise SystemExit(f"imported {imported}: the run must have keras, jax and numpy only")
    record = {"benchmark": "jax_train", "preset": presets.DEFAULT, "vocabulary_size": vocabulary_size,
              "updates": arguments.updates, "warmup_updates": arguments.warmup, "seconds": round(seconds, 3),
              "updates_per_second": round(arguments.updates / seconds, 3),
              "target_tokens_per_second": round(tokens / seconds, 1), "last_train_loss": round(loss, 4),
              "dev_nll": round(dev_nll(model, arrays, arguments.dev_sentences), 4),
              "dev_sentences": min(arguments.dev_sentences, len(arrays["dev_source"])),
              "keras": keras.__version__, "machine": _device()}
    record["cpu"] = record["machine"]["cpu"]
    print(json.dumps({k: v for k, v in record.items() if k != "machine"}))
    _write_json(arguments.output, record)


def _write_json(path, record):
    """`_machines.write_json`'s format, without its TensorFlow import (the record names its machine)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _machines  # noqa: PLC0415

    _machines.write_json(path, record)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["write", "train"])
    parser.add_argument("--arrays", required=True, help="the .npz of pre-tokenized arrays")
    parser.add_argument("--vocabulary_size", type=int, default=8000)
    parser.add_argument("--max_length", type=int, default=80)
    parser.add_argument("--train_pairs", type=int, default=0, help="write: keep the first N (0: all)")
    parser.add_argument("--vocabulary_sentences", type=int, default=None)
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=20, help="updates before the clock starts")
    parser.add_argument("--dev_sentences", type=int, default=1007)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--output", default=os.path.join(RESULTS, "jax_train.json"))
    arguments = parser.parse_args(argv)
    if arguments.step == "write":
        write_arrays(arguments.arrays, arguments.vocabulary_size, arguments.max_length,
                     arguments.train_pairs, arguments.vocabulary_sentences)
    else:
        train(arguments)


if __name__ == "__main__":
    main()
