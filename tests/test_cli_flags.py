"""Every flag of every command runs once through its command line to a successful end.

`RUNS` names, for each (command, flag), the test that runs the flag in a command line that
exits 0 and asserts what it did; `test_every_flag_of_every_command_has_a_test_that_runs_it`
lists the flags each console script defines and fails for one without a row, or for a row
whose test does not exist or does not hold the flag. The flags no other test runs to a
successful end are run here (`test_the_flags_no_other_test_runs_*`): each command line with
many of them at once, each flag's effect asserted in what the run wrote.
"""

import ast
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from helpers import COMMANDS_IN_ONE_PROCESS, run_commands

# every test here starts a Python process
pytestmark = pytest.mark.subprocess

TESTS = pathlib.Path(__file__).parent
_HERE = "test_cli_flags.py::"
_TRAIN_HERE = _HERE + "test_the_flags_no_other_test_runs_train_and_its_models_run"
_USE_HERE = _HERE + "test_the_flags_no_other_test_runs_translate_evaluate_export_average_data_head"
_TRAIN = "test_cli_train.py::"
_DEFAULTS = _TRAIN + "test_defaults_run_end_to_end"
_SIGKILL = _TRAIN + "test_sigkill_mid_run_then_resume"
_REGULARISATION = _TRAIN + "test_regularisation_flags_are_recorded_repeat_the_run_and_stay_on_resume"
_SHIPPED_NAME = _TRAIN + "test_a_run_named_like_the_shipped_model_trains_scores_and_keeps_its_own_model_json"
_GUIDED = _TRAIN + "test_a_guided_run_trains_to_its_end_with_its_guide_and_resumes"
_HEAD = "test_alignment_head.py::test_the_command_trains_a_head_into_a_new_directory_and_refuses_bad_links"

