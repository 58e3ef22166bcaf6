"""The network: the layers, the decoder cells and the three models, in Keras alone.

`RNNSearch` (the paper, rnnsearch.py), `RNNEncDec` (its baseline) and `Seq2Seq` (Sutskever et
al.; baselines.py), their base `TranslationModel` (base.py), and below them the layers they are
made of: the GRU step and its backward step (recurrence.py), the alignment model
(attention.py), the decoder cells (decoder_cell.py: their interface and base class; layers.py:
the paper's cell, the maxout readout, the encoder; cgru.py: Nematus's conditional GRU), the
alignment head (alignment_head.py) and the task that puts it on a trained `RNNSearch`
(`RNNSearchAligner`, aligner.py), dropout (regularization.py), the paper's initialisation
(initializers.py) and the tensor helpers (tensor_ops.py). Nothing here imports TensorFlow, tensorflow-text, the
model directory, the tokenizers or the alignment package at import time: on the TensorFlow
backend a training pass loads backprop.py (its loops with the backward pass written out), and
loading or saving a trained model loads the loader (`bahdanau_tf.model_directory`), handed the
class. So the models build and train on JAX or PyTorch where TensorFlow is not installed.

All three share one interface (DESIGN §6), so training, beam search and export treat them alike:

- ``model((source_ids, target_input_ids), training=False) -> logits`` (teacher forcing),
  float32 (batch, target_len, target_vocabulary_size);
- ``model.encode(source_ids) -> memory``, a dict of tensors with a leading batch dimension;
- ``model.initial_state(memory) -> state``, a tensor or nest of tensors (batch, ...);
- ``model.decoding_memory(memory) -> memory`` and ``model.decoding_state(state) -> state``,
  what a search hands `decode_step`: `encode`'s memory with what no step changes computed once
  per sentence, and the initial state in the form the search carries (`RNNSearch`: the
  context's projections, and the attention query carried with the state, see there);
  ``decode_step`` also accepts `encode`'s memory and `initial_state`'s state as they are;
- ``model.decode_step(previous_ids, state, memory, projection=None) -> (logits, state,
  attention)``, one decoder step; ``attention`` is (batch, source_len) float32, or None for
  models without attention. ``projection``, a ``(kernel, bias)`` pair of columns of
  ``output_projection()`` (candidate-list decoding, `bahdanau_tf.lexicon.CandidateLists`),
  replaces the vocabulary projection, so the logits cover those columns only.
  ``memory`` may hold one row per *group* of consecutive rows of ``previous_ids`` and
  ``state`` (beam search's beams of a sentence: `encode`'s output as it is, not repeated per
  beam), or one row per row.

Teacher forcing runs the same decoder cell step as `decode_step`, over all steps in one loop
(the cell's ``sequence``; in a training pass on TensorFlow with the backward pass written out,
`bahdanau_tf.models.backprop`); input projections and attention keys are computed before the loop and
the readout after it (DESIGN §2), so only the attention and the GRU recurrence run per step.

The models are written in ``keras.ops``: the same weights give the same logits and steps on
TensorFlow, JAX and PyTorch, and a ``.keras`` file saved on one backend loads on another. The
package's trainer, search in an exported graph and SavedModel export are TensorFlow's.

Presets live in one registry, `bahdanau_tf.presets.PRESETS`: each
row names its model class, its constructor arguments and its training defaults.

The shared base, `bahdanau_tf.models.base.TranslationModel`, holds the presets, the config,
the tokenizers and saving; translating is the task's (``Translator.from_model(model)``,
`bahdanau_tf.translator`), above the network, which imports it only in the deprecated
``model.translate`` alias.
"""

from bahdanau_tf.models.base import TranslationModel, model_from_config, model_from_preset
from bahdanau_tf.models.rnnsearch import RNNSearch
from bahdanau_tf.models.aligner import RNNSearchAligner
from bahdanau_tf.models.baselines import RNNEncDec, Seq2Seq

#: the three model classes by name
MODEL_CLASSES = {cls.__name__: cls for cls in (RNNSearch, RNNEncDec, Seq2Seq)}

__all__ = ["MODEL_CLASSES", "RNNEncDec", "RNNSearch", "RNNSearchAligner", "Seq2Seq", "TranslationModel",
           "model_from_config", "model_from_preset"]
