"""``evalharness.evaluate(rows, evaluators=...)``: a scenario's evaluation for rows a notebook
already holds — dicts, pydantic models or a DataFrame — without a YAML file (docs/api.md,
"In a notebook: `evaluate`").

One mechanism, not a second evaluator: the rows become a question-only-or-labelled case and a
recorded trace each, the arguments a scenario (written to a scratch folder and loaded as any
scenario is, so every check and error is the scenario's), and the run is the runner's
(:func:`evalharness.api.execute`). The result is the run folder read back
(:class:`~evalharness.runfolder.RunFolder`: ``.report``, ``.results``, ``.to_pandas()``), so
the same cases give the same values here and through ``evalharness scenario``.

A row names its fields flat, in our words or in Ragas's and DeepEval's (``user_input``,
``response``, ``retrieved_contexts``, ``reference``; ``input``, ``actual_output``,
``retrieval_context``, ``expected_output``), or nested as our models are (``gold: {...}``,
``generator: {...}``, a whole ``trace: {...}``): :data:`FIELDS`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from evalharness.errors import EvalHarnessError, InputError
from evalharness.hookspecs import hookimpl
from evalharness.models import BUILTIN_STEPS, Case, Trace
from evalharness.registry import ANY_KIND, Evaluator
from evalharness.runfolder import RunFolder, load_run

FIELDS: dict[str, tuple[str, str]] = {
    # a row's flat name: (where it goes, what it is)
    "id": ("case.id", "the case id (default: the row's position or DataFrame index)"),
    "case_id": ("case.id", "= id"),
    "question": ("case.question", "what the user asked"),
    "user_input": ("case.question", "= question (Ragas)"),
    "input": ("case.question", "= question (DeepEval)"),
    "query": ("case.question", "= question"),
    "tags": ("case.tags", "a list of tags (`--filter tag:…`)"),
    "metadata": ("case.metadata", "anything else, kept with the case"),
    "reference": ("gold.answer", "the reference answer (Ragas)"),
    "expected_output": ("gold.answer", "= reference (DeepEval)"),
    "ground_truth": ("gold.answer", "= reference"),
    "gold_answer": ("gold.answer", "= reference"),
    "gold_sql": ("gold.sql", "the reference query"),
    "reference_sql": ("gold.sql", "= gold_sql"),
    "gold_routes": ("gold.routes", "the routes the router should take (a list, or one name)"),
    "expected_routes": ("gold.routes", "= gold_routes"),
    "relevant": ("gold.relevant", "relevant chunk ids: a list, or {id: grade}"),
    "relevant_ids": ("gold.relevant", "= relevant"),
    "refusal": ("gold.refusal", "true: the question should be refused"),
    "routes": ("router.routes", "the routes the router took (a list, or one name)"),
    "route_scores": ("router.scores", "the router's score per route"),
    "confidence": ("router.confidence", "the router's confidence"),
    "sql": ("text2sql.sql", "the query the text-to-SQL step wrote"),
    "rows": ("text2sql.rows", "the rows it returned (a list of lists)"),
    "columns": ("text2sql.columns", "their column names"),
    "retrieved_ids": ("retriever.ids", "the chunk ids the retriever returned, best first"),
    "retrieved_texts": ("retriever.texts", "their texts"),
    "retrieved_scores": ("retriever.scores", "their scores"),
    "answer": ("generator.answer", "the generated answer"),
    "response": ("generator.answer", "= answer (Ragas)"),
    "actual_output": ("generator.answer", "= answer (DeepEval)"),
    "contexts": ("generator.contexts", "the texts the generator was given"),
    "retrieved_contexts": ("generator.contexts", "= contexts (Ragas)"),
    "retrieval_context": ("generator.contexts", "= contexts (DeepEval)"),
}
"""A row's flat fields. Nested fields are also taken: ``gold`` (a dict of :class:`Gold`),
``router`` / ``text2sql`` / ``retriever`` / ``generator`` (dicts of their step models),
``steps`` (a plugin's component kinds: name -> step dict) and ``trace`` (a whole
:class:`Trace`)."""

NESTED = ("gold", *BUILTIN_STEPS, "steps", "trace")
LISTS = {"case.tags", "gold.routes", "router.routes", "generator.contexts", "retriever.ids",
         "retriever.texts", "retriever.scores", "text2sql.columns"}


def evaluate(rows: Any, evaluators: Any = None, *, judge: Any = None,
             scenario: str | Path | None = None, pipeline: Mapping[str, Any] | None = None,
             verdicts: Mapping[str, Any] | None = None, gates: Sequence[Any] = (),
             corpus: str | Path | None = None, database: Any = None,
             plugins: Sequence[str | Path] = (), name: str = "notebook",
             out: str | Path | None = None, concurrency: int | None = None,
             cache: str = "on", repeat: int | None = None,
             repeat_judge: str | None = None) -> RunFolder:
    """Evaluate ``rows`` — an iterable of dicts or pydantic models, or a pandas / polars
    DataFrame — with ``evaluators`` and return the run (a :class:`RunFolder`: ``.report``
    with metrics and 95% CIs per component, verdicts, the bottleneck when several components
    are evaluated; ``.results``; ``.to_pandas()`` one row per case and metric).

    ``evaluators``: names (``["faithfulness", "route_accuracy"]``, each placed on the
    component of its kind), :class:`~evalharness.Evaluator` objects (registered for this
    call: a notebook's own metric), ``{name: settings}`` dicts, or a mapping component ->
    list as a scenario's ``evaluators:`` writes it. ``judge``: a backend name
    (``"heuristic"``, the offline default) or the scenario's ``judge:`` mapping (``{"backend":
    "openai", "model": …, "base_url": …}``). ``scenario``: a scenario file whose pipeline,
    judge, evaluators, corpus and database are used for these rows instead (then give none of
    ``evaluators``, ``pipeline``, ``verdicts``, ``gates``, ``corpus``, ``database``).
    ``pipeline``: as a scenario's (needed when the rows hold a router and the branches it
    routes to: which route runs which component); by default the components the rows hold.
    ``out``: keep the run folder there (default: a fresh temporary folder); ``cache``: the
    judge cache, ``"on"``, ``"off"`` or ``"refresh"`` (as :func:`~evalharness.run_scenario`'s).
    ``repeat`` (with ``repeat_judge="fresh"``): judge each row that many times, each time
    anew, to see how far the judge's own verdicts move (docs/repeat.md); a row's recorded
    answer is the same in every repeat, so with the default ``"cached"`` the repeats agree.
    Errors are the scenario's, naming the row and the field."""
    from evalharness.api import execute
    from evalharness.plugins import load_plugins
    from evalharness.scenario import load_scenario

    table = list(_rows(rows))
    if not table:
        raise InputError("evaluate() got no rows: give a list of dicts, pydantic models or a "
                         "DataFrame, one row a case")
    cases, traces = _cases_and_traces(table)
    out_dir = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="evalharness-"))
    objects = [e for e in _listed(evaluators) if isinstance(e, Evaluator)]
    module = _NotebookPlugin(objects) if objects else None
    if scenario is not None:
        given = {k: v for k, v in (("evaluators", evaluators), ("pipeline", pipeline),
                                    ("verdicts", verdicts), ("gates", gates),
                                    ("corpus", corpus), ("database", database)) if v}
        if given:
            raise EvalHarnessError(f"evaluate(scenario=…) takes the scenario's pipeline, "
                                   f"evaluators, gates, corpus and database: leave out "
                                   f"{', '.join(given)}, or leave out scenario")
        host = load_plugins(plugins, modules=[module] if module else ())
        overrides = {"cache_mode": cache} if cache != "on" else None
        if judge is not None and not isinstance(judge, str):
            raise EvalHarnessError("evaluate(scenario=…, judge=…): give the judge as a backend "
                                   "name; its settings are the scenario's `judge:`")
        loaded = load_scenario(scenario, judge_backend=judge, judge_overrides=overrides,
                               host=host)
    else:
        folder = out_dir / "scenario"  # what this call was, kept with its run
        folder.mkdir(parents=True, exist_ok=True)
        if cache != "on":
            judge = {**({"backend": judge} if isinstance(judge, str) else dict(judge or {})),
                     "cache_mode": cache}
        path = _write_scenario(folder, cases, traces, evaluators=evaluators, judge=judge,
                               pipeline=pipeline, verdicts=verdicts, gates=gates,
                               corpus=corpus, database=database, name=name, module=module)
        host = load_plugins(plugins, modules=[module] if module else ())
        loaded = load_scenario(path, host=host)
    loaded = dataclasses.replace(loaded, cases=cases, traces={t.case_id: t for t in traces},
                                 system=None)
    executed = execute(loaded, out=out_dir, headroom=False, concurrency=concurrency,
                       repeat=repeat, repeat_judge=repeat_judge)
    return load_run(executed.out_dir)


