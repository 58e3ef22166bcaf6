r"""bahdanau-train: trains a model and leaves a model directory for translation and export.

With no flags it trains ``{default}`` ({description};
``presets.DEFAULT``) on the embedded Bible corpus, English -> Spanish, for {minutes:g} minutes on a CPU, and writes ``./bahdanau_run`` (model.json,
vocabularies, checkpoints, best/, averaged/, report.json, logs/ for TensorBoard, lexicon.tsv).
Running it again on the same ``--output_dir`` resumes from the last checkpoint (the vocabularies
are read back from the directory, not rebuilt) with the run's recipe: ``--preset`` and the
training flags left unset take ``model.json``'s values; one that would change the recipe is
refused (docs/training.md).

Examples:

    bahdanau-train                                   # {default}, en->es, {minutes:g} minutes
    bahdanau-train --preset=small                    # the same with {small}
    bahdanau-train --preset=rnnsearch-50 --tokenizer=word --vocabulary_size=30000 \
        --max_minutes=0 --max_steps=370000 --output_dir=/data/rnnsearch50
    bahdanau-train --source_file=train.fr --target_file=train.en --dev_source_file=dev.fr \
        --dev_target_file=dev.en --output_dir=/tmp/fr_en
    bahdanau-train --preset=tiny --max_steps=3 --output_dir=/tmp/smoke
    bahdanau-train --dropout=0.2 --word_dropout=0.1 --label_smoothing=0.1 \
        --schedule=plateau --early_stopping=6 --average_at=best   # docs/training.md

Every training flag is a field of `bahdanau_tf.training.TrainingConfig` (the flags are made from
its fields); a flag left unset keeps the preset's training default from
`bahdanau_tf.presets.PRESETS` (e.g. {paper_optimizer}, batch {paper_batch}, clipnorm {paper_clipnorm:g}
for the paper presets; {optimizer} {learning_rate:g}, batch {batch_size} for ``{default}``).

Why these defaults (for a {minutes:g}-minute run on a 2-core CPU):

- ``{default}``: of the CPU-sized presets, the one that scored best in the README's
  {minutes:g}-minute run (benchmarks/README.md, "The main command, 12 minutes").
- WordPiece vocabularies of {vocabulary_size:,} per language: no [UNK] in the output (a word
  shortlist of that size leaves Spanish dev words unknown: ``bahdanau-data --tokenizer=word
  --vocabulary_dir=DIR`` prints the coverage), learned (`bahdanau_tf.text.build_tokenizers` with `learn_wordpiece`:
  exactly the size asked for) from a spread sample of {vocabulary_sentences:,} verses in a few
  seconds; ``--vocabulary_sentences=0`` learns from every verse (longer, and a little fewer
  tokens per verse).
- {optimizer} {learning_rate:g}, {schedule_text},
  clipnorm {clipnorm:g}, batch {batch_size}, pairs of at most {max_length} tokens: the preset's row
  (benchmarks/recipe.md). The CPU-sized presets use Keras's initialisers (Glorot)
  instead of the paper's tiny N(0, 0.01^2) weights: in short runs on a 2-core CPU they reached a
  lower dev NLL. The paper's initialisation is kept by the paper presets, with Adadelta, as in
  the paper.
- the last {average_last} checkpoints, {checkpoint_every} updates apart, averaged at the end
  (``--average_last``): the average becomes ``best/`` when its dev NLL is lower, which pays at a
  constant rate and rarely happens once the rate has fallen to zero (benchmarks/recipe.md,
  "Checkpoint averaging").
- precision and XLA are the device's (`bahdanau_tf.devices`; the header line says which and
  why, ``model.json`` records it): float32 + XLA (lengths padded to a multiple of 8) on every
  CPU, XLA with bf16/fp16 on GPUs. On the 2-core CPUs measured (AVX2 only, and AVX-512 with
  bf16 instructions) float32 + XLA trained fastest (benchmarks/README.md, "Training": the
  tables, the CPUs and the commands); CPUs with AMX tiles get the same choice.
  ``--precision`` and ``--jit`` override the choice.
- dev NLL on the first {dev_sentences} dev pairs every {eval_every} updates, a checkpoint every
  {checkpoint_every} (``--dev_sentences``, the preset's ``eval_every`` and ``checkpoint_every``).

The trainer is TensorFlow's (a ``tf.function`` step, XLA, ``tf.distribute``): with another Keras
backend (``KERAS_BACKEND=jax``) it refuses to start (exit code 2). On any backend a model trains
with Keras's own ``model.compile(...)`` + ``model.fit(make_dataset(...))`` (docs/training.md).

The run's flags are written to ``OUTPUT_DIR/flags.txt`` (an absl flag file):
``bahdanau-train --flagfile=RUN/flags.txt --output_dir=OTHER`` trains the same configuration,
from any directory (its paths are absolute).

Exit codes: 0 done, 2 usage error or bad input, 3 non-finite loss, 4 output directory in use,
5 an I/O failure (a full disk: no partial checkpoint is left), 130 / 143 stopped by SIGINT /
SIGTERM (after a checkpoint and the report; a second signal stops at once, exit code 130).
"""

