"""The instrumented shop as live traffic (scenarios/shop/traced.py, issue 32 point 5): spans
sent with the SDK's OTLP/HTTP exporter to `evalharness traces receive`, read back with the
OpenInference mapping; a fault switched on after K questions; simulated users' feedback;
seeded runs that repeat (docs/traces-roundtrip.md#live-traffic)."""

from __future__ import annotations

import doctest
import json
import time
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.proto")

from conftest import traced_shop  # noqa: E402
from evalharness.importing import import_file  # noqa: E402
from evalharness.models import Case  # noqa: E402
from evalharness.pipeline import SHOP_PIPELINE, ComponentSpec, Pipeline  # noqa: E402
from evalharness.spans.importer import import_traces, read_mapped  # noqa: E402
from evalharness.spans.mapping import load_mapping  # noqa: E402
from evalharness.spans.paths import trace_files  # noqa: E402
from evalharness.spans.readers import detect  # noqa: E402
from evalharness.spans.receive.server import Receiver  # noqa: E402

SHOP = Path(__file__).resolve().parent.parent / "scenarios" / "shop"
MAPPING = SHOP / "traces-openinference.yaml"
STEP_FIELDS = {
    "router": ("routes", "scores", "confidence"),
    "text2sql": ("sql", "columns", "rows", "error"),
    "retriever": ("ids", "texts", "scores"),
    "generator": ("answer", "contexts", "usage"),
}
TIMES = {name: {"latency_ms"} for name in STEP_FIELDS}
FEEDBACK_KEYS = {"trace_id", "thumbs", "score", "comment", "user_id", "at"}


def _pipeline() -> Pipeline:
    return Pipeline({n: ComponentSpec.model_validate(c) for n, c in SHOP_PIPELINE.items()})


