"""SavedModel export for TF Serving: versioned directory, checks, warm-up requests.

`export_saved_model` writes what the stock ``tensorflow_model_server`` loads as is
(DESIGN §5)::

    MODEL_BASE/
      1/                                  one version; the server serves the highest number
        saved_model.pb                    graph + the signatures
        variables/                        the weights
        assets/                           the two vocabularies (tokenizer lookup tables), and
                                          unk_dictionary.tsv when exported with one
        assets.extra/
          tf_serving_warmup_requests      PredictionLog records the server replays at load
          written_by.json                 the bahdanau_tf and TensorFlow versions that wrote
                                          it (`read_written_by`; the server ignores it)

Signatures (`bahdanau_tf.signatures.Signatures`, the module that holds the Translator). Every
input has the leading batch dimension ``-1``, so every signature can be served with
``--enable_batching`` and is warmed up:

=====================  ==============================  ===========================================
name                   inputs                          outputs
=====================  ==============================  ===========================================
serving_default        sentences  string [-1]          translations string [-1],
                                                       scores float32 [-1]
translate_nbest        sentences  string [-1],         translations string [-1, -1] (best first),
                       beam_size  int32 [-1] (1..64),  scores float32 [-1, -1] (-inf: padding),
                       nbest      int32 [-1] (1..beam) beam_size int32 [-1], nbest int32 [-1]
                                                       (the values used, after clamping)
align                  sentences  string [-1]          translations string [-1], scores float32
                                                       [-1], source_tokens string [-1, -1],
                                                       source_lengths int32 [-1], target_tokens
                                                       string [-1, -1], target_lengths int32 [-1],
                                                       attention float32 [-1, -1, -1]
translate_replace_unk  sentences  string [-1]          translations string [-1], scores float32
                                                       [-1]: serving_default, each [UNK] replaced
=====================  ==============================  ===========================================

``align`` and ``translate_replace_unk`` exist only for models with attention (RNNsearch).
``translate_replace_unk`` replaces each generated [UNK] by the source word of highest attention
at that step, or by its entry in the export's dictionary (``Translator(unk_dictionary=...)``,
``bahdanau-export --unk_dictionary``: an asset read into a hash table at load), see
`bahdanau_tf.unknown_words`; a client chooses it per request. An export made with
``replace_unk=True`` (``--replace_unk``) replaces in the other signatures' translations too.
``translate_nbest`` searches each row with its own beam and returns as many columns as the
batch's largest ``nbest``; a row's entries beyond its own ``nbest`` are ``""`` with score
``-inf`` (``-Infinity`` in TF Serving's JSON). Inputs are cut to the Translator's
``max_source_length`` tokens (100 by default); see
`bahdanau_tf.translator` for the handling of empty, unknown and invalid-UTF-8 input. An input
that is not a vector, or per-row inputs of another length than ``sentences``, are refused with
InvalidArgument, naming the input (``sentences must be a vector``, or
``sentences_must_be_a_vector [2,2] is not compatible with expected shape [?]``).

The server's loading path is the *session bundle*: import the MetaGraph, run the saver's
restore op and the init op (tables), then ``Session::Run`` by the signature's tensor names.
`SessionBundle` does exactly that in Python; ``tf.saved_model.load`` (`load_exported`) takes
another path (the object graph) that hides failures the server would meet. Before a version
is published, `export_saved_model` checks it: every op type is core TensorFlow or a
long-standing tf-text op the model server links (`check_serving_ops`), and every signature
answers the warm-up requests through a `SessionBundle`. No model server can be installed
here; the tests also load exports in a fresh process that imports only ``tensorflow`` and
``tensorflow_text``.

Warm-up records need tensorflow-serving-api (the ``serving`` extra: ``pip install -e ".[serving]"``
in a clone, or ``pip install tensorflow-serving-api``), an optional dependency that pins TensorFlow's version. Without it the export is written without
warm-up records (``warmup=None``, the default) or refused up front (``warmup=True``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from typing import Iterable, Optional, Sequence

import json

import keras
import numpy as np
import tensorflow as tf

import bahdanau_tf
from bahdanau_tf import files, signatures

WARMUP_FILENAME = "tf_serving_warmup_requests"
ASSETS_EXTRA = "assets.extra"
WRITTEN_BY_FILENAME = "written_by.json"
DEFAULT_MODEL_NAME = "bahdanau"
# The precision of an exported graph unless asked otherwise (bahdanau-export --keep_precision):
# a CPU model server runs float32 best, whatever precision training used.
SERVING_DTYPE = "float32"

# tf-text ops in TF Serving's model server since its 2.x releases (DESIGN §5). Newer ones
# (FastBertNormalize, FastWordpiece*, RoundRobinTrim, ...) are refused: a server whose bundled
# tf-text lagged could not load the model.
SERVING_TF_TEXT_OPS = frozenset({
    "NormalizeUTF8",
    "RegexSplitWithOffsets",
    "WordpieceTokenizeWithOffsets",
    "WhitespaceTokenizeWithOffsets",
    "SentencepieceOp",
    "SentencepieceTokenizeOp",
    "SentencepieceTokenizeWithOffsetsOp",
    "SentencepieceDetokenizeOp",
    "SentencepieceIdToStringOp",
    "SentencepieceStringToIdOp",
    "SentencepieceVocabSizeOp",
})

# Warm-up inputs: ordinary text plus the edge cases (empty, whitespace, unknown words).
DEFAULT_WARMUP_SENTENCES = (
    "In the beginning God created the heavens and the earth.",
    "And God said, Let there be light: and there was light.",
    "",
    "   ",
    "zyxwv qwerty",
)
# Per-row values of the warm-up requests' non-string inputs, by input name.
WARMUP_ROW_VALUES = {"beam_size": 4, "nbest": 2}


class ServingOpsError(ValueError):
    """The graph holds op types that the stock TF Serving model server may not have."""


class VersionClaimedError(FileExistsError):
    """Another export is writing the same version right now (or was killed while it did)."""


# === Versions ===

def warmup_available() -> bool:
    """True when tensorflow-serving-api (needed for warm-up records) is installed."""
    try:
        _serving_apis()
    except ImportError:
        return False
    return True


def _serving_apis():
    """``tensorflow_serving.apis``, or an ImportError that says how to get it.

    tensorflow-serving-api is an optional dependency (the ``serving`` extra):
    it pins TensorFlow's version, which would fight Colab's preinstalled TensorFlow.
    """
    try:
        from tensorflow_serving import apis
        from tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2, prediction_log_pb2  # noqa: F401
    except ImportError as error:
        raise ImportError(
            "TF Serving request protos (warm-up records, gRPC requests, metadata) need "
            "tensorflow-serving-api: pip install tensorflow-serving-api. To export without "
            "warm-up records, pass warmup=False (bahdanau-export --nowarmup)."
        ) from error
    return apis


def _numeric_versions(model_base: str) -> list:
    if not tf.io.gfile.isdir(model_base):
        return []
    return sorted(int(name.rstrip("/")) for name in tf.io.gfile.listdir(model_base)
                  if re.fullmatch(r"\d+/?", name))


def resolve_saved_model_dir(path: str) -> str:
    """``path`` if it holds a saved_model.pb, else its highest numeric version subdirectory.

    Raises:
        FileNotFoundError: neither a SavedModel nor a model base with versions.
    """
    path = os.fspath(path)
    if tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
        return path
    versions = _numeric_versions(path)
    if not versions:
        raise FileNotFoundError(f"{path!r} is neither a SavedModel directory nor a model base "
                                "with numeric version subdirectories.")
    return os.path.join(path, str(versions[-1]))


@contextlib.contextmanager
def _claimed_version(export_dir: str, version: Optional[int], overwrite: bool):
    """Claims a version of ``export_dir`` for this process; yields ``(version, final_dir)``.

    The claim is the file ``.claim-N`` beside the versions, holding an ``fcntl.flock`` for as
    long as the export runs (`bahdanau_tf.files.Claim`): of two exports of one version, one
    gets it and the other a `VersionClaimedError`, and the version directory is checked again
    under the claim. The kernel drops the lock when its process dies, even by SIGKILL: the
    claim file it leaves is stale and the next export takes it over. With ``version=None``, a
    claimed or existing number is skipped for the next one. The server ignores names that are
    not numbers. (On object stores such as GCS, which have no locks, the claim is a check then
    a create, which is not atomic, and a killed export's claim must be deleted by hand.)
    """
    automatic = version is None
    if automatic:
        version = (_numeric_versions(export_dir) or [0])[-1] + 1
    while True:
        claim = _new_claim(os.path.join(export_dir, f".claim-{version}"))
        final_dir = os.path.join(export_dir, str(version))
        if not claim.acquire():
            if automatic:
                version += 1
                continue
            raise VersionClaimedError(
                f"Another export is writing version {version} of {export_dir!r} (pid "
                f"{files.lock_holder(claim.path)}); wait for it, or pass another version.")
        if tf.io.gfile.exists(final_dir) and not overwrite:
            claim.release()
            if automatic:
                version += 1
                continue
            raise FileExistsError(f"{final_dir!r} exists; pass another version or overwrite=True.")
        break
    # under the claim, a temporary directory of this version is a killed export's
    for stale in tf.io.gfile.glob(os.path.join(export_dir, f".tmp-{version}-*")):
        tf.io.gfile.rmtree(stale)
    try:
        yield version, final_dir
    finally:
        claim.release()


class _RemoteClaim:
    """The claim on a file system without locks (``gs://``...): a directory, check then create."""

    def __init__(self, path):
        self.path = path
        self._held = False

    def acquire(self):
        if tf.io.gfile.exists(self.path):  # tf.io.gfile's mkdir succeeds on an existing one
            return False
        tf.io.gfile.mkdir(self.path)
        self._held = True
        return True

    def release(self):
        if self._held and tf.io.gfile.exists(self.path):
            tf.io.gfile.rmtree(self.path)
        self._held = False


def _new_claim(path):
    return _RemoteClaim(path) if "://" in path else files.Claim(path)


def _publish(temporary_dir: str, final_dir: str, overwrite: bool) -> None:
    """Renames the finished export to its version (under the claim); replaces only if asked."""
    if tf.io.gfile.exists(final_dir):
        if not overwrite:  # written meanwhile by something that does not claim versions
            raise FileExistsError(f"{final_dir!r} appeared during the export; not replaced.")
        retired = f"{temporary_dir}-retired"
        tf.io.gfile.rename(final_dir, retired)
        tf.io.gfile.rename(temporary_dir, final_dir)
        tf.io.gfile.rmtree(retired)
    else:
        tf.io.gfile.rename(temporary_dir, final_dir)


# === Export ===

def export_saved_model(translator, export_dir: str, version: Optional[int] = None,
                       warmup: Optional[bool] = None,
                       warmup_sentences: Optional[Sequence[str]] = None,
                       model_name: str = DEFAULT_MODEL_NAME, overwrite: bool = False,
                       allowed_extra_ops: Iterable[str] = ()) -> str:
    """Writes ``translator`` as version ``version`` of the TF Serving model ``export_dir``.

    The version is claimed first (two exports of one version: the second fails, nothing is
    replaced), written to a hidden temporary directory beside it, checked — op types, and
    every signature answering the warm-up requests through a `SessionBundle`, the model
    server's loading path — then renamed, so a server polling ``export_dir`` never sees a
    half-written or broken version.

    Args:
        translator: a `bahdanau_tf.translator.Translator`, saved in the
            `bahdanau_tf.signatures.Signatures` module built here (or a module that gives its
            signatures itself, ``by_name()``); its ``beam_size`` is the beam of
            ``serving_default`` and ``align``. Build it in float32 (`SERVING_DTYPE`) for a CPU
            server: ``Translator.from_directory(path, dtype=SERVING_DTYPE)``.
        export_dir: str, the model base path (what ``--model_base_path`` points at).
        version: int >= 1, or None for one more than the highest existing or claimed version.
        warmup: write ``assets.extra/tf_serving_warmup_requests``: True (tensorflow-serving-api
            required, checked before any work), False, or None (when it is installed).
        warmup_sentences: list of str for the warm-up requests (defaults cover edge cases).
        model_name: str, the model name put in the warm-up requests' ``model_spec``.
        overwrite: bool, replace an existing version directory instead of raising.
        allowed_extra_ops: op types to accept besides core TF and `SERVING_TF_TEXT_OPS`.

    Returns:
        str, the version directory ``export_dir/version``.

    Raises:
        FileExistsError: the version exists and ``overwrite`` is False.
        VersionClaimedError: another export is writing that version.
        ImportError: ``warmup=True`` without tensorflow-serving-api.
        ServingOpsError: the graph uses an op the stock server may not have.
        ValueError: Keras's backend is not TensorFlow (the SavedModel is TensorFlow's graph:
            save the model, ``.keras`` or ``save_to_preset``, and export it in a TensorFlow
            process).

    Example:

        translator = Translator.from_directory("runs/rnnsearch-small", dtype=SERVING_DTYPE)
        path = export_saved_model(translator, "/models/bahdanau")  # "/models/bahdanau/1"
    """
    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise ValueError(f"A SavedModel is exported by a TensorFlow process; Keras's backend here is "
                         f"{backend!r}: save the model (model.save('model.keras')) and export it "
                         "with the TensorFlow backend (bahdanau-export --model_dir=model.keras).")
    if warmup:
        _serving_apis()  # the missing dependency is said before minutes of tracing
    write_warmup = warmup_available() if warmup is None else bool(warmup)
    sentences = list(DEFAULT_WARMUP_SENTENCES if warmup_sentences is None else warmup_sentences)
    if not sentences:
        raise ValueError("warm-up needs at least one sentence, got an empty list.")
    export_dir = os.fspath(export_dir)
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                or version < 1):
        raise ValueError(f"version must be an int >= 1, got {version!r}.")
    created = not tf.io.gfile.exists(export_dir)
    tf.io.gfile.makedirs(export_dir)
    try:
        return _export_claimed(translator, export_dir, version, overwrite, write_warmup,
                               sentences, model_name, allowed_extra_ops)
    except BaseException as error:
        if created and not tf.io.gfile.listdir(export_dir):
            tf.io.gfile.rmtree(export_dir)  # a failed export leaves nothing behind
        if isinstance(error, OSError) and error.errno is not None and not error.filename:
            error.filename = export_dir  # a failed write names no file of its own
        raise


def _export_claimed(translator, export_dir, version, overwrite, write_warmup, sentences,
                    model_name, allowed_extra_ops):
    """`export_saved_model` once its arguments are checked: claim, write, check, publish."""
    with _claimed_version(export_dir, version, overwrite) as (version, final_dir):
        # TF Serving only looks at numeric names: the temporary directory is invisible to it
        temporary_dir = os.path.join(export_dir,
                                     f".tmp-{version}-{os.getpid()}-{time.time_ns()}")
        try:
            with _generated_code_in(temporary_dir + "-generated"):
                # what is saved: the signatures module, which holds the translator
                module = translator if hasattr(translator, "by_name") else signatures.Signatures(translator)
                tf.saved_model.save(module, temporary_dir, signatures=module.by_name())
                check_serving_ops(temporary_dir, allowed_extra=allowed_extra_ops)
                _write_written_by(temporary_dir)
                if write_warmup:
                    write_warmup_requests(temporary_dir, sentences=sentences, model_name=model_name)
                check_session_bundle(temporary_dir, sentences)
            _publish(temporary_dir, final_dir, overwrite)
        finally:
            if tf.io.gfile.exists(temporary_dir):
                tf.io.gfile.rmtree(temporary_dir)
    return final_dir


def _write_written_by(saved_model_dir):
    """``assets.extra/written_by.json``: the versions of this package and TensorFlow."""
    directory = os.path.join(saved_model_dir, ASSETS_EXTRA)
    tf.io.gfile.makedirs(directory)
    with tf.io.gfile.GFile(os.path.join(directory, WRITTEN_BY_FILENAME), "w") as f:
        f.write(json.dumps({"bahdanau_tf": bahdanau_tf.__version__,
                            "tensorflow": tf.__version__}, indent=2, sort_keys=True))


def read_written_by(saved_model_dir: str) -> dict:
    """The versions that wrote an export (``{"bahdanau_tf": ..., "tensorflow": ...}``); ``{}``
    for an export written before they were recorded. Takes a version directory or a model base
    (its latest version)."""
    path = os.path.join(resolve_saved_model_dir(saved_model_dir), ASSETS_EXTRA,
                        WRITTEN_BY_FILENAME)
    if not tf.io.gfile.exists(path):
        return {}
    with tf.io.gfile.GFile(path) as f:
        return json.loads(f.read())


@contextlib.contextmanager
def _generated_code_in(directory):
    """Points `tempfile` at ``directory`` (made here, removed at the end) while an export runs.

    Autograph writes the code it generates (TensorFlow converts the signature wrapper at save
    time) to `tempfile`'s directory and removes it only when the process exits, never the
    ``__pycache__`` that importing it writes, nor anything after a SIGKILL: the user's temp dir
    would keep them. Beside the export's temporary directory (the same ``.tmp-VERSION-`` prefix),
    a killed export's leftovers are removed by the next export of that version with it. On a
    remote file system (``gs://...``), a temporary directory of the local temp dir is used.
    """
    local = "://" not in directory
    if local:
        os.makedirs(directory)
    else:
        directory = tempfile.mkdtemp(prefix="bahdanau_export_")
    saved, tempfile.tempdir = tempfile.tempdir, directory
    try:
        yield directory
    finally:
        tempfile.tempdir = saved
        shutil.rmtree(directory, ignore_errors=True)


def load_exported(path: str):
    """Loads an export with ``tf.saved_model.load`` (the object graph), for Python callers.

    A version directory, or a model base (its highest version). Only tensorflow and
    tensorflow_text are needed. This is *not* the model server's loading path: use
    `SessionBundle` to run an export as TF Serving does.

    Example:

        model = load_exported("/models/bahdanau")
        model.signatures["serving_default"](sentences=tf.constant(["In the beginning"]))
    """
    import tensorflow_text  # noqa: F401  registers the tf-text ops the graph uses

    return tf.saved_model.load(resolve_saved_model_dir(path))


# === The model server's loading path ===

class SessionBundle:
    """A SavedModel loaded and run the way ``tensorflow_model_server`` does (its SessionBundle).

    Imports the MetaGraph tagged ``serve`` into a new graph, runs the saver's restore op (the
    variables) and the init op (the vocabulary tables), and runs a signature by feeding and
    fetching its tensor names with ``Session::Run``: no Python object graph, no Keras, and no
    client-side shape check (the server has none: the graph must refuse bad shapes itself).

    Args:
        path: a version directory, or a model base (its highest version).
        tags: the MetaGraph tags.

    Example:

        with SessionBundle("/models/bahdanau") as bundle:
            bundle.run("serving_default", sentences=["In the beginning"])["translations"]
    """

    def __init__(self, path: str, tags: Sequence[str] = ("serve",)):
        import tensorflow_text  # noqa: F401  registers the tf-text ops, as the server links them

        self.path = resolve_saved_model_dir(path)
        self._graph = tf.Graph()
        self._session = tf.compat.v1.Session(graph=self._graph)
        # the v1 loader is used on purpose (it is the server's path): not its deprecation
        # warning nor its INFO lines
        logger = tf.get_logger()
        level = logger.level
        logger.setLevel("ERROR")
        try:
            with self._graph.as_default():
                meta_graph = tf.compat.v1.saved_model.loader.load(self._session, list(tags),
                                                                  self.path)
        finally:
            logger.setLevel(level)
        self.signature_defs = {name: signature
                               for name, signature in meta_graph.signature_def.items()
                               if not name.startswith("__")}

    def run(self, signature_name: str = "serving_default", **inputs) -> dict:
        """Runs one signature; returns ``{output name: NumPy array}`` (strings as bytes).

        Args:
            signature_name: str.
            **inputs: every input of the signature by name: lists or arrays (str is encoded
                as UTF-8; bytes are passed as they are).

        Raises:
            ValueError: unknown signature, missing or unknown inputs.
            tf.errors.InvalidArgumentError: the graph refused the input.
        """
        if signature_name not in self.signature_defs:
            raise ValueError(f"Unknown signature {signature_name!r}; the model has "
                             f"{sorted(self.signature_defs)}.")
        signature = self.signature_defs[signature_name]
        if set(inputs) != set(signature.inputs):
            raise ValueError(f"Signature {signature_name!r} takes inputs "
                             f"{sorted(signature.inputs)}, got {sorted(inputs)}.")
        feeds = {}
        for key, info in signature.inputs.items():
            dtype = tf.as_dtype(info.dtype)
            if dtype == tf.string:
                value = np.asarray(inputs[key], dtype=object)
                value = np.frompyfunc(_as_bytes, 1, 1)(value) if value.size else value
                value = np.asarray(value, dtype=object)
            else:
                value = np.asarray(inputs[key], dtype=dtype.as_numpy_dtype)
            feeds[self._tensor(info.name)] = value
        keys = sorted(signature.outputs)
        fetches = [self._tensor(signature.outputs[key].name) for key in keys]
        # Session::Run itself, as the server calls it (Session.run would first compare the
        # fed shapes with the signature's in Python, which the server does not do)
        values = self._session._call_tf_sessionrun(None, feeds, fetches, [], None)
        return dict(zip(keys, values))

    def _tensor(self, name):
        return self._graph.get_tensor_by_name(name)._as_tf_output()

    def close(self):
        self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *unused):
        self.close()


