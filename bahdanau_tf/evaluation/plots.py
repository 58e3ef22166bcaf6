"""The paper's figures, drawn with matplotlib: BLEU by sentence length and attention heatmaps.

- :func:`plot_bleu_by_length`: figure 2, BLEU as a function of the source sentence length,
  several models on one plot.
- :func:`plot_attention`: figure 3, an alignment matrix α_ij as a grayscale heatmap (0 black,
  1 white; or, with ``contrast="image"``, the matrix's own minimum black and maximum white),
  source words on the x axis (top), target words on the y axis.

matplotlib is imported inside the plotting functions only, and figures are made with
``matplotlib.figure.Figure`` on an Agg canvas, never through ``pyplot``: no global backend
switch, no figure registry to leak, and the notebook's own backend is left alone.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bahdanau_tf.evaluation.metrics import LengthBucketScore, bucket_from


def _new_figure(width: float, height: float, dpi: int):
    """A pyplot-free figure on an Agg canvas (matplotlib imported here, lazily)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(figure)
    return figure


def _save_png(figure, path: str | os.PathLike | None) -> None:
    if path is None:
        return
    path = pathlib.Path(path)
    if path.parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=figure.dpi)


def plot_bleu_by_length(
    results_by_model: Mapping[str, Sequence[LengthBucketScore | Mapping[str, Any]]],
    path: str | os.PathLike | None,
    title: str | None = None,
    dpi: int = 100,
):
    """Draws BLEU against source sentence length for several models (the paper's figure 2).

    One line per model; each bucket is drawn at its upper bound (the open last bucket one
    bucket width further), tick-labelled with the bucket's range; empty buckets are skipped.
    All models must use the same buckets.

    Args:
        results_by_model: dict model name -> :func:`bleu_by_length` output (or its JSON dicts,
            e.g. ``EvaluationReport.from_json(...).bleu_by_length``), e.g.
            ``{"RNNsearch-50": ..., "RNNencdec-50": ...}``.
        path: where to write the PNG (parent directories are made), or None to only return the
            figure.
        title: optional str, the plot title.
        dpi: int, resolution of the PNG.

    Returns:
        The ``matplotlib.figure.Figure`` (not registered with pyplot; shows in notebooks).

    Raises:
        ValueError: if there is no model, or models used different buckets.

    Example:

        plot_bleu_by_length({"RNNsearch": bleu_by_length(hyps_1, refs, srcs),
                             "RNNencdec": bleu_by_length(hyps_2, refs, srcs)}, "fig2.png")
    """
    if not results_by_model:
        raise ValueError("`results_by_model` is empty: nothing to plot.")
    models = {name: [bucket_from(b) for b in scores] for name, scores in results_by_model.items()}
    ranges = {name: [(b.min_length, b.max_length) for b in scores] for name, scores in models.items()}
    reference_name, reference_ranges = next(iter(ranges.items()))
    for name, model_ranges in ranges.items():
        if model_ranges != reference_ranges:
            raise ValueError(
                f"Models use different length buckets: {reference_name!r} has "
                f"{reference_ranges}, {name!r} has {model_ranges}."
            )
    if not reference_ranges:
        raise ValueError(f"{reference_name!r} has no length buckets.")

    buckets = models[reference_name]
    # a bucket is drawn at its upper bound; the open last one a bucket width further
    positions = [b.max_length for b in buckets if b.max_length is not None]
    if buckets[-1].max_length is None:
        width = positions[-1] - positions[-2] if len(positions) > 1 else 10
        positions.append((positions[-1] if positions else buckets[-1].min_length) + width)

    figure = _new_figure(6.4, 4.8, dpi)
    axes = figure.add_subplot()
    markers = "o^sDvx*+"
    for k, (name, scores) in enumerate(models.items()):
        points = [(x, b.bleu) for x, b in zip(positions, scores) if b.bleu is not None and b.count]
        if points:
            xs, ys = zip(*points)
            axes.plot(xs, ys, marker=markers[k % len(markers)], label=name)
    axes.set_xticks(positions)
    axes.set_xticklabels([b.label for b in buckets])
    axes.set_xlabel("Sentence length (source words)")
    axes.set_ylabel("BLEU score")
    axes.grid(True, alpha=0.3)
    axes.legend()
    if title:
        axes.set_title(title)
    figure.tight_layout()
    _save_png(figure, path)
    return figure


