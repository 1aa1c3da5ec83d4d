"""Text utilities shared by the components: words, light stemming, phrases, numbers, the
approximate token count."""

from __future__ import annotations

import re

_WORD_RE = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_LLM_TOKEN_RE = re.compile(r"\w+|[^\w\s]")

STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with from about as into over under is are
    was were be been being do does did i me my you your we our it its this that these those
    what which who whom how when where why can could should would will shall may might must
    have has had there their they them so than then too very just any some all also not no
    get got up out one s t i'm i'd it's what's""".split()
)

IRREGULAR_PLURALS = {"scarves": "scarf", "knives": "knife", "shelves": "shelf", "wolves": "wolf"}


def approx_tokens(text: str) -> int:
    """Approximate LLM token count: words and punctuation marks."""
    return len(_LLM_TOKEN_RE.findall(text))


def words(text: str) -> list[str]:
    """Lower-cased word tokens (apostrophes kept inside words)."""
    return [w.replace("’", "'") for w in _WORD_RE.findall(text.lower().replace("’", "'"))]


def stem(word: str) -> str:
    """A very light suffix stripper: plurals, -ing/-ed, a final -e and doubled consonants."""
    w = IRREGULAR_PLURALS.get(word, word)
    if len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "shes", "ches", "xes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    stripped = False
    if w.endswith("ing") and len(w) > 5:
        w, stripped = w[:-3], True
    elif w.endswith("ed") and len(w) > 4:
        w, stripped = w[:-2], True
    if stripped and len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


def content_terms(text: str) -> list[str]:
    """Stemmed, stop-word-free terms used by the retriever and sentence scorer."""
    out = []
    for w in words(text):
        w = w.removesuffix("'s")
        if w not in STOPWORDS and len(w) > 1:
            out.append(stem(w))
    return out


def singular(word: str) -> str:
    """Singular form of a simple English plural (``dresses`` -> ``dress``)."""
    if word in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[word]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us")) and len(word) > 3:
        return word[:-1]
    return word


def norm_phrase(text: str) -> str:
    """Lower-case words joined by single spaces, each made singular."""
    return " ".join(singular(w) for w in words(text))


def contains_phrase(haystack: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``haystack`` on word boundaries (both normalised)."""
    return bool(phrase) and f" {phrase} " in f" {haystack} "


_UNITS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
    "ninety": 90,
}
_NUMBER_WORDS_RE = re.compile(
    r"\b(?:(a|one|two|three|four|five)\s+hundred(?:\s+and)?(?:\s+(twenty|thirty|forty|fifty|"
    r"sixty|seventy|eighty|ninety))?|(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
    r"(?:[\s-](one|two|three|four|five|six|seven|eight|nine))?|(ten|eleven|twelve|fifteen))\b",
    re.I,
)


def numbers_as_digits(text: str) -> str:
    """Spell-out amounts as digits: "a hundred" -> "100", "thirty-five" -> "35"."""

    def repl(m: re.Match[str]) -> str:
        hundreds, hundred_tens, tens, units, small = (g.lower() if g else g for g in m.groups())
        if hundreds:
            value = (1 if hundreds == "a" else _UNITS[hundreds]) * 100
            return str(value + (_UNITS[hundred_tens] if hundred_tens else 0))
        if tens:
            return str(_UNITS[tens] + (_UNITS[units] if units else 0))
        return str(_UNITS[small])

    return _NUMBER_WORDS_RE.sub(repl, text)
