"""``evalharness init``: scaffold a scenario (scenario.yaml, an adapter running a toy, example
cases) for an existing application.

The rendering is pure: :func:`render` turns the :class:`Choices` (components, where the data
lives, a name) into ``{relative path: file text}``, and the ``init`` command asks for the
choices (prompting only on a terminal), refuses to overwrite, writes the files and runs the
checks of ``evalharness validate`` on the result. Until the user replaces them, the adapter's
functions are a toy over the example data, and the example cases are written so that the toy
fails some of them at different components: the first run's report has a bottleneck table,
and its gates fail.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import shlex
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from evalharness.context import not_a_file
from evalharness.errors import EvalHarnessError, UsageError

COMPONENTS = ("router", "text2sql", "retriever", "generator")
"""The built-in component kinds ``init`` can scaffold, in pipeline order."""

ROUTE_OF = {"text2sql": "sql", "retriever": "docs"}
"""The route the scaffolded router takes to reach each data component."""

ROUTE_WORDS = {"sql": ("price", "cost", "how much", "cheapest", "in stock", "euros"),
               "docs": ("return", "shipping", "arrive", "care", "wash", "waterproof")}
"""The toy router's words per route (see :data:`EXAMPLES`: ``sql-4`` has none of them)."""

FUNCTION_OF = {"router": "route", "text2sql": "text_to_sql", "retriever": "retrieve",
               "generator": "generate"}
"""The adapter function that stands for each component."""

DESCRIBED = {"router": "a router (decides which data a question needs: database, documents, "
                       "or both)",
             "text2sql": "a text-to-SQL component (writes SQL for a SQLite database)",
             "retriever": "a retriever (finds chunks of documents)",
             "generator": "a generator (writes the answer, e.g. an LLM)"}

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

class InitProblem(UsageError):
    """Bad input or usage of ``init``: the CLI prints it as one paragraph, exit code 2."""


# --------------------------------------------------------------------------------------------
# Choices
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Choices:
    """What ``init`` scaffolds: the scenario's name, its components, and where its data lives."""

    name: str
    components: tuple[str, ...] = COMPONENTS
    """A subset of :data:`COMPONENTS`, in that order."""
    database: Path | None = None
    """An existing SQLite file the text-to-SQL step queries; ``None``: scaffold an example."""
    corpus: Path | None = None
    """An existing chunk JSONL file the retriever searches; ``None``: scaffold an example."""

    @property
    def sources(self) -> tuple[str, ...]:
        """The data components chosen (text2sql, retriever)."""
        return tuple(c for c in self.components if c in ROUTE_OF)


def parse_components(text: str) -> tuple[str, ...]:
    """The components named in a comma-separated list, in pipeline order, or ValueError.

    >>> parse_components("generator, retriever,router")
    ('router', 'retriever', 'generator')
    >>> parse_components("router,retreiver")
    Traceback (most recent call last):
    ...
    ValueError: unknown component 'retreiver' (did you mean 'retriever'?); valid components: router, text2sql, retriever, generator
    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ValueError("no component given; valid components: " + ", ".join(COMPONENTS))
    for name in names:
        if name not in COMPONENTS:
            close = difflib.get_close_matches(name, COMPONENTS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown component {name!r}{hint}; valid components: "
                             + ", ".join(COMPONENTS))
    return tuple(c for c in COMPONENTS if c in names)


def components_problem(components: tuple[str, ...]) -> str | None:
    """Why these components cannot be scaffolded as a pipeline, or None.

    >>> components_problem(("router", "generator"))
    'a router needs something to route to: add text2sql and/or retriever'
    >>> components_problem(("retriever", "generator")) is None
    True
    """
    if not components:
        return "choose at least one component"
    if "router" in components and not any(c in ROUTE_OF for c in components):
        return "a router needs something to route to: add text2sql and/or retriever"
    return None


def default_name(folder: Path) -> str:
    """A scenario name from the folder's name: letters, digits, '.', '_' and '-'.

    >>> default_name(Path("/home/me/My Shop (v2)"))
    'my-shop-v2'
    >>> default_name(Path("/"))
    'my-app'
    """
    slug = re.sub(r"[^a-z0-9._-]+", "-", folder.name.lower()).strip("-._")
    return slug or "my-app"


def relative_path(target: Path, base: Path) -> str:
    """``target`` as a POSIX path relative to the folder ``base`` (absolute if it cannot be).

    >>> relative_path(Path("/data/shop.sqlite"), Path("/work/evals"))
    '../../data/shop.sqlite'
    >>> relative_path(Path("/work/evals/data/c.jsonl"), Path("/work/evals"))
    'data/c.jsonl'
    """
    try:
        return Path(os.path.relpath(target, base)).as_posix()
    except ValueError:  # another drive on Windows
        return target.as_posix()


def yaml_scalar(text: str) -> str:
    """``text`` as a YAML scalar: plain when YAML reads it back unchanged, else quoted.

    >>> yaml_scalar("data/corpus.jsonl"), yaml_scalar("my data: v2.jsonl"), yaml_scalar("null")
    ('data/corpus.jsonl', '"my data: v2.jsonl"', '"null"')
    """
    if re.fullmatch(r"[A-Za-z0-9_./][A-Za-z0-9_./ -]*", text) and not text.endswith(" "):
        with contextlib.suppress(yaml.YAMLError):
            if yaml.safe_load(text) == text:
                return text
    return json.dumps(text)


# --------------------------------------------------------------------------------------------
# The example data and cases
# --------------------------------------------------------------------------------------------

SCHEMA_SQL = """\
-- An example database for the scaffolded scenario, built fresh into each run's folder by
-- `evalharness scenario`. Replace it with your own: `database: {path: your.sqlite}` in
-- scenario.yaml (or `evalharness init --database your.sqlite`), and update cases.jsonl.
CREATE TABLE products (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  category TEXT NOT NULL,
  price REAL NOT NULL,          -- euros
  in_stock INTEGER NOT NULL     -- 1 = in stock, 0 = sold out
);
INSERT INTO products (id, name, category, price, in_stock) VALUES
  (1, 'Canvas Tote', 'bags', 25.0, 1),
  (2, 'Leather Backpack', 'bags', 120.0, 1),
  (3, 'Wool Scarf', 'accessories', 35.0, 0),
  (4, 'Rain Jacket', 'outerwear', 89.0, 1),
  (5, 'Down Parka', 'outerwear', 210.0, 1);