class _NotebookPlugin:
    """Registers the :class:`Evaluator` objects given to :func:`evaluate` (a notebook's own
    metrics) as a plugin does — the built-ins load the same way."""

    __name__ = "notebook"

    def __init__(self, evaluators: list[Evaluator]) -> None:
        self.evaluators = evaluators

    @hookimpl
    def register_evaluators(self, register: Any) -> None:
        for evaluator in self.evaluators:
            register(evaluator)


# --- rows -> cases and traces --------------------------------------------------------------


def _rows(rows: Any) -> Iterable[tuple[str, dict[str, Any]]]:
    """``(default id, row as a dict)`` for every row: a DataFrame's index (pandas) or position,
    a model's fields, a dict as it is."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns") and hasattr(rows, "index"):
        for index, row in zip(rows.index, rows.to_dict("records"), strict=True):  # pandas
            yield str(index), row
        return
    if hasattr(rows, "to_dicts") and hasattr(rows, "columns"):  # polars
        for i, row in enumerate(rows.to_dicts()):
            yield str(i), row
        return
    if isinstance(rows, Mapping) or isinstance(rows, str | bytes):
        raise InputError("evaluate() takes rows — a list of dicts, pydantic models or a "
                         f"DataFrame — not a single {type(rows).__name__}; wrap one row in a "
                         "list")
    for i, row in enumerate(rows):
        if isinstance(row, BaseModel):
            row = row.model_dump(exclude_none=True)
        elif dataclasses.is_dataclass(row) and not isinstance(row, type):
            row = dataclasses.asdict(row)
        if not isinstance(row, Mapping):
            raise InputError(f"row {i}: a {type(row).__name__}, not a dict, a pydantic model or "
                             "a dataclass; give each row as a mapping of fields "
                             f"({', '.join(list(FIELDS)[:6])}, …)")
        yield str(i), dict(row)


def _plain(value: Any) -> Any:
    """A DataFrame cell as JSON would hold it: numpy arrays and scalars as lists and numbers,
    NaN (pandas' "missing") as ``None``."""
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        value = value.tolist()
    elif hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _cases_and_traces(table: list[tuple[str, dict[str, Any]]]) -> tuple[list[Case], list[Trace]]:
    cases, traces, seen = [], [], {}
    for position, (default_id, raw) in enumerate(table):
        row = {k: _plain(v) for k, v in raw.items()}
        row = {k: v for k, v in row.items() if v is not None}
        where = f"row {default_id}" if default_id == str(position) else \
            f"row {position} (index {default_id})"
        case_part: dict[str, Any] = {}
        gold: dict[str, Any] = dict(row.pop("gold", None) or {})
        trace: dict[str, Any] = dict(row.pop("trace", None) or {})
        for step in (*BUILTIN_STEPS, "steps"):
            if step in row:
                trace[step] = row.pop(step)
        for key, value in row.items():
            if key not in FIELDS:
                close = difflib.get_close_matches(key, [*FIELDS, *NESTED], n=1)
                raise InputError(
                    f"{where}: unknown field {key!r}"
                    + (f" (did you mean {close[0]!r}?)" if close else "")
                    + f"; valid flat fields: {', '.join(FIELDS)}; nested: "
                    f"{', '.join(NESTED)} (put anything else under `metadata`)")
            target, _ = FIELDS[key]
            if target in LISTS and isinstance(value, str):
                value = [value]
            if target == "gold.relevant" and isinstance(value, list):
                value = {str(v): 1 for v in value}
            owner, field = target.split(".")
            if owner == "case":
                case_part[field] = value
            elif owner == "gold":
                gold[field] = value
            else:
                trace.setdefault(owner, {})[field] = value
        case_id = str(case_part.pop("id", default_id))
        if case_id in seen:
            raise InputError(f"{where}: case id {case_id!r} again (also {seen[case_id]}); "
                             "give each row its own `id`")
        seen[case_id] = where
        if "question" not in case_part:
            raise InputError(f"{where}: no question; give `question` (or `user_input`, "
                             "`input`, `query`)")
        try:
            cases.append(Case(id=case_id, gold=gold, **case_part))
            traces.append(Trace.model_validate({**trace, "case_id": case_id}))
        except ValidationError as exc:
            problem = exc.errors()[0]
            field = ".".join(str(p) for p in problem["loc"])
            raise InputError(f"{where}, field `{field}`: {problem['msg']} (got "
                             f"{json.dumps(problem.get('input'), default=str)[:80]})") from None
    return cases, traces


# --- the scenario ----------------------------------------------------------------------------


def _listed(evaluators: Any) -> list[Any]:
    if evaluators is None:
        return []
    if isinstance(evaluators, Mapping):
        return [e for listed in evaluators.values() for e in listed]
    if isinstance(evaluators, str | Evaluator):
        return [evaluators]
    return list(evaluators)


def _entry(item: Any) -> Any:
    """A scenario's ``evaluators:`` entry for ``item``: a name, ``{name: settings}``."""
    if isinstance(item, Evaluator):
        return item.name
    return item


def _name(item: Any) -> str:
    if isinstance(item, Evaluator):
        return item.name
    if isinstance(item, Mapping):
        return next(iter(item))
    return str(item)


def _present(traces: list[Trace]) -> list[str]:
    """The components the rows hold steps of, in the pipeline's usual order."""
    found = [s for s in BUILTIN_STEPS if any(getattr(t, s) is not None for t in traces)]
    custom = sorted({name for t in traces for name in t.steps})
    return found + custom


def _pipeline(traces: list[Trace], cases: list[Case]) -> dict[str, Any]:
    """The pipeline of the components the rows hold: a router alone gets a route per route
    seen; text-to-SQL and the retriever follow the router, the generator follows them."""
    present = _present(traces)
    if not present:
        raise InputError("the rows hold no component's output: give at least one of answer, "
                         "sql, retrieved_ids, routes (or a nested generator / text2sql / "
                         "retriever / router / steps)")
    branches = [c for c in ("text2sql", "retriever") if c in present]
    if "router" in present and branches:
        raise InputError("the rows hold a router and the components it routes to "
                         f"({', '.join(branches)}): say which route runs which, e.g. "
                         "pipeline={'router': {'routes': {'sql': ['text2sql'], 'blog': "
                         "['retriever']}}, 'text2sql': {'after': ['router']}, 'retriever': "
                         "{'after': ['router']}, 'generator': {'after': ['text2sql', "
                         "'retriever']}}")
    out: dict[str, Any] = {}
    if "router" in present:
        seen = sorted({r for t in traces if t.router for r in t.router.routes}
                      | {r for c in cases for r in (c.gold.routes or [])})
        out["router"] = {"routes": {r: [] for r in seen}}
    for name in branches:
        out[name] = {"after": ["router"]} if "router" in out else {}
    if "generator" in present:
        before = branches or (["router"] if "router" in out else [])
        out["generator"] = {"after": before} if before else {}
    for name in present:
        if name not in out:
            out[name] = {}
    return out


def _evaluators(evaluators: Any, pipeline: Mapping[str, Any], host: Any) -> dict[str, list]:
    """``evaluators`` as a scenario's ``evaluators:`` mapping; a name given flat goes on the
    one component of the pipeline whose kind has it."""
    if evaluators is None:
        return {}
    if isinstance(evaluators, Mapping):
        return {c: [_entry(e) for e in listed] for c, listed in evaluators.items()}
    kinds = {c: (spec or {}).get("kind") or c for c, spec in pipeline.items()}
    out: dict[str, list] = {}
    for item in _listed(evaluators):
        name = _name(item)
        if isinstance(item, Evaluator):
            owners = [c for c, k in kinds.items() if item.component in (k, ANY_KIND)]
        else:
            owners = [c for c, k in kinds.items()
                      if (k, name) in host.registry.evaluators
                      or (ANY_KIND, name) in host.registry.evaluators]
        if len(owners) != 1:
            where = ("no component of these rows has it" if not owners else
                     f"components {', '.join(owners)} all have it")
            raise InputError(f"evaluator {name!r}: {where}; give evaluators per component, "
                             f"e.g. evaluators={{'{owners[0] if owners else 'generator'}': "
                             f"[{name!r}]}}"
                             + ("" if owners else f" (components of these rows: "
                                f"{', '.join(pipeline)})"))
        out.setdefault(owners[0], []).append(_entry(item))
    return out


def _write_scenario(folder: Path, cases: list[Case], traces: list[Trace], *, evaluators: Any,
                    judge: Any, pipeline: Mapping[str, Any] | None, verdicts: Any,
                    gates: Sequence[Any], corpus: Any, database: Any, name: str,
                    module: Any) -> Path:
    """A scenario file for the rows in ``folder`` (cases.jsonl, traces.jsonl beside it)."""
    from evalharness.plugins import load_plugins

    (folder / "cases.jsonl").write_text(
        "".join(c.model_dump_json(exclude_defaults=True) + "\n" for c in cases), encoding="utf-8")
    (folder / "traces.jsonl").write_text(
        "".join(t.model_dump_json(exclude_none=True) + "\n" for t in traces), encoding="utf-8")
    pipe = dict(pipeline) if pipeline is not None else _pipeline(traces, cases)
    host = load_plugins(modules=[module] if module else ())
    spec: dict[str, Any] = {"name": name, "cases": "cases.jsonl", "traces": "traces.jsonl",
                            "pipeline": pipe,
                            "evaluators": _evaluators(evaluators, pipe, host)}
    if judge is not None:
        spec["judge"] = {"backend": judge} if isinstance(judge, str) else dict(judge)
    if verdicts:
        spec["verdicts"] = dict(verdicts)
    if gates:
        spec["gates"] = list(gates)
    if corpus is not None:
        spec["corpus"] = str(Path(corpus).resolve())
    if database is not None:  # paths are the caller's (relative to the working directory)
        spec["database"] = (
            {"path": str(Path(database).resolve())} if isinstance(database, str | Path) else
            {k: str(Path(v).resolve()) if k in ("path", "build", "schema")
             and isinstance(v, str | Path) else v for k, v in dict(database).items()})
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True),
                    encoding="utf-8")
    return path
