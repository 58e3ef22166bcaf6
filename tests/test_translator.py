"""Tests for bahdanau_tf.translator: strings in, strings out, in one graph.

The models are `tiny` presets whose weights are redrawn at a larger scale than the paper's
initialisation (N(0, 0.01^2) makes every distribution almost uniform, so beam search would
meet near-ties everywhere); a redrawn model has peaked, history-dependent distributions and
non-uniform attention, which is what the comparisons below need.
"""

import os
import re

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf import model_directory
from bahdanau_tf.decoding import Batching, BeamSearch, LengthLimits
from bahdanau_tf.models import RNNEncDec, RNNSearch
from bahdanau_tf.special_tokens import END_ID, PAD_ID, SPECIAL_TOKENS, START_ID, UNK_ID
from bahdanau_tf.text import WordTokenizer
from bahdanau_tf.signatures import MAX_BEAM_SIZE
from bahdanau_tf.translator import Translator

from helpers import TOY_SOURCE_WORDS as SOURCE_WORDS, beam, check_translator, random_model, save_model_dir, signatures_of  # noqa: E402
from helpers import toy_tokenizers as tokenizers  # noqa: E402


SENTENCES = [
    "the cat sat on the mat",
    "a dog ran to the house and the cat sat on a mat",
    "the dog",
    "cat",
    "the cat and the dog ran to a house on the mat and sat",
]


@pytest.fixture(scope="module")
def translator():
    source, target = tokenizers()
    return Translator(random_model(), source, target, search=beam(4))


@pytest.fixture(scope="module")
def cgru_translator():
    """RNNSearch with Nematus's conditional GRU decoder (``decoder="cgru"``)."""
    source, target = tokenizers()
    return Translator(random_model(preset="rnnsearch-cgru-tiny", seed=4), source, target, search=beam(4))


def python_greedy(model, source_tokenizer, sentence, max_length, forbidden=()):
    """A plain Python greedy loop over model.decode_step (PAD, START and ``forbidden`` never
    generated)."""
    ids = source_tokenizer.tokenize([sentence]).to_list()[0] + [END_ID]
    memory = model.encode(tf.constant([ids]))
    state = model.initial_state(memory)
    previous, output, score = START_ID, [], 0.0
    for _ in range(max_length):
        logits, state, _ = model.decode_step(tf.constant([previous]), state, memory)
        log_probs = tf.nn.log_softmax(logits[0]).numpy()
        log_probs[[PAD_ID, START_ID, *forbidden]] = -np.inf
        previous = int(np.argmax(log_probs))
        score += float(log_probs[previous])
        output.append(previous)
        if previous == END_ID:
            break
    return output, score


@pytest.mark.slow
@pytest.mark.parametrize("name", ["translator", "cgru_translator"])
def test_beam_one_equals_a_python_greedy_loop(name, request):
    translator = request.getfixturevalue(name)
    model = translator.models[0]
    result = translator.translate(SENTENCES, beam_size=1)
    for sentence, text, score in zip(SENTENCES, result.translations, result.scores):
        n = len(sentence.split())
        ids, expected_score = python_greedy(model, translator.source_tokenizer, sentence,
                                            2 * n + 10)
        expected = translator.target_tokenizer.detokenize([ids]).numpy()[0].decode()
        assert text == expected
        # the default length penalty divides log p by ((5 + length) / 6) ** alpha
        penalty = ((5 + len(ids)) / 6) ** translator.length_penalty
        assert translator.length_penalty == 1.0  # the default, not 0: the penalty is applied
        np.testing.assert_allclose(score, expected_score / penalty, rtol=1e-4, atol=1e-4)
    # not a degenerate model: the outputs differ and some are longer than one word
    assert len(set(result.translations)) > 2
    assert max(len(t.split()) for t in result.translations) > 2


