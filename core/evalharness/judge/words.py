"""Words every lexical rule of the offline judge shares: function words, accent folding and a
light stemmer."""

from __future__ import annotations

import unicodedata
from functools import lru_cache

STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren't as at be because been
before being below between both but by can can't cannot could couldn't did didn't do does
doesn't doing don't down during each either else ever every few for from further had hadn't
has hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his
how how's however i i'd i'll i'm i've if in into is isn't it it's its itself just let's me
might more most must mustn't my myself neither nor of off on once one only or other ought our
ours ourselves out over own per same shall shan't she she'd she'll she's should shouldn't so
some such than that that's the their theirs them themselves then there there's these they
they'd they'll they're they've this those though through thus to too under until up upon us
very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's
whether which while who who's whom whose why why's will with within without won't would
wouldn't yet you you'd you'll you're you've your yours yourself yourselves
ah aha eh er hey hi hmm huh lol haha oh ok okay oops uh um umm wow yeah yep yes yup
""".split())
"""Function words and interjections: they carry no checkable content. Negations ("not", "no",
"never", "nothing") are deliberately absent: they are content."""


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light, deterministic suffix stripper: plurals, -ing, -ed, -ly, a final -e.

    It only needs to map a word's common forms to one key (it is not a linguistic stem).

    >>> [stem(w) for w in ["shoes", "jumping", "jumps", "making", "makes", "stories", "story"]]
    ['sho', 'jump', 'jump', 'mak', 'mak', 'stor', 'stor']
    >>> stem("pele's"), stem("dress"), stem("running"), stem("quickly")
    ('pel', 'dress', 'run', 'quick')
    """
    w = word.lower()
    if w.endswith(("'s", "'")):
        w = w[:-2] if w.endswith("'s") else w[:-1]
    if w.isdigit() or len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "shes", "ches", "xes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ingly", "edly", "ing", "ed", "ly"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if suffix in ("ing", "ed", "edly", "ingly") and len(w) >= 4 and w[-1] == w[-2] \
                    and w[-1] not in "aeiousl":
                w = w[:-1]
            if w.endswith("i") and suffix in ("ed", "ly"):
                w = w[:-1] + "y"
            break
    if w.endswith("y") and len(w) > 3:
        w = w[:-1]
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


@lru_cache(maxsize=65536)
def fold(word: str) -> str:
    """Lowercase and strip accents (so "Pelé" matches "Pele"). Memoised: every token of
    every text goes through it, and a run's vocabulary is small.

    >>> fold("Pelé")
    'pele'
    """
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))
