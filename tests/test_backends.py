"""The layers and models on Keras's JAX and PyTorch backends against TensorFlow's: the same
weights give the same numbers (logits, decoder steps, attention, gradients), ``fit`` learns,
``Translator.translate`` finds the same translations, and a ``.keras`` file and a model
directory cross between the backends both ways.

A process has one Keras backend, so one process per other backend does all its work
(`OTHER_BACKEND_SCRIPT`): it loads the ``.keras`` files and the model directory this
(TensorFlow) process saved, computes what this process computed, translates (the one
``keras.ops`` search: jitted on JAX, eager on PyTorch), fits a model with ``compile`` +
``fit(make_dataset(...))``, saves it both ways, and asks ``bahdanau-train`` to start. This
process compares, loads what the other backend saved, and exports it to a SavedModel that the
model server's loading path (the session bundle) runs. Each backend whose package is not
installed is skipped (the ``backends`` extra installs both: BUILD.md).
"""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from bahdanau_tf import RNNSearch, Translator, serving
from bahdanau_tf.presets import get_preset
from bahdanau_tf.decoding import Batching
from helpers import (beam, env_without_tensorflow_logging, learning_seed, random_model, save_model_dir,
                     toy_tokenizers)

pytestmark = pytest.mark.subprocess
# the other Keras backends, each tested where its package is installed
OTHER_BACKENDS = [pytest.param(name, marks=pytest.mark.skipif(
    importlib.util.find_spec(package) is None, reason=f"{package} is not installed (the backends extra)"))
    for name, package in (("jax", "jax"), ("torch", "torch"))]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# a batch with padding on both sides (the encoder's backward pass starts at each sentence's end)
SOURCE = np.array([[5, 6, 7, 8, 2], [9, 4, 2, 0, 0], [10, 2, 0, 0, 0]], "int32")
TARGET_IN = np.array([[1, 7, 8, 9], [1, 5, 0, 0], [1, 11, 12, 0]], "int32")
STEP_IDS = np.array([[1, 1, 1], [7, 5, 11]], "int32")  # two decoder steps' previous tokens
# the gradients compared: of sum(logits * PROBE) (logits: (3, 4, 16) for the toy vocabularies)
PROBE = np.random.default_rng(0).normal(size=(3, 4, 16)).astype("float32")
SENTENCES = ["the cat sat on the mat", "a dog ran to the house", "the dog"]
# translated on both backends: greedy and beam 3 with 2-best lists ([UNK] forbidden), alignments
TRANSLATED = SENTENCES + ["", "a cat and a dog ran to the house on the mat and sat", "zebra dog"]
SEARCHES = [(1, 1), (3, 2)]
PAIRS = [("the cat sat on a mat", "el gato se sentó en una alfombra"),
         ("the dog ran to a house", "el perro corrió a una casa"),
         ("a cat and a dog", "un gato y un perro"),
         ("the house", "la casa")] * 16
# name -> preset; "rnnsearch_cgru": RNNSearch with Nematus's conditional GRU decoder
MODELS = {"rnnsearch": "rnnsearch-tiny", "rnnsearch_cgru": "rnnsearch-cgru-tiny",
          "rnnencdec": "rnnencdec-tiny", "seq2seq": "seq2seq-tiny"}

