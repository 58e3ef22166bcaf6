"""bahdanau-data: corpus statistics and vocabulary building.

Examples:

    bahdanau-data                                     # statistics of the embedded Bible
    bahdanau-data --vocabulary_dir=/tmp/vocab         # the vocabularies bahdanau-train learns
    bahdanau-train --vocabulary_dir=/tmp/vocab        # ... and trains with them
    bahdanau-data --vocabulary_dir=/tmp/vocab --tokenizer=word --vocabulary_size=30000
    bahdanau-data --source_file=train.en --target_file=train.es --vocabulary_dir=/tmp/v
    bahdanau-data align --alignment_file=train.links  # eflomal word links of the train split
    bahdanau-train --guided_alignment=train.links     # ... the attention trained towards them

With the embedded corpus, statistics are printed per split and vocabularies are built from
the train split; with the user's files (``--source_file/--target_file`` or ``--tsv``) there is
one split, "all", streamed: read ``CHUNK_PAIRS`` pairs at a time (statistics from histograms of
the lengths, coverage from running counts), so memory does not grow with the files; a bad
line stops the command with its file and line number, and no vocabulary is left behind.
Vocabularies go to ``VOCABULARY_DIR/source`` and ``VOCABULARY_DIR/target``
(``bahdanau_tf.load_tokenizer`` reads them back), learned with the same recipe and defaults as
``bahdanau-train`` (`bahdanau_tf.text.build_tokenizers`).

``bahdanau-data align`` writes word alignments of the training pairs (the embedded corpus's
train split, or the user's files) for ``bahdanau-train --guided_alignment``: Pharaoh ``i-j``
links, one line per pair, from eflomal in both directions, symmetrized
(``--symmetrization``; `bahdanau_tf.alignment.pharaoh`). eflomal is the optional extra
``align`` (``pip install eflomal``); without it the command says so and exits with code 2. The test and dev
gold links are never read.
"""

import collections
import json
import os

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import flags  # noqa: E402

from bahdanau_tf import data, text  # noqa: E402
from bahdanau_tf.cli import common  # noqa: E402
from bahdanau_tf.special_tokens import UNK_ID  # noqa: E402

FLAGS = flags.FLAGS
common.define_corpus_flags()
common.define_tokenizer_flags()
FLAGS["vocabulary_dir"].help = "Build vocabularies into DIR/source and DIR/target."
flags.DEFINE_boolean("json", False, "Print the statistics as JSON.")
flags.DEFINE_string("alignment_file", None, "With `align`: where to write the links (default: stdout).")
flags.DEFINE_enum("symmetrization", "grow-diag-final-and",
                  ["grow-diag-final-and", "intersection", "union", "forward", "reverse"],
                  "With `align`: how eflomal's two directions are made one.")
COMMANDS = ("align",)


#: pairs read, counted and tokenized at a time from the user's files: memory bounded by one chunk
CHUNK_PAIRS = 10000


def _chunks(corpus):
    """The corpus as consecutive in-memory chunks: a stream (`bahdanau_tf.corpora.CorpusFiles`)
    read ``CHUNK_PAIRS`` at a time, an in-memory corpus whole."""
    return corpus.chunks(CHUNK_PAIRS) if hasattr(corpus, "chunks") else [corpus]


def _percentiles(histogram, percents):
    """``np.percentile``'s (linear) percentiles of the values counted in ``histogram``
    (value -> count), without the list of values."""
    values = sorted(histogram)
    ends = np.cumsum([histogram[v] for v in values])  # ends[i]: values[i] fills positions < ends[i]
    total = int(ends[-1])

    def at(position):  # the value at this position of the sorted list
        return values[int(np.searchsorted(ends, position, side="right"))]

    result = []
    for percent in percents:
        position = percent / 100 * (total - 1)
        low = int(np.floor(position))
        high = min(low + 1, total - 1)
        result.append(at(low) + (position - low) * (at(high) - at(low)))
    return result


def _length_summary(histogram):
    histogram = histogram or {0: 1}
    p50, p90, p99 = _percentiles(histogram, [50, 90, 99])
    return {
        "words": int(sum(length * count for length, count in histogram.items())),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": int(max(histogram)),
    }


def corpus_statistics(corpus):
    """Pairs, words and length percentiles of a corpus (both sides), in one pass over it: an
    in-memory `ParallelCorpus`, or a stream of the user's files read a chunk at a time."""
    pairs, within = 0, {30: 0, 50: 0}
    histograms = (collections.Counter(), collections.Counter())
    for chunk in _chunks(corpus):
        source_lengths = [len(text.split_words(s)) for s in chunk.sources]
        target_lengths = [len(text.split_words(t)) for t in chunk.targets]
        pairs += len(source_lengths)
        for histogram, lengths in zip(histograms, (source_lengths, target_lengths)):
            histogram.update(lengths)
        for limit in within:
            within[limit] += sum(a <= limit and b <= limit for a, b in zip(source_lengths, target_lengths))
    return {
        "pairs": pairs,
        "source": _length_summary(histograms[0]),
        "target": _length_summary(histograms[1]),
        "share_within_30": within[30] / pairs if pairs else 0.0,
        "share_within_50": within[50] / pairs if pairs else 0.0,
    }


