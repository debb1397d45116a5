"""`skillyard chat PROMPT`: the agent loop on the command line.

The answer streams to stdout; stderr shows the timeline (model calls, tool calls, workflow
steps, skill progress). Exit 0 when the model answered, 1 when a limit or an error stopped it
(the answer then says what was gathered) or a tool call failed, 2 for a usage mistake. The
limit flags default to `agent:` in config/engine.yaml.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..errors import AgentSetupError, ConfigError, ErrorCode, SessionError, UsageError
from ..logging import configure_logging
from ..safety.untrusted import replace_lone_surrogates
from .approval import terminal_approver
from .common import (
    SETTINGS_STILL_APPLY,
    add_backend_argument,
    close_recording,
    emit_event,
    open_engine,
    report_unrecorded,
)

if TYPE_CHECKING:  # building the parser (`--help`) loads none of what the agent loop needs
    from ..runtime.agent import AgentLimits
    from ..runtime.events import Event


def add_chat_parser(commands: Any, run_handler: Any) -> None:
    chat = commands.add_parser("chat", help="let a model call the tools to answer a prompt")
    chat.add_argument("prompt", help="the prompt, or - to read it from stdin")
    chat.add_argument("--dir", default=".", help="project directory")
    chat.add_argument("--model", help="model name from config/models.yaml (default: its default)")
    chat.add_argument("--tools", help="comma-separated subset of tools the model may call")
    chat.add_argument("--session", metavar="NAME", help="continue the conversation NAME (kept in the run store; "
                      "created on first use; see `skillyard sessions`)")
    _limit_flags_when_parsed(chat)
    chat.add_argument("--tool-choice", default="auto", help="auto, none, required, or a tool name")
    chat.add_argument("--output-schema", metavar="FILE", help="a JSON Schema (a .json file) the final answer must "
                      "match: the answer is JSON, repaired when it does not match, else the run stops with invalid_output")
    chat.add_argument("--yes", action="store_true", help="approve tools that ask for confirmation")
    chat.add_argument("--output", choices=("text", "events"), default="text", help="text: the answer; events: JSON lines")
    chat.add_argument("--quiet", action="store_true", help="no timeline on stderr")
    chat.add_argument("--show-reasoning", action="store_true",
                      help="print a reasoning model's thinking, dimmed, on stderr (when its reasoning.send allows)")
    chat.add_argument("--no-store", action="store_true", help="do not record this run in the run store" + SETTINGS_STILL_APPLY)
    add_backend_argument(chat)  # temporal: the loop runs as a workflow on `skillyard worker`s
    chat.set_defaults(handler=run_handler)


def _limit_flags_when_parsed(chat: argparse.ArgumentParser) -> None:
    """The limit flags, their help and defaults are the settings model's (pydantic): they are
    added when `chat` itself parses its arguments (or shows its help), so that `skillyard
    --help`, which builds every subcommand's parser, loads no pydantic."""
    parse = chat.parse_known_args
    added: list[bool] = []  # one True once the flags are on `chat`

    def with_limit_flags(*args: Any, **kwargs: Any) -> Any:
        if not added:
            _add_limit_flags(chat)
            added.append(True)
        return parse(*args, **kwargs)

    chat.parse_known_args = with_limit_flags  # type: ignore[method-assign]  # argparse calls it for a chosen subcommand


def _add_limit_flags(chat: argparse.ArgumentParser) -> None:
    from ..runtime.agent import AgentLimits

    limits = chat.add_argument_group("limits", "each defaults to the `agent:` section of config/engine.yaml")
    for name, info in AgentLimits.model_fields.items():  # the flags, their help and defaults: the settings model's
        duration = name.endswith("_timeout")
        default = "none" if info.default is None else f"{info.default:g}s" if duration else f"{info.default:g}"
        least = _least(name)
        limits.add_argument("--" + name.replace("_", "-"), type=_duration if duration else int,
                            metavar="DURATION" if duration else "N",
                            help=f"{(info.description or name).rstrip('.')} (default {default}"
                                 f"{f', at least {least}' if least > 1 else ''}){', e.g. 30s' if duration else ''}")


def _limit_flag_names() -> tuple[str, ...]:
    from ..runtime.agent import AgentLimits

    return tuple(AgentLimits.model_fields)


def _least(name: str) -> int:
    """The smallest value the limit `name` takes (its `ge` bound in the settings model)."""
    from ..runtime.agent import AgentLimits

    return next((int(bound.ge) for bound in AgentLimits.model_fields[name].metadata if getattr(bound, "ge", None) is not None), 1)


