"""Pairwise judging of two runs: which run's output is better on one criterion, per case, as
the LLM judge sees it (``evalharness compare A B --judge-pairwise CRITERION``).

The judge sees a case's two outputs (run A's and run B's step of one component, with the
fields the criterion reads) and says which one better satisfies the criterion, or a tie —
then again with the two in the other order. Position bias cancels: a case is B's win only
when both orders prefer B (A's likewise), and a disagreement between the orders is a tie.
B's win rate counts a tie as one half, with a seeded bootstrap 95% interval over cases and the
exact sign test on wins and losses, as people's preferences are counted
(:mod:`evalharness.review.pairwise`), so the two stand side by side in ``compare`` and the
judge's per-case preference is what the agreement with people reads.

CRITERION is a ``judged`` metric of B's scenario (its criterion, steps and ``sees``; docs/
judge.md, "Criteria you write"), a YAML file holding those settings and a ``component``, or
another judged metric of B's run (its declared description is the criterion). The judge is
B's scenario's, unless ``--judge`` names another backend; like any criterion written in words
it needs a language model.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from evalharness.errors import InputError, ScenarioError
from evalharness.judge.tasks import JudgmentTask
from evalharness.results import Results
from evalharness.review import stats as S
from evalharness.rubrics import BOOKKEEPING, RubricSettings, criterion_lines
from evalharness.stats import seed_for


class PairwiseInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    domain: str | None = None
    """What the application is (``judge.domain``)."""
    component: str
    """The component whose two outputs are compared."""
    shared: dict[str, Any]
    """What both outputs answer (the question, the reference answer)."""
    first: dict[str, Any]
    """One output's fields."""
    second: dict[str, Any]
    """The other output's fields."""


class PairwiseOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str
    """One or two sentences: what tells the two apart."""
    preferred: Literal["first", "second", "tie"]
    """Which output better satisfies the criterion; ``tie`` when neither does better."""


SHARED = ("question", "reference")


class Criterion(BaseModel):
    """What the judge compares the two runs on."""

    name: str
    component: str
    criterion: str
    steps: list[str] = []
    sees: list[str]


def rubric(c: Criterion) -> str:
    lines = ["You compare two outputs of the same component of an application (described by "
             "`domain`; any application when it is null), produced for the same input, "
             "against one criterion. `shared` holds what both answer; `first` and `second` "
             "hold each output's fields. Judge only what the fields show; the order in which "
             "the two are given means nothing.", *criterion_lines(c.criterion, c.steps)]
    lines += ["", "Give a short reason first, then `preferred`: `first` or `second` for the "
              "output that better satisfies the criterion, `tie` when neither does better."]
    return "\n".join(lines)


def task_for(c: Criterion) -> JudgmentTask:
    text = rubric(c)
    version = hashlib.sha256(json.dumps({"rubric": text, "sees": c.sees}).encode()
                             ).hexdigest()[:12]
    return JudgmentTask(id=f"pairwise:{c.name}", version=version, rubric=text,
                        input=PairwiseInput, output=PairwiseOutput)


def criterion_of(name: str, scenario: Any, report_b: dict[str, Any]) -> Criterion:
    """The criterion ``name`` names: a YAML file, a ``judged`` metric of B's scenario, or
    another judged metric of B's run (an :class:`InputError` saying what exists)."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            component = data.pop("component")
            settings = RubricSettings.model_validate(
                {"threshold": None, **data}, context={"component": component})
        except (KeyError, TypeError, ValueError, ValidationError, yaml.YAMLError) as exc:
            raise InputError(f"--judge-pairwise {name}: not a rubric file — it needs "
                             f"`component`, `metric`, `criterion` and `sees` ({exc})"[:600]
                             ) from None
        return Criterion(name=settings.metric, component=component,
                         criterion=settings.criterion, steps=settings.steps,
                         sees=settings.sees)
    for e in scenario.evaluators:
        if name in e.metrics and isinstance(e.settings, RubricSettings):
            s = e.settings
            return Criterion(name=name, component=e.component, criterion=s.criterion,
                             steps=s.steps, sees=s.sees)
    judged = []
    for component, comp in (report_b.get("components") or {}).items():
        for metric, summary in (comp.get("metrics") or {}).items():
            if summary.get("judge"):
                judged.append(f"{component}.{metric}")
                declared = summary.get("declaration") or {}
                if metric == name and declared.get("description"):
                    kind_fields = ["question", "reference"]
                    return Criterion(name=name, component=component,
                                     criterion=declared["description"],
                                     sees=kind_fields + ["*"])
    raise InputError(f"--judge-pairwise {name!r}: not a rubric file (.yaml), a `judged` "
                     "metric of run B's scenario, nor a judged metric of run B; judged "
                     f"metrics there: {', '.join(judged) or 'none'}")


def _fields(c: Criterion, result: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(shared, own) fields of one run's result, or ``None`` when its step is missing."""
    step = result.trace.step(c.component)
    if step is None:
        return None
    data = step if isinstance(step, dict) else step.model_dump(mode="json")
    shared = {"question": result.case.question}
    if "reference" in c.sees and result.case.gold.answer is not None:
        shared["reference"] = result.case.gold.answer
    if "*" in c.sees:
        own = {k: v for k, v in data.items() if k not in BOOKKEEPING and v is not None}
    else:
        own = {k: data.get(k) for k in c.sees if k not in SHARED}
    return shared, own


