"""Word alignments as files and from a statistical aligner: Pharaoh links, eflomal.

- :func:`parse_pharaoh`, :func:`format_pharaoh`, :func:`read_pharaoh`: the ``i-j`` format
  that fast_align, eflomal and Marian write (one line per sentence pair, ``i`` a source word
  index, ``j`` a target word index, both 0-based, space-separated);
- :func:`eflomal_align`: the eflomal aligner (Östling & Tiedemann 2016) on lists of sentences,
  both directions (made one by `bahdanau_tf.alignment.symmetrization.symmetrize`); eflomal is
  the optional extra ``align`` (``pip install -e ".[align]"`` in a clone).

Words are :func:`bahdanau_tf.text.split_words` words, the package's one definition (gold links,
attention links and these all count with it).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence

from bahdanau_tf.corpora import read_lines
from bahdanau_tf.text import split_words

Link = tuple[int, int]

#: what a user without the optional extra is told
EFLOMAL_MISSING = ("eflomal is not installed: pip install eflomal (the align extra: pip install -e "
                   "\".[align]\" in a clone) to compute word alignments.")


def parse_pharaoh(line: str) -> set[Link]:
    """The links of one Pharaoh line (``"0-0 1-2"``); an empty line has none.

    Raises:
        ValueError: a field that is not ``i-j`` with non-negative integers.

    Example:

        >>> sorted(parse_pharaoh("0-0 2-1 1-1"))
        [(0, 0), (1, 1), (2, 1)]
    """
    links = set()
    for field in line.split():
        source, dash, target = field.partition("-")
        if not (dash and source.isdigit() and target.isdigit()):
            raise ValueError(f"not a Pharaoh link (i-j, 0-based word indices): {field!r}")
        links.add((int(source), int(target)))
    return links


def format_pharaoh(links: Iterable[Link]) -> str:
    """One Pharaoh line, links sorted by target word then source word (as Marian writes them).

    Example:

        >>> format_pharaoh({(2, 1), (0, 0), (1, 1)})
        '0-0 1-1 2-1'
    """
    return " ".join(f"{s}-{t}" for s, t in sorted(links, key=lambda link: (link[1], link[0])))


def read_pharaoh(path: str) -> list[set[Link]]:
    """The links of every line of a Pharaoh file, read by the package's line rule
    (`bahdanau_tf.corpora.read_lines`: ``\n``, ``\r\n`` or ``\r`` line ends, a byte-order
    mark dropped, a line that is not UTF-8 named).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a line that is not UTF-8 or not Pharaoh links, named.
    """
    result = []
    for number, line in enumerate(read_lines(path), start=1):
        try:
            result.append(parse_pharaoh(line))
        except ValueError as error:
            raise ValueError(f"{path!r} line {number}: {error}") from None
    return result


def _word_lines(sentences: Sequence[str]) -> list[str]:
    """Lower-cased `split_words` words, space-separated: what eflomal reads."""
    return [" ".join(split_words(sentence)).lower() for sentence in sentences]


def eflomal_align(sources: Sequence[str], targets: Sequence[str], iterations: int | None = None
                  ) -> tuple[list[set[Link]], list[set[Link]]]:
    """Forward and reverse eflomal alignments of parallel sentences, unsupervised.

    Words are lower-cased `split_words` words; both results are ``(source_word,
    target_word)`` links (eflomal writes the reverse direction that way too), to
    `bahdanau_tf.alignment.symmetrization.symmetrize`. An empty side gets
    no links. eflomal samples: a rerun gives slightly different links.

    Args:
        sources, targets: lists of str of the same length.
        iterations: eflomal's ``n_iterations`` (None: its default, scaled to the corpus).

    Raises:
        ImportError: eflomal is not installed (message: `EFLOMAL_MISSING`).
        ValueError: lists of different lengths.
    """
    try:
        import eflomal
    except ImportError:
        raise ImportError(EFLOMAL_MISSING) from None
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets.")
    with tempfile.TemporaryDirectory(prefix="bahdanau_eflomal_") as directory:
        paths = [os.path.join(directory, name) for name in ("forward", "reverse")]
        aligner = eflomal.Aligner(n_iterations=iterations)
        aligner.align(_word_lines(sources), _word_lines(targets), links_filename_fwd=paths[0],
                      links_filename_rev=paths[1], quiet=True)
        forward, reverse = read_pharaoh(paths[0]), read_pharaoh(paths[1])
    return forward, reverse


__all__ = ["EFLOMAL_MISSING", "eflomal_align", "format_pharaoh", "parse_pharaoh", "read_pharaoh"]
