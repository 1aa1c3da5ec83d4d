"""The offline heuristic judge: deterministic, lexical rules for every judgment task; no model.

It answers the same tasks as an LLM judge (:mod:`evalharness.judge.tasks`) with pure functions
of the inputs, so it runs anywhere, costs nothing and gives the same answer on every machine.
It is *lexical*: it sees words, numbers, sizes and capitalised names, never meaning. It cannot
recognise a paraphrase that uses other words, understand negation beyond the presence of a
negation word, resolve pronouns, or write real questions. Every verdict says which words or
numbers it missed, and every report names this judge as "not an LLM".

:func:`answer` is the pure entry point (task + inputs -> output model); :class:`HeuristicJudge`
wraps it as a judge backend. Embeddings are signed feature hashes (blake2b) of stemmed content
words, their bigrams and character trigrams: identical across processes and machines.
The rules and their measured agreement with people are in ``docs/metrics/heuristic-judge.md``.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from pydantic import BaseModel

from evalharness.judge.base import Embeddings, Judge, Judgment
from evalharness.judge.rows import settle_claims
from evalharness.judge.tasks import (
    CHUNK_USEFULNESS,
    CLAIM_SUPPORT,
    CLAIMS,
    QUESTIONS,
    SQL_EQUIVALENCE,
    SYNTH_CASE,
    ChunkUsefulnessInput,
    ChunkUsefulnessOutput,
    ChunkVerdict,
    ClaimsInput,
    ClaimsOutput,
    ClaimSupportInput,
    ClaimSupportOutput,
    ClaimVerdict,
    GeneratedQuestion,
    JudgmentTask,
    QuestionsInput,
    QuestionsOutput,
    SynthCaseInput,
    SynthCaseOutput,
)
from evalharness.judge.words import STOPWORDS, fold, stem
from evalharness.memo import LRU

MODEL = "heuristic-v3"
"""The heuristic's version: bump it whenever a rule or a threshold changes (v3: claims about
rows are checked by the row verifier, :mod:`evalharness.judge.rows`)."""

EMBED_DIM = 512
EMBEDDING_MODEL = f"hashing-{EMBED_DIM}-v1"
"""Name of the hashing embedding: bump the suffix whenever the features change."""

SQL_REFUSAL = "the heuristic judge cannot decide SQL equivalence; configure an LLM judge"


class HeuristicCannotJudge(ValueError):
    """A task the heuristic judge does not decide (SQL equivalence)."""


# == words ====================================================================================

OPINION = frozenset("""
amazing awesome awful bad beautiful best better boring brilliant cool enjoy enjoyable enjoyed
excellent exciting fantastic favorite favourite fun funny glad good gorgeous great happy hate
hated horrible impressive incredible interesting love loved lovely loves nice perfect
recommend recommended sad scary silly strange stunning stupid terrible ugly weird wonderful
worse worst
""".split())
"""Evaluative words: a claim using one the context does not use is an opinion the context does
not support ("the film was awesome")."""

COMMON_WORDS = frozenset("""
able across actually add ago agree air almost alone along already always american among
another answer anyone anything appear area around ask away back bad base become begin
believe best better big bit black body book bring build business buy call car care carry case
cause center certain change child children city class clear close come company consider
continue control cost country couple course cover create cut day dead deal decide deep
different done door draw early east easy eat end enough even evening event example eye face
fact fall family far feel field fight figure fill final find fine first follow food form
forward free friend front full fun game general get give go going gone good got great ground
group grow guess half hand happen hard head hear heard help high hit hold home hope hour
house huge idea important include interest job join keep kid kind know known large last
late later lead learn least leave left less life light like likely line list listen little
live local long look lose lot love low main major make man many matter mean member men mind
minute miss moment money month morning move much music name near need new next nice night
number offer often old open order others part past pay people perhaps person pick place plan
play point possible power pretty probably problem provide public pull put question quite
rather read ready real really reason remember rest result right room run said save saw say
school second see seem seen sell send sense serve set several short show side simple small
sort sound speak stand start state stay still stop story street strong study stuff sure
system take talk tell term thank thing think thought time today together told took top
toward tried true try turn type understand use used usually view want watch water way week
well went whole wide woman women word work world write wrong year young
""".split())
"""About 400 of the most frequent English content words, written down by hand (no corpus was
downloaded): a built-in word-frequency prior. In the call there is no corpus to compute IDF
from, so these get half the weight of other words when coverage is computed. Half, because
by Zipf's law a word of rank ~100-300 has roughly half the log-inverse frequency of a typical
content word (rank ~10,000)."""

COMMON_WEIGHT = 0.5
"""Weight of a :data:`COMMON_WORDS` word in coverage; every other content word weighs 1."""

STRUCTURE_WORDS = frozenset("""
a an the of in on at to for with by from as and or is are was were be been being has have
had it its this that these those there
""".split())
"""Function words nearly every English sentence needs (articles, "be" and "have", common
prepositions): their absence from a terse context (a table row) says nothing, so they never
count as novel words. Other function words ("I", "you", "would", "but", "just" ...) do: a
claim framed in words its context never uses says something the context does not."""

FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll"})
"""First-person singular: a claim about the speaker ("I watched it twice") is supported only by
a context that speaks in the first person too. "We" is left out: an organisation speaks as
"we"."""

_REPORTING = re.compile(
    r"\b(?:i|we)\s+(?:can\s+|could\s+|have\s+|'ve\s+|just\s+)?(?:found|find|see|checked|"
    r"looked|searched|confirm)\b(?:\s+that\b)?", re.IGNORECASE)
"""Reporting frames ("I found that", "I can see") that present the context rather than speak
about the speaker: removed before a claim is checked."""

CURRENCIES = frozenset({"eur", "euro", "euros", "usd", "dollar", "dollars", "gbp", "chf"})
"""Currency words: the amount is what is checked, so "€129" = "129 EUR" = "129 euros"."""

NEGATIONS = frozenset({"not", "no", "never", "nothing", "none", "nobody", "nowhere", "neither",
                       "nor", "without", "n't", "cannot"})

NUMBER_WORDS = {
    "zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
    "ninety": 90, "hundred": 100, "thousand": 1000, "million": 1_000_000,
    "billion": 1_000_000_000, "dozen": 12, "half": 0.5,
}
"""Number words compared as numbers ("three" = "3"); "one" is left out (mostly a pronoun)."""

SIZES = ("XXXS", "XXS", "XS", "S", "M", "L", "XL", "XXL", "XXXL", "3XL", "4XL")

_WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\d+(?:[.,]\d+)*(?:st|nd|rd|th)?",
                      re.UNICODE)
_NUMBER_RE = re.compile(r"(?<![\w.,])(\d+(?:[.,]\d+)*)(?![\w]*[a-zA-Z]{3,})")
_SIZE_RE = re.compile(r"(?<![\w.&-])(" + "|".join(SIZES) + r")(?![\w&-]|\.\w)")


@lru_cache(maxsize=8192)
def normalise(text: str) -> str:
    """Unicode-normalise, unify quotes and dashes, collapse whitespace. Memoised: a context
    is normalised again for its numbers, and the same texts come back case after case.

    >>> normalise("It’s  10–12\u00a0€")
    "It's 10-12 €"
    """
    text = unicodedata.normalize("NFKC", text)
    return _SPACES.sub(" ", text.translate(_UNIFY)).strip()


_UNIFY = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "–": "-", "—": "-", "‑": "-"})
_SPACES = re.compile(r"\s+")


_DETACHED_CLITIC = re.compile(r"(?<=\w) (?=(?:'(?:s|m|re|ve|ll|d)|n't)\b)", re.IGNORECASE)


def tokens(text: str) -> list[str]:
    """Lowercased, accent-folded word and number tokens; apostrophes stay inside words, and
    clitics detached by a tokenizer are reattached ("it 's" = "it's", "do n't" = "don't").

    >>> tokens("Don't pay €129.00 for Pelé's 2 shirts!")
    ["don't", 'pay', '129.00', 'for', "pele's", '2', 'shirts']
    >>> tokens("it 's not , do n't")
    ["it's", 'not', "don't"]
    """
    return list(_tokens(text))


@lru_cache(maxsize=8192)
def _tokens(text: str) -> tuple[str, ...]:
    text = _DETACHED_CLITIC.sub("", normalise(text))
    return tuple(fold(t).replace("’", "'") for t in _WORD_RE.findall(text))


def is_content(token: str) -> bool:
    """A token that carries checkable content: not a stopword, a word of 2+ letters or a number.

    >>> [t for t in tokens("Yes, it is 42 and we love it!") if is_content(t)]
    ['42', 'love']
    """
    if token in STOPWORDS or token in CURRENCIES:
        return False
    return token[0].isdigit() or len(token) >= 2


def content_stems(text: str) -> list[str]:
    """Stems of the content tokens of a text, in order (numbers normalised).

    >>> content_stems("The shoes cost €129.00, and the boots 99 euros.")
    ['sho', 'cost', '129', 'boot', '99']
    """
    out = []
    for t in tokens(text):
        if not is_content(t):
            continue
        out.append(_number_key(t) if t[0].isdigit() else stem(t))
    return out


# == numbers, sizes, names ====================================================================


def _number_key(raw: str) -> str:
    raw = re.sub(r"(st|nd|rd|th)$", "", raw)
    if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", raw):
        raw = raw.replace(",", "")
    elif re.fullmatch(r"\d+,\d{1,2}", raw):
        raw = raw.replace(",", ".")
    else:
        raw = raw.replace(",", "")
    try:
        value = float(raw)
    except ValueError:
        return raw
    return f"{value:.6f}".rstrip("0").rstrip(".")


def numbers(text: str) -> set[str]:
    """Normalised numbers in a text (129 = 129.0 = €129 = "129 €"; 49,90 = 49.9), number words.

    >>> sorted(numbers("€129.00 or 129 €, 1,281 goals, 49,90 EUR, three to 4 weeks, 130th"))
    ['1281', '129', '130', '3', '4', '49.9']
    """
    text = normalise(text)
    found = {_number_key(m) for m in _NUMBER_RE.findall(text)}
    for t in tokens(text):
        if t in NUMBER_WORDS:
            found.add(_number_key(str(NUMBER_WORDS[t])))
    return found


def sizes(text: str) -> set[str]:
    """Sizes written in capitals (S, M, XL ...), which must match exactly.

    >>> sorted(sizes("Available in M and XL, not in s. Made in the U.S. by M&S."))
    ['M', 'XL']
    """
    return set(_SIZE_RE.findall(normalise(text)))


def names(text: str) -> set[str]:
    """Capitalised words that are not sentence-initial (likely names), folded and stemmed.

    >>> sorted(names("Yesterday James and Oliver Phelps met I. The Times said so."))
    ['jam', 'oliver', 'phelp', 'tim']
    """
    out = set()
    text = normalise(text)
    for sentence in re.split(r"(?<=[.!?:;\"])\s+|\n", text):
        words = re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)*", sentence)
        for i, w in enumerate(words):
            if i == 0 or w == "I" or not w[0].isupper():
                continue
            if w.isupper() and w in SIZES:
                continue
            t = fold(w)
            if t in STOPWORDS or t in CURRENCIES:
                continue
            out.add(stem(t))
    return out


# == sentences and claims =====================================================================

_ABBREVIATIONS = ("mr", "mrs", "ms", "dr", "prof", "st", "vs", "etc", "e.g", "i.e", "approx",
                  "fig", "inc", "ltd", "jr", "sr", "u.s", "u.k", "ca", "cf")

SIGN_OFFS = (
    "hope this helps", "hope that helps", "hope it helps", "let me know", "feel free",
    "happy to help", "glad to help", "glad i could", "is there anything else",
    "anything else i can", "how can i help", "how may i help", "you're welcome",
    "you are welcome", "have a nice", "have a great", "have a good", "don't hesitate",
    "i'd be happy to help", "i would be happy to help", "nice to meet", "nice talking",
    "let me check", "let me see", "let me look", "one moment", "thanks for getting in touch",
    "thank you for getting in touch", "thanks for reaching out", "thank you for reaching out",
    "thanks for your message", "thank you for your message", "thanks for contacting",
    "thank you for contacting", "kind regards", "best regards",
    "warm regards", "best wishes", "good one", "please find", "requested information",
    "based on the records", "summary of the query results", "as requested",
)
"""Offers of help and sign-offs, wherever they occur in a sentence: never claims."""

OPENERS = ("hi", "hello", "hey", "thanks", "thank you", "great question", "good question",
           "good morning", "good afternoon", "good evening", "welcome", "sure thing",
           "certainly", "of course", "absolutely", "regards", "cheers", "enjoy", "ooh",
           "many thanks", "all the best", "best")
"""Greetings at the start of a sentence: the sentence is dropped unless the rest of it carries
at least three content words ("Thanks for asking: the coat is wool" keeps its claim)."""

NONCOMMITTAL = (
    "i don't know", "i do not know", "i dont know", "don't know", "not sure", "i'm unsure",
    "i am unsure", "it depends", "that depends", "depends on your", "cannot find",
    "can't find", "couldn't find", "could not find", "unable to", "no information",
    "not enough information", "no relevant information", "don't have information",
    "do not have information",
    "don't have any information", "do not have any information", "not able to",
    "cannot answer", "can't answer", "cannot say", "can't say", "hard to say",
    "difficult to say", "no idea", "not provided", "not mentioned", "does not mention",
    "doesn't mention", "does not provide", "doesn't provide", "not specified",
    "no answer", "i cannot help", "i can't help", "not clear", "unclear",
    "no results", "nothing found", "couldn't find anything", "not available in",
    "i have no", "beyond my", "as an ai",
)
"""Phrases that mark an evasive, vague or refusing answer (matched on word boundaries)."""


def sentences(text: str) -> list[str]:
    """Split a text into sentences (and lines); abbreviations and decimals stay whole.

    >>> sentences("It costs €49.90. Dr. Who says hi! Really?  Yes.\\n- a bullet")
    ['It costs €49.90.', 'Dr. Who says hi!', 'Really?', 'Yes.', '- a bullet']
    """
    out: list[str] = []
    for line in normalise_lines(text):
        start = 0
        for m in re.finditer(r"[.!?]+[\"')\]]*(?=\s|$)", line):
            end = m.end()
            before = line[start:m.start()].split()
            last = before[-1].lower().rstrip(".") if before else ""
            initial = len(last) == 1 and last.isalpha() and last.upper() not in SIZES
            if m.group().startswith(".") and (last in _ABBREVIATIONS or initial):
                continue
            piece = line[start:end].strip()
            if piece:
                out.append(piece)
            start = end
        piece = line[start:].strip()
        if piece:
            out.append(piece)
    return out


def normalise_lines(text: str) -> list[str]:
    """Non-empty lines of a text, each normalised.

    >>> normalise_lines(" a  b \\n\\n c ")
    ['a b', 'c']
    """
    return [n for n in (normalise(line) for line in text.splitlines()) if n]


_BOUNDARY_WORDS = (
    # clause links and relative pronouns
    "and|or|but|so|because|while|which|who|whom|whose|where|when|although|though|whereas|"
    "unless|that|"
    # prepositions that open adjuncts (place, time, means, company ...)
    "in|on|at|for|with|by|from|during|after|before|since|until|into|about|across|through|"
    "over|under|near|without|within|between|among|per")
_SPLIT = re.compile(
    r"\s*(?:[;()\[\]]|:(?!\d)|,(?!\d{3}\b))\s*"   # a comma in 9,000 or a colon in 10:30 is no edge
    r"|\s+-\s+"
    rf"|\s+(?=(?:{_BOUNDARY_WORDS})\b)", re.IGNORECASE)


def fragments(sentence: str) -> list[str]:
    """Split a sentence into lexical pieces: its clauses, list items and adjunct phrases.

    Edges are punctuation (commas, semicolons, colons, brackets), clause links (and, but,
    which, because ...) and the prepositions that open adjuncts (in, on, at, for, with, since
    ...). A piece without a content word joins its neighbour, so every piece has something to
    check. CHUNK_USEFULNESS checks pieces rather than whole sentences, so that a chunk which
    gave one part of a sentence counts as useful. (heuristic-v1 used them as claims.)

    >>> fragments("Corn was first domesticated 9,000 years ago in Mexico.")
    ['Corn was first domesticated 9,000 years ago', 'in Mexico.']
    >>> fragments("Yes, the Alba coat costs €179.00 and comes in grey.")
    ['Yes, the Alba coat costs €179.00', 'and comes', 'in grey.']
    >>> fragments("The office opens 10:30 daily.")
    ['The office opens 10:30 daily.']
    """
    pieces = [p.strip() for p in _SPLIT.split(sentence) if p and p.strip()]
    out: list[str] = []
    pending = ""  # leading pieces without content wait for the next piece
    for piece in pieces:
        if _content_count(piece) == 0:
            if out:
                out[-1] = _rejoin(out[-1], piece, sentence)
            else:
                pending = _rejoin(pending, piece, sentence) if pending else piece
            continue
        out.append(_rejoin(pending, piece, sentence) if pending else piece)
        pending = ""
    if pending and out:
        out[-1] = _rejoin(out[-1], pending, sentence)
    return [o.strip(" ,;:") for o in out]


def _rejoin(left: str, right: str, sentence: str) -> str:
    # the original text from the start of ``left`` to the end of ``right``
    i = sentence.find(left)
    j = sentence.find(right, i + len(left) if i >= 0 else 0)
    if i >= 0 and j >= 0:
        return sentence[i:j + len(right)]
    return f"{left} {right}"


def _content_count(text: str) -> int:
    return sum(1 for t in tokens(text) if is_content(t))


def is_greeting(sentence: str) -> bool:
    """A greeting, thanks or offer of help ("Hope this helps!"), not a claim.

    >>> [is_greeting(s) for s in ["Hope this helps!", "Let me know if you need more.",
    ...  "Thanks!", "Thanks for asking, the Alba coat is made of boiled wool.", "It is wool."]]
    [True, True, True, False, False]
    """
    toks = tokens(sentence)
    padded = " " + " ".join(toks) + " "
    if any(f" {p} " in padded for p in SIGN_OFFS):
        return True
    if len(toks) == 2 and toks[0] == "happy" and toks[1].endswith("ing"):
        return True  # "Happy reading!": a wish, not a claim
    for opener in OPENERS:
        if padded.startswith(f" {opener} "):
            rest = toks[len(opener.split()):]
            return sum(1 for t in rest if is_content(t)) < 3
    return False


def is_noncommittal(text: str) -> bool:
    """Whether a text contains an evasive, vague or refusing phrase.

    >>> is_noncommittal("I'm not sure, it depends on the fabric.")
    True
    >>> is_noncommittal("It is made of wool.")
    False
    """
    padded = " " + " ".join(tokens(text)) + " "
    return any(f" {p} " in padded for p in NONCOMMITTAL)


def statements(answer: str) -> list[str]:
    """The answer's sentences that can make claims: questions (but not a statement before a
    trailing question), greetings and offers of help dropped, and so are sentences without a
    content word.

    >>> statements("Hi! The coat is wool. Want another? It is warm, isn't it? Hope this helps!")
    ['The coat is wool.', 'It is warm']
    >>> statements("Let me check... Two match:\\n1. Slim Chino\\n2. Relaxed Chino")
    ['Two match: Slim Chino; Relaxed Chino']
    >>> statements("Hi! It is wool.\\n\\nKind regards,\\nPriya - Customer Care")
    ['It is wool.']
    """
    out = []
    found = sentences(_join_ordered_list(_EMOJI.sub("\n", answer)))
    signed = False  # after a closing ("Kind regards,"): what follows is a signature
    for n, s in enumerate(found):
        if s.rstrip("\"')]").endswith("?"):
            s = _statement_before_question(s)
        if (_ENUMERATOR.fullmatch(s) or s.endswith(":")) and n + 1 < len(found):
            continue  # "1." of a numbered list; "Orders by status:" introducing a list
        if signed and len(tokens(s)) <= 6 and not any(c.isdigit() for c in s):
            continue  # "Priya – Customer Care", "Jess (Support team)"
        if not s or is_greeting(s):
            signed = signed or s.rstrip().endswith(",")
            continue
        if _content_count(s) > 0:
            out.append(s)
    return out


_ENUMERATOR = re.compile(r"[(\[]?\d{1,3}[.)\]]")
_EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F]+")
"""Emoji: they end a sentence ("… for 79 euros 💸 Enjoy!")."""
_ITEM = re.compile(r"\s*(?:[-*•·]|\(?\d{1,3}[.)])\s+(.*\S)\s*$")
_ORDERED = re.compile(r"\b(?:first|sorted|ordered|ranked|ascending|descending|increasing|"
                      r"decreasing|to (?:highest|lowest|cheapest|most expensive|priciest))\b",
                      re.IGNORECASE)


def _join_ordered_list(answer: str) -> str:
    """A list introduced as ordered ("Sorted by price, cheapest first:" then bullet or
    numbered lines), or a list of bare values ("in these sizes:" then "* M", "* L"), as one
    line, so that its order (or what its values are) is one claim a judge can check; other
    text as it is.

    >>> _join_ordered_list("Cheapest first:\\n1. A (€5)\\n2. B (€9)\\nAnything else?")
    'Cheapest first: A (€5); B (€9)\\nAnything else?'
    """
    lines = answer.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith(":"):
            items = []
            j = i + 1
            while j < len(lines) and (m := _ITEM.match(lines[j])):
                items.append(m.group(1).rstrip(".;,"))
                j += 1
            short = all(len(tokens(x)) <= 3 for x in items)  # "sizes:" then "* M", "* L"
            if len(items) >= 2 and (_ORDERED.search(line) or short):
                out.append(line.rstrip() + " " + "; ".join(items))
                i = j
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


_QUESTION_OPENERS = frozenset(
    "do does did is are was were can could will would should have has had may might shall "
    "what which who whom whose when where why how isn't aren't don't doesn't didn't right "
    "eh ok okay".split())


def _statement_before_question(sentence: str) -> str:
    """The statement a question sentence opens with ("X is Y, do you like it?" -> "X is Y"),
    else ''.

    >>> _statement_before_question("Goldendoodles are called designer dogs, do you like them?")
    'Goldendoodles are called designer dogs'
    >>> _statement_before_question("Do you like them, or not?")
    ''
    """
    head, sep, tail = sentence.rpartition(",")
    if not sep or not head.strip():
        return ""
    first = (tokens(tail) or [""])[0]
    if first not in _QUESTION_OPENERS or (tokens(head) or [""])[0] in _QUESTION_OPENERS:
        return ""
    return head.strip()


def split_claims(question: str, answer: str) -> list[str]:
    """The CLAIMS rule: the answer's :func:`statements` (its sentences, without questions,
    greetings and offers of help), in order; numbers, units and names verbatim.

    A claim is a whole sentence: CLAIM_SUPPORT grades each one by how much of it the context
    contains, so a wrong detail costs part of the sentence's score without splitting it. (On
    the BEGIN WoW dev split, sentence claims rank answers better than the clause and adjunct
    :func:`fragments` of heuristic-v1; see docs/metrics/heuristic-judge.md.) The question is
    not used: a lexical judge cannot resolve pronouns with it.

    >>> split_claims("Any wool coats?", "Hi! Yes: the Alba coat costs €179.00; it is grey. "
    ...              "Want another? Hope this helps!")
    ['Yes: the Alba coat costs €179.00; it is grey.']
    >>> split_claims("q", "Oh wow!")
    []
    """
    return statements(answer)


# == claim support ============================================================================

SIGNALS = ("coverage", "bigrams", "missing_values", "missing_names", "missing_opinions",
           "first_person", "negation", "novel_words")
"""The evidence CLAIM_SUPPORT combines, in order (see :func:`check_claim`)."""

FIXED_SUPPORT_WEIGHTS = {"missing_values": -3.0, "missing_names": -3.0}
"""Weights that are set, not fitted: the rubric makes a number, size or name the context does
not give a reason for "not supported", but BEGIN has too few of them to estimate how strongly
(alone they rank its answers at AUC ~0.52). -3 is about the strongest fitted penalty (the first
person): it takes a claim otherwise copied from the context (~0.9) to ~0.1."""

# Fitted on the BEGIN WoW dev split (n = 421 answers with claims) by
#     .venv/bin/python benchmarks/judge_agreement.py --fit
# (logistic regression of the human "fully attributable" label on the mean confidence of an
# answer's claims, numpy Adam, L2 1e-3; FIXED_SUPPORT_WEIGHTS kept as they are);
# BEGIN WoW test and CMU-DoG are held out. After changing a signal: rerun it, paste its output.
SUPPORT_BIAS = -2.23
SUPPORT_WEIGHTS = {
    "coverage": 3.63,
    "bigrams": 0.79,
    "missing_values": -3.00,  # fixed, not fitted
    "missing_names": -3.00,  # fixed, not fitted
    "missing_opinions": -1.00,
    "first_person": -3.09,
    "negation": -0.57,
    "novel_words": -4.33,
}
"""Logistic weights of the :data:`SIGNALS`: confidence = sigmoid(bias + sum(weight * signal))."""


@dataclass(frozen=True)
class Support:
    """The heuristic's evidence for one claim against one context."""

    supported: bool
    confidence: float
    coverage: float
    missing_words: tuple[str, ...]
    missing_numbers: tuple[str, ...]
    missing_sizes: tuple[str, ...]
    missing_names: tuple[str, ...]
    missing_opinions: tuple[str, ...]
    first_person: bool
    negation_mismatch: bool
    signals: tuple[tuple[str, float], ...] = ()

    def reason(self) -> str:
        """One sentence saying what was found or what is missing.

        >>> check_claim("The coat costs €139.", "The coat costs €129.").reason()
        'Not supported (confidence 0.02): 67% of its content words are in the context; missing: numbers 139.'
        """
        problems = []
        if self.missing_numbers:
            problems.append("numbers " + ", ".join(self.missing_numbers))
        if self.missing_sizes:
            problems.append("sizes " + ", ".join(self.missing_sizes))
        if self.missing_names:
            problems.append("names " + ", ".join(self.missing_names))
        if self.missing_opinions:
            problems.append("the opinion " + ", ".join(self.missing_opinions))
        if self.first_person:
            problems.append("the first-person statement")
        if self.negation_mismatch:
            problems.append("the negation")
        if self.missing_words:
            problems.append("words " + ", ".join(self.missing_words[:8]))
        if self.supported:
            found = (f"Supported (confidence {self.confidence:.2f}): the context contains "
                     f"{self.coverage:.0%} of its content words")
            return f"{found}; not found: {'; '.join(problems)}." if problems else (
                f"{found} and all of its numbers, sizes and names.")
        missing = "; ".join(problems) if problems else "most of its wording"
        return (f"Not supported (confidence {self.confidence:.2f}): {self.coverage:.0%} of its "
                f"content words are in the context; missing: {missing}.")


