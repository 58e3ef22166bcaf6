#!/usr/bin/env python3
"""Builds the shipped English-Spanish Bible corpus from Debian's SWORD modules.

Run once (no network), from the repository root:

    apt-get install diatheke sword-text-web sword-text-sparv
    python scripts/build_bible_corpus.py            # writes bahdanau_tf/corpora/bible-en-es.tsv.gz

Sources: World English Bible (module ``engWEB2015eb``) and Reina-Valera 1909 (module
``spaRV1909eb``), both public domain. Only the 66 books both modules carry are used.

What the script does, verse by verse:

1. reads both modules' raw OSIS markup with ``diatheke -f internal`` over the whole range
   ``Gen 1:1-Rev 22:21`` (one call per module; diatheke repeats the last pre-verse heading in
   front of every following verse of a range, so headings are read separately, see 3);
2. strips the markup: ``<w savlm="strong:H0430">God</w>`` keeps its text and remembers the
   Strong's numbers of every character; ``<transChange>`` (words added by the translators)
   keeps its text; the glossary and introduction divisions after Revelation 22:21 are
   dropped; where removing a tag would glue two words ("born</q><q><w>Son" -> "bornSon",
   "allí</w><transChange>también") a space is put back;
3. the WEB carries a psalm's canonical superscription ("A Psalm by David ...") as a heading,
   while the RV1909 has it inside verse 1; the WEB heading (read with one diatheke call for
   ``Ps N:1``) is therefore put at the start of English verse 1, so both sides say the same;
4. normalises typography: curly quotes to ``"`` and ``'``, every run of whitespace to one
   space, Unicode NFC;
5. pairs the verses of each book. Most verse numbers hold translations of each other, but
   the RV1909 module files some chapters under Spanish verse numbers (its Jonah 2:1 is the
   WEB's Jonah 1:17; Numbers 13, 1 Samuel 24, 1 Chronicles 21, 2 Chronicles 33, Job 39,
   Hosea 12, ... shift by one and leave a verse empty). A word-association lexicon learned
   from all same-number pairs scores candidate pairs, and a banded monotone alignment
   (:func:`align_verses`) re-pairs shifted chapters; verses empty in either module or
   left without a partner are dropped;
6. derives the gold word alignment for dev and test: English word i and Spanish word j
   (words as :func:`bahdanau_tf.text.split_words` splits them) are linked when they carry
   a common Strong's number; a tag over a phrase ("de las aguas") links every word in it;
   punctuation tokens are never linked. A link is *sure* when its number tags one phrase on
   each side, *possible* when the number recurs in the verse (see :func:`align`). Verses
   whose English and Spanish Strong's numbers barely overlap (Jaccard < 0.3: the WEB puts
   its tags under Hebrew verse numbers in psalms with superscriptions and in a few
   chapters) get no gold;
7. splits by chapter (:data:`bahdanau_tf.corpora.BIBLE_SPLIT_RULE`): with the 1,189 chapters
   numbered 0..1188 in canonical order (Genesis 1 = 0, Revelation 22 = 1188), chapter c is
   ``test`` when ``c % 16 == 8``, ``dev`` when ``c % 32 == 4``, ``train`` otherwise
   (the English verse number decides).

Output: a gzip TSV with a header line and the columns ``id es_id split en es alignment``:
``id`` is the WEB verse (``Gen 1:1``), ``es_id`` the RV1909 verse paired with it (differs in
re-paired chapters), ``alignment`` is, for dev and test, ``"i-j i?j ..."`` over English (i)
and Spanish (j) word indices with ``-`` for a sure and ``?`` for a possible link, or a lone
``-`` for no reliable gold; it is empty for train.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import os
import re
import subprocess
import sys
import unicodedata

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bahdanau_tf.corpora import bible_split  # noqa: E402
from bahdanau_tf.text import split_words  # noqa: E402

ENGLISH_MODULE = "engWEB2015eb"
SPANISH_MODULE = "spaRV1909eb"
RANGE = "Gen 1:1-Rev 22:21"

# (diatheke's English book name, OSIS id, number of chapters), in canonical order.
BOOKS = [
    ("Genesis", "Gen", 50), ("Exodus", "Exod", 40), ("Leviticus", "Lev", 27),
    ("Numbers", "Num", 36), ("Deuteronomy", "Deut", 34), ("Joshua", "Josh", 24),
    ("Judges", "Judg", 21), ("Ruth", "Ruth", 4), ("I Samuel", "1Sam", 31),
    ("II Samuel", "2Sam", 24), ("I Kings", "1Kgs", 22), ("II Kings", "2Kgs", 25),
    ("I Chronicles", "1Chr", 29), ("II Chronicles", "2Chr", 36), ("Ezra", "Ezra", 10),
    ("Nehemiah", "Neh", 13), ("Esther", "Esth", 10), ("Job", "Job", 42),
    ("Psalms", "Ps", 150), ("Proverbs", "Prov", 31), ("Ecclesiastes", "Eccl", 12),
    ("Song of Solomon", "Song", 8), ("Isaiah", "Isa", 66), ("Jeremiah", "Jer", 52),
    ("Lamentations", "Lam", 5), ("Ezekiel", "Ezek", 48), ("Daniel", "Dan", 12),
    ("Hosea", "Hos", 14), ("Joel", "Joel", 3), ("Amos", "Amos", 9), ("Obadiah", "Obad", 1),
    ("Jonah", "Jonah", 4), ("Micah", "Mic", 7), ("Nahum", "Nah", 3), ("Habakkuk", "Hab", 3),
    ("Zephaniah", "Zeph", 3), ("Haggai", "Hag", 2), ("Zechariah", "Zech", 14),
    ("Malachi", "Mal", 4), ("Matthew", "Matt", 28), ("Mark", "Mark", 16),
    ("Luke", "Luke", 24), ("John", "John", 21), ("Acts", "Acts", 28),
    ("Romans", "Rom", 16), ("I Corinthians", "1Cor", 16), ("II Corinthians", "2Cor", 13),
    ("Galatians", "Gal", 6), ("Ephesians", "Eph", 6), ("Philippians", "Phil", 4),
    ("Colossians", "Col", 4), ("I Thessalonians", "1Thess", 5),
    ("II Thessalonians", "2Thess", 3), ("I Timothy", "1Tim", 6), ("II Timothy", "2Tim", 4),
    ("Titus", "Titus", 3), ("Philemon", "Phlm", 1), ("Hebrews", "Heb", 13),
    ("James", "Jas", 5), ("I Peter", "1Pet", 5), ("II Peter", "2Pet", 3),
    ("I John", "1John", 5), ("II John", "2John", 1), ("III John", "3John", 1),
    ("Jude", "Jude", 1), ("Revelation of John", "Rev", 22),
]
OSIS_ID = {name: osis for name, osis, _ in BOOKS}

_REFERENCE = re.compile(r"^(.+?) (\d+):(\d+): ")
_LEADING_HEADING = re.compile(r"^\s*(?:<title\b[^>]*>.*?</title>)?(?:\s*<[^>]*>)*\s*")
_MARKUP = re.compile(r"<[^>]*>|[^<]+")
_TAG_NAME = re.compile(r"^</?\s*([A-Za-z]+)")
_ATTRIBUTE = re.compile(r'([A-Za-z]+)="([^"]*)"')
_STRONG = re.compile(r"[GH]\d+")
_QUOTES = {"“": '"', "”": '"', "„": '"', "«": '"', "»": '"', "‘": "'", "’": "'", "‚": "'"}
_SKIPPED_DIVISIONS = {"glossary", "introduction"}
_SKIPPED_ELEMENTS = {"note", "title", "rdg"}


def run_diatheke(module: str, key: str) -> str:
    result = subprocess.run(
        ["diatheke", "-b", module, "-f", "internal", "-k", key],
        check=True, capture_output=True, text=True, encoding="utf-8",
    )
    return result.stdout


def parse_range(output: str, module: str) -> dict[tuple[str, int, int], str]:
    """diatheke range output -> {(book, chapter, verse): raw markup} for the 66 books."""
    verses = {}
    for line in output.split("\n"):
        if not line.strip() or line.strip() == f"({module})":
            continue
        body = _LEADING_HEADING.sub("", line, count=1)
        match = _REFERENCE.match(body)
        if match is None:
            raise ValueError(f"{module}: cannot find a verse reference in {line[:120]!r}")
        book, chapter, verse = match.group(1), int(match.group(2)), int(match.group(3))
        if book not in OSIS_ID:  # deuterocanonical books of the WEB
            continue
        verses[(book, chapter, verse)] = body[match.end():]
    return verses


def psalm_superscription(chapter: int) -> str:
    """The WEB's canonical heading of a psalm (markup), or ''."""
    output = run_diatheke(ENGLISH_MODULE, f"Ps {chapter}:1")
    match = re.match(r"^\s*(<title\b[^>]*canonical=\"true\"[^>]*>.*?</title>)", output)
    return match.group(1) + " " if match else ""


