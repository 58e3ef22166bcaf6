"""The default 12-minute bahdanau-train + bahdanau-evaluate, per machine and configuration.

For every machine (``native``; ``avx2``: an AVX2/FMA-only CPU emulated on this one, see
benchmarks/_machines.py) and every configuration (extra bahdanau-train flags, ``default`` being
none), one after the other (never two at once: they would share the cores):

1. ``bahdanau-train --output_dir=OUT/<machine>-<config>`` with its defaults (12 minutes);
2. ``bahdanau-evaluate`` of that model directory once per ``--length_penalties`` value.

Then it prints one table row per (run, length penalty) — updates, epochs, real target tokens/s
over the run, best dev NLL, test BLEU with its brevity penalty and length ratio, BLEU by source
length — and writes ``OUT/summary.json``. Takes about (12 + 2 x penalties) minutes per run.

    python benchmarks/twelve_minute_runs.py --output_dir=/data/runs12 \\
        [--machines=native,avx2] [--configs=default,warmup,f32xla] [--length_penalties=0,1,1.5]

``--summarize=NAME=DIR,...`` runs nothing: it reads model directories trained and evaluated
before (``DIR/report.json``, ``DIR/model.json``, ``DIR/evaluation/report.json``) and writes their
rows, with the machine, to ``--output``:

    python benchmarks/twelve_minute_runs.py --summarize=paper=/runs/a,cgru=/runs/b \
        --output=benchmarks/results/recipe_runs_amd_epyc.json

Configurations: ``default`` (no flag), ``warmup`` (``--schedule=warmup_rsqrt
--warmup_steps=200``), ``f32xla`` (``--precision=float32 --jit``: the default on CPUs without
AMX), ``bf16`` (``--precision=mixed_bfloat16 --nojit``: the previous release's default on CPUs
with bf16 instructions, and today's with AMX), ``cgru`` (``--preset=rnnsearch-cgru-small``: Nematus's conditional GRU decoder at
``small``'s sizes and recipe), or any ``name=--flag=value+--flag=value``.
"""

import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machines  # noqa: E402
import _run_logs  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Where the model directories, evaluations and summary go.")
flags.DEFINE_list("machines", ["native", "avx2"], "Machines: native and/or avx2 (emulated).")
flags.DEFINE_list("configs", ["default"], "Configurations: default, warmup, or name=--flag=value+--flag=value.")
flags.DEFINE_list("length_penalties", ["0", "1", "1.5"], "bahdanau-evaluate --length_penalty values.")
flags.DEFINE_float("max_minutes", 12.0, "bahdanau-train --max_minutes.")
flags.DEFINE_list("extra_train_flags", [], "Flags added to every bahdanau-train run.")
flags.DEFINE_list("summarize", [], "NAME=DIR model directories already trained and evaluated "
                  "(DIR/evaluation): write their rows to --output, run nothing.")
flags.DEFINE_string("output", None, "With --summarize: the results JSON to write.")

CONFIGS = {
    "default": [],
    "warmup": ["--schedule=warmup_rsqrt", "--warmup_steps=200"],
    "f32xla": ["--precision=float32", "--jit"],  # the default on CPUs without AMX
    "bf16": ["--precision=mixed_bfloat16", "--nojit"],  # the default with AMX
    "cgru": ["--preset=rnnsearch-cgru-small"],  # the conditional GRU decoder beside `small`
}


def _config_flags(config):
    if config in CONFIGS:
        return config, CONFIGS[config]
    name, _, spec = config.partition("=")
    return name, [flag for flag in spec.split("+") if flag]


def _run(command, machine, log_path):
    start = time.time()
    with open(log_path, "w") as log:
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=_machines.environment(machine))
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}; see {log_path}")
    return time.time() - start


def _find_bleu(report):
    """The first BLEU result (a dict with score and brevity_penalty) in an evaluation report."""
    if isinstance(report, dict):
        if "score" in report and "brevity_penalty" in report:
            return report
        for key in ("bleu", "BLEU"):
            if key in report:
                found = _find_bleu(report[key])
                if found:
                    return found
        for value in report.values():
            found = _find_bleu(value)
            if found:
                return found
    elif isinstance(report, list):
        for value in report:
            found = _find_bleu(value)
            if found:
                return found
    return None


def _find_key(report, key):
    if isinstance(report, dict):
        if key in report:
            return report[key]
        values = report.values()
    elif isinstance(report, list):
        values = report
    else:
        return None
    for value in values:
        found = _find_key(value, key)
        if found is not None:
            return found
    return None


def worst_rise(curve, after_step):
    """The largest share by which a dev NLL of ``curve`` stood above the running best before it,
    over the evaluations after update ``after_step`` (0.0: never above it)."""
    best, worst = float("inf"), 0.0
    for step, nll in curve:
        if step > after_step and best < float("inf"):
            worst = max(worst, nll / best - 1.0)
        best = min(best, nll)
    return round(worst, 4)