class _Context:
    """A context prepared once for checking many claims."""

    def __init__(self, text: str) -> None:
        toks = tokens(text)
        self.stems = {_key(t) for t in toks}
        self.words = set(toks)
        self.bases = {_base(t) for t in toks}
        content = [_key(t) for t in toks if is_content(t)]
        self.bigrams = set(zip(content, content[1:], strict=False))
        self.numbers = numbers(text)
        self.sizes = {t.upper() for t in toks if t.upper() in SIZES}
        self.negated = any(t in NEGATIONS or t.endswith("n't") for t in toks)
        self.first_person = bool(self.words & FIRST_PERSON)


@lru_cache(maxsize=2048)
def _prepared(context: str) -> _Context:
    """The :class:`_Context` of a text, prepared once: the same context (a reference answer,
    the rows and chunks of an answer) is checked against many sets of claims. Read-only."""
    return _Context(context)


def _key(token: str) -> str:
    # the comparison key of a token: a normalised number or a stem
    return _number_key(token) if token[0].isdigit() else stem(token)


def _base(token: str) -> str:
    """A function word without its clitic ("it's" -> "it", "don't" -> "do", "can't" -> "can").

    >>> [_base(t) for t in ["it's", "don't", "can't", "won't", "i'm", "the"]]
    ['it', 'do', 'can', 'will', 'i', 'the']
    """
    if token.endswith("n't"):
        head = token[:-3]
        return {"ca": "can", "wo": "will", "sha": "shall"}.get(head, head)
    return token.split("'")[0] if "'" in token else token


