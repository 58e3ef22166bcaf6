#!/usr/bin/env python3
"""REST client for the bahdanau model in TF Serving — standard library only.

The request body is built from the signature the server reports
(``GET /v1/models/NAME/metadata``), not from names written here, so it follows the export.
Two body formats of TF Serving's ``:predict``:

- ``instances`` (row format): one object per sentence,
  ``[{"sentences": "...", "beam_size": 5, "nbest": 3}]``;
- ``inputs`` (columnar format): ``{"sentences": [...], "beam_size": [5, ...], "nbest": [3, ...]}``.

Every input of every signature has a batch dimension (so the server can batch requests), so
both formats serve every signature. ``beam_size`` and ``nbest`` are per row: one value for
every sentence, or a list with one value per sentence.

Sentences given as bytes (e.g. invalid UTF-8) are sent as ``{"b64": ...}``, TF Serving's JSON
form of binary strings.

Example:

    python client_rest.py --server=http://localhost:8501 --model=bahdanau \\
        "But seek God's Kingdom, and all these things will be added to you."
    python client_rest.py --signature=translate_nbest --beam_size=8 --nbest=3 \\
        "And God said, Let there be light."
"""

import argparse
import base64
import json
import sys
import urllib.request

_JSON_TYPES = {"DT_STRING": "string", "DT_INT32": int, "DT_INT64": int, "DT_FLOAT": float}


def _shape(tensor_info):
    shape = tensor_info.get("tensor_shape", {})
    if shape.get("unknown_rank"):
        return None
    return [int(d.get("size", -1)) for d in shape.get("dim", [])]


def signatures_from_metadata(metadata):
    """``{name: {"inputs": {key: {"dtype", "shape"}}, "outputs": {...}}}`` from the metadata JSON.

    Args:
        metadata: dict, the JSON of ``GET /v1/models/NAME[/versions/N]/metadata``.
    """
    defs = metadata["metadata"]["signature_def"]["signature_def"]
    signatures = {}
    for name, signature in defs.items():
        if name.startswith("__"):
            continue  # __saved_model_init_op
        signatures[name] = {
            part: {key: {"dtype": info["dtype"], "shape": _shape(info)}
                   for key, info in signature.get(part, {}).items()}
            for part in ("inputs", "outputs")
        }
    return signatures


def _model_url(server, model_name, version=None):
    url = f"{server.rstrip('/')}/v1/models/{model_name}"
    return url + (f"/versions/{version}" if version is not None else "")


def fetch_signatures(server, model_name, version=None, timeout=30):
    """The served model's signatures, from its metadata endpoint."""
    with urllib.request.urlopen(_model_url(server, model_name, version) + "/metadata",
                                timeout=timeout) as response:
        return signatures_from_metadata(json.load(response))


def _string_value(value):
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    return str(value)


def _convert(value, dtype):
    kind = _JSON_TYPES.get(dtype)
    if kind is None:
        raise ValueError(f"Input dtype {dtype} is not supported by this client.")
    return _string_value(value) if kind == "string" else kind(value)


def build_predict_body(signatures, signature_name, sentences, format="instances", **values):
    """The JSON body of ``POST .../MODEL:predict`` for one signature (no request is sent).

    Args:
        signatures: dict from `signatures_from_metadata` / `fetch_signatures`.
        signature_name: str, e.g. ``"serving_default"``.
        sentences: list of str (or bytes): the signature's batched string input.
        format: ``"instances"`` (row format) or ``"inputs"`` (columnar format).
        **values: the signature's other per-row inputs by name, each one value for every
            sentence or a list of one value per sentence, e.g. ``beam_size=5, nbest=[3, 1]``.

    Returns:
        dict, ready for ``json.dumps``.

    Raises:
        ValueError: unknown signature, missing or unknown inputs, a list of values of another
            length than ``sentences``, or an input without a batch dimension.
    """
    if signature_name not in signatures:
        raise ValueError(f"Unknown signature {signature_name!r}; the model has "
                         f"{sorted(signatures)}.")
    if format not in ("instances", "inputs"):
        raise ValueError(f'format must be "instances" or "inputs", got {format!r}.')
    specs = signatures[signature_name]["inputs"]
    batched = [k for k, s in specs.items() if s["dtype"] == "DT_STRING" and s["shape"] == [-1]]
    if len(batched) != 1:
        raise ValueError(f"Expected one batched string input in {signature_name!r}, got "
                         f"{sorted(specs)}.")
    unknown = set(values) - set(specs)
    missing = set(specs) - set(values) - set(batched)
    if unknown or missing:
        raise ValueError(f"Signature {signature_name!r} takes inputs {sorted(specs)}: missing "
                         f"{sorted(missing)}, unknown {sorted(unknown)}.")
    unbatched = [k for k, s in specs.items() if not s["shape"] or s["shape"][0] != -1]
    if unbatched:
        raise ValueError(f"Signature {signature_name!r} has inputs without a batch dimension: "
                         f"{unbatched}; this client sends one row per sentence.")
    sentences = [_string_value(s) for s in sentences]
    columns = {batched[0]: sentences}
    for key, value in values.items():
        rows = list(value) if isinstance(value, (list, tuple)) else [value] * len(sentences)
        if len(rows) != len(sentences):
            raise ValueError(f"{key} needs one value per sentence ({len(sentences)}), got "
                             f"{len(rows)}.")
        columns[key] = [_convert(v, specs[key]["dtype"]) for v in rows]
    if format == "instances":
        return {"signature_name": signature_name,
                "instances": [{key: column[i] for key, column in columns.items()}
                              for i in range(len(sentences))]}
    return {"signature_name": signature_name, "inputs": columns}


def predict(server, model_name, body, version=None, timeout=60):
    """Sends ``body`` to ``:predict``; returns the decoded JSON response."""
    request = urllib.request.Request(
        _model_url(server, model_name, version) + ":predict",
        data=json.dumps(body).encode("utf-8"), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sentences", nargs="*", help="sentences (default: stdin, one a line)")
    parser.add_argument("--server", default="http://localhost:8501")
    parser.add_argument("--model", default="bahdanau")
    parser.add_argument("--version", type=int, default=None)
    parser.add_argument("--signature", default="serving_default")
    parser.add_argument("--format", choices=["instances", "inputs"], default="instances")
    parser.add_argument("--beam_size", type=int, default=None)
    parser.add_argument("--nbest", type=int, default=None)
    args = parser.parse_args(argv)
    sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin]
    values = {k: v for k, v in (("beam_size", args.beam_size), ("nbest", args.nbest))
              if v is not None}
    signatures = fetch_signatures(args.server, args.model, args.version)
    body = build_predict_body(signatures, args.signature, sentences, format=args.format, **values)
    print(json.dumps(predict(args.server, args.model, body, args.version), ensure_ascii=False,
                     indent=1))


if __name__ == "__main__":
    main()
