"""Tests for bahdanau_tf.data: the embedded Bible, the loaders and make_dataset."""

import collections
import doctest
import re

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf import corpora, data, special_tokens
from bahdanau_tf.corpora import (
    ParallelCorpus,
    bible_split,
    load_corpus,
    load_parallel_files,
    load_tfds,
    load_tsv,
)
from bahdanau_tf.data import make_dataset
from bahdanau_tf.text import WordTokenizer, split_words

END, START, PAD = special_tokens.END_ID, special_tokens.START_ID, special_tokens.PAD_ID


@pytest.fixture(scope="module")
def everything():
    return load_corpus("bible-en-es", split="all")


@pytest.fixture(scope="module")
def dev():
    return load_corpus("bible-en-es", split="dev")


@pytest.fixture(scope="module")
def tokenizers(dev):
    return WordTokenizer.build(dev.sources), WordTokenizer.build(dev.targets)


# === the embedded corpus ===


def test_counts_and_splits_are_as_documented(everything):
    sizes = {split: len(load_corpus(split=split)) for split in ("train", "dev", "test")}
    assert sizes == {"train": 27989, "dev": 1007, "test": 2051}
    assert len(everything) == sum(sizes.values())
    assert len(set(everything.ids)) == len(everything)
    again = load_corpus(split="test")
    assert again.sources == load_corpus(split="test").sources


def test_split_rule_by_chapter(everything):
    splits = {split: set(load_corpus(split=split).ids) for split in ("train", "dev", "test")}
    split_of = {verse: split for split, verses in splits.items() for verse in verses}
    chapters = []  # (book, chapter) in canonical order, as the ids come
    chapter_splits = collections.defaultdict(set)
    for verse in everything.ids:
        chapter = verse.rsplit(":", 1)[0]
        if not chapters or chapters[-1] != chapter:
            chapters.append(chapter)
        chapter_splits[chapter].add(split_of[verse])
    assert len(chapters) == len(set(chapters)) == 1189
    assert all(len(s) == 1 for s in chapter_splits.values())  # no chapter in two splits
    for index, chapter in enumerate(chapters):
        assert chapter_splits[chapter] == {bible_split(index)}, chapter
    assert chapters[0] == "Gen 1" and chapters[-1] == "Rev 22"


def test_text_is_clean(everything):
    english = "\n".join(everything.sources)
    spanish = "\n".join(everything.targets)
    for text in (english, spanish):
        assert not re.search(r"[<>]|&\w+;|\b[GH]\d{3,4}\b", text)  # no markup, no <H3027>
        assert not re.search(r"[a-záéíóúñ][A-ZÁÉÍÓÚÑ]", text)  # no "bornSon"
        assert not re.search("[“”‘’\u00a0\t]|  ", text)
    assert all(s.strip() == s and s for s in everything.sources + everything.targets)
    verse = dict(zip(everything.ids, zip(everything.sources, everything.targets)))
    assert "his only born Son," in verse["John 3:16"][0]
    # enclitic pronouns stay on their verb, glued words are separated
    assert "díjoles" in verse["Gen 9:1"][1]
    assert "hay allí también bdelio" in verse["Gen 2:12"][1]  # "allí</w><transChange>también"
    assert "enviándole" in spanish and "enviándo le" not in spanish
    # psalm superscriptions are in verse 1 on both sides
    assert verse["Ps 3:1"][0].startswith("A Psalm by David, when he fled from Absalom")
    assert verse["Ps 3:1"][1].startswith("Salmo de David, cuando huía de delante de Absalom")


def test_shifted_rv1909_chapters_are_re_paired(everything):
    verse = dict(zip(everything.ids, zip(everything.sources, everything.targets)))
    english, spanish = verse["Jonah 1:17"]
    assert "huge fish" in english and "gran pez" in spanish
    english, spanish = verse["Jonah 2:1"]
    assert "Jonah prayed" in english and "oró Jonás" in spanish


HAND_CHECKED = {
    # verse: (english word, spanish word) links that must be there, checked by hand
    ("test", "Gen 9:1"): [("God", "Dios"), ("Noah", "Noé"), ("fruitful", "Fructificad"),
                          ("multiply", "multiplicad"), ("earth", "tierra")],
    ("test", "Matt 8:1"): [("mountain", "monte"), ("multitudes", "gentes"),
                           ("followed", "seguían"), ("came", "descendió")],
    ("dev", "Gen 5:1"): [("book", "libro"), ("Adam", "Adam"), ("created", "crió"),
                         ("man", "hombre"), ("likeness", "semejanza")],
    ("dev", "Rev 22:21"): [("grace", "gracia"), ("Jesus", "Jesucristo")],
}


