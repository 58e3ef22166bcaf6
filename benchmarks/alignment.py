"""Word alignment quality of the attention beside a statistical aligner, on the Bible's gold.

Not a timing. AER, precision and recall (Och & Ney 2003, sure and possible links apart;
`bahdanau_tf.evaluation.alignment_scores` against `gold_links`) on the test verses with gold,
side by side, with each model's test BLEU:

- each model's teacher-forced attention on the references, turned into word links by the
  extraction rules of `bahdanau_tf.evaluation.ExtractionRule` (a word's pieces pooled by
  max, sum or first piece, or each piece's argmax; a target word left unaligned when its best
  weight is below a threshold, chosen on the dev verses' gold), and the rule chosen on dev;
- its attention while decoding its own translations (beam search as ``bahdanau-evaluate``),
  scored on the hypothesis words that occur once in hypothesis and reference
  (`bahdanau_tf.evaluation.decoded_links`), with the dev-chosen rule;
- eflomal (the optional extra ``bahdanau_tf[align]``), unsupervised on the text of all the
  corpus's pairs (no gold), forward, reverse, intersection and grow-diag-final-and;
- the diagonal baseline (`bahdanau_tf.evaluation.diagonal_links`).

    python benchmarks/alignment.py --model=unguided=/work/runs/base --model=guided=/work/runs/g
        [--sentences=N] [--no_eflomal] [--output=benchmarks/results/alignment_<cpu>.json]
"""

import dataclasses
import datetime
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machines  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_multi_string("model", [], "NAME=MODEL_DIR of a trained model (repeatable).")
flags.DEFINE_integer("sentences", None, "Only the first N dev and test verses with gold.")
flags.DEFINE_bool("eflomal", True, "Score eflomal too (when installed).")
flags.DEFINE_integer("beam_size", None, "Beam size of the decoded translations (default: "
                     "bahdanau-evaluate's).")
flags.DEFINE_list("thresholds", [f"{t / 20:g}" for t in range(0, 16)],
                  "Thresholds tried on dev for every pooling.")
flags.DEFINE_string("output", None, "JSON output (default: results/alignment_<cpu class>.json).")

POOLINGS = ("pieces", "max", "sum", "first")


def _gold(split, limit):
    """(corpus of the verses with gold, sure, possible) of a split."""
    from bahdanau_tf import corpora, evaluation

    corpus = corpora.load_corpus("bible-en-es", split=split)
    indices, sure, possible = evaluation.gold_links(corpus.alignments, corpus.sure_alignments)
    indices = indices[:limit] if limit else indices
    return corpus.select(indices), sure[: len(indices)], possible[: len(indices)]


def _scores_row(name, predicted, sure, possible, **extra):
    from bahdanau_tf import evaluation

    scores = evaluation.alignment_scores(predicted, sure, possible)
    return {"aligner": name, "aer": round(scores.aer, 4), "precision": round(scores.precision or 0, 4),
            "recall": round(scores.recall or 0, 4), "links": scores.num_predicted, **extra}


def _choose_rules(dev_attention, dev_sure, dev_possible):
    """Every pooling's best threshold on dev, and the best rule of all: {str(rule): dev AER}."""
    from bahdanau_tf import evaluation

    tried = {}
    for pooling in POOLINGS:
        for threshold in FLAGS.thresholds:
            rule = evaluation.ExtractionRule(pooling, float(threshold))
            links = evaluation.attention_links(dev_attention, rule)
            tried[str(rule)] = evaluation.alignment_scores(links, dev_sure, dev_possible).aer
    return tried