def word_weight(key: str) -> float:
    """Weight of a content word (its stem) in coverage: :data:`COMMON_WEIGHT` for one of the
    :data:`COMMON_WORDS`, else 1 — an IDF prior written down by hand.

    >>> word_weight(stem("people")), word_weight(stem("encephalopathy")), word_weight("1977")
    (0.5, 1.0, 1.0)
    """
    return COMMON_WEIGHT if key in _COMMON_STEMS else 1.0


_COMMON_STEMS = frozenset(stem(w) for w in COMMON_WORDS)


def sigmoid(z: float) -> float:
    """The logistic function.

    >>> sigmoid(0.0), round(sigmoid(2.0), 4)
    (0.5, 0.8808)
    """
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def support_confidence(signals: dict[str, float]) -> float:
    """The probability that a claim is supported, from its :data:`SIGNALS`: a logistic
    function with the weights fitted on BEGIN WoW dev, rounded to 4 decimals.

    >>> support_confidence(dict.fromkeys(SIGNALS, 0.0)) == round(sigmoid(SUPPORT_BIAS), 4)
    True
    """
    z = SUPPORT_BIAS + sum(SUPPORT_WEIGHTS[name] * float(signals[name]) for name in SIGNALS)
    return round(sigmoid(z), 4)


def check_claim(claim: str, context: str | _Context) -> Support:
    """The CLAIM_SUPPORT rule for one claim: a support probability from interpretable signals.

    After reporting frames ("I found that", "I can see") are removed, the signals are

    - ``coverage``: the share of the claim's distinct content words (stemmed; numbers
      normalised) found in the context, each weighted by :func:`word_weight`;
    - ``bigrams``: the share of its adjacent content-word pairs found adjacent in the context
      (word order; the coverage when the claim has one content word);
    - ``missing_values``: 1 when a number or a size of the claim is not in the context;
    - ``missing_names``: 1 when a capitalised name is not; ``missing_opinions``: 1 when an
      evaluative word is not (an opinion the context does not share);
    - ``first_person``: 1 when the claim speaks about "I" and the context never does;
    - ``negation``: 1 when the claim is negated and the context has no negation;
    - ``novel_words``: the share of all its words, function words included (but not
      :data:`STRUCTURE_WORDS`), that the context never uses.

    :func:`support_confidence` combines them; ``supported`` is confidence >= 0.5.

    >>> check_claim("The coat costs €129.", "Wool coat: costs 129.00 EUR").supported
    True
    >>> s = check_claim("The coat costs €139.", "Wool coat: costs 129.00 EUR")
    >>> s.supported, s.missing_numbers
    (False, ('139',))
    >>> check_claim("Raw denim stretches with wear", "Raw denim stretches as you wear it."
    ...             ).supported
    True
    >>> check_claim("Raw denim never shrinks", "Raw denim shrinks in hot water.").supported
    False
    >>> check_claim("I love raw denim", "Raw denim shrinks in hot water.").first_person
    True
    >>> check_claim("I found that raw denim shrinks", "Raw denim shrinks.").supported
    True
    """
    ctx = context if isinstance(context, _Context) else _Context(context)
    checked = _REPORTING.sub(" ", claim)
    toks = tokens(checked)
    missing_numbers = tuple(sorted(numbers(checked) - ctx.numbers))
    missing_sizes = tuple(sorted(s for s in sizes(checked) if s not in ctx.sizes))
    missing_names = tuple(sorted(n for n in names(checked) if n not in ctx.stems))
    missing_opinions = tuple(sorted({t for t in toks if t in OPINION and stem(t) not in ctx.stems}))
    first_person = any(t in FIRST_PERSON for t in toks) and not ctx.first_person
    negation_mismatch = any(t in NEGATIONS or t.endswith("n't") for t in toks) and not ctx.negated

    def found(t: str, key: str) -> bool:
        return key in ctx.stems or key in ctx.numbers or (
            t in NUMBER_WORDS and _number_key(str(NUMBER_WORDS[t])) in ctx.numbers)

    keys: list[str] = []  # content keys in order, repeats kept (for bigrams)
    weights: dict[str, float] = {}
    covered: set[str] = set()
    missing_words: list[str] = []
    novel = 0
    for t in toks:
        if not is_content(t):
            base = _base(t)
            novel += base not in STRUCTURE_WORDS and base not in ctx.bases
            continue
        key = _key(t)
        keys.append(key)
        hit = found(t, key)
        novel += not hit
        if key in weights:
            continue
        weights[key] = word_weight(key)
        if hit:
            covered.add(key)
        elif not t[0].isdigit():  # missing numbers are reported as numbers
            missing_words.append(t)
    total = sum(weights.values())
    coverage = sum(weights[k] for k in covered) / total if total else 1.0
    pairs = list(zip(keys, keys[1:], strict=False))
    bigrams = sum(p in ctx.bigrams for p in pairs) / len(pairs) if pairs else coverage
    signals = {
        "coverage": coverage,
        "bigrams": bigrams,
        "missing_values": float(bool(missing_numbers or missing_sizes)),
        "missing_names": float(bool(missing_names)),
        "missing_opinions": float(bool(missing_opinions)),
        "first_person": float(first_person),
        "negation": float(negation_mismatch),
        "novel_words": novel / len(toks) if toks else 0.0,
    }
    confidence = support_confidence(signals)
    plain = len(covered) / len(weights) if weights else 1.0
    return Support(confidence >= 0.5, confidence, round(plain, 4), tuple(missing_words),
                   missing_numbers, missing_sizes, missing_names, missing_opinions,
                   first_person, negation_mismatch,
                   tuple((name, round(signals[name], 6)) for name in SIGNALS))


