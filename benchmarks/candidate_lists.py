"""Candidate-list decoding against the full softmax, side by side on one trained model.

What is timed is `Translator.translate` (XLA, the defaults) on the Bible test split at batch 64,
once with the full softmax and once with ``candidates`` (`bahdanau_tf.lexicon.CandidateLists`:
the ``--frequent`` most frequent target tokens plus the ``--per_word`` best translations of each
source token in the model directory's ``lexicon.tsv``). The two Translators share the model;
each first translates the sentences once untimed (tracing, XLA compilations), then the two
alternate for ``--rounds`` timed rounds and the best of each is kept (the machine is shared),
so the ratio comes from one run. Also reported: the share of identical translations, each
one's cased BLEU against the references (sacrebleu), the mean candidate-list size of a chunk,
each variant's mean output length (target tokens) and hypothesis-steps per sentence (every row
of every search step, counted in an untimed pass by `_machines.CountingModel`: a list that
changes the outputs can change how long the search runs), and
a step's pieces at ``--step_rows`` rows (80: 16 slots x beam 5), each timed alone under XLA in a
``tf.while_loop``: the network step up to the maxout (``features``), the [rows, V] projection,
and the log-normaliser + ``top_k`` over V; the same over the mean candidate list.

    python benchmarks/candidate_lists.py --model_dir=RUN [--beam_size=5] [--sentences=0]
        [--frequent=2000] [--per_word=10] [--rounds=3]
"""

import dataclasses
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machines  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A trained model directory with a lexicon.tsv.", required=True)
flags.DEFINE_integer("beam_size", 5, "Beam size.")
flags.DEFINE_integer("batch_size", 64, "Sentences per translate call.")
flags.DEFINE_integer("sentences", 0, "Test verses (0: the whole test split).")
flags.DEFINE_integer("frequent", 2000, "Candidate lists: the most frequent target tokens.")
flags.DEFINE_integer("per_word", 10, "Candidate lists: lexicon translations per source token.")
flags.DEFINE_integer("rounds", 3, "Timed rounds per variant (best kept).")
flags.DEFINE_integer("step_rows", 80, "Rows of the timed step pieces (80: 16 slots x beam 5; "
                     "translate runs 32 slots for beam 5).")
flags.DEFINE_string("output", os.path.join(os.path.dirname(__file__), "results", "candidate_lists.json"),
                    "JSON output path.")


def _time_loop(body, initial, steps=40, rounds=7):
    """Best ms per iteration of ``body`` in an XLA-compiled ``tf.while_loop``."""
    import tensorflow as tf

    loop = tf.function(lambda x: tf.while_loop(lambda i, x: i < steps, lambda i, x: (i + 1, body(x)),
                                               (0, x))[1], jit_compile=True)
    loop(initial)  # compile
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        loop(initial).numpy()
        best = min(best, time.perf_counter() - started)
    return 1000 * best / steps


def _step_pieces(model, candidate_size):
    """ms per step of a decoder step's pieces at ``FLAGS.step_rows`` rows (see the docstring)."""
    import tensorflow as tf

    from bahdanau_tf import decoding

    rows, beam = FLAGS.step_rows, FLAGS.beam_size
    source = tf.fill([rows // beam, 36], 5)
    memory = model.encode(source)
    state = tf.repeat(model.initial_state(memory), beam, axis=0)
    memory = model.decoding_memory(memory)  # what the search hands decode_step
    kernel, bias = (tf.convert_to_tensor(v) for v in model.output_projection())
    ids = tf.fill([rows], 5)
    one_column = (kernel[:, :1], bias[:1])

    def features(s):  # the step up to the maxout units: decode_step onto one vocabulary column
        logits, s, _ = model.decode_step(ids, s, memory, projection=one_column)
        return s + 0.0 * tf.reduce_sum(logits)

    maxout = tf.random.normal([rows, kernel.shape[0]])
    pieces = {"network_to_maxout_ms": _time_loop(features, state)}
    for label, size in (("full", kernel.shape[1]), ("candidates", candidate_size)):
        k, b = kernel[:, :size], bias[:size]
        logits = tf.random.normal([rows, size])
        pieces[f"projection_{label}_ms"] = _time_loop(lambda t: t + 1e-6 * tf.reduce_sum(tf.matmul(t, k) + b), maxout)
        pieces[f"normaliser_top_k_{label}_ms"] = _time_loop(
            lambda x: x + 1e-6 * tf.reduce_sum(decoding.top_k(x, beam)[0]) + 1e-6 * tf.reduce_logsumexp(x),
            logits)
    return pieces


def _timed_translations(variants, sources):
    """Each variant's translations (the first, warm-up call), its warm-up seconds, and its best
    seconds over ``--rounds`` more calls."""
    outputs, warmup, best = {}, {}, {name: float("inf") for name in variants}
    for name, translator in variants.items():
        started = time.perf_counter()
        outputs[name] = translator.translate(sources, batch_size=FLAGS.batch_size).translations
        warmup[name] = time.perf_counter() - started
    for _ in range(FLAGS.rounds):
        for name, translator in variants.items():
            started = time.perf_counter()
            translator.translate(sources, batch_size=FLAGS.batch_size)
            best[name] = min(best[name], time.perf_counter() - started)
    return outputs, warmup, best


def _padded_list_sizes(listed, sources):
    """The candidate-list length of each batch's chunk (sorted by length, as translate cuts them)."""
    import numpy as np

    order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))
    sizes = []
    for start in range(0, len(order), FLAGS.batch_size):
        chunk = np.asarray([sources[i] for i in order[start:start + FLAGS.batch_size]], object)
        ids, _ = listed.text_graph.source_ids(chunk)
        sizes.append(int(listed._candidate_size(ids.numpy())))
    return sizes


