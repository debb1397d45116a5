"""What this worker process serves: the linked project and its revision.

Set once by the worker before it polls. The workflow reads it from inside Temporal's sandbox
(this module is passed through, not re-imported per execution), so each execution maps its
steps with the very project the worker linked at start, without any I/O. Every workflow and
activity first checks that its task was started for this revision (`check_revision`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .protocol import REVISION_MISMATCH, mismatch_message

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


def check_revision(asked: str) -> Served:
    """What this worker serves, if it is the revision the task was started for; otherwise a
    non-retryable failure naming both revisions."""
    from temporalio.exceptions import ApplicationError

    here = served()
    if asked != here.revision:
        raise ApplicationError(mismatch_message(asked, here.revision), type=REVISION_MISMATCH, non_retryable=True)
    return here
