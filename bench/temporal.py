"""`python -m bench.temporal`: skillyard on Temporal against a hand-written Temporal workflow.

Same run, same Temporal dev server, same PostgreSQL, workers in their own processes:

1. per-call (and per-step) latency of the 3-step chain as a skillyard call on the temporal
   backend (router in the front door, workflow + one activity per step on a `skillyard
   worker`, events written to the store), against a hand-written workflow that calls the
   same three python functions as activities (no events, no store) — target ≤ 1.3×;
2. throughput of 200 concurrent 3-step skillyard calls with 1 worker, then with 2.

`--temporal ADDRESS` / `--postgres URL` use running servers; otherwise throwaway ones are
started (tests/temporal_server.py, tests/pg_cluster.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

MODULE = "bench_temporal_chain"
HAND_QUEUE = "bench-hand"
TARGET_RATIO = 1.3


# ─── the hand-written baseline: the same functions as activities, nothing else ─────────────


def _hand_activities() -> list[Any]:
    import importlib

    chain = importlib.import_module(MODULE)

    def make(i: int) -> Any:
        function = getattr(chain, f"step_{i}")

        @activity.defn(name=f"hand.step_{i}")
        async def step(value: dict[str, Any]) -> dict[str, Any]:
            return await asyncio.to_thread(function, value)  # as skillyard's worker runs a sync skill

        return step

    return [make(i) for i in range(3)]


@workflow.defn(name="hand.chain3")
class HandChain:
    @workflow.run
    async def run(self, value: dict[str, Any]) -> dict[str, Any]:
        for i in range(3):
            value = await workflow.execute_activity(f"hand.step_{i}", value, start_to_close_timeout=timedelta(seconds=30))
        return value


async def _hand_worker(address: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    client = await Client.connect(address)
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("bench", "engine"))
    await Worker(client, task_queue=HAND_QUEUE, workflows=[HandChain], activities=_hand_activities(),
                 workflow_runner=runner, max_concurrent_activities=100).run()


# ─── the run ───────────────────────────────────────────────────────────────────────────


def _servers(address: str | None, url: str | None) -> tuple[str, str, list[Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    owned: list[Any] = []
    if url is None:
        from pg_cluster import PgCluster, find_bin

        cluster = PgCluster(find_bin())  # type: ignore[arg-type]
        cluster.start()
        owned.append(cluster)
        url = cluster.new_database()
    if address is None:
        from temporal_server import TemporalDevServer, find_temporal

        server = TemporalDevServer(find_temporal())  # type: ignore[arg-type]
        server.start()
        owned.append(server)
        address = server.address
    return address, url, owned


def _spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "ab")
    return subprocess.Popen([sys.executable, *args], env=env, stdout=out, stderr=out)


def _wait_started(log: Path, mark: str) -> None:
    deadline = time.monotonic() + 60
    while mark not in (log.read_text() if log.exists() else ""):
        if time.monotonic() > deadline:
            raise RuntimeError(f"a worker did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)


async def _latencies(call: Any, n: int) -> list[float]:
    for _ in range(5):
        await call()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return times


async def _measure(root: Path, address: str, url: str, env: dict[str, str], work: Path, calls: int, burst: int) -> None:
    from temporalio.client import Client

    from bench.projects import chain_tool
    from engine import Engine
    from engine.backends import attach_backend

    engine = Engine.from_dir(root, store=url)
    attach_backend(engine, "temporal")
    tool = chain_tool(3)
    args = {"x": 0, "label": "bench"}

    async def skillyard_call() -> None:
        result = await engine.call_tool(tool, args)
        assert result.ok, result.error

    hand_client = await Client.connect(address)
    counter = iter(range(10**9))

    async def hand_call() -> None:
        await hand_client.execute_workflow("hand.chain3", args, id=f"hand-{os.getpid()}-{next(counter)}",
                                           task_queue=HAND_QUEUE)

    first = _spawn(["-m", "engine.cli.main", "worker", "--dir", str(root)], env, work / "worker1.log")
    hand = _spawn(["-m", "bench.temporal", "--hand-worker", address], env, work / "hand.log")
    _wait_started(work / "worker1.log", "revision")
    time.sleep(1.0)  # the hand worker prints nothing: give it its start
    workers = [first, hand]
    try:
        ours = await _latencies(skillyard_call, calls)
        theirs = await _latencies(hand_call, calls)
        ours_ms, theirs_ms = statistics.median(ours), statistics.median(theirs)
        ratio = ours_ms / theirs_ms
        print(f"3-step call, median of {calls}: skillyard on Temporal {ours_ms:.1f} ms ({ours_ms / 3:.1f} ms/step), "
              f"hand-written workflow {theirs_ms:.1f} ms ({theirs_ms / 3:.1f} ms/step): {ratio:.2f}x "
              f"(target <= {TARGET_RATIO}x: {'PASS' if ratio <= TARGET_RATIO else 'MISS'})")
        started = time.perf_counter()
        await asyncio.gather(*(hand_call() for _ in range(burst)))
        hand_rate = burst / (time.perf_counter() - started)
        hand.terminate()
        one = await _throughput(engine, tool, args, burst)
        second = _spawn(["-m", "engine.cli.main", "worker", "--dir", str(root)], env, work / "worker2.log")
        workers.append(second)
        _wait_started(work / "worker2.log", "revision")
        two = await _throughput(engine, tool, args, burst)
        load = os.getloadavg()[0]
        print(f"{burst} concurrent 3-step calls: 1 worker {one:.1f} calls/s, 2 workers {two:.1f} calls/s "
              f"({two / one:.2f}x; the hand-written workflow, 1 worker: {hand_rate:.1f} calls/s; {os.cpu_count()} cores "
              f"shared by front door, workers, Temporal and PostgreSQL; load average {load:.1f} at the end)")
    finally:
        for process in workers:
            process.terminate()
        for process in workers:
            process.wait(30)
        engine.close()


async def _throughput(engine: Any, tool: str, args: dict[str, Any], burst: int) -> float:
    started = time.perf_counter()
    results = await asyncio.gather(*(engine.call_tool(tool, args) for _ in range(burst)))
    wall = time.perf_counter() - started
    failed = [r.error for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} of {burst} calls failed, e.g. {failed[0]}")
    return burst / wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.temporal", description=__doc__.splitlines()[0])
    parser.add_argument("--temporal", metavar="ADDRESS", help="a running Temporal server (default: a throwaway dev server)")
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL database (default: a throwaway cluster)")
    parser.add_argument("--quick", action="store_true", help="fewer calls (30 sequential, 100 concurrent)")
    parser.add_argument("--hand-worker", metavar="ADDRESS", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.hand_worker:
        sys.path.insert(0, os.getcwd())
        asyncio.run(_hand_worker(ns.hand_worker))
        return 0
    from bench.projects import write_chain_project

    work = Path(tempfile.mkdtemp(prefix="skillyard-bench-temporal-"))
    root = write_chain_project(work / "project", [3], module=MODULE)
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "engine.yaml").write_text("execution:\n  backend: temporal\n  temporal:\n    task_queue: bench-sy\n"
                                                 "logging:\n  level: error\n")
    sys.path.insert(0, str(root))
    address, url, owned = _servers(ns.temporal, ns.postgres)
    env = {**os.environ, "SKILLYARD_STORE_URL": url, "SKILLYARD_TEMPORAL_ADDRESS": address,
           "PYTHONPATH": os.pathsep.join([str(root), str(Path(__file__).resolve().parent.parent)])}
    os.environ["SKILLYARD_TEMPORAL_ADDRESS"] = address  # the front door (this process) reads it too
    try:
        asyncio.run(_measure(root, address, url, env, work, 30 if ns.quick else 100, 100 if ns.quick else 200))
    finally:
        for thing in reversed(owned):
            (thing.stop if hasattr(thing, "stop") else thing.destroy)()
    return 0


if __name__ == "__main__":
    sys.exit(main())
