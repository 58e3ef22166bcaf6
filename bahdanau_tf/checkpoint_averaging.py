"""Checkpoint averaging: the mean of a run's checkpoints' model weights, and the checkpoints it takes.

One module for every average the package makes:

- `average_checkpoints`: ``bahdanau-average``'s, the last N checkpoints of a finished run, written
  as ``OUT/averaged/`` or as a model directory of its own;
- the trainer's at the end of a run (`TrainingConfig.average_last`): `checkpoints_to_average`
  (the run's last checkpoints, or those around its best dev point, `AroundBest`), then
  `averaged_weights` (the model holds the average while it is evaluated and written,
  `write_averaged`), and `averaged_best` when the run is resumed;
- which checkpoints a run keeps (`keep_run_checkpoints`) and lists (`run_checkpoints`), so that
  a resumed run averages the checkpoints the uninterrupted one would.

It sits above `bahdanau_tf.model_directory` (the layout, ``model.json`` and its ``"averaged"``
record) and below the trainer and the command lines.
"""

import contextlib
import glob
import os
import re

import tensorflow as tf

from bahdanau_tf import files
from bahdanau_tf import keras_checkpoints
from bahdanau_tf import model_directory
from bahdanau_tf import pretrained
from bahdanau_tf import text

#: the directory of `AroundBest`'s copies inside a run's output directory
AROUND_BEST = "around_best"


def checkpoint_number(path: str) -> int:
    """The N of ``.../ckpt-N`` (-1 when the name has none)."""
    tail = os.path.basename(path).rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


# === The run's checkpoints ===

def run_checkpoints(directory: str) -> list:
    """The checkpoints of a run's ``checkpoints/`` (those its ``checkpoint`` state file keeps,
    less any whose deletion began: `kept_checkpoints`), oldest first."""
    state = model_directory.checkpoint_state(os.path.join(directory, model_directory.CHECKPOINTS))
    paths = list(state.all_model_checkpoint_paths) if state is not None else []
    return kept_checkpoints(sorted(paths, key=checkpoint_number))


def kept_checkpoints(paths: list) -> list:
    """``paths`` (a run's checkpoints, oldest first) less those a killed run was deleting.

    ``tf.train.CheckpointManager`` (and `keep_run_checkpoints`) records a new checkpoint,
    removes the oldest one's ``.index``, then its data, and only then records the state without
    it: so a listed checkpoint before the last whose ``.index`` is gone is one whose deletion
    was interrupted, no longer part of the run (the resumed run deletes what is left of it).
    The last is always kept: a missing ``.index`` there is damage, which its readers report.
    """
    return [path for path in paths[:-1] if tf.io.gfile.exists(path + ".index")] + paths[-1:]


def keep_run_checkpoints(directory: str, keep: int, every: int) -> list:
    """After a save into ``directory/checkpoints/``: keeps the last ``keep`` of the checkpoints
    at multiples of ``every`` (the run's cadence, ``checkpoint_every``) and the latest, whatever
    its step; deletes the others. Returns the kept paths, oldest first.

    A checkpoint off the cadence (the one a signal saved, or the end of a run that a later one
    goes past) is a point to resume from, not one of the run's checkpoints: it is kept until the
    next save, and meanwhile takes no older checkpoint's place. So a resumed run keeps (and
    averages, `checkpoints_to_average`) the checkpoints the uninterrupted one keeps; for an
    uninterrupted run this is ``tf.train.CheckpointManager(max_to_keep=keep)``'s rule. The
    state file names the kept ones by file name (`model_directory.write_checkpoint_state`):
    a copied or moved run keeps, and deletes, its own checkpoints only.
    """
    folder = os.path.join(directory, model_directory.CHECKPOINTS)
    state = model_directory.checkpoint_state(folder)
    if state is None:
        return []
    paths, latest = list(state.all_model_checkpoint_paths), state.model_checkpoint_path
    kept = [path for path in paths if path == latest or checkpoint_number(path) % every == 0][-keep:]
    for path in (path for path in paths if path not in kept):  # as tf.train.CheckpointManager: the .index first, then the data
        for name in [path + ".index", *sorted(tf.io.gfile.glob(glob.escape(path) + ".data-*"))]:
            if tf.io.gfile.exists(name):
                tf.io.gfile.remove(name)
    stamps = dict(zip(paths, state.all_model_checkpoint_timestamps))
    del state.all_model_checkpoint_paths[:], state.all_model_checkpoint_timestamps[:]
    state.all_model_checkpoint_paths.extend(kept)
    state.all_model_checkpoint_timestamps.extend(stamps[path] for path in kept if stamps)
    model_directory.write_checkpoint_state(folder, state)
    return kept