#: (command, flag) -> the test that runs it through the command line to a successful end
RUNS = {
    **{("train", flag): _TRAIN_HERE for flag in (
        "annotation_dropout", "average_last", "bucketing", "checkpoint_every", "clipnorm", "corpus",
        "dev_bleu_every", "dev_bleu_sentences", "dev_source_file", "dev_target_file", "dev_tsv",
        "direction", "embedding_dropout", "guided_alignment_decay", "guided_alignment_weight",
        "keep_checkpoints", "learning_rate", "max_train_pairs", "optimizer", "pad_to_multiple",
        "plateau_factor", "precision", "readout_dropout", "regularization", "sampled_proposal",
        "sampled_softmax", "schedule", "shuffle_buffer_size", "source_file", "strategy",
        "target_file", "vocabulary_sentences", "warmup_steps", "dev_sentences", "lexicon_top_k",
        "max_length", "batch_size", "eval_every", "log_every", "seed")},
    **{("train", flag): _GUIDED for flag in (
        "guided_alignment", "tsv", "tokenizer", "vocabulary_size", "max_steps", "max_minutes",
        "jit_compile", "output_dir", "preset")},
    **{("train", flag): _REGULARISATION for flag in (
        "dropout", "word_dropout", "recurrent_dropout", "label_smoothing", "plateau_patience",
        "early_stopping")},
    ("train", "jit"): _SHIPPED_NAME,
    ("train", "summaries"): _TRAIN_HERE,
    ("train", "tie_embeddings"): _TRAIN + "test_a_resumed_run_keeps_its_tying_when_the_preset_ties",
    ("train", "average_at"): _TRAIN_HERE,
    ("train", "guided_alignment_unaligned"): _TRAIN_HERE,
    ("train", "patience"): _TRAIN_HERE,
    ("train", "vocabulary_dir"): _TRAIN + "test_trains_with_the_vocabularies_bahdanau_data_built",
    **{("translate", flag): _USE_HERE for flag in (
        "batch_size", "beam_size", "candidate_frequent", "candidate_lists", "candidate_per_word",
        "checkpoint", "forbid_unknown", "input_file", "jit_compile", "length_penalty",
        "max_source_length", "model_dir", "nbest", "output_file", "progress", "read_lines",
        "replace_unk", "scores", "unk_dictionary")},
    ("translate", "alignments"):
        "test_alignment_guided.py::test_translate_alignments_are_the_search_attentions_links",
    **{("evaluate", flag): _USE_HERE for flag in (
        "alignment_rule", "attention_plot_max_words", "attention_plots", "batch_size", "beam_size",
        "candidate_frequent", "candidate_lists", "candidate_per_word", "checkpoint", "corpus",
        "direction", "ensemble", "jit_compile", "length_penalty", "max_sentences",
        "max_source_length", "model_dir", "name", "no_unk", "output_dir", "progress", "read_lines",
        "reference_file", "replace_unk", "reverse_model_dir", "source_file", "split", "target_file",
        "tsv", "unk_dictionary")},
    ("evaluate", "choose_alignment_rule"): _SHIPPED_NAME,
    **{("export", flag): _USE_HERE for flag in (
        "beam_size", "candidate_frequent", "candidate_lists", "candidate_per_word", "checkpoint",
        "export_dir", "jit", "keep_precision", "length_penalty", "max_source_length", "model_dir",
        "model_name", "overwrite", "replace_unk", "unk_dictionary", "version", "warmup")},
    **{("average", flag): _USE_HERE for flag in ("last", "model_dir", "output")},
    **{("alignment_head", flag): _HEAD for flag in (
        "batch_size", "checkpoint", "context_units", "links", "model_dir", "output_dir", "steps",
        "tsv", "units")},
    **{("alignment_head", flag): _USE_HERE for flag in (
        "corpus", "direction", "extraction_rule", "learning_rate", "max_train_pairs",
        "reverse_model_dir", "seed", "source_file", "symmetrization", "target_file", "unaligned",
        "write_links")},
    **{("data", flag): _USE_HERE for flag in (
        "corpus", "direction", "json", "source_file", "target_file", "tokenizer", "tsv",
        "vocabulary_dir", "vocabulary_sentences", "vocabulary_size")},
    ("data", "alignment_file"): "test_alignment_pharaoh.py::test_data_align_writes_a_line_of_links_per_pair",
    ("data", "symmetrization"): "test_alignment_pharaoh.py::test_data_align_writes_a_line_of_links_per_pair",
}

_LIST_FLAGS = """
import json, sys
sys.path.insert(0, {tests!r})
import commands_in_one_process as harness
from absl import flags
found = {{}}
for command in {commands!r}:
    harness._command_module(command)
    found[command] = sorted(set(flags.FLAGS) - set(harness._BASELINE))
print(json.dumps(found))
"""


def _console_commands():
    """The cli modules of the package's console scripts (pyproject.toml's [project.scripts])."""
    text = (TESTS.parent / "pyproject.toml").read_text(encoding="utf-8")
    scripts = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return re.findall(r'^bahdanau-[\w-]+ = "bahdanau_tf\.cli\.(\w+):run"', scripts, re.M)