@pytest.mark.slow  # traces every signature of two translators
def test_a_sentence_translates_the_same_alone_and_in_a_batch(translator):
    batch = signatures_of(translator).serving_default(tf.constant(SENTENCES))
    nbest = signatures_of(translator).translate_nbest(tf.constant(SENTENCES), [4] * len(SENTENCES),
                                         [3] * len(SENTENCES))
    for i, sentence in enumerate(SENTENCES):
        alone = signatures_of(translator).serving_default(tf.constant([sentence]))
        assert alone["translations"].numpy()[0] == batch["translations"].numpy()[i]
        np.testing.assert_allclose(alone["scores"].numpy()[0], batch["scores"].numpy()[i],
                                   rtol=1e-5, atol=1e-5)
        alone_nbest = signatures_of(translator).translate_nbest(tf.constant([sentence]), [4], [3])
        assert (alone_nbest["translations"].numpy()[0] == nbest["translations"].numpy()[i]).all()
    # one chunk for the whole batch (no sorting inside the graph) gives the same results; its
    # translate() runs the signatures' graph search (XLA, compiled per bucketed shape, is not
    # what is tested here: test_the_compiled_search_finds_what_the_graph_search_finds)
    whole = Translator(translator.models[0], translator.source_tokenizer, translator.target_tokenizer,
                       search=beam(4), batching=Batching(chunk_size=64, jit_compile=False))
    unchunked = signatures_of(whole).serving_default(tf.constant(SENTENCES))
    assert (unchunked["translations"].numpy() == batch["translations"].numpy()).all()
    np.testing.assert_allclose(unchunked["scores"].numpy(), batch["scores"].numpy(), atol=1e-5)
    align = signatures_of(translator).align(tf.constant(SENTENCES))
    whole_align = signatures_of(whole).align(tf.constant(SENTENCES))
    for key in ("target_lengths", "source_lengths", "target_tokens", "source_tokens"):
        assert (align[key].numpy() == whole_align[key].numpy()).all(), key
    np.testing.assert_allclose(align["attention"].numpy(), whole_align["attention"].numpy(),
                               atol=1e-5)
    # translate() sorts by length and cuts batches; the order comes back
    python = whole.translate(SENTENCES, batch_size=2)
    assert python.translations == [t.decode() for t in batch["translations"].numpy()]


def test_the_settings_are_checked_where_they_are_built(translator):
    refusals = ((lambda: LengthLimits(max_source_length=0), "max_source_length must be an int >= 1, got 0"),
                (lambda: LengthLimits(max_length_ratio=-1.0), "max_length_ratio must be a float >= 0, got -1.0"),
                (lambda: Batching(chunk_size=0), "chunk_size must be an int >= 1, got 0"),
                (lambda: Batching(slots=0), "slots must be an int >= 1, got 0"),
                (lambda: Batching(length_buckets=(16, 8)), "length_buckets must be increasing"),
                (lambda: Batching(jit_compile="yes"), "jit_compile must be a bool, got 'yes'"))
    for build, message in refusals:
        with pytest.raises(ValueError, match=re.escape(message)):
            build()
    assert LengthLimits(max_source_length=np.int64(8)) == LengthLimits(max_source_length=8)  # one key
    model, source, target = translator.models[0], translator.source_tokenizer, translator.target_tokenizer
    with pytest.raises(ValueError, match=re.escape(f"beam_size must be an int in [1, {MAX_BEAM_SIZE}]")):
        Translator(model, source, target, search=BeamSearch(beam_size=MAX_BEAM_SIZE + 1))
    with pytest.raises(ValueError, match="got a tensor for beam_size"):
        Translator(model, source, target, search=BeamSearch(beam_size=tf.constant(3)))
    with pytest.raises(ValueError, match="batching a Batching"):
        Translator(model, source, target, batching=LengthLimits())