def judge_runs(a_dir: Path, b_dir: Path, name: str, scenario: Any, judge: Any,
               report_b: dict[str, Any], resamples: int = 2000) -> dict[str, Any]:
    """Judge every case both runs answered, in both orders; the per-case outcomes, B's win
    rate with its interval and sign test, and each case's two judgment records."""
    c = criterion_of(name, scenario, report_b)
    task = task_for(c)
    a_results = Results.open(Path(a_dir) / "results.jsonl")  # a view: read a case when asked
    where_a = {case: i for i, case in enumerate(a_results.case_ids)}
    pairs = []
    for result_b in Results.open(Path(b_dir) / "results.jsonl"):
        i = where_a.get(result_b.case.id)
        fa = _fields(c, a_results[i]) if i is not None else None
        fb = _fields(c, result_b)
        if fa is not None and fb is not None:
            pairs.append((result_b.case.id, fb[0], fa[1], fb[1]))
    if not pairs:
        raise InputError(f"--judge-pairwise {name}: no case has a {c.component} step in both "
                         "runs")
    domain = getattr(getattr(judge, "config", None), "domain", None)
    inputs = []
    for _, shared, own_a, own_b in pairs:
        inputs.append(PairwiseInput(domain=domain, component=c.component, shared=shared,
                                    first=own_a, second=own_b))  # A shown first
        inputs.append(PairwiseInput(domain=domain, component=c.component, shared=shared,
                                    first=own_b, second=own_a))  # B shown first
    judgments = judge.run_many(task, inputs, metric=f"pairwise:{c.name}")
    cases = []
    for n, (case, *_rest) in enumerate(pairs):
        a_first, b_first = judgments[2 * n], judgments[2 * n + 1]
        sides = [_side(a_first, first="a"), _side(b_first, first="b")]
        outcome = (None if None in sides else sides[0] if sides[0] == sides[1] else "tie")
        cases.append({"case": case, "outcome": outcome, "orders": [
            {"shown_first": "A", "preferred": sides[0], "record": a_first.record()},
            {"shown_first": "B", "preferred": sides[1], "record": b_first.record()}]})
    decided = [x["outcome"] for x in cases if x["outcome"] is not None]
    wins, losses = decided.count("b"), decided.count("a")
    ties = decided.count("tie")
    scores = [{"b": 1.0, "a": 0.0, "tie": 0.5}[v] for v in decided]
    ci = S.bootstrap(lambda x: float(sum(x) / len(x)), scores,
                     seed=seed_for("judge-pairwise", c.name), resamples=resamples) \
        if scores else None
    return {"criterion": c.name, "component": c.component, "rubric_version": task.version,
            "judge": judge.label(), "cases": len(decided),
            "errors": len(cases) - len(decided), "b_wins": wins, "a_wins": losses,
            "ties": ties, "win_rate_b": S.win_rate(wins, losses, ties) if decided else None,
            "win_rate_ci95": list(ci) if ci else None,
            "sign_test_p": S.sign_test(wins, losses),
            "order_disagreements": sum(1 for x in cases if x["outcome"] == "tie" and
                                       x["orders"][0]["preferred"] !=
                                       x["orders"][1]["preferred"]),
            "per_case": cases}


def _side(judgment: Any, *, first: str) -> str | None:
    """The run a judgment prefers (``a``, ``b``, ``tie``), given which was shown first;
    ``None`` for an error."""
    if judgment.output is None:
        return None
    other = "b" if first == "a" else "a"
    return {"first": first, "second": other, "tie": "tie"}[judgment.output.preferred]


def load_judge(b_report: dict[str, Any], backend: str | None) -> tuple[Any, Any]:
    """B's scenario (loaded again from the path its report names) and its judge (``backend``
    instead of its own when given); a judge that is no language model is refused."""
    from evalharness.prepare import make_judge
    from evalharness.scenario import load_scenario

    path = (b_report.get("scenario") or {}).get("path")
    if not path or not Path(path).is_file():
        raise InputError(f"--judge-pairwise: run B's scenario ({path}) is not there any more; "
                         "pairwise judging uses its judge settings")
    scenario = load_scenario(path, judge_backend=backend)
    registered = scenario.host.judge_backend(scenario.spec.judge.backend)
    if registered is not None and not registered.llm:
        raise ScenarioError(f"--judge-pairwise needs a language model to judge, and the judge "
                            f"of {path} is {scenario.spec.judge.backend!r}: give --judge "
                            "openai (with judge.model and judge.base_url in the scenario)")
    return scenario, make_judge(scenario)