def _hypothesis_steps(full, candidates, search, sources):
    """Decoder steps per sentence (hypotheses x steps) with the full softmax and with the lists."""
    from bahdanau_tf.translator import Translator

    counting = _machines.CountingModel(full.models[0])
    steps = {}
    for name, extra in (("full_softmax", {}), ("candidate_lists", {"candidates": candidates})):
        counter = Translator(counting, full.source_tokenizer, full.target_tokenizer, search=search, **extra)
        counting.counter.assign(0)
        counter.translate(sources, batch_size=FLAGS.batch_size)
        steps[name] = int(counting.counter.numpy()) / len(sources)
    return steps


def _print(record):
    print(f"{'variant':<18}{'sentences/s':>14}{'BLEU':>8}{'output tokens':>15}{'hypothesis-steps':>18}")
    for name in record["bleu"]:
        print(f"{name:<18}{record['sentences_per_second'][name]:>14.1f}{record['bleu'][name]:>8.2f}"
              f"{record['mean_output_tokens'][name]:>15.1f}{record['hypothesis_steps_per_sentence'][name]:>18.1f}")
    print(f"speedup {record['speedup']:.2f}x, identical {100 * record['identical_share']:.1f}%, "
          f"target vocabulary {record['target_vocabulary']:,}, mean padded list "
          f"{record['mean_padded_candidate_list']:.0f}")
    for name, value in record["step_pieces"].items():
        print(f"  {name:<32}{value:8.3f}")


def main(argv):
    del argv
    import numpy as np
    import sacrebleu
    import tensorflow as tf

    from bahdanau_tf import corpora, devices, lexicon, model_directory
    from bahdanau_tf.translator import DEFAULT_SEARCH, Translator

    pairs = corpora.load_corpus(split="test").pairs()
    if FLAGS.sentences:
        pairs = pairs[: FLAGS.sentences]
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    built = model_directory.read_lexicon(FLAGS.model_dir)
    if built is None:
        raise SystemExit(f"{FLAGS.model_dir} has no lexicon.tsv (bahdanau-train writes it)")
    candidates = lexicon.CandidateLists(built, frequent=FLAGS.frequent, per_word=FLAGS.per_word)
    search = dataclasses.replace(DEFAULT_SEARCH, beam_size=FLAGS.beam_size)
    full = Translator.from_directory(FLAGS.model_dir, search=search)
    listed = Translator(full.models, full.source_tokenizer, full.target_tokenizer, search=search,
                        candidates=candidates)
    outputs, warmup, best = _timed_translations({"full_softmax": full, "candidate_lists": listed}, sources)
    sizes = _padded_list_sizes(listed, sources)
    record = {
        "machine": devices.benchmark_record(),
        "model_dir": os.path.abspath(FLAGS.model_dir),
        "target_vocabulary": full.target_tokenizer.vocabulary_size,
        "sentences": len(sources), "beam_size": FLAGS.beam_size, "batch_size": FLAGS.batch_size,
        "frequent": FLAGS.frequent, "per_word": FLAGS.per_word,
        "mean_padded_candidate_list": float(np.mean(sizes)),
        "warmup_s": warmup,
        "sentences_per_second": {name: len(sources) / seconds for name, seconds in best.items()},
        "speedup": best["full_softmax"] / best["candidate_lists"],
        "identical_share": float(np.mean([a == b for a, b in zip(outputs["full_softmax"], outputs["candidate_lists"])])),
        "bleu": {name: sacrebleu.corpus_bleu(out, [references]).score for name, out in outputs.items()},
        "mean_output_tokens": {name: float(np.mean(full.target_tokenizer.tokenize(tf.constant(out)).row_lengths()))
                               for name, out in outputs.items()},
        "hypothesis_steps_per_sentence": _hypothesis_steps(full, candidates, search, sources),
        "step_pieces_at_rows": FLAGS.step_rows,
        "step_pieces": _step_pieces(full.models[0], int(np.mean(sizes))),
    }
    _print(record)
    _machines.write_json(FLAGS.output, record)


if __name__ == "__main__":
    app.run(main)
