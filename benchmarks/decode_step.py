"""Decode step cost: the network alone, the network inside the search, and wasted hypothesis-steps.

Two measurements:

1. **ms per step**, for the rows the search runs: 80 (16 slots x beam 5; `translate` runs 32,
   `devices.decoding_slots`), 320 (64 x beam 5) and 64
   (greedy), with XLA and without (the exported signatures' path):
   * ``network``: `decode_step` alone in a ``tf.while_loop`` (the next ids do not depend on the
     logits; the logits are carried by the loop, so nothing is pruned);
   * ``search``: the same step inside `bahdanau_tf.decoding.beam_search` (beam 5 or 1, length
     penalty 0.5, every hypothesis run to ``--steps``: [END] is made unreachable through its
     output bias, so both loops take exactly ``--steps`` steps);
   * ``search_share``: the search's own work, ``search / network - 1``, the median of the
     per-round ratios (the host is shared: rounds interleave every configuration);
   * ``network_pct_of_probe``: the network step's matmul FLOPs (counted from its graph) per
     second, as a % of a float32 2048^3 matmul probe timed in the same round.
   The model is an untrained ``--preset`` over ``--vocabulary_size`` words (the sizes are what
   matters), the source ``--source_width`` wide.

2. **hypothesis-steps** (with ``--model_dir``, a trained model): the rows the step function
   computes, summed over the steps, when `Translator.translate` decodes ``--sentences`` test
   verses at batch 64, over the same count when they are decoded one at a time (batch 1: no
   finished sentence or filler row keeps stepping). 1.0 is no waste.

With ``--old_checkout=DIR`` the search of DIR's ``bahdanau_tf/decoding.py`` is timed in the same
rounds too (``search_old``): old and new side by side, on one step function.

3. **Where the search's time goes** (``--profile``, XLA only): both loops run under the
   TensorFlow profiler with XLA:CPU's per-thunk trace events on; each compiled op (a fusion, a
   matmul, a ``TopK`` custom call, ...) gets its us per step in the search, in the network loop,
   and the difference, grouped by the op's name without XLA's numeric suffix (``MatMul_5.29``
   and ``MatMul_5.0`` are the same op of the step), largest difference first. XLA names a
   fusion after its ops, so a vocabulary-wide pass reads as e.g. ``add_pad_fusion`` (the
   padded, masked logits), ``bitcast_reduce_fusion`` (the block maxima),
   ``subtract_exponential_fusion`` + ``ynn_fusion`` (the log-normaliser's exp, then its sum)
   and ``custom-call`` (``TopK``). Timing is off in this mode (the trace events cost time).

    python benchmarks/decode_step.py [--rounds=7] [--steps=40] [--model_dir=RUN] [--jit=both]
        [--old_checkout=../main] [--profile]
"""

import collections
import dataclasses
import glob
import importlib.util
import inspect
import json
import os
import re
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if "--profile" in sys.argv:  # XLA:CPU reads its flags once, when TensorFlow first compiles
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_xprof_traceme=true").strip()

import numpy as np
import tensorflow as tf
from absl import app, flags

tf.get_logger().setLevel("ERROR")  # one tf.function per configuration: no retracing advice

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _machines  # noqa: E402
from bahdanau_tf import decoding, devices  # noqa: E402
from bahdanau_tf.special_tokens import END_ID  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "small", "Preset of the timed (untrained) model.")
flags.DEFINE_integer("vocabulary_size", 5000, "Source and target vocabulary of the timed model.")
flags.DEFINE_integer("source_width", 36, "Source tokens ([END] included) of the timed memory.")
flags.DEFINE_integer("steps", 40, "Decoder steps per timed call.")
flags.DEFINE_integer("rounds", 7, "Interleaved timed rounds.")
flags.DEFINE_enum("jit", "both", ["both", "xla", "graph"], "XLA, plain graphs, or both.")
flags.DEFINE_string("model_dir", None, "A trained model: also count hypothesis-steps.")
flags.DEFINE_string("old_checkout", None, "Another checkout (e.g. main): its decoding.py's search is "
                    "timed in the same rounds, side by side (search_old).")
flags.DEFINE_bool("time_steps", True, "Time the steps; False: only count hypothesis-steps.")
flags.DEFINE_integer("sentences", 512, "Test verses of the hypothesis-step count.")
flags.DEFINE_bool("profile", False, "Instead of timing, the search's extra us per step by compiled "
                  "op (XLA), against the network loop's (see the module docstring).")
