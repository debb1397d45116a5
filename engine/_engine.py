"""Engine: the embedding API around a linked Project."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Collection, Literal, Protocol

from .errors import AgentSetupError, UsageError
from .link.linker import load_project
from .runs.events import TERMINAL_TOOL_EVENTS, Event, Listener, QueuedListener, SyncListener, stream_run, wants_records
from .runs.live import LiveRuns, RunEnd
from .runs.run import Approver, Run, RunKind, RunStatus, cancelled_error, end_status
from .runs.sinks import OpenerSink, RunSink
from .runtime.ids import new_id
from .runtime.project import Project
from .runtime.result import ToolResult
from .runtime.router import route_in_run
from .telemetry.traces import open_traces

if TYPE_CHECKING:
    from .runtime.agent import Agent, AgentLimits
    from .store import Store
    from .store.sessions import Sessions
    from .store.shared import SharedStore


__all__ = ["Backend", "Engine", "new_id"]


class Backend(Protocol):
    """Where an Engine's calls execute when not in this process (engine/backends: `temporal`).

    The Engine asks it for the project a call runs on: the router's checks stay in the calling
    process, and only the executors the backend replaces run elsewhere. A front door attaches
    one (`engine.backends.attach_backend`); None: every call runs here."""

    store: SharedStore
    """The store the backend's workers write each run to and the Engine follows it from."""

    def project_for(self, project: Project) -> Project:
        """The project a call runs on: `project` with some executors replaced."""
        ...


