"""What every command line shares: the common flags (one definition, one default each), the
corpus they select, ``--help``, and the exit codes.

Exit codes (README, "Command lines"):

====  =====================================================================================
0     done
2     usage error or bad input (a flag value, a missing or malformed file, a damaged model
      directory): one line on stderr saying what to do, never a traceback
3     training stopped on a non-finite loss (the last good checkpoint is kept)
4     the output directory is in use by another process
5     an I/O failure (a full disk, a file that cannot be written or read): one line naming the
      file and the cause; nothing partial is left (outputs are written beside their target and
      renamed at the end)
130   stopped by SIGINT (Ctrl-C): training after a checkpoint and the report were written; a
      second Ctrl-C (or one in another command) stops at once, with one line
143   stopped by SIGTERM, likewise
====  =====================================================================================

A command module defines its flags at import time by calling the ``define_*`` functions it
needs (each defines a flag only once per process, so two commands can live in one process),
then ends with ``run = common.runner(main, __doc__)``.
"""

import errno
import gc
import math
import os
import sys

from absl import app, flags, logging

from bahdanau_tf import files, pretrained
from bahdanau_tf.cli import program_name  # noqa: F401  (the commands' name, common.program_name)

FLAGS = flags.FLAGS

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NON_FINITE = 3
EXIT_IN_USE = 4
EXIT_IO = 5
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class UserError(Exception):
    """A mistake the user can fix: printed as one line, exit code 2 (or ``exit_code``)."""

    def __init__(self, message, exit_code=EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


# Errors that library functions raise for bad input; the command lines report them as one line.
USER_ERRORS = (app.UsageError, UserError, FileNotFoundError, FileExistsError, IsADirectoryError,
               NotADirectoryError, PermissionError, ValueError)


def _define_once(define, name, *args, **kwargs):
    if name not in FLAGS:
        define(name, *args, **kwargs)


def define_finite_float(name, default, help_text, lower_bound=None, upper_bound=None):
    """A float flag that refuses NaN and infinity as well as values outside its bounds.

    The flag belongs to the calling module (for ``--help``).
    """
    caller = sys._getframe(1).f_globals["__name__"]
    _define_once(flags.DEFINE_float, name, default, help_text, lower_bound=lower_bound,
                 upper_bound=upper_bound, module_name=caller)
    if not getattr(FLAGS[name], "_finite_checked", False):
        flags.register_validator(name, lambda value: value is None or math.isfinite(value),
                                 message=f"--{name} must be a finite number.")
        FLAGS[name]._finite_checked = True


def define_corpus_flags():
    """Which corpus: the embedded one (``--corpus``, ``--direction``) or the user's files."""
    from bahdanau_tf import corpora

    _define_once(flags.DEFINE_enum, "corpus", corpora.CORPORA[0], list(corpora.CORPORA),
                 "Embedded corpus (used unless --source_file/--target_file or --tsv is given).")
    _define_once(flags.DEFINE_enum, "direction", None, list(corpora.DIRECTIONS),
                 "Translation direction of the embedded corpus (default en-es, or the model's "
                 "training direction where a model is given).")
    _define_once(flags.DEFINE_string, "source_file", None,
                 "Source sentences, one a line (UTF-8; with --target_file).")
    _define_once(flags.DEFINE_string, "target_file", None,
                 "Target (reference) sentences, one a line, line i translating source line i.")
    _define_once(flags.DEFINE_string, "tsv", None, "Sentence pairs as a TSV file "
                 "(source<TAB>target, exactly two columns).")


def define_tokenizer_flags():
    """How to learn vocabularies (`bahdanau_tf.text.build_tokenizers`), or where to find them."""
    from bahdanau_tf import text

    _define_once(flags.DEFINE_enum, "tokenizer", text.TOKENIZER_KINDS[0],
                 list(text.TOKENIZER_KINDS),
                 "Subword (WordPiece: no [UNK] in the output) or the paper's word shortlist.")
    _define_once(flags.DEFINE_integer, "vocabulary_size", text.DEFAULT_VOCABULARY_SIZE,
                 "Vocabulary size per language, special tokens included.", lower_bound=5)
    _define_once(flags.DEFINE_integer, "vocabulary_sentences", text.DEFAULT_VOCABULARY_SENTENCES,
                 "Learn a subword vocabulary from a spread sample of this many sentences "
                 "(0: all); word shortlists always count every sentence.", lower_bound=0)
    _define_once(flags.DEFINE_string, "vocabulary_dir", None,
                 "Use the vocabularies in DIR/source and DIR/target (as bahdanau-data "
                 "--vocabulary_dir writes them) instead of learning new ones.")


def define_model_dir_flags(help_text="Training output directory (or save_to_preset directory, or "
                                      ".keras file); repeat for an ensemble."):
    """Which trained model(s): ``--model_dir`` (repeatable) and ``--checkpoint``; the help names
    the shipped models, which the flag also takes."""
    define_model_dir_flag(f"{help_text} {model_name_rule()}")
    _define_once(flags.DEFINE_enum, "checkpoint", "best", ["best", "latest", "averaged"],
                 "Which checkpoint to load: the best dev NLL (falls back to the latest, with a "
                 "warning, when there is none), the latest, or the average of the last "
                 "checkpoints that bahdanau-average made.")


def model_name_rule():
    """How ``--model_dir`` reads its value (`bahdanau_tf.pretrained.resolve`), for ``--help``."""
    names = pretrained.names()
    return (f"A shipped model's name ({', '.join(names)}) is that model, whatever the current "
            f"directory holds (./{names[0]} is a directory of that name); anything else is a path.")


def define_model_dir_flag(help_text):
    """``--model_dir`` alone (repeatable; one definition whichever command defines it first)."""
    _define_once(flags.DEFINE_multi_string, "model_dir", None, help_text)


def define_search_flags():
    """Beam search settings shared by translate, evaluate and export."""
    from bahdanau_tf import decoding, signatures, translator

    _define_once(flags.DEFINE_integer, "beam_size", translator.DEFAULT_BEAM_SIZE,
                 "Beam size; 1 is greedy search.", lower_bound=1,
                 upper_bound=signatures.MAX_BEAM_SIZE)
    define_finite_float("length_penalty", translator.DEFAULT_LENGTH_PENALTY,
                        "GNMT length penalty alpha (>= 0); 0 ranks by log p(y|x) alone, which "
                        "prefers short outputs.", lower_bound=0.0)
    _define_once(flags.DEFINE_integer, "max_source_length", decoding.LengthLimits.max_source_length,
                 "Longer inputs are cut to this many tokens.", lower_bound=1)


def search_options(**batching):
    """The Translator arguments of the search flags (`define_search_flags`): ``search`` and
    ``limits``, and ``batching`` of the given `bahdanau_tf.decoding.Batching` fields."""
    from bahdanau_tf import decoding

    return {"search": decoding.BeamSearch(beam_size=FLAGS.beam_size,
                                          length_penalty=FLAGS.length_penalty),
            "limits": decoding.LengthLimits(max_source_length=FLAGS.max_source_length),
            "batching": decoding.Batching(**batching)}


def define_unk_flags():
    """[UNK] replacement by attention (`bahdanau_tf.unknown_words`), for translate, evaluate
    and export."""
    _define_once(flags.DEFINE_bool, "replace_unk", False,
                 "Replace each generated [UNK] by the source word the attention weighted most "
                 "at that step, or by its --unk_dictionary entry (models with attention only).")
    _define_once(flags.DEFINE_string, "unk_dictionary", None,
                 "A UTF-8 source<TAB>target file (more columns ignored, e.g. a model's "
                 "lexicon.tsv; the first entry of a word wins): [UNK] replacement writes a "
                 "source word's entry instead of the word.")


def unk_options(dictionary_alone=False):
    """The Translator arguments of ``--replace_unk`` and ``--unk_dictionary``, the file read and
    checked before any model is loaded. ``dictionary_alone``: a dictionary without
    ``--replace_unk`` is fine (export: the ``translate_replace_unk`` signature uses it)."""
    if FLAGS.replace_unk:
        require_attention(FLAGS.model_dir or [], "--replace_unk and --unk_dictionary need")
    if FLAGS.unk_dictionary is None:
        return {"replace_unk": FLAGS.replace_unk}
    if not FLAGS.replace_unk and not dictionary_alone:
        raise UserError("--unk_dictionary needs --replace_unk (the dictionary is only read to "
                        "replace [UNK]).")
    from bahdanau_tf import unknown_words

    try:
        dictionary = unknown_words.UnknownWordDictionary(FLAGS.unk_dictionary)
    except (FileNotFoundError, ValueError) as error:
        raise UserError(f"--unk_dictionary: {error}") from None
    return {"replace_unk": FLAGS.replace_unk, "unk_dictionary": dictionary}


def require_attention(model_dirs, needs):
    """Refuses a flag that ``needs`` attention (``"--alignments needs"``) before loading a
    model without it (RNNencdec, Seq2Seq), by its model.json (a damaged one is named later, by
    the loader): one line, and nothing the loading would print before it."""
    from bahdanau_tf import model_directory, models  # noqa: F401  (models registers the classes)

    for directory in model_dirs:
        try:
            class_name = model_directory.read_model_config(directory)["class_name"]
            attention = model_directory.model_class(class_name).has_attention
        except (OSError, ValueError, KeyError, AttributeError):
            continue
        if not attention:
            raise UserError(f"{needs} models with attention (RNNsearch): {directory!r} holds "
                            f"a {class_name}.")


def define_candidate_flags():
    """Candidate-list decoding (`bahdanau_tf.lexicon.CandidateLists`), for translate, evaluate
    and export."""
    _define_once(flags.DEFINE_bool, "candidate_lists", False,
                 "Decode each batch over a candidate list (Jean et al. 2015): the "
                 "--candidate_frequent most frequent target tokens plus the --candidate_per_word "
                 "best translations of each source token in the model directory's lexicon.tsv "
                 "(bahdanau-train writes it). Faster with large target vocabularies; a token "
                 "outside the list cannot be generated.")
    _define_once(flags.DEFINE_integer, "candidate_frequent", 2000,
                 "With --candidate_lists: the most frequent target tokens always listed.",
                 lower_bound=4)
    _define_once(flags.DEFINE_integer, "candidate_per_word", 10,
                 "With --candidate_lists: lexicon translations listed per source token (at most "
                 "the lexicon's).", lower_bound=1)


def candidate_options(model_dir):
    """The Translator argument of ``--candidate_lists`` for a model directory (the first of an
    ensemble: they share the vocabularies): ``{"candidates": ...}``, or ``{}`` without the
    flag. A directory without a (sound) ``lexicon.tsv`` is one clear line."""
    if not FLAGS.candidate_lists:
        return {}
    from bahdanau_tf import lexicon, model_directory

    directory = model_dir[0] if isinstance(model_dir, (list, tuple)) else model_dir
    try:
        built = model_directory.read_lexicon(directory) if os.path.isdir(directory) else None
    except ValueError as error:
        raise UserError(f"--candidate_lists: {error}") from None
    if built is None:
        raise UserError(f"--candidate_lists: {directory!r} has no {model_directory.LEXICON} "
                        "(bahdanau-train writes it at the end of a run, unless "
                        "--lexicon_top_k=0).")
    if FLAGS.candidate_per_word > built.top_k:
        raise UserError(f"--candidate_per_word={FLAGS.candidate_per_word} exceeds the "
                        f"{built.top_k} translations per token of {directory!r}'s lexicon.")
    return {"candidates": lexicon.CandidateLists(built, frequent=FLAGS.candidate_frequent,
                                                 per_word=FLAGS.candidate_per_word)}


def corpus_from_flags(split="train", direction=None, stream=False):
    """The corpus the common flags select (`bahdanau_tf.corpora.select_corpus`; ``stream``:
    the user's files as a `bahdanau_tf.corpora.CorpusFiles` stream)."""
    from bahdanau_tf import corpora

    return corpora.select_corpus(split=split, corpus=FLAGS.corpus,
                              direction=FLAGS.direction or direction or "en-es",
                              source_file=FLAGS.source_file, target_file=FLAGS.target_file,
                              tsv=FLAGS.tsv, stream=stream)


def require_tensorflow(why):
    """Refuses, in one line (exit code 2) and before any work, a command that needs TensorFlow
    when Keras runs on another backend (``KERAS_BACKEND``); ``why`` says what needs it."""
    import keras  # noqa: PLC0415 — after the command line has set TensorFlow's log level

    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise UserError(f"{program_name()} needs Keras's TensorFlow backend, but KERAS_BACKEND is "
                        f"{backend!r}: {why}. Unset KERAS_BACKEND (or set it to tensorflow).")


def reverse_model_dir(flag, model_dir, direction=None):
    """The model directory ``--flag`` names (a shipped model's name resolved as ``--model_dir``
    resolves it), refused in one line unless it is a model of the other direction than
    ``model_dir``'s (``direction``: the one the command uses, default its model.json's)."""
    from bahdanau_tf import model_directory

    given = FLAGS[flag].value
    path = pretrained.resolve(given)
    if not os.path.exists(path):
        raise UserError(f"--{flag}={given!r} does not exist.")
    if os.path.realpath(path) == os.path.realpath(pretrained.resolve(model_dir)):
        raise UserError(f"--{flag}={given!r} is --model_dir itself: give a model of the other direction.")
    try:
        reverse = model_directory.read_model_config(path).get("settings", {}).get("direction")
        direction = direction or model_directory.read_model_config(model_dir).get("settings", {}).get("direction")
    except (OSError, ValueError) as error:
        raise UserError(f"--{flag}={given!r}: {error}") from None
    if reverse and direction and reverse.split("-")[::-1] != direction.split("-"):
        raise UserError(f"--{flag}={given!r} translates {reverse}: it must translate the other "
                        f"direction than --model_dir ({direction}), {'-'.join(direction.split('-')[::-1])}.")
    if not (reverse and direction) and _same_direction(pretrained.resolve(model_dir), path):
        raise UserError(f"--{flag}={given!r} translates the same direction as --model_dir (its source "
                        "vocabulary is --model_dir's source one, not its target one): give a model "
                        "of the other direction.")
    return path


def _same_direction(forward, reverse):
    """Whether two model directories without a recorded direction translate the same way: the
    reverse one's source vocabulary shares more with the forward one's source vocabulary than
    with its target one (False when a vocabulary file is missing: a ``.keras`` file)."""
    from bahdanau_tf import model_directory

    def words(directory, side):
        path = os.path.join(directory, side, "vocabulary.txt")
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return set(handle.read().split())

    source = words(forward, model_directory.SOURCE_VOCABULARY)
    other_source = words(reverse, model_directory.SOURCE_VOCABULARY)
    other_target = words(reverse, model_directory.TARGET_VOCABULARY)
    if source is None or other_source is None or other_target is None:
        return False
    return len(source & other_source) > len(source & other_target)


def dev_split(direction=None):
    """The embedded corpus's dev split (its gold alignments choose an extraction rule,
    `bahdanau_tf.alignment.choose_on_dev`), or None when the user's files replace the corpus."""
    if FLAGS.source_file or FLAGS.target_file or FLAGS.tsv:
        return None
    return corpus_from_flags("dev", direction)


def require_model_dirs():
    """The usage checks of every command that reads trained model directories."""
    if not FLAGS.model_dir:
        raise UserError("--model_dir is required (a bahdanau-train output directory, a "
                        "model.save_to_preset directory or a .keras file).")
    from bahdanau_tf import pretrained

    for directory in FLAGS.model_dir:
        if not os.path.exists(pretrained.resolve(directory)):
            raise UserError(f"--model_dir={directory!r} does not exist.")


def check_writable_file(path, flag):
    """Refuses, before any work, an output file that is empty or cannot be written."""
    if not path:
        raise UserError(f"--{flag}= is empty: give a file name.")
    if os.path.isdir(path):
        raise UserError(f"--{flag}={path!r} is a directory; give a file name.")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        existing = parent
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):  # below a file: a_file/out.txt
            raise UserError(f"--{flag}={path!r}: {existing!r} is a file, not a directory.")
        raise UserError(f"--{flag}={path!r}: the directory {parent!r} does not exist.")
    if not os.access(parent, os.W_OK):
        raise UserError(f"--{flag}={path!r}: the directory {parent!r} is not writable.")