# === The average ===

def _model_variable_shapes(prefix):
    """``{path: shape}`` of the model's variables in a checkpoint (`keras_checkpoints.checkpoint_model_variables`)."""
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    return {path: tuple(shapes[key]) for path, key in keras_checkpoints.checkpoint_model_variables(prefix).items()}


def _restore_model_weights(model, prefix):
    """``model``'s variables as they are in ``prefix``; ValueError naming it when they do not fit."""
    try:
        tf.train.Checkpoint(model=model).restore(prefix).expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as error:
        cause = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"The checkpoint {prefix!r} does not hold the model of "
                         f"{model_directory.MODEL_CONFIG} (from another config?): {cause}") from None
    return [variable.numpy() for variable in model.variables]


def _chosen_checkpoints(directory, last):
    """The last ``last`` checkpoints of the run, checked whole and of one model."""
    if isinstance(last, bool) or not isinstance(last, int) or last < 1:
        raise ValueError(f"`last` must be a positive int, got {last!r}.")
    available = run_checkpoints(directory)
    if last > len(available):
        names = ", ".join(os.path.basename(path) for path in available) or "none"
        raise ValueError(f"Cannot average the last {last} checkpoints: {os.fspath(directory)!r} "
                         f"keeps {len(available)} in {model_directory.CHECKPOINTS}/ ({names}); train "
                         "with a larger --keep_checkpoints, or pass a smaller --last.")
    chosen = available[-last:]
    for path in chosen:
        missing = model_directory.checkpoint_problems(path)
        if missing:
            raise ValueError(f"The checkpoint {path!r} is damaged: {', '.join(missing)}.")
    first = _model_variable_shapes(chosen[0])
    for path in chosen[1:]:
        shapes = _model_variable_shapes(path)
        if shapes != first:
            differ = sorted(set(shapes.items()) ^ set(first.items()))[0][0]
            raise ValueError(f"The checkpoints {chosen[0]!r} and {path!r} hold different models "
                             f"(e.g. {differ}): they cannot be averaged.")
    return chosen


def _averaged_weights(model, chosen):
    """The mean of each floating-point model variable over the checkpoints ``chosen`` (float64
    sums); other variables (e.g. a random seed's state) are the last checkpoint's."""
    total = None
    for path in chosen:
        values = _restore_model_weights(model, path)
        if total is None:
            total = [value.astype("float64") if value.dtype.kind == "f" else value for value in values]
        else:
            total = [t + v if v.dtype.kind == "f" else v for t, v in zip(total, values)]
    return [value / len(chosen) if value.dtype.kind == "f" else value for value in total]


