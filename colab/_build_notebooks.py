"""Writes the Colab notebooks of this directory from the cells below: the notebooks' one source.

Notebook JSON is hard to review and easy to let drift; this file is read like any Python module,
and ``tests/test_notebooks.py`` fails when a committed notebook differs from what it writes.
Edit the cells here, then run::

    python colab/_build_notebooks.py            # rewrites colab/*.ipynb (outputs cleared)

The repository's address has one home, the ``Repository`` URL in pyproject.toml (what a
publisher sets).
The notebooks' install cells, and the "Open In Colab" badges and links of README.md and
colab/README.md, are made from it here; the same command rewrites those links, and the test
fails when any of them drifts.

The notebooks are stored without outputs: every number you see comes from your own run.
"""

import os
import re
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SMOKE_VARIABLE = "BAHDANAU_NOTEBOOK_SMOKE"


def repository_url():
    """pyproject.toml's ``Repository = "..."`` URL (read, not run), e.g.
    ``https://github.com/OWNER/bahdanau_tf``."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as handle:
        match = re.search(r'^Repository = "([^"]+)"', handle.read(), re.M)
    if match is None:
        raise ValueError('pyproject.toml has no Repository = "https://github.com/OWNER/NAME" line')
    return match.group(1).rstrip("/")


REPOSITORY_URL = repository_url()
# Colab opens notebooks of GitHub repositories by path: github.com/OWNER/NAME -> OWNER/NAME
GITHUB_REPOSITORY = re.sub(r"^https://github\.com/", "", REPOSITORY_URL)
# the badge links the documents hold, whatever repository they name today
_COLAB_LINK = re.compile(r"https://colab\.research\.google\.com/github/[^)\s]*?/blob/main/colab/")
DOCUMENTS = ("README.md", os.path.join("colab", "README.md"))


def colab_url(filename):
    return f"https://colab.research.google.com/github/{GITHUB_REPOSITORY}/blob/main/colab/{filename}"


def badge(filename):
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"({colab_url(filename)})")


# === Cells shared by every notebook ===

INSTALL_TEMPLATE = f'''\
# Install, three ways: a bahdanau_tf-*.whl uploaded to the working directory is pip-installed
# (a no-op once it is); else, when the package does not import, it is installed from
# REPOSITORY_URL; else (locally, with the package installed) nothing is installed. Colab's
# preinstalled TensorFlow is kept and tensorflow-text is pinned to its version. Then
# TensorFlow is imported without its start-up lines (bahdanau_tf.quiet_tensorflow).
import glob, importlib, importlib.metadata, importlib.util, os, subprocess, sys

REPOSITORY_URL = "{REPOSITORY_URL}"  # pyproject.toml's, written by colab/_build_notebooks.py

wheels = sorted(glob.glob("bahdanau_tf-*.whl"))
if wheels or {{guard}}:
    tf_version = ".".join(importlib.metadata.version("tensorflow").split(".")[:2])
    package = wheels[-1] if wheels else f"bahdanau_tf @ git+{{REPOSITORY_URL}}.git"
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q",
                           f"tensorflow-text=={{tf_version}}.*",{{extra}} package])
    importlib.invalidate_caches()  # not editable: importable in this kernel right away

import bahdanau_tf

bahdanau_tf.quiet_tensorflow()
print("bahdanau_tf", bahdanau_tf.__version__, "from", os.path.dirname(bahdanau_tf.__file__))
'''


def parameters_cell(rows):
    """The papermill ``parameters`` cell: every budget None, resolved per mode in the next cell.

    Args:
        rows: list of (name, full value, smoke value, comment).
    """
    lines = [
        "# Parameters (papermill: -p NAME VALUE). None takes the default of the mode: full, or the",
        f"# CI smoke mode selected by SMOKE=True or the environment variable {SMOKE_VARIABLE}=1.",
        "SMOKE = None",
    ]
    width = max(len(name) for name, *_ in rows)
    for name, full, smoke, comment in rows:
        lines.append(f"{name:<{width}} = None  # {comment}: {full!r} (full), {smoke!r} (smoke)")
    cell = new_code_cell("\n".join(lines) + "\n")
    cell.metadata["tags"] = ["parameters"]
    return cell


def resolve_cell(rows, extra=""):
    lines = [
        "import os",
        "",
        "if SMOKE is None:",
        f'    SMOKE = os.environ.get("{SMOKE_VARIABLE}", "0").lower() not in ("", "0", "false", "no")',
        "",
        "",
        "def mode_default(value, full, smoke):",
        '    """The parameter if it was set, else the default of the mode."""',
        "    return value if value is not None else (smoke if SMOKE else full)",
        "",
        "",
    ]
    for name, full, smoke, _ in rows:
        lines.append(f"{name} = mode_default({name}, {full!r}, {smoke!r})")
    lines += ["", 'print("smoke mode (CI budgets)" if SMOKE else "full mode")']
    for name, *_ in rows:
        lines.append(f'print("  {name} =", repr({name}))')
    return tagged(new_code_cell("\n".join(lines) + "\n" + extra), "mode")


DEVICE = '''\
# Precision and XLA follow the device (bahdanau_tf.devices, as bahdanau-train does): XLA with
# mixed bfloat16 on Ampere and newer GPUs (A100, L4), with float16 and loss scaling on older GPUs
# (T4); float32 + XLA on every CPU. Softmaxes and the loss stay float32.
from bahdanau_tf import devices, training

CHOICE = devices.training_choice()
print("device:", devices.device_description(), "|", CHOICE.precision,
      "+ XLA" if CHOICE.jit_compile else "without XLA", "|", CHOICE.reason)
'''


def TENSORBOARD_CELL(log_dir):  # noqa: N802 (a fresh cell object per notebook)
    """TensorBoard inline, opened before training so that it follows the run."""
    return tagged(new_code_cell(f'''\
# TensorBoard inline: train/dev NLL, dev BLEU, attention images and sample translations of the
# training below, refreshed while it runs (Colab ships TensorBoard; elsewhere
# pip install tensorboard). Not in smoke mode: it starts a server.
import importlib.util

LOG_DIR = {log_dir}
if not SMOKE and importlib.util.find_spec("tensorboard"):
    %load_ext tensorboard
    %tensorboard --logdir {{LOG_DIR}}
'''), "tensorboard")


def tagged(cell, *tags):
    cell.metadata["tags"] = list(tags)
    return cell


def notebook(cells, accelerator=True):
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["colab"] = {"provenance": [], "toc_visible": True}
    if accelerator:
        nb.metadata["accelerator"] = "GPU"
    for i, cell in enumerate(nb.cells):  # stable ids: rebuilding gives the same file
        cell["id"] = f"cell-{i:02d}"
    return nb


# === 01: quickstart ===

QUICKSTART_PARAMETERS = [
    ("PRESET", "rnnsearch-cgru-small", "rnnsearch-cgru-tiny", "model preset (the default, as bahdanau-train's)"),
    ("TRAIN_MINUTES", 12.0, 5.0, "wall-time budget of training"),
    ("MAX_STEPS", None, 30, "update budget (None: only the time budget)"),
    ("MAX_TRAIN_PAIRS", None, 2000, "training pairs used (None: all 27,989)"),
    ("VOCABULARY_SIZE", 5000, 500, "subword vocabulary per language"),
    ("VOCABULARY_SENTENCES", 8000, 500, "sentences the vocabularies are learned from"),
    ("TEST_SENTENCES", 500, 24, "test sentences scored with BLEU"),
    ("BEAM_SIZE", 5, 1, "beam search width (1: greedy)"),
    ("OUTPUT_DIR", "bahdanau_quickstart", "bahdanau_quickstart", "where everything is written"),
]


def quickstart():
    name = "01_quickstart.ipynb"
    return notebook([
        new_markdown_cell(f"""\
