"""A finished run's events as one JSON text: what the SQLite writer stores instead of a row per event.

The Engine hands the store each of its runs whole, at the run's end (`Writer.open_buffer`:
the run's events go into a list of its own, with no Python call per event). SQLite keeps
such a run's events in the run's own row (`runs.packed_events`): one value instead of some
15 rows and their index entries, which were most of what SQLite did per call
(bench.request_cost). The view `events` (schema.py, migration 11) shows them as rows beside
the rows of `event_rows` (the events of runs written as they went, of stores fed event by
event, and any event of a run after its end), so SQL reads every event as before;
`SqliteDatabase.events` reads the packed text directly (`unpacked`).

A packed event is the array [seq, type, ts, tool_call_id, step_id, skill, data], its data the
JSON the Run encoded, put in as it is (`orjson.Fragment`: not parsed, not encoded again).
Events are read by field name (a field added to Event changes nothing here).

A run still going after HOLD_BACK_MS (one waiting for an approval) is not kept waiting:
the writer takes its events as they come, as rows (a SQLite store's; a PostgreSQL store,
whose other replicas follow runs as they go, waits for none).
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Any, Sequence

import orjson

from ..runtime.events import Event
from .rows import RUN_OPENING_TYPES, RUN_START, WIDTHS

HOLD_BACK_MS = 200  # a run in flight this long is no longer kept for its end: its events are written as they come

_RUN_WIDTH = WIDTHS[RUN_START]
_FRAGMENT = orjson.Fragment
_DUMPS = orjson.dumps


def pack_run(events: list[Event]) -> str | None:
    """A whole run's events (all of them: seq 1, 2, … n, event 1 opening its row) as one JSON
    text; None when they are not all here, when one of them has no encoded data (the store's
    fallback encodes it, as a row) or an id is no valid text. One pass over the events, one
    C call to encode."""
    first = events[0]
    if first.seq != 1 or first.type not in RUN_OPENING_TYPES or events[-1].seq != len(events) or not first.run_id.isascii():
        return None  # its first events went as rows (it ran past HOLD_BACK_MS), some came from elsewhere; no run row; an odd id
    try:
        return _DUMPS([(e.seq, e.type, e.ts, e.tool_call_id, e.step_id, e.skill, _FRAGMENT(e.data_json))
                       for e in events]).decode()
    except (TypeError, orjson.JSONEncodeError):
        return None


def with_packs(run_start_values: Sequence[Any], packs: Sequence[Any]) -> list[Any]:
    """Flat RUN_START values with each run's packed events (None: not packed) after its own;
    `packs` as Batch.packs holds them (run_id, last seq, text per run)."""
    texts = dict(zip(packs[0::3], packs[2::3], strict=True))
    columns = [run_start_values[at::_RUN_WIDTH] for at in range(_RUN_WIDTH)]
    return list(chain.from_iterable(zip(*columns, map(texts.get, columns[0]), strict=True)))


def unpacked(run_id: str, text: str, after_seq: int = 0) -> list[tuple[Any, ...]]:
    """The packed events of `run_id` after `after_seq`, as event rows (type, run_id, seq, ts,
    tool_call_id, step_id, skill, data), the data decoded."""
    return [(kind, run_id, seq, ts, call, step, skill, data)
            for seq, kind, ts, call, step, skill, data in json.loads(text) if seq > after_seq]