def claim_signals(claim: str, context: str | _Context) -> dict[str, float]:
    """The :data:`SIGNALS` of a claim against a context (what the logistic weights multiply).

    >>> sig = claim_signals("The coat costs €139.", "The coat costs €129.")
    >>> sig["missing_values"], sig["novel_words"]
    (1.0, 0.25)
    """
    return dict(check_claim(claim, context).signals)


def verify_claims(context: str, claims: Sequence[str]) -> ClaimSupportOutput:
    """CLAIM_SUPPORT: one verdict per claim, in order, each with its support probability as
    ``confidence`` and ``supported`` = confidence >= 0.5.

    >>> out = verify_claims("The Slim Chino costs €49.90; 4 left in size M.",
    ...                     ["The Slim Chino costs €49.90", "4 in size M", "It costs €59."])
    >>> [v.supported for v in out.verdicts]
    [True, True, False]
    """
    ctx = _prepared(context)
    verdicts = []
    for claim in claims:
        s = check_claim(claim, ctx)
        verdicts.append(ClaimVerdict(claim=claim, supported=s.supported, reason=s.reason(),
                                     confidence=s.confidence))
    return ClaimSupportOutput(verdicts=verdicts)


SUPPORTED = 0.95
"""Confidence of a claim whose every assertion the rows settle in its favour."""
CONTRADICTED = 0.02
"""Confidence of a claim one of whose assertions the rows contradict (one such claim of two
takes the mean below 0.5)."""
UNSETTLED = 0.04
"""Confidence of a claim that asserts something (a value, a name) neither the rows nor the text
context settle."""
LOOSE = 0.75
"""Confidence of a claim the rows support but for one leftover word of phrasing."""


