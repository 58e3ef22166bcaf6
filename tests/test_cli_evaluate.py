"""Tests for bahdanau-evaluate (bahdanau_tf/cli/evaluate.py), run in a fresh process.

A tiny RNNsearch is trained for a few hundred steps on short verses of the test split (so its
output is not degenerate and its attention not uniform), an untrained tiny RNNencdec sits
beside it, and the command must write a sane report.json and the figure 2 / figure 3 PNGs.
"""

import dataclasses
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf import evaluation
from bahdanau_tf.corpora import load_corpus

from bahdanau_tf.models import RNNEncDec, RNNSearch
from bahdanau_tf.special_tokens import END_ID, START_ID, UNK_TOKEN
from bahdanau_tf.text import WordTokenizer, split_words
from helpers import run_commands, save_model_dir

# every test here starts a Python process (or uses a module fixture that does)
pytestmark = pytest.mark.subprocess

SENTENCES = 24
READ_LINES = 7  # the test set streams in chunks of 7 pairs (24 = 3 * 7 + 3)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def train_tiny_rnnsearch(pairs, source_tokenizer, target_tokenizer, steps=300):
    """Teacher-forced Adam steps on ``pairs``; returns the model and its first/last losses."""
    tf.keras.utils.set_random_seed(0)
    model = RNNSearch.from_preset(
        "tiny", source_vocabulary_size=source_tokenizer.vocabulary_size,
        target_vocabulary_size=target_tokenizer.vocabulary_size,
        initialization="keras").build_variables()
    sources = [ids + [END_ID] for ids in source_tokenizer.tokenize([p[0] for p in pairs]).to_list()]
    targets = target_tokenizer.tokenize([p[1] for p in pairs]).to_list()
    pad = lambda rows: tf.keras.utils.pad_sequences(rows, padding="post")  # noqa: E731
    source = tf.constant(pad(sources), tf.int32)
    target_in = tf.constant(pad([[START_ID] + t for t in targets]), tf.int32)
    target_out = tf.constant(pad([t + [END_ID] for t in targets]), tf.int32)
    optimizer = tf.keras.optimizers.Adam(0.01)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            logits = model((source, target_in), training=True)
            loss = loss_fn(target_out, logits, sample_weight=tf.cast(target_out > 0, tf.float32))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return loss

    losses = [float(step()) for _ in range(steps)]
    return model, losses[0], losses[-1]


@pytest.fixture(scope="module")
def evaluation_dir(tmp_path_factory):
    corpus = load_corpus("bible-en-es", split="test")
    pairs = [p for p in corpus.pairs() if len(split_words(p[0])) <= 14][:64]
    source_tokenizer = WordTokenizer.build([p[0] for p in pairs], max_vocabulary_size=300)
    target_tokenizer = WordTokenizer.build([p[1] for p in pairs], max_vocabulary_size=300)
    model, first, last = train_tiny_rnnsearch(pairs, source_tokenizer, target_tokenizer)
    assert last < 0.5 * first  # it learned something
    root = tmp_path_factory.mktemp("evaluate")
    search_dir = save_model_dir(root / "rnnsearch", model, source_tokenizer, target_tokenizer)
    baseline = RNNEncDec.from_preset(
        "tiny", source_vocabulary_size=source_tokenizer.vocabulary_size,
        target_vocabulary_size=target_tokenizer.vocabulary_size).build_variables()
    baseline_dir = save_model_dir(root / "rnnencdec", baseline, source_tokenizer,
                                  target_tokenizer)
    output_dir = root / "out"
    # the user's files stream: a reference file shorter than the sources is met after the first
    # chunks were written (to temporary files); one process runs both command lines, without
    # XLA, which none of these tests is about (XLA's search equals the graph's:
    # tests/test_translator.py)
    files = root / "files"
    files.mkdir()
    (files / "src.txt").write_text("\n".join(corpus.sources[:20]) + "\n", encoding="utf-8")
    (files / "ref.txt").write_text("\n".join(corpus.targets[:19]) + "\n", encoding="utf-8")
    result, bad_line = run_commands([
        ("evaluate", [f"--model_dir={search_dir}", f"--model_dir={baseline_dir}", f"--output_dir={output_dir}",
                      f"--max_sentences={SENTENCES}", "--beam_size=2", "--attention_plots=2",
                      f"--read_lines={READ_LINES}", "--nojit_compile"], ""),
        ("evaluate", [f"--model_dir={search_dir}", f"--output_dir={files / 'out'}",
                      f"--source_file={files / 'src.txt'}", f"--reference_file={files / 'ref.txt'}",
                      "--read_lines=7", "--beam_size=1", "--nojit_compile"], ""),
    ], cwd=root)
    assert result["code"] == 0, result["stderr"][-3000:]
    return output_dir, corpus, search_dir, (bad_line, files)


