"""What is backend-specific about running the search: compiling it as a whole.

The search itself is written once, in ``keras.ops`` (`bahdanau_tf.decoding.search`), and runs on
every Keras backend; `compiled` compiles a function of it the way the running backend compiles a
whole loop, as keras-hub's ``generate`` does: ``jax.jit`` on JAX, ``tf.function`` with XLA on
TensorFlow, eagerly on PyTorch.
"""

import keras


def compiled(function, variables):
    """``function`` compiled the way the running Keras backend compiles a whole loop.

    JAX: ``jax.jit``, the variables' values handed in as arguments and read through a
    ``keras.StatelessScope`` (as keras-hub's ``generate`` does), so the weights are not baked
    into the program; one compilation per input shape. TensorFlow: ``tf.function`` with
    ``jit_compile=True``. PyTorch: eagerly, without gradients (``keras.ops.while_loop`` is a
    Python loop there).

    Args:
        function: ``(*arrays) -> outputs``, in ``keras.ops``.
        variables: the Keras variables ``function`` reads.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        def stateless(values, *args):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return function(*args)

        jitted = jax.jit(stateless)
        return lambda *args: jitted([variable.value for variable in variables], *args)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(function, jit_compile=True, autograph=False)
    if backend == "torch":
        import torch

        def without_gradients(*args):
            with torch.no_grad():
                return function(*args)

        return without_gradients
    return function


__all__ = ["compiled"]