def verify_with_rows(context: str, tables: Sequence, claims: Sequence[str],
                     question: str | None = None) -> ClaimSupportOutput:
    """CLAIM_SUPPORT with rows: the row verifier (:mod:`evalharness.judge.rows`) settles each
    claim against the tables; what it cannot settle, and a contradicted claim that names no
    row, the text context decides by the lexical rule (:func:`check_claim`). One verdict per
    claim, with its evidence.

    >>> from evalharness.judge.tasks import RowTable
    >>> t = RowTable(columns=["name", "price", "stock"], rows=[["Slim Chino", 49.9, 0]])
    >>> out = verify_with_rows("Chinos are cotton twill.", [t], ["The Slim Chino costs €49.90.",
    ...     "The Slim Chino is in stock.", "Chinos are cotton twill."])
    >>> [(v.supported, v.confidence) for v in out.verdicts]
    [(True, 0.95), (False, 0.02), (True, 0.8993)]
    >>> out.verdicts[1].evidence[0]
    "✗ row 1 stock = 0: 'in stock' needs more than 0"
    """
    verdicts = []
    for s in settle_claims(tables, claims, question):
        claim = s.claim
        evidence = [*("✗ " + a for a in s.against), *("✓ " + f for f in s.for_)]
        text = check_claim(claim, _prepared(context)) if context.strip() and (
            s.unsettled or (s.against and not s.named)) else None
        if text is not None and text.supported:
            why = ("it names no row and the text supports it" if s.against else
                   f"the rows do not settle it ({s.unsettled[0]}); the text does")
            verdicts.append(ClaimVerdict(
                claim=claim, supported=True, confidence=text.confidence,
                reason=f"Supported: {why}: {text.reason()}",
                evidence=[*evidence, "text: " + text.reason()]))
        elif s.against:
            verdicts.append(ClaimVerdict(
                claim=claim, supported=False, confidence=CONTRADICTED,
                reason="Contradicted by the rows: " + s.against[0] + ".", evidence=evidence))
        elif s.unsettled:
            verdicts.append(ClaimVerdict(
                claim=claim, supported=False, confidence=UNSETTLED,
                reason="Not supported: " + "; ".join(s.unsettled) + ".",
                evidence=[*evidence, *("? " + u for u in s.unsettled)]))
        elif s.loose:
            verdicts.append(ClaimVerdict(
                claim=claim, supported=True, confidence=LOOSE,
                reason="Supported by the rows: " + s.for_[0] + "; " + s.loose[0] + ".",
                evidence=[*evidence, *("~ " + x for x in s.loose)]))
        else:
            verdicts.append(ClaimVerdict(
                claim=claim, supported=True, confidence=SUPPORTED,
                reason=("Supported by the rows: " + s.for_[0] + "." if s.for_ else
                        "Supported: it asserts nothing the rows could contradict."),
                evidence=evidence))
    return ClaimSupportOutput(verdicts=verdicts)