@pytest.mark.slow  # traces a search per field of BeamSearch
def test_a_translators_search_means_what_it_means_to_beam_search(translator):
    """Every field of the BeamSearch a Translator is given is its searches' default: the
    forbidden tokens (in translate and the signatures), the n-best, the attention."""
    model, source, target = translator.models[0], translator.source_tokenizer, translator.target_tokenizer
    # the graph search: XLA is not what is tested here (it finds what the graph search finds:
    # test_the_compiled_search_finds_what_the_graph_search_finds)
    graph = dict(batching=Batching(jit_compile=False))
    limits = [2 * len(sentence.split()) + 10 for sentence in SENTENCES]
    greedy = [python_greedy(model, source, s, n)[0] for s, n in zip(SENTENCES, limits)]
    used = [token for ids in greedy for token in ids if token != END_ID]
    token = max(set(used), key=used.count)  # the word the greedy translations use most
    search = BeamSearch(beam_size=1, forbid_ids=(token,), return_attention=True, length_penalty=0.0)
    custom = Translator(model, source, target, search=search, **graph)
    out = custom.translate(SENTENCES)
    for sentence, limit, text, score in zip(SENTENCES, limits, out.translations, out.scores):
        ids, expected_score = python_greedy(model, source, sentence, limit, forbidden=(token,))
        assert token not in ids
        assert text == target.detokenize([ids]).numpy()[0].decode()
        np.testing.assert_allclose(score, expected_score, rtol=1e-4, atol=1e-4)  # penalty 0
    assert len(out.alignments) == len(SENTENCES)  # return_attention: alignments by default
    served = signatures_of(custom).serving_default(tf.constant(SENTENCES))["translations"].numpy()
    assert [t.decode() for t in served] == out.translations
    listed = Translator(model, source, target, search=BeamSearch(beam_size=3, nbest=2), **graph).translate(SENTENCES)
    expected = Translator(model, source, target, search=BeamSearch(beam_size=3), **graph).translate(SENTENCES, nbest=2)
    assert listed.translations == expected.translations and all(len(t) == 2 for t in listed.translations)
    with pytest.raises(ValueError, match="nbest must be an int in \\[1, 1\\], got 2"):
        Translator(model, source, target, search=BeamSearch(beam_size=3, nbest=2), **graph).translate(
            SENTENCES, beam_size=1)


@pytest.mark.slow
def test_verbose_shows_a_progress_bar_up_to_the_sentence_count(translator, capsys):
    quiet = translator.translate(SENTENCES, batch_size=2)
    assert capsys.readouterr().out == ""  # off by default
    shown = translator.translate(SENTENCES, batch_size=2, verbose=True)
    bar = capsys.readouterr().out
    assert f"{len(SENTENCES)}/{len(SENTENCES)}" in bar and "sentence" in bar, bar
    assert shown.translations == quiet.translations
    np.testing.assert_array_equal(shown.scores, quiet.scores)


@pytest.mark.slow
def test_a_stream_of_requests_compiles_within_the_bound_and_equals_the_graph_path():
    # buckets shrunk so that a short stream meets several: rows {1, 2}, widths {6, 9}
    source, target = tokenizers()
    model = random_model(seed=2)
    options = dict(search=beam(3), limits=LengthLimits(max_source_length=8))
    xla = Translator(model, source, target, batching=Batching(chunk_size=2, length_buckets=(6,)), **options)
    graph = Translator(model, source, target, batching=Batching(jit_compile=False, chunk_size=2,
                                                                length_buckets=(6,)), **options)
    assert xla.batching.jit_compile and xla.chunking.row_buckets == (1, 2)
    assert xla.chunking.length_buckets == (6, 9)
    words = SOURCE_WORDS + ["zebra"]
    rng = np.random.default_rng(0)
    stream = [[" ".join(rng.choice(words, size=rng.integers(0, 12))) for _ in range(size)]
              for size in (1, 3, 2, 5, 1, 4)]
    for request in stream:
        out, expected = xla.translate(request), graph.translate(request)
        assert out.translations == expected.translations, request
        np.testing.assert_allclose(out.scores, expected.scores, rtol=1e-4, atol=1e-4)
    assert 2 <= xla.compilations <= xla.compilation_bound() == 4
    seen = xla.compilations
    for request in stream:  # nothing new to compile
        xla.translate(request)
    assert xla.compilations == seen
    nbest = xla.translate(stream[3], nbest=2)  # another variant: its own programs
    assert nbest.translations == graph.translate(stream[3], nbest=2).translations
    assert seen < xla.compilations <= xla.compilation_bound(2)
    assert graph.compilations == 0


