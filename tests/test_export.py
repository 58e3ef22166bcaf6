"""Tests for bahdanau_tf.serving, bahdanau-export and the export/ kit (TF Serving, DESIGN §5).

No model server can be installed here, so an export is run the way the server runs it: the
*session bundle* (import the MetaGraph, run the saver's restore op and the init op,
``Session::Run`` by the signature's tensor names), in a fresh process that imports only
tensorflow and tensorflow_text, and `serving.SessionBundle` in this process. Every op type must
be core TF or a long-standing tf-text op.

Five exports of ``tiny`` models with random weights are shared by the module; together they
cover every model class, both decoders of RNNSearch, an ensemble of the two, and float32 and
mixed-precision training:

- ``rnnsearch``: RNNSearch trained in mixed precision (`MIXED`), exported by the command line
  (float32 by default), with an [UNK] dictionary (``--unk_dictionary``, an asset);
- ``ensemble``: two RNNSearch, Nematus's conditional GRU decoder in float32 and the paper's
  cell in mixed precision (both named ``rnn_search`` in their model.json), command line with
  ``--keep_precision`` and ``--replace_unk`` (its ``serving_default``, ``translate_nbest`` and
  ``align`` replace [UNK]);
- ``rnnencdec``: RNNEncDec, command line on a "base install" (tensorflow-serving-api hidden):
  exported without warm-up records, with ``--candidate_lists`` (every signature searches a
  per-batch candidate list, from the model directory's ``lexicon.tsv``);
- ``seq2seq``: Seq2Seq, Python API;
- ``cgru``: RNNSearch with the conditional GRU decoder alone, Python API.
"""

import base64
import concurrent.futures
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

import bahdanau_tf
from bahdanau_tf import devices, lexicon, model_directory, serving
from bahdanau_tf.decoding import Batching
from bahdanau_tf.models import model_from_preset
from bahdanau_tf.special_tokens import SPECIAL_TOKENS
from bahdanau_tf.text import SubwordTokenizer
from bahdanau_tf.signatures import MAX_BEAM_SIZE
from bahdanau_tf.translator import Translator
from helpers import beam, env_without_tensorflow_logging, replaced_reference, run_commands, signatures_of

# every test here starts a Python process (or uses a module fixture that does)
pytestmark = pytest.mark.subprocess
# the mixed-precision model's policy: bfloat16, a CPU's mixed precision, except where bf16 matmuls
# crash the process (an AVX-512 CPU with oneDNN capped below it: tests/conftest.py), where float16
# stands in, so that every export test runs there too (the --keep_precision ensemble keeps it)
MIXED = "mixed_float16" if devices.cpu().cpu_bf16_matmul_crashes else "mixed_bfloat16"

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
BATCH = [s.encode() for s in SENTENCES] + BAD_BATCH
# translate_nbest: every row its own beam and n-best
BEAMS = [1, 5, 3, 2, 6, 4, 1, 3, 2, 5]
NBESTS = [1, 3, 2, 2, 6, 1, 1, 3, 1, 4]
# the rnnencdec export's candidate lists: the 4 special tokens, 20 pieces, and the lexicon's
CANDIDATE_FREQUENT = 24


def _run(args, env=None, **kwargs):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    return subprocess.run(args, capture_output=True, env=env, timeout=600, **kwargs)


def _start(args):
    env = env_without_tensorflow_logging()  # the commands' defaults: quiet
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _finish(process):
    stdout, stderr = process.communicate(timeout=600)
    return process.returncode, stdout.decode(), stderr.decode()


def _subword(words, path):
    pieces = words + [c for c in LETTERS if c not in words] + ["##" + c for c in LETTERS]
    path.write_text("\n".join(list(SPECIAL_TOKENS) + pieces) + "\n", encoding="utf-8")
    return SubwordTokenizer(str(path))


def _model_dir(directory, preset, source, target, seed, dtype="float32", scale=0.6):
    """A model directory with random weights (large enough that translations differ)."""
    model = model_from_preset(preset, source_vocabulary_size=source.vocabulary_size,
                              target_vocabulary_size=target.vocabulary_size, dtype=dtype)
    model.build_variables()
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0.0, scale, variable.shape).astype(np.float32))
    return model_directory.save_model_directory(str(directory), model, source, target)


# source<TAB>target lines for [UNK] replacement (lexicon.tsv's third column is ignored)
UNK_DICTIONARY = {"the": "EL", "dog": "PERRO", "##s": "##S"}


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    source = _subword(SOURCE_WORDS, root / "source.txt")
    target = _subword(TARGET_WORDS, root / "target.txt")
    (root / "unk_dictionary.tsv").write_text(
        "".join(f"{k}\t{v}\t0.5\n" for k, v in UNK_DICTIONARY.items()), encoding="utf-8")
    encdec_dir = _model_dir(root / "rnnencdec", "rnnencdec-tiny", source, target, 9)
    # the candidate lists' lexicon: each source word's target word, then 2 more pieces
    pairs = [(word, " ".join(TARGET_WORDS[i:i + 3])) for i, word in enumerate(SOURCE_WORDS)]
    model_directory.write_lexicon(encdec_dir, lexicon.Lexicon.build(pairs, source, target, top_k=3))
    return {
        "unk_dictionary": str(root / "unk_dictionary.tsv"),
        "rnnsearch_mixed": _model_dir(root / "rnnsearch_mixed", "tiny", source, target, 7,
                                      dtype=MIXED),
        "rnnsearch_float32": _model_dir(root / "rnnsearch_float32", "tiny", source, target, 8),
        "cgru": _model_dir(root / "cgru", "rnnsearch-cgru-tiny", source, target, 11),
        "rnnencdec": encdec_dir,
        # LSTM gates saturate at 0.6: sentences would share a translation
        "seq2seq": _model_dir(root / "seq2seq", "seq2seq-tiny", source, target, 10, scale=0.3),
    }


EXPORT_CLI = [sys.executable, "-m", "bahdanau_tf.cli.export"]
# a base install: tensorflow_serving cannot be imported (sys.modules[name] = None)
WITHOUT_SERVING_API = [sys.executable, "-c", "import sys; sys.modules['tensorflow_serving'] = None; "
                       "from bahdanau_tf.cli.export import run; sys.argv[0] = 'bahdanau-export'; run()"]


@pytest.fixture(scope="module")
def api_translators(model_dirs):
    """The Translators exported through the Python API (the other three go through the CLI)."""
    return {name: Translator.from_directory(model_dirs[name], dtype=serving.SERVING_DTYPE, search=beam(BEAM))
            for name in ("seq2seq", "cgru")}