# == questions (answer relevancy) =============================================================


def pseudo_questions(answer: str, n: int) -> QuestionsOutput:
    """QUESTIONS, offline: up to ``n`` pseudo-questions made from the answer's first ``n``
    statements ("Is it true that <statement>?").

    A lexical judge cannot write the questions an answer answers; a statement turned into a
    question keeps exactly the words a real question's embedding would share with it. The
    first statements are used because an answer states first what it answers (heuristic-v1
    took the statements with the most content words, which favours long digressions). Every
    question carries the answer's noncommittal flag (:func:`answer_is_noncommittal`).

    >>> out = pseudo_questions("The Alba coat is grey boiled wool. Hope this helps!", 3)
    >>> [(q.question, q.noncommittal) for q in out.questions]
    [('Is it true that the Alba coat is grey boiled wool?', False)]
    >>> pseudo_questions("Yes: it is wool.", 1).questions[0].question
    'Is it true that it is wool?'
    >>> pseudo_questions("I'm not sure, sorry.", 2).questions[0].noncommittal
    True
    """
    pool = statements(answer) or sentences(answer) or [normalise(answer)]
    flag = answer_is_noncommittal(answer)
    return QuestionsOutput(questions=[
        GeneratedQuestion(question=_as_question(s), noncommittal=flag) for s in pool[:n]])


