"""Tests for bahdanau_tf.corpora's streams: the user's files read as needed (`CorpusFiles`)."""

import gzip
import re

import pytest
import tensorflow as tf

from bahdanau_tf import corpora, data
from bahdanau_tf.corpora import CorpusError, CorpusFiles, load_parallel_files, load_tsv
from bahdanau_tf.corpora.waiting_lines import WaitingLines

# every line rule at once: CRLF, a lone CR, a BOM, a blank line, U+2028 inside a sentence
HOSTILE_TSV = (b"\xef\xbb\xbfHello.\tHola.\r\nGood morning\tBuenos d\xc3\xadas\rYes\tS\xc3\xad\n"
               b"\n   \nline \xe2\x80\xa8 sep\tl\xc3\xadnea\r\n")
EXPECTED = [("Hello.", "Hola."), ("Good morning", "Buenos días"), ("Yes", "Sí"),
            ("line \u2028 sep", "línea")]


def write(path, raw):
    """Writes ``raw`` bytes to ``path``, through gzip when it ends in .gz; returns str(path)."""
    if str(path).endswith(".gz"):
        with gzip.open(path, "wb") as handle:
            handle.write(raw)
    else:
        path.write_bytes(raw)
    return str(path)


def streamed(corpus):
    """The (source, target) str pairs that tf.data reads from a stream (`data.string_pairs`)."""
    dataset, size = data.string_pairs(corpus)
    assert size is None  # a stream's length is not counted
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


@pytest.mark.parametrize("name", ["pairs.tsv", "pairs.tsv.gz"])
def test_a_tsv_stream_reads_the_loaders_pairs_in_python_and_in_tf_data(tmp_path, name):
    path = write(tmp_path / name, HOSTILE_TSV)
    stream = CorpusFiles.tsv(path)
    assert list(stream.pairs()) == EXPECTED == streamed(stream)
    assert load_tsv(path).pairs() == EXPECTED
    assert stream.head(2).pairs() == EXPECTED[:2] and stream.estimated_length(10) == (4, True)
    assert streamed(stream.select(slice(0, 3))) == EXPECTED[:3]  # --max_train_pairs
    flipped = CorpusFiles.tsv(path, source_column=1, target_column=0, skip_header=True)
    assert streamed(flipped) == [(t, s) for s, t in EXPECTED[1:]]


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_parallel_stream_pairs_line_i_with_line_i(tmp_path, suffix):
    source = write(tmp_path / f"a.en{suffix}", b"\xef\xbb\xbfHello.\r\n\rYes\n")
    target = write(tmp_path / f"a.es{suffix}", b"Hola.\n\nS\xc3\xad")
    stream = CorpusFiles.parallel(source, target)
    expected = [("Hello.", "Hola."), ("", ""), ("Yes", "Sí")]  # empty lines kept (filtered later)
    assert list(stream.pairs()) == expected == streamed(stream)
    assert load_parallel_files(source, target).pairs() == expected


def many_lines(count, bad=b""):
    """``count`` good TSV lines of one length, then ``bad`` (after the first tf.data batch)."""
    return b"".join(b"the cat %05d\tel gato %05d\n" % (i, i) for i in range(count)) + bad


@pytest.mark.parametrize("bad,message", [
    (b"a\tb\tc\n", r"^'[^']*big.tsv' line 1501 has 3 tab-separated column\(s\), 2 expected: 'a\\tb\\tc'$"),
    (b"no tab\n", r"^'[^']*big.tsv' line 1501 has 1 tab-separated column\(s\), 2 expected: 'no tab'$"),
    (b"ca\xf1a\tca\xc3\xb1a\n", r"^'[^']*big.tsv' line 1501 is not valid UTF-8 \(invalid continuation byte at "
                         r"byte 2\); convert it, e.g. with iconv.$"),
])
def test_a_bad_line_stops_the_stream_with_the_loaders_message(tmp_path, bad, message):
    path = write(tmp_path / "big.tsv", many_lines(1500, bad) + b"more\tlines\n")
    stream = CorpusFiles.tsv(path)
    assert next(stream.pairs()) == ("the cat 00000", "el gato 00000")  # read as needed: not refused up front
    with pytest.raises(CorpusError, match=message):
        load_tsv(path)
    with pytest.raises(CorpusError, match=message):
        list(stream.pairs())
    # through tf.data, the first batches come, then the bad line stops the iterator
    iterator = iter(data.string_pairs(stream)[0].prefetch(4))
    assert next(iterator)[0].numpy() == b"the cat 00000"
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        for _ in iterator:
            pass
    error = corpora.corpus_error(raised.value)
    assert isinstance(error, CorpusError) and re.search(message, str(error))


