r"""bahdanau-train: trains a model and leaves a model directory for translation and export.

With no flags it trains the ``small`` RNNsearch on the embedded Bible corpus, English -> Spanish,
for 12 minutes on a CPU, and writes ``./bahdanau_run`` (model.json, vocabularies, checkpoints,
best/, report.json). Running it again on the same ``--output_dir`` resumes from the last
checkpoint (the vocabularies are read back from the directory, not rebuilt).

Examples:

    bahdanau-train                                   # small, en->es, 12 minutes
    bahdanau-train --preset=rnnsearch-50 --tokenizer=word --vocabulary_size=30000 \
        --max_minutes=0 --max_steps=370000 --output_dir=/data/rnnsearch50
    bahdanau-train --source_file=train.fr --target_file=train.en --dev_source_file=dev.fr \
        --dev_target_file=dev.en --output_dir=/tmp/fr_en
    bahdanau-train --preset=tiny --max_steps=3 --output_dir=/tmp/smoke

Training settings not given on the command line come from the preset's row of
`bahdanau_tf.training.TRAINING_DEFAULTS` (e.g. Adadelta, batch 80, clipnorm 1 for the paper
presets; Adam, batch 64 for ``small``).

Why these defaults (for a 12-minute run on a 2-core CPU):

- WordPiece vocabularies of 5,000 per language: no [UNK] in the output (a 5,000-word shortlist
  leaves 7% of Spanish dev tokens unknown), learned (`bahdanau_tf.text.learn_wordpiece`, exactly
  the size asked for) from a spread sample of 8,000 verses in a few seconds;
  ``--vocabulary_sentences=0`` learns from every verse (~2-3x longer, ~1% fewer tokens per verse).
- Adam 5e-3, clipnorm 1, batch 64, pairs of at most 50 tokens: the ``small`` row; the
  ``small`` model preset uses Keras's initialisers (Glorot) instead of the paper's tiny
  N(0, 0.01^2) weights. Measured on this machine, 4.5-minute runs of the default (dev NLL after
  ~490 updates): Adam 2e-3 / paper init 4.58 (at 400 updates), 5e-3 / paper 4.01, 3e-3 / Keras
  4.07, 5e-3 / Keras 3.39, 8e-3 / Keras 3.70. The paper's initialisation is kept by the paper
  presets, with Adadelta, as in the paper.
- precision and XLA are the device's (`bahdanau_tf.devices`; the header line says which and
  why, ``model.json`` records it): mixed bfloat16 without XLA on a CPU with bf16 units
  (``avx512_bf16``/``amx_bf16``), float32 + XLA (lengths padded to a multiple of 8) on any
  other CPU, XLA with bf16/fp16 on GPUs. On a bf16 CPU two 12-minute default runs side by
  side gave: bf16 1,694 updates, 4,713 real target tokens/s, test BLEU 24.3; float32 + XLA
  1,459 updates, 4,248 tokens/s, BLEU 23.0. On a 2-core AVX2-only AMD EPYC bf16 is the
  slowest variant (float32 2,395, bf16 1,907, float32 + XLA 3,081 tokens/s on Bible batches).
  ``--precision`` and ``--jit`` override the choice.
- dev NLL on the first 500 dev pairs every 200 steps, checkpoints every 200 steps.
"""

import os
import sys
import time

from absl import app, flags, logging

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

FLAGS = flags.FLAGS

# === What to train ===
flags.DEFINE_string("preset", "small", "Model preset (bahdanau_tf.models.preset_names()).")
flags.DEFINE_string("output_dir", "bahdanau_run", "The model directory; an existing one is resumed.")
# === Data ===
flags.DEFINE_string("corpus", "bible-en-es", "Embedded corpus (used unless --source_file/--tsv is given).")
flags.DEFINE_enum("direction", "en-es", ["en-es", "es-en"], "Translation direction of the embedded corpus.")
flags.DEFINE_string("source_file", None, "Training source sentences, one a line (with --target_file).")
flags.DEFINE_string("target_file", None, "Training target sentences, one a line.")
flags.DEFINE_string("dev_source_file", None, "Dev source sentences (with --dev_target_file).")
flags.DEFINE_string("dev_target_file", None, "Dev target sentences.")
flags.DEFINE_string("tsv", None, "Training pairs as a TSV file (source<TAB>target).")
flags.DEFINE_string("dev_tsv", None, "Dev pairs as a TSV file.")
flags.DEFINE_integer("max_train_pairs", None, "Use only the first N training pairs.")
flags.DEFINE_enum("tokenizer", "subword", ["subword", "word"], "Subword (WordPiece) or the paper's word shortlist.")
flags.DEFINE_integer("vocabulary_size", 5000, "Vocabulary size per language (special tokens included).")
flags.DEFINE_integer("vocabulary_sentences", 8000,
                     "Learn a subword vocabulary from this many training sentences (0: all); word shortlists "
                     "always count every sentence.")
