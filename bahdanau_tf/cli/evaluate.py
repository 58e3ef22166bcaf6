"""bahdanau-evaluate: the paper's evaluation of one or more trained models, side by side.

For every ``--model_dir`` (or one ensemble of them with ``--ensemble``), on the embedded
corpus's test split (default) or on ``--source_file``/``--reference_file``:

- BLEU and chrF of the beam-search translations (sacrebleu, 13a, lowercased; table 1 "All");
- No-UNK BLEU: the sentences with no unknown word in source or reference, decoded again with
  [UNK] forbidden (table 1 "No UNK"; ``--no_unk=reuse`` re-decodes only those whose ordinary
  translation has an [UNK], which halves the evaluation time but is not exact for beam > 1);
- BLEU by source length (figure 2): one ``bleu_by_length.png`` with every model on it;
- attention heatmaps of a few sentences (figure 3): ``attention_<model>_<i>.png``;
- alignment error rate (Och & Ney) against the corpus's gold Strong's alignments, of the
  attention the model puts on the *reference* when it reads it with teacher forcing
  (``alignment``), and of the attention of its own *decoded* translation (``decoded_alignment``),
  on the hypothesis words that match exactly one reference word (the gold link is carried
  over; other words have no gold and are not scored). Sentences without any gold link are
  left out of both. Omitted for models without attention (RNNencdec, Seq2Seq) and for files
  without gold alignments.

Everything goes to ``--output_dir``: ``report.json`` (one `EvaluationReport` per model plus
the decoded-output AER and timings), ``translations_<model>.txt`` and the PNGs.

Example:

    bahdanau-evaluate --model_dir=runs/rnnsearch --model_dir=runs/rnnencdec \\
        --output_dir=evaluation
"""

import json
import os
import re
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags, logging

from bahdanau_tf.cli import require_model_dirs

FLAGS = flags.FLAGS

flags.DEFINE_multi_string("model_dir", None, "Training output directory; repeat to compare models.")
flags.DEFINE_multi_string("name", None, "A display name per --model_dir (default: its basename).")
flags.DEFINE_bool("ensemble", False, "Evaluate all --model_dir as one ensemble.")
flags.DEFINE_string("output_dir", "evaluation", "Where to write report.json and the plots.")
flags.DEFINE_enum("checkpoint", "best", ["best", "latest"], "Which checkpoint to load.")
flags.DEFINE_string("corpus", "bible-en-es", "Embedded corpus (unless --source_file is given).")
flags.DEFINE_string("split", "test", "Split of the embedded corpus.")
flags.DEFINE_string("direction", None, "en-es or es-en; default: the model's training direction.")
flags.DEFINE_string("source_file", None, "Source sentences, one a line (with --reference_file).")
flags.DEFINE_string("reference_file", None, "Reference translations, one a line.")
flags.DEFINE_integer("max_sentences", None, "Evaluate only the first N sentences.")
flags.DEFINE_integer("beam_size", 5, "Beam size; 1 is greedy search.")
flags.DEFINE_float("length_penalty", 0.0, "GNMT length penalty alpha; 0 ranks by log p(y|x).")
flags.DEFINE_integer("batch_size", 64, "Sentences per graph call.")
flags.DEFINE_enum("no_unk", "decode", ["decode", "reuse", "off"],
                  "No-UNK BLEU: 'decode' decodes the no-UNK subset again with [UNK] forbidden "
                  "(exact); 'reuse' keeps the ordinary translations that have no [UNK] and "
                  "decodes again only the others (about half the time; a wider beam search could "
                  "differ); 'off' skips it.")
flags.DEFINE_integer("attention_plots", 3, "Heatmaps per model (the first sentences of at most "
                     "--attention_plot_max_words source words).")
flags.DEFINE_integer("attention_plot_max_words", 30, "Longest source sentence to plot.")


def _model_names(directories, names):
    if names and len(names) != len(directories):
        raise app.UsageError(f"{len(names)} --name for {len(directories)} --model_dir.")
    names = list(names or [os.path.basename(os.path.normpath(d)) or d for d in directories])
    seen = {}
    for i, name in enumerate(names):  # unique names: they become file names and plot labels
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            names[i] = f"{name}-{seen[name]}"
    return names


def _file_label(name):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _read_lines(path):
    with open(path, encoding="utf-8", errors="replace") as handle:
        lines = handle.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def load_test_set(direction):
    """(sources, references, gold alignments or None, description) from the flags."""
    if FLAGS.source_file or FLAGS.reference_file:
        if not (FLAGS.source_file and FLAGS.reference_file):
            raise app.UsageError("--source_file and --reference_file go together.")
        sources, references = _read_lines(FLAGS.source_file), _read_lines(FLAGS.reference_file)
        if len(sources) != len(references):
            raise app.UsageError(f"{len(sources)} source lines but {len(references)} references.")
        gold, description = None, f"{FLAGS.source_file} / {FLAGS.reference_file}"
    else:
        from bahdanau_tf.data import load_corpus

        corpus = load_corpus(FLAGS.corpus, split=FLAGS.split, direction=direction)
        sources, references, gold = corpus.sources, corpus.targets, corpus.alignments
        description = corpus.name
    if FLAGS.max_sentences is not None:
        sources, references = sources[: FLAGS.max_sentences], references[: FLAGS.max_sentences]
        gold = None if gold is None else gold[: FLAGS.max_sentences]
    if not sources:
        raise app.UsageError("No sentence to evaluate.")
    return sources, references, gold, f"{description} ({direction})"


