"""The benchmark cases. Each returns a plain dict of figures (also written by `--json`)."""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import lg
from .projects import CHAIN_ARGS, CHAIN_VALUE_SCHEMA, chain_tool, project_size, write_chain_project, write_large_project
from .timing import Samples, median, sample_async, sample_sync

STEP_COUNTS = [3, 10, 50]
SYNC_MODULE = "bench_chain_sync_skills"
ASYNC_MODULE = "bench_chain_async_skills"
REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Budget:
    """How many calls each variant gets per round, and how many interleaved rounds."""

    rounds: int
    engine: dict[int, int]
    direct: int
    langgraph: dict[int, int]
    concurrent_rounds: int
    large_count: int
    load_repeat: int


FULL = Budget(
    rounds=5,
    engine={3: 4000, 10: 1500, 50: 300},
    direct=20000,
    langgraph={3: 200, 10: 60, 50: 12},
    concurrent_rounds=5,
    large_count=500,
    load_repeat=1,
)
QUICK = Budget(
    rounds=2,
    engine={3: 400, 10: 150, 50: 30},
    direct=2000,
    langgraph={3: 30, 10: 12, 50: 4},
    concurrent_rounds=1,
    large_count=100,
    load_repeat=1,
)


# ─── (a) per-call time, and (d) LangGraph, in one process, interleaved ────────────────────


class CallCounter:
    """The `on_event` listener: a plain sync callable, so events are built and delivered."""

    __slots__ = ("events",)

    def __init__(self) -> None:
        self.events = 0

    def __call__(self, event: Any) -> None:
        self.events += 1


SLICES = 20  # turns per round in case (a); see _per_call


def per_call(work: Path, budget: Budget, *, with_langgraph: bool, log: Callable[[str], None]) -> dict[str, Any]:
    from engine import Engine

    root = write_chain_project(work / "chain-sync", STEP_COUNTS, module=SYNC_MODULE)
    engine = Engine.from_dir(root)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module = importlib.import_module(SYNC_MODULE)
    functions = [getattr(module, f"step_{i}") for i in range(max(STEP_COUNTS))]
    return asyncio.run(_per_call(engine, functions, budget, with_langgraph, log))


