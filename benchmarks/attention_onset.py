"""When the default's attention learns to align, seed by seed: its dev NLL over the first updates.

The default's dev NLL falls in two phases: first as a language model of the target, its
attention still spread over the whole source, then fast once the attention learns to align. A
run that aligns on time is near 3.4 nats at update 400; a late one stays near 4.1 there and
ends a 12-minute budget several BLEU lower. Which it is depends on the seed (the initial weights
and the data order) and on the recipe, so a recipe is judged over several seeds.

For each variant (extra ``bahdanau-train`` flags; ``default``: none) and seed, this runs
``bahdanau-train --max_minutes=0 --max_steps=STEPS --seed=SEED FLAGS``, two runs at a time, each
pinned to a core of its own, and stops each (SIGINT: it checkpoints, as any interrupted run)
after its dev evaluation at update ``--stop``. ``--max_steps`` (3,400: about the updates of the
README's 12 minutes on 2 cores) sets the learning rate's decay, so the first updates see the
rates a 12-minute run would. Then it writes one row per run to ``--output``: the dev NLL at every
evaluation, and at ``--stop``.

    python benchmarks/attention_onset.py --output_dir=/tmp/onset --seeds=1,2,3,4,1234 \\
        --variants=default,lr5e-3=--learning_rate=0.005 \\
        --output=benchmarks/results/attention_onset_amd_epyc.json

``--summarize=VARIANT:SEED=DIR,...`` runs nothing: it reads run directories made before.
"""

import json
import os
import signal
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _run_logs  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Where the run directories and their logs go.")
flags.DEFINE_list("variants", ["default"], "Variants: default, or name=--flag=value+--flag=value.")
flags.DEFINE_list("seeds", ["1", "2", "3", "4"], "bahdanau-train --seed values.")
flags.DEFINE_integer("max_steps", 3400, "bahdanau-train --max_steps: the learning rate's decay.")
flags.DEFINE_integer("stop", 400, "Stop each run after its dev evaluation at this update.")
flags.DEFINE_list("cores", ["0", "1"], "The cores: one run on each at a time.")
flags.DEFINE_list("summarize", [], "VARIANT:SEED=DIR run directories made before: write their rows, run nothing.")
flags.DEFINE_string("output", None, "The results JSON to write.")


def _variant_flags(variant):
    name, _, spec = variant.partition("=")
    return name, [flag for flag in spec.split("+") if flag]


def _start(run_dir, seed, extra, core):
    """A ``bahdanau-train`` process pinned to ``core``, its output in ``RUN_DIR.log``."""
    command = ["taskset", "-c", core, sys.executable, "-m", "bahdanau_tf.cli.train", f"--output_dir={run_dir}",
               "--max_minutes=0", f"--max_steps={FLAGS.max_steps}", f"--seed={seed}", *extra]
    log = open(run_dir + ".log", "w")  # noqa: SIM115 — closed when the run is stopped
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log


def _stop_after(running, stop):
    """Waits for each run's dev evaluation at update ``stop``, then stops it as Ctrl-C would."""
    mark = f"step {stop:>7,}  dev NLL"
    waiting = list(running)
    while waiting:
        for process, log in list(waiting):
            with open(log.name) as handle:
                reached = mark in handle.read()
            if reached or process.poll() is not None:
                if process.poll() is None:
                    process.send_signal(signal.SIGINT)
                process.wait()
                log.close()
                waiting.remove((process, log))
        time.sleep(2)


def run_all(variants, seeds):
    """Every (variant, seed) run, ``len(--cores)`` at a time; ``[(variant, seed, run_dir)]``."""
    jobs = [(name, extra, seed) for name, extra in map(_variant_flags, variants) for seed in seeds]
    done = []
    for start in range(0, len(jobs), len(FLAGS.cores)):
        running = []
        for (name, extra, seed), core in zip(jobs[start:start + len(FLAGS.cores)], FLAGS.cores):
            run_dir = os.path.join(FLAGS.output_dir, f"{name}-seed{seed}")
            running.append(_start(run_dir, seed, extra, core))
            done.append((name, seed, run_dir))
        _stop_after(running, FLAGS.stop)
    return done


def row(variant, seed, run_dir):
    """One run's row: its flags, the dev NLL at every evaluation and at ``--stop``."""
    with open(os.path.join(run_dir, "report.json")) as handle:
        report = json.load(handle)
    curve = _run_logs.dev_curve(run_dir)
    at_stop = dict(curve).get(FLAGS.stop)
    return dict(variant=variant, seed=int(seed), preset=report.get("preset"),
                learning_rate=report["training"]["learning_rate"], max_steps=report["training"]["max_steps"],
                regularization=report.get("regularization"), dev_curve=curve, stop=FLAGS.stop,
                dev_nll_at_stop=at_stop)


def main(argv):
    del argv
    if not FLAGS.output:
        raise app.UsageError("--output is required.")
    if FLAGS.summarize:
        runs = []
        for pair in FLAGS.summarize:
            key, _, run_dir = pair.partition("=")
            variant, _, seed = key.rpartition(":")
            runs.append((variant, seed, run_dir))
    else:
        if not FLAGS.output_dir:
            raise app.UsageError("--output_dir is required (or --summarize).")
        os.makedirs(FLAGS.output_dir, exist_ok=True)
        runs = run_all(FLAGS.variants, FLAGS.seeds)
    from bahdanau_tf import devices  # noqa: PLC0415 — TensorFlow only once the runs are made

    rows = [row(*run) for run in runs]
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == variant]
        print(f"{variant}: dev NLL at update {FLAGS.stop}: "
              + ", ".join(f"seed {r['seed']} {r['dev_nll_at_stop']}" for r in mine))
    record = dict(benchmark="attention_onset", machine=devices.benchmark_record(),
                  date=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()), rows=rows)
    with open(FLAGS.output, "w") as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")


if __name__ == "__main__":
    app.run(main)
