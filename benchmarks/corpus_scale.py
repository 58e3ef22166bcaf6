"""Peak memory and start-up of ``bahdanau-train --tsv`` as the corpus grows.

For each size it writes a TSV of that many pairs (the embedded Bible's training pairs, repeated)
into a temporary directory, runs ten updates of a small model on it::

    python -m bahdanau_tf.cli.train --tsv=PAIRS.tsv --max_steps=10 --log_every=10 \\
        --preset=tiny --max_minutes=0 --summaries=false --output_dir=TMP/run

under ``/usr/bin/time -v``, and records the process's peak RSS ("Maximum resident set size")
and its start-up: from the process's start to the progress line of update 10 (vocabularies,
corpus counting or estimating, the first shuffle buffer, compilation and ten updates). The
temporary directory (corpora and runs) is removed at the end, also after a failure. Peak RSS
does not depend on the machine's load; start-up does (each row records the load average as its
run starts): compare the rows of one run. Then ``bahdanau-translate`` (``--translate_flags``,
default greedy with XLA) on inputs
of ``--translate_lines`` lines with the smallest run's model: its peak RSS should not grow with
the input (it reads, translates and writes ``--read_lines`` lines at a time). Then
``bahdanau-evaluate`` (greedy, no XLA, no heatmaps) on test sets of ``--evaluate_lines`` pairs in two
files, with the same model: it streams too (``--read_lines`` pairs at a time, scores kept as
sufficient statistics), so its peak RSS grows only until sacrebleu's cache of tokenized
sentences (an ``lru_cache`` of 65,536) is full.

    python benchmarks/corpus_scale.py [--sizes=250000,1000000,4000000] \\
        [--translate_lines=10000,1000000] [--evaluate_lines=10000,40000] \\
        [--repository=/path/to/a/checkout] [--label=after] [--output=...]

``--repository`` measures another checkout's code (e.g. a ``git worktree`` of the branch
before the change) with this script. Prints a table and writes
``benchmarks/results/corpus_scale.json`` (or ``--output``), with the CPU model.
"""

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["250000", "1000000", "4000000"], "Corpus sizes in pairs.")
flags.DEFINE_list("translate_lines", ["10000", "1000000"],
                  "Input sizes in lines for bahdanau-translate (greedy, the first size's model); "
                  "empty: none.")
flags.DEFINE_list("evaluate_lines", ["10000", "40000"],
                  "Test-set sizes in pairs for bahdanau-evaluate (greedy, the first size's model, "
                  "--source_file/--reference_file); empty: none.")
flags.DEFINE_string("repository", os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "The checkout whose bahdanau_tf is measured (default: this one).")
flags.DEFINE_string("label", "", "A name for this set of runs in the JSON (e.g. before, after).")
flags.DEFINE_list("train_flags", ["--preset=tiny", "--max_minutes=0", "--summaries=false"],
                  "Flags added to every bahdanau-train run.")
flags.DEFINE_list("translate_flags", ["--beam_size=1", "--jit_compile=true"],
                  "Flags of every bahdanau-translate run (XLA, the command's default: 1M lines take ~30 "
                  "minutes on a 2-core CPU, ~100 without XLA; the README's earlier rows used "
                  "--jit_compile=false).")
flags.DEFINE_string("output", os.path.join(os.path.dirname(__file__), "results", "corpus_scale.json"),
                    "Where to write the JSON results.")