"""

CORPUS_CHUNKS = (
    {"id": "returns", "title": "Returns",
     "text": "You can return any unworn item within 30 days of delivery for a full refund. "
             "Start a return from your order page."},
    {"id": "shipping", "title": "Shipping",
     "text": "Standard shipping takes 3 to 5 working days. Shipping is free on orders over "
             "50 euros."},
    {"id": "wool-care", "title": "Caring for wool",
     "text": "Hand wash wool in cold water and dry it flat. Never tumble dry a wool scarf."},
    {"id": "waterproofing", "title": "Waterproof jackets",
     "text": "Reproof a rain jacket every season with a wash-in treatment to keep it "
             "waterproof."},
)
"""The example corpus: help-centre chunks that the example cases' questions are about."""


@dataclass(frozen=True)
class Example:
    """An example question about the example data, with the gold of every component."""

    id: str
    question: str
    needs: tuple[str, ...]
    """The data components the question needs (text2sql, retriever)."""
    answer: str
    sql: str | None = None
    relevant: str | None = None
    routed: bool = True
    """Asked of pipelines with a router (``False``: only of those without one)."""
    toy: str = ""
    """Where the scaffolded toy adapter goes wrong on it, if it does (not written out)."""


EXAMPLES = {e.id: e for e in (
    Example("sql-1", "Which outerwear products are in stock?", ("text2sql",),
            "The Rain Jacket (89 euros) and the Down Parka (210 euros) are in stock.",
            sql="SELECT name, price FROM products WHERE category = 'outerwear' AND in_stock = 1"),
    Example("sql-2", "What is the cheapest bag?", ("text2sql",),
            "The Canvas Tote, at 25 euros.",
            sql="SELECT name, price FROM products WHERE category = 'bags' ORDER BY price "
                "LIMIT 1"),
    Example("sql-3", "What is the cheapest bag over 50 euros?", ("text2sql",),
            "The Leather Backpack, at 120 euros.",
            sql="SELECT name, price FROM products WHERE category = 'bags' AND price > 50 "
                "ORDER BY price LIMIT 1",
            toy="text2sql fails: the toy knows 'more than N euros', not 'over N euros'"),
    Example("sql-4", "Do you sell a wool scarf?", ("text2sql",),
            "Yes, the Wool Scarf, at 35 euros.",
            sql="SELECT name, price FROM products WHERE name = 'Wool Scarf'",
            toy="the router fails when it also has the docs route: none of its words is in the "
                "question, so it falls back to docs"),
    Example("docs-1", "How long do I have to return an item?", ("retriever",),
            "You can return any unworn item within 30 days of delivery.", relevant="returns"),
    Example("docs-2", "How should I care for a wool scarf?", ("retriever",),
            "Hand wash it in cold water and dry it flat.", relevant="wool-care"),
    Example("docs-3", "When will my order arrive?", ("retriever",),
            "Standard shipping takes 3 to 5 working days.", relevant="shipping",
            toy="the retriever fails: the question shares no word with the shipping chunk, "
                "and 'order' with the returns chunk; the toy generator knows no answer"),
    Example("both-1", "How much is the Rain Jacket, and how do I keep it waterproof?",
            ("text2sql", "retriever"),
            "The Rain Jacket costs 89 euros. Reproof it every season with a wash-in treatment "
            "to keep it waterproof.",
            sql="SELECT name, price FROM products WHERE name = 'Rain Jacket'",
            relevant="waterproofing"),
    Example("both-2", "What does the Leather Backpack cost, and when will it arrive?",
            ("text2sql", "retriever"),
            "The Leather Backpack costs 120 euros. Standard shipping takes 3 to 5 working days.",
            sql="SELECT name, price FROM products WHERE name = 'Leather Backpack'",
            relevant="shipping", routed=False,
            toy="the retriever fails: the question shares no word with the shipping chunk"),
    Example("both-3", "What is the cheapest bag over 50 euros, and can I return it?",
            ("text2sql", "retriever"),
            "The Leather Backpack, at 120 euros. You can return any unworn item within 30 days "
            "of delivery.",
            sql="SELECT name, price FROM products WHERE category = 'bags' AND price > 50 "
                "ORDER BY price LIMIT 1",
            relevant="returns", routed=False,
            toy="text2sql fails: the toy knows 'more than N euros', not 'over N euros'"),
)}


def example_ids(components: tuple[str, ...]) -> list[str]:
    """The examples for these components. With a router: every question that needs only data
    components it can route to. Without one, the data components run on every case: with
    both, the questions that need both; with one, the questions for it (the generator alone:
    the documents questions).

    >>> example_ids(COMPONENTS)
    ['sql-1', 'sql-2', 'sql-3', 'sql-4', 'docs-1', 'docs-2', 'docs-3', 'both-1']
    >>> example_ids(("text2sql", "retriever", "generator"))
    ['both-1', 'both-2', 'both-3']
    >>> example_ids(("router", "retriever", "generator")), example_ids(("generator",))
    (['docs-1', 'docs-2', 'docs-3'], ['docs-1', 'docs-2', 'docs-3'])
    """
    sources = {c for c in components if c in ROUTE_OF} or {"retriever"}
    if "router" in components:
        return [e.id for e in EXAMPLES.values() if e.routed and set(e.needs) <= sources]
    return [e.id for e in EXAMPLES.values() if set(e.needs) == sources]


def example_cases(components: tuple[str, ...]) -> list[dict]:
    """The example cases as records of cases.jsonl, with the gold of the chosen components.
    With a router and a retriever, a database question says no chunk is relevant
    (``relevant: {}``): should the router send it to the documents, the retriever's ranking
    scores 0 there rather than being an error for want of labels.

    >>> [c["gold"] for c in example_cases(("router", "retriever"))][0]
    {'routes': ['docs'], 'relevant': {'returns': 2}}
    >>> example_cases(COMPONENTS)[3]["gold"]["relevant"]
    {}
    """
    cases = []
    for example in (EXAMPLES[i] for i in example_ids(components)):
        gold: dict = {}
        if "router" in components:
            gold["routes"] = [ROUTE_OF[c] for c in example.needs if c in components]
        if "text2sql" in components and example.sql:
            gold["sql"] = example.sql
        if "retriever" in components:
            if example.relevant:
                gold["relevant"] = {example.relevant: 2}
            elif "router" in components:
                gold["relevant"] = {}
        if "generator" in components:
            gold["answer"] = example.answer
        tags = ["example", *(ROUTE_OF[c] for c in example.needs if c in components)]
        cases.append({"id": example.id, "question": example.question, "gold": gold,
                      "tags": tags})
    return cases


