"""(f) forEach: 1,000 items through one step, and what an item costs next to a plain step.

- wall: `forEach` over 1,000 items whose skill awaits 10 ms, concurrency 50; the ideal is
  1,000 / 50 × 10 ms = 200 ms (target ≤ 1.3× the ideal);
- per-item overhead: the same forEach with a skill that returns at once, per item (1,000
  items minus none: the items come from a step, so argument checks do not count), against
  the overhead of one plain step (10-step minus 3-step straight-line workflow, ÷ 7) of the
  same skill, measured in the same process, interleaved (target ≤ 2×). Judged by thread CPU
  time: a 50 ms call is almost always interrupted on a busy machine, a 100 µs one rarely, so
  wall medians would compare unlike things; the wall figures are printed too.

Events are on (a counting listener), every input and output validated, as in case (a).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from . import TARGETS, Target

TARGETS.update({
    "f.wall": Target("f.wall", "forEach 1,000 × 10 ms at 50, ÷ ideal", 1.3, "×"),
    "f.item": Target("f.item", "forEach per-item ÷ plain-step overhead", 2.0, "×"),
})

ITEMS = 1000
CONCURRENCY = 50
SLEEP = 0.010
MODULE = "bench_foreach_skills"
_SOURCE = """
import asyncio


async def work(input):
    if input["delay"]:
        await asyncio.sleep(input["delay"])
    return {"i": input["i"]}


def make(input):
    return [{"n": k} for k in range(input["count"])]
"""
_SKILL = """
skills:
  work:
    kind: python
    function: bench_foreach_skills:work
    input:
      type: object
      properties: {i: {type: integer}, delay: {type: number}}
      required: [i, delay]
      additionalProperties: false
    output: {type: object, properties: {i: {type: integer}}, required: [i], additionalProperties: false}
  make:
    kind: python
    function: bench_foreach_skills:make
    input: {type: object, properties: {count: {type: integer}}, required: [count], additionalProperties: false}
    output:
      type: array
      items: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}
"""


def write_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{MODULE}.py").write_text(_SOURCE)
    (root / "skills.yaml").write_text(_SKILL)
    params = ("{type: object, properties: {count: {type: integer}, delay: {type: number}}, "
              "required: [count, delay], additionalProperties: false}")
    tools = ["tools:"]
    workflows = ["workflows:"]
    tools += [f"  each:\n    description: forEach.\n    parameters: {params}\n    workflow: each"]
    workflows += [f"  each:\n    steps:\n      - id: make\n        skill: make\n        input: {{count: $toolArgs.count}}\n"
                  f"      - id: each\n        skill: work\n        forEach: $steps.make.output\n"
                  f"        concurrency: {CONCURRENCY}\n        input: {{i: $index, delay: $toolArgs.delay}}"]
    for n in (3, 10):
        tools.append(f"  chain{n}:\n    description: chain.\n    parameters: {params}\n    workflow: chain{n}")
        steps = "".join(f"      - id: s{k}\n        skill: work\n        input: {{i: {k}, delay: $toolArgs.delay}}\n" for k in range(n))
        workflows.append(f"  chain{n}:\n    steps:\n{steps.rstrip()}")
    (root / "tools.yaml").write_text("\n".join(tools) + "\n")
    (root / "workflows.yaml").write_text("\n".join(workflows) + "\n")
    return root


def run(work: Path, *, quick: bool, log: Callable[[str], None]) -> dict[str, Any]:
    from engine import Engine

    root = write_project(work / "foreach")
    sys.path.insert(0, str(root))
    engine = Engine.from_dir(root)
    events = [0]

    def count(event: Any) -> None:
        events[0] += 1

    cpu: dict[str, list[float]] = {}

    async def call(tool: str, arguments: dict[str, Any], key: str = "") -> float:
        start, cpu_start = time.perf_counter_ns(), time.thread_time_ns()
        result = await engine.call_tool(tool, arguments, on_event=count)
        elapsed = time.perf_counter_ns() - start
        cpu.setdefault(key, []).append((time.thread_time_ns() - cpu_start) / 1000)
        assert result.ok, result.error
        return elapsed / 1000  # µs

    async def measure() -> dict[str, Any]:
        rounds = 3 if quick else 7
        chain_calls = 100 if quick else 400
        walls, fast, empty, chain3, chain10 = [], [], [], [], []
        await call("each", {"count": ITEMS, "delay": 0})  # warm up
        for r in range(rounds):
            log(f"  (f) round {r + 1}/{rounds}")
            gc.collect()
            walls.append(await call("each", {"count": ITEMS, "delay": SLEEP}, "wall"))
            fast.append(await call("each", {"count": ITEMS, "delay": 0}, "fast"))
            empty.append(await call("each", {"count": 0, "delay": 0}, "empty"))
            for _ in range(chain_calls):
                chain3.append(await call("chain3", {"count": 0, "delay": 0}, "chain3"))
                chain10.append(await call("chain10", {"count": 0, "delay": 0}, "chain10"))
        med = statistics.median
        per_item = (med(fast) - med(empty)) / ITEMS
        per_step = (med(chain10) - med(chain3)) / 7
        cpu_item = (med(cpu["fast"]) - med(cpu["empty"])) / ITEMS
        cpu_step = (med(cpu["chain10"]) - med(cpu["chain3"])) / 7
        ideal_ms = ITEMS / CONCURRENCY * SLEEP * 1000
        return {
            "items": ITEMS, "concurrency": CONCURRENCY, "sleep_ms": SLEEP * 1000, "ideal_ms": ideal_ms,
            "wall_ms": med(walls) / 1000, "wall_ratio": med(walls) / 1000 / ideal_ms, "wall_cpu_ms": med(cpu["wall"]) / 1000,
            "fast_ms": med(fast) / 1000, "empty_us": med(empty),
            "per_item_us": per_item, "per_step_us": per_step, "wall_item_ratio": per_item / per_step,
            "cpu_item_us": cpu_item, "cpu_step_us": cpu_step, "item_ratio": cpu_item / cpu_step,
        }

    return asyncio.run(measure())


def print_report(f: dict[str, Any], verdict: Callable[[str, float, str], str]) -> None:
    print()
    print(f"(f) forEach over {f['items']:,} items, concurrency {f['concurrency']}, events on, every boundary validated")
    print(f"    skill awaits {f['sleep_ms']:.0f} ms: wall {f['wall_ms']:.1f} ms (ideal {f['ideal_ms']:.0f} ms),"
          f" of which the engine's CPU {f['wall_cpu_ms']:.1f} ms")
    print(f"    skill returns at once: {f['fast_ms']:.1f} ms for {f['items']:,} items ({f['empty_us']:.0f} µs with none)"
          f" → {f['per_item_us']:.2f} µs per item; one plain step {f['per_step_us']:.2f} µs (10-step − 3-step ÷ 7)")
    print(f"    by thread CPU time (not inflated by other processes' turns): {f['cpu_item_us']:.2f} µs per item,"
          f" {f['cpu_step_us']:.2f} µs per plain step; by wall time {f['wall_item_ratio']:.1f}×")
    print(verdict("f.wall", f["wall_ratio"], f"({f['wall_ms']:.1f} ms)"))
    print(verdict("f.item", f["item_ratio"], f"(CPU: {f['cpu_item_us']:.2f} µs per item vs {f['cpu_step_us']:.2f} µs per step)"))