# bahdanau_tf quickstart: train RNNsearch, translate, look at the attention, serve it

{badge(name)}

RNNsearch (Bahdanau, Cho & Bengio, *Neural Machine Translation by Jointly Learning to Align and
Translate*, ICLR 2015) trained on the Bible that ships with the package (English → Spanish, World
English Bible / Reina-Valera 1909). In order: install, train the default preset
(`rnnsearch-cgru-small`: RNNsearch at CPU size with the conditional GRU decoder) for 12 minutes,
translate, draw the attention like the paper's figure 3, export a SavedModel for TF Serving and call
its `serving_default` signature.

Select a GPU runtime (*Runtime → Change runtime type*): training then runs on the GPU with mixed
precision. On a CPU it runs too, with the precision and XLA setting `bahdanau-train` would choose
there (what 12 minutes give on a 2-core CPU: the README's "Result").

This notebook is stored without outputs. Setting `{SMOKE_VARIABLE}=1` (what CI does) shrinks every
budget to a smoke run (a `tiny` preset, a few updates); its translations are then gibberish."""),
        INSTALL_CELL(),
        new_markdown_cell("""\
## Translate now, with the model that ships with the package

`bible-en-es-small`: the default preset's RNNsearch trained on this corpus (English → Spanish,
2,000 updates), loaded by name with its vocabularies. Its domain is Bible text: anything else it
answers in the Bible's words (its model card: docs/translating.md). The rest of the notebook
trains your own."""),
        tagged(new_code_cell('''\
from bahdanau_tf import Translator

shipped = Translator.from_preset("bible-en-es-small")
# two test verses (Luke 12:31, 1 Kings 22:44), which it never trained on, and a sentence from outside its domain
verses = ["But seek God's Kingdom, and all these things will be added to you.",
          "Jehoshaphat made peace with the king of Israel.", "The weather is nice today."]
for sentence, translation in zip(verses, shipped.translate(verses).translations):
    print(sentence, "->", translation)
'''), "pretrained"),
        parameters_cell(QUICKSTART_PARAMETERS),
        resolve_cell(QUICKSTART_PARAMETERS, extra="MODEL_DIR = os.path.join(OUTPUT_DIR, \"model\")\n"),
        new_markdown_cell("""\
## The corpus

