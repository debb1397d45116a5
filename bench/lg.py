"""The same chains as LangGraph StateGraphs (only when `langgraph` is importable)."""

from __future__ import annotations

import importlib
from typing import Any, Callable, TypedDict


class ChainState(TypedDict):
    x: int
    label: str


def available() -> str | None:
    """LangGraph's version, or None when it is not installed."""
    try:
        importlib.import_module("langgraph.graph")
    except Exception:  # noqa: BLE001 - any import problem means "not available"
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("langgraph")
    except PackageNotFoundError:
        return "unknown"


def build_chain(functions: list[Callable[..., Any]]) -> Any:
    """START → s0 → s1 → … → END, each node one of the benchmark's step functions."""
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(ChainState)
    for i, function in enumerate(functions):
        graph.add_node(f"s{i}", function)
    graph.add_edge(START, "s0")
    for i in range(1, len(functions)):
        graph.add_edge(f"s{i - 1}", f"s{i}")
    graph.add_edge(f"s{len(functions) - 1}", END)
    return graph.compile()


def invoke_config(steps: int) -> dict[str, Any]:
    # LangGraph stops at 25 supersteps by default; a 50-step chain needs more.
    return {"recursion_limit": steps + 10}
