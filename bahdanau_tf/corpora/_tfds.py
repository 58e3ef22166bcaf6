"""A ``tensorflow_datasets`` translation set as a corpus stream (`TfdsCorpus`, `tfds_corpus`)
or a list (`load_tfds`), when tfds is installed."""

from __future__ import annotations

import dataclasses
from typing import Iterator

from bahdanau_tf.corpora._corpus import ParallelCorpus
from bahdanau_tf.corpora._files import CorpusError, CorpusFiles

@dataclasses.dataclass(frozen=True)
class TfdsCorpus(CorpusFiles):
    """A ``tensorflow_datasets`` translation set as a stream, e.g. ``"wmt14_translate/fr-en"``.

    The same stream as `CorpusFiles` (the training source of the user's files), so it feeds the
    same pipeline stages: `bahdanau_tf.data.make_dataset` reads it through `pair_batches`
    (re-read every epoch), vocabularies learn from `pairs` / `head`, evaluation reads `chunks`.
    Only `pairs` and `estimated_length` differ: the pairs come from ``tfds.load`` (read as
    they are consumed, never held), and the size from the dataset's metadata (exact, without a
    pass). ``tensorflow_datasets`` is imported only here, when the stream is made; nothing is
    downloaded unless ``download=True``: the prepared data must already be in ``data_dir``
    (tfds' default otherwise). Make one with `tfds_corpus`.

    Attributes:
        dataset: str, the tfds name with its config. split: str, a tfds split (``"train"``,
        ``"validation"``, ``"test[:1000]"``, ...). source_language, target_language: str,
        feature keys. data_dir: str or None. download: bool. The `CorpusFiles` attributes
        ``limit`` (`select`), ``name`` and ``direction``; ``paths`` is empty.
    """

    dataset: str = ""
    split: str = "train"
    source_language: str = ""
    target_language: str = ""
    data_dir: str | None = None
    download: bool = False

    def pairs(self) -> Iterator[tuple[str, str]]:
        """The (source, target) str pairs, read from the prepared dataset as they are consumed.

        Raises:
            CorpusError: a sentence that is not valid UTF-8 (its example's index is named).
        """
        tfds = _import_tfds()
        dataset = tfds.load(self.dataset, split=self.split, data_dir=self.data_dir,
                            download=self.download)
        if self.limit is not None:
            dataset = dataset.take(self.limit)
        for index, example in enumerate(tfds.as_numpy(dataset)):
            try:
                yield tuple(example[key].decode("utf-8")
                            for key in (self.source_language, self.target_language))
            except UnicodeDecodeError as error:
                raise CorpusError(
                    f"{self.name} example {index} is not valid UTF-8 ({error.reason} at byte "
                    f"{error.start}).") from None

    def estimated_length(self, sample: int = 10000) -> tuple[int, bool]:
        """``(pairs, True)``: the split's size from the dataset's metadata, without a pass."""
        del sample
        total = _import_tfds().builder(self.dataset, data_dir=self.data_dir).info.splits[
            self.split].num_examples
        return (total if self.limit is None else min(total, self.limit)), True


def _import_tfds():
    try:
        import tensorflow_datasets as tfds
    except ImportError as error:
        raise ImportError(
            "load_tfds needs the optional package tensorflow_datasets: "
            "pip install tensorflow-datasets"
        ) from error
    return tfds


def tfds_corpus(
    name: str,
    split: str = "train",
    source_language: str | None = None,
    target_language: str | None = None,
    data_dir: str | None = None,
    download: bool = False,
) -> TfdsCorpus:
    """A ``tensorflow_datasets`` translation set as a `TfdsCorpus` stream (`load_tfds`'s
    arguments); the languages are checked now, from the dataset's metadata (nothing is read)."""
    tfds = _import_tfds()
    info = tfds.builder(name, data_dir=data_dir).info
    if source_language is None or target_language is None:
        keys = info.supervised_keys or ()
        if len(keys) < 2:
            raise ValueError(f"{name!r} has no supervised keys; pass source/target_language.")
        source_language = source_language or keys[0]
        target_language = target_language or keys[1]
    features = list(info.features.keys())
    for language in (source_language, target_language):
        if language not in features:
            raise ValueError(f"{language!r} is not a feature of {name!r}; features: {features}")
    return TfdsCorpus(paths=(), name=f"{name}/{split}",
                      direction=f"{source_language}-{target_language}", dataset=name,
                      split=split, source_language=source_language,
                      target_language=target_language, data_dir=data_dir, download=download)


def load_tfds(
    name: str,
    split: str = "train",
    source_language: str | None = None,
    target_language: str | None = None,
    data_dir: str | None = None,
    download: bool = False,
    max_examples: int | None = None,
):
    """Loads a ``tensorflow_datasets`` translation set, e.g. ``"wmt14_translate/fr-en"``.

    The first ``max_examples`` pairs of `tfds_corpus` collected in memory; for a whole
    training set, pass `tfds_corpus` itself (a stream) to training. ``tensorflow_datasets``
    is imported only here. Nothing is downloaded unless ``download=True``: the data must
    already be in ``data_dir`` (tfds' default otherwise).

    Args:
        name: str, the tfds name (with config).
        split: str, a tfds split ("train", "validation", "test[:1000]", ...).
        source_language: str feature key of the source, e.g. "fr"; defaults to the dataset's
            first supervised key.
        target_language: str feature key of the target; defaults to the second.
        data_dir: optional str, where the prepared data lives.
        download: bool, allow tfds to download and prepare the data.
        max_examples: optional int, stop after this many pairs.

    Returns:
        ParallelCorpus.

    Raises:
        ImportError: tensorflow_datasets is not installed.
        ValueError: a language key is not a feature of the dataset.
        CorpusError (a ValueError): a sentence that is not valid UTF-8.
    """
    return tfds_corpus(name, split, source_language, target_language, data_dir,
                       download).head(max_examples)