# === Training (None: the preset's default) ===
flags.DEFINE_integer("batch_size", None, "Sentence pairs per update.")
flags.DEFINE_integer("max_length", None, "Drop pairs longer than this many tokens.")
flags.DEFINE_enum("bucketing", None, ["paper", "token_budget", "none"], "Length bucketing.")
flags.DEFINE_enum("optimizer", None, ["adadelta", "adam", "sgd"], "Optimizer.")
flags.DEFINE_float("learning_rate", None, "Learning rate.")
flags.DEFINE_float("clipnorm", None, "Bound on the gradient's global L2 norm (0: no clipping).")
flags.DEFINE_enum("schedule", None, ["constant", "halving", "warmup_rsqrt"], "Learning-rate schedule.")
flags.DEFINE_integer("warmup_steps", None, "Warm-up steps of --schedule=warmup_rsqrt.")
flags.DEFINE_enum("precision", None, ["float32", "mixed_bfloat16", "mixed_float16"],
                  "Compute precision (default: the device's, see bahdanau_tf.devices).")
flags.DEFINE_boolean("jit", None, "Compile the forward and backward pass with XLA (default: the device's).")
flags.DEFINE_integer("pad_to_multiple", None, "Pad batch lengths up to a multiple of this (default: 8 with --jit, else 1).")
flags.DEFINE_enum("strategy", "default", ["default", "mirrored", "multi_worker"],
                  "tf.distribute strategy (multi_worker reads TF_CONFIG).")
flags.DEFINE_integer("seed", 1234, "Seed of the data order and the initialisation.")
# === Budgets, checkpoints, evaluation ===
flags.DEFINE_integer("max_steps", None, "Stop after this many updates (in total, over resumed runs).")
flags.DEFINE_float("max_minutes", 12.0, "Wall-time budget of this run in minutes (0: none).")
flags.DEFINE_integer("checkpoint_every", None, "Steps between checkpoints.")
flags.DEFINE_integer("eval_every", None, "Steps between dev NLL evaluations.")
flags.DEFINE_integer("dev_sentences", None, "Dev pairs used for the dev NLL.")
flags.DEFINE_integer("patience", None, "Early stopping after this many evaluations without improvement.")
flags.DEFINE_integer("log_every", None, "Steps between progress lines.")


def _corpora():
    from bahdanau_tf import data

    if FLAGS.tsv:
        train = data.load_tsv(FLAGS.tsv)
        dev = data.load_tsv(FLAGS.dev_tsv) if FLAGS.dev_tsv else None
    elif FLAGS.source_file or FLAGS.target_file:
        if not (FLAGS.source_file and FLAGS.target_file):
            raise app.UsageError("--source_file and --target_file go together.")
        train = data.load_parallel_files(FLAGS.source_file, FLAGS.target_file)
        dev = None
        if FLAGS.dev_source_file and FLAGS.dev_target_file:
            dev = data.load_parallel_files(FLAGS.dev_source_file, FLAGS.dev_target_file)
    else:
        train = data.load_corpus(FLAGS.corpus, split="train", direction=FLAGS.direction)
        dev = data.load_corpus(FLAGS.corpus, split="dev", direction=FLAGS.direction)
    if FLAGS.max_train_pairs:
        train = train.select(slice(0, FLAGS.max_train_pairs))
    return train, dev