def test_report_has_every_measure_with_sane_values(evaluation_dir):
    output_dir, corpus, _, _ = evaluation_dir
    report = json.loads((output_dir / "report.json").read_text(encoding="utf-8"))
    assert report["num_sentences"] == SENTENCES
    search, baseline = report["models"]
    assert (search["model"], baseline["model"]) == ("rnnsearch", "rnnencdec")
    references = corpus.targets[:SENTENCES]
    for entry in (search, baseline):
        assert entry["num_sentences"] == SENTENCES
        assert 0.0 <= entry["bleu"]["score"] <= 100.0
        assert sum(b["count"] for b in entry["bleu_by_length"]) == SENTENCES
        assert entry["settings"]["beam_size"] == 2
        assert entry["no_unk"]["num_total"] == SENTENCES
        assert 0 <= entry["no_unk"]["num_sentences"] <= SENTENCES
        assert entry["no_unk"]["num_hypotheses_with_unk"] == 0  # decoded with [UNK] forbidden
        lines = (output_dir / f"translations_{entry['model']}.txt").read_text(
            encoding="utf-8").split("\n")
        assert len(lines) == SENTENCES + 1 and lines[-1] == ""
        # --no_unk=auto at beam 2: nothing decoded twice when no translation has an [UNK]
        with_unk = sum(UNK_TOKEN in line for line in lines)
        decoded = entry["timings"]["no_unk_sentences_decoded"]
        if with_unk:
            expected = ("decode", entry["no_unk"]["num_sentences"])
            assert (entry["settings"]["no_unk"], decoded) == expected
        else:
            assert (entry["settings"]["no_unk"], decoded) == ("reuse", 0)
        # the scores summed over chunks of 7 are those of the written translations at once
        expected = dataclasses.asdict(evaluation.corpus_bleu(lines[:-1], references))
        assert entry["bleu"] == {**expected, "precisions": list(expected["precisions"])}
        assert entry["chrf"]["score"] == evaluation.corpus_chrf(lines[:-1], references).score
    assert search["settings"]["no_unk"] == "reuse"  # the trained model writes no [UNK]
    # the trained model says different things for different verses
    hypotheses = (output_dir / "translations_rnnsearch.txt").read_text(encoding="utf-8")
    assert len(set(hypotheses.split("\n"))) > SENTENCES // 2
    # AER for the attention model only, in [0, 1], over gold links: sure (S) and possible (P)
    # apart, S the links whose Strong's number tags one phrase on each side, P all links
    alignment = search["alignment"]
    assert 0.0 <= alignment["aer"] <= 1.0
    assert alignment["num_sure"] == sum(len(s or ()) for s in corpus.sure_alignments[:SENTENCES])
    assert alignment["num_possible"] == sum(len(p or ()) for p in corpus.alignments[:SENTENCES])
    assert alignment["num_sure"] < alignment["num_possible"]
    assert alignment["num_predicted"] > 0
    assert baseline["alignment"] is None and baseline["decoded_alignment"] is None
    assert search["decoded_alignment"] is None or 0.0 <= search["decoded_alignment"]["aer"] <= 1.0


def test_plots_are_written(evaluation_dir):
    output_dir, _, _, _ = evaluation_dir
    report = json.loads((output_dir / "report.json").read_text(encoding="utf-8"))
    search, baseline = report["models"]
    assert len(search["attention_plots"]) == 2 and baseline["attention_plots"] == []
    for name in search["attention_plots"] + ["bleu_by_length.png"]:
        data = (output_dir / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 2000
    import matplotlib.image

    image = matplotlib.image.imread(str(output_dir / search["attention_plots"][0]))
    assert image.shape[0] > 50 and image.shape[1] > 50
    assert np.ptp(image[..., :3]) > 0.5  # not a blank picture


def test_a_bad_line_of_streamed_files_leaves_nothing(evaluation_dir):
    """--source_file/--reference_file stream: a reference file shorter than the sources is met
    after the first chunks were written (to temporary files); the run leaves nothing behind."""
    result, files = evaluation_dir[3]
    assert result["code"] == 2, result["stderr"][-3000:]
    assert "Line counts differ" in result["stderr"] and "Traceback" not in result["stderr"]
    assert sorted(p.name for p in files.iterdir()) == ["ref.txt", "src.txt"]  # no out/
