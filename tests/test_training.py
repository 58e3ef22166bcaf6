"""Tests of bahdanau_tf.training: the train step, clipping, precision, resume, refusal, NaN stop.

Everything uses the ``tiny`` preset, word vocabularies of a few hundred words and short slices of
the Bible corpus, with XLA off unless a test is about XLA (each new shape is a compilation).
The distributed and kill/resume tests run in subprocesses (`tests/test_training_distributed.py`,
`tests/test_cli_train.py`).
"""

import json
import math
import os
import pathlib
import re
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf

from bahdanau_tf import checkpoint_averaging, data, losses, model_directory, presets, text, training
from bahdanau_tf.models import regularization
from bahdanau_tf.corpora import load_corpus
from bahdanau_tf.decoding import Batching
from helpers import beam, checkpoint_model_values, learning_seed


@pytest.fixture(scope="module")
def corpora():
    train = load_corpus("bible-en-es", split="train").select(slice(0, 3000))
    dev = load_corpus("bible-en-es", split="dev").select(slice(0, 120))
    return train, dev


@pytest.fixture(scope="module")
def tokenizers(corpora):
    train, _ = corpora
    return (
        text.WordTokenizer.build(train.sources, max_vocabulary_size=400),
        text.WordTokenizer.build(train.targets, max_vocabulary_size=400),
    )


def tiny_config(preset="tiny", **changes):
    # no dev BLEU (a greedy translation of the dev sample) unless a test is about it: it costs
    # more than a tiny run's updates; nor the lexicon of candidate lists a run ends by writing
    # (it reads the whole training corpus again; tests/test_cli_train.py checks the one a run writes)
    defaults = dict(
        max_length=20, jit_compile=False, precision="float32", log_every=10, eval_every=10_000, checkpoint_every=10_000,
        dev_sentences=120, dev_bleu_every=0, summaries=False, lexicon_top_k=0,
    )
    return training.TrainingConfig.for_preset(preset, **{**defaults, **changes})


def make_trainer(directory, tokenizers, seed=1234, preset="tiny", **changes):
    tf.keras.utils.set_random_seed(seed)
    return training.Trainer(
        str(directory), *tokenizers, preset=preset, config=tiny_config(preset, seed=seed, **changes),
        log=lambda line: None
    )


def weights(trainer):
    return [np.array(v) for v in trainer.model.trainable_variables]


def test_training_defaults_follow_the_paper():
    paper = training.TrainingConfig.for_preset("rnnsearch-50")
    assert (paper.optimizer, paper.learning_rate, paper.clipnorm, paper.batch_size, paper.bucketing) == (
        "adadelta", 1.0, 1.0, 80, "paper")
    assert training.TrainingConfig.for_preset("rnnsearch-30").max_length == 30
    optimizer = training.make_optimizer(paper)
    assert isinstance(optimizer, tf.keras.optimizers.Adadelta)
    assert (optimizer.rho, optimizer.epsilon) == (0.95, 1e-6)
    sutskever = training.TrainingConfig.for_preset("seq2seq")
    assert (sutskever.optimizer, sutskever.learning_rate, sutskever.clipnorm, sutskever.batch_size) == (
        "sgd", 0.7, 5.0, 128)
    assert training.TrainingConfig.for_preset("small").optimizer == "adam"
    assert training.TrainingConfig.for_preset("small", learning_rate=0.1).learning_rate == 0.1
    assert training.TrainingConfig.for_preset("small", clipnorm=None).clipnorm is None
    with pytest.raises(ValueError, match="optimizer"):
        training.TrainingConfig(optimizer="rmsprop")
    with pytest.raises(ValueError, match="sampled_proposal"):
        training.TrainingConfig(sampled_softmax=10, sampled_proposal="zipf")
    with pytest.raises(ValueError, match="Unknown preset 'nope'"):
        training.TrainingConfig.for_preset("nope")


def test_halving_schedule_is_sutskevers():
    schedule = training.HalvingSchedule(0.7, steps_per_epoch=100)
    rates = [float(schedule(step)) for step in (0, 499, 500, 549, 550, 600, 749)]
    np.testing.assert_allclose(rates, [0.7, 0.7, 0.35, 0.35, 0.175, 0.0875, 0.7 / 2**5], rtol=1e-6)


def test_warmup_rsqrt_schedule_rises_linearly_then_decays_as_one_over_sqrt():
    config = training.TrainingConfig.for_preset("small", schedule="warmup_rsqrt", warmup_steps=100)
    schedule = training.make_optimizer(config).learning_rate  # the optimizer reads it per step
    steps = np.array([0, 49, 99, 399, 1599])
    expected = 5e-3 * np.minimum((steps + 1) / 100, np.sqrt(100 / (steps + 1)))  # 1% .. 25% of the peak
    np.testing.assert_allclose([float(training.WarmupRsqrtSchedule(5e-3, 100)(k)) for k in steps], expected,
                               rtol=1e-6)
    assert float(tf.convert_to_tensor(schedule)) == pytest.approx(5e-5)  # step 0
    with pytest.raises(ValueError, match="warmup_steps"):
        training.TrainingConfig(warmup_steps=0)


def test_the_budget_schedule_decays_linearly_to_zero_over_the_budget_spent_first():
    time_progress = tf.Variable(0.0)
    schedule = training.BudgetSchedule(4e-3, max_steps=200, time_progress=time_progress)
    steps = np.array([0, 50, 100, 199, 200, 300])
    np.testing.assert_allclose([float(schedule(k)) for k in steps],
                               4e-3 * np.maximum(1 - steps / 200, 0), rtol=1e-6)
    time_progress.assign(0.75)  # three quarters of the minutes spent: the time budget leads
    np.testing.assert_allclose([float(schedule(k)) for k in (0, 100, 180)], [1e-3, 1e-3, 4e-4], rtol=1e-5)
    only_time = training.make_optimizer(training.TrainingConfig(
        schedule="budget", learning_rate=1e-2, max_steps=None, max_minutes=12),
        time_progress=time_progress).learning_rate
    assert float(tf.convert_to_tensor(only_time)) == pytest.approx(2.5e-3)


def test_the_budget_rule_regularises_only_a_run_of_many_epochs():
    def rule(epochs, label_smoothing=0.0):
        rates = training.budget_regularization(epochs, label_smoothing)
        return {name: rates[name] for name in ("dropout", "word_dropout")}, rates["label_smoothing"]

    # a short run: none, its label smoothing withheld too
    assert rule(0.5, 0.1) == rule(4.0, 0.1) == rule(4.7, 0.1) == ({"dropout": 0.0, "word_dropout": 0.0}, 0.0)
    half = ({"dropout": 0.1, "word_dropout": 0.05}, 0.1)
    assert rule(8.0, 0.1) == rule(14.0, 0.1) == rule(16.0, 0.1) == half  # half the rates from 8 to 16 epochs
    assert rule(6.4) == ({"dropout": 0.06, "word_dropout": 0.03}, 0.0)  # in tenths; no smoothing asked
    assert rule(20.0) == ({"dropout": 0.16, "word_dropout": 0.08}, 0.0)  # half way from 16 to 24
    assert rule(24.0, 0.2) == rule(100.0, 0.2) == ({"dropout": 0.2, "word_dropout": 0.1}, 0.2)
    grid = [training.budget_regularization(epochs / 4, 0.1) for epochs in range(200)]
    for name in ("dropout", "word_dropout", "label_smoothing"):  # a longer budget never gets less
        assert all(a[name] <= b[name] for a, b in zip(grid, grid[1:]))
    # the smoothing starts with the dropout, at the update where the dropout does
    assert all((rates["label_smoothing"] > 0) == (rates["dropout"] > 0) for rates in grid)


def test_the_step_learns_the_label_smoothing_the_rule_holds_in_one_trace(tokenizers, tmp_path):
    trainer = make_trainer(tmp_path, tokenizers, label_smoothing=0.1, regularization="budget")
    rule = trainer.budget_rule
    assert rule.rates["label_smoothing"] == 0.1  # the run's own until a plan gives no dropout
    source, target_in = tf.constant([[5, 6, 7, 8, 2], [9, 10, 11, 2, 0]]), tf.constant([[1, 7, 8, 9], [1, 12, 13, 0]])
    target_out = tf.constant([[7, 8, 9, 2], [12, 13, 2, 0]])
    tokens = tf.constant(float(np.count_nonzero(target_out.numpy())))

    def reference(epsilon):  # Keras's smoothed cross-entropy, no dropout (the rule has not planned)
        with tf.GradientTape() as tape:
            logits = trainer.model((source, target_in), training=True)
            loss = tf.keras.losses.categorical_crossentropy(
                tf.one_hot(target_out, logits.shape[-1]), logits, from_logits=True, label_smoothing=epsilon)
            loss = tf.reduce_sum(loss * tf.cast(target_out != 0, "float32")) / tokens
        return tape.gradient(loss, trainer.model.trainable_variables)

    for held in (0.1, 0.0, 0.1):  # the run's own, a plan without dropout, one with it
        rule.label_smoothing.assign(held)
        _, gradients = trainer._gradients(source, target_in, target_out, tokens)
        for got, want in zip(gradients, reference(held)):
            np.testing.assert_allclose(np.asarray(tf.convert_to_tensor(got)), np.asarray(tf.convert_to_tensor(want)),
                                       rtol=2e-4, atol=1e-6)
    assert trainer._gradients.experimental_get_tracing_count() == 1
    rule.set_epochs(3.0)
    assert rule.rates["label_smoothing"] == 0.0
    assert rule.set_epochs(12.0) and float(rule.label_smoothing.numpy()) == pytest.approx(0.1)
    line = training.BudgetRule(trainer.model, 0.1).update(training.budget.Budget(2_400, None, 0.0, 100), 0, 0.0)
    assert line.endswith("dropout 0.2, word dropout 0.1, label smoothing 0.1")