@pytest.mark.slow
def test_the_xla_signature_graph_equals_the_plain_one():
    # bahdanau-export --jit: the signatures' graph compiles its search over bucketed shapes
    source, target = tokenizers()
    model = random_model(seed=5)
    plain = Translator(model, source, target, search=beam(3))
    compiled = Translator(model, source, target, search=beam(3),
                          batching=Batching(serving_jit_compile=True))
    batch = tf.constant(SENTENCES + ["", "zebra"])
    for name in ("serving_default", "align"):
        expected, out = getattr(signatures_of(plain), name)(batch), getattr(signatures_of(compiled), name)(batch)
        assert (out["translations"].numpy() == expected["translations"].numpy()).all(), name
        np.testing.assert_allclose(out["scores"].numpy(), expected["scores"].numpy(), atol=1e-4)
    def must_compile(translator):
        graph = signatures_of(translator).serving_default.get_concrete_function().graph.as_graph_def()
        return any("_XlaMustCompile" in node.attr and node.attr["_XlaMustCompile"].b
                   for function in graph.library.function for node in function.node_def)

    assert must_compile(compiled) and not must_compile(plain)


def test_no_unk_decoding_never_emits_unk():
    source, target = tokenizers()
    translator = Translator(random_model(seed=3, unk_bias=4.0), source, target, search=beam(3))
    sentences = SENTENCES + ["zebra unknown words here", ""]
    plain = translator.translate(sentences, nbest=3)
    assert any("[UNK]" in t for row in plain.translations for t in row)  # the test can fail
    forbidden = translator.translate(sentences, nbest=3, forbid_unknown=True)
    for row, scores in zip(forbidden.translations, forbidden.scores):
        assert all("[UNK]" not in t for t in row)
        assert np.isfinite(scores).all()
    # the graph function reads the switch at run time, not at trace time
    again = translator.translate(sentences, nbest=3)
    assert again.translations == plain.translations


@pytest.mark.parametrize("members", [["tiny"], *(pytest.param(members, marks=pytest.mark.slow) for members in (
    ["tiny", "tiny"], ["rnnsearch-cgru-tiny"], ["rnnsearch-cgru-tiny", "tiny"]))],
                         ids=["one", "ensemble", "cgru", "cgru-and-paper-ensemble"])