def check_writable_dir(path, flag):
    """Refuses, before any work, an output directory that is empty or the current directory
    (the command would write among the files there: ``--output_dir=`` is not "no output"),
    exists as a file or cannot be made (also below a file: ``a_file/sub``)."""
    if not path or os.path.realpath(path) == os.path.realpath(os.curdir):
        what = "is empty" if not path else "is the current directory"
        raise UserError(f"--{flag}={path!r} {what}: name a directory of its own for the output "
                        f"(e.g. --{flag}=out).")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"--{flag}={path!r} is a file, not a directory.")
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UserError(f"--{flag}={path!r}: {existing!r} is a file, not a directory.")
    if not os.access(existing, os.W_OK):
        raise UserError(f"--{flag}={path!r}: {existing!r} is not writable.")


def _io_message(error):
    """``'FILE': cause`` of an OSError (what failed, where)."""
    cause = error.strerror or str(error)
    return f"{error.filename!r}: {cause}" if error.filename else cause


def os_error_cause(error):
    """What went wrong, for an OSError of a path: at or below a file where a directory should
    be, ``'a_file' is a file, not a directory`` (not ``[Errno 20] Not a directory``), else the
    system's words."""
    if error.errno == errno.EEXIST and error.filename and os.path.isfile(error.filename):
        return f"{os.fspath(error.filename)!r} is a file, not a directory"  # (os.makedirs)
    if error.errno == errno.ENOTDIR and error.filename:
        existing = os.path.abspath(error.filename)
        while existing != os.path.dirname(existing) and not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if os.path.exists(existing) and not os.path.isdir(existing):
            return f"{existing!r} is a file, not a directory"
    return error.strerror or str(error)


