"""Refusal: did the answer decline, and should it have?

An unanswerable case (``gold.refusal: true``) passes when the system says it cannot answer;
an answerable one fails when it does. :func:`detect` decides whether an answer is a refusal
with a fixed list of English patterns — deterministic, no judge — and :func:`refusal_value`
compares that with the case's expectation.

The rule (docs/metrics/generation.md#refusal): an answer is a **refusal** when it says that
the system's knowledge, data or search does not cover the question — *I don't know*, *I
can't answer*, *I have no information on X*, *there is no information about X in our
catalog*, *X is not in our database*, *the documents don't mention X*, *I couldn't find
X*, *that is outside what I can help with*, or an apology that the shop does not carry X.
A **negative answer** is not a refusal: *No, we have no red dresses under €50*, *There are
no orders from March*, *None of our coats is waterproof* state a fact about the world the
data describes. The patterns tell the two apart by what the sentence is about: the system's
knowledge and sources (refusal) or the things in them (answer).

Two kinds of pattern:

- **strong** — ignorance, inability, missing information, not in the data, out of scope: a
  refusal wherever they occur;
- **weak** — a search that found nothing (*I couldn't find any red dresses*, *no results
  were found*) and an apology that the shop does not carry, sell, stock or offer something
  (*Unfortunately we don't carry Nike*): a refusal unless the answer opens with a direct
  *No,* / *Yes,* (then it answers a yes/no question, and the rest is its explanation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalharness import MetricValue
from evalharness.models import Case, GeneratorStep

# Typographic apostrophes and quotes, mapped one character to one, so a match's span is the
# same in the original answer.
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u201c": '"',
                         "\u201d": '"'})

_S = r"\s+"
_NOT = r"(?:not|n't)"
_DONT = r"(?:do\s+not|don't|dont|does\s+not|doesn't|doesnt|did\s+not|didn't|didnt)"
_WE = r"(?:i|we)"
_INFO = (r"(?:information|info|data|details|knowledge|records?|documentation|figures|"
         r"statistics|answers?|context|mention|way\s+to\s+know|access)")
_INFO_NOUN = r"(?:information|info|data|details|records?|mention|documentation|answers?)"
_SOURCE = (r"(?:catalog(?:ue)?|database|data(?:set)?|records?|documents?|docs|"
           r"knowledge(?:\s+base)?|system|sources?|context|information|blog(?:\s+posts?)?|"
           r"articles?|corpus|files?|search\s+results?|product\s+(?:list|catalog(?:ue)?))")
_OWNER = r"(?:our|the|my|this|these|its|your|any\s+of\s+(?:our|the|my))"
_ABLE = (r"(?:\s+cannot|\s+can\s*not|\s+can't|\s+cant|\s+could\s*not|\s+couldn't|\s+couldnt|"
         r"(?:\s+am|'m|\s+are|'re|\s+was|\s+were)?\s+unable\s+to|"
         r"(?:\s+am|'m|\s+are|'re|\s+was|\s+were)\s+not\s+able\s+to|"
         r"\s+(?:wasn't|weren't)\s+able\s+to|\s+(?:won't|will\s+not)\s+be\s+able\s+to|"
         r"(?:\s+am|'m|\s+are|'re)\s+not\s+in\s+a\s+position\s+to)")
_ADVERB = (r"(?:\s+(?:really|currently|fully|accurately|reliably|precisely|exactly|yet|"
           r"directly|actually|quite|properly|seem\s+to|possibly))?")
_TELL = r"(?:say|tell)(?!\s+(?:you\s+)?(?:for\s+sure|exactly|precisely|offhand))"
_KNOW = (rf"(?:answer|help|assist|determine|confirm|verify|access|look\s+up|check|identify|"
         rf"retrieve|know|comment|{_TELL})")
_HAND = r"(?:provide|share|give|offer|find|locate)"
_APOLOGY = (r"(?:sorry|unfortunately|regrettably|i\s+apologi[sz]e|"
            r"(?:i'm|i\s+am)\s+afraid)")


@dataclass(frozen=True)
class Rule:
    """One refusal pattern: its name (the kind of refusal), strength, and expression."""

    name: str
    strong: bool
    pattern: re.Pattern


def _rule(name: str, strong: bool, *patterns: str) -> list[Rule]:
    return [Rule(name, strong, re.compile(p, re.IGNORECASE)) for p in patterns]


RULES: list[Rule] = [
    # I don't know / no idea / I'm not aware of
    *_rule("ignorance", True,
           rf"\b{_WE}{_S}{_DONT}{_S}know\b(?!{_S}of\b)",
           rf"\b(?:i{_S}have|i've)(?:{_S}got)?{_S}no{_S}(?:idea|clue)\b",
           r"^\W*no\s+idea\b",
           rf"\b(?:i'm|i{_S}am){_S}{_NOT}{_S}aware{_S}of\b",
           rf"\bno{_S}way{_S}(?:for{_S}me{_S})?to{_S}(?:know|tell|determine|say)\b"),
    # I can't answer / I'm unable to help / it cannot be determined
    *_rule("inability", True,
           rf"\bi{_ABLE}{_ADVERB}{_S}{_KNOW}\b",
           rf"\b(?:not{_S}possible|impossible){_S}(?:for{_S}me{_S})?to{_S}"
           r"(?:determine|say|tell|answer|know|confirm|identify)\b",
           rf"\bcan(?:not|'t|{_S}not){_S}be{_S}(?:determined|answered|confirmed|established|"
           r"known)\b"),
    # I don't have information / we have no data on / there is no record of /
    # I couldn't find any information
    *_rule("no information", True,
           rf"\b{_WE}{_S}{_DONT}{_S}have{_S}(?:[\w-]+{_S}){{0,3}}?{_INFO}\b",
           rf"\b{_WE}{_S}have{_S}no{_S}(?:[\w-]+{_S}){{0,2}}?{_INFO}\b",
           rf"\b{_WE}{_ABLE}{_ADVERB}{_S}{_HAND}{_S}(?:(?:you|any|the|that|this|enough|"
           rf"relevant|specific|more|reliable|such){_S}){{0,3}}{_INFO_NOUN}\b",
           rf"\bthere(?:{_S}is|'s|{_S}are|{_S}was|{_S}were){_S}no{_S}(?:[\w-]+{_S}){{0,2}}?"
           rf"{_INFO_NOUN}\b",
           rf"\bthere(?:{_S}is|'s|{_S}are|{_S}was|{_S}were)(?:n't|{_S}not){_S}(?:any{_S})?"
           rf"(?:enough{_S}|sufficient{_S})?{_INFO_NOUN}\b",
           rf"\bno{_S}(?:[\w-]+{_S})?(?:information|data|details|records?)"
           rf"(?:{_S}(?:is|are|was|were))?{_S}(?:available|provided|given|found|on|about|"
           r"regarding|for|concerning)\b",
           rf"\b(?:not{_S}enough|insufficient){_S}(?:information|data|context|details)\b",
           rf"\b(?:information|info|data|details|answer)(?:{_S}(?:about|on|for|regarding|of|"
           rf"concerning)(?:{_S}[\w-]+){{1,3}}?)?{_S}(?:(?:is|are|was|were){_S}(?:not{_S}|un)|"
           r"(?:isn't|aren't|wasn't|weren't)\s+)(?:available|provided|included|given|known|"
           r"specified|listed|mentioned|present)\b"),
    # X is not in our catalog / the documents don't mention / does not appear in our data
    *_rule("not in the data", True,
           rf"(?:\bnot|\b\w+n't){_S}(?:\w+{_S})?(?:in|on|part{_S}of|(?:included|listed|found|"
           r"mentioned|covered|present|contained|stored|recorded|available)\s+(?:in|on|by)"
           rf"){_S}{_OWNER}{_S}(?:[\w-]+{_S})?{_SOURCE}\b",
           rf"\b{_SOURCE}{_S}{_DONT}{_S}(?:\w+{_S})?(?:mention|say|specify|cover|state|"
           r"address|answer|describe|tell)\b",
           rf"\b{_SOURCE}{_S}{_DONT}{_S}(?:contain|include|provide|have|give|list|offer)"
           rf"{_S}(?:(?:any|enough|the|that|this|such){_S})?"
           r"(?:information|info|data|details|answer)\b",
           rf"\b{_DONT}{_S}(?:appear|exist|show{_S}up){_S}(?:to{_S}be{_S})?(?:in|on){_S}"
           rf"{_OWNER}{_S}(?:[\w-]+{_S})?{_SOURCE}\b"),
    # outside my scope / I can only answer questions about our shop
    *_rule("out of scope", True,
           rf"\bi{_S}can{_S}only{_S}(?:help|answer|assist|respond|talk|discuss|provide)\b",
           rf"\b(?:outside|beyond){_S}(?:of{_S})?(?:the{_S}scope|my{_S}(?:knowledge|scope|"
           rf"expertise|capabilities|data)|what{_S}i{_S}(?:can|know)|the{_S}(?:information|"
           rf"data|knowledge|documents)|our{_S}(?:data|catalog(?:ue)?|records|documents))",
           rf"\bi{_S}(?:must|have{_S}to){_S}decline\b",
           rf"\bi{_S}(?:won't|will{_S}not|would{_S}rather{_S}not){_S}(?:speculate|guess)\b"),
    # I couldn't find any red dresses / no results were found / nothing in our catalog
    *_rule("nothing found", False,
           rf"\b{_WE}{_ABLE}{_ADVERB}{_S}(?:find|locate)\b",
           rf"\b(?:could|can)\s*(?:not|n't){_S}be{_S}(?:found|located)\b",
           rf"\bno{_S}(?:results?|matches|matching{_S}\w+)(?:{_S}(?:were|was|could{_S}be))?"
           rf"{_S}found\b",
           rf"\bnothing{_S}(?:was{_S}|could{_S}be{_S})?found\b",
           rf"\bnothing{_S}in{_S}{_OWNER}{_S}(?:[\w-]+{_S})?{_SOURCE}\b"),
    # Unfortunately we don't carry Nike
    *_rule("does not carry", False,
           rf"\b{_APOLOGY}\b[^.!?]{{0,60}}?\b{_WE}{_S}(?:{_DONT}|no{_S}longer)"
           rf"(?:{_S}currently)?{_S}(?:carry|sell|stock|offer|list)\b"),
]
"""The patterns, strong ones first (see the module docstring)."""

_DIRECT = re.compile(r"^\W*(?:no|nope|yes|yeah|yep)\s*[,.;:!\u2014\u2013-]", re.IGNORECASE)
"""An answer that opens with a direct yes or no: it answers a yes/no question."""


@dataclass(frozen=True)
class Refusal:
    """Whether an answer is a refusal, and the evidence."""

    refused: bool
    phrase: str | None = None
    """The part of the answer that matched (as written), or ``None``."""
    rule: str | None = None
    """The kind of refusal that matched (``ignorance``, ``inability``, ``no information``,
    ``not in the data``, ``out of scope``, ``nothing found``, ``does not carry``)."""
    note: str | None = None
    """Why a match did not count, or why an empty answer is no refusal."""


def detect(answer: str | None) -> Refusal:
    """Whether ``answer`` declines (see the module docstring for the rule).

    >>> detect("I'm sorry, I couldn't find any information about that.").rule
    'no information'
    >>> detect("No, we have no red dresses under €50.").refused
    False
    >>> detect("Unfortunately we don't carry Nike shoes.").phrase
    "Unfortunately we don't carry"
    >>> r = detect("No, unfortunately we don't carry sofas.")
    >>> r.refused, r.rule
    (False, None)
    >>> print(r.note)
    opens with a direct yes or no, so `unfortunately we don't carry` explains the answer rather than declining
    """
    text = (answer or "").strip()
    if not text:
        return Refusal(False, note="the answer is empty: a missing answer is not a refusal")
    normal = text.translate(_QUOTES)
    weak = None
    for rule in RULES:
        m = rule.pattern.search(normal)
        if m is None:
            continue
        phrase = text[m.start():m.end()]
        if rule.strong:
            return Refusal(True, phrase, rule.name)
        weak = weak or (rule, phrase)
    if weak is None:
        return Refusal(False)
    rule, phrase = weak
    if _DIRECT.match(normal):
        return Refusal(False, note=f"opens with a direct yes or no, so `{phrase}` explains "
                       "the answer rather than declining")
    return Refusal(True, phrase, rule.name)


def expectation(case: Case) -> tuple[bool | None, str]:
    """Whether the case's answer should be a refusal, and where that comes from — or
    ``None`` and the reason it is unknown."""
    gold = case.gold
    if gold.refusal is not None:
        return gold.refusal, "gold.refusal"
    if not (gold.answer or "").strip():
        return None, ("the case has neither a refusal label (gold.refusal) nor a reference "
                      "answer (gold.answer)")
    reference = detect(gold.answer)
    if reference.refused:
        return None, (f"the case has no refusal label (gold.refusal) and its reference answer "
                      f"(gold.answer) is itself a refusal ({reference.phrase!r}); set "
                      "gold.refusal: true if nothing in the data answers the question")
    return False, "gold.answer (answerable: the reference answer is not a refusal)"


def refusal_value(case: Case, step: GeneratorStep) -> MetricValue:
    """1 when the answer's refusal status is the expected one, 0 when not; an error with the
    reason when the case says nothing about what is expected."""
    found = detect(step.answer)
    evidence = {"refused": found.refused, "phrase": found.phrase, "rule": found.rule}
    if found.note:
        evidence["note"] = found.note
    expected, source = expectation(case)
    if expected is None:
        return MetricValue.failed(source, **evidence)
    return MetricValue.of(found.refused == expected, expected=expected, expected_from=source,
                          **evidence)