def _tokenizers(train, log):
    """The output directory's vocabularies when resuming, else new ones built from ``train``."""
    from bahdanau_tf import model_directory, text

    source_dir = os.path.join(FLAGS.output_dir, model_directory.SOURCE_VOCABULARY)
    target_dir = os.path.join(FLAGS.output_dir, model_directory.TARGET_VOCABULARY)
    if os.path.exists(os.path.join(FLAGS.output_dir, model_directory.MODEL_CONFIG)):
        log(f"{FLAGS.output_dir} holds a model: resuming with its vocabularies.")
        return text.load_tokenizer(source_dir), text.load_tokenizer(target_dir)
    start = time.time()
    if FLAGS.tokenizer == "word":
        build = lambda texts: text.WordTokenizer.build(texts, max_vocabulary_size=FLAGS.vocabulary_size)  # noqa
        sample = slice(None)
    else:
        build = lambda texts: text.SubwordTokenizer.build(texts, vocabulary_size=FLAGS.vocabulary_size)  # noqa: E731
        sample = slice(0, FLAGS.vocabulary_sentences or None)
    # a spread-out sample: every k-th sentence, not the first books only
    step = max(1, len(train) // FLAGS.vocabulary_sentences) if sample.stop else 1
    source = build(train.sources[::step])
    target = build(train.targets[::step])
    log(f"Built {FLAGS.tokenizer} vocabularies of {source.vocabulary_size:,} / {target.vocabulary_size:,} tokens "
        f"in {time.time() - start:.0f} s.")
    for side, tokenizer in (("source", source), ("target", target)):
        if tokenizer.vocabulary_size != FLAGS.vocabulary_size:
            why = ("its characters alone need more" if tokenizer.vocabulary_size > FLAGS.vocabulary_size else
                   "the training text holds no more distinct " + ("words" if FLAGS.tokenizer == "word" else "pieces"))
            log(f"The {side} vocabulary has {tokenizer.vocabulary_size:,} tokens, not the {FLAGS.vocabulary_size:,} "
                f"asked for: {why}.")
    return source, target


def main(argv):
    del argv
    start_time = time.time()
    if not FLAGS["verbosity"].present:
        logging.set_verbosity(logging.WARNING)  # TensorFlow's INFO lines (one per checkpoint save)
    from bahdanau_tf import training

    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    changes = dict(
        batch_size=FLAGS.batch_size,
        max_length=FLAGS.max_length,
        optimizer=FLAGS.optimizer,
        learning_rate=FLAGS.learning_rate,
        schedule=FLAGS.schedule,
        warmup_steps=FLAGS.warmup_steps,
        precision=FLAGS.precision,
        jit_compile=FLAGS.jit,
        pad_to_multiple=FLAGS.pad_to_multiple,
        seed=FLAGS.seed,
        max_steps=FLAGS.max_steps,
        max_minutes=FLAGS.max_minutes or None,
        checkpoint_every=FLAGS.checkpoint_every,
        eval_every=FLAGS.eval_every,
        dev_sentences=FLAGS.dev_sentences,
        patience=FLAGS.patience,
        log_every=FLAGS.log_every,
    )
    # flags left unset keep the preset's training defaults
    config = training.TrainingConfig.for_preset(FLAGS.preset, **{k: v for k, v in changes.items() if v is not None})
    if FLAGS.clipnorm is not None:
        config.clipnorm = FLAGS.clipnorm or None
    if FLAGS.bucketing is not None:
        config.bucketing = None if FLAGS.bucketing == "none" else FLAGS.bucketing
    strategy = training.make_strategy(FLAGS.strategy)  # before any other TensorFlow work (multi-worker)
    train, dev = _corpora()
    source_tokenizer, target_tokenizer = _tokenizers(train, log)
    settings = {
        "corpus": train.name,
        "direction": train.direction,
        "tokenizer": source_tokenizer.kind,
        "command": " ".join(sys.argv),
    }
    trainer = training.Trainer(
        FLAGS.output_dir, source_tokenizer, target_tokenizer, preset=FLAGS.preset, config=config,
        strategy=strategy, settings=settings, log=log,
    )
    try:
        trainer.restore()  # resumes, or refuses a directory that holds another model
    except ValueError as error:
        log(f"bahdanau-train: {error}")
        return 2
    try:
        report = trainer.fit(train, dev, start_time=start_time)
    except training.NonFiniteLossError as error:
        log(str(error))
        return 3
    log("\n" + training.format_report(report))
    log(f"Model directory: {os.path.abspath(FLAGS.output_dir)}")
    return 0


def run():
    app.run(main)


if __name__ == "__main__":
    run()