def _path_flag(path):
    """``(name, value)`` of the flag whose path is ``path`` or a directory above it (the
    nearest), or None; the current directory and the root name nothing."""
    target = os.path.realpath(path)
    found = None
    for name in list(FLAGS):
        values = FLAGS[name].value
        for value in values if isinstance(values, list) else [values]:
            if not isinstance(value, str) or not value:
                continue
            where = os.path.realpath(value)
            if where in (os.path.realpath(os.curdir), os.path.dirname(where)):
                continue
            if (target == where or target.startswith(where + os.sep)) and (
                    found is None or len(where) > len(os.path.realpath(found[1]))):
                found = (name, value)
    return found


def user_os_error_message(error):
    """One line for an OSError of a user's path (one of `USER_ERRORS`): the flag that named the
    path and the cause, ``--output_dir='x/run': 'x' is a file, not a directory``."""
    if not isinstance(error, OSError) or error.errno is None or not error.filename:
        return None
    cause = os_error_cause(error)
    flag = _path_flag(os.fspath(error.filename))
    if flag is None:
        return f"{os.fspath(error.filename)!r}: {cause}."
    name, value = flag
    filename = os.fspath(error.filename)
    named = os.path.realpath(filename) == os.path.realpath(value) or repr(filename) in cause
    where = "" if named else f"{filename!r}: "
    return f"--{name}={value!r}: {where}{cause}."