def _duration(text: str) -> float:
    from ..spec.common import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_chat(ns: argparse.Namespace) -> int:
    import asyncio

    from ..runtime.agent import AgentLimits
    from ..runtime.events import record_sink
    from .arguments import read_stdin
    from .mock_note import MockNote
    from .timeline import Timeline

    prompt = read_stdin("prompt") if ns.prompt == "-" else ns.prompt
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    if ns.session is not None and ns.no_store:
        raise UsageError("--session keeps the conversation in the run store; drop --no-store")
    try:
        engine = open_engine(ns)
    except ConfigError as exc:
        for issue in exc.issues:
            print(str(issue), file=sys.stderr)
        return 2
    settings = engine.project.settings.logging
    configure_logging(settings.format, settings.level, engine.project.redactor)
    tools = [t.strip() for t in ns.tools.split(",") if t.strip()] if ns.tools else None
    for name in _limit_flag_names():
        value, least = getattr(ns, name), _least(name)
        if isinstance(value, int) and value < least:
            engine.close()
            raise UsageError(f"--{name.replace('_', '-')} {value}: give {least} or more")
    try:
        limits = AgentLimits.from_settings(engine.project.settings.agent, **{name: getattr(ns, name) for name in _limit_flag_names()})
    except ValueError as exc:
        engine.close()
        raise UsageError(f"limits: {exc}") from None
    agent = _agent(ns, engine, tools, limits)
    if engine.backend is not None:
        from ..backends.temporal.agent_client import agent_for

        agent = agent_for(engine, agent)

    timeline = None if ns.quiet else Timeline(sys.stderr, live=sys.stderr.isatty())
    mock_note = None if ns.quiet else MockNote(engine.project)
    printed_text = False
    streamed: list[str] = []  # the text of the last model call, as printed

    def on_event(event: Event) -> None:
        nonlocal printed_text
        if ns.output == "events":
            emit_event(event)
        elif event.type == "model_reasoning_delta":
            if ns.show_reasoning:
                show_reasoning(event.data["text"])
            return
        elif event.type == "model_text_delta":
            sys.stdout.write(replace_lone_surrogates(event.data["text"]))
            sys.stdout.flush()
            streamed.append(event.data["text"])
            printed_text = True
        else:
            if event.type == "model_call_start":
                streamed.clear()
            if printed_text:  # a model call's text is whole once anything else happens: end its line
                sys.stdout.write("\n")  # before the timeline's next line (one terminal shows both)
                sys.stdout.flush()
                printed_text = False
        if timeline is not None:
            timeline(event)
        if mock_note is not None:
            mock_note(event)

    if ns.output == "events":
        record_sink(on_event)  # the run encodes each event's data once; emit_event writes around it

    if ns.session is not None and engine.store is None:
        engine.close()
        raise UsageError("--session keeps the conversation in the run store, which config/engine.yaml switches off "
                         "(store.enabled)")
    try:
        result = asyncio.run(agent.run(prompt, on_event=on_event, session=ns.session))
    except KeyboardInterrupt:
        engine.close()
        print("\ncancelled", file=sys.stderr)
        return 130
    except SessionError as exc:
        engine.close()
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    unrecorded = close_recording(engine)
    if ns.output == "text" and printed_text:
        sys.stdout.write("\n")
    if result.stop_reason != "answer":
        if ns.output == "text" and result.answer and result.answer != "".join(streamed):
            print(result.answer)  # a limit's summary of what was gathered (no model wrote it, so it did not stream)
        print(f"stopped: {result.stop_reason}" + (f": {result.error}" if result.error else ""), file=sys.stderr)
        return report_unrecorded(unrecorded, 1)
    failed = failed_calls(result.tool_results)
    for tool_result in failed:
        error = tool_result.error
        print(f"error: tool {tool_result.tool} failed: {error.code}: {error.message}", file=sys.stderr)
    return report_unrecorded(unrecorded, 1 if failed else 0)


def _agent(ns: argparse.Namespace, engine: Any, tools: list[str] | None, limits: AgentLimits) -> Any:
    """The Agent the flags ask for; a usage mistake (flag named) closes the engine."""
    approve = terminal_approver(approve_all=ns.yes, stdin_is_input=ns.prompt == "-")
    try:
        output_schema = read_output_schema(ns.output_schema) if ns.output_schema else None
        return engine.agent(ns.model, tools=tools, limits=limits, tool_choice=ns.tool_choice, approve=approve,
                            output_schema=output_schema)
    except AgentSetupError as exc:
        engine.close()
        flag = {"model": "--model", "tools": "--tools", "tool_choice": "--tool-choice", "output_schema": "--output-schema"}[exc.field]
        raise UsageError(f"{flag} {exc.value or ns.output_schema}: {exc.reason}") from None
    except UsageError:
        engine.close()
        raise


def read_output_schema(path: str) -> Any:
    """The JSON Schema in the file `--output-schema` names (engine.agent checks that it is one)."""
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except OSError as exc:
        raise UsageError(f"--output-schema {path}: cannot read it: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"--output-schema {path}: not JSON ({exc}); give a JSON Schema written as JSON") from None


def show_reasoning(text: str) -> None:
    """A piece of the model's reasoning on stderr: dimmed on a terminal, plain otherwise."""
    text = replace_lone_surrogates(text)
    sys.stderr.write(f"\x1b[2m{text}\x1b[0m" if sys.stderr.isatty() else text)
    sys.stderr.flush()


def failed_calls(results: list[Any]) -> list[Any]:
    """Tool calls that failed and were not put right by a later successful call of the same tool
    (a model that fixes its own invalid arguments has not failed; a call the user declined did not fail)."""
    failed: dict[str, Any] = {}
    for tool_result in results:
        if tool_result.ok or tool_result.error.code == ErrorCode.CONFIRMATION_DENIED:
            failed.pop(tool_result.tool, None)
        else:
            failed[tool_result.tool] = tool_result
    return list(failed.values())