def test_the_budget_plans_from_its_wall_clock_pace_with_evaluations_charged_and_compilations_out():
    steps = training.budget.Budget(max_steps=1_500, max_minutes=None, start_time=0.0, steps_per_epoch=100)
    assert steps.planned_epochs(0, 0.0) == 15.0  # --max_steps: exact, before any update
    budget = training.budget.Budget(max_steps=None, max_minutes=10, start_time=0.0, steps_per_epoch=100)
    assert budget.planned_epochs(0, 0.0) is None  # no pace yet
    # a scripted clock: 20 s compiling, then 0.5 s an update, and a 5 s dev evaluation every 100 updates
    clock, step = 20.0, 0
    while clock < 300.0:
        budget.record(step, clock)
        clock += 0.5 + (5.0 if step and step % 100 == 0 else 0.0)
        step += 1
    # the window (the last 2 minutes) holds two or three evaluations and no compilation
    pace = 0.5 + 5.0 / 100
    assert budget.pace(step, clock) == pytest.approx(pace, rel=0.05)
    assert budget.planned_epochs(step, clock) == pytest.approx((step + (600.0 - clock) / pace) / 100, rel=0.03)
    # a minute in: 5 s of start-up, a first update that compiles for 15 s, then 0.5 s an update
    # with a 5 s dev evaluation between two of them; the compilation is paid once, the
    # evaluations recur: the pace leaves the one out and keeps the other
    early = training.budget.Budget(max_steps=None, max_minutes=10, start_time=0.0, steps_per_epoch=100)
    clock = 5.0
    for step in range(81):
        early.record(step, clock)
        seconds = 15.0 if step == 0 else 0.5
        clock += seconds
        early.add_update(seconds, clock)
        clock += 5.0 if step == 40 else 0.0
    assert clock == 65.0
    pace = (65.0 - 5.0 - (15.0 - 0.5)) / 81
    assert early.pace(81, clock) == pytest.approx(pace)
    assert early.planned_epochs(81, clock) == pytest.approx((81 + 535.0 / pace) / 100)
    # dev evaluations every 100 updates, told to the budget: the first builds its graphs (12 s),
    # the later ones cost 2 s; the pace charges 2 s every 100 updates wherever its window falls,
    # and nothing for evaluations before one is known after the first
    charged = training.budget.Budget(max_steps=None, max_minutes=10, start_time=0.0, steps_per_epoch=100,
                                     eval_every=100)
    clock = 5.0
    for step in range(250):
        charged.record(step, clock)
        clock += 0.5
        charged.add_update(0.5, clock)
        if step + 1 in (100, 200):
            seconds = 12.0 if step + 1 == 100 else 2.0
            clock += seconds
            charged.add_evaluation(seconds, clock)
        if step + 1 == 150:
            assert charged.pace(150, clock) == pytest.approx(0.5)
    assert charged.pace(250, clock) == pytest.approx(0.5 + 2.0 / 100)
    assert charged.planned_epochs(250, clock) == pytest.approx((250 + (600.0 - clock) / 0.52) / 100)
    # the window is a fifth of the minutes (two minutes at least): a 48-minute run's plan rides
    # out two slow minutes (0.6 s an update instead of 0.5) that a two-minute window would take whole
    long = training.budget.Budget(max_steps=None, max_minutes=48, start_time=0.0, steps_per_epoch=100)
    assert (long.pace_window, budget.pace_window) == (576.0, 120.0)
    clock, step = 0.0, 0
    while clock < 900.0:
        long.record(step, clock)
        seconds = 0.6 if clock >= 780.0 else 0.5
        clock += seconds
        long.add_update(seconds, clock)
        step += 1
    assert long.pace(step, clock) == pytest.approx(576.0 / (456.0 / 0.5 + 120.0 / 0.6), rel=0.01)  # 0.518, not 0.6
    both = training.budget.Budget(max_steps=900, max_minutes=10, start_time=0.0, steps_per_epoch=100)
    both.record(100, 50.0)
    assert both.planned_epochs(100, 50.0) == 9.0  # the budget that ends first
    assert (both.time_share(150.0), both.out_of_time(599.0), both.out_of_time(600.0)) == (0.25, False, True)