def render_cases(components: tuple[str, ...]) -> str:
    """cases.jsonl: one example case a line."""
    return "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in example_cases(components))


def render_corpus() -> str:
    """The example corpus, one chunk a line."""
    return "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in CORPUS_CHUNKS)


# --------------------------------------------------------------------------------------------
# scenario.yaml
# --------------------------------------------------------------------------------------------


def pipeline_lines(components: tuple[str, ...]) -> list[str]:
    """The ``pipeline:`` block's component lines for these components.

    >>> print("\\n".join(pipeline_lines(("router", "retriever", "generator"))))
      router: {routes: {docs: [retriever]}}
      retriever: {after: [router]}
      generator: {after: [retriever]}
    >>> print("\\n".join(pipeline_lines(("text2sql", "retriever", "generator"))))
      text2sql: {}
      retriever: {}
      generator: {after: [text2sql, retriever]}
    """
    sources = [c for c in components if c in ROUTE_OF]
    lines = []
    if "router" in components:
        routes = ", ".join(f"{ROUTE_OF[c]}: [{c}]" for c in sources)
        lines.append(f"  router: {{routes: {{{routes}}}}}")
    for c in sources:
        lines.append(f"  {c}: {{after: [router]}}" if "router" in components else f"  {c}: {{}}")
    if "generator" in components:
        after = sources or (["router"] if "router" in components else [])
        lines.append(f"  generator: {{after: [{', '.join(after)}]}}" if after
                     else "  generator: {}")
    return lines


@dataclass(frozen=True)
class Criterion:
    """One component's verdict criterion and the gate on the same metric's mean."""

    component: str
    metric: str
    verdict: str
    """``OP number``, checked on each case's value."""
    gate: str
    """``OP number``, checked on the run's mean."""
    why: str
    """The comment written beside the verdict in scenario.yaml."""


@dataclass(frozen=True)
class Listed:
    """An evaluator ``init`` configures on a component, as its plugin's ``Init`` says."""

    evaluator: Any  # registry.Evaluator
    entry: str
    comment: str
    metrics: list[Any]  # declarations.Metric of the metrics it produces with these settings


def _host(host: Any = None) -> Any:
    if host is not None:
        return host
    from evalharness.plugins import load_plugins

    return load_plugins()


def listed(components: tuple[str, ...], host: Any = None) -> dict[str, list[Listed]]:
    """Component -> the evaluators ``init`` lists on it: every evaluator of its kind whose
    plugin gives it an ``Init`` (one that ``needs_upstream`` only when something feeds the
    component), in registration order, with its metrics' declarations."""
    host = _host(host)
    sources = [c for c in components if c in ROUTE_OF]
    out: dict[str, list[Listed]] = {}
    for component in components:
        fed = bool(sources) if component == "generator" else (
            component in ROUTE_OF and "router" in components)
        out[component] = []
        for (kind, _), registered in host.registry.evaluators.items():
            evaluator = registered.item
            init = evaluator.init
            if kind != component or init is None or (init.needs_upstream and not fed):
                continue
            parsed = yaml.safe_load(init.entry)
            raw = next(iter(parsed.values())) if isinstance(parsed, dict) else {}
            settings = evaluator.settings.model_validate(raw or {})
            out[component].append(Listed(
                evaluator, init.entry, init.comment,
                [evaluator.declaration(m) for m in evaluator.metric_names(settings)]))
    return out


def criteria(components: tuple[str, ...], host: Any = None) -> list[Criterion]:
    """The verdict criteria (and, on the same metrics, the gates) of these components: the
    defaults the listed evaluators' metrics declare, and the end-to-end criterion the final
    generator's metrics declare (``component`` end_to_end). A generator nothing feeds has no
    context to be faithful to: its verdict is the end-to-end criterion too. Gates are each
    evaluator's ``Init.gate`` (the heuristic judge scores a right paraphrase 0.5-0.9, so
    judged scores get lower ones than 0/1 metrics).

    >>> [f"{c.component}: {c.metric} {c.verdict}" for c in criteria(("retriever", "generator"))]
    ['retriever: recall@3 >= 0.5', 'generator: faithfulness >= 0.5', 'end_to_end: correctness_f1 >= 0.5']
    >>> [f"{c.component}: {c.metric}" for c in criteria(("generator",))]
    ['generator: correctness_f1', 'end_to_end: correctness_f1']
    """
    from evalharness.verdicts import default_criteria, end_to_end_criteria

    on = listed(components, host)
    out = []
    for component in components:
        declared = [m for item in on[component] for m in item.metrics]
        texts = default_criteria(declared)
        ends = end_to_end_criteria(declared) if component == "generator" else []
        if component == "generator" and not any(c in ROUTE_OF for c in components) and ends:
            texts = ends  # no context to be faithful to
        for owner, text in [*((component, t) for t in texts), *((END_TO_END, t) for t in ends)]:
            metric, _, verdict = text.partition(" ")
            source = next(i for i in on[component] if any(m.name == metric for m in i.metrics))
            about = next(m for m in source.metrics if m.name == metric)
            out.append(Criterion(owner, metric, verdict, source.evaluator.init.gate or verdict,
                                 about.description or f"{metric} {verdict}"))
    return out


END_TO_END = "end_to_end"