def _as_bytes(value):
    return value.encode("utf-8") if isinstance(value, str) else value


def is_batchable(signature_def) -> bool:
    """True when every input has a leading batch dimension of dynamic size.

    That is what TF Serving's batcher (``--enable_batching``) needs to merge requests, and
    what the warm-up file holds requests for.
    """
    for info in signature_def.inputs.values():
        shape = info.tensor_shape
        if shape.unknown_rank or not shape.dim or shape.dim[0].size != -1:
            return False
    return True


def warmup_inputs(signature_def, sentences: Sequence[str]) -> dict:
    """The inputs of one warm-up request of a batchable signature: ``{name: list}``.

    String inputs get ``sentences``; any other input gets its `WARMUP_ROW_VALUES` value on
    every row.

    Raises:
        ValueError: a signature without a batch dimension, or an input with no warm-up value.
    """
    if not is_batchable(signature_def):
        raise ValueError("warm-up requests need a batch dimension on every input.")
    inputs = {}
    for key, info in signature_def.inputs.items():
        if tf.as_dtype(info.dtype) == tf.string:
            inputs[key] = list(sentences)
        elif key in WARMUP_ROW_VALUES:
            inputs[key] = [WARMUP_ROW_VALUES[key]] * len(sentences)
        else:
            raise ValueError(f"No warm-up value for the input {key!r}; add it to "
                             "WARMUP_ROW_VALUES.")
    return inputs