def test_the_budget_rule_plans_at_the_start_and_again_as_the_pace_is_known(tokenizers, tmp_path):
    trainer = training.Trainer(str(tmp_path), *tokenizers, preset="tiny", log=lambda line: None,
                               config=tiny_config(max_steps=10, regularization="budget"))
    rule = trainer.budget_rule
    exact = training.budget.Budget(max_steps=2_400, max_minutes=None, start_time=0.0, steps_per_epoch=100)
    assert "~24.0 epochs" in rule.update(exact, 0, 0.0)  # update 0: the full rates
    assert rule.rates == {"dropout": 0.2, "word_dropout": 0.1, "label_smoothing": 0.0}
    assert rule.update(exact, 5, 1.0) is None  # an update budget plans once
    timed = training.budget.Budget(max_steps=None, max_minutes=10, start_time=0.0, steps_per_epoch=100)
    rule = training.BudgetRule(trainer.model)
    for second in range(0, 60):  # two updates a second, but no plan in the first minute
        timed.record(2 * second, float(second))
        assert rule.update(timed, 2 * second, float(second)) is None
    timed.record(120, 60.0)
    # 120 + 540 s x 2 updates a second = 1,200 updates: 12 epochs
    assert "~12.0 epochs" in rule.update(timed, 120, 60.0) and rule.plans == [12.0]
    timed.record(140, 70.0)
    assert rule.update(timed, 140, 70.0) is None  # the next plan is due 30 s later
    for second in range(71, 201):  # the pace falls to an update every 10 s for the window's two
        timed.record(140 + (second - 70) // 10, float(second))  # minutes: fewer epochs, no dropout
    line = rule.update(timed, 153, 200.0)
    assert line is not None and rule.planned == pytest.approx((153 + 400 / timed.pace(153, 200.0)) / 100)
    assert rule.planned < 4.0 and rule.rates == {"dropout": 0.0, "word_dropout": 0.0, "label_smoothing": 0.0}
    record = rule.record()
    assert (record["first_planned_epochs"], record["most_planned_epochs"]) == (12.0, 12.0)
    assert record["fewest_planned_epochs"] == record["planned_epochs"] == round(rule.planned, 2)


def test_a_time_budgets_first_plan_waits_until_a_dev_evaluation_is_costed(tokenizers, tmp_path):
    model = training.Trainer(str(tmp_path), *tokenizers, preset="tiny", log=lambda line: None,
                             config=tiny_config(max_steps=10, regularization="budget")).model

    def first_plan(eval_every, first_evaluation, later_evaluation):
        """Two updates a second and a dev evaluation every ``eval_every`` updates under a
        10-minute budget: when the rule first plans, and the budget it planned from."""
        budget = training.budget.Budget(max_steps=None, max_minutes=10, start_time=0.0, steps_per_epoch=100,
                                        eval_every=eval_every)
        rule, clock, step = training.BudgetRule(model), 0.0, 0
        while rule.update(budget, step, clock) is None:
            budget.record(step, clock)
            clock += 0.5
            budget.add_update(0.5, clock)
            step += 1
            if step % eval_every == 0:
                seconds = first_evaluation if step == eval_every else later_evaluation
                clock += seconds
                budget.add_evaluation(seconds, clock)
        return step, clock, budget, rule

    # the first evaluation (update 100, at 50 s) builds its graphs for 20 s; the second (update
    # 200, at 120 s) costs 5 s: the plan waits for it, past the first minute, and charges 5 s
    # every 100 updates
    step, clock, budget, rule = first_plan(100, 20.0, 5.0)
    assert (step, clock) == (200, 125.0)
    assert budget.pace(step, clock) == pytest.approx(0.5 + 5.0 / 100)
    assert rule.planned == pytest.approx((200 + 475.0 / 0.55) / 100)
    # evaluations too far apart to time a second early: the plan is made at 40% of the minutes
    step, clock, budget, rule = first_plan(1_000, 20.0, 5.0)
    assert clock == 240.0 and rule.planned == pytest.approx((step + 360.0 / 0.5) / 100, rel=0.01)


def test_the_budget_rule_is_off_for_a_model_given_dropout_even_zero(tokenizers, tmp_path):
    lines = []

    def rule(directory, **rates):
        return training.Trainer(str(directory), *tokenizers, preset="tiny", model_overrides=rates,
                                config=tiny_config(max_steps=10, regularization="budget"),
                                log=lines.append).budget_rule

    assert rule(tmp_path / "own", readout_dropout=0.3) is None  # rates of the model's own win
    assert rule(tmp_path / "zero", embedding_dropout=0.0, word_dropout=0.0) is None  # explicit 0 too
    assert lines[-1].startswith("Dropout as given (embedding_dropout=0, word_dropout=0)")
    assert rule(tmp_path / "rule").rates == {"dropout": 0.0, "word_dropout": 0.0,
                                              "label_smoothing": 0.0}  # until it plans


@pytest.mark.slow
def test_a_run_of_many_epochs_trains_with_the_budget_rules_dropout_and_keeps_its_model_plain(
        corpora, tokenizers, tmp_path):
    train, _ = corpora
    tf.keras.utils.set_random_seed(3)
    lines = []
    trainer = training.Trainer(  # 24 updates of 32 pairs over the few of 64 short enough: 24 epochs
        str(tmp_path), *tokenizers, preset="tiny",
        config=tiny_config(seed=3, max_steps=24, regularization="budget"), log=lines.append)
    untraced = trainer.train_step
    report = trainer.fit(train.select(slice(0, 64)))
    model = trainer.model
    saved = model_directory.read_model_config(str(tmp_path))["config"]
    # planned once, before the first update
    assert [line.split()[1] for line in lines if "(the budget rule)" in line] == ["0"]
    epochs = 24 * 32 / report["train_pairs"]  # the pairs the updates hold, over the corpus's
    assert epochs >= 24 and report["regularization"] == {  # the full rates
        "dropout": 0.2, "word_dropout": 0.1, "label_smoothing": 0.0, "planned_epochs": pytest.approx(epochs, abs=0.01),
        "first_planned_epochs": pytest.approx(epochs, abs=0.01),
        "fewest_planned_epochs": pytest.approx(epochs, abs=0.01),
        "most_planned_epochs": pytest.approx(epochs, abs=0.01)}
    assert all(saved[name] == 0.0 for name in regularization.DROPOUT_ARGUMENTS)  # the model's config
    batch = (tf.constant([[5, 6, 7, 8, 9, 10, 2]] * 4), tf.constant([[1, 7, 8, 9, 10, 11, 12]] * 4))
    first, second = (np.array(model(batch, training=True)) for _ in range(2))
    assert not np.allclose(first, second)  # two training passes draw two masks
    np.testing.assert_array_equal(np.array(model(batch)), np.array(model(batch)))  # inference: none
    trainer.budget_rule.set_epochs(3.0)  # a short budget's rates: none, in the same traced step
    np.testing.assert_allclose(np.array(model(batch, training=True)), np.array(model(batch)), rtol=1e-5,
                               atol=1e-6)
    assert trainer.train_step is untraced and trainer.train_step.experimental_get_tracing_count() == 1
    reader = tf.train.load_checkpoint(str(tmp_path / "checkpoints"))
    held = sorted(float(reader.get_tensor(key)) for key in reader.get_variable_to_shape_map()
                  if key.startswith("budget_regularization/")
                  and reader.get_variable_to_dtype_map()[key] == tf.float32)
    assert held == pytest.approx([0.1, 0.2])


@pytest.mark.slow
def test_under_a_time_budget_the_rule_plans_early_from_the_pace_and_never_retraces(
        corpora, tokenizers, tmp_path, monkeypatch):
    import time

    train, _ = corpora
    lines = []
    tf.keras.utils.set_random_seed(3)
    trainer = training.Trainer(  # at most 40 pairs, one update an epoch: a few updates are epochs
        str(tmp_path), *tokenizers, preset="tiny", log=lines.append,
        config=tiny_config(seed=3, max_minutes=0.2, log_every=5, regularization="budget"))
    clock = [1_000.0]

    def scripted():  # a clock that moves 10 ms a reading: the run's updates, whatever the CPU's speed
        clock[0] += 0.01
        return clock[0]

    monkeypatch.setattr(time, "time", scripted)
    report = trainer.fit(train.select(slice(0, 40)))
    monkeypatch.undo()
    decided = [int(line.split()[1].replace(",", "")) for line in lines if "(the budget rule)" in line]
    assert decided and 0 < decided[0] < report["updates"] // 2  # planned in the first tenth of the minutes
    rule = report["regularization"]
    assert {name: rule[name] for name in ("dropout", "word_dropout", "label_smoothing")} == \
        training.budget_regularization(rule["planned_epochs"])
    assert rule["dropout"] > 0  # 12 epochs or more: the masks drawn at the rule's rates
    # one trace of the step for the whole run: the rates are variables the traced step reads
    assert trainer.train_step.experimental_get_tracing_count() == 1


def test_filled_rows_do_not_change_the_loss(tokenizers, tmp_path):
    trainer = make_trainer(tmp_path, tokenizers)
    batch = ((tf.constant([[5, 6, 2]]), tf.constant([[1, 7, 8]])), tf.constant([[7, 8, 2]]))
    filled = data.fill_batch(batch, 4)
    plain = trainer.eval_step(batch)
    padded = trainer.eval_step(filled)
    np.testing.assert_allclose([float(x) for x in padded], [float(x) for x in plain], rtol=1e-6)


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.parametrize("preset", ["tiny", "rnnsearch-cgru-tiny"])
def test_a_short_run_lowers_the_dev_nll_by_more_than_a_nat(corpora, tokenizers, tmp_path, preset):
    train, dev = corpora
    # 80 updates: the dev NLL is ~3.8 after 40 (6.0 before) for every seed tried, ~3.2 after
    # 200; the threshold (1 nat below the start) is far from both
    trainer = make_trainer(tmp_path, tokenizers, preset=preset, seed=learning_seed(1234), max_steps=80,
                           eval_every=40, log_every=20)
    trainer.restore()
    before = trainer.evaluate(trainer.dev_dataset(dev))
    report = trainer.fit(train, dev)
    assert report["updates"] == 80
    assert report["dev_nll"] < before - 1.0, (before, report)
    assert report["best_dev_nll"] <= report["dev_nll"]
    assert report["train_nll"] < before
    saved = json.loads((tmp_path / "report.json").read_text())
    for key in ("updates", "epochs", "wall_time", "device", "train_nll", "dev_nll"):
        assert key in saved
    assert saved["epochs"] > 1  # 80 updates of 32 pairs; < 1000 of the 3000 pairs have <= 20 words
    # the wall time by part: all of it, and the parts this run had
    assert sum(saved["seconds"].values()) == pytest.approx(saved["wall_time_seconds"], rel=0.05, abs=1.0)
    assert min(saved["seconds"][part] for part in ("updates", "compiling", "dev_nll", "checkpoints")) > 0
    # translation reads the best checkpoint through model_directory
    loaded = model_directory.load_model_directory(str(tmp_path))
    assert loaded.checkpoint.endswith(f"ckpt-{report['best_step']}")
    assert loaded.model.decoder == trainer.model.decoder


@pytest.mark.slow
@pytest.mark.learning
def test_a_run_ends_by_averaging_its_last_checkpoints_into_best_when_their_dev_nll_is_lower(
        corpora, tokenizers, tmp_path):
    train, dev = corpora
    lines = []
    seed = learning_seed(1234)
    tf.keras.utils.set_random_seed(seed)
    # a high learning rate: at the end the weights jitter around a plateau, which averaging smooths
    # (the average's dev NLL 0.11-0.25 below the best checkpoint's for seven seeds tried)
    config = tiny_config(seed=seed, max_steps=100, learning_rate=0.1, eval_every=10, checkpoint_every=10)
    assert (config.average_last, config.keep_checkpoints) == (5, 5)  # the CPU presets' defaults
    trainer = training.Trainer(str(tmp_path), *tokenizers, preset="tiny", config=config, log=lines.append)
    report = trainer.fit(train, dev)
    trained_best = min(float(line.split("dev NLL ")[1].split()[0]) for line in lines
                       if "dev NLL" in line and line.startswith("step"))
    steps = [60, 70, 80, 90, 100]
    tag = report["averaged"]
    assert tag["checkpoints"] == [f"ckpt-{n}" for n in steps] and tag["steps"] == steps
    assert model_directory.read_model_config(str(tmp_path))["averaged"] == tag
    # averaged/ is the NumPy mean of the model variables of the last 5 checkpoints
    chosen = [checkpoint_model_values(str(tmp_path / "checkpoints" / f"ckpt-{n}")) for n in steps]
    averaged = checkpoint_model_values(str(tmp_path / "averaged" / "ckpt-100"))
    assert set(averaged) == set(chosen[0])
    for name, value in averaged.items():
        np.testing.assert_allclose(value, np.mean([values[name] for values in chosen], axis=0), rtol=1e-5, atol=1e-6)
    # its recorded dev NLL is the average's, and lower than every trained checkpoint's here:
    # best/ is the average (what translate, evaluate and export load by default)
    assert tag["best"] and tag["dev_nll"] < trained_best, (tag, trained_best)
    assert (report["best_dev_nll"], report["best_step"]) == (tag["dev_nll"], 100)
    best = model_directory.load_model_directory(str(tmp_path))
    assert best.checkpoint.endswith("best/ckpt-100")
    for name, value in checkpoint_model_values(best.checkpoint).items():
        np.testing.assert_array_equal(value, averaged[name])
    # the trainer's model holds the trained weights again (ckpt-100), not the average
    trained = [variable.numpy() for variable in trainer.model.variables]
    trainer.model.set_weights([best_value for best_value in best.model.get_weights()])
    assert trainer.evaluate(trainer.dev_dataset(dev)) == pytest.approx(tag["dev_nll"], abs=1e-4)
    restored = training.Trainer(str(tmp_path), *tokenizers, preset="tiny", config=config, log=lines.append)
    restored.restore()
    for value, variable in zip(trained, restored.model.variables):
        np.testing.assert_array_equal(value, variable.numpy())
    # resuming: the average is the best to beat (the checkpoint's counters predate it), and a
    # finished run rerun does not average the same checkpoints again
    assert float(restored.best_dev_nll.numpy()) == pytest.approx(tag["dev_nll"])
    again = restored.fit(train, dev)
    assert again["averaged"] == tag and again["best_dev_nll"] == tag["dev_nll"]
    assert sum("Averaged the last" in line for line in lines) == 1
    # no dev set, or averaging off: nothing is averaged
    off = make_trainer(tmp_path / "off", tokenizers, max_steps=10, checkpoint_every=5, average_last=0)
    assert off.fit(train, dev)["averaged"] is None and not (tmp_path / "off" / "averaged").exists()
    no_dev = make_trainer(tmp_path / "no_dev", tokenizers, max_steps=10, checkpoint_every=5)
    assert no_dev.fit(train)["averaged"] is None and not (tmp_path / "no_dev" / "averaged").exists()
    with pytest.raises(ValueError, match="average_last"):
        training.TrainingConfig(average_last=-1)


def test_applied_gradient_norm_is_clipped(corpora, tokenizers, tmp_path):
    """With plain SGD and learning rate 1 the update is minus the applied gradient."""
    train, _ = corpora
    clipnorm = 1e-3  # far below the gradient's norm, so clipping acts
    trainer = make_trainer(tmp_path, tokenizers, optimizer="sgd", learning_rate=1.0, clipnorm=clipnorm, max_steps=1)
    before = weights(trainer)
    trainer.fit(train)
    raw_norm = float(trainer._grad_norm.numpy())
    update = [after - b for after, b in zip(weights(trainer), before)]
    applied = math.sqrt(sum(float(np.sum(u.astype("float64") ** 2)) for u in update))
    assert raw_norm > 10 * clipnorm
    assert applied <= clipnorm * (1 + 1e-4)
    assert applied > 0.99 * clipnorm


def test_paper_clipping_bounds_the_update_to_one(corpora, tokenizers, tmp_path):
    train, _ = corpora
    trainer = make_trainer(tmp_path, tokenizers, optimizer="sgd", learning_rate=1.0, clipnorm=1.0, max_steps=3)
    trainer.restore()
    iterator = iter(trainer.train_dataset(train))
    for _ in range(3):
        before = weights(trainer)
        trainer.train_step(iterator)
        update = [a - b for a, b in zip(weights(trainer), before)]
        applied = math.sqrt(sum(float(np.sum(u.astype("float64") ** 2)) for u in update))
        assert applied <= 1.0 + 1e-4
        np.testing.assert_allclose(applied, min(float(trainer._grad_norm.numpy()), 1.0), rtol=1e-3)


def _events(log_dir):
    """Every summary value of a TensorBoard log directory: [(tag, step, plugin, ndarray)]."""
    values = []
    for name in sorted(os.listdir(log_dir)):
        for record in tf.data.TFRecordDataset(os.path.join(log_dir, name)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                values.append((value.tag, event.step, value.metadata.plugin_data.plugin_name,
                               tf.make_ndarray(value.tensor)))
    return values


@pytest.mark.slow
def test_tensorboard_gets_the_final_dev_point_bleu_attention_images_and_translations(
        corpora, tokenizers, tmp_path):
    from bahdanau_tf import evaluation
    from bahdanau_tf.translator import Translator

    train, dev = corpora
    lines = []
    trainer = make_trainer(tmp_path, tokenizers, max_steps=12, eval_every=5, log_every=5, summaries=True,
                           dev_sentences=40, dev_bleu_every=2, dev_bleu_sentences=16, max_minutes=10.0)
    trainer._log = lines.append
    report = trainer.fit(train, dev)
    events = _events(tmp_path / "logs")

    def series(tag):
        return [(step, array) for name, step, _, array in events if name == tag]

    # dev NLL at every evaluation and at the last step, which is the report's
    assert [step for step, _ in series("dev/nll")] == [5, 10, 12]
    assert round(float(series("dev/nll")[-1][1]), 4) == report["dev_nll"]
    # dev BLEU at the first evaluation, every 2nd and the last: the greedy BLEU of the dev sample
    assert [step for step, _ in series("dev/bleu")] == [5, 12]
    sample = dev.select(slice(0, 16))
    # without XLA, as the run's step (jit_compile=False) and so its dev translations
    greedy = Translator(trainer.model, *tokenizers, search=beam(1), batching=Batching(jit_compile=False)).translate(sample.sources).translations
    expected = evaluation.corpus_bleu(greedy, sample.targets).score
    np.testing.assert_allclose(float(series("dev/bleu")[-1][1]), expected, rtol=1e-6)
    assert {plugin for name, _, plugin, _ in events if name in ("dev/nll", "dev/bleu")} == {"scalars"}
    # attention heatmaps of two fixed dev sentences: PNGs whose header sizes are the tensor's
    for tag in ("dev/attention_0", "dev/attention_1"):
        (step, image), = [(step, a) for step, a in series(tag) if step == 12]
        width, height, png = image
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert tuple(tf.io.decode_png(png).shape[:2]) == (int(height), int(width))
    assert {plugin for name, _, plugin, _ in events if name.startswith("dev/attention")} == {"images"}
    # sample translations as a Markdown table: source, reference and the greedy translation
    (_, markdown), = [(step, a) for step, a in series("dev/translations") if step == 12]
    table = markdown.item().decode("utf-8")
    assert table.startswith("| source | reference | translation |")
    assert f"| {sample.sources[0]} | {sample.targets[0]} | {greedy[0] or ' '} |" in table
    assert [plugin for name, _, plugin, _ in events if name == "dev/translations"] == ["text", "text"]
    # progress lines show the time budget, and the time left when max_steps ends the run first
    progress = [line for line in lines if "train NLL" in line]
    assert [line.split("tok/s  ")[-1].split("  ETA")[0] for line in progress] == [
        "5 / 12 steps", "10 / 12 steps"], progress  # max_steps ends the run first, not the 10 min
    assert any(line.startswith("step      12  dev BLEU ") for line in lines), lines
    # docs/training.md's TensorBoard table describes exactly the tags a run writes
    page = (pathlib.Path(__file__).parents[1] / "docs" / "training.md").read_text()
    section = page.split("## Watching a run: TensorBoard")[1].split("\n## ")[0]
    documented = {tag for row in re.findall(r"^\| (`.*?) \|", section, re.M)
                  for tag in re.findall(r"`([a-z]+/[a-z_0-9]+)`", row)}
    assert documented == {name for name, _, _, _ in events}


def test_log_cadence_aims_at_50_points_whichever_budget_ends_the_run():
    cadence = training.progress.log_cadence
    Cadence = training.progress.LogCadence
    assert cadence(None, 5.0) == Cadence(steps=None, seconds=6.0)  # a point every 6 s
    assert cadence(None, 12.0) == Cadence(steps=None, seconds=14.4)
    assert cadence(50, None) == Cadence(steps=1, seconds=None)
    assert cadence(12, 10.0) == Cadence(steps=1, seconds=12.0)
    # max_steps / 50 rounded down to 1, 2 or 5 x 10^k
    assert [cadence(n, None).steps for n in (149, 499, 999, 20_000, 370_000)] == [2, 5, 10, 200, 5000]
    assert cadence(None, None) == Cadence(steps=50, seconds=None)  # no budget: the old default
    assert cadence(100_000, 5.0, log_every=7) == Cadence(steps=7, seconds=None)  # as set, exactly
    every_10, every_6s = Cadence(steps=10, seconds=None), Cadence(steps=None, seconds=6.0)
    assert [every_10.due(step, 1e9) for step in (9, 10, 11, 20)] == [False, True, False, True]
    assert [every_6s.due(3, seconds) for seconds in (5.9, 6.0)] == [False, True]
    both = Cadence(steps=100, seconds=6.0)
    assert (both.due(100, 0.1), both.due(7, 6.5), both.due(7, 0.1)) == (True, True, False)


def test_throughput_leaves_out_the_slowest_updates_the_step_counted_as_compiled():
    meter = training.progress.Throughput()
    for seconds in (0.2, 9.0, 0.2, 0.2):  # the second update compiled
        meter.add_update(seconds)
    # 4000 tokens, 1000 of them in the compiling update: 3000 tokens in 0.6 s (+ 0.1 s of waiting)
    assert meter.take(tokens=4000.0, compiled=1, compiled_tokens=1000.0, wait_seconds=0.1) == pytest.approx(
        3000 / 0.7)
    meter.add_update(5.0)
    assert meter.take(tokens=800.0, compiled=1, compiled_tokens=800.0) is None  # only compiling
    for seconds in (0.1, 0.3):
        meter.add_update(seconds)
    assert meter.take(tokens=1000.0, compiled=0, compiled_tokens=0.0) == pytest.approx(2500.0)
    assert meter.overall() == pytest.approx(4000 / 1.1)
    assert meter.compile_seconds == pytest.approx(14.0)


def test_the_report_breaks_the_wall_time_into_its_parts(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(training.budget.time, "time", lambda: clock[0])
    run = training.progress.RunState(resumed_step=0, elapsed_before=0.0, start=100.0)
    run.throughput = training.progress.Throughput()
    run.budget = training.Budget(max_steps=3, max_minutes=None, start_time=100.0, steps_per_epoch=10)
    for seconds in (0.5, 4.0, 0.5):  # the second update compiled
        run.throughput.add_update(seconds)
    run.throughput.take(tokens=30.0, compiled=1, compiled_tokens=10.0)
    for part, seconds in (("dev_nll", 2.0), ("checkpoints", 0.5), ("dev_nll", 1.0)):
        with run.budget.timed(part):
            clock[0] += seconds
    with pytest.raises(KeyboardInterrupt), run.budget.timed("dev_bleu"):  # a part cut short counts
        clock[0] += 0.3
        raise KeyboardInterrupt
    clock[0] = 110.0
    shares = training.run_directory.time_shares(run)
    assert shares == {"updates": 1.0, "compiling": 4.0, "dev_nll": 3.0, "dev_bleu": 0.3, "checkpoints": 0.5,
                      "averaging": 0.0, "other": 1.2}
    report = dict(updates=3, epochs=0.1, wall_time="00:00:10", device="CPU", train_nll=None, dev_nll=None,
                  best_dev_nll=None, best_step=None, stopped_because="max_steps=3", seconds=shares)
    assert "Time spent    updates 10%, compiling 40%, dev NLL 30%, dev BLEU 3%, checkpoints 5%, other 12%" in (
        training.format_report(report))


def _scripted_report(preset, updates):
    """The report of a run of ``preset`` that made ``updates`` updates (`training_report` of a
    `RunState`, as the trainer builds it at the end)."""
    run = training.progress.RunState(resumed_step=0, elapsed_before=0.0, step=updates, train_pairs=27_000,
                                     start=0.0, stopped=f"max_steps={updates}")
    return training.training_report(run, sentences_seen=64 * updates, best_dev_nll=math.inf, best_step=0,
                                     replicas=1, preset=preset, parameters=1,
                                     config=training.TrainingConfig.for_preset(preset))


def test_a_run_below_its_presets_floor_ends_its_report_with_one_warning():
    """The default below ``presets.UPDATES_FLOOR``: one line at the end naming what to do; at the
    floor and above, and for a preset whose floor is not measured, none."""
    floor = presets.UPDATES_FLOOR[presets.DEFAULT]
    lines = training.format_report(_scripted_report(presets.DEFAULT, floor - 1)).splitlines()
    assert lines[0] == f"Updates       {floor - 1:,}"
    assert [line for line in lines if "Warning" in line] == [lines[-1]], lines
    assert lines[-1].startswith(f"Warning: {floor - 1:,} updates, fewer than the ~{floor:,} that {presets.DEFAULT} "
                                "needs before it translates usefully"), lines[-1]
    for advice in ("more minutes (--max_minutes)", "a faster machine or a GPU", "a smaller preset"):
        assert advice in lines[-1]
    for preset, updates in ((presets.DEFAULT, floor), (presets.DEFAULT, 10 * floor), ("tiny", 3),
                            ("rnnsearch-50", 268)):
        report = training.format_report(_scripted_report(preset, updates))
        assert "Warning" not in report and report.splitlines()[-1].startswith("Stopped"), report


def test_the_floor_is_where_the_default_began_to_translate_in_its_measured_runs():
    """``presets.UPDATES_FLOOR`` against the runs it comes from: the fewest updates of a run of the
    default's budget curve that scored over 20 test BLEU, rounded down to 50; every run below it
    scored under 5."""
    path = pathlib.Path(__file__).parents[1] / "benchmarks" / "results" / "budget_curve_one_core_amd_epyc.json"
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
    floor = presets.UPDATES_FLOOR[presets.DEFAULT]
    assert {row["preset"] for row in rows} == {presets.DEFAULT}
    useful = min(row["updates"] for row in rows if row["bleu"] > 20)
    assert useful // 50 * 50 == floor, useful
    assert all(row["bleu"] < 5 for row in rows if row["updates"] < floor)


def test_the_step_counts_the_tracing_update_and_under_xla_each_new_batch_shape(tokenizers, tmp_path):
    for jit_compile, expected in ((True, (3.0, 10.0 + 20.0 + 40.0)), (False, (1.0, 10.0))):
        trainer = make_trainer(tmp_path / str(jit_compile), tokenizers, jit_compile=jit_compile)
        for key, tokens in ((5, 10.0), (6, 20.0), (5, 30.0), (7, 40.0), (6, 50.0)):
            trainer._count_compilation(tf.constant(key, "int64"), tf.constant(tokens))
        assert (float(trainer._compiled_updates.numpy()), float(trainer._compiled_tokens.numpy())) == expected


def test_budget_progress_shows_the_limit_that_binds_and_its_eta():
    progress = training.budget.budget_progress
    # 20 updates left at 1 s each end the run before the 11.5 minutes left: max_steps binds
    assert progress(30, 50, 0.5, 12.0, 1.0) == "30 / 50 steps  ETA 0.3 min"
    # 970 updates left would take 16 min, 3 min are left: the time budget binds
    assert progress(30, 1000, 2.0, 5.0, 1.0) == "2.0 / 5.0 min  ETA 3.0 min"
    assert progress(1_200, 5_000, 0.5, None, 0.6) == "1,200 / 5,000 steps  ETA 38.0 min"
    assert progress(30, None, 2.5, None, 1.0) == "2.5 min"
    # a run at a steady pace shows one limit and an ETA that only falls
    lines = [progress(step, 300, step * 0.9 / 60, 12.0, 0.9) for step in range(10, 301, 10)]
    assert all(" / 300 steps  ETA " in line for line in lines)
    etas = [float(line.split("ETA ")[1].split()[0]) for line in lines]
    assert etas == sorted(etas, reverse=True) and etas[-1] == 0.0


def test_attention_rows_stop_at_the_end_token_or_near_the_source_length():
    rows = training.summaries.attention_rows
    source = ["a", "b", "c", "d", "[END]"]
    assert rows(source, ["x", "y", "[END]"]) == 3
    assert rows(source, ["x"] * 20) == 8  # no [END]: ceil(1.5 x 5)
    assert rows(source, ["x"] * 4) == 4


@pytest.mark.slow
def test_a_short_run_gives_each_train_scalar_a_curve_without_compiling_updates(
        corpora, tokenizers, tmp_path):
    train, _ = corpora
    lines = []
    trainer = make_trainer(tmp_path, tokenizers, max_steps=12, max_minutes=10.0, log_every=None,
                           summaries=True)
    trainer._log = lines.append
    trainer.fit(train)
    events = _events(tmp_path / "logs")

    def steps(tag):
        return [step for name, step, _, _ in events if name == tag]

    # max_steps=12 binds: a point per update (the old default, every 50 updates, gave none)
    for tag in ("train/nll", "train/gradient_norm", "train/learning_rate"):
        assert steps(tag) == list(range(1, 13)), tag
    # update 1 traced the step (seconds, not milliseconds): its window has no throughput point
    assert steps("train/tokens_per_second") == list(range(2, 13))
    rates = [float(array) for name, _, _, array in events if name == "train/tokens_per_second"]
    assert max(rates) / min(rates) < 20, rates
    progress = [line for line in lines if "train NLL" in line]
    assert "compiling" in progress[0] and all("tok/s" in line for line in progress[1:]), progress
    assert progress[-1].endswith("12 / 12 steps  ETA 0.0 min"), progress


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.bfloat16
@pytest.mark.parametrize("proposal", training.SAMPLED_PROPOSALS)
def test_sampled_softmax_under_xla_and_bfloat16_trains_the_full_softmax(corpora, tokenizers, tmp_path, proposal):
    train, dev = corpora
    # one batch shape: one XLA compilation of the step. Lengths are padded to 16 and capped at
    # max_length + 1 ([END]): with max_length=16 a 16-word pair made a second length (17), and
    # each pair of lengths its own compilation
    trainer = make_trainer(tmp_path, tokenizers, seed=learning_seed(1234), sampled_softmax=40,
                           sampled_proposal=proposal,
                           max_steps=20, eval_every=20,
                           jit_compile=True, precision="mixed_bfloat16", max_length=15,
                           pad_to_multiple=16, dev_sentences=32)
    kernel, bias = trainer.model.output_projection()
    assert kernel is trainer.model.readout.output_kernel and bias is trainer.model.readout.output_bias
    trainer.restore()
    before = trainer.evaluate(trainer.dev_dataset(dev))  # the full softmax
    report = trainer.fit(train, dev)
    assert report["updates"] == 20
    assert int(trainer._shapes_count.numpy()) == 1  # one batch shape met: one compilation
    # the dev NLL is the full softmax's: the sampled loss trained its W_o and bias
    assert report["dev_nll"] < before - 0.5, (before, report)
    saved = model_directory.read_model_config(str(tmp_path))
    assert saved["settings"]["training"]["sampled_softmax"] == 40
    assert saved["settings"]["training"]["sampled_proposal"] == proposal
    loaded = model_directory.load_model_directory(str(tmp_path), which="latest", dtype="float32")
    batch = next(iter(trainer.dev_dataset(dev)))
    (source, target_in), target_out = batch
    nll = float(losses.masked_nll(target_out, loaded.model((source, target_in))))
    assert nll < before - 0.5, (nll, before)
    with pytest.raises(ValueError, match="sampled_softmax=400 must be below the target vocabulary size"):
        make_trainer(tmp_path / "other", tokenizers, sampled_softmax=400)


# one batch shape for every run (the reference too: like for like): lengths padded to 13 and
# capped at max_length + 1 = 13, so XLA compiles the step and the dev pass once each (the default
# multiple, 8, left up to four (source, target) length pairs, each its own compilation)
_PRECISION_RUN = dict(optimizer="sgd", learning_rate=1.0, clipnorm=None, max_steps=20, log_every=20, max_length=12,
                      pad_to_multiple=13)


@pytest.fixture(scope="module")
def float32_report(corpora, tokenizers, tmp_path_factory):
    return make_trainer(tmp_path_factory.mktemp("float32"), tokenizers, seed=learning_seed(1234),
                        **_PRECISION_RUN).fit(*corpora)


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.parametrize("precision,jit", [
    ("float32", True), pytest.param("mixed_bfloat16", False, marks=pytest.mark.bfloat16), ("mixed_float16", False)])
def test_precision_and_jit_losses_are_close_to_float32(corpora, tokenizers, tmp_path, float32_report, precision,
                                                        jit):
    """Plain SGD without clipping: a wrong loss scale or cast would change the losses a lot."""
    train, dev = corpora
    reference_report = float32_report
    other = make_trainer(tmp_path, tokenizers, seed=learning_seed(1234), precision=precision, jit_compile=jit,
                         **_PRECISION_RUN)
    assert other.model.compute_dtype == {"float32": "float32", "mixed_bfloat16": "bfloat16",
                                         "mixed_float16": "float16"}[precision]
    report = other.fit(train, dev)
    if jit:
        assert int(other._shapes_count.numpy()) == 1  # one batch shape met: one compilation
    tolerance = 1e-3 if precision == "float32" else 0.03
    np.testing.assert_allclose(report["train_nll"], reference_report["train_nll"], rtol=tolerance)
    np.testing.assert_allclose(report["dev_nll"], reference_report["dev_nll"], rtol=tolerance)
    assert reference_report["dev_nll"] < math.log(400) - 0.5  # it did learn


@pytest.mark.slow
def test_another_model_config_is_refused(corpora, tokenizers, tmp_path):
    train, _ = corpora
    make_trainer(tmp_path, tokenizers, max_steps=1).fit(train)
    tf.keras.utils.set_random_seed(1)
    other = training.Trainer(
        str(tmp_path), *tokenizers, preset="tiny", config=tiny_config(max_steps=2),
        model_overrides=dict(hidden_dim=32), log=lambda line: None,
    )
    with pytest.raises(ValueError, match=r"different model \(hidden_dim: saved 24, requested 32\)"):
        other.fit(train)
    assert model_directory.read_model_config(str(tmp_path))["config"]["hidden_dim"] == 24
    # another initialization is the same variables: the run resumes with the saved weights
    first = make_trainer(tmp_path, tokenizers, max_steps=1)
    first.restore()
    saved = first.model.get_weights()
    with pytest.raises(training.DirectoryInUseError):  # restore() takes the directory ...
        make_trainer(tmp_path, tokenizers, max_steps=1).restore()
    first.close()  # ... until fit returns or close() gives it back
    resumed = training.Trainer(
        str(tmp_path), *tokenizers, preset="tiny", config=tiny_config(max_steps=1),
        model_overrides=dict(initialization="keras"), log=lambda line: None,
    )
    assert resumed.restore() is not None
    for before, after in zip(saved, resumed.model.get_weights()):
        np.testing.assert_array_equal(before, after)


@pytest.mark.slow
def test_resume_continues_step_weights_and_optimizer(corpora, tokenizers, tmp_path):
    train, _ = corpora
    first = make_trainer(tmp_path, tokenizers, max_steps=6, checkpoint_every=3)
    first.fit(train)
    lines = []
    # another initialisation (zeros): the restore must overwrite it
    second = training.Trainer(str(tmp_path), *tokenizers, preset="tiny",
                              config=tiny_config(max_steps=8, checkpoint_every=3), log=lines.append)
    for variable in second.model.trainable_variables:
        variable.assign(tf.zeros_like(variable))
    assert second.restore().endswith("ckpt-6")
    assert any(line.startswith("Resuming from") for line in lines)
    assert int(second.step.numpy()) == 6
    for a, b in zip(weights(second), weights(first)):
        np.testing.assert_array_equal(a, b)
    assert int(second.optimizer.iterations.numpy()) == 6
    report = second.fit(train)
    assert report["updates"] == 8
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints")).endswith("ckpt-8")


def _file_checksums(directory):
    import hashlib

    return {os.path.relpath(os.path.join(root, name), directory):
            hashlib.sha256(pathlib.Path(root, name).read_bytes()).hexdigest()
            for root, _, names in os.walk(directory) for name in names}


@pytest.mark.slow
def test_a_copied_or_moved_run_resumes_its_own_checkpoints_and_leaves_the_original_alone(
        corpora, tokenizers, tmp_path):
    """A run with pruned checkpoints, copied (``cp -a``) or moved, resumes from its own files to
    the weights the original resumed would reach; the original's files are untouched. The moved
    one's state file names its checkpoints by absolute paths, as an earlier release wrote it."""
    import subprocess

    train, _ = corpora
    settings = dict(checkpoint_every=2, keep_checkpoints=2, average_last=0)
    make_trainer(tmp_path / "original", tokenizers, max_steps=6, **settings).fit(train)
    folder = tmp_path / "original" / "checkpoints"
    assert "ckpt-2.index" not in os.listdir(folder)  # pruned
    assert "/" not in (folder / "checkpoint").read_text()  # the state names files, not paths
    subprocess.run(["cp", "-a", str(tmp_path / "original"), str(tmp_path / "copy")], check=True)
    subprocess.run(["cp", "-a", str(tmp_path / "original"), str(tmp_path / "before_move")], check=True)
    state = model_directory.checkpoint_state(str(tmp_path / "before_move" / "checkpoints"))
    tf.compat.v1.train.update_checkpoint_state(  # what an earlier release left: absolute paths
        str(tmp_path / "before_move" / "checkpoints"), state.model_checkpoint_path,
        all_model_checkpoint_paths=list(state.all_model_checkpoint_paths))
    os.rename(tmp_path / "before_move", tmp_path / "moved")
    before = _file_checksums(tmp_path / "original")
    resumed = {}
    for name in ("copy", "moved", "original"):
        if name == "original":
            assert _file_checksums(tmp_path / "original") == before  # untouched by the others
        trainer = make_trainer(tmp_path / name, tokenizers, max_steps=10, **settings)
        assert trainer.restore().endswith(os.path.join(name, "checkpoints", "ckpt-6"))
        trainer.fit(train)
        resumed[name] = weights(trainer)
        assert [os.path.basename(path) for path in checkpoint_averaging.run_checkpoints(
            str(tmp_path / name))] == ["ckpt-8", "ckpt-10"]
        assert "/" not in (tmp_path / name / "checkpoints" / "checkpoint").read_text()
    for name in ("copy", "moved"):
        for got, expected in zip(resumed[name], resumed["original"]):
            np.testing.assert_array_equal(got, expected)


@pytest.mark.slow
def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(corpora, tokenizers, tmp_path):
    train, _ = corpora
    trainer = make_trainer(tmp_path, tokenizers, optimizer="sgd", learning_rate=1e30, clipnorm=None,
                           max_steps=50, checkpoint_every=1, log_every=1)
    with pytest.raises(training.NonFiniteLossError, match="non-finite"):
        trainer.fit(train)
    report = json.loads((tmp_path / "report.json").read_text())
    assert "non-finite" in report["stopped_because"]
    assert report["updates"] < 50
    latest = tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
    if latest is not None:  # a checkpoint written before the blow-up holds finite weights
        restored = model_directory.load_model_directory(str(tmp_path), which="latest")
        for variable in restored.model.trainable_variables:
            assert np.all(np.isfinite(np.array(variable)))
        saved_step = int(latest.rsplit("-", 1)[1])
        assert saved_step < report["updates"]


# === tf.distribute, in subprocesses (device configuration and TF_CONFIG are per process) ===

_COMMON = r'''
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
import tensorflow as tf
'''

_SETUP = r'''
from bahdanau_tf import corpora, text, training
train = corpora.load_corpus("bible-en-es", split="train").select(slice(0, 400))  # 128 pairs are trained on
dev = corpora.load_corpus("bible-en-es", split="dev").select(slice(0, 64))
source = text.WordTokenizer.build(train.sources, max_vocabulary_size=200)
target = text.WordTokenizer.build(train.targets, max_vocabulary_size=200)

def fit(output_dir, strategy, **changes):
    tf.keras.utils.set_random_seed(7)
    # a dev set: the run ends by averaging ckpt-2 and ckpt-4 (the tiny preset's average_last),
    # every replica and worker evaluating, then the trained weights put back
    config = training.TrainingConfig.for_preset(
        "tiny", max_steps=4, max_length=16, jit_compile=False, precision="float32", log_every=2,
        checkpoint_every=2, summaries=False, dev_sentences=64, eval_every=1000, dev_bleu_every=0,
        **changes)
    trainer = training.Trainer(output_dir, source, target, preset="tiny", config=config, strategy=strategy,
                               log=lambda line: None)
    report = trainer.fit(train, dev)
    assert report["updates"] == 4, report
    assert report["averaged"]["checkpoints"] == ["ckpt-2", "ckpt-4"], report
    return trainer
'''

_MIRRORED = _COMMON + r'''
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
''' + _SETUP + r'''
def replica_gap(trainer):
    # the largest difference between the two replicas' copies of any weight
    worst = 0.0
    for variable in trainer.model.trainable_variables:
        copies = [np.array(c) for c in variable.value.values]
        assert len(copies) == 2
        worst = max(worst, float(np.max(np.abs(copies[0] - copies[1]))))
    return worst

# plain SGD with active clipping: any error in the loss scaling or in where the global norm is
# taken (per replica instead of over the summed gradient) changes the weights
settings = dict(optimizer="sgd", learning_rate=1.0, clipnorm=0.05)
mirrored = fit(sys.argv[1] + "/mirrored", training.make_strategy("mirrored", ["/cpu:0", "/cpu:1"]), **settings)
assert mirrored.strategy.num_replicas_in_sync == 2
single = fit(sys.argv[1] + "/single", None, **settings)
worst_single = max(float(np.max(np.abs(np.array(m.value.values[0]) - np.array(s))))
                   for m, s in zip(mirrored.model.trainable_variables, single.model.trainable_variables))
# sampled softmax: each replica draws its own sampled classes; the all-reduced update is the same on both
sampled = fit(sys.argv[1] + "/sampled", training.make_strategy("mirrored", ["/cpu:0", "/cpu:1"]),
              sampled_softmax=30)
kernel = np.array(sampled.model.readout.output_kernel.value.values[0])
print(json.dumps({"replicas": replica_gap(mirrored), "single": worst_single,
                  "sampled_replicas": replica_gap(sampled), "sampled_finite": bool(np.all(np.isfinite(kernel)))}))
'''

_WORKER = _COMMON + r'''
strategy = tf.distribute.MultiWorkerMirroredStrategy()  # before any other TensorFlow op
''' + _SETUP + r'''
trainer = fit(sys.argv[1], strategy, regularization="budget")  # the workers plan the rule together
np.savez(sys.argv[2], *[np.array(v) for v in trainer.model.trainable_variables])
print(json.dumps({"replicas": strategy.num_replicas_in_sync}))
'''


def _run_script(script, *args, env=None, timeout=300):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.mark.slow
@pytest.mark.subprocess
def test_mirrored_strategy_over_two_logical_cpus_matches_one_device_also_with_sampled_softmax(tmp_path):
    """Two logical CPUs in one process (the GPU path's MirroredStrategy): the replicas stay
    identical and equal one device's weights; with sampled softmax too (each replica samples)."""
    result = _run_script(_MIRRORED, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["replicas"] == 0.0 and outcome["sampled_replicas"] == 0.0
    assert outcome["single"] < 1e-5
    assert outcome["sampled_finite"] is True


def _free_ports(count):
    import socket

    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
@pytest.mark.subprocess
def test_multi_worker_strategy_two_processes_end_with_identical_weights(tmp_path):
    import subprocess
    import sys

    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    processes = []
    for index in range(2):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": {"worker": workers},
                                                     "task": {"type": "worker", "index": index}}))
        processes.append(subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(tmp_path / "out"), str(tmp_path / f"weights{index}.npz")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=300))
    finally:
        for process in processes:
            process.kill()
    for process, (out, err) in zip(processes, outputs):
        assert process.returncode == 0, err[-3000:]
        assert json.loads(out.strip().splitlines()[-1])["replicas"] == 2
    first, second = np.load(tmp_path / "weights0.npz"), np.load(tmp_path / "weights1.npz")
    assert len(first.files) == len(second.files) > 0
    for name in first.files:
        np.testing.assert_array_equal(first[name], second[name])
    # the chief (worker 0) wrote the model directory, the average included; the other worker
    # wrote nothing there
    assert (tmp_path / "out" / "model.json").exists()
    assert model_directory.read_model_config(str(tmp_path / "out"))["averaged"]["steps"] == [2, 4]
    assert model_directory.latest_checkpoint(str(tmp_path / "out"), "averaged").endswith("averaged/ckpt-4")
    assert tf.train.latest_checkpoint(str(tmp_path / "out" / "checkpoints")).endswith("ckpt-4")