def evaluator_lines(component: str, items: list[Listed], host: Any) -> list[str]:
    """The ``evaluators.COMPONENT`` lines: the listed evaluators (a flow list when none has
    settings), their plugins' comments, and the kind's other evaluators in an ``also:`` line.

    >>> from evalharness.registry import Evaluator
    >>> print("\\n".join(evaluator_lines("router", [Listed(Evaluator("a", "router", ["a"]),
    ...                                    "a", "", [])], host=None)))
      router: [a]
    """
    names = {item.evaluator.name for item in items}
    also = [] if host is None else [n for n in host.registry.evaluators_for(component)
                                    if n not in names]
    notes = [f"{i.evaluator.name}: {i.comment}" for i in items if i.comment]
    if any(":" in i.entry for i in items):
        lines = [f"  {component}:"]
        lines += [f"    - {i.entry}" + (f"   # {i.comment}" if i.comment else "") for i in items]
    else:
        lines = [f"  {component}: [{', '.join(i.entry for i in items)}]"
                 + (f"  # {'; '.join(notes)}" if notes else "")]
    if also:
        lines.append(f"  # also: {', '.join(also)}")
    return lines


def render_scenario(choices: Choices, folder: Path) -> str:
    """scenario.yaml for these choices; data paths are relative to ``folder`` (where it goes)."""
    comps = choices.components
    chain = " -> ".join(
        [c for c in comps if c == "router"]
        + ([" | ".join(choices.sources)] if choices.sources else [])
        + [c for c in comps if c == "generator"])
    n_cases = len(example_ids(comps))
    out = [
        f"# {choices.name}: your application, evaluated component by component.",
        "# Written by `evalharness init`; every path below is relative to this file.",
        "#   check it:  evalharness validate scenario.yaml",
        "#   run it:    evalharness scenario scenario.yaml",
        "# system.py runs a toy over the example data until you replace its functions with calls",
        "# to your application; the example cases are written so that the toy fails some of them",
        "# at different components. Every key: docs/scenario.md in the evalharness repository.",
        f"name: {yaml_scalar(choices.name)}",
        "description: >",
        f"  {choices.name} ({chain}), evaluated component by component.",
        f"cases: cases.jsonl              # {n_cases} example cases: replace them with your "
        "questions",
        "system: system.py:answer        # the adapter: a toy until each function calls your app",
    ]
    if "text2sql" in comps:
        if choices.database is None:
            out += ["database:",
                    "  build: data/schema.sql       # an example database, built fresh into each "
                    "run's folder;",
                    "                               # yours: `path: your.sqlite` instead"]
        else:
            out += ["database:",
                    f"  path: {yaml_scalar(relative_path(choices.database, folder))}"
                    "   # opened read-only by the evaluators"]
    if "retriever" in comps:
        if choices.corpus is None:
            out.append("corpus: data/corpus.jsonl     # an example corpus: one chunk "
                       '{"id", "text"} a line')
        else:
            out.append(f"corpus: {yaml_scalar(relative_path(choices.corpus, folder))}"
                       "   # one chunk {\"id\", \"text\"} a line")
    out += [
        "judge:",
        "  backend: heuristic   # offline and deterministic, no model. An LLM judge on any",
        "                       # OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp):",
        "                       #   judge: {backend: openai, model: gpt-4.1-mini}  "
        "# key in $OPENAI_API_KEY",
        "                       #   judge: {backend: openai, model: llama3.1, "
        "base_url: http://127.0.0.1:11434/v1}",
        "                       # (docs/judge.md)",
        "pipeline:",
        *pipeline_lines(comps),
        "evaluators:            # only what the adapter records: no metric is an error;",
        "                       # `evalharness plugins` lists every evaluator and its metrics",
    ]
    host = _host()
    on = listed(comps, host)
    for component in comps:
        out += evaluator_lines(component, on[component], host)
    rules = criteria(comps, host)
    out.append("verdicts:              # each case's pass/fail per component, and end to end: "
               "the bottleneck table")
    lines = [f"  {c.component}: {'generator.' if c.component == 'end_to_end' else ''}"
             f"{c.metric} {c.verdict}" for c in rules]
    width = max(len(line) for line in lines)
    out += [f"{line:<{width}}   # {c.why}" for line, c in zip(lines, rules, strict=True)]
    if "generator" not in comps:
        final = [c for c in COMPONENTS if c in comps][-1]
        out.append(f"  # end to end: {final}'s verdict (no generator to compare with a reference "
                   "answer)")
    out.append("gates:                 # the same metrics, on the run's mean; "
               "`evalharness scenario` exits 1 when one fails")
    gates = [f"{'generator' if c.component == 'end_to_end' else c.component}.{c.metric} {c.gate}"
             for c in rules]
    out += [f"  - {gate}" for gate in dict.fromkeys(gates)]
    out.append("concurrency: 4         # cases the system handles at once")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# system.py, the adapter
# --------------------------------------------------------------------------------------------

_HEADER = '''\
"""The adapter between evalharness and your application: one function per component.

Scenario: NAME (scenario.yaml, next to this file).

`evalharness scenario scenario.yaml` calls `answer(case)` once per case (several at once, in
worker threads). `answer` calls the functions below in your pipeline's order,

    CHAIN

times each, and records what it returned in a `Trace`: the evaluators score each component
from its step there (docs/scenario.md, "system" and "traces").

As `evalharness init` wrote them, the functions are a toy over the example data (TOY), so
that the scenario runs at once and its first report has failures to attribute: the example
cases are written so that the toy gets some of them wrong, at different components. Replace
the toy under each `TODO` with a call into your application and take its name out of TOY.
Import your application's code at the top of this file; it must be importable (`pip install
-e` it, or put its folder on `sys.path` first). Read only `case.question`: the gold labels are
for the evaluators.

A component that calls a model can report its tokens: give its step
`usage=Usage(prompt_tokens=..., completion_tokens=...)` (from evalharness) in `answer`.
"""

from __future__ import annotations

IMPORTS
from evalharness import Case, STEPS, Trace

HERE = Path(__file__).resolve().parent

TOY = [TOY_FUNCTIONS]
"""The functions below that still run the toy instead of your application. Take a function's
name out once it calls your application; while any is left, every run prints a note."""

if TOY:
    print(f"note: {Path(__file__).name}: {', '.join(TOY)} still run the toy example, not your "
          "application: its scores say nothing about your application yet (see TOY in "
          f"{Path(__file__).resolve()})", file=sys.stderr)


def timed(function: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """``function(*args)`` and the milliseconds it took."""
    start = time.perf_counter()
    result = function(*args)
    return result, (time.perf_counter() - start) * 1000.0
'''

