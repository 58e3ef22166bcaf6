#!/usr/bin/env python3
"""gRPC client for the bahdanau model in TF Serving (tensorflow-serving-api).

The ``PredictRequest`` is built from the model's SignatureDef — asked from the server
(``GetModelMetadata``) or read from the SavedModel — so input names and dtypes follow the
export. Strings go as bytes: invalid UTF-8 is allowed (the model maps it to [UNK]).

Example:

    pip install tensorflow-serving-api
    python client_grpc.py --server=localhost:8500 --model=bahdanau \\
        "But seek God's Kingdom, and all these things will be added to you."
    python client_grpc.py --signature=translate_nbest --beam_size=8 --nbest=3 "Let there be light."
    # beam_size and nbest are per row: one value for every sentence (here), or a list in Python
    python client_grpc.py --signature=align "For each man will bear his own burden."   # tokens + attention matrix
"""

import argparse
import os
import sys

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2


def signatures_from_saved_model(path):
    """``{name: SignatureDef}`` of a SavedModel directory (or model base: highest version)."""
    from tensorflow.core.protobuf import saved_model_pb2

    if not tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
        versions = [int(v) for v in tf.io.gfile.listdir(path) if v.rstrip("/").isdigit()]
        if not versions:
            raise FileNotFoundError(f"No SavedModel in {path!r}.")
        path = os.path.join(path, str(max(versions)))
    saved_model = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    for meta_graph in saved_model.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            return {k: v for k, v in meta_graph.signature_def.items() if not k.startswith("__")}
    raise ValueError(f"No 'serve' meta graph in {path!r}.")


def signatures_from_server(stub, model_name, version=None, timeout=30):
    """``{name: SignatureDef}`` from the server's ``GetModelMetadata``."""
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = model_name
    if version is not None:
        request.model_spec.version.value = version
    request.metadata_field.append("signature_def")
    response = stub.GetModelMetadata(request, timeout)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_map)
    return {k: v for k, v in signature_map.signature_def.items() if not k.startswith("__")}


def build_predict_request(signatures, signature_name, sentences, model_name="bahdanau",
                          version=None, **values):
    """A ``PredictRequest`` for one signature (nothing is sent).

    Args:
        signatures: dict of SignatureDef (`signatures_from_saved_model` / `_from_server`).
        signature_name: str.
        sentences: list of str or bytes: the signature's batched string input.
        model_name: str, the name in models.config.
        version: optional int.
        **values: the other per-row inputs by name, each one value for every sentence or a
            list of one value per sentence, e.g. ``beam_size=5, nbest=[3, 1]``.

    Raises:
        ValueError: unknown signature, missing or unknown inputs, or a list of values of
            another length than ``sentences``.
    """
    if signature_name not in signatures:
        raise ValueError(f"Unknown signature {signature_name!r}; the model has "
                         f"{sorted(signatures)}.")
    inputs = signatures[signature_name].inputs
    batched = [k for k, v in inputs.items()
               if v.dtype == tf.string.as_datatype_enum and len(v.tensor_shape.dim) == 1]
    if len(batched) != 1:
        raise ValueError(f"Expected one batched string input in {signature_name!r}.")
    unknown, missing = set(values) - set(inputs), set(inputs) - set(values) - set(batched)
    if unknown or missing:
        raise ValueError(f"Signature {signature_name!r} takes inputs {sorted(inputs)}: missing "
                         f"{sorted(missing)}, unknown {sorted(unknown)}.")
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    if version is not None:
        request.model_spec.version.value = version
    data = [s if isinstance(s, bytes) else str(s).encode("utf-8") for s in sentences]
    request.inputs[batched[0]].CopyFrom(
        tf.make_tensor_proto(data, dtype=inputs[batched[0]].dtype, shape=[len(data)]))
    for key, value in values.items():
        rows = list(value) if isinstance(value, (list, tuple)) else [value] * len(data)
        if len(rows) != len(data):
            raise ValueError(f"{key} needs one value per sentence ({len(data)}), got {len(rows)}.")
        request.inputs[key].CopyFrom(
            tf.make_tensor_proto(rows, dtype=inputs[key].dtype, shape=[len(rows)]))
    return request


def main(argv=None):
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sentences", nargs="*", help="sentences (default: stdin, one a line)")
    parser.add_argument("--server", default="localhost:8500")
    parser.add_argument("--model", default="bahdanau")
    parser.add_argument("--version", type=int, default=None)
    parser.add_argument("--signature", default="serving_default")
    parser.add_argument("--saved_model", default=None,
                        help="read the signature from this SavedModel instead of the server")
    parser.add_argument("--beam_size", type=int, default=None)
    parser.add_argument("--nbest", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin]
    values = {k: v for k, v in (("beam_size", args.beam_size), ("nbest", args.nbest))
              if v is not None}
    stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(args.server))
    signatures = (signatures_from_saved_model(args.saved_model) if args.saved_model
                  else signatures_from_server(stub, args.model, args.version))
    request = build_predict_request(signatures, args.signature, sentences,
                                    model_name=args.model, version=args.version, **values)
    response = stub.Predict(request, args.timeout)
    for key in sorted(response.outputs):
        value = tf.make_ndarray(response.outputs[key])
        if value.dtype == object:
            value = np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(value)
        print(f"{key}: {value.tolist()}")


if __name__ == "__main__":
    main()