def answer_is_noncommittal(answer: str) -> bool:
    """The answer-level noncommittal flag: a noncommittal phrase in the first sentence or in
    more than half of the sentences, or an answer without any statement.

    >>> answer_is_noncommittal("It depends on the fit. Slim fits run small.")
    True
    >>> answer_is_noncommittal("Slim fits run small. Regular fits do not; I'm not sure why.")
    False
    >>> answer_is_noncommittal("Hello!")
    True
    """
    sents = sentences(answer)
    if not statements(answer):
        return True
    flagged = [is_noncommittal(s) for s in sents]
    return flagged[0] or 2 * sum(flagged) > len(flagged)


_INTERJECTION = re.compile(r"^(?:(?:yes|yeah|yep|no|nope|sure|well|oh|ok|okay|so)\b[\s,:;.!-]*)+",
                           re.IGNORECASE)


def _as_question(statement: str) -> str:
    body = _INTERJECTION.sub("", statement.strip()).rstrip(".!?;:,").strip()
    if not body:
        return "?"
    first = body.split()[0]
    if not (len(first) > 1 and (first.isupper() or any(c.isupper() for c in first[1:]))):
        body = body[0].lower() + body[1:]
    return f"Is it true that {body}?"


# == chunk usefulness =========================================================================

OVERLAP_THRESHOLD = 0.5
"""Share of the answer's distinct content words a chunk must contain to be useful on its own."""


def judge_chunks(question: str, answer: str, chunks: Sequence[str]) -> ChunkUsefulnessOutput:
    """CHUNK_USEFULNESS: a chunk is useful when it supports at least one piece of the answer
    (its sentences' :func:`fragments`) with at least two content words (the CLAIM_SUPPORT rule
    with the chunk as context), or contains at least ``OVERLAP_THRESHOLD`` of the answer's content words.

    >>> out = judge_chunks("How much is the chino?", "The Slim Chino costs €49.90.",
    ...                    ["Slim Chino, navy, €49.90", "Wash raw denim rarely."])
    >>> [v.useful for v in out.verdicts]
    [True, False]
    """
    claims = [f for s in statements(answer) for f in fragments(s) if _content_count(f) >= 2]
    answer_keys = set(content_stems(answer))
    verdicts = []
    for chunk in chunks:
        ctx = _Context(chunk)
        supported = next((c for c in claims if check_claim(c, ctx).supported), None)
        overlap = (sum(1 for k in answer_keys if k in ctx.stems) / len(answer_keys)
                   if answer_keys else 0.0)
        if supported is not None:
            verdicts.append(ChunkVerdict(useful=True, reason=f"Supports the claim "
                                         f"\"{_short(supported)}\"."))
        elif overlap >= OVERLAP_THRESHOLD:
            verdicts.append(ChunkVerdict(useful=True, reason=f"Contains {overlap:.0%} of the "
                                         f"answer's content words."))
        else:
            verdicts.append(ChunkVerdict(useful=False, reason=f"Supports no claim of the "
                                         f"answer and contains only {overlap:.0%} of its "
                                         f"content words."))
    return ChunkUsefulnessOutput(verdicts=verdicts)


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# == embeddings ===============================================================================


def features(text: str) -> dict[str, float]:
    """Hashed features of a text: content stems (1.0), adjacent content-stem bigrams (0.5) and
    character trigrams of content words (0.2); stopwords only when nothing else is left, and a
    constant feature for an empty text.

    >>> sorted(features("Wool coats")) [:4]
    ['b:wool coat', 'c:#co', 'c:#wo', 'c:at#']
    >>> features("")
    {'<empty>': 1.0}
    """
    stems = content_stems(text)
    if not stems:
        stems = [stem(t) for t in tokens(text)]
    if not stems:
        return {"<empty>": 1.0}
    out: dict[str, float] = {}
    for s in stems:
        out[f"w:{s}"] = out.get(f"w:{s}", 0.0) + 1.0
        padded = f"#{s}#"
        for i in range(len(padded) - 2):
            key = f"c:{padded[i:i + 3]}"
            out[key] = out.get(key, 0.0) + 0.2
    for a, b in zip(stems, stems[1:], strict=False):
        out[f"b:{a} {b}"] = out.get(f"b:{a} {b}", 0.0) + 0.5
    return out


