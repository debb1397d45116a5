"""Profile case (a): `python -m bench.profile [--steps 3] [--calls 20000] [--pyinstrument] [--concurrent]`.

Prints the functions with the most own time (cProfile), then the same restricted to
`engine/`, so hot spots in the engine stand out from asyncio and the standard library.
`--concurrent` profiles 1,000 concurrent calls of the async 10 ms chain (case b) instead.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import io
import pstats
import sys
import tempfile
from pathlib import Path
from typing import Any

from .cases import ASYNC_MODULE, SYNC_MODULE, CallCounter
from .projects import CHAIN_ARGS, chain_tool, write_chain_project


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--pyinstrument", action="store_true", help="use pyinstrument (if installed) instead of cProfile")
    parser.add_argument("--concurrent", action="store_true", help="profile 1,000 concurrent calls of the async chain")
    parser.add_argument("--save", type=Path, help="write the cProfile stats to this file")
    args = parser.parse_args(argv)

    from engine import Engine

    with tempfile.TemporaryDirectory(prefix="skillyard-profile-") as tmp:
        if args.concurrent:
            root = write_chain_project(Path(tmp), [args.steps], module=ASYNC_MODULE, sleep=0.010)
        else:
            root = write_chain_project(Path(tmp), [args.steps], module=SYNC_MODULE)
        engine = Engine.from_dir(root)
        importlib.invalidate_caches()
        listener = CallCounter()
        tool = chain_tool(args.steps)

        async def sequential(calls: int) -> None:
            for _ in range(calls):
                await engine.call_tool(tool, CHAIN_ARGS, on_event=listener)

        async def concurrent(calls: int) -> None:
            await asyncio.gather(*(engine.call_tool(tool, CHAIN_ARGS, on_event=listener) for _ in range(calls)))

        work = concurrent if args.concurrent else sequential
        calls = 1000 if args.concurrent else args.calls
        asyncio.run(work(min(calls, 500)))  # warm up

        if args.pyinstrument:
            try:
                from pyinstrument import Profiler
            except ImportError:
                print("pyinstrument is not installed (pip install pyinstrument)", file=sys.stderr)
                return 2
            profiler = Profiler(interval=0.0001, async_mode="disabled")
            profiler.start()
            asyncio.run(work(calls))
            profiler.stop()
            print(profiler.output_text(unicode=True, color=False, show_all=False))
            return 0

        profile = cProfile.Profile()
        profile.enable()
        asyncio.run(work(calls))
        profile.disable()
    if args.save:
        profile.dump_stats(str(args.save))
    what = "1,000 concurrent calls" if args.concurrent else f"{calls:,} sequential calls"
    print(f"cProfile of {what} of {tool} (events on); times include profiler overhead\n")
    print(_stats(profile, args.top, None, f"top {args.top} by own time"))
    print(_stats(profile, args.top, "engine/", "engine/ only, by own time"))
    print(_stats(profile, args.top, "engine/", "engine/ only, by cumulative time", sort="cumulative"))
    return 0


def _stats(profile: Any, top: int, restrict: str | None, title: str, sort: str = "tottime") -> str:
    buffer = io.StringIO()
    stats = pstats.Stats(profile, stream=buffer).strip_dirs() if restrict is None else pstats.Stats(profile, stream=buffer)
    stats.sort_stats(sort)
    if restrict is None:
        stats.print_stats(top)
    else:
        stats.print_stats(restrict, top)
    body = buffer.getvalue()
    start = body.find("   ncalls")
    return f"── {title} ──\n" + (body[start:] if start >= 0 else body)


if __name__ == "__main__":
    sys.exit(main())