def _test_text(reference):
    """The strings of a test function and of the module-level names it reads."""
    file, name = reference.split("::")
    tree = ast.parse((TESTS / file).read_text(encoding="utf-8"))
    constants = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)}
    (function,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    read = {node.id for node in ast.walk(function) if isinstance(node, ast.Name)}
    nodes = [function, *(constants[name] for name in read if name in constants)]
    return " ".join(node.value for tree in nodes for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and isinstance(node.value, str))


def test_every_flag_of_every_command_has_a_test_that_runs_it():
    commands = _console_commands()
    assert sorted(commands) == ["alignment_head", "average", "data", "evaluate", "export", "train",
                                "translate"]
    result = subprocess.run([sys.executable, "-c", _LIST_FLAGS.format(tests=str(TESTS), commands=commands)],
                            capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    defined = {(command, flag) for command, names in json.loads(result.stdout.splitlines()[-1]).items()
               for flag in names}
    assert sorted(defined - set(RUNS)) == [], "flags without a test that runs them"
    assert sorted(set(RUNS) - defined) == [], "rows of flags no command defines"
    texts = {}
    for (command, flag), reference in RUNS.items():
        text = texts.setdefault(reference, _test_text(reference))
        assert re.search(rf"--(no)?{flag}\b", text), (command, flag, reference)
    assert os.path.exists(COMMANDS_IN_ONE_PROCESS)


def _corpus_files(tmp_path):
    """pairs (train.en/.es, train.tsv, the same as a links-aligned g.tsv), a dev pair of files,
    a UNK dictionary."""
    pairs = [("a dog and a cat ran to the house", "un perro y un gato corrieron a la casa"),
             ("the cat", "el gato"), ("the dog ran", "el perro corrió"), ("a house", "una casa"),
             ("the cat ran to a dog", "el gato corrió a un perro"), ("a dog", "un perro")]
    (tmp_path / "train.en").write_text("".join(s + "\n" for s, _ in pairs))
    (tmp_path / "train.es").write_text("".join(t + "\n" for _, t in pairs))
    (tmp_path / "dev.en").write_text("".join(s + "\n" for s, _ in pairs[:3]))
    (tmp_path / "dev.es").write_text("".join(t + "\n" for _, t in pairs[:3]))
    (tmp_path / "train.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs))
    diagonal = (range(min(len(s.split()), len(t.split()))) for s, t in pairs)
    (tmp_path / "g.links").write_text("".join(" ".join(f"{i}-{i}" for i in words) + "\n" for words in diagonal))
    (tmp_path / "dict.tsv").write_text("zebra\tcebra\n")


def _recipe(directory):
    return json.loads((directory / "model.json").read_text())


@pytest.mark.slow
def test_the_flags_no_other_test_runs_train_and_its_models_run(tmp_path):
    """Three tiny runs, one of the user's files, one of the embedded corpus in the other
    direction with a sampled softmax, one guided with the plateau schedule: each ends 0 and
    records what its flags asked."""
    _corpus_files(tmp_path)
    common = ["--preset=tiny", "--tokenizer=word", "--vocabulary_size=60", "--max_minutes=0",
              "--nojit_compile", "--seed=5", "--max_length=20", "--batch_size=4"]
    files = [*common, "--source_file=train.en", "--target_file=train.es", "--dev_source_file=dev.en",
             "--dev_target_file=dev.es", "--vocabulary_sentences=4", "--max_steps=4",
             "--dev_bleu_every=2", "--dev_bleu_sentences=2", "--dev_sentences=3", "--optimizer=sgd",
             "--learning_rate=0.1", "--clipnorm=0.5", "--precision=float32", "--bucketing=none",
             "--pad_to_multiple=4", "--shuffle_buffer_size=8", "--annotation_dropout=0.1",
             "--readout_dropout=0.1", "--embedding_dropout=0.1", "--regularization=none",
             "--strategy=default", "--keep_checkpoints=2", "--checkpoint_every=1", "--eval_every=2",
             "--log_every=1", "--average_last=2", "--average_at=best", "--schedule=warmup_rsqrt",
             "--warmup_steps=2", "--lexicon_top_k=3", "--output_dir=files"]
    embedded = [*common, "--corpus=bible-en-es", "--direction=es-en", "--max_train_pairs=64",
                "--max_steps=2", "--sampled_softmax=20", "--sampled_proposal=log_uniform",
                "--dev_bleu_every=0", "--dev_sentences=8", "--lexicon_top_k=0", "--nosummaries",
                "--output_dir=es_en"]
    guided = [*common, "--tsv=train.tsv", "--dev_tsv=train.tsv", "--guided_alignment=g.links",
              "--guided_alignment_weight=0.5", "--guided_alignment_decay=0.5",
              "--guided_alignment_unaligned=end", "--schedule=plateau", "--plateau_factor=0.3",
              "--patience=2", "--max_steps=2", "--dev_bleu_every=0", "--lexicon_top_k=0",
              "--output_dir=guided"]
    results = run_commands([("train", flags, "") for flags in (files, embedded, guided)], cwd=str(tmp_path))
    for result in results:
        assert result["code"] == 0, result["stderr"][-3000:]
    for name, flags in (("files", files), ("es_en", embedded), ("guided", guided)):
        saved = _recipe(tmp_path / name)
        recorded = {**saved["settings"]["training"], **saved["config"]}
        for flag in flags:
            key, _, value = flag[2:].partition("=")
            if key in recorded and key not in ("max_minutes",):  # 0: no time limit (None)
                assert str(recorded[key]).lower() == value.lower() or recorded[key] == pytest.approx(
                    float(value)), (name, key, recorded[key])
    assert sorted(os.listdir(tmp_path / "files" / "checkpoints")) == [
        "checkpoint", *(f"ckpt-{n}.{part}" for n in (3, 4) for part in ("data-00000-of-00001", "index"))]
    assert (tmp_path / "files" / "averaged").is_dir() and (tmp_path / "files" / "lexicon.tsv").is_file()
    assert "dev BLEU" in results[0]["stderr"]
    assert _recipe(tmp_path / "es_en")["settings"]["direction"] == "es-en"
    assert _recipe(tmp_path / "guided")["settings"]["guided_alignment_unaligned"] == "end"


@pytest.mark.slow
def test_the_flags_no_other_test_runs_translate_evaluate_export_average_data_head(tmp_path):
    """A tiny run of each direction on the embedded corpus, then every other command with
    the flags no other test runs to a successful end, each effect asserted."""
    _corpus_files(tmp_path)
    common = ["--preset=tiny", "--max_minutes=0", "--nojit_compile", "--max_train_pairs=64",
              "--max_steps=2", "--dev_sentences=8", "--dev_bleu_every=0", "--checkpoint_every=1",
              "--keep_checkpoints=2", "--average_last=0", "--lexicon_top_k=3"]
    trained = run_commands([("train", [*common, f"--direction={d}", f"--output_dir={d}"], "")
                            for d in ("en-es", "es-en")], cwd=str(tmp_path))
    for result in trained:
        assert result["code"] == 0, result["stderr"][-3000:]
    shutil.copytree(tmp_path / "en-es", tmp_path / "again")
    search = ["--beam_size=2", "--length_penalty=0.5", "--max_source_length=30",
              "--candidate_lists", "--candidate_frequent=10", "--candidate_per_word=2", "--replace_unk",
              "--unk_dictionary=dict.tsv", "--checkpoint=latest"]
    rows = [
        ("translate", ["--model_dir=en-es", *search, "--batch_size=2", "--forbid_unknown", "--noprogress",
                       "--read_lines=1", "--input_file=dev.en", "--output_file=out.txt", "--nbest=2",
                       "--scores", "--nojit_compile"], ""),
        ("evaluate", ["--model_dir=en-es", *search, "--batch_size=2", "--source_file=dev.en",
                      "--reference_file=dev.es", "--name=mine", "--attention_plots=1",
                      "--attention_plot_max_words=10", "--noprogress", "--read_lines=2", "--no_unk=off", "--nojit_compile",
                      "--output_dir=e_files"], ""),
        ("evaluate", ["--model_dir=en-es", "--tsv=train.tsv", "--max_sentences=2", "--output_dir=e_tsv",
                      "--nojit_compile"], ""),
        ("evaluate", ["--model_dir=en-es", "--alignment_rule=sum", "--max_sentences=2",
                      "--output_dir=e_rule", "--nojit_compile"], ""),
        ("evaluate", ["--model_dir=es-en", "--reverse_model_dir=en-es", "--corpus=bible-en-es",
                      "--split=dev", "--direction=es-en", "--max_sentences=2", "--output_dir=e_dev",
                      "--nojit_compile"], ""),
        ("evaluate", ["--model_dir=en-es", "--model_dir=again", "--ensemble", "--max_sentences=2",
                      "--target_file=dev.es", "--source_file=dev.en", "--output_dir=e_ensemble",
                      "--nojit_compile"], ""),
        ("export", ["--model_dir=en-es", "--export_dir=exported", "--version=3", "--nojit", "--nowarmup"], ""),
        ("export", ["--model_dir=en-es", *search, "--export_dir=exported", "--model_name=mine",
                    "--version=3", "--overwrite", "--keep_precision", "--nojit", "--warmup"], ""),
        ("average", ["--model_dir=en-es", "--last=2", "--output=averaged"], ""),
        ("data", ["--source_file=train.en", "--target_file=train.es", "--tokenizer=word",
                  "--vocabulary_size=40", "--vocabulary_sentences=3", "--vocabulary_dir=vocabulary"], ""),
        ("data", ["--tsv=train.tsv", "--json"], ""),
        ("data", ["--corpus=bible-en-es", "--direction=es-en", "--json"], ""),
        ("alignment_head", ["--model_dir=en-es", "--reverse_model_dir=es-en", "--corpus=bible-en-es",
                            "--direction=en-es", "--max_train_pairs=8", "--steps=1", "--seed=3",
                            "--symmetrization=grow-diag-final-and", "--extraction_rule=sum>0.01",
                            "--learning_rate=0.01", "--unaligned=free", "--write_links=head.links",
                            "--output_dir=head_reverse"], ""),
        ("alignment_head", ["--model_dir=en-es", "--source_file=train.en", "--target_file=train.es",
                            "--links=g.links", "--steps=1", "--output_dir=head_files"], ""),
    ]
    results = run_commands(rows, cwd=str(tmp_path))
    for (command, flags, _), result in zip(rows, results):
        assert result["code"] == 0, (command, flags, result["stderr"][-3000:])
    translate, e_files, e_tsv, e_rule, e_dev, e_ensemble, *_ = results
    lines = (tmp_path / "out.txt").read_text().splitlines()
    assert [len(line.split("\t")) for line in lines] == [2 * 2] * 3  # --nbest=2 --scores, three lines
    assert "[UNK]" not in (tmp_path / "out.txt").read_text()  # --forbid_unknown
    report = json.loads((tmp_path / "e_files" / "report.json").read_text())
    assert report["models"][0]["model"] == "mine" and len(report["models"][0]["attention_plots"]) == 1
    assert report["num_sentences"] == 3
    assert json.loads((tmp_path / "e_tsv" / "report.json").read_text())["num_sentences"] == 2
    rule = json.loads((tmp_path / "e_rule" / "report.json").read_text())["models"][0]["settings"]
    assert rule["alignment_rule"]["rule"] == "sum", rule
    assert "chosen on the dev gold" in e_dev["stderr"], e_dev["stderr"][-2000:]  # with the reverse model
    ensemble = json.loads((tmp_path / "e_ensemble" / "report.json").read_text())["models"][0]["model"]
    assert ensemble.startswith("ensemble("), ensemble
    assert (tmp_path / "exported" / "3" / "saved_model.pb").is_file()  # --version=3, then --overwrite
    assert sorted(os.listdir(tmp_path / "exported")) == ["3"]
    warmup = tmp_path / "exported" / "3" / "assets.extra" / "tf_serving_warmup_requests"
    assert b"mine" in warmup.read_bytes()  # --model_name, in the warm-up requests
    assert (tmp_path / "averaged" / "model.weights.h5").is_file()
    assert {"source", "target"} <= set(os.listdir(tmp_path / "vocabulary"))
    assert (tmp_path / "head.links").is_file()
    for head in ("head_reverse", "head_files"):
        assert _recipe(tmp_path / head)["config"]["backbone"]["class_name"] == "RNNSearch"