def plot_attention(
    attention,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    path: str | os.PathLike | None,
    title: str | None = None,
    cell_size: float = 0.4,
    dpi: int = 100,
    contrast: str = "fixed",
):
    """Draws an alignment matrix α_ij like the paper's figure 3.

    Source tokens label the columns (x axis, at the top), target tokens the rows (y axis);
    each cell is gray level α_ij with 0 black and 1 white (``cmap="gray", vmin=0, vmax=1``),
    drawn with ``interpolation="nearest"`` so a cell is one flat square of ``cell_size``
    inches. ``contrast="image"`` stretches the gray scale to this matrix's own range (its
    minimum black, its maximum white): an early model's near-uniform weights (all about
    1 / source length) would otherwise be one dark gray.

    Args:
        attention: array-like ``[target_len, source_len]`` (NumPy or a tensor), row i the
            attention weights of target token i over the source tokens.
        source_tokens: list of str, ``source_len`` labels for the columns.
        target_tokens: list of str, ``target_len`` labels for the rows.
        path: where to write the PNG (parent directories are made), or None to only return the
            figure.
        title: optional str, drawn under the plot (it may have several lines).
        cell_size: float, side of one cell in inches.
        dpi: int, resolution of the PNG.
        contrast: str, ``"fixed"`` (0 black, 1 white: the paper's, comparable across figures)
            or ``"image"`` (the matrix's own minimum to maximum).

    Returns:
        The ``matplotlib.figure.Figure`` (not registered with pyplot; shows in notebooks).

    Raises:
        ValueError: if ``attention`` is not 2-D or its shape does not match the token counts,
            or ``contrast`` is neither ``"fixed"`` nor ``"image"``.

    Example:

        figure = plot_attention([[0.9, 0.1], [0.2, 0.8]], ["the", "cat"], ["el", "gato"],
                                "attention.png")
    """
    matrix = np.asarray(attention, dtype=np.float64)
    source_tokens = [str(t) for t in source_tokens]
    target_tokens = [str(t) for t in target_tokens]
    expected = (len(target_tokens), len(source_tokens))
    if matrix.ndim != 2 or matrix.shape != expected:
        raise ValueError(
            f"`attention` must have shape [target_len, source_len] = {list(expected)} "
            f"({len(target_tokens)} target tokens, {len(source_tokens)} source tokens), "
            f"got {list(matrix.shape)}."
        )
    if 0 in expected:
        raise ValueError(f"Nothing to plot: attention shape {list(matrix.shape)}.")
    if contrast not in ("fixed", "image"):
        raise ValueError(f'`contrast` must be "fixed" or "image", got {contrast!r}.')
    low, high = 0.0, 1.0
    if contrast == "image":
        low, high = float(matrix.min()), float(matrix.max())
        high = high if high > low else low + 1.0  # a constant matrix: all black

    # room for the labels: about 0.09 inch per character at the default font size
    longest_source = max(len(t) for t in source_tokens)
    longest_target = max(len(t) for t in target_tokens)
    left = 0.3 + 0.09 * longest_target
    top = 0.3 + 0.09 * longest_source
    bottom = 0.2 + (0.4 + 0.2 * title.count("\n") if title else 0.0)
    right = 0.2
    width = left + cell_size * len(source_tokens) + right
    height = top + cell_size * len(target_tokens) + bottom

    figure = _new_figure(width, height, dpi)
    # axes placed by hand (no tight layout) so a cell is exactly cell_size inches
    axes = figure.add_axes(
        (left / width, bottom / height, cell_size * len(source_tokens) / width,
         cell_size * len(target_tokens) / height)
    )
    axes.imshow(matrix, cmap="gray", vmin=low, vmax=high, interpolation="nearest", aspect="auto")
    axes.xaxis.tick_top()
    axes.set_xticks(range(len(source_tokens)))
    axes.set_xticklabels(source_tokens, rotation=90)
    axes.set_yticks(range(len(target_tokens)))
    axes.set_yticklabels(target_tokens)
    axes.tick_params(length=0)
    if title:
        axes.set_xlabel(title)
    _save_png(figure, path)
    return figure
