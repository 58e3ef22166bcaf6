"""bahdanau-data: corpus statistics and vocabulary building.

Examples:

    bahdanau-data                                     # statistics of the embedded Bible
    bahdanau-data --vocabulary_dir=/tmp/vocab         # the vocabularies bahdanau-train learns
    bahdanau-train --vocabulary_dir=/tmp/vocab        # ... and trains with them
    bahdanau-data --vocabulary_dir=/tmp/vocab --tokenizer=word --vocabulary_size=30000
    bahdanau-data --source_file=train.en --target_file=train.es --vocabulary_dir=/tmp/v

With the embedded corpus, statistics are printed per split and vocabularies are built from
the train split; with the user's files (``--source_file/--target_file`` or ``--tsv``) there is
one split, "all". Vocabularies go to ``VOCABULARY_DIR/source`` and ``VOCABULARY_DIR/target``
(``bahdanau_tf.load_tokenizer`` reads them back), learned with the same recipe and defaults as
``bahdanau-train`` (`bahdanau_tf.text.build_tokenizers`).
"""

import json
import os

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from bahdanau_tf import data, text  # noqa: E402
from bahdanau_tf.cli import common  # noqa: E402
from bahdanau_tf.special_tokens import UNK_ID  # noqa: E402

FLAGS = flags.FLAGS
common.define_corpus_flags()
common.define_tokenizer_flags()
FLAGS["vocabulary_dir"].help = "Build vocabularies into DIR/source and DIR/target."
flags.DEFINE_boolean("json", False, "Print the statistics as JSON.")


def _length_summary(sentences):
    lengths = np.array([len(text.split_words(s)) for s in sentences] or [0])
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    return {
        "words": int(lengths.sum()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": int(lengths.max()),
    }


def corpus_statistics(corpus):
    """Pairs, words and length percentiles of one ParallelCorpus (both sides)."""
    source_lengths = [len(text.split_words(s)) for s in corpus.sources]
    target_lengths = [len(text.split_words(t)) for t in corpus.targets]
    within = lambda limit: float(np.mean(  # noqa: E731
        [a <= limit and b <= limit for a, b in zip(source_lengths, target_lengths)] or [0]))
    return {
        "pairs": len(corpus),
        "source": _length_summary(corpus.sources),
        "target": _length_summary(corpus.targets),
        "share_within_30": within(30),
        "share_within_50": within(50),
    }


def coverage(tokenizer, sentences):
    """Share of tokens and of sentences free of [UNK] under ``tokenizer``."""
    ids = tokenizer.tokenize(sentences)
    flat = ids.flat_values.numpy()
    rows = ids.to_list()
    return {
        "token_coverage": float(np.mean(flat != UNK_ID)) if flat.size else 1.0,
        "sentences_without_unk": float(np.mean([UNK_ID not in r for r in rows] or [1.0])),
    }


def _load_splits():
    if FLAGS.tsv or FLAGS.source_file or FLAGS.target_file:
        return {"all": common.corpus_from_flags()}
    return {split: common.corpus_from_flags(split) for split in ("train", "dev", "test")}


def main(argv):
    del argv
    splits = _load_splits()
    report = {name: corpus_statistics(corpus) for name, corpus in splits.items()}

    if FLAGS.vocabulary_dir:
        common.check_writable_dir(FLAGS.vocabulary_dir, "vocabulary_dir")
        training = splits.get("train", splits.get("all"))
        tokenizers = text.build_tokenizers(training, FLAGS.tokenizer, FLAGS.vocabulary_size,
                                           FLAGS.vocabulary_sentences or None)
        for side, tokenizer in zip(("source", "target"), tokenizers):
            directory = tokenizer.save(os.path.join(FLAGS.vocabulary_dir, side))
            report[f"{side}_vocabulary"] = {"directory": directory,
                                            "size": tokenizer.vocabulary_size}
            for name, corpus in splits.items():
                if name != "train":
                    sentences = corpus.sources if side == "source" else corpus.targets
                    report[f"{side}_vocabulary"][f"{name}_coverage"] = coverage(tokenizer, sentences)

    if FLAGS.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return
    for name, stats in report.items():
        if name.endswith("_vocabulary"):
            print(f"{name}: {stats['size']} tokens in {stats['directory']}")
            for key, value in stats.items():
                if key.endswith("_coverage"):
                    print(f"  {key}: tokens {value['token_coverage']:.2%}, "
                          f"sentences without [UNK] {value['sentences_without_unk']:.1%}")
            continue
        print(f"{name}: {stats['pairs']} pairs; "
              f"<=30 words both sides {stats['share_within_30']:.1%}, "
              f"<=50 {stats['share_within_50']:.1%}")
        for side in ("source", "target"):
            s = stats[side]
            print(f"  {side}: {s['words']} words; length p50 {s['p50']:.0f}, "
                  f"p90 {s['p90']:.0f}, p99 {s['p99']:.0f}, max {s['max']}")


run = common.runner(main, __doc__)


if __name__ == "__main__":
    run()