def _warmup_batches(sentences):
    """The two requests per signature: the first sentence alone, then all of them."""
    return [list(sentences[:1]), list(sentences)]


def check_session_bundle(saved_model_dir: str,
                         sentences: Sequence[str] = DEFAULT_WARMUP_SENTENCES) -> None:
    """Runs every batchable signature on the warm-up batches through a `SessionBundle`.

    What the model server does when it loads the version and replays its warm-up file; an
    export that cannot be restored that way (e.g. untracked Keras 3 variables) fails here.

    Raises:
        RuntimeError: naming the signature that failed, with TensorFlow's message.
    """
    with SessionBundle(saved_model_dir) as bundle:
        for name, signature in sorted(bundle.signature_defs.items()):
            if not is_batchable(signature):
                continue
            for batch in _warmup_batches(sentences):
                try:
                    bundle.run(name, **warmup_inputs(signature, batch))
                except tf.errors.OpError as error:
                    raise RuntimeError(
                        f"The export {saved_model_dir!r} does not run through TF Serving's "
                        f"loading path (session bundle): signature {name!r} failed with "
                        f"{type(error).__name__}: {error.message.splitlines()[0]}") from error


# === The op check ===

def _read_saved_model_proto(saved_model_dir: str):
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    return proto


def list_op_types(saved_model_dir: str) -> set:
    """Every op type in the SavedModel's graphs and function libraries (function calls excluded).

    A node whose op is the name of a library function is a call of that function; the
    function's own nodes are listed instead.
    """
    op_types = set()
    for meta_graph in _read_saved_model_proto(resolve_saved_model_dir(saved_model_dir)).meta_graphs:
        library = meta_graph.graph_def.library
        function_names = {f.signature.name for f in library.function}
        nodes = list(meta_graph.graph_def.node)
        for function in library.function:
            nodes.extend(function.node_def)
        op_types.update(node.op for node in nodes if node.op not in function_names)
    return op_types


