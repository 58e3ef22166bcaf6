"""The input side of bahdanau-translate on a 10,000-line input: a file and a fast pipe are still
read 10,000 lines at a time (no loss of throughput), a pipe that pauses is answered line by line.

``bahdanau-translate`` reads its input with `bahdanau_tf.corpora.line_chunks(...,
interactive=True)` and translates each chunk as one call (sorted by length into batches): the
translation's throughput depends on the chunks it gets. This benchmark reads the first
``--lines`` source verses of the embedded corpus through ``line_chunks`` as the command does,
with a consumer that spends ``--ms_per_line`` per line of each chunk (a stand-in for the
translation, so that a fast writer fills the pipe meanwhile), from a file and from a ``cat``
pipe, with ``interactive`` off and on, in interleaved rounds; and a writer that pauses after
each of 5 lines. It prints the chunk sizes and the seconds per variant and writes
``benchmarks/results/translate_input.json`` with the date and the CPU.

``--long_lines``: instead, the CPU seconds of reading one line of 8 and 32 MB (no line end
before the last byte) through the same reader, against plain iteration over the file, in
interleaved rounds (``benchmarks/results/translate_input_long_line.json``): the reader's time
must grow linearly with the line's length.

    flock /work/locks/cpu.lock python benchmarks/translate_input.py
    flock /work/locks/cpu.lock python benchmarks/translate_input.py --long_lines
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

# the reading process: line_chunks over stdin or a file, a pause per line of each chunk
CHILD = """
import json, sys, time
from bahdanau_tf.corpora import line_chunks
path, interactive, ms = sys.argv[1] or None, sys.argv[2] == "1", float(sys.argv[3])
start, sizes = time.perf_counter(), []
for chunk in line_chunks(path, 10000, interactive=interactive):
    sizes.append(len(chunk))
    time.sleep(ms * len(chunk) / 1000)
print(json.dumps({"seconds": time.perf_counter() - start, "chunks": sizes}))
"""
# one long line's CPU seconds: the command's reader, or plain iteration over the file
LONG_LINE_CHILD = """
import json, sys, time
from bahdanau_tf.corpora import line_chunks
path, reader = sys.argv[1], sys.argv[2]
start = time.process_time()
if reader == "line_chunks":
    lengths = [len(line) for chunk in line_chunks(path, 10000, interactive=True) for line in chunk]
else:
    with open(path, "rb") as handle:
        lengths = [len(line) for line in handle]
print(json.dumps({"cpu_seconds": time.process_time() - start, "lengths": lengths}))
"""
PAUSING_WRITER = "import sys, time\nfor i in range(5):\n    print(f'line {i}', flush=True)\n    time.sleep(0.5)\n"


def _read(source, mode, interactive, ms):
    env = dict(os.environ, PYTHONPATH=ROOT)
    command = [sys.executable, "-c", CHILD, source if mode == "file" else "", "1" if interactive else "0",
               str(ms)]
    if mode == "file":
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    else:
        writer = ([sys.executable, "-c", PAUSING_WRITER] if mode == "pausing pipe"
                  else ["cat", source])
        feeder = subprocess.Popen(writer, stdout=subprocess.PIPE)
        result = subprocess.run(command, env=env, stdin=feeder.stdout, capture_output=True,
                                text=True, check=True)
        feeder.stdout.close()
        feeder.wait()
    return json.loads(result.stdout.strip().splitlines()[-1])


def _long_lines(rounds, output):
    """``--long_lines``: CPU seconds of one 8 MB and one 32 MB line, reader against iteration."""
    from bahdanau_tf import devices
    from _machines import write_json

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for megabytes in (8, 32):
            path = os.path.join(scratch, f"{megabytes}.txt")
            with open(path, "wb") as handle:
                handle.write(b"word " * (megabytes * 2**20 // 5))
            seconds = {"line_chunks": [], "file iteration": []}
            for _ in range(rounds):  # interleaved
                for reader in seconds:
                    result = subprocess.run([sys.executable, "-c", LONG_LINE_CHILD, path, reader],
                                            env=dict(os.environ, PYTHONPATH=ROOT), check=True,
                                            capture_output=True, text=True)
                    run = json.loads(result.stdout.strip().splitlines()[-1])
                    assert len(run["lengths"]) == 1, run["lengths"]
                    seconds[reader].append(run["cpu_seconds"])
            rows += [{"megabytes": megabytes, "reader": reader, "cpu_seconds": values}
                     for reader, values in seconds.items()]
    print(f"{'MB':>3} {'reader':<15} {'median CPU s':>12}")
    for row in rows:
        print(f"{row['megabytes']:>3} {row['reader']:<15} {statistics.median(row['cpu_seconds']):12.3f}")
    write_json(output, {"benchmark": "translate_input --long_lines", "date": datetime.datetime.now(
        datetime.timezone.utc).isoformat(), "machine": devices.benchmark_record(), "rounds": rounds,
        "command": " ".join(sys.argv), "rows": rows})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ms_per_line", type=float, default=1.0)
    parser.add_argument("--output", default=os.path.join(ROOT, "benchmarks", "results",
                                                         "translate_input.json"))
    parser.add_argument("--long_lines", action="store_true",
                        help="time one 8 MB and one 32 MB line instead (CPU seconds)")
    args = parser.parse_args()
    if args.long_lines:
        return _long_lines(args.rounds, os.path.join(ROOT, "benchmarks", "results",
                                                     "translate_input_long_line.json"))
    from bahdanau_tf import corpora, devices
    from _machines import write_json

    verses = corpora.load_corpus("bible-en-es", split="train").sources
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        source = os.path.join(scratch, "input.txt")
        with open(source, "w", encoding="utf-8") as handle:
            handle.writelines(verses[i % len(verses)] + "\n" for i in range(args.lines))
        variants = [(mode, interactive) for mode in ("file", "pipe") for interactive in (False, True)]
        for _ in range(args.rounds):  # interleaved: the machine's load hits every variant alike
            for mode, interactive in variants:
                run = _read(source, mode, interactive, args.ms_per_line)
                results.setdefault((mode, interactive), []).append(run)
        results[("pausing pipe", True)] = [_read(source, "pausing pipe", True, args.ms_per_line)]
    rows = [{"input": mode, "interactive": interactive,
             "seconds": [run["seconds"] for run in runs], "chunks": runs[-1]["chunks"]}
            for (mode, interactive), runs in results.items()]
    print(f"{'input':<13} {'interactive':<11} {'median s':>9}  chunk sizes (last round)")
    for row in rows:
        print(f"{row['input']:<13} {str(row['interactive']):<11} {statistics.median(row['seconds']):9.2f}  "
              f"{row['chunks'][:8]}{' ...' if len(row['chunks']) > 8 else ''}")
    write_json(args.output, {"benchmark": "translate_input", "date": datetime.datetime.now(
        datetime.timezone.utc).isoformat(), "machine": devices.benchmark_record(),
        "lines": args.lines, "rounds": args.rounds, "ms_per_line": args.ms_per_line,
        "command": " ".join(sys.argv), "rows": rows})


if __name__ == "__main__":
    main()
