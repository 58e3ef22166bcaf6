"""Hostile but realistic command lines, table-driven: each must end with one clear line and its
documented exit code (README, "Command lines"), never a traceback, and write nothing. The rows
run one after another in one process (helpers.run_commands), each through its command's entry
point with its own argv, stdin and captured stdout/stderr: TensorFlow is imported once.

Add a row when a new way to misuse a command is found. The serving signatures' hostile inputs
are in tests/test_export.py (`HOSTILE_REQUESTS`), the data loaders' in tests/test_data.py.
"""

import errno
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from bahdanau_tf import lexicon, model_directory, pretrained
from bahdanau_tf.models import RNNEncDec
from helpers import (env_without_tensorflow_logging, random_model, run_commands, save_model_dir,
                     toy_tokenizers, training_run)

# every test here starts a Python process (or uses a module fixture that does)
pytestmark = pytest.mark.subprocess

# the training flags of the guided alignment rows (the corpus: {pairs_tsv})
GUIDED = ["--tsv={pairs_tsv}", "--preset=tiny", "--tokenizer=word", "--vocabulary_size=100",
          "--max_steps=1", "--max_minutes=0"]
# {pairs_tsv}'s pairs: word i translates word i
GUIDED_PAIRS = [("a dog and a cat ran to the house", "un perro y un gato corrieron a la casa"),
                ("the cat", "el gato"), ("the dog ran", "el perro corrió"), ("a house", "una casa")]