def _cases() -> list[Case]:
    return [Case.model_validate_json(line) for line in
            (SHOP / "cases.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def _reference_answer(case_id: str, question: str, fault: str | None) -> str | None:
    """The answer of an assistant copy no instrumentation ever touched."""
    assistant = import_file(SHOP / "assistant", "test_traced_shop_reference")
    trace = assistant.answer(Case(id=case_id, question=question), fault=fault)
    return trace.generator.answer if trace.generator else None


def _roots(folder: Path) -> list:
    """The root spans of every complete file of ``folder``, in the order they started."""
    spans = [s for f in trace_files(folder) for s in detect(f).read(f)]
    return sorted((s for s in spans if s.parent_id is None), key=lambda s: s.start_ns)


@pytest.fixture
def receiver(tmp_path):
    """A receiver on a free port of 127.0.0.1 (as tests/test_trace_receive.py starts one),
    stopped after the test whatever happens."""
    made: list[Receiver] = []

    def make(name: str = "received") -> Receiver:
        rx = Receiver(tmp_path / name, port=0, retry_after=0, retry_after_disk=0,
                      min_free_bytes=0).start()
        made.append(rx)
        return rx

    yield make
    for rx in made:
        rx.stop(timeout=5)


def test_every_case_over_otlp_imports_and_joins(receiver):
    rx = receiver()
    sent = traced_shop().record(SHOP / "cases.jsonl", endpoint=rx.url)
    stats = rx.stop()
    assert sent == stats.spans > 4 * 51
    assert {f.suffix for f in trace_files(rx.folder)} == {".pb"}  # the SDK sends protobuf
    cases = _cases()
    imported = import_traces(rx.folder, fmt=None, mapping=load_mapping(MAPPING), join=None,
                             pipeline=_pipeline(), cases=cases)
    assert set(imported.traces) == {c.id for c in cases} and not imported.unmatched


@pytest.mark.parametrize(("convention", "mapping"), [("openinference", MAPPING),
                                                     ("genai", SHOP / "traces-genai.yaml")])
def test_traffic_over_otlp_maps_every_trace_with_users_and_feedback(receiver, tmp_path,
                                                                    convention, mapping):
    rx = receiver()
    feedback = tmp_path / "feedback.jsonl"
    run = traced_shop().traffic(40, endpoint=rx.url, seed=11, feedback=feedback,
                            convention=convention)
    stats = rx.stop()
    assert run.dropped == 0 and run.spans == stats.spans
    asked = {a.trace_id: a for a in run.asked}
    assert len(asked) == 40

    _, mapped = read_mapped(rx.folder, fmt=None, mapping=load_mapping(mapping),
                            pipeline=_pipeline())
    got = {m.trace_id: m for m in mapped}
    assert set(got) == set(asked)
    for trace_id, m in got.items():
        assert m.error is None and not m.problems, (trace_id, m.error, m.problems)
        assert m.join_key == asked[trace_id].case_id
        assert m.question == asked[trace_id].question
        assert m.trace.router is not None and m.trace.generator is not None
        assert m.trace.generator.answer == asked[trace_id].answer
    questions = {c.id: c.question for c in _cases()}
    assert 0 < sum(a.question != questions[a.case_id] for a in run.asked) < 20  # rephrased

    roots = _roots(rx.folder)
    assert [r.trace_id for r in roots] == [a.trace_id for a in run.asked]
    for root, a in zip(roots, run.asked, strict=True):
        assert (root.attributes["user.id"], root.attributes["session.id"]) == (a.user_id,
                                                                                a.session_id)
    assert len({a.user_id for a in run.asked}) > 5

    lines = [json.loads(line) for line in feedback.read_text(encoding="utf-8").splitlines()]
    assert 0 < len(lines) == run.feedback < 40
    for line in lines:
        assert set(line) == FEEDBACK_KEYS
        assert line["trace_id"] in asked and line["user_id"] == asked[line["trace_id"]].user_id
        assert line["thumbs"] in ("up", "down") and line["score"] in range(1, 6)
        assert line["comment"] is None or isinstance(line["comment"], str)
        assert line["at"].endswith("+00:00")


def test_fault_after_k_questions_over_the_command(receiver, tmp_path, capsys):
    rx = receiver()
    code = traced_shop().main(["--otlp-endpoint", f"http://127.0.0.1:{rx.port}", "--traffic", "12",
                           "--seed", "5", "--fault", "generator", "--fault-after", "5"])
    assert code == 0
    assert "12 questions" in capsys.readouterr().out
    rx.stop()
    roots = _roots(rx.folder)
    assert len(roots) == 12
    changed = 0
    for i, root in enumerate(roots):
        case_id = root.attributes["metadata"]["case_id"]  # JSON text, read as JSON
        question = root.attributes["input.value"]["question"]
        normal = _reference_answer(case_id, question, None)
        faulty = _reference_answer(case_id, question, "generator")
        want = normal if i < 5 else faulty
        assert root.attributes["output.value"] == want, (i, case_id)
        changed += normal != faulty
    assert changed >= 7  # the fault changes every answer it touches


@pytest.mark.parametrize("fault", ["router", "text2sql", "retriever", "generator"])
def test_a_faulty_component_s_span_shows_what_it_did(tmp_path, fault):
    """The spans of ``--fault NAME`` map to the trace ``answer(case, fault=NAME)`` gives — the
    scenarios' fault — step by step: the fault is visible in the faulty component's span."""
    spans = tmp_path / "spans.jsonl"
    traced_shop().record(SHOP / "cases.jsonl", spans, fault=fault)
    cases = _cases()
    imported = import_traces(spans, fmt=None, mapping=load_mapping(MAPPING), join=None,
                             pipeline=_pipeline(), cases=cases)
    assistant = import_file(SHOP / "assistant", "test_traced_shop_reference")
    differs = 0
    for case in cases:
        want, got = assistant.answer(case, fault=fault), imported.traces[case.id]
        normal = assistant.answer(case)
        for component, fields in STEP_FIELDS.items():
            a, b = getattr(want, component), getattr(got, component)
            assert (a is None) == (b is None), (case.id, component)
            for f in fields if a else ():
                assert getattr(b, f) == getattr(a, f), (case.id, component, f)
        differs += want.model_dump(exclude=TIMES) != normal.model_dump(exclude=TIMES)
    assert differs >= 5  # the fault changed what some cases' spans hold


def test_feedback_follows_the_answers_and_a_seeded_run_repeats(tmp_path):
    traced = traced_shop()

    def run(name: str, seed: int):
        feedback = tmp_path / f"{name}.feedback.jsonl"
        out = traced.traffic(150, out=tmp_path / f"{name}.jsonl", seed=seed,
                             fault="generator", fault_after=75, feedback=feedback)
        lines = [json.loads(x) for x in feedback.read_text(encoding="utf-8").splitlines()]
        return out, [{k: v for k, v in line.items() if k != "at"} for line in lines]

    first, first_lines = run("a", 3)
    again, again_lines = run("b", 3)
    other, _ = run("c", 4)
    assert first.asked == again.asked and first_lines == again_lines  # times aside
    assert [a.trace_id for a in other.asked] != [a.trace_id for a in first.asked]

    asked = {a.trace_id: a for a in first.asked}
    assert all(a.fault is None for a in first.asked[:75])
    assert all(a.fault == "generator" for a in first.asked[75:])
    wrong_before = sum(bool(a.wrong) for a in first.asked[:75])
    wrong_after = sum(bool(a.wrong) for a in first.asked[75:])
    assert wrong_after > 2 * wrong_before  # the generator fault is what users notice

    def down_rate(wrong: bool) -> float:
        said = [x for x in first_lines if asked[x["trace_id"]].wrong is wrong]
        return sum(x["thumbs"] == "down" for x in said) / len(said)

    assert down_rate(True) > 0.5 > 0.3 > down_rate(False)


def test_rate_paces_the_questions(tmp_path):
    start = time.monotonic()
    run = traced_shop().traffic(4, out=tmp_path / "spans.jsonl", seed=1, rate=20)
    assert len(run.asked) == 4 and time.monotonic() - start >= 3 / 20


def test_the_doctests_pass():
    result = doctest.testmod(traced_shop())  # scenarios/ is outside the doctest paths
    assert result.failed == 0 and result.attempted >= 5


def test_bad_options_say_what_to_do(capsys):
    traced = traced_shop()
    for argv, says in [
        (["--out", "x.jsonl", "--fault-after", "3"], "--fault-after needs --fault"),
        (["--out", "x.jsonl", "--feedback", "f.jsonl"], "--feedback need --traffic N"),
        (["--out", "x.jsonl", "--otlp-endpoint", "http://h:4318"], "not allowed with"),
        (["--out", "x.jsonl", "--fault", "judge"], "invalid choice: 'judge'"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            traced.main(argv)
        assert exit_.value.code == 2
        assert says in capsys.readouterr().err
    with pytest.raises(ValueError, match="not an http"):
        traced.otlp_url("127.0.0.1:4318")
