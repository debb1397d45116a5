"""Traces end to end: a real `skillyard serve` exports over OTLP/HTTP to a small OTLP receiver
on loopback that decodes the protobuf; the client's `traceparent` is continued over HTTP and
over MCP; a password planted in the arguments reaches no exported span."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import threading
from typing import Any, Iterator

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
import httpx  # noqa: E402

from server_helpers import running_server  # noqa: E402
from telemetry_support import PASSWORD, write_telemetry_project  # noqa: E402

pytestmark = pytest.mark.slow  # every test here starts a process or a server

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
MCP_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


class OtlpReceiver:
    """POST /v1/traces: keeps every decoded span, and every raw body (to grep for secrets)."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.bodies: list[bytes] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.take(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self, path: str, body: bytes) -> None:
        assert path == "/v1/traces"
        self.bodies.append(body)
        request = trace_service.ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append({
                        "service": service, "name": span.name, "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(), "parent": span.parent_span_id.hex(),
                        "status": span.status.code, "status_message": span.status.message,
                        "attributes": {a.key: _value(a.value) for a in span.attributes},
                    })


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    yield receiver
    receiver.server.shutdown()


@pytest.fixture(scope="module")
def exported(receiver: OtlpReceiver, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Calls made against a real server; the spans it exported by the time it stopped."""
    root = write_telemetry_project(tmp_path_factory.mktemp("otlp"), f"""
        telemetry:
          traces: true
          endpoint: {receiver.url}
          service_name: yard-under-test
        """)
    traceparent = {"traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"}
    with running_server(root, keys=None, extra=("--no-store",)) as server:
        ok = httpx.post(f"{server.url}/v1/tools/report3/call", json={"text": "one two three"}, headers=traceparent, timeout=30)
        assert ok.status_code == 200, ok.text
        failed = httpx.post(f"{server.url}/v1/tools/login/call", json={"user": "bob", "password": PASSWORD}, timeout=30)
        assert failed.status_code >= 400
        with httpx.stream("POST", f"{server.url}/v1/tools/report3/call", json={"text": "streamed"},
                          headers={**traceparent, "Accept": "text/event-stream"}, timeout=30) as sse:
            assert "tool_call_result" in sse.read().decode()
        _call_over_mcp(server.url)
    assert receiver.spans, "the server exported nothing by the time it stopped"
    return receiver.spans


def _call_over_mcp(url: str) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    async def main() -> None:
        headers = {"traceparent": f"00-{MCP_TRACE_ID}-{CALLER_SPAN}-01"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                result = await client.call_tool("report3", {"text": "over mcp"})
                assert result.is_error is False

    asyncio.run(asyncio.wait_for(main(), 60))


def test_an_http_call_continues_the_callers_trace(exported: list[dict[str, Any]]) -> None:
    in_trace = [s for s in exported if s["trace_id"] == TRACE_ID]
    requests = [s for s in in_trace if s["parent"] == CALLER_SPAN]
    assert len(requests) == 2  # the JSON call and the SSE call, each a child of the caller's span
    for request in requests:
        assert request["name"] == "POST /v1/tools/{name}/call" and request["service"] == "yard-under-test"
        assert request["attributes"]["http.response.status_code"] == 200
        tool = next(s for s in in_trace if s["parent"] == request["span_id"])
        assert tool["name"] == "execute_tool report3" and tool["attributes"]["skillyard.run_id"].startswith("run_")
        workflow = next(s for s in in_trace if s["parent"] == tool["span_id"])
        steps = [s for s in in_trace if s["parent"] == workflow["span_id"]]
        assert workflow["name"] == "workflow report3" and [s["name"] for s in steps] == ["step count", "step summarize", "step wrap"]
        chat = [s for s in in_trace if s["name"] == "chat mock" and s["attributes"]["skillyard.run_id"] == tool["attributes"]["skillyard.run_id"]]
        assert len(chat) == 1 and chat[0]["attributes"]["gen_ai.usage.input_tokens"] > 0


def test_an_mcp_call_over_http_continues_the_callers_trace(exported: list[dict[str, Any]]) -> None:
    in_trace = [s for s in exported if s["trace_id"] == MCP_TRACE_ID]
    tool = next(s for s in in_trace if s["name"] == "execute_tool report3")
    request = next(s for s in in_trace if s["span_id"] == tool["parent"])
    assert request["name"].startswith("POST") and request["parent"] == CALLER_SPAN


def test_an_error_is_exported_with_its_code_and_the_password_is_in_no_span(
        exported: list[dict[str, Any]], receiver: OtlpReceiver) -> None:
    tool = next(s for s in exported if s["name"] == "execute_tool login")
    assert tool["status"] == 2 and tool["status_message"] == "execution_error"  # STATUS_CODE_ERROR
    assert tool["attributes"]["error.type"] == "execution_error"
    assert tool["trace_id"] != TRACE_ID  # no traceparent: a trace of its own
    for body in receiver.bodies:
        assert PASSWORD.encode() not in body and b"hunter2" not in body
