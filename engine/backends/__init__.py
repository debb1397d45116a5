"""Where tool calls execute: in the calling process (local, the default) or elsewhere.

A backend is an object the `Engine` asks for the project a call runs on
(`project_for(project)`, the `Backend` protocol in engine/_engine.py): the router's checks
stay in the calling process, and only the executors a backend replaces run elsewhere. The
front doors attach one (`attach_backend`). `temporal`: each call of a workflow tool is a
Temporal workflow execution run by `skillyard worker` processes (engine/backends/temporal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from .._engine import Engine
    from ..runtime.project import Project

BACKENDS = ("local", "temporal")


def chosen_backend(project: "Project", override: str | None = None) -> str:
    """`override` (a command's --backend) or the project's `execution.backend`."""
    name = override or project.settings.execution.backend
    if name not in BACKENDS:
        raise UsageError(f"--backend {name}: unknown backend; use one of {', '.join(BACKENDS)}")
    return name


def attach_backend(engine: "Engine", override: str | None = None) -> None:
    """Give `engine` the backend its project (or `override`) names; nothing for `local`.

    Raises UsageError when the backend cannot be used as configured (temporal without a
    postgresql:// store, or without the `temporal` extra installed)."""
    if chosen_backend(engine.project, override) == "temporal":
        from .temporal.client import TemporalBackend

        engine.backend = TemporalBackend.for_engine(engine)