def test_parallel_files_of_different_lengths_are_an_error_when_one_ends(tmp_path):
    source = write(tmp_path / "a.en", many_lines(1500))
    target = write(tmp_path / "a.es", many_lines(1498))
    stream = CorpusFiles.parallel(source, target)
    message = r"Line counts differ: '[^']*a.en' has 1500 lines, '[^']*a.es' has 1498.$"
    with pytest.raises(CorpusError, match=message):
        list(stream.pairs())
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        streamed(stream)
    assert re.search(message, str(corpora.corpus_error(raised.value)))
    with pytest.raises(CorpusError, match=r"a.es' has 1498 lines, '[^']*a.en' has 1500.$"):
        list(CorpusFiles.parallel(target, source).pairs())


def test_missing_files_and_bad_selections_are_refused_before_reading(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.tsv"):
        CorpusFiles.tsv(str(tmp_path / "missing.tsv"))
    with pytest.raises(IsADirectoryError):
        CorpusFiles.parallel(str(tmp_path), str(tmp_path))
    path = write(tmp_path / "a.tsv", b"a\tb\n")
    with pytest.raises(ValueError, match="columns=2 cannot hold columns 0 and 2"):
        CorpusFiles.tsv(path, target_column=2)
    with pytest.raises(ValueError, match="first pairs only"):
        CorpusFiles.tsv(path).select([0, 2])
    assert corpora.select_corpus(tsv=path, stream=True) == CorpusFiles.tsv(path)
    assert isinstance(corpora.select_corpus(tsv=path), corpora.ParallelCorpus)
    assert corpora.corpus_error(tf.errors.InvalidArgumentError(None, None, "other")) is None


def test_the_length_of_a_long_stream_is_estimated_from_its_first_lines(tmp_path):
    for name in ("big.tsv", "big.tsv.gz"):
        path = write(tmp_path / name, many_lines(20000))
        pairs, exact = CorpusFiles.tsv(path).estimated_length(sample=2000)
        assert not exact and abs(pairs - 20000) < 20000 * (0.02 if name == "big.tsv" else 0.1), name
        assert CorpusFiles.tsv(path).select(slice(0, 5000)).estimated_length(2000)[0] == 5000
    assert CorpusFiles.tsv(path).estimated_length(sample=20000) == (20000, True)


def test_read_lines_streams_standard_input_by_the_same_rule(monkeypatch):
    import io
    import sys

    stdin = io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbfone\rtwo\r\nthree\n"))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert corpora.read_lines("-") == ["one", "two", "three"]
    assert not stdin.closed  # standard input is the caller's: read, not closed
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok\n\xff\n")))
    with pytest.raises(CorpusError, match="^standard input line 2 is not valid UTF-8"):
        corpora.read_lines(None)


@pytest.mark.parametrize("block", [1, 2, 3, 5, 64, 1 << 16])
def test_waiting_lines_end_lines_by_the_package_rule_whatever_the_blocks(block):
    """``\n``, ``\r\n`` (also cut between two reads) and a lone ``\r`` each end one line; a
    line longer than many blocks comes whole; the last line needs no end."""
    import io

    data = b"a\r\nb\rc\n" + b"x" * 1000 + b"\r\n\r\r\nlast"
    lines = list(WaitingLines(io.BufferedReader(io.BytesIO(data)), block=block))
    assert [line.rstrip(b"\r\n") for line in lines] == [b"a", b"b", b"c", b"x" * 1000, b"", b"",
                                                          b"last"]


def test_a_line_ended_by_a_carriage_return_is_answered_while_the_pipe_stays_open(monkeypatch):
    """bahdanau-translate's reader (``line_chunks(interactive=True)`` on standard input): a
    writer that pauses after ``one\r`` gets the line before it writes more or closes."""
    import io
    import os
    import sys
    import threading

    read_end, write_end = os.pipe()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(os.fdopen(read_end, "rb")))
    chunks = corpora.line_chunks(None, size=100, interactive=True)
    first = []
    reader = threading.Thread(target=lambda: first.append(next(chunks)), daemon=True)
    try:
        os.write(write_end, b"one\r")
        reader.start()
        reader.join(30)  # a deadline, not a timing: the line comes at once or never
        assert first == [["one"]], "no chunk while the pipe stays open"
        os.write(write_end, b"\ntwo\r\nthree")  # the \n of "one"'s \r\n: no empty line
    finally:
        os.close(write_end)
        reader.join(30)
    assert [line for chunk in chunks for line in chunk] == ["two", "three"]


