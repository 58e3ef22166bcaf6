"""The registry of quoted figures that tests/test_figures.py checks: each `Figure` is a text with
``{name}`` fields, the page that quotes it, and where each field's value lives (a results file
under benchmarks/results/ and a dotted key into its JSON, or a `Computed` of such keys).

The figures are grouped by page and, within a page, by section, in the page's order.
"""

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


#: The run README's "Result" and its sample output quote (the main command, 12 minutes): the
#: quiet run of the main command, written by `benchmarks/twelve_minute_runs.py --summarize`. A
#: results file laid out as main_command_amd_epyc.json is read with `_main_command` instead.
HEADLINE = _summary_row("main_command_cgru_amd_epyc.json", "rows.0")
#: the same command at another seed, and at the paper's decoder cell, beside it
SECOND_SEED = _summary_row("main_command_cgru_amd_epyc.json", "rows.1")
PAPER_CELL = _summary_row("main_command_cgru_amd_epyc.json", "rows.3")
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
}


class Figure(NamedTuple):
    document: str
    text: str
    keys: dict


FIGURES = [
    # README.md: the Result, the sample output of the main command, the shipped model
    Figure("README.md", "the main command on a quiet 2-core {cpu}, {cpu_flags}, float32 + XLA, "
                        "{date}): **{updates:,}** updates in 12 minutes, test BLEU **{bleu:.2f}** "
                        "on the 2,051 test verses (beam 5), alignment error rate {aer:.3f} "
                        "([results file](benchmarks/results/{results_file}))", HEADLINE),
    Figure("README.md", "Updates {updates:,} Epochs {epochs:.2f} Wall time {wall_time}", HEADLINE),
    Figure("README.md", "(best {best_dev_nll:.3f} there)", HEADLINE),
    Figure("README.md", "A rerun on this release's code made **{updates:,}** updates, BLEU **{bleu:.2f}** "
                        "([results file](benchmarks/results/{results_file}))", RERUN),
    Figure("README.md", "English to Spanish, {updates:,} updates, test BLEU {bleu:.2f}", SHIPPED),
    # docs/translating.md: the shipped model's card
    Figure("docs/translating.md", "({updates:,} updates, seed {seed}", SHIPPED),
    Figure("docs/translating.md", "| {sentences:,} | {bleu:.2f} ({brevity_penalty:.3f}) | "
                                  "{chrf:.2f} | {aer:.3f} |", SHIPPED),
    # the quickstart notebook's shipped model
    Figure("colab/01_quickstart.ipynb", "English → Spanish, {updates:,} updates", SHIPPED),
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
    *[Figure("benchmarks/README.md", f"{label} | {{updates:,}} | {{tokens_per_second:,.0f}} | "
                                     f"{{best_dev_nll:.3f}} | {bold}{{bleu:.2f}}{bold} ({{brevity_penalty:.3f}}) |",
             _summary_row("twelve_minute_runs.json", f"{row}"))
      for label, bold, row in (("float32 + XLA (the default on every CPU)", "**", 3),
                               ("(`--precision=mixed_bfloat16 --nojit`)", "", 1), ("Xeon as AVX2 | float32 + XLA", "**", 5))],
    # the length penalty's dev sweep: the default preset's model
    Figure("benchmarks/README.md", "| {at_05:.2f} ({bp_05:.3f}) | **{at_10:.2f}** ({bp_10:.3f}) | | |",
           {"at_05": Key("length_penalty_dev_amd_epyc.json", "rows.12.dev_bleu"),
            "bp_05": Key("length_penalty_dev_amd_epyc.json", "rows.12.brevity_penalty"),
            "at_10": Key("length_penalty_dev_amd_epyc.json", "rows.13.dev_bleu"),
            "bp_10": Key("length_penalty_dev_amd_epyc.json", "rows.13.brevity_penalty")}),
    # the recipe's runs
    *[Figure("benchmarks/README.md", f"{label} | {{updates:,}} | {{best_dev_nll:.3f}} | {{dev_nll_at_end:.3f}} | "
                                     "{bleu:.2f} ({brevity_penalty:.3f}) | {aer:.3f} |",
             dict(_summary_row("recipe_runs_amd_epyc.json", f"rows.{row}"),
                  dev_nll_at_end=Key("recipe_runs_amd_epyc.json", f"rows.{row}.dev_nll_at_end")))
      for label, row in (("--schedule=plateau --average_at=best`", 1), ("`small`, no regularisation", 2),
                         ("`--preset=rnnsearch-cgru-small`, no regularisation", 3))],
    Figure("benchmarks/README.md", "| `--schedule=budget --max_length=80` | {updates:,} | {best_dev_nll:.3f} | "
                                   "{dev_nll_at_end:.3f} | **{bleu:.2f}** ({brevity_penalty:.3f}) | {aer:.3f} |",
           dict(_summary_row("recipe_budget_runs_amd_epyc.json", "rows.3"),
                dev_nll_at_end=Key("recipe_budget_runs_amd_epyc.json", "rows.3.dev_nll_at_end"))),
    Figure("benchmarks/README.md", "| {updates:,} | {epochs:.2f} | {tokens_per_second:,.0f} | "
                                   "{best_dev_nll:.3f} | {best_dev_nll:.3f} | **{bleu:.2f}** "
                                   "({brevity_penalty:.3f}) | {aer:.3f} |", BUDGET),
    Figure("benchmarks/README.md", "against {bleu:.2f} ({updates:,} updates, AER {aer:.3f})",
           _run("twelve_minute_before_after_amd_epyc.json", "rows.1")),
    # checkpoint averaging: at a constant rate, and in the default's run
    Figure("benchmarks/README.md", "ended at a dev NLL of {last:.3f} and its average reached {average:.3f}",
           {"last": Key("main_command_amd_epyc.json", "training.dev_nll"),
            "average": Key("main_command_amd_epyc.json", "averaged.dev_nll")}),
    Figure("benchmarks/README.md", "the average scored {average:.3f} against the last checkpoint's {last:.3f}",
           {"average": Key("main_command_cgru_amd_epyc.json", "rows.0.averaged.dev_nll"),
            "last": Key("main_command_cgru_amd_epyc.json", "rows.0.dev_nll_at_end")}),
    Figure("benchmarks/README.md", "| `bible-en-es-small` | {updates:,} | 2.262 | **{bleu:.2f}** "
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
    Figure("benchmarks/README.md", "{identical:,} of {sentences:,} translations on JAX",
           {"identical": Key("backend_agreement_three_backends_amd_epyc.json", "beams.5.torch.identical"),
            "sentences": Key("backend_agreement_three_backends_amd_epyc.json", "beams.5.torch.sentences")}),
    Figure("benchmarks/README.md", "| 29,472 | 4,003 | {full:.1f} / {lists:.1f} | **{speedup:.2f}x** |",
           {"full": Key("candidate_lists_30k.json", "sentences_per_second.full_softmax"),
            "lists": Key("candidate_lists_30k.json", "sentences_per_second.candidate_lists"),
            "speedup": Key("candidate_lists_30k.json", "speedup")}),
    Figure("benchmarks/README.md", "0.524 / 0.219 s (**{speedup:.2f}x**)",
           {"speedup": Key("sampled_softmax_amd_epyc.json", "results.0.speedup")}),
    # benchmarks/alignment.md: the default model's stages, the head's defaults, guided alignment
    *[Figure("benchmarks/alignment.md", f"| {{aer:.3f}}{bold} | {{precision:.3f}} | {{recall:.3f}} |",
             {field: Key("alignment_cgru_wider_ensembles_amd_epyc.json", f"rows.{row}.{field}")
              for field in ("aer", "precision", "recall")})
      for row, bold in ((0, ""), (2, ""), (9, ""), (12, ""), (15, ""), (19, ""), (26, ""), (45, ""))],
    *[Figure("benchmarks/alignment.md", f"| **{{aer:.3f}}** | {{precision:.3f}} | {{recall:.3f}} | "
                                        "**{punctuation:.3f}** | **{content:.3f}** |",
             {"aer": Key("alignment_cgru_wider_ensembles_amd_epyc.json", f"rows.{row}.aer"),
              "precision": Key("alignment_cgru_wider_ensembles_amd_epyc.json", f"rows.{row}.precision"),
              "recall": Key("alignment_cgru_wider_ensembles_amd_epyc.json", f"rows.{row}.recall"),
              "punctuation": Key("alignment_cgru_wider_ensembles_amd_epyc.json", f"rows.{row}.views.no-punctuation"),
              "content": Key("alignment_cgru_wider_ensembles_amd_epyc.json", f"rows.{row}.views.content-words")})
      for row in (40, 43)],
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
    # the conditional GRU's written-out backward pass against its scanned loop (first alternation)
    Figure("docs/training.md", "{after:.1f} against {before:.1f} ms per step", CGRU_BACKWARD),
]
