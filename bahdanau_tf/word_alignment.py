"""Word alignments as files and from a statistical aligner: Pharaoh links, symmetrization, eflomal.

- :func:`parse_pharaoh`, :func:`format_pharaoh`, :func:`read_pharaoh`: the ``i-j`` format
  that fast_align, eflomal and Marian write (one line per sentence pair, ``i`` a source word
  index, ``j`` a target word index, both 0-based, space-separated);
- :func:`symmetrize`: two directional alignments made one (intersection, union,
  grow-diag-final-and, as Moses' and fast_align's ``atools`` do it);
- :func:`eflomal_align`: the eflomal aligner (Östling & Tiedemann 2016) on lists of sentences,
  both directions; eflomal is the optional extra ``bahdanau_tf[align]``.

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

SYMMETRIZATIONS = ("intersection", "union", "grow-diag-final-and")

#: what a user without the optional extra is told
EFLOMAL_MISSING = ("eflomal is not installed: pip install 'bahdanau_tf[align]' (or pip install "
                   "eflomal) to compute word alignments.")


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


def symmetrize(forward: Iterable[Link], reverse: Iterable[Link], method: str = "grow-diag-final-and"
               ) -> set[Link]:
    """One sentence's alignment from a source-to-target and a target-to-source one.

    Both are given as ``(source_word, target_word)`` links. ``"intersection"`` keeps the links
    both directions found (high precision), ``"union"`` all of them; ``"grow-diag-final-and"``
    (Koehn et al. 2003, Moses' default) starts from the intersection, adds union links that
    neighbour (diagonals included) an alignment point while one of their words is unaligned,
    then ("final-and") union links whose two words are both still unaligned.

    Example:

        >>> sorted(symmetrize({(0, 0), (1, 1)}, {(0, 0), (1, 2)}, "intersection"))
        [(0, 0)]
        >>> sorted(symmetrize({(0, 0), (1, 1), (3, 3)}, {(0, 0), (1, 2), (3, 3)}))
        [(0, 0), (1, 1), (1, 2), (3, 3)]
    """
    forward, reverse = set(forward), set(reverse)
    if method == "intersection":
        return forward & reverse
    if method == "union":
        return forward | reverse
    if method != "grow-diag-final-and":
        raise ValueError(f"`method` must be one of {SYMMETRIZATIONS}, got {method!r}")
    union, alignment = forward | reverse, forward & reverse
    aligned_source = {s for s, _ in alignment}
    aligned_target = {t for _, t in alignment}
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    grown = True
    while grown:
        grown = False
        for s, t in sorted(alignment):
            for ds, dt in neighbours:
                link = (s + ds, t + dt)
                if link in union and link not in alignment and (
                        link[0] not in aligned_source or link[1] not in aligned_target):
                    alignment.add(link)
                    aligned_source.add(link[0])
                    aligned_target.add(link[1])
                    grown = True
    for direction in (forward, reverse):  # final-and
        for s, t in sorted(direction):
            if s not in aligned_source and t not in aligned_target:
                alignment.add((s, t))
                aligned_source.add(s)
                aligned_target.add(t)
    return alignment


def _word_lines(sentences: Sequence[str]) -> list[str]:
    """Lower-cased `split_words` words, space-separated: what eflomal reads."""
    return [" ".join(split_words(sentence)).lower() for sentence in sentences]


def eflomal_align(sources: Sequence[str], targets: Sequence[str], iterations: int | None = None
                  ) -> tuple[list[set[Link]], list[set[Link]]]:
    """Forward and reverse eflomal alignments of parallel sentences, unsupervised.

    Words are lower-cased `split_words` words; both results are ``(source_word,
    target_word)`` links (eflomal writes the reverse direction that way too), to `symmetrize`. An empty side gets
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


__all__ = ["EFLOMAL_MISSING", "SYMMETRIZATIONS", "eflomal_align", "format_pharaoh",
           "parse_pharaoh", "read_pharaoh", "symmetrize"]
