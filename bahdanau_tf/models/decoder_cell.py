"""The decoder cell interface: the base class every decoder cell subclasses, and the types its
steps read and return (``keras.ops``, every backend).

Three drivers step a decoder cell and know none of its equations: the Keras call and the search
(`bahdanau_tf.models.RNNSearch.decode_step`), teacher forcing with the steps scanned
(`DecoderCell.sequence`) and, in a training pass on TensorFlow, the loop whose backward pass is
written out (`bahdanau_tf.models.backprop.decoder_states`). They read only what this module
declares. The cells: the paper's (`layers.AttentionGRUCell`) and Nematus's conditional GRU
(`cgru.CGRUAttentionCell`).

Every cell reads the annotations through one attention (`BahdanauAttention`) and multiplies
c_i by a fixed matrix C only, so its memory is the same: `prepare` forms the products C h_j
and the keys U_a h_j once per sentence (`Memory`, from the weights `MemoryWeights`), and a step
reads C c_i off the products with its alpha_i (`DecoderCell.attend`).

What a new decoder cell writes (docs/design.md, "A new decoder cell"):

- ``build(input_dim, memory_dim)`` (``super().build`` builds the attention), ``project_inputs``
  (E y_{i-1}'s projections, for all steps before the loop) and ``get_config``;
- ``Weights``, ``Record``, ``StepGradients``: its own NamedTuples, the weights its step reads by
  role, what its step keeps for its backward step, its backward step's per-step gradients;
- ``loop_weights()``: `LoopWeights` of its variables (which variable plays which role);
- ``step(projected_inputs, state, memory, weights, recurrent_mask, grouped) -> Step``;
- optionally ``decoding_state`` (what a search carries; default s as it is);
- for the written-out backward pass (optional: without it, a training pass differentiates the
  scanned steps automatically): ``fuse`` (its weights as the training loop reads them),
  ``step_backward`` and ``loop_gradients``.
"""

from typing import Any, NamedTuple

import keras
from keras import ops

import bahdanau_tf.models.recurrence as recurrence
from bahdanau_tf.models.attention import BahdanauAttention
from bahdanau_tf.models.tensor_ops import Tensor, cast_weight, project, scan_states


class Memory(NamedTuple):
    """What every step reads, formed once per sentence by `DecoderCell.prepare`."""

    products: Tensor  # (batch, source_len, k [+ k']): C h_j [| the readout's C_o h_j]
    keys: Tensor  # (batch, source_len, n'): U_a h_j + b (the annotations, with the general score)
    mask: Tensor  # bool (batch, source_len)
    annotations: Tensor | None = None  # (batch, source_len, 2n); a search's memory holds none


class MemoryWeights(NamedTuple):
    """The weights `DecoderCell.prepare` reads; the written-out loop computes their gradients
    after it, for every cell alike."""

    context_kernel: Tensor  # C (2n, k): what multiplies c_i in the cell's step
    key_kernel: Tensor | None  # U_a (2n, n'); None with the general score
    key_bias: Tensor | None  # (n',); None with the general score


class LoopWeights(NamedTuple):
    """A cell's weights: the memory's, and the step's (the cell's own ``Weights``)."""

    memory: MemoryWeights
    step: Any


class Step(NamedTuple):
    """What one `DecoderCell.step` returns."""

    state: Tensor  # (batch, n), s_i
    alpha: Tensor  # float32 (batch, source_len), alpha_i
    record: Any  # the cell's ``Record``: what its ``step_backward`` reads
    readout_context: Tensor  # (batch, k'): what the step read off the products past C h_j's


class BackwardStep(NamedTuple):
    """What one `DecoderCell.step_backward` returns."""

    d_state: Tensor  # (batch, n), d s_{i-1}
    d_keys: Tensor  # (batch, source_len, n')
    d_score_vector: Tensor  # (n',), d v_a
    gradients: Any  # the cell's ``StepGradients``


