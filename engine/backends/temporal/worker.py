"""A Temporal worker for one linked project: `skillyard worker`.

It links the project once, computes its revision, opens the shared store, registers the
skillyard workflow and activities on the task queue, and serves until asked to stop. Meanwhile
it adopts the runs whose front door died (orphans.py), so they end in the store as they end. A stop
(SIGTERM, SIGINT) lets running activities finish for up to `graceful_s` seconds; what is not
finished by then is handed back to Temporal, which runs it on another worker.
"""

from __future__ import annotations

import asyncio
import signal
from datetime import timedelta
from typing import TYPE_CHECKING, Callable

from ...logging import logger
from .config import TemporalConfig, connect
from .revision import project_revision
from .served import Served, serve

if TYPE_CHECKING:
    from ...runtime.project import Project
    from ...store.shared import SharedStore

# The engine's modules are shared with the workflow sandbox, not re-imported in it: the workflow
# maps steps with the project this worker linked, and the engine's code is deterministic there.
PASSED_THROUGH = ("engine", "jsonschema_rs", "jsonschema", "pydantic", "pydantic_core", "structlog", "orjson", "yaml",
                  "jinja2", "markupsafe", "httpx", "openai", "psycopg", "psycopg_pool")
# Workflow tasks (short: a step's mapping, its events) at once, whatever --max-concurrent says of steps: with
# one, 100 calls of 50 ms steps ran at 2 calls/s on 1 worker and on 2 (bench.temporal; likely its one poll
# waiting on the task queue while its executions' next tasks wait on its sticky queue); with 10, 4.6 and 7.3.
WORKFLOW_TASKS_AT_LEAST = 10


def describe(project: "Project", revision: str, config: TemporalConfig) -> dict[str, object]:
    """What the worker serves, as its start line says."""
    tools = sorted(project.tools)  # every tool of the files: a workflow, or any other type as one activity
    return {"project": str(project.root), "revision": revision, "address": config.address,
            "namespace": config.namespace, "task_queue": config.task_queue, "tools": tools}


async def run_worker(project: "Project", store: "SharedStore", *, max_concurrent: int = 100, graceful_s: float = 30.0,
                     on_start: Callable[[dict[str, object]], None] | None = None) -> None:
    """Serve until SIGTERM or SIGINT (or cancellation)."""
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    from .activities import Activities
    from .agent_activities import AgentActivities
    from .agent_workflow import AgentWorkflow
    from .orphans import Adopter
    from .single import OneActivityWorkflow, run_tool
    from .tracing import activity_tracing
    from .workflows import ToolWorkflow

    config = TemporalConfig.of(project)
    revision = project_revision(project)
    serve(Served(project, revision, config))
    client = await connect(config)
    activities = Activities(store)
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH))
    worker = Worker(client, task_queue=config.task_queue, workflows=[ToolWorkflow, OneActivityWorkflow, AgentWorkflow],
                    activities=[*activities.all(), *AgentActivities(activities).all(), run_tool],
                    workflow_runner=runner, max_concurrent_activities=max_concurrent, interceptors=activity_tracing(),
                    max_concurrent_workflow_tasks=max(max_concurrent, WORKFLOW_TASKS_AT_LEAST),
                    graceful_shutdown_timeout=timedelta(seconds=graceful_s))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    info = describe(project, revision, config)
    logger.info("worker started", **info)
    if on_start is not None:
        on_start(info)
    running = loop.create_task(worker.run())
    stopping = loop.create_task(stop.wait())
    adopting = loop.create_task(Adopter(client, store).run())  # runs whose front door died
    try:
        await asyncio.wait((running, stopping), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        adopting.cancel()
        if not running.done():
            await worker.shutdown()
        await asyncio.gather(running, return_exceptions=True)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    failure = running.exception() if running.done() and not running.cancelled() else None
    if failure is not None:
        raise failure
