"""Tests of bahdanau_tf.alignment.guided: the attention targets of word links, the
trainer's guided loss on a copy task, Keras ``fit`` with `GuidedAlignmentModel`, and a guided
model's export served through the session bundle."""

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf import alignment, data, losses, serving, text, training
from bahdanau_tf.decoding import Batching
from bahdanau_tf.alignment import alignment_scores, attention_to_alignment
from bahdanau_tf.special_tokens import SPECIAL_TOKENS
from bahdanau_tf.translator import Translator
from helpers import beam, learning_seed

# 40 symbols: enough that the NLL alone takes well over 120 updates to line the attention up
SOURCE_WORDS = [f"s{i}" for i in range(40)]
TARGET_WORDS = [f"t{i}" for i in range(40)]


def copy_corpus(count, seed, distinct=False):
    """A copy task: source ``s3 s7 ...``, target ``t3 t7 ...`` (word i translates word i); with
    ``distinct``, no word twice in a sentence."""
    rng = np.random.default_rng(seed)
    pairs = []
    for length in rng.integers(3, 9, count):
        ids = (rng.choice(len(SOURCE_WORDS), length, replace=False) if distinct
               else rng.integers(0, len(SOURCE_WORDS), length))
        pairs.append((" ".join(SOURCE_WORDS[i] for i in ids), " ".join(TARGET_WORDS[i] for i in ids)))
    return pairs


def copy_tokenizers():
    return (text.WordTokenizer(list(SPECIAL_TOKENS) + SOURCE_WORDS),
            text.WordTokenizer(list(SPECIAL_TOKENS) + TARGET_WORDS))


def diagonal(pair):
    return {(i, i) for i in range(len(pair[0].split()))}


def test_targets_spread_a_word_link_over_the_pieces_of_both_words(tmp_path):
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("\n".join(list(SPECIAL_TOKENS) + ["a", "bc", "d", "x", "yz", "##e", "##f"]))
    tokenizer = text.SubwordTokenizer(str(vocabulary))
    pairs = [("a bcef d", "x yzf"), ("d a", "x")]
    # source words: a bcef d; target words: x yzf. Links: x <- a and d; yzf <- bcef
    links = [{(0, 0), (2, 0), (1, 1)}, set()]
    guide = alignment.AlignmentGuide.build(pairs, links, tokenizer, tokenizer)
    dataset = data.make_dataset(pairs, tokenizer, tokenizer, batch_size=2, bucketing=None,
                                shuffle=False, max_length=None).apply(guide.stage())
    (source, target_in, targets), target_out = next(iter(dataset))
    assert source.numpy()[0].tolist()[:6] == [4, 5, 9, 10, 6, 2]  # a bc ##e ##f d [END]
    expected = np.zeros(targets.shape[1:], np.float32)
    expected[0, [0, 4]] = 0.5  # x: the source words a (piece 0) and d (piece 4)
    expected[1, [1, 2, 3]] = 1 / 3  # yz: the three pieces of bcef
    expected[2, [1, 2, 3]] = 1 / 3  # ##f: a piece of the same target word
    np.testing.assert_allclose(targets.numpy()[0], expected, rtol=1e-6)
    assert not targets.numpy()[1].any()  # a pair without links costs nothing


def test_an_unaligned_target_word_attends_to_the_source_end_when_asked(tmp_path):
    source, target = copy_tokenizers()
    pairs = [("s1 s2 s3", "t1 t2 t3 t4")]
    links = [{(0, 0), (2, 1), (1, 1)}]  # t3 and t4 have no link
    batches = {}
    for unaligned in ("free", "end"):
        guide = alignment.AlignmentGuide.build(pairs, links, source, target, unaligned=unaligned)
        dataset = data.make_dataset(pairs, source, target, batch_size=1, bucketing=None,
                                    shuffle=False, max_length=None).apply(guide.stage())
        batches[unaligned] = next(iter(dataset))[0][2].numpy()[0]
    expected = np.zeros([5, 4], np.float32)  # rows: t1 t2 t3 t4 [END]; columns: s1 s2 s3 [END]
    expected[0, 0] = 1.0
    expected[1, [1, 2]] = 0.5
    np.testing.assert_allclose(batches["free"], expected)
    expected[[2, 3], 3] = 1.0  # the source [END]: unaligned; the target [END] row stays empty
    np.testing.assert_allclose(batches["end"], expected)
    with pytest.raises(ValueError, match="unaligned"):
        alignment.AlignmentGuide.build(pairs, links, source, target, unaligned="null")


