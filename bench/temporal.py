"""`python -m bench.temporal`: skillyard on Temporal against a hand-written Temporal workflow.

Same run, same Temporal dev server, same PostgreSQL, workers in their own processes:

1. per-call (and per-step) latency of the 3-step chain as a skillyard call on the temporal
   backend (router in the front door, workflow + one activity per step on a `skillyard
   worker`, events written to the store), against a hand-written workflow that calls the
   same three python functions as activities (no events, no store) — target ≤ 1.3×;
   Also the history events and activities of one call of each;
2. throughput of 200 concurrent 3-step calls: skillyard with 1 worker against the hand-written
   workflow with 1 worker (target ≥ 0.8×), then skillyard with 2 workers, and the CPU time
   each part (front door, workers, Temporal, PostgreSQL) spent per call;
3. throughput of 200 concurrent 3-step calls whose steps sleep 50 ms on workers that run
   one step at a time: the workers, not the machine's cores, limit it, so 2 workers should
   give at least 1.3× what 1 gives.

`--profile DIR` writes cProfile stats of the first worker and of the front door (this process)
during the 1-worker burst.

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
SLEEPY_MODULE = "bench_temporal_sleepy"
HAND_QUEUE = "bench-hand"
TARGET_RATIO = 1.3  # one call's latency against the hand-written workflow's, at most
THROUGHPUT_TARGET = 0.8  # concurrent calls' throughput against the hand-written workflow's, at least
SCALE_TARGET = 1.3  # 2 workers against 1 when steps wait rather than compute, at least
SLEEP_S = 0.05
SLEEPY_SLOTS = 1  # steps a sleepy-case worker runs at a time (--max-concurrent): the worker, not the machine, is the limit


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


class CpuMeter:
    """CPU seconds used by each part of the run (this front door, the workers, Temporal, PostgreSQL):
    where the time of a burst of calls goes, on a machine whose cores they share."""

    def __init__(self) -> None:
        self.parts: dict[str, list[int]] = {"front door": [os.getpid()], "workers": [], "Temporal": [], "PostgreSQL": []}

    def seconds(self) -> dict[str, float]:
        import psutil

        used: dict[str, float] = {}
        for part, pids in self.parts.items():
            total = 0.0
            for pid in pids:
                try:
                    process = psutil.Process(pid)
                    times = process.cpu_times()
                    total += times.user + times.system + times.children_user + times.children_system
                    if part == "PostgreSQL":  # the postmaster's backends, one per connection
                        for child in process.children(recursive=True):
                            child_times = child.cpu_times()
                            total += child_times.user + child_times.system
                except psutil.Error:
                    continue
            used[part] = total
        return used

    @staticmethod
    def per_call(before: dict[str, float], after: dict[str, float], calls: int) -> str:
        parts = [f"{part} {(after[part] - before[part]) * 1000 / calls:.0f}" for part in before if part in after]
        return "CPU ms per call: " + ", ".join(parts)


METER = CpuMeter()


def _servers(address: str | None, url: str | None) -> tuple[str, str, list[Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    owned: list[Any] = []
    if url is None:
        from pg_cluster import PgCluster, find_bin

        cluster = PgCluster(find_bin())  # type: ignore[arg-type]
        cluster.start()
        owned.append(cluster)
        METER.parts["PostgreSQL"].append(int((cluster.data / "postmaster.pid").read_text().split()[0]))
        url = cluster.new_database()
    if address is None:
        from temporal_server import TemporalDevServer, find_temporal

        server = TemporalDevServer(find_temporal())  # type: ignore[arg-type]
        server.start()
        owned.append(server)
        METER.parts["Temporal"].append(server.process.pid)  # type: ignore[union-attr]
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


def _worker_command(root: Path, profile: Path | None, name: str, *extra: str) -> list[str]:
    """`skillyard worker` (under cProfile, written at its clean stop, when `profile` is a folder)."""
    command = ["-m", "engine.cli.main", "worker", "--dir", str(root), *extra]
    return ["-m", "cProfile", "-o", str(profile / f"{name}.prof"), *command] if profile is not None else command


async def _history(client: Any, workflow_id: str) -> tuple[int, int, int]:
    """(history events, activities, bytes of history) of one execution."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    names = [event.WhichOneof("attributes") for event in history.events]
    size = sum(event.ByteSize() for event in history.events)
    return len(names), names.count("activity_task_scheduled_event_attributes"), size


