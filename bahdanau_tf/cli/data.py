"""bahdanau-data: corpus statistics and vocabulary building.

Examples:

    bahdanau-data                                     # statistics of the embedded Bible
    bahdanau-data --vocabulary_dir=/tmp/vocab --tokenizer=word --vocabulary_size=30000
    bahdanau-data --source_file=train.en --target_file=train.es --vocabulary_dir=/tmp/v \
        --tokenizer=subword --vocabulary_size=8000

With the embedded corpus, statistics are printed per split and vocabularies are built from
the train split; with the user's files (``--source_file/--target_file`` or ``--tsv``) there is
one split, "all". Vocabularies go to ``VOCABULARY_DIR/source`` and ``VOCABULARY_DIR/target``
(``bahdanau_tf.load_tokenizer`` reads them back).
"""

import json
import os

import numpy as np
from absl import app, flags

from bahdanau_tf import data, text
from bahdanau_tf.special_tokens import UNK_ID

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", "bible-en-es", "Embedded corpus name.")
flags.DEFINE_enum("direction", "en-es", list(data.DIRECTIONS), "Embedded corpus direction.")
flags.DEFINE_string("source_file", None, "Own data: source sentences, one a line.")
flags.DEFINE_string("target_file", None, "Own data: target sentences, one a line.")
flags.DEFINE_string("tsv", None, "Own data: a TSV file of source<TAB>target lines.")
flags.DEFINE_string("vocabulary_dir", None, "Build vocabularies into this directory.")
flags.DEFINE_enum("tokenizer", "word", ["word", "subword"], "Kind of vocabulary to build.")
flags.DEFINE_integer("vocabulary_size", None,
                     "Vocabulary size incl. special tokens (default 30000 word, 8000 subword).")
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
    if FLAGS.tsv:
        return {"all": data.load_tsv(FLAGS.tsv)}
    if FLAGS.source_file or FLAGS.target_file:
        if not (FLAGS.source_file and FLAGS.target_file):
            raise app.UsageError("--source_file and --target_file go together.")
        return {"all": data.load_parallel_files(FLAGS.source_file, FLAGS.target_file)}
    return {
        split: data.load_corpus(FLAGS.corpus, split=split, direction=FLAGS.direction)
        for split in ("train", "dev", "test")
    }


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    splits = _load_splits()
    report = {name: corpus_statistics(corpus) for name, corpus in splits.items()}

    if FLAGS.vocabulary_dir:
        training = splits.get("train", splits.get("all"))
        if FLAGS.tokenizer == "word":
            size = FLAGS.vocabulary_size or 30000
            build = lambda texts: text.WordTokenizer.build(texts, max_vocabulary_size=size)  # noqa: E731
        else:
            size = FLAGS.vocabulary_size or 8000
            build = lambda texts: text.SubwordTokenizer.build(texts, vocabulary_size=size)  # noqa: E731
        for side, texts in (("source", training.sources), ("target", training.targets)):
            tokenizer = build(texts)
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


def run():
    app.run(main)


if __name__ == "__main__":
    run()