_ROUTER = '''

# ---- router -------------------------------------------------------------------------------

ROUTES = (ROUTE_NAMES)
"""The routes your router may choose, as in scenario.yaml's `pipeline: router: routes:`
(ROUTE_MEANING)."""

ROUTE_WORDS = {
ROUTE_WORD_LINES}
"""The toy router's words: a question that contains one of a route's words takes it."""


def route(question: str) -> list[str]:
    """The router: the routes of ROUTES this question needs, e.g. ["sql"], or [] to abstain."""
    # TODO: call your router here and return its route names, e.g.
    #     return my_app.router.classify(question)
    # The toy: the routes whose words the question contains; with none, the last route.
    text = question.lower()
    chosen = [name for name in ROUTES if any(word in text for word in ROUTE_WORDS[name])]
    return chosen or [ROUTES[-1]]
'''

_TEXT2SQL = '''

# ---- text-to-SQL --------------------------------------------------------------------------

MAX_ROWS = 50
"""The most rows of a query's result that are recorded and given to the generator."""

PRODUCTS = ("Canvas Tote", "Leather Backpack", "Wool Scarf", "Rain Jacket", "Down Parka")
CATEGORIES = {"bag": "bags", "accessor": "accessories", "outerwear": "outerwear"}
"""The toy text-to-SQL's vocabulary: the example database's product names, and a word of
each category."""


def text_to_sql(question: str) -> str:
    """Text-to-SQL: one SQLite query that answers the question."""
    # TODO: call your text-to-SQL component here and return the SQL it wrote, e.g.
    #     return my_app.sql_writer.generate(question, schema=my_app.SCHEMA)
    # `answer` runs it on the database (run_sql below) and records its rows; if your
    # application runs it somewhere else, change `sql_step` to record those rows instead.
    # The toy: one template over the example `products` table, filtered by the product
    # names, categories, "in stock" and "more than N euros" in the question. It knows no
    # other filter.
    text = question.lower()
    where = [f"name = '{name}'" for name in PRODUCTS if name.lower() in text]
    where += [f"category = '{category}'" for word, category in CATEGORIES.items()
              if word in text]
    if "in stock" in text:
        where.append("in_stock = 1")
    more_than = re.search(r"more than (\\d+)", text)
    if more_than:
        where.append(f"price > {more_than.group(1)}")
    sql = "SELECT name, price FROM products"
    if where:
        sql += " WHERE " + " AND ".join(where)
    if "cheapest" in text:
        sql += " ORDER BY price LIMIT 1"
    return sql
'''

_DATABASE_BUILD = '''

DATABASE_SCRIPT = HERE / DATABASE_REL
"""The example database's build script (scenario.yaml's `database: build:`)."""

_database_lock = threading.Lock()


@lru_cache(maxsize=1)
def database() -> sqlite3.Connection:
    """The example database, built in memory from DATABASE_SCRIPT once (shared, under a lock)."""
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.executescript(DATABASE_SCRIPT.read_text(encoding="utf-8"))
    return conn
'''

_DATABASE_PATH = '''

DATABASE = HERE / DATABASE_REL
"""Your SQLite database (scenario.yaml's `database: path:`)."""

_database_lock = threading.Lock()


@lru_cache(maxsize=1)
def database() -> sqlite3.Connection:
    """Your database, opened read-only once (shared, under a lock)."""
    return sqlite3.connect(f"{DATABASE.resolve().as_uri()}?mode=ro", uri=True,
                           check_same_thread=False)
'''

_RUN_SQL = '''

def run_sql(sql: str) -> tuple[list[str], list[list[Any]]]:
    """Run a query on the database: its column names and its first MAX_ROWS rows."""
    with _database_lock:
        cursor = database().execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows = [list(row) for row in cursor.fetchmany(MAX_ROWS)]
    return columns, rows


def sql_step(question: str, given: dict[str, Any] | None) -> Text2SQLStep:
    """The text-to-SQL step: your query and its rows, or the oracle's (`given`, in reruns)."""
    if given is not None:  # oracle headroom: the gold query and its rows, used as given
        return Text2SQLStep(sql=given["sql"], columns=given.get("columns"),
                            rows=given.get("rows"), latency_ms=0.0)
    start = time.perf_counter()
    sql = text_to_sql(question)
    try:
        columns, rows = run_sql(sql)
    except sqlite3.Error as exc:
        return Text2SQLStep(sql=sql, error=f"{type(exc).__name__}: {exc}",
                            latency_ms=(time.perf_counter() - start) * 1000.0)
    return Text2SQLStep(sql=sql, columns=columns, rows=rows,
                        latency_ms=(time.perf_counter() - start) * 1000.0)


def rows_as_text(step: Text2SQLStep) -> list[str]:
    """The query's result as the generator's context: one "column: value, ..." line a row."""
    columns = step.columns or []
    return [", ".join(f"{c}: {v}" for c, v in zip(columns, row, strict=False))
            for row in step.rows or []]
'''

_RETRIEVER = '''

# ---- retriever ----------------------------------------------------------------------------

CORPUS = HERE / CORPUS_REL
"""The chunks your retriever searches, one {"id", "text"} a line (scenario.yaml's `corpus:`)."""

TOP_K = 3
COMMON_WORDS = frozenset("a an and are can do does for how i in is it my of on the to what "
                         "when which will you your".split())
"""The toy retriever keeps at most TOP_K chunks and ignores these words."""


def retrieve(question: str) -> list[str]:
    """The retriever: the ids of the chunks it finds for the question, best first."""
    # TODO: call your retriever here and return the ids of its chunks (as in CORPUS), e.g.
    #     return [hit.id for hit in my_app.search(question, k=5)]
    # The toy: the chunks that share the most words with the question (the very same words:
    # no synonyms, no stemming), at most TOP_K of them.
    asked = words(question)
    shared = {chunk_id: len(asked & words(text)) for chunk_id, text in corpus().items()}
    ranked = sorted((chunk_id for chunk_id in shared if shared[chunk_id]),
                    key=lambda chunk_id: -shared[chunk_id])
    return ranked[:TOP_K]


def words(text: str) -> set[str]:
    """The lowercased words of a text, without COMMON_WORDS."""
    return set(re.findall(r"[a-z]+", text.lower())) - COMMON_WORDS


@lru_cache(maxsize=1)
def corpus() -> dict[str, str]:
    """Chunk id -> text, read from CORPUS once."""
    with CORPUS.open(encoding="utf-8-sig") as lines:
        chunks = (json.loads(line) for line in lines if line.strip())
        return {chunk["id"]: chunk["text"] for chunk in chunks}


def retriever_step(question: str, given: dict[str, Any] | None) -> RetrieverStep:
    """The retriever step: your ranked ids and their texts, or the oracle's (`given`)."""
    if given is not None:  # oracle headroom: the gold chunks, used as given
        ids = list(given["ids"])
        texts = given.get("texts") or [corpus().get(i, "") for i in ids]
        return RetrieverStep(ids=ids, texts=texts, latency_ms=0.0)
    ids, ms = timed(retrieve, question)
    ids = list(ids)
    return RetrieverStep(ids=ids, texts=[corpus().get(i, "") for i in ids], latency_ms=ms)
'''

