"""Measurements that need a fresh process, run by `python -m bench` as subprocesses.

    python -m bench.worker concurrent --mode engine|bare|langgraph --dir D --module M [--calls N] [--rounds R]
    python -m bench.worker load --dir D [--repeat K]

Each prints one JSON object on its last stdout line. A fresh process per case means the
peak RSS reflects that case only (plus the interpreter and what the case imports).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from .projects import CHAIN_ARGS, chain_tool


def rss_mib() -> float:
    """Current resident set size (psutil when installed, else /proc)."""
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:  # pragma: no cover - psutil is in the dev and bench extras
        return _proc_status_kib("VmRSS") / 1024


def peak_rss_mib() -> float:
    """The process's RSS high-water mark (VmHWM on Linux; ru_maxrss elsewhere)."""
    hwm = _proc_status_kib("VmHWM")
    if hwm:
        return hwm / 1024
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def _proc_status_kib(field: str) -> float:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


# ─── (b) concurrency ────────────────────────────────────────────────────────────────────


async def _concurrent(mode: str, root: Path, module: str, steps: int, calls: int, rounds: int) -> dict[str, Any]:
    sys.path.insert(0, str(root))
    functions = [getattr(importlib.import_module(module), f"step_{i}") for i in range(steps)]
    events = 0

    def on_event(event: Any) -> None:
        nonlocal events
        events += 1

    call: Callable[[], Awaitable[Any]]
    if mode == "engine":
        from engine import Engine

        engine = Engine.from_dir(root)
        tool = chain_tool(steps)

        async def call() -> Any:
            result = await engine.call_tool(tool, CHAIN_ARGS, on_event=on_event)
            if not result.ok:
                raise RuntimeError(f"call failed: {result.error}")
            return result.data

    elif mode == "langgraph":
        from .lg import build_chain, invoke_config

        graph = build_chain(functions)
        config = invoke_config(steps)

        async def call() -> Any:
            return await graph.ainvoke(dict(CHAIN_ARGS), config)

    elif mode == "bare":

        async def call() -> Any:  # the floor: the async functions chained by hand
            value: Any = dict(CHAIN_ARGS)
            for function in functions:
                value = await function(value)
            return value

    else:
        raise SystemExit(f"unknown mode {mode!r}")

    expected = CHAIN_ARGS["x"] + steps
    first = await call()
    if first["x"] != expected:
        raise RuntimeError(f"unexpected output {first!r}")
    events = 0
    baseline = rss_mib()
    peak_before = peak_rss_mib()
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(rounds):
        start, cpu_start = time.perf_counter(), time.process_time()
        outputs = await asyncio.gather(*(call() for _ in range(calls)))
        walls.append((time.perf_counter() - start) * 1000)
        cpus.append((time.process_time() - cpu_start) * 1000)
        if any(o["x"] != expected for o in outputs):
            raise RuntimeError("a concurrent call returned a wrong output")
        del outputs
    return {
        "mode": mode,
        "calls": calls,
        "rounds": rounds,
        "wall_ms": walls,
        "first_wall_ms": walls[0],
        "cpu_ms": cpus,
        "events_per_call": events / (calls * rounds) if mode == "engine" else 0,
        "rss_before_mib": baseline,
        "peak_before_mib": peak_before,
        "peak_rss_mib": peak_rss_mib(),
    }


# ─── (c) load + link ────────────────────────────────────────────────────────────────────


def _load(root: Path, repeat: int) -> dict[str, Any]:
    import_start = time.perf_counter()
    from engine import Engine
    from engine.errors import IssueCollector
    from engine.link.linker import _Linker
    from engine.spec.loader import load_specs

    import_ms = (time.perf_counter() - import_start) * 1000
    start = time.perf_counter()
    engine = Engine.from_dir(root)
    cold_ms = (time.perf_counter() - start) * 1000
    summary = engine.project.summary()
    warm: list[float] = []
    specs_ms: list[float] = []
    link_ms: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        Engine.from_dir(root)
        warm.append((time.perf_counter() - start) * 1000)
        # The same work in its two halves: YAML + pydantic shapes, then link + compile.
        issues = IssueCollector()
        start = time.perf_counter()
        specs = load_specs(root, issues)
        middle = time.perf_counter()
        _Linker(specs, issues).link()
        end = time.perf_counter()
        specs_ms.append((middle - start) * 1000)
        link_ms.append((end - middle) * 1000)
    return {
        "import_ms": import_ms,
        "cold_ms": cold_ms,
        "warm_ms": warm,
        "load_specs_ms": specs_ms,
        "link_ms": link_ms,
        "summary": summary,
        "peak_rss_mib": peak_rss_mib(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.worker")
    sub = parser.add_subparsers(dest="command", required=True)
    conc = sub.add_parser("concurrent")
    conc.add_argument("--mode", required=True, choices=["engine", "bare", "langgraph"])
    conc.add_argument("--dir", required=True, type=Path)
    conc.add_argument("--module", required=True)
    conc.add_argument("--steps", type=int, default=3)
    conc.add_argument("--calls", type=int, default=1000)
    conc.add_argument("--rounds", type=int, default=5)
    load = sub.add_parser("load")
    load.add_argument("--dir", required=True, type=Path)
    load.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    if args.command == "concurrent":
        out = asyncio.run(_concurrent(args.mode, args.dir, args.module, args.steps, args.calls, args.rounds))
    else:
        out = _load(args.dir, args.repeat)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
