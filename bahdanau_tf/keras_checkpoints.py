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

A saved model's ``model.weights.h5`` is read by Keras (`load_weights_file`), once it is known to
hold this model's weights and nothing else: Keras gives each of the model's layers the entries
at its own path and ignores the rest, so another model's file (``rnnsearch-cgru-tiny``'s, whose
extra layer ``tiny`` lacks) would load without a word. A model that held an alignment head
among its own layers (``alignment_head`` in its config) wrote the head's entries beside its
own; its file loads into the task it now is, `bahdanau_tf.models.RNNSearchAligner`.
"""

import collections
import contextlib
import os
import tempfile

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


def restore_failure(model: keras.Model, prefix: str) -> str | None:
    """`restore_model_checkpoint`, with TensorFlow's Python log quiet meanwhile: None when the
    checkpoint fits, else the first line of why not (its error, and the warnings TensorFlow logs
    when the failed restore's objects are deleted with it, go inside)."""
    with _quiet_tensorflow_log():
        try:
            restore_model_checkpoint(model, prefix)
        except (AssertionError, ValueError, tf.errors.OpError) as error:
            return _first_line(error)
    return None


@contextlib.contextmanager
def _quiet_tensorflow_log():
    """TensorFlow's Python log at ERROR for a while: a checkpoint deleted with values it did
    not restore logs warnings that say nothing to a user who is told why the restore failed."""
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        yield
    finally:
        logger.setLevel(level)


def _first_line(error):
    """The first line of ``error``'s message, or its type's name."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


# === A Keras weights file (model.save_weights) ===

#: the group a compiled model's ``save_weights`` adds beside its own layers' (not the model's)
_OPTIMIZER = "optimizer"


def weights_file_shapes(path: str) -> dict:
    """``{entry: shape}`` of the model weights in a Keras weights file (names and shapes, no
    values read), less a compiled model's optimizer state.

    Raises:
        OSError: not an HDF5 file (empty, cut short, another format).
    """
    import h5py  # Keras's own dependency, which reads and writes these files

    shapes = {}
    with h5py.File(path, "r") as handle:
        handle.visititems(lambda name, item: shapes.__setitem__(name, tuple(item.shape))
                          if isinstance(item, h5py.Dataset) and name.split("/")[0] != _OPTIMIZER
                          else None)
    return shapes


def load_weights_file(model: keras.Model, path: str) -> None:
    """``model.load_weights(path)`` once the file holds as many weights as ``model``, of the same
    shapes: Keras then checks each layer's entries (count and shapes), and since every weight
    reads an entry of its own, none is left over.

    Raises:
        OSError: not an HDF5 file.
        ValueError: another model's weights (more, fewer, or other shapes), the first difference named.
    """
    theirs = collections.Counter(weights_file_shapes(path).values())
    ours = collections.Counter(tuple(weight.shape) for weight in model.weights)
    if theirs != ours:
        extra, missing = sorted(theirs - ours), sorted(ours - theirs)
        differ = ", ".join(([f"{len(extra)} not of this model ({_shapes(extra)})"] if extra else [])
                           + ([f"none for {len(missing)} of its ({_shapes(missing)})"] if missing else []))
        raise ValueError(f"it holds {theirs.total()} weights where the model has {ours.total()}: {differ}")
    if getattr(model, "backbone", None) is None or not _head_inside_the_model(path):
        model.load_weights(path)
        return
    with _task_layout(path) as rewritten:
        model.load_weights(rewritten)


#: the group of the alignment head's entries in a weights file, the task's and the model's alike
_HEAD = "head"


def _head_inside_the_model(path):
    """True for the weights file of a model that held its alignment head among its own layers
    (config key ``alignment_head``): the head's entries under ``head/``, the model's at the root."""
    import h5py  # Keras's own dependency

    with h5py.File(path, "r") as handle:
        return _HEAD in handle and "backbone" not in handle


@contextlib.contextmanager
def _task_layout(path):
    """Such a file laid out as its task's (`bahdanau_tf.models.RNNSearchAligner`): the model's
    entries below ``backbone/``, the head's where they were; a temporary file, removed after."""
    import h5py  # Keras's own dependency

    with tempfile.TemporaryDirectory() as scratch:
        rewritten = os.path.join(scratch, "task.weights.h5")
        with h5py.File(path, "r") as old, h5py.File(rewritten, "w") as new:
            for key in old:
                if key != _OPTIMIZER:
                    old.copy(old[key], new, name=key if key == _HEAD else f"backbone/{key}")
        yield rewritten


def _shapes(shapes, most=3):
    """``(24, 48), (72,)`` and how many more."""
    shown = ", ".join(str(shape) for shape in shapes[:most])
    return shown + (f" and {len(shapes) - most} more" if len(shapes) > most else "")


__all__ = ["checkpoint_model_variables", "model_variable_paths", "restore_model_checkpoint",
           "restore_failure", "weights_file_shapes", "load_weights_file"]
