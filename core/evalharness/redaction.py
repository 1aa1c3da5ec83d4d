"""Redaction of secrets — API keys, bearer tokens — from every error text before it is stored.

:func:`redact` replaces the exact value of every key a judge was configured with (registered
through :func:`add_secret`) and anything shaped like a secret: OpenAI-style ``sk-...`` keys,
``Bearer <token>``, and ``api_key: <value>``-style assignments. Every error text and raw
answer of a failed judgment passes through it, and so does every error of user code the core
records (:func:`evalharness.errors.describe`).
"""

from __future__ import annotations

import re
import threading

MASK = "***"

MIN_SECRET_LENGTH = 8
"""Shorter configured values are not redacted by value (they would mangle ordinary words);
the patterns still apply."""

PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"sk-[A-Za-z0-9_-]{16,}"), MASK),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+"), rf"\1 {MASK}"),
    (re.compile(r"(?i)\b((?:x-)?api[ _-]?key|access[_-]?token|secret|password)"
                r"(\"?\s*[:=]\s*[\"']?)[^\s\"',;}&]+"), rf"\1\2{MASK}"),
    # the password of a URL's user (postgresql://user:password@host/db)
    (re.compile(r"\b([a-z][a-z0-9+.-]*://[^\s:/@'\"]*):[^\s@/'\"]+@", re.IGNORECASE),
     rf"\1:{MASK}@"),
]
"""Secret-shaped text: an OpenAI-style key, a bearer token, ``api_key=...``, a URL's password
and the like."""

_SECRETS: set[str] = set()
_LOCK = threading.Lock()


def add_secret(value: str | None) -> None:
    """Remember a secret (a configured API key) so :func:`redact` removes its exact value
    wherever it appears. Values shorter than :data:`MIN_SECRET_LENGTH` are ignored."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _LOCK:
            _SECRETS.add(value)


def redact(text: str) -> str:
    """``text`` with every known secret and every secret-shaped string replaced by ``***``.

    >>> redact("Incorrect API key provided: sk-proj-abcdefghijklmnop1234. See the docs.")
    'Incorrect API key provided: ***. See the docs.'
    >>> redact("sent header Authorization: Bearer abc.def-123")
    'sent header Authorization: Bearer ***'
    >>> redact('{"api_key": "hunter2-long", "model": "m"} password=letmein')
    '{"api_key": "***", "model": "m"} password=***'
    >>> redact("got 'postgresql://monitor:hunter2@db:5432/evals' (postgresql://u@db/x)")
    "got 'postgresql://monitor:***@db:5432/evals' (postgresql://u@db/x)"
    >>> redact("The coat costs 129 euros; ask-me-anything is a skill.")
    'The coat costs 129 euros; ask-me-anything is a skill.'
    """
    if not text:
        return text
    with _LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    return text
