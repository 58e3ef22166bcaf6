"""The README's "In Keras code" block, run as a user pastes it: twice, in the same directory.

The block is read from README.md (so the test and the README cannot drift) and run in a fresh
process, in smoke mode: a few substitutions, each required to match, shrink the corpus, the model
and the epoch. The second run must succeed where the first left its files (save_to_preset
replaces its own directory, the export adds a version), with no root (relative paths), no
warning about files the package wrote itself, and the model name the serving kit serves. At the
end of the second run, what it saved loads back (the .keras file through Keras, the directory
through from_preset) and translates as the model did.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from bahdanau_tf import serving
from helpers import env_without_tensorflow_logging

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the verse the block translates (a test verse), translated again by what it saved
SENTENCE = "But seek God's Kingdom, and all these things will be added to you."
# what the smoke run changes: (README text, replacement)
SMOKE = [
    ('load_corpus("bible-en-es", split="train", direction="en-es")',
     'load_corpus("bible-en-es", split="train", direction="en-es").select(slice(0, 1500))'),
    ("vocabulary_size=5000", "vocabulary_size=400"),
    ('RNNSearch.from_preset(\n    "rnnsearch-cgru-small"', 'RNNSearch.from_preset(\n    "rnnsearch-cgru-tiny"'),
    ("model.fit(dataset, epochs=1)", "model.fit(dataset.take(3), epochs=1)"),
]


def readme_keras_block():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = text.split("## In Keras code", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run(code, cwd, timeout=600):
    env = env_without_tensorflow_logging(PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_readme_keras_block_runs_twice(tmp_path):
    block = readme_keras_block()
    for old, new in SMOKE:
        assert old in block, f"README's Keras block changed: {old!r} is gone; update SMOKE"
        block = block.replace(old, new)
    # the kit serves model "bahdanau" from the base path /models/bahdanau: the block exports there
    config = open(os.path.join(ROOT, "export", "models.config"), encoding="utf-8").read()
    assert 'name: "bahdanau"' in config and 'base_path: "/models/bahdanau"' in config
    assert 'export_saved_model(translator, "models/bahdanau")' in block
    assert f"translate([{SENTENCE!r}])" in block, "the block translates another sentence: update SENTENCE"

    # the second run goes on as a fresh process would: Keras loads the .keras file (the
    # package's classes registered by `import bahdanau_tf`), and from_preset reads the
    # directory without a warning (stderr after the marker)
    check = ("\nimport sys, json\nprint('--- check ---', file=sys.stderr, flush=True)\n"
             "def translate(model):\n"
             f"    return Translator.from_model(model).translate([{SENTENCE!r}]).translations\n"
             "a = translate(keras.saving.load_model('rnnsearch.keras'))\n"
             "b = translate(RNNSearch.from_preset('rnnsearch'))\n"
             "print(json.dumps([a, b]))\n")
    printed = []
    for version in (1, 2):
        result = run(block + (check if version == 2 else ""), tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        # no warning about what the package wrote itself: Keras's ignored shuffle=True for a
        # dataset, from_preset's missing best/ (checked below)
        assert "shuffle" not in result.stderr, result.stderr
        lines = result.stdout.strip().splitlines()
        printed.append(lines[-1] if version == 1 else lines[-2])
        assert (tmp_path / "models" / "bahdanau" / str(version) / "saved_model.pb").is_file()
    assert sorted(os.listdir(tmp_path / "rnnsearch")) == [
        "model.json", "model.weights.h5", "source_vocabulary", "target_vocabulary"]
    requests = serving.read_warmup_requests(str(tmp_path / "models" / "bahdanau" / "2"))
    assert {r.predict_log.request.model_spec.name for r in requests} == {"bahdanau"}

    checked = result.stderr.split("--- check ---", 1)[1]
    assert "Warning" not in checked, checked
    loaded, preset = json.loads(lines[-1])
    assert str(loaded) == str(preset) == printed[1]
