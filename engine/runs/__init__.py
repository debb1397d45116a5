"""A run's life, from open to end, in one package.

A run is what users see (`skillyard runs`, `/v1/runs/{id}`): one tool call, or one agent loop
with its tool calls. Everything about it lives here:

- `run.py`: the `Run` — its ids, gap-free `seq`, redaction once per event, status, result and
  end (the one rule `end_status`), pending approvals and inputs, cancellation;
- `events.py`: the event envelope (`Event`), listeners, and how a record is encoded once;
- `payloads.py`: the data of each event type, typed (what docs/events.md documents);
- `sinks.py`: `RunSink`, what takes every run whole (the run store, the server's hub);
- `live.py`: `LiveRuns`, the registry of live runs and the one sequence each goes through
  (open, deliver, drive, end, clean up). The Engine, the agent loop and the Temporal client
  all run their runs through it.
"""