About 31,000 verse pairs, split by chapter into train / dev / test. Dev and test verses carry gold
word alignments derived from Strong's numbers (used in the paper-reproduction notebook)."""),
        new_code_cell('''\
from bahdanau_tf import corpora

train = corpora.load_corpus("bible-en-es", split="train", direction="en-es")
dev = corpora.load_corpus("bible-en-es", split="dev", direction="en-es")
test = corpora.load_corpus("bible-en-es", split="test", direction="en-es")
if MAX_TRAIN_PAIRS:
    train = train.select(slice(0, MAX_TRAIN_PAIRS))
print(f"train {len(train):,}  dev {len(dev):,}  test {len(test):,} pairs")
print(train.ids[0], "|", train.sources[0], "|", train.targets[0])
'''),
        new_markdown_cell("""\
## Vocabularies

WordPiece subword vocabularies of exactly the asked size, learned by the package's own learner
(`bahdanau_tf.wordpiece`) and applied by tensorflow-text's WordPiece op (the paper used
30,000-word shortlists; `bahdanau_tf.text.WordTokenizer` builds those). A model directory that already exists is resumed
with its own vocabularies, so re-running the training cell continues training."""),
        new_code_cell('''\
import time

from bahdanau_tf import model_directory, text

if os.path.exists(os.path.join(MODEL_DIR, model_directory.MODEL_CONFIG)):
    source_tokenizer = text.load_tokenizer(os.path.join(MODEL_DIR, model_directory.SOURCE_VOCABULARY))
    target_tokenizer = text.load_tokenizer(os.path.join(MODEL_DIR, model_directory.TARGET_VOCABULARY))
else:
    start = time.time()
    # the recipe bahdanau-train uses: WordPiece of exactly VOCABULARY_SIZE pieces from a spread sample
    source_tokenizer, target_tokenizer = text.build_tokenizers(
        train, "subword", VOCABULARY_SIZE, VOCABULARY_SENTENCES)
    print(f"vocabularies learned in {time.time() - start:.0f} s")
print("source", source_tokenizer.vocabulary_size, "tokens; target", target_tokenizer.vocabulary_size, "tokens")
print(source_tokenizer.tokens([train.sources[0]]).to_list()[0][:12])
'''),
        new_markdown_cell("## Device and precision"),
        new_code_cell(DEVICE),
        new_markdown_cell(f"""\
## Train

`Trainer` runs one `tf.function` update per batch (XLA-compiled on the full run), with the preset's
training defaults (Adam 0.005 falling to zero over the budget, batch 64, gradient norm clipped
at 1, the paper's length bucketing), evaluates the dev NLL, keeps the best checkpoint and writes the model directory; at the end it
averages the last 5 checkpoints, which become the best checkpoint when their average has the lower
dev NLL (docs/training.md, "Checkpoints and averaging"). On the
command line: `bahdanau-train --max_minutes=12 --output_dir=bahdanau_quickstart/model` (the paper's
decoder cell: `PRESET = "small"`, `--preset=small`)
(precision and XLA follow the device, as above; `--precision` and `--jit` override them)."""),
        TENSORBOARD_CELL('os.path.join(MODEL_DIR, "logs")'),
        tagged(new_code_cell('''\
config = training.TrainingConfig.for_preset(
    PRESET, max_minutes=TRAIN_MINUTES, max_steps=MAX_STEPS,  # precision and XLA: the device's
    jit_compile=False if SMOKE else None,  # XLA pays off over minutes, not over a few smoke steps
    log_every=10 if SMOKE else 100, eval_every=MAX_STEPS or 500, dev_sentences=32 if SMOKE else 500)
trainer = training.Trainer(
    MODEL_DIR, source_tokenizer, target_tokenizer, preset=PRESET, config=config,
    settings={"corpus": train.name, "direction": "en-es", "tokenizer": source_tokenizer.kind},
    log=print)
report = trainer.fit(train, dev)
print()
print(training.format_report(report))
'''), "train"),
        new_markdown_cell("""\
## Translate

`Translator` puts the tokenizers, the model and beam search (TensorFlow ops) in one graph: strings
in, strings out."""),
        tagged(new_code_cell('''\
from bahdanau_tf.decoding import Batching, BeamSearch
from bahdanau_tf.translator import Translator

# BEAM_SIZE is 1 (greedy) in smoke mode: after a few updates a beam prefers the empty translation;
# XLA (the default) compiles the search once per batch shape, which pays off over many batches only
translator = Translator.from_directory(MODEL_DIR, search=BeamSearch(beam_size=BEAM_SIZE),
                                       batching=Batching(jit_compile=False if SMOKE else None))
# test verses (Luke 12:31, Galatians 6:5, John 4:4), which the model never trained on
sentences = ["But seek God's Kingdom, and all these things will be added to you.",
             "For each man will bear his own burden.",
             "He needed to pass through Samaria."]
output = translator.translate(sentences)
for sentence, translation, score in zip(sentences, output.translations, output.scores):
    print(f"{sentence}\\n  -> {translation}   (log p = {score:.2f})")
'''), "translate"),
        new_markdown_cell("""\
BLEU (sacrebleu, 13a, lowercased) on the first test verses. The paper-reproduction notebook scores
the whole test split the way table 1 does."""),
        tagged(new_code_cell('''\
from bahdanau_tf import evaluation

sample = test.select(slice(0, TEST_SENTENCES))
hypotheses = translator.translate(sample.sources).translations
bleu = evaluation.corpus_bleu(hypotheses, sample.targets)
print(f"{len(sample)} test verses: {bleu}")
for source, reference, hypothesis in list(zip(sample.sources, sample.targets, hypotheses))[:3]:
    print(f"\\nsource:      {source}\\nreference:   {reference}\\ntranslation: {hypothesis}")
'''), "bleu"),
        new_markdown_cell("""\
## Attention (figure 3)

Each row is a target token, each column a source token; white is weight 1, black 0. A trained
model's attention runs roughly along the diagonal, with the jumps the word order needs."""),
        tagged(new_code_cell('''\
from IPython.display import Image, display

from bahdanau_tf.text import split_words

verse = next(s for s in test.sources if 8 <= len(split_words(s)) <= 20)
alignment = translator.translate([verse], return_alignments=True).alignments[0]
ATTENTION_PNG = os.path.join(OUTPUT_DIR, "attention.png")
evaluation.plot_attention(alignment.attention, alignment.source_tokens, alignment.target_tokens,
                          ATTENTION_PNG, title=verse[:60])
print("wrote", ATTENTION_PNG)
display(Image(filename=ATTENTION_PNG))
'''), "attention"),
        new_markdown_cell("""\
## Export a SavedModel and call its signature

The export is a versioned directory (`EXPORT_DIR/1/`) that `tensorflow_model_server` loads as is.
Tokenization, beam search and detokenization are inside its signatures, so the model is called with
plain strings. It is loaded here as the server loads it (the session bundle: restore the variables,
initialise the tables, run the signature by its tensor names), with only `tensorflow` and
`tensorflow_text`. The serving notebook goes further (signatures, REST and gRPC requests, n-best
lists, alignments)."""),
        tagged(new_code_cell('''\
from bahdanau_tf import serving

EXPORT_DIR = os.path.join(OUTPUT_DIR, "export")
# what bahdanau-export --model_dir=MODEL_DIR --beam_size=BEAM_SIZE writes: float32 whatever the
# training precision (what a CPU model server runs best), the default length penalty, no XLA in
# the graph, warm-up records when tensorflow-serving-api is installed (notebook 03 installs it)
exported = Translator.from_directory(MODEL_DIR, dtype=serving.SERVING_DTYPE, search=BeamSearch(beam_size=BEAM_SIZE))
export_path = serving.export_saved_model(exported, EXPORT_DIR)  # EXPORT_DIR/1, then /2, ...
print("exported", export_path, sorted(os.listdir(export_path)))

with serving.SessionBundle(EXPORT_DIR) as served:  # the highest version, loaded as TF Serving loads it
    result = served.run("serving_default", sentences=sentences[:2])
for translation, score in zip(result["translations"], result["scores"]):
    print(f"served: {translation.decode('utf-8')}   (score {score:.2f})")
'''), "serving"),
    ])


