"""The request side of telemetry: one ASGI middleware, in front of `Access`, present only when
traces or metrics are on.

With traces, every HTTP request (MCP over HTTP included) gets a SERVER span that continues
the caller's trace when it sends `traceparent` (and `tracestate`; the propagators are the
SDK's, `OTEL_PROPAGATORS`). The span is the current OpenTelemetry context while the app
handles the request, and a run's spans take the context current at its first event
(`engine.telemetry.otel`): a run started by the request is its child. The MCP SDK carries the
sender's context to its tool handlers, so `/mcp` tool calls are children too.

With metrics, it counts the server-sent event responses open now (`skillyard_sse_streams`).

Only the method, route, path and status go on the span: never a query string or a header.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_EVENT_STREAM = b"text/event-stream"


class RequestTelemetry:
    def __init__(self, app: ASGIApp, *, tracer: Any = None, streams: Any = None):
        self.app = app
        self.tracer = tracer  # an OpenTelemetry Tracer, or None
        self.streams = streams  # a prometheus Gauge of open SSE responses, or None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.tracer is None:
            await self._counted(scope, receive, send)
            return
        from opentelemetry import context, propagate, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        parent = propagate.extract(headers)
        method = scope.get("method", "GET")
        span = self.tracer.start_span(method, context=parent, kind=SpanKind.SERVER, attributes={
            "http.request.method": method, "url.path": scope.get("path", ""), "url.scheme": scope.get("scheme", "http")})
        token = context.attach(trace.set_span_in_context(span, parent))
        status: list[int] = []

        async def traced_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            await self._counted(scope, receive, traced_send)
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))  # the type only: a message may quote input
            raise
        finally:
            context.detach(token)
            _finish(span, scope, method, status[0] if status else None)

    async def _counted(self, scope: Scope, receive: Receive, send: Send) -> None:
        streams = self.streams
        if streams is None:
            await self.app(scope, receive, send)
            return
        counted = False

        async def counting_send(message: Message) -> None:
            nonlocal counted
            if message["type"] == "http.response.start" and _is_event_stream(message):
                counted = True
                streams.inc()
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            if counted:
                streams.dec()


def _is_event_stream(message: Message) -> bool:
    return any(k == b"content-type" and v.startswith(_EVENT_STREAM) for k, v in message.get("headers", ()))


def _finish(span: Any, scope: Scope, method: str, status: int | None) -> None:
    from opentelemetry.trace import Status, StatusCode

    route = getattr(scope.get("route"), "path", None)
    if route:
        span.set_attribute("http.route", route)
        span.update_name(f"{method} {route}")
    if status is not None:
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR, str(status)))
    span.end()
