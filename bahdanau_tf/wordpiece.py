"""Learning a WordPiece vocabulary of an exact size from word counts (pure Python).

`bahdanau_tf.text.SubwordTokenizer.build` counts the words of its sentences
(`bahdanau_tf.text.count_words`) and hands the counts to `learn_wordpiece`, imported from here
only.
"""

from __future__ import annotations

import collections
from typing import Sequence

from bahdanau_tf.special_tokens import SPECIAL_TOKENS

__all__ = ["learn_wordpiece", "SUFFIX"]

#: the mark of a piece that continues a word (``"##ing"``), as tf-text's WordPiece op reads it
SUFFIX = "##"


def _piece_starts(word: str, pieces: set, longest: int) -> list[int] | None:
    """Where greedy longest-match-first WordPiece starts its pieces in ``word`` (None: it cannot)."""
    starts, start = [], 0
    while start < len(word):
        for end in range(min(len(word), start + longest), start, -1):
            if (word[start:end] if start == 0 else SUFFIX + word[start:end]) in pieces:
                break
        else:
            return None
        starts.append(start)
        start = end
    return starts


def learn_wordpiece(
    word_counts: dict,
    vocabulary_size: int,
    reserved_tokens: Sequence[str] = SPECIAL_TOKENS,
    iterations: int = 4,
    max_token_length: int = 50,
    max_unique_characters: int = 1000,
) -> list[str]:
    """A WordPiece vocabulary of exactly ``vocabulary_size`` tokens, learned from word counts.

    The algorithm of tf-text's ``wordpiece_tokenizer_learner_lib`` (the BERT recipe), with one
    change: it keeps the best pieces by *rank* instead of by a count threshold. Every
    character seen (of the ``max_unique_characters`` most frequent) is a token, alone and as
    a ``##`` suffix piece, so no word made of them is unknown. Then, ``iterations`` times:

    1. count every substring that can start a piece: at every position in the first round,
       later only where the current vocabulary's greedy longest-match segmentation starts
       a piece (non-initial pieces get the ``##`` prefix);
    2. from the longest substrings to the shortest, take each substring's count as final
       and subtract it from its prefixes (a prefix counts only where it is not the start of
       a longer substring);
    3. the vocabulary is the characters plus the highest-counting substrings, as many as fit
       in ``vocabulary_size`` (ties broken alphabetically).

    tf-text's learner keeps the substrings whose count passes a threshold and searches the
    threshold by bisection, one whole learning run per step (10-14 runs), and stops within 5%
    below the size or wherever the search space ends. Ranking gives the same vocabulary as the
    threshold that yields this size, in one run, at the exact size.

    Args:
        word_counts: dict (or Counter) word -> count, e.g. `count_words`.
        vocabulary_size: int, the size wanted, ``reserved_tokens`` included.
        reserved_tokens: the first ids, in order (default: the special tokens).
        iterations: int, rounds of segmentation and counting (4, as tf-text).
        max_token_length: int, longer words are not learned from (50, as tf-text).
        max_unique_characters: int, the alphabet size (1000, as tf-text): words with rarer
            characters are not learned from (they become [UNK]).

    Returns:
        list of str: the reserved tokens, the characters, the learned pieces (most frequent
        first), the ``##`` characters. Shorter than ``vocabulary_size`` only when the words
        hold fewer distinct pieces; longer only when the characters alone need more.
    """
    reserved = list(reserved_tokens)
    words = [(w, c) for w, c in word_counts.items() if 0 < len(w) <= max_token_length and w not in reserved and c > 0]
    character_counts: collections.Counter = collections.Counter()
    for word, count in words:
        for character in word:
            character_counts[character] += count
    alphabet = sorted(character_counts, key=lambda ch: (-character_counts[ch], ch))[:max_unique_characters]
    allowed = set(alphabet)
    words = [(w, c) for w, c in words if allowed.issuperset(w)]
    characters = sorted({character for word, _ in words for character in word})
    base = list(dict.fromkeys(reserved + characters + [SUFFIX + ch for ch in characters]))
    budget = vocabulary_size - len(base)
    chosen: list[str] = []
    for iteration in range(iterations if budget > 0 else 0):
        pieces = set(base) | set(chosen)
        longest = max(map(len, pieces))
        counts: list[dict] = [{} for _ in range(max_token_length + 1)]  # by length without ##
        for word, count in words:
            starts = range(len(word)) if iteration == 0 else _piece_starts(word, pieces, longest)
            if starts is None:
                continue
            for start in starts:
                prefix = SUFFIX if start else ""
                for end in range(start + 1, len(word) + 1):
                    table = counts[end - start]
                    token = prefix + word[start:end]
                    table[token] = table.get(token, 0) + count
        ranked = []
        for length in range(max_token_length, 0, -1):
            for token, count in counts[length].items():
                ranked.append((token, count))
                # the prefixes of this substring did not start a piece of their own here
                offset = len(token) - length  # 2 for a ## piece
                for end in range(offset + 1, len(token)):
                    table = counts[end - offset]
                    head = token[:end]
                    if head in table:
                        table[head] -= count
        taken = set(base)
        ranked = [(t, c) for t, c in ranked if c > 0 and t not in taken]
        ranked.sort(key=lambda item: (-item[1], item[0]))
        chosen = [token for token, _ in ranked[:budget]]
    suffixes = [token for token in base[len(reserved):] if token.startswith(SUFFIX) and len(token) > 2]
    singles = [token for token in base[len(reserved):] if token not in set(suffixes)]
    return reserved + singles + chosen + suffixes