# === 02: the paper's experiments ===

PAPER_PARAMETERS = [
    ("MODEL_SIZE", "small", "tiny", "'paper' (n = 1000 units), 'small' or 'tiny'"),
    ("BUDGET_MINUTES", 48.0, 20.0, "training time of all four models together, split evenly"),
    ("MAX_STEPS", None, 5, "update budget per model (None: only the time budget)"),
    ("MAX_TRAIN_PAIRS", None, 1000, "training pairs used (None: all 27,989)"),
    ("VOCABULARY_SIZE", 10000, 1000, "word shortlist per language (the paper: 30,000)"),
    ("TEST_SENTENCES", None, 12, "test verses evaluated (None: all 2,051)"),
    ("BEAM_SIZE", 5, 2, "beam search width"),
    ("OUTPUT_DIR", "bahdanau_paper", "bahdanau_paper", "where models, figures and reports go"),
]


def reproduce_paper():
    name = "02_reproduce_paper.ipynb"
    return notebook([
        new_markdown_cell(f"""\
# Reproducing Bahdanau et al. (2015): RNNsearch vs RNNencdec, -30 vs -50

{badge(name)}

The paper's experiment in small: four models trained under one time budget, on the Bible that
ships with the package (English → Spanish) instead of WMT'14 English → French:

| model | encoder → decoder | trained on sentences of at most |
| --- | --- | --- |
| RNNencdec-30, RNNencdec-50 | one fixed vector c (Cho et al. 2014) | 30 / 50 words |
| RNNsearch-30, RNNsearch-50 | annotations + attention (the paper) | 30 / 50 words |

and then its results: **table 1** (BLEU on all test sentences and on those with no unknown word),
**figure 2** (BLEU by sentence length; in the paper RNNencdec degrades on long sentences and
RNNsearch-50 does not),
**figure 3** (alignments), here also *measured*: the alignment error rate of the attention against
gold word alignments from Strong's numbers, and a **table 2**-style training report.

`BUDGET_MINUTES` scales everything: the paper trained each model for about 5 days; the default 48
minutes (12 per model, on a GPU runtime) is a small fraction of that. Do not expect the paper's
numbers; how clearly its trends show depends on the budget you give. Word shortlists
as in the paper (`WordTokenizer`), `MODEL_SIZE="small"` (256 units) unless you set `"paper"`.

Stored without outputs; `{SMOKE_VARIABLE}=1` (CI) shrinks every budget to a smoke run (a `tiny`
preset, a few updates) whose numbers mean nothing."""),
        INSTALL_CELL(),
        parameters_cell(PAPER_PARAMETERS),
        resolve_cell(PAPER_PARAMETERS),
        new_markdown_cell("## Data and the word shortlists (one pair of vocabularies for all four models)"),
        new_code_cell('''\
import json
import time

from bahdanau_tf import corpora, model_directory, text

train = corpora.load_corpus("bible-en-es", split="train", direction="en-es")
dev = corpora.load_corpus("bible-en-es", split="dev", direction="en-es")
test = corpora.load_corpus("bible-en-es", split="test", direction="en-es")
if MAX_TRAIN_PAIRS:
    train = train.select(slice(0, MAX_TRAIN_PAIRS))
if TEST_SENTENCES:
    test = test.select(slice(0, TEST_SENTENCES))
source_tokenizer, target_tokenizer = text.build_tokenizers(train, "word", VOCABULARY_SIZE)
lengths = [len(text.split_words(s)) for s in train.sources]
print(f"train {len(train):,} pairs ({sum(n <= 30 for n in lengths):,} of at most 30 words, "
      f"{sum(n <= 50 for n in lengths):,} of at most 50); dev {len(dev):,}; test {len(test):,}")
print(f"shortlists: {source_tokenizer.vocabulary_size:,} English / {target_tokenizer.vocabulary_size:,} Spanish words")
'''),
        new_code_cell(DEVICE),
        new_markdown_cell("""\
## Train the four models

Each model gets `BUDGET_MINUTES / 4`. `rnnsearch-50` etc. are the paper's sizes and training
settings (Adadelta, batch 80); the `small` / `tiny` variants use Adam. A model directory that
exists already is resumed, so re-running this cell trains further."""),
        TENSORBOARD_CELL("OUTPUT_DIR  # the four models' logs side by side"),
        tagged(new_code_cell('''\
from bahdanau_tf import training

MODELS = {  # name -> (architecture, maximum sentence length in words)
    "RNNencdec-30": ("rnnencdec", 30),
    "RNNencdec-50": ("rnnencdec", 50),
    "RNNsearch-30": ("rnnsearch", 30),
    "RNNsearch-50": ("rnnsearch", 50),
}
reports = {}
for name, (architecture, max_length) in MODELS.items():
    preset = f"{architecture}-{max_length}" if MODEL_SIZE == "paper" else f"{architecture}-{MODEL_SIZE}"
    config = training.TrainingConfig.for_preset(
        preset, max_length=max_length, max_minutes=BUDGET_MINUTES / len(MODELS), max_steps=MAX_STEPS,
        jit_compile=False if SMOKE else None, log_every=10 if SMOKE else 200,
        eval_every=MAX_STEPS or 500, dev_sentences=32 if SMOKE else 500,
        dev_bleu_every=0 if SMOKE else 2)  # the dev translations for TensorBoard: not in a smoke run
    print(f"=== {name}: preset {preset}, sentences of at most {max_length} words ===")
    trainer = training.Trainer(
        os.path.join(OUTPUT_DIR, name), source_tokenizer, target_tokenizer, preset=preset, config=config,
        settings={"corpus": train.name, "direction": "en-es", "tokenizer": "word"},
        log=print if not SMOKE else (lambda line: None))
    reports[name] = trainer.fit(train, dev)
    print(f"{reports[name]['updates']:,} updates, train NLL {reports[name]['train_nll']}, "
          f"dev NLL {reports[name]['dev_nll']}")
'''), "train"),
        new_markdown_cell("""\
### Table 2: training

The columns of the paper's table 2: updates, epochs, wall time, device, and the negative
log-likelihood per target word on the training and development data (here also the best dev NLL,
whose checkpoint is the one evaluated below)."""),
        tagged(new_code_cell('''\
def number(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


rows = ["| model | updates | epochs | wall time | device | train NLL | dev NLL | best dev NLL |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
for name, r in reports.items():
    rows.append(f"| {name} | {r['updates']:,} | {r['epochs']:.2f} | {r['wall_time']} | {r['device']} | "
                f"{number(r['train_nll'], 3)} | {number(r['dev_nll'], 3)} | {number(r['best_dev_nll'], 3)} |")
TABLE_2 = "\\n".join(rows)
print(TABLE_2)
'''), "table2"),
        new_markdown_cell("""\
## Evaluate: translations, No-UNK decoding, attention on the references

`evaluation.evaluate_translator` does the paper's evaluation of one model: beam search over the
test verses; the verses with no word outside the shortlists decoded again with `[UNK]` forbidden
(the paper's "No UNK" column); and, for RNNsearch, the attention it puts on the *reference* when
it reads it (teacher forcing), turned into word links (each target word to the source word it
attends to most) and scored against the gold Strong's alignments, whose links are *sure* (S) or
only *possible* (P): AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|) (Och & Ney 2003), lower is better."""),
        tagged(new_code_cell('''\
from bahdanau_tf import evaluation
from bahdanau_tf.alignment import alignment_scores, diagonal_links, gold_links
from bahdanau_tf.decoding import Batching, BeamSearch
from bahdanau_tf.translator import Translator

gold, sure, possible = gold_links(test.alignments, test.sure_alignments)
print(f"{len(gold)} of {len(test)} test verses have gold alignments: "
      f"{sum(map(len, sure)):,} sure links, {sum(map(len, possible)):,} in all")

translators, results, outputs = {}, {}, {}
for name in MODELS:
    start = time.time()
    translator = Translator.from_directory(
        os.path.join(OUTPUT_DIR, name), search=BeamSearch(beam_size=BEAM_SIZE),
        batching=Batching(jit_compile=False if SMOKE else None))  # XLA pays off over many batches
    outputs[name] = evaluation.evaluate_translator(translator, test, name=name)
    translators[name], results[name] = translator, outputs[name].report
    print(f"{name}: {results[name].bleu}  ({time.time() - start:.0f} s)")
'''), "evaluate"),
        new_markdown_cell("""\
### Table 1: BLEU

BLEU (sacrebleu, 13a, lowercased) on all test verses and on those with no unknown word. The
paper's English → French numbers, for scale: RNNencdec-30 13.93 / 24.19, RNNencdec-50 17.82 /
26.71, RNNsearch-30 21.50 / 31.44, RNNsearch-50 26.75 / 34.16."""),
        tagged(new_code_cell('''\
rows = ["| model | All | No UNK |", "| --- | ---: | ---: |"]
for name, report in results.items():
    rows.append(f"| {name} | {number(report.bleu.score)} | {number(report.no_unk.score)} |")
TABLE_1 = "\\n".join(rows)
print(TABLE_1)
print()
for name, report in results.items():
    print(f"{name}: BLEU = {report.bleu.score:.2f} on {report.num_sentences} verses; No-UNK BLEU = "
          f"{number(report.no_unk.score)} on {report.no_unk.num_sentences} verses")
with open(os.path.join(OUTPUT_DIR, "evaluation.json"), "w", encoding="utf-8") as handle:
    json.dump({name: report.to_dict() for name, report in results.items()}, handle, indent=2, ensure_ascii=False)
'''), "table1"),
        new_markdown_cell("""\
### Figure 2: BLEU by sentence length

All four models on one plot, test verses grouped by their number of English words."""),
        tagged(new_code_cell('''\
from IPython.display import Image, display

FIGURE_2 = os.path.join(OUTPUT_DIR, "figure2_bleu_by_length.png")
evaluation.plot_bleu_by_length({name: report.bleu_by_length for name, report in results.items()}, FIGURE_2,
                               title="BLEU by source sentence length (Bible, en-es test)")
for name, report in results.items():
    print(name, " ".join(f"{b.label}:{number(b.bleu)}({b.count})" for b in report.bleu_by_length))
print("wrote", FIGURE_2)
display(Image(filename=FIGURE_2))
'''), "figure2"),
        new_markdown_cell("""\
### Figure 3: alignments, looked at and measured

Left as the paper draws it: the attention of RNNsearch-50 while it translates a test verse (rows:
its output words, columns: the English words; white is 1). Then the attention on the *reference*,
with the gold Strong's links marked (red dots: sure, red circles: possible), and the alignment error rate of every RNNsearch
model against a diagonal baseline (each target word linked to the source word at the same relative
position). RNNencdec has no attention, hence no alignment."""),
        tagged(new_code_cell('''\
FIGURE_3 = []
best = "RNNsearch-50"
candidates = [i for i in gold if 6 <= len(text.split_words(test.sources[i])) <= 25][:2] or gold[:1]
for k, i in enumerate(candidates):
    alignment = outputs[best].alignments[i]
    path = os.path.join(OUTPUT_DIR, f"figure3_{k}_decoded.png")
    evaluation.plot_attention(alignment.attention, alignment.source_tokens, alignment.target_tokens, path,
                              title=f"{best}, {test.ids[i]}")
    forced = translators[best].reference_attention([test.sources[i]], [test.targets[i]])[0]
    figure = evaluation.plot_attention(forced.attention, forced.source_tokens, forced.target_tokens, None,
                                       title=f"{best} on the reference, {test.ids[i]}; gold: red (sure), circles (possible)")
    sure_links = set(test.sure_alignments[i])
    possible_links = set(test.alignments[i]) - sure_links
    figure.axes[0].scatter([s for s, t in sure_links], [t for s, t in sure_links], s=14, c="red")
    figure.axes[0].scatter([s for s, t in possible_links], [t for s, t in possible_links], s=14,
                           facecolors="none", edgecolors="red")
    gold_path = os.path.join(OUTPUT_DIR, f"figure3_{k}_gold.png")
    figure.savefig(gold_path, dpi=figure.dpi)
    FIGURE_3 += [path, gold_path]
    display(Image(filename=path), Image(filename=gold_path))


diagonal = diagonal_links([test.sources[i] for i in gold], [test.targets[i] for i in gold])
baseline = alignment_scores(diagonal, sure, possible)
rows = ["| alignment | AER | precision | recall | sentences |", "| --- | ---: | ---: | ---: | ---: |"]
for name, scores in [*((n, r.alignment) for n, r in results.items() if r.alignment), ("diagonal", baseline)]:
    rows.append(f"| {name} | {scores.aer:.3f} | {number(scores.precision)} | {number(scores.recall)} | "
                f"{scores.num_sentences} |")
print("\\n".join(rows))
'''), "figure3"),
    ])


