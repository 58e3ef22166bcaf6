"""Every figure that README.md, docs/, the benchmark pages and the notebooks quote equals its results file.

`FIGURES` (tests/figures_registry.py) is the registry: a quoted text with ``{name}`` fields, the
document that quotes it, and where each field's value lives (a results file under
benchmarks/results/ and a dotted key into its JSON, or a `Computed` value of several such keys).
The test formats the text from the files and looks for it in the document (runs of whitespace,
line breaks included, count as one space), so a figure edited on one side only fails.
`SHIPPING` (in the registry) is the run that README's "Result" and its sample output quote: to
point them at a new run, change its file and keys there, then the README's figures, until this
test passes.
"""

import json
import os
import re
import string
import sys

import pytest

from figures_registry import FIGURES, SHIPPING, Computed, Figure, Key

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")


def value(key):
    """The value a `Key` names (the file's name for the empty path), or a `Computed` value."""
    if isinstance(key, Computed):
        return key.combine(*(value(part) for part in key.keys))
    if not key.path:
        return key.results
    with open(os.path.join(RESULTS, key.results), encoding="utf-8") as handle:
        node = json.load(handle)
    for part in key.path.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return key.convert(node) if key.convert else node


def document_text(document):
    """The document's text with runs of whitespace as one space; a notebook's cells joined."""
    with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
        text = handle.read()
    if document.endswith(".ipynb"):
        text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
    return " ".join(text.split())


def expected_text(figure: Figure):
    names = {field for _, field, _, _ in string.Formatter().parse(figure.text) if field}
    values = {name: value(figure.keys[name]) for name in names}
    return " ".join(figure.text.format(**values).split())


def results_files(keys):
    """The results files the keys read, those inside a `Computed` included."""
    return {name for key in keys
            for name in (results_files(key.keys) if isinstance(key, Computed) else {key.results})}


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f"{f.document}:{f.text[:40]}")
def test_a_quoted_figure_equals_its_results_file(figure):
    expected = expected_text(figure)
    assert expected in document_text(figure.document), (
        f"{figure.document} no longer quotes {expected!r}: the document or "
        f"{sorted(results_files(figure.keys.values()))} changed")


def test_the_shipped_weights_size_is_the_files():
    """The shipped model's size that benchmarks/README.md quotes is its weights file's (MB)."""
    weights = os.path.join(ROOT, "bahdanau_tf", "pretrained", "bible-en-es-small", "model.weights.h5")
    expected = f"| {os.path.getsize(weights) / 1e6:.1f} MB (float16) |"
    assert expected in document_text(os.path.join("benchmarks", "README.md")), expected


def test_the_registry_catches_a_changed_figure(tmp_path, monkeypatch):
    """A results file that says another BLEU than the document: the figure is not found."""
    figure, key = FIGURES[0], SHIPPING["bleu"]
    with open(os.path.join(RESULTS, key.results), encoding="utf-8") as handle:
        record = json.load(handle)
    *parents, last = [int(part) if part.isdigit() else part for part in key.path.split(".")]
    node = record
    for part in parents:
        node = node[part]
    node[last] += 0.01
    (tmp_path / key.results).write_text(json.dumps(record), encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "RESULTS", str(tmp_path))
    assert expected_text(figure) not in document_text(figure.document)


def cpu_names(record, inside=False):
    """The CPU model names a results record gives: ``cpu`` strings, and the ``name`` or
    ``model_name`` of anything under a ``machine``, ``machines`` or ``cpu`` entry."""
    found = []
    if isinstance(record, dict):
        for key, item in record.items():
            if isinstance(item, str) and (key == "cpu" or inside and key in ("name", "model_name")):
                found.append(item)
            found += cpu_names(item, inside or key in ("machine", "machines", "cpu"))
    elif isinstance(record, list):
        for item in record:
            found += cpu_names(item, inside)
    return [name for name in found if re.search(r"[A-Za-z]{3}", name)]


def test_every_results_file_names_its_cpu():
    missing = []
    for name in sorted(os.listdir(RESULTS)):
        if name.endswith(".json"):
            with open(os.path.join(RESULTS, name), encoding="utf-8") as handle:
                if not cpu_names(json.load(handle)):
                    missing.append(name)
    assert missing == []


# === The documented command lines ===
DOCUMENTS_WITH_COMMANDS = ["README.md", "BUILD.md", os.path.join("export", "README.md"),
                           os.path.join("bahdanau_tf", "pretrained", "bible-en-es-small", "README.md"),
                           os.path.join("bahdanau_tf", "corpora", "README.md"), os.path.join("colab", "README.md")] + sorted(
    os.path.join(folder, name) for folder in ("docs", "benchmarks")
    for name in os.listdir(os.path.join(ROOT, folder)) if name.endswith(".md"))
#: every command line (pyproject.toml's scripts): ``bahdanau-X`` runs the module ``bahdanau_tf.cli.X``
COMMANDS = ("data", "train", "translate", "evaluate", "export", "average", "alignment-head")
# a command line: bahdanau-X and what follows it on its line (backslash continuations joined),
# up to the end of inline code, a pipe or a shell separator
COMMAND_LINE = re.compile(rf"bahdanau-({'|'.join(COMMANDS)})(?![\w-])([^`|;&)\n]*)")


def documented_flags():
    """``{command: {flag: [document, ...]}}`` of every ``--flag`` written after a command."""
    found = {}
    for document in DOCUMENTS_WITH_COMMANDS:
        with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
            text = re.sub(r"\\\n\s*", " ", handle.read())
        for command, arguments in COMMAND_LINE.findall(text):
            for flag in re.findall(r"(?:^|\s)--(\w+)", arguments):
                found.setdefault(command, {}).setdefault(flag, []).append(document)
    return found


def accepted_flags(help_text):
    """The flag names a command's ``--helpfull`` lists (booleans also as ``no<name>``)."""
    names = set()
    for negatable, name in re.findall(r"^\s+--(\[no\])?(\w+)", help_text, re.M):
        names.add(name)
        if negatable:
            names.add("no" + name)
    return names


@pytest.mark.subprocess
def test_every_documented_flag_exists(tmp_path):
    """Each ``--flag`` that the pages of `DOCUMENTS_WITH_COMMANDS` (README.md, BUILD.md, docs/,
    benchmarks/, export/, the model card, ...) write after a command is a flag of that command
    (its ``--helpfull``; the commands as rows of one process)."""
    from helpers import run_commands

    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as handle:  # [project.scripts]
        modules = dict(re.findall(r'^bahdanau-([\w-]+) = "bahdanau_tf\.cli\.(\w+):run"$', handle.read(), re.M))
    assert set(modules) == set(COMMANDS), "a command the test does not read"
    documented = documented_flags()
    assert set(COMMANDS) == set(documented), set(COMMANDS) - set(documented)
    commands = sorted(documented)
    results = run_commands([(modules[command], ["--helpfull"], "") for command in commands], str(tmp_path))
    unknown = {}
    for command, result in zip(commands, results):
        accepted = accepted_flags(result["stdout"])  # absl's --helpfull exits with 1
        assert "flagfile" in accepted, result["stdout"][:2000]
        accepted |= {"help", "helpshort", "helpfull"}  # absl's own, not listed
        for flag, documents in documented[command].items():
            if flag not in accepted:
                unknown[f"bahdanau-{command} --{flag}"] = sorted(set(documents))
    assert unknown == {}
