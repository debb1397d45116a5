"""Engine: the embedding API around a linked Project."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Collection, Literal

from .context import RunContext
from .errors import UsageError
from .events import TERMINAL_TOOL_EVENTS, Event, Listener, QueuedListener, RunEvents, prepare_listeners, stream_run
from .ids import new_id
from .link import load_project
from .project import Project
from .redaction import enter_run, leave_run
from .result import ToolResult
from .router import Approver, route_call

if TYPE_CHECKING:
    from .agent import Agent, AgentLimits
    from .store import Store
    from .tool_admin import ToolAdmin


__all__ = ["Engine", "new_id"]


class Engine:
    """Runs tool calls against a project. Safe for many concurrent calls; reloadable."""

    def __init__(self, project: Project, *, store: "Store | None" = None):
        _learn_configured_keys(project)
        self._project = project
        self._listeners: list[Listener] = []
        self.store = store
        if store is not None:
            self._listeners.append(store.listener)

    @classmethod
    def from_dir(cls, path: str | Path = ".", *, store: bool | str | Path = False) -> "Engine":
        """Load and link a project directory (raises ConfigError with every problem).

        `store=True` records runs where `config/engine.yaml` says (default
        `.skillyard/runs.db`); a path records them there. Raises StoreError if it cannot open.
        """
        return cls.from_project(load_project(path), store=store)

    @classmethod
    def from_project(cls, project: Project, *, store: bool | str | Path = False) -> "Engine":
        """`store`: True for the project's store (SKILLYARD_STORE_URL, else store.url, else
        store.path), a URL (sqlite:///…, postgresql://…) or a SQLite file path."""
        run_store = None
        if store is not False:
            from .store import open_store, store_url

            where = store_url(project.root, project.settings.store) if store is True else str(store)
            run_store = open_store(where, redactor=project.redactor, redacted_events=True)
        engine = cls(project, store=run_store)
        if run_store is not None:
            if engine.admin.settings():
                engine.reload()  # the store's tool settings apply from the start
            run_store.on_tool_settings_changed(engine._settings_changed_elsewhere)
        return engine

    def _settings_changed_elsewhere(self) -> None:
        """Another process changed tool settings in the shared store: relink with them (on a
        store thread; the swap is atomic, calls in flight keep their project)."""
        from .errors import ConfigError
        from .logging import logger

        try:
            self.reload()
        except ConfigError as exc:
            logger.error("tool settings changed in the store, but the project does not link with them; kept the current one",
                         problems="; ".join(i.message for i in exc.issues[:5]))

    def close(self) -> None:
        """Write what the store still has queued and close it."""
        if self.store is not None:
            self.store.close()

    @property
    def project(self) -> Project:
        return self._project

    def reload(self) -> Project:
        """Link the directory again and swap the new project in atomically.

        Calls in flight finish on the project they started with. If the new files have
        errors, ConfigError is raised and the current project stays in place.
        """
        settings = self.admin.settings() if self.store is not None else None
        project = load_project(self._project.root, tool_settings=settings)
        _learn_configured_keys(project)
        self._project = project
        return project

    @property
    def admin(self) -> "ToolAdmin":
        from .tool_admin import ToolAdmin

        return ToolAdmin(self)

    def tool_settings(self) -> list[dict[str, Any]]:
        """Every tool: its source (yaml | store), type, enabled, config and stored overrides."""
        return self.admin.views()

    def update_tool(self, name: str, *, enabled: bool | None = None, config: dict[str, Any] | None = None) -> dict[str, Any]:
        """Override `enabled` or config keys of a tool, in the store; relinks. Raises ToolAdminError."""
        return self.admin.update(name, enabled=enabled, config=config)

    def create_tool(self, name: str, *, type: str, description: str, config: dict[str, Any], enabled: bool = True) -> dict[str, Any]:
        """Create a tool instance of a registered type in the store; relinks. Raises ToolAdminError."""
        return self.admin.create(name, type=type, description=description, config=config, enabled=enabled)

    def delete_tool(self, name: str) -> None:
        """Remove a store-created tool (YAML tools are read-only here). Raises ToolAdminError."""
        self.admin.delete(name)

    def subscribe(self, listener: Listener) -> Any:
        """Receive the events of every call; returns a function that unsubscribes."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

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
    ) -> ToolResult:
        """Route one call. Never raises for a bad call: the ToolResult carries the error."""
        project = self._project  # pinned: a reload mid-call does not affect this call
        events, queued = self.open_run(run_id or new_id("run"), on_event)
        token = enter_run(events.scrubber)  # log lines written during the call hide its secrets too
        try:
            result = await self.route(events, project, name, args, tool_call_id=tool_call_id, model=model,
                                      allowed_tools=allowed_tools, approve=approve)
            return result if result.error is None else events.scrub_error(result)
        finally:
            leave_run(token)
            for listener in queued:
                await listener.close()

    def open_run(self, run_id: str, on_event: Listener | None) -> tuple[RunEvents, list[QueuedListener]]:
        """The event stream of a new run: the engine's subscribers plus `on_event`."""
        listeners = self._listeners if on_event is None else [*self._listeners, on_event]
        inline, queued = prepare_listeners(listeners)  # new lists: a later subscribe() does not reach this run
        return RunEvents(run_id, inline, self._project.redactor.for_run()), queued

    @staticmethod
    def route(
        events: RunEvents,
        project: Project,
        name: str,
        args: str | dict[str, Any] | None,
        *,
        tool_call_id: str | None = None,
        model: str | None = None,
        allowed_tools: Collection[str] | None = None,
        approve: Approver | None = None,
        timeout: float | None = None,
    ) -> Awaitable[ToolResult]:
        """One call inside an existing run (the agent loop nests its tool calls this way).

        Returns the router's coroutine itself (await it), so a call has no extra frame.
        """
        run = RunContext(events.run_id, tool_call_id or new_id("call"), name, events, project, model)
        return route_call(run, args, allowed_tools=allowed_tools, approve=approve, timeout=timeout)

    def agent(
        self,
        model: str | None = None,
        *,
        tools: Collection[str] | None = None,
        limits: "AgentLimits | None" = None,
        tool_choice: str = "auto",
        system: str | None = None,
        approve: Approver | None = None,
    ) -> "Agent":
        """A tool-calling loop on `model` (default: the project's default model)."""
        from .agent import Agent, AgentLimits

        return Agent(self, model or self._project.default_model, tools=tools, limits=limits or AgentLimits(),
                     tool_choice=tool_choice, system=system, approve=approve)

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


_ENV_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SERVICE_KEYS_ENV = "SKILLYARD_API_KEYS"


def _learn_configured_keys(project: Project) -> None:
    """Tell the project's redactor every key the engine knows, once per load.

    Model API keys (`config/models.yaml`, `${ENV}` resolved where set) and the service's keys
    (`server.api_keys`, SKILLYARD_API_KEYS): a provider error that echoes one, a model that
    repeats one, a log line that holds one shows `[REDACTED]` instead.
    """
    keys: set[str] = set()
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
