"""Every headline figure that README.md, docs/ and the notebooks quote equals its results file.

`FIGURES` is the registry: a quoted text with ``{name}`` fields, the document that quotes it, and
where each field's value lives (a results file under benchmarks/results/ and a dotted key into
its JSON). The test formats the text from the files and looks for it in the document (runs of
whitespace, line breaks included, count as one space), so a figure edited on one side only
fails. `HEADLINE` is the run that README's "Result" and its sample output quote: to point them at
a new run, change its file and keys there, then the README's figures, until this test passes.
"""

import json
import os
import re
import string
import sys
from typing import Callable, NamedTuple, Optional

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")


class Key(NamedTuple):
    """A value of a results file: the file, a dotted key (list indices are numbers), and an
    optional conversion of the JSON value to what the document writes."""
    results: str
    path: str
    convert: Optional[Callable] = None


def wall_time(seconds):
    """Seconds as the training report writes them (``HH:MM:SS``)."""
    seconds = int(seconds)
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def day(timestamp):
    return timestamp[:10]


def words(values):
    return " ".join(values)


def _keys(results, training, evaluation, tokens="target_tokens_per_second", bleu="bleu",
          brevity_penalty="brevity_penalty"):
    """A run's keys in a results file: ``training`` and ``evaluation`` are the dotted prefixes of
    its training report's and its scores' fields; the other arguments, the names that differ
    between the files' layouts."""
    return {
        "updates": Key(results, f"{training}.updates"),
        "epochs": Key(results, f"{training}.epochs"),
        "wall_time": Key(results, f"{training}.wall_time_seconds", wall_time),
        "best_dev_nll": Key(results, f"{training}.best_dev_nll"),
        "tokens_per_second": Key(results, f"{training}.{tokens}"),
        "bleu": Key(results, f"{evaluation}.{bleu}"),
        "brevity_penalty": Key(results, f"{evaluation}.{brevity_penalty}"),
        "aer": Key(results, f"{evaluation}.aer"),
        "date": Key(results, "date", day),
        "cpu": Key(results, "machine.name"),
        "cpu_flags": Key(results, "machine.cpu_flags", words),
        "results_file": Key(results, ""),
    }


def _run(results, row):
    """The keys of one row of a results file that lists runs."""
    return _keys(results, row, row, bleu="test_bleu", brevity_penalty="test_bleu_brevity_penalty")


def _main_command(results):
    """The keys of a results file of the main command (as main_command_amd_epyc.json lays out
    `bahdanau-train`'s report and `bahdanau-evaluate`'s scores)."""
    return _keys(results, "training", "evaluation")


def _summary_row(results, row):
    """The keys of one row of `benchmarks/twelve_minute_runs.py --summarize`'s results file."""
    return _keys(results, row, row, tokens="tokens_per_s")


#: The run README's "Result" and its sample output quote (the main command, 12 minutes): the
#: quiet run of the main command, written by `benchmarks/twelve_minute_runs.py --summarize`. A
#: results file laid out as main_command_amd_epyc.json is read with `_main_command` instead.
HEADLINE = _summary_row("main_command_cgru_amd_epyc.json", "rows.0")
#: the same command at another seed, and at the paper's decoder cell, beside it
SECOND_SEED = _summary_row("main_command_cgru_amd_epyc.json", "rows.1")
PAPER_CELL = _summary_row("main_command_cgru_amd_epyc.json", "rows.3")
#: the same command a day later, on this release's code
RERUN = _summary_row("main_command_cgru_rerun_amd_epyc.json", "rows.0")
#: the main command when the budget schedule came in (the paper's cell, before its backward pass)
BUDGET = _summary_row("main_command_budget_amd_epyc.json", "rows.0")

#: the default preset's train step, the conditional GRU's backward pass written out (after) and
#: differentiated automatically (before), the first alternation of each
CGRU_BACKWARD = {name: Key("train_step_cgru_backward_amd_epyc.json", f"alternations.{row}.{field}")
                 for name, row, field in (("after", 0, "step_ms"), ("after_cpu", 0, "step_cpu_ms"),
                                          ("before", 1, "step_ms"), ("before_cpu", 1, "step_cpu_ms"))}

_SHIPPED_FILE = "pretrained_bible-en-es-small.json"
_SHIPPED_SCORES = "evaluation.models.0"
#: The shipped model `bible-en-es-small`, built and scored by scripts/build_pretrained_model.py.
SHIPPED = {
    "updates": Key(_SHIPPED_FILE, "recipe.max_steps"),
    "seed": Key(_SHIPPED_FILE, "recipe.seed"),
    "bleu": Key(_SHIPPED_FILE, f"{_SHIPPED_SCORES}.bleu.score"),
    "brevity_penalty": Key(_SHIPPED_FILE, f"{_SHIPPED_SCORES}.bleu.brevity_penalty"),
    "chrf": Key(_SHIPPED_FILE, f"{_SHIPPED_SCORES}.chrf.score"),
    "aer": Key(_SHIPPED_FILE, f"{_SHIPPED_SCORES}.alignment.aer"),
    "sentences": Key(_SHIPPED_FILE, "evaluation.num_sentences"),
    "cpu": Key(_SHIPPED_FILE, "cpu"),
}


class Figure(NamedTuple):
    document: str
    text: str
    keys: dict


