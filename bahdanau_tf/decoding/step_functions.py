"""Step functions: the model contract a search steps (`StepModel`), tiling a nest per beam, and
an ensemble of models.

A step function (the `bahdanau_tf.decoding` contract) is
``step_fn(ids, step, state[, memory]) -> (logits, state, attention)``; these build or adapt one.
"""

from typing import Any, Callable, Protocol, runtime_checkable

import keras
import numpy as np
from keras import ops

StepFn = Callable[..., tuple]


@runtime_checkable
class StepModel(Protocol):
    """What a search needs of a model: the step contract of `bahdanau_tf.models` (DESIGN §6).

    `bahdanau_tf.models.base.TranslationModel` and its subclasses conform; any object
    with these members does (``isinstance(model, StepModel)`` checks their presence, once, where
    a `bahdanau_tf.translator.Translator` is built).

    Attributes:
        has_attention: bool, whether ``decode_step`` returns attention weights.
        target_vocabulary_size: int, the width of ``decode_step``'s logits.
    """

    has_attention: bool
    target_vocabulary_size: int

    def encode(self, source_ids, training: bool = False) -> Any:
        """``[batch, source_len]`` int32 -> the memory, a nest with a leading batch dimension."""

    def initial_state(self, memory) -> Any:
        """The decoder's first state ``[batch, ...]`` from `encode`'s memory."""

    def decoding_memory(self, memory) -> Any:
        """`encode`'s memory as a search hands it to every step (computed once per sentence)."""

    def decoding_state(self, state) -> Any:
        """`initial_state`'s state as a search carries it from step to step."""

    def decode_step(self, previous_ids, state, memory, projection=None) -> tuple:
        """One step: ``(logits, state, attention)``; ``memory`` one row per group of rows."""

    def output_projection(self) -> tuple:
        """``(kernel, bias)`` of the vocabulary projection (candidate lists gather its columns)."""


def tile_beams(nest, beam_size):
    """Repeats every tensor of a nest ``beam_size`` times along its first axis.

    Row ``b`` of the input becomes rows ``b * beam_size .. (b + 1) * beam_size - 1`` (consecutive
    copies, ``repeat``), the layout `beam_search` uses for its ``batch * beam`` rows.

    Args:
        nest: a tensor or any nest (tuple, list, dict) of tensors of shape ``[batch, ...]``.
        beam_size: int or int32 scalar tensor.

    Returns:
        The same nest with tensors of shape ``[batch * beam_size, ...]``.
    """
    return keras.tree.map_structure(
        lambda t: ops.repeat(ops.convert_to_tensor(t), beam_size, axis=0), nest)


def ensemble_step_fn(step_fns) -> StepFn:
    """Combines the step functions of several models into one (Sutskever et al. 2014), in
    ``keras.ops``, so `bahdanau_tf.decoding.beam_search` drives it on every Keras backend.

    The ensemble's distribution is the mean of the members' probabilities, returned as its log
    (``log(mean_k softmax(logits_k))``), so `beam_search` can drive it like a single model. Its
    state is a tuple with one member state per model, in order; its attention is the mean of the
    members' attentions, or None if any member returns None.

    Args:
        step_fns: a non-empty sequence of step functions over the same target vocabulary, each
            closing over its own, already tiled, encoder memory, or each taking it as a fourth
            argument (for `beam_search`'s ``memory``: a tuple with one member memory per model).

    Returns:
        A step function ``(ids, step, states[, memories]) -> (log_probs, states, attention)``.

    Raises:
        ValueError: no step functions, or (when called) a state tuple of the wrong length.

    Example:

        state = (model_a_state, model_b_state)
        output = beam_search(ensemble_step_fn([step_a, step_b]), state, batch_size)
    """
    step_fns = tuple(step_fns)
    if not step_fns:
        raise ValueError("ensemble_step_fn needs at least one step function, got none")
    count = len(step_fns)

    def step(ids, step_index, states, memories=None):
        states = tuple(states)
        if len(states) != count:
            raise ValueError(f"the ensemble state must hold {count} member states, "
                             f"got {len(states)}")
        log_probs, new_states, attentions = [], [], []
        for index, (member_step, member_state) in enumerate(zip(step_fns, states)):
            memory = () if memories is None else (memories[index],)
            logits, member_state, attention = member_step(ids, step_index, member_state, *memory)
            log_probs.append(ops.log_softmax(ops.cast(logits, "float32"), axis=-1))
            new_states.append(member_state)
            attentions.append(attention)
        # log of the mean probability, computed in log space for stability
        mean_log_probs = ops.logsumexp(ops.stack(log_probs), axis=0) - np.log(count)
        attention = None
        if all(a is not None for a in attentions):
            attention = sum(ops.cast(a, "float32") for a in attentions) / count
        return mean_log_probs, tuple(new_states), attention

    return step