import dataclasses
import os
import signal
import sys
import time
import types

from absl import flags

from bahdanau_tf.cli import common  # noqa: E402  (first: TensorFlow loads quietly)
from bahdanau_tf import presets  # noqa: E402
from bahdanau_tf import pretrained  # noqa: E402

FLAGS = flags.FLAGS
#: the README's 12-minute run: ``--max_minutes``'s default (0 means no time budget)
DEFAULT_MAX_MINUTES = 12.0
#: how the help text words each learning-rate schedule
SCHEDULE_TEXT = {"constant": "a constant rate", "budget": "falling linearly to zero over the run's "
                 "budget (``--schedule=budget``)", "halving": "halved every half epoch after epoch 5",
                 "warmup_rsqrt": "warmed up, then decayed as 1 / sqrt(step)",
                 "plateau": "decayed when the dev NLL stops improving"}


#: how ``--help`` words a model argument's value where a preset differs from the default preset
ARGUMENT_WORDS = {("decoder", "paper"): "the paper's decoder cell",
                  ("decoder", "cgru"): "the conditional GRU decoder",
                  ("tie_embeddings", False): "untied embeddings", ("tie_embeddings", True): "tied embeddings"}


def differences_from_default(name):
    """How preset ``name``'s model differs from the default preset's, in words, from their
    `bahdanau_tf.presets` rows (the class's defaults where a row leaves an argument)."""
    import inspect

    def arguments(preset):
        parameters = inspect.signature(preset.model_class).parameters.items()
        return {**{key: parameter.default for key, parameter in parameters
                   if parameter.default is not inspect.Parameter.empty}, **preset.model}

    mine, default = arguments(presets.get_preset(name)), arguments(presets.get_preset(presets.DEFAULT))
    changed = [key for key in default if mine.get(key) != default[key]]
    return " and ".join(ARGUMENT_WORDS.get((key, mine.get(key)), f"{key}={mine.get(key)}") for key in changed)


def help_text(doc):
    """The module docstring with the values it quotes filled in from `bahdanau_tf.presets` (the
    default preset's row, `presets.DEFAULT`, and a paper preset's) and the flags' defaults: the
    prose of ``--help`` says what a run without flags does."""
    from bahdanau_tf import text, training

    config = training.TrainingConfig.for_preset(presets.DEFAULT)
    paper = training.TrainingConfig.for_preset("rnnsearch-50")
    names = {"adam": "Adam", "adadelta": "Adadelta", "sgd": "SGD"}
    preset = presets.get_preset(presets.DEFAULT)
    return doc.format(
        default=preset.name, description=preset.description, minutes=DEFAULT_MAX_MINUTES,
        small=differences_from_default("small"),
        optimizer=names[config.optimizer], learning_rate=config.learning_rate,
        schedule_text=SCHEDULE_TEXT.get(config.schedule, f"``--schedule={config.schedule}``"),
        clipnorm=config.clipnorm, batch_size=config.batch_size, max_length=config.max_length,
        average_last=config.average_last, checkpoint_every=config.checkpoint_every,
        eval_every=config.eval_every, dev_sentences=config.dev_sentences,
        vocabulary_size=text.DEFAULT_VOCABULARY_SIZE,
        vocabulary_sentences=text.DEFAULT_VOCABULARY_SENTENCES,
        paper_optimizer=names[paper.optimizer], paper_batch=paper.batch_size,
        paper_clipnorm=paper.clipnorm)


#: the module docstring as written, with the fields `help_text` fills in
HELP_TEMPLATE = __doc__
__doc__ = help_text(HELP_TEMPLATE)  # noqa: A001 (what --help prints)

