"""Events → ready rows: what a spill makes of the events it takes (writer.py), for the writer thread.

Every event reaching here was redacted once, by its Run (or, for a store fed by hand, by the
store's entry, redacting.py), and most bring their data encoded (`Event.data_json`): their
rows are made by C calls only, no Python per event (a spill may run on the event loop's
thread), and Python looks only at the few events that imply rows (rows.py). A run the
dialect packs (SQLite, packing.py) becomes one text.

One bad event never costs other runs theirs: an event without encoded data is encoded on its
own, and only a row that cannot be changes (surrogates replaced, or its data replaced by a
note saying why), the repair counted (failures.py).

Events are read by field name: `event_fields` looks the positions up in `Event._fields` once,
at import, and reads them with one `operator.itemgetter` (a C call per event, as fast as an
index; `attrgetter` of the same names measured ~1.5× slower for the eight fields of a row).
A field added to Event moves no value into the wrong column.
"""

from __future__ import annotations

import operator
import os
from itertools import chain, compress, repeat
from typing import Any, Callable, Iterable, Sequence

import orjson

from ..runtime.events import Event
from ..safety.untrusted import find_problem, scrub_surrogates
from .database import HOST, Database
from .errors import StoreError
from .failures import NOT_RECORDED, Failures
from .rows import EVENT_WIDTH, IMPLYING_TYPES, PACKED, Batch, Implier, json_text

STORED_DEPTH = 200  # data nested deeper is not stored (orjson writes 255 levels, SQLite's JSON reads 1,000)


def event_fields(*names: str) -> Callable[[Event], Any]:
    """A C call that reads the Event fields `names` (a tuple of them, or the one value)."""
    return operator.itemgetter(*map(Event._fields.index, names))


ROW_FIELDS = ("run_id", "seq", "type", "ts", "tool_call_id", "step_id", "skill")  # an event row, but its data
_META = event_fields(*ROW_FIELDS)
_ROW = event_fields(*ROW_FIELDS, "data_json")  # the row with the data's JSON as the Run encoded it (bytes)
_TYPE = event_fields("type")
_DATA_JSON = event_fields("data_json")
_IMPLIES = IMPLYING_TYPES.__contains__
_DECODE = bytes.decode