FIGURES = [
    # README.md: the Result, the sample output of the main command, the shipped model
    Figure("README.md", "the main command on a quiet 2-core {cpu}, {cpu_flags}, float32 + XLA, "
                        "{date}): **{updates:,}** updates in 12 minutes, test BLEU **{bleu:.2f}** "
                        "on the 2,051 test verses (beam 5), alignment error rate {aer:.3f} "
                        "([results file](benchmarks/results/{results_file}))", HEADLINE),
    Figure("README.md", "Updates {updates:,} Epochs {epochs:.2f} Wall time {wall_time}", HEADLINE),
    Figure("README.md", "(best {best_dev_nll:.3f} there)", HEADLINE),
    Figure("README.md", "A rerun on this release's code made **{updates:,}** updates, BLEU **{bleu:.2f}** "
                        "([results file](benchmarks/results/{results_file}))", RERUN),
    Figure("README.md", "English to Spanish, {updates:,} updates, test BLEU {bleu:.2f}", SHIPPED),
    # docs/translating.md: the shipped model's card
    Figure("docs/translating.md", "({updates:,} updates, seed {seed}", SHIPPED),
    Figure("docs/translating.md", "| {sentences:,} | {bleu:.2f} ({brevity_penalty:.3f}) | "
                                  "{chrf:.2f} | {aer:.3f} |", SHIPPED),
    # the quickstart notebook's shipped model
    Figure("colab/01_quickstart.ipynb", "English → Spanish, {updates:,} updates", SHIPPED),
    # docs/training.md: the budget schedule's measured effect
    Figure("docs/training.md", "the README's 12-minute run went from 28.37 to {bleu:.2f} test BLEU", BUDGET),
    # docs/training.md: guided alignment at the 12-minute run's updates
    Figure("docs/training.md", "at {updates:,} updates (a 12-minute run on a 2-core {cpu})",
           _run("twelve_minute_before_after_amd_epyc.json", "rows.1")),
    # benchmarks/README.md: the tables the figures above come from
    Figure("benchmarks/README.md", "| after | **{updates:,}** (1.14x) | {tokens_per_second:,.0f} | "
                                   "{best_dev_nll:.3f} | **{bleu:.2f}** ({brevity_penalty:.3f}) | {aer:.3f} |",
           _run("twelve_minute_before_after_amd_epyc.json", "rows.1")),
    Figure("benchmarks/README.md", "| {updates:,} | {epochs:.2f} | {tokens_per_second:,.0f} | "
                                   "{best_dev_nll:.3f} | **{bleu:.2f}** ({brevity_penalty:.3f}) |",
           _main_command("main_command_amd_epyc.json")),
    Figure("benchmarks/README.md", "| {updates:,} | {epochs:.2f} | {tokens_per_second:,.0f} | "
                                   "{best_dev_nll:.3f} | {best_dev_nll:.3f} | **{bleu:.2f}** "
                                   "({brevity_penalty:.3f}) | {aer:.3f} |", BUDGET),
    Figure("benchmarks/README.md", "| `bible-en-es-small` | {updates:,} | 2.262 | **{bleu:.2f}** "
                                   "({brevity_penalty:.3f}) | {chrf:.2f} | {aer:.3f} |", SHIPPED),
    Figure("benchmarks/README.md", "rerun on this release's code (2026-11-27) | {updates:,} | {epochs:.2f} | "
                                   "{best_dev_nll:.3f} ({updates:,}) | {best_dev_nll:.3f} | **{bleu:.2f}** "
                                   "({brevity_penalty:.3f}) | {aer:.3f} |", RERUN),
    # the conditional GRU's written-out backward pass against its scanned loop (first alternation)
    Figure("benchmarks/README.md", "| 1 | {before:.1f} ({before_cpu:.1f}) | {after:.1f} ({after_cpu:.1f}) |",
           CGRU_BACKWARD),
    Figure("docs/training.md", "{after:.1f} against {before:.1f} ms per step", CGRU_BACKWARD),
]


def value(key: Key):
    """The value a key names (the file's name for the empty path)."""
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


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f"{f.document}:{f.text[:40]}")
def test_a_quoted_figure_equals_its_results_file(figure):
    expected = expected_text(figure)
    assert expected in document_text(figure.document), (
        f"{figure.document} no longer quotes {expected!r}: the document or "
        f"{sorted({key.results for key in figure.keys.values()})} changed")


def test_the_registry_catches_a_changed_figure(tmp_path, monkeypatch):
    """A results file that says another BLEU than the document: the figure is not found."""
    figure, key = FIGURES[0], HEADLINE["bleu"]
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
DOCUMENTS_WITH_COMMANDS = ["README.md", "BUILD.md", os.path.join("export", "README.md")] + sorted(
    os.path.join("docs", name) for name in os.listdir(os.path.join(ROOT, "docs")) if name.endswith(".md"))
# a command line: bahdanau-X and what follows it on its line (backslash continuations joined),
# up to the end of inline code, a pipe or a shell separator
COMMAND_LINE = re.compile(r"bahdanau-(data|train|translate|evaluate|export|average)\b([^`|;&)\n]*)")


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
    """Each ``--flag`` that README.md, BUILD.md, export/README.md and docs/ write after a command
    is a flag of that command (its ``--helpfull``; the commands as rows of one process)."""
    from helpers import run_commands

    documented = documented_flags()
    assert {"train", "translate", "evaluate", "export"} <= set(documented)
    commands = sorted(documented)
    results = run_commands([(command, ["--helpfull"], "") for command in commands], str(tmp_path))
    unknown = {}
    for command, result in zip(commands, results):
        accepted = accepted_flags(result["stdout"])  # absl's --helpfull exits with 1
        assert "flagfile" in accepted, result["stdout"][:2000]
        accepted |= {"help", "helpshort", "helpfull"}  # absl's own, not listed
        for flag, documents in documented[command].items():
            if flag not in accepted:
                unknown[f"bahdanau-{command} --{flag}"] = sorted(set(documents))
    assert unknown == {}