# === What to train, where ===
flags.DEFINE_string("preset", presets.DEFAULT, f"Model preset (default: {presets.DEFAULT}, {presets.get_preset(presets.DEFAULT).description}; "
                    f"small: the same with {differences_from_default('small')}), one of "
                    + ", ".join(presets.preset_names()) + ".")
flags.DEFINE_string("output_dir", "bahdanau_run", "The model directory (one of its own, not the "
                    "current directory); an existing one is resumed.")
flags.DEFINE_enum("strategy", "default", ["default", "mirrored", "multi_worker"],
                  "tf.distribute strategy (multi_worker reads TF_CONFIG).")
# === Data ===
common.define_corpus_flags()
common.define_tokenizer_flags()
flags.DEFINE_string("dev_source_file", None, "Dev source sentences (with --dev_target_file).")
flags.DEFINE_string("dev_target_file", None, "Dev target sentences.")
flags.DEFINE_string("dev_tsv", None, "Dev pairs as a TSV file.")
flags.DEFINE_integer("max_train_pairs", None, "Use only the first N training pairs.", lower_bound=1)
flags.DEFINE_string("guided_alignment", None, "Guided alignment training: a file of Pharaoh word "
                    "links (i-j, source word - target word, 0-based), one line per training pair, "
                    "as `bahdanau-data align` (eflomal) or fast_align write them; the attention is "
                    "trained towards them (--guided_alignment_weight, --guided_alignment_decay).")
flags.DEFINE_enum("guided_alignment_unaligned", None, ["free", "end"], "With --guided_alignment: "
                  "a target word without links costs nothing (free, the default), or is trained "
                  "to attend to the source [END], which the extraction rules read as unaligned "
                  "(end).")
#: the flags that only mean something with --guided_alignment
GUIDED_ALIGNMENT_FLAGS = ("guided_alignment_weight", "guided_alignment_decay",
                          "guided_alignment_unaligned")


# === Training: one flag per TrainingConfig field ===
def _show(value):
    """A default as ``--help`` writes it (absl's spelling of booleans)."""
    return str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)


def training_default_text(field, help_text):
    """What ``--help`` says of a training flag's default, from `bahdanau_tf.presets`: the preset's
    (the default preset's value named) where a preset sets the field, else the
    `TrainingConfig` default (nothing where the help already says what None means)."""
    from bahdanau_tf import training

    if any(field.name in preset.training for preset in presets.PRESETS.values()):
        value = getattr(training.TrainingConfig.for_preset(presets.DEFAULT), field.name)
        return f" (default: the preset's; {presets.DEFAULT}: {_show(value)})"
    if field.default is None:
        return "" if "None (default)" in help_text else " (default: none)"
    return f" (default: {_show(field.default)})"


def _define_training_flags():
    from bahdanau_tf import data, training

    choices = {"optimizer": training.OPTIMIZERS, "schedule": training.SCHEDULES,
               "average_at": training.AVERAGE_AT, "regularization": training.REGULARIZATIONS,
               "precision": training.PRECISIONS, "sampled_proposal": training.SAMPLED_PROPOSALS,
               "bucketing": [m or "none" for m in data.BUCKETING_MODES]}
    at_least_zero = {"max_steps", "seed", "dev_bleu_every", "lexicon_top_k", "average_last",
                     "early_stopping"}
    cli_defaults = {"max_minutes": DEFAULT_MAX_MINUTES}
    helps = training.TrainingConfig.field_help()  # dataclasses.field(metadata={"help": ...})
    names = []
    for field in dataclasses.fields(training.TrainingConfig):
        name, kind = field.name, field.type
        if isinstance(kind, types.UnionType):
            kind = next(t for t in kind.__args__ if t is not type(None))
        default = cli_defaults.get(name)
        text = helps.get(name, name)
        text += training_default_text(field, text) if default is None else ""
        if name in choices:
            flags.DEFINE_enum(name, None, list(choices[name]), text)
        elif kind is bool:
            flags.DEFINE_boolean(name, None, text)
        elif kind is int:
            flags.DEFINE_integer(name, None, text, lower_bound=0 if name in at_least_zero else 1)
        elif kind is float:
            common.define_finite_float(name, default, text, lower_bound=0.0)
        else:
            flags.DEFINE_string(name, None, text)
        names.append(name)
    flags.DEFINE_alias("jit", "jit_compile")
    flags.DEFINE_alias("patience", "early_stopping")  # its old name
    return names