def _print_help(doc, module_names):
    print((doc or "").strip() + "\n")
    for module_name in module_names:
        text = FLAGS.module_help(module_name)
        if text.strip():
            print(text)
    print("\nMore: --helpfull (every flag, absl's and TensorFlow's included).")


_FLAG_FILE = ("--flagfile", "-flagfile")


def _flag_file_paths(arguments, in_file=False):
    """The files absl reads for the flag-file directives among ``arguments``, ``~`` expanded as
    absl does: ``--flagfile=FILE`` and ``-flagfile=FILE``; on the command line (not ``in_file``,
    a flag file's lines) also ``--flagfile FILE`` and ``-flagfile FILE``, and none after ``--``."""
    arguments = iter(arguments)
    for argument in arguments:
        if not in_file and argument == "--":
            return
        if not in_file and argument in _FLAG_FILE:
            path = next(arguments, "")  # absl names a missing one
        elif argument.startswith(tuple(name + "=" for name in _FLAG_FILE)):
            path = argument.partition("=")[2].strip()
        else:
            continue
        if path:  # absl skips an empty one
            yield os.path.expanduser(path)


def _check_flag_files(arguments, seen=None, in_file=False):
    """Refuses a flag file (nested ones too) that cannot be read or is not UTF-8, naming the
    file and the line: absl reads it as text, and its UnicodeDecodeError is not a flag error."""
    seen = set() if seen is None else seen
    for path in _flag_file_paths(arguments, in_file):
        if path in seen:
            continue  # absl skips a circular one
        seen.add(path)
        try:
            with open(path, "rb") as handle:
                lines = handle.read().splitlines()
        except OSError as error:
            raise flags.Error(f"--flagfile={path!r}: {os_error_cause(error)}.") from None
        for number, line in enumerate(lines, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise flags.Error(f"--flagfile={path!r} line {number} is not valid UTF-8 "
                                  f"({error.reason} at byte {error.start}); a flag file is "
                                  "UTF-8 text.") from None
        _check_flag_files([line.decode("utf-8") for line in lines], seen, in_file=True)


def _parse_flags(argv):
    """absl's flag parsing, with one line and exit code 2 for a bad flag (absl exits 1)."""
    try:
        _check_flag_files(argv[1:])
        return FLAGS(argv)
    except flags.Error as error:
        print(f"{program_name()}: error: {error}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def runner(main, doc, module_name=None, commands=()):
    """The console-script entry point of a command: ``run = common.runner(main, __doc__)``.

    ``--help`` (``-h``, ``--helpshort``) prints the command's docstring and its own flags and
    exits 0. A `USER_ERRORS` exception from ``main`` becomes one line on stderr and exit code 2
    (or the `UserError`'s own code), and so does a bad line that a streamed corpus meets inside
    tf.data (`bahdanau_tf.corpora.corpus_error`); any other `OSError` (a full disk, a read error) one line
    naming the file and exit code 5; Ctrl-C (KeyboardInterrupt) one line and exit code 130.
    Unexpected bugs keep their traceback. ``commands``: the words a command takes as its one
    positional argument (``bahdanau-data align``); ``main`` finds it in ``argv[1]``.
    """
    module_name = module_name or main.__module__

    def guarded_main(argv):
        if not FLAGS["verbosity"].present:
            # absl's default is INFO: TensorFlow's internals (signature input names, temporary
            # paths, sharding callbacks) would print; --verbosity=0 shows them
            logging.set_verbosity(logging.WARNING)
        bad_line = None
        try:
            if len(argv) > 1 and not (len(argv) == 2 and argv[1] in commands):
                raise UserError(f"Unexpected arguments: {argv[1:]} (flags are --name=value"
                                + (f"; commands: {', '.join(commands)}" if commands else "") + ").")
            return main(argv)
        except USER_ERRORS as error:
            code = getattr(error, "exit_code", EXIT_USAGE)
            message = user_os_error_message(error) or (
                str(error).strip().splitlines()[0] if str(error).strip() else repr(error))
            print(f"{program_name()}: error: {message}", file=sys.stderr)
            sys.exit(code)
        except Exception as error:  # noqa: BLE001 - an I/O failure (also TensorFlow's), or a bug
            from bahdanau_tf import corpora

            bad_line = corpora.corpus_error(error)  # a streamed corpus's bad line, via tf.data
            if bad_line is None:
                failure = files.as_os_error(error)
                if failure is None:
                    raise
                print(f"{program_name()}: error: I/O failure: {_io_message(failure)}", file=sys.stderr)
                sys.exit(EXIT_IO)
        except KeyboardInterrupt:
            print(f"{program_name()}: error: stopped by Ctrl-C (SIGINT).", file=sys.stderr)
            sys.exit(EXIT_SIGINT)
        # out of the handler: the error's frames, and the input pipeline they hold (its reader
        # thread calls Python), go now; held until interpreter exit they would hang it
        gc.collect()
        print(f"{program_name()}: error: {bad_line}", file=sys.stderr)
        sys.exit(EXIT_USAGE)

    def run(argv=None):
        argv = list(sys.argv if argv is None else argv)
        if any(arg in ("-h", "-?", "--help", "--helpshort") for arg in argv[1:]):
            _print_help(doc, [module_name, __name__])
            sys.exit(EXIT_OK)
        app.run(guarded_main, argv=argv, flags_parser=_parse_flags)

    return run