class Engine:
    """Runs tool calls against a project. Safe for many concurrent calls; reloadable."""

    def __init__(self, project: Project, *, store: "Store | None" = None, tracer_provider: Any = None):
        """`tracer_provider`: an OpenTelemetry TracerProvider for the spans of every call (yours:
        not shut down by `close`); None: the application's global one if set, else `telemetry:`/
        OTEL_* decide (docs/operations.md). Off: no listener, nothing imported."""
        _learn_configured_keys(project)
        self._project = project
        self.live = LiveRuns()  # opens, drives and ends every run of this engine
        self.runs: dict[str, Run] = self.live.live  # the live runs, by id: any front door may answer or cancel them
        self.store = store
        if store is not None:
            self.subscribe(store.listener, for_run=store.for_run)
        self.traces = open_traces(project.settings.telemetry, tracer_provider)  # None: traces off
        if self.traces is not None:
            self.traces.attach(self.subscribe, self.runs)
        self.backend: Backend | None = None  # where calls execute (engine/backends); None: in this process
        from .executors.mcp_client.registry import watch_tool_sources

        watch_tool_sources(project.root, self._settings_changed_elsewhere)  # an MCP server's tools changed: relink

    @classmethod
    def from_dir(cls, path: str | Path = ".", *, store: bool | str | Path = False,
                 stored_settings: bool = False, isolate_broken_tools: bool = False,
                 tracer_provider: Any = None) -> "Engine":
        """Load and link a project directory (raises ConfigError with every problem).

        `store=True` records runs where `config/engine.yaml` says (default
        `.skillyard/runs.db`); a path records them there. Raises StoreError if it cannot open.
        `stored_settings=True` without a store: the project's store's tool settings still apply
        (read, never written), as for the CLI's `--no-store`.
        `isolate_broken_tools=True`, as the CLI and the service load: a problem inside some
        tools' own parts leaves the others callable (`engine.project.broken` names the broken
        ones with their problems, `engine.project.problems` lists every one; a call to a broken
        tool answers `config_error`); only a project-wide problem raises ConfigError.
        `tracer_provider`: as for `Engine(…)`.
        """
        project = load_project(path, isolate_broken_tools=isolate_broken_tools)
        return cls.from_project(project, store=store, stored_settings=stored_settings, tracer_provider=tracer_provider)

    @classmethod
    def from_project(cls, project: Project, *, store: bool | str | Path = False,
                     stored_settings: bool = False, tracer_provider: Any = None) -> "Engine":
        """`store`: True for the project's store (SKILLYARD_STORE_URL, else store.url, else
        store.path), a URL (sqlite:///…, postgresql://…) or a SQLite file path.
        `tracer_provider`: as for `Engine(…)`.

        `stored_settings` (when `store` is False): the tool settings kept in the project's
        store apply, read-only, and are read again on every reload."""
        run_store = None
        if store is not False or stored_settings:  # else the store is not imported at all (its driver, sqlite3)
            from .store import open_store, store_url
        if store is not False:
            where = store_url(project.root, project.settings.store) if store is True else str(store)
            run_store = open_store(where, redactor=project.redactor, redacted_events=True)
        elif stored_settings:
            project.settings_source = store_url(project.root, project.settings.store)
        try:
            engine = cls(project, store=run_store, tracer_provider=tracer_provider)
        except BaseException:  # e.g. traces on without the SDK (TelemetryUnavailable)
            if run_store is not None:
                run_store.close()
            raise
        if run_store is not None:
            if run_store.tool_settings():
                engine.reload()  # the store's tool settings apply from the start
            run_store.on_tool_settings_changed(engine._settings_changed_elsewhere)
        elif project.settings_source is not None and _read_settings(project):
            engine.reload()
        return engine

    def _settings_changed_elsewhere(self) -> None:
        """Another process changed tool settings in the shared store: relink with them, on a
        thread of its own (the store's notice thread serves other listeners meanwhile); the
        swap is atomic, calls in flight keep their project."""
        import threading

        threading.Thread(target=self._reload_from_store, name="skillyard-reload", daemon=True).start()

    def _reload_from_store(self) -> None:
        from .errors import ConfigError
        from .logging import logger
        from .store import StoreError

        try:
            self.reload()
        except ConfigError as exc:
            logger.error("tool settings changed in the store, but the project does not link with them; kept the current one",
                         problems="; ".join(i.message for i in exc.issues[:5]))
        except StoreError as exc:  # the database went away meanwhile: the next change notice tries again
            logger.error("tool settings changed in the store, but they could not be read; kept the current ones",
                         error=str(exc))

    @property
    def sessions(self) -> "Sessions":
        """Named conversations (`list()`, `get(id)`, `delete(id)`; `agent(...).run(prompt, session=id)`
        continues one). They are kept in the run store."""
        if self.store is None:
            raise UsageError("sessions are kept in the run store: open the engine with one "
                             "(Engine.from_dir(path, store=True))")
        return self.store.sessions

    def close(self) -> None:
        """Write what the store still has queued and close it; send the spans still batched."""
        if self.store is not None:
            self.store.close()
        if self.traces is not None:
            self.traces.close()

    @property
    def project(self) -> Project:
        return self._project

    def reload(self) -> Project:
        """Link the directory again and swap the new project in atomically.

        Calls in flight finish on the project they started with. If the new files have
        errors, ConfigError is raised and the current project stays in place — except in a
        project loaded with `isolate_broken_tools`: there a tool broken by the new files keeps
        its last good version (and is listed in `project.broken`); only project-wide problems raise.
        """
        current = self._project
        settings = self.store.tool_settings() if self.store is not None else _read_settings(current)
        project = load_project(current.root, tool_settings=settings, isolate_broken_tools=current.isolates_broken_tools)
        project.settings_source = current.settings_source
        for name in project.broken:
            if name in current.tools:  # the last good version goes on serving
                project.tools[name] = current.tools[name]
        _learn_configured_keys(project)
        self._project = project
        return project

    def use_project(self, project: Project) -> None:
        """Swap in a project derived from the current one (same directory): e.g. one whose
        models answer from a recording (`skillyard batch --replay-from`). Calls in flight keep theirs."""
        if Path(project.root) != Path(self._project.root):
            raise ValueError("use_project takes a project of the same directory; load another with Engine.from_dir")
        _learn_configured_keys(project)
        self._project = project

    def subscribe(self, listener: Listener, *, for_run: Callable[[Run], SyncListener] | None = None) -> Any:
        """Receive the events of every call; returns a function that unsubscribes.

        `for_run(run)`, if given, is called as each run opens and returns the listener for that
        run's events (a list's `append` costs no Python call per event): the pair is a RunSink
        (`add_sink`), and `listener` only says whether it wants encoded records."""
        if for_run is not None:
            return self.live.add_sink(OpenerSink(listener, for_run, wants_records((listener,))))
        return self.live.subscribe(listener)

    def add_sink(self, sink: RunSink) -> Any:
        """`sink` takes every later run whole (`sink.open(run)` as it opens: the run store, the
        service's hub); returns a function that removes it."""
        return self.live.add_sink(sink)

    def tool_schemas(
        self, format: Literal["openai", "anthropic", "mcp"] = "openai", allowed_tools: Collection[str] | None = None
    ) -> list[dict[str, Any]]:
        """The enabled, allowed tools in the shape a model API expects."""
        return self._project.tool_schemas(format, allowed_tools)

    async def call_tool(
        self,
        name: str,
        args: str | dict[str, Any] | None = None,
        *,
        allowed_tools: Collection[str] | None = None,
        on_event: Listener | None = None,
        model: str | None = None,
        tool_call_id: str | None = None,
        run_id: str | None = None,
        approve: Approver | None = None,
        principal: str | None = None,
        announce_start: bool = False,
    ) -> ToolResult:
        """Route one call. Never raises for a bad call: the ToolResult carries the error.

        `announce_start=True` (a front door that streams the events): the call's first event,
        `tool_call_start`, can reach the stream before the tool runs (the router yields once).

        `approve` is asked when a `confirm: true` tool is called (None: such a call is
        denied); another front door may answer first through `engine.runs[run_id].answer`.
        """
        project = self._project  # pinned: a reload mid-call does not affect this call
        if self.backend is not None:  # the router's checks stay here; the backend's executors run elsewhere
            project = self.backend.project_for(project)
        live = self.live
        run, queued = live.open(self._project, run_id or new_id("run"), on_event, "tool", name, principal, approve)
        result = await live.drive(run, queued, route_in_run(run, project, name, args, tool_call_id=tool_call_id, model=model,
                                                            allowed_tools=allowed_tools, announce_start=announce_start),
                                  _tool_run_end)
        return result if result.error is None else run.scrub_error(result)

    def open_run(
        self,
        run_id: str,
        on_event: Listener | None = None,
        kind: RunKind = "tool",
        name: str = "",
        principal: str | None = None,
        approver: Approver | None = None,
        approval_timeout: float = 600.0,
    ) -> tuple[Run, list[QueuedListener]]:
        """A new live Run of this engine's project delivering to its subscribers and sinks plus
        `on_event`, and the queued (async) listeners `self.live.drive` drains as it ends
        (engine/runs/live.py: the one sequence of a run's life)."""
        return self.live.open(self._project, run_id, on_event, kind, name, principal, approver, approval_timeout)

    def end_run(self, run: Run, status: RunStatus, result: Any = None, error: dict[str, Any] | None = None) -> None:
        """Record the end of a run driven elsewhere and forget it as live."""
        self.live.end(run, status, result, error)

    def agent(
        self,
        model: str | None = None,
        *,
        tools: Collection[str] | None = None,
        limits: "AgentLimits | None" = None,
        tool_choice: str = "auto",
        system: str | None = None,
        approve: Approver | None = None,
        output_schema: dict[str, Any] | None = None,
    ) -> "Agent":
        """A tool-calling loop on `model` (default: the project's default model).

        `output_schema`: the final answer must be JSON matching it (`AgentResult.data` holds it).
        Raises AgentSetupError (a UsageError with `code` and `field`) for a model, tool or
        tool_choice the project does not have, or an output_schema that is no JSON Schema:
        every front door gets the same check.
        """
        from .lang.schema_budget import untrusted_schema_problems
        from .runtime.agent import Agent, AgentLimits

        project = self._project
        model = model or project.default_model
        if model not in project.models:
            raise AgentSetupError("unknown_model", "model", model, f"unknown model; known: {', '.join(sorted(project.models))}")
        unknown = sorted(set(tools or ()) - set(project.tools))
        if unknown:
            raise AgentSetupError("unknown_tool", "tools", ",".join(unknown), f"unknown tool(s) {', '.join(unknown)}; "
                                  f"known: {', '.join(project.tools)}", available_tools=sorted(project.tools))
        if tool_choice not in ("auto", "none", "required") and tool_choice not in project.tools:
            raise AgentSetupError("invalid_request", "tool_choice", tool_choice, "use auto, none, required or a tool name")
        if output_schema is not None:
            problems = (untrusted_schema_problems(output_schema, project.settings.limits.max_schema_bytes)
                        if isinstance(output_schema, dict) else ["not a valid JSON Schema: it must be an object"])
            if problems:
                raise AgentSetupError("invalid_request", "output_schema", "", problems[0])
        return Agent(self, model, tools=tools, limits=limits or AgentLimits.from_settings(project.settings.agent),
                     tool_choice=tool_choice, system=system,
                     approve=approve, output_schema=output_schema)

    async def stream_tool(self, name: str, args: str | dict[str, Any] | None = None, **options: Any) -> AsyncIterator[Event]:
        """Yield the call's events as they happen; the last one carries `.result`."""
        async for event in stream_run(
            lambda listener: self.call_tool(name, args, on_event=listener, **options),
            lambda e: e.type in TERMINAL_TOOL_EVENTS and e.result is not None,
        ):
            yield event

    def call_tool_sync(self, name: str, args: str | dict[str, Any] | None = None, **options: Any) -> ToolResult:
        """`call_tool` for code without an event loop (scripts, notebooks without one)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.call_tool(name, args, **options))
        raise UsageError("call_tool_sync() cannot run inside an event loop; use `await engine.call_tool(...)`")


def _tool_run_end(run: Run, result: ToolResult | None) -> RunEnd:
    """(status, result, error) of a tool run from its ToolResult (None: it never returned);
    an error's message without the run's known secrets (it is bound for HTTP bodies)."""
    if result is None:
        return "cancelled", None, cancelled_error()
    if result.error is None:
        return "ok", result, None  # the ToolResult itself: to_dict() only where a sink needs it
    result = run.scrub_error(result)
    return end_status(result.error.code), result, result.error.to_dict()  # type: ignore[union-attr]  # checked above


_ENV_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SERVICE_KEYS_ENV = "SKILLYARD_API_KEYS"


def _read_settings(project: Project) -> "dict[str, Any] | None":
    """The tool settings of the store a non-recording project reads them from (StoreError if
    it cannot be read: a reload keeps the current project then)."""
    if project.settings_source is None:
        return None
    from .store.open import read_tool_settings

    return read_tool_settings(project.settings_source, redactor=project.redactor)


def _learn_configured_keys(project: Project) -> None:
    """Tell the project's redactor every key the engine knows, once per load.

    Model API keys (`config/models.yaml`, `${ENV}` resolved where set) and the service's keys
    (`server.api_keys`, SKILLYARD_API_KEYS): a provider error that echoes one, a model that
    repeats one, a log line that holds one shows `[REDACTED]` instead.
    """
    keys: set[str] = set(project.reference_secrets)  # every value a `${…}` reference read at load
    for spec in project.models.values():
        if spec.api_key:
            keys.add(_ENV_VAR.sub(lambda m: os.environ.get(m.group(1), ""), spec.api_key))
    for entry in project.settings.server.api_keys:
        if entry.key:
            keys.add(_ENV_VAR.sub(lambda m: os.environ.get(m.group(1), ""), entry.key))
    for item in os.environ.get(_SERVICE_KEYS_ENV, "").split(","):
        parts = item.strip().split(":")  # role:key or name:role:key
        keys.update(":".join(parts[i:]) for i in (1, 2) if len(parts) > i)
    project.redactor.set_configured(keys)
