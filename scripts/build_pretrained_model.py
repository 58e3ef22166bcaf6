#!/usr/bin/env python3
"""Rebuilds the pretrained model that ships with the package, from the embedded corpus.

    python scripts/build_pretrained_model.py                 # bible-en-es-small, ~20 min on 2 cores
    python scripts/build_pretrained_model.py --run_dir=/tmp/pretrained_run --max_steps=2000

Three stages; training is skipped when the run exists (so an interrupted build resumes):

1. trains the default preset (`bahdanau_tf.presets.DEFAULT`: RNNsearch with the conditional GRU
   decoder, at CPU size) with its recipe on the embedded Bible corpus, English -> Spanish, with a
   fixed seed and a fixed number of updates (``--max_steps``, over which the learning rate falls
   to zero; no time budget; float32), the same as ``bahdanau-train --preset=rnnsearch-cgru-small
   --max_minutes=0 --max_steps=N --seed=S --precision=float32``; the trainer averages its last
   checkpoints and keeps the better of best/ and the average;
2. writes the model translation uses (``best/``) into ``bahdanau_tf/pretrained/<name>/`` as
   float16 weights in Keras's ``model.weights.h5`` (`bahdanau_tf.pretrained.write_weights`), with
   its vocabularies and a ``model.json`` that records the command, the seed, the package
   version, the date, the weights' SHA-256 and the alignment rule the run chose on dev (the
   model card, ``README.md``, is kept: tests/test_figures.py then names the figures that moved);
3. scores the packaged model (its float16 weights loaded in float32, as users get it) on the
   corpus's test split with ``bahdanau-evaluate`` (beam 5) and writes the BLEU, date and CPU
   to ``benchmarks/results/pretrained_<name>.json``.

Training is not bitwise reproducible across CPUs and library versions; the same command on the
same machine gives the same configuration, data order and number of updates.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

NAME = "bible-en-es-small"
CARD = "README.md"  #: the model card beside the weights, kept by a rebuild


def _run(args, env):
    print("+ " + " ".join(args), file=sys.stderr, flush=True)
    subprocess.run(args, check=True, env=env)


def _train_command(run_dir, max_steps, seed):
    from bahdanau_tf import presets

    return [sys.executable, "-m", "bahdanau_tf.cli.train", f"--preset={presets.DEFAULT}", "--direction=en-es",
            "--max_minutes=0", f"--max_steps={max_steps}", f"--seed={seed}",
            "--precision=float32", f"--output_dir={run_dir}"]


def write_compact(run_dir, target, recipe):
    """Writes the model translation uses of ``run_dir`` (best/) into ``target``: model.json
    (float32, the run's settings and ``recipe``), the vocabularies, float16 weights."""
    from bahdanau_tf import alignment, model_directory, models, pretrained  # noqa: F401 (models: the classes)

    loaded = model_directory.load_model_directory(run_dir, dtype="float32")
    run = model_directory.read_model_config(run_dir)
    settings = {key: run.get("settings", {}).get(key)
                for key in ("corpus", "direction", "preset", "tokenizer", "training")}
    os.makedirs(target, exist_ok=True)
    digest = pretrained.write_weights(os.path.join(target, pretrained.WEIGHTS), loaded.model)
    settings["pretrained"] = {**recipe, "checkpoint": os.path.relpath(loaded.checkpoint, run_dir),
                              "weights_sha256": digest}
    model_directory.write_model_config(target, loaded.model, loaded.source_tokenizer,
                                       loaded.target_tokenizer, settings, device=run.get("device"))
    chosen = alignment.read_chosen_rule(run_dir)  # the extraction rule bahdanau-train chose on dev
    if chosen.chosen:
        alignment.save_chosen_rule(target, chosen)


def _read_card(target):
    """The model card (`CARD`) of the model being rebuilt, kept across the rebuild; None if none."""
    try:
        with open(os.path.join(target, CARD), encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run_dir", default=os.path.join(ROOT, "pretrained_run"),
                        help="The training run's model directory (kept; resumed if it exists).")
    parser.add_argument("--max_steps", type=int, default=2000, help="Training updates.")
    parser.add_argument("--seed", type=int, default=1234, help="The trainer's seed.")
    parser.add_argument("--only_train", action="store_true", help="Stop after stage 1.")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = _train_command(args.run_dir, args.max_steps, args.seed)
    if not os.path.exists(os.path.join(args.run_dir, "report.json")):
        _run(command, env)
    if args.only_train:
        return 0

    import bahdanau_tf
    from bahdanau_tf import devices, pretrained

    # model.json records the version that wrote it: the installed metadata must be this checkout's
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as handle:
        checkout_version = re.search(r'^version = "([^"]+)"', handle.read(), re.M).group(1)
    if bahdanau_tf.__version__ != checkout_version:
        sys.exit(f"bahdanau_tf's installed metadata says {bahdanau_tf.__version__}, this checkout is "
                 f"{checkout_version}: run pip install -e . first (model.json records the version).")
    target = pretrained.path(NAME)
    card = _read_card(target)
    # written from the run every time (seconds): an earlier build's package is never scored as this one's
    shutil.rmtree(target, ignore_errors=True)
    recipe = {"command": "bahdanau-train " + " ".join(command[3:-1]),
              "script": "python scripts/build_pretrained_model.py "
                        f"--max_steps={args.max_steps} --seed={args.seed}",
              "seed": args.seed, "max_steps": args.max_steps,
              "version": bahdanau_tf.__version__,
              "date": datetime.date.today().isoformat()}
    write_compact(args.run_dir, target, recipe)
    if card is not None:  # its figures are the results file's: tests/test_figures.py says which changed
        with open(os.path.join(target, CARD), "w", encoding="utf-8") as handle:
            handle.write(card)
    result_file = os.path.join(ROOT, "benchmarks", "results", f"pretrained_{NAME}.json")
    evaluation = os.path.join(args.run_dir, "pretrained_evaluation")
    _run([sys.executable, "-m", "bahdanau_tf.cli.evaluate", f"--model_dir={target}",
          f"--output_dir={evaluation}", "--split=test", "--attention_plots=0"], env)
    with open(os.path.join(evaluation, "report.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    with open(os.path.join(target, "model.json"), encoding="utf-8") as handle:
        recorded = json.load(handle)["settings"]["pretrained"]
    result = {"model": NAME, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "cpu": devices.device_description(),
              "recipe": recorded, "evaluation": report}
    os.makedirs(os.path.dirname(result_file), exist_ok=True)
    with open(result_file, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
    print(f"Wrote {target} and {result_file}.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