flags.DEFINE_string("output", os.path.join(os.path.dirname(__file__), "results", "decode_step.json"),
                    "JSON output path.")

# (name, sentences, beam): the rows are sentences * beam
SHAPES = (("80 rows (16 x beam 5)", 16, 5), ("320 rows (64 x beam 5)", 64, 5), ("64 rows (greedy)", 64, 1),
          ("5 rows (1 x beam 5)", 1, 5))
PROBE = 2048


def _matmul_flops(function, *args):
    """FLOPs of the MatMul / BatchMatMul / Einsum ops of one traced call (static shapes)."""
    graph = function.get_concrete_function(*args).graph
    total = 0
    for op in graph.get_operations():
        if op.type in ("MatMul", "BatchMatMulV2", "BatchMatMulV3", "BatchMatMul"):
            a, b = (t.shape.as_list() for t in op.inputs[:2])
            transpose_a = op.get_attr("transpose_a" if op.type == "MatMul" else "adj_x")
            m, k = (a[-1], a[-2]) if transpose_a else (a[-2], a[-1])
            transpose_b = op.get_attr("transpose_b" if op.type == "MatMul" else "adj_y")
            n = b[-2] if transpose_b else b[-1]
            total += 2 * int(np.prod(a[:-2] or [1])) * m * k * n
        elif op.type == "Einsum":
            equation = op.get_attr("equation").decode()
            inputs, output = equation.split("->")
            sizes = {}
            for letters, tensor in zip(inputs.split(","), op.inputs):
                sizes.update(zip(letters, tensor.shape.as_list()))
            total += 2 * int(np.prod([sizes[c] for c in set(inputs.replace(",", ""))]))
    return total


def _timed_model():
    from bahdanau_tf.models import model_from_preset

    tf.keras.utils.set_random_seed(0)
    model = model_from_preset(FLAGS.preset, source_vocabulary_size=FLAGS.vocabulary_size,
                              target_vocabulary_size=FLAGS.vocabulary_size).build_variables()
    bias = model.readout.output_bias
    bias.assign(tf.tensor_scatter_nd_add(bias, [[END_ID]], [-1e4]))  # every hypothesis runs to the end
    return model


def _functions(model, sentences, beam, jit):
    """The network loop and the search over ``sentences * beam`` rows, with their inputs."""
    source = tf.random.stateless_uniform([sentences, FLAGS.source_width], [1, 2], minval=4,
                                         maxval=FLAGS.vocabulary_size, dtype=tf.int32)
    memory = model.encode(source)
    state = model.initial_state(memory)
    memory = model.decoding_memory(memory)  # what the Translator's search carries: the
    state = model.decoding_state(state) if jit else state  # query too under XLA only
    tiled_state = decoding.tile_beams(state, beam)
    steps, vocab = FLAGS.steps, FLAGS.vocabulary_size

    def network(memory, state):
        rows = tf.shape(tf.nest.flatten(state)[0])[0]
        logits = tf.zeros([rows, vocab], tf.float32)

        def body(i, ids, state, logits):
            logits, state, _ = model.decode_step(ids, state, memory)
            return i + 1, (ids * 7 + i) % vocab, state, tf.cast(logits, tf.float32)

        return tf.while_loop(lambda i, *unused: i < steps, body,
                             (0, tf.fill([rows], 1), state, logits))[3]

    def search_with(module):
        if hasattr(module, "BeamSearch"):  # the settings as values
            # Execution(jit_compile=...), named xla before the search was one loop
            fields = {field.name for field in dataclasses.fields(module.Execution)}
            compiled = {"jit_compile" if "jit_compile" in fields else "xla": jit}

            # the slots: an Execution field before they were beam_search's argument
            slots = {"slots": sentences}
            settings = dict(slots if "slots" in fields else {}, **compiled)
            slots = {} if "slots" in fields else slots

            def search(memory, state):
                step_fn = lambda ids, step, state, memory: model.decode_step(ids, state, memory)
                out = module.beam_search(
                    step_fn, state, sentences, module.BeamSearch(beam_size=beam, length_penalty=0.5),
                    max_length=steps, memory=memory, **slots,
                    execution=module.Execution(buffer_length=steps, vocabulary_size=vocab, **settings))
                return out.ids, out.scores

            return tf.function(search, jit_compile=jit)
        parameters = inspect.signature(module.beam_search).parameters
        extra = {"vocabulary_size": vocab} if "vocabulary_size" in parameters else {}
        if "xla" in parameters:  # the buffers' updates chosen for the compiler, as the Translator does
            extra["xla"] = jit
        slotted = "slots" in parameters  # the memory handed over, one row per sentence

        def search(memory, state):
            if slotted:
                step_fn = lambda ids, step, state, memory: model.decode_step(ids, state, memory)
                extra.update(memory=memory, slots=sentences)
            else:  # an older search: the memory tiled per beam, closed over
                tiled = decoding.tile_beams(memory, beam)
                step_fn = lambda ids, step, state: model.decode_step(ids, state, tiled)
            out = module.beam_search(step_fn, state, sentences, beam_size=beam, max_length=steps,
                                     buffer_length=steps, length_penalty=0.5, **extra)
            return out.ids, out.scores

        return tf.function(search, jit_compile=jit)

    def one_step(memory, state):
        return model.decode_step(tf.fill([tf.shape(tf.nest.flatten(state)[0])[0]], 4), state, memory)[0]

    # the network as the search runs it: the memory one row per sentence, shared by its beams
    flops = _matmul_flops(tf.function(one_step), memory, tiled_state)
    parts = {"network": (tf.function(network, jit_compile=jit), (memory, tiled_state)),
             "search": (search_with(decoding), (memory, state))}
    if FLAGS.old_checkout:
        parts["search_old"] = (search_with(_old_decoding()), (memory, state))
    return parts, flops


