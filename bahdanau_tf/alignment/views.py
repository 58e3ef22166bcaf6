"""Views of an alignment score: the same links and gold, some words left out of both.

The Bible's gold (Strong's numbers, ``scripts/build_bible_corpus.py``) never links a punctuation
token and often links a function word on one side to a content word on the other, where a
conventional aligner would not. Scoring every system on a view of the same links tells whether
a difference comes from those conventions:

- ``"all"``: every link (the headline);
- ``"no-punctuation"``: links touching a punctuation token dropped, from the prediction and the
  gold alike;
- ``"content-words"``: also links touching a closed-class word (determiner, pronoun, preposition,
  conjunction, auxiliary verb; `CLOSED_CLASS` lists them per language) dropped.

Words are :func:`bahdanau_tf.text.split_words` words; links are ``(source_word, target_word)``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence

from bahdanau_tf.text import split_words

Link = tuple[int, int]

VIEWS = ("all", "no-punctuation", "content-words")

#: lower-cased closed-class words per language code (the corpus's English and Spanish)
CLOSED_CLASS = {
    "en": frozenset("""
        a an the this that these those some any each every no all both either neither such what
        which who whom whose i me my mine myself we us our ours ourselves you your yours yourself
        yourselves thou thee thy thine ye he him his himself she her hers herself it its itself
        they them their theirs themselves of in on at by for with from to into onto upon unto out
        over under about above below through against among between before after during without
        within toward towards until till since up down off near beside beyond behind across
        along around and or but nor so yet if then than because though although unless while
        whether as also not be am is are was were been being have has had having do does did
        shall should will would may might must can could there here where when how why thus
        hath doth art shalt wilt""".split()),
    "es": frozenset("""
        el la los las lo un una unos unas este esta estos estas ese esa esos esas aquel aquella
        aquellos aquellas esto eso aquello mi mis tu tus su sus nuestro nuestra nuestros nuestras
        vuestro vuestra vuestros vuestras yo me mí conmigo tú te ti contigo él ella ello ellos
        ellas le les se sí consigo nos nosotros nosotras os vosotros vosotras que quien quienes
        cual cuales cuyo cuya cuyos cuyas de del a al en con por para sin sobre entre hasta desde
        hacia contra ante bajo tras según y e o u ni pero mas empero sino aunque porque pues si
        como cuando donde mientras no también ya ser es son era eran fue fueron sido siendo sea
        sean soy eres somos estar está están estaba haber he ha han había habían hay hubo habrá
        será serán muy más menos tan cada todo toda todos todas otro otra otros otras mismo
        misma mismos mismas""".split()),
}


def is_punctuation(word: str) -> bool:
    """True for a token with no letter, digit or mark (what `split_words` splits off alone).

    Example:

        >>> [is_punctuation(w) for w in ["God", ",", "¿", "3"]]
        [False, True, True, False]
    """
    return not any(unicodedata.category(c)[0] in "LNM" for c in word)


def _kept_words(words: Sequence[str], view: str, language: str) -> set[int]:
    """The indices of the words a view keeps."""
    closed = CLOSED_CLASS.get(language, frozenset()) if view == "content-words" else frozenset()
    return {i for i, w in enumerate(words) if not is_punctuation(w) and w.lower() not in closed}


def view_links(links: Iterable[Link], source_words: Sequence[str], target_words: Sequence[str],
               view: str, languages: tuple[str, str] = ("en", "es")) -> set[Link]:
    """One sentence's links in a view: those whose two words the view keeps.

    Args:
        links: ``(source_word, target_word)`` pairs.
        source_words, target_words: the sentence's words (:func:`split_words`).
        view: one of `VIEWS`.
        languages: the (source, target) language codes of `CLOSED_CLASS`; a language it does
            not list drops punctuation only.

    Example:

        >>> sorted(view_links({(0, 0), (1, 1), (2, 2)}, ["the", "Lord", "."],
        ...                   ["el", "Señor", "."], "content-words"))
        [(1, 1)]
    """
    if view not in VIEWS:
        raise ValueError(f"`view` must be one of {VIEWS}, got {view!r}.")
    if view == "all":
        return set(links)
    source = _kept_words(source_words, view, languages[0])
    target = _kept_words(target_words, view, languages[1])
    return {(s, t) for s, t in links if s in source and t in target}


def corpus_view(alignments: Sequence[Iterable[Link]], sources: Sequence[str],
                targets: Sequence[str], view: str, languages: tuple[str, str] = ("en", "es")
                ) -> list[set[Link]]:
    """:func:`view_links` of every sentence (sentences as strings, split by `split_words`):
    apply it to the prediction, the sure and the possible gold alike, then score."""
    if not len(alignments) == len(sources) == len(targets):
        raise ValueError(f"{len(alignments)} alignments, {len(sources)} sources, "
                         f"{len(targets)} targets.")
    return [view_links(links, split_words(s), split_words(t), view, languages)
            for links, s, t in zip(alignments, sources, targets)]


__all__ = ["CLOSED_CLASS", "VIEWS", "corpus_view", "is_punctuation", "view_links"]
