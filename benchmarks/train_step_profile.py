"""Where one train step's time goes: the Trainer's step under the TensorFlow profiler, by part.

`bahdanau_tf.training.Trainer.train_step` (forward and backward pass, clipping, Adam) runs
``--calls`` passes over the first ``--batches`` Bible training batches (the `small` preset,
``--vocabulary_size`` word vocabularies, the variant's own padding, every shape compiled
before), traced by the TensorFlow profiler:

* **XLA** (``jit``: float32 + XLA): XLA:CPU's per-thunk trace events (each compiled op: a
  fusion, a dot, a loop's copy, ...), matched to the optimized HLO of each batch shape's
  module; an op is put in a part of the model by the TensorFlow op it came from (the HLO's
  ``op_name`` metadata), forward or backward (``gradient_tape/`` ops) by that name too, and
  "in the loop" when it runs in a ``while`` body. The ops TensorFlow runs itself (the
  optimizer, clipping) are TensorFlow op events.
* **no XLA** (``float32``, ``bf16``): every TensorFlow op event (``name:type``), parted the
  same way by its name (ops of a loop's body function carry their own names: ``while`` body
  ops of the forward and backward loops are recognised by their function).

The table gives, per part, the ms per step (summed over the ops: without XLA two ops may run
at once on the 2 cores, so the parts can sum to more than the step), its share, and the op
count per step; then the costliest single ops. ``step_ms`` is the step timed without the
profiler (best pass). With ``--checkout=DIR`` a child process profiles that checkout's
package instead (e.g. a copy of an earlier commit), so two versions are profiled alike.

    python benchmarks/train_step_profile.py [--machines=native,avx2] [--variants=jit,float32]
        [--checkout=DIR] [--label=NAME] [--batches=24] [--calls=3]

JSON: ``benchmarks/results/train_step_profile_<machine class>[_<label>].json`` (the machine
class is ``avx512`` for this script's ``native`` machine with AVX-512, else its name).
"""

import collections
import glob
import json
import os
import re
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machines  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("machines", ["native", "avx2"], "Machines: native and/or avx2 (emulated).")
flags.DEFINE_list("variants", ["jit", "float32"], "jit (float32 + XLA), float32, bf16 (no XLA).")
flags.DEFINE_integer("batches", 24, "Bible training batches cycled.")
flags.DEFINE_integer("calls", 3, "Profiled passes over the batches.")
flags.DEFINE_integer("vocabulary_size", 5000, "Word vocabulary size of both sides.")
flags.DEFINE_string("preset", "small", "Preset profiled.")
flags.DEFINE_string("checkout", None, "Profile this checkout's package (a directory holding bahdanau_tf/).")
flags.DEFINE_string("label", None, "Added to the JSON's name (e.g. base).")
flags.DEFINE_integer("top", 12, "Costliest single ops listed per variant.")
flags.DEFINE_string("child", None, "Internal: the variant profiled in this process.")
flags.DEFINE_string("output_dir", os.path.join(os.path.dirname(__file__), "results"), "Where the JSON goes.")

VARIANTS = {
    "jit": dict(precision="float32", jit_compile=True),
    "float32": dict(precision="float32", jit_compile=False),
    "bf16": dict(precision="mixed_bfloat16", jit_compile=False),
    "bf16_jit": dict(precision="mixed_bfloat16", jit_compile=True),
}

# (part, pattern on the TensorFlow op name), first match wins
PARTS = (
    ("optimizer + clipping", r"^update/"),
    ("encoder", r"encoder"),
    ("readout + vocabulary projection", r"readout"),
    ("decoder loop (attention + GRU)", r"decoder_cell|scan|while"),
    ("decoder inputs (embedding, s_0)", r"target_embedding|initial_state"),
    ("loss (softmax cross-entropy)", r"sparse_softmax|SparseSoftmax|token_nll"),
    ("optimizer + clipping", r"(?i)adam|adadelta|sgd|optimizer|clip_by_global_norm|global_norm|assign|"
                             r"apply_gradients|iterator|IteratorGetNext"),
)


def _part(name):
    """(part, phase) of a TensorFlow op name."""
    phase = "backward" if re.search(r"gradient_tape|gradients/|^gradients|_grad", name) else "forward"
    for part, pattern in PARTS:
        if re.search(pattern, name):
            if part == "optimizer + clipping":
                phase = "update"
            return part, phase
    return "other", phase