TRAINING_FLAGS = _define_training_flags()


def _saved_run():
    """The ``model.json`` of the run --output_dir holds (None for a new run, or a damaged one,
    which the trainer names when it takes the directory)."""
    from bahdanau_tf import model_directory

    if not os.path.exists(os.path.join(FLAGS.output_dir, model_directory.MODEL_CONFIG)):
        return None
    try:
        return model_directory.read_model_config(FLAGS.output_dir)
    except (OSError, ValueError):
        return None


#: how a flag says a TrainingConfig field's None (``--clipnorm=0``: no clipping)
_NONE_AS_FLAG = {"clipnorm": 0.0, "max_minutes": 0.0, "bucketing": "none"}


def _keep_the_recipe(saved):
    """A resumed run keeps its recipe: --preset and each training flag left unset take the
    run's (``model.json``), so that flags.txt, model.json and report.json say the same; a flag
    given that changes it is refused (`training.check_kept_recipe`, before the config is built). The
    `INVOCATION_FIELDS` (this run's minutes, device settings and logging) are not the recipe."""
    from bahdanau_tf import training

    settings = saved.get("settings", {})
    if not FLAGS["preset"].present and settings.get("preset") in presets.preset_names():
        FLAGS.preset = settings["preset"]
    recipe = settings.get("training") if isinstance(settings.get("training"), dict) else {}
    defaults = {field.name: field.default for field in dataclasses.fields(training.TrainingConfig)}
    defaults.update(presets.get_preset(FLAGS.preset).training)
    for name in TRAINING_FLAGS:
        if (FLAGS[name].value is not None or name not in recipe or name in training.INVOCATION_FIELDS
                or recipe[name] == defaults.get(name)):
            continue
        value = _NONE_AS_FLAG.get(name) if recipe[name] is None else recipe[name]
        if value is not None:
            FLAGS[name].value = value


def _training_config():
    """The preset's TrainingConfig with every flag the user gave (a resumed run's recipe for
    the others, `_keep_the_recipe`)."""
    from bahdanau_tf import training

    saved = _saved_run()
    if saved is not None:
        _keep_the_recipe(saved)

    changes = {}
    for name in TRAINING_FLAGS:
        value = FLAGS[name].value
        if value is None:
            continue
        if name in ("clipnorm", "max_minutes") and value == 0:
            value = None  # 0 switches clipping / the time budget off
        if name == "bucketing" and value == "none":
            value = None
        changes[name] = value
    if saved is not None:  # a changed recipe is named as such, before its settings are checked
        recipe = saved.get("settings", {}).get("training")
        training.check_kept_recipe(FLAGS.output_dir, recipe if isinstance(recipe, dict) else {}, changes)
    return training.TrainingConfig.for_preset(FLAGS.preset, **changes)


# === Regularisation: the model's dropout (bahdanau_tf.models.regularization), over the preset's ===
common.define_finite_float("dropout", None, "Sets embedding_dropout, annotation_dropout, "
                           "recurrent_dropout and readout_dropout at once (each flag of its own wins).",
                           lower_bound=0.0, upper_bound=0.95)
_DROPOUT_HELP = {
    "embedding_dropout": "Dropout of the source and target embeddings, one mask per sentence.",
    "annotation_dropout": "Dropout of what the encoder hands the decoder (RNNsearch: the "
                          "annotations h_j), one mask per sentence.",
    "recurrent_dropout": "Variational dropout of the decoder state where each step reads it, one "
                         "mask per sequence (Gal & Ghahramani 2016).",
    "readout_dropout": "Dropout of what the vocabulary projection reads (the maxout units t_i).",
    "word_dropout": "Each source token replaced by [UNK] with this probability (per token).",
}