def _model_rows(name, model_dir, dev, test):
    """The rows of one model: its rules on the test gold, decoded attention, BLEU."""
    from bahdanau_tf import evaluation
    from bahdanau_tf.translator import DEFAULT_SEARCH, Translator

    (dev_corpus, dev_sure, dev_possible), (test_corpus, sure, possible) = dev, test
    search = dataclasses.replace(DEFAULT_SEARCH, beam_size=FLAGS.beam_size or DEFAULT_SEARCH.beam_size)
    translator = Translator.from_directory(model_dir, search=search)
    started = time.time()
    dev_attention = translator.reference_attention(dev_corpus.sources, dev_corpus.targets)
    tried = _choose_rules(dev_attention, dev_sure, dev_possible)
    test_attention = translator.reference_attention(test_corpus.sources, test_corpus.targets)
    rows = []
    chosen = {}
    for pooling in POOLINGS:
        best = min((r for r in tried if r.split(">")[0] == pooling), key=tried.get)
        chosen[pooling] = best
        for rule in dict.fromkeys([pooling, best]):
            rows.append(_scores_row(f"{name}: teacher-forced attention, rule {rule}",
                                    evaluation.attention_links(test_attention, rule), sure, possible,
                                    rule=rule, dev_aer=round(tried[rule], 4)))
    best_rule = min(tried, key=tried.get)
    decoded = evaluation.evaluate_translator(translator, test_corpus, name=name, no_unk="off")
    predicted, hyp_sure, hyp_possible = evaluation.decoded_links(
        decoded.alignments, test_corpus.targets, sure, possible, rule=best_rule)
    rows.append(_scores_row(f"{name}: attention while decoding (beam {translator.beam_size}), "
                            f"rule {best_rule}, shared words", predicted, hyp_sure, hyp_possible,
                            rule=best_rule))
    bleu = decoded.report.bleu
    for row in rows:
        row.update(model=name, test_bleu=round(float(getattr(bleu, "score", bleu)), 2))
    return rows, {"dev_aer": {r: round(a, 4) for r, a in tried.items()}, "chosen": chosen,
                  "best_rule": best_rule, "seconds": round(time.time() - started, 1)}


def _eflomal_rows(test_corpus, sure, possible, indices):
    """eflomal on the text of every pair of the corpus; the test verses' links scored."""
    from bahdanau_tf import corpora, word_alignment

    splits = {split: corpora.load_corpus("bible-en-es", split=split) for split in ("train", "dev", "test")}
    sources = [s for c in splits.values() for s in c.sources]
    targets = [t for c in splits.values() for t in c.targets]
    offset = len(splits["train"]) + len(splits["dev"])
    started = time.time()
    forward, reverse = word_alignment.eflomal_align(sources, targets)
    forward = [forward[offset + i] for i in indices]
    reverse = [reverse[offset + i] for i in indices]
    rows = [_scores_row("eflomal forward", forward, sure, possible),
            _scores_row("eflomal reverse", reverse, sure, possible)]
    for method in ("intersection", "grow-diag-final-and"):
        links = [word_alignment.symmetrize(f, r, method) for f, r in zip(forward, reverse)]
        rows.append(_scores_row(f"eflomal {method}", links, sure, possible))
    return rows, round(time.time() - started, 1), len(sources)


def _print_table(rows):
    print("| aligner | test BLEU | AER | precision | recall | links |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        bleu = row.get("test_bleu", "")
        print(f"| {row['aligner']} | {bleu} | {row['aer']:.3f} | {row['precision']:.3f} | "
              f"{row['recall']:.3f} | {row['links']:,} |")


def main(argv):
    del argv
    from bahdanau_tf import devices, evaluation

    dev, test = _gold("dev", FLAGS.sentences), _gold("test", FLAGS.sentences)
    test_corpus, sure, possible = test
    rows, models = [], {}
    for spec in FLAGS.model:
        name, _, model_dir = spec.partition("=")
        model_rows, models[name] = _model_rows(name, model_dir, dev, test)
        models[name]["model_dir"] = model_dir
        rows.extend(model_rows)
    record = {"benchmark": "alignment", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "machine": devices.benchmark_record(), "test_verses_with_gold": len(sure),
              "dev_verses_with_gold": len(dev[1]), "models": models}
    if FLAGS.eflomal:
        try:
            from bahdanau_tf import corpora

            full = corpora.load_corpus("bible-en-es", split="test")
            indices = evaluation.gold_links(full.alignments, full.sure_alignments)[0][: len(sure)]
            eflomal_rows, seconds, pairs = _eflomal_rows(test_corpus, sure, possible, indices)
            rows.extend(eflomal_rows)
            record["eflomal"] = {"seconds": seconds, "pairs_aligned": pairs}
        except ImportError as error:
            print(f"eflomal left out: {error}")
    rows.append(_scores_row("diagonal baseline", evaluation.diagonal_links(
        test_corpus.sources, test_corpus.targets), sure, possible))
    record["rows"] = rows
    _print_table(rows)
    machine = devices.detect()
    tag = getattr(machine, "cpu_class", None) or "cpu"
    output = FLAGS.output or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                          f"alignment_{tag}.json")
    _machines.write_json(output, record)


if __name__ == "__main__":
    app.run(main)