def test_the_compiled_search_finds_what_the_graph_search_finds(translator, members):
    """`Translator._search_ids` compiled as the other backends compile it
    (`bahdanau_tf.decoding.portable.compiled`: XLA here, ``jax.jit`` on JAX), over the
    translator's model(s): the same ids, lengths, scores and attention as the graph search,
    greedy and beam, [UNK] allowed and forbidden; the paper's decoder cell and the conditional
    GRU, alone and in an ensemble."""
    from bahdanau_tf.decoding import portable

    models = [random_model(seed=3, unk_bias=4.0, preset=members[0])] + [
        random_model(seed=7, preset=preset) for preset in members[1:]]
    source, target = translator.source_tokenizer, translator.target_tokenizer
    unknown_found = []
    tf_translator = Translator(models, source, target, batching=Batching(jit_compile=False))
    prepare, _ = translator.text_graph.pieces(False)
    source_ids, _, limits = prepare(tf.constant(SENTENCES + ["zebra unknown words here", ""]))
    for beam_size, nbest, attention in [(1, 1, False), (4, 3, True)]:
        search = BeamSearch(beam_size=beam_size, nbest=nbest, length_penalty=0.5,
                            return_attention=attention)
        buffer_length = int(max(limits))
        run = portable.compiled(
            lambda ids, limits, forbid: tuple(x for x in tf_translator._search_ids(
                ids, limits, forbid, search, buffer_length, True) if x is not None),
            [variable for model in models for variable in model.variables])
        for forbid in [False, True]:
            expected = tf_translator._search_function(search, False)(source_ids, limits, tf.constant(forbid))
            found = run(source_ids, limits, tf.constant(forbid))
            np.testing.assert_array_equal(found[0], expected[0])
            np.testing.assert_array_equal(found[1], expected[1])
            np.testing.assert_allclose(found[2], expected[2], rtol=1e-5)
            if attention:  # XLA's float order: atol as the other XLA comparisons
                np.testing.assert_allclose(found[3], expected[3], atol=1e-5)
            unknown = bool(np.any(np.asarray(found[0]) == UNK_ID))
            assert not (forbid and unknown)
            unknown_found.append(unknown)
    assert any(unknown_found)  # the switch matters


@pytest.mark.slow
def test_an_ensemble_of_one_model_equals_the_model(translator):
    # without XLA, which is not what is tested here (an ensemble's compiled search finds what
    # its graph search finds: test_the_compiled_search_finds_what_the_graph_search_finds)
    model = translator.models[0]
    source, target = translator.source_tokenizer, translator.target_tokenizer
    options = dict(search=beam(4), batching=Batching(jit_compile=False))
    alone = Translator(model, source, target, **options)
    single = alone.translate(SENTENCES, nbest=3)
    twice = Translator([model, model], source, target, **options).translate(SENTENCES, nbest=3)
    assert twice.translations == single.translations
    np.testing.assert_allclose(twice.scores, single.scores, rtol=1e-4, atol=1e-4)
    # and a real ensemble is neither of its members
    other = random_model(seed=7)
    pair = Translator([model, other], source, target, **options).translate(SENTENCES).scores
    alone_other = Translator(other, source, target, **options).translate(SENTENCES).scores
    assert not np.allclose(pair, alone.translate(SENTENCES).scores)
    assert not np.allclose(pair, alone_other)


@pytest.mark.slow
def test_a_batch_mixing_bad_inputs_gets_an_answer_for_every_row(translator):
    long_words = (SENTENCES[1].split() * 40)[:400]  # 400 tokens, cut to 100
    bad = ["", "   \t ", b"\xff\xfe\xc3 the cat", "zebra quux the", " ".join(long_words),
           SENTENCES[0], "\u200b"]
    out = signatures_of(translator).serving_default(tf.constant(bad))
    texts = [t.decode() for t in out["translations"].numpy()]
    scores = out["scores"].numpy()
    assert len(texts) == len(bad)
    assert texts[0] == texts[1] == texts[6] == ""
    assert scores[0] == scores[1] == scores[6] == 0.0
    assert np.isfinite(scores).all()
    assert all(texts[i] for i in (2, 3, 4, 5))
    # the long input is the translation of its first max_source_length tokens
    cut = " ".join(long_words[: translator.limits.max_source_length])
    assert signatures_of(translator).serving_default(tf.constant([cut]))["translations"].numpy()[0] == \
        out["translations"].numpy()[4]
    assert texts[5] == translator.translate([SENTENCES[0]]).translations[0]
    # out-of-range beam and nbest are clamped inside the graph instead of raising
    nbest = signatures_of(translator).translate_nbest(tf.constant(bad), [0] * len(bad), [99] * len(bad))
    assert nbest["translations"].shape == (len(bad), 1)
    big = signatures_of(translator).translate_nbest(tf.constant(bad[:2]), [1000] * 2, [2] * 2)
    assert big["translations"].shape == (2, 2)
    align = signatures_of(translator).align(tf.constant(bad))
    assert align["source_lengths"].numpy()[0] == 1  # just [END]
    assert align["target_lengths"].numpy()[0] == 0
    assert align["source_lengths"].numpy()[4] == translator.limits.max_source_length + 1
    empty = signatures_of(translator).serving_default(tf.constant([], tf.string))
    assert empty["translations"].shape == (0,)