def preset_default_text(argument):
    """What ``--help`` says of a model argument's default, from `bahdanau_tf.presets`: each
    preset's value (the model class's where the row leaves it), or, for a dropout rate under
    ``regularization="budget"``, the budget rule's; presets whose class lacks it left out."""
    import inspect

    from bahdanau_tf.models import regularization

    rule = argument in regularization.DROPOUT_ARGUMENTS
    groups = {}
    for name, preset in sorted(presets.PRESETS.items()):
        parameters = inspect.signature(preset.model_class).parameters
        if argument not in parameters:
            continue
        if rule and preset.training.get("regularization") == "budget":
            said = "the budget rule's (--regularization=budget, which a nonzero dropout flag turns off)"
        else:
            said = _show(preset.model.get(argument, parameters[argument].default))
        groups.setdefault(said, []).append(name)
    parts = sorted(groups.items(), key=lambda item: len(item[1]))
    *named, (others, _) = parts
    text = "; ".join(f"{said} for {', '.join(names)}" for said, names in named)
    return f"default: the preset's, or the resumed directory's: {text + '; ' if text else ''}{others} for the others."


for _name, _text in _DROPOUT_HELP.items():
    common.define_finite_float(_name, None, f"{_text} Training only; {preset_default_text(_name)}",
                               lower_bound=0.0, upper_bound=0.95)
flags.DEFINE_boolean("tie_embeddings", None, "The vocabulary projection W_o is the target "
                     "embedding matrix transposed: one variable (Press & Wolf 2017), for RNNsearch and "
                     "RNNencdec where maxout_dim equals embedding_dim (the CPU presets). "
                     f"D{preset_default_text('tie_embeddings')[1:]}")


def _model_overrides():
    """The dropout rates and the tying the flags set; unset ones keep the resumed run's (its
    ``model.json``, where a missing argument had the model's default; their flags are set, so
    flags.txt lists them), else the preset's."""
    import inspect

    from bahdanau_tf.models import regularization

    saved = _saved_run()
    covered = regularization.DROPOUT_ARGUMENTS[:4] if FLAGS.dropout is not None else ()
    preset = presets.get_preset(FLAGS.preset)
    defaults = {name: parameter.default for name, parameter in inspect.signature(preset.model_class).parameters.items()
                if parameter.default is not inspect.Parameter.empty}  # the model's own, for what the preset leaves
    chosen = (*regularization.DROPOUT_ARGUMENTS, "tie_embeddings")
    saved_config = (saved or {}).get("config")
    for name in chosen:
        value = None if saved_config is None else saved_config.get(name, defaults.get(name))
        unset = FLAGS[name].value is None and name not in covered
        if unset and value is not None and value != preset.model.get(name, defaults.get(name)):
            FLAGS[name].value = value
    overrides = {}
    if FLAGS.dropout is not None:
        overrides = dict.fromkeys(regularization.DROPOUT_ARGUMENTS[:4], FLAGS.dropout)
    overrides.update({name: FLAGS[name].value for name in chosen if FLAGS[name].value is not None})
    given = [name for name in ("dropout", *regularization.DROPOUT_ARGUMENTS) if FLAGS[name].present]
    if FLAGS["regularization"].present and FLAGS.regularization == "budget" and given:
        raise common.UserError(f"--regularization=budget chooses the dropout itself; --{given[0]} gives it: "
                               "drop one of them.")
    if "tie_embeddings" in overrides and "tie_embeddings" not in defaults:  # either way: no tying to set
        flag = "--tie_embeddings" if overrides["tie_embeddings"] else "--notie_embeddings"
        raise common.UserError(f"{flag} is for RNNsearch and RNNencdec; --preset={FLAGS.preset} "
                               f"is a {preset.model_class.__name__}.")
    if overrides.get("tie_embeddings"):
        sizes = preset.model.get("maxout_dim"), preset.model.get("embedding_dim")
        if sizes[0] != sizes[1]:
            raise common.UserError(f"--tie_embeddings needs maxout_dim == embedding_dim; --preset={FLAGS.preset} "
                                   f"has {sizes[0]} and {sizes[1]} (the CPU presets have 128 and 128).")
    return overrides


def _dev_corpus(train):
    from bahdanau_tf import corpora

    if FLAGS.dev_tsv or FLAGS.dev_source_file or FLAGS.dev_target_file:
        return corpora.select_corpus(source_file=FLAGS.dev_source_file,
                                  target_file=FLAGS.dev_target_file, tsv=FLAGS.dev_tsv)
    if FLAGS.source_file or FLAGS.tsv:
        return None  # the user's own data without a dev set: no dev NLL
    return common.corpus_from_flags("dev")