@pytest.mark.parametrize("split,verse", sorted(HAND_CHECKED))
def test_gold_alignments_checked_by_hand(split, verse):
    for direction in ("en-es", "es-en"):
        corpus = load_corpus(split=split, direction=direction)
        index = corpus.ids.index(verse)
        source = split_words(corpus.sources[index])
        target = split_words(corpus.targets[index])
        links = {(source[i], target[j]) for i, j in corpus.alignments[index]}
        sure = {(source[i], target[j]) for i, j in corpus.sure_alignments[index]}
        for english, spanish in HAND_CHECKED[(split, verse)]:
            pair = (english, spanish) if direction == "en-es" else (spanish, english)
            assert pair in sure and pair in links, (verse, direction, pair)
    # and a wrong pairing is not there
    corpus = load_corpus(split=split)
    index = corpus.ids.index(verse)
    source, target = split_words(corpus.sources[index]), split_words(corpus.targets[index])
    links = {(source[i], target[j]) for i, j in corpus.alignments[index]}
    assert (HAND_CHECKED[(split, verse)][0][0], HAND_CHECKED[(split, verse)][1][1]) not in links


def test_gold_alignment_indices_are_consistent():
    for split in ("dev", "test"):
        corpus = load_corpus(split=split)
        with_gold = 0
        for source, target, links, sure in zip(corpus.sources, corpus.targets,
                                               corpus.alignments, corpus.sure_alignments):
            if links is None:
                assert sure is None
                continue
            with_gold += 1
            n, m = len(split_words(source)), len(split_words(target))
            assert all(0 <= i < n and 0 <= j < m for i, j in links)
            assert set(sure) <= set(links)
        assert with_gold > 0.9 * len(corpus)
    assert load_corpus(split="train").alignments is None


def test_bad_names_are_rejected():
    with pytest.raises(ValueError, match="'bible-fr'.*bible-en-es"):
        load_corpus("bible-fr")
    with pytest.raises(ValueError, match="'valid'.*'dev'"):
        load_corpus(split="valid")
    with pytest.raises(ValueError, match="'en-fr'.*'es-en'"):
        load_corpus(direction="en-fr")


def test_direction_swaps_sides(dev):
    reverse = load_corpus(split="dev", direction="es-en")
    assert reverse.sources == dev.targets and reverse.targets == dev.sources
    assert reverse.ids == dev.ids


# === the user's own files ===


