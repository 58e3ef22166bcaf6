"""The registry of quoted figures that tests/test_figures.py checks: each `Figure` is a text with
``{name}`` fields, the page that quotes it, and where each field's value lives (a results file
under benchmarks/results/ and a dotted key into its JSON, or a `Computed` of such keys).

The figures are grouped by page and, within a page, by section, in the page's order.
"""

import statistics
from typing import Callable, NamedTuple, Optional


class Key(NamedTuple):
    """A value of a results file: the file, a dotted key (list indices are numbers), and an
    optional conversion of the JSON value to what the document writes."""
    results: str
    path: str
    convert: Optional[Callable] = None


class Computed(NamedTuple):
    """A value computed from several keys' values (a ratio, a difference, a range)."""
    keys: tuple
    combine: Callable


def ratio(numerator, denominator):
    return Computed((numerator, denominator), lambda a, b: a / b)


def difference(minuend, subtrahend):
    return Computed((minuend, subtrahend), lambda a, b: a - b)


def span(spec, *keys):
    """``low-high`` of the keys' values, each formatted by ``spec``."""
    return Computed(keys, lambda *values: f"{min(values):{spec}}-{max(values):{spec}}")


def median(values):
    return sorted(values)[len(values) // 2]


def wall_time(seconds):
    """Seconds as the training report writes them (``HH:MM:SS``)."""
    seconds = int(seconds)
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def day(timestamp):
    return timestamp[:10]


def words(values):
    return " ".join(values)


def _keys(results, training, evaluation, tokens="target_tokens_per_second", bleu="bleu",
          brevity_penalty="brevity_penalty"):
    """A run's keys in a results file: ``training`` and ``evaluation`` are the dotted prefixes of
    its training report's and its scores' fields; the other arguments, the names that differ
    between the files' layouts."""
    return {
        "updates": Key(results, f"{training}.updates"),
        "epochs": Key(results, f"{training}.epochs"),
        "wall_time": Key(results, f"{training}.wall_time_seconds", wall_time),
        "best_dev_nll": Key(results, f"{training}.best_dev_nll"),
        "best_step": Key(results, f"{training}.best_step"),
        "tokens_per_second": Key(results, f"{training}.{tokens}"),
        "bleu": Key(results, f"{evaluation}.{bleu}"),
        "brevity_penalty": Key(results, f"{evaluation}.{brevity_penalty}"),
        "aer": Key(results, f"{evaluation}.aer"),
        "date": Key(results, "date", day),
        "cpu": Key(results, "machine.name"),
        "cpu_flags": Key(results, "machine.cpu_flags", words),
        "results_file": Key(results, ""),
    }


def _run(results, row):
    """The keys of one row of a results file that lists runs."""
    return _keys(results, row, row, bleu="test_bleu", brevity_penalty="test_bleu_brevity_penalty")


def _main_command(results):
    """The keys of a results file of the main command (as main_command_amd_epyc.json lays out
    `bahdanau-train`'s report and `bahdanau-evaluate`'s scores)."""
    return _keys(results, "training", "evaluation")


def _summary_row(results, row):
    """The keys of one row of `benchmarks/twelve_minute_runs.py --summarize`'s results file."""
    return _keys(results, row, row, tokens="tokens_per_s")


#: The first quiet run of the main command of the conditional GRU default, untied (12 minutes),
#: written by `benchmarks/twelve_minute_runs.py --summarize` (benchmarks/README.md's table). A
#: results file laid out as main_command_amd_epyc.json is read with `_main_command` instead.
HEADLINE = _summary_row("main_command_cgru_amd_epyc.json", "rows.0")
#: the same command at another seed, and at the paper's decoder cell, beside it
SECOND_SEED = _summary_row("main_command_cgru_amd_epyc.json", "rows.1")
PAPER_CELL = _summary_row("main_command_cgru_amd_epyc.json", "rows.3")
#: the README's Result: the main command of the default as it ships (Adam 3e-3, the budget rule,
#: the gradient's norm bounded by 0.5), and the previous release's run just before it
_RESULT = "main_command_previous_release_amd_epyc.json"
SHIPPING = _summary_row(_RESULT, "rows.1")
PREVIOUS_RELEASE = _summary_row(_RESULT, "rows.0")
#: the Result over the previous release: the updates' ratio and the test BLEU gained; the share of
#: its wall time spent compiling
OVER_PREVIOUS_RELEASE = {"ratio": ratio(SHIPPING["updates"], PREVIOUS_RELEASE["updates"]),
                         "gain": difference(SHIPPING["bleu"], PREVIOUS_RELEASE["bleu"])}
RESULT_COMPILING = ratio(Key(_RESULT, "rows.1.seconds.compiling"), Key(_RESULT, "rows.1.wall_time_seconds"))
#: the main command of the default at Adam 5e-3 (its first plan a minute in), beside the same run
#: of the previous release
AT_5E3 = _summary_row("main_command_budget_rule_amd_epyc.json", "rows.1")
AT_5E3_PREVIOUS = _summary_row("main_command_budget_rule_amd_epyc.json", "rows.0")
#: the same command a day later, on this release's code
RERUN = _summary_row("main_command_cgru_rerun_amd_epyc.json", "rows.0")
#: the main command when the budget schedule came in (the paper's cell, before its backward pass)
BUDGET = _summary_row("main_command_budget_amd_epyc.json", "rows.0")

#: the default preset's train step, the conditional GRU's backward pass written out (after) and
#: differentiated automatically (before), the first alternation of each
CGRU_BACKWARD = {name: Key("train_step_cgru_backward_amd_epyc.json", f"alternations.{row}.{field}")
                 for name, row, field in (("after", 0, "step_ms"), ("after_cpu", 0, "step_cpu_ms"),
                                          ("before", 1, "step_ms"), ("before_cpu", 1, "step_cpu_ms"))}

_SHIPPED_FILE = "pretrained_bible-en-es-small.json"
_SHIPPED_SCORES = "evaluation.models.0"
#: The shipped model `bible-en-es-small`, built and scored by scripts/build_pretrained_model.py.
SHIPPED = {
    "updates": Key(_SHIPPED_FILE, "recipe.max_steps"),
    "seed": Key(_SHIPPED_FILE, "recipe.seed"),
    "bleu": Key(_SHIPPED_FILE, f"{_SHIPPED_SCORES}.bleu.score"),
    "brevity_penalty": Key(_SHIPPED_FILE, f"{_SHIPPED_SCORES}.bleu.brevity_penalty"),
    "chrf": Key(_SHIPPED_FILE, f"{_SHIPPED_SCORES}.chrf.score"),
    "aer": Key(_SHIPPED_FILE, f"{_SHIPPED_SCORES}.alignment.aer"),
    "sentences": Key(_SHIPPED_FILE, "evaluation.num_sentences"),
    "cpu": Key(_SHIPPED_FILE, "cpu"),
    "date": Key(_SHIPPED_FILE, "recipe.date"),
    "rule": Key(_SHIPPED_FILE, f"{_SHIPPED_SCORES}.settings.alignment_rule.rule"),
}
#: the shipped model's card, beside its weights
SHIPPED_CARD = "bahdanau_tf/pretrained/bible-en-es-small/README.md"


class Figure(NamedTuple):
    document: str
    text: str
    keys: dict


def _one_rise(results, row, point):
    """The keys of a curve run's one rise of its dev NLL: its worst rise, the update and dev NLL of
    evaluation ``point``, the best before it and the dev NLL at the next evaluation."""
    curve = f"rows.{row}.dev_curve"
    return {"rise": _run_of_curve(results, row)["rise"], "step": Key(results, f"{curve}.{point}.0"),
            "nll": Key(results, f"{curve}.{point}.1"), "best": Key(results, f"{curve}.{point - 1}.1"),
            "next": Key(results, f"{curve}.{point + 1}.1")}


def _fields(results, prefix="", convert=None, **fields):
    """``{name: Key}`` of fields under one prefix of a results file (``name=field``)."""
    return {name: Key(results, f"{prefix}.{field}" if prefix else field, convert)
            for name, field in fields.items()}


def _percent(share):
    return share * 100


def _worst_rise(curve, after_step):
    """The largest share by which a dev NLL of ``curve`` stood above the running best before it,
    over the evaluations after update ``after_step`` (as benchmarks/twelve_minute_runs.py writes
    ``worst_rise_after_first_epoch``)."""
    best, worst = float("inf"), 0.0
    for step, nll in curve:
        if step > after_step and best < float("inf"):
            worst = max(worst, nll / best - 1.0)
        best = min(best, nll)
    return worst


def _profile_ms(*parts):
    """The ms per step of the named parts of train_step_profile.py's ``parts`` rows (part, phase,
    inside a loop, ms per step, ...); no names: all the compiled ops."""
    return lambda rows: sum(row[3] for row in rows if not parts or row[0] in parts)


def _by_length(buckets):
    """BLEU by source length as the tables write it: ``41.3 / 27.7 / ...``."""
    return " / ".join(f"{bucket['bleu']:.1f}" for bucket in buckets)


#: the embedded corpus's training pairs (bahdanau_tf/corpora/README.md): a fact of the data,
#: not a measurement; the pairs that a length cap keeps are dataset_shapes.json's
TRAIN_PAIRS = 27_989

_ONE_CORE = "rnnsearch_rnnencdec_one_core_amd_epyc.json"
_JITTED = "main_command_cgru_amd_epyc.json"
_LENGTH_PENALTY = "length_penalty_dev_amd_epyc.json"
_RECIPE = "recipe_runs_amd_epyc.json"
_THROUGHPUT = "train_throughput_amd_epyc.json"
_XEON_THROUGHPUT = "train_throughput.json"
_RECURRENCE = "train_step_recurrence_backward_amd_epyc.json"
_CONTEXT = "train_step_context_products_amd_epyc.json"
_PROFILE = "train_step_profile_avx512_named_backward.json"
_FLAGS = "train_step_xla_cpu_flags_amd_epyc.json"
_DECODE_XLA = "decode_throughput_amd_epyc.json"
_BACKENDS = "backend_agreement_three_backends_amd_epyc.json"
_STEP = "decode_step_sapphire_rapids.json"
_FUSED = "fused_matmuls.json"
_CANDIDATES_5K, _CANDIDATES_30K = "candidate_lists_5k.json", "candidate_lists_30k.json"
_RECALL = "candidate_recall.json"
_INPUT, _LONG_LINE = "translate_input.json", "translate_input_long_line.json"
_SERVING = "serving_latency_sapphire_rapids.json"
_STAGES = "alignment_cgru_wider_ensembles_amd_epyc.json"
_HEAD = "alignment_cgru_head_amd_epyc.json"
_HEAD_STEP = "alignment_head_step_amd_epyc.json"
_BOTH = "alignment_both_directions_amd_epyc.json"
_GUIDED = "alignment_twelve_minute_amd_epyc.json"


_FIXED = "fixed_updates_1400_amd_epyc.json"


def _fixed(row, field):
    """A field of one run at a fixed 1,400 updates (0 untied, 1 vocabulary 3,000, 2 the rule chosen
    on dev, 3 tied, 4 batch 128)."""
    return Key(_FIXED, f"rows.{row}.{field}")


_CURVE = "budget_curve_one_core_amd_epyc.json"
_RULE_STEP = "train_step_budget_rule_amd_epyc.json"
_DROPOUT_STEP = "train_step_dropout_amd_epyc.json"
_FIXED_6000 = "fixed_updates_6000_amd_epyc.json"
_DROPOUT_6000 = "fixed_updates_6000_dropout_amd_epyc.json"
_SEEDS_6000 = "fixed_updates_6000_seeds_amd_epyc.json"
#: seed 42 evaluated every 50 updates on another CPU, at clipnorm 1 and 0.5; the evaluation of its one rise
_RISES_42, _RISES_42_POINT = "dev_rises_seed42_xeon_amx.json", 55
#: the mean test BLEU of the release before and of the default over the seeds run with both (1234, 7)
_SEEDS_6000_BEFORE = Computed((Key(_FIXED_6000, "rows.0.bleu"), Key(_SEEDS_6000, "rows.3.bleu")),
                              lambda a, b: (a + b) / 2)
_SEEDS_6000_DEFAULT = Computed((Key(_SEEDS_6000, "rows.0.bleu"), Key(_SEEDS_6000, "rows.1.bleu")),
                               lambda a, b: (a + b) / 2)
#: seeds 1234 and 7 at a fixed 6,000 updates with the gradient's norm bounded by 0.5, on the Intel
#: Xeon with AMX
_CLIP_6000 = "fixed_updates_6000_clipnorm_xeon_amx.json"
#: seed 42's two runs there (0: clipnorm 1, 1: 0.5), evaluated every 50 updates, read at every 200th
_RISE_42_EVERY_200 = {row: Computed((Key(_RISES_42, f"rows.{row}.dev_curve"), Key(_RISES_42, f"rows.{row}.updates"),
                                     Key(_RISES_42, f"rows.{row}.epochs")),
                                    lambda curve, updates, epochs: 100 * _worst_rise(
                                        [point for point in curve if point[0] % 200 == 0], updates / epochs))
                      for row in (0, 1)}
_CLIP_6000_BLEU = (Key(_CLIP_6000, "rows.0.bleu"), Key(_CLIP_6000, "rows.1.bleu"), Key(_RISES_42, "rows.1.bleu"))
#: the main command at clipnorm 0.5 (row 0) and 1 (row 1) on the Intel Xeon with AMX
_CLIP_MAIN = "main_command_clipnorm_xeon_amx.json"
_RELEASE_XEON = "main_command_previous_release_xeon_amx.json"
#: the default's train step (row 0) against the previous release's (row 1) on the same Xeon
_STEP_XEON = "train_step_previous_release_xeon_amx.json"
#: its rows: the previous release at seeds 1234, 1, 2 (0, 2, 5), the default at the same seeds (1, 3, 6),
#: and at Adam 5e-3 (4)
_RELEASE_XEON_OLD, _RELEASE_XEON_NEW, _RELEASE_XEON_DEFAULTS = (0, 2, 5), (1, 3, 6), (1, 3, 4, 6)
#: the worst rise of the three seeds at clipnorm 0.5 after the first epoch, in percent
_CLIP_6000_WORST = Computed((Key(_CLIP_6000, "rows.0.worst_rise_after_first_epoch"),
                             Key(_CLIP_6000, "rows.1.worst_rise_after_first_epoch"), _RISE_42_EVERY_200[1]),
                            lambda a, b, c: max(100 * a, 100 * b, c))
_FIXED_3400 = "fixed_updates_3400_amd_epyc.json"
_FIXED_1620 = "fixed_updates_1620_amd_epyc.json"
#: the default's floor (`bahdanau_tf.presets.UPDATES_FLOOR`): the fewest updates of the curve's
#: runs that scored over 20 test BLEU, rounded down to 50
FLOOR = Key(_CURVE, "rows", lambda rows: min(row["updates"] for row in rows if row["bleu"] > 20) // 50 * 50)


_BOTH_CURVE = "budget_curve_amd_epyc.json"


def _over_release_xeon(rows, field, combine):
    """`combine` (min, max, a mean) of one field of those rows of the previous release's
    comparison on the Xeon."""
    return Computed(tuple(Key(_RELEASE_XEON, f"rows.{row}.{field}") for row in rows), lambda *values: combine(values))


def _compiling_shares(pick):
    """`pick` (min or max) of the shares of the wall time the default's runs in the previous
    release's comparison on the Xeon spent compiling, in percent."""
    keys = tuple(Key(_RELEASE_XEON, f"rows.{row}.{field}") for row in _RELEASE_XEON_DEFAULTS
                 for field in ("seconds.compiling", "wall_time_seconds"))
    return Computed(keys, lambda *values: 100 * pick(values[i] / values[i + 1] for i in range(0, len(values), 2)))


def _run_of_curve(results, row):
    """One run of a budget curve on both cores (`benchmarks/budget_curve.py`'s rows): its
    updates, epochs, dropout, dev NLL (best, at the end, at update 400), worst rise, furthest
    plan (percent off the epochs made) and test BLEU."""
    return dict(_fields(results, f"rows.{row}", updates="updates", epochs="epochs", best="best_dev_nll",
                        end="dev_nll_at_end", bleu="bleu", bp="brevity_penalty", dropout="regularization.dropout",
                        at400="dev_curve.1.1"),
                rise=Key(results, f"rows.{row}.worst_rise_after_first_epoch", _percent),
                off=Computed(tuple(Key(results, f"rows.{row}.{field}") for field in (
                    "regularization.fewest_planned_epochs", "regularization.most_planned_epochs", "epochs")),
                    lambda fewest, most, epochs: 100 * max(abs(fewest / epochs - 1), abs(most / epochs - 1))))


def _both_curve(row):
    """One run of the curve at Adam 5e-3 (0-4: 6, 12, 12 at seed 7, 24, 48 minutes)."""
    return _run_of_curve(_BOTH_CURVE, row)


_ONSET = "attention_onset_amd_epyc.json"


def _onset(row):
    """The dev NLL at update 400 of one run of the attention's onset (0-7: Adam 5e-3 at seeds 1-7
    and 1234; 8: seed 1 without dropout; 9-16: the default, Adam 3e-3, at the same seeds)."""
    return Key(_ONSET, f"rows.{row}.dev_nll_at_stop")


_CURVE_3E3 = "budget_curve_adam3e-3_amd_epyc.json"
_CURVE_SMOOTHED = "budget_curve_label_smoothing_amd_epyc.json"
_CURVE_DEFAULT = "budget_curve_default_amd_epyc.json"
#: the default as it ships, the gradient's norm bounded by 0.5 (0-3: 6, 12, 24, 48 minutes)
_CURVE_CLIPNORM = "budget_curve_clipnorm_amd_epyc.json"


_CLIPNORM_RUNS = [_run_of_curve(_CURVE_CLIPNORM, row) for row in range(4)]


def _clipnorm_worst(field):
    """The largest of one field (``rise``, ``off``) over the runs of the curve at the bound of 0.5."""
    return Computed(tuple(run[field] for run in _CLIPNORM_RUNS), lambda *values: max(values))


def _curve_3e3(row):
    """One run of the default's curve at Adam 3e-3 (0-3: 6, 12, 12 at seed 7, 24 minutes)."""
    return _run_of_curve(_CURVE_3E3, row)


def _curve(row):
    """The fields of one run of the budget curve (0-5: 3, 6, 12, 12 at seed 7, 24, 48 minutes)."""
    return _fields(_CURVE, f"rows.{row}", updates="updates", epochs="epochs", best="best_dev_nll",
                   end="dev_nll_at_end", bleu="bleu", bp="brevity_penalty")


def _flag_ms(row):
    return Key(_FLAGS, f"rows.{row}.step_ms")


def _stage_row(row):
    """One row of alignment.md's stage table: AER, precision, recall and the two views."""
    return dict(_fields(_STAGES, f"rows.{row}", aer="aer", precision="precision", recall="recall"),
                punctuation=Key(_STAGES, f"rows.{row}.views.no-punctuation"),
                content=Key(_STAGES, f"rows.{row}.views.content-words"))


def _stage_text(label, bold):
    """A row of that table from its label's end on; the best rows' AERs in bold."""
    b = "**" if bold else ""
    return (f"{label} | {b}{{aer:.3f}}{b} | {{precision:.3f}} | {{recall:.3f}} | {b}{{punctuation:.3f}}{b} | "
            f"{b}{{content:.3f}}{b} |")

_SERVED = "runs.{round}.{loader}.batches.{batch}.median_ms"

#: benchmarks/README.md, beyond the tables' rows bound above, in the page's order
BENCHMARKS = [
    # the main command: what the table's rows say together
    Figure("benchmarks/README.md", "The three runs of the default, {low:.2f} to {high:.2f}, are the spread",
           {"low": RERUN["bleu"], "high": HEADLINE["bleu"]}),
    Figure("benchmarks/README.md", "buys {more:.0%} more updates than automatic differentiation at the same seed, "
                                   "and {bleu:.1f} BLEU",
           {"more": Computed((HEADLINE["updates"], Key(_JITTED, "rows.2.updates")), lambda a, b: a / b - 1),
            "bleu": difference(HEADLINE["bleu"], Key(_JITTED, "rows.2.bleu"))}),
    Figure("benchmarks/README.md", "ends {gain} BLEU higher",
           {"gain": span(".1f", difference(SECOND_SEED["bleu"], PAPER_CELL["bleu"]),
                         difference(HEADLINE["bleu"], PAPER_CELL["bleu"]))}),
    # one core each: AER and BLEU by source length, and what they say
    *[Figure("benchmarks/README.md", f"({{brevity_penalty:.3f}}) | {aer} | {{by_length}} |",
             dict(_fields(_ONE_CORE, f"rows.{row}", brevity_penalty="brevity_penalty", aer="aer"),
                  by_length=Key(_ONE_CORE, f"rows.{row}.bleu_by_length", _by_length)))
      for row, aer in ((1, "{aer:.3f}"), (0, "{aer:.3f}"), (2, ""))],
    Figure("benchmarks/README.md", "RNNencdec makes {times:.1f}x the updates and overfits from update {best:,}; the "
                                   "conditional GRU leads the paper's cell by {lead:.1f} BLEU",
           {"times": ratio(Key(_ONE_CORE, "rows.2.updates"), Key(_ONE_CORE, "rows.0.updates")),
            "best": Key(_ONE_CORE, "rows.2.best_step"),
            "lead": difference(Key(_ONE_CORE, "rows.1.bleu"), Key(_ONE_CORE, "rows.0.bleu"))}),
    # the length penalty: the sweep's other rows and its reading
    *[Figure("benchmarks/README.md", f"{label} | " + " | ".join(
        f"{bold(alpha)}{{bleu{alpha}:.2f}}{bold(alpha)} ({{bp{alpha}:.3f}})" for alpha in range(len(rows))) + " |",
             {**{f"bleu{alpha}": Key(_LENGTH_PENALTY, f"rows.{row}.dev_bleu") for alpha, row in enumerate(rows)},
              **{f"bp{alpha}": Key(_LENGTH_PENALTY, f"rows.{row}.brevity_penalty") for alpha, row in enumerate(rows)}})
      for label, rows, bold in (
          ("pairs <= 50, 1,800 updates", (0, 1, 2, 3), lambda alpha: ""),
          ("pairs <= 50, 1,800 updates", (5, 6, 7, 8), lambda alpha: ""),
          ("this recipe, 2,000 updates)", (9, 10, 11), lambda alpha: "**" if alpha == 1 else ""))],
    Figure("benchmarks/README.md", "Alpha 1.0 beats 0.5 on every model, by {gain}",
           {"gain": span(".1f", *(difference(Key(_LENGTH_PENALTY, f"rows.{better}.dev_bleu"),
                                             Key(_LENGTH_PENALTY, f"rows.{worse}.dev_bleu"))
                                  for worse, better in ((0, 1), (5, 6), (9, 10), (12, 13))))}),
    # the recipe: the heavy regularisation's row, the conditional GRU at a constant rate
    Figure("benchmarks/recipe.md", "--average_at=best` | {updates:,} | {best_dev_nll:.3f} | {dev_nll_at_end:.3f} | "
                                   "{bleu:.2f} ({brevity_penalty:.3f}) | {aer:.3f} |",
           dict(_summary_row(_RECIPE, "rows.0"), dev_nll_at_end=Key(_RECIPE, "rows.0.dev_nll_at_end"))),
    Figure("benchmarks/recipe.md", "does not learn to attend in {updates:,} updates (AER {aer:.3f}: near-uniform",
           _summary_row(_RECIPE, "rows.3")),
    # the budget schedule's rows at 1,800 updates, the pairs a cap of 50 drops, the main command's gain
    *[Figure("benchmarks/recipe.md", f"{label} | {{updates:,}} | {{best_dev_nll:.3f}} | {{dev_nll_at_end:.3f}} | "
                                     "{bleu:.2f} ({brevity_penalty:.3f}) | {aer:.3f} |",
             dict(_summary_row("recipe_budget_runs_amd_epyc.json", f"rows.{row}"),
                  dev_nll_at_end=Key("recipe_budget_runs_amd_epyc.json", f"rows.{row}.dev_nll_at_end")))
      for label, row in (("| constant 5e-3, pairs <= 50", 0), ("| `--schedule=budget`, pairs <= 50", 1),
                         ("--learning_rate=0.01`, pairs <= 50", 2))],
    Figure("benchmarks/recipe.md", "at 50, {dropped:,} were dropped",
           {"dropped": Computed((Key("dataset_shapes.json", "pairs"),), lambda kept: TRAIN_PAIRS - kept)}),
    Figure("benchmarks/recipe.md", "`after`): +{gain:.1f} BLEU",
           {"gain": difference(BUDGET["bleu"], _run("twelve_minute_before_after_amd_epyc.json", "rows.1")["bleu"])}),
    Figure("benchmarks/recipe.md", "[main_command_amd_epyc.json](results/main_command_amd_epyc.json), {updates:,} "
                                   "updates)", _main_command("main_command_amd_epyc.json")),
    # training: the device's precision and XLA choice, capped to AVX2 and on the Xeon; the paper's size
    Figure("benchmarks/README.md", "| EPYC as AVX2 | {f32:,.0f} | {bf16:,.0f} | **{jit:,.0f}** | {bf16_jit:,.0f} | "
                                   "{ceiling} |",
           {name: Key(_THROUGHPUT, f"rows.{row}.{field}")
            for name, row, field in (("f32", 4, "target_tokens_per_s"), ("bf16", 6, "target_tokens_per_s"),
                                     ("jit", 5, "target_tokens_per_s"), ("bf16_jit", 7, "target_tokens_per_s"),
                                     ("ceiling", 5, "ceiling"))}),
    Figure("benchmarks/README.md", "mixed bfloat16 without XLA {bf16:,.0f} and {bf16_avx2:,.0f}, float32 {f32:,.0f} "
                                   "and {f32_avx2:,.0f}, **float32 + XLA {jit:,.0f} and {jit_avx2:,.0f}**",
           {name: Key(_XEON_THROUGHPUT, f"rows.{row}.target_tokens_per_s")
            for name, row in (("bf16", 0), ("bf16_avx2", 10), ("f32", 2), ("f32_avx2", 13), ("jit", 4),
                              ("jit_avx2", 12))}),
    Figure("benchmarks/README.md", "float32 {f32:,.1f} ms per step, float32 + XLA {jit:,.1f} ms",
           {name: Key("train_throughput_rnnsearch50_amd_epyc.json", f"rows.{row}.step_ms")
            for name, row in (("f32", 0), ("jit", 1))}),
    # the written-out backward pass: speed-ups, the paper's size, the context products
    Figure("benchmarks/README.md", "| {before:.1f} | {after:.1f} | **{speedup:.2f}x** |",
           dict(CGRU_BACKWARD, speedup=ratio(CGRU_BACKWARD["before"], CGRU_BACKWARD["after"]))),
    *[Figure("benchmarks/README.md", f"| {label} | {{autodiff:,.1f}} | {{written:,.1f}} | {{speedup:.2f}}x |",
             {"written": Key(_RECURRENCE, f"rows.{written}.step_ms"),
              "autodiff": Key(_RECURRENCE, f"rows.{written + 1}.step_ms"),
              "speedup": ratio(Key(_RECURRENCE, f"rows.{written + 1}.step_ms"),
                               Key(_RECURRENCE, f"rows.{written}.step_ms"))})
      for label, written in (("Bible batches", 0), ("one batch of 80 x 30", 2))],
    Figure("benchmarks/README.md", "{small:.2f}x at `small` and {large:.2f}x at rnnsearch-50",
           {"small": ratio(Key(_CONTEXT, "small.rows.1.step_ms"), Key(_CONTEXT, "small.rows.0.step_ms")),
            "large": ratio(Key(_CONTEXT, "rnnsearch-50.rows.1.step_ms"),
                           Key(_CONTEXT, "rnnsearch-50.rows.0.step_ms"))}),
    # where a step's time goes
    Figure("benchmarks/README.md", "{step:.1f} ms per step unprofiled", {"step": Key(_PROFILE, "variants.0.step_ms")}),
    Figure("benchmarks/README.md", "of {total:.1f} ms of compiled ops per step, the matmuls and element-wise work "
                                   "outside the loops that belong to no named layer (the vocabulary projection and "
                                   "its gradients, the readout, C h_j and U_a h_j) {other:.1f} ms ({other_share:.0%}), "
                                   "the encoder {encoder:.1f} ms ({encoder_share:.0%}), the decoder's loops "
                                   "{loops:.1f} ms ({loops_share:.0%}), the loss {loss:.1f} ms, the update "
                                   "{update:.1f} ms. The vocabulary projection runs on every target position, padding "
                                   "included ({real:,.0f} real of {padded:,.0f} per batch)",
           dict({name: Key(_PROFILE, "variants.0.parts", _profile_ms(*parts)) for name, parts in (
               ("total", ()), ("other", ("other",)), ("encoder", ("encoder",)),
               ("loops", ("decoder loop (attention + GRU)",)), ("loss", ("loss (softmax cross-entropy)",)),
               ("update", ("optimizer + clipping",)))},
               **{f"{name}_share": ratio(Key(_PROFILE, "variants.0.parts", _profile_ms(*parts)),
                                         Key(_PROFILE, "variants.0.parts", _profile_ms()))
                  for name, parts in (("other", ("other",)), ("encoder", ("encoder",)),
                                      ("loops", ("decoder loop (attention + GRU)",)))},
               real=Key(_PROFILE, "variants.0.real_target_tokens"),
               padded=Key(_PROFILE, "variants.0.padded_target_tokens"))),
    # XLA:CPU's own flags (rows 0 and 10 without a flag, 2 and 9 with the vector width)
    Figure("benchmarks/README.md", "`--xla_cpu_prefer_vector_width=512` {wide:.1f} and {wide_again:.1f} ms (about "
                                   "{gain:.1%}, the size of the difference between the flag-less runs) for {compile} "
                                   "s more compilation of the 6 shapes; the oneDNN, XNNPACK, XNN graph fusion and fast "
                                   "min/max flags {others} ms; `--xla_cpu_use_thunk_runtime=false` {thunk:.1f} ms; "
                                   "`--xla_cpu_enable_concurrency_optimized_scheduler=true` {scheduler:.1f} ms",
           {"wide": _flag_ms(2), "wide_again": _flag_ms(9),
            "gain": Computed(tuple(_flag_ms(row) for row in (0, 10, 2, 9)), lambda a, b, c, d: 1 - (c + d) / (a + b)),
            "compile": Computed(tuple(Key(_FLAGS, f"rows.{row}.first_pass_s") for row in (0, 10, 2, 9)),
                                lambda a, b, c, d: f"{min(c, d) - max(a, b):.0f}-{max(c, d) - min(a, b):.0f}"),
            "others": span(".1f", *(_flag_ms(row) for row in (3, 4, 5, 7, 8))),
            "thunk": _flag_ms(1), "scheduler": _flag_ms(6)}),
    # forward + backward alone, batch shapes, sampled softmax on the Xeon
    Figure("benchmarks/README.md", "eager {eager:,.0f}, `tf.function` {function:,.0f}, XLA {xla:,.0f} (loaded)",
           {name: Key("forward_backward.json", f"results.small.{name}.target_tokens_per_second")
            for name in ("eager", "function", "xla")}),
    Figure("benchmarks/README.md", "at batch 64, {batches} batches, has {shapes} distinct shapes (XLA compilations), "
                                   "{shapes8} with `pad_to_multiple=8` ({padding8:.1%} target padding instead of "
                                   "{padding:.1%}; the trainer's choice under XLA), {shapes16} with 16 ({padding16:.1%})",
           dict(_fields("dataset_shapes.json", "rows.0", batches="batches", shapes="shapes", padding="target_padding"),
                **_fields("dataset_shapes.json", "rows.1", shapes8="shapes", padding8="target_padding"),
                **_fields("dataset_shapes.json", "rows.2", shapes16="shapes", padding16="target_padding"))),
    Figure("benchmarks/README.md", "{full0:.3f} / {sampled0:.3f} s per update at 30,000 target words "
                                   "(**{speedup0:.2f}x**), {full1:.3f} / {sampled1:.3f} s at 60,000 (**{speedup1:.2f}x**), "
                                   "{full2:.3f} / {sampled2:.3f} s at 100,000 (**{speedup2:.2f}x**)",
           {f"{name}{row}": Key("sampled_softmax_sapphire_rapids.json", f"results.{row}.{field}")
            for row in range(3) for name, field in (("full", "best_seconds_per_step.full"),
                                                    ("sampled", "best_seconds_per_step.sampled"),
                                                    ("speedup", "speedup"))}),
    Figure("benchmarks/README.md", "{full:.3f} / {sampled:.3f} s (**",
           _fields("sampled_softmax_amd_epyc.json", "results.0", full="best_seconds_per_step.full",
                   sampled="best_seconds_per_step.sampled")),
    # translating: XLA against none, the backends, one decoder step, fused matmuls
    Figure("benchmarks/README.md", "batch 64 greedy {greedy:.1f} against {greedy_plain:.1f} sentences/s, beam 5 "
                                   "{beam:.1f} against {beam_plain:.1f}; batch 1 median {greedy1:.1f} against "
                                   "{greedy1_plain:.1f} ms greedy, {beam1:.1f} against {beam1_plain:.1f} ms at beam 5",
           {name: Key(_DECODE_XLA, f"rows.{row}.{field}") for name, row, field in (
               ("greedy", 9, "sentences_per_s"), ("greedy_plain", 8, "sentences_per_s"),
               ("beam", 11, "sentences_per_s"), ("beam_plain", 10, "sentences_per_s"),
               ("greedy1", 13, "median_ms"), ("greedy1_plain", 12, "median_ms"),
               ("beam1", 15, "median_ms"), ("beam1_plain", 14, "median_ms"))}),
    Figure("benchmarks/README.md", "the model shipped before (`small`) on all {sentences:,} test verses, at beam 5 and greedy: "
                                   "{identical:,} of {sentences:,} translations on JAX (`jax.jit`) and on PyTorch "
                                   "(eager) identical to TensorFlow's (XLA), scores within {jax:.1e} (JAX) and "
                                   "{torch:.1e} (PyTorch)",
           {"sentences": Key(_BACKENDS, "beams.5.jax.sentences"),
            "identical": Computed(tuple(Key(_BACKENDS, f"beams.{beam}.{backend}.identical")
                                        for beam in (5, 1) for backend in ("jax", "torch")), min),
            **{backend: Computed(tuple(Key(_BACKENDS, f"beams.{beam}.{backend}.max_score_difference_identical")
                                       for beam in (5, 1)), max) for backend in ("jax", "torch")}}),
    *[Figure("benchmarks/README.md", f"| {label} | {{network:.2f}} / {{search:.2f}} | {{share:.0f}}% | "
                                     "{network_plain:.2f} / {search_plain:.2f} | {share_plain:.0f}% |",
             dict(_fields(_STEP, f"step_rows.{row}", network="network_ms", search="search_ms", share="search_share_pct"),
                  **_fields(_STEP, f"step_rows.{row + 4}", network_plain="network_ms", search_plain="search_ms",
                            share_plain="search_share_pct")))
      for row, label in enumerate(("80 (16 x beam 5)", "320 (64 x beam 5)", "64 (greedy)", "5 (1 x beam 5)"))],
    Figure("benchmarks/README.md", "is mostly the `TopK` custom calls ({topk:.0f}), XLA's reductions of the "
                                   "log-normaliser ({reductions:.0f}) and its exp ({exp:.0f})",
           _fields("decode_step_profile_sapphire_rapids.json", "profile.1.ops",
                   topk="0.extra_us", reductions="1.extra_us", exp="2.extra_us")),
    Figure("benchmarks/README.md", "320 rows: under XLA " + ", ".join(
        f"{{separate_{row}:.3f}} / {{fused_{row}:.3f}}" for row in range(3)) + "; without XLA " + ", ".join(
        f"{{separate_{row}:.3f}} / {{fused_{row}:.3f}}" for row in range(3, 6)) + ".",
           {f"{kind}_{row}": Key(_FUSED, f"rows.{row}.{kind}_ms") for row in range(6) for kind in ("separate", "fused")}),
    Figure("benchmarks/README.md", "Fusing saves {saving} of these matmuls' time under XLA",
           {"saving": Computed(tuple(Key(_FUSED, f"rows.{row}.fused_over_separate") for row in range(3)),
                               lambda *kept: f"{(1 - max(kept)) * 100:.0f}-{(1 - min(kept)) * 100:.0f}%")}),
    # candidate lists and their recall
    *[Figure("benchmarks/README.md", f"| {{vocabulary:,}} | {{mean_list:,.0f}} | {{full:.1f}} / {{lists:.1f}} | "
                                     f"{bold}{{speedup:.2f}}x{bold} | {{bleu_full:.2f}} / {{bleu_lists:.2f}} | "
                                     "{identical:.1%} |",
             _fields(results, vocabulary="target_vocabulary", mean_list="mean_padded_candidate_list",
                     full="sentences_per_second.full_softmax", lists="sentences_per_second.candidate_lists",
                     speedup="speedup", bleu_full="bleu.full_softmax", bleu_lists="bleu.candidate_lists",
                     identical="identical_share"))
      for results, bold in ((_CANDIDATES_5K, ""), (_CANDIDATES_30K, "**"))],
    Figure("benchmarks/README.md", "on {sentences:,} test verses, 2,000 frequent pieces plus a sentence's lexicon "
                                   "entries give {ids:,.0f} ids and hold {recall:.1%} of the reference tokens (per "
                                   "{group} verses: {group_ids:,.0f} ids, {group_recall:.1%}); with 500 frequent "
                                   "pieces {ids500:,.0f} ids and {recall500:.1%}",
           dict(_fields(_RECALL, sentences="sentences", group="group"),
                **_fields(_RECALL, "rows.0", ids="sentence_list", recall="sentence_recall", group_ids="group_list",
                          group_recall="group_recall"),
                **_fields(_RECALL, "rows.2", ids500="sentence_list", recall500="sentence_recall"))),
    # interactive input, long lines
    Figure("benchmarks/README.md", "{lines:,} verses read as `bahdanau-translate` reads them, the consumer spending "
                                   "{ms:.0f} ms per line, median of {rounds} rounds: a file and a fast pipe (`cat`) give "
                                   "one chunk of {lines:,} lines with line-by-line answering on or off ({seconds} s)",
           dict(_fields(_INPUT, lines="lines", ms="ms_per_line", rounds="rounds"),
                seconds=span(".2f", *(Key(_INPUT, f"rows.{row}.seconds", median) for row in range(4))))),
    Figure("benchmarks/README.md", "five chunks of one line ({seconds:.2f} s)",
           {"seconds": Key(_INPUT, "rows.4.seconds", median)}),
    Figure("benchmarks/README.md", "one line of 8 MB takes {chunks8:.3f} CPU seconds (Python's file iteration "
                                   "{file8:.3f}), one of 32 MB {chunks32:.3f} ({file32:.3f})",
           _fields(_LONG_LINE, "rows", median, chunks8="0.cpu_seconds", file8="1.cpu_seconds",
                   chunks32="2.cpu_seconds", file32="3.cpu_seconds")),
    # serving: the `new` rounds (runs 1 and 3)
    Figure("benchmarks/README.md", "the export is {size:.1f} MB; through the model server's session bundle it loads "
                                   "in {load:.2f} s and answers a batch of 64 in a median **{b64:.1f} / {b64_2:.1f} "
                                   "ms**, one sentence in **{b1:.1f} / {b1_2:.1f} ms** (two rounds); "
                                   "`tf.saved_model.load` loads in {load_saved:.2f} s and answers in {saved64:.1f} / "
                                   "{saved64_2:.1f} and {saved1:.1f} / {saved1_2:.1f} ms",
           {"size": Key(_SERVING, "runs.1.size_bytes", lambda size: size / 1e6),
            "load": Key(_SERVING, "runs.1.session_bundle.load_seconds"),
            "load_saved": Key(_SERVING, "runs.1.saved_model_load.load_seconds"),
            **{f"{name}{suffix}": Key(_SERVING, _SERVED.format(round=run, loader=loader, batch=batch))
               for suffix, run in (("", 1), ("_2", 3))
               for name, loader, batch in (("b64", "session_bundle", 64), ("b1", "session_bundle", 1),
                                           ("saved64", "saved_model_load", 64), ("saved1", "saved_model_load", 1))}}),
    Figure("benchmarks/README.md", "Resident memory over {calls} calls of mixed and bad input: {start:,.0f}, "
                                   "{half:,.0f}, {end:,.0f} MiB at start, half-way and end",
           _fields(_SERVING, "runs.1.rss", calls="calls", start="start_mib", half="half_mib", end="end_mib")),
    # alignment, in short (the stage table of alignment.md)
    Figure("benchmarks/README.md", "(chosen on the {dev} dev verses, scored on the {test:,} test verses)",
           _fields(_STAGES, dev="dev_verses_with_gold", test="test_verses_with_gold")),
    Figure("benchmarks/README.md", "(`pieces`) scores AER {default:.3f}; the best system, an alignment head trained on "
                                   "eflomal's links with both directions' heads averaged, {best:.3f}, against "
                                   "eflomal's {eflomal:.3f}",
           {name: Key(_STAGES, f"rows.{row}.aer") for name, row in (("default", 0), ("best", 40), ("eflomal", 43))}),
    # scale
    Figure("benchmarks/README.md", "{small:,} pairs {small_rss:,} MiB, {middle:,} {middle_rss:,} MiB, {large:,} "
                                   "{large_rss:,} MiB: flat",
           {name: Key("corpus_scale.json", f"rows.{row}.{field}")
            for row, size in enumerate(("small", "middle", "large"))
            for name, field in ((size, "pairs"), (f"{size}_rss", "peak_rss_mib"))}),
    Figure("benchmarks/README.md", "`bahdanau-translate` without XLA peaks at {translate:,} MiB for {lines:,} lines "
                                   "and {translate_more:,} MiB for {lines_more:,}; `bahdanau-evaluate` (XLA) at "
                                   "{evaluate:,} and {evaluate_more:,} MiB for {lines:,} and {lines_more:,} pairs",
           dict(_fields("corpus_scale_streaming.json", "translate_rows", translate="0.peak_rss_mib",
                        translate_more="1.peak_rss_mib", lines="0.lines", lines_more="1.lines"),
                **_fields("corpus_scale_streaming.json", "evaluate_rows", evaluate="0.peak_rss_mib",
                          evaluate_more="1.peak_rss_mib"))),
    Figure("benchmarks/README.md", "{rss:,} MiB peak against {rss_small:,} MiB for {lines_small:,} lines, "
                                   "{seconds:,.0f} s against {seconds_small:,.0f} s",
           _fields("corpus_scale_translate_1m.json", "translate_rows", rss="1.peak_rss_mib", rss_small="0.peak_rss_mib",
                   lines_small="0.lines", seconds="1.wall_seconds", seconds_small="0.wall_seconds")),
]

#: benchmarks/alignment.md, in the page's order
ALIGNMENT = [
    # the default model, stage by stage (rows of alignment_cgru_wider_ensembles_amd_epyc.json)
    Figure("benchmarks/alignment.md", "unsupervised on the text of all {pairs:,} pairs",
           {"pairs": Key(_STAGES, "eflomal.pairs_aligned")}),
    Figure("benchmarks/alignment.md", "(`rnnsearch-cgru-small`, {updates:,} updates, test BLEU {bleu:.2f}; no stage",
           {"updates": HEADLINE["updates"], "bleu": Key(_STAGES, "test_bleu_of_the_model.bleu")}),
    Figure("benchmarks/alignment.md", "--max_steps={updates} --max_minutes=0`, test BLEU {bleu:.2f})",
           {"updates": HEADLINE["updates"], "bleu": Key(_STAGES, "test_bleu_of_the_reverse_model.bleu")}),
    *[Figure("benchmarks/alignment.md", _stage_text(label, bold), _stage_row(row))
      for label, row, bold in (
          ("| `pieces`", 0, False), ("| `pieces>0.5`", 2, False), ("transposed | `sum+mutual>0.4`", 6, False),
          ("averaged | `sum>0.4`", 9, False), ("own links | `sum>0.5`", 12, False),
          ("eflomal's links | `pieces+mutual`", 15, False), ("a head per direction, averaged | `sum>0.3`", 19, False),
          ("two heads per direction, averaged | `sum+mutual>0.2`", 26, False),
          ("(the best on dev) | `sum>0.3`", 40, True), ("| eflomal intersection |", 43, True),
          ("| eflomal grow-diag-final-and |", 44, False), ("no translation model) | `pieces+mutual`", 5, False),
          ("| diagonal baseline |", 45, False))],
    Figure("benchmarks/alignment.md", "it gains {gain:.3f} over the attention's best rule ({gain_content:.3f} on content "
                                      "words). Every attention system still misses eflomal's intersection, in every "
                                      "view; the best by {miss:.3f} on the full gold and {miss_content:.3f} on content "
                                      "words. The full gold rewards co-occurrence: the lexicon baseline, with no "
                                      "translation model, beats eflomal on it but is {lexicon:.3f} worse on content words",
           {"gain": difference(_stage_row(2)["aer"], _stage_row(15)["aer"]),
            "gain_content": difference(_stage_row(2)["content"], _stage_row(15)["content"]),
            "miss": difference(_stage_row(40)["aer"], _stage_row(43)["aer"]),
            "miss_content": difference(_stage_row(40)["content"], _stage_row(43)["content"]),
            "lexicon": difference(_stage_row(5)["content"], _stage_row(43)["content"])}),
    # the alignment head's defaults: the other snapshots, eflomal on dev, the step
    Figure("benchmarks/alignment.md", "eflomal's intersection: {eflomal:.4f} on dev",
           {"eflomal": Key(_HEAD, "head_selection_on_dev.eflomal_dev_aer.intersection")}),
    Figure("benchmarks/alignment.md", "| grow-diag-final-and links | {s500:.4f} | | | {s2000:.4f} | | | | |",
           {f"s{n}": Key(_HEAD, f"head_selection_on_dev.snapshots.cgru-gdfa-{n}.dev_aer") for n in (500, 2000)}),
    Figure("benchmarks/alignment.md", "(`--context_units=64`) | | | | {s2000:.4f} | {s3000:.4f} | **{s4000:.4f}** | | |",
           {f"s{n}": Key(_HEAD, f"head_selection_on_dev.snapshots.cgru-ctx64-{n}.dev_aer")
            for n in (2000, 3000, 4000)}),
    Figure("benchmarks/alignment.md", "grow-diag-final-and links cost {cost:.3f}",
           {"cost": difference(Key(_HEAD, "head_selection_on_dev.snapshots.cgru-gdfa-2000.dev_aer"),
                               Key(_HEAD, "head_selection_on_dev.snapshots.cgru-eflomal-2000.dev_aer"))}),
    Figure("benchmarks/alignment.md", "an update runs the head alone: {after} CPU ms per update of {batch_size} pairs "
                                      "against {before} ms with the model's forward pass inside the step",
           {"after": span(".1f", *(Key(_HEAD_STEP, f"rounds.{row}.after_cpu_ms_per_update") for row in range(3))),
            "before": span(".1f", *(Key(_HEAD_STEP, f"rounds.{row}.before_cpu_ms_per_update") for row in range(3))),
            "batch_size": Key(_HEAD_STEP, "batch_size")}),
    Figure("benchmarks/alignment.md", "{batches} batches, 3 interleaved rounds", _fields(_HEAD_STEP, batches="batches")),
    # why the paper's cell needs a head
    Figure("benchmarks/alignment.md", "On the first {dev} dev and {test} test verses with gold",
           _fields(_BOTH, dev="dev_verses_with_gold", test="test_verses_with_gold")),
    Figure("benchmarks/alignment.md", "eflomal's intersection {eflomal:.3f}. Both directions averaged chose "
                                      "`sum>0.25` ({average:.3f})",
           {"eflomal": Key(_BOTH, "rows.10.aer"), "average": Key(_BOTH, "rows.7.aer")}),
    # guided alignment
    Figure("benchmarks/alignment.md", "At the main command's budget ({updates:,} updates of `small`",
           {"updates": _run("twelve_minute_before_after_amd_epyc.json", "rows.1")["updates"]}),
    Figure("benchmarks/alignment.md", "BLEU on the {test:,} test verses with gold",
           _fields(_GUIDED, test="test_verses_with_gold")),
    Figure("benchmarks/alignment.md", "--guided_alignment_unaligned=end` | {bleu:.2f} | {pieces:.3f} | {best:.3f} (",
           {"bleu": Key(_GUIDED, "rows.9.test_bleu"), "pieces": Key(_GUIDED, "rows.9.aer"),
            "best": Key(_GUIDED, "rows.14.aer")}),
    Figure("benchmarks/alignment.md", "| eflomal intersection | | **{aer:.3f}** | |",
           {"aer": Key(_GUIDED, "rows.29.aer")}),
    Figure("benchmarks/alignment.md", "Light guidance gained {light:.1f} BLEU but no AER; training unlinked words "
                                      "towards `[END]` cost {end:.1f} BLEU and {aer} AER",
           {"light": difference(Key(_GUIDED, "rows.18.test_bleu"), Key(_GUIDED, "rows.0.test_bleu")),
            "end": difference(Key(_GUIDED, "rows.0.test_bleu"), Key(_GUIDED, "rows.9.test_bleu")),
            "aer": span(".2f", difference(Key(_GUIDED, "rows.9.aer"), Key(_GUIDED, "rows.0.aer")),
                        difference(Key(_GUIDED, "rows.14.aer"), Key(_GUIDED, "rows.1.aer")))}),
    Figure("benchmarks/alignment.md", "(an optional extra, {seconds:.0f} s for the Bible",
           {"seconds": Key(_GUIDED, "eflomal.seconds")}),
]


FIGURES = [
    # README.md: the Result, the sample output of the main command, the shipped model
    Figure("README.md", "the main command on a quiet 2-core {cpu}, {cpu_flags}, float32 + XLA, "
                        "{date}): **{updates:,}** updates in 12 minutes, test BLEU **{bleu:.2f}** "
                        "on the 2,051 test verses (beam 5), alignment error rate {aer:.3f} "
                        "([results file](benchmarks/results/{results_file}))", SHIPPING),
    Figure("README.md", "previous release made {updates:,} updates and scored {bleu:.2f} on the same machine "
                        "the same day", PREVIOUS_RELEASE),
    Figure("README.md", "Updates {updates:,} Epochs {epochs:.2f} Wall time {wall_time}", SHIPPING),
    Figure("README.md", "(best {best_dev_nll:.3f} there)", SHIPPING),
    Figure("README.md", "English to Spanish, {updates:,} updates, test BLEU {bleu:.2f}", SHIPPED),
    # docs/translating.md: the shipped model's card
    Figure("docs/translating.md", "({updates:,} updates, seed {seed}", SHIPPED),
    Figure("docs/translating.md", "| {sentences:,} | {bleu:.2f} ({brevity_penalty:.3f}) | "
                                  "{chrf:.2f} | {aer:.3f} |", SHIPPED),
    # the shipped model's card, beside its weights
    Figure(SHIPPED_CARD, "- type: bleu value: {bleu:.2f} name: BLEU", SHIPPED),
    Figure(SHIPPED_CARD, "- type: chrf value: {chrf:.2f} name: chrF", SHIPPED),
    Figure(SHIPPED_CARD, "A small model trained for {updates:,} updates on", SHIPPED),
    Figure(SHIPPED_CARD, "`python scripts/build_pretrained_model.py --max_steps={updates} --seed={seed}`, which runs "
                         "`bahdanau-train --preset=rnnsearch-cgru-small --direction=en-es --max_minutes=0 "
                         "--max_steps={updates} --seed={seed} --precision=float32`", SHIPPED),
    Figure(SHIPPED_CARD, "falling linearly to zero over the {updates:,} updates", SHIPPED),
    Figure(SHIPPED_CARD, "float32, on a {cpu}, {date}.", SHIPPED),
    Figure(SHIPPED_CARD, "gold alignments (`{rule}`)", SHIPPED),
    Figure(SHIPPED_CARD, "The test split's {sentences:,} verse pairs", SHIPPED),
    Figure(SHIPPED_CARD, "| {sentences:,} | {bleu:.2f} ({brevity_penalty:.3f}) | {chrf:.2f} | {aer:.3f} |", SHIPPED),
    # the quickstart notebook's shipped model
    Figure("colab/01_quickstart.ipynb", "English → Spanish, {updates:,} updates", SHIPPED),
    # CHANGELOG.md: the shipped model
    Figure("CHANGELOG.md", "and its recipe, {updates:,} updates)", SHIPPED),
    # docs/training.md: the default preset's row of the presets table
    Figure("docs/training.md", "it scored test BLEU {first:.2f} and {second:.2f} (two seeds, {first_updates:,} and "
                               "{second_updates:,} updates) against the paper's cell's {paper:.2f} ({paper_updates:,} "
                               "updates: its step is cheaper), and {one_core:.2f} against {one_core_paper:.2f} at 24 "
                               "minutes on one core",
           {"first": HEADLINE["bleu"], "first_updates": HEADLINE["updates"], "second": SECOND_SEED["bleu"],
            "second_updates": SECOND_SEED["updates"], "paper": PAPER_CELL["bleu"],
            "paper_updates": PAPER_CELL["updates"],
            "one_core": _summary_row("rnnsearch_rnnencdec_one_core_amd_epyc.json", "rows.1")["bleu"],
            "one_core_paper": _summary_row("rnnsearch_rnnencdec_one_core_amd_epyc.json", "rows.0")["bleu"]}),
    Figure("docs/training.md", "it did not learn to attend in {updates:,} updates",
           _summary_row("recipe_runs_amd_epyc.json", "rows.3")),
    Figure("benchmarks/README.md", "tied embeddings took the default from {bleu:.2f} to {tied_bleu:.2f} test BLEU",
           {"bleu": _fixed(0, "bleu"),
            "tied_bleu": _fixed(3, "bleu")}),
    # README.md and docs/training.md: the budget's floor (presets.UPDATES_FLOOR, bound to the
    # curve by tests/test_training.py) and the updates 12 minutes made on the machines measured
    Figure("README.md", "the default needs about {floor:,} to translate usefully (on one core of a 2-core EPYC "
                        "without AVX-512, 12 minutes made {updates:,}, test BLEU {bleu:.2f}; 24 minutes {updates24:,}, "
                        "{bleu24:.2f})",
           {"floor": FLOOR, "updates": _curve(2)["updates"], "bleu": _curve(2)["bleu"],
            "updates24": _curve(4)["updates"], "bleu24": _curve(4)["bleu"]}),
    Figure("docs/training.md", "The default needs about {floor:,} updates before it translates usefully", {"floor": FLOOR}),
    Figure("docs/training.md", "BLEU, rounded down to 50): {updates:,} updates scored test BLEU {bleu:.2f}, {updates24:,} "
                               "scored {bleu24:.2f} and {updates48:,} {bleu48:.2f}",
           {"updates": _curve(2)["updates"], "bleu": _curve(2)["bleu"], "updates24": _curve(4)["updates"],
            "bleu24": _curve(4)["bleu"], "updates48": _curve(5)["updates"], "bleu48": _curve(5)["bleu"]}),
    Figure("docs/training.md", "{updates:,} updates, at a fixed count, {bleu:.2f}",
           {"updates": _fixed(3, "updates"), "bleu": _fixed(3, "bleu")}),
    Figure("docs/training.md", "make is the machine's: {updates:,} on one core of a 2-core EPYC without AVX-512 (the "
                               "curve's run), {headline:,} on both cores of a 2-core EPYC with AVX-512",
           {"updates": _curve(2)["updates"], "headline": Key(_JITTED, "rows.0.updates")}),
    Figure("docs/training.md", "Warning: {updates:,} updates, fewer than the ~{floor:,} that",
           {"updates": _curve(2)["updates"], "floor": FLOOR}),
    Figure("docs/training.md", "made {paper:,} updates in the 12 minutes where the default made {default:,}",
           {"paper": Key(_JITTED, "rows.3.updates"), "default": Key(_JITTED, "rows.0.updates")}),
    # docs/training.md: the default over the budget, and its step against the code before the rule
    *[Figure("docs/training.md", f"| {name} | {{updates:,}} | {{epochs:.2f}} | {{best:.3f}} | {{end:.3f}} | "
                                 "{bleu:.2f} ({bp:.3f}) |", _curve(row))
      for row, name in enumerate(("3 minutes", "6 minutes", "12 minutes", "12 minutes, `--seed=7`",
                                  "24 minutes", "48 minutes"))],
    Figure("docs/training.md", "On one core of this machine 12 minutes make {updates:,} updates (the README's 12 "
                               "minutes on both cores of a faster EPYC: {headline:,})",
           {"updates": _curve(2)["updates"], "headline": HEADLINE["updates"]}),
    # docs/training.md: the curve on both cores
    Figure("README.md", "scored {good:.2f} once and {late:.2f} another time (attention aligning late)",
           {"good": AT_5E3["bleu"], "late": _both_curve(1)["bleu"]}),
    # docs/training.md: the curve of the default as it ships, the gradient's norm bounded by 0.5
    *[Figure("docs/training.md", f"| {name} | {{updates:,}} | {{epochs:.2f}} | {{dropout:g}} | {{best:.3f}} | "
                                 "{end:.3f} | {rise:.1f}% | {off:.1f}% | {bleu:.2f} ({bp:.3f}) |", run)
      for run, name in zip(_CLIPNORM_RUNS, ("6 minutes", "12 minutes", "24 minutes", "48 minutes"))],
    Figure("docs/training.md", "Test BLEU rises with every budget, from {six:.2f} at 6 minutes to {long:.2f} at 48 "
                               "({epochs:.0f} epochs)",
           {"six": _CLIPNORM_RUNS[0]["bleu"], "long": _CLIPNORM_RUNS[3]["bleu"], "epochs": _CLIPNORM_RUNS[3]["epochs"]}),
    Figure("docs/training.md", "ends within {tail:.2f}% of its best dev NLL; no run's dev NLL stood more than {rise:.1f}% "
                               "above its running best after its first epoch (the 48-minute run's worst, at update "
                               "{step:,}: {nll:.3f} after {best:.3f}, and {next:.3f} at the next evaluation); every "
                               "plan of the rule is within {off:.1f}% of the epochs the run made",
           {**_one_rise(_CURVE_CLIPNORM, 3, 29), "rise": _clipnorm_worst("rise"),
            "tail": Computed(tuple(ratio(run["end"], run["best"]) for run in _CLIPNORM_RUNS),
                             lambda *tails: 100 * (max(tails) - 1)),
            "off": _clipnorm_worst("off")}),
    Figure("docs/training.md", "against the previous release run just before it on the same machine, {ratio:.2f}x the "
                               "updates and +{gain:.2f} test BLEU (its dev NLL was best at update {best_step:,}",
           {**OVER_PREVIOUS_RELEASE, "best_step": Key(_RESULT, "rows.0.best_step")}),
    Figure("docs/training.md", "(the same run last measured: 1.1%;\nat the bound of 0.5, above, {rise:.1f}%)",
           {"rise": _CLIPNORM_RUNS[3]["rise"]}),
    Figure("benchmarks/recipe.md", "The default as it ships, the bound at 0.5, 6 to 48 minutes "
                                   "([budget_curve_clipnorm_amd_epyc.json](results/budget_curve_clipnorm_amd_epyc.json)): "
                                   "{six:.2f}, {twelve:.2f}, {day:.2f}, {two_days:.2f}; no run's dev NLL more than "
                                   "{rise:.1f}% above its running best after its first epoch.",
           {**{name: run["bleu"] for run, name in zip(_CLIPNORM_RUNS, ("six", "twelve", "day", "two_days"))},
            "rise": _clipnorm_worst("rise")}),
    # benchmarks/README.md: the README's Result against the previous release
    Figure("benchmarks/README.md", "the previous release made {updates:,} updates, its dev NLL best at update {step:,} "
                                   "({best:.3f}) and {end:.3f} at the end,\ntest BLEU {bleu:.2f}, AER {aer:.3f}",
           _fields(_RESULT, "rows.0", updates="updates", step="best_step", best="best_dev_nll", end="dev_nll_at_end",
                   bleu="bleu", aer="aer")),
    Figure("benchmarks/README.md", "the default {updates:,} updates ({ratio:.2f}x), {best:.3f} at its last update, "
                                   "**{bleu:.2f}** (+{gain:.2f}),\nAER {aer:.3f}, {compiling:.1%} of its 12 minutes compiling",
           {**_fields(_RESULT, "rows.1", updates="updates", best="best_dev_nll", bleu="bleu", aer="aer"),
            **OVER_PREVIOUS_RELEASE, "compiling": RESULT_COMPILING}),
    # docs/training.md: the curve of the default as it ships (label smoothing with the rule's dropout)
    *[Figure("docs/training.md", f"| {name} | {{updates:,}} | {{epochs:.2f}} | {{dropout:g}} | {{best:.3f}} | "
                                 "{end:.3f} | {rise:.1f}% | {off:.1f}% | {bleu:.2f} ({bp:.3f}) |",
             _run_of_curve(_CURVE_DEFAULT, row))
      for row, name in enumerate(("6 minutes", "12 minutes", "12 minutes, `--seed=7`", "24 minutes", "48 minutes"))],
    Figure("docs/training.md", "Test BLEU rises with every budget, to {bleu:.2f} at 48 minutes ({epochs:.0f} epochs)",
           _fields(_CURVE_DEFAULT, "rows.4", bleu="bleu", epochs="epochs")),
    Figure("docs/training.md", "the 48-minute run's first plan said {first:.2f} epochs, every later one {fewest:.2f} "
                               "to {most:.2f}, and it made {epochs:.2f}",
           _fields(_CURVE_DEFAULT, "rows.4", first="regularization.first_planned_epochs", epochs="epochs",
                   fewest="regularization.fewest_planned_epochs", most="regularization.most_planned_epochs")),
    Figure("docs/training.md", "At 24 minutes the rule's half rates scored {half:.2f} against {full:.2f} at the full "
                               "rates the rule gave before ({before:,} updates then, the label-smoothing curve below; "
                               "{now:,} now",
           {"half": Key(_CURVE_DEFAULT, "rows.3.bleu"), "full": Key(_CURVE_SMOOTHED, "rows.3.bleu"),
            "before": Key(_CURVE_SMOOTHED, "rows.3.updates"), "now": Key(_CURVE_DEFAULT, "rows.3.updates")}),
    Figure("docs/training.md", "The 48-minute run's dev NLL stood {rise:.1f}% above its running best once, at update "
                               "{step:,} ({nll:.3f} after {best:.3f}), and was below that best at the next evaluation "
                               "({next:.3f})",
           _one_rise(_CURVE_DEFAULT, 4, 20)),
    Figure("benchmarks/recipe.md", "it costs nothing either: {new} against {before} ms for the float of before",
           _fields("train_step_smoothing_rule_amd_epyc.json", new="rows.0.step_ms", before="rows.1.step_ms")),
    Figure("docs/training.md", "the step itself is unchanged, {new} against {before} ms for the code before",
           _fields("train_step_smoothing_rule_amd_epyc.json", new="rows.0.step_ms", before="rows.1.step_ms")),
    *[Figure("docs/training.md", f"| {name} | {{updates:,}} | {{epochs:.2f}} | {{dropout:g}} | {{best:.3f}} | "
                                 "{end:.3f} | {rise:.1f}% | {off:.1f}% | {bleu:.2f} ({bp:.3f}) |",
             _run_of_curve(_CURVE_SMOOTHED, row))
      for row, name in enumerate(("6 minutes", "12 minutes", "12 minutes, `--seed=7`", "24 minutes"))],
    Figure("docs/training.md", "The 24-minute run's dev NLL stood {rise:.1f}% above its best once, at update "
                               "{step:,} ({nll:.3f} after {best:.3f}), and was below that best at the next "
                               "evaluation ({next:.3f})",
           _one_rise(_CURVE_SMOOTHED, 3, 15)),
    # the default with label smoothing against the same budgets without it
    Figure("docs/training.md", "{six:.2f} against {six_before:.2f} in 6 minutes (no dropout, the model still learning "
                               "to attend), {twelve:.2f} and {seven:.2f} against {twelve_before:.2f} and "
                               "{seven_before:.2f} in 12, {day:.2f} against {day_before:.2f} in 24",
           {**{name: _run_of_curve(_CURVE_SMOOTHED, row)["bleu"]
               for row, name in enumerate(("six", "twelve", "seven", "day"))},
            **{f"{name}_before": _curve_3e3(row)["bleu"]
               for row, name in enumerate(("six", "twelve", "seven", "day"))}}),
    *[Figure("docs/training.md", f"| {name} | {{updates:,}} | {{epochs:.2f}} | {{dropout:g}} | {{best:.3f}} | "
                                 "{end:.3f} | {rise:.1f}% | {off:.1f}% | {bleu:.2f} ({bp:.3f}) |", _curve_3e3(row))
      for row, name in enumerate(("6 minutes", "12 minutes", "12 minutes, `--seed=7`", "24 minutes"))],
    Figure("docs/training.md", "Test BLEU rises with the budget (the two 12-minute runs {gap:.2f} apart)",
           {"gap": difference(_curve_3e3(2)["bleu"], _curve_3e3(1)["bleu"])}),
    Figure("benchmarks/recipe.md", "The smoothing withheld where the rule plans no dropout, the gradient's norm bounded "
                                   "by 1, 6 to 48 minutes ([budget_curve_default_amd_epyc.json](results/budget_curve_default_amd_epyc.json)): "
                                   "{six:.2f}, {twelve:.2f} and {seven:.2f}, {day:.2f}, {two_days:.2f}.",
           {name: _run_of_curve(_CURVE_DEFAULT, row)["bleu"]
            for row, name in enumerate(("six", "twelve", "seven", "day", "two_days"))}),
    Figure("benchmarks/recipe.md", "With label smoothing 0.1 from the first update "
                                   "([budget_curve_label_smoothing_amd_epyc.json](results/budget_curve_label_smoothing_amd_epyc.json)): "
                                   "{six:.2f}, {twelve:.2f} and {seven:.2f}, {day:.2f}.",
           {name: _run_of_curve(_CURVE_SMOOTHED, row)["bleu"] for row, name in enumerate(("six", "twelve", "seven", "day"))}),
    Figure("benchmarks/recipe.md", "At Adam 3e-3 without label smoothing, at 6 to 24 minutes on both cores "
                                   "([budget_curve_adam3e-3_amd_epyc.json](results/budget_curve_adam3e-3_amd_epyc.json)): "
                                   "{six:.2f}, {twelve:.2f} and {seven:.2f}, {day:.2f}",
           {"six": _curve_3e3(0)["bleu"], "twelve": _curve_3e3(1)["bleu"], "seven": _curve_3e3(2)["bleu"],
            "day": _curve_3e3(3)["bleu"]}),
    *[Figure("docs/training.md", f"| {name} | {{updates:,}} | {{epochs:.2f}} | {{dropout:g}} | {{best:.3f}} | "
                                 "{end:.3f} | {rise:.1f}% | {off:.1f}% | {bleu:.2f} ({bp:.3f}) |", _both_curve(row))
      for row, name in enumerate(("6 minutes", "12 minutes", "12 minutes, `--seed=7`", "24 minutes", "48 minutes"))],
    Figure("docs/training.md", "(dev NLL {late:.3f} at update 400, the seed-7 run's {seed7:.3f}, the 6-,",
           {"late": _both_curve(1)["at400"], "seed7": _both_curve(2)["at400"]}),
    Figure("docs/training.md", "24- and 48-minute runs' {six:.3f}, {day:.3f} and {long:.3f}), and it ended {gap:.2f} "
                               "BLEU below the seed-7 run",
           {"six": _both_curve(0)["at400"], "day": _both_curve(3)["at400"], "long": _both_curve(4)["at400"],
            "gap": difference(_both_curve(2)["bleu"], _both_curve(1)["bleu"])}),
    Figure("benchmarks/recipe.md", "one run at a time, at Adam 5e-3 ([budget_curve_amd_epyc.json](results/budget_curve_amd_epyc.json)): "
                                   "{bleu:.2f} at 48 minutes ({updates:,} updates); a 12-minute run whose attention "
                                   "aligned late scored {late:.2f}",
           {"bleu": _both_curve(4)["bleu"], "updates": _both_curve(4)["updates"], "late": _both_curve(1)["bleu"]}),
    # docs/training.md and benchmarks/recipe.md: when the attention aligns, seed by seed
    *[Figure("docs/training.md", f"| {label} | " + " | ".join(f"{{s{k}:.3f}}" for k in range(len(rows)))
             + " |" + " |" * (8 - len(rows)), {f"s{k}": _onset(row) for k, row in enumerate(rows)})
      for label, rows in (("Adam 5e-3", range(0, 8)), ("Adam 5e-3, no dropout", (8,)),
                          ("**Adam 3e-3** (the default)", range(9, 17)))],
    Figure("benchmarks/recipe.md", "2026-11-28): at Adam 5e-3 from {low5:.3f} to {high5:.3f}, two seeds of eight on "
                                   "time; at 3e-3, the default's rate since, from {low3:.3f} to {high3:.3f}",
           {"low5": _onset(7), "high5": _onset(3), "low3": _onset(10), "high3": _onset(16)}),
    # benchmarks/recipe.md: label smoothing at a fixed 3,400 and 6,000 updates, and its step
    *[Figure("benchmarks/recipe.md", f"| {label} | {smoothing} | {{best:.3f}} | {b}{{bleu:.2f}}{b} ({{bp:.3f}}) | "
                                     "{aer:.3f} |",
             _fields(results, f"rows.{row}", best="best_dev_nll", bleu="bleu", bp="brevity_penalty", aer="aer"))
      for label, smoothing, b, results, row in (
          ("1,620 (what 6 minutes make), `--seed=7`", 0, "", _FIXED_1620, 0),
          ("1,620, `--seed=7`", 0.1, "", _FIXED_1620, 1),
          ("3,400 (what 12 minutes make on both cores)", 0, "", _FIXED_3400, 0), ("3,400", 0.1, "**", _FIXED_3400, 1),
          ("6,000", 0, "", _FIXED_6000, 2), ("6,000", 0.1, "**", _FIXED_6000, 3))],
    # benchmarks/recipe.md: dropout at 6,000 updates
    *[Figure("benchmarks/recipe.md", f"| {label} | {{best:.3f}} | {b}{{bleu:.2f}}{b} ({{bp:.3f}}) | {{aer:.3f}} |",
             _fields(_DROPOUT_6000, f"rows.{row}", best="best_dev_nll", bleu="bleu", bp="brevity_penalty", aer="aer"))
      for label, b, row in (("0.1 / 0.05 (the rule's half rates)", "**", 3), ("0.14 / 0.07", "", 4),
                            ("0.2 / 0.1 (the rule's full rates)", "", 0), ("0.3 / 0.1", "", 1), ("0.4 / 0.2", "", 2))],
    Figure("benchmarks/recipe.md", "scored {a:.2f}, {b:.2f} and {c:.2f} test BLEU at seeds 1234, 7 and 42",
           _fields(_SEEDS_6000, "rows", a="0.bleu", b="1.bleu", c="2.bleu")),
    Figure("benchmarks/recipe.md", "At that bound seeds 1234 and 7 scored {a:.2f} and {b:.2f}, no seed's dev NLL more "
                                   "than {worst:.1f}% above its running best after the first epoch",
           {**_fields(_CLIP_6000, "rows", a="0.bleu", b="1.bleu"),
            "worst": _CLIP_6000_WORST}),
    Figure("benchmarks/recipe.md", "Under XLA it costs the step nothing: {smoothed} against {plain} ms on Bible",
           _fields("train_step_label_smoothing_amd_epyc.json", smoothed="rows.1.step_ms", plain="rows.0.step_ms")),
    # docs/training.md: the budget rule's half rates at 14 epochs
    Figure("docs/training.md", "at 14 epochs half beat the full rates by {gain:.2f} BLEU",
           {"gain": difference(Key(_DROPOUT_6000, "rows.3.bleu"), Key(_DROPOUT_6000, "rows.0.bleu"))}),
    # docs/training.md: the budget rule's plan in the README's 12 minutes
    Figure("docs/training.md", "the first plan, after the second dev evaluation (update {eval2:,}), said {first:.2f} "
                               "epochs, every later plan {fewest:.2f} to {most:.2f}, and the run made {epochs:.2f}; the "
                               "rates were {dropout:g} / {words:g}; {updates:,} updates against the previous release's "
                               "{previous:,} on the same machine just before, {compiling:.1%} of the wall time compiling",
           {**_fields(_RESULT, "rows.1", fewest="regularization.fewest_planned_epochs",
                      most="regularization.most_planned_epochs", epochs="epochs",
                      first="regularization.first_planned_epochs", dropout="regularization.dropout",
                      words="regularization.word_dropout", updates="updates"),
            "eval2": Computed((Key(_RESULT, "rows.1.training.eval_every"),),
                              lambda every: 2 * every),
            "previous": PREVIOUS_RELEASE["updates"], "compiling": RESULT_COMPILING}),
    Figure("docs/training.md", "The same command at Adam 5e-3, its first plan a minute in "
                               "([main_command_budget_rule_amd_epyc.json](../benchmarks/results/main_command_budget_rule_amd_epyc.json)), "
                               "planned {first:.2f} epochs and made {epochs:.2f}",
           _fields("main_command_budget_rule_amd_epyc.json", "rows.1", first="regularization.first_planned_epochs",
                   epochs="epochs")),
    # docs/training.md: the budget rule at a fixed 6,000 updates, against the release before
    *[Figure("docs/training.md", f"| {name} | {{dropout:g}} / {{words:g}} from {start} | {b}{{best:.3f}}{b} | "
                                 f"{{rise:.1%}} | {b}{{bleu:.2f}}{b} ({{bp:.3f}}) | {{aer:.3f}} |",
             _fields(_FIXED_6000, f"rows.{row}", dropout="regularization.dropout",
                     words="regularization.word_dropout", best="best_dev_nll", rise="worst_rise_after_first_epoch",
                     bleu="bleu", bp="brevity_penalty", aer="aer"))
      for row, name, start, b in ((0, "the release before", "half-way", ""),)],
    Figure("docs/training.md", "| the default at Adam 5e-3 | {dropout:g} / {words:g} from update 0 | **{best:.3f}** | "
                               "{rise:.1%} | {bleu:.2f} ({bp:.3f}) | {aer:.3f} |",
           _fields(_FIXED_6000, "rows.1", dropout="regularization.dropout", words="regularization.word_dropout",
                   best="best_dev_nll", rise="worst_rise_after_first_epoch", bleu="bleu", bp="brevity_penalty",
                   aer="aer")),
    *[Figure("docs/training.md", f"| {name} | {{dropout:g}} / {{words:g}} from update 0 | {{best:.3f}} | "
                                 f"{{rise:.1%}} | {{bleu:.2f}} ({{bp:.3f}}) | {b}{{aer:.3f}}{b} |",
             _fields(_FIXED_6000, f"rows.{row}", dropout="regularization.dropout", words="regularization.word_dropout",
                     best="best_dev_nll", rise="worst_rise_after_first_epoch", bleu="bleu", bp="brevity_penalty",
                     aer="aer"))
      for row, name, b in ((2, "the default at Adam 3e-3, no label smoothing", ""),
                           (3, "the default at the full rates (Adam 3e-3, label smoothing 0.1)", ""))],
    Figure("docs/training.md", "| its rule's half rates at 14 epochs, given as flags | 0.1 / 0.05 "
                               "from update 0 | {best:.3f} | {rise:.1%} | {bleu:.2f} ({bp:.3f}) | **{aer:.3f}** |",
           _fields(_DROPOUT_6000, "rows.3", best="best_dev_nll", rise="worst_rise_after_first_epoch", bleu="bleu",
                   bp="brevity_penalty", aer="aer")),
    Figure("docs/training.md", "| **the default** (its rule's own plan) | {dropout:g} / {words:g} from update 0 | "
                               "{best:.3f} | {rise:.1%} | **{bleu:.2f}** ({bp:.3f}) | {aer:.3f} |",
           _fields(_SEEDS_6000, "rows.0", dropout="regularization.dropout", words="regularization.word_dropout",
                   best="best_dev_nll", rise="worst_rise_after_first_epoch", bleu="bleu", bp="brevity_penalty",
                   aer="aer")),
    Figure("docs/training.md", "{gain:+.2f} BLEU over the release\nbefore",
           {"gain": difference(Key(_SEEDS_6000, "rows.0.bleu"), Key(_FIXED_6000, "rows.0.bleu"))}),
    # the default against the release before, seed for seed
    *[Figure("docs/training.md", f"| {seed} | {{old_best:.3f}}, {{old_rise:.1%}}, {{old:.2f}} | {{best:.3f}}, "
                                 "{rise:.1%}, {new:.2f} | {gain:+.2f} |",
             {**_fields(old_file, f"rows.{old_row}", old_best="best_dev_nll", old_rise="worst_rise_after_first_epoch",
                        old="bleu"),
              **_fields(_SEEDS_6000, f"rows.{row}", best="best_dev_nll", rise="worst_rise_after_first_epoch",
                        new="bleu"),
              "gain": difference(Key(_SEEDS_6000, f"rows.{row}.bleu"), Key(old_file, f"rows.{old_row}.bleu"))})
      for seed, old_file, old_row, row in ((1234, _FIXED_6000, 0, 0), (7, _SEEDS_6000, 3, 1))],
    Figure("docs/training.md", "| 42 | not run | {best:.3f}, {rise:.1%}, {new:.2f} | |",
           _fields(_SEEDS_6000, "rows.2", best="best_dev_nll", rise="worst_rise_after_first_epoch", new="bleu")),
    Figure("docs/training.md", "Seed 42's dev NLL stood {rise:.1f}% above its running best once, at update {step:,} "
                               "({nll:.3f} after {best:.3f}), and was below that best at the next evaluation ({next:.3f})",
           {**_one_rise(_SEEDS_6000, 2, 13), "rise": Key(_SEEDS_6000, "rows.2.worst_rise_after_first_epoch", _percent)}),
    Figure("docs/training.md", "on an Intel Xeon with AMX, evaluating every 50 updates, the same seed rose at the same "
                               "update, to {nll:.3f} after {best:.3f} ({rise:.1f}%), and ended at {bleu:.2f} test BLEU; "
                               "with the gradient's norm bounded by {clip:g} instead of 1 (`--clipnorm={clip:g}`) its dev "
                               "NLL there was {clip_nll:.3f}, it never stood more than {clip_rise:.1f}% above its running "
                               "best, and it scored {clip_bleu:.2f}",
           {**_one_rise(_RISES_42, 0, _RISES_42_POINT), "bleu": Key(_RISES_42, "rows.0.bleu"),
            "clip": Key(_RISES_42, "rows.1.training.clipnorm"),
            "clip_nll": Key(_RISES_42, f"rows.1.dev_curve.{_RISES_42_POINT}.1"),
            "clip_rise": Key(_RISES_42, "rows.1.worst_rise_after_first_epoch", _percent),
            "clip_bleu": Key(_RISES_42, "rows.1.bleu")}),
    # benchmarks/README.md: the gradient's bound in the main command's 12 minutes
    Figure("benchmarks/README.md", "at 0.5,\n{u05:,} updates, best dev NLL {nll05:.3f}, test BLEU {bleu05:.2f}; at 1, "
                                   "{u1:,} updates, {nll1:.3f}, {bleu1:.2f}",
           {**_fields(_CLIP_MAIN, "rows.0", u05="updates", nll05="best_dev_nll", bleu05="bleu"),
            **_fields(_CLIP_MAIN, "rows.1", u1="updates", nll1="best_dev_nll", bleu1="bleu")}),
    Figure("benchmarks/README.md", "update 800 ({at400_05:.3f} against {at400_1:.3f} at 400) and {gap:.3f} higher at\n"
                                   "1,000", {"at400_05": Key(_CLIP_MAIN, "rows.0.dev_curve.1.1"),
                                             "at400_1": Key(_CLIP_MAIN, "rows.1.dev_curve.1.1"),
                                             "gap": difference(Key(_CLIP_MAIN, "rows.0.dev_curve.4.1"),
                                                               Key(_CLIP_MAIN, "rows.1.dev_curve.4.1"))}),
    Figure("benchmarks/README.md", "the {fewer} fewer updates",
           {"fewer": difference(Key(_CLIP_MAIN, "rows.1.updates"), Key(_CLIP_MAIN, "rows.0.updates"))}),
    Figure("docs/training.md", "bounds ended close, {a:.2f} test BLEU at 0.5 and {b:.2f} at 1",
           _fields(_CLIP_MAIN, "rows", a="0.bleu", b="1.bleu")),
    # benchmarks/README.md: the main command against the previous release on the slower Xeon
    *[Figure("benchmarks/README.md", f"| {name} | {{updates:,}} | {{epochs:.2f}} | {{best:.3f}} | {{bleu:.2f}} "
                                     "({bp:.3f}) | {aer:.3f} |",
             _fields(_RELEASE_XEON, f"rows.{row}", updates="updates", epochs="epochs", best="best_dev_nll", bleu="bleu",
                     bp="brevity_penalty", aer="aer"))
      for row, name in enumerate(("the previous release (Adam 5e-3)", "**the default**",
                                  "the previous release, `--seed=1`", "**the default**, `--seed=1`",
                                  "the default at `--learning_rate=0.005`", "the previous release, `--seed=2`",
                                  "**the default**, `--seed=2`"))],
    Figure("benchmarks/README.md", "the budget rule plans no dropout (its plans at most {off:.1f}% off the\nepochs made)",
           {"off": Computed(tuple(_run_of_curve(_RELEASE_XEON, row)["off"] for row in _RELEASE_XEON_DEFAULTS), max)}),
    Figure("benchmarks/README.md", "there the previous release leads by {lead:.2f} BLEU, and\nthe default at its rate "
                                   "scores {lr5:.2f}",
           {"lead": difference(Key(_RELEASE_XEON, "rows.0.bleu"), Key(_RELEASE_XEON, "rows.1.bleu")),
            "lr5": Key(_RELEASE_XEON, "rows.4.bleu")}),
    Figure("benchmarks/README.md", "never aligned in the budget (AER {aer:.3f}) and scored\n{old:.2f} against the "
                                   "default's {new:.2f}; at seed 2, another, {old2:.2f} against {new2:.2f}",
           _fields(_RELEASE_XEON, "rows", aer="2.aer", old="2.bleu", new="3.bleu", old2="5.bleu", new2="6.bleu")),
    Figure("benchmarks/README.md", "Over the three seeds,\nthe default {new:.2f} against {old:.2f}, in {ratio:.2f}x the updates",
           {"new": _over_release_xeon(_RELEASE_XEON_NEW, "bleu", statistics.mean),
            "old": _over_release_xeon(_RELEASE_XEON_OLD, "bleu", statistics.mean),
            "ratio": ratio(_over_release_xeon(_RELEASE_XEON_NEW, "updates", sum),
                           _over_release_xeon(_RELEASE_XEON_OLD, "updates", sum))}),
    Figure("benchmarks/README.md", "(the default made {low:,} to {high:,} updates)",
           {"low": _over_release_xeon(_RELEASE_XEON_NEW, "updates", min),
            "high": _over_release_xeon(_RELEASE_XEON_NEW, "updates", max)}),
    Figure("benchmarks/README.md", "compiled for {low:.1f}% to {high:.1f}% of\nits 12 minutes",
           {"low": _compiling_shares(min), "high": _compiling_shares(max)}),
    Figure("benchmarks/README.md", "{new} against {before} ms at best ({slower:.1%} slower), each checkout batching the "
                                   "corpus its own way ({new_shapes} batch\nshapes against {before_shapes}, {new_s} against "
                                   "{before_s} s compiling them)",
           {**_fields(_STEP_XEON, "rows", new="0.step_ms", before="1.step_ms", new_shapes="0.shapes",
                      before_shapes="1.shapes", new_s="0.first_pass_s", before_s="1.first_pass_s"),
            "slower": Computed((ratio(Key(_STEP_XEON, "rows.0.step_ms"), Key(_STEP_XEON, "rows.1.step_ms")),),
                               lambda share: share - 1)}),
    Figure("docs/training.md", "where the README's 12 minutes make {low:,} to {high:,} updates (under 3 epochs), the "
                               "previous\nrelease (5e-3) scored {old0:.2f}, {old1:.2f} and {old2:.2f} test BLEU at seeds "
                               "1234, 1 and 2 (at seed 1 its\nattention never aligned: AER {aer:.3f}), the default "
                               "{new0:.2f}, {new1:.2f} and {new2:.2f}; the default at 5e-3,\nseed 1234, {lr5:.2f}",
           {"low": _over_release_xeon(_RELEASE_XEON_NEW, "updates", min),
            "high": _over_release_xeon(_RELEASE_XEON_NEW, "updates", max),
            **_fields(_RELEASE_XEON, "rows", old0="0.bleu", old1="2.bleu", old2="5.bleu", aer="2.aer",
                      new0="1.bleu", new1="3.bleu", new2="6.bleu", lr5="4.bleu")}),
    Figure("README.md", "12 minutes made {low:,} to {high:,} updates and {worst:.2f} to {best:.2f} test BLEU at three "
                        "seeds; the previous release, {old_worst:.2f} to {old_best:.2f}",
           {"low": _over_release_xeon(_RELEASE_XEON_NEW, "updates", min),
            "high": _over_release_xeon(_RELEASE_XEON_NEW, "updates", max),
            "worst": _over_release_xeon(_RELEASE_XEON_NEW, "bleu", min),
            "best": _over_release_xeon(_RELEASE_XEON_NEW, "bleu", max),
            "old_worst": _over_release_xeon(_RELEASE_XEON_OLD, "bleu", min),
            "old_best": _over_release_xeon(_RELEASE_XEON_OLD, "bleu", max)}),
    # docs/training.md: the gradient's bound at 0.5, seed for seed
    *[Figure("docs/training.md", f"| {seed} | {{best:.3f}}, {{rise:.1%}}, {{old:.2f}} | {{clip_best:.3f}}, "
                                 "{clip_rise:.1%}, {clip:.2f} |",
             {**_fields(_SEEDS_6000, f"rows.{row}", best="best_dev_nll", rise="worst_rise_after_first_epoch", old="bleu"),
              **_fields(_CLIP_6000, f"rows.{row}", clip_best="best_dev_nll", clip_rise="worst_rise_after_first_epoch",
                        clip="bleu")})
      for seed, row in ((1234, 0), (7, 1))],
    Figure("docs/training.md", "| 42 (this CPU) | {best:.3f}, {rise:.1f}%, {old:.2f} | {clip_best:.3f}, {clip_rise:.1f}%, "
                               "{clip:.2f} |",
           {**_fields(_RISES_42, "rows.0", best="best_dev_nll", old="bleu"), "rise": _RISE_42_EVERY_200[0],
            **_fields(_RISES_42, "rows.1", clip_best="best_dev_nll", clip="bleu"), "clip_rise": _RISE_42_EVERY_200[1]}),
    Figure("docs/training.md", "| mean | {old:.2f} | **{new:.2f}** |",
           {"old": Computed((Key(_SEEDS_6000, "rows.0.bleu"), Key(_SEEDS_6000, "rows.1.bleu"),
                             Key(_RISES_42, "rows.0.bleu")), lambda *values: sum(values) / 3),
            "new": Computed(_CLIP_6000_BLEU, lambda *values: sum(values) / 3)}),
    Figure("docs/training.md", "With the bound at 0.5 no seed's dev NLL stood more than {worst:.1f}% above its running best",
           {"worst": _CLIP_6000_WORST}),
    Figure("docs/training.md", "against the release before, the two seeds\nrun with both gain {gain:+.2f} ({old:.2f} -> {new:.2f})",
           {"old": _SEEDS_6000_BEFORE, "new": Computed(_CLIP_6000_BLEU[:2], lambda a, b: (a + b) / 2),
            "gain": difference(Computed(_CLIP_6000_BLEU[:2], lambda a, b: (a + b) / 2), _SEEDS_6000_BEFORE)}),
    Figure("docs/training.md", "| the two seeds run with both | {old:.2f} | {new:.2f} | **{gain:+.2f}** |",
           {"old": _SEEDS_6000_BEFORE, "new": _SEEDS_6000_DEFAULT,
            "gain": difference(_SEEDS_6000_DEFAULT, _SEEDS_6000_BEFORE)}),
    Figure("docs/training.md", "there the higher rate ends ahead, by {gap:.2f} BLEU at 6,000 updates without label "
                               "smoothing and {gap_smoothed:.2f} with it",
           {"gap": difference(Key(_FIXED_6000, "rows.1.bleu"), Key(_FIXED_6000, "rows.2.bleu")),
            "gap_smoothed": difference(Key(_FIXED_6000, "rows.1.bleu"), Key(_FIXED_6000, "rows.3.bleu"))}),
    Figure("docs/training.md", "The default preset trains with 0.1: +{gain3400:.2f} test BLEU at the 3,400 updates "
                               "of its 12-minute run, +{gain6000:.2f} at 6,000",
           {"gain3400": difference(Key(_FIXED_3400, "rows.1.bleu"), Key(_FIXED_3400, "rows.0.bleu")),
            "gain6000": difference(Key(_FIXED_6000, "rows.3.bleu"), Key(_FIXED_6000, "rows.2.bleu"))}),
    Figure("docs/training.md", "trains the step it trained before: {new} against {before} ms per step",
           _fields(_RULE_STEP, new="rows.0.step_ms", before="rows.1.step_ms")),
    Figure("benchmarks/README.md", "on Bible batches {none} ms without dropout ops, {zero} ms with the budget rule "
                                   "at 0, {full} ms at its full rates ({more:.1%} more)",
           {"none": Key(_DROPOUT_STEP, "rows.3.step_cpu_ms"), "zero": Key(_DROPOUT_STEP, "rows.4.step_cpu_ms"),
            "full": Key(_DROPOUT_STEP, "rows.5.step_cpu_ms"),
            "more": Computed((Key(_DROPOUT_STEP, "rows.5.step_cpu_ms"), Key(_DROPOUT_STEP, "rows.3.step_cpu_ms")),
                             lambda a, b: a / b - 1)}),
    Figure("benchmarks/README.md", "the default's step {new} against {before} ms, `small`'s {new_small} against "
                                   "{before_small} ms",
           _fields("train_step_against_previous_amd_epyc.json", new="rows.0.step_ms", before="rows.1.step_ms",
                   new_small="rows.2.step_ms", before_small="rows.3.step_ms")),
    Figure("benchmarks/README.md", "{greedy} against {greedy_old} sentences/s greedy and {beam} against {beam_old} at "
                                   "beam 5 (batch 64), a median {one} against {one_old} ms greedy and {one5} against "
                                   "{one5_old} ms at beam 5 (batch 1)",
           _fields("decode_against_previous_amd_epyc.json", greedy="rows.4.sentences_per_s",
                   greedy_old="rows.0.sentences_per_s", beam="rows.5.sentences_per_s", beam_old="rows.1.sentences_per_s",
                   one="rows.6.median_ms", one_old="rows.2.median_ms", one5="rows.7.median_ms",
                   one5_old="rows.3.median_ms")),
    Figure("benchmarks/recipe.md", "rises with the budget, to {bleu:.2f} at 48 minutes ({updates:,} updates)",
           _curve(5)),
    # docs/training.md: the default, tied and a smaller vocabulary at a fixed 1,400 updates
    Figure("docs/training.md", "the default before tying scored {bleu:.2f} test BLEU (AER {aer:.3f} by the default "
                               "rule `pieces`, {chosen:.3f} by the rule chosen on dev); with `--tie_embeddings` "
                               "{tied_bleu:.2f} (dev NLL {tied_nll:.3f} against {nll:.3f}; AER {tied_aer:.3f} by the "
                               "rule chosen on dev), so the default ties since; with `--vocabulary_size=3000` "
                               "{small_bleu:.2f}, its attention learned late (AER {small_aer:.3f})",
           {"bleu": _fixed(0, "bleu"),
            "aer": _fixed(0, "aer"),
            "nll": _fixed(0, "best_dev_nll"),
            "chosen": _fixed(2, "aer"),
            "tied_bleu": _fixed(3, "bleu"),
            "tied_nll": _fixed(3, "best_dev_nll"),
            "tied_aer": _fixed(3, "aer"),
            "small_bleu": _fixed(1, "bleu"),
            "small_aer": _fixed(1, "aer")}),
    Figure("docs/training.md", "Batch 128 for {updates:,} updates (the same pairs; on one core its real target "
                               "tokens/s were {tokens:,.0f} against the tied default's {tied_tokens:,.0f}, so about "
                               "the same time) scored {bleu:.2f}",
           {"updates": _fixed(4, "updates"),
            "tokens": _fixed(4, "tokens_per_s"),
            "tied_tokens": _fixed(3, "tokens_per_s"),
            "bleu": _fixed(4, "bleu")}),
    Figure("docs/training.md", "updates {updates:,.0f} s, compiling new batch shapes {compiling:.0f} s, dev NLL "
                               "{dev_nll:.0f} s, dev BLEU {dev_bleu:.0f} s",
           _fields(_FIXED, "rows.4.seconds", updates="updates", compiling="compiling",
                   dev_nll="dev_nll", dev_bleu="dev_bleu")),
    # docs/training.md: the written-out backward pass against automatic differentiation, with the
    # decoder reading C h_j against the step before, and the conditional GRU's against its scanned loop
    Figure("docs/training.md", "the `small` step {small:.2f}x faster on Bible batches, rnnsearch-50's {large:.2f}x",
           {"small": ratio(Key(_RECURRENCE, "rows.1.step_ms"), Key(_RECURRENCE, "rows.0.step_ms")),
            "large": ratio(Key(_RECURRENCE, "rows.3.step_ms"), Key(_RECURRENCE, "rows.2.step_ms"))}),
    Figure("docs/training.md", "shapes, quiet: the `small` step {small:.2f}x faster, rnnsearch-50's {large:.2f}x",
           {"small": ratio(Key(_CONTEXT, "small.rows.1.step_ms"), Key(_CONTEXT, "small.rows.0.step_ms")),
            "large": ratio(Key(_CONTEXT, "rnnsearch-50.rows.1.step_ms"),
                           Key(_CONTEXT, "rnnsearch-50.rows.0.step_ms"))}),
    Figure("docs/training.md", "{after:.1f} against {before:.1f} ms per step ({speedup:.2f}x; CPU time "
                               "{cpu_speedup:.2f}x) in the first of two alternations",
           dict(CGRU_BACKWARD, speedup=ratio(CGRU_BACKWARD["before"], CGRU_BACKWARD["after"]),
                cpu_speedup=ratio(CGRU_BACKWARD["before_cpu"], CGRU_BACKWARD["after_cpu"]))),
    # docs/training.md: the report's line of the end-of-run average (the constant-rate run, where it won)
    Figure("docs/training.md", "`Averaged {first} .. {last}: dev NLL {dev_nll:.3f}, now best/` (the 12-minute run "
                               "at a constant rate of [main_command_amd_epyc.json]",
           _fields("main_command_amd_epyc.json", "averaged", first="checkpoints.0", last="checkpoints.4",
                   dev_nll="dev_nll")),
    # docs/training.md: the budget schedule's measured effect
    Figure("docs/training.md", "the README's 12-minute run went from {before:.2f} to {bleu:.2f} test BLEU",
           dict(BUDGET, before=_run("twelve_minute_before_after_amd_epyc.json", "rows.1")["bleu"])),
    Figure("docs/training.md", "at {updates:,} updates the schedule alone gave {budget:.2f} against a constant "
                               "rate's {constant:.2f}",
           {"updates": Key("recipe_budget_runs_amd_epyc.json", "rows.1.updates"),
            "budget": Key("recipe_budget_runs_amd_epyc.json", "rows.1.bleu"),
            "constant": Key("recipe_budget_runs_amd_epyc.json", "rows.0.bleu")}),
    # docs/training.md: regularisation and the dev schedule at the README's budget
    Figure("docs/training.md", "({heavy_updates:,} and {light_updates:,} updates with these knobs, {updates:,} "
                               "without)", dict(_summary_row("recipe_runs_amd_epyc.json", "rows.2"),
                                                heavy_updates=Key("recipe_runs_amd_epyc.json", "rows.0.updates"),
                                                light_updates=Key("recipe_runs_amd_epyc.json", "rows.1.updates"))),
    Figure("docs/training.md", "scored {heavy:.2f} test BLEU against the plain preset's {bleu:.2f}; dropout 0.1 with "
                               "label smoothing 0.1 was level with it ({light:.2f})",
           dict(_summary_row("recipe_runs_amd_epyc.json", "rows.2"),
                heavy=Key("recipe_runs_amd_epyc.json", "rows.0.bleu"),
                light=Key("recipe_runs_amd_epyc.json", "rows.1.bleu"))),
    Figure("docs/training.md", "(best {best_dev_nll:.3f}, {end:.3f} at its end)",
           dict(_summary_row("recipe_runs_amd_epyc.json", "rows.2"),
                end=Key("recipe_runs_amd_epyc.json", "rows.2.dev_nll_at_end"))),
    # docs/training.md: guided alignment's weight
    Figure("docs/training.md", "scored {guided:.2f} test BLEU against the unguided run's {unguided:.2f}",
           {"guided": Key("alignment_twelve_minute_amd_epyc.json", "rows.18.test_bleu"),
            "unguided": Key("alignment_twelve_minute_amd_epyc.json", "rows.0.test_bleu")}),
    # docs/training.md: guided alignment at the 12-minute run's updates
    Figure("docs/training.md", "at {updates:,} updates (a 12-minute run on a 2-core {cpu})",
           _run("twelve_minute_before_after_amd_epyc.json", "rows.1")),
    # benchmarks/README.md: the main command's table, whose rows the figures above come from
    *[Figure("benchmarks/README.md", f"| {label} | {{updates:,}} | {{epochs:.2f}} | "
                                     "{tokens_per_second:,.0f} | {best_dev_nll:.3f} ({best_step:,}) | "
                                     f"{bold}{{bleu:.2f}}{bold} ({{brevity_penalty:.3f}}) | {{aer:.3f}} |", keys)
      for label, bold, keys in (
          ("the main command (seed 1234)", "**", HEADLINE),
          ("`--seed=7`", "**", SECOND_SEED),
          ("the main command, rerun on this release's code", "**", RERUN),
          ("the decoder loop differentiated automatically (`jit_autodiff`)", "",
           _summary_row("main_command_cgru_amd_epyc.json", "rows.2")),
          ("`--preset=small` (the paper's decoder cell)", "", PAPER_CELL))],
    # the paper's comparison on one core, and the end-to-end precision runs
    *[Figure("benchmarks/README.md", f"{label} | {{updates:,}} | {{best_dev_nll:.3f}} ({{best_step:,}}) | "
                                     f"{bold}{{bleu:.2f}}{bold} ({{brevity_penalty:.3f}}) |",
             _summary_row("rnnsearch_rnnencdec_one_core_amd_epyc.json", f"rows.{row}"))
      for label, bold, row in (("(`rnnsearch-cgru-small`)", "**", 1), ("(`small`, the paper's cell)", "", 0),
                               ("(`rnnencdec-small`)", "", 2))],
    Figure("benchmarks/README.md", "float32 + XLA made {xla_updates:,} updates and scored {xla_bleu:.2f} test BLEU; "
                                   "mixed bfloat16 without XLA, {bf16_updates:,} and {bf16_bleu:.2f}.",
           {"xla_updates": Key("twelve_minute_runs.json", "3.updates"), "xla_bleu": Key("twelve_minute_runs.json", "3.bleu"),
            "bf16_updates": Key("twelve_minute_runs.json", "1.updates"),
            "bf16_bleu": Key("twelve_minute_runs.json", "1.bleu")}),
    # the length penalty's dev sweep: the default preset's model
    Figure("benchmarks/README.md", "| {at_05:.2f} ({bp_05:.3f}) | **{at_10:.2f}** ({bp_10:.3f}) | | |",
           {"at_05": Key("length_penalty_dev_amd_epyc.json", "rows.12.dev_bleu"),
            "bp_05": Key("length_penalty_dev_amd_epyc.json", "rows.12.brevity_penalty"),
            "at_10": Key("length_penalty_dev_amd_epyc.json", "rows.13.dev_bleu"),
            "bp_10": Key("length_penalty_dev_amd_epyc.json", "rows.13.brevity_penalty")}),
    # the recipe's runs
    *[Figure("benchmarks/recipe.md", f"{label} | {{updates:,}} | {{best_dev_nll:.3f}} | {{dev_nll_at_end:.3f}} | "
                                     "{bleu:.2f} ({brevity_penalty:.3f}) | {aer:.3f} |",
             dict(_summary_row("recipe_runs_amd_epyc.json", f"rows.{row}"),
                  dev_nll_at_end=Key("recipe_runs_amd_epyc.json", f"rows.{row}.dev_nll_at_end")))
      for label, row in (("--schedule=plateau --average_at=best`", 1), ("`small`, no regularisation", 2),
                         ("`--preset=rnnsearch-cgru-small`, no regularisation", 3))],
    Figure("benchmarks/recipe.md", "| `--schedule=budget --max_length=80` | {updates:,} | {best_dev_nll:.3f} | "
                                   "{dev_nll_at_end:.3f} | **{bleu:.2f}** ({brevity_penalty:.3f}) | {aer:.3f} |",
           dict(_summary_row("recipe_budget_runs_amd_epyc.json", "rows.3"),
                dev_nll_at_end=Key("recipe_budget_runs_amd_epyc.json", "rows.3.dev_nll_at_end"))),
    Figure("benchmarks/recipe.md", "| {updates:,} | {epochs:.2f} | {tokens_per_second:,.0f} | "
                                   "{best_dev_nll:.3f} | {dev_nll_at_end:.3f} | **{bleu:.2f}** "
                                   "({brevity_penalty:.3f}) | {aer:.3f} |",
           dict(BUDGET, dev_nll_at_end=Key(BUDGET["bleu"].results, "rows.0.dev_nll_at_end"))),
    Figure("benchmarks/recipe.md", "against {bleu:.2f} ({updates:,} updates, AER {aer:.3f})",
           _run("twelve_minute_before_after_amd_epyc.json", "rows.1")),
    # checkpoint averaging: at a constant rate, and in the default's run
    Figure("benchmarks/recipe.md", "ended at a dev NLL of {last:.3f} and its average reached {average:.3f}",
           {"last": Key("main_command_amd_epyc.json", "training.dev_nll"),
            "average": Key("main_command_amd_epyc.json", "averaged.dev_nll")}),
    Figure("benchmarks/recipe.md", "the average scored {average:.3f} against the last checkpoint's {last:.3f}",
           {"average": Key("main_command_cgru_amd_epyc.json", "rows.0.averaged.dev_nll"),
            "last": Key("main_command_cgru_amd_epyc.json", "rows.0.dev_nll_at_end")}),
    Figure("benchmarks/README.md", "| `bible-en-es-small` | {updates:,} | **{bleu:.2f}** "
                                   "({brevity_penalty:.3f}) | {chrf:.2f} | {aer:.3f} |", SHIPPED),
    # the train step: the default preset's, the device's precision and XLA choice, the backward pass
    Figure("benchmarks/README.md", "**{step:.1f}** ms per step of 64 pairs on 12 Bible batches (6 shapes), "
                                   "{tokens:,.0f} real target tokens/s, {ceiling} of the machine's float32 matmul "
                                   "ceiling; the code of the main command's first run, alternated with it "
                                   "(`--checkouts=before=DIR`), {before:.1f} ms",
           {"step": Key("train_step_cgru_fused_reads_amd_epyc.json", "rows.0.step_ms"),
            "tokens": Key("train_step_cgru_fused_reads_amd_epyc.json", "rows.0.target_tokens_per_s"),
            "ceiling": Key("train_step_cgru_fused_reads_amd_epyc.json", "rows.0.ceiling"),
            "before": Key("train_step_cgru_fused_reads_amd_epyc.json", "rows.1.step_ms")}),
    Figure("benchmarks/README.md", "| EPYC | {f32:,.0f} | {bf16:,.0f} | **{jit:,.0f}** | {bf16_jit:,.0f} | {ceiling} |",
           {name: Key("train_throughput_amd_epyc.json", f"rows.{row}.{field}")
            for name, row, field in (("f32", 0, "target_tokens_per_s"), ("bf16", 1, "target_tokens_per_s"),
                                     ("jit", 2, "target_tokens_per_s"), ("bf16_jit", 3, "target_tokens_per_s"),
                                     ("ceiling", 2, "ceiling"))}),
    Figure("benchmarks/README.md", "| `rnnsearch-cgru-small` (the default) | 12 Bible batches | {before:.1f} | "
                                   "{after:.1f} |", CGRU_BACKWARD),
    Figure("benchmarks/README.md", "| `small` | Bible batches | {autodiff:.1f} | {written:.1f} |",
           {"written": Key("train_step_recurrence_backward_amd_epyc.json", "rows.0.step_ms"),
            "autodiff": Key("train_step_recurrence_backward_amd_epyc.json", "rows.1.step_ms")}),
    Figure("benchmarks/README.md", "Without a flag, {first:.1f} and {last:.1f} ms per step",
           {"first": Key("train_step_xla_cpu_flags_amd_epyc.json", "rows.0.step_ms"),
            "last": Key("train_step_xla_cpu_flags_amd_epyc.json", "rows.10.step_ms")}),
    # one step per cell against the code before it: the train step, then translating
    Figure("benchmarks/README.md", "{cgru_new:.1f} against {cgru_old:.1f} ms per step at the default preset (tied here, untied "
                                   "before), {small_new:.1f} against {small_old:.1f} at `small`",
           {name: Key("train_step_one_step_per_cell_amd_epyc.json", f"rows.{row}.step_ms")
            for name, row in (("cgru_new", 0), ("cgru_old", 1), ("small_new", 2), ("small_old", 3))}),
    Figure("benchmarks/README.md", "batch 64 beam 5 {beam_new:.1f} against {beam_old:.1f} sentences/s, greedy "
                                   "{greedy_new:.1f} against {greedy_old:.1f} (best rounds; batch 64 greedy moves most "
                                   "between rounds); batch 1 median {b1_new:.1f} against {b1_old:.1f} ms greedy, "
                                   "{b1_beam_new:.1f} against {b1_beam_old:.1f} at beam 5",
           {name: Key("decode_one_step_per_cell_amd_epyc.json", f"rows.{row}.{field}")
            for name, row, field in (("greedy_old", 0, "sentences_per_s"), ("beam_old", 1, "sentences_per_s"),
                                     ("b1_old", 2, "median_ms"), ("b1_beam_old", 3, "median_ms"),
                                     ("greedy_new", 4, "sentences_per_s"), ("beam_new", 5, "sentences_per_s"),
                                     ("b1_new", 6, "median_ms"), ("b1_beam_new", 7, "median_ms"))}),
    Figure("benchmarks/README.md", "The two that moved, again, quieter ([rerun](results/{results_file})): "
                                   "{greedy_new:.1f} against {greedy_old:.1f}, {b1_beam_new:.1f} against "
                                   "{b1_beam_old:.1f} ms",
           {"results_file": Key("decode_one_step_per_cell_rerun_amd_epyc.json", ""),
            **{name: Key("decode_one_step_per_cell_rerun_amd_epyc.json", f"rows.{row}.{field}")
               for name, row, field in (("greedy_old", 0, "sentences_per_s"), ("greedy_new", 1, "sentences_per_s"),
                                        ("b1_beam_old", 2, "median_ms"), ("b1_beam_new", 3, "median_ms"))}}),
    # translating: the current search, XLA against none, the backends, the candidate lists
    Figure("benchmarks/README.md", "| greedy | **{b64:.1f}** | **{b1:.1f}** ({p90:.1f}) | {steps:.1f} |",
           {name: Key("decode_throughput_against_earlier_main_amd_epyc.json", f"rows.{row}.{field}")
            for name, row, field in (("b64", 4, "sentences_per_s"), ("b1", 6, "median_ms"),
                                     ("p90", 6, "p90_ms"), ("steps", 4, "hyp_steps_per_sentence"))}),
    Figure("benchmarks/README.md", "| beam 5 | **{b64:.1f}** | **{b1:.1f}** ({p90:.1f}) | {steps:.1f} |",
           {name: Key("decode_throughput_against_earlier_main_amd_epyc.json", f"rows.{row}.{field}")
            for name, row, field in (("b64", 5, "sentences_per_s"), ("b1", 7, "median_ms"),
                                     ("p90", 7, "p90_ms"), ("steps", 5, "hyp_steps_per_sentence"))}),
    Figure("benchmarks/README.md", "batch 64 greedy {xla:.1f} against {plain:.1f} sentences/s",
           {"xla": Key("decode_throughput_amd_epyc.json", "rows.9.sentences_per_s"),
            "plain": Key("decode_throughput_amd_epyc.json", "rows.8.sentences_per_s")}),

    Figure("benchmarks/README.md", "| 29,472 | 4,003 | {full:.1f} / {lists:.1f} | **{speedup:.2f}x** |",
           {"full": Key("candidate_lists_30k.json", "sentences_per_second.full_softmax"),
            "lists": Key("candidate_lists_30k.json", "sentences_per_second.candidate_lists"),
            "speedup": Key("candidate_lists_30k.json", "speedup")}),
    Figure("benchmarks/README.md", "0.524 / 0.219 s (**{speedup:.2f}x**)",
           {"speedup": Key("sampled_softmax_amd_epyc.json", "results.0.speedup")}),
    # benchmarks/alignment.md: the default model's stages, the head's defaults, guided alignment
    Figure("benchmarks/alignment.md", "| eflomal's intersection links (the default) | {s500} | {s1000} | {s1500} | "
                                      "**{s2000}** | {s3000} | | {s5000} | {s6000} |",
           {f"s{n}": Key("alignment_cgru_head_amd_epyc.json",
                         f"head_selection_on_dev.snapshots.cgru-eflomal-{n}.dev_aer", lambda v: f"{v:.4f}")
            for n in (500, 1000, 1500, 2000, 3000, 5000, 6000)}),
    Figure("benchmarks/alignment.md", "after one pass of {pass_ms:.1f} CPU ms per batch",
           {"pass_ms": Key("alignment_head_step_amd_epyc.json", "frozen_pass_cpu_ms_per_batch")}),
    Figure("benchmarks/alignment.md", "the best rule scores {best:.3f}, the rows shifted by two (the first whose "
                                      "query has read the word) {shifted:.3f}, the diagonal baseline {diagonal:.3f}",
           {name: Key("alignment_both_directions_amd_epyc.json", f"rows.{row}.aer")
            for name, row in (("best", 3), ("shifted", 2), ("diagonal", 12))}),
    Figure("benchmarks/alignment.md", "| unguided (the main command's run) | {bleu:.2f} | {pieces:.3f} | **{best:.3f}** (",
           {"bleu": Key("alignment_twelve_minute_amd_epyc.json", "rows.0.test_bleu"),
            "pieces": Key("alignment_twelve_minute_amd_epyc.json", "rows.0.aer"),
            "best": Key("alignment_twelve_minute_amd_epyc.json", "rows.1.aer")}),
    Figure("benchmarks/alignment.md", "--guided_alignment_decay=0.5` | **{bleu:.2f}** | {pieces:.3f} | {best:.3f} (",
           {"bleu": Key("alignment_twelve_minute_amd_epyc.json", "rows.18.test_bleu"),
            "pieces": Key("alignment_twelve_minute_amd_epyc.json", "rows.18.aer"),
            "best": Key("alignment_twelve_minute_amd_epyc.json", "rows.23.aer")}),
] + BENCHMARKS + ALIGNMENT
