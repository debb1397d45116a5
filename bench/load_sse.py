"""Load test of the HTTP/SSE service: many concurrent streamed tool calls on loopback.

    python bench/load_sse.py [--concurrency 200] [--total 1000] [--mode burst|sustained]
                             [--tool analyzeJobAndGeneratePlan] [--time-limit 120] [--no-store] [--url http://127.0.0.1:PORT] [--json FILE]

Starts `skillyard serve` on a free loopback port (a copy of the repo's default project, mock
model, run store on) unless `--url` points at a running one, then starts `--concurrency` SSE
calls at once, wave after wave (`--mode sustained`: keeps that many in flight), until
`--total` have finished (or `--time-limit` seconds pass), and reports
throughput, p50/p90/p99 time to first event and to the result, and every error. Only
127.0.0.1 is ever contacted; the counts and time are bounded and it stops by itself.

The client speaks HTTP/1.1 over raw asyncio streams (with chunked decoding) so that it costs
far less CPU than the server it measures: both share this machine's cores. Like a client's
connection pool it opens its connections before timing starts and keeps them alive; each
time runs from the moment a request is written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .servers import copy_shipped_project

ARGUMENTS = {
    "analyzeJobAndGeneratePlan": {"jdText": "Senior Python engineer: FastAPI, PostgreSQL, asyncio, CI/CD, Kubernetes. "
                                            "You will own our event streaming platform.",
                                  "candidateProfile": "Five years of Django and Celery."},
    "textReport": {"text": "The quick brown fox jumps over the lazy dog. " * 20, "topN": 5},
}


@dataclass
class Outcome:
    ok: bool
    first_event_ms: float | None = None
    result_ms: float | None = None
    events: int = 0
    error: str | None = None


@dataclass
class Totals:
    outcomes: list[Outcome] = field(default_factory=list)
    started: float = 0.0
    finished: float = 0.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Connection:
    """One keep-alive HTTP/1.1 connection, as a client's connection pool would hold it."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.close()
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def call(self, path: str, body: bytes, extra_headers: str) -> Outcome:
        """POST one SSE call; times run from the moment the request is written."""
        try:
            if self.writer is None:
                await self.open()
            assert self.reader is not None and self.writer is not None
            t0 = time.perf_counter()
            self.writer.write(
                (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nAccept: text/event-stream\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra_headers}\r\n").encode() + body
            )
            return await self._read(t0)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            self.close()
            return Outcome(False, error=f"{type(exc).__name__}: {exc}")

    async def _read(self, t0: float) -> Outcome:
        reader = self.reader
        assert reader is not None
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        lower = head.lower()
        if b"transfer-encoding: chunked" not in lower:
            length = int(lower.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0]) if b"content-length: " in lower else 0
            await reader.readexactly(length)
            if b"connection: close" in lower:
                self.close()
            return Outcome(False, error=f"HTTP {status}")
        outcome = Outcome(False)
        buffer = b""
        terminal = None
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            buffer += (await reader.readexactly(size + 2))[:-2]
            while b"\n\n" in buffer:
                frame, buffer = buffer.split(b"\n\n", 1)
                if not frame.startswith(b"id:"):
                    continue  # keep-alive comment
                outcome.events += 1
                now = (time.perf_counter() - t0) * 1000
                if outcome.first_event_ms is None:
                    outcome.first_event_ms = now
                kind = frame.split(b"\n", 2)[1].removeprefix(b"event: ")
                if kind in (b"tool_call_result", b"tool_call_error"):
                    terminal = kind
                    outcome.result_ms = now
        if status != 200:
            outcome.error = f"HTTP {status}"
        elif terminal is None:
            outcome.error = "stream ended without a result"
        elif terminal == b"tool_call_error":
            outcome.error = "tool_call_error"
        else:
            outcome.ok = True
        return outcome


