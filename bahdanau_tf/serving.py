"""SavedModel export for TF Serving: versioned directory, op check, warm-up requests.

`export_saved_model` writes what the stock ``tensorflow_model_server`` loads as is
(DESIGN §5)::

    MODEL_BASE/
      1/                                  one version; the server serves the highest number
        saved_model.pb                    graph + the three signatures
        variables/                        the weights
        assets/                           the two vocabularies (tokenizer lookup tables)
        assets.extra/
          tf_serving_warmup_requests      PredictionLog records the server replays at load

Signatures (all with a dynamic batch; built by `bahdanau_tf.translator.Translator`):

================  ==================================  ===========================================
name              inputs                              outputs
================  ==================================  ===========================================
serving_default   sentences  string [-1]              translations string [-1],
                                                      scores float32 [-1]
translate_nbest   sentences  string [-1],             translations string [-1, -1] (best first),
                  beam_size  int32 [] (1..64),        scores float32 [-1, -1]
                  nbest      int32 [] (1..beam)
align             sentences  string [-1]              translations string [-1], scores float32
                                                      [-1], source_tokens string [-1, -1],
                                                      source_lengths int32 [-1], target_tokens
                                                      string [-1, -1], target_lengths int32 [-1],
                                                      attention float32 [-1, -1, -1]
================  ==================================  ===========================================

``align`` exists only for models with attention (RNNsearch). Inputs are cut to the
Translator's ``max_source_length`` tokens (100 by default); see `bahdanau_tf.translator` for
the handling of empty, unknown and invalid-UTF-8 input.

Serving compatibility is proven without a server (none can be installed here):
`check_serving_ops` lists every op type of the graph and its function library and refuses
anything that is neither a core TensorFlow op (``tf.raw_ops``) nor one of the long-standing
tf-text ops the model server links (`SERVING_TF_TEXT_OPS`); tests load the export in a
fresh process that imports only ``tensorflow`` and ``tensorflow_text``.

TF Serving's ``--enable_batching`` batches every signature and needs a batch dimension on
every input: ``translate_nbest`` (scalar ``beam_size``/``nbest``) is refused by the batcher,
so its requests are not in the warm-up file (a failing warm-up request fails the model load).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from typing import Iterable, Optional, Sequence

import tensorflow as tf

WARMUP_FILENAME = "tf_serving_warmup_requests"
ASSETS_EXTRA = "assets.extra"
DEFAULT_MODEL_NAME = "bahdanau"

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


class ServingOpsError(ValueError):
    """The graph holds op types that the stock TF Serving model server may not have."""


# === Versions ===

def _serving_apis():
    """``tensorflow_serving.apis``, or an ImportError that says how to get it.

    tensorflow-serving-api is an optional dependency (``pip install "bahdanau_tf[serving]"``):
    it pins TensorFlow's version, which would fight Colab's preinstalled TensorFlow.
    """
    try:
        from tensorflow_serving import apis
        from tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2, prediction_log_pb2  # noqa: F401
    except ImportError as error:
        raise ImportError(
            "TF Serving request protos (warm-up records, gRPC requests, metadata) need "
            "tensorflow-serving-api: pip install \"bahdanau_tf[serving]\". To export without "
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


# === Export ===

def export_saved_model(translator, export_dir: str, version: Optional[int] = None,
                       warmup: bool = True,
                       warmup_sentences: Optional[Sequence[str]] = None,
                       model_name: str = DEFAULT_MODEL_NAME, overwrite: bool = False,
                       allowed_extra_ops: Iterable[str] = ()) -> str:
    """Writes ``translator`` as version ``version`` of the TF Serving model ``export_dir``.

    The version is written to a hidden temporary directory beside it, checked, then renamed,
    so a server polling ``export_dir`` never sees a half-written version.

    Args:
        translator: a `bahdanau_tf.translator.Translator`; its ``beam_size`` is the beam of
            ``serving_default`` and ``align``.
        export_dir: str, the model base path (what ``--model_base_path`` points at).
        version: int >= 1, or None for one more than the highest existing version (1 if none).
        warmup: bool, write ``assets.extra/tf_serving_warmup_requests``.
        warmup_sentences: list of str for the warm-up requests (defaults cover edge cases).
        model_name: str, the model name put in the warm-up requests' ``model_spec``.
        overwrite: bool, replace an existing version directory instead of raising.
        allowed_extra_ops: op types to accept besides core TF and `SERVING_TF_TEXT_OPS`.

    Returns:
        str, the version directory ``export_dir/version``.

    Raises:
        FileExistsError: the version exists and ``overwrite`` is False.
        ServingOpsError: the graph uses an op the stock server may not have.

    Example:

        translator = Translator.from_directory("runs/rnnsearch-small")
        path = export_saved_model(translator, "/models/bahdanau")  # "/models/bahdanau/1"
    """
    export_dir = os.fspath(export_dir)
    if version is None:
        version = (_numeric_versions(export_dir) or [0])[-1] + 1
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"version must be an int >= 1, got {version!r}.")
    final_dir = os.path.join(export_dir, str(version))
    if tf.io.gfile.exists(final_dir) and not overwrite:
        raise FileExistsError(f"{final_dir!r} exists; pass another version or overwrite=True.")
    tf.io.gfile.makedirs(export_dir)
    # TF Serving only looks at numeric names: the temporary directory is invisible to it
    temporary_dir = os.path.join(export_dir, f".tmp-{version}-{os.getpid()}-{time.time_ns()}")
    try:
        signatures = translator.signatures()
        tf.saved_model.save(translator, temporary_dir, signatures=signatures)
        check_serving_ops(temporary_dir, allowed_extra=allowed_extra_ops)
        if warmup:
            write_warmup_requests(temporary_dir, signature_names=list(signatures),
                                  sentences=warmup_sentences, model_name=model_name)
        if tf.io.gfile.exists(final_dir):
            tf.io.gfile.rmtree(final_dir)
        tf.io.gfile.rename(temporary_dir, final_dir)
    finally:
        if tf.io.gfile.exists(temporary_dir):
            tf.io.gfile.rmtree(temporary_dir)
    return final_dir


def load_exported(path: str):
    """Loads an export: a version directory, or a model base (its highest version).

    Only tensorflow and tensorflow_text are needed; the returned object's ``signatures``
    are what the model server runs.

    Example:

        model = load_exported("/models/bahdanau")
        model.signatures["serving_default"](sentences=tf.constant(["In the beginning"]))
    """
    import tensorflow_text  # noqa: F401  registers the tf-text ops the graph uses

    return tf.saved_model.load(resolve_saved_model_dir(path))


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

def _predict_request(model_name, signature_name, sentences, **scalars):
    predict_pb2 = _serving_apis().predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    request.inputs["sentences"].CopyFrom(
        tf.make_tensor_proto([s.encode("utf-8") for s in sentences], dtype=tf.string,
                             shape=[len(sentences)]))
    for name, value in scalars.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value, dtype=tf.int32, shape=[]))
    return request


def write_warmup_requests(saved_model_dir: str, signature_names: Sequence[str] = ("serving_default",),
                          sentences: Optional[Sequence[str]] = None,
                          model_name: str = DEFAULT_MODEL_NAME) -> str:
    """Writes ``assets.extra/tf_serving_warmup_requests``: PredictionLog records (TFRecord).

    The server replays them when it loads the model, so the first real request does not pay
    for graph initialisation (vocabulary tables, kernel set-up). For each signature with a
    batch dimension on all its inputs: one request with the first sentence and one with all
    of them. ``translate_nbest`` is left out (see the module docstring).

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
        for name in signature_names:
            if name == "translate_nbest":
                continue
            for batch in (sentences[:1], sentences):
                log = prediction_log_pb2.PredictionLog(
                    predict_log=prediction_log_pb2.PredictLog(
                        request=_predict_request(model_name, name, batch)))
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


def run_predict_request(loaded, request) -> dict:
    """Runs a ``PredictRequest`` on a loaded SavedModel's signature, as the server's Predict does.

    Returns:
        dict of output name -> NumPy array.
    """
    function = loaded.signatures[request.model_spec.signature_name or "serving_default"]
    inputs = {name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()}
    return {name: value.numpy() for name, value in function(**inputs).items()}


__all__ = [
    "export_saved_model", "load_exported", "check_serving_ops", "list_op_types",
    "signature_defs", "signature_metadata", "write_warmup_requests", "read_warmup_requests",
    "run_predict_request", "resolve_saved_model_dir", "ServingOpsError", "SERVING_TF_TEXT_OPS",
    "WARMUP_FILENAME",
]
