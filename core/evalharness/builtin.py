"""The core's own hook implementations: the four built-in component kinds, the default judge,
the executors, and the ``judged`` evaluator.

Registered first by :func:`evalharness.plugins.load_plugins`, under the name ``evalharness``.
It defines no metric of its own: metrics live in plugins, and ``judged`` measures what the
scenario writes (:mod:`evalharness.rubrics`), for every component kind.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from evalharness.hookspecs import hookimpl
from evalharness.judge.heuristic import HeuristicJudge
from evalharness.models import GeneratorStep, RetrieverStep, RouterStep, Text2SQLStep
from evalharness.registry import (
    ANY_KIND,
    AlertSender,
    ComponentKind,
    Evaluator,
    Executor,
    JudgeBackend,
)


@hookimpl
def register_component_kinds(register):
    register(ComponentKind("router", RouterStep, "evaluate_router",
                           description="decides which branches answer a question"))
    register(ComponentKind("text2sql", Text2SQLStep, "evaluate_text2sql",
                           description="turns the question into SQL and runs it"))
    register(ComponentKind("retriever", RetrieverStep, "evaluate_retriever",
                           description="ranks corpus chunks for the question"))
    register(ComponentKind("generator", GeneratorStep, "evaluate_generator",
                           description="writes the answer from rows and chunks"))


@hookimpl
def register_judge_backends(register):
    register(JudgeBackend("heuristic", HeuristicJudge, offline=True, llm=False,
                          description="deterministic, offline, no LLM (the default)"))
    register(JudgeBackend("openai", _openai_judge,
                          description="any OpenAI-compatible endpoint (OpenAI, Azure, vLLM, "
                                      "Ollama, llama.cpp server) through the openai SDK"))


@hookimpl
def register_evaluators(register):
    from evalharness import rubrics

    register(Evaluator(rubrics.NAME, ANY_KIND, metrics=[], settings=rubrics.RubricSettings,
                       needs_judge=True, needs_llm=True, evaluate=rubrics.evaluate,
                       declare=rubrics.declare,
                       description="a criterion written in the scenario, judged per case by "
                                   "the LLM judge (docs/judge.md, \"Criteria you write\")"))


class WebhookSettings(BaseModel):
    """The ``webhook`` alert sender's settings (MONITOR.yaml ``alerts: {webhook: {...}}``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    url: str = Field(pattern=r"^https?://\S+$")
    """Where each alert is POSTed as JSON (http:// or https://)."""
    token_env: str | None = None
    """An environment variable holding a token, sent as ``Authorization: Bearer TOKEN`` (the
    token itself stays out of the file)."""
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    """Seconds to wait for the receiver's answer."""


@hookimpl
def register_alert_senders(register):
    register(AlertSender("webhook", _webhook, settings=WebhookSettings,
                         description="POST each drift alarm as JSON to a URL (firing and "
                                     "resolved)"))


def _webhook(alert, settings):
    """The ``webhook`` sender (imported when an alarm is sent, not when plugins load)."""
    from evalharness.monitor.alerts import post_webhook

    post_webhook(alert, settings)


@hookimpl
def register_executors(register):
    register(Executor("local", _local_executor,
                      description="this process: threads for the system, batches evaluated "
                                  "in worker threads (the default)"))
    register(Executor("ray", _ray_executor,
                      description="a Ray cluster (pip install 'evalharness[ray]'; --address "
                                  "auto or ray://HOST:PORT, else a local instance)"))


def _local_executor(address):
    """The ``local`` executor: this process."""
    from evalharness.local_executor import LocalExecutor

    return LocalExecutor(address)


def _ray_executor(address):
    """The ``ray`` executor, imported when a run uses it (Ray is an optional extra)."""
    from evalharness.ray_executor import RayExecutor

    return RayExecutor(address)


def _openai_judge(config):
    """The ``openai`` backend, imported when a scenario uses it: the openai SDK takes half a
    second to import, which every command (and every offline run) would otherwise pay."""
    from evalharness.judge.openai_compat import OpenAIJudge

    return OpenAIJudge(config)
