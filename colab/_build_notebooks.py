"""Writes the Colab notebooks of this directory from the cells below: the notebooks' one source.

Notebook JSON is hard to review and easy to let drift; this file is read like any Python module,
and ``tests/test_notebooks.py`` fails when a committed notebook differs from what it writes.
Edit the cells here, then run::

    python colab/_build_notebooks.py            # rewrites colab/*.ipynb (outputs cleared)

The notebooks are stored without outputs: every number you see comes from your own run.
"""

import os
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = os.path.dirname(os.path.abspath(__file__))

# The GitHub path the badges and the install cell point at; change it where the repo is published.
GITHUB_REPOSITORY = "OWNER/bahdanau_tf"
SMOKE_VARIABLE = "BAHDANAU_NOTEBOOK_SMOKE"


def colab_url(filename):
    return f"https://colab.research.google.com/github/{GITHUB_REPOSITORY}/blob/main/colab/{filename}"


def badge(filename):
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"({colab_url(filename)})")


# === Cells shared by every notebook ===

INSTALL = f'''\
# Install. On Colab: clone this repository (or use a bahdanau_tf-*.whl you uploaded) and pip
# install it; Colab's preinstalled TensorFlow is kept and tensorflow-text is pinned to its
# version. Locally, or when the package already imports, nothing is installed.
import glob, importlib, importlib.util, os, subprocess, sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPOSITORY_URL = "https://github.com/{GITHUB_REPOSITORY}.git"

if importlib.util.find_spec("bahdanau_tf") is None:
    import tensorflow as tf

    tf_version = ".".join(tf.__version__.split(".")[:2])
    wheels = sorted(glob.glob("bahdanau_tf-*.whl"))
    if wheels:
        package = wheels[-1]
    else:
        if not os.path.isdir("bahdanau_tf_src"):
            subprocess.check_call(["git", "clone", "--depth=1", REPOSITORY_URL, "bahdanau_tf_src"])
        package = "./bahdanau_tf_src"  # not editable: importable in this kernel right away
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q",
                           f"tensorflow-text=={{tf_version}}.*", package])
    importlib.invalidate_caches()

import bahdanau_tf

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
# The GPU is used when the runtime has one (Runtime > Change runtime type > GPU), with mixed
# precision: bfloat16 on Ampere and newer (A100, L4), float16 with loss scaling before (T4).
# Softmaxes and the loss stay float32. On a CPU: float32.
import tensorflow as tf

from bahdanau_tf import training

gpus = tf.config.list_physical_devices("GPU")
if gpus:
    capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability", (0, 0))
    PRECISION = "mixed_bfloat16" if tuple(capability) >= (8, 0) else "mixed_float16"
else:
    PRECISION = "float32"
print("device:", training.device_description(), "| precision:", PRECISION)
'''


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
    ("PRESET", "small", "tiny", "model preset"),
    ("TRAIN_MINUTES", 12.0, 1.0, "wall-time budget of training"),
    ("MAX_STEPS", None, 30, "update budget (None: only the time budget)"),
    ("MAX_TRAIN_PAIRS", None, 2000, "training pairs used (None: all 27,989)"),
    ("VOCABULARY_SIZE", 5000, 500, "subword vocabulary per language"),
    ("VOCABULARY_SENTENCES", 8000, 500, "sentences the vocabularies are learned from"),
    ("TEST_SENTENCES", 500, 24, "test sentences scored with BLEU"),
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
English Bible / Reina-Valera 1909). In order: install, train the `small` preset for 12 minutes,
translate, draw the attention like the paper's figure 3, export a SavedModel for TF Serving and call
its `serving_default` signature.

Select a GPU runtime (*Runtime → Change runtime type*): training then runs on the GPU with mixed
precision. On a CPU it runs too, it just learns less in 12 minutes.

This notebook is stored without outputs. Setting `{SMOKE_VARIABLE}=1` (what CI does) shrinks every
budget so it runs top to bottom in about a minute; its translations are then gibberish."""),
        INSTALL_CELL(),
        parameters_cell(QUICKSTART_PARAMETERS),
        resolve_cell(QUICKSTART_PARAMETERS, extra="MODEL_DIR = os.path.join(OUTPUT_DIR, \"model\")\n"),
        new_markdown_cell("""\
## The corpus