def check_serving_ops(saved_model_dir: str, allowed_extra: Iterable[str] = ()) -> dict:
    """Checks that every op type is core TensorFlow or a long-standing tf-text op.

    Args:
        saved_model_dir: str, a SavedModel (or model base) directory.
        allowed_extra: op types to accept as well.

    Returns:
        dict with ``core`` (sorted core op types) and ``tf_text`` (sorted tf-text op types).

    Raises:
        ServingOpsError: naming the op types outside the allowed list.
    """
    op_types = list_op_types(saved_model_dir)
    core = {op for op in op_types if hasattr(tf.raw_ops, op)}
    text = op_types & SERVING_TF_TEXT_OPS
    refused = op_types - core - text - set(allowed_extra)
    if refused:
        raise ServingOpsError(
            f"The SavedModel {saved_model_dir!r} uses op types that are neither core TensorFlow "
            f"nor tf-text ops of the stock TF Serving model server: {sorted(refused)}. "
            f"Allowed tf-text ops: {sorted(SERVING_TF_TEXT_OPS)}.")
    return {"core": sorted(core), "tf_text": sorted(text)}


# === Signatures as data ===

def signature_defs(saved_model_dir: str) -> dict:
    """The SavedModel's serving SignatureDefs, ``{name: SignatureDef proto}``."""
    for meta_graph in _read_saved_model_proto(resolve_saved_model_dir(saved_model_dir)).meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            return {name: meta_graph.signature_def[name] for name in meta_graph.signature_def
                    if name != "__saved_model_init_op"}
    raise ValueError(f"No 'serve' meta graph in {saved_model_dir!r}.")


