"""Judges: what an evaluator that ``needs_judge`` receives as ``context.judge``.

A judge has an identity (backend, model, and whether it is an LLM) that every report prints,
so judged numbers are never mistaken for something they are not. The judgment tasks
themselves (claim splitting, claim verification, ...) are added to this interface as the
judge machinery grows; a backend comes from a plugin through ``register_judge_backends``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class JudgeConfig(BaseModel):
    """The scenario's ``judge:`` block. Backends read the options they know from ``options``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    backend: str = "heuristic"
    """Name of a registered judge backend."""

    model: str | None = None
    """Model name, for backends that call a model."""

    base_url: str | None = None
    """Endpoint of an OpenAI-compatible server, for backends that use one."""

    options: dict[str, Any] = {}
    """Backend-specific settings."""


class Judge:
    """Base class of judges: identity and accounting shared by every backend."""

    backend: str = "judge"
    is_llm: bool = True

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config

    @property
    def model(self) -> str | None:
        return self.config.model

    def identity(self) -> dict[str, Any]:
        """What the report prints about this judge."""
        return {
            "backend": self.backend,
            "model": self.model,
            "llm": self.is_llm,
            "label": self.label(),
        }

    def label(self) -> str:
        return f"{self.backend}:{self.model}" if self.model else self.backend


class HeuristicJudge(Judge):
    """The default, offline judge: deterministic heuristics, no model, no network."""

    backend = "heuristic"
    is_llm = False

    @property
    def model(self) -> str | None:
        return "heuristic-v1"

    def label(self) -> str:
        return "heuristic (offline, deterministic; not an LLM)"