async def drive(url: str, tool: str, concurrency: int, total: int, time_limit: float, key: str | None,
                mode: str = "burst") -> Totals:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("this load test only targets loopback addresses")
    body = json.dumps(ARGUMENTS.get(tool, {})).encode()
    extra = f"Authorization: Bearer {key}\r\n" if key else ""
    path = f"/v1/tools/{tool}/call"
    connections = [Connection(host, port) for _ in range(concurrency)]
    for start in range(0, concurrency, 50):  # connect first (a pool is warm in steady use), 50 at a time
        await asyncio.gather(*(c.open() for c in connections[start:start + 50]))
    for connection in connections[:5]:  # warm up: caches, the first store write
        await connection.call(path, body, extra)
    totals = Totals()
    remaining = total
    deadline = time.perf_counter() + time_limit

    async def worker(connection: Connection) -> None:
        nonlocal remaining
        while remaining > 0 and time.perf_counter() < deadline:
            remaining -= 1
            totals.outcomes.append(await connection.call(path, body, extra))

    totals.started = time.perf_counter()
    if mode == "sustained":  # a closed loop: `concurrency` calls always in flight
        await asyncio.gather(*(worker(c) for c in connections))
    else:  # waves: `concurrency` calls start together; the next wave starts when all have finished
        while remaining > 0 and time.perf_counter() < deadline:
            wave = min(concurrency, remaining)
            remaining -= wave
            totals.outcomes += await asyncio.gather(*(c.call(path, body, extra) for c in connections[:wave]))
    totals.finished = time.perf_counter()
    for connection in connections:
        connection.close()
    return totals


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def report(totals: Totals, concurrency: int, tool: str, mode: str = "burst") -> dict[str, Any]:
    outcomes = totals.outcomes
    ok = [o for o in outcomes if o.ok]
    first = [o.first_event_ms for o in outcomes if o.first_event_ms is not None]
    result = [o.result_ms for o in outcomes if o.result_ms is not None]
    errors: dict[str, int] = {}
    for o in outcomes:
        if o.error:
            errors[o.error] = errors.get(o.error, 0) + 1
    elapsed = totals.finished - totals.started
    summary = {
        "tool": tool,
        "mode": mode,
        "concurrency": concurrency,
        "calls": len(outcomes),
        "ok": len(ok),
        "errors": sum(errors.values()),
        "error_kinds": errors,
        "seconds": round(elapsed, 2),
        "throughput_calls_per_s": round(len(outcomes) / elapsed, 1) if elapsed else None,
        "events_per_call": round(statistics.mean(o.events for o in ok), 1) if ok else None,
        "first_event_ms": {f"p{p}": round(percentile(first, p), 1) for p in (50, 90, 99)},
        "result_ms": {f"p{p}": round(percentile(result, p), 1) for p in (50, 90, 99)},
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    return summary


def start_server(port: int, store: bool) -> tuple[subprocess.Popen[bytes], Path]:
    root = copy_shipped_project("skillyard-load-")
    env = {k: v for k, v in os.environ.items() if k != "SKILLYARD_API_KEYS"}
    command = [sys.executable, "-m", "engine.cli.serve", "serve", "--dir", str(root), "--port", str(port)]
    if not store:
        command.append("--no-store")
    process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited: {process.stderr.read().decode() if process.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, root
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the server did not start within 60 s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=200, help="calls in flight at once (default 200)")
    parser.add_argument("--total", type=int, default=1000, help="calls to make in all (default 1000)")
    parser.add_argument("--tool", default="analyzeJobAndGeneratePlan", help="tool of the default project to call")
    parser.add_argument("--mode", choices=("burst", "sustained"), default="burst",
                        help="burst: waves of --concurrency calls started together (default); "
                             "sustained: --concurrency calls always in flight")
    parser.add_argument("--time-limit", type=float, default=120.0, help="stop starting calls after this many seconds")
    parser.add_argument("--url", help="a running server on loopback (default: start one)")
    parser.add_argument("--key", default=os.environ.get("SKILLYARD_LOAD_KEY"), help="API key, if the server needs one")
    parser.add_argument("--no-store", action="store_true", help="start the server without the run store")
    parser.add_argument("--json", help="also write the summary to this file")
    ns = parser.parse_args(argv)
    if not (1 <= ns.concurrency <= 1000 and 1 <= ns.total <= 100_000 and 0 < ns.time_limit <= 600):
        parser.error("keep it bounded: concurrency 1..1000, total 1..100000, time limit ≤ 600 s")
    process = root = None
    url = ns.url
    if url is None:
        port = free_port()
        process, root = start_server(port, store=not ns.no_store)
        url = f"http://127.0.0.1:{port}"
    try:
        totals = asyncio.run(drive(url, ns.tool, ns.concurrency, ns.total, ns.time_limit, ns.key, ns.mode))
    finally:
        if process is not None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
    summary = report(totals, ns.concurrency, ns.tool, ns.mode)
    print(f"{summary['calls']} SSE calls of {summary['tool']}, {summary['mode']}: {summary['concurrency']} at once, "
          f"{summary['seconds']} s → {summary['throughput_calls_per_s']} calls/s "
          f"({summary['events_per_call']} events each)")
    print(f"  time to first event: p50 {summary['first_event_ms']['p50']} ms · p90 {summary['first_event_ms']['p90']} ms · "
          f"p99 {summary['first_event_ms']['p99']} ms")
    print(f"  time to result:      p50 {summary['result_ms']['p50']} ms · p90 {summary['result_ms']['p90']} ms · "
          f"p99 {summary['result_ms']['p99']} ms")
    print(f"  errors: {summary['errors']} {summary['error_kinds'] or ''}   "
          f"(machine: {summary['cpus']} cpus, load average {summary['load_average_1m']})")
    if ns.json:
        Path(ns.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if summary["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
