"""Tests for bahdanau_tf.alignment.views: the same links scored without punctuation
or on content words only, against a hand-made gold."""

import doctest

import pytest

from bahdanau_tf import alignment
from bahdanau_tf.alignment import views as alignment_views


def test_doctests():
    assert doctest.testmod(alignment_views).failed == 0


SOURCE = "And God said: the light is good."    # And God said : the light is good .
TARGET = "Y dijo Dios: la luz es buena."       # Y dijo Dios : la luz es buena .
SURE = [{(0, 0), (1, 2), (2, 1), (3, 3), (5, 5), (7, 7), (8, 8)}]
POSSIBLE = [{(4, 4), (6, 6), (4, 5)}]
# right: God-Dios, said-dijo, light-luz, the-la (possible); wrong: good-es; ":" and "." linked
PREDICTED = [{(1, 2), (2, 1), (5, 5), (4, 4), (7, 6), (3, 3), (8, 8)}]


def _aer(view):
    def cut(links):
        return alignment.corpus_view(links, [SOURCE], [TARGET], view)

    return alignment.alignment_error_rate(cut(PREDICTED), cut(SURE), cut(POSSIBLE))


def test_views_of_a_hand_made_gold():
    # all: A = 7, S = 7, |A∩S| = 5 (God, said, light, ":", "."), |A∩P| = 6 (+ the-la)
    assert _aer("all") == pytest.approx(1 - (5 + 6) / (7 + 7))
    # no punctuation: A = 5, S = 5 (And-Y, God, said, light, good), |A∩S| = 3, |A∩P| = 4
    assert _aer("no-punctuation") == pytest.approx(1 - (3 + 4) / (5 + 5))
    # content words: And, the, is / Y, la, es go too: A = {God, said, light} = S minus good
    assert _aer("content-words") == pytest.approx(1 - (3 + 3) / (3 + 4))


def test_view_links_keeps_only_links_between_kept_words():
    words = (["the", "Lord", ",", "¡"], ["el", "Señor", "…"])
    links = {(0, 0), (1, 1), (2, 2), (3, 1), (1, 0)}
    assert alignment.view_links(links, *words, "all") == links
    assert alignment.view_links(links, *words, "no-punctuation") == {(0, 0), (1, 1), (1, 0)}
    assert alignment.view_links(links, *words, "content-words") == {(1, 1)}
    # a language without a closed-class list drops punctuation only
    assert alignment.view_links(links, *words, "content-words", ("xx", "yy")) == {
        (0, 0), (1, 1), (1, 0)}
    with pytest.raises(ValueError, match="view"):
        alignment.view_links(links, *words, "nouns")
    with pytest.raises(ValueError, match="1 alignments"):
        alignment.corpus_view([links], [], [], "all")
