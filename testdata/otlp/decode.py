"""Decodes an OTLP/JSON trace export with the official OpenTelemetry protobuf definitions.

OTLP/JSON differs from protobuf's canonical JSON mapping in one way: trace and span ids are hex
strings, not base64 (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding). They are
converted first, as an OTLP receiver does; every other field goes through protobuf's strict
parser (unknown fields are errors). Prints a JSON summary for the Rust test to check.
"""
import base64
import json
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def hex_ids_to_base64(node):
    if isinstance(node, dict):
        for k, v in list(node.items()):
            if k in ID_FIELDS and isinstance(v, str):
                node[k] = base64.b64encode(bytes.fromhex(v)).decode() if v else ""
            else:
                hex_ids_to_base64(v)
    elif isinstance(node, list):
        for v in node:
            hex_ids_to_base64(v)


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind)


doc = json.load(open(sys.argv[1]))
hex_ids_to_base64(doc)
req = json_format.Parse(json.dumps(doc), ExportTraceServiceRequest(), ignore_unknown_fields=False)
spans = []
for rs in req.resource_spans:
    resource = {a.key: value(a.value) for a in rs.resource.attributes}
    for ss in rs.scope_spans:
        for s in ss.spans:
            assert len(s.trace_id) == 16, "trace id is 16 bytes"
            assert len(s.span_id) == 8, "span id is 8 bytes"
            assert s.parent_span_id == b"" or len(s.parent_span_id) == 8
            assert s.end_time_unix_nano >= s.start_time_unix_nano > 0
            spans.append({
                "name": s.name,
                "kind": s.kind,
                "parent": s.parent_span_id.hex(),
                "id": s.span_id.hex(),
                "trace": s.trace_id.hex(),
                "status": s.status.code,
                "attributes": {a.key: value(a.value) for a in s.attributes},
                "events": [e.name for e in s.events],
            })
print(json.dumps({"resource": resource, "scope": ss.scope.name, "spans": spans}))