def cast_weights(weights: tuple, like: Tensor) -> tuple:
    """A NamedTuple of weights as tensors of ``like``'s dtype (its None fields None)."""
    return weights._make(None if weight is None else cast_weight(weight, like) for weight in weights)


def written_out_loops(training: bool) -> Any:
    """`bahdanau_tf.models.backprop`, the loops whose backward pass is written out, in a training
    pass on TensorFlow (outside `recurrence.automatic_differentiation`); else None."""
    if not training or recurrence.automatic_differentiation_asked():
        return None
    import bahdanau_tf.models.backprop as backprop  # noqa: PLC0415 — it imports TensorFlow: on that backend only

    return backprop


class DecoderCell(keras.layers.Layer):
    """The base of the decoder cells: attention over the annotations and a recurrence, one step.

    Owns what every cell shares: the attention (``attention``, `BahdanauAttention`), the memory
    (`prepare`, `attend`), the Keras call, and teacher forcing over all steps (`sequence`). A
    subclass writes the members the module docstring lists (`WRITTEN_BY_EACH_CELL`, and for
    the written-out backward pass `WRITTEN_FOR_THE_BACKWARD_LOOP`).

    Args:
        units: int, n, the decoder state size.
        attention_units: int, n', the alignment model's hidden size.
        score: attention score, ``"additive"`` (the paper) or ``"general"`` (Luong).
        attention_initializer: of W_a and U_a; ``score_initializer``: of v_a;
            ``bias_initializer``: of the keys' bias.

    Call arguments:
        projected_inputs: (batch, k), `project_inputs(E y_{i-1})`.
        h_tm1: (batch, units), s_{i-1}.
        memory: `Memory` from `prepare` (with its ``annotations``).
        grouped: bool, the memory holds one row per group of consecutive rows of ``h_tm1``
            (beam search's beams of one sentence), see `BahdanauAttention.attend`.
        recurrent_mask: optional (batch, units), recurrent dropout (`recurrence.gru_step`),
            drawn once per sequence (`bahdanau_tf.models.regularization.Dropouts`).

    Returns:
        ``(s_i, c_i, alpha_i)``: (batch, units), (batch, 2n), float32 (batch, source_len).
    """

    #: what every cell writes (the base's ``build`` and ``get_config`` cover the attention alone;
    #: its other members here are placeholders)
    WRITTEN_BY_EACH_CELL = ("build", "project_inputs", "get_config", "Weights", "Record", "StepGradients",
                            "loop_weights", "step")
    #: what a cell writes for `bahdanau_tf.models.backprop.decoder_states`
    WRITTEN_FOR_THE_BACKWARD_LOOP = ("fuse", "step_backward", "loop_gradients")

    #: the step's weights by role (a NamedTuple of the cell's)
    Weights: type = None
    #: what `step` keeps for `step_backward` (a NamedTuple; the training loop stacks each field)
    Record: type = None
    #: `step_backward`'s per-step gradients (a NamedTuple): ``inputs``, d of `project_inputs`'
    #: projections, first; its ``products_read`` is d of what the step read off C h_j
    StepGradients: type = None

    def __init__(self, units: int, attention_units: int, score: str = "additive",
                 attention_initializer: str | keras.initializers.Initializer | None = None,
                 score_initializer: str | keras.initializers.Initializer | None = "zeros",
                 bias_initializer: str | keras.initializers.Initializer | None = "zeros", **kwargs) -> None:
        super().__init__(**kwargs)
        self.units = int(units)
        self.attention_units = int(attention_units)
        self.score = score
        # === Layers ===
        self.attention = BahdanauAttention(attention_units, score=score, kernel_initializer=attention_initializer,
                                           score_initializer=score_initializer, bias_initializer=bias_initializer,
                                           dtype=self.dtype_policy, name="attention")

    def build(self, input_dim: int, memory_dim: int) -> None:
        """The attention's weights (queried with a state of ``units``); a subclass builds its own."""
        self.attention.build((None, self.units), (None, None, int(memory_dim)))

    def project_inputs(self, inputs: Tensor) -> Tensor:
        """E y_{i-1}'s projections, for any leading dimensions: what `step` reads."""
        raise NotImplementedError

    # === The weights ===

    def loop_weights(self) -> LoopWeights:
        """The cell's variables by role: `memory_weights` and its ``Weights``."""
        raise NotImplementedError

    def memory_weights(self, context_kernel: Any) -> MemoryWeights:
        """`MemoryWeights` of ``context_kernel`` (C, the variable that multiplies c_i in the
        step) and the attention's keys'."""
        score = self.attention.score_weights()
        return MemoryWeights(context_kernel, score.get("key_kernel"), score.get("key_bias"))

    def weights_as(self, like: Tensor) -> LoopWeights:
        """`loop_weights` as tensors of ``like``'s dtype (what `prepare` and `step` read)."""
        weights = self.loop_weights()
        return LoopWeights(cast_weights(weights.memory, like), cast_weights(weights.step, like))

    def step_weights_as(self, like: Tensor) -> tuple:
        """The step's weights only, as tensors of ``like``'s dtype: a search reads no weight it
        does not use at every step."""
        return cast_weights(self.loop_weights().step, like)

    def fuse(self, weights: tuple) -> tuple:
        """``weights`` (``Weights``) as a training loop's step reads them: the matrices that read
        the same tensor concatenated (one matmul). The base fuses none."""
        return weights

    # === The memory and the step ===

    def prepare(self, annotations: Tensor, mask: Tensor, readout_kernel: Tensor | None = None,
                weights: MemoryWeights | None = None) -> Memory:
        """What every step reads, computed once per sentence.

        A step multiplies c_i by a fixed matrix only (C), and C c_i = sum_j alpha_ij (C h_j):
        the products C h_j are formed here, and a step reads C c_i off them with its alpha_i
        (`BahdanauAttention.read`) instead of forming c_i.

        Args:
            annotations: (batch, source_len, 2n); mask: bool (batch, source_len).
            readout_kernel: optional (2n, k'), another matrix that multiplies c_i (the deep
                output's C_o in a search): its products follow C h_j's, and `step` reads them
                with the same alpha_i (its ``readout_context``).
            weights: `MemoryWeights` as tensors, in place of the variables.
        """
        weights = weights or self.loop_weights().memory
        products = project(annotations, cast_weight(weights.context_kernel, annotations))
        if readout_kernel is not None:
            products = ops.concatenate([products, project(annotations, cast_weight(readout_kernel, annotations))],
                                       axis=-1)
        keys = self.attention.compute_keys(annotations, weights.key_kernel, weights.key_bias)
        return Memory(products, keys, mask, annotations)

    def attend(self, query: Tensor, memory: Memory, score_vector: Tensor | None, grouped: bool = False) -> tuple:
        """``(alpha_i, sum_j alpha_ij products_j)`` from the projected query: alpha_i and C c_i
        (then the readout's columns)."""
        alpha = self.attention.align(query, memory.keys, memory.mask, grouped=grouped, score_vector=score_vector)
        return alpha, self.attention.read(alpha, memory.products, grouped=grouped)

    def step(self, projected_inputs: Tensor, state: Any, memory: Memory, weights: tuple,
             recurrent_mask: Tensor | None = None, grouped: bool = False) -> Step:
        """One step from s_{i-1} (``state``, in the form `decoding_state` gives or as it is) on
        ``memory``, with ``weights`` (``Weights``: `step_weights_as`', or `fuse`'s in a
        training loop)."""
        raise NotImplementedError

    def decoding_state(self, state: Tensor) -> Any:
        """s as a search carries it; the base carries it as it is."""
        return state

    # === The step backwards (the written-out loop) ===

    def step_backward(self, d_state: Tensor, d_alpha: Tensor, h_tm1: Tensor, alpha: Tensor, record: tuple,
                      memory: Memory, transposed: tuple, recurrent_mask: Tensor | None = None) -> BackwardStep:
        """`step` backwards (additive score), from d s_i and d alpha_i (with what c_i's
        gradient gives it); ``record`` the step's, ``transposed`` `fuse`'s weights through
        `recurrence.transposed_matrices`."""
        raise NotImplementedError

    def loop_gradients(self, reads: Tensor, records: tuple, steps: tuple, d_score_vector: Tensor,
                       recurrent_mask: Tensor | None = None) -> tuple:
        """The step weights' gradients (``Weights``) after the backward loop, from what the
        steps' matmuls read of s_{i-1} (time, batch, n), the stacked ``Record`` and
        ``StepGradients``, and v_a's gradient (summed in the loop)."""
        raise NotImplementedError

    # === All steps ===

    def writes_its_backward_step(self) -> bool:
        """Whether the cell writes `step_backward` (the written-out loop can drive it)."""
        return type(self).step_backward is not DecoderCell.step_backward

    def sequence(self, projected_inputs: Tensor, initial_state: Tensor, annotations: Tensor, mask: Tensor,
                 recurrent_mask: Tensor | None = None, weights: bool = False, training: bool = False) -> tuple:
        """Teacher forcing: the cell over all steps of time-major ``projected_inputs`` (time,
        batch, k), from s_0 ``initial_state``, on ``annotations`` and ``mask``
        (`RNNSearch.encode`'s).

        A training pass on TensorFlow with the additive score runs
        `bahdanau_tf.models.backprop.decoder_states`, whose backward pass is written out (`step_backward`);
        otherwise `step` is scanned and differentiated automatically.

        Returns:
            ``(s_i, c_i, alpha_i)`` of all steps, time major; ``alpha_i`` (float32) only with
            ``weights``, else None.
        """
        backprop = written_out_loops(training) if self.score == "additive" else None
        if backprop is not None and self.writes_its_backward_step():
            states, contexts, alphas = backprop.decoder_states(self, projected_inputs, initial_state, annotations,
                                                               mask, self.weights_as(initial_state), recurrent_mask)
        else:
            states, alphas = self.scanned_sequence(projected_inputs, initial_state, annotations, mask,
                                                   recurrent_mask)
            contexts = recurrence.contexts(alphas, annotations)
        return states, contexts, alphas if weights else None

    def scanned_sequence(self, projected_inputs: Tensor, initial_state: Tensor, annotations: Tensor,
                         mask: Tensor, recurrent_mask: Tensor | None = None) -> tuple:
        """`step` scanned over all steps: ``(s_i, alpha_i)``, time major (the contexts c_i are
        one batched matmul after the loop, `recurrence.contexts`)."""
        weights = self.weights_as(initial_state)
        memory = self.prepare(annotations, mask, weights=weights.memory)
        initializer = (initial_state, ops.zeros(ops.shape(mask), "float32"))

        def step(carry, projected_t):
            return tuple(self.step(projected_t, carry[0], memory, weights.step, recurrent_mask)[:2])

        return scan_states(step, projected_inputs, initializer)

    def call(self, projected_inputs: Tensor, h_tm1: Tensor, memory: Memory, grouped: bool = False,
             recurrent_mask: Tensor | None = None) -> tuple:
        step = self.step(projected_inputs, h_tm1, memory, self.step_weights_as(h_tm1), recurrent_mask,
                         grouped=grouped)
        return step.state, self.attention.read(step.alpha, memory.annotations, grouped=grouped), step.alpha

    def get_config(self) -> dict:
        attention_config = self.attention.get_config()
        config = {
            "units": self.units,
            "attention_units": self.attention_units,
            "score": self.score,
            "attention_initializer": attention_config["kernel_initializer"],
            "score_initializer": attention_config["score_initializer"],
            "bias_initializer": attention_config["bias_initializer"],
        }
        return {**super().get_config(), **config}


__all__ = ["BackwardStep", "DecoderCell", "LoopWeights", "Memory", "MemoryWeights", "Step", "cast_weights",
           "written_out_loops"]