_GENERATOR = '''

# ---- generator ----------------------------------------------------------------------------


def generate(question: str, contexts: list[str]) -> str:
    """The generator: the answer to the question.

    ``contexts``: CONTEXTS_MEANING."""
    # TODO: call your generator here (e.g. your LLM with your prompt) and return its answer:
    #     return my_app.llm.answer(question, contexts)
    # The toy writes no words of its own: the first sentence of each context, in order,
    # without the column names of the query's rows ("name: Rain Jacket, price: 89.0").
    if not contexts:
        return "I do not know."
    sentences = []
    for context in contexts:
        first = re.split(r"(?<=[.!?])\\s+", context.strip())[0]
        first = re.sub(r"\\b\\w+: ", "", first)
        sentences.append(first if first.endswith((".", "!", "?")) else first + ".")
    return " ".join(sentences)
'''

_GENERATOR_ALONE = '''

# ---- generator ----------------------------------------------------------------------------

KNOWN = {
    "return": "You can return any unworn item within 30 days of delivery.",
    "care": "Hand wash wool in cold water and dry it flat.",
}
"""The toy generator's knowledge: an answer for questions that contain a word."""


def generate(question: str, contexts: list[str]) -> str:
    """The generator: the answer to the question.

    ``contexts``: empty (nothing gives it context)."""
    # TODO: call your generator here (e.g. your LLM with your prompt) and return its answer:
    #     return my_app.llm.answer(question, contexts)
    # The toy answers from what it knows by heart (KNOWN), else it does not know.
    text = question.lower()
    for word, known in KNOWN.items():
        if word in text:
            return known
    return "I do not know."
'''


def python_tuple(items: list[str]) -> str:
    """A tuple of strings as Python source.

    >>> python_tuple(["sql"]), python_tuple(["sql", "docs"])
    ('("sql",)', '("sql", "docs")')
    """
    return "(" + ", ".join(f'"{i}"' for i in items) + ("," if len(items) == 1 else "") + ")"


_ANSWER_DOC = '''    """Run the pipeline on ``case.question``; return what each component did.

    ``overrides`` is evalharness's oracle protocol (docs/bottleneck.md): after the run, cases
    that failed are run again with one component's output given (its gold: the router's
    ``routes``; text-to-SQL's ``sql``, ``columns``, ``rows``; the retriever's ``ids``,
    ``texts``). The components after it work from that output, and the trace records it:
    the bottleneck report's headroom column. Leave this in place when you replace the toy in
    the functions above."""
    overrides = overrides or {}
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise ValueError(f"cannot override {', '.join(unknown)}: this adapter accepts "
                         f"overrides for {', '.join(OVERRIDABLE)}")'''


def _answer_source(components: tuple[str, ...]) -> str:
    """The ``answer`` entry point, composing the chosen components (see :func:`render_system`)."""
    router = "router" in components
    generator = "generator" in components
    overridable = [c for c in ("router", "text2sql", "retriever") if c in components]
    body = ["    question = case.question"]
    if router:
        body += [
            '    if "router" in overrides:  # oracle headroom: the gold routes, used as given',
            '        router = RouterStep(routes=list(overrides["router"]["routes"]), '
            'latency_ms=0.0)',
            "    else:",
            "        routes, ms = timed(route, question)",
            "        router = RouterStep(routes=list(routes), latency_ms=ms)",
        ]
    if generator:
        body.append("    contexts: list[str] = []")
    for comp, make, context in (
            ("text2sql", 'sql_step(question, overrides.get("text2sql"))', "rows_as_text"),
            ("retriever", 'retriever_step(question, overrides.get("retriever"))', "texts")):
        if comp not in components:
            continue
        add = (f"contexts += rows_as_text({comp})" if context == "rows_as_text"
               else f"contexts += {comp}.texts or []")
        if router:
            body += [f"    {comp} = None",
                     f'    if "{ROUTE_OF[comp]}" in router.routes:',
                     f"        {comp} = {make}"]
            if generator:
                body.append(f"        {add}")
        else:
            body.append(f"    {comp} = {make}")
            if generator:
                body.append(f"    {add}")
    if generator:
        body += ["    text, ms = timed(generate, question, contexts)",
                 "    generator = GeneratorStep(answer=text, contexts=contexts, latency_ms=ms)"]
    body += ["    return Trace(", "        case_id=case.id,"]
    body += [f"        {c}={c}," for c in components]
    body.append("    )")
    if overridable:
        head = [
            f"OVERRIDABLE = {python_tuple(overridable)}",
            '"""Components whose output `answer(case, overrides=...)` accepts in place of '
            'its own."""',
            "",
            "",
            "def answer(case: Case, *, overrides: dict[str, dict[str, Any]] | None = None) "
            "-> Trace:",
            _ANSWER_DOC,
        ]
    else:
        head = [
            "def answer(case: Case) -> Trace:",
            '    """Run the pipeline on ``case.question``; return what each component did."""',
        ]
    return ("\n\n# ---- entry point: what `system: system.py:answer` calls "
            + "-" * 34 + "\n\n\n" + "\n".join(head + body) + "\n")


