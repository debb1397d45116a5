"""`python -m bench.service`: HTTP throughput of `skillyard serve` against an empty FastAPI app (issue 13).

    python -m bench.service [--rounds 3] [--seconds 3] [--stores none,sqlite,postgres]
                            [--client auto|wrk|python] [--ttfe-calls 1000] [--json FILE]

Every server runs in its own process pinned to core 0 (`os.sched_setaffinity`), the load to
core 1: the load never takes the server's CPU. Started and measured in the same run:

- `empty`: an empty FastAPI app that parses the JSON body and returns a dict (uvicorn with
  the same options as `skillyard serve`): the floor a Python service can reach here;
- `skillyard serve --no-store`, with the SQLite store, and with the PostgreSQL store
  (a throwaway cluster of tests/pg_cluster.py, or `--postgres URL`; skipped without initdb).

Load: `POST /v1/tools/textReport/call` on keep-alive connections, at 10 and 100 connections,
JSON answer and SSE answer (`Accept: text/event-stream`), by `wrk` (Debian's package) when it
is installed, else by the asyncio client below in its own process. Ratios are requests/s over
the empty app's in the same round (the empty app answers the SSE rounds with its JSON: its
floor does not depend on the Accept header); median and min–max over the rounds.

At once (with wrk): in each round, each server is also loaded together with the empty app, both
on the server core, each by its own wrk. The scheduler gives the two processes (two sessions)
half of the core each, so the ratio of their requests/s is the ratio of their CPU per request
(a closed loop keeps both busy), measured in the same seconds: on a shared VM, whose speed
moves by ±20 % from one measurement to the next (the empty app alone: 192–283 CPU µs a
request within one run), the one measured after the other carries that drift into its ratio;
at once, both carry the same. Four rounds of one run gave 0.59–0.61 at once where one after
the other gave 0.41–0.73. Both verdicts are printed.

Time to first event: waves of 200 SSE calls started together (as bench/load_sse.py does),
p99 of the time from writing a request to its first `id:` frame, against the empty app's p99
time to the first byte of its answer, same waves.

Only 127.0.0.1 is contacted; every process started here is stopped at the end. For a figure
the machine's load does not move, bench/request_cost.py counts the instructions of one request
through the same apps under callgrind (docs/operations.md, "Throughput").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request

from .load_sse import ARGUMENTS, free_port, percentile
from .servers import REPO, copy_shipped_project, throwaway_postgres

TOOL = "textReport"
PATH = f"/v1/tools/{TOOL}/call"
# One sentence: the tool's own work stays small (in-process the call costs tens of µs), so the
# figures are about the service around it. `--long-text` takes bench/load_sse.py's 900 characters.
BODY = json.dumps({"text": "The quick brown fox jumps over the lazy dog.", "topN": 5}).encode()
LONG_BODY = json.dumps(ARGUMENTS[TOOL]).encode()
LONG_TEXT_ENV = "SKILLYARD_BENCH_LONG_TEXT"  # set by --long-text, for the client processes too


def _body() -> bytes:
    return LONG_BODY if os.environ.get(LONG_TEXT_ENV) else BODY
SERVER_CPU, LOAD_CPU = 0, 1
CONNECTIONS = (10, 100)
WAVE = 200


def empty_app() -> Any:
    """The floor: FastAPI parsing the JSON body of the same path and returning a dict."""
    app = FastAPI()

    @app.post("/v1/tools/{name}/call")
    async def call(name: str, request: Request) -> dict[str, Any]:
        arguments = await request.json()
        return {"ok": True, "tool": name, "data": {"chars": len(arguments.get("text", ""))}}

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _serve_empty(port: int) -> None:
    import uvicorn

    uvicorn.run(empty_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False, server_header=False)


# ─── processes ──────────────────────────────────────────────────────────────────────


def _pinned(cpu: int) -> Any:
    cpus = os.sched_getaffinity(0)
    chosen = {cpu} if cpu in cpus and len(cpus) > 1 else cpus

    def pin() -> None:
        os.sched_setaffinity(0, chosen)
        os.setsid()

    return pin


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    root: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


def _project_copy(durability: str | None = None) -> Path:
    root = copy_shipped_project("skillyard-bench-service-")
    config = root / "config" / "engine.yaml"
    text = config.read_text(encoding="utf-8")
    if durability is not None:
        text = text.replace("  durability: committed", f"  durability: {durability}", 1)
    text += f"\nserver:\n  max_live_runs_per_key: {WAVE}  # a wave of {WAVE} calls, all from the one local caller\n"
    config.write_text(text, encoding="utf-8")
    return root


def start_server(name: str, store: str | None) -> Server:
    """`empty`, or `skillyard serve` with store None (`--no-store`), "sqlite" or a postgresql:// URL
    (a name ending in `-relaxed`: with `store.durability: relaxed`, answers not waiting for commits)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("SKILLYARD_API_KEYS", "SKILLYARD_STORE_URL")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    root = None
    if name == "empty":
        command = [sys.executable, "-m", "bench.service", "--serve-empty", str(port)]
    else:
        root = _project_copy("relaxed" if name.endswith("-relaxed") else None)
        command = [sys.executable, "-m", "engine.cli.serve", "serve", "--dir", str(root), "--port", str(port)]
        if store is None:
            command.append("--no-store")
        elif store.startswith("postgresql://"):
            env["SKILLYARD_STORE_URL"] = store
    process = subprocess.Popen(command, cwd=root or REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               preexec_fn=_pinned(SERVER_CPU))
    server = Server(name, port, process, root)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode() if process.stderr else ""
            server.stop()
            raise SystemExit(f"{name}: the server exited: {err[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return server
        except OSError:
            time.sleep(0.1)
    server.stop()
    raise SystemExit(f"{name}: the server did not start within 60 s")


# ─── the asyncio client (a process of its own, pinned to the load core) ─────────────


def _request(port: int, sse: bool) -> bytes:
    accept = "text/event-stream" if sse else "application/json"
    body = _body()
    return (f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {accept}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, raw: bytes) -> tuple[bool, float, float]:
    """One request on a kept-alive connection: (2xx, seconds to the first byte, to the first SSE frame or the end)."""
    t0 = time.perf_counter()
    writer.write(raw)
    head = await reader.readuntil(b"\r\n\r\n")
    ttfb = time.perf_counter() - t0
    first = None
    status = int(head.split(b" ", 2)[1])
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if first is None and b"id:" in chunk:
                first = time.perf_counter() - t0
            if size == 0:
                break
    else:
        length = int(lower.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
        await reader.readexactly(length)
    return 200 <= status < 300, ttfb, first if first is not None else time.perf_counter() - t0


async def _throughput(port: int, connections: int, seconds: float, sse: bool) -> dict[str, Any]:
    """A closed loop: `connections` keep-alive connections, each sends its next request on an answer."""
    raw = _request(port, sse)
    warm, done, errors, total = 0.3, 0, 0, 0
    start = time.perf_counter() + warm
    stop = start + seconds

    async def one() -> None:
        nonlocal done, errors, total
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < stop:
                ok, _, _ = await _exchange(reader, writer, raw)
                total += 1
                if time.perf_counter() >= start:
                    done += ok
                    errors += not ok
        finally:
            writer.close()

    await asyncio.gather(*(one() for _ in range(connections)))
    return {"rps": done / seconds, "errors": errors, "requests": total}


async def _waves(port: int, calls: int, sse: bool) -> dict[str, Any]:
    """Waves of WAVE requests written together; p99 time to first byte and to first SSE frame."""
    raw = _request(port, sse)
    pairs = [await asyncio.open_connection("127.0.0.1", port) for _ in range(WAVE)]
    for reader, writer in pairs[:5]:
        await _exchange(reader, writer, raw)
    ttfb: list[float] = []
    first: list[float] = []
    errors = 0
    for _ in range(max(1, calls // WAVE)):
        results = await asyncio.gather(*(_exchange(r, w, raw) for r, w in pairs))
        for ok, b, f in results:
            errors += not ok
            ttfb.append(b * 1000)
            first.append(f * 1000)
    for _, writer in pairs:
        writer.close()
    return {"ttfb_p99_ms": percentile(ttfb, 99), "first_event_p99_ms": percentile(first, 99),
            "ttfb_p50_ms": percentile(ttfb, 50), "first_event_p50_ms": percentile(first, 50), "errors": errors}


def _client_main(spec: str) -> None:
    args = json.loads(spec)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if args["mode"] == "waves":
        out = asyncio.run(_waves(args["port"], args["calls"], args["sse"]))
    else:
        out = asyncio.run(_throughput(args["port"], args["connections"], args["seconds"], args["sse"]))
    print(json.dumps(out))


def _python_client(**spec: Any) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "bench.service", "--client-run", json.dumps(spec)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, preexec_fn=_pinned(LOAD_CPU))
    if done.returncode != 0:
        raise SystemExit(f"the load client failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# ─── wrk ────────────────────────────────────────────────────────────────────────────

_WRK_SCRIPT = """wrk.method = "POST"
wrk.body = {body}
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "{accept}"
"""


def _wrk(port: int, connections: int, seconds: float, sse: bool, scripts: Path) -> dict[str, Any]:
    return _wrk_result(_wrk_start(port, connections, seconds, sse, scripts), seconds)


def _wrk_start(port: int, connections: int, seconds: float, sse: bool, scripts: Path) -> "subprocess.Popen[str]":
    script = scripts / f"post-{'sse' if sse else 'json'}.lua"
    if not script.exists():
        script.write_text(_WRK_SCRIPT.format(body=json.dumps(_body().decode()),
                                             accept="text/event-stream" if sse else "application/json"))
    return subprocess.Popen(["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "30s", "-s",
                             str(script), f"http://127.0.0.1:{port}{PATH}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_pinned(LOAD_CPU))


def _wrk_result(process: "subprocess.Popen[str]", seconds: float) -> dict[str, Any]:
    try:
        stdout, stderr = process.communicate(timeout=max(1, round(seconds)) + 60)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
    found = re.search(r"Requests/sec:\s*([\d.]+)", stdout)
    if process.returncode != 0 or found is None:
        raise SystemExit(f"wrk failed: {stdout[-1000:]} {stderr[-1000:]}")
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", stdout)
    errors = int(bad.group(1)) if bad else 0
    errors += sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", stdout))  # wrk's own
    total = re.search(r"(\d+) requests in", stdout)
    return {"rps": float(found.group(1)), "errors": errors, "requests": int(total.group(1)) if total else 0}


def _at_once(empty: Server, server: Server, connections: int, seconds: float, sse: bool, scripts: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The empty app and `server` loaded at the same time, each by its own wrk: both pinned to
    the server core, each a session of its own (the scheduler gives each half of the core), so
    whatever the machine does meanwhile slows both alike, and the ratio of their requests/s is
    the ratio of their CPU per request (module doc)."""
    first = _wrk_start(empty.port, connections, seconds, sse, scripts)
    second = _wrk_start(server.port, connections, seconds, sse, scripts)
    return _wrk_result(first, seconds), _wrk_result(second, seconds)


# ─── the run ────────────────────────────────────────────────────────────────────────


@dataclass
class Figures:
    rps: dict[tuple[str, int, bool], list[float]] = field(default_factory=dict)  # (server, connections, sse) → per round
    ratio: dict[tuple[str, int, bool], list[float]] = field(default_factory=dict)
    cpu_us: dict[tuple[str, int, bool], list[float]] = field(default_factory=dict)
    cpu_ratio: dict[tuple[str, int, bool], list[float]] = field(default_factory=dict)
    at_once: dict[tuple[str, int, bool], list[float]] = field(default_factory=dict)  # ratio, loaded with the empty app
    waves: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    errors: int = 0



def _stat(values: list[float], digits: int = 2) -> str:
    """median (min–max)"""
    if not values:
        return "-"
    shown = f"{{:,.{digits}f}}".format
    return shown(statistics.median(values)) + (f" ({shown(min(values))}–{shown(max(values))})" if len(values) > 1 else "")


def _warm(server: Server, client: str, scripts: Path, seconds: float) -> None:
    """Imports, caches and the store's first writes happen here, not in a measured round."""
    _measure(server, 10, min(1.0, seconds), True, client, scripts)
    _measure(server, 10, min(1.0, seconds), False, client, scripts)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, all its threads (the store's writer included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(server: Server, connections: int, seconds: float, sse: bool, client: str, scripts: Path) -> dict[str, Any]:
    """requests/s, errors, and the server's CPU µs per request (robust to other processes'
    turns on the core: on a dedicated core, requests/s ≈ 1 / CPU per request)."""
    cpu = _cpu_seconds(server.process.pid)
    if client == "wrk":
        got = _wrk(server.port, connections, seconds, sse, scripts)
    else:
        got = _python_client(mode="throughput", port=server.port, connections=connections, seconds=seconds, sse=sse)
    got["cpu_us"] = (_cpu_seconds(server.process.pid) - cpu) * 1e6 / max(1, got["requests"])
    return got


def run(ns: argparse.Namespace) -> dict[str, Any]:
    client = ns.client if ns.client != "auto" else ("wrk" if shutil.which("wrk") else "python")
    stores = [s.strip() for s in ns.stores.split(",") if s.strip()]
    pg_url, cluster = throwaway_postgres(ns.postgres, "postgres" in stores)
    servers: list[Server] = []
    figures = Figures()
    scripts = Path(tempfile.mkdtemp(prefix="skillyard-bench-wrk-"))
    try:
        servers.append(start_server("empty", None))
        for store in stores:
            if store == "none":
                servers.append(start_server("no-store", None))
            elif store in ("sqlite", "sqlite-relaxed"):
                servers.append(start_server(store, "sqlite"))
            elif store == "postgres":
                if pg_url is None:
                    print("postgres: skipped (no initdb here and no --postgres URL)", file=sys.stderr)
                    continue
                servers.append(start_server("postgres", pg_url))
            else:
                raise SystemExit(f"--stores: unknown store {store!r} (none, sqlite, sqlite-relaxed, postgres)")
        for server in servers:
            _warm(server, client, scripts, ns.seconds)
        for round_ in range(ns.rounds):
            print(f"round {round_ + 1}/{ns.rounds} (load average {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
            for connections in CONNECTIONS:
                for sse in (False, True):
                    floor = None
                    for server in servers:
                        got = _measure(server, connections, ns.seconds, sse, client, scripts)
                        figures.errors += got["errors"]
                        key = (server.name, connections, sse)
                        figures.rps.setdefault(key, []).append(got["rps"])
                        figures.cpu_us.setdefault(key, []).append(got["cpu_us"])
                        if server.name == "empty":
                            floor = got
                        elif floor:
                            figures.ratio.setdefault(key, []).append(got["rps"] / floor["rps"])
                            figures.cpu_ratio.setdefault(key, []).append(floor["cpu_us"] / got["cpu_us"])
                    if client == "wrk":  # two asyncio clients would share the load core with each other
                        for server in servers[1:]:
                            empty, this = _at_once(servers[0], server, connections, ns.seconds, sse, scripts)
                            figures.errors += empty["errors"] + this["errors"]
                            figures.at_once.setdefault((server.name, connections, sse), []).append(this["rps"] / empty["rps"])
            for server in servers:
                got = _python_client(mode="waves", port=server.port, calls=ns.ttfe_calls, sse=server.name != "empty")
                figures.errors += got["errors"]
                figures.waves.setdefault(server.name, []).append(got)
    finally:
        for server in servers:
            server.stop()
        if cluster is not None:
            cluster.destroy()
        shutil.rmtree(scripts, ignore_errors=True)
    return _report(figures, [s.name for s in servers], client, ns)


TARGETS = {"no-store": 0.6, "sqlite": 0.5, "postgres": 0.4}
TTFE_TARGET = 2.0


def _report(figures: Figures, names: list[str], client: str, ns: argparse.Namespace) -> dict[str, Any]:
    print(f"POST {PATH}: requests/s, median (min–max) of {ns.rounds} round(s) of {ns.seconds:g} s; load by {client} "
          f"on core {LOAD_CPU}, each server pinned to core {SERVER_CPU}; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"  {'server':<10}{'conns':>6}  {'answer':<6}{'requests/s':>26}{'÷ empty':>20}"
          f"{'server CPU µs/request':>28}{'empty ÷ this':>20}{'at once ÷ empty':>20}  target: ÷ empty, at once")
    out: dict[str, Any] = {"client": client, "rounds": ns.rounds, "seconds": ns.seconds, "rows": [], "ttfe": {},
                           "errors": figures.errors}
    for connections in CONNECTIONS:
        for sse in (False, True):
            for name in names:
                key = (name, connections, sse)
                ratio = figures.ratio.get(key, [])
                target = TARGETS.get(name)
                at_once = figures.at_once.get(key, [])
                verdict = "" if target is None or not ratio else f"≥ {target}  " + "  ".join(
                    ("PASS" if statistics.median(values) >= target else "MISS") for values in (ratio, at_once) if values)
                cpu_ratio = figures.cpu_ratio.get(key, [])
                print(f"  {name:<10}{connections:>6}  {'SSE' if sse else 'JSON':<6}{_stat(figures.rps[key], 0):>26}"
                      f"{_stat(ratio) if ratio else '':>20}{_stat(figures.cpu_us[key], 0):>28}"
                      f"{_stat(cpu_ratio) if cpu_ratio else '':>20}{_stat(at_once) if at_once else '':>20}  {verdict}")
                out["rows"].append({"server": name, "connections": connections, "sse": sse, "rps": figures.rps[key],
                                    "ratio": ratio, "cpu_us": figures.cpu_us[key], "cpu_ratio": cpu_ratio,
                                    "at_once": at_once})
    floor = [w["ttfb_p99_ms"] for w in figures.waves.get("empty", [])]
    print(f"Waves of {WAVE} calls at once ({ns.ttfe_calls} calls a round): p99 ms, median (min–max) of rounds")
    print(f"  empty app, time to first byte: {_stat(floor)}")
    for name in names[1:]:
        waves = figures.waves.get(name, [])
        first = [w["first_event_p99_ms"] for w in waves]
        ratios = [f / b for f, b in zip(first, floor, strict=False) if b]
        verdict = f"target ≤ {TTFE_TARGET:g}×  {'PASS' if ratios and statistics.median(ratios) <= TTFE_TARGET else 'MISS'}"
        print(f"  {name:<10} time to first SSE event: {_stat(first)} ms → ÷ empty {_stat(ratios)}×   {verdict}")
        out["ttfe"][name] = {"first_event_p99_ms": first, "ratio": ratios}
    out["ttfe"]["empty"] = {"ttfb_p99_ms": floor}
    print(f"errors: {figures.errors}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (every figure is the median of them; default 3)")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of load per measurement (default 3)")
    parser.add_argument("--stores", default="none,sqlite,postgres", help="which servers besides the empty app")
    parser.add_argument("--postgres", help="a PostgreSQL URL to use instead of a throwaway cluster")
    parser.add_argument("--client", choices=("auto", "wrk", "python"), default="auto",
                        help="load generator (auto: wrk when installed)")
    parser.add_argument("--ttfe-calls", type=int, default=1000, help="SSE calls per round for the time to first event")
    parser.add_argument("--long-text", action="store_true", help="call with a 900-character text (more work in the tool)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--serve-empty", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--client-run", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.serve_empty is not None:
        _serve_empty(ns.serve_empty)
        return 0
    if ns.client_run is not None:
        _client_main(ns.client_run)
        return 0
    if not (1 <= ns.rounds <= 20 and 0.2 <= ns.seconds <= 60 and WAVE <= ns.ttfe_calls <= 20_000):
        parser.error(f"keep it bounded: rounds 1..20, seconds 0.2..60, ttfe calls {WAVE}..20000")
    if ns.long_text:
        os.environ[LONG_TEXT_ENV] = "1"
    if ns.client == "wrk" and not shutil.which("wrk"):
        parser.error("wrk is not installed (apt-get install wrk), use --client python")
    out = run(ns)
    if ns.json:
        ns.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if out["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
