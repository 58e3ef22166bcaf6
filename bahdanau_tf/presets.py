"""The preset registry: named architectures and their training defaults, one row each.

Each `Preset` row names its model class, its constructor arguments and its training defaults
(the `TrainingConfig` fields it sets), like OpenNMT-tf's ``auto_config`` next to each model
(DESIGN §1, §2, §6). `bahdanau_tf.models` (``model_from_preset``, ``RNNSearch.from_preset``),
`bahdanau_tf.training.TrainingConfig.for_preset` and ``bahdanau-train --preset`` read it. A
row names its class; the class itself comes from Keras's registry, where `bahdanau_tf.models`
registers it, so this module sits below the models.
"""

import dataclasses
import os

import keras

from bahdanau_tf import pretrained

_PAPER_SIZES = dict(embedding_dim=620, hidden_dim=1000, maxout_dim=500)


@dataclasses.dataclass(frozen=True)
class Preset:
    """One named configuration: which model, its constructor arguments, how to train it.

    Attributes:
        name: str, the registry key (``"rnnsearch-50"``, ``"rnnsearch-small"``, ...).
        class_name: str, the model class's name (``"RNNSearch"``); `model_class` is the class.
        model: dict of constructor arguments (training replaces the vocabulary sizes by the
            tokenizers').
        training: dict of the `bahdanau_tf.training.TrainingConfig` fields this preset sets;
            the other fields keep the dataclass's defaults.
        description: one line, for ``bahdanau-train --help`` and the docs.
    """

    name: str
    class_name: str
    model: dict
    training: dict
    description: str = ""

    @property
    def model_class(self) -> type:
        """The model class, from Keras's registry (`bahdanau_tf.models` registers it)."""
        return keras.saving.get_registered_object(f"bahdanau_tf>{self.class_name}")


PRESETS: dict = {}
#: short names: ``small`` and ``tiny`` are RNNsearch's reduced presets
ALIASES = {"small": "rnnsearch-small", "tiny": "rnnsearch-tiny"}
#: what ``bahdanau-train`` and `Trainer` train unless told: the reduced preset that scored best
#: in the README's 12 minutes (benchmarks/README.md, "The main command, 12 minutes")
DEFAULT = "rnnsearch-cgru-small"
#: the updates a preset needs before it translates the embedded corpus usefully, where measured:
#: the fewest updates of the default's runs over the budget that scored over 20 test BLEU, rounded
#: down to 50 (docs/training.md, "The budget's floor";
#: benchmarks/results/budget_curve_one_core_amd_epyc.json). A run's report warns below it.
UPDATES_FLOOR = {"rnnsearch-cgru-small": 700}


def _register(name, class_name, model, training, description):
    PRESETS[name] = Preset(name, class_name, dict(model), dict(training), description)


# Appendix B.2: Adadelta (rho 0.95, eps 1e-6), batch 80, gradient norm <= 1, the paper's bucketing.
_PAPER_TRAINING = dict(optimizer="adadelta", learning_rate=1.0, clipnorm=1.0, batch_size=80,
                       bucketing="paper", schedule="constant")
# Sutskever et al. 2014: SGD 0.7 halved every half epoch after epoch 5, norm <= 5, batch 128.
_SUTSKEVER_TRAINING = dict(optimizer="sgd", learning_rate=0.7, clipnorm=5.0, batch_size=128,
                           bucketing="paper", schedule="halving", max_length=50)
# What most users want on small data and a CPU: Adam 5e-3 (the default preset's row: 3e-3);
# precision and XLA are the device's (`bahdanau_tf.devices`), see the measurements in
# `bahdanau_tf.cli.train` and benchmarks/train_throughput.py.
# The average of a run's last 5 checkpoints, 100 updates apart, is kept as best/ when its dev
# NLL is lower (benchmarks/recipe.md, "Checkpoint averaging"). The learning rate falls linearly to zero over the run's budget (`BudgetSchedule`: 12 minutes,
# or --max_steps), so a run ends annealed on any machine, however many updates it makes
# (benchmarks/recipe.md); dropout and word dropout from the epochs the run will
# make (`bahdanau_tf.training.budget.budget_regularization`): none in a short run.
# Pairs of up to 80 tokens: all but 80 of the embedded corpus's 27,989 (at 50, 3,407 were dropped).
_REDUCED_TRAINING = dict(optimizer="adam", learning_rate=5e-3, clipnorm=1.0, batch_size=64,
                         bucketing="paper", schedule="budget", max_length=80, eval_every=200,
                         checkpoint_every=100, keep_checkpoints=5, average_last=5,
                         regularization="budget")
# the tests' presets keep a constant rate and no regularisation: a test's few updates learn at
# the full rate
_TINY_TRAINING = dict(_REDUCED_TRAINING, batch_size=32, schedule="constant", max_length=50,
                      regularization="none")
_PAPER_VOCABULARIES = dict(source_vocabulary_size=30000, target_vocabulary_size=30000)
_SMALL = dict(source_vocabulary_size=8000, target_vocabulary_size=8000, embedding_dim=128,
              hidden_dim=256)
_TINY = dict(source_vocabulary_size=64, target_vocabulary_size=64, embedding_dim=16,
             hidden_dim=24)

