"""Dropout for the three models, in ``keras.ops`` (every Keras backend): the masks and their rates.

The models (`bahdanau_tf.models`) take the same five constructor arguments, all 0 by default
(the paper presets reproduce the paper, which used none) and returned by ``get_config``:

- ``embedding_dropout``: the source and target word embeddings E x_j, E y_{i-1}, one mask per
  sentence (the same embedding features dropped at every position: Gal & Ghahramani 2016's
  variational dropout of an RNN's inputs; Nematus's ``dropout_embedding``);
- ``annotation_dropout``: what the encoder hands the decoder, one mask per sentence: the
  annotations h_j (`RNNSearch`: before the attention keys and the contexts), the last encoder
  state h_Tx (`RNNEncDec`), the outputs of every encoder and decoder LSTM layer that feeds
  another (`Seq2Seq`; Zaremba et al. 2014's non-recurrent dropout);
- ``recurrent_dropout``: the decoder's state s_{i-1} where the step reads it (the attention
  query and the GRU's recurrent matmuls, not the update gate's interpolation), one mask per
  sequence, the same at every step (Gal & Ghahramani 2016; Keras's ``GRU(recurrent_dropout=)``
  does the same). A decoder cell takes the mask as its ``recurrent_mask`` call argument; the
  `Seq2Seq` decoder's LSTMs take the rate as Keras's ``recurrent_dropout``;
- ``readout_dropout``: what the vocabulary projection reads (the maxout units t_i; the top
  decoder LSTM's output for `Seq2Seq`), one mask per sentence (Nematus's hidden dropout shares
  its mask across time steps; a mask per position costs a random draw per element, a third of
  the train step on a CPU under XLA: benchmarks/train_throughput.py's ``dropout`` variant);
- ``word_dropout``: source tokens replaced by ``[UNK]`` before they are embedded, each token
  decided alone (a per-token decision, Sennrich & Zhang 2019's word dropout; ``[END]`` and
  padding are never replaced).

All are active only in a training pass (``training=True``): `decode_step`, translation, the
exported signatures and the served graph never apply them, so a model's translations depend on
its weights only. A model with a rate above 0 owns a ``keras.random.SeedGenerator`` (seeded from
Keras's global seed, `keras.utils.set_random_seed`); a model without keeps exactly the
variables it had. A trainer's rule may instead hold the rates in variables it changes during the
run (`Dropouts.follow`, `bahdanau_tf.training.budget`): the training pass then draws every mask
at any value, 0 included, and a new rate needs no new trace.
"""

import keras
from keras import ops

from bahdanau_tf.special_tokens import END_ID, PAD_ID, UNK_ID
from bahdanau_tf.models.tensor_ops import Tensor, uniform

DROPOUT_ARGUMENTS = ("embedding_dropout", "annotation_dropout", "recurrent_dropout",
                     "readout_dropout", "word_dropout")


def check_rates(**rates) -> dict:
    """``{name: float(rate)}``; ValueError quoting a rate outside [0, 1)."""
    checked = {}
    for name, rate in rates.items():
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
            raise ValueError(f"`{name}` must be a float in [0, 1), got {rate!r}.")
        checked[name] = float(rate)
    return checked


def keep_mask(shape: tuple, rate: float, dtype: str, seed: keras.random.SeedGenerator) -> Tensor:
    """An inverted-dropout mask: 0 with probability ``rate``, else 1 / (1 - rate)."""
    kept = ops.greater_equal(uniform(shape, seed), rate)
    return ops.cast(kept, dtype) / (1.0 - rate)


def _applies(rate) -> bool:
    """Whether a rate draws a mask: a number above 0, or a variable (any value)."""
    return bool(rate) if isinstance(rate, (int, float)) else True


def sequence_dropout(inputs: Tensor, rate: float, seed: keras.random.SeedGenerator) -> Tensor:
    """Dropout of (batch, time, features) with one mask per sequence (the same at every step)."""
    if not _applies(rate):
        return inputs
    shape = ops.shape(inputs)
    return inputs * keep_mask((shape[0], 1, shape[-1]), rate, inputs.dtype, seed)


def dropout(inputs: Tensor, rate: float, seed: keras.random.SeedGenerator) -> Tensor:
    """Dropout with a mask of its own for every element."""
    if not _applies(rate):
        return inputs
    return inputs * keep_mask(ops.shape(inputs), rate, inputs.dtype, seed)


def drop_words(source_ids: Tensor, rate: float, seed: keras.random.SeedGenerator) -> Tensor:
    """Word dropout: each real source token replaced by ``[UNK]`` with probability ``rate``
    (a decision per token; ``[END]`` and padding kept)."""
    if not _applies(rate):
        return source_ids
    hit = ops.less(uniform(ops.shape(source_ids), seed), rate)
    hit = hit & ops.not_equal(source_ids, PAD_ID) & ops.not_equal(source_ids, END_ID)
    return ops.where(hit, ops.cast(UNK_ID, source_ids.dtype), source_ids)


class Dropouts:
    """A model's five rates and its seed generator: what its training pass draws masks from.

    `bahdanau_tf.models.base.TranslationModel` keeps one as ``model.dropouts``; each
    method returns its input unchanged outside training or at rate 0.

    Args:
        seed_generator: a ``keras.random.SeedGenerator``, or None when every rate is 0.
        **rates: the `DROPOUT_ARGUMENTS`.
    """

    def __init__(self, seed_generator, **rates) -> None:
        self.seed_generator = seed_generator
        self.rates = rates

    def follow(self, rates: dict, seed_generator: keras.random.SeedGenerator) -> None:
        """Draws from now on at ``rates`` (``{name: rate}`` of `DROPOUT_ARGUMENTS`, numbers or
        scalar variables a trainer changes as it goes) with ``seed_generator``: a training
        pass traced after this reads the variables, so changing them retraces nothing."""
        self.rates = {name: rates.get(name, 0.0) for name in DROPOUT_ARGUMENTS}
        self.seed_generator = seed_generator

    def _rate(self, name, training):
        return self.rates[name] if training else 0.0

    def embeddings(self, embedded: Tensor, training: bool) -> Tensor:
        return sequence_dropout(embedded, self._rate("embedding_dropout", training), self.seed_generator)

    def annotations(self, annotations: Tensor, training: bool) -> Tensor:
        """``annotation_dropout`` of (batch, time, features), or of (batch, features)."""
        rate = self._rate("annotation_dropout", training)
        if len(annotations.shape) == 2:
            return dropout(annotations, rate, self.seed_generator)
        return sequence_dropout(annotations, rate, self.seed_generator)

    def readout(self, features: Tensor, training: bool) -> Tensor:
        """``readout_dropout`` of (batch, time, features), one mask per sentence."""
        return sequence_dropout(features, self._rate("readout_dropout", training), self.seed_generator)

    def words(self, source_ids: Tensor, training: bool) -> Tensor:
        return drop_words(source_ids, self._rate("word_dropout", training), self.seed_generator)

    def recurrent_mask(self, state: Tensor, training: bool) -> Tensor | None:
        """One mask for the decoder state of every step of a sequence, or None (no dropout)."""
        rate = self._rate("recurrent_dropout", training)
        if not _applies(rate):
            return None
        return keep_mask(ops.shape(state), rate, state.dtype, self.seed_generator)


__all__ = ["DROPOUT_ARGUMENTS", "Dropouts", "check_rates", "drop_words", "dropout", "keep_mask",
           "sequence_dropout"]
