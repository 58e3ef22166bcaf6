"""Hostile but realistic command lines of the alignment wing, table-driven as in
tests/test_hostile.py: each ends with one clear line on stderr and exit code 2, never a
traceback, and writes nothing; and the alignment commands on Keras's JAX backend: refused in
one line where they need TensorFlow, the same AER where they do not."""

import importlib.util
import json
import os
import re

import pytest

from bahdanau_tf import alignment
from bahdanau_tf.models import RNNEncDec
from helpers import random_model, run_commands, save_model_dir, toy_tokenizers, training_run

# every test here starts a Python process
pytestmark = pytest.mark.subprocess

_HARNESS_LINE = re.compile(r"^([IWEF]0000 00:00:\d+\.\d+ |WARNING: All log messages before absl::)")

# (name, command, arguments, phrase of the one-line error); {en_es}, {es_en}, {en_es_again}:
# model directories of those directions; {tmp}: where nothing may be written
HEAD = ["--max_train_pairs=4", "--steps=1"]
CASES = [
    ("head: reverse model of the same direction", "alignment_head",
     ["--model_dir={en_es}", "--reverse_model_dir={en_es_again}", "--output_dir={tmp}/h1", *HEAD],
     "must translate the other direction than --model_dir (en-es), es-en"),
    ("head: reverse model is the model itself", "alignment_head",
     ["--model_dir={en_es}", "--reverse_model_dir={en_es}", "--output_dir={tmp}/h2", *HEAD],
     "is --model_dir itself"),
    ("head: a shipped model's name as reverse model", "alignment_head",
     ["--model_dir={en_es}", "--reverse_model_dir=bible-en-es-small", "--output_dir={tmp}/h3", *HEAD],
     "'bible-en-es-small' translates en-es: it must translate the other direction"),
    ("head: --direction against the model's", "alignment_head",
     ["--model_dir={en_es}", "--direction=es-en", "--output_dir={tmp}/h4", *HEAD],
     "--direction=es-en but --model_dir="),
    ("head: zero learning rate", "alignment_head",
     ["--model_dir={en_es}", "--reverse_model_dir={es_en}", "--learning_rate=0",
      "--output_dir={tmp}/h5", *HEAD], "--learning_rate must be positive"),
    ("head: unknown extraction pooling", "alignment_head",
     ["--model_dir={en_es}", "--reverse_model_dir={es_en}", "--extraction_rule=mean>0.2",
      "--output_dir={tmp}/h6", *HEAD], "--extraction_rule='mean>0.2': `pooling` must be one of"),
    ("evaluate: unknown alignment rule", "evaluate",
     ["--model_dir={en_es}", "--alignment_rule=sum+shiftx", "--output_dir={tmp}/e1"],
     "--alignment_rule='sum+shiftx'"),
    ("evaluate: reverse model of the same direction", "evaluate",
     ["--model_dir={en_es}", "--reverse_model_dir={en_es_again}", "--output_dir={tmp}/e2"],
     "must translate the other direction"),
    ("evaluate: a rule chosen for an ensemble", "evaluate",
     ["--model_dir={en_es}", "--model_dir={en_es_again}", "--ensemble", "--choose_alignment_rule",
      "--output_dir={tmp}/e3"], "chooses a rule for one model"),
    ("evaluate: a rule chosen for the shipped model", "evaluate",
     ["--model_dir=bible-en-es-small", "--choose_alignment_rule", "--output_dir={tmp}/e5"],
     "--model_dir='bible-en-es-small' is a shipped model, which is not written"),
    *[(f"evaluate: {flag} on the user's files", "evaluate",
       ["--model_dir={en_es}", flag, "--tsv={pairs}", "--output_dir={tmp}/e6"],
       f"{flag.split('=')[0]} works on the gold word alignments of the embedded corpus; --tsv has none")
      for flag in ("--alignment_rule=sum", "--choose_alignment_rule", "--reverse_model_dir={es_en}")],
    ("evaluate: an alignment rule without attention", "evaluate",
     ["--model_dir={encdec}", "--alignment_rule=sum", "--output_dir={tmp}/e7"],
     "--alignment_rule needs models with attention (RNNsearch): "),
    ("evaluate: choosing a rule without attention", "evaluate",
     ["--model_dir={encdec}", "--choose_alignment_rule", "--output_dir={tmp}/e8"],
     "--choose_alignment_rule needs models with attention (RNNsearch): "),
    # a hand-edited alignment record in model.json: named, by every reader
    *[(f"{command}: a saved rule whose {key} is {value!r}", command,
       [f"--model_dir={{edited_{key}}}", *extra], f"model.json's 'alignment': {key!r} is {value!r}, not")
      for key, value in (("dev_aer", "low"), ("dev_sentences", 1.5))
      for command, extra in (("translate", ["--alignments"]), ("evaluate", ["--output_dir={tmp}/e9"]))],
    ("translate: --alignments with a saved rule of both directions", "translate",
     ["--model_dir={both_directions}", "--alignments"],
     "saves a rule of both directions (sum, intersection), which needs a reverse model"),
    ("evaluate: reverse model of the same direction, no direction recorded", "evaluate",
     ["--model_dir={plain}", "--reverse_model_dir={plain_again}", "--output_dir={tmp}/e10"],
     "translates the same direction as --model_dir (its source vocabulary is"),
    ("evaluate: two ways to pick the rule", "evaluate",
     ["--model_dir={en_es}", "--alignment_rule=sum", "--choose_alignment_rule", "--output_dir={tmp}/e4"],
     "give one way to pick the alignment rule"),
]


