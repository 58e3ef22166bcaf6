"""Would fusing the decoder step's matmuls that share an input pay?

In one RNNsearch decoder step (``small`` sizes: m = 128, n = 256, l = 128) three inputs feed
more than one matmul:

- the context c (2n = 512) feeds the GRU's C (512 x 768) and the deep output's C_o (512 x 256);
- the embedding E y (m = 128) feeds the GRU's W (128 x 768) and the deep output's V_o (128 x 256);
- the new state s (n = 256) feeds the deep output's U_o (256 x 256), the next step's attention
  query W_a (256 x 256) and the next step's gates [U_z | U_r] (256 x 512).

Timed in a ``tf.while_loop`` of ``--steps`` steps, ms per step, median over interleaved rounds:

- ``separate``: the seven matmuls as the layers run them;
- ``fused``: three matmuls over kernels concatenated once, before the loop;
- ``fused_in_loop``: the same three with the concatenation written inside the loop body.

at 5, 80 and 320 rows (batch 1, 16 and 64 sentences x beam 5), with XLA and without (the
exported signatures' path). Prints a table and writes JSON.

    python benchmarks/fused_matmuls.py [--rounds=15] [--steps=40] [--output=...]
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _machines  # noqa: E402
from bahdanau_tf import devices  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("rounds", 15, "Interleaved timed rounds.")
flags.DEFINE_integer("steps", 40, "Loop steps per timed call.")
flags.DEFINE_list("rows", ["5", "80", "320"], "Rows (hypotheses) per step.")
flags.DEFINE_string("output", os.path.join(os.path.dirname(__file__), "results", "fused_matmuls.json"),
                    "JSON output path.")

# (input, [kernel widths]) of the matmuls that share an input, small preset sizes
GROUPS = {"context": (512, [768, 256]), "embedding": (128, [768, 256]), "state": (256, [256, 256, 512])}


def _functions(rows, jit):
    generator = tf.random.Generator.from_seed(0)
    inputs = {name: generator.normal([rows, width]) for name, (width, _) in GROUPS.items()}
    kernels = {name: [tf.Variable(generator.normal([width, out])) for out in outs]
               for name, (width, outs) in GROUPS.items()}
    fused_kernels = {name: tf.concat(parts, axis=1) for name, parts in kernels.items()}

    def loop(products):
        def body(i, x):
            total = tf.add_n([tf.reduce_sum(p) for p in products(dict(inputs, context=x))])
            return i + 1, x + 1e-9 * total  # a loop-carried dependence on every product

        return tf.while_loop(lambda i, _: i < FLAGS.steps, body, (0, inputs["context"]))[1]

    @tf.function(jit_compile=jit, autograph=False)
    def separate():
        return loop(lambda x: [tf.matmul(x[name], k) for name, ks in kernels.items() for k in ks])

    @tf.function(jit_compile=jit, autograph=False)
    def fused():
        read = {name: tf.identity(k) for name, k in fused_kernels.items()}  # read once, before the loop
        return loop(lambda x: [tf.matmul(x[name], read[name]) for name in GROUPS])

    @tf.function(jit_compile=jit, autograph=False)
    def fused_in_loop():
        return loop(lambda x: [tf.matmul(x[name], tf.concat(kernels[name], axis=1)) for name in GROUPS])

    return {"separate": separate, "fused": fused, "fused_in_loop": fused_in_loop}


def main(argv):
    del argv
    rows_out = []
    for jit in (True, False):
        for rows in (int(r) for r in FLAGS.rows):
            functions = _functions(rows, jit)
            for function in functions.values():
                function().numpy()  # trace and compile
            times = {name: [] for name in functions}
            for _ in range(FLAGS.rounds):
                for name, function in functions.items():
                    start = time.perf_counter()
                    function().numpy()
                    times[name].append((time.perf_counter() - start) / FLAGS.steps * 1e3)
            row = dict(rows=rows, xla=jit, **{f"{name}_ms": round(float(np.median(t)), 3) for name, t in times.items()})
            row["fused_over_separate"] = round(row["fused_ms"] / row["separate_ms"], 3)
            rows_out.append(row)
            print("  ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    _machines.write_json(FLAGS.output, {"machine": devices.benchmark_record(), "rounds": FLAGS.rounds,
                                        "steps": FLAGS.steps, "rows": rows_out})


if __name__ == "__main__":
    app.run(main)
