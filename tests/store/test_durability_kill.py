"""An answered run survives `kill -9` of its process (issue 30 §1), on both stores.

200 connections call a tool at once (JSON and SSE answers) on a real `skillyard serve`; right
after an answer arrives, the server is killed with SIGKILL. Every call answered 200 before the
kill must then be in the store, finished, with all its events, gap-free: with SQLite read
through a server started again on the same file, with PostgreSQL through a second replica on
the same database. The writer commits every 50 ms; before answers waited for their commit
(`store.durability: committed`), the runs answered in the last tens of ms were lost.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402

from server_helpers import CALLER_KEY, KEYS_ENV, ServerProcess, parse_sse, write_project  # noqa: E402

pytestmark = pytest.mark.slow  # servers are started and killed

CALLER = {"Authorization": f"Bearer {CALLER_KEY}"}
CONNECTIONS = 200
LOAD_S = 2.0  # calls go on this long; then the next answer to arrive kills the server


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response: status, headers (lower-case names), body (Content-Length or chunked)."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split()[1])
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in head[1:] if line)}
    if "content-length" in headers:
        return status, headers, await reader.readexactly(int(headers["content-length"]))
    chunks = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        chunks.append(await reader.readexactly(size + 2))
        if size == 0:
            return status, headers, b"".join(chunk[:-2] for chunk in chunks)


async def _caller(port: int, number: int, answered: dict[str, int], state: dict[str, Any]) -> None:
    """Call `echo` on one keep-alive connection until the server is gone; each call answered 200
    goes into `answered` (run id → how many SSE frames its answer carried, 0 for JSON). A raw
    client (not httpx): under 200 connections it reads an answer within a few ms of its arrival,
    so the kill comes right after the server answered, not after the client caught up."""
    sse = number % 2 == 1
    body = json.dumps({"name": f"c{number}"}).encode()
    request = (f"POST /v1/tools/echo/call HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {CALLER_KEY}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
               + ("Accept: text/event-stream\r\n" if sse else "") + "\r\n").encode() + body
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    try:
        while not state["killed"]:
            writer.write(request)
            status, headers, content = await _read_answer(reader)
            if status != 200:
                continue
            if sse:
                frames = parse_sse(content.decode())
                if not frames or frames[-1]["event"] != "tool_call_result":
                    continue
                answered[headers["x-run-id"]] = len(frames)
            else:
                answered[json.loads(content)["run_id"]] = 0
            if not state["killed"] and time.monotonic() >= state["until"]:
                state["killed"] = True
                os.kill(state["pid"], signal.SIGKILL)  # right after an answer
    except (OSError, asyncio.IncompleteReadError, ValueError):
        return  # the server was killed
    finally:
        writer.close()


def load_then_kill(server: ServerProcess) -> dict[str, int]:
    """200 connections of calls, then SIGKILL right after an answer; the calls answered 200."""
    answered: dict[str, int] = {}
    state: dict[str, Any] = {"killed": False, "pid": server.process.pid, "until": 0.0}

    async def main() -> None:
        state["until"] = time.monotonic() + LOAD_S
        await asyncio.gather(*(_caller(server.port, n, answered, state) for n in range(CONNECTIONS)))

    asyncio.run(main())
    server.process.wait(timeout=10)
    assert server.process.returncode == -signal.SIGKILL
    server.stop()
    assert len(answered) >= 100, f"only {len(answered)} calls answered before the kill"
    return answered


def assert_all_recorded(server: ServerProcess, answered: dict[str, int], killed: ServerProcess) -> None:
    """Every answered run, read from the store through `server`: finished ok, seq 1…n, its end last."""
    lost: list[str] = []

    async def check(client: httpx.AsyncClient, run_id: str, frames: int, gate: asyncio.Semaphore) -> None:
        async with gate:
            run = await client.get(f"/v1/runs/{run_id}", headers=CALLER)
            events = await client.get(f"/v1/runs/{run_id}/events", headers={**CALLER, "Accept": "application/json"})
        if run.status_code != 200 or events.status_code != 200:
            lost.append(f"{run_id}: {run.status_code} {run.text[:120]}")
            return
        seqs = [event["seq"] for event in events.json()]
        whole = seqs == list(range(1, len(seqs) + 1)) and events.json()[-1]["type"] == "tool_call_result"
        if run.json()["status"] != "ok" or not whole or (frames and len(seqs) != frames):
            lost.append(f"{run_id}: status {run.json()['status']}, seqs {seqs}, answer had {frames} frames")

    async def main() -> None:
        gate = asyncio.Semaphore(20)
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            await asyncio.gather(*(check(client, run_id, frames, gate) for run_id, frames in answered.items()))

    asyncio.run(main())
    assert not lost, (f"{len(lost)} of {len(answered)} answered runs are not (wholly) in the store: {lost[:5]}; "
                      f"the killed server's log ends: {killed.log.read_text()[-2000:]}")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path)


def test_sqlite_every_answered_run_survives_kill_9(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILLYARD_STORE_URL", raising=False)
    killed = ServerProcess(project, keys=KEYS_ENV)
    answered = load_then_kill(killed)
    with_restart = ServerProcess(project, keys=KEYS_ENV)  # the same file, opened again
    try:
        assert_all_recorded(with_restart, answered, killed)
    finally:
        with_restart.stop()


def test_postgres_every_answered_run_is_on_the_other_replica_after_kill_9(
        project: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLYARD_STORE_URL", pg_url)
    b = ServerProcess(project, keys=KEYS_ENV)
    try:
        killed = ServerProcess(project, keys=KEYS_ENV)
        answered = load_then_kill(killed)
        assert_all_recorded(b, answered, killed)
    finally:
        b.stop()