for _length in (50, 30):
    _register(f"rnnsearch-{_length}", "RNNSearch",
              dict(_PAPER_VOCABULARIES, attention_dim=1000, **_PAPER_SIZES),
              dict(_PAPER_TRAINING, max_length=_length),
              f"the paper's RNNsearch-{_length} (n=1000, m=620, l=500, n'=1000)")
    _register(f"rnnencdec-{_length}", "RNNEncDec", dict(_PAPER_VOCABULARIES, **_PAPER_SIZES),
              dict(_PAPER_TRAINING, max_length=_length),
              f"the paper's RNNencdec-{_length} baseline (Cho et al. 2014a)")
_register("seq2seq", "Seq2Seq",
          dict(source_vocabulary_size=160000, target_vocabulary_size=80000, embedding_dim=1000,
               hidden_dim=1000, num_layers=4),
          _SUTSKEVER_TRAINING, "Sutskever et al. 2014: 4-layer LSTMs of 1000 cells")
_register("rnnsearch-small", "RNNSearch",
          dict(_SMALL, attention_dim=256, maxout_dim=128, initialization="keras"),
          _REDUCED_TRAINING, "RNNsearch at CPU size (m=128, n=256), the paper's decoder cell; alias 'small'")
_register("rnnsearch-general-small", "RNNSearch",
          dict(_SMALL, attention_dim=256, maxout_dim=128, initialization="keras",
               score="general"),
          _REDUCED_TRAINING, "rnnsearch-small with Luong's 'general' score s^T W_a h_j")
# tied target embeddings (Press & Wolf 2017): a lower dev NLL and a higher BLEU at every budget
# measured (benchmarks/recipe.md); Adam at 3e-3, where at 5e-3 the attention of
# most seeds learned to align late (docs/training.md, "When the attention aligns"); label
# smoothing 0.1 as in Nematus and OpenNMT-tf (benchmarks/recipe.md, "Label smoothing"); the
# gradient's norm bounded by 0.5, where at 1 a seed's dev NLL turned up for an evaluation at the
# peak of the schedule (benchmarks/recipe.md, "Dropout at 14 epochs")
_register("rnnsearch-cgru-small", "RNNSearch",
          dict(_SMALL, attention_dim=256, maxout_dim=128, initialization="keras",
               decoder="cgru", tie_embeddings=True),
          dict(_REDUCED_TRAINING, learning_rate=3e-3, label_smoothing=0.1, clipnorm=0.5), "rnnsearch-small with Nematus's conditional GRU decoder (GRU, "
          "attention, GRU) and the target embedding tied to the vocabulary projection")
_register("rnnsearch-tiny", "RNNSearch", dict(_TINY, attention_dim=20, maxout_dim=12),
          _TINY_TRAINING, "RNNsearch for tests; alias 'tiny'")
_register("rnnsearch-cgru-tiny", "RNNSearch",
          dict(_TINY, attention_dim=20, maxout_dim=12, decoder="cgru"), _TINY_TRAINING,
          "rnnsearch-tiny with the conditional GRU decoder, for tests")
_register("rnnencdec-small", "RNNEncDec", dict(_SMALL, maxout_dim=128, initialization="keras"),
          _REDUCED_TRAINING, "RNNencdec at CPU size")
_register("rnnencdec-tiny", "RNNEncDec", dict(_TINY, maxout_dim=12), _TINY_TRAINING,
          "RNNencdec for tests")
_register("seq2seq-small", "Seq2Seq", dict(_SMALL, num_layers=2), _REDUCED_TRAINING,
          "Seq2Seq at CPU size (2 layers of 256)")
_register("seq2seq-tiny", "Seq2Seq", dict(_TINY, num_layers=2), _TINY_TRAINING, "Seq2Seq for tests")


def get_preset(name: str) -> Preset:
    """The registry row of a preset name (aliases such as ``small`` resolved).

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    preset = PRESETS.get(ALIASES.get(name, name))
    if preset is None:
        raise ValueError(f"Unknown preset {name!r}; choose one of {preset_names()}.")
    return preset


def updates_floor(name: str) -> int | None:
    """The `UPDATES_FLOOR` of a preset name (aliases resolved); None where it is not measured."""
    return UPDATES_FLOOR.get(ALIASES.get(name, name))


def preset_names() -> list:
    """Every name `model_from_preset` accepts (registry names and aliases)."""
    return sorted(set(PRESETS) | set(ALIASES))


def is_model_path(name) -> bool:
    """True for a trained model to load, False for an architecture preset's name: the one rule
    of every ``from_preset`` (docs/translating.md, "Model names and paths").

    A name is looked up first: an architecture preset's (or its alias) is False, a shipped
    model's (`bahdanau_tf.pretrained`) True, whatever the current directory holds. Anything
    else is a path (True) when it exists, is written as one (a ``/``, a leading ``.`` or
    ``~``) or names a ``.keras`` file; a bare word that is none of these is False (an unknown
    preset, named as such).
    """
    name = os.fspath(name)
    if name in PRESETS or name in ALIASES:
        return False
    written_as_path = (os.sep in name or (os.altsep and os.altsep in name)
                       or name.startswith((".", "~")) or name.endswith(".keras"))
    return name in pretrained.MODELS or written_as_path or os.path.exists(name)


__all__ = ["Preset", "PRESETS", "ALIASES", "UPDATES_FLOOR", "get_preset", "is_model_path", "preset_names",
           "updates_floor"]
