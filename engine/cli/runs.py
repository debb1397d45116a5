"""`skillyard runs …` and `skillyard logs`: the run store from the command line."""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable

from ..errors import ConfigError, UsageError

if TYPE_CHECKING:  # building the parser (`--help`) loads none of what a command runs
    from ..store import RunRecord, Store

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(text: str, flag: str) -> int:
    """`30m`, `1h`, `30d` → milliseconds."""
    match = _AGE.match(text)
    if not match:
        raise UsageError(f"{flag} {text!r}: write an age such as 30m, 1h, 7d")
    return int(float(match.group(1)) * _AGE_UNITS[match.group(2)] * 1000)


def _count(text: str) -> int:
    """`--limit N`: a whole number of at least 1 (argparse turns the ValueError into exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a number of entries to list; give 1 or more")
    return value


def add_store_parsers(commands: Any) -> None:
    runs = commands.add_parser("runs", help="recent runs; show, export, replay or prune them")
    runs.add_argument("--dir", default=".", help="project directory")
    runs.add_argument("--tool", help="only runs of this tool (or agent model)")
    runs.add_argument("--status", choices=("running", "ok", "error", "cancelled", "interrupted"))
    runs.add_argument("--since", help="only runs started within this age, e.g. 1h, 7d")
    runs.add_argument("--limit", type=_count, default=20, help="most runs to list (default 20)")
    runs.add_argument("--batch", metavar="ID", help="only the runs of this batch's cases (`skillyard batch`)")
    runs.add_argument("--json", action="store_true", help="print JSON")
    runs.set_defaults(handler=cmd_runs)
    sub = runs.add_subparsers(dest="action", metavar="ACTION")
    show = sub.add_parser("show", help="a run as a timeline tree")
    show.add_argument("run_id")
    show.add_argument("--events", action="store_true", help="list every event too")
    show.add_argument("--dir", default=argparse.SUPPRESS, help="project directory")
    show.set_defaults(handler=cmd_show)
    export = sub.add_parser("export", help="a run's events as JSON lines")
    export.add_argument("run_id")
    export.add_argument("--dir", default=argparse.SUPPRESS, help="project directory")
    export.set_defaults(handler=cmd_export)
    replay = sub.add_parser("replay", help="re-run a tool run offline against its recorded model answers and tool output")
    replay.add_argument("run_id")
    replay.add_argument("--dir", default=argparse.SUPPRESS, help="project directory")
    replay.add_argument("--quiet", action="store_true", help="no timeline on stderr")
    replay.set_defaults(handler=cmd_replay)
    prune = sub.add_parser("prune", help="delete old runs")
    prune.add_argument("--older-than", required=True, help="age such as 30d")
    prune.add_argument("--dir", default=argparse.SUPPRESS, help="project directory")
    prune.set_defaults(handler=cmd_prune)

    logs = commands.add_parser("logs", help="tool execution logs")
    logs.add_argument("--dir", default=".", help="project directory")
    logs.add_argument("--tool")
    logs.add_argument("--status", choices=("success", "error", "timeout"))
    logs.add_argument("--limit", type=_count, default=50, help="most log lines to list (default 50)")
    logs.add_argument("--json", action="store_true")
    logs.set_defaults(handler=cmd_logs)


def store_command(handler: Callable[[argparse.Namespace, Store], int]) -> Callable[[argparse.Namespace], int]:
    """Open the store, run the command, close the store; store errors become one clear message."""

    @functools.wraps(handler)
    def run(ns: argparse.Namespace) -> int:
        from ..store import StoreError

        store = open_store(ns.dir)
        try:
            return handler(ns, store)
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        finally:
            store.close()

    return run


def _find_run(store: Store, run_id: str) -> RunRecord:
    run = store.run(run_id)
    if run is None:
        raise UsageError(f"no run {run_id!r}; see `skillyard runs`")
    return run


def open_store(directory: str) -> Store:
    """The project's store (SKILLYARD_STORE_URL, else its engine.yaml, decides where), or a clear UsageError."""
    from ..link.linker import load_project
    from ..store import StoreError, store_url
    from ..store import open_store as open_url
    from ..store.urls import sqlite_path, store_exists

    try:
        project = load_project(directory)
    except ConfigError as exc:
        raise UsageError("the project has config errors:\n" + "\n".join(str(i) for i in exc.issues)) from None
    try:
        url = store_url(project.root, project.settings.store)
        if not store_exists(url):
            raise UsageError(f"no runs recorded yet ({sqlite_path(url)} does not exist); run a tool first")
        return open_url(url, redactor=project.redactor)
    except StoreError as exc:
        raise UsageError(str(exc)) from None


def _when(ms: int | None) -> str:
    return "-" if ms is None else datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


