"""The corpus type every loader returns: `ParallelCorpus`, sentence pairs with optional ids and
gold word alignments."""

from __future__ import annotations

import dataclasses
from typing import Iterator

@dataclasses.dataclass(frozen=True, eq=False)
class ParallelCorpus:
    """Sentence pairs, optionally with verse ids and gold word alignments.

    Attributes:
        sources: list of str, source sentences.
        targets: list of str, target sentences (same length).
        alignments: None, or one entry per pair: a list of ``(source_word, target_word)``
            index pairs over :func:`bahdanau_tf.text.split_words` of the source and target
            sentence, or None where that pair has no gold alignment. These are all links
            (the "possible" set P of the alignment error rate).
        ids: None, or one id per pair (verse references such as ``"Gen 1:1"``).
        sure_alignments: None, or per pair the subset of ``alignments`` that is sure (the
            set S of the alignment error rate): links whose Strong's number tags exactly one
            phrase on each side.
        name: str, where the pairs come from.
        direction: str or None, e.g. ``"en-es"``.

    Example:

        >>> from bahdanau_tf.corpora import load_corpus
        >>> corpus = load_corpus("bible-en-es", split="test")
        >>> len(corpus), corpus.ids[0], corpus.sources[0][:20]
        (2051, 'Gen 9:1', 'God blessed Noah and')
    """

    sources: list
    targets: list
    alignments: list | None = None
    ids: list | None = None
    sure_alignments: list | None = None
    name: str = ""
    direction: str | None = None

    def __post_init__(self):
        if len(self.sources) != len(self.targets):
            raise ValueError(
                f"sources and targets differ in length: {len(self.sources)} != {len(self.targets)}"
            )
        for field in ("alignments", "sure_alignments", "ids"):
            value = getattr(self, field)
            if value is not None and len(value) != len(self.sources):
                raise ValueError(
                    f"{field} has {len(value)} entries for {len(self.sources)} sentence pairs"
                )

    def __len__(self) -> int:
        return len(self.sources)

    @property
    def references(self) -> list | None:
        """Alias of ``ids`` (verse references for the Bible)."""
        return self.ids

    def pairs(self) -> list[tuple[str, str]]:
        """list of (source, target) tuples."""
        return list(zip(self.sources, self.targets))

    def select(self, indices) -> "ParallelCorpus":
        """A sub-corpus: ``indices`` is a slice or a sequence of ints."""
        if isinstance(indices, slice):
            pick = lambda values: None if values is None else list(values[indices])  # noqa: E731
        else:
            indices = list(indices)
            pick = lambda values: None if values is None else [values[i] for i in indices]  # noqa: E731
        return dataclasses.replace(
            self,
            sources=pick(self.sources),
            targets=pick(self.targets),
            alignments=pick(self.alignments),
            sure_alignments=pick(self.sure_alignments),
            ids=pick(self.ids),
        )

    def chunks(self, size: int) -> Iterator[ParallelCorpus]:
        """Consecutive sub-corpora of ``size`` pairs (the last one shorter), in order: the
        interface `CorpusFiles.chunks` shares, for consumers that stream either."""
        if size < 1:
            raise ValueError(f"`size` must be a positive integer, got {size!r}.")
        for start in range(0, len(self), size):
            yield self.select(slice(start, start + size))


# === The embedded corpus ===
