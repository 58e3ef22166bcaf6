"""Tests for bahdanau_tf.serving, bahdanau-export and the export/ kit (TF Serving, DESIGN §5).

No model server can be installed here, so compatibility is shown the way the issue asks:
the export loads and runs in a fresh process that imports only tensorflow and
tensorflow_text, and every op type in its graph is core TF or a long-standing tf-text op.
One export (through the command line, `tiny` RNNsearch with WordPiece vocabularies) is shared
by the module.
"""

import base64
import concurrent.futures
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf import model_directory, serving
from bahdanau_tf.models import RNNSearch
from bahdanau_tf.special_tokens import SPECIAL_TOKENS
from bahdanau_tf.text import SubwordTokenizer
from bahdanau_tf.translator import Translator

REPO = pathlib.Path(__file__).resolve().parents[1]
BEAM = 4
SOURCE_WORDS = "the cat sat on a mat and dog ran to house".split()
TARGET_WORDS = "el gato se sentó en una alfombra y perro corrió a casa".split()
LETTERS = list("abcdefghijklmnopqrstuvwxyzó")

SENTENCES = [
    "the cat sat on the mat",
    "a dog ran to the house and the cat sat on a mat",
    "the dog",
    "cats and dogs",  # WordPiece: cat ##s
]
# one batch with every kind of bad input
BAD_BATCH = [
    b"",
    b"   \t ",
    " ".join(["the cat sat on the mat"] * 40).encode(),  # 240 tokens, cut at 100
    b"\xff\xfe the \xc3 cat \x80",  # invalid UTF-8
    "zebra quokka Ωmega".encode(),  # unknown words and characters
    b"the dog ran",
]


def _subword(words):
    pieces = words + [c for c in LETTERS if c not in words] + ["##" + c for c in LETTERS]
    return SubwordTokenizer(list(SPECIAL_TOKENS) + pieces)


def _random_model(source_size, target_size, seed=7, scale=0.6):
    model = RNNSearch.from_preset("tiny", source_vocabulary_size=source_size,
                                  target_vocabulary_size=target_size)
    model_directory.build_model(model)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0.0, scale, variable.shape).astype(np.float32))
    return model


