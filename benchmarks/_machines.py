"""Shared by the benchmarks: the machines to emulate, and running a measurement in a child process.

``native`` is the machine as it is. ``avx2`` approximates an AVX2/FMA-only x86 CPU (e.g. the
AMD EPYC of CI runners and cloud VMs) on a newer one, in the same run:

- ``ONEDNN_MAX_CPU_ISA=AVX2``: oneDNN (TensorFlow's float32 matmuls and more) uses AVX2 kernels
  only (its verbose log then reports ``isa:Intel AVX2``);
- ``XLA_FLAGS=--xla_cpu_max_isa=AVX2``: XLA:CPU generates no AVX-512 code (no EVEX-encoded
  instruction in its object files, against dozens without the flag);
- for bf16/fp16 variants also ``TF_ENABLE_ONEDNN_OPTS=0``: on a CPU without AVX-512 TensorFlow
  does not send bf16 ops to oneDNN but to Eigen; capped oneDNN would be asked for them and
  abort ("could not create a primitive descriptor"), so those runs use Eigen throughout
  (float32 ops included: a slight underestimate of such a CPU).

Each measurement runs in a fresh process (the variables must be set before TensorFlow starts).
"""

import datetime
import json
import os
import subprocess
import sys

MACHINES = {
    "native": {},
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"},
}
_EIGEN_FOR_LOW_PRECISION = {"TF_ENABLE_ONEDNN_OPTS": "0"}


def environment(machine, low_precision=False):
    """The environment of a child process that emulates ``machine``."""
    if machine not in MACHINES:
        raise ValueError(f"machine must be one of {sorted(MACHINES)}, got {machine!r}")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **MACHINES[machine])
    if machine != "native" and low_precision:
        env.update(_EIGEN_FOR_LOW_PRECISION)
    return env


def run_child(script, arguments, machine, low_precision=False, timeout=3600, checkout=None,
              extra_environment=None):
    """Runs ``python script --child ... arguments`` and returns the JSON of its last stdout line.

    With ``checkout`` (a directory holding ``bahdanau_tf/``) the child imports that checkout's
    package instead of the installed one (it goes first on ``PYTHONPATH``); ``extra_environment``
    replaces variables of the machine's environment.
    """
    command = [sys.executable, script] + list(arguments)
    env = dict(environment(machine, low_precision), **(extra_environment or {}))
    if checkout:
        env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(checkout)] + env.get("PYTHONPATH", "").split(os.pathsep))
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(command)} failed on {machine}:\n{result.stderr[-3000:]}")
    return json.loads(lines[-1])


class CountingModel:
    """A model whose ``decode_step`` adds the rows it computes to ``counter``: the hypothesis-steps
    of a search (every row of every step, finished and filler rows included)."""

    def __init__(self, model):
        import tensorflow as tf

        self._model = model
        self.counter = tf.Variable(0, dtype=tf.int64, trainable=False)

    def __getattr__(self, name):
        return getattr(self._model, name)

    def decode_step(self, previous_ids, state, memory, **kwargs):
        import tensorflow as tf

        self.counter.assign_add(tf.cast(tf.shape(previous_ids)[0], tf.int64))
        return self._model.decode_step(previous_ids, state, memory, **kwargs)  # projection=...


def write_json(path, record):
    """Writes a benchmark's record (with its date, command line, the machine's CPU where the
    record does not name it, and the load average as it ends) and says where."""
    if "machine" not in record and "machines" not in record:
        from bahdanau_tf import devices  # imports TensorFlow: only where a record is written

        record["machine"] = devices.benchmark_record()
    record.setdefault("date", datetime.datetime.now(datetime.timezone.utc).isoformat())
    record.setdefault("command", " ".join(sys.argv))
    record["load_average_after"] = os.getloadavg()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as handle:
        json.dump(record, handle, indent=2)
        handle.write("\n")
    print(f"wrote {path}")


def matmul_gflops(size=2048, rounds=5):
    """float32 GFLOP/s of a large square matmul (tf.function, the kernels TensorFlow picks)."""
    import time

    import tensorflow as tf

    a = tf.random.stateless_normal([size, size], [1, 2])
    matmul = tf.function(lambda x: tf.matmul(x, x))
    matmul(a).numpy()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(4):
            result = matmul(a)
        result.numpy()
        best = min(best, (time.perf_counter() - start) / 4)
    return 2 * size ** 3 / best / 1e9
