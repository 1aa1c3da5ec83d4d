"""Writes the fixtures of tests/test_trace_answers.py: ``genai_parts_*``,
``agentframework_langfuse*``, ``beeai_langfuse*`` and ``llamaindex_router_*`` (README.md here).

They are written from the shapes of real exports as issue 31 describes them and from the
specifications they follow — OpenTelemetry GenAI semantic conventions 1.37 (``gen_ai.input.
messages`` / ``gen_ai.output.messages`` with ``parts``), the older event and flat-attribute
forms, OpenInference, Langfuse's OTLP ingestion (``gen_ai.*`` span → observation type by
``gen_ai.operation.name``, ``input``/``output`` from the messages, span attributes under
``metadata.attributes``) and its public API and blob export — not recorded from a running
application. Nothing here runs in the tests; run it to rewrite the files:

    python tests/data/traces/shapes/answers_make.py
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
T0 = 1_764_583_200_000_000_000
"""2025-12-01T10:00:00Z, in nanoseconds: every trace here starts at a whole minute after it."""
PROJECT = "cm4shop0001lfxq8e9answ"

# --------------------------------------------------------------------------------------------
# OTLP JSON (the Collector's file exporter: one ExportTraceServiceRequest a line)
# --------------------------------------------------------------------------------------------


def any_value(value: Any) -> dict:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": any_value(v)}
                                           for k, v in value.items()]}}
    return {"stringValue": str(value)}


def kv(attrs: dict) -> list[dict]:
    return [{"key": k, "value": any_value(v)} for k, v in attrs.items()]


def otlp_span(trace: str, sid: str, parent: str | None, name: str, at: tuple[float, float],
              attrs: dict, *, kind: int = 1, events: list[tuple[str, float, dict]] = (),
              minute: int = 0) -> dict:
    """A span ``at`` (start, end) milliseconds into its trace's minute."""
    base = T0 + minute * 60_000_000_000
    out = {"traceId": trace, "spanId": sid, "name": name, "kind": kind,
           "startTimeUnixNano": str(base + int(at[0] * 1e6)),
           "endTimeUnixNano": str(base + int(at[1] * 1e6)),
           "attributes": kv(attrs), "status": {"code": 1}, "flags": 256}
    if parent:
        out["parentSpanId"] = parent
    if events:
        out["events"] = [{"timeUnixNano": str(base + int(t * 1e6)), "name": n,
                          "attributes": kv(a)} for n, t, a in events]
    return out


def request(scope: str, version: str, spans: list[dict], service: str) -> dict:
    resource = {"service.name": service, "telemetry.sdk.language": "python",
                "telemetry.sdk.name": "opentelemetry", "telemetry.sdk.version": "1.38.0"}
    return {"resourceSpans": [{"resource": {"attributes": kv(resource)}, "scopeSpans": [
        {"scope": {"name": scope, "version": version}, "spans": spans}]}]}


def text(role: str, content: str) -> dict:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def tool_call(call_id: str, name: str, arguments: dict) -> dict:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


SYSTEM = "You are the shop's assistant. Use the tools; answer in one sentence."

# the shop agent of Microsoft Agent Framework: one question, a tool call, the answer
AF_CASES = [
    # (question, tool arguments, tool result, answer)
    ("What does the blue scarf cost?", {"item": "blue scarf"},
     {"item": "blue scarf", "price": 19.99, "currency": "EUR"},
     "The blue scarf costs 19.99 EUR."),
    ("Is the red raincoat in stock?", {"item": "red raincoat"},
     {"item": "red raincoat", "in_stock": 4},
     "Yes, 4 red raincoats are in stock."),
    ("How long does delivery to Oslo take?", {"item": "delivery oslo"},
     {"item": "delivery oslo", "days": "5-7"},
     "Delivery to Oslo takes 5 to 7 days."),
]


