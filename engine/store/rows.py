"""Ready rows: what the store writes for an event, and the rows that events imply, in Python.

The database receives plain column values: an event's row is (run_id, seq, type, ts,
tool_call_id, step_id, skill, data as JSON text), its data taken from the event's record
(encoded once by the Run) when there is one. A few event types imply rows of other tables
(IMPLYING_TYPES): a run's first `tool_call_start` or its `agent_start` open the run, a
terminal tool event writes a tool log and ends the run it started, `agent_done` ends an
agent run (both by the runs' one end rule, `end_status` in engine/runtime/run.py),
`model_exchange` keeps a model call for replay. `Implier` computes those rows
from the event's data (the same data the event row holds), so the database parses no JSON.
A run that starts and ends within one spill is written once, finished: its end is put into
the row that opens it (no second statement to update it, nor its `status` index twice).

A tool log's tool and input come from its call's `tool_call_start`, remembered here until
the call ends (at most MAX_OPEN_CALLS calls); a start this process did not see (another
process's, or forgotten) is looked up in the events table by the statement (schema.py).
"""

from __future__ import annotations

import json
from itertools import chain
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import orjson

from ..runtime.run import end_status, stop_code

if TYPE_CHECKING:
    from ..runtime.events import Event

RUN_OPENING_TYPES = ("tool_call_start", "agent_start")  # an event 1 of these types writes its run's row (Implier)
IMPLYING_TYPES = frozenset({"tool_call_start", "agent_start", "agent_done", "tool_call_result", "tool_call_error",
                            "model_exchange"})
TOOL_LOG_OUTPUT_CHARS = 10_000
MAX_OPEN_CALLS = 100_000  # calls whose start is remembered for their tool log; older ones are looked up

# The implied statements, in the order they run in a batch's transaction (schema.implied_statements)
RUN_START, AGENT_END, TOOL_LOG, TOOL_LOG_LOOKUP, TOOL_END, EXCHANGE = (
    "run_start", "agent_end", "tool_log", "tool_log_lookup", "tool_end", "exchange")
IMPLIED_ORDER = (RUN_START, AGENT_END, TOOL_LOG, TOOL_LOG_LOOKUP, TOOL_END, EXCHANGE)

WIDTHS = {RUN_START: 12, AGENT_END: 6, TOOL_LOG: 9, TOOL_LOG_LOOKUP: 13, TOOL_END: 7, EXCHANGE: 9}  # parameters per row
EVENT_WIDTH = 8  # run_id, seq, type, ts, tool_call_id, step_id, skill, data
PACKED = -1  # the event index of an implied row whose event is packed in its run's row
Row = tuple[Any, ...]