# Everything the other backend's process computes; argv: the work directory (inputs.npz,
# *.keras in it) and the backend's name.
OTHER_BACKEND_SCRIPT = r'''
import contextlib, io, json, os, sys
import numpy as np
import keras
from keras import ops

assert keras.backend.backend() == sys.argv[2], keras.backend.backend()
from bahdanau_tf import MaskedAccuracy, MaskedSparseCategoricalCrossentropy, RNNSearch, make_dataset

work = sys.argv[1]
inputs = dict(np.load(os.path.join(work, "inputs.npz")))
settings = json.load(open(os.path.join(work, "settings.json")))
outputs = {}


def steps(model, name, carried):
    """Two decoder steps, from encode's memory as it is or as a search carries it."""
    memory = model.encode(inputs["source"])
    state = model.initial_state(memory)
    if carried:
        memory, state = model.decoding_memory(memory), model.decoding_state(state)
    for index, ids in enumerate(inputs["step_ids"]):
        logits, state, attention = model.decode_step(ids, state, memory)
        outputs[f"{name}/step{index}/carried{int(carried)}"] = ops.convert_to_numpy(logits)
        if attention is not None:
            outputs[f"{name}/attention{index}/carried{int(carried)}"] = ops.convert_to_numpy(attention)


def gradients(model):
    """d sum(logits * probe) / d weights of the model's stateless call: jax.grad on JAX,
    torch.autograd on PyTorch."""
    fixed = [v.value for v in model.non_trainable_variables]

    def loss(trainable):
        logits, _ = model.stateless_call(trainable, fixed, (inputs["source"], inputs["target_in"]))
        return (logits * ops.convert_to_tensor(inputs["probe"])).sum()

    if keras.backend.backend() == "jax":
        import jax

        values = jax.jit(jax.grad(loss))([v.value for v in model.trainable_variables])
    else:
        import torch

        trainable = [v.value.detach().clone().requires_grad_(True) for v in model.trainable_variables]
        values = torch.autograd.grad(loss(trainable), trainable)
    for index, value in enumerate(values):
        outputs[f"gradient/{index:02d}"] = ops.convert_to_numpy(value)


for name in settings["models"]:
    model = keras.saving.load_model(os.path.join(work, f"tf_{name}.keras"))
    outputs[f"{name}/logits"] = ops.convert_to_numpy(model((inputs["source"], inputs["target_in"])))
    steps(model, name, carried=False)
    if name.startswith("rnnsearch"):
        steps(model, name, carried=True)
    if name == "rnnsearch":
        outputs["rnnsearch/alpha"] = ops.convert_to_numpy(
            model.attention_weights((inputs["source"], inputs["target_in"])))
        gradients(model)
# a model directory saved on TensorFlow (Keras's model.weights.h5), and a trainer's run
# directory (its TensorFlow checkpoint, read by bahdanau_tf.keras_checkpoints)
model = type(model).from_preset(os.path.join(work, "tf_seq2seq_directory"))
outputs["seq2seq_directory/logits"] = ops.convert_to_numpy(model((inputs["source"], inputs["target_in"])))
model = RNNSearch.from_preset(os.path.join(work, "tf_rnnsearch_run"))
outputs["rnnsearch_run/logits"] = ops.convert_to_numpy(model((inputs["source"], inputs["target_in"])))

# translating: Translator.translate runs the one keras.ops search, compiled as the backend compiles
# a whole loop (bahdanau_tf.decoding.portable)
from bahdanau_tf import Translator
translator = Translator.from_model(keras.saving.load_model(os.path.join(work, "tf_rnnsearch.keras")))
translated = {}
for beam_size, nbest in settings["searches"]:
    out = translator.translate(settings["sentences"], beam_size=beam_size, nbest=nbest,
                               return_alignments=True, forbid_unknown=beam_size > 1)
    translated[f"{beam_size}/{nbest}"] = {"translations": out.translations,
                                          "scores": np.asarray(out.scores).tolist(),
                                          "attention": [a.attention.tolist() for a in out.alignments]}
# the teacher-forced attention of given translations (--alignments, bahdanau-evaluate's AER)
references = translator.reference_attention([s for s, _ in settings["pairs"][:4]],
                                            [t for _, t in settings["pairs"][:4]], batch_size=3)
reference_attention = [a.attention.tolist() for a in references]

# fit: the README's Keras block, at toy size, one batch shape (one compilation)
model = keras.saving.load_model(os.path.join(work, "tf_rnnsearch.keras"))
source_tokenizer, target_tokenizer = model.source_tokenizer, model.target_tokenizer
keras.utils.set_random_seed(settings["seed"])  # the order of the batches
dataset = make_dataset(settings["pairs"], source_tokenizer, target_tokenizer, batch_size=16,
                       bucketing=None, pad_to_multiple=12, drop_remainder=True)
model.compile(optimizer=keras.optimizers.Adam(0.02), loss=MaskedSparseCategoricalCrossentropy(),
              metrics=[MaskedAccuracy()])
history = model.fit(dataset, epochs=4, verbose=0)
model.save(os.path.join(work, "other_rnnsearch.keras"))
model.save_to_preset(os.path.join(work, "other_rnnsearch_directory"))
outputs["fitted/logits"] = ops.convert_to_numpy(model((inputs["source"], inputs["target_in"])))

# the package's trainer is TensorFlow's: one line, exit code 2, nothing written
from bahdanau_tf.cli import train
stderr = io.StringIO()
with contextlib.redirect_stderr(stderr):
    try:
        train.run(["bahdanau-train", "--preset=tiny", f"--output_dir={work}/run"])
        code = 0
    except SystemExit as exit:
        code = exit.code
np.savez(os.path.join(work, "other_outputs.npz"), **outputs)
json.dump({"loss": history.history["loss"], "accuracy": history.history["masked_accuracy"],
           "train_code": code, "train_stderr": stderr.getvalue(),
           "run_written": os.path.exists(f"{work}/run"), "translated": translated,
           "reference_attention": reference_attention},
          open(os.path.join(work, "other.json"), "w"))
'''