def signature_summary(saved_model_dir: str) -> list:
    """One line per signature, e.g. ``serving_default(sentences string [-1]) -> translations
    string [-1], scores float32 [-1]`` (``-1``: any size), sorted by name."""
    def tensors(infos):
        return ", ".join(f"{key} {tf.as_dtype(info.dtype).name} "
                         f"[{', '.join(str(d.size) for d in info.tensor_shape.dim)}]"
                         for key, info in sorted(infos.items()))

    return [f"{name}({tensors(signature.inputs)}) -> {tensors(signature.outputs)}"
            for name, signature in sorted(signature_defs(saved_model_dir).items())]


def signature_metadata(saved_model_dir: str, model_name: str = DEFAULT_MODEL_NAME,
                       version: Optional[int] = None) -> dict:
    """What TF Serving's ``GET /v1/models/NAME/metadata`` returns for this SavedModel.

    The signatures in the proto3 JSON form of ``SignatureDefMap`` with the proto field names,
    as the server prints them (``"signature_def"``, ``"dtype": "DT_STRING"``, ``"size": "-1"``),
    so clients can be tried against the export without a server.
    """
    from google.protobuf import json_format
    get_model_metadata_pb2 = _serving_apis().get_model_metadata_pb2

    saved_model_dir = resolve_saved_model_dir(saved_model_dir)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    for name, signature in signature_defs(saved_model_dir).items():
        signature_map.signature_def[name].CopyFrom(signature)
    if version is None:
        base = os.path.basename(os.path.normpath(saved_model_dir))
        version = int(base) if base.isdigit() else 1
    return {
        "model_spec": {"name": model_name, "signature_name": "", "version": str(version)},
        "metadata": {"signature_def": json_format.MessageToDict(
            signature_map, preserving_proto_field_name=True)},
    }