class RowMaker:
    """Turns events into a Batch of ready rows. Used under the writer's lock (one thread at
    a time): it remembers open calls between batches (its Implier)."""

    def __init__(self, database: Database, failures: Failures) -> None:
        self._pack_run = database.pack_run  # a whole run as one text, or None (the dialect's)
        self._data_bytes = database.DATA_BYTES
        self._failures = failures
        self._implier = Implier(os.getpid(), HOST)

    def ready(self, batch: list[Event], runs: Sequence[list[Event]] = ()) -> Batch:
        """The events (`batch`, and the runs handed over whole) as rows of plain values (data
        as JSON text), and the rows they imply; a run the dialect packs is one text (`packs`).

        Events that bring their data encoded (`data_json`) are made rows by C calls only, the
        data kept as those bytes where the dialect's writer makes them text (`DATA_BYTES`: no
        str built on this thread). A batch with an event that does not (data no fast encoder
        writes) is made row by row, each encoded and repaired if it cannot be (`_repaired_row`).
        """
        out = Batch()
        if runs:
            unpacked = self._pack_runs(runs, out)
            if unpacked:  # before the events that came one by one: a late event of a run is among those
                batch = unpacked + batch
        if self._data_bytes:  # the writer's thread makes the bytes text (no Python object per event here)
            out.events = tuple(chain.from_iterable(map(_ROW, batch)))
            if None in out.events[EVENT_WIDTH - 1 :: EVENT_WIDTH]:  # an event without data_json: row by row
                return self._ready_one_by_one(batch, out)
        else:
            try:
                texts = list(map(_DECODE, map(_DATA_JSON, batch)))
            except TypeError:  # an event without data_json (None): row by row
                return self._ready_one_by_one(batch, out)
            out.events = tuple(chain.from_iterable(map(operator.add, map(_META, batch), zip(texts))))
        out.count = len(batch)
        implying = list(map(_IMPLIES, map(_TYPE, batch)))
        self._imply(compress(batch, implying), compress(range(len(batch)), implying), out)
        out.implied = tuple(out.implied)
        return out

    def _pack_runs(self, runs: Sequence[list[Event]], out: Batch) -> list[Event]:
        """Put the runs the dialect packs into `out.packs` (with the rows they imply); the
        events of the others, in order."""
        rest: list[Event] = []
        packs: list[Any] = []
        whole_tool_run = self._implier.whole_tool_run
        for events in runs:
            if not events:  # taken as it went, all of it (a writer's spill meanwhile)
                continue
            text = self._pack_run(events)
            if text is None:
                rest += events
                continue
            packs += (events[0].run_id, events[-1].seq, text)
            implying = list(compress(events, map(_IMPLIES, map(_TYPE, events))))
            if not whole_tool_run(implying, PACKED, out):
                self._imply(implying, repeat(PACKED), out)
        out.packs = tuple(packs)
        return rest

    def _imply(self, implying: Iterable[Event], indexes: Iterable[int], out: Batch) -> None:
        """The rows implied by the events `implying` (their indexes in `out.events`: `indexes`)."""
        imply = self._implier.imply
        for event, index in zip(implying, indexes, strict=False):
            imply(index, _META(event), event.data, out)

    def _ready_one_by_one(self, batch: list[Event], out: Batch) -> Batch:
        values = out.events = []
        imply = self._implier.imply
        for index, event in enumerate(batch):
            if event.data_json is not None:
                meta, data = _META(event), event.data
                text = event.data_json.decode()
            else:
                row = self._repaired(event)
                meta, data = row[:7], row[7]
                text = json_text(data)
            values += (*meta, text)
            if _IMPLIES(meta[2]):
                imply(index, meta, data, out)
        out.count = len(batch)
        return out.seal()

    def _repaired(self, event: Event) -> tuple[Any, ...]:
        """The event as a row that encodes (data still a value), repaired if need be (see
        `_repaired_row`), the repair counted."""
        fixed, kind = _repaired_row((*_META(event), event.data))
        if kind is not None:
            self._failures.count(kind, 1, f"event {fixed[2]} #{fixed[1]} of run {fixed[0]}")
            if kind == "unencodable":  # its data is gone: whoever flushes hears of it
                self._failures.fail(StoreError(f"an event of run {fixed[0]} could not be stored: {fixed[7][NOT_RECORDED]}"))
        return fixed

    def scrubbed(self, rows: Batch) -> Batch:
        """`rows` with lone surrogates replaced by U+FFFD in every value (counted per event:
        `lone_surrogate`); implied rows are scrubbed alike."""
        fixed = Batch()
        for index in range(rows.count):
            row, changed = scrub_surrogates(tuple(rows.events[index * EVENT_WIDTH : (index + 1) * EVENT_WIDTH]))
            if changed:
                self._failures.count("lone_surrogate", 1, f"event {row[2]} #{row[1]} of run {row[0]}")
            fixed.add_event(row)
        fixed.implied = scrub_surrogates(rows.implied)[0]
        fixed.packs = rows.packs  # orjson wrote them: valid text
        return fixed.seal()


def _repaired_row(row: tuple[Any, ...]) -> tuple[tuple[Any, ...], str | None]:
    """A row that encodes, and the kind of repair it needed (None: none).

    `lone_surrogate`: its lone surrogates became U+FFFD (the event is kept, text marked);
    `unencodable`: its data became `{"not_recorded": why}` (too deep, or anything else).
    """
    if _encodes(row):
        return row, None
    problem = find_problem(row, STORED_DEPTH, numbers=False)
    if problem is not None and "surrogate" in problem.message:
        fixed = tuple(scrub_surrogates(row)[0])
        if _encodes(fixed):
            return fixed, "lone_surrogate"
        problem = find_problem(fixed, STORED_DEPTH, numbers=False) or problem
    why = str(problem) if problem is not None else "it cannot be written as JSON"
    safe = tuple(scrub_surrogates(part)[0] if isinstance(part, str) else part for part in row[:7])
    return (*safe, {NOT_RECORDED: f"this event's data could not be stored: {why}"}), "unencodable"


def _encodes(row: tuple[Any, ...]) -> bool:
    """orjson writes it (so it is at most 255 levels deep: SQLite reads 1,000), or it is no
    deeper than STORED_DEPTH and the standard library writes it (integers beyond 64 bits)."""
    try:
        orjson.dumps(row, default=str, option=orjson.OPT_NON_STR_KEYS)
        return True
    except Exception:  # noqa: BLE001 - look closer
        pass
    if find_problem(row, STORED_DEPTH, numbers=False) is not None:
        return False
    try:
        json_text(row).encode()  # a lone surrogate is no UTF-8
        return True
    except Exception:  # noqa: BLE001 - the caller replaces the data
        return False