def _scripted_dev(trainer, curve):
    """Replaces the dev NLL by ``curve[step]``: the dev schedule meets a chosen plateau."""
    trainer.evaluate = lambda dataset: curve[int(trainer.step.numpy())]


@pytest.mark.slow
def test_plateau_decays_the_learning_rate_and_early_stopping_ends_the_run_on_a_scripted_curve(
        corpora, tokenizers, tmp_path):
    train, dev = corpora
    lines = []
    config = tiny_config(max_steps=40, eval_every=2, schedule="plateau", plateau_patience=2,
                         plateau_factor=0.5, early_stopping=3, average_last=0)
    trainer = training.Trainer(str(tmp_path), *tokenizers, preset="tiny", config=config, log=lines.append)
    #            better better  worse  worse (decay)  better  worse  worse (decay)  worse (stop)
    _scripted_dev(trainer, {2: 5.0, 4: 4.0, 6: 4.1, 8: 4.2, 10: 3.9, 12: 4.0, 14: 4.0, 16: 4.0})
    report = trainer.fit(train, dev)
    decays = [line for line in lines if "learning rate decayed" in line]
    assert [int(line.split()[1]) for line in decays] == [8, 14]
    assert "decayed to 0.0025" in decays[0] and "decayed to 0.00125" in decays[1]
    assert report["updates"] == 16 and report["stopped_because"].startswith("early stopping (3 dev")
    assert (report["best_dev_nll"], report["best_step"]) == (3.9, 10)
    assert trainer._current_learning_rate() == pytest.approx(5e-3 / 4)
    # a plateau schedule needs a dev set; the factor and label smoothing are checked
    with pytest.raises(ValueError, match="needs a dev set"):
        make_trainer(tmp_path / "no_dev", tokenizers, schedule="plateau", max_steps=2).fit(train)
    assert not (tmp_path / "no_dev").exists()
    # a budget schedule needs a budget
    with pytest.raises(ValueError, match="set --max_steps or --max_minutes"):
        make_trainer(tmp_path / "no_budget", tokenizers, schedule="budget").fit(train)
    assert not (tmp_path / "no_budget").exists()
    for bad in (dict(plateau_factor=1.0), dict(label_smoothing=1.0), dict(early_stopping=-1),
                dict(label_smoothing=0.1, sampled_softmax=50), dict(average_at="first")):
        with pytest.raises(ValueError, match=next(iter(bad)) if len(bad) == 1 else "label_smoothing"):
            tiny_config(**bad)
    # a setting that would do nothing is refused, naming it (its flag)
    for unused in (dict(early_stopping=2), dict(average_at="best", average_last=3)):
        with pytest.raises(ValueError, match="it does nothing without a dev set"):
            make_trainer(tmp_path / "no_dev", tokenizers, max_steps=2, **unused).fit(train)
        assert not (tmp_path / "no_dev").exists()
    for unused, phrase in ((dict(plateau_factor=0.3), "--plateau_factor=0.3 does nothing without --schedule=plateau"),
                           (dict(plateau_patience=3), "--plateau_patience=3 does nothing without"),
                           (dict(average_at="best", average_last=1), "--average_last of 2 or more (it is 1)")):
        with pytest.raises(ValueError, match=re.escape(phrase)):
            tiny_config(**unused)
        with pytest.raises(ValueError, match=re.escape(phrase)):  # built without a preset
            training.TrainingConfig(**unused)
    with pytest.raises(ValueError, match="--plateau_factor=0.5 does nothing"):  # its default, given
        training.TrainingConfig.for_preset("tiny", plateau_factor=0.5)