About 31,000 verse pairs, split by chapter into train / dev / test. Dev and test verses carry gold
word alignments derived from Strong's numbers (used in the paper-reproduction notebook)."""),
        new_code_cell('''\
from bahdanau_tf import data

train = data.load_corpus("bible-en-es", split="train", direction="en-es")
dev = data.load_corpus("bible-en-es", split="dev", direction="en-es")
test = data.load_corpus("bible-en-es", split="test", direction="en-es")
if MAX_TRAIN_PAIRS:
    train = train.select(slice(0, MAX_TRAIN_PAIRS))
print(f"train {len(train):,}  dev {len(dev):,}  test {len(test):,} pairs")
print(train.ids[0], "|", train.sources[0], "|", train.targets[0])
'''),
        new_markdown_cell("""\
## Vocabularies

WordPiece subword vocabularies learned with tensorflow-text (the paper used 30,000-word shortlists;
`bahdanau_tf.text.WordTokenizer` builds those). A model directory that already exists is resumed
with its own vocabularies, so re-running the training cell continues training."""),
        new_code_cell('''\
import time

from bahdanau_tf import model_directory, text

if os.path.exists(os.path.join(MODEL_DIR, model_directory.MODEL_CONFIG)):
    source_tokenizer = text.load_tokenizer(os.path.join(MODEL_DIR, model_directory.SOURCE_VOCABULARY))
    target_tokenizer = text.load_tokenizer(os.path.join(MODEL_DIR, model_directory.TARGET_VOCABULARY))
else:
    start = time.time()
    every = max(1, len(train) // VOCABULARY_SENTENCES)  # a spread-out sample, not the first books
    source_tokenizer = text.SubwordTokenizer.build(train.sources[::every], vocabulary_size=VOCABULARY_SIZE)
    target_tokenizer = text.SubwordTokenizer.build(train.targets[::every], vocabulary_size=VOCABULARY_SIZE)
    print(f"vocabularies learned in {time.time() - start:.0f} s")
print("source", source_tokenizer.vocabulary_size, "tokens; target", target_tokenizer.vocabulary_size, "tokens")
print(source_tokenizer.tokens([train.sources[0]]).to_list()[0][:12])
'''),
        new_markdown_cell("## Device and precision"),
        new_code_cell(DEVICE),
        new_markdown_cell(f"""\
## Train

`Trainer` runs one `tf.function` update per batch (XLA-compiled on the full run), with the preset's
training defaults (`small`: Adam, batch 64, gradient norm clipped at 1, the paper's length
bucketing), evaluates the dev NLL, keeps the best checkpoint and writes the model directory. The
same as `bahdanau-train --preset=small --max_minutes=12 --output_dir=bahdanau_quickstart/model`."""),
        tagged(new_code_cell('''\
config = training.TrainingConfig.for_preset(
    PRESET, max_minutes=TRAIN_MINUTES, max_steps=MAX_STEPS, precision=PRECISION,
    jit_compile=not SMOKE,  # XLA pays off over minutes, not over a few smoke steps
    log_every=10 if SMOKE else 100, eval_every=MAX_STEPS or 500, dev_sentences=64 if SMOKE else 500)
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
from bahdanau_tf.translator import Translator

translator = Translator.from_directory(MODEL_DIR, beam_size=5)
sentences = ["In the beginning God created the heavens and the earth.",
             "Jesus wept.",
             "Love is patient and is kind."]
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
plain strings; loading it needs only `tensorflow` and `tensorflow_text`. The serving notebook goes
further (signatures, REST and gRPC requests, n-best lists, alignments)."""),
        tagged(new_code_cell('''\
EXPORT_DIR = os.path.join(OUTPUT_DIR, "export")
export_path = os.path.join(EXPORT_DIR, "1")
tf.saved_model.save(translator, export_path, signatures=translator.signatures())

served = tf.saved_model.load(export_path)
serving_default = served.signatures["serving_default"]
result = serving_default(sentences=tf.constant(["In the beginning God created the heavens and the earth.",
                                                "Jesus wept."]))
for translation, score in zip(result["translations"].numpy(), result["scores"].numpy()):
    print(f"served: {translation.decode('utf-8')}   (score {score:.2f})")
'''), "serving"),
    ])


def INSTALL_CELL():  # noqa: N802 (a fresh cell object per notebook)
    return tagged(new_code_cell(INSTALL), "install")


NOTEBOOKS = {
    "01_quickstart.ipynb": quickstart,
}


def build():
    """{filename: notebook text} of every notebook."""
    return {name: nbformat.writes(make(), version=4) + "\n" for name, make in NOTEBOOKS.items()}


def main():
    for name, text in build().items():
        nbformat.validate(nbformat.reads(text, as_version=4))
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as handle:
            handle.write(text)
        print("wrote", os.path.join(HERE, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
