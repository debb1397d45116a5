"""`python -m bench`: the performance benchmark of skillyard (see docs/performance.md).

Cases, all measured in the same run so the ratios compare like with like:

(a) per-call time of `Engine.call_tool` (router + an n-step workflow of trivial python
    skills, events on, every boundary validated) at 3, 10 and 50 steps, against calling the
    python functions directly (and a bare loop that validates with jsonschema-rs);
(b) 1,000 concurrent calls of the 3-step workflow whose skills each await 10 ms: wall time
    against the ideal 30 ms, and peak RSS, each in a fresh subprocess;
(c) load + link of a generated project of 500 tools, 500 skills and 500 workflows;
(d) when `langgraph` is importable (the `bench` extra), the same chains as a LangGraph
    StateGraph, and the ratios.

Targets come from issue 2 item 12; every figure is printed with its target and PASS/MISS.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    key: str
    label: str
    limit: float
    unit: str
    higher_is_better: bool = False

    def passes(self, value: float) -> bool:
        return value >= self.limit if self.higher_is_better else value <= self.limit

    def describe(self) -> str:
        gap = "" if self.unit == "×" else " "
        return f"{'≥' if self.higher_is_better else '≤'} {self.limit:g}{gap}{self.unit}"


TARGETS: dict[str, Target] = {
    t.key: t
    for t in (
        Target("a.call3", "3-step call, median", 60, "µs"),
        Target("a.step", "per added step, median (3→50)", 15, "µs"),
        Target("a.step10", "per added step, median (3→10)", 15, "µs"),
        Target("d.ratio", "LangGraph ÷ engine, 3-step call", 10, "×", higher_is_better=True),
        Target("b.wall", "1,000 concurrent calls, wall", 60, "ms"),
        Target("b.rss", "1,000 concurrent calls, peak RSS", 64, "MiB"),
        Target("c.load", "load + link 500/500/500", 1000, "ms"),
    )
}