def test_dev_schedule_counts_without_a_trainer():
    config = tiny_config(schedule="plateau", plateau_patience=1, early_stopping=2, learning_rate=1.0)
    schedule = training.DevSchedule(config)
    assert [schedule.record(improved) for improved in (False, True, False)] == [0.5, None, 0.25]
    assert schedule.stop_reason() is None
    assert schedule.record(False) == 0.125 and "2 dev evaluations" in schedule.stop_reason()
    constant = training.DevSchedule(tiny_config(early_stopping=0))
    assert [constant.record(False) for _ in range(5)] == [None] * 5 and constant.stop_reason() is None


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["tiny", "rnnsearch-cgru-tiny"])
def test_a_run_with_dropout_smoothing_and_plateau_resumes_bit_exactly(corpora, tokenizers, tmp_path, preset):
    train, dev = corpora
    rates = dict(embedding_dropout=0.2, annotation_dropout=0.2, recurrent_dropout=0.2,
                 readout_dropout=0.2, word_dropout=0.1)
    curve = {2: 5.0, 4: 5.1, 6: 4.0, 8: 4.2, 10: 4.3}  # decays at 4, 8 and 10

    def trainer_for(directory, max_steps):
        tf.keras.utils.set_random_seed(7)
        config = tiny_config(seed=7, max_steps=max_steps, eval_every=2, checkpoint_every=2,
                             schedule="plateau", plateau_patience=1, early_stopping=5,
                             label_smoothing=0.1, average_last=3, average_at="best")
        trainer = training.Trainer(str(directory), *tokenizers, preset=preset, config=config,
                                   model_overrides=rates, log=lambda line: None)
        _scripted_dev(trainer, curve)
        return trainer

    straight = trainer_for(tmp_path / "straight", 10)
    report = straight.fit(train, dev)
    trainer_for(tmp_path / "cut", 6).fit(train, dev)  # stopped at 6 (after its decay at 4) ...
    resumed = trainer_for(tmp_path / "cut", 10)  # ... and resumed
    assert resumed.restore().endswith("ckpt-6")
    assert resumed._current_learning_rate() == pytest.approx(5e-3 / 2)
    resumed.fit(train, dev)
    for a, b in zip(weights(straight), weights(resumed)):
        np.testing.assert_array_equal(a, b)
    assert resumed._current_learning_rate() == straight._current_learning_rate() == pytest.approx(5e-3 / 8)
    for name in ("without_improvement", "since_decay", "decays"):
        assert int(getattr(resumed.dev_schedule, name).numpy()) == int(getattr(straight.dev_schedule, name).numpy())
    saved = model_directory.read_model_config(str(tmp_path / "straight"))
    assert {name: saved["config"][name] for name in rates} == rates
    assert saved["settings"]["training"]["label_smoothing"] == 0.1
    # the average takes the 3 checkpoints around the best dev step (6), not the last 3
    assert report["averaged"]["steps"] == [4, 6, 8]
    assert sorted(os.listdir(tmp_path / "straight" / "around_best")) == sorted(
        f"ckpt-{step}.{suffix}" for step in (4, 6, 8, 10) for suffix in ("data-00000-of-00001", "index"))


