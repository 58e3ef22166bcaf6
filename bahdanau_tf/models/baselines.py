"""The paper's baseline `RNNEncDec` (Cho et al. 2014a) and `Seq2Seq` (Sutskever et al. 2014).

The same interface as `bahdanau_tf.models.RNNSearch` (`bahdanau_tf.models`' docstring), without
attention: ``decode_step`` returns ``(logits, state, None)``.
"""

import functools
from typing import Any

import keras
from keras import ops

import bahdanau_tf.models.initializers as initializers
import bahdanau_tf.models.layers as layers_lib
import bahdanau_tf.models.tensor_ops as tensor_ops
from bahdanau_tf.models.base import SIZES, TranslationModel, check_tying
from bahdanau_tf.models.tensor_ops import Tensor
from bahdanau_tf.special_tokens import PAD_ID


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class RNNEncDec(TranslationModel):
    """RNNencdec, the paper's baseline (Cho et al. 2014a): one fixed-length context vector.

    A unidirectional GRU reads the source; its last state gives c = tanh(V h_Tx). The decoder is
    the same conditional GRU as RNNsearch's, but reads the same c at every step, starts from
    s_0 = tanh(V' c), and has the same maxout readout (with c in place of c_i).

    Args:
        source_vocabulary_size, target_vocabulary_size, embedding_dim, hidden_dim, maxout_dim,
        initialization, tie_embeddings: as in `RNNSearch` (no attention sizes).
        embedding_dropout, annotation_dropout, recurrent_dropout, readout_dropout,
            word_dropout: floats in [0, 1), regularisation in training only, 0 (none) by
            default: `bahdanau_tf.models.regularization` says where each applies.
    """

    preset_prefix = "rnnencdec"

    def __init__(
        self,
        source_vocabulary_size: int,
        target_vocabulary_size: int,
        embedding_dim: int = 620,
        hidden_dim: int = 1000,
        maxout_dim: int = 500,
        initialization: str = "paper",
        embedding_dropout: float = 0.0,
        annotation_dropout: float = 0.0,
        recurrent_dropout: float = 0.0,
        readout_dropout: float = 0.0,
        word_dropout: float = 0.0,
        tie_embeddings: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        init = functools.partial(initializers.initializer_for, initialization)  # a new instance per layer
        # === Config ===
        self._store_config(
            SIZES + ("maxout_dim",),
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            embedding_dim=embedding_dim,
            hidden_dim=hidden_dim,
            maxout_dim=maxout_dim,
            initialization=initialization,
            tie_embeddings=check_tying(tie_embeddings, maxout_dim, embedding_dim),
        )
        self._store_dropouts(embedding_dropout=embedding_dropout, annotation_dropout=annotation_dropout,
                             recurrent_dropout=recurrent_dropout, readout_dropout=readout_dropout,
                             word_dropout=word_dropout)
        # === Layers ===
        def dense():  # a layer's initializers: new instances, so no two layers share a draw
            return dict(kernel_initializer=init("kernel"), bias_initializer=init("bias"), dtype=self.dtype_policy)

        self.source_embedding = keras.layers.Embedding(
            source_vocabulary_size, embedding_dim, embeddings_initializer=init("embedding"),
            dtype=self.dtype_policy, name="source_embedding",
        )
        self.encoder_gru = keras.layers.GRU(
            hidden_dim,
            reset_after=False,
            recurrent_initializer=initializers.BlockOrthogonal(),
            name="encoder_gru",
            **dense(),
        )
        self.context_dense = keras.layers.Dense(hidden_dim, activation="tanh", name="context", **dense())  # V
        self.initial_state_dense = keras.layers.Dense(hidden_dim, activation="tanh", name="initial_state", **dense())
        self.target_embedding = keras.layers.Embedding(
            target_vocabulary_size, embedding_dim, embeddings_initializer=init("embedding"),
            dtype=self.dtype_policy, name="target_embedding",
        )
        self.decoder_cell = layers_lib.ConditionalGRUCell(hidden_dim, name="decoder_cell", **dense())
        self.readout = layers_lib.MaxoutReadout(maxout_dim, target_vocabulary_size, tie_embeddings=self.tie_embeddings,
                                                name="readout", **dense())
        if self.tie_embeddings:
            self.readout.tie(self.target_embedding)

    def build(self, input_shape: tuple | None = None) -> None:
        n = self.hidden_dim
        self.source_embedding.build((None, None))
        self.encoder_gru.build((None, None, self.embedding_dim))
        self.context_dense.build((None, n))
        self.initial_state_dense.build((None, n))
        self.target_embedding.build((None, None))
        self.decoder_cell.build(input_dim=self.embedding_dim, context_dim=n)
        self.readout.build(state_dim=n, embedding_dim=self.embedding_dim, context_dim=n)
        self.built = True

    def encode(self, source_ids: Tensor, training: bool = False) -> dict:
        """The fixed context c = tanh(V h_Tx) and its projection into the decoder's gates.

        Returns:
            dict with ``context`` (batch, n) and ``projected_context`` (batch, 3n).
        """
        source_ids = self.dropouts.words(source_ids, training)
        mask = ops.not_equal(source_ids, PAD_ID)
        embedded = self.dropouts.embeddings(self.source_embedding(source_ids), training)
        last_state = self.encoder_gru(embedded, mask=mask, training=training)
        context = self.context_dense(self.dropouts.annotations(last_state, training))
        return {"context": context, "projected_context": self.decoder_cell.project_context(context)}

    def initial_state(self, memory: dict) -> Tensor:
        """s_0 = tanh(V' c)."""
        return self.initial_state_dense(memory["context"])

    def decode_step(self, previous_ids: Tensor, state: Any, memory: dict,
                    projection: tuple | None = None) -> tuple:
        """One decoder step; returns ``(logits, state, None)`` (there is no attention).
        ``projection``: as for `RNNSearch.decode_step`."""
        embedded = self.target_embedding(previous_ids)
        context, projected_context = (tensor_ops.repeat_groups(memory[key], previous_ids)
                                      for key in ("context", "projected_context"))
        state = self.decoder_cell(self.decoder_cell.project_inputs(embedded), state, projected_context)
        return self.readout(state, embedded, context, projection=projection), state, None

    def call(self, inputs: tuple, training: bool = False) -> Tensor:
        return self.readout.project(self.output_features(inputs, training=training))

    def output_projection(self) -> tuple:
        return self.readout.output_projection()

    def output_features(self, inputs: tuple, training: bool = False) -> Tensor:
        source_ids, target_input_ids = inputs
        memory = self.encode(source_ids, training=training)
        embedded = self.dropouts.embeddings(self.target_embedding(target_input_ids), training)
        projected = self.decoder_cell.project_inputs(embedded)
        # c is the same at every step: its projection is computed once, outside the loop
        projected_context = memory["projected_context"]
        initial_state = self.initial_state(memory)
        recurrent_mask = self.dropouts.recurrent_mask(initial_state, training)  # one per sequence
        with tensor_ops.weights_read_once(self.decoder_cell):
            states = self.decoder_cell.sequence(tensor_ops.time_major(projected), initial_state,
                                                projected_context, recurrent_mask, training)
        states = tensor_ops.stack_time(states)
        contexts = ops.broadcast_to(memory["context"][:, None, :], ops.shape(states))
        return self.dropouts.readout(self.readout.features(states, embedded, contexts), training)


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class Seq2Seq(TranslationModel):
    """Sutskever, Vinyals & Le (2014): deep LSTM encoder and decoder, source read in reverse.

    The encoder's final (h, c) of each layer initialise the decoder's layer of the same depth; the
    top decoder layer feeds a softmax over the target vocabulary. Only the real tokens of each
    source are reversed (padding stays at the end).

    Args:
        source_vocabulary_size, target_vocabulary_size: ints.
        embedding_dim: int (1000 in the paper).
        hidden_dim: int, cells per layer (1000).
        num_layers: int (4).
        reverse_source: bool, read the source backwards (True, the paper's trick).
        init_scale: float, weights ~ U(-init_scale, init_scale) (0.08).
        embedding_dropout, annotation_dropout, recurrent_dropout, readout_dropout,
            word_dropout: floats in [0, 1), regularisation in training only, 0 (none) by
            default: `bahdanau_tf.models.regularization` says where each applies.
            Here ``recurrent_dropout`` is the decoder LSTMs' own (Keras's, one mask per
            sequence; with it Keras computes each gate by its own matmul, so the logits equal
            those without it up to float rounding) and ``annotation_dropout`` drops the outputs
            of every LSTM layer that feeds another.
    """

    preset_prefix = "seq2seq"

    def __init__(
        self,
        source_vocabulary_size: int,
        target_vocabulary_size: int,
        embedding_dim: int = 1000,
        hidden_dim: int = 1000,
        num_layers: int = 4,
        reverse_source: bool = True,
        init_scale: float = 0.08,
        embedding_dropout: float = 0.0,
        annotation_dropout: float = 0.0,
        recurrent_dropout: float = 0.0,
        readout_dropout: float = 0.0,
        word_dropout: float = 0.0,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        # === Config ===
        self._store_config(
            SIZES + ("num_layers",),
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            embedding_dim=embedding_dim,
            hidden_dim=hidden_dim,
            num_layers=num_layers,
            reverse_source=bool(reverse_source),
            init_scale=float(init_scale),
        )
        self._store_dropouts(embedding_dropout=embedding_dropout, annotation_dropout=annotation_dropout,
                             recurrent_dropout=recurrent_dropout, readout_dropout=readout_dropout,
                             word_dropout=word_dropout)
        # === Layers ===
        self._make_layers()

    def _make_layers(self) -> None:
        """The embeddings, the encoder's and the decoder's LSTMs and the output layer, from the
        stored config; every weight ~ U(-init_scale, init_scale), each its own draw."""
        source_vocabulary_size, target_vocabulary_size = (self.source_vocabulary_size,
                                                          self.target_vocabulary_size)
        embedding_dim, hidden_dim, num_layers = self.embedding_dim, self.hidden_dim, self.num_layers

        def uniform():  # a new instance for every weight: each gets its own draw
            return keras.initializers.RandomUniform(-self.init_scale, self.init_scale)

        def weights():
            return dict(kernel_initializer=uniform(), recurrent_initializer=uniform(), dtype=self.dtype_policy)

        self.source_embedding = keras.layers.Embedding(
            source_vocabulary_size, embedding_dim, embeddings_initializer=uniform(), dtype=self.dtype_policy,
            name="source_embedding",
        )
        self.target_embedding = keras.layers.Embedding(
            target_vocabulary_size, embedding_dim, embeddings_initializer=uniform(), dtype=self.dtype_policy,
            name="target_embedding",
        )
        self.encoder_layers = [keras.layers.LSTM(hidden_dim, return_sequences=True, return_state=True,
                                                 name=f"encoder_lstm_{i}", **weights())
                               for i in range(num_layers)]
        self.decoder_layers = [keras.layers.LSTM(hidden_dim, return_sequences=True, return_state=True,
                                                 name=f"decoder_lstm_{i}",
                                                 recurrent_dropout=self.recurrent_dropout, **weights())
                               for i in range(num_layers)]
        self.output_dense = keras.layers.Dense(
            target_vocabulary_size, kernel_initializer=uniform(), dtype=self.dtype_policy, name="output"
        )
        # tf.train.Checkpoint follows attributes, not the lists Keras 3 wraps (without these, the
        # checkpoints held no LSTM weight): each LSTM is also an attribute of its own
        for index, (encoder, decoder) in enumerate(zip(self.encoder_layers, self.decoder_layers)):
            setattr(self, f"encoder_lstm_{index}", encoder)
            setattr(self, f"decoder_lstm_{index}", decoder)

    def build(self, input_shape: tuple | None = None) -> None:
        self.source_embedding.build((None, None))
        self.target_embedding.build((None, None))
        for index, (encoder, decoder) in enumerate(zip(self.encoder_layers, self.decoder_layers)):
            input_dim = self.embedding_dim if index == 0 else self.hidden_dim
            encoder.build((None, None, input_dim))
            decoder.build((None, None, input_dim))
        self.output_dense.build((None, self.hidden_dim))
        self.built = True

    def encode(self, source_ids: Tensor, training: bool = False) -> dict:
        """The final (h, c) of every encoder layer, after reading the source backwards.

        Returns:
            dict with ``states``: a tuple of ``(h, c)`` pairs, each (batch, hidden_dim).
        """
        source_ids = self.dropouts.words(source_ids, training)
        mask = ops.not_equal(source_ids, PAD_ID)
        if self.reverse_source:
            lengths = ops.sum(ops.cast(mask, "int32"), axis=1)
            source_ids = tensor_ops.reverse_within_lengths(source_ids, lengths)
        x = self.dropouts.embeddings(self.source_embedding(source_ids), training)
        states = []
        for index, layer in enumerate(self.encoder_layers):
            if index:  # the output of the layer below
                x = self.dropouts.annotations(x, training)
            x, h, c = layer(x, mask=mask, training=training)
            states.append((h, c))
        return {"states": tuple(states)}

    def initial_state(self, memory: dict) -> tuple:
        return memory["states"]

    def decode_step(self, previous_ids: Tensor, state: Any, memory: dict,
                    projection: tuple | None = None) -> tuple:
        """One decoder step; returns ``(logits, state, None)``. ``projection``: as for
        `RNNSearch.decode_step`."""
        x = self.target_embedding(previous_ids)
        new_state = []
        for layer, (h, c) in zip(self.decoder_layers, state):
            x, (h, c) = layer.cell(x, [h, c])
            new_state.append((h, c))
        if projection is None:
            return ops.cast(self.output_dense(x), "float32"), tuple(new_state), None
        kernel, bias = projection
        logits = ops.matmul(x, ops.cast(kernel, x.dtype)) + ops.cast(bias, x.dtype)
        return ops.cast(logits, "float32"), tuple(new_state), None

    def call(self, inputs: tuple, training: bool = False) -> Tensor:
        return ops.cast(self.output_dense(self.output_features(inputs, training=training)), "float32")

    def output_features(self, inputs: tuple, training: bool = False) -> Tensor:
        source_ids, target_input_ids = inputs
        state = self.encode(source_ids, training=training)["states"]
        x = self.dropouts.embeddings(self.target_embedding(target_input_ids), training)
        for index, (layer, (h, c)) in enumerate(zip(self.decoder_layers, state)):
            if index:  # the output of the layer below
                x = self.dropouts.annotations(x, training)
            x, _, _ = layer(x, initial_state=[h, c], training=training)
        return self.dropouts.readout(x, training)

    def output_projection(self) -> tuple:
        return self.output_dense.kernel, self.output_dense.bias


__all__ = ["RNNEncDec", "Seq2Seq"]