@pytest.mark.slow
def test_alignments_have_the_tokens_and_attention_rows_that_sum_to_one(translator):
    result = translator.translate(SENTENCES, return_alignments=True)
    align = signatures_of(translator).align(tf.constant(SENTENCES))
    for i, alignment in enumerate(result.alignments):
        assert alignment.source_tokens == SENTENCES[i].split() + ["[END]"]
        assert alignment.attention.shape == (len(alignment.target_tokens),
                                             len(alignment.source_tokens))
        np.testing.assert_allclose(alignment.attention.sum(axis=1), 1.0, atol=1e-5)
        words = [t for t in alignment.target_tokens if t != "[END]"]
        assert " ".join(words) == result.translations[i]
        t = align["target_lengths"].numpy()[i]
        s = align["source_lengths"].numpy()[i]
        # translate compiles its search with XLA, the signature does not: rounding differs
        np.testing.assert_allclose(align["attention"].numpy()[i, :t, :s], alignment.attention,
                                   atol=2e-5)
        assert not align["attention"].numpy()[i, t:].any()
    # not uniform: the model attends somewhere in particular
    assert max(a.attention.max() for a in result.alignments) > 0.5


@pytest.mark.slow
def test_conditional_gru_alignments_are_its_teacher_forced_attention_on_its_translation(cgru_translator):
    """The search's attention rows of the conditional GRU (queried with s'_i, after reading
    y_{i-1}) are the model's teacher-forced attention on the translation it found, from the
    search's XLA path and from the align signature (the graph path)."""
    translator = cgru_translator
    model = translator.models[0]
    result = translator.translate(SENTENCES, return_alignments=True)
    align = signatures_of(translator).align(tf.constant(SENTENCES))
    for i, (sentence, alignment) in enumerate(zip(SENTENCES, result.alignments)):
        source_ids = translator.source_tokenizer.tokenize([sentence]).to_list()[0] + [END_ID]
        words = [t for t in alignment.target_tokens if t != "[END]"]
        target_ids = [START_ID] + translator.target_tokenizer.tokenize([" ".join(words)]).to_list()[0]
        target_ids = target_ids[: len(alignment.target_tokens)]
        expected = model.attention_weights((tf.constant([source_ids]), tf.constant([target_ids])))[0].numpy()
        np.testing.assert_allclose(alignment.attention, expected, atol=1e-4)
        t, s = align["target_lengths"].numpy()[i], align["source_lengths"].numpy()[i]
        np.testing.assert_allclose(align["attention"].numpy()[i, :t, :s], expected, atol=1e-4)
    assert max(a.attention.max() for a in result.alignments) > 0.5


def test_reference_attention_is_the_models_teacher_forced_attention(translator):
    model = translator.models[0]
    sources, targets = SENTENCES[:3], ["el gato se sentó", "una casa", "zzz perro"]
    alignments = translator.reference_attention(sources, targets, batch_size=2)
    for source, target, alignment in zip(sources, targets, alignments):
        source_ids = translator.source_tokenizer.tokenize([source]).to_list()[0] + [END_ID]
        target_ids = [START_ID] + translator.target_tokenizer.tokenize([target]).to_list()[0]
        expected = model.attention_weights((tf.constant([source_ids]),
                                            tf.constant([target_ids])))[0].numpy()
        np.testing.assert_allclose(alignment.attention, expected, atol=1e-5)
        assert alignment.target_tokens == target.split() + ["[END]"]