# (name, command, arguments, stdin, exit code, a phrase the one-line error must hold)
# {model}, {damaged}, {tmp}, {three_columns}, {bad_utf8}, ... are filled in per run ({encdec}: a
# model without attention).
CASES = [
    ("train: zero batch", "train", ["--batch_size=0"], "", 2, "not a positive integer"),
    ("train: NaN learning rate", "train", ["--learning_rate=nan"], "", 2, "finite"),
    ("train: infinite budget", "train", ["--max_minutes=inf"], "", 2, "finite"),
    ("train: unknown preset", "train", ["--preset=huge", "--output_dir={tmp}/a"], "", 2, "Unknown preset 'huge'"),
    ("train: missing TSV", "train", ["--tsv={tmp}/missing.tsv", "--output_dir={tmp}/b"], "", 2, "No such file"),
    ("train: 3-column TSV", "train", ["--tsv={three_columns}", "--output_dir={tmp}/c", "--preset=tiny"], "", 2,
     "line 2 has 3 tab-separated column"),
    ("train: half a file pair", "train", ["--source_file={three_columns}", "--output_dir={tmp}/d"], "", 2,
     "go together"),
    ("train: output dir is a file", "train", ["--output_dir={three_columns}"], "", 2, "is a file"),
    ("train: stray argument", "train", ["oops"], "", 2, "Unexpected arguments"),
    ("train: dropout of one", "train", ["--dropout=1", "--output_dir={tmp}/dropout"], "", 2, "--dropout"),
    ("train: tied embeddings of a Seq2Seq", "train", ["--preset=seq2seq-small", "--tie_embeddings",
                                                      "--output_dir={tmp}/tied_seq2seq"], "", 2, "is a Seq2Seq"),
    ("train: untied embeddings of a Seq2Seq", "train", ["--preset=seq2seq-small", "--notie_embeddings",
                                                        "--output_dir={tmp}/untied_seq2seq"], "", 2,
     "--notie_embeddings is for RNNsearch and RNNencdec; --preset=seq2seq-small is a Seq2Seq"),
    ("train: the budget rule and a dropout of one's own", "train",
     ["--regularization=budget", "--dropout=0", "--output_dir={tmp}/rule_and_dropout"], "", 2,
     "--regularization=budget chooses the dropout itself; --dropout gives it"),
    ("train: the budget rule without a budget", "train",
     ["--regularization=budget", "--max_minutes=0", "--output_dir={tmp}/rule_no_budget"], "", 2,
     "--regularization=budget plans from the budget"),
    ("train: tied embeddings of other widths", "train", ["--preset=rnnsearch-50", "--tie_embeddings",
                                                         "--output_dir={tmp}/tied_50"], "", 2,
     "--preset=rnnsearch-50 has 500 and 620"),
    ("train: label smoothing of one", "train", ["--label_smoothing=1", "--output_dir={tmp}/smoothing"], "",
     2, "`label_smoothing` must be in [0, 1)"),
    ("train: plateau without a dev set", "train", ["--schedule=plateau", "--tsv={three_columns}",
                                                   "--output_dir={tmp}/plateau"], "", 2, "needs a dev set"),
    ("translate: no model", "translate", ["--model_dir={tmp}/nowhere"], "hello\n", 2, "does not exist"),
    ("translate: zero beam", "translate", ["--model_dir={model}", "--beam_size=0"], "a\n", 2, "range [1, 64]"),
    ("translate: nbest above beam", "translate", ["--model_dir={model}", "--beam_size=2", "--nbest=3"], "a\n",
     2, "exceeds --beam_size"),
    ("translate: NaN length penalty", "translate", ["--model_dir={model}", "--length_penalty=nan"], "a\n", 2,
     "finite"),
    ("translate: output is a directory", "translate", ["--model_dir={model}", "--output_file={tmp}"], "a\n", 2,
     "is a directory"),
    ("translate: invalid UTF-8", "translate", ["--model_dir={model}", "--input_file={bad_utf8}"], "", 2,
     "line 2 is not valid UTF-8"),
    ("translate: invalid UTF-8, to a file", "translate", ["--model_dir={model}", "--input_file={bad_utf8}",
                                                          "--output_file={tmp}/out.txt"], "", 2,
     "line 2 is not valid UTF-8"),
    ("translate: truncated vocabulary", "translate", ["--model_dir={damaged}"], "the cat\n", 2,
     "has 8 tokens but the model was trained with 16"),
    ("evaluate: no model", "evaluate", ["--model_dir={tmp}/nowhere"], "", 2, "does not exist"),
    ("export: no export dir", "export", ["--model_dir={model}"], "", 2, "--export_dir is required"),
    ("data: CR-only TSV is read, stray tab refused", "data", ["--tsv={three_columns}"], "", 2,
     "line 2 has 3 tab-separated column"),
    # an output directory below an existing file: refused before any work
    ("train: output dir below a file", "train", ["--output_dir={three_columns}/sub"], "", 2,
     "three.tsv' is a file, not a directory"),
    ("export: export dir below a file", "export", ["--model_dir={model}",
                                                   "--export_dir={three_columns}/sub"], "", 2,
     "three.tsv' is a file, not a directory"),
    ("translate: output file below a file", "translate", ["--model_dir={model}",
                                                          "--output_file={three_columns}/out.txt"],
     "a\n", 2, "three.tsv' is a file, not a directory"),
    # one line, and nothing before or after it: no fallback warning, no TensorFlow warning
    ("translate: model.json edited to another shape", "translate", ["--model_dir={reshaped}"],
     "a\n", 2, "does not hold the model of"),
    ("translate: no checkpoint files", "translate", ["--model_dir={no_checkpoint_files}"], "a\n",
     2, "ckpt-1.index missing"),
    ("evaluate: output dir below a file", "evaluate", ["--model_dir={model}",
                                                       "--output_dir={three_columns}/sub"], "", 2,
     "three.tsv' is a file, not a directory"),
    # damaged checkpoint data (the .index is whole): the file is named, for every reader
    ("translate: zeroed checkpoint data", "translate", ["--model_dir={zeroed}"], "the cat\n", 2,
     "ckpt-1.data-00000-of-00001 is missing or damaged"),
    ("translate: truncated checkpoint data", "translate", ["--model_dir={truncated}",
                                                           "--checkpoint=latest"], "the cat\n", 2,
     "ckpt-1.data-00000-of-00001 is missing or damaged"),
    ("evaluate: flipped bytes in best/", "evaluate", ["--model_dir={flipped}", "--max_sentences=2",
                                                      "--output_dir={tmp}/evaluation1"], "", 2,
     "best/ckpt-1' is damaged: ckpt-1.data-00000-of-00001 is missing or damaged"),
    ("export: truncated checkpoint data", "export", ["--model_dir={truncated}",
                                                     "--export_dir={tmp}/export"], "", 2,
     "ckpt-1.data-00000-of-00001 is missing or damaged"),
    ("train: resume from truncated checkpoint data", "train",
     ["--output_dir={truncated}", "--preset=tiny", "--max_steps=1", "--max_minutes=0"], "", 2,
     "ckpt-1.data-00000-of-00001 is missing or damaged"),
    # a run of another model class: refused, and the run directory gets nothing (no .lock)
    ("train: another model class in a run directory", "train",
     ["--output_dir={run}", "--preset=rnnencdec-tiny", "--max_steps=1", "--max_minutes=0"], "", 2,
     "holds a different model (class RNNSearch != RNNEncDec"),
    # a saved model (save_to_preset) has no training state to resume; the run adds nothing to it
    ("train: resume a save_to_preset directory", "train",
     ["--output_dir={preset}", "--preset=tiny", "--max_steps=1", "--max_minutes=0"], "", 2,
     "holds a saved model without training state"),
    ("train: resume a directory save_to_preset wrote before model.weights.h5", "train",
     ["--output_dir={old_preset}", "--preset=tiny", "--max_steps=1", "--max_minutes=0"], "", 2,
     "old_preset' holds a saved model without training state (no optimizer or step): it cannot be resumed"),
    # a model.json cut short (a full disk, a copy interrupted) is named
    ("translate: truncated model.json", "translate", ["--model_dir={cut_config}"], "a\n", 2,
     "model.json' is damaged: not valid JSON"),
    # a directory of a later release's layout: refused, naming its writer's versions and ours
    ("translate: a newer model directory format", "translate", ["--model_dir={newer_format}"], "a\n",
     2, "format 99, written by bahdanau_tf 9.0.0 with TensorFlow 9.1.0; this bahdanau_tf"),
    ("evaluate: empty model.json", "evaluate", ["--model_dir={empty_config}",
                                                "--output_dir={tmp}/evaluation2"], "", 2,
     "model.json' is damaged: not valid JSON"),
    # bahdanau-average ({run}: checkpoints at steps 1 and 2; {run_damaged}: ckpt-2's data cut)
    ("average: more checkpoints than kept", "average", ["--model_dir={run}", "--last=3"], "", 2,
     "Cannot average the last 3 checkpoints"),
    ("average: no --last", "average", ["--model_dir={run}"], "", 2, "--last is required"),
    ("average: output is a non-empty directory", "average", ["--model_dir={run}", "--last=1",
                                                            "--output={run}"], "", 2,
     "is not empty: write the averaged model into a new or empty"),
    ("average: damaged checkpoint data", "average", ["--model_dir={run_damaged}", "--last=2"], "", 2,
     "ckpt-2' is damaged"),
    ("translate: no averaged checkpoint", "translate", ["--model_dir={run}", "--checkpoint=averaged"],
     "a\n", 2, "no averaged/ checkpoint"),
    # [UNK] replacement: the dictionary is read and checked before any model is loaded
    ("translate: missing UNK dictionary", "translate",
     ["--model_dir={model}", "--replace_unk", "--unk_dictionary={tmp}/missing.tsv"], "a\n", 2,
     "UNK dictionary not found"),
    ("evaluate: UNK dictionary not UTF-8", "evaluate",
     ["--model_dir={model}", "--replace_unk", "--unk_dictionary={bad_utf8}",
      "--output_dir={tmp}/evaluation3"], "", 2, "bad.txt' is not UTF-8"),
    ("export: UNK dictionary without tabs", "export",
     ["--model_dir={model}", "--unk_dictionary={model}/source_vocabulary/vocabulary.txt",
      "--export_dir={tmp}/export2"], "", 2, "line 1 is not source<TAB>target"),
    ("translate: --replace_unk without attention", "translate", ["--model_dir={encdec}",
                                                                 "--replace_unk"], "a\n", 2,
     "need models with attention"),
    # candidate lists read the model directory's lexicon.tsv, checked before any translation
    ("translate: --candidate_lists without a lexicon", "translate",
     ["--model_dir={model}", "--candidate_lists"], "a\n", 2, "has no lexicon.tsv"),
    ("evaluate: --candidate_lists with a damaged lexicon", "evaluate",
     ["--model_dir={bad_lexicon}", "--candidate_lists", "--output_dir={tmp}/evaluation4"], "", 2,
     "lexicon.tsv' is damaged: line 2 is not source<TAB>target<TAB>score"),
    ("export: more candidates per word than the lexicon has", "export",
     ["--model_dir={lexicon}", "--candidate_lists", "--candidate_per_word=3",
      "--export_dir={tmp}/export3"], "", 2, "exceeds the 2 translations per token"),
    # a flag file is UTF-8 text: the file and the line
    ("train: a flag file that is not UTF-8", "train", ["--flagfile={latin1_flags}"], "", 2,
     "latin1_flags.txt' line 2 is not valid UTF-8"),
    # guided alignment: a links file that does not match its pairs is refused before any work
    # ({pairs_tsv}: 4 pairs of 9, 2, 3 and 2 words a side)
    *[(f"train: guided alignment, {name} links", "train",
       [*GUIDED, f"--guided_alignment={{tmp}}/{name}.links", f"--output_dir={{tmp}}/g_{name}"], "",
       2, phrase) for name, phrase in (
          ("shifted", "line 2 links 2-2, but training pair 2 has 2 source and 2 target words"),
          ("one_based", "line 1 links 9-9, but training pair 1 has 9 source and 9 target words"),
          ("out_of_range", "line 1 links 50-50, but training pair 1 has 9 source"),
          ("empty", "no word links for the 4 training pairs"),
          ("one_too_many", "has 5 lines, the training corpus 4 pairs"))],
    # a flag that does nothing where it is given is refused, not ignored
    ("train: guided alignment weight without links", "train",
     ["--guided_alignment_weight=0.5", "--output_dir={tmp}/g_weight"], "", 2,
     "--guided_alignment_weight does nothing without --guided_alignment=FILE"),
    ("train: guided alignment unaligned without links", "train",
     ["--guided_alignment_unaligned=end", "--output_dir={tmp}/g_unaligned"], "", 2,
     "--guided_alignment_unaligned does nothing without --guided_alignment=FILE"),
    ("train: a guided run resumed without its links", "train",
     ["--output_dir={guided_run}", "--preset=tiny", "--max_steps=1", "--max_minutes=0"], "", 2,
     "was trained with --guided_alignment="),
    ("data: --alignment_file without align", "data", ["--alignment_file={tmp}/train.links"], "", 2,
     "--alignment_file does nothing without `align`"),
    ("data: --symmetrization without align", "data", ["--symmetrization=union"], "", 2,
     "--symmetrization does nothing without `align`"),
    ("data: --json with align", "data", ["align", "--json"], "", 2, "--json does nothing with `align`"),
    ("translate: --checkpoint=averaged on the shipped model", "translate",
     ["--model_dir=bible-en-es-small", "--checkpoint=averaged"], "a\n", 2,
     "holds one set of weights (model.weights.h5), with no averaged/ checkpoint"),
    ("average: the shipped model", "average", ["--model_dir=bible-en-es-small", "--last=1"], "", 2,
     "holds one set of weights (model.weights.h5), no training checkpoints to average"),
    # a save_to_preset directory whose model.weights.h5 is cut short (no SHA-256 to check it)
    ("translate: a saved model's model.weights.h5 cut short", "translate", ["--model_dir={preset_cut}"],
     "a\n", 2, "model.weights.h5' is missing or damaged"),
    # refused by model.json, before the loading's fallback warning (no best/ checkpoint)
    ("translate: --alignments without attention", "translate", ["--model_dir={encdec}",
                                                                "--alignments"], "a\n", 2,
     "--alignments needs models with attention (RNNsearch)"),
    # a copy of the shipped model whose model.weights.h5 is damaged, or the format before 0.3
    *[(f"translate: {name} model.weights.h5", "translate", [f"--model_dir={{{name}_weights}}"], "a\n", 2,
       "model.weights.h5' is damaged") for name in ("empty", "truncated", "random")],
    ("translate: a shipped model's copy without its model.weights.h5", "translate",
     ["--model_dir={shipped_without_weights}"], "a\n", 2,
     "model.weights.h5' is missing: the weights of the saved model"),
    ("translate: a shipped model of 0.2 (weights.npz)", "translate", ["--model_dir={npz_weights}"], "a\n", 2,
     "keeps its weights in weights.npz, the shipped models' format before bahdanau_tf 0.3"),
    # an output is a directory of its own: empty or the current one ({tmp}, where the rows run)
    # would mix the output with what is there (the table checks {tmp} gets nothing)
    ("average: empty --output", "average", ["--model_dir={run}", "--last=1", "--output="], "", 2,
     "--output='' is empty: name a directory of its own"),
    ("average: --output the current directory", "average", ["--model_dir={run}", "--last=1",
                                                           "--output=."], "", 2,
     "--output='.' is the current directory"),
    ("train: empty --output_dir", "train", ["--output_dir=", "--preset=tiny", "--max_steps=1",
                                            "--max_minutes=0"], "", 2, "--output_dir='' is empty"),
    ("train: --output_dir the current directory", "train", ["--output_dir={tmp}", "--preset=tiny"],
     "", 2, "is the current directory"),
    ("evaluate: empty --output_dir", "evaluate", ["--model_dir={model}", "--output_dir="], "", 2,
     "--output_dir='' is empty"),
    ("export: empty --export_dir", "export", ["--model_dir={model}", "--export_dir="], "", 2,
     "--export_dir='' is empty"),
    ("export: --export_dir the current directory", "export", ["--model_dir={model}", "--export_dir=."],
     "", 2, "--export_dir='.' is the current directory"),
    ("data: empty --vocabulary_dir", "data", ["--vocabulary_dir="], "", 2, "--vocabulary_dir='' is empty"),
    ("translate: empty --output_file", "translate", ["--model_dir={model}", "--output_file="], "a\n", 2,
     "--output_file= is empty"),
    # one source of weights, checked against the model: another preset's model.weights.h5 (the
    # cgru's, whose extra cell weights Keras alone would skip), a run that also holds one
    ("translate: another preset's model.weights.h5", "translate", ["--model_dir={other_weights}"],
     "a\n", 2, "holds 26 weights where the model has 23: 3 not of this model"),
    ("translate: a run directory holding a model.weights.h5 too", "translate",
     ["--model_dir={run_with_weights}", "--checkpoint=latest"], "a\n", 2,
     "holds two sources of weights, model.weights.h5 and training checkpoints (checkpoints/)"),
    *[(f"{command}: a run directory holding a model.weights.h5 too", command,
       ["--model_dir={run_with_weights}", "--last=1"] if command == "average" else
       ["--output_dir={run_with_weights}", "--preset=tiny", "--max_steps=2", "--max_minutes=0"], "", 2,
       "holds two sources of weights, model.weights.h5 and training checkpoints (checkpoints/)")
      for command in ("average", "train")],
    ("translate: a saved model without its model.weights.h5", "translate",
     ["--model_dir={preset_without_weights}"], "a\n", 2,
     "model.weights.h5' is missing: the weights of the saved model"),
    # every spelling of a flag file absl reads, nested ones and ~ too
    *[(f"train: a flag file that is not UTF-8, as {' '.join(spelling)}", "train", list(spelling), "",
       2, "latin1_flags.txt' line 2 is not valid UTF-8")
      for spelling in (("--flagfile", "{latin1_flags}"), ("-flagfile", "{latin1_flags}"),
                       ("-flagfile={latin1_flags}",), ("--flagfile={latin1_flags_home}",),
                       ("--flagfile", "{nested_flags}"))],
    ("train: a flag file below a file", "train", ["--flagfile={three_columns}/flags.txt"], "", 2,
     "--flagfile='{three_columns}/flags.txt': '{three_columns}' is a file, not a directory"),
    # flags that would do nothing
    ("train: early stopping without a dev set", "train",
     ["--early_stopping=3", "--tsv={three_columns}", "--output_dir={tmp}/early"], "", 2,
     "--early_stopping=3 stops on the dev NLL: it does nothing without a dev set"),
    ("train: averaging at the best without a dev set", "train",
     ["--average_at=best", "--tsv={three_columns}", "--output_dir={tmp}/at_best"], "", 2,
     "--average_at=best averages around the best dev NLL: it does nothing without a dev set"),
    *[(f"train: averaging at the best of {last}", "train",
       ["--average_at=best", f"--average_last={last}", "--output_dir={tmp}/at_best"], "", 2,
       f"--average_at=best does nothing without --average_last of 2 or more (it is {last})")
      for last in (0, 1)],
    *[(f"train: --{name} without the plateau schedule", "train",
       [f"--{name}={value}", "--output_dir={tmp}/plateau2"], "", 2,
       f"--{name}={value} does nothing without --schedule=plateau")
      for name, value in (("plateau_factor", 0.3), ("plateau_patience", 2))],
    # a path's error names its flag and the cause, not "[Errno 17] File exists"
    ("data: a vocabulary directory whose source/ is a file", "data",
     ["--vocabulary_dir={vocabulary_blocked}", "--tokenizer=word", "--vocabulary_size=50"], "", 2,
     "--vocabulary_dir='{vocabulary_blocked}': '{vocabulary_blocked}/source' is a file, not a directory"),
    ("train: an output dir whose checkpoints/ is a file", "train",
     ["--output_dir={checkpoints_blocked}", "--preset=tiny", "--max_steps=1"], "", 2,
     "'{checkpoints_blocked}/checkpoints' is a file where a run keeps its checkpoints/ folder"),
    # what a run writes, blocked in --output_dir: refused before any work, not at its end
    ("train: a file named around_best", "train",
     ["--output_dir={blocked}/around_best_file", "--preset=tiny", "--max_steps=1"], "", 2,
     "around_best_file/around_best' is a file where a run keeps its around_best/ folder"),
    ("train: a dangling checkpoints symlink", "train",
     ["--output_dir={blocked}/dangling", "--preset=tiny", "--max_steps=1"], "", 2,
     "dangling/checkpoints' is a symbolic link to nothing"),
    *[(f"train: a folder named {name}", "train",
       [f"--output_dir={{blocked}}/folder_{name}", "--preset=tiny", "--max_steps=1"], "", 2,
       f"folder_{name}/{name}' is a folder where a run writes its {name} file")
      for name in ("model.json", "flags.txt", "report.json")],
    ("train: --vocabulary_dir without vocabularies", "train",
     ["--vocabulary_dir={three_columns}/sub", "--preset=tiny", "--output_dir={tmp}/vocabulary"], "", 2,
     "--vocabulary_dir='{three_columns}/sub': No tokenizer config"),
]