def _run(args, **kwargs):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(args, capture_output=True, env=env, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    source, target = _subword(SOURCE_WORDS), _subword(TARGET_WORDS)
    model = _random_model(source.vocabulary_size, target.vocabulary_size)
    directory = str(tmp_path_factory.mktemp("model"))
    model_directory.write_model_config(directory, model, source, target)
    tf.train.Checkpoint(model=model).save(os.path.join(directory, "checkpoints", "ckpt"))
    return directory


@pytest.fixture(scope="module")
def model_base(model_dir, tmp_path_factory):
    """bahdanau-export run once: MODEL_BASE/1."""
    base = str(tmp_path_factory.mktemp("serving") / "bahdanau")
    result = _run([sys.executable, "-m", "bahdanau_tf.cli.export", f"--model_dir={model_dir}",
                   f"--export_dir={base}", f"--beam_size={BEAM}"])
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    assert result.stdout.decode().strip() == os.path.join(base, "1")
    return base


@pytest.fixture(scope="module")
def export_path(model_base):
    return os.path.join(model_base, "1")


@pytest.fixture(scope="module")
def translator(model_dir):
    return Translator.from_directory(model_dir, beam_size=BEAM)


@pytest.fixture(scope="module")
def loaded(export_path):
    return serving.load_exported(export_path)


def _in_process(translator, sentences, beam_size=5, nbest=3):
    """The three signatures' outputs from the Translator itself, as NumPy."""
    batch = tf.constant(sentences, tf.string)
    outputs = {
        "serving_default": translator.serving_default(batch),
        "translate_nbest": translator.translate_nbest(batch, beam_size, nbest),
        "align": translator.align(batch),
    }
    return {name: {k: v.numpy() for k, v in out.items()} for name, out in outputs.items()}


def _assert_same_outputs(expected, actual):
    assert set(expected) == set(actual)
    for key, value in expected.items():
        other = np.asarray(actual[key])
        assert value.shape == other.shape, key
        if value.dtype == object:
            assert (value == other).all(), key
        elif value.dtype.kind == "f":
            np.testing.assert_allclose(other, value, rtol=1e-5, atol=1e-5, err_msg=key)
        else:
            np.testing.assert_array_equal(other, value, err_msg=key)


def test_layout_and_version_numbering(model_base, export_path):
    assert all(name.isdigit() for name in os.listdir(model_base))  # no temporary directory
    assert {"assets", "assets.extra", "saved_model.pb", "variables"} <= set(os.listdir(export_path))
    assert len(os.listdir(os.path.join(export_path, "assets"))) == 2  # the two vocabularies
    assert os.listdir(os.path.join(export_path, "assets.extra")) == [serving.WARMUP_FILENAME]


FRESH_SCRIPT = textwrap.dedent(r"""
    import base64, json, sys, time
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the tf-text ops, as the model server does
    before = {m for m in sys.modules if m.split(".")[0] in ("keras", "tf_keras")}
    start = time.perf_counter()
    model = tf.saved_model.load(sys.argv[1])
    load_seconds = time.perf_counter() - start
    request = json.load(open(sys.argv[2]))
    sentences = tf.constant([base64.b64decode(s) for s in request["sentences"]])
    calls = {
        "serving_default": dict(sentences=sentences),
        "translate_nbest": dict(sentences=sentences, beam_size=tf.constant(request["beam_size"]),
                                nbest=tf.constant(request["nbest"])),
        "align": dict(sentences=sentences),
    }
    result = {"signatures": sorted(model.signatures), "load_seconds": load_seconds}
    for name, inputs in calls.items():
        outputs = model.signatures[name](**inputs)
        result[name] = {}
        for key, value in outputs.items():
            value = value.numpy()
            if value.dtype == object:
                value = [base64.b64encode(v).decode() for v in value.reshape(-1)]
                result[name][key] = {"strings": value, "shape": list(outputs[key].shape)}
            else:
                result[name][key] = {"values": value.tolist(), "dtype": str(value.dtype)}
    after = {m for m in sys.modules if m.split(".")[0] in ("keras", "tf_keras")}
    result["package_imported"] = any(m.split(".")[0] == "bahdanau_tf" for m in sys.modules)
    result["keras_imported_by_load"] = sorted(after - before)
    json.dump(result, open(sys.argv[3], "w"))
""")


def _decode_fresh(output):
    if "strings" in output:
        values = [base64.b64decode(v) for v in output["strings"]]
        return np.array(values, dtype=object).reshape(output["shape"])
    return np.asarray(output["values"], dtype=output["dtype"])


def test_fresh_process_with_only_tensorflow_and_tf_text_matches_translator(
        export_path, translator, tmp_path):
    sentences = SENTENCES + BAD_BATCH
    script = tmp_path / "fresh.py"
    script.write_text(FRESH_SCRIPT)
    request = tmp_path / "request.json"
    request.write_text(json.dumps({
        "sentences": [base64.b64encode(s if isinstance(s, bytes) else s.encode()).decode()
                      for s in sentences],
        "beam_size": 5, "nbest": 3}))
    output = tmp_path / "output.json"
    # cwd and PYTHONPATH away from the repository: the package cannot be imported by accident
    env_path = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.Popen([sys.executable, "-I", str(script), export_path, str(request),
                                str(output)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=str(tmp_path), env={**env_path, "TF_CPP_MIN_LOG_LEVEL": "2"})
    expected = _in_process(translator, sentences)  # meanwhile, in this process
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr.decode()[-3000:]
    fresh = json.loads(output.read_text())
    assert fresh["signatures"] == ["align", "serving_default", "translate_nbest"]
    assert fresh["package_imported"] is False
    assert fresh["keras_imported_by_load"] == []  # loading needs no Keras code either
    for name in ("serving_default", "translate_nbest", "align"):
        _assert_same_outputs(expected[name], {k: _decode_fresh(v) for k, v in fresh[name].items()})
    # the model really translates: distinct, non-empty outputs for real sentences
    translations = expected["serving_default"]["translations"]
    assert len(set(translations[: len(SENTENCES)])) == len(SENTENCES)
    assert expected["translate_nbest"]["translations"].shape == (len(sentences), 3)


def test_saved_model_cli_lists_the_documented_signatures(export_path):
    result = _run(["saved_model_cli", "show", "--all", "--dir", export_path])
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    text = result.stdout.decode()
    blocks = {}
    for block in text.split("signature_def['")[1:]:
        name = block.split("']", 1)[0]
        blocks[name] = block
    assert {"serving_default", "translate_nbest", "align"} <= set(blocks)
    documented = {
        "serving_default": {
            "inputs": {"sentences": ("DT_STRING", "(-1)")},
            "outputs": {"translations": ("DT_STRING", "(-1)"), "scores": ("DT_FLOAT", "(-1)")}},
        "translate_nbest": {
            "inputs": {"sentences": ("DT_STRING", "(-1)"), "beam_size": ("DT_INT32", "()"),
                       "nbest": ("DT_INT32", "()")},
            "outputs": {"translations": ("DT_STRING", "(-1, -1)"),
                        "scores": ("DT_FLOAT", "(-1, -1)")}},
        "align": {
            "inputs": {"sentences": ("DT_STRING", "(-1)")},
            "outputs": {"translations": ("DT_STRING", "(-1)"), "scores": ("DT_FLOAT", "(-1)"),
                        "source_tokens": ("DT_STRING", "(-1, -1)"),
                        "source_lengths": ("DT_INT32", "(-1)"),
                        "target_tokens": ("DT_STRING", "(-1, -1)"),
                        "target_lengths": ("DT_INT32", "(-1)"),
                        "attention": ("DT_FLOAT", "(-1, -1, -1)")}},
    }
    for name, spec in documented.items():
        block = blocks[name]
        inputs_text, outputs_text = block.split("The given SavedModel SignatureDef contains the "
                                                "following output(s):")
        for part, text_part in (("inputs", inputs_text), ("outputs", outputs_text)):
            listed = {}
            for entry in text_part.split(f"{part}['")[1:]:
                key = entry.split("']", 1)[0]
                dtype = entry.split("dtype: ", 1)[1].split()[0]
                shape = entry.split("shape: ", 1)[1].split("\n")[0].strip()
                listed[key] = (dtype, shape)
            assert listed == spec[part], (name, part, listed)


def test_op_check_passes_on_the_export(export_path):
    report = serving.check_serving_ops(export_path)
    # the tokenizers' tf-text ops are there, and nothing newer
    assert set(report["tf_text"]) == {"NormalizeUTF8", "RegexSplitWithOffsets",
                                      "WordpieceTokenizeWithOffsets"}
    ops = serving.list_op_types(export_path)
    assert {"While", "StatefulPartitionedCall", "LookupTableFindV2"} <= ops  # loop and tables
    assert not any(op.startswith("Fast") or "Addons" in op for op in ops)


class _FastWordpiece(tf.Module):
    """A module using a newer tf-text op (FastWordpieceTokenizeWithOffsets)."""

    def __init__(self):
        super().__init__()
        import tensorflow_text as tf_text

        self.tokenizer = tf_text.FastWordpieceTokenizer(["[UNK]", "the", "##s"],
                                                        token_out_type=tf.int64)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="words")])
    def tokenize(self, words):
        return {"ids": self.tokenizer.tokenize(words).to_tensor()}

    def signatures(self):  # what export_saved_model asks of a Translator
        return {"serving_default": self.tokenize.get_concrete_function()}