def _is_word_character(character: str) -> bool:
    return unicodedata.category(character)[0] in "LNM"


def _trailing_word(characters: list[str]) -> str:
    end = len(characters)
    start = end
    while start > 0 and _is_word_character(characters[start - 1]):
        start -= 1
    return "".join(characters[start:end])


def _leading_word(text: str) -> str:
    end = 0
    while end < len(text) and _is_word_character(text[end]):
        end += 1
    return text[:end]


def strip_markup(markup: str, join=None) -> tuple[str, list[frozenset]]:
    """Raw OSIS of one verse -> (clean text, Strong's numbers of every character).

    ``join(left_word, right_word) -> bool`` decides, where a tag boundary separates two
    letters, whether they belong to one word (``True``: Spanish enclitics such as
    "enviándo</w><w>le") or were glued by the markup (``False``: a space is inserted).
    """
    characters: list[str] = []
    numbers: list[frozenset] = []
    open_words: list[frozenset] = []  # stack of <w> numbers
    skip_depth = 0  # inside <note>/<rdg>; <title> only outside verse 1 headings
    skipping_division = False
    tag_since_text = False
    for piece in _MARKUP.findall(markup):
        if piece.startswith("<"):
            name_match = _TAG_NAME.match(piece)
            name = name_match.group(1) if name_match else ""
            attributes = dict(_ATTRIBUTE.findall(piece))
            closing, self_closing = piece.startswith("</"), piece.endswith("/>")
            tag_since_text = True
            if name == "div" and attributes.get("type") in _SKIPPED_DIVISIONS:
                skipping_division = "sID" in attributes
                continue
            if name in ("note", "rdg"):
                skip_depth += -1 if closing else (0 if self_closing else 1)
                continue
            if name == "title":
                # only the canonical psalm heading we prepend reaches this function
                continue
            if name == "w" and not self_closing:
                if closing:
                    if open_words:
                        open_words.pop()
                else:
                    strongs = frozenset(_STRONG.findall(attributes.get("savlm", "")))
                    open_words.append(strongs)
            continue
        if skip_depth or skipping_division:
            continue
        text = piece.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
        text = text.replace("&quot;", '"').replace("&apos;", "'")
        if not text:
            continue
        if (
            tag_since_text
            and characters
            and _is_word_character(characters[-1])
            and _is_word_character(text[0])
        ):
            # a tag boundary between two letters: one word, or two glued by the markup
            if join is None or not join(_trailing_word(characters), _leading_word(text)):
                characters.append(" ")
                numbers.append(frozenset())
        tag_since_text = False
        active = frozenset().union(*open_words) if open_words else frozenset()
        for character in text:
            characters.append(_QUOTES.get(character, character))
            numbers.append(active)
    # one space for every run of whitespace, none at the ends
    clean_characters: list[str] = []
    clean_numbers: list[frozenset] = []
    for character, strongs in zip(characters, numbers):
        if character.isspace() or unicodedata.category(character)[0] == "Z":
            if clean_characters and clean_characters[-1] != " ":
                clean_characters.append(" ")
                clean_numbers.append(frozenset())
            continue
        clean_characters.append(character)
        clean_numbers.append(strongs)
    while clean_characters and clean_characters[-1] == " ":
        clean_characters.pop()
        clean_numbers.pop()
    text = "".join(clean_characters)
    if unicodedata.normalize("NFC", text) != text:
        raise ValueError(f"Text is not NFC after cleaning: {text[:80]!r}")
    return text, clean_numbers