UPDATES = 10
EVALUATE_FLAGS = ["--beam_size=1", "--jit_compile=false", "--attention_plots=0"]
_PEAK = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def cpu_model():
    """The CPU's model name (lscpu), for every absolute number."""
    try:
        output = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in output.splitlines()
                    if line.startswith("Model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


def write_corpus(path, pairs, size):
    """A TSV of ``size`` pairs: ``pairs`` repeated (and cut)."""
    lines = "".join(f"{s}\t{t}\n" for s, t in pairs).encode("utf-8")
    with open(path, "wb") as handle:
        for _ in range(size // len(pairs)):
            handle.write(lines)
        handle.write("".join(f"{s}\t{t}\n" for s, t in pairs[: size % len(pairs)]).encode("utf-8"))


def run_training(corpus, output_dir):
    """One run: (peak RSS in MiB, seconds to the end of update 10, wall seconds)."""
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "bahdanau_tf.cli.train",
               f"--tsv={corpus}", f"--max_steps={UPDATES}", f"--log_every={UPDATES}",
               f"--output_dir={output_dir}"] + list(FLAGS.train_flags)
    env = dict(os.environ, PYTHONPATH=FLAGS.repository, TF_CPP_MIN_LOG_LEVEL="2")
    start = time.time()
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               text=True, cwd=FLAGS.repository, env=env)
    startup, lines = None, []
    for line in process.stderr:  # read as it comes: the progress line of update 10 is timed
        lines.append(line)
        if startup is None and re.match(rf"step\s+{UPDATES}\b", line):
            startup = time.time() - start
    process.wait()
    wall = time.time() - start
    text = "".join(lines)
    peak = _PEAK.search(text)
    if process.returncode != 0 or peak is None or startup is None:
        raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}):\n{text[-3000:]}")
    return int(peak.group(1)) / 1024, startup, wall


def _peak_and_wall(command):
    """Runs a command line of the package under ``/usr/bin/time -v``: (peak RSS in MiB, wall s)."""
    command = ["/usr/bin/time", "-v", sys.executable, "-m"] + command
    env = dict(os.environ, PYTHONPATH=FLAGS.repository, TF_CPP_MIN_LOG_LEVEL="2")
    start = time.time()
    result = subprocess.run(command, capture_output=True, text=True, cwd=FLAGS.repository, env=env)
    peak = _PEAK.search(result.stderr)
    if result.returncode != 0 or peak is None:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return int(peak.group(1)) / 1024, time.time() - start


def run_translate(model_dir, input_file):
    """One ``bahdanau-translate`` of ``input_file``: (peak RSS in MiB, wall seconds)."""
    return _peak_and_wall(["bahdanau_tf.cli.translate", f"--model_dir={model_dir}",
                           f"--input_file={input_file}", f"--output_file={input_file}.out"]
                          + list(FLAGS.translate_flags))


def translate_rows(model_dir, sources, scratch):
    """bahdanau-translate's peak RSS on inputs of `--translate_lines` lines (``sources`` repeated)."""
    rows = []
    for size in sorted(int(s) for s in FLAGS.translate_lines):
        input_file = os.path.join(scratch, f"lines_{size}.txt")
        with open(input_file, "w", encoding="utf-8") as handle:
            for i in range(size):
                handle.write(sources[i % len(sources)] + "\n")
        peak, wall = run_translate(model_dir, input_file)
        rows.append({"lines": size, "peak_rss_mib": round(peak), "wall_seconds": round(wall, 1),
                     "load_average": round(os.getloadavg()[0], 1)})
        print(f"{size:>10,} lines  translate peak RSS {peak:7.0f} MiB  wall {wall:6.1f} s", flush=True)
        os.remove(input_file)
        os.remove(input_file + ".out")
    return rows


def run_evaluate(model_dir, source_file, reference_file, output_dir):
    """One ``bahdanau-evaluate`` of a test set in two files: (peak RSS in MiB, wall seconds)."""
    return _peak_and_wall(["bahdanau_tf.cli.evaluate", f"--model_dir={model_dir}",
                           f"--source_file={source_file}", f"--reference_file={reference_file}",
                           f"--output_dir={output_dir}"] + EVALUATE_FLAGS)


def evaluate_rows(model_dir, pairs, scratch):
    """bahdanau-evaluate's peak RSS on test sets of `--evaluate_lines` pairs (``pairs`` repeated)."""
    rows = []
    for size in sorted(int(s) for s in FLAGS.evaluate_lines):
        sources, references = (os.path.join(scratch, f"test_{size}.{side}") for side in ("src", "ref"))
        with open(sources, "w", encoding="utf-8") as source, \
                open(references, "w", encoding="utf-8") as reference:
            for i in range(size):
                source.write(pairs[i % len(pairs)][0] + "\n")
                reference.write(pairs[i % len(pairs)][1] + "\n")
        load = os.getloadavg()[0]
        peak, wall = run_evaluate(model_dir, sources, references, os.path.join(scratch, "evaluation"))
        rows.append({"lines": size, "peak_rss_mib": round(peak), "wall_seconds": round(wall, 1),
                     "load_average": round(load, 1)})
        print(f"{size:>10,} pairs  evaluate peak RSS {peak:7.0f} MiB  wall {wall:6.1f} s", flush=True)
        for path in (sources, references):
            os.remove(path)
        shutil.rmtree(os.path.join(scratch, "evaluation"), ignore_errors=True)
    return rows