def test_op_check_fails_on_a_planted_newer_tf_text_op(tmp_path):
    path = str(tmp_path / "planted")
    module = _FastWordpiece()
    tf.saved_model.save(module, path, signatures=module.signatures())
    with pytest.raises(serving.ServingOpsError, match="FastWordpieceTokenizeWithOffsets"):
        serving.check_serving_ops(path)
    refused = {op for op in serving.list_op_types(path) if not hasattr(tf.raw_ops, op)}
    assert "FastWordpieceTokenizeWithOffsets" in refused
    serving.check_serving_ops(path, allowed_extra=refused)  # the escape hatch works
    # the export refuses to publish such a graph: no version directory appears
    base = tmp_path / "base"
    with pytest.raises(serving.ServingOpsError):
        serving.export_saved_model(module, str(base), warmup=False)
    assert os.listdir(base) == []


def test_warmup_records_parse_and_the_model_answers_them(export_path, loaded):
    records = serving.read_warmup_requests(export_path)
    assert records and len(records) <= 1000  # the server reads at most 1000
    names = set()
    for log in records:
        assert log.WhichOneof("log_type") == "predict_log"
        request = log.predict_log.request
        names.add(request.model_spec.signature_name)
        assert request.model_spec.name == "bahdanau"
        outputs = serving.run_predict_request(loaded, request)
        batch = request.inputs["sentences"].tensor_shape.dim[0].size
        assert all(value.shape[0] == batch for value in outputs.values())
    # every signature whose inputs all have a batch dimension (batching-safe) is warmed up
    assert names == {"serving_default", "align"}


