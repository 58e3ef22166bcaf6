"""Tests for the shipped pretrained model (bahdanau_tf/pretrained/, scripts/build_pretrained_model.py)."""

import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import h5py
import numpy as np
import packaging.version
import pytest

from bahdanau_tf import model_directory, presets, pretrained
from bahdanau_tf.models import RNNSearch, model_from_preset
from bahdanau_tf.translator import Translator
from helpers import random_model, save_model_dir, toy_tokenizers

NAME = "bible-en-es-small"
# a test verse (Luke 12:31), which the model never trained on: README.md's example
VERSE = "But seek God's Kingdom, and all these things will be added to you."
# outside its domain: the docs' example of what it does with other text
OTHER_TEXT = "The weather is nice today."
# the shipped model's translations (beam 5, the Translator's default); the second is a training verse
EXPECTED = {
    VERSE: "Mas buscad el reino de Dios, y todas estas cosas os añadirán.",
    "Jesus wept.": "Y lloró Jesús.",
    OTHER_TEXT: "El principio de hoy es este negocio.",
}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the model card beside the weights
CARD = os.path.join("bahdanau_tf", "pretrained", NAME, "README.md")


@pytest.fixture(scope="module")
def model():
    return RNNSearch.from_preset(NAME)


def _stored_arrays(file):
    """Every array of a Keras ``.weights.h5`` file, in the file's order (h5py, not Keras)."""
    arrays = []
    with h5py.File(file, "r") as stored:
        stored.visititems(lambda name, item: arrays.append(item[()]) if isinstance(item, h5py.Dataset) else None)
    return arrays


def test_the_shipped_weights_are_kerass_weights_file_in_float16_and_small():
    directory = pretrained.path(NAME)
    weights = os.path.join(directory, pretrained.WEIGHTS)
    assert os.path.getsize(weights) <= 10 * 2**20
    assert not os.path.exists(os.path.join(directory, "weights.npz"))
    assert {array.dtype for array in _stored_arrays(weights)} == {np.dtype(np.float16)}
    saved = model_directory.read_model_config(NAME)  # a name reads the package's directory
    assert saved["class_name"] == "RNNSearch" and saved["settings"]["direction"] == "en-es"
    recipe = saved["settings"]["pretrained"]
    assert recipe["command"].startswith(f"bahdanau-train --preset={presets.DEFAULT} ") and recipe["seed"] == 1234
    assert saved["settings"]["preset"] == presets.DEFAULT  # the model a newcomer meets is the default
    assert f"--max_steps={recipe['max_steps']}" in recipe["command"]
    # the stamps name a version that writes this layout (0.2 wrote weights.npz), in this format
    assert saved["format"] == model_directory.FORMAT_VERSION
    for version in (saved["written_by"]["bahdanau_tf"], recipe["version"]):
        assert packaging.version.Version(version) > packaging.version.Version("0.2.0"), version


def test_the_shipped_models_description_is_the_model(model):
    """`pretrained.MODELS` says what the model is: its preset, decoder, tying, parameters, updates."""
    saved = model_directory.read_model_config(NAME)
    said = pretrained.MODELS[NAME]
    assert said.startswith(f"the default preset's RNNsearch ({saved['settings']['preset']}: the conditional GRU "
                           "decoder, tied target embeddings; ")
    assert (model.decoder, model.tie_embeddings, saved["settings"]["preset"]) == ("cgru", True, presets.DEFAULT)
    assert f"; {model.count_params():,} parameters)" in said
    assert said.endswith(f"English -> Spanish, {saved['settings']['pretrained']['max_steps']:,} updates")


