"""Real HTTP servers on 127.0.0.1 that speak the OpenAI and Anthropic streaming wire formats.

Each server is scripted: tests queue `Reply` values (a streamed SSE body, an error status, a
body that breaks off mid-stream, a delayed answer) and read back what the server received
in `server.requests`. The servers are stdlib `http.server` in a thread, HTTP/1.1 with
chunked bodies, so a dropped connection is a real incomplete body on the wire.

`OpenAIWire` and `AnthropicWire` build replies and read recorded requests in each format, so
one agent test runs against both servers.
"""

from __future__ import annotations

import json
import socket
import textwrap
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import pytest


@dataclass
class Reply:
    """One scripted HTTP response."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    events: list[bytes] | None = None  # an SSE body: each piece is written and flushed as its own chunk
    body: bytes | None = None  # a plain body (error JSON)
    delay: float = 0.0  # seconds before the status line
    gap: float = 0.0  # seconds between SSE pieces
    drop_after: int | None = None  # close the socket after this many pieces: an incomplete body


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    """A scripted HTTP server on 127.0.0.1:<free port>. Use as a context manager."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None

    # ── control ──
    def __enter__(self) -> "FakeServer":
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = _QuietServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self.replies.clear()
            self.requests.clear()

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if self.replies:
                return self.replies.popleft()
        message = f"fake server: no scripted reply for request {len(self.requests)}"
        return Reply(400, body=json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": message}}).encode())


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (a cancelled run, a timed-out read) are expected here."""
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError, OSError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # idle keep-alive connections end on their own
    fake: FakeServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle stalls between SSE pieces

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        reply = self.fake._next(Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        if reply.delay and self.fake._stop.wait(reply.delay):
            return
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.events is None:
            payload = reply.body or b""
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for count, piece in enumerate(reply.events):
            if reply.drop_after is not None and count >= reply.drop_after:
                self._drop()
                return
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            if reply.gap and self.fake._stop.wait(reply.gap):
                return
        if reply.drop_after is not None:
            self._drop()
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def split(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if not size:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


Call = tuple[str, str, str]  # (id, name, raw JSON arguments)


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                429: "rate_limit_error", 529: "overloaded_error"}


def error_body(message: str, status: int = 500) -> bytes:
    """The error JSON both APIs use: {"type": "error", "error": {"type", "message"}}."""
    kind = _ERROR_TYPES.get(status, "api_error")
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


# ─── OpenAI chat completions ─────────────────────────────────────────────────────────────


class OpenAIWire:
    name = "openai"

    def model_entry(self, url: str, **extra: Any) -> dict[str, Any]:
        entry = {"provider": "openai", "model": "fake-gpt", "base_url": f"{url}/v1", "api_key": "sk-test", "timeout": "5s"}
        entry.update(extra)
        return entry

    @staticmethod
    def _chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: tuple[int, int] | None = None) -> bytes:
        chunk: dict[str, Any] = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake-gpt",
                                 "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage is not None:
            chunk["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    def events(self, text: str = "", calls: Sequence[Call] = (), *, split_at: int | None = None,
               usage: tuple[int, int] = (10, 5), interleave: bool = False) -> list[bytes]:
        out = [self._chunk({"role": "assistant", "content": ""})]
        out += [self._chunk({"content": piece}) for piece in split(text, split_at)]
        starts = [self._chunk({"tool_calls": [{"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}]})
                  for i, (cid, name, _) in enumerate(calls)]
        parts = [[self._chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in split(args, split_at)]
                 for i, (_, _, args) in enumerate(calls)]
        if interleave:  # all calls open, then their argument pieces round-robin
            out += starts
            for row in range(max((len(p) for p in parts), default=0)):
                out += [p[row] for p in parts if row < len(p)]
        else:
            for start, pieces in zip(starts, parts, strict=True):
                out += [start, *pieces]
        out.append(self._chunk({}, "tool_calls" if calls else "stop"))
        out.append(self._chunk(None, usage=usage))
        out.append(b"data: [DONE]\n\n")
        return out

    def reply(self, text: str = "", calls: Sequence[Call] = (), **options: Any) -> Reply:
        stream = {k: options.pop(k) for k in ("split_at", "usage", "interleave") if k in options}
        return Reply(events=self.events(text, calls, **stream), **options)

    def status(self, code: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        return Reply(code, headers=headers or {}, body=error_body(message, code))

    # reading recorded requests
    def tool_results(self, body: dict[str, Any]) -> dict[str, str]:
        """tool_call_id → content of every tool result in the request."""
        return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [t["function"]["name"] for t in body.get("tools", [])]

    def tool_choice(self, body: dict[str, Any]) -> Any:
        return body.get("tool_choice")

    def expected_choice(self, choice: str) -> Any:
        return choice if choice in ("auto", "none", "required") else {"type": "function", "function": {"name": choice}}

    def last_assistant_calls(self, body: dict[str, Any]) -> list[str]:
        assistant = [m for m in body["messages"] if m["role"] == "assistant"]
        return [c["id"] for c in assistant[-1].get("tool_calls") or []] if assistant else []


# ─── Anthropic messages ──────────────────────────────────────────────────────────────────


class AnthropicWire:
    name = "anthropic"

    def model_entry(self, url: str, **extra: Any) -> dict[str, Any]:
        entry = {"provider": "anthropic", "model": "fake-claude", "base_url": url, "api_key": "sk-ant-test", "timeout": "5s",
                 "max_tokens": 1024}
        entry.update(extra)
        return entry

    @staticmethod
    def _event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    def events(self, text: str = "", calls: Sequence[Call] = (), *, split_at: int | None = None,
               usage: tuple[int, int] = (10, 5), interleave: bool = False, stop_reason: str | None = None) -> list[bytes]:
        e = self._event
        out = [
            e("message_start", {"message": {"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake-claude",
                                            "content": [], "stop_reason": None, "stop_sequence": None,
                                            "usage": {"input_tokens": usage[0], "output_tokens": 1}}}),
            e("ping", {}),
        ]
        index = 0
        if text:
            out.append(e("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}))
            out += [e("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": p}}) for p in split(text, split_at)]
            out.append(e("content_block_stop", {"index": 0}))
            index = 1
        blocks = []
        for offset, (cid, name, args) in enumerate(calls):
            i = index + offset
            blocks.append((
                e("content_block_start", {"index": i, "content_block": {"type": "tool_use", "id": cid, "name": name, "input": {}}}),
                [e("content_block_delta", {"index": i, "delta": {"type": "input_json_delta", "partial_json": p}})
                 for p in split(args, split_at)],
                e("content_block_stop", {"index": i}),
            ))
        if interleave:
            out += [start for start, _, _ in blocks]
            for row in range(max((len(p) for _, p, _ in blocks), default=0)):
                out += [p[row] for _, p, _ in blocks if row < len(p)]
            out += [stop for _, _, stop in blocks]
        else:
            for start, pieces, stop in blocks:
                out += [start, *pieces, stop]
        out.append(e("message_delta", {"delta": {"stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
                                                 "stop_sequence": None}, "usage": {"output_tokens": usage[1]}}))
        out.append(e("message_stop", {}))
        return out

    def reply(self, text: str = "", calls: Sequence[Call] = (), **options: Any) -> Reply:
        stream = {k: options.pop(k) for k in ("split_at", "usage", "interleave", "stop_reason") if k in options}
        return Reply(events=self.events(text, calls, **stream), **options)

    def status(self, code: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        return Reply(code, headers=headers or {}, body=error_body(message, code))

    def tool_results(self, body: dict[str, Any]) -> dict[str, str]:
        out = {}
        for message in body["messages"]:
            if message["role"] == "user" and isinstance(message["content"], list):
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        out[block["tool_use_id"]] = block["content"]
        return out

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [t["name"] for t in body.get("tools", [])]

    def tool_choice(self, body: dict[str, Any]) -> Any:
        return body.get("tool_choice")

    def expected_choice(self, choice: str) -> Any:
        return {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}.get(
            choice, {"type": "tool", "name": choice})

    def last_assistant_calls(self, body: dict[str, Any]) -> list[str]:
        assistant = [m for m in body["messages"] if m["role"] == "assistant"]
        if not assistant or isinstance(assistant[-1]["content"], str):
            return []
        return [b["id"] for b in assistant[-1]["content"] if b["type"] == "tool_use"]


WIRES = {"openai": OpenAIWire(), "anthropic": AnthropicWire()}


# ─── a small project whose tools are python skills ──────────────────────────────────────

SKILLS_MODULE = "agent_wire_skills"

_SKILLS_PY = '''
"""Python skills of the agent wire tests."""
import asyncio
import time

CALLS = []  # (tool input, start, end) of every nap, to prove concurrency


def echo(input):
    return dict(input)


async def nap(input, ctx):
    start = time.perf_counter()
    ctx.progress("napping", seconds=input["seconds"])
    await asyncio.sleep(input["seconds"])
    CALLS.append((dict(input), start, time.perf_counter()))
    return {"slept": input["seconds"], "label": input.get("label")}


def send(input):
    return {"sent": input["to"]}
'''

_TOOLS_YAML = """
tools:
  echo:
    description: Echo the arguments back.
    parameters:
      type: object
      properties:
        name: {type: string, minLength: 1, description: Who to greet}
        count: {type: integer, minimum: 1, default: 1}
      required: [name]
      additionalProperties: false
    workflow: echo
  nap:
    description: Sleep for a while, then say so.
    parameters:
      type: object
      properties:
        seconds: {type: number, minimum: 0}
        label: {type: string}
      required: [seconds]
    workflow: nap
  sendEmail:
    description: Send an email (asks the user first).
    confirm: true
    parameters:
      type: object
      properties: {to: {type: string}}
      required: [to]
    workflow: send
  deleteRecord:
    description: Delete a record (asks the user first).
    confirm: true
    parameters:
      type: object
      properties: {to: {type: string}}
      required: [to]
    workflow: send
"""

_SKILLS_YAML = f"""
skills:
  echo: {{kind: python, function: "{SKILLS_MODULE}:echo"}}
  nap:
    kind: python
    function: "{SKILLS_MODULE}:nap"
    input:
      type: object
      properties: {{seconds: {{type: number}}, label: {{type: string}}}}
      required: [seconds]
  send:
    kind: python
    function: "{SKILLS_MODULE}:send"
    input: {{type: object, properties: {{to: {{type: string}}}}, required: [to]}}
"""

_WORKFLOWS_YAML = """
workflows:
  echo:
    steps:
      - {id: echo, skill: echo, input: $toolArgs}
  nap:
    steps:
      - {id: nap, skill: nap, input: $toolArgs}
  send:
    steps:
      - {id: send, skill: send, input: {to: $toolArgs.to}}
"""


def write_project(root: Path, models: dict[str, dict[str, Any]], default: str | None = None) -> Path:
    """A project with tools echo, nap, sendEmail and deleteRecord, and the given models."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{SKILLS_MODULE}.py").write_text(textwrap.dedent(_SKILLS_PY))
    (root / "tools.yaml").write_text(_TOOLS_YAML)
    (root / "skills.yaml").write_text(_SKILLS_YAML)
    (root / "workflows.yaml").write_text(_WORKFLOWS_YAML)
    (root / "config").mkdir(exist_ok=True)
    write_models(root, models, default)
    return root


def write_models(root: Path, models: dict[str, dict[str, Any]], default: str | None = None) -> None:
    document = {"default": default or next(iter(models)), "models": models}
    (root / "config" / "models.yaml").write_text(json.dumps(document, indent=2))  # JSON is YAML


def call(call_id: str, name: str, arguments: dict[str, Any] | str) -> Call:
    return (call_id, name, arguments if isinstance(arguments, str) else json.dumps(arguments))


def seq_gap_free(events: Iterable[Any]) -> bool:
    seqs = [e.seq for e in events]
    return seqs == list(range(1, len(seqs) + 1))


# ─── shared fixtures (import them into a test module to use them) ──────────────────────


@pytest.fixture(scope="module")
def module_server() -> Iterator[FakeServer]:
    """One loopback server per test module."""
    with FakeServer() as server:
        yield server


@pytest.fixture
def server(module_server: FakeServer) -> FakeServer:
    """The module's server with its script and recorded requests cleared."""
    module_server.reset()
    return module_server