# === 03: serving ===

SERVING_PARAMETERS = [
    ("MODEL_DIR", "bahdanau_quickstart/model", "bahdanau_quickstart/model",
     "a trained model directory; the shipped bible-en-es-small if missing"),
    ("BEAM_SIZE", 5, 2, "beam of serving_default and align"),
    ("EXPORT_DIR", "bahdanau_serving/models/bahdanau", "bahdanau_serving/models/bahdanau",
     "the model base path TF Serving watches"),
]


def serving_notebook():
    name = "03_serving.ipynb"
    return notebook([
        new_markdown_cell(f"""\
# Serving RNNsearch: SavedModel, signatures, REST and gRPC requests

{badge(name)}

The export is a versioned SavedModel whose signatures run the whole translation (tokenization,
encoder, beam search, detokenization) inside the graph, so the stock `tensorflow/serving` image
serves it with no Python and no `bahdanau_tf`. This notebook exports a model, loads it the way the
model server does (the *session bundle*: restore the variables, initialise the tables, run a
signature by its tensor names), inspects the signatures, builds the REST (`instances` and `inputs`
formats) and gRPC request bodies with the clients of the repository's `export/` kit, answers them
as the server would, and gets n-best lists (each sentence with its own beam) and alignments
(figure 3) from the exported model.

It uses the model the quickstart notebook trained (`bahdanau_quickstart/model`) when it exists,
and the model that ships with the package (`bible-en-es-small`) otherwise. No server is started here; `export/README.md` has the Docker
commands. Stored without outputs; `{SMOKE_VARIABLE}=1` (CI) shrinks the budgets."""),
        INSTALL_CELL(serving=True),
        parameters_cell(SERVING_PARAMETERS),
        resolve_cell(SERVING_PARAMETERS),
        new_markdown_cell("## A trained model (the quickstart's, or the shipped one)"),
        new_code_cell('''\
import json

import tensorflow as tf

from bahdanau_tf import model_directory, serving
from bahdanau_tf.decoding import BeamSearch
from bahdanau_tf.translator import Translator

if not os.path.exists(os.path.join(MODEL_DIR, model_directory.MODEL_CONFIG)):
    MODEL_DIR = "bible-en-es-small"  # trained on this corpus, shipped with the package
print("model directory:", MODEL_DIR)
'''),
        new_markdown_cell("""\
## Export

`serving.export_saved_model(translator, EXPORT_DIR)` (or `bahdanau-export --model_dir=... --export_dir=...`) writes the
next version `EXPORT_DIR/N` in float32 (whatever the training precision; `--keep_precision` keeps
it), adds warm-up requests that the server replays when it loads the model, and publishes the
version only once every op is one the stock server has and every signature answers the warm-up
requests through the session bundle."""),
        tagged(new_code_cell('''\
# what bahdanau-export --model_dir=MODEL_DIR --beam_size=BEAM_SIZE writes: float32 whatever the
# training precision (the quickstart uses mixed precision on a GPU), the default length penalty
translator = Translator.from_directory(MODEL_DIR, dtype=serving.SERVING_DTYPE, search=BeamSearch(beam_size=BEAM_SIZE))
export_path = serving.export_saved_model(translator, EXPORT_DIR)
for root, directories, files in sorted(os.walk(export_path)):
    depth = root[len(export_path):].count(os.sep)
    print("  " * depth + os.path.basename(root) + "/", " ".join(sorted(files)))
ops = serving.check_serving_ops(export_path)
print(f"{len(ops['core'])} core TensorFlow op types; tf-text ops: {ops['tf_text']}")
print(f"{len(serving.read_warmup_requests(export_path))} warm-up requests in assets.extra/")
'''), "export"),
        new_markdown_cell("""\
## Inspect the signatures

With `saved_model_cli` (in a shell:
`saved_model_cli show --dir EXPORT_DIR/1 --tag_set serve --signature_def translate_nbest`), then from
the model loaded as the server loads it (`serving.SessionBundle`, which needs only `tensorflow` and
`tensorflow_text`). Every input has the batch dimension (`-1`): the server can batch every
signature (`--enable_batching`), and `translate_nbest` takes `beam_size` and `nbest` per sentence."""),
        tagged(new_code_cell('''\
import subprocess
import sys

cli = subprocess.run([sys.executable, "-m", "tensorflow.python.tools.saved_model_cli", "show", "--dir", export_path,
                      "--tag_set", "serve", "--signature_def", "translate_nbest"],
                     capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
print(cli.stdout)

bundle = serving.SessionBundle(EXPORT_DIR)  # the highest version: the MetaGraph, restored and initialised


def described(tensors):
    return {key: f"{tf.as_dtype(info.dtype).name} {[d.size for d in info.tensor_shape.dim]}"
            for key, info in sorted(tensors.items())}


for name, signature in sorted(bundle.signature_defs.items()):
    print(f"{name}\\n  inputs:  {described(signature.inputs)}\\n  outputs: {described(signature.outputs)}")
'''), "signatures"),
        new_markdown_cell("## Call the signatures: translations, n-best lists, alignments"),
        tagged(new_code_cell('''\
SENTENCES = ["But seek God's Kingdom, and all these things will be added to you.",  # test verses: Luke 12:31,
             "For each man will bear his own burden."]  # Galatians 6:5
result = bundle.run("serving_default", sentences=SENTENCES)  # Session::Run by the signature's tensor names
for sentence, translation, score in zip(SENTENCES, result["translations"], result["scores"]):
    print(f"served: {translation.decode('utf-8')}   (score {score:.2f})")
in_process = translator.translate(SENTENCES)
print("the same as the in-process Translator:",
      [t.decode("utf-8") for t in result["translations"]] == in_process.translations)
'''), "serving"),
        tagged(new_code_cell('''\
# each sentence with its own beam and n-best; the columns go to the largest n-best, padded with "" / -inf
nbest = bundle.run("translate_nbest", sentences=SENTENCES, beam_size=[4, 2], nbest=[3, 2])
for sentence, candidates, scores, beam, count in zip(SENTENCES, nbest["translations"], nbest["scores"],
                                                     nbest["beam_size"], nbest["nbest"]):
    print(f"{sentence}   (beam {beam}, {count} best)")
    for rank, (candidate, score) in enumerate(zip(candidates[:count], scores[:count]), 1):
        print(f"  {rank}. {candidate.decode('utf-8')}   ({score:.2f})")
'''), "nbest"),
        new_markdown_cell("""\
The `align` signature returns the tokens and the attention matrix, so a client can draw the
paper's figure 3 from a served model."""),
        tagged(new_code_cell('''\
from IPython.display import Image, display

from bahdanau_tf import evaluation

aligned = bundle.run("align", sentences=SENTENCES[:1])
source_length, target_length = int(aligned["source_lengths"][0]), int(aligned["target_lengths"][0])
source_tokens = [t.decode("utf-8") for t in aligned["source_tokens"][0, :source_length]]
target_tokens = [t.decode("utf-8") for t in aligned["target_tokens"][0, :target_length]]
attention = aligned["attention"][0, :target_length, :source_length]
print("source tokens:", source_tokens)
print("target tokens:", target_tokens)
print("attention:", attention.shape, "rows sum to", attention.sum(axis=1).round(3).tolist())
ALIGN_PNG = os.path.join(os.path.dirname(EXPORT_DIR), "served_attention.png")
evaluation.plot_attention(attention, source_tokens, target_tokens, ALIGN_PNG, title="from the align signature")
display(Image(filename=ALIGN_PNG))
'''), "align"),
        new_markdown_cell("""\
## REST request bodies

`export/client_rest.py` (standard library only) builds the body of
`POST http://HOST:8501/v1/models/bahdanau:predict` from the signatures the server reports at
`GET /v1/models/bahdanau/metadata`; `serving.signature_metadata` gives the same JSON from the
SavedModel, so the bodies are built here exactly as against a server. Every input has a batch
dimension, so both formats serve every signature: `instances` (one object per sentence, with its
own `beam_size` and `nbest`) and `inputs` (one list per input)."""),
        tagged(new_code_cell('''\
import base64

from bahdanau_tf import serving_kit

# the export/ kit of the repository ships inside the package: written out, the clients import
EXPORT_KIT = serving_kit.write_kit(os.path.join("bahdanau_serving", "kit"))
print("serving kit:", sorted(os.listdir(EXPORT_KIT)))
sys.path.insert(0, EXPORT_KIT)
import client_grpc
import client_rest

metadata = serving.signature_metadata(export_path)
rest_signatures = client_rest.signatures_from_metadata(metadata)
instances_body = client_rest.build_predict_body(rest_signatures, "serving_default", SENTENCES)
inputs_body = client_rest.build_predict_body(rest_signatures, "translate_nbest", SENTENCES, format="inputs",
                                             beam_size=4, nbest=3)  # one value for every sentence
print("REST instances body:", json.dumps(instances_body, ensure_ascii=False))
print("REST inputs body:", json.dumps(inputs_body, ensure_ascii=False))
print("curl -d @body.json http://localhost:8501/v1/models/bahdanau:predict")


def answer_like_tf_serving(body):
    """What TF Serving's REST :predict answers for ``body``, computed through the session bundle."""
    name = body.get("signature_name", "serving_default")
    decode = lambda v: base64.b64decode(v["b64"]) if isinstance(v, dict) else v  # noqa: E731
    if "instances" in body:  # rows become columns, as the server does
        columns = {key: [decode(row[key]) for row in body["instances"]] for key in body["instances"][0]}
        outputs = {key: value.tolist() for key, value in bundle.run(name, **columns).items()}
        return {"predictions": [{key: value[i] for key, value in outputs.items()}
                                for i in range(len(body["instances"]))]}
    inputs = {key: [decode(v) for v in value] for key, value in body["inputs"].items()}
    return {"outputs": {key: value.tolist() for key, value in bundle.run(name, **inputs).items()}}


def strings(value):
    """JSON-able copy of ``value`` with bytes decoded (as the REST API returns strings)."""
    return json.loads(json.dumps(value, default=lambda b: b.decode("utf-8", "replace")))


print("REST answer (instances):", json.dumps(strings(answer_like_tf_serving(instances_body)), ensure_ascii=False))
print("REST answer (inputs):", json.dumps(strings(answer_like_tf_serving(inputs_body)), ensure_ascii=False))
'''), "rest"),
        new_markdown_cell("""\
## gRPC request

`export/client_grpc.py` builds a `tensorflow.serving.PredictRequest` from the SignatureDef (asked
from the server with `GetModelMetadata`, or read from the SavedModel as here); strings travel as
bytes. `serving.run_predict_request` runs it through the session bundle as the server's `Predict` does;
against a server: `PredictionServiceStub(grpc.insecure_channel("localhost:8500")).Predict(request, 60)`."""),
        tagged(new_code_cell('''\
grpc_signatures = client_grpc.signatures_from_saved_model(export_path)
request = client_grpc.build_predict_request(grpc_signatures, "translate_nbest", SENTENCES, beam_size=4, nbest=3)
print("gRPC PredictRequest:")
print(request)
response = serving.run_predict_request(bundle, request)
for key, value in sorted(response.items()):
    print(f"gRPC response {key}:", json.dumps(strings(value.tolist()), ensure_ascii=False))
'''), "grpc"),
        new_markdown_cell("""\
## Serve it

```sh
docker run --rm -p 8500:8500 -p 8501:8501 \\
  -v "$PWD/bahdanau_serving/models/bahdanau:/models/bahdanau" -e MODEL_NAME=bahdanau tensorflow/serving
python bahdanau_serving/kit/client_rest.py --server=http://localhost:8501 "But seek God's Kingdom, and all these things will be added to you."
python bahdanau_serving/kit/client_grpc.py --server=localhost:8500 --signature=translate_nbest --beam_size=8 --nbest=3 "For each man will bear his own burden."
```

The clients are the kit this notebook wrote out above (`python -m bahdanau_tf.serving_kit DIR`
writes it anywhere the package is installed). Colab cannot run Docker: run these where the
exported directory is. `export/README.md` covers GPUs,
`models.config`, server-side batching and the handling of bad input."""),
    ], accelerator=False)