def test_load_parallel_files_and_errors(tmp_path):
    source, target = tmp_path / "a.en", tmp_path / "a.es"
    source.write_text("Hello.\r\nGood morning\n", encoding="utf-8")
    target.write_text("Hola.\nBuenos días\n", encoding="utf-8")
    corpus = load_parallel_files(str(source), str(target))
    assert corpus.pairs() == [("Hello.", "Hola."), ("Good morning", "Buenos días")]
    assert len(corpus) == 2 and corpus.alignments is None

    with pytest.raises(FileNotFoundError, match="missing.es"):
        load_parallel_files(str(source), str(tmp_path / "missing.es"))
    target.write_text("Hola.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"a.en.*2 lines.*a.es.*has 1"):
        load_parallel_files(str(source), str(target))
    target.write_bytes(b"Hola.\nBuenos d\xeda\n")
    with pytest.raises(ValueError, match=r"a.es.*line 2 is not valid UTF-8"):
        load_parallel_files(str(source), str(target))


def test_load_tsv(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("en\tes\nHello.\tHola.\n\nYes\tSí\n", encoding="utf-8")
    corpus = load_tsv(str(path), skip_header=True)
    assert corpus.pairs() == [("Hello.", "Hola."), ("Yes", "Sí")]
    assert load_tsv(str(path), source_column=1, target_column=0).sources[1] == "Hola."
    path.write_text("Hello.\tHola.\nno tab here\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2 has 1 tab-separated column"):
        load_tsv(str(path))
    # a stray tab is an error with its line number, not a silently cut third column
    path.write_text("Hello.\tHola.\nYes\tSí\tsí\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2 has 3 tab-separated column.*2 expected"):
        load_tsv(str(path))
    assert load_tsv(str(path), columns=None).targets == ["Hola.", "Sí"]  # explicitly allowed


def test_read_lines_one_rule_for_line_ends_and_bytes(tmp_path):
    path = tmp_path / "mac.txt"
    # CR-only line ends (old Mac files) are line ends, not one long line; U+2028 is text
    path.write_bytes(b"one\rtwo\r\nthree\nfour \xe2\x80\xa8 still four\r")
    assert corpora.read_lines(str(path)) == ["one", "two", "three", "four \u2028 still four"]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_bytes(b"a\tb\rc\td\r")
    assert load_tsv(str(pairs)).pairs() == [("a", "b"), ("c", "d")]
    path.write_bytes(b"\xef\xbb\xbfok\nbad \xff byte\n")
    with pytest.raises(ValueError, match=r"mac.txt' line 2 is not valid UTF-8"):
        corpora.read_lines(str(path))
    with pytest.raises(IsADirectoryError):
        corpora.read_lines(str(tmp_path))


def test_select_corpus_picks_files_over_the_embedded_corpus(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("Hello.\tHola.\n", encoding="utf-8")
    assert corpora.select_corpus(tsv=str(path)).pairs() == [("Hello.", "Hola.")]
    assert corpora.select_corpus(split="dev", direction="es-en").name == "bible-en-es/dev"
    with pytest.raises(ValueError, match="go together"):
        corpora.select_corpus(source_file=str(path))
    with pytest.raises(ValueError, match="not both"):
        corpora.select_corpus(tsv=str(path), source_file=str(path), target_file=str(path))


def test_load_tfds_is_lazy():
    try:
        import tensorflow_datasets  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install tensorflow-datasets"):
            load_tfds("wmt14_translate/fr-en")
    else:
        pytest.skip("tensorflow_datasets is installed; the missing-package path is not testable")


# === make_dataset ===


def batches(dataset):
    return [((s.numpy(), ti.numpy()), to.numpy()) for (s, ti), to in dataset]


def check_batch(source, target_in, target_out):
    assert source.dtype == target_in.dtype == target_out.dtype == np.int32
    for s, ti, to in zip(source, target_in, target_out):
        n = int(np.sum(s != PAD))
        m = int(np.sum(to != PAD))
        assert n >= 2 and m >= 2
        assert s[n - 1] == END and END not in s[: n - 1] and (s[n:] == PAD).all()
        assert to[m - 1] == END and (to[m:] == PAD).all()
        assert ti[0] == START and (ti[1:m] == to[: m - 1]).all() and (ti[m:] == PAD).all()


def test_make_dataset_ids_padding_and_limits(dev, tokenizers):
    en, es = tokenizers
    got = batches(make_dataset(dev, en, es, batch_size=16, max_length=20, bucketing=None,
                               shuffle=False))
    expected = [
        (s, t) for s, t in dev.pairs()
        if 0 < len(split_words(s)) <= 20 and 0 < len(split_words(t)) <= 20
    ]
    assert sum(b[0][0].shape[0] for b in got) == len(expected) < len(dev)
    assert [b[0][0].shape[0] for b in got[:-1]] == [16] * (len(got) - 1)
    for (source, target_in), target_out in got:
        check_batch(source, target_in, target_out)
        assert source.shape[1] <= 21 and target_out.shape[1] <= 21
    # unshuffled, the first pair is the first short pair, ids as the tokenizer gives them
    (source, _), target_out = got[0]
    first = en.tokenize([expected[0][0]]).to_list()[0] + [END]
    assert source[0][: len(first)].tolist() == first
    assert target_out[0][: len(split_words(expected[0][1])) + 1][-1] == END


@pytest.mark.slow
def test_paper_bucketing_sorts_each_window(dev, tokenizers):
    en, es = tokenizers
    batch_size, window = 8, 5
    dataset = make_dataset(dev, en, es, batch_size=batch_size, max_length=50,
                           batches_per_window=window, seed=7)
    got = batches(dataset)
    kept = sum(
        0 < len(split_words(s)) <= 50 and 0 < len(split_words(t)) <= 50 for s, t in dev.pairs()
    )
    assert sum(b[0][0].shape[0] for b in got) == kept
    order_differs = False
    for start in range(0, len(got), window):
        group = got[start: start + window]
        # sorted by the longer side's length (ties by target length)
        lengths = [np.maximum(np.sum(b[0][0] != PAD, axis=1), np.sum(b[1] != PAD, axis=1)) for b in group]
        for (source, target_in), target_out in group:
            check_batch(source, target_in, target_out)
            # each batch is padded to its own longest sentence only
            assert np.sum(source != PAD, axis=1).max() == source.shape[1]
            assert np.sum(target_out != PAD, axis=1).max() == target_out.shape[1]
        ordered = sorted(lengths, key=lambda l: l.min())
        for shorter, longer in zip(ordered, ordered[1:]):
            assert shorter.max() <= longer.min()  # sorted by length across the window
        order_differs |= [l.min() for l in lengths] != [l.min() for l in ordered]
    assert order_differs  # the batch order inside windows is shuffled
    # seeded: same seed, same batches; another seed, other batches
    again = batches(make_dataset(dev, en, es, batch_size=batch_size, batches_per_window=window,
                                 seed=7))
    assert all((a[0][0] == b[0][0]).all() for a, b in zip(got, again))
    other = batches(make_dataset(dev, en, es, batch_size=batch_size, batches_per_window=window,
                                 seed=8))
    assert any(a[0][0].shape != b[0][0].shape or (a[0][0] != b[0][0]).any()
               for a, b in zip(got, other))


def test_token_budget_bucketing(dev, tokenizers):
    en, es = tokenizers
    got = batches(make_dataset(dev, en, es, batch_size=16, max_length=30,
                               bucketing="token_budget", tokens_per_batch=300))
    assert len(got) > 5
    for (source, target_in), target_out in got:
        check_batch(source, target_in, target_out)
        longest = max(source.shape[1], target_out.shape[1])
        assert source.shape[0] * longest <= 300 + 31


def test_make_dataset_inputs_and_options(tokenizers):
    en, es = tokenizers
    pairs = [("God said", "Dijo Dios"), ("", "Dios"), ("God", ""), ("the earth", "la tierra")]
    got = batches(make_dataset(pairs, en, es, batch_size=4, shuffle=False, bucketing=None))
    assert len(got) == 1 and got[0][0][0].shape[0] == 2  # empty pairs dropped
    strings = tf.data.Dataset.from_tensor_slices((["God said"] * 3, ["Dijo Dios"] * 3))
    repeated = make_dataset(strings, en, es, batch_size=2, repeat=True, bucketing=None)
    assert len(list(repeated.take(7))) == 7
    corpus = ParallelCorpus(sources=["God said"], targets=["Dijo Dios"])
    ((source, target_in), target_out), = batches(make_dataset(corpus, en, es, batch_size=1))
    assert target_in[0][0] == START and source[0][-1] == END
    with pytest.raises(ValueError, match="'sorted'"):
        make_dataset(pairs, en, es, bucketing="sorted")
    with pytest.raises(ValueError, match="item 0"):
        make_dataset(["God said"], en, es)


# === bahdanau-data ===


def test_cli_statistics_and_vocabularies(tmp_path, capsys):
    from absl import flags

    from bahdanau_tf.cli import data as cli
    from bahdanau_tf.text import load_tokenizer

    path = tmp_path / "pairs.tsv"
    path.write_text("God said.\tDijo Dios.\nGod saw the light\tVió Dios la luz\n", encoding="utf-8")
    vocabulary_dir = tmp_path / "vocab"
    flags.FLAGS(["bahdanau-data", f"--tsv={path}", f"--vocabulary_dir={vocabulary_dir}", "--tokenizer=word",
                 "--json"])
    try:
        cli.main(["bahdanau-data"])
    finally:
        flags.FLAGS.unparse_flags()
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["all"]["pairs"] == 2
    assert report["all"]["source"]["words"] == 7 and report["all"]["target"]["max"] == 4
    source = load_tokenizer(str(vocabulary_dir / "source"))
    assert report["source_vocabulary"]["size"] == source.vocabulary_size == 4 + 6
    assert 3 not in source.tokenize(["God saw the light."]).to_list()[0]


def _run_data_cli(*arguments):
    from absl import flags

    from bahdanau_tf.cli import data as cli

    flags.FLAGS(["bahdanau-data", *arguments])
    try:
        cli.main(["bahdanau-data"])
    finally:
        flags.FLAGS.unparse_flags()


def test_cli_streams_the_users_files_with_the_statistics_of_the_whole_corpus(tmp_path, capsys, monkeypatch):
    """Chunks of 700 pairs give the numbers computed on the whole lists (np.percentile, counts)."""
    import json

    from bahdanau_tf.cli import data as cli
    from bahdanau_tf.corpora import load_corpus
    from bahdanau_tf.special_tokens import UNK_ID
    from bahdanau_tf.text import load_tokenizer

    pairs = load_corpus("bible-en-es", split="train").pairs()[:2500]
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    monkeypatch.setattr(cli, "CHUNK_PAIRS", 700)  # four chunks, the last one short
    _run_data_cli(f"--tsv={path}", f"--vocabulary_dir={tmp_path / 'vocab'}", "--tokenizer=word",
                  "--vocabulary_size=300", "--json")
    report = json.loads(capsys.readouterr().out)

    lengths = {side: np.array([len(split_words(pair[i])) for pair in pairs]) for i, side in enumerate(("source", "target"))}
    assert report["all"]["pairs"] == 2500
    for side, values in lengths.items():
        p50, p90, p99 = np.percentile(values, [50, 90, 99])
        assert report["all"][side] == {"words": int(values.sum()), "p50": p50, "p90": p90, "p99": p99,
                                       "max": int(values.max())}
    both = np.maximum(lengths["source"], lengths["target"])
    assert report["all"]["share_within_30"] == pytest.approx(np.mean(both <= 30))
    assert report["all"]["share_within_50"] == pytest.approx(np.mean(both <= 50))
    for i, side in enumerate(("source", "target")):
        rows = load_tokenizer(str(tmp_path / "vocab" / side)).tokenize([pair[i] for pair in pairs]).to_list()
        flat = [token for row in rows for token in row]
        expected = {"token_coverage": pytest.approx(np.mean([t != UNK_ID for t in flat])),
                    "sentences_without_unk": pytest.approx(np.mean([UNK_ID not in row for row in rows]))}
        assert report[f"{side}_vocabulary"]["all_coverage"] == expected
        assert expected["token_coverage"] != 1.0  # a 300-word vocabulary leaves words out


def test_cli_stops_at_a_bad_line_of_a_streamed_file_before_writing_vocabularies(tmp_path, monkeypatch):
    from bahdanau_tf.cli import data as cli

    path = tmp_path / "pairs.tsv"
    path.write_bytes(b"God said.\tDijo Dios.\n" * 1500 + b"bad \xff line\tmala\n" + b"Yes\tS\xc3\xad\n" * 10)
    monkeypatch.setattr(cli, "CHUNK_PAIRS", 700)
    with pytest.raises(ValueError, match=r"pairs\.tsv.*line 1501"):
        _run_data_cli(f"--tsv={path}", f"--vocabulary_dir={tmp_path / 'vocab'}", "--tokenizer=word")
    assert not (tmp_path / "vocab").exists()


def test_pad_batch_rounds_lengths_up_and_fill_batch_adds_empty_pairs():
    source = tf.constant([[5, 6, 2]])
    target_in = tf.constant([[1, 7, 8, 9, 10]])
    target_out = tf.constant([[7, 8, 9, 10, 2]])
    # 3 and 5 round to 4 and 8, one multiple apart: both sides take 8 (one program for both)
    (s, ti), to = data.pad_batch(((source, target_in), target_out), 4, max_length=50)
    assert (s.shape, ti.shape, to.shape) == ((1, 8), (1, 8), (1, 8))
    np.testing.assert_array_equal(to[0], [7, 8, 9, 10, 2, 0, 0, 0])
    np.testing.assert_array_equal(s[0], [5, 6, 2, 0, 0, 0, 0, 0])
    # 3 and 9 round to 4 and 12, further apart: each side its own
    long_in, long_out = tf.constant([[1] + [7] * 8]), tf.constant([[7] * 8 + [2]])
    (s_far, ti_far), to_far = data.pad_batch(((source, long_in), long_out), 4, max_length=50)
    assert (s_far.shape, ti_far.shape, to_far.shape) == ((1, 4), (1, 12), (1, 12))
    (s_capped, ti_capped), _ = data.pad_batch(((source, target_in), target_out), 4, max_length=5)
    assert (s_capped.shape, ti_capped.shape) == ((1, 6), (1, 6))  # never beyond max_length + 1
    (s, ti), to = data.fill_batch(((s, ti), to), 3)
    np.testing.assert_array_equal(s[1:], [[2] + [0] * 7] * 2)
    np.testing.assert_array_equal(ti[1:, :2], [[1, 0]] * 2)
    assert int(tf.reduce_sum(to[1:])) == 0


# === what Keras sees: cardinality and shapes ===


@pytest.mark.parametrize("options", [
    dict(bucketing="paper", batches_per_window=3),
    dict(bucketing=None, drop_remainder=True),
    dict(bucketing="token_budget", tokens_per_batch=200),
    dict(bucketing="token_budget", tokens_per_batch=200, drop_remainder=True),
])
def test_cardinality_is_the_number_of_batches_produced(dev, tokenizers, options):
    en, es = tokenizers
    corpus = dev.select(slice(0, 300))
    dataset = make_dataset(corpus, en, es, batch_size=16, max_length=25, **options)
    produced = len(batches(dataset))
    assert int(dataset.cardinality()) == produced > 0
    kept = sum(0 < len(split_words(s)) <= 25 and 0 < len(split_words(t)) <= 25 for s, t in corpus.pairs())
    assert data.count_pairs(corpus, en, es, max_length=25)["kept"] == kept < len(corpus)


@pytest.mark.slow
def test_repeated_dataset_is_infinite_and_fit_knows_its_steps(dev):
    import keras

    from bahdanau_tf import losses
    from bahdanau_tf.models import RNNSearch

    corpus = dev.select(slice(0, 150))
    en = WordTokenizer.build(corpus.sources, max_vocabulary_size=200)
    es = WordTokenizer.build(corpus.targets, max_vocabulary_size=200)
    repeated = make_dataset(corpus, en, es, batch_size=32, max_length=20, repeat=True)
    assert int(repeated.cardinality()) == tf.data.INFINITE_CARDINALITY
    dataset = make_dataset(corpus, en, es, batch_size=32, max_length=20)
    steps = int(dataset.cardinality())
    assert steps == len(batches(dataset)) > 1

    class Steps(keras.callbacks.Callback):
        seen = []

        def on_epoch_begin(self, epoch, logs=None):
            self.seen.append(self.params["steps"])

    model = RNNSearch.from_preset("tiny", source_vocabulary_size=en.vocabulary_size,
                                  target_vocabulary_size=es.vocabulary_size)
    model.compile(optimizer="adam", loss=losses.MaskedSparseCategoricalCrossentropy())
    model.fit(dataset, epochs=2, verbose=0, callbacks=[Steps()])
    assert Steps.seen == [steps, steps]  # Keras's progress bar has its total, hence an ETA


def test_pad_to_multiple_bounds_the_shapes(dev, tokenizers):
    en, es = tokenizers
    plain = batches(make_dataset(dev, en, es, batch_size=32, max_length=30, shuffle=False))
    padded = batches(make_dataset(dev, en, es, batch_size=32, max_length=30, shuffle=False,
                                  pad_to_multiple=8))
    assert len(padded) == len(plain)
    def rounded(length):  # up to a multiple of 8, at most max_length + 1 = 31
        return min(-(-length // 8) * 8, 31)

    for ((source, target_in), target_out), ((s, ti), to) in zip(padded, plain):
        own = {"source": rounded(s.shape[1]), "target": rounded(ti.shape[1])}
        # sides that round at most one multiple apart both take the longer
        if abs(own["source"] - own["target"]) <= 8:
            own = dict.fromkeys(own, max(own.values()))
        for wide, narrow, side in ((source, s, "source"), (target_in, ti, "target"), (target_out, to, "target")):
            # the same ids, then padding
            assert wide.shape[1] == own[side]
            np.testing.assert_array_equal(wide[:, : narrow.shape[1]], narrow)
            assert (wide[:, narrow.shape[1]:] == PAD).all()
    lengths = {b[0][0].shape[1] for b in padded} | {b[1].shape[1] for b in padded}
    assert lengths <= {8, 16, 24, 31} and len({b[0][0].shape[1] for b in plain}) > 4
    with pytest.raises(ValueError, match="pad_to_multiple"):
        make_dataset(dev, en, es, pad_to_multiple=0)


def test_filled_batches_have_batch_size_rows_and_the_same_pairs(dev, tokenizers):
    """make_dataset owns batch shaping: the trainer's filled, padded batches are the plain ones
    with empty pairs ([END] / [START], nothing to predict) added and lengths rounded up."""
    en, es = tokenizers
    options = dict(batch_size=48, max_length=30, shuffle=False)
    plain = batches(make_dataset(dev, en, es, **options))
    filled = batches(make_dataset(dev, en, es, pad_to_multiple=8, fill_to_batch_size=True, **options))
    assert len(filled) == len(plain) and plain[-1][1].shape[0] < 48  # the last batch was short
    for ((source, target_in), target_out), ((s, ti), to) in zip(filled, plain):
        rows = s.shape[0]
        assert source.shape[0] == target_in.shape[0] == target_out.shape[0] == 48
        for wide, narrow in ((source, s), (target_in, ti), (target_out, to)):
            np.testing.assert_array_equal(wide[:rows, : narrow.shape[1]], narrow)
            assert wide.shape[1] in (8, 16, 24, 31) and (wide[:rows, narrow.shape[1]:] == PAD).all()
        assert (source[rows:, 0] == END).all() and (source[rows:, 1:] == PAD).all()
        assert (target_in[rows:, 0] == START).all() and (target_out[rows:] == PAD).all()


@pytest.mark.slow
def test_a_stream_of_unknown_length_gives_the_same_batches(dev, tokenizers):
    """Every stage streams: a generator source (unknown cardinality) batches like the corpus."""
    en, es = tokenizers
    stream = tf.data.Dataset.from_generator(
        lambda: zip(dev.sources, dev.targets),
        output_signature=(tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.string)))
    assert stream.cardinality() == tf.data.UNKNOWN_CARDINALITY
    for bucketing in ("paper", "token_budget", None):
        options = dict(batch_size=32, bucketing=bucketing, shuffle=False)
        for a, b in zip(batches(make_dataset(stream, en, es, **options)),
                        batches(make_dataset(dev, en, es, **options)), strict=True):
            for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
                np.testing.assert_array_equal(x, y)


def write_tsv(path, corpus):
    path.write_text("".join(f"{s}\t{t}\n" for s, t in corpus.pairs()), encoding="utf-8")
    return str(path)


def assert_same_batches(first, second):
    for a, b in zip(batches(first), batches(second), strict=True):
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            np.testing.assert_array_equal(x, y)


@pytest.mark.slow
def test_a_file_stream_gives_the_batches_of_the_loaded_file(tmp_path, dev, tokenizers):
    """`CorpusFiles` feeds the same stages: the batches of the loaded corpus, shuffled or not."""
    en, es = tokenizers
    stream = corpora.CorpusFiles.tsv(write_tsv(tmp_path / "dev.tsv", dev))
    options = dict(batch_size=32, max_length=30, pad_to_multiple=8, fill_to_batch_size=True)
    assert_same_batches(make_dataset(stream, en, es, shuffle=False, **options),
                        make_dataset(dev, en, es, shuffle=False, **options))
    # a shuffle buffer as large as the corpus: the order of the loaded corpus under the seed
    assert_same_batches(make_dataset(stream, en, es, seed=7, shuffle_buffer_size=len(dev), **options),
                        make_dataset(dev, en, es, seed=7, **options))


def first_sources(dataset, count):
    """The first source row (as a tuple) of each of the first ``count`` batches."""
    return [tuple(batch[0][0][0]) for batch in batches(dataset.take(count))]


@pytest.mark.slow
def test_the_shuffle_buffer_is_bounded_and_epochs_reshuffle_under_the_seed(dev, tokenizers):
    en, es = tokenizers
    corpus = dev.select(slice(0, 256))
    options = dict(batch_size=16, max_length=None, bucketing=None, repeat=True)
    per_epoch = 256 // 16
    two_epochs = first_sources(make_dataset(corpus, en, es, seed=3, **options), 2 * per_epoch)
    assert two_epochs == first_sources(make_dataset(corpus, en, es, seed=3, **options), 2 * per_epoch)
    assert two_epochs[:per_epoch] != two_epochs[per_epoch:]  # every epoch its own order
    assert two_epochs != first_sources(make_dataset(corpus, en, es, seed=4, **options), 2 * per_epoch)
    # a buffer of 1 pair cannot move a pair: the corpus order, every epoch
    unshuffled = first_sources(make_dataset(corpus, en, es, shuffle=False, **options), per_epoch)
    assert first_sources(make_dataset(corpus, en, es, shuffle_buffer_size=1, **options),
                         2 * per_epoch) == unshuffled * 2
    # a buffer of 32 pairs: the first batch of 16 draws from the first 32 + 15 pairs only
    window = {tuple(ids) + (END,) for ids in en.tokenize(corpus.sources[:47]).to_list()}

    def first_rows(**buffer):
        (source, _), _ = next(iter(make_dataset(corpus, en, es, **buffer, **options)))
        return {tuple(int(i) for i in row if i != PAD) for row in source.numpy()}

    assert first_rows(shuffle_buffer_size=32) <= window
    assert not first_rows() <= window  # the default buffer holds all 256
    assert data.DEFAULT_SHUFFLE_BUFFER == 100_000
    with pytest.raises(ValueError, match="shuffle_buffer_size must be a positive int, got 0"):
        make_dataset(corpus, en, es, shuffle_buffer_size=0)


def test_count_pairs_estimates_a_long_stream_from_its_first_pairs(tmp_path, dev, tokenizers):
    en, es = tokenizers
    stream = corpora.CorpusFiles.tsv(write_tsv(tmp_path / "dev.tsv", dev))
    exact = data.count_pairs(dev, en, es, max_length=30)
    assert data.count_pairs(stream, en, es, max_length=30) == exact  # short: counted, not estimated
    assert exact["estimated"] is False and exact["kept"] < exact["total"] == len(dev)
    estimate = data.count_pairs(stream, en, es, max_length=30, sample=300)
    assert estimate["estimated"] is True
    # the first 300 verses (Genesis) speak for the rest: within 15% of the counts
    for key in ("total", "kept"):
        assert abs(estimate[key] - exact[key]) < 0.15 * exact[key], (key, estimate, exact)
    assert estimate["total"] == estimate["kept"] + estimate["empty"] + estimate["too_long"]


_SHARD_WORKER = r"""
import json, sys
import tensorflow as tf
from bahdanau_tf import corpora, data
from bahdanau_tf.text import WordTokenizer
strategy = tf.distribute.MultiWorkerMirroredStrategy()
stream = corpora.CorpusFiles.tsv(sys.argv[1])
words = WordTokenizer.build([sentence for pair in stream.pairs() for sentence in pair])
dataset = data.make_dataset(stream, words, words, batch_size=8, bucketing=None, seed=5, max_length=None)
sources = []
for (source, _), _ in strategy.experimental_distribute_dataset(dataset):
    for local in strategy.experimental_local_results(source):
        sources += [words.detokenize([[int(i) for i in row if i > 3]]).numpy()[0].decode() for row in local.numpy()]
print(json.dumps(sources))
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_two_workers_read_disjoint_shares_that_cover_a_streamed_corpus(tmp_path):
    """MultiWorkerMirroredStrategy over two local processes: each worker's batches hold other
    pairs, and together every pair of the file once (tf.data's DATA auto-sharding)."""
    import json
    import os
    import socket
    import subprocess
    import sys

    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"w{i} x\ty{i}\n" for i in range(100)), encoding="utf-8")
    ports = []
    for _ in range(2):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = [subprocess.Popen(
        [sys.executable, "-c", _SHARD_WORKER, str(path)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}})))
        for index in range(2)]
    try:
        outputs = [process.communicate(timeout=300) for process in processes]
    finally:
        for process in processes:
            process.kill()
    for process, (_, err) in zip(processes, outputs):
        assert process.returncode == 0, err[-3000:]
    first, second = (json.loads(out.strip().splitlines()[-1]) for out, _ in outputs)
    assert len(first) == len(second) == 50 and not set(first) & set(second)
    assert sorted(first + second) == sorted(f"w{i} x" for i in range(100))


def test_every_stage_has_a_doctest_that_passes():
    stages = [data.string_pairs, data.tokenize, data.filter_by_length, data.add_special_ids,
              data.batch_by_length, data.padded_batches, data.token_budget_batches,
              data.paper_batches, data.to_model_inputs, data.pad_lengths, data.fill_batches,
              data.make_dataset]
    finder = doctest.DocTestFinder()
    for stage in stages:
        assert finder.find(stage, globs=vars(data))[0].examples, stage.__name__
    assert doctest.testmod(data).failed == 0