class Bench:
    """One run's servers, front door (this process) and worker processes."""

    def __init__(self, address: str, url: str, env: dict[str, str], work: Path, profile: Path | None) -> None:
        self.address, self.url, self.env, self.work, self.profile = address, url, env, work, profile
        self.processes: list[subprocess.Popen[bytes]] = []

    def worker(self, root: Path, name: str, *extra: str) -> subprocess.Popen[bytes]:
        log = self.work / f"{name}.log"
        process = _spawn(_worker_command(root, self.profile, name, *extra), self.env, log)
        self.processes.append(process)
        METER.parts["workers"].append(process.pid)
        _wait_started(log, "revision")
        return process

    def stop(self, process: subprocess.Popen[bytes]) -> None:
        process.terminate()
        process.wait(60)

    def stop_all(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(60)


async def _measure(root: Path, sleepy: Path, bench: Bench, calls: int, burst: int) -> None:
    from temporalio.client import Client

    from bench.projects import chain_tool

    engine = _engine_for(root, bench.url)
    tool = chain_tool(3)
    args = {"x": 0, "label": "bench"}
    last: list[str] = []

    async def skillyard_call() -> None:
        result = await engine.call_tool(tool, args)
        assert result.ok, result.error
        last[:] = [result.run_id]

    hand_client = await Client.connect(bench.address)
    counter = iter(range(10**9))

    async def hand_call() -> None:
        last[:] = [f"hand-{os.getpid()}-{next(counter)}"]
        await hand_client.execute_workflow("hand.chain3", args, id=last[0], task_queue=HAND_QUEUE)

    first = bench.worker(root, "worker1")
    hand = _spawn(["-m", "bench.temporal", "--hand-worker", bench.address], bench.env, bench.work / "hand.log")
    bench.processes.append(hand)
    METER.parts["workers"].append(hand.pid)
    time.sleep(1.0)  # the hand worker prints nothing: give it its start
    try:
        ours = await _latencies(skillyard_call, calls)
        ours_history = await _history(hand_client, last[0])
        theirs = await _latencies(hand_call, calls)
        theirs_history = await _history(hand_client, last[0])
        ours_ms, theirs_ms = statistics.median(ours), statistics.median(theirs)
        ratio = ours_ms / theirs_ms
        print(f"3-step call, median of {calls}: skillyard on Temporal {ours_ms:.1f} ms ({ours_ms / 3:.1f} ms/step), "
              f"hand-written workflow {theirs_ms:.1f} ms ({theirs_ms / 3:.1f} ms/step): {ratio:.2f}x "
              f"(target <= {TARGET_RATIO}x: {_verdict(ratio <= TARGET_RATIO)})")
        print(f"  per call: skillyard {ours_history[0]} history events, {ours_history[1]} activities, "
              f"{ours_history[2]} bytes; hand-written {theirs_history[0]} history events, {theirs_history[1]} "
              f"activities, {theirs_history[2]} bytes")
        before = METER.seconds()
        hand_rate = await _rate(lambda: asyncio.gather(*(hand_call() for _ in range(burst))), burst)
        hand_cpu = METER.per_call(before, METER.seconds(), burst)
        bench.stop(hand)
        before = METER.seconds()
        one = await _throughput(engine, tool, args, burst, bench.profile)
        ours_cpu = METER.per_call(before, METER.seconds(), burst)
        second = bench.worker(root, "worker2")
        two = await _throughput(engine, tool, args, burst, None)
        print(f"{burst} concurrent 3-step calls: skillyard 1 worker {one:.1f} calls/s, the hand-written workflow "
              f"1 worker {hand_rate:.1f} calls/s: {one / hand_rate:.2f}x (target >= {THROUGHPUT_TARGET}x: "
              f"{_verdict(one / hand_rate >= THROUGHPUT_TARGET)}); skillyard 2 workers {two:.1f} calls/s "
              f"({two / one:.2f}x)")
        print(f"  skillyard, 1 worker: {ours_cpu}; hand-written: {hand_cpu}")
        for process in (first, second):
            bench.stop(process)
        await _sleepy(engine, sleepy, bench, burst)
        print(f"  {os.cpu_count()} cores shared by the front door, workers, Temporal and PostgreSQL; "
              f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        bench.stop_all()
        engine.close()


async def _sleepy(engine: Any, root: Path, bench: Bench, burst: int) -> None:
    """Steps that wait 50 ms (an API call, say) on workers that take SLEEPY_SLOTS steps at a time:
    the workers, not the machine's CPU, limit the throughput, so a second worker should add to it
    (with 100 slots one worker overlaps every wait, and on a machine of 2 shared cores Temporal's
    own CPU is the limit, as the trivial case shows)."""
    from bench.projects import chain_tool

    sleepy = _engine_for(root, bench.url)
    slots = ("--max-concurrent", str(SLEEPY_SLOTS))
    try:
        bench.worker(root, "sleepy1", *slots)
        one = await _throughput(sleepy, chain_tool(3), {"x": 0, "label": "bench"}, burst, None)
        bench.worker(root, "sleepy2", *slots)
        two = await _throughput(sleepy, chain_tool(3), {"x": 0, "label": "bench"}, burst, None)
    finally:
        sleepy.close()
    print(f"{burst} concurrent 3-step calls, each step sleeping {SLEEP_S * 1000:.0f} ms, workers running "
          f"{SLEEPY_SLOTS} step(s) at a time: 1 worker {one:.1f} calls/s, 2 workers {two:.1f} calls/s ({two / one:.2f}x; "
          f"target >= {SCALE_TARGET}x: {_verdict(two / one >= SCALE_TARGET)})")


def _engine_for(root: Path, url: str) -> Any:
    """A front door (this process's Engine) on the temporal backend."""
    from engine import Engine
    from engine.backends import attach_backend

    engine = Engine.from_dir(root, store=url)
    attach_backend(engine, "temporal")
    return engine


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


async def _rate(burst_of: Any, burst: int) -> float:
    started = time.perf_counter()
    await burst_of()
    return burst / (time.perf_counter() - started)


async def _throughput(engine: Any, tool: str, args: dict[str, Any], burst: int, profile: Path | None) -> float:
    import cProfile

    profiler = cProfile.Profile() if profile is not None else None
    if profiler is not None:
        profiler.enable()
    started = time.perf_counter()
    results = await asyncio.gather(*(engine.call_tool(tool, args) for _ in range(burst)))
    wall = time.perf_counter() - started
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(str(profile / "front.prof"))  # type: ignore[operator]
    failed = [r.error for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} of {burst} calls failed, e.g. {failed[0]}")
    return burst / wall


def _project(root: Path, module: str, queue: str, sleep: float = 0.0) -> Path:
    from bench.projects import write_chain_project

    write_chain_project(root, [3], module=module, sleep=sleep)
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "engine.yaml").write_text(f"execution:\n  backend: temporal\n  temporal:\n    task_queue: {queue}\n"
                                                 "logging:\n  level: error\n")
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.temporal", description=__doc__.splitlines()[0])
    parser.add_argument("--temporal", metavar="ADDRESS", help="a running Temporal server (default: a throwaway dev server)")
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL database (default: a throwaway cluster)")
    parser.add_argument("--quick", action="store_true", help="fewer calls (30 sequential, 100 concurrent)")
    parser.add_argument("--profile", metavar="DIR", help="write cProfile stats of the first worker and the front door here")
    parser.add_argument("--hand-worker", metavar="ADDRESS", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.hand_worker:
        sys.path.insert(0, os.getcwd())
        asyncio.run(_hand_worker(ns.hand_worker))
        return 0
    work = Path(tempfile.mkdtemp(prefix="skillyard-bench-temporal-"))
    root = _project(work / "project", MODULE, "bench-sy")
    sleepy = _project(work / "sleepy", SLEEPY_MODULE, "bench-sleepy", sleep=SLEEP_S)
    sys.path.insert(0, str(root))
    address, url, owned = _servers(ns.temporal, ns.postgres)
    env = {**os.environ, "SKILLYARD_STORE_URL": url, "SKILLYARD_TEMPORAL_ADDRESS": address,
           "PYTHONPATH": os.pathsep.join([str(root), str(sleepy), str(Path(__file__).resolve().parent.parent)])}
    os.environ["SKILLYARD_TEMPORAL_ADDRESS"] = address  # the front door (this process) reads it too
    profile = Path(ns.profile).resolve() if ns.profile else None
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
    bench = Bench(address, url, env, work, profile)
    try:
        asyncio.run(_measure(root, sleepy, bench, 30 if ns.quick else 100, 100 if ns.quick else 200))
    finally:
        for thing in reversed(owned):
            (thing.stop if hasattr(thing, "stop") else thing.destroy)()
    if profile is not None:
        print(f"profiles (pstats): {profile}/worker1.prof (the first worker), {profile}/front.prof (the front door, "
              "100 concurrent calls on 1 worker)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
