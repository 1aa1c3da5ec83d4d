"""Corpus seeds: what to ask of the chunks, and the sentences a reference answer may use.

* ``single`` (1): one chunk's topic; the answer is its most distinctive sentences;
* ``which_of`` (2): one chunk's topic offered beside a topic the corpus does not cover;
* ``multi_hop`` (3): a tag whose phrase exactly two chunks mention (without tags: a title
  word of five letters or more that only two chunks use), so an answer needs both; the answer
  is a sentence of each, one that mentions it where there is one;
* ``comparison`` (3): two chunks that share a tag (none without tags): how their advice
  differs; a sentence of each;
* ``out_of_scope`` (2): a topic near the corpus's wording that no chunk (and no database
  value) mentions — the expected answer is a refusal.

A chunk's *topic* is its title (a title that is a question is asked as it is) or, without a
title, its most distinctive words. A term is distinctive by inverse document frequency over
the corpus's content stems (:func:`evalharness.judge.heuristic.content_stems`).

Of each chunk, the first :data:`MAX_CHUNK_CHARS` characters are read (:func:`head`), so a
chunk's cost is bounded whatever its length; the rest of a longer chunk is only searched,
once, for the words gold depends on the corpus *not* saying.
"""

from __future__ import annotations

import math
import random
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable
from functools import cache

from evalharness.context import Chunk
from evalharness.judge.heuristic import content_stems, stem, tokens
from evalharness.synth.seeds import CORPUS, UNANSWERABLE, Seed

OUT_OF_SCOPE_TOPICS = (
    "tuning a guitar", "repotting a bonsai tree", "descaling an espresso machine",
    "waxing a snowboard", "winterising a sailboat", "choosing a telescope eyepiece",
    "training a parrot to talk", "bleeding car brakes", "grafting apple trees",
    "calibrating a 3D printer", "brewing kombucha", "sharpening ice skates",
    "restringing a tennis racket", "pruning grapevines", "servicing a chainsaw",
    "cleaning a fish tank filter", "replacing a bicycle chain", "reupholstering a sofa",
    "insulating a loft", "growing chillies indoors", "fixing a dripping tap",
    "tiling a bathroom floor", "storing vinyl records", "framing a watercolour painting",
)
"""Topics for unanswerable questions; each is used only if none of its content words occurs
in the corpus or the database (checked per corpus), so "near the corpus" means the wording of
a real question, not its subject."""

MIN_SENTENCE_WORDS = 6

IMPERATIVES = frozenset("""make repair keep wash choose build pack dress store wear find buy
take try avoid know look get use mix match fold iron clean protect care stop start
""".split())
"""First words of a title that tell the reader what to do: "what does the blog say about
make your clothes last longer" reads as "... about how to make your clothes last longer"."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")


MAX_CHUNK_CHARS = 20_000
"""Characters of a chunk's text (and title) that synth reads: sentences, topic words, and
the context an answer is checked against come from the first this many, cut after the last
sentence that ends within them. One chunk of 28 MB took 200 s and 2.6 GB; past the cap a
chunk costs what a chunk of the cap costs. What a chunk says further on still counts where
the gold depends on what the corpus does *not* say: an unanswerable topic, or a multi-hop
term that exactly two chunks mention (:meth:`CorpusIndex.past_cap`)."""

_END = re.compile(r"[.!?](?=\s)")


def head(text: str, cap: int | None = None) -> str:
    """The part of ``text`` synth reads: all of it up to ``cap`` characters (default
    :data:`MAX_CHUNK_CHARS`), else its first ``cap`` characters up to the last sentence end
    among them (else the last space; else all ``cap``).

    >>> head("One. Two three. Four", 12), head("One two three", 9), head("short", 12)
    ('One.', 'One two', 'short')
    """
    cap = MAX_CHUNK_CHARS if cap is None else cap
    if len(text) <= cap:
        return text
    last = None
    for last in _END.finditer(text, 0, cap + 1):  # noqa: B007 - the last match is wanted
        pass
    if last is not None:
        return text[:last.end()]
    return text[:cap].rsplit(None, 1)[0] if text[:cap].strip() else text[:cap]


@cache
def _combining() -> dict[int, None]:
    """Every combining character, to delete with ``str.translate`` (built once)."""
    return {c: None for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c))}


def folded(text: str) -> str:
    """``text`` lowercased and without accents, as :func:`evalharness.judge.words.fold`
    does per word, but for a whole text at C speed.

    >>> folded("Pelé's CAFÉ")
    "pele's cafe"
    """
    return unicodedata.normalize("NFKD", text.lower()).translate(_combining())


def sentences(text: str) -> list[str]:
    """The text's sentences exactly as written (a reference answer quotes its chunk, so no
    character is normalised): split after ``.``, ``!`` or ``?`` before a capital or digit."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


_LEANS_BACK = re.compile(
    r"^(?:it|its|this|that|these|those|they|them|their|he|she|such|also|then|otherwise|"
    r"however|instead|the trick|the key|the rule)\b", re.IGNORECASE)