def _old_decoding():
    """The old checkout's search: a single-file ``decoding.py`` (a ``decoding/`` package would
    clash with this checkout's ``bahdanau_tf`` in one process)."""
    path = os.path.join(FLAGS.old_checkout, "bahdanau_tf", "decoding.py")
    spec = importlib.util.spec_from_file_location("old_decoding", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _seconds(function, args):
    start = time.perf_counter()
    outputs = function(*args)
    tf.nest.map_structure(lambda t: t.numpy(), outputs)
    return time.perf_counter() - start


def _step_rows():
    model = _timed_model()
    jits = {"both": (True, False), "xla": (True,), "graph": (False,)}[FLAGS.jit]
    configs = {}
    for jit in jits:
        for name, sentences, beam in SHAPES:
            parts, flops = _functions(model, sentences, beam, jit)
            for function, args in parts.values():
                _seconds(function, args)  # trace and compile
            configs[(name, jit)] = dict(parts=parts, flops=flops, times={part: [] for part in parts})
    a = tf.random.stateless_normal([PROBE, PROBE], [3, 4])
    probe = tf.function(lambda x: tf.matmul(x, x))
    _seconds(probe, (a,))
    probes = []
    for _ in range(FLAGS.rounds):
        probes.append(2 * PROBE ** 3 / min(_seconds(probe, (a,)) for _ in range(2)))
        for config in configs.values():
            for part, (function, args) in config["parts"].items():
                config["times"][part].append(_seconds(function, args) / FLAGS.steps)
    rows = []
    for (name, jit), config in configs.items():
        times = {part: np.array(values) for part, values in config["times"].items()}
        network = times["network"]
        row = dict(rows=name, xla=jit, network_ms=round(1000 * float(np.median(network)), 2))
        for part in [p for p in ("search", "search_old") if p in times]:
            row[f"{part}_ms"] = round(1000 * float(np.median(times[part])), 2)
            row[f"{part}_share_pct"] = round(100 * float(np.median(times[part] / network - 1)), 1)
        if "search_old" in times:  # new over old, the median of the per-round ratios
            row["search_vs_old"] = round(float(np.median(times["search"] / times["search_old"])), 3)
        row.update(network_pct_of_probe=round(100 * float(np.median(
                       config["flops"] / network / np.array(probes))), 1),
                   mflop_per_step=round(config["flops"] / 1e6, 1))
        rows.append(row)
    return rows, round(float(np.median(probes)) / 1e9, 1)


def _hypothesis_steps():
    from bahdanau_tf.corpora import load_corpus
    from bahdanau_tf.model_directory import load_model_directory
    from bahdanau_tf.translator import Translator

    loaded = load_model_directory(FLAGS.model_dir, dtype=devices.decoding_precision())
    counting = _machines.CountingModel(loaded.model)
    translator = Translator(counting, loaded.source_tokenizer, loaded.target_tokenizer)
    test = load_corpus("bible-en-es", split="test").sources[:FLAGS.sentences]
    rows = []
    for beam in (5, 1):
        counts, outputs = {}, {}
        for batch_size in (64, 1):
            counting.counter.assign(0)
            outputs[batch_size] = translator.translate(test, beam_size=beam, batch_size=batch_size).translations
            counts[batch_size] = int(counting.counter.numpy())
        rows.append(dict(beam_size=beam, batch_64=counts[64], one_at_a_time=counts[1],
                         ratio=round(counts[64] / counts[1], 3),
                         identical=sum(a == b for a, b in zip(outputs[64], outputs[1]))))
    return rows


_PROFILED_CALLS = 5  # calls of each loop under the profiler (--profile)


def _thunk_us(function, args, calls=_PROFILED_CALLS):
    """{compiled op name without XLA's numeric suffix: us per step} over ``calls`` profiled
    calls: the trace events named after an instruction of the optimized HLO (not a loop or a
    conditional, which contain others; not the runtime's own events)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    hlo = function.experimental_get_compiler_ir(*args)(stage="optimized_hlo")
    instructions = {match.group(1) for match in re.finditer(
        r"^\s*(?:ROOT )?%?([\w.-]+) = .*? (?!while|conditional|call)[a-z-]+\(", hlo, re.MULTILINE)}
    for _ in range(2):
        _seconds(function, args)
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(calls):
            _seconds(function, args)
        tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0], "rb") as handle:
            space.ParseFromString(handle.read())
    totals = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if name in instructions:
                    totals[re.sub(r"\.\d+$", "", name)] += event.duration_ps / 1e6
    return {name: total / calls / FLAGS.steps for name, total in totals.items()}


def _profile_rows():
    model = _timed_model()
    rows = []
    for name, sentences, beam in SHAPES:
        parts, _ = _functions(model, sentences, beam, True)
        network, search = (_thunk_us(*parts[part]) for part in ("network", "search"))
        extra = {op: search.get(op, 0.0) - network.get(op, 0.0) for op in set(search) | set(network)}
        ops = [dict(op=op, search_us=round(search.get(op, 0.0), 1), network_us=round(network.get(op, 0.0), 1),
                    extra_us=round(value, 1))
               for op, value in sorted(extra.items(), key=lambda item: -item[1]) if abs(value) >= 1.0]
        rows.append(dict(rows=name, network_us=round(sum(network.values()), 1),
                         search_us=round(sum(search.values()), 1), ops=ops))
        print(f"{name}: compiled ops' us per step, network {rows[-1]['network_us']}, search "
              f"{rows[-1]['search_us']} (summed over threads)")
        for op in ops[:15]:
            print(f"    {op['op']:40s} search {op['search_us']:8.1f}  network {op['network_us']:8.1f}  "
                  f"extra {op['extra_us']:8.1f}")
    return rows


def _print_steps(record):
    record["step_rows"], record["probe_gflops"] = _step_rows()
    print(f"probe: {record['probe_gflops']} GFLOP/s (float32 {PROBE}^3 matmul, median of rounds)")
    header = [h for h in ("rows", "xla", "network_ms", "search_ms", "search_share_pct", "search_old_ms",
                          "search_old_share_pct", "search_vs_old", "network_pct_of_probe", "mflop_per_step")
              if h in record["step_rows"][0]]
    for row in [dict(zip(header, header))] + record["step_rows"]:
        print("  ".join(str(row[h]).ljust(len(h) if h != "rows" else 24) for h in header))


def main(argv):
    del argv
    record = {"machine": devices.benchmark_record(), "steps": FLAGS.steps}
    if FLAGS.profile:
        record.update(profiled_calls=_PROFILED_CALLS, profile=_profile_rows())
    elif FLAGS.time_steps:
        record["rounds"] = FLAGS.rounds
        _print_steps(record)
    if FLAGS.model_dir:
        record["hypothesis_steps"] = _hypothesis_steps()
        for row in record["hypothesis_steps"]:
            print(json.dumps(row))
    _machines.write_json(FLAGS.output, record)


if __name__ == "__main__":
    app.run(main)