def coverage(tokenizer, corpus, side):
    """Share of tokens and of sentences free of [UNK] under ``tokenizer``, over one side
    (``"source"`` or ``"target"``) of a corpus (in memory, or streamed a chunk at a time)."""
    tokens = known = sentences = clean = 0
    for chunk in _chunks(corpus):
        ids = tokenizer.tokenize(chunk.sources if side == "source" else chunk.targets)
        unknown_per_sentence = tf.reduce_sum(tf.cast(tf.equal(ids, UNK_ID), tf.int32), axis=1).numpy()
        tokens += int(tf.size(ids.flat_values))
        known += int(tf.size(ids.flat_values)) - int(unknown_per_sentence.sum())
        sentences += len(unknown_per_sentence)
        clean += int((unknown_per_sentence == 0).sum())
    return {
        "token_coverage": known / tokens if tokens else 1.0,
        "sentences_without_unk": clean / sentences if sentences else 1.0,
    }


def _load_splits():
    """The embedded corpus's splits in memory, or the user's files as one stream, "all"."""
    if FLAGS.tsv or FLAGS.source_file or FLAGS.target_file:
        return {"all": common.corpus_from_flags(stream=True)}
    return {split: common.corpus_from_flags(split) for split in ("train", "dev", "test")}


def align():
    """``bahdanau-data align``: eflomal links of the training pairs, one Pharaoh line each."""
    from bahdanau_tf import alignment, files

    try:
        import eflomal  # noqa: F401  (checked before the corpus is read)
    except ImportError:
        raise common.UserError(alignment.EFLOMAL_MISSING) from None
    if FLAGS.alignment_file is not None:
        common.check_writable_file(FLAGS.alignment_file, "alignment_file")
    user_files = FLAGS.tsv or FLAGS.source_file or FLAGS.target_file
    corpus = common.corpus_from_flags(stream=True) if user_files else common.corpus_from_flags("train")
    pairs = list(corpus.pairs())
    sources, targets = [p[0] for p in pairs], [p[1] for p in pairs]
    forward, reverse = alignment.eflomal_align(sources, targets)
    if FLAGS.symmetrization in ("forward", "reverse"):
        links = forward if FLAGS.symmetrization == "forward" else reverse
    else:
        links = [alignment.symmetrize(f, r, FLAGS.symmetrization) for f, r in zip(forward, reverse)]
    text_out = "".join(alignment.format_pharaoh(sentence) + "\n" for sentence in links)
    if not FLAGS.alignment_file:
        print(text_out, end="")
        return
    with files.OutputFiles() as outputs:
        with open(outputs.path(FLAGS.alignment_file), "w", encoding="utf-8") as handle:
            handle.write(text_out)


def _check_flags_of(command):
    """Refuses the flags that do nothing for ``command`` (``"align"`` or None: statistics)."""
    unused = (("vocabulary_dir", "json", "tokenizer", "vocabulary_size", "vocabulary_sentences")
              if command == "align" else ("alignment_file", "symmetrization"))
    given = [f"--{name}" for name in unused if FLAGS[name].present]
    if given:
        where = "with `align`" if command == "align" else "without `align` (bahdanau-data align ...)"
        raise common.UserError(f"{', '.join(given)} does nothing {where}: leave it out.")


def main(argv):
    command = argv[1] if len(argv) > 1 else None
    _check_flags_of(command)
    if command == "align":
        return align()
    if FLAGS.vocabulary_dir is not None:  # refused before the pass over the corpus, not after it
        common.check_writable_dir(FLAGS.vocabulary_dir, "vocabulary_dir")
    splits = _load_splits()
    report = {name: corpus_statistics(corpus) for name, corpus in splits.items()}  # a bad line stops here

    if FLAGS.vocabulary_dir:
        training = splits.get("train", splits.get("all"))
        tokenizers = text.build_tokenizers(training, FLAGS.tokenizer, FLAGS.vocabulary_size,
                                           FLAGS.vocabulary_sentences or None)
        for side, tokenizer in zip(("source", "target"), tokenizers):
            directory = tokenizer.save(os.path.join(FLAGS.vocabulary_dir, side))
            report[f"{side}_vocabulary"] = {"directory": directory,
                                            "size": tokenizer.vocabulary_size}
            for name, corpus in splits.items():
                if name != "train":
                    report[f"{side}_vocabulary"][f"{name}_coverage"] = coverage(tokenizer, corpus, side)

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


run = common.runner(main, __doc__, commands=COMMANDS)


if __name__ == "__main__":
    run()