def word_numbers(text: str, numbers: list[frozenset]) -> list[frozenset]:
    """Strong's numbers of each split_words word (punctuation tokens get none)."""
    result = []
    cursor = 0
    for word in split_words(text):
        start = text.index(word, cursor)
        cursor = start + len(word)
        if any(_is_word_character(c) for c in word):
            result.append(frozenset().union(*numbers[start:cursor]))
        else:
            result.append(frozenset())
    return result


_CLITIC = re.compile(r"^(?:me|te|se|le|lo|la|les|los|las|nos|os)(?:me|te|se|le|lo|la|les|los|las|nos)?$")
# a verb form that takes enclitics: infinitive, gerund, plural imperative
_VERB_ENDING = re.compile(r"(?:ar|er|ir|ír|ndo|d)$")
_ACCENTED = re.compile(r"[áéíóú]")
# accented words that are not verbs (a pronoun after them is a separate word)
_ACCENTED_NON_VERBS = frozenset(
    "también sólo éste ésta éstos éstas ése ésa aquél aquélla él mí tí sí así qué quién "
    "cuál cómo dónde cuándo más aún jehová judá jesús allí aquí ahí acá allá después "
    "además según cuánto cuánta cuántos cuántas ejército josué".split()
)


def spanish_enclitic_rule(spanish: dict) -> tuple:
    """Learns from the Spanish text which tag joints are one word.

    The RV1909 tags a verb and its enclitic pronoun separately with no space between
    ("enviándo</w><w>le" = "enviándole"), but elsewhere lost the space between two words
    ("mil</w><w>cañas"). A joint is one word when the right part is an enclitic pronoun
    (me te se le lo la les los las nos os, or two of them) and the left part is a verb that
    takes it: the joined form occurs as a word elsewhere ("helo"), or the left part never
    stands alone ("enviándo"), or it ends like an infinitive, gerund or plural imperative
    ("sacar", "haciendo", "haced"), or it carries the accent the RV1909 writes on a verb with
    an enclitic ("fué|le", "pondré|las") and is not an accented pronoun or adverb
    ("también|le"). Every other joint gets a space. Counts are case-insensitive.

    Returns:
        (join function for strip_markup, {(left, right): joined} for the log).
    """
    candidates = []

    def record(left, right):
        candidates.append((left.lower(), right.lower()))
        return False

    counts = collections.Counter()
    for markup in spanish.values():
        text, _ = strip_markup(markup, join=record)
        counts.update(word.lower() for word in split_words(text))
    left_counts = collections.Counter(left for left, _ in candidates)
    joints = {}
    for left, right in set(candidates):
        standalone = counts[left] - left_counts[left]
        joints[(left, right)] = bool(_CLITIC.match(right)) and (
            counts[left + right] > 0
            or standalone <= 0
            or bool(_VERB_ENDING.search(left))
            or (bool(_ACCENTED.search(left)) and left not in _ACCENTED_NON_VERBS)
        )

    def join(left, right):
        return joints.get((left.lower(), right.lower()), False)

    return join, joints


