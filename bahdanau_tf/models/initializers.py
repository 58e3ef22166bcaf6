"""The paper's initialisation (appendix B.1) and Keras's, by role, for the layers and models.

- `BlockOrthogonal`: random orthogonal square blocks, for the recurrent matrices U, U_z, U_r.
- `paper_initializers` / `keras_initializers` / `initializers_for` / `initializer_for`: new
  initializer instances by role (``"kernel"``, ``"attention"``, ``"bias"``, ``"score_vector"``,
  ``"embedding"``).
- `own_draw`: a copy of an initializer that draws values of its own for one weight.
"""

import zlib

import keras
from keras import ops

from bahdanau_tf.models.tensor_ops import Tensor


@keras.saving.register_keras_serializable(package="bahdanau_tf")
class BlockOrthogonal(keras.initializers.Initializer):
    """Random orthogonal square blocks side by side: ``[Q_1 | Q_2 | ...]``, shape ``(..., n, k * n)``.

    The paper initialises each recurrent matrix (U, U_z, U_r) as a random orthogonal matrix. Our
    cells keep U_z and U_r in one ``(n, 2n)`` kernel, and Keras's ``Orthogonal`` would make the rows
    of that whole kernel orthonormal instead of each ``n x n`` block orthogonal; this initializer
    does the latter. Leading dimensions (e.g. the two encoder directions) get independent blocks.

    Args:
        seed: optional int.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def __call__(self, shape: tuple, dtype: str | None = None) -> Tensor:
        rows, cols = int(shape[-2]), int(shape[-1])
        if cols % rows:
            raise ValueError(f"BlockOrthogonal needs a shape (..., n, k * n), got {tuple(shape)}.")
        count = cols // rows
        for dim in shape[:-2]:
            count *= int(dim)
        blocks = []
        for index in range(count):
            seed = None if self.seed is None else self.seed + index
            blocks.append(keras.initializers.Orthogonal(seed=seed)((rows, rows), dtype=dtype))
        matrix = ops.concatenate(blocks, axis=1)  # (n, count * n)
        leading = [int(d) for d in shape[:-2]]
        if not leading:
            return matrix
        matrix = ops.reshape(matrix, (rows, -1, cols))  # (n, prod(leading), k * n)
        return ops.reshape(ops.transpose(matrix, (1, 0, 2)), tuple(leading) + (rows, cols))

    def get_config(self) -> dict:
        return {"seed": self.seed}


def paper_initializers() -> dict:
    """Initializers of appendix B.1, by role (also used by the models' paper presets)."""
    return {
        "kernel": keras.initializers.RandomNormal(stddev=0.01),
        "attention": keras.initializers.RandomNormal(stddev=0.001),
        "bias": keras.initializers.Zeros(),
        "score_vector": keras.initializers.Zeros(),
        "embedding": keras.initializers.RandomNormal(stddev=0.01),
    }


def keras_initializers() -> dict:
    """Keras's usual defaults, by role (the ``initialization="keras"`` option)."""
    return {
        "kernel": keras.initializers.GlorotUniform(),
        "attention": keras.initializers.GlorotUniform(),
        "bias": keras.initializers.Zeros(),
        "score_vector": keras.initializers.GlorotUniform(),
        "embedding": keras.initializers.RandomUniform(-0.05, 0.05),
    }


def initializers_for(initialization: str) -> dict:
    """New initializers by role for ``"paper"`` or ``"keras"``; each call makes new instances."""
    if initialization == "paper":
        return paper_initializers()
    if initialization == "keras":
        return keras_initializers()
    raise ValueError(f'`initialization` must be "paper" or "keras", got {initialization!r}.')


def initializer_for(initialization, role):
    """A new initializer of one role (``"kernel"``, ``"embedding"``, ...): give one to each layer.

    Keras 3 fixes an unseeded random initializer's seed when the initializer is created, so one
    instance passed to two layers would give them the same values.
    """
    return initializers_for(initialization)[role]


def own_draw(initializer, layer, weight_name):
    """A copy of ``initializer`` that draws values of its own for one weight (appendix B.1
    samples every matrix independently).

    Keras 3 fixes an unseeded initializer's seed when the initializer is created, so one instance
    used for two weights gives the same values (or, for other shapes, the same leading values:
    W_a would equal the first rows of U_a). An unseeded copy draws a new seed (from Python's
    ``random``, which `keras.utils.set_random_seed` seeds: runs stay repeatable); a seeded one
    gets its seed plus a number derived from the layer's and the weight's name, so its values
    stay repeatable and still differ between weights.
    """
    config = initializer.get_config()
    seed = config.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        config["seed"] = (seed + zlib.crc32(f"{layer.name}/{weight_name}".encode())) % (2**31 - 1)
    return initializer.__class__.from_config(config)


def add_own_weight(layer, name, shape, initializer):
    """``layer.add_weight`` with values drawn for this weight alone (`own_draw`)."""
    return layer.add_weight(name=name, shape=shape, initializer=own_draw(initializer, layer, name))


__all__ = ["BlockOrthogonal", "add_own_weight", "paper_initializers", "keras_initializers", "initializers_for",
           "initializer_for", "own_draw"]