def unknown_word_test(tokenizer, sentences):
    """``f(word) -> bool``: True for a word the tokenizer maps (partly) to [UNK].

    All distinct words of ``sentences`` are tokenized in one graph call, not one by one.
    """
    import tensorflow as tf

    from bahdanau_tf.special_tokens import UNK_ID
    from bahdanau_tf.text import split_words

    words = sorted({w for s in sentences for w in split_words(s)})
    unknown = set()
    if words:
        ids = tokenizer.tokenize(words)
        has_unk = tf.reduce_any(tf.equal(ids, UNK_ID), axis=1).numpy()
        unknown = {w for w, bad in zip(words, has_unk) if bad}
    return lambda word: word in unknown


def _word_ids(tokens):
    from bahdanau_tf.evaluation import token_word_ids

    return token_word_ids(tokens)


def reference_links(alignments):
    """Word links of teacher-forced attention (one per target token, its argmax source)."""
    from bahdanau_tf.evaluation import attention_to_alignment

    return [attention_to_alignment(a.attention, _word_ids(a.source_tokens),
                                   _word_ids(a.target_tokens)) for a in alignments]


def _token_words(tokens):
    """The words a token sequence spells (pieces joined, special tokens dropped)."""
    words = {}
    for token, word in zip(tokens, _word_ids(tokens)):
        if word is not None:
            words[word] = words.get(word, "") + (token[2:] if token.startswith("##") else token)
    return [words[w] for w in sorted(words)]


def decoded_links(alignments, references, gold):
    """(predicted, sure) links of decoded translations, on uniquely matched words.

    A hypothesis word that occurs exactly once in the hypothesis and exactly once in the
    reference inherits the reference word's gold links; only those words are scored.
    """
    from bahdanau_tf.evaluation import attention_to_alignment
    from bahdanau_tf.text import split_words

    predicted, sure = [], []
    for alignment, reference, links in zip(alignments, references, gold):
        hyp_words, ref_words = _token_words(alignment.target_tokens), split_words(reference)
        ref_index = {w: i for i, w in enumerate(ref_words) if ref_words.count(w) == 1}
        mapping = {i: ref_index[w] for i, w in enumerate(hyp_words)
                   if hyp_words.count(w) == 1 and w in ref_index}
        to_hyp = {r: h for h, r in mapping.items()}
        found = attention_to_alignment(alignment.attention, _word_ids(alignment.source_tokens),
                                       _word_ids(alignment.target_tokens))
        predicted.append({(s, t) for s, t in found if t in mapping})
        sure.append({(s, to_hyp[t]) for s, t in links if t in to_hyp})
    return predicted, sure


