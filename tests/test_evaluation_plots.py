"""Tests for bahdanau_tf.evaluation.plots: figure 2 (BLEU by length) and figure 3 (attention)."""

import numpy as np
import pytest

from bahdanau_tf import evaluation

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_size(path):
    """(width, height) from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_plot_bleu_by_length_writes_png(tmp_path):
    long_source = " ".join(["palabra"] * 15)
    sources = ["uno dos tres", long_source] * 2
    references = ["the cat sat on the mat", "in the beginning god created the heaven"] * 2
    good = evaluation.bleu_by_length(references, references, sources)
    bad = evaluation.bleu_by_length(
        ["the cat sat on a mat", "in the beginning"] * 2, references, sources
    )
    path = tmp_path / "plots" / "bleu_by_length.png"

    figure = evaluation.plot_bleu_by_length(
        {"RNNsearch-50": good, "RNNencdec-50": [dataclass_dict(b) for b in bad]},
        path,
        title="BLEU by length",
    )

    assert path.stat().st_size > 1000
    width, height = _png_size(path)
    assert (width, height) == (640, 480)
    axes = figure.axes[0]
    assert len(axes.lines) == 2
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["RNNsearch-50", "RNNencdec-50"]
    # empty buckets are skipped: two points per model, at x = 10 and x = 20
    np.testing.assert_allclose(axes.lines[0].get_xdata(), [10, 20])
    np.testing.assert_allclose(axes.lines[0].get_ydata(), [100.0, 100.0])


def dataclass_dict(bucket):
    return {
        "min_length": bucket.min_length,
        "max_length": bucket.max_length,
        "count": bucket.count,
        "bleu": bucket.bleu,
    }


def test_plot_bleu_by_length_rejects_different_buckets(tmp_path):
    sources, references = ["a b"], ["x y z w"]
    first = evaluation.bleu_by_length(references, references, sources, buckets=(10,))
    second = evaluation.bleu_by_length(references, references, sources, buckets=(20,))
    with pytest.raises(ValueError, match="different length buckets"):
        evaluation.plot_bleu_by_length({"a": first, "b": second}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="empty"):
        evaluation.plot_bleu_by_length({}, tmp_path / "x.png")


def test_plot_attention_is_grayscale_with_black_zero_and_white_one(tmp_path):
    import matplotlib.image

    attention = np.array(
        [
            [1.0, 0.0, 0.0],
            [0.0, 0.5, 0.5],
            [0.0, 0.0, 1.0],
            [0.25, 0.75, 0.0],
        ]
    )
    source_tokens = ["la", "tierra", "[END]"]
    target_tokens = ["the", "earth", "[END]", "x"]
    path = tmp_path / "attention.png"

    figure = evaluation.plot_attention(attention, source_tokens, target_tokens, path, title="t")

    width, height = _png_size(path)
    dpi = figure.dpi
    assert (width, height) == (
        round(figure.get_figwidth() * dpi),
        round(figure.get_figheight() * dpi),
    )
    image = matplotlib.image.imread(path)  # (height, width, RGBA) floats in [0, 1]
    assert image.shape[:2] == (height, width)
    axes = figure.axes[0]
    for i in range(attention.shape[0]):
        for j in range(attention.shape[1]):
            # cell centre (column j, row i) in display pixels, origin bottom-left
            x, y = axes.transData.transform((j, i))
            pixel = image[int(height - y), int(x), :3]
            # gray: R = G = B = the weight (to 8-bit precision)
            np.testing.assert_allclose(pixel, [attention[i, j]] * 3, atol=1 / 255 + 1e-6)
    assert [t.get_text() for t in axes.get_xticklabels()] == source_tokens
    assert [t.get_text() for t in axes.get_yticklabels()] == target_tokens
    assert axes.xaxis.get_ticks_position() == "top"


def test_plot_attention_rejects_mismatched_shape(tmp_path):
    with pytest.raises(ValueError, match=r"\[3, 2\].*got \[2, 3\]"):
        evaluation.plot_attention(np.zeros((2, 3)), ["a", "b"], ["x", "y", "z"], tmp_path / "a.png")
    with pytest.raises(ValueError, match="shape"):
        evaluation.plot_attention(np.zeros(3), ["a", "b", "c"], ["x"], tmp_path / "a.png")
    assert not (tmp_path / "a.png").exists()


def _cell_pixels(figure):
    """The gray levels (0-255) of the attention cells: the axes' interior, spines left out."""
    figure.canvas.draw()
    pixels = np.asarray(figure.canvas.buffer_rgba())[..., 0]
    box = figure.axes[0].get_window_extent()
    height = pixels.shape[0]
    top, bottom = int(height - box.y1) + 3, int(height - box.y0) - 3
    return pixels[top:bottom, int(box.x0) + 3:int(box.x1) - 3]


def test_plot_attention_image_contrast_spans_black_to_white():
    # an early model's near-uniform attention: every weight between 0.24 and 0.26
    attention = np.array([[0.24, 0.26, 0.25, 0.25], [0.26, 0.24, 0.25, 0.25], [0.25, 0.25, 0.24, 0.26]])
    tokens = (["a", "b", "c", "[END]"], ["x", "y", "[END]"])
    fixed = _cell_pixels(evaluation.plot_attention(attention, *tokens, None))
    own = _cell_pixels(evaluation.plot_attention(attention, *tokens, None, contrast="image"))
    # the paper's fixed scale draws it as one dark gray; its own scale spans black to white
    assert 55 <= fixed.min() and fixed.max() <= 75
    assert (own.min(), own.max()) == (0, 255)
    # the cell of the largest weight (row 0, column 1) is white, of the smallest (row 0, 0) black
    rows, columns = own.shape
    assert own[rows // 6, columns // 8] == 0 and own[rows // 6, 3 * columns // 8] == 255
    with pytest.raises(ValueError, match='`contrast` must be "fixed" or "image", got \'auto\''):
        evaluation.plot_attention(attention, *tokens, None, contrast="auto")