def _tokenizers(train, log):
    """The output directory's vocabularies when resuming, --vocabulary_dir's, or new ones."""
    from bahdanau_tf import model_directory, text

    if os.path.exists(os.path.join(FLAGS.output_dir, model_directory.MODEL_CONFIG)):
        return (text.load_tokenizer(os.path.join(FLAGS.output_dir, model_directory.SOURCE_VOCABULARY)),
                text.load_tokenizer(os.path.join(FLAGS.output_dir, model_directory.TARGET_VOCABULARY)))
    if FLAGS.vocabulary_dir:
        try:
            tokenizers = tuple(text.load_tokenizer(os.path.join(FLAGS.vocabulary_dir, side))
                               for side in ("source", "target"))
        except (OSError, ValueError) as error:
            raise common.UserError(f"--vocabulary_dir={FLAGS.vocabulary_dir!r}: {str(error).rstrip('.')} "
                                   "(bahdanau-data --vocabulary_dir=DIR writes DIR/source and "
                                   "DIR/target).") from None
        log(f"Using the vocabularies of {FLAGS.vocabulary_dir}: "
            f"{tokenizers[0].vocabulary_size:,} / {tokenizers[1].vocabulary_size:,} tokens.")
        return tokenizers
    start = time.time()
    source, target = text.build_tokenizers(train, FLAGS.tokenizer, FLAGS.vocabulary_size,
                                           FLAGS.vocabulary_sentences or None)
    log(f"Built {FLAGS.tokenizer} vocabularies of {source.vocabulary_size:,} / "
        f"{target.vocabulary_size:,} tokens in {time.time() - start:.0f} s.")
    for side, tokenizer in (("source", source), ("target", target)):
        if tokenizer.vocabulary_size != FLAGS.vocabulary_size:
            why = ("its characters alone need more" if tokenizer.vocabulary_size > FLAGS.vocabulary_size
                   else "the training text holds no more distinct "
                   + ("words" if FLAGS.tokenizer == "word" else "pieces"))
            log(f"The {side} vocabulary has {tokenizer.vocabulary_size:,} tokens, not the "
                f"{FLAGS.vocabulary_size:,} asked for: {why}.")
    return source, target


FLAGS_FILE = "flags.txt"
#: the flags that name files or directories: flags.txt holds them absolute
PATH_FLAGS = ("output_dir", "source_file", "target_file", "tsv", "dev_source_file",
              "dev_target_file", "dev_tsv", "vocabulary_dir", "guided_alignment")


def write_flags_file(directory):
    """Writes this command's flags and their values to ``directory/flags.txt``, an absl flag
    file: ``bahdanau-train --flagfile=RUN/flags.txt --output_dir=OTHER`` trains the same
    configuration (a flag given after ``--flagfile`` wins), from any directory: the paths of
    `PATH_FLAGS` are written absolute."""
    import tensorflow as tf

    own = [flag for module, defined in FLAGS.flags_by_module_dict().items()
           if module.startswith("bahdanau_tf.") or module in ("__main__", sys.argv[0])
           for flag in defined]
    lines = sorted({f"--{flag.name}={os.path.abspath(flag.value)}" if flag.name in PATH_FLAGS
                    else flag.serialize()
                    for flag in own if flag.value is not None and flag.name not in ("jit", "patience")}
                   - {""})
    with tf.io.gfile.GFile(os.path.join(directory, FLAGS_FILE), "w") as handle:
        handle.write("# bahdanau-train's flags of this run; repeat it with\n"
                     f"# bahdanau-train --flagfile={FLAGS_FILE} --output_dir=OTHER\n")
        handle.write("".join(line + "\n" for line in lines))


def _alignment_links(train):
    """The word links of --guided_alignment (None without it), read and checked against the
    training pairs before any vocabulary is learned: a file that does not match is a usage
    error naming the line."""
    if not FLAGS.guided_alignment:
        return None
    from bahdanau_tf import alignment

    try:
        links = alignment.read_pharaoh(FLAGS.guided_alignment)
        alignment.check_word_links(train.pairs(), links)
    except (OSError, ValueError) as error:
        raise common.UserError(f"--guided_alignment={FLAGS.guided_alignment!r}: {error}") from None
    pairs = sum(1 for _ in train.pairs())
    if len(links) > pairs:  # the first pairs' lines of a file of the whole corpus are fine
        corpus_pairs = sum(1 for _ in common.corpus_from_flags("train", stream=True).pairs())
        if len(links) != corpus_pairs:
            raise common.UserError(
                f"--guided_alignment={FLAGS.guided_alignment!r} has {len(links):,} lines, the "
                f"training corpus {corpus_pairs:,} pairs: one line per pair, in their order "
                "(a line too many shifts every pair's links).")
    return links


