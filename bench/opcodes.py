"""Bytecodes per call of case (a): `python -m bench.opcodes [--steps 3] [--calls 20] [--top 15]`.

A count that does not move with the machine's load: every bytecode the interpreter runs for
one routed call (after a warm-up), by function. Timings and even callgrind's instruction
counts wander on a busy VM (the deadline watchdog thread and the GIL hand-offs depend on
timing: ±7 % between runs of the same code); this number changes only when the code does,
so two commits compare exactly. It counts Python work only: C calls (jsonschema-rs, orjson)
are one bytecode each, so read it beside `python -m bench` for what costs time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any, Callable

from .cases import SYNC_MODULE
from .projects import CHAIN_ARGS, chain_tool, write_chain_project

REPO = str(Path(__file__).resolve().parent.parent)


def opcode_tracer(counts: collections.Counter[str]) -> Callable[[FrameType, str, Any], Any]:
    """A `sys.settrace` function adding each bytecode run to `counts`, keyed by
    file:function (paths inside the repository or site-packages, shortened)."""
    prefix = REPO + "/"

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            counts[f"{code.co_filename.replace(prefix, '').split('site-packages/')[-1]}:{code.co_name}"] += 1
        return tracer

    return tracer


def count_opcodes(steps: int, calls: int, warmup: int = 300) -> collections.Counter[str]:
    """Bytecodes run per function over `calls` calls of the `steps`-step chain (sync skills)."""
    from engine import Engine

    root = write_chain_project(Path(tempfile.mkdtemp(prefix="skillyard-opcodes-")), [steps], module=SYNC_MODULE)
    sys.path.insert(0, str(root))
    engine = Engine.from_dir(root)
    tool = chain_tool(steps)
    counts: collections.Counter[str] = collections.Counter()
    tracer = opcode_tracer(counts)

    async def run(n: int, traced: bool) -> None:
        if traced:
            sys.settrace(tracer)
        try:
            for _ in range(n):
                result = await engine.call_tool(tool, CHAIN_ARGS, on_event=lambda event: None)
                assert result.ok, result.error
        finally:
            sys.settrace(None)

    asyncio.run(run(warmup, False))
    asyncio.run(run(calls, True))
    engine.close()
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.opcodes")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--top", type=int, default=15)
    ns = parser.parse_args(argv)
    counts = count_opcodes(ns.steps, ns.calls)
    total = sum(counts.values()) / ns.calls
    print(f"{ns.steps}-step routed call: {total:,.1f} bytecodes per call (Python only; {ns.calls} calls traced)")
    for name, count in counts.most_common(ns.top):
        print(f"  {count / ns.calls:8.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