class Batch:
    """The ready rows of some events, in two flat sequences: a few objects whatever the size.

    Rows held as tuples (or lists) until the writer commits them would be allocations that
    live on and set off the garbage collector; and a collection walks every item of a young
    list. So a finished batch holds two flat tuples (`seal`) of strings, numbers, None and
    (an event's data as the Run encoded it, for a backend that takes bytes) bytes:
    the collector stops tracking such a tuple the first time it meets it, and never walks it
    again.

    A backend that packs runs (SQLite, packing.py) gets a whole run's events as one text in
    `packs`; their implied rows name no event (index PACKED)."""

    __slots__ = ("events", "count", "implied", "packs")

    def __init__(self) -> None:
        self.events: list[Any] | tuple[Any, ...] = []  # EVENT_WIDTH values per event
        self.count = 0  # events (in `events`)
        self.implied: list[Any] | tuple[Any, ...] = []  # per implied row: statement name, index of its event, WIDTHS[name] values
        self.packs: tuple[Any, ...] = ()  # per packed run: run_id, its last seq, its events as one JSON text

    def seal(self) -> "Batch":
        """Done adding: the values become tuples (see the class)."""
        self.events, self.implied = tuple(self.events), tuple(self.implied)
        return self

    def add_event(self, row: Row) -> None:
        self.events += row  # type: ignore[operator]  # a list until sealed (+= extends it), never a tuple here
        self.count += 1

    def add_implied(self, index: int, name: str, params: Row) -> None:
        self.implied += (name, index, *params)  # type: ignore[operator]  # a list until sealed, as above

    @classmethod
    def joined(cls, parts: "list[Batch]") -> "Batch":
        """One sealed batch of `parts`, in order (event indexes shifted after the earlier parts').
        Runs on the writer's thread holding the GIL: one pass, slices of the parts' values."""
        out = cls()
        out.events = tuple(chain.from_iterable(part.events for part in parts))
        out.packs = tuple(chain.from_iterable(part.packs for part in parts))
        implied: list[Any] = []
        for part in parts:
            offset, values, at = out.count, part.implied, 0
            if not offset:  # the first part's indexes stay
                implied += values
            else:
                while at < len(values):
                    end = at + 2 + WIDTHS[values[at]]
                    index = values[at + 1]
                    implied += (values[at], index if index == PACKED else index + offset)
                    implied += values[at + 2 : end]
                    at = end
            out.count += part.count
        out.implied = tuple(implied)
        return out

    def each_implied(self) -> "list[tuple[str, int, Sequence[Any]]]":
        out: list[tuple[str, int, Sequence[Any]]] = []
        values, at = self.implied, 0
        while at < len(values):
            name, index, width = values[at], values[at + 1], WIDTHS[values[at]]
            out.append((name, index, values[at + 2 : at + 2 + width]))
            at += 2 + width
        return out

    def implied_by_statement(self) -> "list[tuple[str, Iterator[Sequence[Any]]]]":
        """The implied rows of each statement present, in IMPLIED_ORDER, each row made only as
        the database takes it (a generator: nothing piles up for the garbage collector)."""
        present = set(self.implied[at] for at in self._starts())
        return [(name, self._rows_of(name)) for name in IMPLIED_ORDER if name in present]

    def implied_flat(self) -> "list[tuple[str, Sequence[Any]]]":
        """The implied rows of each statement present, in IMPLIED_ORDER, as one flat list of
        values per statement (WIDTHS[name] per row): one pass, for multi-row statements."""
        flat: dict[str, list[Any]] = {}
        values, at = self.implied, 0
        while at < len(values):
            name = values[at]
            end = at + 2 + WIDTHS[name]
            flat.setdefault(name, []).extend(values[at + 2 : end])
            at = end
        return [(name, flat[name]) for name in IMPLIED_ORDER if name in flat]

    def _starts(self) -> "Iterator[int]":
        values, at = self.implied, 0
        while at < len(values):
            yield at
            at += 2 + WIDTHS[values[at]]

    def _rows_of(self, name: str) -> "Iterator[Sequence[Any]]":
        values, width = self.implied, WIDTHS[name]
        for at in self._starts():
            if values[at] == name:
                yield values[at + 2 : at + 2 + width]

    def one(self, index: int) -> "Batch":
        """A batch of the event at `index` alone, with the rows it implies."""
        single = Batch()
        single.add_event(tuple(self.events[index * EVENT_WIDTH : (index + 1) * EVENT_WIDTH]))
        for name, event, params in self.each_implied():
            if event == index:
                single.add_implied(0, name, tuple(params))
        return single.seal()


def json_text(value: Any) -> str:
    """A value as the JSON text the store keeps (orjson's; the standard library's for what orjson refuses)."""
    if value is None:  # a call's usage, most often: no encoder needed
        return "null"
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):  # e.g. integers beyond 64 bits
        try:
            return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"), allow_nan=False)
        except ValueError:  # NaN or infinity next to such an integer: keep its text
            return json.dumps(repr(value), ensure_ascii=False)


def _scalar(value: Any) -> str | None:
    """A JSON value as SQL text (what `->>` gives): a string as is, anything else as JSON."""
    return value if value is None or isinstance(value, str) else json_text(value)


def _message(value: Any) -> str:
    return "None" if value is None else value if isinstance(value, str) else json_text(value)


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