"""Sentences that lean on the one before them ("It ...", "This ...", "The trick is ..."):
quoted alone in a reference answer, they lose what they refer to."""


class CorpusIndex:
    """Document frequencies of content stems, and per chunk its sentences and stems, over
    what synth reads of each chunk (:func:`head`): ``chunks`` holds those parts, ``cut`` the
    ids of the chunks that are longer."""

    def __init__(self, chunks: Iterable[Chunk]) -> None:
        self.max_chars = MAX_CHUNK_CHARS
        self.chunks: dict[str, Chunk] = {}
        self.cut: list[str] = []
        self._tails: dict[str, str] = {}
        for c in chunks:
            text = head(c.text, self.max_chars)
            title = head(c.title, self.max_chars) if c.title else c.title
            if len(text) < len(c.text) or (title and len(title) < len(c.title)):
                self.cut.append(c.id)
                self._tails[c.id] = folded(f"{c.title[len(title):] if c.title else ''} "
                                           f"{c.text[len(text):]}")
                c = c.model_copy(update={"text": text, "title": title})
            self.chunks[c.id] = c
        self.cut.sort()
        self.stems = {cid: set(content_stems(f"{c.title or ''} {c.text}"))
                      for cid, c in self.chunks.items()}
        self.df = Counter(s for stems in self.stems.values() for s in stems)
        self.n = len(self.chunks)
        self.surface: dict[str, str] = {}
        for c in self.chunks.values():
            for token in tokens(c.text):
                self.surface.setdefault(stem(token), token)

    def past_cap(self, terms: Iterable[str]) -> dict[str, set[str]]:
        """Chunk id -> which of ``terms`` (stems or phrases, compared :func:`folded`) begin a
        word in the part of that chunk past the cap. A stem is a prefix of every word it
        stems, so a mention is never missed; a longer word with the same start counts too (it
        errs towards "the corpus says it"). One pass over each cut chunk's rest."""
        if not self._tails:
            return {}
        keys = {t: folded(t) for t in terms if t}
        wanted = sorted(set(keys.values()) - {""}, key=len, reverse=True)
        if not wanted:
            return {}
        pattern = re.compile(r"(?<![^\W\d_])(?:" + "|".join(map(re.escape, wanted)) + ")")
        out = {}
        for cid, tail in self._tails.items():
            starts = set(pattern.findall(tail))
            found = {t for t, k in keys.items() if k and any(m.startswith(k) for m in starts)}
            if found:
                out[cid] = found
        return out

    def idf(self, s: str) -> float:
        return math.log((self.n + 1) / (self.df.get(s, 0) + 1)) + 1.0

    def distinctive(self, sentence: str) -> float:
        stems = set(content_stems(sentence))
        return sum(self.idf(s) for s in stems) / math.sqrt(len(stems) + 1)

    def best_sentences(self, cid: str, n: int = 2, term: str | None = None) -> list[str]:
        """The chunk's ``n`` most distinctive sentences (those mentioning ``term`` first),
        in text order."""
        every = sentences(self.chunks[cid].text)
        found = [s for s in every if len(s.split()) >= MIN_SENTENCE_WORDS
                 and not _LEANS_BACK.match(s)]
        if not found:
            return []
        # the first sentence states the topic; later ones are ranked by distinctiveness
        ranked = sorted(found, key=lambda s: (term is not None and term not in
                                              set(content_stems(s)), s != every[0],
                                              -self.distinctive(s)))
        keep = set(ranked[:n])
        return [s for s in found if s in keep]

    def topic(self, cid: str) -> str:
        """What a question names the chunk by: its title, else its most distinctive words."""
        chunk = self.chunks[cid]
        title = (chunk.title or "").strip()
        if title:
            head, colon, _ = title.partition(":")
            # "Navy and camel: the classic pairing" is about navy and camel
            topic = head.strip() if colon and not title.endswith("?") and head.strip() \
                else title
            first = topic.split()[0].lower()
            if first in IMPERATIVES:  # "Make your clothes last longer": how to make ...
                topic = "how to " + first + topic[len(first):]
            return topic
        stems = sorted(self.stems[cid], key=lambda s: (-self.idf(s), s))[:3]
        return " and ".join(self.surface.get(s, s) for s in stems)

    def source(self) -> str:
        """How the questions name the corpus: the chunks' common ``source`` field (e.g.
        "shop blog"), else "the documents"."""
        sources = Counter(str(getattr(c, "source", "") or "") for c in self.chunks.values())
        name, count = sources.most_common(1)[0] if sources else ("", 0)
        return f"the {name}" if name and count >= self.n / 2 else "the documents"


def _tags(chunk: Chunk) -> set[str]:
    tags = getattr(chunk, "tags", None)
    return {str(t) for t in tags} if isinstance(tags, list) else set()


