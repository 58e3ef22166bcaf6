"""Parallel corpora: the embedded Bible with its split, and loaders of the user's own data.

* :func:`load_corpus` -- the embedded English-Spanish Bible (DESIGN.md section 4), with its
  train/dev/test splits (:func:`bible_split`) and, for dev and test, gold word alignments from
  Strong's numbers. Its file lives in this package's directory (``bible-en-es.tsv.gz``).
* :func:`read_lines` (:func:`line_chunks` as a stream), :func:`load_parallel_files`,
  :func:`load_tsv`, :func:`load_tfds` -- the user's own data; :func:`select_corpus` cuts one by split or size.
* :class:`CorpusFiles` -- the user's files as a stream, read as needed (training's source:
  memory and start-up do not grow with the corpus); a bad line is a :class:`CorpusError`
  naming the file and the line, also when tf.data meets it (:func:`corpus_error`).
* :class:`TfdsCorpus` (:func:`tfds_corpus`) -- a ``tensorflow_datasets`` translation set as
  the same stream (WMT'14 En-Fr without a file of one's own), when tfds is installed.

Every loader returns a :class:`ParallelCorpus`; `bahdanau_tf.data` turns one, a
:class:`CorpusFiles` stream or any dataset of string pairs into batches.

One module per source, read in this order: ``_corpus.py`` (the corpus type), ``_bible.py`` (the
embedded Bible), ``_files.py`` (the user's files and streams), ``_tfds.py`` (TFDS). Their public
names are imported from here, ``bahdanau_tf.corpora``, their one import path.
"""

from bahdanau_tf.corpora._bible import (BIBLE_SPLIT_RULE, CORPORA, CORPORA_DIRECTORY, DIRECTIONS,
                                        SPLITS, bible_split, load_corpus)
from bahdanau_tf.corpora._corpus import ParallelCorpus
from bahdanau_tf.corpora._files import (PAIR_BATCH, CorpusError, CorpusFiles, corpus_error,
                                        line_chunks, load_parallel_files, load_tsv, read_lines,
                                        select_corpus)
from bahdanau_tf.corpora._tfds import TfdsCorpus, load_tfds, tfds_corpus

__all__ = [
    "ParallelCorpus",
    "CorpusFiles",
    "TfdsCorpus",
    "CorpusError",
    "corpus_error",
    "CORPORA",
    "SPLITS",
    "DIRECTIONS",
    "BIBLE_SPLIT_RULE",
    "bible_split",
    "load_corpus",
    "load_parallel_files",
    "load_tsv",
    "load_tfds",
    "tfds_corpus",
    "read_lines",
    "line_chunks",
    "select_corpus",
]
