"""The embedded English-Spanish Bible: its file (``bible-en-es.tsv.gz`` in this directory), its
split by chapter (`bible_split`) and its gold word alignments from Strong's numbers
(`load_corpus`, DESIGN.md section 4)."""

from __future__ import annotations

import functools
import gzip
import os

from bahdanau_tf.corpora._corpus import ParallelCorpus

CORPORA_DIRECTORY = os.path.dirname(os.path.abspath(__file__))
_CORPUS_FILES = {"bible-en-es": "bible-en-es.tsv.gz"}
CORPORA = tuple(_CORPUS_FILES)
SPLITS = ("train", "dev", "test", "all")
DIRECTIONS = ("en-es", "es-en")

BIBLE_SPLIT_RULE = (
    "By chapter: the 1,189 chapters of the 66 books are numbered 0..1188 in canonical order "
    "(Genesis 1 = 0, Revelation 22 = 1188); chapter c is 'test' if c % 16 == 8, 'dev' if "
    "c % 32 == 4, 'train' otherwise. Every verse of a chapter goes to the chapter's split."
)


def bible_split(chapter_index: int) -> str:
    """The split of a Bible chapter (see :data:`BIBLE_SPLIT_RULE`).

    Whole chapters, never single verses, go to dev/test: neighbouring verses repeat each
    other's names and phrases and would leak. Every 16th chapter (test) and every 32nd
    (dev) spreads both over all books and genres.

    Args:
        chapter_index: int, 0 for Genesis 1 ... 1188 for Revelation 22.

    Returns:
        str: "train", "dev" or "test".
    """
    if chapter_index % 16 == 8:
        return "test"
    if chapter_index % 32 == 4:
        return "dev"
    return "train"


_COLUMNS = ("id", "es_id", "split", "en", "es", "alignment")


@functools.lru_cache(maxsize=None)
def _read_embedded(name: str) -> tuple:
    path = os.path.join(CORPORA_DIRECTORY, _CORPUS_FILES[name])
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"The embedded corpus file {path!r} is missing; rebuild it with "
            "scripts/build_bible_corpus.py (see bahdanau_tf/corpora/README.md)."
        )
    rows = []
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as handle:
        header = handle.readline().rstrip("\n").split("\t")
        if header != list(_COLUMNS):
            raise ValueError(f"Unexpected header {header!r} in {path!r}")
        for line in handle:
            verse_id, _, split, english, spanish, alignment = line.rstrip("\n").split("\t")
            links = sure = None
            if alignment and alignment != "-":
                links, sure = [], []
                for link in alignment.split():
                    separator = "-" if "-" in link else "?"
                    source, target = link.split(separator)
                    links.append((int(source), int(target)))
                    if separator == "-":
                        sure.append(links[-1])
                links, sure = tuple(links), tuple(sure)
            rows.append((verse_id, split, english, spanish, links, sure))
    return tuple(rows)


def load_corpus(name: str = "bible-en-es", split: str = "train", direction: str = "en-es"):
    """Loads an embedded corpus (offline).

    The Bible (World English Bible / Reina-Valera 1909, both public domain) has 31,047
    verse pairs: 27,989 train, 1,007 dev, 2,051 test, split by chapter
    (:data:`BIBLE_SPLIT_RULE`). Dev and test carry gold word alignments from Strong's
    numbers (936 dev and 2,009 test verses; the others have ``None``, see below).

    Args:
        name: str, one of :data:`CORPORA`.
        split: str, "train", "dev", "test" or "all".
        direction: str, "en-es" (English source) or "es-en".

    Returns:
        ParallelCorpus, with ``ids`` such as ``"Gen 1:1"`` (the English verse number) and,
        for dev and test, ``alignments``: per verse a sorted list of ``(source_word,
        target_word)`` pairs oriented by ``direction`` (all links; the sure ones are also in
        ``sure_alignments``), or None where the verse has no reliable gold (the WEB's
        Strong's tags sit under Hebrew verse numbers there; skip those verses when
        scoring). ``alignments`` is None for train and "all".

    Raises:
        ValueError: unknown name, split or direction.
    """
    if name not in _CORPUS_FILES:
        raise ValueError(f"Unknown corpus {name!r}; valid names: {list(CORPORA)}.")
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; valid splits: {list(SPLITS)}.")
    if direction not in DIRECTIONS:
        raise ValueError(f"Unknown direction {direction!r}; valid directions: {list(DIRECTIONS)}.")
    rows = [row for row in _read_embedded(name) if split == "all" or row[1] == split]
    english = [row[2] for row in rows]
    spanish = [row[3] for row in rows]
    alignments = sure_alignments = None
    if split in ("dev", "test"):

        def orient(links):
            if links is None:
                return None
            if direction == "en-es":
                return list(links)
            return sorted((target, source) for source, target in links)

        alignments = [orient(row[4]) for row in rows]
        sure_alignments = [orient(row[5]) for row in rows]
    sources, targets = (english, spanish) if direction == "en-es" else (spanish, english)
    return ParallelCorpus(
        sources=sources,
        targets=targets,
        alignments=alignments,
        sure_alignments=sure_alignments,
        ids=[row[0] for row in rows],
        name=f"{name}/{split}",
        direction=direction,
    )
