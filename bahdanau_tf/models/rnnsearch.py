"""`RNNSearch`: the paper's model (Bahdanau, Cho & Bengio 2015), with the paper's decoder cell or
Nematus's conditional GRU; the interface it shares with the baselines is `bahdanau_tf.models`'
docstring."""

import functools
from typing import Any

import keras
from keras import ops

import bahdanau_tf.models.cgru as cgru
import bahdanau_tf.models.initializers as initializers
import bahdanau_tf.models.layers as layers_lib
import bahdanau_tf.models.tensor_ops as tensor_ops
from bahdanau_tf.models.aligner import RNNSearchAligner
from bahdanau_tf.models.decoder_cell import Memory
from bahdanau_tf.models.base import SIZES, TranslationModel, check_tying
from bahdanau_tf.models.tensor_ops import Tensor
from bahdanau_tf.special_tokens import END_ID, PAD_ID

# RNNSearch's decoder cells: the paper's, and Nematus's conditional GRU (`bahdanau_tf.models.cgru`)
_DECODER_CELLS = {"paper": layers_lib.AttentionGRUCell, "cgru": cgru.CGRUAttentionCell}


def _next_tokens(target_input_ids):
    """The output tokens of teacher-forced inputs ``[START] y_1 .. y_T`` (padded with 0):
    ``y_1 .. y_T [END]``."""
    lengths = ops.sum(ops.cast(ops.not_equal(target_input_ids, PAD_ID), "int32"), axis=1)
    shifted = ops.pad(target_input_ids[:, 1:], [[0, 0], [0, 1]])
    positions = ops.arange(ops.shape(target_input_ids)[1])[None, :]
    return ops.where(positions == (lengths - 1)[:, None], END_ID, shifted)


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class RNNSearch(TranslationModel):
    """RNNsearch: bidirectional GRU encoder, additive attention, a GRU decoder whose gates read
    the context, with a maxout deep output (Bahdanau, Cho & Bengio 2015, section 3 and
    appendix A); or, with ``decoder="cgru"``, Nematus's conditional GRU decoder. An alignment
    head is a task on a trained model: `aligner.RNNSearchAligner` (``bahdanau-alignment-head``).

    Args:
        source_vocabulary_size: int, K_x (including the 4 special ids).
        target_vocabulary_size: int, K_y.
        embedding_dim: int, m (620 in the paper).
        hidden_dim: int, n, the size of each encoder direction and of the decoder (1000).
        attention_dim: int, n', the alignment model's hidden size (1000).
        maxout_dim: int, l, the number of maxout units (500).
        score: attention score, ``"additive"`` (the paper, e_ij = v_a^T tanh(W_a s_{i-1} +
            U_a h_j)) or ``"general"`` (Luong et al. 2015, e_ij = s_{i-1}^T W_a h_j; preset
            ``rnnsearch-general-small``). Luong's ``"dot"`` score needs the decoder state and
            the annotations to have one size, which a bidirectional encoder (2n) and an n-unit
            decoder never have, so it is not offered.
        initialization: ``"paper"`` (appendix B.1: orthogonal recurrent matrices, N(0, 0.001^2)
            for W_a and U_a, zero v_a and biases, N(0, 0.01^2) elsewhere) or ``"keras"``
            (orthogonal recurrent matrices, Glorot-uniform elsewhere, U(-0.05, 0.05)
            embeddings). The paper presets use ``"paper"``; ``small`` uses ``"keras"``: with Adam
            and a 12-minute budget the paper's tiny weights learn several times slower (dev NLL
            3.39 against 4.01 after 4.5 minutes of the default run, Adam 5e-3).
        embedding_dropout, annotation_dropout, recurrent_dropout, readout_dropout,
            word_dropout: floats in [0, 1), regularisation in training only, 0 (none) by
            default: `bahdanau_tf.models.regularization` says where each applies.
        decoder: the decoder cell, ``"paper"`` (`layers.AttentionGRUCell`: the attention
            queried with s_{i-1}, then one GRU whose gates read E y_{i-1} and c_i) or
            ``"cgru"`` (`cgru.CGRUAttentionCell`, Nematus's conditional GRU, Sennrich et al.
            2017: a GRU reads E y_{i-1}, its state queries the attention, a second GRU reads
            c_i; preset ``rnnsearch-cgru-small``). The readout reads s_i, E y_{i-1}, c_i either way.
        tie_embeddings: bool, the vocabulary projection W_o is the target embedding matrix E
            transposed, one variable (`layers.MaxoutReadout`); needs ``maxout_dim`` =
            ``embedding_dim``.

    Example:

    >>> model = RNNSearch.from_preset("tiny", source_vocabulary_size=50, target_vocabulary_size=60)
    >>> source = np.array([[5, 6, 7, 2]])
    >>> target_in = np.array([[1, 8, 9]])
    >>> tuple(model((source, target_in)).shape)
    (1, 3, 60)
    """

    preset_prefix = "rnnsearch"
    has_attention = True
    #: an alignment head's units and context held in the model's own config (model directories
    #: and ``.keras`` files written so hold them), 0 without one: `from_config` reads them
    retired_arguments = {"alignment_head": 0, "alignment_head_context": 0}

    def __init__(
        self,
        source_vocabulary_size: int,
        target_vocabulary_size: int,
        embedding_dim: int = 620,
        hidden_dim: int = 1000,
        attention_dim: int = 1000,
        maxout_dim: int = 500,
        score: str = "additive",
        initialization: str = "paper",
        embedding_dropout: float = 0.0,
        annotation_dropout: float = 0.0,
        recurrent_dropout: float = 0.0,
        readout_dropout: float = 0.0,
        word_dropout: float = 0.0,
        decoder: str = "paper",
        tie_embeddings: bool = False,
        **kwargs,
    ) -> None:
        if set(kwargs) & set(self.retired_arguments):
            raise ValueError("An alignment head is a task on a trained model, not an RNNSearch argument: "
                             "RNNSearchAligner(model, units, context) (bahdanau_tf.models).")
        super().__init__(**kwargs)
        if decoder not in _DECODER_CELLS:
            raise ValueError(f"`decoder` must be one of {tuple(_DECODER_CELLS)}, got {decoder!r}.")
        init = functools.partial(initializers.initializer_for, initialization)  # a new instance per layer
        # === Config ===
        self._store_config(
            SIZES + ("attention_dim", "maxout_dim"),
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            embedding_dim=embedding_dim,
            hidden_dim=hidden_dim,
            attention_dim=attention_dim,
            maxout_dim=maxout_dim,
            score=score,
            initialization=initialization,
            decoder=decoder,
            tie_embeddings=check_tying(tie_embeddings, maxout_dim, embedding_dim),
        )
        self._store_dropouts(embedding_dropout=embedding_dropout, annotation_dropout=annotation_dropout,
                             recurrent_dropout=recurrent_dropout, readout_dropout=readout_dropout,
                             word_dropout=word_dropout)
        # === Layers ===
        self._make_layers(init)

    def _make_layers(self, init: Any) -> None:
        """The encoder, W_s, the target embedding, the decoder cell and the maxout read-out, from
        the stored config; ``init(role)`` gives a new initializer instance per layer."""
        source_vocabulary_size, target_vocabulary_size = (self.source_vocabulary_size,
                                                          self.target_vocabulary_size)
        embedding_dim, hidden_dim = self.embedding_dim, self.hidden_dim
        attention_dim, maxout_dim, score = self.attention_dim, self.maxout_dim, self.score
        self.encoder = layers_lib.BidirectionalEncoder(
            source_vocabulary_size,
            embedding_dim,
            hidden_dim,
            kernel_initializer=init("kernel"),
            bias_initializer=init("bias"),
            embeddings_initializer=init("embedding"),
            embedding_dropout=self.embedding_dropout,
            dtype=self.dtype_policy,
            name="encoder",
        )
        self.initial_state_dense = keras.layers.Dense(  # W_s
            hidden_dim,
            activation="tanh",
            kernel_initializer=init("kernel"),
            bias_initializer=init("bias"),
            dtype=self.dtype_policy,
            name="initial_state",
        )
        self.target_embedding = keras.layers.Embedding(
            target_vocabulary_size,
            embedding_dim,
            embeddings_initializer=init("embedding"),
            dtype=self.dtype_policy,
            name="target_embedding",
        )
        self.decoder_cell = _DECODER_CELLS[self.decoder](
            hidden_dim,
            attention_dim,
            score=score,
            kernel_initializer=init("kernel"),
            bias_initializer=init("bias"),
            attention_initializer=init("attention"),
            score_initializer=init("score_vector"),
            dtype=self.dtype_policy,
            name="decoder_cell",
        )
        self.readout = layers_lib.MaxoutReadout(
            maxout_dim,
            target_vocabulary_size,
            kernel_initializer=init("kernel"),
            bias_initializer=init("bias"),
            tie_embeddings=self.tie_embeddings,
            dtype=self.dtype_policy,
            name="readout",
        )
        if self.tie_embeddings:
            self.readout.tie(self.target_embedding)

    def build(self, input_shape: tuple | None = None) -> None:
        annotation_dim = 2 * self.hidden_dim
        self.encoder.build((None, None))
        self.initial_state_dense.build((None, self.hidden_dim))
        self.target_embedding.build((None, None))
        self.decoder_cell.build(input_dim=self.embedding_dim, memory_dim=annotation_dim)
        self.readout.build(state_dim=self.hidden_dim, embedding_dim=self.embedding_dim, context_dim=annotation_dim)
        self.built = True

    @classmethod
    def from_config(cls, config: dict) -> "RNNSearch | RNNSearchAligner":
        """The model of `get_config`. A config holding `retired_arguments` (a head's units and
        context inside the model's own config) gives the model where the units are 0, else an
        `aligner.RNNSearchAligner` of the model with that head (whose weights
        `bahdanau_tf.keras_checkpoints.load_weights_file` finds in such a model's file)."""
        config = dict(config)
        units, context = (config.pop(name, default) for name, default in cls.retired_arguments.items())
        model = cls(**config)
        return RNNSearchAligner(model, units, context) if units else model

    def encode(self, source_ids: Tensor, training: bool = False) -> dict:
        """The annotations and the source mask: the decoder's memory (what no step changes is
        computed from them by the decoder cell's ``prepare``: `decoding_memory`, ``sequence``).

        Args:
            source_ids: int (batch, source_len), padded with 0; ends with the end id.

        Returns:
            dict with ``annotations`` (batch, source_len, 2n) and ``mask`` bool (batch, source_len).
        """
        annotations, mask = self.encoder(self.dropouts.words(source_ids, training), training=training)
        return {"annotations": self.dropouts.annotations(annotations, training), "mask": mask}

    def initial_state(self, memory: dict) -> Tensor:
        """s_0 = tanh(W_s h<-_1), from the backward encoder state at the first source word."""
        backward_first = memory["annotations"][:, 0, self.hidden_dim :]
        return self.initial_state_dense(backward_first)

    def decode_step(self, previous_ids: Tensor, state: Any, memory: dict,
                    projection: tuple | None = None) -> tuple:
        """One decoder step.

        Args:
            previous_ids: int (batch,), y_{i-1}.
            state: (batch, n), s_{i-1}; or, as a search carries it (`decoding_state`),
                ``(s_{i-1}, W_a s_{i-1})``.
            memory: `decoding_memory`'s output (what a search hands over), or `encode`'s,
                whose products this call then computes itself: one row per row of
                ``previous_ids``, or per group of consecutive rows (the beams of a sentence).
            projection: optional ``(kernel (l, C), bias (C,))``, columns of
                `output_projection` (a candidate list): the logits cover those C tokens.

        Returns:
            ``(logits, state, attention)``: float32 (batch, K_y) (or (batch, C)), s_i in the
            form ``state`` was given, float32 (batch, source_len).
        """
        if "products" not in memory:  # `encode`'s: its products, at every call
            memory = self.decoding_memory(memory)
        cell = self.decoder_cell
        embedded = self.target_embedding(previous_ids)
        step = cell.step(cell.project_inputs(embedded), state,
                         Memory(memory["products"], memory["keys"], memory["mask"]), cell.step_weights_as(embedded),
                         grouped=True)
        features = self.readout.features(step.state, embedded, projected_contexts=step.readout_context)
        logits = self.readout.project(features, projection)
        new_state = cell.decoding_state(step.state) if isinstance(state, (tuple, list)) else step.state
        return logits, new_state, step.alpha

    def decoding_state(self, state: Tensor) -> Any:
        """s as a search carries it, the decoder cell's ``decoding_state``: the paper's cell
        carries ``(s, W_a s)``, the next step's attention query computed as soon as s is; the
        conditional GRU carries s as it is (its query, W_a s'_i, reads y_{i-1}, which the step
        before does not know).

        A step's time is its chain of dependent work, and the query's matmul used to open it
        (the attention waits for it). Computed at the end of the step before, beside the
        vocabulary projection and the search's selection, it leaves that chain (faster at batch
        64 and at batch 1 under XLA: benchmarks/decode_throughput.py). The beams'
        reordering gathers the query with the state (it is linear in s). `decode_step` takes
        and returns either form; the Translator carries this one in its XLA searches only
        (without XLA the extra loop variable cost more than it saved).
        """
        return self.decoder_cell.decoding_state(state)

    def decoding_memory(self, memory: dict) -> dict:
        """`encode`'s memory for `decode_step`: the decoder cell's `prepare`d memory, with the
        deep output's products beside the cell's.

        A step multiplies c_i by two fixed matrices only, the cell's C (2n x 3n; the
        conditional GRU's second GRU's input kernel W') and the deep output's C_o (2n x 2l),
        and C c_i = sum_j alpha_ij (C h_j). So the annotations' products ``[C h_j | C_o h_j]``
        are computed once per sentence (batch, source_len, 3n + 2l), and each step reads them
        with its alpha (`BahdanauAttention.read`) instead of forming c_i and multiplying it:
        that saves the step's largest matmul after W_o's (2n (3n + 2l) weights, read at every
        step), for a per-sentence matmul whose cost is that of about one step per source word.
        The annotations themselves are dropped: no step reads them. The same numbers as
        stepping `encode`'s memory, up to float order.

        Returns:
            dict with ``products``, ``keys`` and ``mask``.
        """
        prepared = self.decoder_cell.prepare(memory["annotations"], memory["mask"],
                                             readout_kernel=self.readout.context_kernel)
        return {"products": prepared.products, "keys": prepared.keys, "mask": prepared.mask}

    def _teacher_forcing(self, inputs, training=False, features=False, attention=False, head=False):
        """``(logits or features, alpha or None)``: the decoder over all steps of the reference
        (`decoder_cell.DecoderCell.sequence`); alpha only when asked for; with ``head``, the
        annotations, mask and states `alignment_head_inputs` hands on."""
        source_ids, target_input_ids = inputs
        memory = self.encode(source_ids, training=training)
        initial_state = self.initial_state(memory)
        embedded = self.dropouts.embeddings(self.target_embedding(target_input_ids), training)  # (batch, target_len, m)
        projected = self.decoder_cell.project_inputs(embedded)  # (batch, target_len, 3n), before the loop
        recurrent_mask = self.dropouts.recurrent_mask(initial_state, training)  # one per sequence
        with tensor_ops.weights_read_once(self.decoder_cell):  # not once per step (see there)
            outputs = self.decoder_cell.sequence(tensor_ops.time_major(projected), initial_state,
                                                 memory["annotations"], memory["mask"], recurrent_mask,
                                                 weights=attention, training=training)
        states, contexts = tensor_ops.stack_time(outputs[0]), tensor_ops.stack_time(outputs[1])
        weights = tensor_ops.stack_time(outputs[2]) if attention else None
        if head:
            return memory["annotations"], memory["mask"], states
        # readout and vocabulary projection for all steps in one batched matmul, after the loop
        maxout = self.dropouts.readout(self.readout.features(states, embedded, contexts), training)
        return (maxout if features else self.readout.project(maxout)), weights

    def call(self, inputs: tuple, training: bool = False) -> Tensor:
        return self._teacher_forcing(inputs, training=training)[0]

    def output_features(self, inputs: tuple, training: bool = False) -> Tensor:
        return self._teacher_forcing(inputs, training=training, features=True)[0]

    def output_projection(self) -> tuple:
        return self.readout.output_projection()

    def attention_weights(self, inputs: tuple) -> Tensor:
        """alpha_ij of the reference translation (teacher forcing): (batch, target_len, source_len)."""
        return self._teacher_forcing(inputs, attention=True)[1]

    def alignment_head_inputs(self, inputs: tuple, target_out: Tensor | None = None) -> tuple:
        """What `alignment.AlignmentHead` reads, teacher-forced: ``(annotations, mask,
        states, embeddings, target_mask)``: s_i and E y_i of every target token y_i
        (``target_out``; None: the tokens of ``target_input_ids`` after ``[START]``, then
        ``[END]``), and True at the real ones."""
        if target_out is None:
            target_out = _next_tokens(inputs[1])
        annotations, mask, states = self._teacher_forcing(inputs, head=True)
        target_mask = ops.not_equal(inputs[1], PAD_ID)
        # states read from padding are zeros: a row's s_{i+1} never depends on the batch
        real = ops.cast(target_mask, states.dtype)[:, :, None]
        return annotations, mask, states * real, self.target_embedding(target_out), target_mask

    def alignment_weights(self, inputs: tuple, target_out: Tensor | None = None) -> Tensor:
        """P(source j | target token i) (batch, target_len, source_len) float32: the model's
        `attention_weights` (row i predicts token i; ``target_out`` is not read). An alignment
        head's are its task's (`aligner.RNNSearchAligner.alignment_weights`)."""
        return self.attention_weights(inputs)

    def logits_and_attention(self, inputs: tuple, training: bool = False) -> tuple:
        """(logits (batch, target_len, K_y), alpha_ij (batch, target_len, source_len) float32)
        of one teacher-forced pass."""
        return self._teacher_forcing(inputs, training=training, attention=True)


__all__ = ["RNNSearch"]
