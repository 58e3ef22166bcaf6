"""A trainer's TensorFlow checkpoint, read on any Keras backend.

A training run keeps its state in TensorFlow checkpoints (``checkpoints/``, ``best/``,
``averaged/`` of `bahdanau_tf.model_directory`): the TensorFlow trainer resumes from them
exactly (model, optimizer, step, counters), which only a ``tf.train.Checkpoint`` holds. A saved
model's weights are Keras's own ``model.weights.h5`` instead, which every backend reads; this
module is what lets JAX and PyTorch read a run directory's checkpoints (and a directory
``save_to_preset`` wrote before ``model.weights.h5``), and what checkpoint averaging uses to
compare the checkpoints' model variables.

On TensorFlow the model is the checkpoint's object graph itself. On another backend a model is
no TensorFlow object: its variables are found by the attribute paths TensorFlow's object graph
gives them (``model/encoder/kernel``, ``model/initial_state_dense/_kernel``: each layer's
attributes, breadth first, the shortest path of each variable; a PyTorch layer keeps its
sublayers in ``_modules``, not among its attributes), and the checkpoint is read into those paths.
"""

import collections

import keras
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2


def checkpoint_model_variables(prefix: str) -> dict:
    """``{path below the model: checkpoint key}`` of the model's variables in a checkpoint.

    Found by walking the checkpoint's object graph from its ``model`` child (breadth first: a
    variable's shortest path), so neither the optimizer's slots nor the step are included, and
    a model variable whose key the checkpoint files under ``optimizer/`` (a trainer's
    checkpoint saves each variable once, under the first path that reaches it) is.
    """
    reader = tf.train.load_checkpoint(prefix)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    queue = collections.deque((child.node_id, "model") for child in graph.nodes[0].children
                              if child.local_name == "model")
    found, seen = {}, set()
    while queue:
        node_id, path = queue.popleft()
        if node_id in seen:
            continue
        seen.add(node_id)
        for attribute in graph.nodes[node_id].attributes:
            if attribute.name == "VARIABLE_VALUE":
                found[path] = attribute.checkpoint_key
        queue.extend((child.node_id, f"{path}/{child.local_name}") for child in graph.nodes[node_id].children)
    return found


def model_variable_paths(model: keras.Model) -> dict:
    """``{path: variable}``: each variable of ``model`` at its shortest attribute path from
    ``"model"`` through layers, as TensorFlow's object graph of the model names it."""
    found, seen = {}, set()
    queue = collections.deque([(model, "model")])
    while queue:
        node, path = queue.popleft()
        if id(node) in seen:
            continue
        seen.add(id(node))
        attributes = dict(vars(node))
        attributes.update(getattr(node, "_modules", None) or {})  # PyTorch's sublayers live there
        for name, value in attributes.items():
            if isinstance(value, keras.Variable) and id(value) not in found:
                found[id(value)] = (f"{path}/{name}", value)
            elif isinstance(value, keras.layers.Layer):
                queue.append((value, f"{path}/{name}"))
    return dict(found.values())


def restore_model_checkpoint(model: keras.Model, prefix: str) -> None:
    """Assigns a checkpoint's values to a built ``model``'s variables, on any backend.

    Raises:
        AssertionError, ValueError, tf.errors.OpError: the checkpoint does not hold this model
            (a variable missing or of another shape).
    """
    if keras.backend.backend() == "tensorflow":
        tf.train.Checkpoint(model=model).restore(prefix).expect_partial().assert_existing_objects_matched()
        return
    keys = checkpoint_model_variables(prefix)
    reader = tf.train.load_checkpoint(prefix)
    for path, variable in model_variable_paths(model).items():
        if path not in keys:
            raise AssertionError(f"The checkpoint holds no value for {path}.")
        value = np.asarray(reader.get_tensor(keys[path]))
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(f"{path} is {tuple(value.shape)} in the checkpoint, "
                             f"{tuple(variable.shape)} in the model.")
        variable.assign(value.astype(variable.dtype))


__all__ = ["checkpoint_model_variables", "model_variable_paths", "restore_model_checkpoint"]