async def _per_call(engine: Any, functions: list[Callable[..., Any]], budget: Budget, with_langgraph: bool,
                    log: Callable[[str], None]) -> dict[str, Any]:
    import jsonschema_rs

    listener = CallCounter()
    variants: list[tuple[Samples, Callable[[int], Any], int, bool]] = []  # samples, runner, calls, is_async

    events_per_call: dict[int, int] = {}
    for n in STEP_COUNTS:
        tool = chain_tool(n)
        one = CallCounter()
        result = await engine.call_tool(tool, CHAIN_ARGS, on_event=one)
        assert result.ok and result.data["x"] == CHAIN_ARGS["x"] + n, result
        events_per_call[n] = one.events
        chain = functions[:n]

        def engine_call(tool: str = tool) -> Any:
            return engine.call_tool(tool, CHAIN_ARGS, on_event=listener)

        def direct(chain: list[Callable[..., Any]] = chain) -> Any:
            value = CHAIN_ARGS
            for function in chain:
                value = function(value)
            return value

        validator = jsonschema_rs.validator_for(CHAIN_VALUE_SCHEMA)
        validators = [(validator, validator)] * n  # a compiled validator per boundary (same schema)

        def validated(chain: list[Callable[..., Any]] = chain, validators: Any = validators, check: Any = validator) -> Any:
            value = CHAIN_ARGS
            if not check.is_valid(value):
                raise ValueError("arguments")
            for function, (inp, out) in zip(chain, validators, strict=False):
                if not inp.is_valid(value):
                    raise ValueError("input")
                value = function(value)
                if not out.is_valid(value):
                    raise ValueError("output")
            return value

        assert direct()["x"] == validated()["x"] == CHAIN_ARGS["x"] + n
        variants.append((Samples(f"engine.{n}"), engine_call, budget.engine[n], True))
        variants.append((Samples(f"direct.{n}"), direct, budget.direct, False))
        variants.append((Samples(f"validated.{n}"), validated, budget.direct, False))
        if with_langgraph:
            graph = lg.build_chain(chain)
            config = lg.invoke_config(n)
            out = graph.invoke(dict(CHAIN_ARGS), config)
            assert out["x"] == CHAIN_ARGS["x"] + n, out
            out = await graph.ainvoke(dict(CHAIN_ARGS), config)
            assert out["x"] == CHAIN_ARGS["x"] + n, out

            def lg_sync(graph: Any = graph, config: Any = config) -> Any:
                return graph.invoke(dict(CHAIN_ARGS), config)

            def lg_async(graph: Any = graph, config: Any = config) -> Any:
                return graph.ainvoke(dict(CHAIN_ARGS), config)

            variants.append((Samples(f"langgraph_invoke.{n}"), lg_sync, budget.langgraph[n], False))
            variants.append((Samples(f"langgraph_ainvoke.{n}"), lg_async, budget.langgraph[n], True))

    # Warm up every variant, then interleave rounds so background noise hits all alike.
    for _samples, runner, calls, is_async in variants:
        warm = Samples("warmup")
        if is_async:
            await sample_async(runner, max(5, calls // 10), warm)
        else:
            sample_sync(runner, max(5, calls // 10), warm)
    listener.events = 0
    engine_calls = 0
    # Each round is cut into SLICES and the variants take turns slice by slice (a few ms
    # each), so every variant samples the machine's fast and slow spells alike: on a shared
    # VM the speed changes every few hundred ms, and a variant timed in one block could
    # land in a single spell, which skews its ratio to the others.
    for round_no in range(budget.rounds):
        log(f"  (a/d) round {round_no + 1}/{budget.rounds}")
        gc.collect()  # once per round: a full collection per slice would dominate the run
        for part in range(SLICES):
            for samples, runner, calls, is_async in variants:
                share = calls // SLICES + (1 if part < calls % SLICES else 0)
                if not share:
                    continue
                if is_async:
                    await sample_async(runner, share, samples)
                else:
                    sample_sync(runner, share, samples)
                if samples.name.startswith("engine."):
                    engine_calls += share

    by_name = {samples.name: samples for samples, *_ in variants}
    figures: dict[str, Any] = {"variants": {name: s.as_dict() for name, s in by_name.items()}}
    med = {name: s.median_us for name, s in by_name.items()}
    figures["events_per_call"] = events_per_call
    figures["events_seen"] = listener.events
    figures["engine_calls"] = engine_calls
    expected_events = sum(events_per_call[n] * budget.engine[n] * budget.rounds for n in STEP_COUNTS)
    figures["events_ok"] = listener.events == expected_events
    figures["engine_us"] = {n: med[f"engine.{n}"] for n in STEP_COUNTS}
    figures["direct_us"] = {n: med[f"direct.{n}"] for n in STEP_COUNTS}
    figures["validated_us"] = {n: med[f"validated.{n}"] for n in STEP_COUNTS}
    figures["engine_cpu_us"] = {n: by_name[f"engine.{n}"].cpu_us for n in STEP_COUNTS}
    figures["engine_cpu_step_us"] = _slopes(figures["engine_cpu_us"])
    figures["engine_step_us"] = _slopes(figures["engine_us"])
    figures["direct_step_us"] = _slopes(figures["direct_us"])
    figures["validated_step_us"] = _slopes(figures["validated_us"])
    if with_langgraph:
        sync_us = {n: med[f"langgraph_invoke.{n}"] for n in STEP_COUNTS}
        async_us = {n: med[f"langgraph_ainvoke.{n}"] for n in STEP_COUNTS}
        # Ratios use whichever LangGraph entry point is faster: the conservative comparison.
        best = {n: min(sync_us[n], async_us[n]) for n in STEP_COUNTS}
        cpu = {n: min(by_name[f"langgraph_invoke.{n}"].cpu_us, by_name[f"langgraph_ainvoke.{n}"].cpu_us)
               for n in STEP_COUNTS}
        figures["langgraph_cpu"] = {"best_us": cpu, "ratio": {n: cpu[n] / figures["engine_cpu_us"][n] for n in STEP_COUNTS}}
        figures["langgraph"] = {
            "invoke_us": sync_us,
            "ainvoke_us": async_us,
            "best_us": best,
            "step_us": _slopes(best),
            "ratio": {n: best[n] / figures["engine_us"][n] for n in STEP_COUNTS},
        }
    return figures


def _slopes(medians: dict[int, float]) -> dict[str, float]:
    base = STEP_COUNTS[0]
    return {f"{base}->{n}": (medians[n] - medians[base]) / (n - base) for n in STEP_COUNTS[1:]}


# ─── (b) concurrency, each variant in a fresh subprocess ─────────────────────────────────


def concurrent(work: Path, budget: Budget, *, with_langgraph: bool, log: Callable[[str], None]) -> dict[str, Any]:
    root = write_chain_project(work / "chain-async", [3], module=ASYNC_MODULE, sleep=0.010)
    modes = ["bare", "engine"] + (["langgraph"] if with_langgraph else [])
    out: dict[str, Any] = {"calls": 1000, "ideal_ms": 30.0}
    for mode in modes:
        log(f"  (b) {mode}: 1,000 concurrent calls in a fresh process")
        rounds = 1 if mode == "langgraph" else budget.concurrent_rounds  # LangGraph takes seconds per round
        out[mode] = _worker(
            ["concurrent", "--mode", mode, "--dir", str(root), "--module", ASYNC_MODULE,
             "--calls", "1000", "--rounds", str(rounds)]
        )
        out[mode]["median_wall_ms"] = median(out[mode]["wall_ms"])
        out[mode]["median_cpu_ms"] = median(out[mode]["cpu_ms"])
    return out


# ─── (c) load + link of a large generated project ───────────────────────────────────────


def load_link(work: Path, budget: Budget, *, log: Callable[[str], None]) -> dict[str, Any]:
    count = budget.large_count
    root = write_large_project(work / f"large-{count}", count, module_prefix=f"bench_large_{count}")
    files, size = project_size(root)
    log(f"  (c) load + link of {count} tools / {count} skills / {count} workflows ({files} files, {size / 1024:.0f} KiB)")
    figures = _worker(["load", "--dir", str(root), "--repeat", str(budget.load_repeat)])
    kinds: dict[str, int] = {}
    import yaml

    for path in (root / "skills").glob("*.yaml"):
        for spec in (yaml.safe_load(path.read_text(encoding="utf-8"))["skills"] or {}).values():
            kinds[spec["kind"]] = kinds.get(spec["kind"], 0) + 1
    figures.update({"count": count, "files": files, "bytes": size, "skill_kinds": kinds})
    return figures


def _worker(args: list[str]) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "bench.worker", *args],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bench worker {' '.join(args[:3])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