@pytest.mark.slow
def test_a_run_whose_budget_rule_drops_resumes_bit_exactly_across_its_plan(
        corpora, tokenizers, tmp_path):
    train = corpora[0].select(slice(0, 64))  # 20 updates of 32 pairs: 10 epochs or more

    def trainer_for(directory, max_steps):
        tf.keras.utils.set_random_seed(7)
        config = tiny_config(seed=7, max_steps=max_steps, checkpoint_every=4, regularization="budget",
                             label_smoothing=0.1)
        return training.Trainer(str(directory), *tokenizers, preset="rnnsearch-cgru-tiny", config=config,
                                log=lambda line: None)

    straight = trainer_for(tmp_path / "straight", 20)
    report = straight.fit(train)
    # the rule dropped and smoothed from update 0 on, and the checkpoint holds what it held
    assert report["regularization"]["dropout"] > 0 and report["regularization"]["label_smoothing"] == 0.1
    reader = tf.train.load_checkpoint(str(tmp_path / "straight" / "checkpoints"))
    held = [key for key in reader.get_variable_to_shape_map() if key.startswith("budget_label_smoothing/")]
    assert len(held) == 1 and reader.get_tensor(held[0]) == pytest.approx(0.1)
    for cut in (1, 16):  # stopped by SIGTERM right after the plan, and later
        directory = tmp_path / f"cut{cut}"
        first = trainer_for(directory, 20)
        spent = first._budget_spent

        def budget_spent(run, first=first, spent=spent, cut=cut):
            if run.step == cut:
                first._signals.received = signal.SIGTERM
            return spent(run)

        first._budget_spent = budget_spent
        with pytest.raises(training.TrainingInterrupted):
            first.fit(train)
        resumed = trainer_for(directory, 20)
        assert resumed.restore().endswith(f"ckpt-{cut}")
        resumed.fit(train)
        for a, b in zip(weights(straight), weights(resumed)):
            np.testing.assert_array_equal(a, b)