def average_checkpoints(directory: str | os.PathLike, last: int, output: str | None = None) -> str:
    """Averages the model weights of a run's last ``last`` checkpoints; returns the new checkpoint.

    Each model variable becomes its mean over the checkpoints ``checkpoints/ckpt-*`` of the
    ``last`` highest steps (the optimizer's slots and the training state are left out: the
    result cannot resume training). Without ``output`` it is written as ``averaged/`` beside
    ``best/`` (replacing an earlier average), which ``which="averaged"`` selects
    (`model_directory.load_model_directory`, ``--checkpoint=averaged`` of translate, evaluate
    and export); with ``output``, as a new model directory of its own (a ``save_to_preset`` one
    whose `model_directory.WEIGHTS` file is the average: every ``which`` loads it). Either way
    ``model.json`` records it: ``"averaged": {"last": N, "checkpoints": ["ckpt-800", ...],
    "steps": [...]}``.

    Args:
        directory: a ``bahdanau-train`` output directory.
        last: int >= 1, how many of the latest checkpoints to average.
        output: optional new (or empty) directory for a standalone averaged model directory.

    Returns:
        str, the averaged checkpoint's path (with ``output``, its weights file's).

    Raises:
        ValueError: ``last`` exceeds the checkpoints kept, a checkpoint is damaged or holds
            another model than ``model.json`` (or than the other checkpoints), or a shipped
            model (no checkpoints).
        FileExistsError: ``output`` is not empty, or a trainer is writing into ``directory``.
        FileNotFoundError: not a model directory.

    Example:

        path = average_checkpoints("runs/small", last=5)
        translator = Translator.from_directory("runs/small", which="averaged")
    """
    directory = os.fspath(pretrained.resolve(directory, written=True))  # a run (a shipped model has none)
    saved = model_directory.check_model_directory(directory)
    weights = model_directory.WEIGHTS
    model_directory.check_one_source(directory)
    if tf.io.gfile.exists(os.path.join(directory, weights)):  # a shipped or saved model
        raise ValueError(f"{directory!r} holds one set of weights ({weights}), no training "
                         "checkpoints to average.")
    if output is not None and tf.io.gfile.isdir(output) and tf.io.gfile.listdir(output):
        raise FileExistsError(f"{os.fspath(output)!r} is not empty: write the averaged model into a "
                              "new or empty directory.")
    chosen = _chosen_checkpoints(directory, last)
    model = model_directory.rebuild_model(saved["class_name"], dict(saved["config"]))
    tag = average_into(model, chosen)
    if output is not None:
        vocabularies = [text.load_tokenizer(os.path.join(directory, name))
                        for name in (model_directory.SOURCE_VOCABULARY, model_directory.TARGET_VOCABULARY)]
        model_directory.save_model_directory(
            output, model, *vocabularies,
            settings={**saved.get("settings", {}), "averaged_from": os.path.abspath(directory)})
        model_directory.record_averaged(output, tag)
        return os.path.join(output, weights)
    lock = files.take_lock(os.path.join(directory, model_directory.LOCK))
    if lock is None:
        raise FileExistsError(f"{directory!r} is in use by a training process: average once it "
                              "stops, or pass an output directory.")
    try:
        return write_averaged(directory, model, tag)
    finally:
        files.drop_lock(lock, os.path.join(directory, model_directory.LOCK))


def average_into(model, checkpoints) -> dict:
    """Sets ``model``'s variables to their mean over ``checkpoints`` (paths of one run's
    checkpoints, oldest first; `average_checkpoints` checks them, the trainer averages its own);
    returns the ``model.json`` tag that records them (`model_directory.AVERAGED_TAG`)."""
    for variable, value in zip(model.variables, _averaged_weights(model, checkpoints)):
        variable.assign(value.astype(variable.dtype))
    return {"last": len(checkpoints), "checkpoints": [os.path.basename(path) for path in checkpoints],
            "steps": [checkpoint_number(path) for path in checkpoints]}


@contextlib.contextmanager
def averaged_weights(model, checkpoints):
    """Inside the block ``model`` holds the mean of ``checkpoints`` (`average_into`, whose tag
    it yields); its own weights are put back after (the trainer evaluates and writes the
    average, then goes on with the trained weights)."""
    trained = [variable.numpy() for variable in model.variables]
    try:
        yield average_into(model, checkpoints)
    finally:
        for variable, value in zip(model.variables, trained):
            variable.assign(value)


def write_averaged(directory, model, tag) -> str:
    """Writes ``model`` (an average, `average_into`) as ``directory/averaged/`` (beside itself,
    then renamed, at the last averaged step) and ``tag`` in ``model.json``; returns the path."""
    target = os.path.join(directory, model_directory.AVERAGED)
    staging = target + ".tmp"
    if tf.io.gfile.exists(staging):
        tf.io.gfile.rmtree(staging)
    try:
        tf.train.CheckpointManager(tf.train.Checkpoint(model=model), staging, max_to_keep=1).save(
            checkpoint_number=tag["steps"][-1])
        if tf.io.gfile.exists(target):
            tf.io.gfile.rmtree(target)
        tf.io.gfile.rename(staging, target)
    except BaseException:
        if tf.io.gfile.exists(staging):
            tf.io.gfile.rmtree(staging)
        raise
    model_directory.record_averaged(directory, tag)
    return model_directory.listed_checkpoint(target)