def test_a_row_of_another_text_and_a_filled_row_get_no_target():
    source, target = copy_tokenizers()
    pairs = copy_corpus(4, seed=0)
    guide = alignment.AlignmentGuide.build(pairs, [diagonal(p) for p in pairs], source, target)
    other = [("s1 s2 s3", "t1 t2 t3")] if ("s1 s2 s3", "t1 t2 t3") not in pairs else [("s4", "t4")]
    dataset = data.make_dataset(pairs[:1] + other, source, target, batch_size=3, bucketing=None,
                                shuffle=False, fill_to_batch_size=True).apply(guide.stage())
    (_, _, targets), _ = next(iter(dataset))
    assert targets.shape[0] == 3
    first = len(pairs[0][0].split())
    np.testing.assert_array_equal(targets.numpy()[0, :first, :first], np.eye(first))
    assert targets.numpy()[0].sum() == first and not targets.numpy()[1:].any()


def test_links_that_do_not_match_their_pairs_are_refused_naming_the_line():
    """A file shifted by a line, 1-based, or of other pairs would lose every link naming a word
    its pair lacks (and train unguided when it lost them all): refused, by line, before the
    guide is built; the links that fit are all kept."""
    source, target = copy_tokenizers()
    pairs = [("s1 s2 s3", "t1 t2 t3"), ("s4", "t4"), ("s5 s6", "t5 t6")]
    right = [diagonal(p) for p in pairs]
    guide = alignment.AlignmentGuide.build(pairs, right, source, target)
    assert guide.links == sum(len(links) for links in right)  # every link kept
    refused = {
        "line 2 links 1-1, but training pair 2 has 1 source and 1 target words": [set()] + right,
        "line 1 links 3-3, but training pair 1 has 3 source": [{(i + 1, i + 1) for i, _ in links}
                                                               for links in right],
        "line 3 links 0-9, but training pair 3 has 2 source and 2 target words":
            right[:2] + [{(0, 0), (0, 9)}],
        "no word links for the 3 training pairs": [set()] * 3,
    }
    for message, links in refused.items():
        with pytest.raises(ValueError, match=message):
            alignment.check_word_links(pairs, links)
        with pytest.raises(ValueError, match=message):
            alignment.AlignmentGuide.build(pairs, links, source, target)


def test_guided_loss_against_numpy():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 3, 5))
    attention = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    targets = np.zeros((2, 3, 5))
    targets[0, 0, 1] = 1.0
    targets[0, 1, [2, 3]] = 0.5
    targets[1, 2, 4] = 1.0
    expected = -(targets * np.log(attention)).sum(-1)
    got = losses.guided_alignment_nll(tf.constant(attention, tf.float32), tf.constant(targets, tf.float32))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)
    assert got.numpy()[0, 2] == 0.0 and got.numpy()[1, 0] == 0.0  # rows without links
    weight = losses.guided_alignment_weight(2.0, 0.5, tf.constant(3000, tf.int64))
    assert float(weight) == pytest.approx(2.0 * 0.5 ** 3)


def _copy_run(directory, pairs, tokenizers, steps, guide=None):
    """Trains the copy task in ``directory`` up to update ``steps`` (from its last checkpoint)."""
    config = training.TrainingConfig.for_preset(
        "tiny", max_steps=steps, max_length=20, jit_compile=False, precision="float32",
        eval_every=10_000, checkpoint_every=10_000, dev_bleu_every=0, summaries=False,
        lexicon_top_k=0, average_last=0, batch_size=32, learning_rate=5e-3, seed=learning_seed(7))
    tf.keras.utils.set_random_seed(learning_seed(7))
    # Keras's initialisers: the paper's N(0, 0.001^2) attention weights learn slowly at any rate
    sizes = dict(initialization="keras", source_vocabulary_size=len(SOURCE_WORDS) + 4,
                 target_vocabulary_size=len(TARGET_WORDS) + 4)
    trainer = training.Trainer(str(directory), *tokenizers, preset="tiny", config=config,
                               log=lambda line: None, guide=guide, model_overrides=sizes)
    trainer.fit(pairs)
    return trainer.model


def _diagonal_aer(model, pairs, tokenizers):
    """AER of the teacher-forced attention (each target word's argmax) against the diagonal."""
    dataset = data.make_dataset(pairs, *tokenizers, batch_size=len(pairs), bucketing=None,
                                shuffle=False)
    (source, target_in), _ = next(iter(dataset))
    attention = model.attention_weights((source, target_in)).numpy()
    predicted = []
    for row, (source_text, target_text) in enumerate(pairs):
        n, m = len(source_text.split()), len(target_text.split())
        predicted.append(attention_to_alignment(attention[row], list(range(n)), list(range(m))))
    return alignment_scores(predicted, [diagonal(p) for p in pairs]).aer