def _directory_row(name, run_dir, evaluation_dir):
    """One table row from a trained model directory and its evaluation."""
    with open(os.path.join(run_dir, "report.json")) as handle:
        training = json.load(handle)
    with open(os.path.join(run_dir, "model.json")) as handle:
        model = json.load(handle)
    with open(os.path.join(evaluation_dir, "report.json")) as handle:
        evaluation = json.load(handle)
    bleu = _find_bleu(evaluation) or {}
    alignment = _find_key(evaluation, "alignment") or {}
    curve = _run_logs.dev_curve(run_dir)
    per_epoch = training["train_pairs"] // training["training"]["batch_size"]  # the updates of one epoch
    return dict(
        config=name, preset=training.get("preset"), training=training.get("training"),
        model=model.get("config"),
        updates=training.get("updates"), epochs=training.get("epochs"),
        wall_time_seconds=training.get("wall_time_seconds"), stopped=training.get("stopped_because"),
        tokens_per_s=training.get("target_tokens_per_second"), dev_nll_at_end=training.get("dev_nll"),
        best_dev_nll=training.get("best_dev_nll"), best_step=training.get("best_step"),
        averaged=training.get("averaged"), bleu=bleu.get("score"),
        brevity_penalty=bleu.get("brevity_penalty"), aer=alignment.get("aer"),
        bleu_by_length=_find_key(evaluation, "bleu_by_length"),
        length_penalty=_find_key(evaluation, "length_penalty"), cpu=training.get("device"),
        seconds=training.get("seconds"), regularization=training.get("regularization"),
        dev_curve=curve, worst_rise_after_first_epoch=worst_rise(curve, per_epoch),
    )


def summarize(pairs, output):
    """Writes the rows of already evaluated model directories (NAME=DIR) to ``output``."""
    from bahdanau_tf import devices  # noqa: PLC0415 — TensorFlow only in the summarizing process

    rows = []
    for pair in pairs:
        name, _, run_dir = pair.partition("=")
        rows.append(_directory_row(name, run_dir, os.path.join(run_dir, "evaluation")))
        print(json.dumps({k: v for k, v in rows[-1].items()
                          if k not in ("training", "model", "bleu_by_length", "dev_curve")}))
    record = dict(benchmark="twelve_minute_runs", machine=devices.benchmark_record(),
                  date=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()), rows=rows)
    with open(output, "w") as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")


def main(argv):
    del argv
    if FLAGS.summarize:
        if not FLAGS.output:
            raise app.UsageError("--summarize needs --output.")
        summarize(FLAGS.summarize, FLAGS.output)
        return
    if not FLAGS.output_dir:
        raise app.UsageError("--output_dir is required.")
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    python = sys.executable
    rows = []
    for machine in FLAGS.machines:
        for config in FLAGS.configs:
            name, extra = _config_flags(config)
            if name in ("f32xla", "bf16") and machine != "native":
                continue  # the emulated AVX2 machine: float32 + XLA is its default, bf16 runs in Eigen
            run_dir = os.path.join(FLAGS.output_dir, f"{machine}-{name}")
            train = [python, "-m", "bahdanau_tf.cli.train", f"--output_dir={run_dir}",
                     f"--max_minutes={FLAGS.max_minutes}"] + list(FLAGS.extra_train_flags) + extra
            print(f"{machine}/{name}: {' '.join(train[2:])}", flush=True)
            train_seconds = _run(train, machine, run_dir + ".train.log")
            with open(os.path.join(run_dir, "report.json")) as handle:
                training = json.load(handle)
            with open(os.path.join(run_dir, "model.json")) as handle:
                device = json.load(handle).get("device", {})
            for alpha in FLAGS.length_penalties:
                evaluation_dir = os.path.join(FLAGS.output_dir, f"{machine}-{name}-evaluation-lp{alpha}")
                evaluate = [python, "-m", "bahdanau_tf.cli.evaluate", f"--model_dir={run_dir}",
                            f"--output_dir={evaluation_dir}", f"--length_penalty={alpha}"]
                evaluate_seconds = _run(evaluate, machine, evaluation_dir + ".log")
                with open(os.path.join(evaluation_dir, "report.json")) as handle:
                    evaluation = json.load(handle)
                bleu = _find_bleu(evaluation) or {}
                row = dict(
                    machine=machine, config=name, length_penalty=float(alpha),
                    precision=device.get("precision"), jit_compile=device.get("jit_compile"),
                    updates=training.get("updates"), epochs=training.get("epochs"),
                    tokens_per_s=training.get("target_tokens_per_second"),
                    best_dev_nll=training.get("best_dev_nll"), bleu=bleu.get("score"),
                    brevity_penalty=bleu.get("brevity_penalty"),
                    length_ratio=bleu.get("ratio", bleu.get("length_ratio")),
                    bleu_by_length=_find_key(evaluation, "bleu_by_length"),
                    train_wall_s=round(train_seconds), evaluate_wall_s=round(evaluate_seconds),
                    cpu=device.get("machine", {}).get("description"),
                )
                rows.append(row)
                print(json.dumps(row), flush=True)
    header = ("machine", "config", "length_penalty", "precision", "jit_compile", "updates", "epochs", "tokens_per_s",
              "best_dev_nll", "bleu", "brevity_penalty", "length_ratio", "evaluate_wall_s")
    cells = [[str(row.get(h)) for h in header] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for cell in cells:
        print("  ".join(c.ljust(w) for c, w in zip(cell, widths)))
    with open(os.path.join(FLAGS.output_dir, "summary.json"), "w") as handle:
        json.dump(rows, handle, indent=2)
        handle.write("\n")


if __name__ == "__main__":
    app.run(main)
