"""The default's quality over the training budget: test BLEU and dev NLL against the minutes.

Reads a results file of `twelve_minute_runs.py --summarize` whose rows are runs of the default
at several ``--max_minutes`` (``training.max_minutes`` of each row), prints one line per budget
(updates, epochs, the budget rule's dropout, dev NLL at its best and at the end, test BLEU) with
the curve's two checks, and draws the curve as a PNG:

- **rising**: each longer budget's test BLEU is at least the shorter one's (the mean of the
  seeds where a budget has several);
- **no tail**: every run's dev NLL at the end within 1% of its best;
- **no overfitting**: no run's dev NLL more than 2% above its running best at any evaluation
  after its first epoch (``worst_rise_after_first_epoch``);
- **true plans**: every plan of the budget rule (its fewest and most epochs) within 10% of the
  epochs the run made (runs whose report predates the fewest/most record: their first and
  last plan).

    python benchmarks/budget_curve.py \\
        --results=benchmarks/results/budget_curve_one_core_amd_epyc.json \\
        --png=benchmarks/results/budget_curve_one_core_amd_epyc.png --how="one core per run"
"""

import json
import os
import statistics
import textwrap

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("results", None, "A results JSON of `twelve_minute_runs.py --summarize`.")
flags.DEFINE_string("png", None, "Where to draw the curve (default: the results file's name, .png).")
flags.DEFINE_string("how", "", "How the runs were made, for the figure's title (the results file "
                    "records the machine, not the cores a run was pinned to).")

#: how far above its best a run's dev NLL may end; rise at any evaluation after the first
#: epoch; and how far from the epochs made the budget rule may plan
TAIL, RISE, PLAN = 0.01, 0.02, 0.10


def curve(rows):
    """``[(minutes, [rows of that budget])]``, shortest budget first."""
    budgets = {}
    for row in rows:
        budgets.setdefault(float(row["training"]["max_minutes"]), []).append(row)
    return sorted(budgets.items())


def plan_error(row):
    """The budget rule's plan furthest from the epochs the run made, as a share of them (None
    without a plan)."""
    rule = row.get("regularization") or {}
    plans = [rule.get(key) for key in ("fewest_planned_epochs", "most_planned_epochs", "first_planned_epochs",
                                       "planned_epochs")]
    plans = [plan for plan in plans if plan is not None]
    return max(abs(plan / row["epochs"] - 1) for plan in plans) if plans else None


def checks(points):
    """``{"rising", "no_tail", "no_overfitting", "true_plans"}`` (bools) of `curve`'s points."""
    rows = [row for _, budget_rows in points for row in budget_rows]
    means = [statistics.mean(row["bleu"] for row in budget_rows) for _, budget_rows in points]
    return {"rising": all(a <= b for a, b in zip(means, means[1:])),
            "no_tail": all(row["dev_nll_at_end"] <= (1 + TAIL) * row["best_dev_nll"] for row in rows),
            "no_overfitting": all((row.get("worst_rise_after_first_epoch") or 0.0) <= RISE for row in rows),
            "true_plans": all((plan_error(row) or 0.0) <= PLAN for row in rows)}


def draw(points, path, title):
    """Test BLEU (each seed, and their mean) and the best and final dev NLL against the minutes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 3.4))
    FigureCanvasAgg(figure)
    bleu_axes, nll_axes = figure.subplots(1, 2)
    minutes = [budget for budget, _ in points]
    for budget, rows in points:
        bleu_axes.scatter([budget] * len(rows), [row["bleu"] for row in rows], color="tab:blue", s=14)
    bleu_axes.plot(minutes, [statistics.mean(row["bleu"] for row in rows) for _, rows in points],
                   color="tab:blue")
    bleu_axes.set(xscale="log", xlabel="budget (minutes)", ylabel="test BLEU", title="test BLEU")
    for key, label, style in (("best_dev_nll", "best", "-"), ("dev_nll_at_end", "at the end", "--")):
        nll_axes.plot(minutes, [statistics.mean(row[key] for row in rows) for _, rows in points],
                      style, label=label, color="tab:orange")
    nll_axes.set(xscale="log", xlabel="budget (minutes)", ylabel="dev NLL", title="dev NLL")
    nll_axes.legend()
    for axes in (bleu_axes, nll_axes):
        axes.minorticks_off()
        axes.set(xticks=minutes, xticklabels=[f"{m:g}" for m in minutes])
    figure.suptitle(textwrap.fill(title, 100), fontsize=9)  # a long title on two lines
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv):
    del argv
    if not FLAGS.results:
        raise app.UsageError("--results is required.")
    with open(FLAGS.results) as handle:
        record = json.load(handle)
    points = curve(record["rows"])
    for budget, rows in points:
        for row in rows:
            rule = row.get("regularization") or {}
            print(f"{budget:>4g} min  seed {row['training']['seed']:>5}  {row['updates']:>5,} updates  "
                  f"{row['epochs']:5.2f} epochs  dropout {rule.get('dropout', 0):g}  "
                  f"dev NLL best {row['best_dev_nll']:.3f} end {row['dev_nll_at_end']:.3f} "
                  f"worst rise {100 * (row.get('worst_rise_after_first_epoch') or 0.0):.1f}%  "
                  f"plans off by {100 * (plan_error(row) or 0.0):.1f}%  test BLEU {row['bleu']:.2f}")
    print(json.dumps(checks(points)))
    path = FLAGS.png or os.path.splitext(FLAGS.results)[0] + ".png"
    first = record["rows"][0]
    how = f", {FLAGS.how}" if FLAGS.how else ""
    draw(points, path, f"{first['preset']}, {first['cpu']}{how}, {record['date'][:10]}")
    print(f"Wrote {path}")


if __name__ == "__main__":
    app.run(main)
