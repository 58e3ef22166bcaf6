"""Word alignment quality of the attention beside a statistical aligner, on the Bible's gold.

Not a timing. AER, precision and recall (Och & Ney 2003, sure and possible links apart;
`bahdanau_tf.alignment_scores` against `gold_links`) on the test verses with gold,
side by side, with each model's test BLEU; every row also in two views of the same links
(`bahdanau_tf.alignment.VIEWS`: punctuation links dropped, and content words only), the
full gold the headline:

- each model's teacher-forced attention on the references (for a model with an alignment
  head, `bahdanau_tf.alignment.AlignmentHead`, the head's rows: ``bahdanau-alignment-head``
  trained it on the model's own links or on eflomal's), turned into word links by the
  extraction rules of `bahdanau_tf.alignment.ExtractionRule` (a word's pieces pooled by
  max, sum or first piece, or each piece's argmax; rows shifted by zero, one or two; mutual best
  links or not; a target word left unaligned when its best weight is below a threshold), each
  chosen on the dev verses' gold: the default rule, the best rule without shift or mutual
  links, and the best of all; ``--model=NAME=DIR,DIR`` scores an ensemble (e.g. several heads
  on one model), its attention the members' mean (`Translator.reference_attention`);
- with ``--reverse=NAME=MODEL_DIR`` (a model of the other direction, es->en, for the model
  NAME): its attention alone, transposed, and both directions made one
  (`bahdanau_tf.alignment.bidirectional_links`: intersection, grow-diag-final-and, and the
  mean of the two word-level attention matrices), each with the rule chosen on dev;
- its attention while decoding its own translations (beam search as ``bahdanau-evaluate``),
  scored on the hypothesis words that occur once in hypothesis and reference
  (`bahdanau_tf.alignment.decoded_links`), with the dev-chosen rule;
- eflomal (the optional extra ``align``: ``pip install eflomal``), unsupervised on the text of all the
  corpus's pairs (no gold), forward, reverse, intersection and grow-diag-final-and;
- with ``--lexicon_baseline=NAME``, the Dice co-occurrence scores of the model NAME's
  ``lexicon.tsv`` (`bahdanau_tf.lexicon.Lexicon.pair_scores`) read as attention, by the same
  rules chosen on dev: an aligner with no translation model;
- the diagonal baseline (`bahdanau_tf.alignment.diagonal_links`).

    python benchmarks/alignment.py --model=en-es=MODEL_DIR --reverse=en-es=ES_EN_MODEL_DIR
        [--sentences=N] [--noeflomal] [--nobleu] [--output=benchmarks/results/alignment_<cpu>.json]
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
flags.DEFINE_multi_string("model", [], "NAME=MODEL_DIR of a trained model (repeatable); "
                          "NAME=DIR,DIR,...: an ensemble of models over the same vocabularies "
                          "(e.g. alignment heads on one model), its attention the members' mean.")
flags.DEFINE_multi_string("reverse", [], "NAME=MODEL_DIR[,DIR...]: the other direction's model "
                          "(or ensemble) for the model NAME (target to source), for both "
                          "directions (repeatable).")
flags.DEFINE_integer("sentences", None, "Only the first N dev and test verses with gold.")
flags.DEFINE_bool("eflomal", True, "Score eflomal too (when installed).")
flags.DEFINE_bool("bleu", True, "Decode the test verses for BLEU and the decoding attention.")
flags.DEFINE_integer("beam_size", None, "Beam size of the decoded translations (default: "
                     "bahdanau-evaluate's).")
flags.DEFINE_list("thresholds", [f"{t / 20:g}" for t in range(0, 16)],
                  "Thresholds tried on dev for every pooling.")
flags.DEFINE_list("symmetrization_thresholds", ["0", "0.1", "0.2", "0.3", "0.4"],
                  "Thresholds tried on dev for the link symmetrisations.")
flags.DEFINE_list("shifts", ["0", "1", "2"], "Attention row shifts tried on dev.")
flags.DEFINE_string("lexicon_baseline", None, "NAME of a --model: the lexicon.tsv of its (first) "
                    "directory (`bahdanau_tf.lexicon`, the Dice co-occurrence of the training pairs' "
                    "tokens) read as attention and scored by the rules chosen on dev: a baseline "
                    "with no translation model.")
flags.DEFINE_string("cache_dir", None, "Keep each model's teacher-forced attention and "
                    "eflomal's links here (a rerun reads them back).")
flags.DEFINE_string("output", None, "JSON output (default: results/alignment_<cpu class>.json).")



def _gold(split, limit):
    """(corpus of the verses with gold, sure, possible) of a split."""
    from bahdanau_tf import alignment, corpora

    return alignment.dev_gold(corpora.load_corpus("bible-en-es", split=split), limit)


def _scores_row(name, predicted, split, **extra):
    """One row: AER, precision, recall on the full gold, and the AER of every other view."""
    from bahdanau_tf import alignment

    corpus, sure, possible = split
    scores = alignment.alignment_scores(predicted, sure, possible)
    views = {}
    for view in alignment.VIEWS[1:]:
        cut = [alignment.corpus_view(links, corpus.sources, corpus.targets, view)
               for links in (predicted, sure, possible)]
        views[view] = round(alignment.alignment_scores(*cut).aer, 4)
    return {"aligner": name, "aer": round(scores.aer, 4), "precision": round(scores.precision or 0, 4),
            "recall": round(scores.recall or 0, 4), "links": scores.num_predicted, "views": views,
            **extra}


def _grid():
    """The rules tried on dev (`bahdanau_tf.alignment.RuleGrid`: the library's own choice)."""
    from bahdanau_tf import alignment

    return alignment.RuleGrid(thresholds=tuple(map(float, FLAGS.thresholds)),
                              shifts=tuple(map(int, FLAGS.shifts)),
                              link_thresholds=tuple(map(float, FLAGS.symmetrization_thresholds)))


def _attention(translator, corpus, name, split, reverse=False):
    """The teacher-forced attention of a translator on a split (read back from --cache_dir)."""
    import pickle

    path = FLAGS.cache_dir and os.path.join(FLAGS.cache_dir, f"{name}-{split}-{len(corpus)}.pickle")
    if path and os.path.exists(path):
        with open(path, "rb") as handle:
            return pickle.load(handle)
    sources, targets = (corpus.targets, corpus.sources) if reverse else (corpus.sources, corpus.targets)
    attention = translator.reference_attention(sources, targets)
    if path:
        os.makedirs(FLAGS.cache_dir, exist_ok=True)
        with open(path, "wb") as handle:
            pickle.dump(attention, handle)
    return attention


def _one_direction_rows(name, dev_attention, test_attention, dev, test, transpose=False, what=None):
    """Rows of one model's attention (or ``what``: its alignment head): default rule, best
    plain rule, best rule; dev AERs (`bahdanau_tf.alignment.dev_choice`, the library's choice)."""
    from bahdanau_tf import alignment
    from bahdanau_tf.alignment.dev_choice import best_rule

    rules = _grid().rules()
    dev_aer = alignment.dev_aers(alignment.links_of_rules(dev_attention, rules, transpose), *dev[1:])
    picks = {"default": str(alignment.DEFAULT_RULE),
             "best without shift or mutual": best_rule(dev_aer, lambda r: "+" not in r),
             "best with shift, without mutual": best_rule(dev_aer, lambda r: "+mutual" not in r
                                                          and "+shift" in r),
             "best": best_rule(dev_aer)}
    picks = {pick: rule for pick, rule in picks.items() if rule is not None}
    test_links = alignment.links_of_rules(test_attention, [alignment.ExtractionRule.parse(r)
                                                           for r in dict.fromkeys(picks.values())], transpose)
    rows = [_scores_row(f"{name}: {what or 'teacher-forced attention'}, rule {rule} ({pick})",
                        test_links[rule], test, stage=f"{what}, {pick}" if what else pick, rule=rule,
                        dev_aer=dev_aer[rule])
            for pick, rule in picks.items()]
    return rows, dev_aer, picks["best"]


def _lexicon_attention(model_dir, alignments):
    """The alignments with the lexicon.tsv of ``model_dir`` as their attention
    (`Lexicon.pair_scores` of their tokens; a token out of the vocabulary has no score)."""
    import numpy as np

    from bahdanau_tf import model_directory, text

    table = model_directory.read_lexicon(model_dir)  # there: `_check_lexicon_baseline`
    ids = [{token: i for i, token in enumerate(text.load_tokenizer(
        os.path.join(model_dir, name)).vocabulary)} for name in (model_directory.SOURCE_VOCABULARY,
                                                                  model_directory.TARGET_VOCABULARY)]
    return [dataclasses.replace(a, attention=table.pair_scores(
        np.array([ids[0].get(t, -1) for t in a.source_tokens], np.int64),
        [ids[1].get(t, -1) for t in a.target_tokens])) for a in alignments]


def _both_direction_rows(name, forward, reverse, dev, test):
    """Rows of the two directions made one, each method's rule chosen on dev (both directions
    extracted by the same rule; --symmetrization_thresholds, no mutual links, for the link
    methods: symmetrisation is slow)."""
    from bahdanau_tf import alignment
    from bahdanau_tf.alignment.dev_choice import best_rule

    grid = _grid()
    link_rules = [r for r in grid.rules() if not r.mutual and r.threshold in grid.link_thresholds]
    dev_aers = {method: alignment.dev_aers(links, *dev[1:]) for method, links in
                alignment.both_direction_links(forward[0], reverse[0], link_rules, grid.rules()).items()}
    rows = []
    for method, dev_aer in dev_aers.items():
        rule = best_rule(dev_aer)
        chosen = [alignment.ExtractionRule.parse(rule)]
        links = alignment.both_direction_links(forward[1], reverse[1], chosen, chosen)
        rows.append(_scores_row(f"{name}: both directions, {method}, rule {rule}",
                                links[method][rule], test, stage=f"both directions, {method}",
                                rule=rule, dev_aer=dev_aer[rule]))
    return rows, dev_aers


def _decoded_rows(name, translator, test, rule):
    """Test BLEU, and the attention while decoding scored on the words shared with the
    reference (no views: hypothesis words)."""
    from bahdanau_tf import alignment, evaluation

    test_corpus, sure, possible = test
    decoded = evaluation.evaluate_translator(translator, test_corpus, name=name, no_unk="off")
    predicted, hyp_sure, hyp_possible = alignment.decoded_links(
        decoded.alignments, test_corpus.targets, sure, possible, rule=rule)
    scores = alignment.alignment_scores(predicted, hyp_sure, hyp_possible)
    row = {"aligner": f"{name}: attention while decoding (beam {translator.beam_size}), rule "
           f"{rule}, shared words", "aer": round(scores.aer, 4),
           "precision": round(scores.precision or 0, 4), "recall": round(scores.recall or 0, 4),
           "links": scores.num_predicted, "rule": rule, "stage": "while decoding"}
    bleu = decoded.report.bleu
    return row, round(float(getattr(bleu, "score", bleu)), 2)


def _translator(model_dirs):
    """The Translator of ``DIR[,DIR...]`` (several: an ensemble, `Translator.from_directory`)."""
    from bahdanau_tf.translator import DEFAULT_SEARCH, Translator

    search = dataclasses.replace(DEFAULT_SEARCH, beam_size=FLAGS.beam_size or DEFAULT_SEARCH.beam_size)
    return Translator.from_directory(model_dirs.split(","), search=search)


def _model_rows(name, model_dir, reverse_dir, dev, test):
    """The rows of one model (and of both directions with its reverse model)."""
    started = time.time()
    translator = _translator(model_dir)
    forward = [_attention(translator, split[0], name, label) for split, label in ((dev, "dev"), (test, "test"))]
    head = any(getattr(model, "head", None) is not None for model in translator.models)
    rows, dev_aer, best_rule = _one_direction_rows(name, *forward, dev, test,
                                                   what="alignment head" if head else None)
    record = {"dev_aer": dev_aer, "best_rule": best_rule, "alignment_head": head}
    if FLAGS.lexicon_baseline == name:
        lexicon = [_lexicon_attention(model_dir.split(",")[0], split) for split in forward]
        lexicon_rows, record["lexicon_dev_aer"], _ = _one_direction_rows(
            name, *lexicon, dev, test, what="lexicon.tsv Dice scores (no translation model)")
        rows += lexicon_rows
    if reverse_dir:
        reverse_translator = _translator(reverse_dir)
        reverse = [_attention(reverse_translator, split[0], f"{name}-reverse", label, reverse=True)
                   for split, label in ((dev, "dev"), (test, "test"))]
        reverse_rows, record["reverse_dev_aer"], _ = _one_direction_rows(
            f"{name}, reverse model (transposed)", *reverse, dev, test, transpose=True)
        both_rows, record["both_directions_dev_aer"] = _both_direction_rows(name, forward, reverse, dev, test)
        rows += reverse_rows[-1:] + both_rows
        record["reverse_model_dir"] = reverse_dir
    if FLAGS.bleu:
        decoded_row, bleu = _decoded_rows(name, translator, test, best_rule)
        rows.append(decoded_row)
        for row in rows:
            row["test_bleu"] = bleu
    for row in rows:
        row["model"] = name
    record["seconds"] = round(time.time() - started, 1)
    return rows, record


def _eflomal_rows(test, indices):
    """eflomal on the text of every pair of the corpus; the test verses' links scored."""
    from bahdanau_tf import alignment, corpora

    splits = {split: corpora.load_corpus("bible-en-es", split=split) for split in ("train", "dev", "test")}
    sources = [s for c in splits.values() for s in c.sources]
    targets = [t for c in splits.values() for t in c.targets]
    offset = len(splits["train"]) + len(splits["dev"])
    started = time.time()
    paths = FLAGS.cache_dir and [os.path.join(FLAGS.cache_dir, f"eflomal-{d}-{len(sources)}.txt")
                                 for d in ("forward", "reverse")]
    cached = bool(paths) and all(os.path.exists(path) for path in paths)
    if cached:  # computed by an earlier run
        forward, reverse = map(alignment.read_pharaoh, paths)
    else:
        forward, reverse = alignment.eflomal_align(sources, targets)
        for path, links in zip(paths or (), (forward, reverse)):
            os.makedirs(FLAGS.cache_dir, exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.writelines(alignment.format_pharaoh(s) + "\n" for s in links)
    forward = [forward[offset + i] for i in indices]
    reverse = [reverse[offset + i] for i in indices]
    rows = [_scores_row("eflomal forward", forward, test, stage="eflomal"),
            _scores_row("eflomal reverse", reverse, test, stage="eflomal")]
    for method in alignment.dev_choice.LINK_METHODS:
        links = [alignment.symmetrize(f, r, method) for f, r in zip(forward, reverse)]
        rows.append(_scores_row(f"eflomal {method}", links, test, stage="eflomal"))
    return rows, {"seconds": round(time.time() - started, 1), "pairs_aligned": len(sources),
                  "links_from_cache": cached}


def _print_table(rows):
    views = " | ".join(f"AER {view}" for view in ("no-punctuation", "content-words"))
    print(f"| aligner | test BLEU | AER | precision | recall | links | {views} |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        bleu = row.get("test_bleu", "")
        cut = " | ".join(f"{row['views'][v]:.3f}" if "views" in row else "" for v in
                         ("no-punctuation", "content-words"))
        print(f"| {row['aligner']} | {bleu} | {row['aer']:.3f} | {row['precision']:.3f} | "
              f"{row['recall']:.3f} | {row['links']:,} | {cut} |")


def _by_name(specs):
    """{NAME: DIRS} of ``NAME=DIRS`` flag values (--model, --reverse)."""
    return dict(spec.partition("=")[::2] for spec in specs)


def _check_lexicon_baseline():
    """Exits with one line (status 2) when --lexicon_baseline names no --model with a lexicon."""
    from bahdanau_tf import model_directory

    if FLAGS.lexicon_baseline is None:
        return
    dirs = _by_name(FLAGS.model).get(FLAGS.lexicon_baseline)
    if not dirs or not os.path.isfile(os.path.join(dirs.split(",")[0], model_directory.LEXICON)):
        print(f"--lexicon_baseline={FLAGS.lexicon_baseline}: no --model of that name whose directory "
              f"has a {model_directory.LEXICON}", file=sys.stderr)
        sys.exit(2)


def main(argv):
    del argv
    from bahdanau_tf import alignment, corpora, devices

    _check_lexicon_baseline()
    dev, test = _gold("dev", FLAGS.sentences), _gold("test", FLAGS.sentences)
    reverse = _by_name(FLAGS.reverse)
    rows, models = [], {}
    for spec in FLAGS.model:
        name, _, model_dir = spec.partition("=")
        model_rows, models[name] = _model_rows(name, model_dir, reverse.get(name), dev, test)
        models[name]["model_dir"] = model_dir
        rows.extend(model_rows)
    record = {"benchmark": "alignment", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "machine": devices.benchmark_record(), "test_verses_with_gold": len(test[1]),
              "dev_verses_with_gold": len(dev[1]), "models": models}
    if FLAGS.eflomal:
        try:
            full = corpora.load_corpus("bible-en-es", split="test")
            indices = alignment.gold_links(full.alignments, full.sure_alignments)[0][: len(test[1])]
            eflomal_rows, record["eflomal"] = _eflomal_rows(test, indices)
            rows.extend(eflomal_rows)
        except ImportError as error:
            print(f"eflomal left out: {error}")
    rows.append(_scores_row("diagonal baseline", alignment.diagonal_links(
        test[0].sources, test[0].targets), test, stage="baseline"))
    record["rows"] = rows
    _print_table(rows)
    machine = devices.detect()
    tag = getattr(machine, "cpu_class", None) or "cpu"
    output = FLAGS.output or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                          f"alignment_{tag}.json")
    _machines.write_json(output, record)


if __name__ == "__main__":
    app.run(main)
