"""The extraction rule chosen on a dev split's gold, and saved with the model.

Which `ExtractionRule` turns a model's attention into the best links depends on the model (a
threshold that leaves diffuse rows unaligned, a shift for the paper's cell, ``"first"``
pooling for a head...): a fixed rule leaves AER on the table. Here the rule is the one of
lowest AER on the gold of a dev split, over a grid of rules (`RuleGrid`):

- :func:`links_of_rules`, :func:`both_direction_links`: the links of every rule of a grid, each
  sentence pooled once per (pooling, shift);
- :func:`choose_rule` (one direction) and :func:`choose_symmetrization` (a forward and a
  reverse model's attention made one, `bahdanau_tf.alignment.symmetrization`): the rule of
  lowest dev AER, as a `ChosenRule`;
- :func:`choose_on_dev`: all of it for a `Translator` (handed in) on a corpus's dev split;
  without gold on that split, `DEFAULT_RULE`, and the choice says so;
- :func:`save_chosen_rule`, :func:`read_chosen_rule`: the choice in ``model.json``
  (``"alignment"``, `bahdanau_tf.model_directory.tag_model_config`), where ``bahdanau-train``
  (at the end of a run), ``bahdanau-alignment-head`` and ``bahdanau-evaluate
  --choose_alignment_rule`` write it and ``bahdanau-evaluate`` and ``bahdanau-translate
  --alignments`` read it.

``benchmarks/alignment.py`` scores the same choices on the test gold beside eflomal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from bahdanau_tf import model_directory
from bahdanau_tf.alignment.error_rate import alignment_scores, gold_links
from bahdanau_tf.alignment.extraction import (DEFAULT_RULE, POOLINGS, ExtractionRule, attention_links,
                                              best_links, token_word_ids, word_attention)
from bahdanau_tf.alignment.symmetrization import (SYMMETRIZATIONS, average_word_attention, bidirectional_links,
                                                 symmetrize)

#: the key of ``model.json`` that holds a `ChosenRule`
ALIGNMENT_KEY = "alignment"
#: the link symmetrizations `choose_symmetrization` tries besides ``"average"``
LINK_METHODS = ("intersection", "grow-diag-final-and")


@dataclasses.dataclass(frozen=True)
class RuleGrid:
    """The rules tried on dev: every pooling x shift x mutual x threshold.

    Example:

        >>> len(RuleGrid().rules()), str(RuleGrid(thresholds=(0.3,), shifts=(1,)).rules()[1])
        (384, 'pieces+shift1+mutual>0.3')
    """

    poolings: tuple = POOLINGS
    thresholds: tuple = tuple(t / 20 for t in range(16))
    shifts: tuple = (0, 1, 2)
    mutual: tuple = (False, True)
    #: the thresholds of the link symmetrizations (slow: each symmetrizes every sentence)
    link_thresholds: tuple = (0.0, 0.1, 0.2, 0.3, 0.4)

    def rules(self) -> list[ExtractionRule]:
        return [ExtractionRule(pooling, float(threshold), int(shift), mutual)
                for pooling in self.poolings for shift in self.shifts for mutual in self.mutual
                for threshold in self.thresholds]


@dataclasses.dataclass(frozen=True)
class ChosenRule:
    """How a model's attention becomes links: a rule, one direction or both made one.

    Attributes:
        rule: the `ExtractionRule`.
        symmetrization: None for one direction, else how a reverse model's attention is made
            one with it (`bahdanau_tf.alignment.SYMMETRIZATIONS`).
        dev_aer: the AER of ``rule`` on the dev gold, None when not chosen (the default rule).
        default_dev_aer: `DEFAULT_RULE`'s AER on the same gold (one direction).
        dev_sentences: the dev sentences with gold it was chosen on.
        corpus: the corpus whose dev split it was chosen on.
    """

    rule: ExtractionRule = DEFAULT_RULE
    symmetrization: str | None = None
    dev_aer: float | None = None
    default_dev_aer: float | None = None
    dev_sentences: int = 0
    corpus: str | None = None

    @property
    def chosen(self) -> bool:
        return self.dev_aer is not None

    def describe(self) -> str:
        """One line on where the rule comes from (what the commands print)."""
        what = f"rule {self.rule}" + (f", both directions {self.symmetrization}"
                                      if self.symmetrization else "")
        if not self.chosen:
            return f"{what}, the default (not chosen on a dev gold)"
        default = ("" if self.default_dev_aer is None
                   else f"; the default rule {DEFAULT_RULE}: {self.default_dev_aer:.3f}")
        return (f"{what}, chosen on the dev gold of {self.corpus or 'the corpus'} "
                f"({self.dev_sentences:,} sentences, dev AER {self.dev_aer:.3f}{default})")

    def links(self, forward: Sequence, reverse: Sequence | None = None) -> list[set]:
        """The links of ``forward`` (`Translator.reference_attention` alignments), made one with
        ``reverse`` (the reverse model's, reading the pairs the other way) when the choice is
        of both directions."""
        if self.symmetrization is None:
            return attention_links(forward, self.rule)
        if reverse is None:
            raise ValueError(f"the rule {self.rule} is of both directions "
                             f"({self.symmetrization}): a reverse model's attention is needed.")
        return bidirectional_links(forward, reverse, self.symmetrization, self.rule)

    def to_dict(self) -> dict:
        return {"rule": str(self.rule), "symmetrization": self.symmetrization,
                "dev_aer": self.dev_aer, "default_dev_aer": self.default_dev_aer,
                "dev_sentences": self.dev_sentences, "corpus": self.corpus}

    @classmethod
    def from_dict(cls, record: dict) -> "ChosenRule":
        """The inverse of `to_dict`. Raises ValueError on a record that is not one."""
        if not isinstance(record, dict) or not isinstance(record.get("rule"), str):
            raise ValueError(f"not a chosen alignment rule: {record!r}")
        number = lambda value: isinstance(value, (int, float)) and not isinstance(value, bool)  # noqa: E731
        kinds = {"dev_aer": (lambda value: value is None or number(value), "a number or null"),
                 "default_dev_aer": (lambda value: value is None or number(value), "a number or null"),
                 "dev_sentences": (lambda value: isinstance(value, int) and not isinstance(value, bool)
                                   and value >= 0, "a whole number"),
                 "corpus": (lambda value: value is None or isinstance(value, str), "a name or null"),
                 "symmetrization": (lambda value: value is None or value in SYMMETRIZATIONS,
                                    f"one of {', '.join(SYMMETRIZATIONS)} or null")}
        for key, (fits, what) in kinds.items():
            if key in record and not fits(record[key]):
                raise ValueError(f"{key!r} is {record[key]!r}, not {what}")
        fields = {f.name for f in dataclasses.fields(cls)} - {"rule"}
        return cls(ExtractionRule.parse(record["rule"]),
                   **{k: v for k, v in record.items() if k in fields})


def _word_matrices(alignments, pooling, shift):
    return [word_attention(a.attention, token_word_ids(a.source_tokens),
                           token_word_ids(a.target_tokens), pooling, shift) for a in alignments]


def links_of_rules(alignments: Sequence, rules: Sequence[ExtractionRule], transpose: bool = False
                   ) -> dict[str, list[set]]:
    """{str(rule): links of every alignment}, the same as `attention_links` rule by rule, each
    sentence pooled once per (pooling, shift); ``transpose``: a reverse model's alignments,
    its links turned into (source, target) ones of the forward direction."""
    found = {}
    for pooling, shift in dict.fromkeys((r.pooling, r.shift) for r in rules):
        group = [r for r in rules if (r.pooling, r.shift) == (pooling, shift)]
        if pooling == "pieces":
            for rule in group:
                found[str(rule)] = attention_links(alignments, rule)
            continue
        matrices = _word_matrices(alignments, pooling, shift)
        for rule in group:
            found[str(rule)] = [{(s, t) for t, s in best_links(words, null, rule.threshold, rule.mutual)}
                                for words, null in matrices]
    if transpose:
        found = {rule: [{(t, s) for s, t in links} for links in corpus] for rule, corpus in found.items()}
    return found


def _averaged_links(forward, reverse, rules):
    """{str(rule): links} of the mean of both directions' word matrices (word poolings)."""
    found = {}
    for pooling, shift in dict.fromkeys((r.pooling, r.shift) for r in rules if r.pooling != "pieces"):
        means = [average_word_attention(f[0], r[0]) for f, r in zip(
            _word_matrices(forward, pooling, shift), _word_matrices(reverse, pooling, shift))]
        for rule in rules:
            if (rule.pooling, rule.shift) == (pooling, shift):
                found[str(rule)] = [{(s, t) for t, s in best_links(mean, None, rule.threshold, rule.mutual)}
                                    for mean in means]
    return found


def both_direction_links(forward: Sequence, reverse: Sequence, link_rules: Sequence[ExtractionRule],
                         average_rules: Sequence[ExtractionRule]) -> dict[str, dict[str, list[set]]]:
    """{method: {str(rule): links}} of both directions made one: each of `LINK_METHODS` over
    ``link_rules`` (both directions extracted by the same rule), ``"average"`` over
    ``average_rules`` (word poolings only)."""
    f_links = links_of_rules(forward, link_rules)
    r_links = links_of_rules(reverse, link_rules, transpose=True)
    found = {method: {rule: [symmetrize(f, r, method) for f, r in zip(f_links[rule], r_links[rule])]
                      for rule in f_links} for method in LINK_METHODS}
    found["average"] = _averaged_links(forward, reverse, average_rules)
    return found


def dev_aers(links_by_rule: dict, sure: Sequence, possible: Sequence) -> dict[str, float]:
    """{rule: AER} of `links_of_rules`'s links against the gold (4 decimals)."""
    return {rule: round(alignment_scores(links, sure, possible).aer, 4)
            for rule, links in links_by_rule.items()}


def best_rule(aers: dict[str, float], keep: Callable[[str], bool] = lambda rule: True) -> str | None:
    """The rule of lowest AER among those ``keep`` accepts (the first on ties); None if none."""
    return min((r for r in aers if keep(r)), key=aers.get, default=None)


def choose_rule(alignments: Sequence, sure: Sequence, possible: Sequence, grid: RuleGrid | None = None,
                transpose: bool = False, corpus: str | None = None) -> ChosenRule:
    """The rule of ``grid`` (default `RuleGrid()`) of lowest AER of ``alignments`` against
    the gold ``sure`` and ``possible`` (one set per alignment); ``transpose`` as in
    `links_of_rules`."""
    rules = list((grid or RuleGrid()).rules())
    if DEFAULT_RULE not in rules:
        rules.append(DEFAULT_RULE)
    aers = dev_aers(links_of_rules(alignments, rules, transpose), sure, possible)
    rule = best_rule(aers)
    return ChosenRule(ExtractionRule.parse(rule), None, aers[rule], aers[str(DEFAULT_RULE)],
                      len(sure), corpus)


def choose_symmetrization(forward: Sequence, reverse: Sequence, sure: Sequence, possible: Sequence,
                          grid: RuleGrid | None = None, corpus: str | None = None) -> ChosenRule:
    """The symmetrization and rule of lowest AER of both directions made one (the link methods
    over the grid's non-mutual rules at its ``link_thresholds``, ``"average"`` over all its
    word-pooling rules)."""
    grid = grid or RuleGrid()
    link_rules = [r for r in grid.rules() if not r.mutual and r.threshold in grid.link_thresholds]
    found = both_direction_links(forward, reverse, link_rules, grid.rules())
    aers = {(method, rule): aer for method, links in found.items()
            for rule, aer in dev_aers(links, sure, possible).items()}
    method, rule = min(aers, key=aers.get)
    default = round(alignment_scores(attention_links(forward, DEFAULT_RULE), sure, possible).aer, 4)
    return ChosenRule(ExtractionRule.parse(rule), method, aers[method, rule], default, len(sure), corpus)


def dev_gold(corpus, limit: int | None = None):
    """``(the pairs with gold, sure, possible)`` of a `ParallelCorpus`, at most ``limit``
    pairs; None when it has no gold link (`gold_links`)."""
    if getattr(corpus, "alignments", None) is None:
        return None
    indices, sure, possible = gold_links(corpus.alignments, corpus.sure_alignments)
    indices = indices[:limit] if limit else indices
    if not indices:
        return None
    return corpus.select(indices), sure[: len(indices)], possible[: len(indices)]


def choose_on_dev(translator, corpus, reverse_translator=None, grid: RuleGrid | None = None,
                  limit: int | None = None, batch_size: int = 64) -> ChosenRule:
    """The rule of lowest AER of ``translator``'s teacher-forced attention on the gold of
    ``corpus`` (a dev split); with ``reverse_translator`` (a model of the other direction)
    the best of one direction and both directions made one. Without gold: `DEFAULT_RULE`,
    not chosen (`ChosenRule.chosen` is False).

    Args:
        translator: a `bahdanau_tf.translator.Translator` with attention.
        corpus: a `bahdanau_tf.corpora.ParallelCorpus`, e.g. the dev split.
        reverse_translator: optional, a `Translator` of the other direction.
        grid: the rules tried (default `RuleGrid()`).
        limit: int, at most this many pairs with gold.
        batch_size: int, pairs per graph call.
    """
    gold = dev_gold(corpus, limit)
    if gold is None:
        return ChosenRule()
    pairs, sure, possible = gold
    name = getattr(corpus, "name", None) or None
    forward = translator.reference_attention(pairs.sources, pairs.targets, batch_size=batch_size)
    choice = choose_rule(forward, sure, possible, grid, corpus=name)
    if reverse_translator is None:
        return choice
    reverse = reverse_translator.reference_attention(pairs.targets, pairs.sources, batch_size=batch_size)
    both = choose_symmetrization(forward, reverse, sure, possible, grid, corpus=name)
    return both if both.dev_aer < choice.dev_aer else choice


def save_chosen_rule(directory: str, choice: ChosenRule) -> None:
    """Records ``choice`` (one direction: a saved rule is read without a reverse model) in
    ``directory``'s ``model.json``."""
    if choice.symmetrization is not None:
        raise ValueError("a rule of both directions is not saved with one model.")
    model_directory.tag_model_config(directory, ALIGNMENT_KEY, choice.to_dict())


def read_chosen_rule(directory: str) -> ChosenRule:
    """The `ChosenRule` saved with a model directory; `ChosenRule()` (the default rule, not
    chosen) when there is none, or for a ``.keras`` file.

    Raises:
        ValueError: a saved record that is not a rule (the directory named).
    """
    if model_directory.is_keras_file(directory):
        return ChosenRule()
    record = model_directory.read_model_config(directory).get(ALIGNMENT_KEY)
    if record is None:
        return ChosenRule()
    try:
        return ChosenRule.from_dict(record)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{directory!r}: model.json's {ALIGNMENT_KEY!r}: {error}") from None


__all__ = ["ALIGNMENT_KEY", "LINK_METHODS", "ChosenRule", "RuleGrid", "best_rule", "both_direction_links",
           "choose_on_dev", "choose_rule", "choose_symmetrization", "dev_aers", "dev_gold",
           "links_of_rules", "read_chosen_rule", "save_chosen_rule"]