def _alignment_guide(train, links, source_tokenizer, target_tokenizer, log):
    """The `AlignmentGuide` of the checked ``links`` (`_alignment_links`), or None."""
    if links is None:
        return None
    from bahdanau_tf import alignment

    start = time.time()
    guide = alignment.AlignmentGuide.build(train.pairs(), links, source_tokenizer, target_tokenizer,
                                          unaligned=FLAGS.guided_alignment_unaligned or "free")
    log(f"Guided alignment: {guide.links:,} token links of {guide.pairs:,} pairs from "
        f"{FLAGS.guided_alignment} in {time.time() - start:.0f} s.")
    return guide


def _check_guided_alignment_flags():
    """Refuses what would silently train unguided: a guided alignment setting without
    ``--guided_alignment``, or a guided run resumed without it (model.json names its file)."""
    if FLAGS.guided_alignment:
        return
    given = [f"--{name}" for name in GUIDED_ALIGNMENT_FLAGS if FLAGS[name].value is not None]
    if given:
        raise common.UserError(f"{', '.join(given)} does nothing without --guided_alignment=FILE "
                               "(the word links to train the attention towards).")
    from bahdanau_tf import model_directory

    try:
        settings = model_directory.read_model_config(FLAGS.output_dir).get("settings", {})
    except (OSError, ValueError):
        return  # a new run; a damaged directory is named when the trainer takes it
    if settings.get("guided_alignment"):
        raise common.UserError(
            f"{FLAGS.output_dir!r} was trained with --guided_alignment="
            f"{settings['guided_alignment']}: pass it again to resume (without it the run would "
            "go on unguided), or train into a new --output_dir.")


def _check_not_a_saved_model():
    """Refuses an --output_dir that holds a saved model (``model.save_to_preset``,
    ``bahdanau-average --output``, a copy of a shipped model): its weights have no training
    state (optimizer, step) to resume from; the run adds nothing to it, not even a lock file."""
    from bahdanau_tf import model_directory

    try:
        settings = model_directory.read_model_config(FLAGS.output_dir).get("settings") or {}
    except (OSError, ValueError):
        settings = {}  # a new run; a damaged directory is named when the trainer takes it
    try:
        model_directory.check_one_source(FLAGS.output_dir)  # a run holding a stray weights file
    except ValueError as error:
        raise common.UserError(f"--output_dir={FLAGS.output_dir!r}: {error}") from None
    weights = os.path.join(FLAGS.output_dir, model_directory.WEIGHTS)
    if os.path.exists(weights) or settings.get("saved_by") == model_directory.SAVED_BY:
        raise common.UserError(
            f"--output_dir={FLAGS.output_dir!r} holds a saved model without training state (no "
            "optimizer or step): it cannot be resumed; train into a new --output_dir (the saved "
            "model translates as it is: --model_dir).")


def _check_backend():
    """The trainer is TensorFlow's: another Keras backend is a usage error, before any work."""
    import keras  # noqa: PLC0415 — after the command line has set TensorFlow's log level

    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise common.UserError(
            f"bahdanau-train runs on TensorFlow, but Keras's backend is {backend!r} (KERAS_BACKEND): "
            "unset KERAS_BACKEND, or train with model.compile + model.fit (docs/training.md).")


def _choose_alignment_rule(dev, log):
    """After a finished run whose dev set has gold word alignments (the embedded Bible's): the
    extraction rule of lowest dev AER for the model's attention is chosen and saved with it
    (`bahdanau_tf.alignment.choose_on_dev`), so that ``bahdanau-evaluate`` and
    ``bahdanau-translate --alignments`` use it; ``bahdanau-evaluate --choose_alignment_rule``
    chooses again."""
    from bahdanau_tf import alignment
    from bahdanau_tf.translator import Translator

    if dev is None or alignment.dev_gold(dev) is None:
        return
    translator = Translator.from_directory(FLAGS.output_dir)
    if not translator.has_attention:
        return
    choice = alignment.choose_on_dev(translator, dev)
    alignment.save_chosen_rule(FLAGS.output_dir, choice)
    log(f"Alignments: {choice.describe()}.")