# Where a run's end (status, finished_at, output, error, usage) goes in a RUN_START row:
# (run_id, kind, name, status, started_at, finished_at, input, output, error, usage, pid, host)
_RUN_END_COLUMNS = (3, 5, 7, 8, 9)
_RUNNING: Row = ("running", None, None, None, None)  # the end of a run not ended yet

_AGENT = "\x00agent"  # what opened an agent run, in Implier._opened (no call id looks like it)


class Implier:
    """Turns implying events into the rows they imply; remembers open calls between batches.

    Used by one thread at a time (the store's spill, under its lock)."""

    def __init__(self, pid: int, host: str) -> None:
        self.pid, self.host = pid, host
        self._calls: dict[tuple[str, str | None], tuple[str | None, str]] = {}  # (run, call) → (tool, arguments JSON)
        self._batch: Batch | None = None  # the batch being filled, and the runs it opens: run → (its call, where its row is)
        self._opened: dict[str, tuple[str | None, int]] = {}

    def imply(self, index: int, row: Row, data: Any, out: Batch) -> None:
        """Append the rows that the event `row` (whose data is `data`) implies to `out`."""
        run_id, seq, kind, ts, call = row[0], row[1], row[2], row[3], row[4]
        if kind == "tool_call_start":
            tool, arguments = _get(data, "tool"), json_text(_get(data, "arguments"))
            self._remember(run_id, call, _scalar(tool), arguments)
            if seq == 1:
                self._open_run(index, out, run_id, call, self._run_row(run_id, "tool", _scalar(tool), ts, arguments))
        elif kind == "agent_start" and row[5] is None:  # an agent step's own (with its step_id) opens nothing
            self._open_run(index, out, run_id, _AGENT,
                           self._run_row(run_id, "agent", _scalar(_get(data, "model")), ts, json_text(_get(data, "input"))))
        elif kind == "agent_done" and row[5] is None:  # an agent step's end is not its run's
            code = stop_code(_get(data, "stop_reason"))
            error = None if code is None else json_text({"code": code, "message": _get(data, "error")})
            end = (end_status(code), ts, json_text(_get(data, "answer")), error, json_text(_get(data, "usage")))
            if not self._close_run(out, run_id, _AGENT, end):
                out.add_implied(index, AGENT_END, (*end, run_id))
        elif kind == "model_exchange":
            attempt = _get(data, "attempt")
            out.add_implied(index, EXCHANGE, (
                run_id, seq, call, row[5], row[6], _scalar(_get(data, "model")),
                attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
                json_text(_get(data, "messages")), _scalar(_get(data, "response")) or "",
            ))
        elif kind == "tool_call_result" or kind == "tool_call_error":
            self._end_call(index, row, data, out)

    def _run_row(self, run_id: str, kind: str, name: str | None, started: int, input: str, end: Row = _RUNNING) -> Row:
        """A RUN_START row: the run as it starts (`end`: _RUNNING), or already ended (`end` as
        _RUN_END_COLUMNS orders it)."""
        status, finished, output, error, usage = end
        return (run_id, kind, name or "?", status, started, finished, input, output, error, usage, self.pid, self.host)

    def _open_run(self, index: int, out: Batch, run_id: str, call: str | None, params: Row) -> None:
        """The row that opens a run (RUN_START), noted so that an end in the same batch can finish it."""
        if out is not self._batch:  # a new batch: the runs of the last one are written (or being written)
            self._batch, self._opened = out, {}
        self._opened[run_id] = (call, len(out.implied))
        out.add_implied(index, RUN_START, params)

    def _close_run(self, out: Batch, run_id: str, call: str | None, end: Row, *, guarded: bool = False) -> bool:
        """Put a run's end (status, finished_at, output, error, usage) into the row that opens it,
        if that row is in `out` and `call` opened the run. True: nothing more to write for
        the end — also, if `guarded` (a tool call's end, whose statement checks that the
        run's event 1 is this call's start), when the run was opened in `out` by another."""
        opened = self._opened.get(run_id) if out is self._batch else None
        if opened is None:
            return False
        opener, at = opened
        if opener != call:
            return guarded  # event 1 is another call's start or an agent_start: the statement would change nothing
        if at < 0:  # this call ended the run already (a second end): its statement, as ever
            return False
        at += 2  # the row's values, after its statement name and event index
        implied = out.implied
        for column, value in zip(_RUN_END_COLUMNS, end, strict=True):
            implied[at + column] = value  # type: ignore[index]  # a list until sealed, as in Batch
        self._opened[run_id] = (opener, -1)
        return True

    def _remember(self, run_id: str, call: str | None, tool: str | None, arguments: str) -> None:
        calls = self._calls
        calls[(run_id, call)] = (tool, arguments)
        if len(calls) > MAX_OPEN_CALLS:  # calls that never ended: the oldest go (their log looks the start up)
            del calls[next(iter(calls))]

    def _end_call(self, index: int, row: Row, data: Any, out: Batch) -> None:
        """A tool log for the call, and the end of the run if the call is the run's own (the
        statement checks that its `tool_call_start` is the run's event 1)."""
        run_id, seq, kind, ts, call = row[0], row[1], row[2], row[3], row[4]
        tool, arguments = self._calls.pop((run_id, call), (None, None))
        log, end, duration = _call_end(kind, ts, data)
        if arguments is not None:  # run_id, tool_call_id, tool, input, output, status, error_message, duration_ms, created_at
            out.add_implied(index, TOOL_LOG, (run_id, "" if call is None else call, tool or "?", arguments, *log, duration, ts))
        else:  # the call's start is looked up in events (run_id, seq, tool_call_id: twice)
            out.add_implied(index, TOOL_LOG_LOOKUP, (run_id, "" if call is None else call, run_id, seq, call, run_id, seq, call,
                                                     *log, duration, ts))
        if not self._close_run(out, run_id, call, end, guarded=True):
            out.add_implied(index, TOOL_END, (*end, run_id, call))

    def whole_tool_run(self, implying: "list[Event]", index: int, out: Batch) -> bool:
        """The rows of a whole tool run (its Events) whose only implying events are its call's
        start (event 1) and end, as `imply` makes them from the two (most calls): its row,
        written finished, and its tool log. False (nothing added) for any other run."""
        if len(implying) != 2:
            return False
        start, end = implying
        kind, call = end.type, start.tool_call_id
        if start.type != "tool_call_start" or start.seq != 1 or end.tool_call_id != call or (
                kind != "tool_call_result" and kind != "tool_call_error"):
            return False
        run_id, data, ts = start.run_id, start.data, end.ts
        tool, arguments = _scalar(_get(data, "tool")), json_text(_get(data, "arguments"))
        log, ended, duration = _call_end(kind, ts, end.data)
        out.add_implied(index, RUN_START, self._run_row(run_id, "tool", tool, start.ts, arguments, ended))
        out.add_implied(index, TOOL_LOG, (run_id, "" if call is None else call, tool or "?", arguments, *log, duration, ts))
        return True


def _call_end(kind: str, ts: int, data: Any) -> tuple[Row, Row, float | None]:
    """What a call's terminal event says: its tool log's (output, status, error_message), the
    end of its run (status, finished_at, output, error, usage), its duration."""
    metadata = _get(data, "metadata")
    duration = _get(metadata, "duration_ms")
    duration = float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None
    usage = json_text(_get(metadata, "usage"))
    if kind == "tool_call_result":
        output = json_text(_get(data, "data"))
        return (output[:TOOL_LOG_OUTPUT_CHARS], "success", None), (end_status(None), ts, output, None, usage), duration
    error = _get(data, "error")
    code = _get(error, "code")
    log = (None, "timeout" if code == "timeout" else "error", f"{_message(code)}: {_message(_get(error, 'message'))}")
    status = end_status(code if isinstance(code, str) else "error")  # an error event without a code still ended in error
    return log, (status, ts, None, "{}" if error is None else json_text(error), usage), duration
