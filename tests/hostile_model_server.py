"""A hostile model endpoint on 127.0.0.1: answers that do not end, for the answer budgets.

It speaks the OpenAI chat-completions API (`POST …/chat/completions`) and Anthropic's Messages
API (`POST …/messages`), whatever the request asks (streamed or not), in one of these modes:

- `endless_args`: one tool call whose arguments stream without end;
- `endless_text`: text deltas without end;
- `huge_body`: a plain (not streamed) answer whose JSON body does not end;
- `slow_drip`: a few characters of text every few milliseconds, without end;
- `gzip_body`: a plain answer sent `Content-Encoding: gzip` although the request asked for
  `Accept-Encoding: identity`: 8 KiB on the wire that inflate to 8 MiB of text (a client that
  unpacks it reads far more than it was sent; the real thing inflates to gigabytes).

"Without end" is up to `limit_bytes` (64 MiB by default), then the answer closes properly: a
client with no budget takes the whole answer in (and grows by it), one with a budget hangs up
early. `server.requests` counts the requests, `server.sent` the bytes written,
`server.accept_encodings` the `Accept-Encoding` of each request.

    with HostileModelServer("endless_args") as server:
        models = {"bad": server.model_entry("openai")}
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("endless_args", "endless_text", "huge_body", "slow_drip", "gzip_body")
PIECE = "a" * 8192  # what one delta (or one write of a body) carries


class HostileModelServer:
    def __init__(self, mode: str, *, limit_bytes: int = 64 << 20, drip: str = "drip " * 4, drip_gap: float = 0.005):
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
        self.mode, self.limit_bytes, self.drip, self.drip_gap = mode, limit_bytes, drip, drip_gap
        self.requests = 0
        self.sent = 0
        self.accept_encodings: list[str | None] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    def __enter__(self) -> HostileModelServer:
        handler = type("Handler", (_Handler,), {"hostile": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def model_entry(self, provider: str, **extra: Any) -> dict[str, Any]:
        """A config/models.yaml entry for this server (`openai` or `anthropic`)."""
        base = f"{self.url}/v1" if provider == "openai" else self.url
        entry = {"provider": provider, "model": "hostile", "base_url": base, "api_key": "sk-hostile", "timeout": "5s",
                 "options": {"max_retries": 0}}
        entry.update(extra)
        return entry

    def count(self, sent: int) -> bool:
        """Note `sent` bytes written; False once the answer reached its end (`limit_bytes`)."""
        with self._lock:
            self.sent += sent
        return self.sent < self.limit_bytes and not self.stop.is_set()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (what a budget does) is the expected end of an answer."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hostile: HostileModelServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        server = self.hostile
        with server._lock:
            server.requests += 1
            server.accept_encodings.append(self.headers.get("Accept-Encoding"))
        wire = _Anthropic() if self.path.endswith("/messages") else _OpenAI()
        if server.mode == "gzip_body":
            self._gzipped(wire)
            return
        plain = server.mode == "huge_body"
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if plain else "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if plain:
                head, tail = wire.plain_parts()
                self._chunk(head)
                piece = PIECE.encode()
                while server.count(len(piece)):
                    self._chunk(piece)
                self._chunk(tail)
            else:
                for part in wire.start(server.mode):
                    self._chunk(part)
                delta = wire.delta(server.mode, server.drip if server.mode == "slow_drip" else PIECE)
                while server.count(len(delta)):
                    self._chunk(delta)
                    if server.mode == "slow_drip" and server.stop.wait(server.drip_gap):
                        break
                for part in wire.end(server.mode):
                    self._chunk(part)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the client hung up: its budget ended the answer
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _gzipped(self, wire: _OpenAI | _Anthropic) -> None:
        head, tail = wire.plain_parts()
        body = gzip.compress(head + PIECE.encode() * 1024 + tail)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
            self.hostile.count(len(body))
        except OSError:  # the client hung up on it
            self.close_connection = True


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data) + "\n\n").encode()


class _OpenAI:
    @staticmethod
    def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({"id": "x", "object": "chat.completion.chunk", "model": "hostile",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def start(self, mode: str) -> list[bytes]:
        parts = [self._chunk({"role": "assistant", "content": ""})]
        if mode == "endless_args":
            parts.append(self._chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                      "function": {"name": "echo", "arguments": '{"text": "'}}]}))
        return parts

    def delta(self, mode: str, piece: str) -> bytes:
        if mode == "endless_args":
            return self._chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        return self._chunk({"content": piece})

    def end(self, mode: str) -> list[bytes]:
        if mode == "endless_args":
            return [self._chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}, "tool_calls"),
                    b"data: [DONE]\n\n"]
        return [self._chunk({}, "stop"), b"data: [DONE]\n\n"]

    @staticmethod
    def plain_parts() -> tuple[bytes, bytes]:
        head = b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "'
        return head, b'"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}'


class _Anthropic:
    def start(self, mode: str) -> list[bytes]:
        block = ({"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}} if mode == "endless_args"
                 else {"type": "text", "text": ""})
        return [_sse({"type": "message_start", "message": {"id": "msg", "type": "message", "role": "assistant", "content": [],
                                                           "model": "hostile", "usage": {"input_tokens": 1, "output_tokens": 1}}},
                     "message_start"),
                _sse({"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start")]

    def delta(self, mode: str, piece: str) -> bytes:
        delta = ({"type": "input_json_delta", "partial_json": piece} if mode == "endless_args"
                 else {"type": "text_delta", "text": piece})
        return _sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")

    def end(self, mode: str) -> list[bytes]:
        stop = "tool_use" if mode == "endless_args" else "end_turn"
        return [_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
                _sse({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 1}}, "message_delta"),
                _sse({"type": "message_stop"}, "message_stop")]

    @staticmethod
    def plain_parts() -> tuple[bytes, bytes]:
        head = b'{"id": "msg", "type": "message", "role": "assistant", "model": "hostile", "content": [{"type": "text", "text": "'
        return head, b'"}], "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}'