@pytest.fixture(scope="module")
def exports(model_dirs, api_translators, tmp_path_factory):
    """The five exports (see the module docstring): {name: version directory}."""
    root = tmp_path_factory.mktemp("serving")
    commands = {
        "rnnsearch": EXPORT_CLI + [f"--model_dir={model_dirs['rnnsearch_mixed']}",
                                   f"--export_dir={root / 'rnnsearch'}", f"--beam_size={BEAM}",
                                   f"--unk_dictionary={model_dirs['unk_dictionary']}"],
        "ensemble": EXPORT_CLI + [f"--model_dir={model_dirs['cgru']}",
                                  f"--model_dir={model_dirs['rnnsearch_mixed']}",
                                  f"--export_dir={root / 'ensemble'}", f"--beam_size={BEAM}",
                                  "--keep_precision", "--replace_unk"],
        "rnnencdec": WITHOUT_SERVING_API + [f"--model_dir={model_dirs['rnnencdec']}",
                                            f"--export_dir={root / 'rnnencdec'}",
                                            f"--beam_size={BEAM}", "--candidate_lists",
                                            f"--candidate_frequent={CANDIDATE_FREQUENT}",
                                            "--candidate_per_word=2"],
    }
    processes = {name: _start(command) for name, command in commands.items()}
    # meanwhile, the Python API in this process: given the signatures module (which
    # export_saved_model also takes), whose trace the in-process comparisons below reuse
    paths = {name: serving.export_saved_model(signatures_of(translator), str(root / name))
             for name, translator in api_translators.items()}
    for name, process in processes.items():
        code, stdout, stderr = _finish(process)
        assert code == 0, stderr[-3000:]
        assert stdout.strip() == str(root / name / "1")
        paths[name] = stdout.strip()
        # stderr: one line per signature, nothing of TensorFlow's (no temporary path)
        summary = [f"bahdanau-export: {line}" for line in serving.signature_summary(paths[name])]
        assert len(summary) == (2 if name == "rnnencdec" else 4)
        nbest = [line for line in summary if "translate_nbest(" in line]
        assert nbest[0].startswith("bahdanau-export: translate_nbest(beam_size int32 [-1], "
                                   "nbest int32 [-1], sentences string [-1]) -> ")
        warned = stderr.splitlines()[:-len(summary)]
        assert stderr.splitlines()[-len(summary):] == summary, stderr
        if name == "rnnencdec":  # exported, without warm-up records, and said so in one line
            assert len(warned) == 1 and "without warm-up records" in warned[0], stderr
        else:
            assert warned == [], stderr
    return paths


@pytest.fixture(scope="module")
def translators(model_dirs, api_translators):
    """In-process Translators built like each export."""
    return {
        # its Python API searches without XLA (the nbest rows test; XLA's search equals the
        # graph's: tests/test_translator.py), which the signatures never use
        "rnnsearch": Translator.from_directory(model_dirs["rnnsearch_mixed"], dtype="float32",
                                               search=beam(BEAM), batching=Batching(jit_compile=False),
                                               unk_dictionary=model_dirs["unk_dictionary"]),
        "ensemble": Translator.from_directory(
            [model_dirs["cgru"], model_dirs["rnnsearch_mixed"]], dtype=None,  # --keep_precision
            search=beam(BEAM), replace_unk=True),
        "rnnencdec": Translator.from_directory(
            model_dirs["rnnencdec"], search=beam(BEAM), candidates=lexicon.CandidateLists(
                model_directory.read_lexicon(model_dirs["rnnencdec"]), frequent=CANDIDATE_FREQUENT,
                per_word=2)),
        **api_translators,
    }


@pytest.fixture(scope="module")
def bundle(exports):
    """The RNNsearch export, loaded as the model server loads it."""
    with serving.SessionBundle(exports["rnnsearch"]) as loaded:
        yield loaded


def _in_process(translator, sentences, beams, nbests):
    """Every signature's outputs from the Translator itself, as NumPy."""
    batch = tf.constant(sentences, tf.string)
    outputs = {"serving_default": signatures_of(translator).serving_default(batch),
               "translate_nbest": signatures_of(translator).translate_nbest(batch, beams, nbests)}
    if translator.has_attention:
        outputs["align"] = signatures_of(translator).align(batch)
        outputs["translate_replace_unk"] = signatures_of(translator).translate_replace_unk(batch)
    return {name: {k: v.numpy() for k, v in out.items()} for name, out in outputs.items()}


def _assert_same_outputs(expected, actual, context):
    assert set(expected) == set(actual), context
    for key, value in expected.items():
        other = np.asarray(actual[key])
        assert value.shape == other.shape, (context, key)
        if value.dtype == object:
            assert (value == other).all(), (context, key, value, other)
        elif value.dtype.kind == "f":
            np.testing.assert_allclose(other, value, rtol=1e-5, atol=1e-5, err_msg=f"{context} {key}")
        else:
            np.testing.assert_array_equal(other, value, err_msg=f"{context} {key}")


def test_layout_and_version_numbering(exports):
    for name, path in exports.items():
        base = os.path.dirname(path)
        assert os.listdir(base) == ["1"], name  # no temporary directory, no claim left
        expected = {"assets", "saved_model.pb", "variables", "fingerprint.pb", "assets.extra"}
        assert set(os.listdir(path)) == expected, (name, os.listdir(path))
        extra = {serving.WRITTEN_BY_FILENAME}
        if name != "rnnencdec":  # the base install wrote no warm-up records
            extra.add(serving.WARMUP_FILENAME)
        assert set(os.listdir(os.path.join(path, "assets.extra"))) == extra, name
        # the versions that wrote it, read back from the version directory and the model base
        written_by = {"bahdanau_tf": bahdanau_tf.__version__, "tensorflow": tf.__version__}
        assert serving.read_written_by(path) == serving.read_written_by(base) == written_by
        # the two vocabularies, and the [UNK] dictionary where one was given
        assets = sorted(os.listdir(os.path.join(path, "assets")))
        assert len(assets) == 2 + (name == "rnnsearch"), assets
        if name == "rnnsearch":
            assert assets[0] == "unk_dictionary.tsv"


FRESH_SCRIPT = textwrap.dedent(r"""
    # The model server's loading path, with nothing but tensorflow and tensorflow_text.
    import base64, json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the tf-text ops, as the model server does
    before = {m for m in sys.modules if m.split(".")[0] in ("keras", "tf_keras")}
    request = json.load(open(sys.argv[1]))
    sentences = np.array([base64.b64decode(s) for s in request["sentences"]], dtype=object)
    inputs = {"sentences": sentences, "beam_size": np.array(request["beam_size"], np.int32),
              "nbest": np.array(request["nbest"], np.int32)}
    result = {}
    for name, path in request["exports"].items():
        result[name] = {}
        with tf.compat.v1.Session(graph=tf.Graph()) as session:
            meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
            for key, signature in meta_graph.signature_def.items():
                if key.startswith("__"):
                    continue
                feeds = {info.name: inputs[input_name] for input_name, info in signature.inputs.items()}
                outputs = session.run({k: v.name for k, v in signature.outputs.items()}, feeds)
                result[name][key] = {}
                for output_name, value in outputs.items():
                    if value.dtype == object:
                        result[name][key][output_name] = {
                            "strings": [base64.b64encode(v).decode() for v in value.reshape(-1)],
                            "shape": list(value.shape)}
                    else:
                        result[name][key][output_name] = {"values": value.tolist(),
                                                          "dtype": str(value.dtype)}
    result["package_imported"] = any(m.split(".")[0] == "bahdanau_tf" for m in sys.modules)
    after = {m for m in sys.modules if m.split(".")[0] in ("keras", "tf_keras")}
    result["keras_imported"] = sorted(after - before)  # by loading and running the exports
    json.dump(result, open(sys.argv[2], "w"))
""")


