"""A streamed call on a crowded server announces itself before its tool runs (issue 13, time to
first event): its SSE answer's first chunk is the `tool_call_start` frame alone, the rest
follows with the end. On a server with few calls live it does not: a call that never waits
is answered in one body, a call that waits streams what it emitted up to its first wait.
A real `skillyard serve --no-store` on a loopback port, read through raw sockets to see the chunks."""

from __future__ import annotations

import json
import socket
import time
from typing import Iterator

import pytest

pytest.importorskip("fastapi")

from engine.server.routes.tools import ANNOUNCE_WHEN_LIVE  # noqa: E402
from server_helpers import CALLER_KEY, KEYS_ENV, ServerProcess, parse_sse, running_server, write_project  # noqa: E402

pytestmark = pytest.mark.slow  # every test here starts a process or a server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(write_project(tmp_path_factory.mktemp("announced")), keys=KEYS_ENV, extra=("--no-store",)) as process:
        yield process


def _request(tool: str, arguments: dict[str, object]) -> bytes:
    body = json.dumps(arguments).encode()
    return (f"POST /v1/tools/{tool}/call HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {CALLER_KEY}\r\n"
            f"Accept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


class ChunkReader:
    """The head and then the body chunks of one chunked HTTP/1.1 answer, as they come."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer = sock, b""

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            data = self.sock.recv(65536)
            assert data, "the server closed the connection early"
            self.buffer += data
        head, self.buffer = self.buffer.split(marker, 1)
        return head

    def head(self) -> dict[str, str]:
        lines = self._until(b"\r\n\r\n").decode().split("\r\n")
        assert lines[0].startswith("HTTP/1.1 200"), lines[0]
        return {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}

    def chunk(self) -> bytes:
        size = int(self._until(b"\r\n"), 16)
        chunk = self.exactly(size + 2)
        return chunk[:size]

    def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            data = self.sock.recv(65536)
            assert data, "the server closed the connection early"
            self.buffer += data
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data


def _open(server: ServerProcess, tool: str, arguments: dict[str, object]) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=20)
    sock.sendall(_request(tool, arguments))
    return sock


def _read_all(reader: ChunkReader) -> list[bytes]:
    chunks = []
    while chunk := reader.chunk():
        chunks.append(chunk)
    return chunks


def _check_whole(frames: list[dict[str, object]], run_id: str, name: str) -> None:
    assert [int(frame["id"]) for frame in frames] == list(range(1, len(frames) + 1))  # type: ignore[call-overload]
    assert frames[-1]["event"] == "tool_call_result" and frames[-1]["data"]["data"]["data"] == {"name": name, "count": 1}  # type: ignore[index]
    assert all(frame["data"]["run_id"] == run_id for frame in frames)  # type: ignore[index]


def test_on_an_idle_server_a_call_that_never_waits_is_one_body(server: ServerProcess) -> None:
    with _open(server, "echo", {"name": "Ada"}) as sock:
        reader = ChunkReader(sock)
        head = reader.head()
        assert "transfer-encoding" not in head and head["content-type"].startswith("text/event-stream")
        assert head["x-run-id"].startswith("run_")
        frames = parse_sse(reader.exactly(int(head["content-length"])).decode())
    assert frames[0]["event"] == "tool_call_start"
    _check_whole(frames, head["x-run-id"], "Ada")


def test_on_a_crowded_server_each_call_is_announced_then_whole(server: ServerProcess) -> None:
    """With ANNOUNCE_WHEN_LIVE slow runs live, every streamed call's first chunk is its start alone."""
    slow = [_open(server, "slow", {"seconds": 3.0}) for _ in range(ANNOUNCE_WHEN_LIVE)]
    socks: list[socket.socket] = []
    try:
        for sock in slow:  # each slow run is live once its answer has begun
            reader = ChunkReader(sock)
            reader.head()
            reader.chunk()
        socks = [_open(server, "echo", {"name": f"n{index}"}) for index in range(30)]
        for index, sock in enumerate(socks):
            reader = ChunkReader(sock)
            head = reader.head()
            assert head["transfer-encoding"] == "chunked" and "content-length" not in head
            chunks = _read_all(reader)
            assert [f["event"] for f in parse_sse(chunks[0].decode())] == ["tool_call_start"]
            _check_whole(parse_sse(b"".join(chunks).decode()), head["x-run-id"], f"n{index}")
    finally:
        for sock in slow + socks:
            sock.close()


def test_a_waiting_tool_streams_its_start_at_once_and_is_followed_live(server: ServerProcess) -> None:
    started = time.monotonic()
    with _open(server, "slow", {"seconds": 1.0}) as sock:
        reader = ChunkReader(sock)
        reader.head()
        first = reader.chunk()
        announced = time.monotonic() - started
        rest = _read_all(reader)
    events = [f["event"] for f in parse_sse(first.decode())]
    assert events[0] == "tool_call_start" and "tool_call_result" not in events
    assert announced < 0.9  # the tool sleeps 1 s
    frames = parse_sse(first.decode() + b"".join(rest).decode())
    assert frames[-1]["event"] == "tool_call_result" and len(rest) > 1  # progress arrived live, chunk by chunk