def test_an_ensembles_reference_attention_is_its_members_mean():
    """benchmarks/alignment.py scores an ensemble of heads by this mean."""
    source, target = tokenizers()
    members = [random_model(seed=seed) for seed in (5, 6)]
    sources, targets = SENTENCES[:3], ["el gato se sentó", "una casa", "zzz perro"]
    alone = [Translator(m, source, target).reference_attention(sources, targets) for m in members]
    together = Translator(members, source, target).reference_attention(sources, targets)
    for i, alignment in enumerate(together):
        first, second = alone[0][i].attention, alone[1][i].attention
        assert np.abs(first - second).max() > 0.05  # the members differ
        np.testing.assert_allclose(alignment.attention, (first + second) / 2, atol=1e-5)


def test_models_without_attention_translate_but_have_no_align_signature():
    source, target = tokenizers()
    translator = Translator(random_model(RNNEncDec, seed=2), source, target)
    assert not translator.has_attention
    assert set(signatures_of(translator).by_name()) == {"serving_default", "translate_nbest"}
    result = translator.translate(SENTENCES + [""])
    assert len(result.translations) == len(SENTENCES) + 1
    with pytest.raises(ValueError, match="attention"):
        translator.translate(SENTENCES, return_alignments=True)


@pytest.mark.parametrize("model_class, preset", [
    (RNNSearch, "tiny"), pytest.param(RNNSearch, "rnnsearch-cgru-tiny", marks=pytest.mark.slow),
    pytest.param(RNNEncDec, "tiny", marks=pytest.mark.slow)], ids=["RNNSearch", "RNNSearch-cgru", "RNNEncDec"])
def test_the_translator_keeps_its_contract(model_class, preset, tmp_path):
    """helpers.check_translator: XLA == graph search == the exported signature, and
    save -> from_directory gives the same translations."""
    source, target = tokenizers()
    output = check_translator(Translator(random_model(model_class, preset=preset), source, target,
                                         search=beam(3), batching=Batching(jit_compile=False)),
                              SENTENCES, tmp_path)
    assert len(set(output.translations)) > 1  # the random model does not say one thing


@pytest.mark.slow
def test_from_directory_restores_the_same_translator(translator, tmp_path):
    model = translator.models[0]
    model_directory.write_model_config(str(tmp_path), model, translator.source_tokenizer,
                                       translator.target_tokenizer)
    tf.train.Checkpoint(model=model).save(str(tmp_path / "checkpoints" / "ckpt"))
    # the graph search restores what the fixture's XLA search found
    loaded = Translator.from_directory(str(tmp_path), search=beam(4), batching=Batching(jit_compile=False))
    assert loaded.translate(SENTENCES).translations == translator.translate(SENTENCES).translations
    with pytest.raises(FileNotFoundError, match="No such model directory: '.*missing'"):
        Translator.from_directory(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="model.json"):  # a directory, but not a model's
        Translator.from_directory(str(tmp_path / "checkpoints"))


@pytest.mark.bfloat16
def test_a_model_trained_in_bfloat16_translates_in_float32_on_a_cpu(tmp_path):
    # XLA:CPU emulates bf16, and a CPU without bf16 units runs it in Eigen (or, with oneDNN
    # capped below its bf16 ISA, aborts): on a CPU the models are rebuilt in float32
    source, target = tokenizers()
    save_model_dir(tmp_path, random_model(dtype="mixed_bfloat16"), source, target)
    assert Translator.from_directory(str(tmp_path)).models[0].dtype_policy.name == "float32"
    assert Translator.from_directory(str(tmp_path), dtype=None).models[0].dtype_policy.name == "mixed_bfloat16"