# === TFDS as a stream ===


class _PreparedTfds:
    """Stands in for ``tensorflow_datasets`` (not installed here; never downloaded in tests):
    its three calls that `TfdsCorpus` makes (``builder(...).info``, ``load``, ``as_numpy``)
    over real tf.data of real verses, as a prepared ``wmt14_translate/fr-en`` would give them.
    The stream, its checks, the pipeline stages and the collected corpus are the real code."""

    def __init__(self, pairs):
        self.pairs, self.loads = pairs, []
        features = {"fr": "Text", "en": "Text"}
        splits = {"train": type("Split", (), {"num_examples": len(pairs)})()}
        self.info = type("Info", (), {"supervised_keys": ("fr", "en"), "features": features,
                                      "splits": splits})()

    def builder(self, name, data_dir=None):
        return type("Builder", (), {"info": self.info})()

    def load(self, name, split, data_dir=None, download=False):
        self.loads.append((name, split, data_dir, download))
        return tf.data.Dataset.from_tensor_slices({
            "fr": [s.encode("utf-8") if isinstance(s, str) else s for s, _ in self.pairs],
            "en": [t.encode("utf-8") for _, t in self.pairs]})

    @staticmethod
    def as_numpy(dataset):
        return dataset.as_numpy_iterator()


def test_a_tfds_set_streams_through_the_same_stages_as_files(monkeypatch):
    verses = corpora.load_corpus("bible-en-es", split="train").select(slice(0, 1100)).pairs()
    fake = _PreparedTfds(verses)
    monkeypatch.setitem(__import__("sys").modules, "tensorflow_datasets", fake)
    stream = corpora.tfds_corpus("wmt14_translate/fr-en", data_dir="/prepared")
    assert isinstance(stream, CorpusFiles) and fake.loads == []  # nothing read yet
    assert (stream.direction, stream.name) == ("fr-en", "wmt14_translate/fr-en/train")
    assert list(stream.pairs()) == verses == streamed(stream)  # more than one PAIR_BATCH
    assert fake.loads[0] == ("wmt14_translate/fr-en", "train", "/prepared", False)  # no download
    assert stream.estimated_length() == (1100, True)  # from the metadata, not a pass
    assert stream.select(slice(0, 7)).estimated_length() == (7, True)
    assert streamed(stream.select(slice(0, 7))) == verses[:7]
    assert [c.pairs() for c in stream.chunks(600)] == [verses[:600], verses[600:]]
    collected = corpora.load_tfds("wmt14_translate/fr-en", max_examples=5)
    assert collected.pairs() == verses[:5] and collected.direction == "fr-en"
    with pytest.raises(ValueError, match="'de' is not a feature"):
        corpora.tfds_corpus("wmt14_translate/fr-en", source_language="de")
    bad = _PreparedTfds(verses[:3] + [(b"ca\xf1a", "cane")])
    monkeypatch.setitem(__import__("sys").modules, "tensorflow_datasets", bad)
    with pytest.raises(CorpusError, match="fr-en/train example 3 is not valid UTF-8"):
        list(corpora.tfds_corpus("wmt14_translate/fr-en").pairs())
