"""The store's entry for events no Run redacted: a store fed by hand (`Store.listener` of a store
opened without `redacted_events=True`).

Redaction happens once. An Engine's runs redact their events in `Run.emit` and hand them to the
writer directly (`Store.for_run`), and a Temporal worker's activities redact the events they
record (its store is opened with `redacted_events=True`); neither passes here. Events that come
from anywhere else are redacted here, at the boundary, before they reach the writer: by key,
and by value with the run's own scrubber (a value redacted once is hidden wherever it shows up
later in that run), which is forgotten when the run ends. A tool call's arguments given as a
model's raw JSON text are parsed first, or shown as `[unparsed arguments: N chars]`. The
redacted data is encoded here, as a Run would (`Event.data_json`).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from ..runs.events import RUN_ENDING_EVENTS, Event, encode_data
from ..runs.payloads import ToolCallStart
from ..safety.redaction import Redactor, RunScrubber, unparsed_arguments
from .errors import StoreError
from .failures import NOT_RECORDED, Failures


class RedactingListener:
    """Redacts each event, then passes it on to `listener` (the writer's)."""

    wants_records = True  # a record sink (runtime/events.py): what it passes on brings its data encoded

    def __init__(self, redactor: Redactor, listener: Callable[[Event], None], failures: Failures) -> None:
        self._redactor = redactor
        self._listener = listener
        self._failures = failures
        self._scrubbers: dict[str, RunScrubber] = {}  # run_id → its redaction state, until the run ends
        self._run_tools: dict[str, str | None] = {}  # run_id → the call that owns it (to know when it ends)

    def __call__(self, event: Event) -> None:
        try:
            data = self._redact(event)
        except Exception as exc:  # noqa: BLE001 - e.g. data nested past the recursion limit: this event only
            data = {NOT_RECORDED: f"this event's data could not be redacted: {type(exc).__name__}"}
            self._failures.count("unencodable", 1, f"event {event.type} #{event.seq} of run {event.run_id}")
            self._failures.fail(StoreError(f"an event of run {event.run_id} could not be stored: {data[NOT_RECORDED]}"))
        self._follow(event)
        self._listener(event._replace(data=data, data_json=encode_data(data)))

    def _redact(self, event: Event) -> Any:
        data = event.data
        if event.type == "tool_call_start":
            start: ToolCallStart = data
            arguments = start.get("arguments")  # from anywhere: it may lack them
            if isinstance(arguments, (str, bytes)):  # a model's raw JSON text: redact what it says, or show none
                try:
                    data = {**data, "arguments": json.loads(arguments)}
                except ValueError:
                    data = {**data, "arguments": unparsed_arguments(arguments)}
        scrub = self._scrubbers.get(event.run_id)
        if scrub is None:
            scrub = self._scrubbers[event.run_id] = self._redactor.for_run()
        return scrub(data)

    def _follow(self, event: Event) -> None:
        """Note the call that opens a run, and forget the run's redaction state when it ends."""
        kind = event.type
        if kind == "tool_call_start" and event.seq == 1:
            self._run_tools[event.run_id] = event.tool_call_id
        elif kind in RUN_ENDING_EVENTS and ((kind == "agent_done" and event.step_id is None)  # not an agent step's end
                                            or self._run_tools.get(event.run_id, "") == event.tool_call_id):
            self._run_tools.pop(event.run_id, None)
            self._scrubbers.pop(event.run_id, None)