@pytest.fixture(scope="module")
def copy_runs(tmp_path_factory):
    """The copy task trained with a diagonal alignment file until its attention is diagonal
    (AER < 0.1 on held-out pairs, checked every 60 updates, within 600), and trained as many
    updates without the file."""
    tokenizers = copy_tokenizers()
    pairs = copy_corpus(640, seed=1)
    links_file = tmp_path_factory.mktemp("links") / "train.links"
    links_file.write_text("".join(alignment.format_pharaoh(diagonal(p)) + "\n" for p in pairs))
    guide = alignment.AlignmentGuide.build(pairs, alignment.read_pharaoh(str(links_file)),
                                          *tokenizers)
    root = tmp_path_factory.mktemp("runs")
    test = copy_corpus(64, seed=2)
    # some seeds need more than 120 updates: train to the criterion, not for a fixed count
    for steps in range(60, 601, 60):
        guided = _copy_run(root / "guided", pairs, tokenizers, steps, guide)
        if _diagonal_aer(guided, test, tokenizers) < 0.1:
            break
    plain = _copy_run(root / "plain", pairs, tokenizers, steps)
    return {"tokenizers": tokenizers, "guided": guided, "plain": plain, "root": root, "test": test,
            "steps": steps}


@pytest.mark.slow
@pytest.mark.learning
def test_a_diagonal_alignment_file_makes_the_attention_diagonal_in_fewer_updates(copy_runs):
    tokenizers, test = copy_runs["tokenizers"], copy_runs["test"]
    guided = _diagonal_aer(copy_runs["guided"], test, tokenizers)
    plain = _diagonal_aer(copy_runs["plain"], test, tokenizers)
    assert guided < 0.1, (copy_runs["steps"], guided)
    assert plain > guided + 0.3, (copy_runs["steps"], plain, guided)


@pytest.mark.slow
def test_a_guided_model_exports_and_serves_through_the_session_bundle(copy_runs, tmp_path):
    translator = Translator.from_directory(str(copy_runs["root"] / "guided"), which="latest", search=beam(2), batching=Batching(jit_compile=False))
    sentences = [source for source, _ in copy_runs["test"][:5]]
    expected = translator.translate(sentences, return_alignments=True)
    path = serving.export_saved_model(translator, str(tmp_path / "export"))
    with serving.SessionBundle(path) as bundle:
        served = bundle.run("align", sentences=sentences)
        translations = bundle.run("serving_default", sentences=sentences)["translations"]
    assert [t.decode() for t in translations] == expected.translations
    for k, aligned in enumerate(expected.alignments):
        t, s = aligned.attention.shape
        np.testing.assert_allclose(served["attention"][k, :t, :s], aligned.attention, atol=1e-5)


@pytest.mark.slow
def test_keras_fit_adds_the_weighted_guided_loss():
    source, target = copy_tokenizers()
    pairs = copy_corpus(32, seed=4)
    guide = alignment.AlignmentGuide.build(pairs, [diagonal(p) for p in pairs], source, target)
    dataset = data.make_dataset(pairs, source, target, batch_size=32, bucketing=None,
                                shuffle=False).apply(guide.stage())
    from bahdanau_tf.models import RNNSearch

    model = RNNSearch.from_preset("tiny", source_vocabulary_size=44, target_vocabulary_size=44)
    wrapped = alignment.GuidedAlignmentModel(model, weight=0.5)
    wrapped.compile(optimizer="sgd", loss=losses.MaskedSparseCategoricalCrossentropy())
    (source_ids, target_in, targets), target_out = next(iter(dataset))
    nll = float(losses.masked_nll(target_out, model((source_ids, target_in))))
    attention = model.attention_weights((source_ids, target_in))
    tokens = float(tf.reduce_sum(tf.cast(target_in > 0, tf.float32)))
    guided = float(tf.reduce_sum(losses.guided_alignment_nll(attention, targets))) / tokens
    history = wrapped.fit(dataset, epochs=1, verbose=0)
    assert history.history["loss"][0] == pytest.approx(nll + 0.5 * guided, rel=1e-4)