def INSTALL_CELL(serving=False):  # noqa: N802 (a fresh cell object per notebook)
    """The install cell; ``serving`` adds tensorflow-serving-api, pinned like tensorflow-text."""
    modules = ["bahdanau_tf"] + (["tensorflow_serving"] if serving else [])
    guard = " or ".join(f'importlib.util.find_spec("{m}") is None' for m in modules)
    extra = ' f"tensorflow-serving-api=={tf_version}.*",' if serving else ""
    source = INSTALL_TEMPLATE.replace("{guard}", guard).replace("{extra}", extra)
    return tagged(new_code_cell(source), "install")


NOTEBOOKS = {
    "01_quickstart.ipynb": quickstart,
    "02_reproduce_paper.ipynb": reproduce_paper,
    "03_serving.ipynb": serving_notebook,
}


def build():
    """{filename: notebook text} of every notebook."""
    return {name: nbformat.writes(make(), version=4) + "\n" for name, make in NOTEBOOKS.items()}


def documents():
    """{path relative to the repository: text} of README.md and colab/README.md with their
    Colab links pointing at `REPOSITORY_URL`."""
    texts = {}
    for path in DOCUMENTS:
        with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
            texts[path] = _COLAB_LINK.sub(colab_url(""), handle.read())
    return texts


def main():
    for name, text in build().items():
        nbformat.validate(nbformat.reads(text, as_version=4))
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as handle:
            handle.write(text)
        print("wrote", os.path.join(HERE, name))
    for path, text in documents().items():
        with open(os.path.join(ROOT, path), "w", encoding="utf-8") as handle:
            handle.write(text)
        print("wrote", os.path.join(ROOT, path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
