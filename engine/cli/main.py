"""`run-workflow TOOL …` and `skillyard <command> …`: the `call` and `validate` commands, and
the parser that gathers every subcommand (each in a module of its own; what they share is common.py).

Exit codes: 0 success · 1 the tool ran and failed · 2 usage, config or argument errors.
User mistakes print one clear message (or every config issue) and never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import ConfigError, UsageError
from ..safety.untrusted import replace_lone_surrogates
from .approval import terminal_approver
from .arguments import build_arguments
from .common import (
    EXIT_OK,
    SETTINGS_STILL_APPLY,
    add_backend_argument,
    close_recording,
    emit_event,
    emit_json,
    exit_code,
    fail,
    open_engine,
    report_config,
    report_unrecorded,
    warn_broken,
)
from .error_view import add_error_arguments, show_error

if TYPE_CHECKING:  # building the parser (`--help`) loads none of what a command runs
    from ..runtime.events import Event
    from ..runtime.result import ToolResult


def _add_call_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tool", help="name of the tool to call (see `skillyard tools`)")
    parser.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                        help="an argument; VALUE is parsed as JSON when it parses, else a string; "
                             "KEY=@FILE reads a file, KEY=- reads stdin (repeatable)")
    parser.add_argument("--args-json", metavar="JSON|@FILE|-", help="all arguments as one JSON object")
    parser.add_argument("--dir", default=".", help="project directory (default: current directory)")
    parser.add_argument("--model", help="use this model for every prompt skill in this call")
    parser.add_argument("--output", choices=("data", "text", "result", "events"), default="data",
                        help="data: the output JSON (default); text: a string output as itself (Markdown stays "
                             "Markdown), anything else as indented JSON, for shell pipelines; result: the whole "
                             "ToolResult; events: one JSON event per line, ending with the result")
    parser.add_argument("--quiet", action="store_true", help="no timeline on stderr")
    parser.add_argument("--yes", action="store_true", help="approve tools that ask for confirmation")
    parser.add_argument("--no-store", action="store_true", help="do not record this run in the run store" + SETTINGS_STILL_APPLY)
    add_backend_argument(parser)
    add_error_arguments(parser)  # --verbose, --debug (error_view.py)


def _emit_text(text: str) -> None:
    """A string output as itself (`--output text`), ending with one newline."""
    sys.stdout.write(replace_lone_surrogates(text) + ("" if text.endswith("\n") else "\n"))
    sys.stdout.flush()


def run_call(ns: argparse.Namespace) -> int:
    import asyncio

    from ..logging import configure_logging
    from ..runtime.events import record_sink
    from .mock_note import MockNote
    from .timeline import Timeline

    try:
        arguments = build_arguments(ns.args_json, ns.arg)
        engine = open_engine(ns)
    except UsageError as exc:
        return fail(str(exc))
    except ConfigError as exc:
        return report_config(exc)
    settings = engine.project.settings.logging
    configure_logging(settings.format, settings.level, engine.project.redactor)
    if ns.tool in engine.project.broken:
        engine.close()
        return report_config(ConfigError(engine.project.broken[ns.tool]))
    if ns.model and ns.model not in engine.project.models:
        return fail(f"--model {ns.model}: unknown model; known: {', '.join(sorted(engine.project.models))}")
    if engine.project.broken and not ns.quiet:
        warn_broken(engine.project.broken)

    listeners: list[Callable[[Event], None]] = []
    if not ns.quiet:
        listeners.append(Timeline(sys.stderr, live=sys.stderr.isatty()))
        listeners.append(MockNote(engine.project))
    if ns.output == "events":
        listeners.append(emit_event)

    def on_event(event: Event) -> None:
        for listener in listeners:
            listener(event)

    if ns.output == "events":
        record_sink(on_event)  # the run encodes each event's data once; emit_event writes around it

    stdin_used = ns.args_json == "-" or any(pair.endswith("=-") for pair in ns.arg)
    approve = terminal_approver(approve_all=ns.yes, stdin_is_input=stdin_used)

    try:
        result: ToolResult = asyncio.run(
            engine.call_tool(ns.tool, arguments, model=ns.model, on_event=on_event, approve=approve)
        )
    except KeyboardInterrupt:
        engine.close()
        print("cancelled", file=sys.stderr)
        return 130
    except BaseException:
        engine.close()
        raise
    unrecorded = close_recording(engine)
    return report_unrecorded(unrecorded, _show_result(ns, result))


def _show_result(ns: argparse.Namespace, result: ToolResult) -> int:
    """Print the result as --output asks; the exit code it calls for."""
    from .timeline import error_hints

    result = result.as_shown()  # stdout is a sink: the result as the run's events show it, like every door
    if ns.output in ("result", "events"):
        emit_json(result.to_dict(), pretty=ns.output == "result")
    elif result.ok and ns.output == "text" and isinstance(result.data, str):
        _emit_text(result.data)
    elif result.ok:
        emit_json(result.data, pretty=True)
    if result.error is None:
        return EXIT_OK
    if ns.quiet:
        print(f"error: {result.error.code}: {result.error.message}", file=sys.stderr)
        for hint in error_hints(result.error.to_dict(), result.tool):
            print(f"  {hint}", file=sys.stderr)
    show_error(ns, result.error, sys.stderr)  # the user's frame or traceback (error_view.py)
    return exit_code(result.error)


def cmd_validate(ns: argparse.Namespace) -> int:
    from ..link.linker import check_project, load_project

    try:
        project, skipped = check_project(ns.dir, import_python=not ns.no_import)
        stored = _stored_tool_settings(project)
        if stored and not ns.no_import:  # what every command runs: the YAML with the store's overrides
            project = load_project(ns.dir, tool_settings=stored)
    except ConfigError as exc:
        return report_config(exc, "the project does not load")
    warnings = getattr(project, "warnings", [])
    for warning in warnings:  # it loads and runs, but is probably not what was meant
        print(f"warning: {warning}", file=sys.stderr)
    if not skipped:
        print(f"ok: {project.summary()}" + (f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})" if warnings else ""))
        _say_stored(stored, ns.no_import)
        return EXIT_OK
    print(f"ok, except what was not imported (--no-import): {project.summary()}")
    _say_stored(stored, ns.no_import)
    for line in skipped:
        print(f"  not imported: {line}")
    print(f"{len(skipped)} python reference{'s' if len(skipped) != 1 else ''} not checked: "
          "run without --no-import to import them (that runs the modules' code)")
    return EXIT_OK


def _say_stored(stored: dict[str, Any], no_import: bool) -> None:
    if stored:
        print(f"  {'not applied (--no-import)' if no_import else 'with'} the run store's settings of "
              f"{len(stored)} tool{'s' if len(stored) != 1 else ''} ({', '.join(sorted(stored))}); see `skillyard tools`")


def _stored_tool_settings(project: Any) -> dict[str, Any]:
    """The run store's tool settings (`skillyard tools enable|disable|set|add`), {} without a store.

    A store that cannot be read is said on stderr and validation goes on with the YAML alone.
    """
    from ..store import StoreError, store_url
    from ..store.open import read_tool_settings

    try:
        return read_tool_settings(store_url(project.root, project.settings.store), redactor=project.redactor)
    except StoreError as exc:
        print(f"note: the run store's tool settings were not read ({exc}); checked the YAML alone", file=sys.stderr)
        return {}


def _call_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Call one tool of a skillyard project and print its output.")
    _add_call_arguments(parser)
    return parser


def run_workflow_main(argv: Sequence[str] | None = None) -> int:
    ns = _call_parser("run-workflow").parse_args(argv)
    return _guarded(run_call, ns)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skillyard", description="Declarative tools, skills and workflows for LLM tool calling.")
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    call = commands.add_parser("call", help="call a tool (same as run-workflow)")
    _add_call_arguments(call)
    call.set_defaults(handler=run_call)
    from .tools_cmd import add_tools_parser

    add_tools_parser(commands, report_config)
    validate = commands.add_parser(
        "validate", help="check a project and report every problem",
        description="Check a project and report every problem. This imports the project's Python modules "
                    "(python skills and tools), which runs their code; --no-import checks everything else.",
    )
    validate.add_argument("dir", nargs="?", default=".", help="project directory (default: current directory)")
    validate.add_argument("--no-import", action="store_true",
                          help="do not import python skills and tools (their module code does not run); "
                               "each is listed as not imported, and a python tool's config is not checked")
    validate.set_defaults(handler=cmd_validate)
    from .chat import add_chat_parser, run_chat  # the agent loop imports more; load it only here

    add_chat_parser(commands, run_chat)
    from .runs import add_store_parsers

    add_store_parsers(commands)
    from .sessions import add_sessions_parser

    add_sessions_parser(commands)
    from .serve import add_serve_parsers

    add_serve_parsers(commands)
    from .mcp_cmd import add_mcp_list_parser

    add_mcp_list_parser(commands.choices["mcp"], report_config)  # `skillyard mcp list`; `skillyard mcp` serves
    from .worker import add_worker_parser

    add_worker_parser(commands)
    from .batch import add_batch_parser

    add_batch_parser(commands)
    ns = parser.parse_args(argv)
    return _guarded(ns.handler, ns)


class _Version(argparse.Action):
    """`--version`, read from the installed package's metadata only when asked (not by `--help`)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        sys.stdout.write(f"skillyard {_version()}\n")
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("skillyard")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "(not installed)"


def _guarded(handler: Callable[[argparse.Namespace], int], ns: argparse.Namespace) -> int:
    try:
        return handler(ns)
    except BrokenPipeError:
        return EXIT_OK
    except UsageError as exc:
        return fail(str(exc))
    except Exception as exc:
        from ..store import StoreError  # loaded already when a command raised one

        if isinstance(exc, StoreError):
            return fail(str(exc))
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
