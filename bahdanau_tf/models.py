"""The models: `RNNSearch` (the paper), `RNNEncDec` (its baseline) and `Seq2Seq` (Sutskever et al.).

All three share one interface (DESIGN §6), so training, beam search and export treat them alike:

- ``model((source_ids, target_input_ids), training=False) -> logits`` (teacher forcing),
  float32 (batch, target_len, target_vocabulary_size);
- ``model.encode(source_ids) -> memory``, a dict of tensors with a leading batch dimension;
- ``model.initial_state(memory) -> state``, a tensor or nest of tensors (batch, ...);
- ``model.decode_step(previous_ids, state, memory) -> (logits, state, attention)``, one decoder
  step; ``attention`` is (batch, source_len) float32, or None for models without attention.

Teacher forcing runs the same decoder cell as `decode_step`, over all steps in one
``tf.while_loop``; input projections and attention keys are computed before the loop and the
readout after it (DESIGN §2), so only the attention and the GRU recurrence run per step.

Presets are named dicts of constructor arguments (`RNNSearch.presets`); `from_preset` builds
one, and `model_from_preset` picks the class for a preset name.
"""

import functools

import keras
import tensorflow as tf

from bahdanau_tf import layers as layers_lib
from bahdanau_tf.special_tokens import PAD_ID

_SIZES = ("source_vocabulary_size", "target_vocabulary_size", "embedding_dim", "hidden_dim")
_PAPER_SIZES = dict(embedding_dim=620, hidden_dim=1000, maxout_dim=500)


class _TranslationModel(keras.Model):
    """What the three models share: presets, config, the step interface's documentation."""

    presets = {}

    def _store_config(self, sizes, **values):
        """Validates the positive ``sizes`` and keeps every constructor argument as an attribute;
        `get_config` returns exactly these."""
        _check_positive(**{name: values[name] for name in sizes})
        for name, value in values.items():
            setattr(self, name, value)
        self._config_names = list(values)

    @classmethod
    def from_preset(cls, name, **overrides):
        """Builds the model of a named preset; keyword arguments override the preset's values.

        Args:
            name: str, one of ``cls.presets``.
            **overrides: constructor arguments, e.g. ``source_vocabulary_size=8000``.
        """
        if name not in cls.presets:
            owner = _preset_owner(name)
            hint = f" It is a preset of {owner.__name__}." if owner is not None else ""
            raise ValueError(
                f"Unknown preset {name!r} for {cls.__name__}; choose one of {sorted(cls.presets)}.{hint}"
            )
        return cls(**{**cls.presets[name], **overrides})

    def get_config(self):
        return {**super().get_config(), **{name: getattr(self, name) for name in self._config_names}}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def initial_state(self, memory):
        raise NotImplementedError

    def attention_weights(self, inputs):
        """Teacher-forced attention (batch, target_len, source_len), or None without attention."""
        return None


def _preset_owner(name):
    for model_class in (RNNSearch, RNNEncDec, Seq2Seq):
        if name in model_class.presets:
            return model_class
    return None


def _split_preset_name(name):
    """``"rnnencdec-small"`` -> (RNNEncDec, "small"); a plain name -> (its first owner, name)."""
    for model_class, prefix in ((RNNEncDec, "rnnencdec-"), (Seq2Seq, "seq2seq-"), (RNNSearch, "rnnsearch-")):
        short = name[len(prefix):] if name.startswith(prefix) else None
        if short in ("small", "tiny"):
            return model_class, short
    return _preset_owner(name), name


def model_from_preset(name, **overrides):
    """The model of a preset name, whichever class owns it.

    ``small`` and ``tiny`` are RNNSearch's; ``rnnencdec-small``, ``seq2seq-tiny`` etc. name the
    baselines' reduced presets.

    Example:

    >>> model = model_from_preset("rnnencdec-30", source_vocabulary_size=100,
    ...                           target_vocabulary_size=100)
    >>> type(model).__name__
    'RNNEncDec'
    """
    owner, short = _split_preset_name(name)
    if owner is None:
        raise ValueError(f"Unknown preset {name!r}; choose one of {preset_names()}.")
    return owner.from_preset(short, **overrides)