def af_messages(i: int) -> tuple[list, list, list, list]:
    """(input, output) messages of the tool-call chat, then of the answer chat."""
    question, args, result, answer = AF_CASES[i]
    call = f"call_{i}Qm8Xo2bYvT3kN"
    user = [{"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
            text("user", question)]
    first_out = [{"role": "assistant", "parts": [tool_call(call, "get_price", args)],
                  "finish_reason": "tool_call"}]
    second_in = [*user, {"role": "assistant", "parts": [tool_call(call, "get_price", args)]},
                 {"role": "tool", "parts": [{"type": "tool_call_response", "id": call,
                                             "response": result}]}]
    second_out = [{"role": "assistant", "parts": [{"type": "text", "content": answer}],
                   "finish_reason": "stop"}]
    return user, first_out, second_in, second_out


AF_TIMES = {
    # span: (start, end) ms. `overlap`: the answer's chat span starts first and ends last,
    # the tool-call chat span starts inside it (both children of invoke_agent), as issue 31
    # describes the real export; `sequential`: one after the other, the plain case.
    "overlap": {"agent": (0, 2400), "answer": (12, 2390), "call": (30, 880),
                "tool": (885, 905)},
    "sequential": {"agent": (0, 2400), "call": (10, 880), "tool": (885, 905),
                   "answer": (910, 2390)},
}


def af_ids(i: int) -> dict[str, str]:
    """Span ids (16 hex digits) of case ``i``'s spans."""
    return {k: f"{n}{i:02d}a7c3e9f1b2d4" for k, n in
            (("agent", "a1"), ("call", "c2"), ("tool", "d3"), ("answer", "e4"))}


def af_attrs(i: int, which: str) -> dict:
    user, first_out, second_in, second_out = af_messages(i)
    common = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
              "gen_ai.request.model": "gpt-4o-mini",
              "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
              "server.address": "api.openai.com", "server.port": 443}
    if which == "call":
        return {**common, "gen_ai.response.id": f"chatcmpl-AF{i}call",
                "gen_ai.response.finish_reasons": ["tool_calls"],
                "gen_ai.usage.input_tokens": 182, "gen_ai.usage.output_tokens": 21,
                "gen_ai.input.messages": json.dumps(user),
                "gen_ai.output.messages": json.dumps(first_out)}
    return {**common, "gen_ai.response.id": f"chatcmpl-AF{i}answer",
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.input_tokens": 236, "gen_ai.usage.output_tokens": 14,
            "gen_ai.input.messages": json.dumps(second_in),
            "gen_ai.output.messages": json.dumps(second_out)}


def af_otlp(i: int, shape: str) -> dict:
    question, args, result, answer = AF_CASES[i]
    trace = f"4bf92f3577b34da6a3ce929d0e0e47{i:02d}"
    ids = af_ids(i)
    times = AF_TIMES[shape]
    user, *_ = af_messages(i)
    spans = [
        otlp_span(trace, ids["agent"], None, "invoke_agent ShopAssistant", times["agent"], {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "ShopAssistant",
            "gen_ai.agent.id": "shop-assistant-7f3a", "gen_ai.provider.name": "openai",
            "gen_ai.input.messages": json.dumps([text("user", question)]),
            "gen_ai.output.messages": json.dumps([text("assistant", answer)])}, minute=i),
        otlp_span(trace, ids["answer"], ids["agent"], "chat gpt-4o-mini", times["answer"],
                  af_attrs(i, "answer"), kind=3, minute=i),
        otlp_span(trace, ids["call"], ids["agent"], "chat gpt-4o-mini", times["call"],
                  af_attrs(i, "call"), kind=3, minute=i),
        otlp_span(trace, ids["tool"], ids["agent"], "execute_tool get_price", times["tool"], {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_price",
            "gen_ai.tool.type": "function", "gen_ai.tool.call.id": f"call_{i}Qm8Xo2bYvT3kN",
            "gen_ai.tool.call.arguments": json.dumps(args),
            "gen_ai.tool.call.result": json.dumps(result)}, minute=i),
    ]
    return request("agent_framework", "1.0.0b251007", spans, "shop-agent")


# the older GenAI forms: one trace each, a tool call and then the answer
OLD_CASES = [
    ("Which colours does the wool hat come in?", "The wool hat comes in grey and navy."),
    ("Can I return opened socks?", "Opened socks can be returned within 14 days."),
    ("What sizes does the parka come in?", "The parka comes in S, M, L and XL."),
]