def test_bad_python_arguments_raise_value_errors(translator):
    with pytest.raises(ValueError, match="beam_size"):
        translator.translate(SENTENCES, beam_size=0)
    with pytest.raises(ValueError, match="beam_size"):
        translator.translate(SENTENCES, beam_size=MAX_BEAM_SIZE + 1)
    with pytest.raises(ValueError, match="nbest"):
        translator.translate(SENTENCES, beam_size=2, nbest=3)
    with pytest.raises(ValueError, match="at least one model"):
        Translator([], *tokenizers())


@pytest.mark.slow
@pytest.mark.parametrize("jit_compile", [False, True])
def test_candidate_lists_decode_as_the_full_softmax_restricted_to_the_list(jit_compile):
    """A candidate search (Jean et al.'s candidate lists) equals a full-vocabulary search of a
    copy of the model whose output bias is -inf outside the list: the same translations, the
    same scores (log-probabilities of the softmax over the listed ids). Under XLA the list is
    padded to a size bucket, which must change nothing."""
    from bahdanau_tf import lexicon

    source, target = tokenizers()
    model = random_model(seed=5)
    rng = np.random.default_rng(1)
    table = rng.integers(4, target.vocabulary_size, size=(source.vocabulary_size, 2)).astype(np.int32)
    table[:4] = -1  # special tokens have no translation
    candidates = lexicon.CandidateLists(lexicon.Lexicon(table, np.ones(table.shape, np.float32)),
                                        frequent=6, per_word=1)
    source_ids = np.concatenate([np.asarray(row) for row in source.tokenize(SENTENCES).to_list()])
    listed = sorted(set(range(6)) | {int(t) for t in table[source_ids, 0]})
    assert 6 < len(listed) < target.vocabulary_size  # the list restricts the search
    restricted = random_model(seed=5)
    bias = restricted.readout.output_bias
    outside = np.setdiff1d(np.arange(target.vocabulary_size), listed)
    bias.assign(np.where(np.isin(np.arange(target.vocabulary_size), outside), -np.inf, bias.numpy()))
    settings = dict(search=beam(3), batching=Batching(jit_compile=jit_compile))
    got = Translator(model, source, target, candidates=candidates, **settings).translate(SENTENCES, nbest=2)
    expected = Translator(restricted, source, target, **settings).translate(SENTENCES, nbest=2)
    plain = Translator(model, source, target, **settings).translate(SENTENCES, nbest=2)
    assert got.translations == expected.translations
    np.testing.assert_allclose(got.scores, expected.scores, rtol=1e-5)
    assert got.translations != plain.translations  # the list did restrict this model
    for hypotheses in got.translations:
        for word in " ".join(hypotheses).split():
            assert target.vocabulary.index(word) in listed
    if jit_compile:  # the signatures under XLA (bahdanau-export --jit) pad the list in-graph
        jit_translator = Translator(model, source, target, candidates=candidates, search=beam(3),
                                    batching=Batching(serving_jit_compile=True))  # held: its tf.function keeps a weak reference
        jit_signature = signatures_of(jit_translator).serving_default(tf.constant(SENTENCES))
        assert [t.decode() for t in jit_signature["translations"].numpy()] == [
            hypotheses[0] for hypotheses in got.translations]
    # a list of the whole vocabulary is the full search
    everything = lexicon.CandidateLists(candidates.lexicon, frequent=target.vocabulary_size, per_word=1)
    whole = Translator(model, source, target, candidates=everything, **settings).translate(SENTENCES, nbest=2)
    assert whole.translations == plain.translations
    np.testing.assert_allclose(whole.scores, plain.scores, rtol=1e-5)


def test_candidate_lists_refuse_another_models_lexicon():
    from bahdanau_tf import lexicon

    source, target = tokenizers()
    small = lexicon.Lexicon(np.full((3, 1), -1, np.int32), np.zeros((3, 1), np.float32))
    with pytest.raises(ValueError, match="another model's lexicon"):
        Translator(random_model(), source, target, candidates=lexicon.CandidateLists(small, frequent=4))