def render_system(choices: Choices, folder: Path) -> str:
    """system.py: the adapter, one function per chosen component and ``answer`` composing them."""
    comps = choices.components
    step_names = {"router": "RouterStep", "text2sql": "Text2SQLStep",
                  "retriever": "RetrieverStep", "generator": "GeneratorStep"}
    imports = ["import sys", "import time", "from collections.abc import Callable",
               "from pathlib import Path", "from typing import Any"]
    if "text2sql" in comps:
        imports += ["import sqlite3", "import threading"]
    if "retriever" in comps:
        imports.append("import json")
    if choices.sources:  # the toys of text_to_sql, retrieve and generate use re
        imports += ["import re", "from functools import lru_cache"]
    plain = sorted(i for i in imports if i.startswith("import "))
    froms = sorted(i for i in imports if i.startswith("from "))
    chain = " -> ".join(FUNCTION_OF[c] for c in comps)
    text = (_HEADER.replace("NAME", choices.name).replace("CHAIN", chain)
            .replace("IMPORTS", "\n".join(plain + froms) + "\n")
            .replace("STEPS", ", ".join(sorted(step_names[c] for c in comps)))
            .replace("TOY_FUNCTIONS", ", ".join(f'"{FUNCTION_OF[c]}"' for c in comps)))
    if "router" in comps:
        names = [ROUTE_OF[c] for c in choices.sources]
        words = "".join(f"    {json.dumps(name)}: {python_tuple(list(ROUTE_WORDS[name]))},\n"
                        for name in names)
        text += (_ROUTER
                 .replace("(ROUTE_NAMES)", python_tuple(names))
                 .replace("ROUTE_WORD_LINES", words)
                 .replace("ROUTE_MEANING", ", ".join(f"{ROUTE_OF[c]} runs {FUNCTION_OF[c]}"
                                                     for c in choices.sources)))
    if "text2sql" in comps:
        text += _TEXT2SQL
        if choices.database is None:
            text += _DATABASE_BUILD.replace("DATABASE_REL", '"data/schema.sql"')
        else:
            text += _DATABASE_PATH.replace(
                "DATABASE_REL", json.dumps(relative_path(choices.database, folder)))
        text += _RUN_SQL
    if "retriever" in comps:
        rel = "data/corpus.jsonl" if choices.corpus is None else relative_path(choices.corpus,
                                                                                folder)
        text += _RETRIEVER.replace("CORPUS_REL", json.dumps(rel))
    if "generator" in comps and not choices.sources:
        text += _GENERATOR_ALONE
    elif "generator" in comps:
        given = [w for c, w in (("text2sql", "the query's rows (one line a row)"),
                                ("retriever", "the retrieved chunks' texts"))
                 if c in comps]
        text += _GENERATOR.replace("CONTEXTS_MEANING", ", then ".join(given))
    text += _answer_source(comps)
    return text


# --------------------------------------------------------------------------------------------
# All files
# --------------------------------------------------------------------------------------------

DESCRIPTIONS = {
    "scenario.yaml": "the scenario: cases, system, data, evaluators, gates",
    "system.py": "the adapter: a toy until you call your application where it says TODO",
    "cases.jsonl": "example cases about the example data",
    "data/schema.sql": "the build script of an example database",
    "data/corpus.jsonl": "an example corpus of four chunks",
}


def render(choices: Choices, folder: Path) -> dict[str, str]:
    """Every file ``init`` writes for these choices: relative path -> text.

    ``folder`` is where they go (an absolute path): paths to the user's data are written
    relative to it.
    """
    files = {
        "scenario.yaml": render_scenario(choices, folder),
        "system.py": render_system(choices, folder),
        "cases.jsonl": render_cases(choices.components),
    }
    if "text2sql" in choices.components and choices.database is None:
        files["data/schema.sql"] = SCHEMA_SQL
    if "retriever" in choices.components and choices.corpus is None:
        files["data/corpus.jsonl"] = render_corpus()
    return files


# --------------------------------------------------------------------------------------------
# Checks of the user's data
# --------------------------------------------------------------------------------------------


def check_database(path: Path) -> str | None:
    """Why ``path`` is not a readable SQLite database, or None."""
    problem = not_a_file(path)
    if problem is not None:
        return f"{path} {problem}"
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro",
                                                uri=True)) as conn:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        return f"{path} is not a readable SQLite database ({exc})"
    return None


def check_corpus(path: Path) -> str | None:
    """Why ``path`` is not a corpus file (JSONL of chunks), or None."""
    from evalharness.context import load_corpus

    problem = not_a_file(path)
    if problem is not None:
        return f"{path} {problem}"
    try:
        load_corpus(path)
    except EvalHarnessError as exc:
        return str(exc)
    return None


# --------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------


