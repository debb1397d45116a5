"""What this worker process serves: the linked project and its revision.

Set once by the worker before it polls. The workflow reads it from inside Temporal's sandbox
(this module is passed through, not re-imported per execution), so each execution maps its
steps with the very project the worker linked at start, without any I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...runtime.project import Project
    from .config import TemporalConfig


@dataclass(frozen=True)
class Served:
    project: "Project"
    revision: str
    config: "TemporalConfig"


_served: Served | None = None


def serve(served: Served) -> None:
    global _served
    _served = served


def served() -> Served:
    if _served is None:
        raise RuntimeError("no project is served in this process (start it with `skillyard worker`)")
    return _served