def _hlo_ops(hlo):
    """{instruction: (TensorFlow op_name, in a while body)} of an optimized HLO module's text."""
    bodies = set(re.findall(r"body=%?([\w.-]+)", hlo))
    ops, computation = {}, None
    for line in hlo.splitlines():
        header = re.match(r"^(?:ENTRY )?%?([\w.-]+) .*\{$", line)
        if header:
            computation = header.group(1)
            continue
        match = re.match(r"^\s*(?:ROOT )?%?([\w.-]+) = .*? ([a-z-]+)\(", line)
        if not match or match.group(2) in ("while", "conditional", "call", "parameter", "constant",
                                            "get-tuple-element", "tuple", "bitcast"):
            continue
        op_name = re.search(r'op_name="([^"]*)"', line)
        # an op without metadata (a copy XLA inserted) is named after its computation, e.g.
        # the backward loop's body ``..._scan_while_body_..._grad_...``
        ops[match.group(1)] = (op_name.group(1) if op_name else f"{computation}/{match.group(2)}",
                               computation in bodies)
    return ops


def _events(logdir):
    """[(name, stats {name: value}, duration us)] of every traced event."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0], "rb") as handle:
        space.ParseFromString(handle.read())
    events = []
    for plane in space.planes:
        stat_names = {key: value.name for key, value in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                metadata = plane.event_metadata[event.metadata_id]
                stats = {}
                for stat in event.stats:
                    value = stat.str_value or (stat_names.get(stat.ref_value) if stat.ref_value else stat.int64_value)
                    stats[stat_names.get(stat.metadata_id)] = value
                events.append((metadata.name, metadata.display_name, stats, event.duration_ps / 1e6))
    return events


_SUFFIX = re.compile(r"[.]\d+$")  # XLA's numbering of one op's copies


def _tail(op_name):
    """The end of a TensorFlow op name, numbers dropped: what the table shows of it."""
    return re.sub(r"_[0-9]+", "", op_name)[-60:]


def _classify(events, modules):
    """{(part, phase, in loop, op): [us, count]} of the compiled ops' and TensorFlow ops' events."""
    totals = collections.defaultdict(lambda: [0.0, 0])
    for name, display, stats, us in events:
        if "hlo_op" in stats:  # an XLA thunk
            module = str(stats.get("hlo_module", ""))
            entry = next((ops[name] for key, ops in modules.items() if key in module and name in ops), None)
            if entry is None:
                entry = next((ops[name] for ops in modules.values() if name in ops), None)
            if entry is None:
                continue
            op_name, looped = entry
            key = (*_part(op_name), looped, f"{_SUFFIX.sub('', name)} ({_tail(op_name)})")
        elif ":" in name and display and not name.startswith(("__inference", "EagerLocal")):
            op_name, op_type = name.rsplit(":", 1)
            if op_type in ("_XlaRun", "_XlaCompile", "XlaLaunch", "StatefulPartitionedCall", "PartitionedCall",
                           "While", "StatelessWhile", "_Send", "_Recv", "NoOp"):
                continue
            looped = bool(re.search(r"while|scan", op_name)) or "/" not in op_name
            key = (*_part(op_name), looped, f"{op_type} ({_tail(op_name)})")
        else:
            continue
        totals[key][0] += us
        totals[key][1] += 1
    return totals


def _child(variant):
    import shutil

    import tensorflow as tf

    from bahdanau_tf import corpora, devices, text, training

    train = corpora.load_corpus("bible-en-es", split="train")
    tokenizers = (text.WordTokenizer.build(train.sources, max_vocabulary_size=FLAGS.vocabulary_size),
                  text.WordTokenizer.build(train.targets, max_vocabulary_size=FLAGS.vocabulary_size))
    directory = tempfile.mkdtemp(prefix="train_step_profile_")
    try:
        config = training.TrainingConfig.for_preset(FLAGS.preset, summaries=False, **VARIANTS[variant])
        trainer = training.Trainer(directory, *tokenizers, preset=FLAGS.preset, config=config, log=lambda line: None)
        dataset = trainer.train_dataset(train, distribute=False).take(FLAGS.batches).cache()
        batches = list(dataset)
        iterator = iter(trainer.strategy.experimental_distribute_dataset(dataset.repeat()))

        def one_pass():
            start = time.perf_counter()
            for _ in batches:
                trainer.train_step(iterator)
            trainer.step.numpy()
            return time.perf_counter() - start

        one_pass()
        step_s = min(one_pass() for _ in range(2)) / len(batches)
        modules = {}
        if config.jit_compile:
            for (source, target_in), target_out in batches:
                tokens = tf.reduce_sum(tf.cast(target_out > 0, "float32"))
                hlo = trainer._gradients.experimental_get_compiler_ir(source, target_in, target_out, tokens, None, None)(
                    stage="optimized_hlo")
                module = re.search(r"HloModule ([\w.-]+)", hlo).group(1)
                modules[module] = _hlo_ops(hlo)
            if hasattr(trainer, "_update"):  # the update, compiled apart from the gradient
                gradients = [tf.convert_to_tensor(g) for g in trainer._gradients(source, target_in, target_out,
                                                                                 tokens, None, None)[1]]
                hlo = trainer._update.experimental_get_compiler_ir(gradients, None)(stage="optimized_hlo")
                modules[re.search(r"HloModule ([\w.-]+)", hlo).group(1)] = {
                    name: ("update/" + op_name, looped) for name, (op_name, looped) in _hlo_ops(hlo).items()}
        logdir = tempfile.mkdtemp(prefix="train_step_profile_trace_")
        tf.profiler.experimental.start(logdir)
        profiled_s = sum(one_pass() for _ in range(FLAGS.calls)) / (FLAGS.calls * len(batches))
        tf.profiler.experimental.stop()
        totals = _classify(_events(logdir), modules)
        shutil.rmtree(logdir, ignore_errors=True)
        steps = FLAGS.calls * len(batches)
        real = sum(float(tf.reduce_sum(tf.cast(b[1] > 0, "float32"))) for b in batches) / len(batches)
        padded = sum(int(tf.size(b[1])) for b in batches) / len(batches)
        ops = [dict(part=part, phase=phase, in_loop=looped, op=op, us_per_step=round(us / steps, 1),
                    count_per_step=round(count / steps, 1))
               for (part, phase, looped, op), (us, count) in sorted(totals.items(), key=lambda item: -item[1][0])]
        print(json.dumps(dict(variant=variant, precision=config.precision, jit_compile=bool(config.jit_compile),
                              step_ms=round(1000 * step_s, 1), profiled_step_ms=round(1000 * profiled_s, 1),
                              real_target_tokens=round(real, 1), padded_target_tokens=round(padded, 1),
                              shapes=len({tuple(b[0][0].shape) + tuple(b[1].shape) for b in batches}),
                              ops=ops, machine=devices.benchmark_record())), flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def parts_table(ops):
    """[(part, phase, in loop, ms per step, ops per step)] summed over a variant's ops."""
    parts = collections.defaultdict(lambda: [0.0, 0.0])
    for op in ops:
        key = (op["part"], op["phase"], op["in_loop"])
        parts[key][0] += op["us_per_step"] / 1000
        parts[key][1] += op["count_per_step"]
    return sorted(((*key, ms, count) for key, (ms, count) in parts.items()), key=lambda row: -row[3])