def _decode_fresh(output):
    if "strings" in output:
        values = [base64.b64decode(v) for v in output["strings"]]
        return np.array(values, dtype=object).reshape(output["shape"])
    return np.asarray(output["values"], dtype=output["dtype"])


def _start_fresh(exports, tmp_path):
    """`FRESH_SCRIPT` over ``exports`` ({name: version directory}) with `BATCH`, started:
    ``(process, output path)``."""
    script = tmp_path / "fresh.py"
    script.write_text(FRESH_SCRIPT)
    request = tmp_path / "request.json"
    request.write_text(json.dumps({
        "exports": exports, "sentences": [base64.b64encode(s).decode() for s in BATCH],
        "beam_size": BEAMS, "nbest": NBESTS}))
    output = tmp_path / "output.json"
    # cwd and PYTHONPATH away from the repository: the package cannot be imported by accident
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.Popen([sys.executable, "-I", str(script), str(request), str(output)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(tmp_path),
                               env={**env, "TF_CPP_MIN_LOG_LEVEL": "2"})
    return process, output


def test_every_signature_runs_through_the_session_bundle_in_a_fresh_process(
        exports, translators, tmp_path):
    process, output = _start_fresh(exports, tmp_path)
    # meanwhile, in this process: the Translators' own outputs; for the mixed ensemble, the
    # session bundle's. With native bf16 kernels (oneDNN on AMX CPUs) the TF2 function runtime
    # and the session runtime fuse the bf16 graph differently (grappler's remapper), and the
    # roundings differ by a few tenths of a percent per sentence score: near-ties flip. Float32
    # graphs give the same bits either way.
    expected = {name: _in_process(t, BATCH, BEAMS, NBESTS) for name, t in translators.items()
                if name != "ensemble"}
    with serving.SessionBundle(exports["ensemble"]) as ensemble:
        expected["ensemble"] = {name: ensemble.run(name, **inputs) for name, inputs in (
            ("serving_default", {"sentences": BATCH}),
            ("translate_nbest", {"sentences": BATCH, "beam_size": BEAMS, "nbest": NBESTS}),
            ("align", {"sentences": BATCH}), ("translate_replace_unk", {"sentences": BATCH}))}
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr.decode()[-3000:]
    fresh = json.loads(output.read_text())
    assert fresh.pop("package_imported") is False
    assert fresh.pop("keras_imported") == []  # running the export needs no Keras code either
    assert sorted(fresh) == sorted(exports)
    for name in exports:
        assert sorted(fresh[name]) == sorted(expected[name]), name
        for signature, outputs in expected[name].items():
            _assert_same_outputs(outputs, {k: _decode_fresh(v) for k, v in fresh[name][signature].items()},
                                 f"{name}/{signature}")
        # the models really translate: distinct, non-empty outputs for real sentences
        translations = expected[name]["serving_default"]["translations"]
        assert len(set(translations[: len(SENTENCES)])) == len(SENTENCES), name
    for name in ("rnnsearch", "cgru", "ensemble"):
        assert sorted(fresh[name]) == ["align", "serving_default", "translate_nbest", "translate_replace_unk"]
    assert sorted(fresh["rnnencdec"]) == ["serving_default", "translate_nbest"]  # no attention
    # the ensemble is not its conditional GRU member alone
    assert not np.allclose(expected["cgru"]["serving_default"]["scores"],
                           expected["ensemble"]["serving_default"]["scores"])


def _graph_dtypes(path):
    """The dtypes of every op's ``T`` attribute in the SavedModel's functions."""
    proto = serving._read_saved_model_proto(path)
    dtypes = set()
    for meta_graph in proto.meta_graphs:
        for function in meta_graph.graph_def.library.function:
            for node in function.node_def:
                if "T" in node.attr and node.attr["T"].type:
                    dtypes.add(tf.as_dtype(node.attr["T"].type).name)
    return dtypes


def test_the_graph_is_float32_unless_the_training_precision_is_kept(exports):
    compute = MIXED.removeprefix("mixed_")
    assert compute not in _graph_dtypes(exports["rnnsearch"])  # trained in mixed precision
    assert compute in _graph_dtypes(exports["ensemble"])  # --keep_precision


def test_translate_nbest_rows_with_their_own_beam_equal_each_row_alone(bundle, translators):
    together = bundle.run("translate_nbest", sentences=BATCH, beam_size=BEAMS, nbest=NBESTS)
    width = max(NBESTS)
    assert together["translations"].shape == together["scores"].shape == (len(BATCH), width)
    assert list(together["beam_size"]) == BEAMS and list(together["nbest"]) == NBESTS
    beam_matters = False
    for row, (sentence, beam, nbest) in enumerate(zip(BATCH, BEAMS, NBESTS)):
        alone = bundle.run("translate_nbest", sentences=[sentence], beam_size=[beam], nbest=[nbest])
        assert list(alone["translations"][0]) == list(together["translations"][row, :nbest]), row
        np.testing.assert_allclose(together["scores"][row, :nbest], alone["scores"][0],
                                   rtol=1e-5, atol=1e-5)
        # padding beyond the row's own n-best
        assert (together["translations"][row, nbest:] == b"").all()
        assert np.isneginf(together["scores"][row, nbest:]).all()
        if row in (0, 1, 4):  # and the Python API with a static beam agrees
            python = translators["rnnsearch"].translate([sentence], beam_size=beam, nbest=nbest)
            texts = python.translations[0] if nbest > 1 else [python.translations[0]]
            assert [t.decode("utf-8", "replace") for t in alone["translations"][0]] == texts
        widest = bundle.run("translate_nbest", sentences=[sentence], beam_size=[max(BEAMS)],
                            nbest=[1])
        beam_matters |= widest["translations"][0, 0] != alone["translations"][0, 0]
    assert beam_matters  # the rows' beams change their results, so the test can see them


SAVED_MODEL_CLI = [sys.executable, "-c", "import tensorflow_text; "
                   "from tensorflow.python.tools import saved_model_cli; saved_model_cli.main()"]


def test_saved_model_cli_runs_serving_default(exports, translators):
    # saved_model_cli with tf-text's ops registered, as the model server links them
    result = _run(SAVED_MODEL_CLI + ["run", "--dir", exports["rnnsearch"], "--tag_set", "serve",
                   "--signature_def", "serving_default",
                   "--input_exprs", f"sentences={SENTENCES[:2]!r}"])
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    expected = signatures_of(translators["rnnsearch"]).serving_default(tf.constant(SENTENCES[:2]))
    text = result.stdout.decode()
    assert "Result for output key translations:" in text, text
    for translation in expected["translations"].numpy():
        assert repr(translation) in text, (translation, text)


def test_saved_model_cli_lists_the_documented_signatures(exports):
    result = _run(["saved_model_cli", "show", "--all", "--dir", exports["rnnsearch"]])
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    text = result.stdout.decode()
    blocks = {}
    for block in text.split("signature_def['")[1:]:
        blocks[block.split("']", 1)[0]] = block
    rows = {"sentences": ("DT_STRING", "(-1)")}
    documented = {
        "serving_default": {
            "inputs": rows,
            "outputs": {"translations": ("DT_STRING", "(-1)"), "scores": ("DT_FLOAT", "(-1)")}},
        "translate_nbest": {
            "inputs": {**rows, "beam_size": ("DT_INT32", "(-1)"), "nbest": ("DT_INT32", "(-1)")},
            "outputs": {"translations": ("DT_STRING", "(-1, -1)"),
                        "scores": ("DT_FLOAT", "(-1, -1)"),
                        "beam_size": ("DT_INT32", "(-1)"), "nbest": ("DT_INT32", "(-1)")}},
        "align": {
            "inputs": rows,
            "outputs": {"translations": ("DT_STRING", "(-1)"), "scores": ("DT_FLOAT", "(-1)"),
                        "source_tokens": ("DT_STRING", "(-1, -1)"),
                        "source_lengths": ("DT_INT32", "(-1)"),
                        "target_tokens": ("DT_STRING", "(-1, -1)"),
                        "target_lengths": ("DT_INT32", "(-1)"),
                        "attention": ("DT_FLOAT", "(-1, -1, -1)")}},
        "translate_replace_unk": {
            "inputs": rows,
            "outputs": {"translations": ("DT_STRING", "(-1)"), "scores": ("DT_FLOAT", "(-1)")}},
    }
    assert set(blocks) == set(documented) | {"__saved_model_init_op"}
    for name, spec in documented.items():
        inputs_text, outputs_text = blocks[name].split(
            "The given SavedModel SignatureDef contains the following output(s):")
        for part, text_part in (("inputs", inputs_text), ("outputs", outputs_text)):
            listed = {}
            for entry in text_part.split(f"{part}['")[1:]:
                key = entry.split("']", 1)[0]
                dtype = entry.split("dtype: ", 1)[1].split()[0]
                shape = entry.split("shape: ", 1)[1].split("\n")[0].strip()
                listed[key] = (dtype, shape)
            assert listed == spec[part], (name, part, listed)


def test_every_signature_is_batchable_and_warmed_up_through_the_session_bundle(exports, bundle):
    with serving.SessionBundle(exports["seq2seq"]) as seq2seq:
        for name, loaded in (("rnnsearch", bundle), ("seq2seq", seq2seq)):
            defs = serving.signature_defs(exports[name])
            assert all(serving.is_batchable(d) for d in defs.values()), name
            records = serving.read_warmup_requests(exports[name])
            assert records and len(records) <= 1000  # the server reads at most 1000
            warmed = set()
            # replayed as the server does at load: session bundle, Session::Run by tensor names
            for log in records:
                assert log.WhichOneof("log_type") == "predict_log"
                request = log.predict_log.request
                assert request.model_spec.name == "bahdanau"
                warmed.add(request.model_spec.signature_name)
                outputs = serving.run_predict_request(loaded, request)
                batch = request.inputs["sentences"].tensor_shape.dim[0].size
                assert all(value.shape[0] == batch for value in outputs.values())
            assert warmed == set(defs), name  # every signature, chosen by being batchable


def test_served_unk_replacement_is_the_argmax_of_the_served_attention(bundle):
    """translate_replace_unk through the session bundle, with the export's dictionary (an
    asset): each [UNK] of align's tokens becomes the subword piece of highest attention."""
    sentences = SENTENCES + ["zebra quokka Ωmega the dog"]
    aligned = bundle.run("align", sentences=sentences)
    replaced = bundle.run("translate_replace_unk", sentences=sentences)
    np.testing.assert_allclose(replaced["scores"], aligned["scores"], rtol=1e-5, atol=1e-5)
    unknowns = 0
    for k in range(len(sentences)):
        source = [t.decode() for t in aligned["source_tokens"][k, :aligned["source_lengths"][k]]]
        target = [t.decode() for t in aligned["target_tokens"][k, :aligned["target_lengths"][k]]]
        attention = aligned["attention"][k]
        unknowns += target.count("[UNK]")
        expected = replaced_reference(source, target, attention, UNK_DICTIONARY, subword=True)
        assert replaced["translations"][k].decode() == expected, (k, source, target)
    assert unknowns >= 2  # the test can fail
    # the dictionary was looked up in the served graph (its entries are upper case)
    assert any(w in t.decode() for t in replaced["translations"] for w in ("EL", "PERRO", "S"))


def test_op_check_passes_on_every_export(exports):
    for name, path in exports.items():
        report = serving.check_serving_ops(path)
        # the tokenizers' tf-text ops are there, and nothing newer
        assert set(report["tf_text"]) == {"NormalizeUTF8", "RegexSplitWithOffsets",
                                          "WordpieceTokenizeWithOffsets"}, name
        ops = serving.list_op_types(path)
        assert {"While", "StatefulPartitionedCall", "LookupTableFindV2"} <= ops  # loop, tables
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

    def by_name(self):  # as bahdanau_tf.signatures.Signatures gives them
        return {"serving_default": self.tokenize.get_concrete_function()}


def test_op_check_fails_on_a_planted_newer_tf_text_op(tmp_path):
    path = str(tmp_path / "planted")
    module = _FastWordpiece()
    tf.saved_model.save(module, path, signatures=module.by_name())
    with pytest.raises(serving.ServingOpsError, match="FastWordpieceTokenizeWithOffsets"):
        serving.check_serving_ops(path)
    refused = {op for op in serving.list_op_types(path) if not hasattr(tf.raw_ops, op)}
    assert "FastWordpieceTokenizeWithOffsets" in refused
    serving.check_serving_ops(path, allowed_extra=refused)  # the escape hatch works
    # the export refuses to publish such a graph: no version directory, no claim left
    base = tmp_path / "base"
    with pytest.raises(serving.ServingOpsError):
        serving.export_saved_model(module, str(base), warmup=False)
    assert not base.exists()  # the export made it, and removed it with the failed version


# === Hostile input, through the session bundle (the server's Session::Run) ===

LONG_ROW = "the cat sat on the mat " * 4400  # 101,200 characters, 26,400 words


def _answered(rows):
    """Checks: one finite answer per row."""
    def check(out, translator):
        assert out["translations"].shape == out["scores"].shape == (rows,)
        assert np.isfinite(out["scores"]).all()
    return check


def _no_rows(key):
    """Checks: an empty batch answers with empty outputs."""
    def check(out, translator):
        assert all(value.shape[0] == 0 for value in out.values()), out
        assert key in out
    return check


def _alone_equals(sentence):
    """Checks: the one row's answer is what the Translator gives for ``sentence``."""
    def check(out, translator):
        expected = signatures_of(translator).serving_default(tf.constant([sentence]))
        assert out["translations"][0] == expected["translations"].numpy()[0]
        np.testing.assert_allclose(out["scores"][0], expected["scores"].numpy()[0], atol=1e-5)
    return check


def _empty_translation(out, translator):
    assert list(out["translations"]) == [b""] * len(out["translations"])
    assert (out["scores"] == 0.0).all()


def _thousand_rows(out, translator):
    assert out["translations"].shape == (1000,)
    expected = signatures_of(translator).serving_default(tf.constant(SENTENCES))["translations"].numpy()
    assert list(out["translations"]) == list(expected) * 250  # each row as if alone


def _long_row(out, translator):
    assert out["source_lengths"][0] == translator.limits.max_source_length + 1  # the documented cut
    cut = " ".join(LONG_ROW.split()[: translator.limits.max_source_length])
    expected = signatures_of(translator).serving_default(tf.constant([cut]))
    assert out["translations"][0] == expected["translations"].numpy()[0]


def _clamped(out, translator):
    assert list(out["beam_size"]) == [1, 1, MAX_BEAM_SIZE, 3]
    assert list(out["nbest"]) == [1, 1, 3, 3]
    assert out["translations"].shape == (4, 3)


def _refused(pattern):
    return ("InvalidArgument", pattern)


def _not_a_vector(names):
    """Our assertion's message, or EnsureShape's where the graph's runtime folded our Rank check
    away (its input is an op named after the input): both name the refused input."""
    return _refused(rf"({names})( must be a vector|_must_be_a_vector \S+ is not compatible)")


HOSTILE_CASES = [
    # (id, signature, inputs, check or ("InvalidArgument", message pattern))
    ("empty batch", "serving_default", dict(sentences=[]), _no_rows("translations")),
    ("empty batch, n-best", "translate_nbest", dict(sentences=[], beam_size=[], nbest=[]),
     _no_rows("translations")),
    ("empty batch, align", "align", dict(sentences=[]), _no_rows("attention")),
    ("empty batch, replace_unk", "translate_replace_unk", dict(sentences=[]),
     _no_rows("translations")),
    ("1,000 rows", "serving_default", dict(sentences=SENTENCES * 250), _thousand_rows),
    ("100k-character row", "align", dict(sentences=[LONG_ROW]), _long_row),
    ("invalid UTF-8", "serving_default", dict(sentences=[b"\xff\xfe the \xc3 cat \x80"]),
     _alone_equals(b"\xff\xfe the \xc3 cat \x80")),
    ("only whitespace", "serving_default", dict(sentences=["", " ", "\t\n", "\u3000\u00a0"]),
     _empty_translation),
    ("only punctuation", "serving_default", dict(sentences=["!!! ... ,,, ?", "«»"]), _answered(2)),
    ("out-of-range beam_size and nbest", "translate_nbest",
     dict(sentences=SENTENCES, beam_size=[0, -5, 1000, 3], nbest=[1, 7, 3, 99]), _clamped),
    ("rank-2 sentences", "serving_default", dict(sentences=[SENTENCES[:2], SENTENCES[2:]]),
     _not_a_vector("sentences")),
    ("rank-2 sentences, align", "align", dict(sentences=[SENTENCES[:2], SENTENCES[2:]]),
     _not_a_vector("sentences")),
    ("rank-2 sentences, n-best", "translate_nbest",
     dict(sentences=[SENTENCES[:2], SENTENCES[2:]], beam_size=[[2, 2], [2, 2]],
          nbest=[[1, 1], [1, 1]]), _not_a_vector("sentences|beam_size|nbest")),
    ("scalar sentence", "serving_default", dict(sentences=np.array("the cat", dtype=object)),
     _not_a_vector("sentences")),
    ("rank-2 beam_size", "translate_nbest",
     dict(sentences=SENTENCES[:2], beam_size=[[2], [2]], nbest=[1, 1]),
     _not_a_vector("beam_size")),
    ("beam_size rows != sentences", "translate_nbest",
     dict(sentences=SENTENCES[:2], beam_size=[2, 2, 2], nbest=[1, 1]),
     _refused("beam_size must have one value per sentence")),
    ("nbest rows != sentences", "translate_nbest",
     dict(sentences=SENTENCES[:2], beam_size=[2, 2], nbest=[1]),
     _refused("nbest must have one value per sentence")),
]


@pytest.mark.parametrize("case", HOSTILE_CASES, ids=[case[0] for case in HOSTILE_CASES])
def test_hostile_input_gets_a_defined_answer_or_invalid_argument(case, bundle, translators):
    _, signature, inputs, check = case
    if isinstance(check, tuple):
        with pytest.raises(tf.errors.InvalidArgumentError, match=check[1]):
            bundle.run(signature, **inputs)
    else:
        check(bundle.run(signature, **inputs), translators["rnnsearch"])
    # the model still answers afterwards
    assert bundle.run("serving_default", sentences=["the dog"])["translations"].shape == (1,)


def test_concurrent_requests_equal_sequential_results(bundle):
    pool_inputs = SENTENCES + [s.decode("utf-8", "replace") for s in BAD_BATCH[:2] + BAD_BATCH[3:]]
    requests = [[pool_inputs[(t * 7 + r + k) % len(pool_inputs)] for k in range(1 + (t + r) % 3)]
                for t in range(8) for r in range(10)]
    call = lambda batch: bundle.run("serving_default", sentences=batch)  # noqa: E731
    sequential = [call(batch) for batch in requests]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        threads = [pool.submit(lambda t=t: [call(b) for b in requests[t * 10:(t + 1) * 10]])
                   for t in range(8)]
        concurrent_results = [out for future in threads for out in future.result()]
    assert len(concurrent_results) == 80
    for expected, actual in zip(sequential, concurrent_results):
        assert (expected["translations"] == actual["translations"]).all()
        np.testing.assert_allclose(actual["scores"], expected["scores"], rtol=1e-5, atol=1e-5)


# === Versions: the Python API, the command line, concurrent exports ===

def test_python_api_refuses_an_existing_version_and_load_exported_works(exports, translators):
    base = os.path.dirname(exports["seq2seq"])
    with pytest.raises(FileExistsError, match="exists"):
        serving.export_saved_model(translators["seq2seq"], base, version=1)
    model = serving.load_exported(base)  # the object graph: a convenience, not the server's path
    out = model.signatures["serving_default"](sentences=tf.constant(SENTENCES))
    expected = signatures_of(translators["seq2seq"]).serving_default(tf.constant(SENTENCES))
    assert (out["translations"].numpy() == expected["translations"].numpy()).all()
    assert sorted(os.listdir(base)) == ["1"]


def test_another_keras_backend_is_told_to_export_from_tensorflow(monkeypatch, tmp_path):
    # a SavedModel is TensorFlow's graph: on JAX the translator refuses before any work
    monkeypatch.setattr(serving.keras.backend, "backend", lambda: "jax")
    with pytest.raises(ValueError, match="exported by a TensorFlow process.*'jax'"):
        serving.export_saved_model(None, str(tmp_path / "served"))
    assert os.listdir(tmp_path) == []


def test_the_object_graph_path_refuses_sentences_that_are_not_a_vector(exports):
    # tf.saved_model.load's runtime folds the Rank check from the declared [None]: EnsureShape
    # checks the fed tensor itself, so a [2, 2] request is not read as 4 sentences
    signature = serving.load_exported(os.path.dirname(exports["rnnsearch"])).signatures
    for name in ("serving_default", "align"):
        for bad in (tf.constant([SENTENCES[:2], SENTENCES[2:]]), tf.constant(SENTENCES[0])):
            with pytest.raises(tf.errors.InvalidArgumentError, match="sentences"):
                signature[name](sentences=bad)
    with pytest.raises(tf.errors.InvalidArgumentError, match="beam_size"):
        signature["translate_nbest"](sentences=tf.constant(SENTENCES[:2]),
                                     beam_size=tf.constant([[2, 2]]), nbest=tf.constant([1, 1]))
    assert signature["serving_default"](sentences=tf.constant(SENTENCES))["translations"].shape == (4,)


CLAIM_SCRIPT = textwrap.dedent(r"""
    # One exporter: a small module whose by_name() (its signatures) waits, so two exporters overlap.
    import sys, time
    import tensorflow as tf
    from bahdanau_tf import serving

    class Tagged(tf.Module):
        def __init__(self, tag):
            super().__init__()
            self.tag = tag

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
        def serve(self, sentences):
            return {"tag": tf.fill(tf.shape(sentences), self.tag)}

        def by_name(self):
            time.sleep(4)
            return {"serving_default": self.serve.get_concrete_function()}

    base, version, tag = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        path = serving.export_saved_model(Tagged(tag), base, warmup=False,
                                          version=None if version == "auto" else int(version))
    except FileExistsError as error:
        print(f"refused: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(2)
    print(path)
""")


def test_concurrent_exports_claim_their_version_atomically(tmp_path):
    script = tmp_path / "claim.py"
    script.write_text(CLAIM_SCRIPT)
    fixed, automatic = str(tmp_path / "fixed"), str(tmp_path / "automatic")
    processes = {(base, tag): _start([sys.executable, str(script), base, version, tag])
                 for base, version in ((fixed, "3"), (automatic, "auto")) for tag in "AB"}
    results = {key: _finish(process) for key, process in processes.items()}

    def served_tag(path):
        with serving.SessionBundle(path) as loaded:
            return loaded.run("serving_default", sentences=["x"])["tag"][0].decode()

    # the same version: one export wins, the other fails clearly, nothing is replaced
    codes = sorted(results[(fixed, tag)][0] for tag in "AB")
    assert codes == [0, 2], results
    winner = next(tag for tag in "AB" if results[(fixed, tag)][0] == 0)
    loser = "B" if winner == "A" else "A"
    assert results[(fixed, winner)][1].strip() == os.path.join(fixed, "3")
    assert "refused: VersionClaimedError: Another export is writing version 3" in \
        results[(fixed, loser)][2] or "exists" in results[(fixed, loser)][2], results
    assert os.listdir(fixed) == ["3"]
    assert served_tag(os.path.join(fixed, "3")) == winner
    # no version given: each export gets its own number
    paths = {tag: results[(automatic, tag)][1].strip() for tag in "AB"}
    assert all(results[(automatic, tag)][0] == 0 for tag in "AB"), results
    assert sorted(paths.values()) == [os.path.join(automatic, "1"), os.path.join(automatic, "2")]
    assert sorted(os.listdir(automatic)) == ["1", "2"]
    for tag, path in paths.items():
        assert served_tag(path) == tag


def test_command_line_user_errors_are_one_line_and_exit_2(model_dirs, exports, tmp_path):
    model = f"--model_dir={model_dirs['seq2seq']}"
    base = f"--export_dir={os.path.dirname(exports['seq2seq'])}"
    cases = {
        "no model_dir": ([f"--export_dir={tmp_path}"], "--model_dir is required"),
        "missing model_dir": ([f"--model_dir={tmp_path / 'nowhere'}", base], "does not exist"),
        "beam_size 0": ([model, base, "--beam_size=0"], "--beam_size=0: 0 is not an integer in the range [1, 64]"),
        "length_penalty nan": ([model, base, "--length_penalty=nan"], "--length_penalty must be a finite number"),
        "bad integer": ([model, base, "--beam_size=five"], "beam_size"),
        "existing version": ([model, base, "--version=1"], "exists"),
    }
    # a base install needs a process of its own (tensorflow_serving hidden); the other refusals
    # are rows of one process (no fresh process is what they test)
    base_install = _start(WITHOUT_SERVING_API + [model, base, "--warmup"])
    rows = run_commands([("export", args, "") for args, _ in cases.values()], cwd=str(tmp_path),
                        env=env_without_tensorflow_logging())
    answers = {name: (row["code"], row["stdout"], row["stderr"]) for name, row in zip(cases, rows)}
    answers["warmup without tensorflow-serving-api"] = _finish(base_install)
    expected = {name: message for name, (_, message) in cases.items()}
    expected["warmup without tensorflow-serving-api"] = "--warmup needs tensorflow-serving-api"
    for name, (code, stdout, stderr) in answers.items():
        # ours: one line (TensorFlow's own C++ log lines may come before it)
        lines = [line for line in stderr.splitlines() if line.startswith("bahdanau-export:")]
        assert code == 2, (name, stderr)
        assert len(lines) == 1 and lines[0].startswith("bahdanau-export: error: "), (name, stderr)
        assert expected[name] in lines[0], (name, lines[0])
        assert "Traceback" not in stderr and stdout == ""
    assert os.listdir(os.path.dirname(exports["seq2seq"])) == ["1"]


# === The export/ kit's clients ===

def _load_script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "export" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rest_client_bodies_follow_the_exported_signature(exports, bundle):
    client = _load_script("client_rest")
    metadata = serving.signature_metadata(exports["rnnsearch"])  # what GET .../metadata returns
    signatures = client.signatures_from_metadata(metadata)
    defs = serving.signature_defs(exports["rnnsearch"])
    for name, signature_def in defs.items():
        assert set(signatures[name]["inputs"]) == set(signature_def.inputs)
    # instances (row format) and inputs (columnar) for every signature
    body = client.build_predict_body(signatures, "serving_default", ["the cat", "\xff"])
    assert body == {"signature_name": "serving_default",
                    "instances": [{"sentences": "the cat"}, {"sentences": "\xff"}]}
    body = client.build_predict_body(signatures, "serving_default", [b"\xff\xfe", b"ok"],
                                     format="inputs")
    assert body["inputs"] == {"sentences": [{"b64": "//4="}, "ok"]}  # invalid UTF-8 as binary
    body = client.build_predict_body(signatures, "translate_nbest", ["the cat", "a dog"],
                                     beam_size=5, nbest=2)
    assert body["instances"] == [{"sentences": "the cat", "beam_size": 5, "nbest": 2},
                                 {"sentences": "a dog", "beam_size": 5, "nbest": 2}]
    body = client.build_predict_body(signatures, "translate_nbest", ["the cat", "a dog"],
                                     beam_size=[5, 1], nbest=[2, 1], format="inputs")
    assert body["inputs"] == {"sentences": ["the cat", "a dog"], "beam_size": [5, 1], "nbest": [2, 1]}
    with pytest.raises(ValueError, match="nbest"):
        client.build_predict_body(signatures, "translate_nbest", ["x"], beam_size=5)
    with pytest.raises(ValueError, match="one value per sentence"):
        client.build_predict_body(signatures, "translate_nbest", ["x", "y"], beam_size=[5],
                                  nbest=1)
    # the bodies' values have the signature's dtypes and shapes: run them as the server would
    for name, extra in (("serving_default", {}), ("translate_nbest", dict(beam_size=5, nbest=2)),
                        ("align", {}), ("translate_replace_unk", {})):
        for form in ("instances", "inputs"):
            body = client.build_predict_body(signatures, name, SENTENCES[:2], format=form, **extra)
            if form == "instances":  # the server turns rows into columns
                columns = {key: [row[key] for row in body["instances"]] for key in body["instances"][0]}
            else:
                columns = body["inputs"]
            for key, value in columns.items():
                assert np.asarray(value).shape == (2,), (name, key)
            outputs = bundle.run(name, **columns)
            assert set(outputs) == set(defs[name].outputs)
            assert all(value.shape[0] == 2 for value in outputs.values())


def test_grpc_client_requests_follow_the_exported_signature(exports, bundle):
    client = _load_script("client_grpc")
    signatures = client.signatures_from_saved_model(exports["rnnsearch"])
    defs = serving.signature_defs(exports["rnnsearch"])
    for name, extra in (("serving_default", {}), ("translate_nbest", dict(beam_size=5, nbest=2)),
                        ("align", {})):
        request = client.build_predict_request(signatures, name, SENTENCES[:2],
                                               model_name="bahdanau", **extra)
        assert request.model_spec.signature_name == name
        assert set(request.inputs) == set(defs[name].inputs)
        for key, proto in request.inputs.items():
            assert proto.dtype == defs[name].inputs[key].dtype
            assert [d.size for d in proto.tensor_shape.dim] == [2]
        outputs = serving.run_predict_request(bundle, request)
        assert set(outputs) == set(defs[name].outputs)
    request = client.build_predict_request(signatures, "translate_nbest", SENTENCES[:2],
                                           beam_size=[3, 1], nbest=[2, 1])
    assert list(tf.make_ndarray(request.inputs["beam_size"])) == [3, 1]
    # the request for invalid UTF-8 carries the raw bytes
    request = client.build_predict_request(signatures, "serving_default", [b"\xff"])
    assert tf.make_ndarray(request.inputs["sentences"])[0] == b"\xff"


# === The C++ loader: tensorflow::LoadSavedModel + Session::Run, as the model server ===

CPP_SOURCE = REPO / "tests" / "cpp" / "serve_signatures.cc"
# outside the checkout, so that a fresh clone (CI's) finds the binary a previous run built
CPP_CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "bahdanau_tf" / "cpp"


def _build_cpp_loader():
    """tests/cpp/serve_signatures.cc built against the installed TensorFlow wheel, cached in
    `CPP_CACHE` by the TensorFlow version and a hash of its inputs (the source, the compiler, the
    flags, which name the wheel's headers and libraries); (binary, seconds spent building)."""
    import hashlib
    import time

    compiler = os.environ.get("CXX") or shutil.which("g++")
    if not compiler:
        pytest.skip("no C++ compiler (g++ or $CXX): the C++ loader test builds "
                    "tests/cpp/serve_signatures.cc against the TensorFlow wheel")
    include, lib = tf.sysconfig.get_include(), tf.sysconfig.get_lib()
    needed = [os.path.join(include, "tensorflow", "cc", "saved_model", "loader.h"),
              os.path.join(lib, "libtensorflow_cc.so.2"), os.path.join(lib, "libtensorflow_framework.so.2")]
    missing = [path for path in needed if not os.path.exists(path)]
    if missing:
        pytest.skip(f"the TensorFlow wheel lacks {missing}: no C++ loader to build")
    flags = (["-O1", "-Wno-deprecated-declarations"] + tf.sysconfig.get_compile_flags()
             + [str(CPP_SOURCE), f"-L{lib}", "-Wl,--no-as-needed", "-l:libtensorflow_cc.so.2",
                "-l:libtensorflow_framework.so.2", f"-Wl,-rpath,{lib}"])
    key = hashlib.sha256(CPP_SOURCE.read_bytes() + " ".join([compiler, *flags]).encode()).hexdigest()[:12]
    binary = CPP_CACHE / f"serve_signatures-tf{tf.__version__}-{key}"
    if binary.exists():
        return binary, 0.0
    CPP_CACHE.mkdir(parents=True, exist_ok=True)
    partial = binary.with_name(f"{binary.name}.{os.getpid()}.tmp")
    start = time.time()
    result = subprocess.run([compiler, *flags, "-o", str(partial)], capture_output=True, text=True,
                            timeout=900)
    seconds = time.time() - start
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        pytest.fail(f"building {CPP_SOURCE.name} failed:\n{result.stderr[-3000:]}")
    os.replace(partial, binary)  # whole or absent, also for another test process
    return binary, seconds


def _tensor_file(path, value, dtype):
    """``value`` as a serialized TensorProto of ``dtype`` (strings as bytes, as on the wire)."""
    if dtype == tf.string:
        array = np.asarray(value, dtype=object)
        if array.size:
            array = np.frompyfunc(lambda v: v.encode("utf-8") if isinstance(v, str) else v, 1, 1)(array)
        array = np.asarray(array, dtype=object)
    else:
        array = np.asarray(value, dtype=dtype.as_numpy_dtype)
    path.write_bytes(tf.make_tensor_proto(array, dtype=dtype, shape=array.shape).SerializeToString())


def _cpp_requests(directory, bundle, requests):
    for index, (signature, inputs) in enumerate(requests):
        request = directory / f"{index:03d}"
        request.mkdir(parents=True)
        (request / "signature").write_text(signature)
        for key, info in bundle.signature_defs[signature].inputs.items():
            _tensor_file(request / f"{key}.pb", inputs[key], tf.as_dtype(info.dtype))


def _cpp_answer(directory):
    """{output key: array} of one C++ response, or ("error", code, message)."""
    from tensorflow.core.framework import tensor_pb2

    status = directory / "status"
    if status.exists():
        code, _, message = status.read_text().partition(" ")
        return ("error", int(code), message)
    return {path.stem: tf.make_ndarray(tensor_pb2.TensorProto.FromString(path.read_bytes()))
            for path in directory.glob("*.pb")}


def _tf_text_op_libraries():
    import glob

    import tensorflow_text

    libraries = sorted(glob.glob(os.path.join(os.path.dirname(tensorflow_text.__file__), "python",
                                              "ops", "*.so")))
    assert libraries, "tensorflow_text ships no op libraries (python/ops/*.so)"
    return libraries


@pytest.mark.slow
def test_the_cpp_loader_answers_like_the_python_session_bundle(exports, bundle, tmp_path):
    """The export through C++ (LoadSavedModel, Session::Run by tensor names, TF Text's kernels
    loaded from its op libraries): every signature and every hostile request of HOSTILE_CASES
    answers as the Python session bundle does, an InvalidArgument included."""
    binary, seconds = _build_cpp_loader()
    print(f"{CPP_SOURCE.name}: {'built in %.0f s' % seconds if seconds else 'cached'} ({binary.name})")
    requests = [("serving_default", dict(sentences=BATCH)),
                ("translate_nbest", dict(sentences=SENTENCES, beam_size=[1, 5, 3, 2], nbest=[1, 3, 2, 2])),
                ("align", dict(sentences=[s.encode() for s in SENTENCES[:2]] + [b"\xff\xfe the \xc3 cat"])),
                ("translate_replace_unk", dict(sentences=BATCH))]
    requests += [(signature, inputs) for _, signature, inputs, _ in HOSTILE_CASES]
    _cpp_requests(tmp_path / "requests", bundle, requests)
    run = subprocess.run([str(binary), exports["rnnsearch"], str(tmp_path / "requests"),
                          str(tmp_path / "responses"), *_tf_text_op_libraries()],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"loaded {exports['rnnsearch']}: 4 signatures" in run.stdout, run.stdout
    identical = errors = 0
    for index, (signature, inputs) in enumerate(requests):
        context = f"request {index} ({signature})"
        answer = _cpp_answer(tmp_path / "responses" / f"{index:03d}")
        try:
            expected = bundle.run(signature, **inputs)
        except tf.errors.OpError as error:
            assert isinstance(answer, tuple), (context, error)
            assert answer[1] == error.error_code == tf.errors.INVALID_ARGUMENT, (context, answer)
            assert error.message.split("\n")[0][:60] in answer[2], (context, answer, error.message)
            errors += 1
            continue
        assert isinstance(answer, dict), (context, answer)
        _assert_same_outputs(expected, answer, context)
        identical += all(np.array_equal(expected[key], answer[key]) for key in expected)
    print(f"{len(requests)} requests: {identical} bit for bit, {errors} refused alike")
    assert errors == sum(isinstance(check, tuple) for *_, check in HOSTILE_CASES) > 0

    # without TF Text's kernels (a model server built without its ops_lib): the model loads,
    # and a request fails on a TF Text op, named (which one first depends on the order the
    # runtime instantiates the graph's functions in); the first request alone, as each failing
    # request costs the runtime a failed instantiation of the graph's functions
    shutil.copytree(tmp_path / "requests" / "000", tmp_path / "first_request" / "000")
    run = subprocess.run([str(binary), exports["rnnsearch"], str(tmp_path / "first_request"),
                          str(tmp_path / "without_tf_text")], capture_output=True, text=True,
                         timeout=600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert run.returncode == 0 and "4 signatures" in run.stdout, run.stderr[-3000:]
    code, message = _cpp_answer(tmp_path / "without_tf_text" / "000")[1:]
    missing = re.search(r"Op type not registered '(\w+)'", message)
    assert code == tf.errors.NOT_FOUND and missing, message
    assert missing.group(1) in serving.SERVING_TF_TEXT_OPS, message


# === The temp dir ===

_FAILING_EXPORT = textwrap.dedent("""
    import sys
    from bahdanau_tf import serving
    from bahdanau_tf.translator import Translator

    def refuse(path, **kwargs):
        raise RuntimeError("planted failure after the graph was saved")

    serving.check_serving_ops = refuse
    try:
        serving.export_saved_model(Translator.from_directory(sys.argv[1]), sys.argv[2], warmup=False)
    except RuntimeError as error:
        print(error)
""")


def _generated_files(*roots):
    return [os.path.join(path, name) for root in roots for path, _, names in os.walk(root)
            for name in names if name.startswith("__autograph_generated_file")]


def test_an_export_leaves_nothing_in_the_temp_dir(model_dirs, tmp_path):
    """Finished, failed or SIGKILLed, with bytecode written: autograph's code (the signature
    wrapper it converts at save time), its __pycache__, nothing stays in the temp dir. A killed
    export leaves its claim of the version, stale, which the next export of that base takes over."""
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(TMPDIR=str(temp), TF_CPP_MIN_LOG_LEVEL="2")
    model = f"--model_dir={model_dirs['rnnsearch_float32']}"
    failed = subprocess.run([sys.executable, "-c", _FAILING_EXPORT, model_dirs["rnnsearch_float32"],
                             str(tmp_path / "failed")], env=env, capture_output=True, text=True,
                            timeout=600)
    assert "planted failure" in failed.stdout, failed.stderr
    assert os.listdir(temp) == [] and not (tmp_path / "failed").exists()
    # killed while autograph's generated module exists
    killed = subprocess.Popen(EXPORT_CLI + [model, f"--export_dir={tmp_path / 'killed'}"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not _generated_files(temp, tmp_path / "killed") and time.time() < deadline:
        time.sleep(0.05)
    killed.kill()
    killed.wait()
    assert time.time() < deadline, "autograph wrote no module during the export"
    assert os.listdir(temp) == []
    assert ".claim-1" in os.listdir(tmp_path / "killed")  # the killed export's claim, stale now
    # the next export of that base finishes: it takes the version over and removes what the
    # killed one left, and leaves nothing in the temp dir either (the finished case)
    again = subprocess.run(EXPORT_CLI + [model, f"--export_dir={tmp_path / 'killed'}"], env=env,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert again.stdout.strip().splitlines()[-1] == str(tmp_path / "killed" / "1")
    assert os.listdir(tmp_path / "killed") == ["1"] and os.listdir(temp) == []