def old_forms() -> list[dict]:
    out = []
    # 1.28-1.36: content in events; the tool call in the choice's message
    trace = "0af7651916cd43dd8448eb211c8031a0"
    q, a = OLD_CASES[0]
    chat = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini"}
    out.append(request("opentelemetry.instrumentation.openai_v2", "2.1b0", [
        otlp_span(trace, "b7ad6b7169203331", None, "shop-assistant", (0, 1900), {}, minute=3),
        otlp_span(trace, "00f067aa0ba902b7", "b7ad6b7169203331", "chat gpt-4o-mini", (5, 700), {
            **chat, "gen_ai.response.finish_reasons": ["tool_calls"],
            "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 18}, kind=3,
            minute=3, events=[
                ("gen_ai.system.message", 6, {"gen_ai.system": "openai", "content": SYSTEM}),
                ("gen_ai.user.message", 6, {"gen_ai.system": "openai", "content": q}),
                ("gen_ai.choice", 699, {"gen_ai.system": "openai", "index": 0,
                                        "finish_reason": "tool_calls", "message": {
                                            "role": "assistant", "tool_calls": [{
                                                "id": "call_h1", "type": "function",
                                                "function": {"name": "find_product",
                                                             "arguments": '{"q": "wool hat"}'}}]}})]),
        otlp_span(trace, "c1d2e3f4a5b6c7d8", "b7ad6b7169203331", "find_product", (705, 720),
                  {"tool.name": "find_product"}, minute=3),
        otlp_span(trace, "53995c3f42cd8ad8", "b7ad6b7169203331", "chat gpt-4o-mini", (725, 1890), {
            **chat, "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.input_tokens": 160, "gen_ai.usage.output_tokens": 12}, kind=3,
            minute=3, events=[
                ("gen_ai.user.message", 726, {"gen_ai.system": "openai", "content": q}),
                ("gen_ai.choice", 1889, {"gen_ai.system": "openai", "index": 0,
                                         "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": a}})]),
    ], "shop-old-events"))
    # 1.27: gen_ai.content.prompt / gen_ai.content.completion events holding JSON texts
    trace = "5b8efff798038103d269b633813fc60c"
    q, a = OLD_CASES[1]
    out.append(request("opentelemetry.instrumentation.openai_v2", "2.0b0", [
        otlp_span(trace, "eee19b7ec3c1b174", None, "shop-assistant", (0, 1700), {}, minute=4),
        otlp_span(trace, "eee19b7ec3c1b175", "eee19b7ec3c1b174", "chat gpt-4o-mini", (4, 650), {
            **chat, "gen_ai.response.finish_reasons": ["tool_calls"],
            "gen_ai.usage.prompt_tokens": 110, "gen_ai.usage.completion_tokens": 16}, kind=3,
            minute=4, events=[
                ("gen_ai.content.prompt", 5, {"gen_ai.prompt": json.dumps(
                    [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}])}),
                ("gen_ai.content.completion", 649, {"gen_ai.completion": json.dumps(
                    [{"role": "assistant", "content": None, "tool_calls": [{
                        "id": "call_r2", "type": "function", "function": {
                            "name": "return_policy", "arguments": '{"item": "socks"}'}}]}])})]),
        otlp_span(trace, "eee19b7ec3c1b176", "eee19b7ec3c1b174", "chat gpt-4o-mini", (660, 1690), {
            **chat, "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.prompt_tokens": 150, "gen_ai.usage.completion_tokens": 11}, kind=3,
            minute=4, events=[
                ("gen_ai.content.prompt", 661, {"gen_ai.prompt": json.dumps(
                    [{"role": "user", "content": q}])}),
                ("gen_ai.content.completion", 1689, {"gen_ai.completion": json.dumps(
                    [{"role": "assistant", "content": a}])})]),
    ], "shop-old-content-events"))
    # flat attributes: gen_ai.prompt.N.* / gen_ai.completion.N.* (OpenLLMetry's provider
    # instrumentations, which also set llm.request.type)
    trace = "9c1f8e4a7d2b4c6e8f0a1b2c3d4e5f60"
    q, a = OLD_CASES[2]
    flat = {"gen_ai.operation.name": "chat", "llm.request.type": "chat",
            "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini"}
    out.append(request("opentelemetry.instrumentation.openai.v1", "0.47.3", [
        otlp_span(trace, "aa00000000000001", None, "shop-assistant", (0, 1600), {}, minute=5),
        otlp_span(trace, "aa00000000000002", "aa00000000000001", "openai.chat", (3, 600), {
            **flat, "gen_ai.usage.input_tokens": 98, "gen_ai.usage.output_tokens": 15,
            "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": SYSTEM,
            "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": q,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "gen_ai.completion.0.tool_calls.0.id": "call_p3",
            "gen_ai.completion.0.tool_calls.0.name": "find_product",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"q": "parka"}'}, kind=3, minute=5),
        otlp_span(trace, "aa00000000000003", "aa00000000000001", "openai.chat", (610, 1590), {
            **flat, "gen_ai.usage.input_tokens": 140, "gen_ai.usage.output_tokens": 13,
            "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": q,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "stop",
            "gen_ai.completion.0.content": a}, kind=3, minute=5),
    ], "shop-old-flat"))
    return out


# --------------------------------------------------------------------------------------------
# Langfuse (public API, camelCase; blob storage export, snake_case)
# --------------------------------------------------------------------------------------------


def iso(minute: int, ms: float, *, blob: bool = False) -> str:
    t = datetime.fromtimestamp((T0 + minute * 60_000_000_000) / 1e9 + ms / 1000, UTC)
    if blob:
        return f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond // 1000:03d}"
    return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z"


def lf_observation(*, oid: str, trace: str, parent: str | None, kind: str, name: str,
                   minute: int, at: tuple[float, float], input: Any, output: Any,
                   metadata: dict, model: str | None = None, usage: tuple[int, int] | None = None,
                   as_text: bool = False) -> dict:
    """An observation as ``GET /api/public/observations`` (v1: input/output parsed) or, with
    ``as_text``, ``GET /api/public/v2/observations`` (the stored JSON texts) returns it."""
    def io(value: Any) -> Any:
        return json.dumps(value) if as_text and value is not None else value
    tokens = ({"input": usage[0], "output": usage[1], "total": sum(usage)} if usage else {})
    obs = {
        "id": oid, "traceId": trace, "type": kind, "name": name,
        "startTime": iso(minute, at[0]), "endTime": iso(minute, at[1]),
        "completionStartTime": iso(minute, at[0] + 300) if kind == "GENERATION" else None,
        "model": model, "modelParameters": {} if model else None,
        "input": io(input), "output": io(output), "metadata": metadata, "version": None,
        "level": "DEFAULT", "statusMessage": None, "parentObservationId": parent,
        "promptId": None, "usageDetails": tokens, "costDetails": {}, "environment": "default",
        "latency": round((at[1] - at[0]) / 1000, 3),
    }
    if not as_text:
        obs["usage"] = {**tokens, "unit": "TOKENS"} if usage else {
            "input": 0, "output": 0, "total": 0, "unit": "TOKENS"}
    return obs


def otel_metadata(attrs: dict, scope: str, version: str, service: str) -> dict:
    """What Langfuse's OTLP ingestion keeps of a span in an observation's metadata."""
    return {"attributes": attrs, "resourceAttributes": {
        "service.name": service, "telemetry.sdk.language": "python",
        "telemetry.sdk.name": "opentelemetry", "telemetry.sdk.version": "1.38.0"},
        "scope": {"name": scope, "version": version}}


def af_langfuse(i: int, shape: str, *, as_text: bool) -> tuple[dict, list[dict]]:
    """(the trace record, its observations) of Agent Framework case ``i`` ingested from
    OTLP: invoke_agent → AGENT, chat → GENERATION, execute_tool → TOOL (named after
    gen_ai.tool.name); input/output the gen_ai.*.messages; the root's also the trace's."""
    question, args, result, answer = AF_CASES[i]
    trace = f"4bf92f3577b34da6a3ce929d0e0e47{i:02d}"
    ids = af_ids(i)
    times = AF_TIMES[shape]
    user, first_out, second_in, second_out = af_messages(i)
    meta = {k: v for k, v in af_attrs(i, "answer").items()
            if not k.startswith("gen_ai.input") and not k.startswith("gen_ai.output")}

    def md(attrs: dict) -> dict:
        return otel_metadata(attrs, "agent_framework", "1.0.0b251007", "shop-agent")

    agent_in, agent_out = [text("user", question)], [text("assistant", answer)]
    observations = [
        lf_observation(oid=ids["agent"], trace=trace, parent=None, kind="AGENT",
                       name="invoke_agent ShopAssistant", minute=i, at=times["agent"],
                       input=agent_in, output=agent_out, as_text=as_text, metadata=md({
                           "gen_ai.operation.name": "invoke_agent",
                           "gen_ai.agent.name": "ShopAssistant",
                           "gen_ai.agent.id": "shop-assistant-7f3a"})),
        lf_observation(oid=ids["call"], trace=trace, parent=ids["agent"], kind="GENERATION",
                       name="chat gpt-4o-mini", minute=i, at=times["call"], input=user,
                       output=first_out, model="gpt-4o-mini-2024-07-18", usage=(182, 21),
                       as_text=as_text, metadata=md({
                           **meta, "gen_ai.response.finish_reasons": ["tool_calls"]})),
        lf_observation(oid=ids["tool"], trace=trace, parent=ids["agent"], kind="TOOL",
                       name="get_price", minute=i, at=times["tool"], input=args,
                       output=result, as_text=as_text, metadata=md({
                           "gen_ai.operation.name": "execute_tool",
                           "gen_ai.tool.name": "get_price", "gen_ai.tool.type": "function"})),
        lf_observation(oid=ids["answer"], trace=trace, parent=ids["agent"],
                       kind="GENERATION", name="chat gpt-4o-mini", minute=i,
                       at=times["answer"], input=second_in, output=second_out,
                       model="gpt-4o-mini-2024-07-18", usage=(236, 14), as_text=as_text,
                       metadata=md(meta)),
    ]
    record = {
        "id": trace, "projectId": PROJECT, "name": "invoke_agent ShopAssistant",
        "timestamp": iso(i, 0), "environment": "default", "tags": [], "bookmarked": False,
        "release": None, "version": None, "userId": None, "sessionId": None, "public": False,
        "input": agent_in, "output": agent_out,
        "metadata": {"resourceAttributes": md({})["resourceAttributes"],
                     "scope": md({})["scope"]},
        "createdAt": iso(i, 0), "updatedAt": iso(i, times["agent"][1]),
        "htmlPath": f"/project/{PROJECT}/traces/{trace}",
        "latency": times["agent"][1] / 1000, "totalCost": 0.0000561,
    }
    return record, observations


# BeeAI (OpenInference instrumentation) exported to Langfuse: the LLM calls' outputs are
# null; the agent's run span and the trace record hold the answer
BEE_CASES = [
    ("Which rain jacket is the lightest?",
     "The Featherlite shell is the lightest rain jacket at 180 g."),
    ("Do you sell merino socks?", "Yes, merino socks come in packs of three for 24 EUR."),
]


def beeai(i: int, *, blob: bool) -> tuple[dict, list[dict]]:
    question, answer = BEE_CASES[i]
    trace = f"beea1c0ffee0{i:04d}4d2b8e1f5a6c7d8e9f"[:32]
    minute = 10 + i
    run, it, llm1, tool, llm2 = (f"be{i:02d}{n}0a1b2c3d4e5f6"[:16] for n in "rilte")
    scope = otel_metadata({}, "openinference.instrumentation.beeai", "0.1.9", "bee-shop")
    msgs = [{"role": "system", "content": "You are a shopping assistant."},
            {"role": "user", "content": question}]

    def obs(oid, parent, kind, name, at, input, output, attrs, **kw):
        return lf_observation(oid=oid, trace=trace, parent=parent, kind=kind, name=name,
                              minute=minute, at=at, input=input, output=output,
                              metadata={**scope, "attributes": attrs}, **kw)

    observations = [
        obs(run, None, "SPAN", "RequirementAgent.run", (0, 3100), question, answer,
            {"openinference.span.kind": "AGENT"}),
        obs(it, run, "SPAN", "RequirementAgent.iteration", (2, 3050), None, None, {}),
        obs(llm1, it, "GENERATION", "OpenAIChatModel", (5, 1200), msgs, None,
            {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini"},
            model="gpt-4o-mini", usage=(310, 24)),
        obs(tool, it, "TOOL", "ProductSearchTool", (1210, 1400), {"query": question},
            {"results": 3}, {"openinference.span.kind": "TOOL"}),
        obs(llm2, it, "GENERATION", "OpenAIChatModel", (1405, 3040), msgs, None,
            {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini"},
            model="gpt-4o-mini", usage=(455, 19)),
    ]
    record = {
        "id": trace, "projectId": PROJECT, "name": "RequirementAgent.run",
        "timestamp": iso(minute, 0), "environment": "default", "tags": ["beeai"],
        "bookmarked": False, "release": None, "version": None, "userId": None,
        "sessionId": None, "public": False, "input": question, "output": answer,
        "metadata": {"resourceAttributes": scope["resourceAttributes"],
                     "scope": scope["scope"]},
        "createdAt": iso(minute, 0), "updatedAt": iso(minute, 3100),
        "htmlPath": f"/project/{PROJECT}/traces/{trace}", "latency": 3.1, "totalCost": 0.0001,
    }
    if blob:
        record, observations = blob_trace(record), [blob_observation(o) for o in observations]
    return record, observations


def blob_observation(o: dict) -> dict:
    """An observation as the blob storage export writes it: snake_case, ClickHouse times,
    input/output and metadata values as JSON texts."""
    def t(value: str | None) -> str | None:
        return value.replace("T", " ").rstrip("Z") if value else None
    return {
        "id": o["id"], "trace_id": o["traceId"], "project_id": PROJECT,
        "environment": o["environment"], "type": o["type"],
        "parent_observation_id": o["parentObservationId"], "start_time": t(o["startTime"]),
        "end_time": t(o["endTime"]), "name": o["name"],
        "metadata": {k: json.dumps(v) for k, v in o["metadata"].items()},
        "level": o["level"], "status_message": None, "version": None,
        "input": None if o["input"] is None else json.dumps(o["input"]),
        "output": None if o["output"] is None else json.dumps(o["output"]),
        "provided_model_name": o["model"], "model_parameters": None,
        "usage_details": o["usageDetails"], "cost_details": {},
        "completion_start_time": t(o["completionStartTime"]), "prompt_name": None,
        "prompt_version": None, "total_cost": None, "latency": o["latency"],
        "time_to_first_token": None, "model_id": None, "created_at": t(o["endTime"]),
        "updated_at": t(o["endTime"]), "prompt_id": None,
    }


def blob_trace(r: dict) -> dict:
    def t(value: str) -> str:
        return value.replace("T", " ").rstrip("Z")
    return {"id": r["id"], "timestamp": t(r["timestamp"]), "name": r["name"],
            "environment": r["environment"], "project_id": PROJECT,
            "metadata": {k: json.dumps(v) for k, v in r["metadata"].items()},
            "user_id": None, "session_id": None, "release": None, "version": None,
            "public": False, "bookmarked": False, "tags": r["tags"],
            "input": json.dumps(r["input"]), "output": json.dumps(r["output"]),
            "created_at": t(r["createdAt"]), "updated_at": t(r["updatedAt"])}


# --------------------------------------------------------------------------------------------
# LlamaIndex RouterQueryEngine (OpenInference), for the warnings of issue 31
# --------------------------------------------------------------------------------------------


def llama_router(i: int, route: str, q: str, a: str, *, streamed: bool = False) -> dict:
    """A RouterQueryEngine query: the selector's LLM call, then the chosen engine's (the
    vector engine, or NL-to-SQL with its own SQL LLM call) and the answer's synthesis call.
    ``streamed``: the synthesis call's output is not recorded (a streamed response)."""
    trace = f"11a7e0c3b5d94f2a8c6e{i:012d}"
    sid = iter(f"{i:02d}{n:02d}c0ffee00beef"[:16] for n in range(40))
    root, q_, sel, sel_llm = next(sid), next(sid), next(sid), next(sid)
    oi = "openinference.span.kind"

    def llm(parent, at, content, prompt, completion):
        attrs = {oi: "LLM", "llm.model_name": "gpt-4o-mini", "llm.provider": "openai",
                 "llm.token_count.prompt": prompt, "llm.token_count.completion": completion,
                 "llm.input_messages.0.message.role": "user",
                 "llm.input_messages.0.message.content": "…"}
        if content is not None:
            attrs["llm.output_messages.0.message.role"] = "assistant"
            attrs["llm.output_messages.0.message.content"] = content
        return otlp_span(trace, next(sid), parent, "OpenAI.chat", at, attrs, minute=20 + i)

    selection = {"selections": [{"index": 0 if route == "sql" else 1,
                                 "reason": "catalogue prices" if route == "sql" else "care"}]}
    spans = [
        otlp_span(trace, root, None, "RouterQueryEngine.query", (0, 2000), {
            oi: "CHAIN", "input.value": q, "output.value": a}, minute=20 + i),
        otlp_span(trace, q_, root, "RouterQueryEngine._query", (1, 1999), {oi: "CHAIN"},
                  minute=20 + i),
        otlp_span(trace, sel, q_, "LLMSingleSelector.select", (2, 300), {
            oi: "CHAIN", "output.value": json.dumps(selection)}, minute=20 + i),
        otlp_span(trace, sel_llm, sel, "OpenAI.chat", (3, 298), {
            oi: "LLM", "llm.model_name": "gpt-4o-mini", "llm.token_count.prompt": 220,
            "llm.token_count.completion": 9, "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content":
                json.dumps([{"choice": selection["selections"][0]["index"] + 1,
                             "reason": selection["selections"][0]["reason"]}])},
            minute=20 + i),
    ]
    if route == "blog":
        engine, ret, synth = next(sid), next(sid), next(sid)
        docs = {f"retrieval.documents.{n}.document.{k}": v for n, (d, s, c) in enumerate(
            [("blog-7", 0.82, "Soak raw denim inside out in cold water."),
             ("blog-2", 0.61, "Dry it flat, away from the sun.")]) for k, v in
            (("id", d), ("score", s), ("content", c))}
        spans += [
            otlp_span(trace, engine, q_, "RetrieverQueryEngine.query", (301, 1990),
                      {oi: "CHAIN"}, minute=20 + i),
            otlp_span(trace, ret, engine, "VectorIndexRetriever.retrieve", (302, 420),
                      {oi: "RETRIEVER", **docs}, minute=20 + i),
            otlp_span(trace, synth, engine, "CompactAndRefine.synthesize", (421, 1985),
                      {oi: "CHAIN", "output.value": a}, minute=20 + i),
            llm(synth, (425, 1980), None if streamed else a, 540, 12),
        ]
    else:
        sql = "SELECT name, price FROM products WHERE category = 'scarf' AND price < 30"
        meta = {"sql_query": sql, "result": [["Blue scarf", 19.99]],
                "col_keys": ["name", "price"]}
        nl, nlret = next(sid), next(sid)
        spans += [
            otlp_span(trace, nl, q_, "NLSQLTableQueryEngine._query", (301, 1990), {
                oi: "CHAIN", "output.value": json.dumps({"response": a, "metadata": meta})},
                minute=20 + i),
            otlp_span(trace, nlret, nl, "NLSQLRetriever.retrieve", (302, 900), {
                oi: "RETRIEVER", "retrieval.documents.0.document.id": "sql-node-0",
                "retrieval.documents.0.document.content": "[('Blue scarf', 19.99)]",
                "retrieval.documents.0.document.metadata": json.dumps(meta)}, minute=20 + i),
            llm(nlret, (303, 880), f"SQLQuery: {sql}\nSQLResult:", 410, 31),
            llm(nl, (905, 1985), None if streamed else a, 300, 10),
        ]
    return request("openinference.instrumentation.llama_index", "4.3.1", spans, "shop-router")


# --------------------------------------------------------------------------------------------


def write_json(name: str, value: Any) -> None:
    (HERE / name).write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n")


def write_jsonl(name: str, values: list) -> None:
    (HERE / name).write_text("".join(json.dumps(v, ensure_ascii=False) + "\n"
                                     for v in values))


def main() -> None:
    write_jsonl("genai_parts_agentframework.jsonl",
                [af_otlp(0, "overlap"), af_otlp(1, "sequential")])
    write_jsonl("genai_parts_older_forms.jsonl", old_forms())
    record, observations = af_langfuse(0, "sequential", as_text=False)
    write_json("agentframework_langfuse_trace.json", {**record, "observations": observations})
    pages = []
    for i, shape in ((1, "overlap"), (2, "sequential")):
        pages += af_langfuse(i, shape, as_text=True)[1]
    write_json("agentframework_langfuse_observations.json", {
        "data": pages, "meta": {"cursor": None}})
    record, observations = beeai(0, blob=False)
    write_json("beeai_langfuse_trace.json", {**record, "observations": observations})
    record, observations = beeai(1, blob=True)
    write_jsonl("beeai_langfuse_blob.jsonl", [record, *observations])
    write_jsonl("llamaindex_router_openinference.jsonl", [
        llama_router(0, "blog", "How do I wash raw denim?", "Soak it inside out in cold water."),
        llama_router(1, "sql", "Which scarves cost under 30?", "The Blue scarf costs 19.99."),
        llama_router(2, "sql", "Which scarf is the cheapest?", "The Blue scarf, at 19.99.",
                     streamed=True)])


if __name__ == "__main__":
    main()
