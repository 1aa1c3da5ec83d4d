"""Numeric consistency: every figure in an answer must appear in what the generator was given."""

from __future__ import annotations

import re

from evalharness import MetricValue

# A figure: digits with optional thousands separators and decimals (129, 1,299.00, 41.5).
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w])")


def figures(text: str) -> list[str]:
    """The figures in ``text``, normalised (no thousands separators, no trailing zeros).

    Dates' parts and sizes count too: a figure is any number the reader could check.

    >>> figures("The Relaxed Chino costs €59.90 (was 1,299.00); 3 left in size 32.")
    ['59.9', '1299', '3', '32']
    >>> figures("no figures here, only v2 and A4")
    []
    """
    out = []
    for whole, frac in _NUMBER.findall(text or ""):
        value = whole.replace(",", "")
        frac = (frac or "").rstrip("0")
        out.append(f"{int(value)}.{frac}" if frac else str(int(value)))
    return out


def numeric_consistency(answer: str, sources: list[str], question: str) -> MetricValue:
    """Share of the answer's figures found in the sources (or echoed from the question).

    >>> v = numeric_consistency("The coat is 129.00 and 2 are left.", ["price: 129, stock: 3"], "")
    >>> v.value, v.details["mismatches"]
    (0.5, ['2'])
    >>> numeric_consistency("Wash it gently.", ["..."], "").error
    'the answer states no figures to check'
    """
    found = figures(answer)
    if not found:
        return MetricValue.failed("the answer states no figures to check")
    known = set(figures(" \n".join(sources))) | set(figures(question))
    mismatches = [f for f in found if f not in known]
    return MetricValue.of(1 - len(mismatches) / len(found), figures=found,
                          mismatches=mismatches)