@store_command
def cmd_runs(ns: argparse.Namespace, store: Store) -> int:
    since = int(time.time() * 1000) - parse_age(ns.since, "--since") if ns.since else None
    batch = getattr(ns, "batch", None)
    if batch and store.batch(batch) is None:
        print(f"error: no batch {batch!r} in this run store; `skillyard batch` prints the id of each batch it runs",
              file=sys.stderr)
        return 2
    runs = store.runs(tool=ns.tool, status=ns.status, since_ms=since, limit=ns.limit, batch=batch)
    if ns.json:
        print(json.dumps([r.to_dict() for r in runs], ensure_ascii=False, indent=2))
        return 0
    if not runs:
        print("no runs match", file=sys.stderr)
        return 0
    for run in runs:
        duration = f"{run.duration_ms} ms" if run.duration_ms is not None else ""
        print(f"{run.id}  {_when(run.started_at)}  {run.kind:<5} {run.name:<28} {_status(run):<24} {duration}")
    return 0


def _status(run: RunRecord) -> str:
    """`ok`, `running`, or a failure with its code (`error: http_error`), so a list says why at a glance."""
    code = run.error.get("code") if isinstance(run.error, dict) else None
    return f"{run.status}: {code}" if code and code != run.status else run.status


@store_command
def cmd_show(ns: argparse.Namespace, store: Store) -> int:
    from ..providers.pricing import format_usd, usage_cost
    from .run_tree import short as _short
    from .run_tree import tree

    run = _find_run(store, ns.run_id)
    events = store.events(run.id)
    duration = f"{run.duration_ms} ms" if run.duration_ms is not None else "still running"
    print(f"{run.id}  {run.kind} {run.name}  {run.status}  {duration}  started {_when(run.started_at)}")
    print(f"  input: {_short(run.input)}")
    for line in tree(events):
        print(line)
    if run.error:
        print(f"  error: {_short(run.error, 300)}")
    else:
        print(f"  output: {_short(run.output, 300)}")
    if run.usage:
        cost = usage_cost(run.usage)
        print(f"  usage: {run.usage.get('input_tokens', 0)} input + {run.usage.get('output_tokens', 0)} output tokens"
              + (f" · {format_usd(cost)}" if cost is not None else ""))
    if ns.events:
        print("events:")
        for event in events:
            where = "/".join(x for x in (event.get("tool_call_id"), event.get("step_id")) if x)
            print(f"  {event['seq']:>4} {event['type']:<22} {where:<40} {_short(event['data'], 80)}")
    return 0


@store_command
def cmd_export(ns: argparse.Namespace, store: Store) -> int:
    run = _find_run(store, ns.run_id)
    for event in store.events(run.id):
        sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
    return 0


@store_command
def cmd_replay(ns: argparse.Namespace, store: Store) -> int:
    import asyncio

    from .._engine import Engine
    from ..batch.replay import REPLAY_MODEL, Recording, ReplayProvider, replay_project
    from .timeline import Timeline

    run = _find_run(store, ns.run_id)
    if run.kind != "tool":
        raise UsageError(f"run {run.id} is an {run.kind} run; replay works on tool runs (run-workflow, skillyard call)")
    engine = Engine.from_dir(ns.dir)
    if run.name not in engine.project.tools:
        raise UsageError(f"tool {run.name!r} of run {run.id} no longer exists in this project")
    provider = ReplayProvider(store.model_exchanges(run.id))
    replayer = Engine(replay_project(engine.project, provider, Recording.of(run, store.events(run.id))))
    timeline = None if ns.quiet else Timeline(sys.stderr, live=False)
    result = asyncio.run(replayer.call_tool(run.name, run.input, model=REPLAY_MODEL, on_event=timeline))
    for mismatch in provider.mismatches:
        print(f"step {mismatch.step_id!r}: the prompt changed since the recording; no model was called:", file=sys.stderr)
        print(mismatch.diff, file=sys.stderr)
    if provider.mismatches:
        return 1
    if not result.ok:
        print(f"replay failed: {result.error.code}: {result.error.message}", file=sys.stderr)  # type: ignore[union-attr]  # a failed result has its error
        return 1
    # The recording holds the output as stored: redacted, through JSON. Compare like with like.
    same = json.loads(json.dumps(store.redactor.redact(result.data), ensure_ascii=False, default=str)) == run.output
    print(json.dumps(result.data, ensure_ascii=False, indent=2))
    print(("✓ same output as the recording" if same else "! the output differs from the recording")
          + f" ({provider.position} recorded model answers used, no model called, no tool called)", file=sys.stderr)
    return 0 if same else 1


@store_command
def cmd_prune(ns: argparse.Namespace, store: Store) -> int:
    count = store.prune(parse_age(ns.older_than, "--older-than"))
    print(f"deleted {count} run(s) older than {ns.older_than}")
    return 0


@store_command
def cmd_logs(ns: argparse.Namespace, store: Store) -> int:
    logs = store.tool_logs(tool=ns.tool, status=ns.status, limit=ns.limit)
    if ns.json:
        print(json.dumps(logs, ensure_ascii=False, indent=2))
        return 0
    for log in logs:
        error = f"  {log['error_message']}" if log["error_message"] else ""
        duration = "-" if log["duration_ms"] is None else f"{log['duration_ms']} ms"
        print(f"{_when(log['created_at'])}  {log['tool']:<28} {log['status']:<8} {duration:>11}  {log['run_id']}{error}")
    return 0


__all__ = ["add_store_parsers", "open_store", "parse_age"]
