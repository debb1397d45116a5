"""Python skills of the `triageFeedback` tool: split feedback into items, classify and count them.

Plain keyword rules, no model: the example runs offline and gives the same answer every time.
"""

from __future__ import annotations

import re
from typing import Any

_SPLIT = re.compile(r"(?:\n\s*[-*•]\s*|\n{2,}|(?<=[.!?])\s+(?=[A-Z]))")
_BUG = re.compile(r"\b(crash\w*|bug\w*|broken|error\w*|fail\w*|freez\w*|slow|wrong|cannot|can't|doesn't|does not)\b", re.I)
_QUESTION = re.compile(r"\?\s*$|^(how|why|what|when|where|can|could|is|are|do|does)\b", re.I)


def split_feedback(input: dict[str, Any]) -> dict[str, Any]:
    """One item per bullet, paragraph or sentence; empty pieces dropped."""
    pieces = [piece.strip(" \t\n-*•") for piece in _SPLIT.split(input["text"])]
    return {"items": [{"text": piece} for piece in pieces if piece], "source": input.get("source", "text")}


def classify_one(input: dict[str, Any]) -> dict[str, Any]:
    text: str = input["text"]
    kind = "bug" if _BUG.search(text) else "question" if _QUESTION.search(text) else "praise"
    summary = text if len(text) <= 80 else text[:77].rstrip() + "…"
    return {"kind": kind, "summary": summary, "position": input["position"]}


def count_kinds(input: dict[str, Any]) -> dict[str, Any]:
    counts = {"bug": 0, "praise": 0, "question": 0}
    for item in input["items"]:
        counts[item["kind"]] += 1
    return {"total": len(input["items"]), **counts}


def pick_bugs(input: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in input["items"] if item["kind"] == "bug"]
