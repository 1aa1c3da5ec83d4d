"""No rubric assumes a domain: what the application is (``judge.domain``) reaches the judge as
data, and judge code holds none of one shop's words."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

from conftest import ROOT
from evalharness.judge.base import JudgeConfig
from evalharness.judge.heuristic import HeuristicJudge
from evalharness.judge.tasks import QUESTIONS, TASKS, JudgmentTask, QuestionsInput
from evalharness.models import Case, GeneratorStep

RETAIL = re.compile(r"fashion|clothing|outfit|apparel|shop", re.IGNORECASE)
"""What a rubric once said of every user's application ("a user of an online fashion shop")."""


def _plugin_tasks() -> list[JudgmentTask]:
    """Every JudgmentTask a built-in plugin module defines at its top level."""
    found = []
    for package in sorted(p.name for p in (ROOT / "plugins").iterdir()
                          if (p / "__init__.py").is_file()):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            module = importlib.import_module(info.name)
            found += [v for v in vars(module).values() if isinstance(v, JudgmentTask)]
    return found


def test_judge_code_and_every_rubric_are_free_of_one_domains_words():
    judge_code = sorted((ROOT / "core" / "evalharness" / "judge").rglob("*.py"))
    assert judge_code
    for path in judge_code:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not RETAIL.search(line), f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
    tasks = {t.id: t for t in [*TASKS.values(), *_plugin_tasks()]}
    assert "answer_questions" in tasks
    for task in tasks.values():
        assert not RETAIL.search(task.rubric), (task.id, task.rubric)


def test_the_check_would_see_the_old_rubric():
    assert RETAIL.search("each as a user of an online fashion shop would ask it")


def test_the_domain_is_an_input_so_it_is_in_the_prompt_and_the_cache_key():
    judge = HeuristicJudge(JudgeConfig())
    plain = QuestionsInput(answer="Open 9 to 5.", n=2)
    bank = QuestionsInput(answer="Open 9 to 5.", n=2, domain="a bank's support assistant")
    assert "a bank's support assistant" in QUESTIONS.messages(bank)[1]["content"]
    assert "`domain`" in QUESTIONS.messages(bank)[0]["content"]
    assert judge.key(QUESTIONS, plain) != judge.key(QUESTIONS, bank)


@pytest.mark.parametrize("domain", [None, "a hospital's guide for patients"])
def test_answer_relevancy_gives_the_judge_the_scenarios_domain(domain):
    from evalharness.context import EvalContext
    from evalharness.registry import run_evaluator
    from evalharness_generation import register_evaluators

    judge = HeuristicJudge(JudgeConfig(domain=domain))
    asked = []
    run_many = judge.run_many

    def recording(task, inputs, **kwargs):
        asked.extend((task.id, i) for i in inputs)
        return run_many(task, inputs, **kwargs)

    judge.run_many = recording
    batch = [(Case(id="c", question="When are you open?"),
              GeneratorStep(answer="We are open from 9 to 5."))]
    [row] = run_evaluator(register_evaluators, "answer_relevancy", batch,
                          context=EvalContext(judge=judge))
    assert row["answer_relevancy"].error is None
    assert [i.domain for t, i in asked if t == QUESTIONS.id] == [domain]


def test_a_domain_that_is_empty_or_a_page_long_is_refused():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="domain"):
        JudgeConfig(domain="")
    with pytest.raises(ValidationError, match="domain"):
        JudgeConfig(domain="x" * 301)
