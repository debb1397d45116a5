"""Every event type has one payload type (engine/runs/payloads.py), docs/events.md lists the
same keys for it, and the events a real run emits hold what their type says."""

from __future__ import annotations

import asyncio
import re
import typing
from pathlib import Path
from typing import Any

from engine import Engine
from engine.runs.events import Event, EventType
from engine.runs.payloads import OPEN, PAYLOADS

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "events.md"
EVENT_TYPES = set(typing.get_args(EventType))


def documented() -> dict[str, tuple[set[str], set[str], bool]]:
    """Each event type's row in docs/events.md: (keys always there, `key?` ones, whether `…` says it is open)."""
    rows: dict[str, tuple[set[str], set[str], bool]] = {}
    for table in re.findall(r"(?m)^\|[^\n]*\|\n\|[-| ]+\|\n(?:\|[^\n]*\|\n)+", DOC.read_text()):
        header, _, *lines = table.strip().split("\n")
        columns = [cell.strip() for cell in header.strip("|").split("|")]
        if "keys" not in columns:
            continue
        where = columns.index("keys")
        for line in lines:
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            kind = re.fullmatch(r"`(\w+)`", cells[0])
            assert kind, f"docs/events.md: a row of a keys table names no event type: {line}"
            keys = re.findall(r"`(\w+)(\??)`", cells[where])
            rows[kind.group(1)] = ({k for k, opt in keys if not opt}, {k for k, opt in keys if opt}, "…" in cells[where])
    return rows


def test_every_event_type_has_a_payload_type_and_a_documented_row() -> None:
    assert set(PAYLOADS) == EVENT_TYPES
    assert set(documented()) == EVENT_TYPES


def test_docs_list_the_keys_of_each_payload_type_and_no_others() -> None:
    for kind, (always, sometimes, open_) in documented().items():
        shape = PAYLOADS[kind]
        assert (always, sometimes) == (set(shape.__required_keys__), set(shape.__optional_keys__)), kind
        assert open_ == (kind in OPEN), kind


def check(event: Event) -> None:
    shape = PAYLOADS[event.type]
    keys = set(event.data)
    missing = set(shape.__required_keys__) - keys
    unknown = keys - set(shape.__required_keys__) - set(shape.__optional_keys__)
    assert not missing, f"{event.type} lacks {sorted(missing)}"
    assert event.type in OPEN or not unknown, f"{event.type} holds undeclared {sorted(unknown)}"


def test_the_events_of_real_runs_hold_what_their_types_say() -> None:
    """The shipped project: a workflow of prompt skills, a forEach workflow, and a scripted
    agent that calls two tools; every event of each is checked against its type."""
    engine = Engine.from_dir(REPO)
    events: list[Event] = []

    async def main() -> None:
        await engine.call_tool("analyzeJobAndGeneratePlan", {"jdText": "Python, PostgreSQL, Kafka."}, on_event=events.append)
        await engine.call_tool("triageFeedback", {"text": "It crashes on start. Love the colours! Does it sync?"},
                               on_event=events.append)
        await engine.call_tool("textReport", {"text": ""}, on_event=events.append)  # an invalid call
        await engine.agent("scripted-demo").run("plan my week", on_event=events.append)

    asyncio.run(main())
    seen: dict[str, Any] = {}
    for event in events:
        check(event)
        seen.setdefault(event.type, event)
    assert {"tool_call_start", "tool_progress_delta", "skill_start", "skill_progress_delta", "skill_result",
            "model_exchange", "tool_call_result", "tool_call_error", "agent_start", "model_call_start",
            "final_answer_delta", "agent_done"} <= set(seen)
    assert any("item_index" in e.data for e in events if e.type == "skill_start")  # a forEach item's