def _one_run(positions: list[int], numbers: list[frozenset]) -> bool:
    """True when the positions are one phrase: only untagged tokens between them."""
    return all(not numbers[k] for a, b in zip(positions, positions[1:]) for k in range(a + 1, b))


def align(english: list[frozenset], spanish: list[frozenset]) -> dict[tuple[int, int], bool]:
    """Word links {(english_index, spanish_index): sure} from shared Strong's numbers.

    A link is *sure* when the number it shares tags one phrase on each side (e.g. "created"
    and "crió"); it is only *possible* when the number recurs in the verse ("the", "all",
    "every" and "todo" all carrying H3605), as in the sure/possible sets of the alignment
    error rate (Och & Ney 2003).
    """
    english_positions = collections.defaultdict(list)
    spanish_positions = collections.defaultdict(list)
    for i, strongs in enumerate(english):
        for number in strongs:
            english_positions[number].append(i)
    for j, strongs in enumerate(spanish):
        for number in strongs:
            spanish_positions[number].append(j)
    links: dict[tuple[int, int], bool] = {}
    for number, en_positions in english_positions.items():
        es_positions = spanish_positions.get(number)
        if not es_positions:
            continue
        sure = _one_run(en_positions, english) and _one_run(es_positions, spanish)
        for i in en_positions:
            for j in es_positions:
                links[(i, j)] = links.get((i, j), False) or sure
    return links


MIN_TAG_AGREEMENT = 0.3
_LEXICON_WORD = re.compile(r"[^\W\d_]{3,}")


def _content_words(text: str) -> set[str]:
    return {word.lower() for word in _LEXICON_WORD.findall(text)}