# === Warm-up requests ===

def predict_request(signature_def, signature_name: str, inputs: dict,
                    model_name: str = DEFAULT_MODEL_NAME):
    """A ``PredictRequest`` with ``inputs`` (``{name: list}``) typed by the SignatureDef."""
    predict_pb2 = _serving_apis().predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    for key, values in inputs.items():
        dtype = tf.as_dtype(signature_def.inputs[key].dtype)
        if dtype == tf.string:
            values = [_as_bytes(v) for v in values]
        request.inputs[key].CopyFrom(tf.make_tensor_proto(values, dtype=dtype,
                                                          shape=[len(values)]))
    return request


def write_warmup_requests(saved_model_dir: str, sentences: Optional[Sequence[str]] = None,
                          model_name: str = DEFAULT_MODEL_NAME) -> str:
    """Writes ``assets.extra/tf_serving_warmup_requests``: PredictionLog records (TFRecord).

    The server replays them when it loads the model, so the first real request does not pay
    for graph initialisation (vocabulary tables, kernel set-up); a failing one fails the load.
    For every batchable signature (`is_batchable`: all of this package's): one request with
    the first sentence and one with all of them (`warmup_inputs`).

    Returns:
        str, the path of the warm-up file.
    """
    prediction_log_pb2 = _serving_apis().prediction_log_pb2

    sentences = list(DEFAULT_WARMUP_SENTENCES if sentences is None else sentences)
    if not sentences:
        raise ValueError("warm-up needs at least one sentence, got an empty list.")
    directory = os.path.join(saved_model_dir, ASSETS_EXTRA)
    tf.io.gfile.makedirs(directory)
    path = os.path.join(directory, WARMUP_FILENAME)
    with tf.io.TFRecordWriter(path) as writer:
        for name, signature in sorted(signature_defs(saved_model_dir).items()):
            if not is_batchable(signature):
                continue
            for batch in _warmup_batches(sentences):
                request = predict_request(signature, name, warmup_inputs(signature, batch),
                                          model_name=model_name)
                log = prediction_log_pb2.PredictionLog(
                    predict_log=prediction_log_pb2.PredictLog(request=request))
                writer.write(log.SerializeToString())
    return path


