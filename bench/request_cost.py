"""`python -m bench.request_cost`: instructions per HTTP request under callgrind (issue 13).

    python -m bench.request_cost [--cases empty,engine,json,sse] [--store none|sqlite] [-n 300] [-m 100]

Wall-clock throughput on a shared 2-core VM moves with the neighbours' load; the number of
instructions a request executes does not. Each case runs twice under
`valgrind --tool=callgrind` (N and M requests, each after the same warm-up), and the figure
is (instructions of N − instructions of M) ÷ (N − M): start-up, imports and warm-up cancel.

The app is driven in-process with ASGI messages on uvloop (as `skillyard serve` runs it), so
the figure is the Python side of a request: FastAPI/Starlette, `Access`, the route, the
engine, the hub — not uvicorn's HTTP parsing, the same for every server. Cases, all with
`POST /v1/tools/textReport/call` and bench.service's one-sentence body:

- `empty`: bench.service's empty FastAPI app (parses the body, returns a dict): the floor;
- `engine`: `Engine.call_tool` alone (no listener, no HTTP);
- `json` / `sse`: `create_app(engine)` (the app of `skillyard serve`, its garbage collector
  set as the command sets it) with a JSON answer / with `Accept: text/event-stream`; `--store sqlite` records every run (the writer thread's
  instructions included: the store is flushed before the count ends).

`--one CASE N` runs one measurement without valgrind (what the driver runs under it).
`--opcodes CASE` counts the bytecodes of N requests by function (`sys.settrace`; no valgrind):
a profile that does not move with the machine's load, C calls counting one bytecode each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Awaitable, Callable

from .servers import REPO, copy_shipped_project
from .service import BODY, PATH, TOOL, empty_app

WARMUP = 30
CASES = ("empty", "engine", "json", "sse")


def _scope(sse: bool) -> dict[str, Any]:
    headers = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
               (b"content-length", str(len(BODY)).encode()),
               (b"accept", b"text/event-stream" if sse else b"application/json")]
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": PATH, "raw_path": PATH.encode(), "query_string": b"",
            "root_path": "", "headers": headers, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}


def _asgi_caller(app: Any, sse: bool) -> Callable[[], Awaitable[None]]:
    """One request through `app`; checks the answer (a 200 with the tool's result or events)."""
    async def one() -> None:
        sent: list[dict[str, Any]] = []
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": BODY, "more_body": False}
            await asyncio.Event().wait()  # the client stays: nothing more to read
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(_scope(sse), receive, send)
        start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
        if start["status"] != 200 or (b"tool_call_result" not in body if sse else b'"ok":true' not in body):
            raise SystemExit(f"unexpected answer: {start['status']} {body[:300]!r}")

    return one


def _one(case: str, requests: int, store: str) -> None:
    """Warm up, then make `requests` requests of `case` (the part the driver subtracts)."""
    import uvloop

    root = copy_shipped_project("skillyard-request-cost-")
    try:
        uvloop.run(_drive(case, requests, store, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _drive(case: str, requests: int, store: str, root: Path, trace: Any = None) -> None:
    engine = None
    if case == "empty":
        call = _asgi_caller(empty_app(), sse=False)
    else:
        from engine import Engine
        from engine.link.linker import load_project
        from engine.logging import configure_logging

        project = load_project(root, isolate_broken_tools=True)
        engine = Engine.from_project(project, store=store == "sqlite")
        logging = project.settings.logging
        configure_logging(logging.format, logging.level, project.redactor)
        arguments = json.loads(BODY)
        if case == "engine":
            async def call() -> None:
                result = await engine.call_tool(TOOL, arguments)
                if not result.ok:
                    raise SystemExit(f"the call failed: {result.error}")
        else:
            from engine.cli.serve import settle_heap
            from engine.server import create_app

            call = _asgi_caller(create_app(engine), sse=case == "sse")
            settle_heap()  # the collector as `skillyard serve` sets it
    for _ in range(WARMUP):
        await call()
    if trace is not None:
        sys.settrace(trace)
    try:
        for _ in range(requests):
            await call()
    finally:
        sys.settrace(None)
    if engine is not None:
        if engine.store is not None:
            await asyncio.to_thread(engine.store.flush)
        engine.close()


def _opcodes(case: str, requests: int, store: str, top: int = 200) -> int:
    """Bytecodes per request by function, over `requests` requests of `case` (after the warm-up)."""
    import collections

    import uvloop

    from .opcodes import opcode_tracer

    counts: collections.Counter[str] = collections.Counter()
    tracer = opcode_tracer(counts)
    root = copy_shipped_project("skillyard-request-cost-")
    try:
        uvloop.run(_drive(case, requests, store, root, trace=tracer))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    total = sum(counts.values())
    print(f"{case}: {total / requests:,.0f} bytecodes/request")
    for name, count in counts.most_common(top):
        print(f"{count / requests:>9,.1f}  {name}")
    return 0


def _cprofile(case: str, requests: int, store: str) -> int:
    """Where the time of `requests` requests goes (cProfile: own time, then cumulative)."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    _one(case, WARMUP, store)  # imports and first-call caches outside the profile
    profile.enable()
    _one(case, requests, store)
    profile.disable()
    stats = pstats.Stats(profile).strip_dirs()
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(50)
    return 0


def _instructions(case: str, requests: int, store: str, out_dir: Path) -> int:
    out = out_dir / f"callgrind.{case}.{requests}.out"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
               sys.executable, "-m", "bench.request_cost", "--one", case, str(requests), "--store", store]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("SKILLYARD_API_KEYS", None)
    env.setdefault("PYTHONHASHSEED", "0")  # the same dict layouts in every run: a steadier count
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{case}: valgrind failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.request_cost")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--store", choices=("none", "sqlite"), default="none", help="the app's run store (json, sse)")
    parser.add_argument("-n", type=int, default=300, help="requests of the long run")
    parser.add_argument("-m", type=int, default=100, help="requests of the short run")
    parser.add_argument("--one", nargs=2, metavar=("CASE", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--cprofile", metavar="CASE", help="no valgrind: cProfile N requests of CASE, top functions")
    parser.add_argument("--opcodes", metavar="CASE", help="no valgrind: bytecodes per request of CASE, by function")
    args = parser.parse_args(argv)
    if args.one:
        _one(args.one[0], int(args.one[1]), args.store)
        return 0
    if args.opcodes:
        return _opcodes(args.opcodes, args.n, args.store)
    if args.cprofile:
        return _cprofile(args.cprofile, args.n, args.store)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown or args.n <= args.m:
        parser.error(f"unknown case(s) {unknown}" if unknown else "-n must be larger than -m")
    with tempfile.TemporaryDirectory(prefix="skillyard-callgrind-") as tmp:
        for case in cases:
            long, short = (_instructions(case, k, args.store, Path(tmp)) for k in (args.n, args.m))
            store = "" if case in ("empty", "engine") else f" (store: {args.store})"
            print(f"{case:7} {(long - short) / (args.n - args.m):>12,.0f} instructions/request{store}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