def test_mixed_bad_input_batch_every_row_answered(loaded, translator):
    out = loaded.signatures["serving_default"](sentences=tf.constant(BAD_BATCH))
    translations, scores = out["translations"].numpy(), out["scores"].numpy()
    assert translations.shape == scores.shape == (len(BAD_BATCH),)
    assert np.isfinite(scores).all()
    assert translations[0] == translations[1] == b"" and scores[0] == scores[1] == 0.0
    for row in (2, 3, 4, 5):
        assert translations[row] and scores[row] < 0
    for row, sentence in enumerate(BAD_BATCH):  # each row as if it came alone
        alone = loaded.signatures["serving_default"](sentences=tf.constant([sentence]))
        assert alone["translations"].numpy()[0] == translations[row]
        np.testing.assert_allclose(alone["scores"].numpy()[0], scores[row], rtol=1e-5, atol=1e-5)
    aligned = loaded.signatures["align"](sentences=tf.constant(BAD_BATCH))
    source_lengths = aligned["source_lengths"].numpy()
    assert source_lengths[2] == translator.max_source_length + 1  # the documented cut, + [END]
    assert list(source_lengths[:2]) == [1, 1]  # empty input: only [END]
    assert list(aligned["target_lengths"].numpy()[:2]) == [0, 0]
    nbest = loaded.signatures["translate_nbest"](sentences=tf.constant(BAD_BATCH),
                                                 beam_size=tf.constant(1000),
                                                 nbest=tf.constant(-3))  # clamped, no error
    assert nbest["translations"].shape == (len(BAD_BATCH), 1)
    empty = loaded.signatures["serving_default"](sentences=tf.constant([], tf.string))
    assert empty["translations"].shape == (0,)


def test_concurrent_requests_equal_sequential_results(loaded):
    function = loaded.signatures["serving_default"]
    pool_inputs = SENTENCES + [s.decode("utf-8", "replace") for s in BAD_BATCH[:2] + BAD_BATCH[3:]]
    requests = [[pool_inputs[(t * 7 + r + k) % len(pool_inputs)] for k in range(1 + (t + r) % 3)]
                for t in range(8) for r in range(20)]
    call = lambda batch: {k: v.numpy() for k, v in function(sentences=tf.constant(batch)).items()}  # noqa: E731
    sequential = [call(batch) for batch in requests]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        threads = [pool.submit(lambda t=t: [call(b) for b in requests[t * 20:(t + 1) * 20]])
                   for t in range(8)]
        concurrent_results = [out for future in threads for out in future.result()]
    assert len(concurrent_results) == 160
    for expected, actual in zip(sequential, concurrent_results):
        assert (expected["translations"] == actual["translations"]).all()
        np.testing.assert_allclose(actual["scores"], expected["scores"], rtol=1e-5, atol=1e-5)