def _slot(feature: str) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % EMBED_DIM, (1.0 if (value >> 63) & 1 else -1.0)


def embed_texts(texts: Iterable[str]) -> np.ndarray:
    """Signed feature-hashing embeddings, one L2-normalised row per text; the same on every
    machine and in every process (blake2b, not Python's salted ``hash``).

    >>> v = embed_texts(["wool coat", "wool coats", "raw denim jeans"])
    >>> v.shape, bool(np.allclose(np.linalg.norm(v, axis=1), 1.0))
    ((3, 512), True)
    >>> bool(v[0] @ v[1] > 0.99 and v[0] @ v[2] < 0.3)
    True
    """
    texts = list(texts)
    out = np.zeros((len(texts), EMBED_DIM), dtype=float)
    for row, text in enumerate(texts):
        for feature, weight in features(text).items():
            i, sign = _slot(feature)
            out[row, i] += sign * weight
        norm = float(np.linalg.norm(out[row]))
        if norm == 0.0:  # every feature cancelled out (astronomically rare)
            i, sign = _slot("<empty>")
            out[row, i] = sign
            norm = 1.0
        out[row] /= norm
    return out


# == the entry point and the backend ==========================================================


def answer(task: JudgmentTask, inputs: BaseModel) -> BaseModel:
    """Answer a judgment task with the heuristic rules: a pure function of task and inputs.

    Raises :class:`HeuristicCannotJudge` for SQL equivalence, ``ValueError`` for an unknown
    task. An OpenAI-compatible fake server in the tests calls this to answer like a model.

    >>> answer(CLAIMS, ClaimsInput(question="Price?", answer="It costs €49.90. Thanks!"))
    ClaimsOutput(claims=['It costs €49.90.'])
    """
    inputs = task.input.model_validate(inputs.model_dump()) \
        if not isinstance(inputs, task.input) else inputs
    if task.id == CLAIMS.id:
        assert isinstance(inputs, ClaimsInput)
        return ClaimsOutput(claims=split_claims(inputs.question, inputs.answer))
    if task.id == CLAIM_SUPPORT.id:
        assert isinstance(inputs, ClaimSupportInput)
        if inputs.tables:
            return verify_with_rows(inputs.context, inputs.tables, inputs.claims,
                                    inputs.question)
        return verify_claims(inputs.context, inputs.claims)
    if task.id == QUESTIONS.id:
        assert isinstance(inputs, QuestionsInput)
        return pseudo_questions(inputs.answer, inputs.n)
    if task.id == CHUNK_USEFULNESS.id:
        assert isinstance(inputs, ChunkUsefulnessInput)
        return judge_chunks(inputs.question, inputs.answer, inputs.chunks)
    if task.id == SQL_EQUIVALENCE.id:
        raise HeuristicCannotJudge(SQL_REFUSAL)
    if task.id == SYNTH_CASE.id:  # no model to reword with: the drafts, as they are
        assert isinstance(inputs, SynthCaseInput)
        return SynthCaseOutput(question=inputs.draft_question, answer=inputs.draft_answer)
    raise ValueError(f"the heuristic judge does not know the task {task.id!r}")


class HeuristicJudge(Judge):
    """The default, offline judge: deterministic lexical rules, no model, no network."""

    backend = "heuristic"
    is_llm = False
    cacheable = False

    @property
    def model(self) -> str | None:
        return MODEL

    @property
    def embedding_model(self) -> str | None:
        return EMBEDDING_MODEL

    def label(self) -> str:
        return "heuristic (offline, deterministic; not an LLM)"

    MEMO_SIZE = 65536
    """How many answers (and embedded texts) a judge remembers: identical inputs, which a large
    run repeats, are answered once — :func:`answer` is a pure function of task and inputs."""

    async def complete(self, task: JudgmentTask, inputs: BaseModel, key: str) -> Judgment:
        base = {"task": task.id, "rubric_version": task.version, "backend": self.backend,
                "model": self.model, "key": key, "raw": None, "requests": 0}
        found = self._answer(task, inputs)
        if isinstance(found, BaseModel):
            return Judgment(**base, output=found)
        return Judgment(**base, error=found)

    def _answer(self, task: JudgmentTask, inputs: BaseModel) -> BaseModel | str:
        """:func:`answer`'s output (a private copy), or the error text; memoised on the task
        and the inputs' content."""
        memo = self.__dict__.setdefault("_answers", LRU(self.MEMO_SIZE))
        key = (task.id, task.version, type(inputs).__qualname__,
               hashlib.sha256(inputs.model_dump_json().encode()).digest())
        found = memo.get(key, None)
        if found is None:
            try:
                found = answer(task, inputs)
            except HeuristicCannotJudge as exc:
                found = str(exc)
            except Exception as exc:  # a judgment is an output or an error, never an exception
                found = f"heuristic judge failed: {type(exc).__name__}: {exc}"
            memo.put(key, found)
        return found.model_copy(deep=True) if isinstance(found, BaseModel) else found

    async def embed(self, texts: list[str]) -> Embeddings:
        try:
            vectors = self._embed(texts)
        except Exception as exc:
            return Embeddings(None, error=f"heuristic embedding failed: {exc}",
                              backend=self.backend, model=self.embedding_model)
        return Embeddings(vectors, backend=self.backend, model=self.embedding_model)

    def close(self) -> None:
        """Forget the remembered answers and embeddings, and the prepared texts, too."""
        self.__dict__.pop("_answers", None)
        self.__dict__.pop("_vectors", None)
        for cached in (_prepared, _tokens, normalise):
            cached.cache_clear()
        super().close()

    def _embed(self, texts: list[str]) -> np.ndarray:
        """:func:`embed_texts`, each distinct text embedded once (rows are independent)."""
        memo = self.__dict__.setdefault("_vectors", LRU(self.MEMO_SIZE))
        rows = [memo.get(t, None) for t in texts]
        missing = list(dict.fromkeys(t for t, r in zip(texts, rows, strict=True) if r is None))
        if missing:
            fresh = dict(zip(missing, embed_texts(missing), strict=True))
            for text, row in fresh.items():
                row.flags.writeable = False
                memo.put(text, row)
            rows = [fresh[t] if r is None else r for t, r in zip(texts, rows, strict=True)]
        out = np.empty((len(texts), EMBED_DIM), dtype=float)
        for i, row in enumerate(rows):
            out[i] = row
        return out