def _check_output_dir():
    """Refuses, before any work, an --output_dir a run cannot train into: not a writable
    directory, a file where a run keeps a folder, a saved model without training state."""
    from bahdanau_tf.training import run_directory

    common.check_writable_dir(FLAGS.output_dir, "output_dir")
    try:
        run_directory.check_folders(FLAGS.output_dir, more_files=(FLAGS_FILE,))
    except ValueError as error:
        raise common.UserError(str(error)) from None
    _check_not_a_saved_model()


def _check_regularization(config):
    """``--regularization=budget`` given explicitly plans from a budget: refused without one."""
    if FLAGS["regularization"].present and config.regularization == "budget" and not (
            config.max_steps or config.max_minutes):
        raise common.UserError("--regularization=budget plans from the budget: give --max_steps or --max_minutes.")


def _run_settings(train, source_tokenizer, guide) -> dict:
    """What ``model.json`` records of the run beside its config: the corpus and direction, the
    tokenizer, the command line, and the guide's links file when it trains with one."""
    settings = {
        "corpus": train.name,
        "direction": train.direction,
        "tokenizer": source_tokenizer.kind,
        "command": " ".join(sys.argv),
    }
    if guide is not None:
        settings["guided_alignment"] = os.path.abspath(FLAGS.guided_alignment)
        settings["guided_alignment_unaligned"] = FLAGS.guided_alignment_unaligned or "free"
    return settings


def main(argv):
    del argv
    start_time = time.time()
    _check_backend()
    FLAGS.output_dir = pretrained.as_path(FLAGS.output_dir)  # a path, even when named like a shipped model
    from bahdanau_tf import training

    presets.get_preset(FLAGS.preset)  # an unknown preset is a usage error, before any work
    _check_output_dir()  # before its model.json is read
    _check_guided_alignment_flags()
    config = _training_config()
    model_overrides = _model_overrides()
    _check_regularization(config)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    strategy = training.make_strategy(FLAGS.strategy)  # before any other TensorFlow work (multi-worker)
    train = common.corpus_from_flags("train", stream=True)  # the user's files: read as needed
    if FLAGS.max_train_pairs:
        train = train.select(slice(0, FLAGS.max_train_pairs))
    dev = _dev_corpus(train)
    links = _alignment_links(train)  # a links file that does not match: refused before any work
    config.check_schedule(has_dev_set=dev is not None)  # (the trainer checks again: for library users)
    source_tokenizer, target_tokenizer = _tokenizers(train, log)
    guide = _alignment_guide(train, links, source_tokenizer, target_tokenizer, log)
    settings = _run_settings(train, source_tokenizer, guide)
    trainer = training.Trainer(
        FLAGS.output_dir, source_tokenizer, target_tokenizer, preset=FLAGS.preset, config=config,
        model_overrides=model_overrides, strategy=strategy, settings=settings, log=log, guide=guide,
    )
    try:
        resumed = trainer.restore()  # takes the directory; resumes, or refuses another model (ValueError)
        if resumed:
            log(f"{FLAGS.output_dir} holds a model: resuming with its vocabularies.")
        write_flags_file(FLAGS.output_dir)
        report = trainer.fit(train, dev, start_time=start_time)
    except training.DirectoryInUseError as error:
        raise common.UserError(str(error), common.EXIT_IN_USE)
    except training.NonFiniteLossError as error:
        log(str(error))
        return common.EXIT_NON_FINITE
    except training.TrainingInterrupted as error:
        for number in (signal.SIGINT, signal.SIGTERM):  # the checkpoint is whole: another signal
            signal.signal(number, signal.SIG_IGN)        # would only cut the report short
        log("\n" + training.format_report(error.report))
        log(str(error))
        return 128 + error.signal_number  # 130 for SIGINT, 143 for SIGTERM
    except KeyboardInterrupt:  # a second Ctrl-C: the trainer stopped at once
        raise common.UserError(
            f"stopped at once by a second Ctrl-C or SIGTERM; {FLAGS.output_dir!r} keeps its last "
            "whole checkpoint (if it had one): rerun the same command to resume.",
            common.EXIT_SIGINT) from None
    if trainer.is_chief:
        _choose_alignment_rule(dev, log)
    log("\n" + training.format_report(report))
    log(f"Model directory: {os.path.abspath(FLAGS.output_dir)}")
    return 0


run = common.runner(main, __doc__)

if __name__ == "__main__":
    run()
