"""What the `skillyard` subcommands share with main.py: exit codes, opening the engine, the
--backend option, reporting config problems, writing JSON to stdout, closing the recording.

Exit codes: 0 success · 1 the tool ran and failed · 2 usage, config or argument errors ·
130 interrupted. A failed call's is its error code's (`ErrorCode.exit_code`: 2 for a call the
router refused as the caller's mistake, `unknown_tool`, `invalid_arguments`…).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..errors import EXIT_FAILED, EXIT_USAGE, ConfigError, ErrorCode, UsageError
from ..safety.untrusted import replace_lone_surrogates

if TYPE_CHECKING:  # the parsers of every subcommand import this module: the engine loads when a command runs
    from .._engine import Engine
    from ..runtime.events import Event
    from ..runtime.result import ToolError

EXIT_OK, EXIT_INTERRUPTED = 0, 130  # EXIT_FAILED (1) and EXIT_USAGE (2) come from errors.py: ErrorCode carries them


def exit_code(error: ToolError | None) -> int:
    """The exit code of a call that ended with `error` (None: it succeeded)."""
    return EXIT_OK if error is None else ErrorCode.exit_code_for(error.code)


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=("local", "temporal"),
                        help="where tool calls execute, for this command (default: execution.backend in "
                             "config/engine.yaml, else local); temporal needs a postgresql:// store and `skillyard worker`s")


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


def report_config(error: ConfigError, consequence: str = "nothing was run") -> int:
    """Every problem, then how many and what they stopped (`consequence`: the command's own words)."""
    for issue in error.issues:
        print(str(issue), file=sys.stderr)
    count = len(error.issues)
    print(f"{count} problem{'s' if count != 1 else ''} found; {consequence}.", file=sys.stderr)
    return EXIT_USAGE


def emit_json(value: Any, *, pretty: bool = False) -> None:
    """One JSON document on stdout; lone surrogates (no terminal can print them) become U+FFFD."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, indent=2 if pretty else None)
    except (ValueError, RecursionError) as exc:  # e.g. an integer of 5,000 digits in a tool's output
        text = json.dumps({"error": f"this value cannot be written as JSON: {exc}"})
    sys.stdout.write(replace_lone_surrogates(text) + "\n")
    sys.stdout.flush()


def emit_event(event: Event) -> None:
    """One event as a JSON line on stdout (`--output events`), built around the data its Run
    encoded once (`Event.json`); the standard library's writer when there is no fast encoding."""
    body = event.json()
    if body is None:
        emit_json(event.to_dict())
        return
    sys.stdout.write(body.decode() + "\n")
    sys.stdout.flush()


def close_recording(engine: Engine) -> str | None:
    """Close the engine; why its run was not (wholly) recorded in the run store, or None."""
    from ..store import StoreError

    try:
        if engine.store is not None:
            engine.store.flush()
    except StoreError as exc:
        return str(exc)
    finally:
        engine.close()
    return None


def warn_broken(broken: dict[str, Any]) -> None:
    """One line on stderr: other tools cannot run, and where to see why."""
    names = ", ".join(sorted(broken))
    print(f"warning: {len(broken)} tool{'s' if len(broken) != 1 else ''} cannot run because of problems in "
          f"{'their' if len(broken) != 1 else 'its'} configuration ({names}); `skillyard validate` lists them",
          file=sys.stderr)


def report_unrecorded(problem: str | None, code: int) -> int:
    """The exit code once the store has had its say: a run that was not recorded is a failure."""
    if problem is None:
        return code
    print(f"error: this run was not recorded as it happened: {problem}", file=sys.stderr)
    return code or EXIT_FAILED


# Said by every --no-store help: it stops recording, not the settings kept in the store.
SETTINGS_STILL_APPLY = " (the tool settings kept there by `skillyard tools` still apply, read-only)"


def open_engine(ns: argparse.Namespace) -> Engine:
    """The engine for a CLI call, recording runs unless --no-store or engine.yaml says not to.

    Either way the tool settings kept in the store (`skillyard tools …`) apply: without
    recording they are read, never written; a store that cannot be read then is a note, and
    the YAML alone runs. A tool broken by a problem in its own parts does not stop the others
    (`project.broken`).
    """
    from .._engine import Engine
    from ..link.linker import load_project
    from ..store import StoreError

    project = load_project(ns.dir, isolate_broken_tools=True)
    recording = project.settings.store.enabled and not ns.no_store
    try:
        engine = Engine.from_project(project, store=recording, stored_settings=True)
    except StoreError as exc:
        if recording:
            raise UsageError(str(exc)) from None
        print(f"note: the run store's tool settings were not read ({exc}); running with the YAML alone", file=sys.stderr)
        project.settings_source = None
        engine = Engine.from_project(project)
    try:
        from ..backends import attach_backend

        attach_backend(engine, getattr(ns, "backend", None))
    except UsageError:
        engine.close()
        raise
    return engine