def main(argv):
    del argv
    sys.path.insert(0, FLAGS.repository)
    from bahdanau_tf import corpora

    train = corpora.load_corpus("bible-en-es", split="train").pairs()
    revision = subprocess.run(["git", "-C", FLAGS.repository, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    rows, translated, evaluated = [], [], []
    scratch = tempfile.mkdtemp(prefix="corpus_scale_")
    try:
        for size in sorted(int(s) for s in FLAGS.sizes):
            corpus = os.path.join(scratch, f"pairs_{size}.tsv")
            write_corpus(corpus, train, size)
            megabytes = os.path.getsize(corpus) / 2**20
            load = os.getloadavg()[0]  # the shared machine's load as the run starts
            peak, startup, wall = run_training(corpus, os.path.join(scratch, f"run_{size}"))
            rows.append({"pairs": size, "file_mib": round(megabytes, 1), "peak_rss_mib": round(peak),
                         "startup_seconds": round(startup, 1), "wall_seconds": round(wall, 1),
                         "load_average": round(load, 1)})
            print(f"{size:>10,} pairs  {megabytes:7.0f} MiB file  peak RSS {peak:7.0f} MiB  "
                  f"start-up {startup:6.1f} s  wall {wall:6.1f} s", flush=True)
            os.remove(corpus)
            if FLAGS.translate_lines and len(rows) == 1:
                translated = translate_rows(os.path.join(scratch, f"run_{size}"),
                                            [s for s, _ in train], scratch)
            if FLAGS.evaluate_lines and len(rows) == 1:
                evaluated = evaluate_rows(os.path.join(scratch, f"run_{size}"), train, scratch)
            shutil.rmtree(os.path.join(scratch, f"run_{size}"), ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    first, last = rows[0], rows[-1]
    ratios = {"peak_rss": round(last["peak_rss_mib"] / first["peak_rss_mib"], 2),
              "startup": round(last["startup_seconds"] / first["startup_seconds"], 2)}
    print(f"{last['pairs']:,} / {first['pairs']:,} pairs: peak RSS x{ratios['peak_rss']}, "
          f"start-up x{ratios['startup']}  (CPU: {cpu_model()}, {os.cpu_count()} cores, "
          f"code {revision or FLAGS.repository})")
    result = {"label": FLAGS.label, "revision": revision, "cpu": cpu_model(),
              "cores": os.cpu_count(), "updates": UPDATES, "train_flags": FLAGS.train_flags,
              "rows": rows, "ratios_last_to_first": ratios,
              "translate_flags": FLAGS.translate_flags, "translate_rows": translated,
              "evaluate_flags": EVALUATE_FLAGS, "evaluate_rows": evaluated}
    if len(translated) > 1:
        ratios["translate_peak_rss"] = round(translated[-1]["peak_rss_mib"] / translated[0]["peak_rss_mib"], 2)
        print(f"translate {translated[-1]['lines']:,} / {translated[0]['lines']:,} lines: peak RSS "
              f"x{ratios['translate_peak_rss']}")
    if len(evaluated) > 1:
        ratios["evaluate_peak_rss"] = round(evaluated[-1]["peak_rss_mib"] / evaluated[0]["peak_rss_mib"], 2)
        print(f"evaluate {evaluated[-1]['lines']:,} / {evaluated[0]['lines']:,} pairs: peak RSS "
              f"x{ratios['evaluate_peak_rss']}")
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
    with open(FLAGS.output, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
        handle.write("\n")


if __name__ == "__main__":
    app.run(main)
