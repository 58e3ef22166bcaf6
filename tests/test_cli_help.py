"""What the commands' ``--help`` prose says about their defaults is what the code does: the
values ``bahdanau-train --help`` quotes come from the default preset's row of
`bahdanau_tf.presets` (formatted into its docstring at import)."""

import re

import pytest

from bahdanau_tf import presets, text, training
from bahdanau_tf.cli import train


def test_train_help_describes_the_default_preset_and_its_recipe():
    doc = train.__doc__
    assert "{" not in doc and "}" not in doc, "a field of the help template was not filled in"
    preset = presets.get_preset(presets.DEFAULT)
    config = training.TrainingConfig.for_preset(presets.DEFAULT)
    assert f"With no flags it trains ``{presets.DEFAULT}`` ({preset.description}" in " ".join(doc.split())
    said = " ".join(doc.split())
    for quoted in (f"Adam {config.learning_rate:g}", f"batch {config.batch_size}",
                   f"pairs of at most {config.max_length} tokens", f"clipnorm {config.clipnorm:g}",
                   f"the last {config.average_last} checkpoints, {config.checkpoint_every} updates apart",
                   f"every {config.eval_every} updates", f"first {config.dev_sentences} dev pairs",
                   f"for {train.DEFAULT_MAX_MINUTES:g} minutes",
                   f"vocabularies of {text.DEFAULT_VOCABULARY_SIZE:,} per language",
                   train.SCHEDULE_TEXT[config.schedule]):
        assert quoted in said, quoted
    assert config.optimizer == "adam" and config.schedule in train.SCHEDULE_TEXT
    # the --preset flag's default is the same preset
    assert train.FLAGS["preset"].default == presets.DEFAULT
    # nothing of an earlier recipe
    for stale in ("the ``small`` RNNsearch", "at most 50 tokens", "5e-3"):
        assert stale not in said, stale


def test_train_help_follows_the_registry(monkeypatch):
    """Another default preset, another recipe: the prose changes with the registry."""
    monkeypatch.setattr(presets, "DEFAULT", "rnnsearch-50")
    said = " ".join(train.help_text(train.HELP_TEMPLATE).split())
    assert "trains ``rnnsearch-50``" in said and "Adadelta 1, the" not in said
    assert re.search(r"Adadelta 1, a constant rate, clipnorm 1, batch 80, pairs of at most 50 tokens", said), said


def _said(text):
    return " ".join(text.split())


def test_each_training_flag_states_the_default_presets_value():
    """A training flag that a preset sets names the default preset's value (``--batch_size``:
    64 for the CPU presets, 80 for the paper's); one that no preset sets, the dataclass's."""
    import dataclasses

    config = training.TrainingConfig.for_preset(presets.DEFAULT)
    set_by_a_preset = set().union(*(preset.training for preset in presets.PRESETS.values()))
    assert {"batch_size", "learning_rate", "regularization", "schedule"} <= set_by_a_preset
    for field in dataclasses.fields(training.TrainingConfig):
        if field.name == "max_minutes":  # the command's own default (12), absl shows it
            assert train.FLAGS[field.name].default == train.DEFAULT_MAX_MINUTES
            continue
        said = _said(train.FLAGS[field.name].help)
        if field.name in set_by_a_preset:
            assert f"(default: the preset's; {presets.DEFAULT}: {train._show(getattr(config, field.name))})" in said, said
        elif field.default is not None:
            assert said.endswith(f"(default: {train._show(field.default)})"), said
        else:
            assert "None (default)" in said or said.endswith("(default: none)"), said
    assert "(default: the preset's; rnnsearch-cgru-small: 64)" in _said(train.FLAGS["batch_size"].help)


def _default_for(help_text, preset):
    """What a flag's help says the default is for ``preset``: the group naming it, else the
    others'."""
    rule = _said(help_text).split("or the resumed directory's: ", 1)[1].rstrip(".")
    groups = [part.rsplit(" for ", 1) for part in rule.split("; ")]
    for said, names in groups:
        if preset in names.split(", "):
            return said
    (said, others), = [group for group in groups if group[1] == "the others"]
    return said


def test_the_dropout_and_tying_flags_state_each_presets_default():
    """Each preset's default as its row gives it: the budget rule's dropout where the preset's
    training says ``regularization="budget"``, its model's rate (0) elsewhere; tied where the
    constructed model ties (the default preset), untied elsewhere."""
    from bahdanau_tf.models import regularization

    for name, preset in presets.PRESETS.items():
        budget = training.TrainingConfig.for_preset(name).regularization == "budget"
        model = preset.model_class(**preset.model)
        for argument in regularization.DROPOUT_ARGUMENTS:
            said = _default_for(train.FLAGS[argument].help, name)
            assert said.startswith("the budget rule's") if budget else said == f"{getattr(model, argument):g}", (
                name, argument, said)
        if hasattr(model, "tie_embeddings"):
            assert _default_for(train.FLAGS["tie_embeddings"].help, name) == str(model.tie_embeddings).lower(), name
    assert _default_for(train.FLAGS["tie_embeddings"].help, presets.DEFAULT) == "true"
    assert _default_for(train.FLAGS["word_dropout"].help, presets.DEFAULT).startswith("the budget rule's")
    assert _default_for(train.FLAGS["word_dropout"].help, "tiny") == "0"


def test_the_preset_flag_says_what_small_changes():
    """``--preset`` and the examples say how ``small`` differs from the default: the paper's
    decoder cell and untied embeddings (the rows' arguments, the class's defaults included)."""
    small = presets.get_preset("small")
    model = small.model_class(**small.model)
    assert (model.decoder, model.tie_embeddings) == ("paper", False)
    expected = "the same with the paper's decoder cell and untied embeddings"
    assert f"small: {expected})" in _said(train.FLAGS["preset"].help)
    assert f"--preset=small # {expected}" in _said(train.__doc__)
    assert _said(train.FLAGS["preset"].help).startswith(f"Model preset (default: {presets.DEFAULT}, ")


def test_the_model_dir_rule_is_what_resolving_a_name_does(tmp_path, monkeypatch):
    """``--model_dir``'s help says a shipped model's name wins over a directory of that name and
    ``./NAME`` is the directory: `pretrained.resolve`, which every command's loading goes through."""
    from bahdanau_tf import pretrained
    from bahdanau_tf.cli import common

    name = pretrained.names()[0]
    rule = common.model_name_rule()
    assert rule == (f"A shipped model's name ({', '.join(pretrained.names())}) is that model, whatever the "
                    f"current directory holds (./{name} is a directory of that name); anything else is a path.")
    (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path)
    assert pretrained.resolve(name) == pretrained.path(name) != str(tmp_path / name)
    assert pretrained.resolve(f"./{name}") == f"./{name}"
    assert pretrained.resolve("runs/a") == "runs/a"


@pytest.mark.subprocess
def test_every_command_that_loads_a_model_states_the_model_dir_rule(tmp_path):
    from bahdanau_tf.cli import common
    from helpers import run_commands

    commands = ("translate", "evaluate", "export", "alignment_head")
    for command, result in zip(commands, run_commands([(c, ["--helpfull"], "") for c in commands], str(tmp_path))):
        text = _said(re.sub(r"-\n\s+", "-", result["stdout"]))  # absl wraps after a hyphen
        assert common.model_name_rule() in text, (command, text[:3000])
        assert "An existing path is a path" not in text, command
