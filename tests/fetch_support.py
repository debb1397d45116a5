"""Shared pieces of the fetch tests: real HTTP servers on loopback, a fake run, a project maker.

No tests live here; the test_fetch_* modules import what they need.
"""

from __future__ import annotations

import http.server
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from engine import Engine

Handler = Callable[[http.server.BaseHTTPRequestHandler], None]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class LoopbackServer:
    """A threaded HTTP server on a loopback address; routes are plain functions of the handler."""

    host: str = "127.0.0.1"
    port: int = 0
    routes: dict[str, Handler] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    ssl_context: Any = None

    def start(self) -> "LoopbackServer":
        server = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                server.seen.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                route = server.routes.get(self.path.split("?")[0])
                try:
                    if route is None:
                        send(self, 404, b"not here", "text/plain")
                    else:
                        route(self)
                except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
                    pass  # the client hung up on purpose (cap, timeout)
                self.close_connection = True

            do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _any

        class _Server(http.server.ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            daemon_threads = True
            allow_reuse_address = True

            def get_request(self) -> Any:
                conn, addr = super().get_request()
                if server.ssl_context is not None:
                    conn = server.ssl_context.wrap_socket(conn, server_side=True)
                return conn, addr

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self._server = _Server((self.host, self.port), _Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def url(self, path: str = "/", host: str | None = None) -> str:
        host = host or self.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}{path}"

    def route(self, path: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.routes[path] = handler
            return handler

        return register


def send(h: http.server.BaseHTTPRequestHandler, status: int, body: bytes, content_type: str = "text/html; charset=utf-8", **headers: str) -> None:
    h.send_response(status)
    h.send_header("Content-Type", content_type)
    h.send_header("Content-Length", str(len(body)))
    h.send_header("Connection", "close")
    for name, value in headers.items():
        h.send_header(name.replace("_", "-"), value)
    h.end_headers()
    if h.command != "HEAD":
        h.wfile.write(body)


def free_port_on(*hosts: str) -> int:
    """A port that is free on every one of `hosts` (for two servers sharing a port)."""
    for _ in range(50):
        probe = socket.socket()
        probe.bind((hosts[0], 0))
        port = probe.getsockname()[1]
        probe.close()
        try:
            for host in hosts:
                with socket.socket() as other:
                    other.bind((host, port))
            return port
        except OSError:
            continue
    raise RuntimeError("no common free port")


def serving() -> Iterator[LoopbackServer]:
    """Body of each test module's `server` fixture: a fresh server on 127.0.0.1."""
    s = LoopbackServer().start()
    try:
        yield s
    finally:
        s.stop()


class FakeRun:
    """Stands in for CallContext when a test drives an executor directly."""

    def __init__(self) -> None:
        self.progress: list[tuple[str, str, dict[str, Any]]] = []

    def tool_progress(self, stage: str, message: str, **data: Any) -> None:
        self.progress.append((stage, message, data))

    def stages(self) -> list[str]:
        return [stage for stage, _, _ in self.progress]


def fetch_project(root: Path, config: dict[str, Any], name: str = "readPage", **tool: Any) -> Engine:
    """A project whose only tool is a fetch tool with `config`."""
    spec = {"type": "fetch", "description": "Read a page.", "config": config, **tool}
    (root / "tools.yaml").write_text(yaml.safe_dump({"tools": {name: spec}}, sort_keys=False))
    return Engine.from_dir(root)


class FixedResolver:
    """Answers from a table; counts the questions. A list of answers is used one per call."""

    def __init__(self, table: dict[str, Any]):
        self.table = table
        self.calls: list[str] = []

    def __call__(self, host: str) -> list[str]:
        self.calls.append(host)
        answer = self.table.get(host)
        if answer is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if answer and isinstance(answer[0], list):  # a sequence of answers, one per lookup
            return answer[min(len(self.calls) - 1, len(answer) - 1)]
        return answer