# one leg of a run (a fresh process): `action` "run", "sigterm" (SIGTERM while update `at` runs),
# "sigkill" (SIGKILL once the checkpoint of update `at` is written) or "sigkill_before_copy"
# (SIGKILL between that checkpoint and its around_best/ copy); prints the updates at
# which its learning rate decayed
_LEG = _COMMON + r"""
import signal
from bahdanau_tf import corpora, text, training
train = corpora.load_corpus("bible-en-es", split="train").select(slice(0, 3000))
dev = corpora.load_corpus("bible-en-es", split="dev").select(slice(0, 120))
source = text.WordTokenizer.build(train.sources, max_vocabulary_size=400)
target = text.WordTokenizer.build(train.targets, max_vocabulary_size=400)
out, action, at = sys.argv[1], sys.argv[2], int(sys.argv[3])
# a scripted dev curve (plus a millionth of the real dev NLL, so the average's is the weights'):
# better at 4, 8, 20; worse at 12, 16 (a decay at 16) and 24; any other step's is worse still
CURVE = {4: 5.0, 8: 4.0, 12: 4.2, 16: 4.1, 20: 3.9, 24: 4.3}
tf.keras.utils.set_random_seed(7)
config = training.TrainingConfig.for_preset(
    "tiny", seed=7, max_steps=24, max_length=20, jit_compile=False, precision="float32", log_every=5,
    eval_every=4, checkpoint_every=4, keep_checkpoints=3, dev_sentences=120, dev_bleu_every=0,
    summaries=False, lexicon_top_k=0, schedule="plateau", plateau_patience=2, early_stopping=5,
    average_last=3, average_at="best")
lines = []
trainer = training.Trainer(out, source, target, preset="tiny", config=config, log=lines.append)
real = trainer.evaluate
trainer.evaluate = lambda dataset: CURVE.get(int(trainer.step.numpy()), 4.5) + 1e-6 * real(dataset)
step, save = trainer.train_step, trainer._save

def train_step(iterator):
    if action == "sigterm" and int(trainer.step.numpy()) == at - 1:
        os.kill(os.getpid(), signal.SIGTERM)
    step(iterator)

def save_then_die(run, **changes):
    save(run, **changes)
    if action == "sigkill" and run.step == at:
        os.kill(os.getpid(), signal.SIGKILL)

trainer.train_step, trainer._save = train_step, save_then_die
if action == "sigkill_before_copy":  # between the checkpoint and its around_best/ copy
    copy = trainer._around_best.write
    def copy_or_die(model, step, best_step):
        if step == at:
            os.kill(os.getpid(), signal.SIGKILL)
        copy(model, step, best_step)
    trainer._around_best.write = copy_or_die
try:
    trainer.fit(train, dev)
except training.TrainingInterrupted:
    assert action == "sigterm"
print(json.dumps([int(line.split()[1]) for line in lines if "learning rate decayed" in line]))
"""