def build_lexicon(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """English word -> its most associated Spanish word (Dice >= 0.3 over same-key verses).

    Most verse keys hold translations of each other, so co-occurrence over all of them is
    enough to find the few chapters where the RV1909 text sits under other verse numbers.
    """
    english = [_content_words(en) for en, _ in pairs]
    spanish = [_content_words(es) for _, es in pairs]
    english_counts = collections.Counter(w for words in english for w in words)
    spanish_counts = collections.Counter(w for words in spanish for w in words)
    together = collections.Counter()
    for en_words, es_words in zip(english, spanish):
        en_words = [w for w in en_words if 2 <= english_counts[w] <= 1500]
        es_words = [w for w in es_words if 2 <= spanish_counts[w] <= 1500]
        together.update((e, s) for e in en_words for s in es_words)
    best: dict[str, tuple[str, float]] = {}
    for (e, s), count in together.items():
        dice = 2 * count / (english_counts[e] + spanish_counts[s])
        # ties broken by the word itself, so the result does not depend on hash order
        if dice >= 0.3 and (e not in best or (dice, s) > best[e]):
            best[e] = (dice, s)
    return {e: s for e, (_, s) in best.items()}


def verse_similarity(english: str, spanish: str, lexicon: dict) -> float | None:
    """Share of the English verse's lexicon words whose translation is in the Spanish verse."""
    known = [w for w in _content_words(english) if w in lexicon]
    if len(known) < 2:
        return None
    spanish_words = _content_words(spanish)
    return sum(lexicon[w] in spanish_words for w in known) / len(known)


def align_verses(english: list[str], spanish: list[str], lexicon: dict, band: int = 3):
    """Pairs the verses of one book, allowing the RV1909's shifted verse numbers.

    The RV1909 module files some chapters under Spanish verse numbers (Jonah 1:17 is its
    Jonah 2:1; Numbers 13, 1 Samuel 24, Hosea 12, Job 39-41, ... shift by one), leaving a
    verse empty and merging another. A banded monotone alignment (at most ``band`` verses
    off the diagonal) maximises the summed gains: similarity - 0.25 for a pair of different
    verse numbers, and for a pair under the same number similarity - 0.15 but at least 0.05,
    so a verse keeps its own number unless a shift pairs it and its neighbours much better;
    verses left without a partner are dropped.

    Returns:
        list of (english_index, spanish_index).
    """
    n = len(english)
    threshold, diagonal_bonus, neutral, minimum_diagonal_gain = 0.25, 0.1, 0.3, 0.05

    def gain(i, j):
        if not english[i].strip() or not spanish[j].strip():
            return None
        similarity = verse_similarity(english[i], spanish[j], lexicon)
        if i != j:
            return None if similarity is None else similarity - threshold
        if similarity is None:
            similarity = neutral
        # a verse pair under its own number is always worth keeping, unless shifting
        # the chapter pairs it and its neighbours much better
        return max(minimum_diagonal_gain, similarity - threshold + diagonal_bonus)

    best = {(0, 0): (0.0, None)}
    for total in range(0, 2 * n + 1):
        for i in range(max(0, total - n), min(n, total) + 1):
            j = total - i
            if (i, j) not in best:
                continue
            score, _ = best[(i, j)]
            moves = [((i + 1, j), 0.0, None), ((i, j + 1), 0.0, None)]
            if i < n and j < n:
                g = gain(i, j)
                if g is not None and g > 0:
                    moves.append(((i + 1, j + 1), g, (i, j)))
            for (ni, nj), g, match in moves:
                if ni > n or nj > n or abs(ni - nj) > band:
                    continue
                if (ni, nj) not in best or score + g > best[(ni, nj)][0]:
                    best[(ni, nj)] = (score + g, (i, j, match))
    matches = []
    state = (n, n)
    while state != (0, 0):
        _, back = best[state]
        i, j, match = back
        if match is not None:
            matches.append(match)
        state = (i, j)
    matches = matches[::-1]
    # A lone shifted pair is a verse-boundary difference, not a shifted chapter: keep the
    # verse under its own number, unless that is empty (Jonah 1:17 -> Jonah 2:1).
    used = {j for _, j in matches}
    kept = []
    for index, (i, j) in enumerate(matches):
        offset = i - j
        neighbours = [matches[k] for k in (index - 1, index + 1) if 0 <= k < len(matches)]
        if offset == 0 or any(a - b == offset for a, b in neighbours) or not spanish[i].strip():
            kept.append((i, j))
        elif i not in used and english[i].strip():
            kept.append((i, i))
            used.add(i)
    return sorted(kept)


def tag_agreement(english: list[frozenset], spanish: list[frozenset]) -> float:
    """Jaccard overlap of the Strong's numbers of two verses.

    Low where the WEB carries its Strong's tags under Hebrew verse numbers (psalms with a
    superscription, Genesis 32, Exodus 22, ...): the words then hold the tags of the
    neighbouring verse, and the verse gets no gold alignment.
    """
    en_numbers = frozenset().union(*english) if english else frozenset()
    es_numbers = frozenset().union(*spanish) if spanish else frozenset()
    if not en_numbers or not es_numbers:
        return 0.0
    return len(en_numbers & es_numbers) / len(en_numbers | es_numbers)


def _tsv_field(text: str) -> str:
    if "\t" in text or "\n" in text:
        raise ValueError(f"Tab or newline in a verse: {text[:80]!r}")
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--output",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bahdanau_tf",
                             "corpora", "bible-en-es.tsv.gz"),
    )
    parser.add_argument("--glue_log", default=None,
                        help="write the Spanish tag joints and the decision taken here")
    args = parser.parse_args(argv)

    english = parse_range(run_diatheke(ENGLISH_MODULE, RANGE), ENGLISH_MODULE)
    spanish = parse_range(run_diatheke(SPANISH_MODULE, RANGE), SPANISH_MODULE)
    for chapter in range(1, 151):
        key = ("Psalms", chapter, 1)
        heading = psalm_superscription(chapter)
        if heading and key in english:
            english[key] = heading + english[key]

    spanish_join, joints = spanish_enclitic_rule(spanish)
    books = {}
    for name, _, _ in BOOKS:
        keys = sorted({k for k in english if k[0] == name} | {k for k in spanish if k[0] == name},
                      key=lambda k: (k[1], k[2]))
        # every English joint found is a glue of two words (checked by hand)
        books[name] = (
            keys,
            [strip_markup(english[k], join=None) if k in english else ("", []) for k in keys],
            [strip_markup(spanish[k], join=spanish_join) if k in spanish else ("", [])
             for k in keys],
        )
    lexicon = build_lexicon(
        [(en[0], es[0]) for _, ens, ess in books.values() for en, es in zip(ens, ess)]
    )

    rows = []
    stats = collections.Counter()
    chapter_index = -1
    split_of = {}
    for name, _, chapters in BOOKS:
        for chapter in range(1, chapters + 1):
            chapter_index += 1
            split_of[(name, chapter)] = bible_split(chapter_index)
    if chapter_index != 1188:
        raise AssertionError(f"expected 1189 chapters, counted {chapter_index + 1}")
    for name, osis, _ in BOOKS:
        keys, ens, ess = books[name]
        matches = align_verses([text for text, _ in ens], [text for text, _ in ess], lexicon)
        stats["verse keys"] += len(keys)
        for i, j in matches:
            (en_text, en_numbers), (es_text, es_numbers) = ens[i], ess[j]
            stats["pairs"] += 1
            stats["re-paired across verse numbers"] += i != j
            split = split_of[(name, keys[i][1])]
            alignment = ""
            if split != "train":
                en_words = word_numbers(en_text, en_numbers)
                es_words = word_numbers(es_text, es_numbers)
                if tag_agreement(en_words, es_words) >= MIN_TAG_AGREEMENT:
                    links = align(en_words, es_words)
                    alignment = " ".join(
                        f"{a}-{b}" if sure else f"{a}?{b}" for (a, b), sure in sorted(links.items())
                    )
                alignment = alignment or "-"
                stats[f"{split} gold alignment"] += alignment != "-"
            es_key = keys[j]
            rows.append((
                f"{osis} {keys[i][1]}:{keys[i][2]}",
                f"{OSIS_ID[es_key[0]]} {es_key[1]}:{es_key[2]}",
                split, _tsv_field(en_text), _tsv_field(es_text), alignment,
            ))

    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    # mtime=0 keeps the gzip byte-identical from one build to the next
    with open(args.output, "wb") as raw, gzip.GzipFile(
        filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0
    ) as handle:
        handle.write("id\tes_id\tsplit\ten\tes\talignment\n".encode("utf-8"))
        for row in rows:
            handle.write(("\t".join(row) + "\n").encode("utf-8"))
    if args.glue_log:
        with open(args.glue_log, "w", encoding="utf-8") as handle:
            for (left, right), joined in sorted(joints.items()):
                handle.write(f"{left}|{right}\t{'joined' if joined else 'spaced'}\n")

    counts = collections.Counter(row[2] for row in rows)
    print(f"wrote {len(rows)} verse pairs to {args.output}: {dict(counts)}")
    print(f"{dict(stats)}; Spanish joints joined: "
          f"{sum(joints.values())} of {len(joints)} distinct")
    return 0


if __name__ == "__main__":
    sys.exit(main())
