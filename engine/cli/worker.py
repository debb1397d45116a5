"""`skillyard worker`: a Temporal worker for the project (execution.backend: temporal).

It prints what it serves and its project revision at start, and stops cleanly on SIGTERM or
Ctrl-C: running steps get a grace period, then go back to Temporal for another worker.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, UsageError
from .arguments import positive_int
from .common import EXIT_OK, report_config

if TYPE_CHECKING:
    from ..store.shared import SharedStore


def add_worker_parser(commands: Any) -> None:
    worker = commands.add_parser(
        "worker", help="run a Temporal worker for the project (execution.backend: temporal)",
        description="Run a Temporal worker: it executes the tool calls that front doors with the temporal backend "
                    "start. Needs the `temporal` extra, a Temporal server (execution.temporal.address or "
                    "SKILLYARD_TEMPORAL_ADDRESS) and the shared postgresql:// run store.",
    )
    worker.add_argument("--dir", default=".", help="project directory (default: current directory)")
    worker.add_argument("--max-concurrent", type=positive_int, default=100, metavar="N",
                        help="steps (activities) run at once by this worker, and workflow tasks (at least 10) (default 100)")
    worker.add_argument("--grace", type=float, default=30.0, metavar="SECONDS",
                        help="on SIGTERM, how long running steps may finish before they are handed back (default 30)")
    worker.set_defaults(handler=cmd_worker)



def cmd_worker(ns: argparse.Namespace) -> int:
    import asyncio

    from ..backends.temporal.config import require_sdk, require_shared_store
    from ..link.linker import load_project
    from ..logging import configure_logging
    from ..store import StoreError, open_store, store_url
    from ..telemetry.traces import open_process_traces

    require_sdk()
    try:
        project = load_project(ns.dir)
    except ConfigError as exc:
        return report_config(exc)
    settings = project.settings.logging
    configure_logging(settings.format, settings.level, project.redactor)
    traces = open_process_traces(project.settings.telemetry)  # None: off; its activities' spans join their callers' traces
    try:
        store = open_store(store_url(project.root, project.settings.store), redactor=project.redactor,
                           redacted_events=True)  # events come redacted (by the workflows' Runs)
    except StoreError as exc:
        if traces is not None:
            traces.close()
        raise UsageError(str(exc)) from None
    try:
        return asyncio.run(_serve(project, require_shared_store(store), ns))
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        store.close()
        if traces is not None:
            traces.close()  # the spans still batched are sent


async def _serve(project: Any, store: SharedStore, ns: argparse.Namespace) -> int:
    from ..backends.temporal.worker import run_worker

    def started(info: dict[str, Any]) -> None:
        tools = ", ".join(info["tools"]) or "none"
        print(f"skillyard worker: project {info['project']} revision {info['revision']}, task queue "
              f"{info['task_queue']} (namespace {info['namespace']} at {info['address']}); tools: {tools}",
              file=sys.stderr, flush=True)

    await run_worker(project, store, max_concurrent=ns.max_concurrent, graceful_s=ns.grace, on_start=started)
    print("skillyard worker: stopped", file=sys.stderr, flush=True)
    return EXIT_OK