def _checkpoint_tensors(prefix):
    """A checkpoint's tensors, less those that count saves and wall time."""
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if not any(part in name for part in ("save_counter", "elapsed_seconds", "_CHECKPOINTABLE"))}


def _run_directory_state(directory):
    """What a finished run leaves that its resumed copy must match exactly."""
    directory = str(directory)
    latest = model_directory.latest_checkpoint(directory, "latest")
    around = os.path.join(directory, checkpoint_averaging.AROUND_BEST)
    report = json.loads(pathlib.Path(directory, "report.json").read_text())
    return {
        "latest": (os.path.basename(latest), _checkpoint_tensors(latest)),
        "checkpoints": [os.path.basename(p) for p in checkpoint_averaging.run_checkpoints(directory)],
        "around_best": {name[:-len(".index")]: _checkpoint_tensors(os.path.join(around, name[:-len(".index")]))
                        for name in sorted(os.listdir(around)) if name.endswith(".index")},
        "averaged": _checkpoint_tensors(model_directory.latest_checkpoint(directory, "averaged")),
        "averaged_tag": model_directory.read_model_config(directory)["averaged"],
        "best": os.path.basename(model_directory.latest_checkpoint(directory, "best")),
        "report": {key: report[key] for key in ("updates", "epochs", "train_nll", "dev_nll", "best_dev_nll",
                                                "best_step", "stopped_because", "averaged", "train_pairs")},
    }


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_run_stopped_between_evaluations_or_killed_after_a_checkpoint_resumes_exactly(tmp_path):
    """SIGTERM at updates 14 and 22 (between dev evaluations, every 4; 22 inside the last window
    of the train NLL, every 5), or SIGKILL after the checkpoints of 12 and of the last update
    (24) and a rerun: the same weights, optimizer and schedule state, checkpoints, around_best/,
    averaged/, best/ and report figures as the run that nothing stopped. A signal's stop makes no
    dev evaluation of its own (the plateau schedule would count it and decay early), and a
    finished run rerun evaluates and decays no more."""
    import subprocess

    chains = {"straight": [("run", 0)], "stopped": [("sigterm", 14), ("sigterm", 22), ("run", 0)],
              "killed": [("sigkill", 12), ("sigkill", 24), ("run", 0)],
              "killed_before_copy": [("sigkill_before_copy", 16), ("run", 0)]}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    decays = {name: [] for name in chains}
    for index in range(3):  # the chains side by side, leg by leg
        legs = {name: subprocess.Popen([sys.executable, "-c", _LEG, str(tmp_path / name), *map(str, chain[index])],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                for name, chain in chains.items() if index < len(chain)}
        for name, process in legs.items():
            out, err = process.communicate(timeout=600)
            killed = chains[name][index][0].startswith("sigkill")
            assert process.returncode == (-9 if killed else 0), err[-3000:]
            if not killed:
                decays[name] += json.loads(out.strip().splitlines()[-1])
    assert decays == {"straight": [16], "stopped": [16], "killed": [], "killed_before_copy": []}  # 16: before a kill
    straight = _run_directory_state(tmp_path / "straight")
    assert straight["checkpoints"] == ["ckpt-16", "ckpt-20", "ckpt-24"]
    assert straight["averaged_tag"]["steps"] == [16, 20, 24] and straight["report"]["best_step"] == 20
    for name in ("stopped", "killed", "killed_before_copy"):
        resumed = _run_directory_state(tmp_path / name)
        for key in ("checkpoints", "averaged_tag", "best", "report"):
            assert resumed[key] == straight[key], (name, key)
        for part in ("latest", "around_best", "averaged"):
            expected, got = straight[part], resumed[part]
            if part == "latest":
                assert got[0] == expected[0]
                expected, got = expected[1], got[1]
            assert sorted(got) == sorted(expected), (name, part)
            for key in expected:
                if isinstance(expected[key], dict):  # around_best: a checkpoint per step
                    assert sorted(got[key]) == sorted(expected[key]), (name, part, key)
                    for tensor in expected[key]:
                        np.testing.assert_array_equal(got[key][tensor], expected[key][tensor],
                                                      err_msg=f"{name} {part} {key} {tensor}")
                else:
                    np.testing.assert_array_equal(got[key], expected[key], err_msg=f"{name} {part} {key}")


def test_around_best_keeps_the_checkpoints_nearest_the_best_step_and_averages_them(tmp_path):
    model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
    model.build((None, 3))
    around = training.AroundBest(str(tmp_path / "around_best"), size=3)
    written = {}
    for step in range(100, 900, 100):
        model.set_weights([np.full(w.shape, step, "float32") for w in model.get_weights()])
        written[step] = model.get_weights()
        around.write(model, step, best_step=min(step, 300))  # best at 300, worse after
    kept = sorted(int(name.split("-")[1].split(".")[0]) for name in os.listdir(tmp_path / "around_best")
                  if name.endswith(".index"))
    assert kept == [200, 300, 400, 600, 700, 800]  # nearest the best, and the last ones
    chosen = around.chosen(best_step=300, last_step=800)
    assert [os.path.basename(path) for path in chosen] == ["ckpt-200", "ckpt-300", "ckpt-400"]
    assert [os.path.basename(path) for path in around.chosen(best_step=300, last_step=350)] == [
        "ckpt-200", "ckpt-300"]
    checkpoint_averaging.average_into(model, chosen)
    for value in model.get_weights():
        np.testing.assert_array_equal(value, np.full(value.shape, 300.0))
