"""What the commands' ``--help`` prose says about their defaults is what the code does: the
values ``bahdanau-train --help`` quotes come from the default preset's row of
`bahdanau_tf.presets` (formatted into its docstring at import)."""

import re

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