def test_the_trainer_step_adds_the_weighted_cross_entropy_to_the_nll(tmp_path):
    tokenizers = copy_tokenizers()
    pairs = copy_corpus(64, seed=5)
    guide = alignment.AlignmentGuide.build(pairs, [diagonal(p) for p in pairs], *tokenizers)
    config = training.TrainingConfig.for_preset(
        "tiny", max_length=20, jit_compile=False, precision="float32", summaries=False,
        batch_size=16, guided_alignment_weight=0.7, guided_alignment_decay=0.5)
    trainer = training.Trainer(str(tmp_path), *tokenizers, preset="tiny", config=config,
                               log=lambda line: None, guide=guide,
                               model_overrides=dict(source_vocabulary_size=44, target_vocabulary_size=44,
                                                    initialization="keras"))
    trainer.step.assign(2000)
    (source, target_in, targets), target_out = next(iter(trainer.train_dataset(pairs, distribute=False)))
    tokens = tf.reduce_sum(tf.cast(target_out > 0, tf.float32))
    nll_sum, gradients = trainer._loss_and_gradients(source, target_in, target_out, tokens, None, targets)
    variables = trainer.model.trainable_variables
    with tf.GradientTape() as tape:
        logits = trainer.model((source, target_in), training=True)
        attention = trainer.model.attention_weights((source, target_in))
        nll = tf.reduce_sum(losses.token_nll(target_out, logits))
        cross_entropy = tf.reduce_sum(losses.guided_alignment_nll(attention, targets))
        loss = (nll + 0.7 * 0.5 ** 2 * cross_entropy) / tokens
    expected = tape.gradient(loss, variables)
    assert float(nll_sum) == pytest.approx(float(nll), rel=1e-5)
    nll_only = tf.GradientTape()  # the guided term must move the gradient measurably
    with nll_only:
        plain = tf.reduce_sum(losses.token_nll(target_out, trainer.model((source, target_in)))) / tokens
    difference = [tf.norm(tf.convert_to_tensor(a) - tf.convert_to_tensor(b)) for a, b in
                  zip(nll_only.gradient(plain, variables), expected) if a is not None]
    assert float(tf.add_n(difference)) > 1e-2
    for got, want in zip(gradients, expected):
        np.testing.assert_allclose(tf.convert_to_tensor(got).numpy(), tf.convert_to_tensor(want).numpy(),
                                   rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.learning
def test_translate_alignments_are_the_search_attentions_links(copy_runs, tmp_path):
    from bahdanau_tf.alignment import attention_links
    from helpers import env_without_tensorflow_logging, run_commands

    model_dir = str(copy_runs["root"] / "guided")
    sources = [source for source, _ in copy_runs["test"][:6]] + [""]
    (tmp_path / "in.txt").write_text("".join(s + "\n" for s in sources))
    # the two command lines (1-best, 2-best) as rows of one process
    rows = run_commands([("translate", [f"--model_dir={model_dir}", "--checkpoint=latest", "--beam_size=2",
                                        f"--nbest={nbest}", "--alignments", "--input_file=in.txt",
                                        "--nojit_compile"], "") for nbest in (1, 2)],
                        cwd=str(tmp_path), env=env_without_tensorflow_logging())
    outputs = {}
    for nbest, result in zip((1, 2), rows):
        assert result["code"] == 0, result["stderr"]
        outputs[nbest] = result["stdout"].splitlines()
    translator = Translator.from_directory(model_dir, which="latest", search=beam(2), batching=Batching(jit_compile=False))
    searched = translator.translate(sources, return_alignments=True)
    expected = attention_links(searched.alignments)  # the search's own attention
    assert len(outputs[1]) == len(sources)
    for line, translation, links, source in zip(outputs[1], searched.translations, expected, sources):
        text_part, separator, link_part = line.partition(" ||| ")
        assert separator and text_part == translation
        parsed = alignment.parse_pharaoh(link_part)
        assert parsed == links
        n_source, n_target = len(source.split()), len(translation.split())
        assert all(s < n_source and t < n_target for s, t in parsed)
    # the guided model attends diagonally: its links are (mostly) i-i
    links = [alignment.parse_pharaoh(line.partition(" ||| ")[2]) for line in outputs[1]]
    assert sum(s == t for sentence in links for s, t in sentence) >= 0.8 * sum(map(len, links))
    nbest = translator.translate(sources, nbest=2)
    for line, row in zip(outputs[2], nbest.translations):
        fields = line.split("\t")
        assert [f.partition(" ||| ")[0] for f in fields[::2]] == row
        for field, hypothesis in zip(fields[::2], row):
            parsed = alignment.parse_pharaoh(field.partition(" ||| ")[2])
            assert all(t < len(hypothesis.split()) for _, t in parsed)
