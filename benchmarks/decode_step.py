"""What a decoder step costs, and how many hypothesis-steps batched decoding computes.

Two measurements (issue #27), each for the code this script belongs to ("new") and, with
``--old_checkout``, for another checkout ("old", e.g. main before the change, checked out with
``git worktree add --detach /tmp/old_main c7d1387``), each code in its own process:

* ``step``: ms per step of `decode_step` alone in a ``tf.while_loop`` (the next ids are the
  argmax of the logits) and of the same steps inside `bahdanau_tf.decoding.beam_search`, at 80
  and 320 rows (16 and 64 sentences x beam 5) and 64 rows greedy, with XLA and without (the
  exported signature's path), over an untrained `small` preset with 5k vocabularies, a source
  width of 36 and 40 steps (an untrained model does not stop early). The network's speed is
  given as a % of a float32 matmul probe (2048^3) from the step's FLOP count; the search's
  share is search / network - 1, the median over interleaved rounds (the host may be shared).
* ``hypothesis_steps`` (with ``--model_dir``, a trained model): the hypotheses the step function
  computes (rows x steps, counted by a variable in a wrapped ``decode_step``; not part of the
  production code) while `Translator.translate` decodes ``--sentences`` test verses at batch
  64, over those the same verses need decoded one at a time, at beam 5 and greedy.

Prints a table and writes benchmarks/results/decode_step.json. One command:

    python benchmarks/decode_step.py --model_dir=/work/runs/readme12 --old_checkout=/tmp/old_main
"""

import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machines  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A trained model directory (for the hypothesis-steps).")
flags.DEFINE_string("old_checkout", None, "Another checkout measured side by side (its root).")
flags.DEFINE_list("parts", ["step", "hypothesis_steps"], "What to measure.")
flags.DEFINE_integer("sentences", 512, "Test verses for the hypothesis-steps.")
flags.DEFINE_integer("rounds", 9, "Interleaved rounds of the step timing.")
flags.DEFINE_integer("steps", 40, "Decoder steps per timed loop.")
flags.DEFINE_integer("width", 36, "Source width (tokens + [END]) of the step timing.")
flags.DEFINE_integer("vocabulary_size", 5000, "Vocabulary of the untrained preset.")
flags.DEFINE_bool("child", False, "Internal: measure in this process.")
flags.DEFINE_string("output", os.path.join(os.path.dirname(__file__), "results", "decode_step.json"),
                    "JSON output path.")

# (rows, beam): translate's 16 sentences x beam 5, a batch of 64 x beam 5, greedy at 64
SHAPES = ((80, 5), (320, 5), (64, 1))


def step_flops(config, width):
    """FLOPs of one RNNsearch decoder step per hypothesis (multiply-adds count 2)."""
    m, n, a, l, v = (config[k] for k in ("embedding_dim", "hidden_dim", "attention_dim", "maxout_dim",
                                         "target_vocabulary_size"))
    return 2 * (m * 3 * n  # W, W_z, W_r E y
                + n * a  # W_a s
                + width * a * 1.5  # tanh(. + U_a h_j) and v_a (counted as 1.5 multiply-adds)
                + width * 2 * n  # c = sum_j alpha_j h_j
                + n * 3 * n + 2 * n * 3 * n  # U [r s], U_z, U_r s; C, C_z, C_r c
                + (n + m + 2 * n) * 2 * l  # U_o s, V_o E y, C_o c
                + l * v)  # W_o t


def _step_times():
    import numpy as np
    import tensorflow as tf

    from bahdanau_tf import decoding
    from bahdanau_tf.models import RNNSearch

    tf.keras.utils.set_random_seed(0)
    model = RNNSearch.from_preset("small", source_vocabulary_size=FLAGS.vocabulary_size,
                                  target_vocabulary_size=FLAGS.vocabulary_size)
    model.build()
    flops = step_flops(model.get_config(), FLAGS.width)
    probe = _machines.matmul_gflops()
    steps = FLAGS.steps
    programs = {}
    for rows, beam in SHAPES:
        sentences = rows // beam
        rng = np.random.default_rng(rows)
        source = rng.integers(4, FLAGS.vocabulary_size, size=(sentences, FLAGS.width)).astype(np.int32)
        source[:, -1] = 2  # [END]
        for jit in (True, False):
            def network(source_ids, beam=beam):
                encoded = model.encode(source_ids)
                memory = decoding.tile_beams(encoded, beam)
                state = decoding.tile_beams(model.initial_state(encoded), beam)

                def body(i, ids, state):
                    logits, state, _ = model.decode_step(ids, state, memory)
                    return i + 1, tf.argmax(logits, axis=-1, output_type=tf.int32), state

                return tf.while_loop(lambda i, *unused: i < steps, body,
                                     (0, tf.fill([tf.shape(state)[0]], 1), state))[1]

            def search(source_ids, beam=beam):
                memory = model.encode(source_ids)
                tiled = decoding.tile_beams(memory, beam)
                out = decoding.beam_search(lambda ids, step, state: model.decode_step(ids, state, tiled),
                                           model.initial_state(memory), tf.shape(source_ids)[0],
                                           beam_size=beam, max_length=steps, buffer_length=steps)
                return out.ids

            def encoder_only(source_ids):
                return model.initial_state(model.encode(source_ids))

            for name, function in (("network", network), ("search", search), ("encoder", encoder_only)):
                compiled = tf.function(function, jit_compile=jit)
                compiled(tf.constant(source)).numpy()  # trace and compile
                programs[(rows, beam, jit, name)] = (compiled, tf.constant(source))
    times = {key: [] for key in programs}
    for _ in range(FLAGS.rounds):  # interleaved: every program sees the same noise
        for key, (compiled, source) in programs.items():
            start = time.perf_counter()
            compiled(source).numpy()
            times[key].append(time.perf_counter() - start)
    results = []
    for rows, beam in SHAPES:
        for jit in (True, False):
            encoder = times[(rows, beam, jit, "encoder")]
            network = [t - e for t, e in zip(times[(rows, beam, jit, "network")], encoder)]
            search = [t - e for t, e in zip(times[(rows, beam, jit, "search")], encoder)]
            best_network = min(network) / steps
            results.append(dict(
                rows=rows, beam=beam, xla=jit,
                network_ms=round(1000 * best_network, 2),
                search_ms=round(1000 * min(search) / steps, 2),
                network_pct_of_probe=round(100 * flops * rows / best_network / (probe * 1e9), 1),
                search_share_pct=round(100 * statistics.median(s / n - 1 for s, n in zip(search, network)), 1)))
    return dict(probe_gflops=round(probe, 1), step_mflop_per_row=round(flops / 1e6, 2), rows=results)