def corpus_seeds(index: CorpusIndex, rng: random.Random, forbidden: set[str],
                 rejected: dict[str, int]) -> dict[str, list[Seed]]:
    """Corpus seeds by shape. ``forbidden``: content stems of the database's text values
    (an out-of-scope topic must not be answerable from there either)."""
    out: dict[str, list[Seed]] = {}
    ids = sorted(index.chunks)
    source = index.source()

    for cid in ids:
        answer = index.best_sentences(cid)
        if not answer:
            rejected["chunk_without_sentences"] = rejected.get("chunk_without_sentences", 0) + 1
            continue
        out.setdefault("single", []).append(Seed(
            CORPUS, "single", 1, {"topic": index.topic(cid), "source": source},
            chunks=[cid], sentences=answer))

    # multi-hop: a topic exactly two chunks mention — a tag whose phrase no other chunk's
    # text has; without tags, a title word (5+ letters) only two chunks use — so a complete
    # answer needs both
    pairs: dict[tuple[str, str], tuple[str, str]] = {}  # (a, b) -> (term, stem to look for)
    texts = {cid: " ".join([c.title or "", c.text, *_tags(c)]).lower()
             for cid, c in index.chunks.items()}
    all_tags = sorted({tag for cid in ids for tag in _tags(index.chunks[cid])})
    later = index.past_cap(all_tags)  # mentions past a chunk's cap
    for tag in all_tags:
        stems = content_stems(tag)
        pattern = re.compile(rf"(?<!\w){re.escape(tag.lower())}(?!\w)")
        having = [cid for cid in ids if pattern.search(texts[cid])
                  or tag in later.get(cid, ())]
        if len(having) == 2 and stems:
            pairs.setdefault((having[0], having[1]), (tag, stems[-1]))
    if not all_tags:
        found: list[tuple[str, str, str]] = []
        for cid in ids:
            for s in content_stems(index.chunks[cid].title or ""):
                if index.df.get(s) == 2 and len(s) >= 5:
                    a, b = sorted(c for c in ids if s in index.stems[c])
                    found.append((a, b, s))
        later = index.past_cap(s for _, _, s in found)
        for a, b, s in found:  # a third chunk that mentions it past its cap: not two
            if not any(s in terms for cid, terms in later.items() if cid not in (a, b)):
                pairs.setdefault((a, b), (index.surface.get(s, s), s))
    for (a, b), (term, s) in sorted(pairs.items()):
        sa, sb = index.best_sentences(a, 1, term=s), index.best_sentences(b, 1, term=s)
        if not sa or not sb:
            continue
        out.setdefault("multi_hop", []).append(Seed(
            CORPUS, "multi_hop", 3,
            {"term": term, "topics": [index.topic(a), index.topic(b)], "source": source},
            chunks=[a, b], sentences=[sa[0], sb[0]]))

    # comparison: two chunks sharing a tag, one pair per tag (a corpus without tags has none)
    by_tag: dict[str, list[str]] = {}
    for cid in ids:
        for tag in _tags(index.chunks[cid]):
            by_tag.setdefault(tag, []).append(cid)
    compared: set[tuple[str, str]] = set()
    for tag, members in sorted(by_tag.items()):
        if len(members) < 2:
            continue
        a, b = sorted(rng.sample(members, 2))
        if (a, b) in compared or index.topic(a) == index.topic(b):
            continue
        compared.add((a, b))
        sa, sb = index.best_sentences(a, 1), index.best_sentences(b, 1)
        if sa and sb:
            out.setdefault("comparison", []).append(Seed(
                CORPUS, "comparison", 3, {"topics": [index.topic(a), index.topic(b)],
                                          "tag": tag, "source": source},
                chunks=[a, b], sentences=[sa[0], sb[0]]))

    # out of scope, and which-of (a real topic offered beside one)
    later = set().union(*index.past_cap(s for t in OUT_OF_SCOPE_TOPICS
                                        for s in content_stems(t)).values())
    usable = [t for t in OUT_OF_SCOPE_TOPICS
              if not (set(content_stems(t)) & (set(index.df) | forbidden | later))]
    rejected["out_of_scope_topic_in_data"] = len(OUT_OF_SCOPE_TOPICS) - len(usable)
    for topic in usable:
        out.setdefault("out_of_scope", []).append(Seed(
            UNANSWERABLE, "out_of_scope", 2, {"topic": topic, "source": source}))
    singles = out.get("single", [])
    if usable:
        for seed in singles:
            fake = rng.choice(usable)
            out.setdefault("which_of", []).append(Seed(
                CORPUS, "which_of", 2, {"topic": seed.facts["topic"], "other": fake,
                                        "source": source,
                                        "first": rng.random() < 0.5},
                chunks=list(seed.chunks), sentences=seed.sentences[:1]))
    return out



def stems_of_values(values: Iterable[str]) -> set[str]:
    """Content stems of the database's text values."""
    out: set[str] = set()
    for value in values:
        out.update(content_stems(value))
    return out