def _model_dir(directory, direction, head=0):
    model = random_model()
    if head:
        model = alignment.with_alignment_head(model, head)
    return save_model_dir(directory, model, *toy_tokenizers(), settings={"direction": direction})


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile_alignment")
    paths = {"tmp": str(root / "scratch")}
    os.makedirs(paths["tmp"])
    for name, direction in (("en_es", "en-es"), ("es_en", "es-en"), ("en_es_again", "en-es")):
        paths[name] = _model_dir(root / name, direction)
    paths["encdec"] = save_model_dir(root / "encdec", random_model(RNNEncDec), *toy_tokenizers(),
                                     settings={"direction": "en-es"})
    (root / "pairs.tsv").write_text("the cat\tel gato\n")
    for name in ("plain", "plain_again"):  # the user's files: no direction recorded
        paths[name] = save_model_dir(root / name, random_model(), *toy_tokenizers())
    record = {"rule": "sum", "symmetrization": None, "dev_aer": 0.5, "default_dev_aer": 0.6,
              "dev_sentences": 10, "corpus": "bible-en-es/dev"}
    for name, change in (("edited_dev_aer", {"dev_aer": "low"}), ("edited_dev_sentences", {"dev_sentences": 1.5}),
                         ("both_directions", {"symmetrization": "intersection"})):
        paths[name] = _model_dir(root / name, "en-es")
        saved = json.loads((root / name / "model.json").read_text())
        saved["alignment"] = {**record, **change}
        (root / name / "model.json").write_text(json.dumps(saved))
    paths["pairs"] = str(root / "pairs.tsv")
    return paths


def _rows(cases, paths):
    return [(command, [argument.format(**paths) for argument in arguments], "")
            for _, command, arguments, *_ in cases]


def _one_line_failures(cases, results, code=2):
    failures = []
    for (name, *_, phrase), result in zip(cases, results):
        stderr = result["stderr"]
        errors = [line for line in stderr.splitlines() if ": error: " in line]
        others = [line for line in stderr.splitlines() if not _HARNESS_LINE.match(line)]
        if (result["code"] != code or "Traceback" in stderr or len(errors) != 1
                or phrase not in errors[0] or result["stdout"] or others != errors):
            failures.append(f"{name}: exit {result['code']}, stderr tail {stderr[-400:]!r}")
    return failures


def test_alignment_commands_refuse_links_that_cannot_be_right_in_one_line(paths):
    before = {name: sorted(os.listdir(paths[name])) for name in ("tmp", "en_es", "es_en", "en_es_again")}
    results = run_commands(_rows(CASES, paths), cwd=paths["tmp"])
    failures = _one_line_failures(CASES, results)
    assert not failures, "\n".join(failures)
    # no output directory, no links file, no rule saved in a model.json
    assert {name: sorted(os.listdir(paths[name])) for name in before} == before
    assert "alignment" not in json.loads(open(os.path.join(paths["en_es"], "model.json")).read())


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_on_jax_a_head_evaluates_as_on_tensorflow_and_tensorflow_commands_are_refused(tmp_path):
    head_dir = _model_dir(tmp_path / "head", "en-es", head=8)
    run_dir = training_run(tmp_path / "run", steps=(1, 2))
    evaluate = ("evaluate", [f"--model_dir={head_dir}", "--max_sentences=3", "--beam_size=1",
                             "--attention_plots=0", "--no_unk=off"], "")
    refused = [("head on JAX", "alignment_head", [f"--model_dir={head_dir}", "--links=x.links",
                                                 f"--output_dir={tmp_path}/out"],
                "needs Keras's TensorFlow backend, but KERAS_BACKEND is 'jax': the head trains"),
               ("average on JAX", "average", [f"--model_dir={run_dir}", "--last=2"],
                "needs Keras's TensorFlow backend, but KERAS_BACKEND is 'jax'")]
    reports = {}
    for backend in ("jax", "tensorflow"):
        rows = [(evaluate[0], [*evaluate[1], f"--output_dir={tmp_path}/{backend}"], "")]
        rows += _rows(refused, {}) if backend == "jax" else []
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND=backend)
        results = run_commands(rows, cwd=str(tmp_path), env=env)
        assert results[0]["code"] == 0, results[0]["stderr"][-2000:]
        assert "rule pieces, the default (not chosen on a dev gold)" in results[0]["stderr"]
        with open(tmp_path / backend / "report.json") as handle:
            reports[backend] = json.load(handle)["models"][0]["alignment"]
        if backend == "jax":
            failures = _one_line_failures(refused, results[1:])
            assert not failures, "\n".join(failures)
    assert reports["jax"]["aer"] == pytest.approx(reports["tensorflow"]["aer"], abs=1e-6)
    assert not os.path.exists(tmp_path / "out")
    assert sorted(os.listdir(run_dir)) == ["checkpoints", "model.json", "source_vocabulary",
                                           "target_vocabulary"]
