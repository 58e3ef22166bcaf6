"""Distinct batch shapes over one epoch of `make_dataset`, per ``pad_to_multiple``.

XLA (``jit_compile``; Keras's ``fit`` turns it on by default on a GPU) compiles one program per
input shape, so the number of distinct ``(rows, source length, target length)`` shapes of an
epoch is the number of compilations of compiled ``fit``. Counts, not times: the numbers do not
depend on the machine. Also checks that the dataset's cardinality equals the batches it yields,
and times the extra tokenisation pass that counts them.

    python benchmarks/dataset_shapes.py [--batch_size=64] [--max_length=50] \\
        [--tokenizer=subword] [--vocabulary_size=5000] [--multiples=1,8,16]

Prints a table and writes ``benchmarks/results/dataset_shapes.json``.
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from bahdanau_tf import corpora, data, text  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machines  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 64, "Pairs per batch (the small preset's).")
flags.DEFINE_integer("max_length", 50, "Length limit in tokens.")
flags.DEFINE_enum("tokenizer", "subword", ["subword", "word"], "Vocabulary kind.")
flags.DEFINE_integer("vocabulary_size", 5000, "Vocabulary size per language.")
flags.DEFINE_list("multiples", ["1", "8", "16"], "pad_to_multiple values (1: no padding).")
flags.DEFINE_string("output", os.path.join(os.path.dirname(__file__), "results", "dataset_shapes.json"),
                    "Where to write the JSON results.")


def main(argv):
    del argv
    train = corpora.load_corpus("bible-en-es", split="train")
    start = time.time()
    source, target = text.build_tokenizers(train, FLAGS.tokenizer, FLAGS.vocabulary_size)
    print(f"{FLAGS.tokenizer} vocabularies {source.vocabulary_size} / {target.vocabulary_size} "
          f"in {time.time() - start:.0f} s")
    start = time.time()
    pairs = data.count_pairs(train, source, target, FLAGS.max_length)["kept"]
    count_seconds = time.time() - start
    rows = []
    for multiple in map(int, FLAGS.multiples):
        dataset = data.make_dataset(train, source, target, batch_size=FLAGS.batch_size,
                                    max_length=FLAGS.max_length, bucketing="paper",
                                    pad_to_multiple=multiple if multiple > 1 else None)
        shapes, batches, real, cells = set(), 0, 0, 0
        for (source_ids, _), target_out in dataset:
            shapes.add((*source_ids.shape, target_out.shape[1]))
            batches += 1
            real += int(tf.math.count_nonzero(target_out))
            cells += int(tf.size(target_out))
        rows.append({"pad_to_multiple": multiple, "batches": batches,
                     "cardinality": int(dataset.cardinality()), "shapes": len(shapes),
                     "shapes_full_batches": len({s for s in shapes if s[0] == FLAGS.batch_size}),
                     "target_padding": round(1 - real / cells, 3)})
    print(f"\nBible train, {pairs:,} pairs of at most {FLAGS.max_length} tokens, batch "
          f"{FLAGS.batch_size}, paper bucketing (counting them: {count_seconds:.1f} s)\n")
    print("pad_to_multiple  batches  cardinality  shapes  (full batches)  target padding")
    for row in rows:
        print(f"{row['pad_to_multiple']:>15}  {row['batches']:>7}  {row['cardinality']:>11}  "
              f"{row['shapes']:>6}  {row['shapes_full_batches']:>14}  {row['target_padding']:>14.1%}")
    result = {"corpus": "bible-en-es/train", "pairs": pairs, "batch_size": FLAGS.batch_size,
              "max_length": FLAGS.max_length, "tokenizer": FLAGS.tokenizer,
              "vocabulary_sizes": [source.vocabulary_size, target.vocabulary_size],
              "count_pairs_seconds": round(count_seconds, 2), "rows": rows}
    _machines.write_json(FLAGS.output, result)


if __name__ == "__main__":
    app.run(main)