def preset_names():
    """Every name `model_from_preset` accepts."""
    names = set(RNNSearch.presets) | set(RNNEncDec.presets) | set(Seq2Seq.presets)
    for prefix in ("rnnsearch-", "rnnencdec-", "seq2seq-"):
        names |= {prefix + "small", prefix + "tiny"}
    return sorted(names)


def model_from_config(class_name, config):
    """Rebuilds a model from ``type(model).__name__`` and ``model.get_config()``."""
    classes = {cls.__name__: cls for cls in (RNNSearch, RNNEncDec, Seq2Seq)}
    if class_name not in classes:
        raise ValueError(f"Unknown model class {class_name!r}; expected one of {sorted(classes)}.")
    return classes[class_name].from_config(config)


def _check_positive(**sizes):
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}.")


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class RNNSearch(_TranslationModel):
    """RNNsearch: bidirectional GRU encoder, additive attention, conditional GRU decoder with a
    maxout deep output (Bahdanau, Cho & Bengio 2015, section 3 and appendix A).

    Args:
        source_vocabulary_size: int, K_x (including the 4 special ids).
        target_vocabulary_size: int, K_y.
        embedding_dim: int, m (620 in the paper).
        hidden_dim: int, n, the size of each encoder direction and of the decoder (1000).
        attention_dim: int, n', the alignment model's hidden size (1000).
        maxout_dim: int, l, the number of maxout units (500).
        score: attention score, ``"additive"`` (the paper), ``"dot"`` or ``"general"`` (Luong).
            ``"dot"`` needs ``hidden_dim`` equal to the annotation size ``2 * hidden_dim``, so it
            is only possible via ``"general"`` here; it is kept for the layer.
        initialization: ``"paper"`` (appendix B.1: orthogonal recurrent matrices, N(0, 0.001^2)
            for W_a and U_a, zero v_a and biases, N(0, 0.01^2) elsewhere) or ``"keras"``
            (orthogonal recurrent matrices, Glorot-uniform elsewhere, U(-0.05, 0.05)
            embeddings). The paper presets use ``"paper"``; ``small`` uses ``"keras"``: with Adam
            and a 12-minute budget the paper's tiny weights learn several times slower (dev NLL
            3.39 against 4.01 after 4.5 minutes of the default run, Adam 5e-3).

    Example:

    >>> model = RNNSearch.from_preset("tiny", source_vocabulary_size=50, target_vocabulary_size=60)
    >>> source = tf.constant([[5, 6, 7, 2]])
    >>> target_in = tf.constant([[1, 8, 9]])
    >>> tuple(model((source, target_in)).shape)
    (1, 3, 60)
    """

    presets = {
        "rnnsearch-50": dict(
            source_vocabulary_size=30000, target_vocabulary_size=30000, attention_dim=1000, **_PAPER_SIZES
        ),
        "rnnsearch-30": dict(
            source_vocabulary_size=30000, target_vocabulary_size=30000, attention_dim=1000, **_PAPER_SIZES
        ),
        "small": dict(
            source_vocabulary_size=8000,
            target_vocabulary_size=8000,
            embedding_dim=128,
            hidden_dim=256,
            attention_dim=256,
            maxout_dim=128,
            initialization="keras",
        ),
        "tiny": dict(
            source_vocabulary_size=64, target_vocabulary_size=64, embedding_dim=16, hidden_dim=24,
            attention_dim=20, maxout_dim=12,
        ),
    }

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=620,
        hidden_dim=1000,
        attention_dim=1000,
        maxout_dim=500,
        score="additive",
        initialization="paper",
        **kwargs,
    ):
        super().__init__(**kwargs)
        init = functools.partial(layers_lib.initializer_for, initialization)  # a new instance per layer
        # === Config ===
        self._store_config(
            _SIZES + ("attention_dim", "maxout_dim"),
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            embedding_dim=embedding_dim,
            hidden_dim=hidden_dim,
            attention_dim=attention_dim,
            maxout_dim=maxout_dim,
            score=score,
            initialization=initialization,
        )
        # === Layers ===
        self.encoder = layers_lib.BidirectionalEncoder(
            source_vocabulary_size,
            embedding_dim,
            hidden_dim,
            kernel_initializer=init("kernel"),
            bias_initializer=init("bias"),
            embeddings_initializer=init("embedding"),
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
        self.decoder_cell = layers_lib.AttentionGRUCell(
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
            dtype=self.dtype_policy,
            name="readout",
        )

    def build(self, input_shape=None):
        annotation_dim = 2 * self.hidden_dim
        self.encoder.build((None, None))
        self.initial_state_dense.build((None, self.hidden_dim))
        self.target_embedding.build((None, None))
        self.decoder_cell.build(input_dim=self.embedding_dim, memory_dim=annotation_dim)
        self.readout.build(state_dim=self.hidden_dim, embedding_dim=self.embedding_dim, context_dim=annotation_dim)
        self.built = True

    def encode(self, source_ids, training=False):
        """Annotations, attention keys U_a h_j and the source mask: the decoder's memory.

        Args:
            source_ids: int (batch, source_len), padded with 0; ends with the end id.

        Returns:
            dict with ``annotations`` (batch, source_len, 2n), ``keys`` (batch, source_len, n'),
            ``mask`` bool (batch, source_len).
        """
        annotations, mask = self.encoder(source_ids, training=training)
        return self.decoder_cell.prepare_memory(annotations, mask)

    def initial_state(self, memory):
        """s_0 = tanh(W_s h<-_1), from the backward encoder state at the first source word."""
        backward_first = memory["annotations"][:, 0, self.hidden_dim :]
        return self.initial_state_dense(backward_first)

    def decode_step(self, previous_ids, state, memory):
        """One decoder step.

        Args:
            previous_ids: int (batch,), y_{i-1}.
            state: (batch, n), s_{i-1}.
            memory: `encode`'s output (rows aligned with ``previous_ids``).

        Returns:
            ``(logits, state, attention)``: float32 (batch, K_y), (batch, n), float32
            (batch, source_len).
        """
        embedded = self.target_embedding(previous_ids)
        state, context, attention = self.decoder_cell(self.decoder_cell.project_inputs(embedded), state, memory)
        return self.readout(state, embedded, context), state, attention

    def _teacher_forcing(self, inputs, training=False):
        source_ids, target_input_ids = inputs
        memory = self.encode(source_ids, training=training)
        initial_state = self.initial_state(memory)
        embedded = self.target_embedding(target_input_ids)  # (batch, target_len, m)
        projected = self.decoder_cell.project_inputs(embedded)  # (batch, target_len, 3n), before the loop
        batch = tf.shape(source_ids)[0]
        dtype = initial_state.dtype

        def step(carry, projected_t):
            return self.decoder_cell(projected_t, carry[0], memory)

        with layers_lib.weights_read_once(self.decoder_cell):  # not once per step (see there)
            states, contexts, attention = tf.scan(
                step,
                layers_lib.time_major(projected),
                initializer=(
                    initial_state,
                    tf.zeros([batch, 2 * self.hidden_dim], dtype),
                    tf.zeros(tf.shape(source_ids), "float32"),
                ),
            )
        states, contexts = layers_lib.stack_time(states), layers_lib.stack_time(contexts)
        # readout and vocabulary projection for all steps in one batched matmul, after the loop
        logits = self.readout(states, embedded, contexts)
        return logits, layers_lib.stack_time(attention)

    def call(self, inputs, training=False):
        return self._teacher_forcing(inputs, training=training)[0]

    def attention_weights(self, inputs):
        """alpha_ij of the reference translation (teacher forcing): (batch, target_len, source_len)."""
        return self._teacher_forcing(inputs)[1]


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class RNNEncDec(_TranslationModel):
    """RNNencdec, the paper's baseline (Cho et al. 2014a): one fixed-length context vector.

    A unidirectional GRU reads the source; its last state gives c = tanh(V h_Tx). The decoder is
    the same conditional GRU as RNNsearch's, but reads the same c at every step, starts from
    s_0 = tanh(V' c), and has the same maxout readout (with c in place of c_i).

    Args:
        source_vocabulary_size, target_vocabulary_size, embedding_dim, hidden_dim, maxout_dim,
        initialization: as in `RNNSearch` (no attention sizes).
    """

    presets = {
        "rnnencdec-50": dict(source_vocabulary_size=30000, target_vocabulary_size=30000, **_PAPER_SIZES),
        "rnnencdec-30": dict(source_vocabulary_size=30000, target_vocabulary_size=30000, **_PAPER_SIZES),
        "small": dict(
            source_vocabulary_size=8000, target_vocabulary_size=8000, embedding_dim=128, hidden_dim=256, maxout_dim=128,
            initialization="keras",
        ),
        "tiny": dict(
            source_vocabulary_size=64, target_vocabulary_size=64, embedding_dim=16, hidden_dim=24, maxout_dim=12
        ),
    }

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=620,
        hidden_dim=1000,
        maxout_dim=500,
        initialization="paper",
        **kwargs,
    ):
        super().__init__(**kwargs)
        init = functools.partial(layers_lib.initializer_for, initialization)  # a new instance per layer
        # === Config ===
        self._store_config(
            _SIZES + ("maxout_dim",),
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            embedding_dim=embedding_dim,
            hidden_dim=hidden_dim,
            maxout_dim=maxout_dim,
            initialization=initialization,
        )
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
            recurrent_initializer=layers_lib.BlockOrthogonal(),
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
        self.readout = layers_lib.MaxoutReadout(maxout_dim, target_vocabulary_size, name="readout", **dense())

    def build(self, input_shape=None):
        n = self.hidden_dim
        self.source_embedding.build((None, None))
        self.encoder_gru.build((None, None, self.embedding_dim))
        self.context_dense.build((None, n))
        self.initial_state_dense.build((None, n))
        self.target_embedding.build((None, None))
        self.decoder_cell.build(input_dim=self.embedding_dim, context_dim=n)
        self.readout.build(state_dim=n, embedding_dim=self.embedding_dim, context_dim=n)
        self.built = True

    def encode(self, source_ids, training=False):
        """The fixed context c = tanh(V h_Tx) and its projection into the decoder's gates.

        Returns:
            dict with ``context`` (batch, n) and ``projected_context`` (batch, 3n).
        """
        mask = tf.not_equal(source_ids, PAD_ID)
        last_state = self.encoder_gru(self.source_embedding(source_ids), mask=mask, training=training)
        context = self.context_dense(last_state)
        return {"context": context, "projected_context": self.decoder_cell.project_context(context)}

    def initial_state(self, memory):
        """s_0 = tanh(V' c)."""
        return self.initial_state_dense(memory["context"])

    def decode_step(self, previous_ids, state, memory):
        """One decoder step; returns ``(logits, state, None)`` (there is no attention)."""
        embedded = self.target_embedding(previous_ids)
        state = self.decoder_cell(self.decoder_cell.project_inputs(embedded), state, memory["projected_context"])
        return self.readout(state, embedded, memory["context"]), state, None

    def call(self, inputs, training=False):
        source_ids, target_input_ids = inputs
        memory = self.encode(source_ids, training=training)
        embedded = self.target_embedding(target_input_ids)
        projected = self.decoder_cell.project_inputs(embedded)
        # c is the same at every step: its projection is computed once, outside the loop
        projected_context = memory["projected_context"]
        with layers_lib.weights_read_once(self.decoder_cell):
            states = tf.scan(
                lambda state, projected_t: self.decoder_cell(projected_t, state, projected_context),
                layers_lib.time_major(projected),
                initializer=self.initial_state(memory),
            )
        states = layers_lib.stack_time(states)
        contexts = tf.broadcast_to(memory["context"][:, None, :], tf.shape(states))
        return self.readout(states, embedded, contexts)


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class Seq2Seq(_TranslationModel):
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
    """

    presets = {
        "seq2seq": dict(
            source_vocabulary_size=160000, target_vocabulary_size=80000, embedding_dim=1000, hidden_dim=1000,
            num_layers=4,
        ),
        "small": dict(
            source_vocabulary_size=8000, target_vocabulary_size=8000, embedding_dim=128, hidden_dim=256, num_layers=2
        ),
        "tiny": dict(
            source_vocabulary_size=64, target_vocabulary_size=64, embedding_dim=16, hidden_dim=24, num_layers=2
        ),
    }

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=1000,
        hidden_dim=1000,
        num_layers=4,
        reverse_source=True,
        init_scale=0.08,
        **kwargs,
    ):
        super().__init__(**kwargs)
        # === Config ===
        self._store_config(
            _SIZES + ("num_layers",),
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            embedding_dim=embedding_dim,
            hidden_dim=hidden_dim,
            num_layers=num_layers,
            reverse_source=bool(reverse_source),
            init_scale=float(init_scale),
        )
        # === Layers ===
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
        self.encoder_layers = [
            keras.layers.LSTM(
                hidden_dim, return_sequences=True, return_state=True, name=f"encoder_lstm_{i}", **weights()
            )
            for i in range(num_layers)
        ]
        self.decoder_layers = [
            keras.layers.LSTM(
                hidden_dim, return_sequences=True, return_state=True, name=f"decoder_lstm_{i}", **weights()
            )
            for i in range(num_layers)
        ]
        self.output_dense = keras.layers.Dense(
            target_vocabulary_size, kernel_initializer=uniform(), dtype=self.dtype_policy, name="output"
        )

    def build(self, input_shape=None):
        self.source_embedding.build((None, None))
        self.target_embedding.build((None, None))
        for index, (encoder, decoder) in enumerate(zip(self.encoder_layers, self.decoder_layers)):
            input_dim = self.embedding_dim if index == 0 else self.hidden_dim
            encoder.build((None, None, input_dim))
            decoder.build((None, None, input_dim))
        self.output_dense.build((None, self.hidden_dim))
        self.built = True

    def encode(self, source_ids, training=False):
        """The final (h, c) of every encoder layer, after reading the source backwards.

        Returns:
            dict with ``states``: a tuple of ``(h, c)`` pairs, each (batch, hidden_dim).
        """
        mask = tf.not_equal(source_ids, PAD_ID)
        if self.reverse_source:
            lengths = tf.reduce_sum(tf.cast(mask, "int32"), axis=1)
            source_ids = tf.reverse_sequence(source_ids, lengths, seq_axis=1, batch_axis=0)
        x = self.source_embedding(source_ids)
        states = []
        for layer in self.encoder_layers:
            x, h, c = layer(x, mask=mask, training=training)
            states.append((h, c))
        return {"states": tuple(states)}

    def initial_state(self, memory):
        return memory["states"]

    def decode_step(self, previous_ids, state, memory):
        """One decoder step; returns ``(logits, state, None)``."""
        x = self.target_embedding(previous_ids)
        new_state = []
        for layer, (h, c) in zip(self.decoder_layers, state):
            x, (h, c) = layer.cell(x, [h, c])
            new_state.append((h, c))
        return tf.cast(self.output_dense(x), "float32"), tuple(new_state), None

    def call(self, inputs, training=False):
        source_ids, target_input_ids = inputs
        state = self.encode(source_ids, training=training)["states"]
        x = self.target_embedding(target_input_ids)
        for layer, (h, c) in zip(self.decoder_layers, state):
            x, _, _ = layer(x, initial_state=[h, c], training=training)
        return tf.cast(self.output_dense(x), "float32")


__all__ = ["RNNSearch", "RNNEncDec", "Seq2Seq", "model_from_preset", "model_from_config"]