def _zero(path):
    data = bytearray(open(path, "rb").read())
    data[len(data) // 3:len(data) // 3 + 64] = bytes(64)
    open(path, "wb").write(bytes(data))


def _truncate(path):
    os.truncate(path, os.path.getsize(path) // 2)


def _flip(path):
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    source, target = toy_tokenizers()
    model = save_model_dir(tmp / "model", random_model(seed=1), source, target)
    encdec = save_model_dir(tmp / "encdec", random_model(RNNEncDec, seed=1), source, target)
    damaged = save_model_dir(tmp / "damaged", random_model(seed=1), source, target)
    vocabulary = os.path.join(damaged, "target_vocabulary", "vocabulary.txt")
    lines = open(vocabulary, encoding="utf-8").read().splitlines()
    with open(vocabulary, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines[:8]) + "\n")
    for name, damage in (("zeroed", _zero), ("truncated", _truncate), ("flipped", _flip)):
        directory = save_model_dir(tmp / name, random_model(seed=1), source, target)
        damage(os.path.join(directory, "checkpoints", "ckpt-1.data-00000-of-00001"))
    # flipped: the only checkpoint is the best one
    os.rename(os.path.join(tmp, "flipped", "checkpoints"), os.path.join(tmp, "flipped", "best"))
    for name, keep in (("cut_config", 0.5), ("empty_config", 0)):
        directory = save_model_dir(tmp / name, random_model(seed=1), source, target)
        config = os.path.join(directory, "model.json")
        content = open(config, "rb").read()
        open(config, "wb").write(content[:int(len(content) * keep)])
    newer = save_model_dir(tmp / "newer_format", random_model(seed=1), source, target)
    config = json.load(open(os.path.join(newer, "model.json"), encoding="utf-8"))
    config.update(format=99, written_by={"bahdanau_tf": "9.0.0", "tensorflow": "9.1.0"})
    json.dump(config, open(os.path.join(newer, "model.json"), "w", encoding="utf-8"))
    preset = random_model(seed=1)
    preset.attach_tokenizers(source, target)
    preset.save_to_preset(str(tmp / "preset"))
    shutil.copytree(tmp / "preset", tmp / "preset_cut")
    save_model_dir(tmp / "old_preset", random_model(seed=1), source, target, {"saved_by": "save_to_preset"})
    os.truncate(tmp / "preset_cut" / "model.weights.h5", os.path.getsize(tmp / "preset" / "model.weights.h5") // 2)
    training_run(tmp / "run", steps=(1, 2))
    damaged_run = training_run(tmp / "run_damaged", steps=(1, 2))
    (data_file,) = [name for name in os.listdir(os.path.join(damaged_run, "checkpoints"))
                    if name.startswith("ckpt-2.data")]
    os.truncate(os.path.join(damaged_run, "checkpoints", data_file), 50)
    with_lexicon = save_model_dir(tmp / "lexicon", random_model(seed=1), source, target)
    model_directory.write_lexicon(with_lexicon, lexicon.Lexicon.build(
        [("the cat", "el gato"), ("the dog", "el perro")], source, target, top_k=2))
    bad_lexicon = save_model_dir(tmp / "bad_lexicon", random_model(seed=1), source, target)
    (tmp / "bad_lexicon" / "lexicon.tsv").write_text("the\tel\t0.5\nzebra\tcebra\t0.5\n")
    reshaped = save_model_dir(tmp / "reshaped", random_model(seed=1), source, target)
    saved = json.loads((tmp / "reshaped" / "model.json").read_text())
    saved["config"]["hidden_dim"] += 2
    (tmp / "reshaped" / "model.json").write_text(json.dumps(saved))
    save_model_dir(tmp / "no_checkpoint_files", random_model(seed=1), source, target)
    for name in os.listdir(tmp / "no_checkpoint_files" / "checkpoints"):
        if name.startswith("ckpt-"):
            os.remove(tmp / "no_checkpoint_files" / "checkpoints" / name)
    three_columns = tmp / "three.tsv"
    three_columns.write_bytes(b"the cat\tel gato\rthe dog\tel perro\tstray\r")  # CR-only line ends
    bad_utf8 = tmp / "bad.txt"
    bad_utf8.write_bytes(b"the cat\n\xff bad\n")
    (tmp / "latin1_flags.txt").write_bytes(b"--preset=tiny\n--output_dir=caf\xe9\n")
    _guided_alignment_files(tmp)
    guided_run = training_run(tmp / "guided_run", steps=(1,))
    saved = json.loads((tmp / "guided_run" / "model.json").read_text())
    saved["settings"]["guided_alignment"] = str(tmp / "right.links")
    (tmp / "guided_run" / "model.json").write_text(json.dumps(saved))
    for name, damage in (("empty", lambda data: b""), ("truncated", lambda data: data[:len(data) // 2]),
                         ("random", lambda data: np.random.default_rng(0).bytes(len(data)))):
        shutil.copytree(pretrained.path("bible-en-es-small"), tmp / f"{name}_weights")
        weights = tmp / f"{name}_weights" / pretrained.WEIGHTS
        weights.write_bytes(damage(weights.read_bytes()))
    shutil.copytree(pretrained.path("bible-en-es-small"), tmp / "shipped_without_weights")
    os.remove(tmp / "shipped_without_weights" / "model.weights.h5")
    shutil.copytree(pretrained.path("bible-en-es-small"), tmp / "npz_weights")
    (tmp / "npz_weights" / pretrained.WEIGHTS).rename(tmp / "npz_weights" / "weights.npz")
    _weights_of_others(tmp, source, target)
    (tmp / "nested_flags.txt").write_text(f"--flagfile={tmp / 'latin1_flags.txt'}\n")
    (tmp / "vocabulary_blocked").mkdir()
    (tmp / "vocabulary_blocked" / "source").write_text("a file where a directory goes\n")
    (tmp / "blocked" / "around_best_file").mkdir(parents=True)
    (tmp / "blocked" / "around_best_file" / "around_best").write_text("a file where a folder goes\n")
    (tmp / "blocked" / "dangling").mkdir()
    os.symlink(tmp / "nowhere", tmp / "blocked" / "dangling" / "checkpoints")
    for name in ("model.json", "flags.txt", "report.json"):
        (tmp / "blocked" / f"folder_{name}" / name).mkdir(parents=True)
    (tmp / "checkpoints_blocked").mkdir()
    (tmp / "checkpoints_blocked" / "checkpoints").write_text("a file where a run's folder goes\n")
    return {"tmp": str(tmp), "model": model, "damaged": damaged, "encdec": encdec,
            "npz_weights": str(tmp / "npz_weights"),
            **{name: str(tmp / name) for name in ("zeroed", "truncated", "flipped", "cut_config",
                                                  "empty_config", "newer_format", "preset", "run",
                                                  "run_damaged", "lexicon", "bad_lexicon",
                                                  "reshaped", "no_checkpoint_files", "preset_cut",
                                                  "old_preset")},
            "three_columns": str(three_columns), "bad_utf8": str(bad_utf8),
            "latin1_flags": str(tmp / "latin1_flags.txt"), "pairs_tsv": str(tmp / "pairs.tsv"),
            # the same file by way of ~ (absl expands it)
            "latin1_flags_home": "~/" + os.path.relpath(tmp / "latin1_flags.txt", os.path.expanduser("~")),
            **{name: str(tmp / name) for name in ("other_weights", "run_with_weights",
                                                  "preset_without_weights", "vocabulary_blocked",
                                                  "checkpoints_blocked", "blocked",
                                                  "shipped_without_weights")},
            "nested_flags": str(tmp / "nested_flags.txt"),
            "guided_run": guided_run,
            **{f"{name}_weights": str(tmp / f"{name}_weights") for name in ("empty", "truncated",
                                                                          "random")}}


def _weights_of_others(tmp, source, target):
    """``other_weights``: a saved ``tiny`` model holding ``rnnsearch-cgru-tiny``'s
    model.weights.h5; ``run_with_weights``: a training run that holds a model.weights.h5 too;
    ``preset_without_weights``: a saved model whose model.weights.h5 is gone."""
    for name in ("other_weights", "preset_without_weights"):
        saved = random_model(seed=1).attach_tokenizers(source, target)
        saved.save_to_preset(str(tmp / name))
    cgru = random_model(seed=1, preset="rnnsearch-cgru-tiny").attach_tokenizers(source, target)
    cgru.save_to_preset(str(tmp / "cgru"))
    shutil.copy(tmp / "cgru" / "model.weights.h5", tmp / "other_weights" / "model.weights.h5")
    shutil.rmtree(tmp / "cgru")
    os.remove(tmp / "preset_without_weights" / "model.weights.h5")
    training_run(tmp / "run_with_weights", steps=(1,))
    shutil.copy(tmp / "preset" / "model.weights.h5", tmp / "run_with_weights" / "model.weights.h5")


def _guided_alignment_files(tmp):
    """``pairs.tsv`` (`GUIDED_PAIRS`), its diagonal links (``right.links``), and links files
    that do not match it: a line too many first, 1-based, out of every range, all empty, a
    line too many last."""
    (tmp / "pairs.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in GUIDED_PAIRS), encoding="utf-8")
    right = ["".join(f" {i}-{i}" for i in range(len(s.split()))).strip() for s, _ in GUIDED_PAIRS]
    files = {"right": right, "shifted": ["0-0"] + right, "one_too_many": right + ["0-0"],
             "one_based": [" ".join(f"{i + 1}-{i + 1}" for i in range(len(s.split())))
                           for s, _ in GUIDED_PAIRS],
             "out_of_range": ["50-50"] * len(GUIDED_PAIRS), "empty": [""] * len(GUIDED_PAIRS)}
    for name, lines in files.items():
        (tmp / f"{name}.links").write_text("".join(line + "\n" for line in lines))


def _run(rows, paths):
    """Runs ``rows`` (name, command, arguments, stdin, ...) in one process (helpers.run_commands:
    TensorFlow is imported once for the table, not once a row), in the ``tmp`` directory."""
    return run_commands([(command, [argument.format(**paths) for argument in arguments], stdin)
                         for _, command, arguments, stdin, *_ in rows], cwd=paths["tmp"])


# TensorFlow's C++ log lines (``E0000 00:00:1795631014.938093 30667 cuda_platform.cc:52] ...``)
_HARNESS_LINE = re.compile(r"^([IWEF]0000 00:00:\d+\.\d+ |WARNING: All log messages before absl::)")


def test_hostile_command_lines_get_one_clear_line_and_their_exit_code(paths):
    before = set(os.listdir(paths["tmp"]))
    preset_before = sorted(os.listdir(paths["preset"]))
    results = _run(CASES, paths)
    failures = []
    for (name, _, _, _, code, phrase), result in zip(CASES, results):
        stderr = result["stderr"]
        errors = [line for line in stderr.splitlines() if ": error: " in line]
        if (result["code"] != code or "Traceback" in stderr or len(errors) != 1
                or phrase.format(**paths) not in errors[0] or result["stdout"]
                # a refusal: that one line (TensorFlow's C++ lines come from this harness, which
                # imports it for all rows: the commands' quiet import is tested elsewhere)
                or (code == 2 and [line for line in stderr.splitlines()
                                   if not _HARNESS_LINE.match(line)] != errors)):
            failures.append(f"{name}: exit {result['code']}, stderr tail {stderr[-400:]!r}")
    assert not failures, "\n".join(failures)
    assert set(os.listdir(paths["tmp"])) == before  # no output directory, file or lock was left
    assert sorted(os.listdir(paths["preset"])) == preset_before  # a refused directory gets no .lock
    for run in (paths["run"], paths["run_damaged"]):  # no average, whole or partial
        assert sorted(os.listdir(run)) == ["checkpoints", "model.json", "source_vocabulary",
                                            "target_vocabulary"], os.listdir(run)


# === A full disk: a real one, a small tmpfs filled to the last byte ===

@pytest.fixture
def full_disks(tmp_path):
    """Mounts tmpfs file systems on demand (``make(name, prepare)``) and fills each once prepared
    (unless ``fill=False``)."""
    mounted = []

    def make(name, prepare=None, fill=True):
        directory = tmp_path / name
        directory.mkdir()
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(directory)],
                                capture_output=True, text=True)
        if result.returncode:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {result.stderr.strip()}")
        mounted.append(directory)
        if prepare:
            prepare(directory)
        if not fill:
            return directory
        with open(directory / "filler", "wb", buffering=0) as handle:
            try:
                while True:
                    handle.write(bytes(4096))
            except OSError as error:
                assert error.errno == errno.ENOSPC
        return directory

    yield make
    for directory in mounted:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def _partial_files(directory):
    return sorted(os.path.relpath(os.path.join(root, name), directory)
                  for root, dirs, names in os.walk(directory) for name in dirs + names
                  if name.endswith("_temp") or ".tmp" in name or name.startswith(".claim"))


@pytest.mark.slow
def test_a_full_disk_is_one_line_exit_5_and_leaves_nothing_partial(paths, full_disks):
    disk = {name: full_disks(name) for name in ("evaluate", "export")}
    # translate: over an existing output file, which stays whole
    disk["translate"] = full_disks("translate", lambda d: (d / "out.txt").write_text("old\n"))
    old = disk["translate"] / "out.txt"

    def resumable_run(directory):  # a training run to resume (its lock file has its page)
        from bahdanau_tf import corpora, training

        source, target = toy_tokenizers()
        # the recipe of the resumed row below (a resumed run keeps its own)
        config = training.TrainingConfig.for_preset(
            "tiny", max_steps=1, max_minutes=None, summaries=False, jit_compile=False, dev_sentences=8,
            eval_every=1)
        trainer = training.Trainer(str(directory / "run"), source, target, preset="tiny",
                                   config=config, log=lambda line: None)
        trainer.fit(corpora.load_corpus("bible-en-es", split="train").select(slice(0, 64)))
        (directory / "run" / ".lock").write_text("0\n")

    disk["train"] = full_disks("train", resumable_run)
    # (translate and evaluate decode without XLA, which is not what is tested here)
    cases = {
        "translate": ("translate", ["--model_dir={model}", f"--output_file={old}", "--nojit_compile"],
                      "the cat\n", old),
        "evaluate": ("evaluate", ["--model_dir={model}", "--max_sentences=4", "--nojit_compile",
                                  f"--output_dir={disk['evaluate'] / 'evaluation'}"], "",
                     disk["evaluate"] / "evaluation"),
        "export": ("export", ["--model_dir={model}", "--nowarmup",
                              f"--export_dir={disk['export'] / 'models'}"], "", disk["export"]),
        "train": ("train", [f"--output_dir={disk['train'] / 'run'}", "--preset=tiny",
                            "--max_steps=2", "--max_minutes=0", "--jit=false", "--nosummaries",
                            "--max_train_pairs=200",
                            "--dev_sentences=8", "--eval_every=1", "--dev_bleu_every=0"], "",
                  disk["train"] / "run"),
    }
    rows = [(name, command, arguments, stdin, 5, "") for name, (command, arguments, stdin, _)
            in cases.items()]
    results = dict(zip(cases, _run(rows, paths)))
    for name, result in results.items():
        stderr = result["stderr"]
        errors = [line for line in stderr.splitlines() if ": error: " in line]
        assert result["code"] == 5 and "Traceback" not in stderr and len(errors) == 1, \
            (name, result["code"], stderr[-2000:])
        assert "I/O failure: " in errors[0] and "No space left on device" in errors[0], errors
        assert str(disk[name]) in errors[0], errors  # the file is named
        assert _partial_files(disk[name]) == [], name
    assert old.read_text() == "old\n"  # not replaced by a partial translation
    assert sorted(os.listdir(disk["evaluate"])) == ["filler"]  # no output directory
    assert sorted(os.listdir(disk["export"])) == ["filler"]  # no version, no claim
    # the interrupted training directory still loads its last whole checkpoint
    from bahdanau_tf import model_directory

    loaded = model_directory.load_model_directory(str(disk["train"] / "run"), which="latest")
    assert loaded.checkpoint.endswith("ckpt-1")  # (the failed save was of update 2)
# === An environment Keras cannot load ===

@pytest.mark.subprocess
def test_a_keras_backend_that_cannot_load_is_one_line_before_any_import(tmp_path):
    """``KERAS_BACKEND=nonsense`` (or a backend whose package is not installed) fails Keras's
    import, from whichever module imports Keras first: one line and exit code 2 instead."""
    import importlib.util

    cases = {"nonsense": "KERAS_BACKEND='nonsense' is not a Keras backend; use one of "}
    if importlib.util.find_spec("torch") is None:
        cases["torch"] = "KERAS_BACKEND='torch', but torch is not installed"
    for backend, phrase in cases.items():
        for command in ("translate", "train"):
            result = subprocess.run([sys.executable, "-m", f"bahdanau_tf.cli.{command}"],
                                    env=dict(os.environ, KERAS_BACKEND=backend), cwd=tmp_path,
                                    capture_output=True, text=True, timeout=300)
            lines = result.stderr.splitlines()
            assert result.returncode == 2 and len(lines) == 1, (backend, command, result.stderr[-2000:])
            assert lines[0].startswith(f"bahdanau-{command}: error: {phrase}"), lines
    assert os.listdir(tmp_path) == []


@pytest.mark.subprocess
def test_keras_backend_numpy_without_scipy_is_refused_and_an_empty_one_is_unset(tmp_path):
    """Keras's numpy backend imports scipy: without it, one line (not Keras's ImportError);
    ``KERAS_BACKEND=`` is what Keras reads as unset (TensorFlow), so the command runs."""
    # sys.modules[...] = None: what an interpreter without scipy finds (find_spec None, import fails)
    script = ("import sys; sys.modules['scipy'] = None; sys.argv = ['bahdanau-translate']; "
              "from bahdanau_tf.cli import translate; translate.run()")
    for backend, command, phrase in (
            ("numpy", [sys.executable, "-c", script],
             "bahdanau-translate: error: KERAS_BACKEND='numpy', but scipy is not installed"),
            ("", [sys.executable, "-m", "bahdanau_tf.cli.translate"],
             "bahdanau-translate: error: --model_dir is required")):
        result = subprocess.run(command, env=env_without_tensorflow_logging(KERAS_BACKEND=backend),
                                cwd=tmp_path, capture_output=True, text=True, timeout=300)
        lines = result.stderr.splitlines()
        assert result.returncode == 2 and len(lines) == 1, (backend, result.stderr[-2000:])
        assert lines[0].startswith(phrase), lines
    assert os.listdir(tmp_path) == []


@pytest.mark.subprocess
def test_a_bad_learning_seed_is_a_pytest_usage_error(tmp_path):
    """``BAHDANAU_LEARNING_SEED`` that NumPy, TensorFlow and Keras do not all take: one line
    and pytest's usage-error exit code, before any test runs (not a traceback in each)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for value in ("abc", "1.5", "-1", str(2**32)):
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
             f"--basetemp={tmp_path / 'base'}", os.path.join(root, "tests", "test_layering.py")],
            env=dict(os.environ, BAHDANAU_LEARNING_SEED=value), cwd=root, capture_output=True,
            text=True, timeout=300)
        lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
        assert result.returncode == pytest.ExitCode.USAGE_ERROR, (value, result.stdout, result.stderr)
        assert lines == [f"ERROR: BAHDANAU_LEARNING_SEED={value!r} is not a seed: give a whole "
                         "number from 0 to 4294967295."], lines


def test_averaging_into_a_read_only_run_names_the_flag(paths, full_disks):
    """``bahdanau-average`` without ``--output`` writes into ``--model_dir``: a directory it
    cannot write is refused naming the flag (not ``Permission denied: '.../.lock'``)."""
    def read_only_run(directory):
        training_run(directory / "run", steps=(1, 2))
        result = subprocess.run(["mount", "-o", "remount,ro", str(directory)], capture_output=True, text=True)
        if result.returncode:
            pytest.skip(f"cannot remount read-only: {result.stderr.strip()}")

    disk = full_disks("read_only", read_only_run, fill=False)
    (result,) = _run([("", "average", [f"--model_dir={disk / 'run'}", "--last=1"], "")], paths)
    errors = [line for line in result["stderr"].splitlines() if ": error: " in line]
    assert result["code"] == 2 and "Traceback" not in result["stderr"], result["stderr"][-2000:]
    assert errors == [f"bahdanau-average: error: --model_dir={str(disk / 'run')!r} is not writable: "
                      "the average is written into it (averaged/); pass --output=DIR to write it "
                      "elsewhere."], errors