def is_interactive() -> bool:
    """Whether ``init`` may prompt: stdin and stdout are both terminals."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _path_answer(check: Callable[[Path], str | None]) -> Callable[[str], Path | None]:
    """A ``click.prompt`` value_proc: empty -> None, else an existing, valid path."""
    def convert(text: str) -> Path | None:
        text = text.strip()
        if not text:
            return None
        path = Path(text).expanduser()
        problem = check(path)
        if problem:
            raise click.UsageError(f"{problem}; give another path, or nothing to scaffold an "
                                   "example")
        return path.resolve()
    return convert


def ask_components() -> tuple[str, ...]:
    """Ask, component by component, which ones the application has (until they make a
    pipeline)."""
    while True:
        chosen = tuple(c for c in COMPONENTS
                       if click.confirm(f"Does your application have {DESCRIBED[c]}?",
                                        default=True))
        problem = components_problem(chosen)
        if problem is None:
            return chosen
        click.echo(f"Cannot scaffold that: {problem}.", err=True)


@click.command()
@click.argument("directory", default=".", required=False, metavar="[DIR]",
                type=click.Path(file_okay=False, path_type=Path))
@click.option("--components", "components_text", metavar="LIST",
              help="Comma-separated components your application has: "
                   f"{', '.join(COMPONENTS)} (default: all four).")
@click.option("--database", type=click.Path(path_type=Path),
              help="An existing SQLite file your text-to-SQL step queries (default: scaffold an "
                   "example, data/schema.sql).")
@click.option("--corpus", type=click.Path(path_type=Path),
              help="An existing JSONL file of chunks {\"id\", \"text\"} your retriever searches "
                   "(default: scaffold an example, data/corpus.jsonl).")
@click.option("--name", help="The scenario's name (default: from DIR's name).")
@click.option("--force", is_flag=True, help="Overwrite files that already exist.")
@click.option("--no-input", is_flag=True, help="Never prompt; use the flags and the defaults.")
def init(directory: Path, components_text: str | None, database: Path | None,
         corpus: Path | None, name: str | None, force: bool, no_input: bool) -> None:
    """Scaffold a scenario for an existing application in DIR (default: here).

    Writes scenario.yaml, system.py (the adapter: one function per component, each a toy
    over the example data until you call your application there), cases.jsonl (example
    cases) and, unless --database/--corpus are given, example data under data/; then checks
    the result as `evalharness validate` does. On a terminal it asks for what the flags do
    not give (not with --no-input).

    The toy gets some example cases wrong, at different components, so the first
    `evalharness scenario` run shows a bottleneck table; its gates fail: it exits 1.

    \b
    Examples:
      evalharness init evals/
      evalharness init evals/ --components router,retriever,generator --no-input
      evalharness init evals/ --database app.sqlite --corpus chunks.jsonl --name myapp
    """
    folder = directory.expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise InitProblem(f"{directory} is a file; give the folder to scaffold the scenario "
                          "in (it is created if missing)")
    if not force:  # before any question: these three are always written
        refuse_overwrite(directory, folder, ["scenario.yaml", "system.py", "cases.jsonl"])
    prompt = not no_input and is_interactive()

    if components_text is not None:
        try:
            components = parse_components(components_text)
        except ValueError as exc:
            raise InitProblem(f"--components {components_text!r}: {exc} (comma-separated, "
                              "e.g. --components router,retriever,generator)") from None
        problem = components_problem(components)
        if problem:
            raise InitProblem(f"--components {components_text!r}: {problem}")
    elif prompt:
        components = ask_components()
    else:
        components = COMPONENTS

    for flag, value, needs in (("--database", database, "text2sql"),
                               ("--corpus", corpus, "retriever")):
        if value is not None and needs not in components:
            raise InitProblem(f"{flag} is for the {needs} component, which is not among the "
                              f"components ({', '.join(components)}); add it to --components "
                              f"or leave {flag} out")
    if database is not None:
        problem = check_database(database.expanduser())
        if problem:
            raise InitProblem(f"--database: {problem}; give an existing SQLite file, or leave "
                              "--database out to scaffold an example database")
        database = database.expanduser().resolve()
    elif prompt and "text2sql" in components:
        database = click.prompt("Your SQLite database (a path; empty: scaffold an example)",
                                default="", show_default=False,
                                value_proc=_path_answer(check_database))
    if corpus is not None:
        problem = check_corpus(corpus.expanduser())
        if problem:
            raise InitProblem(f"--corpus: {problem}; give an existing JSONL file of chunks "
                              '{"id", "text"}, or leave --corpus out to scaffold an example')
        corpus = corpus.expanduser().resolve()
    elif prompt and "retriever" in components:
        corpus = click.prompt("Your corpus, a JSONL file of chunks {\"id\", \"text\"} (a path; "
                              "empty: scaffold an example)", default="", show_default=False,
                              value_proc=_path_answer(check_corpus))

    if name is None:
        name = (click.prompt("Scenario name", default=default_name(folder)) if prompt
                else default_name(folder))
    if not NAME_RE.fullmatch(name):
        raise InitProblem(f"--name {name!r}: use letters, digits, '.', '_' and '-', starting "
                          "with a letter or digit (it names the run folders, "
                          "runs/<name>-<timestamp>)")

    choices = Choices(name=name, components=components, database=database, corpus=corpus)
    files = render(choices, folder)
    if not force:
        refuse_overwrite(directory, folder, list(files))
    for rel, text in files.items():
        target = folder / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InitProblem(f"{directory / rel}: cannot write it ({exc})") from None
        click.echo(f"wrote {directory / rel}  ({DESCRIPTIONS[rel]})")

    scenario_path = directory / "scenario.yaml"
    # the example cases are about the example data: their gold fits your own database or
    # corpus only once you have replaced them (the next steps say so)
    summary = validate_written(scenario_path,
                               gold=choices.database is None and choices.corpus is None)
    click.echo(summary)
    click.echo(next_steps(directory, choices))


def refuse_overwrite(directory: Path, folder: Path, files: list[str]) -> None:
    """Raise :class:`InitProblem` naming the first of ``files`` that already exists in
    ``folder`` (shown under ``directory``, as the user wrote it)."""
    existing = [rel for rel in files if (folder / rel).exists()]
    if existing:
        others = ", ".join(str(directory / rel) for rel in existing[1:])
        raise InitProblem(f"{directory / existing[0]} already exists"
                          + (f" (and so do {others})" if others else "")
                          + "; init does not overwrite files: pass --force to replace "
                          + ("them" if others else "it") + ", or choose another DIR")


def validate_written(path: Path, gold: bool = True) -> str:
    """Run ``evalharness validate``'s checks on the written scenario (the gold too, with
    ``gold``); its one-line summary."""
    from evalharness.validation import validate_scenario

    try:
        summary, warnings = validate_scenario(path, gold=gold)
    except EvalHarnessError as exc:
        raise InitProblem(f"the files are written, but the scenario does not validate: {exc}. "
                          f"Fix that, then run `evalharness validate {path}`") from None
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    return summary


def next_steps(directory: Path, choices: Choices) -> str:
    """What to do after ``init``: run the toy, replace it and the cases, run again."""
    functions = ", ".join(FUNCTION_OF[c] for c in choices.components)
    scenario = shlex.quote(str(directory / "scenario.yaml"))
    lines = [
        "",
        f"{directory / 'system.py'} runs a toy over the example data, not your application.",
        "Next:",
        f"  1. evalharness scenario {scenario}    (the toy's report: the example cases it gets "
        "wrong, attributed to components; its gates fail, exit 1)",
        f"  2. in {directory / 'system.py'}, replace the toy under each TODO with a call to "
        f"your application: {functions}; and take the function's name out of TOY",
        f"  3. replace the example cases in {directory / 'cases.jsonl'} with your questions "
        "and their gold labels",
        f"  4. evalharness validate {scenario}, then evalharness scenario {scenario}",
    ]
    if choices.database is not None or choices.corpus is not None:
        lines.append("The example cases' gold labels (SQL, chunk ids) are about the example "
                     "data, not yours: replace them before trusting a run.")
    return "\n".join(lines)
