"""A finished run's events as one JSON text: what the SQLite writer stores instead of a row per event.

A run that starts and ends within one of the writer's batches (most tool calls: rows.py then
inserts its run row already finished) has every event of it in that batch. SQLite keeps
them in the run's own row (`runs.packed_events`): one value instead of some 15 rows and their
index entries, which were most of what SQLite did per call (bench.request_cost). The view
`events` (schema.py, migration 11) shows them as rows beside the rows of `event_rows` (the
events of runs that span batches, and any event of a run after its batch), so SQL reads
every event as before; `Store.events` reads the packed text directly (`unpacked`).

A packed event is the array [seq, type, ts, tool_call_id, step_id, skill, data], its data the
JSON the Run encoded, put in as it is (`orjson.Fragment`: not parsed, not encoded again).

So that runs reach a batch whole, a spill leaves queued the events of the runs that started
in it less than HOLD_BACK_MS ago and have not ended (`hold_back_starting_runs`): a spill
otherwise cuts through the runs in flight (under 100 concurrent streamed calls, three runs
in four).
"""

from __future__ import annotations

import json
import operator
from itertools import chain, compress, groupby
from typing import Any, Sequence

import orjson

from ..events import RUN_ENDING_EVENTS, Event
from .rows import EVENT_WIDTH, WIDTHS, RUN_START

HOLD_BACK_MS = 200  # a spill leaves queued the events of runs started this recently and not ended

_W = EVENT_WIDTH
_RUN_WIDTH = WIDTHS[RUN_START]
_FRAGMENT = orjson.Fragment
_DUMPS = orjson.dumps
_TYPE, _RUN_ID, _SEQ, _TS = (operator.itemgetter(at) for at in range(4))  # of an Event
_IS_FIRST = (1).__eq__  # of a seq: the run's first event
_ENDS_A_RUN = RUN_ENDING_EVENTS.__contains__


def hold_back_starting_runs(batch: list[Event], now_ms: int) -> tuple[list[Event], list[Event]]:
    """`batch` split into the events to spill now and those to leave queued: the events of
    runs that started in it less than HOLD_BACK_MS before `now_ms` and have not ended. A
    longer run (one waiting for an approval) is written as it goes after that. C calls but a
    dict per starting run: this runs on the event loop's thread every SPILL_EVENTS events."""
    run_ids = list(map(_RUN_ID, batch))
    first = list(map(_IS_FIRST, map(_SEQ, batch)))
    starts = dict(zip(compress(run_ids, first), compress(map(_TS, batch), first)))
    for ended in compress(run_ids, map(_ENDS_A_RUN, map(_TYPE, batch))) if starts else ():
        starts.pop(ended, None)
    recent = now_ms - HOLD_BACK_MS
    try:
        starting = {run_id for run_id, ts in starts.items() if ts >= recent}
    except TypeError:  # a `ts` that is no number (a store fed by hand): nothing is held
        return batch, []
    if not starting:
        return batch, []
    held = list(map(starting.__contains__, run_ids))
    return list(compress(batch, map(operator.not_, held))), list(compress(batch, held))


def finished_runs(run_start_values: Sequence[Any]) -> set[str]:
    """The runs whose row (flat RUN_START values, rows.py) is written already finished: they
    started and ended within the batch."""
    ids, statuses = run_start_values[0::_RUN_WIDTH], run_start_values[3::_RUN_WIDTH]
    return set(compress(ids, map("running".__ne__, statuses)))


def pack_events(events: Sequence[Any], finished: set[str]) -> tuple[Sequence[Any], dict[str, str]]:
    """Split a batch's event values (EVENT_WIDTH per event, in arrival order): the JSON text of
    the events of each run of `finished` whose first event here is its event 1 (a new run:
    its row cannot exist yet, so the text is written with it), and the values of every other
    event, still in arrival order. Python runs per run, not per event."""
    run_ids = events[0::_W]
    if not finished or finished.isdisjoint(run_ids):
        return events, {}
    packed = list(zip(events[1::_W], events[2::_W], events[3::_W], events[4::_W], events[5::_W], events[6::_W],
                      map(_FRAGMENT, events[7::_W])))
    order = sorted(range(len(run_ids)), key=run_ids.__getitem__)  # stable: each run's events stay in seq order
    packs: dict[str, str] = {}
    kept: list[int] = []
    for run_id, group in groupby(order, run_ids.__getitem__):
        indexes = list(group)
        if run_id in finished and packed[indexes[0]][0] == 1:
            packs[run_id] = _DUMPS(list(map(packed.__getitem__, indexes))).decode()
        else:
            kept += indexes
    if not kept:
        return (), packs
    kept.sort()
    return list(chain.from_iterable(events[at * _W : at * _W + _W] for at in kept)), packs


def with_packs(run_start_values: Sequence[Any], packs: dict[str, str]) -> list[Any]:
    """Flat RUN_START values with each run's packed events (None: not packed) after its own."""
    columns = [run_start_values[at::_RUN_WIDTH] for at in range(_RUN_WIDTH)]
    return list(chain.from_iterable(zip(*columns, map(packs.get, columns[0]))))


def unpacked(run_id: str, text: str, after_seq: int = 0) -> list[tuple[Any, ...]]:
    """The packed events of `run_id` after `after_seq`, as event rows (type, run_id, seq, ts,
    tool_call_id, step_id, skill, data), the data decoded."""
    return [(kind, run_id, seq, ts, call, step, skill, data)
            for seq, kind, ts, call, step, skill, data in json.loads(text) if seq > after_seq]