def test_python_api_export_and_load_exported(translator, model_base):
    path = translator.export(model_base)  # next version
    assert path == os.path.join(model_base, "2")
    with pytest.raises(FileExistsError):
        translator.export(model_base, version=2)
    import bahdanau_tf

    model = bahdanau_tf.load_exported(model_base)  # the highest version
    out = model.signatures["serving_default"](sentences=tf.constant(SENTENCES))
    expected = translator.serving_default(tf.constant(SENTENCES))
    assert (out["translations"].numpy() == expected["translations"].numpy()).all()
    assert sorted(os.listdir(model_base)) == ["1", "2"]


def _load_script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "export" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rest_client_bodies_follow_the_exported_signature(export_path, loaded):
    client = _load_script("client_rest")
    metadata = serving.signature_metadata(export_path)  # what GET .../metadata returns
    signatures = client.signatures_from_metadata(metadata)
    defs = serving.signature_defs(export_path)
    for name, signature_def in defs.items():
        assert set(signatures[name]["inputs"]) == set(signature_def.inputs)
    # instances (row format) for serving_default, inputs (columnar) for any signature
    body = client.build_predict_body(signatures, "serving_default", ["the cat", "\xff"],
                                     format="instances")
    assert body == {"signature_name": "serving_default",
                    "instances": [{"sentences": "the cat"}, {"sentences": "\xff"}]}
    body = client.build_predict_body(signatures, "serving_default", [b"\xff\xfe", b"ok"],
                                     format="inputs")
    assert body["inputs"] == {"sentences": [{"b64": "//4="}, "ok"]}  # invalid UTF-8 as binary
    body = client.build_predict_body(signatures, "translate_nbest", ["the cat"],
                                     beam_size=5, nbest=2, format="inputs")
    assert set(body["inputs"]) == set(defs["translate_nbest"].inputs)
    with pytest.raises(ValueError, match="instances"):
        client.build_predict_body(signatures, "translate_nbest", ["x"], beam_size=5, nbest=2,
                                  format="instances")
    with pytest.raises(ValueError, match="nbest"):
        client.build_predict_body(signatures, "translate_nbest", ["x"], format="inputs")
    # the bodies' values have the signature's dtypes and shapes: run them as the server would
    for name, extra in (("serving_default", {}), ("translate_nbest", dict(beam_size=5, nbest=2)),
                        ("align", {})):
        body = client.build_predict_body(signatures, name, SENTENCES[:2], format="inputs", **extra)
        inputs = {}
        for key, value in body["inputs"].items():
            spec = defs[name].inputs[key]
            tensor = tf.constant(value, tf.as_dtype(spec.dtype))
            assert tensor.shape.rank == len(spec.tensor_shape.dim)
            inputs[key] = tensor
        outputs = loaded.signatures[name](**inputs)
        assert set(outputs) == set(defs[name].outputs)


def test_grpc_client_requests_follow_the_exported_signature(export_path, loaded):
    client = _load_script("client_grpc")
    signatures = client.signatures_from_saved_model(export_path)
    defs = serving.signature_defs(export_path)
    for name, extra in (("serving_default", {}), ("translate_nbest", dict(beam_size=5, nbest=2)),
                        ("align", {})):
        request = client.build_predict_request(signatures, name, SENTENCES[:2],
                                               model_name="bahdanau", **extra)
        assert request.model_spec.signature_name == name
        assert set(request.inputs) == set(defs[name].inputs)
        for key, proto in request.inputs.items():
            assert proto.dtype == defs[name].inputs[key].dtype
            assert len(proto.tensor_shape.dim) == len(defs[name].inputs[key].tensor_shape.dim)
        outputs = serving.run_predict_request(loaded, request)
        assert set(outputs) == set(defs[name].outputs)
    # the request for invalid UTF-8 carries the raw bytes
    request = client.build_predict_request(signatures, "serving_default", [b"\xff"])
    assert tf.make_ndarray(request.inputs["sentences"])[0] == b"\xff"