def read_warmup_requests(saved_model_dir: str) -> list:
    """The warm-up file's records as ``PredictionLog`` protos."""
    prediction_log_pb2 = _serving_apis().prediction_log_pb2

    path = os.path.join(resolve_saved_model_dir(saved_model_dir), ASSETS_EXTRA, WARMUP_FILENAME)
    records = []
    for record in tf.data.TFRecordDataset(path):
        records.append(prediction_log_pb2.PredictionLog.FromString(record.numpy()))
    return records


def run_predict_request(bundle: SessionBundle, request) -> dict:
    """Runs a ``PredictRequest`` on a `SessionBundle`, as the server's Predict does.

    Returns:
        dict of output name -> NumPy array.
    """
    inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
    return bundle.run(request.model_spec.signature_name or "serving_default", **inputs)


__all__ = [
    "export_saved_model", "load_exported", "read_written_by", "SessionBundle",
    "check_session_bundle", "check_serving_ops", "list_op_types", "signature_defs", "signature_metadata",
    "is_batchable", "warmup_inputs", "warmup_available", "predict_request",
    "write_warmup_requests", "read_warmup_requests", "run_predict_request",
    "resolve_saved_model_dir", "ServingOpsError", "VersionClaimedError", "SERVING_TF_TEXT_OPS",
    "SERVING_DTYPE", "WARMUP_FILENAME",
]