def evaluate_model(translator, name, sources, references, gold, settings):
    """Decodes, scores and plots one model; returns (EvaluationReport, extras dict)."""
    from bahdanau_tf import evaluation
    from bahdanau_tf.special_tokens import UNK_TOKEN

    timings = {}
    start = time.time()
    output = translator.translate(sources, return_alignments=translator.has_attention,
                                  batch_size=FLAGS.batch_size)
    hypotheses = output.translations
    timings["decode_seconds"] = time.time() - start
    logging.info("%s: %d sentences decoded in %.1f s", name, len(sources),
                 timings["decode_seconds"])

    no_unk_hypotheses, is_unknown = None, None
    if FLAGS.no_unk != "off":
        start = time.time()
        is_unknown = (unknown_word_test(translator.source_tokenizer, sources),
                      unknown_word_test(translator.target_tokenizer, references))
        from bahdanau_tf.text import split_words

        source_unknown, target_unknown = is_unknown
        keep = evaluation.no_unk_subset(sources, references, lambda s, r: any(
            map(source_unknown, split_words(s))) or any(map(target_unknown, split_words(r))))
        # only the No-UNK subset is scored: only it is decoded again
        no_unk_hypotheses = [""] * len(sources)
        if FLAGS.no_unk == "reuse":
            for i in keep:
                no_unk_hypotheses[i] = hypotheses[i]
            keep = [i for i in keep if UNK_TOKEN in hypotheses[i]]
        if keep:
            again = translator.translate([sources[i] for i in keep], forbid_unknown=True,
                                         batch_size=FLAGS.batch_size)
            for i, text in zip(keep, again.translations):
                no_unk_hypotheses[i] = text
        timings["no_unk_decode_seconds"] = time.time() - start
        timings["no_unk_sentences_decoded"] = len(keep)

    predicted = sure = None
    extras = {"timings": timings, "decoded_alignment": None}
    if translator.has_attention and gold is not None:
        start = time.time()
        scored = [i for i, links in enumerate(gold) if links]
        if scored:
            forced = translator.reference_attention([sources[i] for i in scored],
                                                    [references[i] for i in scored],
                                                    batch_size=FLAGS.batch_size)
            predicted, sure = reference_links(forced), [set(map(tuple, gold[i])) for i in scored]
            decoded_predicted, decoded_sure = decoded_links(
                [output.alignments[i] for i in scored], [references[i] for i in scored],
                [gold[i] for i in scored])
            if any(decoded_predicted) or any(decoded_sure):
                import dataclasses

                extras["decoded_alignment"] = dataclasses.asdict(
                    evaluation.alignment_scores(decoded_predicted, decoded_sure))
        timings["alignment_seconds"] = time.time() - start

    report = evaluation.evaluation_report(
        hypotheses, references, sources, model=name, no_unk_hypotheses=no_unk_hypotheses,
        is_unknown_word=is_unknown, predicted_alignments=predicted, sure_alignments=sure,
        settings=settings)

    plots = []
    if translator.has_attention and FLAGS.attention_plots > 0:
        from bahdanau_tf.text import split_words

        for i, source in enumerate(sources):
            if len(plots) >= FLAGS.attention_plots:
                break
            alignment = output.alignments[i]
            if not (0 < len(split_words(source)) <= FLAGS.attention_plot_max_words) or \
                    not alignment.target_tokens:
                continue
            path = os.path.join(FLAGS.output_dir, f"attention_{_file_label(name)}_{i}.png")
            evaluation.plot_attention(alignment.attention, alignment.source_tokens,
                                      alignment.target_tokens, path, title=f"{name}, sentence {i}")
            plots.append(os.path.basename(path))
    extras["attention_plots"] = plots
    with open(os.path.join(FLAGS.output_dir, f"translations_{_file_label(name)}.txt"), "w",
              encoding="utf-8") as handle:
        handle.writelines(h.replace("\n", " ") + "\n" for h in hypotheses)
    return report, extras


def main(argv):
    require_model_dirs(argv, FLAGS.model_dir)

    from bahdanau_tf import evaluation
    from bahdanau_tf.model_directory import read_model_config
    from bahdanau_tf.translator import Translator

    os.makedirs(FLAGS.output_dir, exist_ok=True)
    groups = [list(FLAGS.model_dir)] if FLAGS.ensemble else [[d] for d in FLAGS.model_dir]
    names = _model_names(FLAGS.model_dir, FLAGS.name)
    if FLAGS.ensemble:
        names = ["ensemble(" + ", ".join(names) + ")"]
    try:
        saved_settings = read_model_config(FLAGS.model_dir[0]).get("settings", {})
    except FileNotFoundError as error:
        raise app.UsageError(str(error))
    direction = FLAGS.direction or saved_settings.get("direction") or "en-es"
    sources, references, gold, test_set = load_test_set(direction)

    reports, models = [], []
    for group, name in zip(groups, names):
        try:
            translator = Translator.from_directory(
                group if len(group) > 1 else group[0], which=FLAGS.checkpoint,
                beam_size=FLAGS.beam_size, length_penalty=FLAGS.length_penalty)
        except (FileNotFoundError, ValueError) as error:
            raise app.UsageError(str(error))
        settings = {
            "model_dirs": group,
            "test_set": test_set,
            "beam_size": FLAGS.beam_size,
            "length_penalty": FLAGS.length_penalty,
            "max_source_length": translator.max_source_length,
            "checkpoint": FLAGS.checkpoint,
            "no_unk": FLAGS.no_unk,
        }
        report, extras = evaluate_model(translator, name, sources, references, gold, settings)
        reports.append(report)
        models.append({**report.to_dict(), **extras})
        print(f"{name}: {report.bleu}")
        if report.no_unk is not None and report.no_unk.bleu is not None:
            print(f"{name}: No-UNK ({report.no_unk.num_sentences} sentences) "
                  f"BLEU = {report.no_unk.bleu.score:.2f}")
        if report.alignment is not None:
            print(f"{name}: AER (teacher-forced attention on the references) = "
                  f"{report.alignment.aer:.3f}")

    evaluation.plot_bleu_by_length({r.model: r.bleu_by_length for r in reports},
                                   os.path.join(FLAGS.output_dir, "bleu_by_length.png"),
                                   title=f"BLEU by source length, {test_set}")
    path = os.path.join(FLAGS.output_dir, "report.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"test_set": test_set, "num_sentences": len(sources), "models": models},
                  handle, indent=2, ensure_ascii=False, allow_nan=False)
        handle.write("\n")
    print(f"Wrote {path}")


def run():
    app.run(main)


if __name__ == "__main__":
    run()