def _hypothesis_steps():
    import tensorflow as tf

    from bahdanau_tf.data import load_corpus
    from bahdanau_tf.translator import Translator

    translator = Translator.from_directory(FLAGS.model_dir)
    model = translator.models[0]
    counter = tf.Variable(0, dtype=tf.int64, trainable=False)
    decode_step = model.decode_step

    def counted(ids, state, memory):
        counter.assign_add(tf.cast(tf.shape(ids)[0], tf.int64))
        return decode_step(ids, state, memory)

    object.__setattr__(model, "decode_step", counted)  # an instance attribute, outside Keras' tracking
    verses = load_corpus("bible-en-es", split="test").sources[:FLAGS.sentences]
    results = []
    for beam in (5, 1):
        counter.assign(0)
        batched = translator.translate(verses, beam_size=beam, batch_size=64)
        computed = int(counter.numpy())
        counter.assign(0)
        alone = [translator.translate([verse], beam_size=beam).translations[0] for verse in verses]
        needed = int(counter.numpy())
        tokens = int(translator.target_tokenizer.tokenize(batched.translations).row_lengths().numpy().sum())
        results.append(dict(beam=beam, sentences=len(verses), output_tokens=tokens + len(verses),
                            computed_at_64=computed, needed_one_at_a_time=needed,
                            ratio=round(computed / needed, 3),
                            same_as_alone=sum(a == b for a, b in zip(alone, batched.translations))))
    return results


def _table(results):
    lines = []
    if any("step" in r for r in results.values()):
        lines.append("code  rows  beam  xla    network ms  % of probe  search ms  search share (median)")
        for code, result in results.items():
            for row in result.get("step", {}).get("rows", []):
                lines.append(f"{code:<5} {row['rows']:<5} {row['beam']:<5} {str(row['xla']):<6} "
                             f"{row['network_ms']:<11} {row['network_pct_of_probe']:<11} "
                             f"{row['search_ms']:<10} {row['search_share_pct']:+.1f}%")
    if any("hypothesis_steps" in r for r in results.values()):
        lines.append("code  beam  sentences  computed at 64  needed one at a time  ratio  same as alone")
        for code, result in results.items():
            for row in result.get("hypothesis_steps", []):
                lines.append(f"{code:<5} {row['beam']:<5} {row['sentences']:<10} {row['computed_at_64']:<15} "
                             f"{row['needed_one_at_a_time']:<21} {row['ratio']:<6} {row['same_as_alone']}")
    return "\n".join(lines)


def main(argv):
    del argv
    if FLAGS.child:
        from bahdanau_tf import devices

        result = {"machine": devices.benchmark_record()}
        if "step" in FLAGS.parts:
            result["step"] = _step_times()
        if "hypothesis_steps" in FLAGS.parts and FLAGS.model_dir:
            result["hypothesis_steps"] = _hypothesis_steps()
        print(json.dumps(result), flush=True)
        return
    script = os.path.abspath(__file__)
    passed = ["--child", f"--parts={','.join(FLAGS.parts)}"] + [
        f"--{name}={getattr(FLAGS, name)}" for name in ("sentences", "rounds", "steps", "width", "vocabulary_size")]
    if FLAGS.model_dir:
        passed.append(f"--model_dir={FLAGS.model_dir}")
    codes = {"new": os.path.dirname(os.path.dirname(script))}
    if FLAGS.old_checkout:
        codes = {"old": os.path.abspath(FLAGS.old_checkout), **codes}
    results = {}
    for code, root in codes.items():
        results[code] = _machines.run_child(script, passed, "native", pythonpath=root)
        print(f"{code} ({root}): {json.dumps(results[code])}", flush=True)
    print(_table(results))
    os.makedirs(os.path.dirname(FLAGS.output) or ".", exist_ok=True)
    with open(FLAGS.output, "w") as handle:
        json.dump({"codes": codes, "results": results}, handle, indent=2)
        handle.write("\n")
    print(f"wrote {FLAGS.output}")


if __name__ == "__main__":
    app.run(main)
