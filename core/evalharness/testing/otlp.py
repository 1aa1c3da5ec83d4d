"""OTLP JSON as the OpenTelemetry Collector's file exporter writes it, from SDK spans: for the
shop's instrumented assistant (scenarios/shop/traced.py) and the trace readers' fixtures
(tests/data/traces/otel/make_fixtures.py). Needs ``opentelemetry-sdk`` and
``opentelemetry-exporter-otlp-proto-common`` (dev dependencies)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

SPAN_KINDS = ["SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
              "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"]
STATUS_CODES = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"]


def collector_json(node: Any) -> Any:
    """The protobuf JSON mapping (base64 ids, enum names) turned into what the Collector's
    file exporter writes: hex ids and enum numbers.

    >>> collector_json({"spanId": "AAAAAAAAAAE=", "kind": "SPAN_KIND_CLIENT",
    ...                 "status": {"code": "STATUS_CODE_ERROR"}})
    {'spanId': '0000000000000001', 'kind': 3, 'status': {'code': 2}}
    """
    if isinstance(node, list):
        return [collector_json(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("traceId", "spanId", "parentSpanId"):
            value = base64.b64decode(value).hex()
        elif key == "kind" and isinstance(value, str):
            value = SPAN_KINDS.index(value)
        elif key == "code" and isinstance(value, str):
            value = STATUS_CODES.index(value)
        else:
            value = collector_json(value)
        out[key] = value
    return out


def collector_line(spans: Sequence[Any]) -> str:
    """One export request of ``spans`` (SDK ``ReadableSpan``s) as one line of OTLP JSON."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return json.dumps(collector_json(MessageToDict(encode_spans(spans))),
                      separators=(",", ":"))
