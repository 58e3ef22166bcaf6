"""How much of the references a candidate list holds: per sentence and per group of sentences.

Not a timing: for each setting of `bahdanau_tf.lexicon.CandidateLists` (``frequent`` most
frequent target tokens plus the lexicon's ``per_word`` best translations of each source token),
the mean size of the list built for one test verse and for each group of ``--group`` verses (a
translate chunk's slots), and its *recall*: the share of the verses' reference target tokens
(their tokenizer's ids, [END] left out) that the list holds. A token outside the list cannot be
generated, so recall bounds what a restricted search can reproduce. The lists are those of
`bahdanau_tf.lexicon.candidate_ids` (the same table), computed in NumPy. Prints a table and
writes JSON.

    python benchmarks/candidate_recall.py --model_dir=RUN [--sentences=1024] [--group=16]
        [--settings=2000:10,1000:10,500:10]
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machines  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A trained model directory with a lexicon.tsv.", required=True)
flags.DEFINE_integer("sentences", 1024, "Test verses (the first N).")
flags.DEFINE_integer("group", 16, "Verses per shared list (a chunk's slots).")
flags.DEFINE_list("settings", ["2000:10", "1000:10", "500:10"], "frequent:per_word pairs.")
flags.DEFINE_string("output", os.path.join(os.path.dirname(__file__), "results", "candidate_recall.json"),
                    "JSON output path.")


def _lists(table, frequent, sources):
    """The candidate set of each source (frequent ids plus the lexicon's rows of its tokens)."""
    common = set(range(frequent))
    return [common | set(table[np.asarray(ids, np.int64)].reshape(-1).tolist()) for ids in sources]


def main(argv):
    del argv
    from bahdanau_tf import lexicon, model_directory, text
    from bahdanau_tf.corpora import load_corpus

    table_lexicon = model_directory.read_lexicon(FLAGS.model_dir)
    if table_lexicon is None:
        raise SystemExit(f"candidate_recall: no lexicon.tsv in {FLAGS.model_dir!r}")
    source_tokenizer = text.load_tokenizer(os.path.join(FLAGS.model_dir, model_directory.SOURCE_VOCABULARY))
    target_tokenizer = text.load_tokenizer(os.path.join(FLAGS.model_dir, model_directory.TARGET_VOCABULARY))
    corpus = load_corpus(split="test")
    sources = source_tokenizer.tokenize(list(corpus.sources)[:FLAGS.sentences]).to_list()
    targets = target_tokenizer.tokenize(list(corpus.targets)[:FLAGS.sentences]).to_list()
    rows = []
    for setting in FLAGS.settings:
        frequent, per_word = (int(x) for x in setting.split(":"))
        table = lexicon.CandidateLists(table_lexicon, frequent=frequent, per_word=per_word).table
        own = _lists(table, frequent, sources)
        groups = [set().union(*own[start:start + FLAGS.group]) for start in range(0, len(own), FLAGS.group)]
        shared = [groups[index // FLAGS.group] for index in range(len(own))]
        recall = lambda lists: float(np.mean([np.mean([t in listed for t in ids])
                                              for listed, ids in zip(lists, targets) if ids]))
        rows.append({"frequent": frequent, "per_word": per_word,
                     "sentence_list": round(float(np.mean([len(s) for s in own])), 1),
                     "sentence_recall": round(recall(own), 4),
                     "group_list": round(float(np.mean([len(g) for g in groups])), 1),
                     "group_recall": round(recall(shared), 4)})
    print(f"\n{FLAGS.sentences} test verses, lexicon of {FLAGS.model_dir}; a group is {FLAGS.group} verses\n")
    print("| frequent + per_word | per-sentence list | its recall | per-group list | its recall |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['frequent']:,} + {row['per_word']} | {row['sentence_list']:,.0f} | "
              f"{row['sentence_recall']:.3f} | {row['group_list']:,.0f} | {row['group_recall']:.3f} |")
    _machines.write_json(FLAGS.output, {"benchmark": "candidate_recall", "model_dir": FLAGS.model_dir,
                                        "sentences": FLAGS.sentences, "group": FLAGS.group, "rows": rows})


if __name__ == "__main__":
    app.run(main)