def _gradients(model):
    """What `OTHER_BACKEND_SCRIPT`'s ``gradients`` computes, with TensorFlow's tape."""
    import tensorflow as tf

    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model((SOURCE, TARGET_IN)) * PROBE)
    values = tape.gradient(loss, model.trainable_variables)
    return {f"gradient/{i:02d}": tf.convert_to_tensor(value).numpy() for i, value in enumerate(values)}


def _steps(model, name, carried, source, step_ids):
    """What `OTHER_BACKEND_SCRIPT`'s ``steps`` computes, here on TensorFlow."""
    outputs = {}
    memory = model.encode(source)
    state = model.initial_state(memory)
    if carried:
        memory, state = model.decoding_memory(memory), model.decoding_state(state)
    for index, ids in enumerate(step_ids):
        logits, state, attention = model.decode_step(ids, state, memory)
        outputs[f"{name}/step{index}/carried{int(carried)}"] = np.asarray(logits)
        if attention is not None:
            outputs[f"{name}/attention{index}/carried{int(carried)}"] = np.asarray(attention)
    return outputs


@pytest.fixture(scope="module", params=OTHER_BACKENDS)
def backends(request, tmp_path_factory):
    """Saves the TensorFlow models, runs `OTHER_BACKEND_SCRIPT` on the other backend, and
    returns both sides' outputs (``"other"``: the other backend's)."""
    work = tmp_path_factory.mktemp(f"backends_{request.param}")
    source_tokenizer, target_tokenizer = toy_tokenizers()
    expected = {}
    for name, preset in MODELS.items():
        # weights ~ N(0, 0.5^2): peaked distributions and attention, so a wrong step shows
        model = random_model(get_preset(preset).model_class, seed=3, scale=0.5, preset=preset)
        model.attach_tokenizers(source_tokenizer, target_tokenizer)
        model.save(str(work / f"tf_{name}.keras"))
        expected[f"{name}/logits"] = np.asarray(model((SOURCE, TARGET_IN)))
        if name == "seq2seq":
            model.save_to_preset(str(work / "tf_seq2seq_directory"))
            expected["seq2seq_directory/logits"] = expected["seq2seq/logits"]
        expected.update(_steps(model, name, False, SOURCE, STEP_IDS))
        if name.startswith("rnnsearch"):
            expected.update(_steps(model, name, True, SOURCE, STEP_IDS))
        if name == "rnnsearch":
            save_model_dir(work / "tf_rnnsearch_run", model, source_tokenizer, target_tokenizer)
            expected["rnnsearch_run/logits"] = expected["rnnsearch/logits"]
            expected["rnnsearch/alpha"] = np.asarray(model.attention_weights((SOURCE, TARGET_IN)))
            expected.update(_gradients(model))
    np.savez(work / "inputs.npz", source=SOURCE, target_in=TARGET_IN, step_ids=STEP_IDS, probe=PROBE)
    (work / "settings.json").write_text(json.dumps({"models": list(MODELS), "pairs": PAIRS,
                                                    "sentences": TRANSLATED, "searches": SEARCHES,
                                                    "seed": learning_seed(0)}))
    env = env_without_tensorflow_logging(KERAS_BACKEND=request.param, PYTHONPATH=REPO)
    result = subprocess.run([sys.executable, "-c", OTHER_BACKEND_SCRIPT, str(work), request.param],
                            capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return {"work": work, "backend": request.param, "tensorflow": expected,
            "other": dict(np.load(work / "other_outputs.npz")),
            "report": json.loads((work / "other.json").read_text())}


def test_teacher_forced_logits_and_attention_equal_across_backends(backends):
    for name in list(MODELS) + ["rnnsearch/alpha", "seq2seq_directory", "rnnsearch_run"]:
        key = name if "/" in name else f"{name}/logits"
        tensorflow, other = backends["tensorflow"][key], backends["other"][key]
        assert tensorflow.shape == other.shape and np.abs(tensorflow).max() > 0.5, key  # not all ~0
        np.testing.assert_allclose(other, tensorflow, rtol=0, atol=1e-5, err_msg=key)


def test_decode_steps_equal_across_backends(backends):
    keys = sorted(key for key in backends["tensorflow"] if "/step" in key or "/attention" in key)
    # two steps of every model, and of both RNNsearch decoders from the carried memory too;
    # their attention
    assert len(keys) == 2 * 4 + 2 * 2 + 2 * 2 * 2
    for key in keys:
        np.testing.assert_allclose(backends["other"][key], backends["tensorflow"][key], rtol=0,
                                   atol=1e-5, err_msg=key)


def test_gradients_equal_across_backends(backends):
    # the additive scores' own gradient (keras.ops.custom_gradient) included
    keys = sorted(key for key in backends["tensorflow"] if key.startswith("gradient/"))
    assert len(keys) == 23
    for key in keys:
        tensorflow, other = backends["tensorflow"][key], backends["other"][key]
        np.testing.assert_allclose(other, tensorflow, rtol=1e-5, atol=1e-5 * np.abs(tensorflow).max(),
                                   err_msg=key)


@pytest.mark.learning
def test_fit_on_the_other_backend_learns(backends):
    report = backends["report"]
    loss, accuracy = report["loss"], report["accuracy"]
    assert len(loss) == 4 and all(np.isfinite(loss))
    # 4 epochs of 4 batches of the 4 repeated toy pairs, Adam 0.02: the loss falls by half
    assert loss[-1] < 0.5 * loss[0] and accuracy[-1] > accuracy[0], report


def test_translations_equal_across_backends(backends):
    """`Translator.translate` on JAX (the keras.ops search under jax.jit) and on PyTorch (the same
    search, eager) finds what it finds on TensorFlow: the same translations, scores and
    alignments."""
    # the graph search: no XLA compilation to wait for, the same results (tests/test_translator.py)
    translator = Translator.from_model(keras.saving.load_model(str(backends["work"] / "tf_rnnsearch.keras")),
                                       batching=Batching(jit_compile=False))
    translated = backends["report"]["translated"]
    assert sorted(translated) == sorted(f"{beam}/{nbest}" for beam, nbest in SEARCHES)
    for beam_size, nbest in SEARCHES:
        other = translated[f"{beam_size}/{nbest}"]
        out = translator.translate(TRANSLATED, beam_size=beam_size, nbest=nbest,
                                   return_alignments=True, forbid_unknown=beam_size > 1)
        assert other["translations"] == out.translations
        np.testing.assert_allclose(other["scores"], out.scores, rtol=1e-5, atol=1e-5)
        for attention, alignment in zip(other["attention"], out.alignments):
            width = alignment.attention.shape[1]  # JSON keeps no width for an empty translation
            np.testing.assert_allclose(np.reshape(attention, [-1, width]), alignment.attention, rtol=0, atol=1e-5)
    greedy = translated["1/1"]["translations"]
    assert len(set(greedy)) > 3 and max(len(t.split()) for t in greedy) > 2  # not degenerate


def test_reference_attention_equal_across_backends(backends):
    """`Translator.reference_attention` (``bahdanau-translate --alignments``, the AER of
    ``bahdanau-evaluate``) runs on the other backend and gives TensorFlow's attention."""
    translator = Translator.from_model(keras.saving.load_model(str(backends["work"] / "tf_rnnsearch.keras")))
    expected = translator.reference_attention([s for s, _ in PAIRS[:4]], [t for _, t in PAIRS[:4]])
    other = backends["report"]["reference_attention"]
    assert len(other) == len(expected) == 4
    for attention, alignment in zip(other, expected):
        np.testing.assert_allclose(attention, alignment.attention, rtol=0, atol=1e-5)


def test_bahdanau_train_refuses_another_backend_in_one_line(backends):
    report = backends["report"]
    assert report["train_code"] == 2 and not report["run_written"]
    lines = report["train_stderr"].strip().splitlines()
    assert len(lines) == 1 and "runs on TensorFlow" in lines[0] and f"'{backends['backend']}'" in lines[0], lines


def test_a_keras_file_saved_on_the_other_backend_loads_and_serves_on_tensorflow(backends, tmp_path):
    model = keras.saving.load_model(str(backends["work"] / "other_rnnsearch.keras"))
    np.testing.assert_allclose(np.asarray(model((SOURCE, TARGET_IN))), backends["other"]["fitted/logits"],
                               rtol=0, atol=1e-5)
    assert model.source_tokenizer is not None  # the vocabularies travel in the file
    # the graph search: XLA is not what is tested (the two searches agree: tests/test_translator.py)
    translator = Translator.from_model(model, search=beam(3), batching=Batching(jit_compile=False))
    export_dir = serving.export_saved_model(translator, str(tmp_path / "served"), warmup=False)
    expected = translator.translate(SENTENCES).translations
    with serving.SessionBundle(export_dir) as bundle:  # the model server's loading path
        served = bundle.run("serving_default", sentences=[s.encode() for s in SENTENCES])
    assert [t.decode() for t in served["translations"]] == expected


def test_a_model_directory_saved_on_the_other_backend_loads_on_tensorflow(backends):
    directory = backends["work"] / "other_rnnsearch_directory"
    assert sorted(os.listdir(directory)) == ["model.json", "model.weights.h5", "source_vocabulary",
                                             "target_vocabulary"]  # Keras's own weights file
    model = RNNSearch.from_preset(str(directory))
    np.testing.assert_allclose(np.asarray(model((SOURCE, TARGET_IN))), backends["other"]["fitted/logits"],
                               rtol=0, atol=1e-5)


# Run where TensorFlow cannot be imported: a finder refuses tensorflow and tensorflow_text (and
# records each try), on Keras's JAX backend; argv: the package's import path.
WITHOUT_TENSORFLOW_SCRIPT = r'''
import importlib.abc, json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
tried = []

class Unimportable(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text"):
            tried.append(name)
            raise ImportError(f"{name} is not installed here")

sys.meta_path.insert(0, Unimportable())
import numpy as np
from bahdanau_tf.models import RNNSearch
from bahdanau_tf import RNNSearch as FromThePackage
import keras

model = RNNSearch.from_preset("rnnsearch-cgru-small")
model.compile(optimizer=keras.optimizers.Adam(1e-3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
rng = np.random.default_rng(0)
source = rng.integers(4, 8000, (4, 9)).astype("int32")
target = rng.integers(4, 8000, (4, 7)).astype("int32")
target_in = np.concatenate([np.ones((4, 1), "int32"), target[:, :-1]], axis=1)
before = [np.array(w) for w in model.trainable_weights]
loss = float(model.train_on_batch((source, target_in), target))
changed = sum(not np.array_equal(b, np.array(w)) for b, w in zip(before, model.trainable_weights))
print(json.dumps({"loss": loss, "changed": changed, "weights": len(before), "tried": tried,
                  "same_class": FromThePackage is RNNSearch, "backend": keras.backend.backend(),
                  "imported": sorted(n for n in sys.modules if n.split(".")[0] in ("tensorflow", "tensorflow_text"))}))
'''


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed (the backends extra)")
def test_the_network_builds_and_trains_on_jax_where_tensorflow_cannot_be_imported():
    """`bahdanau_tf.models` needs Keras alone: the default preset builds and makes one update
    on JAX in a process where importing TensorFlow or tensorflow-text raises, and nothing
    tried to import them."""
    result = subprocess.run([sys.executable, "-c", WITHOUT_TENSORFLOW_SCRIPT], capture_output=True,
                            text=True, env={**env_without_tensorflow_logging(), "PYTHONPATH": REPO}, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["backend"] == "jax" and report["same_class"]
    assert report["tried"] == [] and report["imported"] == []
    assert np.isfinite(report["loss"]) and report["loss"] > 0
    assert report["changed"] == report["weights"]  # every trainable weight took the update


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed (the backends extra)")
def test_the_jax_benchmark_trains_from_arrays_without_tensorflow(tmp_path):
    """benchmarks/jax_train.py: ``write`` turns the corpus into arrays (TensorFlow's
    tokenizers), ``train`` trains the default preset on JAX from them with TensorFlow
    unimportable and writes its record."""
    script, arrays, output = os.path.join(REPO, "benchmarks", "jax_train.py"), tmp_path / "a.npz", tmp_path / "r.json"
    env = {**env_without_tensorflow_logging(), "PYTHONPATH": REPO}
    written = subprocess.run([sys.executable, script, "write", f"--arrays={arrays}", "--vocabulary_size=300",
                              "--vocabulary_sentences=500", "--train_pairs=300"], capture_output=True, text=True,
                             env=env, timeout=600)
    assert written.returncode == 0, written.stderr[-3000:]
    trained = subprocess.run([sys.executable, script, "train", f"--arrays={arrays}", "--updates=2", "--warmup=1",
                              "--dev_sentences=32", f"--output={output}"], capture_output=True, text=True,
                             env={**env, "KERAS_BACKEND": "jax"}, timeout=600)
    assert trained.returncode == 0, trained.stderr[-3000:]
    record = json.loads(output.read_text())
    assert record["preset"] == "rnnsearch-cgru-small" and record["updates"] == 2
    assert record["machine"]["jax_backend"] == "cpu" and record["cpu"] and record["date"]
    assert record["updates_per_second"] > 0 and record["target_tokens_per_second"] > 0
    assert 0 < record["dev_nll"] < 10  # about ln(300) = 5.7 for a model this young
