"""`event_frames`, the one SSE encoder (the hub's frames, joined from pieces, and a replay's of
stored events), writes what the plain encoding writes — the event's dict as JSON on one line —
for the events of a real run and for the odd ones that must take its fallback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import orjson
import pytest

from engine import Engine
from engine.runtime.events import Event, record_sink
from engine.server import sse
from engine.server.sse import event_frames, stored_frames

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_events() -> list[Event]:
    engine = Engine.from_dir(ROOT)
    events: list[Event] = []
    try:
        result = asyncio.run(engine.call_tool("textReport", {"text": "One fox. Two foxes, quick ones.", "topN": 2},
                                              on_event=record_sink(events.append)))
    finally:
        engine.close()
    assert result.ok and len(events) > 10 and all(event.data_json is not None for event in events)
    return events


def plain_frame(event: Event) -> bytes:
    """The frame written the plain way, one event at a time: its whole dict through orjson;
    the standard library's escaped JSON for what orjson refuses."""
    record = event.to_dict()
    try:
        body = orjson.dumps(record, default=str, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        body = json.dumps(record, ensure_ascii=True, separators=(",", ":"), default=str).encode()
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.seq, event.type.encode(), body)


def _parsed(frame: bytes) -> tuple[int, str, dict]:
    lines = frame.decode().split("\n")
    assert lines[0].startswith("id: ") and lines[1].startswith("event: ") and lines[2].startswith("data: ")
    assert frame.endswith(b"\n\n") and len(lines) == 5
    return int(lines[0][4:]), lines[1][7:], json.loads(lines[2][6:])


def test_the_frames_of_a_run_are_the_plain_frames(run_events: list[Event]) -> None:
    expected = [plain_frame(event) for event in run_events]
    assert event_frames(run_events) == expected
    assert event_frames(run_events) == expected  # again, from the kept pieces
    assert stored_frames([event.to_dict() for event in run_events]) == expected  # a replay: the same bytes
    for event, frame in zip(run_events, event_frames(run_events), strict=True):
        seq, kind, body = _parsed(frame)
        assert (seq, kind) == (event.seq, event.type)
        assert body == json.loads(json.dumps(event.to_dict(), default=str))


def test_odd_events_come_out_as_the_plain_frames(run_events: list[Event]) -> None:
    first, second, step_event = run_events[0], run_events[1], next(e for e in run_events if e.step_id and e.skill)
    odd = [
        first._replace(tool_call_id="call_\udc80"),  # a lone surrogate: orjson refuses it, the fallback escapes it
        second,  # back to the pieces after a fallback
        second._replace(data_json=None),  # no encoded data
        second._replace(data_json=None, data={"n": 10**30}),  # data orjson cannot write
        second._replace(seq=5000),  # beyond the numbers kept written
        step_event._replace(step_id='a "quoted"\nstep', skill="é-skill"),  # strings that need escaping
        step_event._replace(step_id="100% done", skill="%s%d%%"),  # names holding `%`
        step_event._replace(step_id=None),
        step_event._replace(skill=None),
        second._replace(tool_call_id=None),
        second._replace(run_id="run_other"),  # another run in the same batch
        second,
    ]
    assert event_frames(odd) == [plain_frame(event) for event in odd]
    assert _parsed(event_frames(odd[:1])[0])[2]["tool_call_id"] == "call_\udc80"
    assert _parsed(event_frames(odd[3:4])[0])[2]["data"] == {"n": 10**30}


def test_the_kept_pieces_stay_bounded(run_events: list[Event], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse, "_MAX_KEPT", 4)
    many = [event._replace(step_id=f"step{at}", skill=f"skill{at}") for at, event in enumerate(run_events * 3)]
    assert event_frames(many) == [plain_frame(event) for event in many]
    assert len(sse._PIECES) <= 6