def _document(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as handle:
        return " ".join(handle.read().split())


def test_the_model_card_and_the_docs_quote_what_the_model_is_and_writes(model):
    """The card beside the weights (and README.md, docs/translating.md) quote the translations
    that `test_translates_the_test_verse` checks; the card, the model's parameters and preset; a
    model directory with its card loads (the checks take no extra file amiss)."""
    for document in ("README.md", os.path.join("docs", "translating.md"), CARD):
        said = _document(document)
        for source in (VERSE, OTHER_TEXT):
            assert EXPECTED[source] in said, (document, source)
    card = _document(CARD)
    assert card.startswith("--- language: - en - es license: apache-2.0 ")
    assert f"the default preset, `{presets.DEFAULT}` (" in card
    assert f"; {model.count_params():,} parameters)" in card
    assert "[model card](../bahdanau_tf/pretrained/bible-en-es-small/README.md)" in _document(
        os.path.join("docs", "translating.md"))
    assert os.path.isfile(os.path.join(pretrained.path(NAME), "README.md"))
    assert model_directory.check_model_directory(pretrained.path(NAME))["settings"]["preset"] == presets.DEFAULT


def test_loaded_by_name_in_float32_with_the_default_presets_variables(model):
    """The variables (paths and shapes) of the default preset, float32, the stored values."""
    fresh = RNNSearch.from_preset(presets.DEFAULT, source_vocabulary_size=model.source_tokenizer.vocabulary_size,
                                  target_vocabulary_size=model.target_tokenizer.vocabulary_size)
    fresh.build_variables()
    # paths below the model's own name, which Keras numbers by the models made in the process
    layout = lambda m: [(v.path.split("/", 1)[1], tuple(v.shape)) for v in m.weights]  # noqa: E731
    assert layout(model) == layout(fresh)
    assert {v.dtype for v in model.weights} == {"float32"}
    stored = sorted((a.astype(np.float32) for a in _stored_arrays(os.path.join(pretrained.path(NAME), pretrained.WEIGHTS))),
                    key=lambda a: (a.shape, a.tobytes()))
    loaded = sorted((np.asarray(v.numpy()) for v in model.weights), key=lambda a: (a.shape, a.tobytes()))
    assert len(stored) == len(loaded)
    for expected, value in zip(stored, loaded):  # the same values, whatever Keras's file layout
        np.testing.assert_array_equal(value, expected)


def test_load_weights_false_gives_the_shipped_models_architecture_untrained(model):
    """keras-hub's ``load_weights=False``: the shipped model's architecture and tokenizers,
    fresh weights; without it, the trained weights."""
    bare = RNNSearch.from_preset(NAME, load_weights=False)
    assert bare.get_config() == {**model.get_config(), "name": bare.name}
    assert bare.source_tokenizer.vocabulary_size == model.source_tokenizer.vocabulary_size
    layout = lambda m: [(v.path.split("/", 1)[1], tuple(v.shape)) for v in m.weights]  # noqa: E731
    assert layout(bare) == layout(model)
    differ = [not np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(bare.weights, model.weights)]
    assert sum(differ) >= len(differ) - 3  # fresh draws (zero-initialised biases may agree)
    trained = RNNSearch.from_preset(NAME)
    for a, b in zip(trained.weights, model.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_an_architecture_preset_says_it_is_untrained(caplog):
    with caplog.at_level("INFO", logger="bahdanau_tf"):
        RNNSearch.from_preset("tiny", source_vocabulary_size=20, target_vocabulary_size=20)
    assert any("rnnsearch-tiny: an untrained architecture" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_the_deprecated_model_translate_warns_and_translates(model):
    """0.2's ``model.translate`` still answers, for one release, with a warning naming the
    replacement, of the category Python shows a user's module (not only ``__main__``)."""
    replacement = r"Translator\.from_model\(model\)\.translate\(\.\.\.\)\.translations"
    with pytest.warns(FutureWarning, match=replacement):
        assert model.translate(list(EXPECTED)) == list(EXPECTED.values())
    with pytest.warns(FutureWarning, match=replacement):
        assert model.translate(VERSE) == EXPECTED[VERSE]


@pytest.mark.slow
def test_translates_the_test_verse(model, tmp_path):
    assert Translator.from_model(model).translate(list(EXPECTED)).translations == list(EXPECTED.values())
    by_directory = Translator.from_directory(NAME).translate(list(EXPECTED))
    by_preset = Translator.from_preset(NAME).translate(list(EXPECTED))
    assert by_preset.translations == by_directory.translations == list(EXPECTED.values())
    np.testing.assert_array_equal(by_preset.scores, by_directory.scores)
    with pytest.raises(ValueError, match="neither a shipped model.*bible-en-es-small"):
        Translator.from_preset("small")  # an architecture preset: no trained weights


@pytest.mark.subprocess
def test_the_command_line_prints_the_translation_and_nothing_else(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-m", "bahdanau_tf.cli.translate", f"--model_dir={NAME}"],
                            input=VERSE + "\n", capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout == Translator.from_directory(NAME).translate([VERSE]).translations[0] + "\n"
    assert result.stderr == ""


def test_a_name_wins_over_a_directory_of_that_name_in_every_from_preset(tmp_path, monkeypatch, model):
    """docs/translating.md, "Model names and paths": the shipped model's name means the shipped
    model in every from_preset (and --model_dir), whatever the current directory holds;
    ``./NAME`` is the directory."""
    save_model_dir(tmp_path / NAME, random_model(seed=1), *toy_tokenizers())
    monkeypatch.chdir(tmp_path)
    assert pretrained.resolve(NAME) == pretrained.path(NAME)
    assert pretrained.resolve(f"./{NAME}") == f"./{NAME}"
    shipped, toy = model.target_vocabulary_size, 16
    assert shipped != toy
    loaders = {"RNNSearch.from_preset": RNNSearch.from_preset, "model_from_preset": model_from_preset,
               "Translator.from_preset": lambda name: Translator.from_preset(name).models[0]}
    for name, load in loaders.items():
        assert load(NAME).target_vocabulary_size == shipped, name
        assert load(f"./{NAME}").target_vocabulary_size == toy, name


def test_a_path_that_does_not_exist_is_no_such_model_directory(tmp_path):
    missing = str(tmp_path / "no" / "such" / "dir")
    for load in (RNNSearch.from_preset, model_from_preset, Translator.from_preset):
        with pytest.raises(FileNotFoundError, match="No such model directory: '.*no/such/dir'"):
            load(missing)
    with pytest.raises(ValueError, match="Unknown preset 'huge'"):  # a bare word: a name
        RNNSearch.from_preset("huge")


def test_a_damaged_weights_file_is_one_named_error(tmp_path, model):
    """Empty, cut short, bytes flipped (HDF5 has no checksum of its own: model.json's SHA-256
    catches it), not an HDF5 file: "damaged", never an h5py traceback; another model's
    weights file: one line that says so."""
    digest = model_directory.read_model_config(NAME)["settings"]["pretrained"]["weights_sha256"]
    whole = open(os.path.join(pretrained.path(NAME), pretrained.WEIGHTS), "rb").read()
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0xFF
    contents = {"empty": b"", "truncated": whole[:len(whole) // 2], "flipped": bytes(flipped),
                "random": np.random.default_rng(0).bytes(4096), "serialized": b"\x80\x04K\x01."}
    before = [v.numpy().copy() for v in model.weights]
    for name, content in contents.items():
        (tmp_path / f"{name}.weights.h5").write_bytes(content)
        with pytest.raises(ValueError, match=rf"{name}.weights.h5' is damaged"):
            pretrained.load_weights(model, str(tmp_path / f"{name}.weights.h5"), digest)
    for value, variable in zip(before, model.weights):  # nothing was half assigned
        np.testing.assert_array_equal(value, variable.numpy())
    other = str(tmp_path / "other.weights.h5")
    digest = pretrained.write_weights(other, random_model())
    with pytest.raises(ValueError, match="other.weights.h5' holds another model's weights"):
        pretrained.load_weights(model, other, digest)