def _print(result):
    total = sum(op["us_per_step"] for op in result["ops"]) / 1000
    print(f"\n{result['variant']} ({result['precision']}, XLA {result['jit_compile']}): step {result['step_ms']} ms "
          f"unprofiled, {result['profiled_step_ms']} ms profiled; ops sum {total:.1f} ms; "
          f"{result['real_target_tokens']:.0f} real of {result['padded_target_tokens']:.0f} target positions")
    print(f"  {'part':52s} {'phase':9s} {'loop':5s} {'ms/step':>8s} {'share':>6s} {'ops/step':>9s}")
    for part, phase, looped, ms, count in parts_table(result["ops"]):
        print(f"  {part:52s} {phase:9s} {str(looped):5s} {ms:8.1f} {100 * ms / total:5.1f}% {count:9.0f}")
    print("  costliest ops:")
    for op in result["ops"][:FLAGS.top]:
        print(f"    {op['us_per_step'] / 1000:7.2f} ms  x{op['count_per_step']:<6g} {op['part'][:30]:30s} "
              f"{op['phase']:8s} loop={op['in_loop']!s:5s} {op['op'][:70]}")


def main(argv):
    del argv
    if FLAGS.child:
        return _child(FLAGS.child)
    script = os.path.abspath(__file__)
    passed = [f"--batches={FLAGS.batches}", f"--calls={FLAGS.calls}", f"--vocabulary_size={FLAGS.vocabulary_size}",
              f"--preset={FLAGS.preset}"]
    for machine in FLAGS.machines:
        results = []
        for variant in FLAGS.variants:
            low_precision = machine != "native" and VARIANTS[variant]["precision"] != "float32"
            environment_flags = {}
            if VARIANTS[variant]["jit_compile"]:
                environment_flags["XLA_FLAGS"] = " ".join(
                    filter(None, [_machines.MACHINES[machine].get("XLA_FLAGS"), "--xla_cpu_enable_xprof_traceme=true"]))
            result = _machines.run_child(script, [f"--child={variant}"] + passed, machine, low_precision=low_precision,
                                         checkout=FLAGS.checkout, extra_environment=environment_flags)
            _print(result)
            results.append(result)
        flags_ = results[0]["machine"]["flags"] if results else {}
        machine_class = "avx512" if machine == "native" and flags_.get("avx512f") else machine
        name = f"train_step_profile_{machine_class}{'_' + FLAGS.label if FLAGS.label else ''}.json"
        record = {"machine": results[0]["machine"] if results else None, "batches": FLAGS.batches,
                  "calls": FLAGS.calls, "preset": FLAGS.preset, "checkout": FLAGS.checkout,
                  "variants": [{k: v for k, v in r.items() if k != "machine"} | {"parts": parts_table(r["ops"])}
                               for r in results]}
        _machines.write_json(os.path.join(FLAGS.output_dir, name), record)


if __name__ == "__main__":
    app.run(main)