def averaged_best(directory: str) -> tuple | None:
    """(dev NLL, last averaged step) of the average a run's end made ``best/``
    (``model.json``'s tag says so, and ``best/`` is at that step), or None: what a resumed run
    must beat (the checkpoint's counters, saved before the average, hold the best trained one's)."""
    tag = model_directory.averaged_tag(directory)
    best = model_directory.listed_checkpoint(os.path.join(directory, model_directory.BEST))
    if not (tag and tag.get("best") and isinstance(tag.get("dev_nll"), (int, float)) and best):
        return None
    if not best.endswith(f"-{tag['steps'][-1]}"):
        return None
    return tag["dev_nll"], tag["steps"][-1]


# === Which checkpoints a run's end averages ===

def _snapshot_steps(directory: str) -> list:
    """The steps of the whole copies in ``directory`` (their ``.index`` written last), sorted."""
    if not tf.io.gfile.isdir(directory):
        return []
    steps = (re.fullmatch(r"ckpt-(\d+)\.index", name) for name in tf.io.gfile.listdir(directory))
    return sorted(int(match.group(1)) for match in steps if match)


def nearest_steps(steps: list, best_step: int, count: int) -> list:
    """The ``count`` steps nearest ``best_step`` (an earlier one first on a tie), sorted.

    >>> nearest_steps([100, 200, 300, 400, 500, 600], 300, 4)
    [100, 200, 300, 400]
    """
    return sorted(sorted(steps, key=lambda step: (abs(step - best_step), step))[:count])


class AroundBest:
    """Model-only copies of the checkpoints around the best dev point, for averaging
    (``average_at="best"``: ``OUT/around_best/ckpt-STEP``), so that the average can take the
    checkpoints around it, before and after, rather than the run's last ones.

    `write` is called at each checkpoint step; it keeps the ``size`` copies nearest the best
    step and the last ``size`` (one of which may be near a later best), and deletes the others.

    Args:
        directory: str, ``OUT/around_best``.
        size: int, how many checkpoints the average takes (``average_last``).
    """

    def __init__(self, directory: str, size: int) -> None:
        self.directory = directory
        self.size = size

    def path(self, step: int) -> str:
        return os.path.join(self.directory, f"ckpt-{step}")

    def write(self, model, step: int, best_step: int) -> None:
        """Copies ``model``'s weights as of ``step``, then prunes."""
        tf.io.gfile.makedirs(self.directory)
        checkpoint = tf.train.Checkpoint(model=model)
        checkpoint.save_counter  # noqa: B018 - created when read: what a manager's checkpoint holds too
        checkpoint.write(self.path(step))
        steps = _snapshot_steps(self.directory)
        keep = set(nearest_steps(steps, best_step, self.size)) | set(steps[-self.size:])
        for old in set(steps) - keep:
            for name in tf.io.gfile.glob(self.path(old) + ".*"):
                tf.io.gfile.remove(name)

    def write_restored(self, model, step: int, best_step: int, checkpoint_every: int,
                       max_steps: int | None) -> None:
        """A restored checkpoint of the run's own (at its cadence, or its last step) written
        again: a run killed between a checkpoint and its copy here resumes with this folder as
        the uninterrupted run has it (a signal's checkpoint, off the cadence, has no copy)."""
        if step % checkpoint_every == 0 or step == max_steps:
            self.write(model, step, best_step)

    def chosen(self, best_step: int, last_step: int) -> list:
        """Paths of the copies to average: the ``size`` nearest ``best_step``, none past
        ``last_step`` (a resumed run's copies of steps it has not reached again)."""
        steps = [step for step in _snapshot_steps(self.directory) if step <= last_step]
        return [self.path(step) for step in nearest_steps(steps, best_step, self.size)]


def checkpoints_to_average(directory: str, last: int, around_best: AroundBest | None,
                           best_step: int, step: int) -> list:
    """The checkpoints a run's end averages (`TrainingConfig.average_last`): with
    ``around_best`` (``average_at="best"``) the ``last`` copies nearest ``best_step``, else the
    ``last`` latest of ``directory/checkpoints/`` (`run_checkpoints`; none when ``last`` is 0)."""
    if around_best is not None:
        return around_best.chosen(best_step, step)
    return run_checkpoints(directory)[-last:] if last else []


__all__ = ["AROUND_BEST", "AroundBest", "average_checkpoints", "average_into", "averaged_best",
           "averaged_weights", "checkpoint_number", "checkpoints_to_average", "keep_run_checkpoints",
           "kept_checkpoints", "nearest_steps", "run_checkpoints", "write_averaged"]
