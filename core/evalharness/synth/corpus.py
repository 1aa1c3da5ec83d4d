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
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Iterable

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
    """Document frequencies of content stems, and per chunk its sentences and stems."""

    def __init__(self, chunks: Iterable[Chunk]) -> None:
        self.chunks = {c.id: c for c in chunks}
        self.stems = {cid: set(content_stems(f"{c.title or ''} {c.text}"))
                      for cid, c in self.chunks.items()}
        self.df = Counter(s for stems in self.stems.values() for s in stems)
        self.n = len(self.chunks)
        self.surface: dict[str, str] = {}
        for c in self.chunks.values():
            for token in tokens(c.text):
                self.surface.setdefault(stem(token), token)

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
    for tag in all_tags:
        stems = content_stems(tag)
        pattern = re.compile(rf"(?<!\w){re.escape(tag.lower())}(?!\w)")
        having = [cid for cid in ids if pattern.search(texts[cid])]
        if len(having) == 2 and stems:
            pairs.setdefault((having[0], having[1]), (tag, stems[-1]))
    if not all_tags:
        for cid in ids:
            for s in content_stems(index.chunks[cid].title or ""):
                if index.df.get(s) == 2 and len(s) >= 5:
                    a, b = sorted(c for c in ids if s in index.stems[c])
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
    usable = [t for t in OUT_OF_SCOPE_TOPICS
              if not (set(content_stems(t)) & (set(index.df) | forbidden))]
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
